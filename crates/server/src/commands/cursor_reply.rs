//! The cursor reply (`{cursor: {firstBatch|nextBatch: [...], postBatchResumeToken?, id,
//! ns}}`) written as bytes in one buffer sized for it: the batch's documents are copied
//! once, no buffer grows while it is written, and the room left at the end takes the fields
//! dispatch appends after the handler (`ok`, a replica set's `$clusterTime` and
//! `operationTime`) without another allocation. Appending documents one by one to a growing
//! `RawDocumentBuf` reallocated and copied the reply about log2(size) times (3% of a point
//! query's server CPU).

use bson::RawDocumentBuf;
use shale_db::Batch;

/// Room kept after the reply for the fields appended to it later (`ok`: 12 bytes;
/// `$clusterTime` with its signature and `operationTime`: about 100).
const APPEND_ROOM: usize = 160;

/// The reply of a command that returns a cursor's batch.
#[allow(
    clippy::expect_used,
    reason = "the bytes were written as one BSON document just above, its length asserted"
)]
pub fn cursor_reply_raw(ns: &str, batch: Batch, batch_field: &str) -> RawDocumentBuf {
    let array = array_len(&batch);
    let token = batch.resume_token.as_ref().map(|t| t.as_bytes());
    let cursor = 4
        + element_len(batch_field, array)
        + token.map_or(0, |t| element_len("postBatchResumeToken", t.len()))
        + element_len("id", 8)
        + element_len("ns", 4 + ns.len() + 1)
        + 1;
    let reply = 4 + element_len("cursor", cursor) + 1;
    let mut out = Vec::with_capacity(reply + APPEND_ROOM);
    put_len(&mut out, reply);
    head(&mut out, 0x03, "cursor");
    put_len(&mut out, cursor);
    head(&mut out, 0x04, batch_field);
    put_len(&mut out, array);
    for (i, d) in batch.docs.iter().enumerate() {
        out.push(0x03);
        put_decimal(&mut out, i);
        out.push(0);
        out.extend_from_slice(d.as_bytes());
    }
    out.push(0);
    if let Some(t) = token {
        head(&mut out, 0x03, "postBatchResumeToken");
        out.extend_from_slice(t);
    }
    head(&mut out, 0x12, "id");
    out.extend_from_slice(&batch.cursor_id.to_le_bytes());
    head(&mut out, 0x02, "ns");
    put_len(&mut out, ns.len() + 1);
    out.extend_from_slice(ns.as_bytes());
    out.push(0);
    out.push(0);
    out.push(0);
    assert_eq!(out.len(), reply, "cursor reply sized as written");
    RawDocumentBuf::from_bytes(out).expect("a cursor reply written as BSON")
}

/// Bytes of the batch's array: its length, one element per document keyed "0", "1", ...,
/// and the terminator.
fn array_len(batch: &Batch) -> usize {
    let elements: usize = batch
        .docs
        .iter()
        .enumerate()
        .map(|(i, d)| 1 + decimal_len(i) + 1 + d.as_bytes().len())
        .sum();
    4 + elements + 1
}

/// Bytes of an element: type byte, key, its terminator, value.
fn element_len(key: &str, value: usize) -> usize {
    1 + key.len() + 1 + value
}

fn decimal_len(mut i: usize) -> usize {
    let mut n = 1;
    while i >= 10 {
        i /= 10;
        n += 1;
    }
    n
}

/// Appends `i` in decimal (an array element's key), with no `String` made per document.
fn put_decimal(out: &mut Vec<u8>, i: usize) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut rest = i;
    loop {
        at -= 1;
        digits[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

fn head(out: &mut Vec<u8>, kind: u8, key: &str) {
    out.push(kind);
    out.extend_from_slice(key.as_bytes());
    out.push(0);
}

fn put_len(out: &mut Vec<u8>, n: usize) {
    #[allow(
        clippy::expect_used,
        reason = "replies are within BSON's 16 MiB size limit"
    )]
    let n = i32::try_from(n).expect("a reply within BSON's size limit");
    out.extend_from_slice(&n.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{rawdoc, RawArrayBuf, RawBson};

    /// The reply as the bson crate builds it, element by element.
    fn model(ns: &str, batch: &Batch, field: &str) -> RawDocumentBuf {
        let mut docs = RawArrayBuf::new();
        for d in &batch.docs {
            docs.push(RawBson::Document(d.clone()));
        }
        let mut cursor = RawDocumentBuf::new();
        cursor.append(field, RawBson::Array(docs));
        if let Some(t) = &batch.resume_token {
            cursor.append("postBatchResumeToken", RawBson::Document(t.clone()));
        }
        cursor.append("id", batch.cursor_id);
        cursor.append("ns", ns);
        let mut reply = RawDocumentBuf::new();
        reply.append("cursor", RawBson::Document(cursor));
        reply
    }

    #[test]
    fn the_reply_is_the_bytes_the_bson_crate_writes() {
        for n in [0usize, 1, 9, 10, 11, 105, 1001] {
            for token in [None, Some(rawdoc! {"_data": "82abc"})] {
                let batch = Batch {
                    docs: (0..n)
                        .map(|i| rawdoc! {"_id": i as i64, "s": "x".repeat(i % 7)})
                        .collect(),
                    cursor_id: if n % 2 == 0 { 0 } else { 1 << 40 },
                    resume_token: token,
                };
                let want = model("db.coll.é", &batch, "nextBatch");
                let bytes = cursor_reply_raw("db.coll.é", batch, "nextBatch").into_bytes();
                assert_eq!(bytes, want.as_bytes(), "{n} documents");
                assert!(bytes.capacity() - bytes.len() >= APPEND_ROOM);
                let mut got = RawDocumentBuf::from_bytes(bytes).expect("bson");
                got.append("ok", 1.0);
                assert_eq!(got.get_f64("ok").expect("ok"), 1.0);
            }
        }
    }
}
