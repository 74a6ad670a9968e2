//! `$changeStreamSplitLargeEvent` (mongod 7.0, 6.0.9): the last stage of a change stream's
//! pipeline, which splits an event past 16 MiB into fragments, each under it, as mongod's
//! `change_stream_split_event::splitChangeEvent` does: the top-level fields but `_id` sorted
//! by (size, name), each fragment filled greedily (at least one field), each with its own
//! `_id` (the event's token with the fragment's number from 0, `token.rs`) and
//! `splitEvent: {fragment: <from 1>, of: <count>}`. Sub-documents are never split: a field
//! that alone does not fit fails with mongod's 7182500. Without the stage, an event past
//! 16 MiB fails with `BSONObjectTooLarge` (10334), as on mongod. Pure.

use super::token::ResumeToken;
use crate::DbResult;
use bson::{Document, RawBson, RawDocument, RawDocumentBuf};
use shale_doc::{ErrorCode, MongoError};

/// The stage's name.
pub const STAGE: &str = "$changeStreamSplitLargeEvent";

/// The largest event (and fragment) a change stream returns: mongod's `BSONObjMaxUserSize`.
pub const MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

/// The stages after `$changeStream` without a final `$changeStreamSplitLargeEvent`, and
/// whether it was there; mongod's errors for a malformed or misplaced one.
pub fn take_split_stage(later: &[Document]) -> DbResult<(&[Document], bool)> {
    let at = later.iter().position(|s| s.contains_key(STAGE));
    let Some(at) = at else {
        return Ok((later, false));
    };
    if at + 1 != later.len() {
        return Err(MongoError::new(
            ErrorCode::Location7182802,
            format!("{STAGE} must be the last stage in the pipeline"),
        ));
    }
    match later[at].get(STAGE) {
        Some(bson::Bson::Document(d)) if d.is_empty() && later[at].len() == 1 => {
            Ok((&later[..at], true))
        }
        _ => Err(MongoError::new(
            ErrorCode::Location7182800,
            format!("{STAGE} spec should be an empty object"),
        )),
    }
}

/// mongod's refusal of an event past the limit when it is not split.
pub fn too_large(event: &RawDocument) -> MongoError {
    let size = event.as_bytes().len();
    MongoError::new(
        ErrorCode::BSONObjectTooLarge,
        format!(
            "BSONObj size: {size} (0x{size:X}) is invalid. Size must be between 0 and \
             {MAX_EVENT_BYTES}(16MB) First element: _id: ..."
        ),
    )
}

/// The fragments of `event` (whose token is `token`), each at most `max` bytes.
pub fn split(
    event: &RawDocument,
    token: ResumeToken,
    max: usize,
) -> DbResult<Vec<(ResumeToken, RawDocumentBuf)>> {
    let mut fields: Vec<(usize, &str, RawBson)> = Vec::new();
    for field in event {
        let (k, v) = field.map_err(|e| MongoError::new(ErrorCode::InternalError, e.to_string()))?;
        if k == "_id" {
            continue;
        }
        let v = v.to_raw_bson();
        // type byte + name + NUL + the value's bytes
        fields.push((1 + k.len() + 1 + value_size(&v), k, v));
    }
    if fields.is_empty() {
        return Err(MongoError::new(
            ErrorCode::Location7182502,
            "Cannot split an empty event or an event containing solely '_id' field",
        ));
    }
    fields.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
    let mut parts: Vec<(ResumeToken, usize, Vec<usize>)> = Vec::new();
    let mut next = 0;
    while next < fields.len() {
        let t = token.fragment(parts.len() as u32);
        let mut size = fragment_doc(t, 1, 1, &[], &fields).as_bytes().len();
        let mut taken = Vec::new();
        loop {
            size += fields[next].0;
            taken.push(next);
            next += 1;
            if next == fields.len() || size + fields[next].0 > max {
                break;
            }
        }
        if size > max {
            return Err(MongoError::new(
                ErrorCode::Location7182500,
                format!(
                    "Splitting change event failed: fragment size {size} is greater than \
                     maximum allowed fragment size {max}"
                ),
            ));
        }
        parts.push((t, size, taken));
    }
    let of = parts.len();
    Ok(parts
        .into_iter()
        .enumerate()
        .map(|(i, (t, _, taken))| (t, fragment_doc(t, i + 1, of, &taken, &fields)))
        .collect())
}

fn fragment_doc(
    token: ResumeToken,
    n: usize,
    of: usize,
    taken: &[usize],
    fields: &[(usize, &str, RawBson)],
) -> RawDocumentBuf {
    let mut d = RawDocumentBuf::new();
    d.append("_id", token.document());
    let mut split = RawDocumentBuf::new();
    split.append("fragment", n as i32);
    split.append("of", of as i32);
    d.append("splitEvent", split);
    for &i in taken {
        d.append(fields[i].1, fields[i].2.clone());
    }
    d
}

/// Bytes a value takes in a document.
fn value_size(v: &RawBson) -> usize {
    let mut d = RawDocumentBuf::new();
    d.append("", v.clone());
    // A document with one element named "": 4 (length) + 1 (type) + 1 (NUL) + value + 1.
    d.as_bytes().len() - 7
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, Timestamp};

    fn token() -> ResumeToken {
        ResumeToken::event(
            Timestamp {
                time: 7,
                increment: 1,
            },
            0,
        )
    }

    #[test]
    fn fields_go_smallest_first_and_every_fragment_fits() {
        let event = RawDocumentBuf::from_document(&doc! {
            "_id": {"_data": "x"},
            "operationType": "update",
            "big1": "a".repeat(600),
            "big2": "b".repeat(500),
            "small": 1,
        })
        .expect("raw");
        let parts = split(&event, token(), 800).expect("splits");
        assert_eq!(parts.len(), 2);
        for (i, (t, d)) in parts.iter().enumerate() {
            assert!(d.as_bytes().len() <= 800, "fragment {i}");
            assert_eq!(t.fragment_number(), Some(i as u32));
            let s = d.get_document("splitEvent").expect("splitEvent");
            assert_eq!(
                (s.get_i32("fragment"), s.get_i32("of")),
                (Ok(i as i32 + 1), Ok(2))
            );
        }
        let first: Vec<&str> = parts[0].1.iter().map(|f| f.expect("f").0).collect();
        assert_eq!(
            first,
            ["_id", "splitEvent", "small", "operationType", "big2"]
        );
        let second: Vec<&str> = parts[1].1.iter().map(|f| f.expect("f").0).collect();
        assert_eq!(second, ["_id", "splitEvent", "big1"]);
    }

    #[test]
    fn a_field_too_large_alone_fails() {
        let event =
            RawDocumentBuf::from_document(&doc! {"_id": 1, "huge": "z".repeat(900)}).expect("raw");
        let e = split(&event, token(), 800).expect_err("too large");
        assert_eq!(e.code, ErrorCode::Location7182500);
    }

    #[test]
    fn the_stage_must_be_last_and_empty() {
        let ok = [doc! {"$match": {}}, doc! {STAGE: {}}];
        let (rest, split) = take_split_stage(&ok).expect("ok");
        assert!(split && rest.len() == 1);
        let e = take_split_stage(&[doc! {STAGE: {}}, doc! {"$match": {}}]).expect_err("last");
        assert_eq!(e.code, ErrorCode::Location7182802);
        let e = take_split_stage(&[doc! {STAGE: {"x": 1}}]).expect_err("empty");
        assert_eq!(e.code, ErrorCode::Location7182800);
    }
}
