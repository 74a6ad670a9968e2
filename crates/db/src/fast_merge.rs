//! The read-free ("fast") update's message payload and the merge callback that applies it
//! (docs/format-collections.md, "Fast-update messages"). The engine calls the callback when
//! an update message meets its document at a leaf, when a reader folds buffered messages
//! into the value it returns, and when recovery's replayed messages do either — so it is a
//! pure function of (stored bytes, payload): deterministic, and total. It never panics on
//! any bytes: whatever cannot be applied (stored bytes that are not BSON, a payload of an
//! unknown version, `$inc` on a string, a result over 16 MiB or nested too deep) leaves the
//! document exactly as it was, as TokuMX did, and is counted in `FastUpdateStats`. A message
//! never creates a document: with nothing stored, nothing is stored after it.

use crate::doc_write::MAX_DOCUMENT_BYTES;
use bson::{Document, RawDocument};
use shale_doc::{ApplyContext, StoredDocument, UpdateSpec};
use shale_engine::MergeFn;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// First byte of every fast-update payload.
pub const PAYLOAD_MAGIC: u8 = 0xF5;
/// The payload format this build writes and reads.
pub const PAYLOAD_VERSION: u8 = 1;
/// Magic, version, flags, then the statement's time in milliseconds (i64 little-endian).
pub const PAYLOAD_HEADER_BYTES: usize = 3 + 8;

/// What the merge callback did, for `serverStatus` and tests. A message is counted each
/// time it is folded (a reader's fold and the leaf's application both count).
#[derive(Debug, Default)]
pub struct FastUpdateStats {
    /// Update messages sent instead of a read-modify-write.
    pub sent: AtomicU64,
    /// Applications that changed the document.
    pub applied: AtomicU64,
    /// Applications that left the document unchanged because the update could not apply.
    pub errors: AtomicU64,
}

/// The payload for `update` applied at `now_ms`.
pub fn encode_payload(update: &Document, now_ms: i64) -> Result<Vec<u8>, bson::ser::Error> {
    let body = bson::to_vec(update)?;
    let mut out = Vec::with_capacity(PAYLOAD_HEADER_BYTES + body.len());
    out.extend_from_slice(&[PAYLOAD_MAGIC, PAYLOAD_VERSION, 0]);
    out.extend_from_slice(&now_ms.to_le_bytes());
    out.extend_from_slice(&body);
    Ok(out)
}

/// A decoded payload: the update document's bytes and the statement's time.
struct Payload<'a> {
    update: &'a RawDocument,
    now_ms: i64,
}

/// Why a payload or a stored document could not be used (counted, then ignored).
#[derive(Debug, PartialEq, Eq)]
enum Refusal {
    Payload(&'static str),
    Stored,
    Update,
    TooLarge,
    TooDeep,
}

fn decode_payload(bytes: &[u8]) -> Result<Payload<'_>, Refusal> {
    let (header, body) = bytes
        .split_at_checked(PAYLOAD_HEADER_BYTES)
        .ok_or(Refusal::Payload("shorter than its header"))?;
    match header {
        [PAYLOAD_MAGIC, PAYLOAD_VERSION, 0, time @ ..] => {
            let time: [u8; 8] = time
                .try_into()
                .map_err(|_| Refusal::Payload("header size"))?;
            let update = RawDocument::from_bytes(body)
                .map_err(|_| Refusal::Payload("update is not BSON"))?;
            Ok(Payload {
                update,
                now_ms: i64::from_le_bytes(time),
            })
        }
        [PAYLOAD_MAGIC, PAYLOAD_VERSION, ..] => Err(Refusal::Payload("unknown flags")),
        [PAYLOAD_MAGIC, ..] => Err(Refusal::Payload("unknown version")),
        _ => Err(Refusal::Payload("not a fast-update payload")),
    }
}

/// The merge callback the database opens its engine with.
pub fn merge_callback(stats: Arc<FastUpdateStats>) -> Arc<MergeFn> {
    Arc::new(move |_key: &[u8], current: Option<&[u8]>, payload: &[u8]| {
        let current = current?;
        let outcome = std::panic::catch_unwind(|| apply(current, payload));
        match outcome {
            Ok(Ok(Some(new))) => {
                stats.applied.fetch_add(1, Ordering::Relaxed);
                Some(new)
            }
            Ok(Ok(None)) => Some(current.to_vec()),
            Ok(Err(refusal)) => {
                note_error(&stats, &refusal);
                Some(current.to_vec())
            }
            Err(_) => {
                note_error(&stats, &Refusal::Update);
                Some(current.to_vec())
            }
        }
    })
}

/// Counts a refused application and logs it, at most once per five seconds (TokuMX's rate).
fn note_error(stats: &FastUpdateStats, refusal: &Refusal) {
    static LAST_LOG_S: AtomicU64 = AtomicU64::new(0);
    stats.errors.fetch_add(1, Ordering::Relaxed);
    let now_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let last = LAST_LOG_S.load(Ordering::Relaxed);
    if now_s >= last + 5
        && LAST_LOG_S
            .compare_exchange(last, now_s, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    {
        tracing::warn!(
            reason = ?refusal,
            "a fast update could not be applied; the document was left unchanged"
        );
    }
}

/// The document after the payload's update, `None` when it does not change.
fn apply(current: &[u8], payload: &[u8]) -> Result<Option<Vec<u8>>, Refusal> {
    let payload = decode_payload(payload)?;
    let update = Document::try_from(payload.update).map_err(|_| Refusal::Update)?;
    let spec = UpdateSpec::parse(&update, None).map_err(|_| Refusal::Update)?;
    let stored = RawDocument::from_bytes(current).map_err(|_| Refusal::Stored)?;
    // A name the document repeats is kept (`StoredDocument`), as a read update keeps it.
    let mut decoded = StoredDocument::decode(stored).map_err(|_| Refusal::Stored)?;
    let doc = &mut decoded.doc;
    let old_id = doc.get("_id").cloned();
    let ctx = ApplyContext::new(bson::DateTime::from_millis(payload.now_ms));
    if !spec.apply(doc, &ctx).map_err(|_| Refusal::Update)?.modified {
        return Ok(None);
    }
    // Eligibility keeps `_id` out of a fast update's paths; this only guards the invariant.
    if doc.get("_id") != old_id.as_ref() {
        return Err(Refusal::Update);
    }
    let raw = decoded.encode(stored, &spec).map_err(|_| Refusal::Update)?;
    if raw.as_bytes().len() > MAX_DOCUMENT_BYTES {
        return Err(Refusal::TooLarge);
    }
    shale_doc::check_depth(raw.as_bytes(), shale_doc::MAX_STORAGE_DEPTH)
        .map_err(|_| Refusal::TooDeep)?;
    Ok(Some(raw.into_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn raw(d: Document) -> Vec<u8> {
        bson::to_vec(&d).expect("bson")
    }

    fn merge(current: Option<&[u8]>, update: Document) -> (Option<Vec<u8>>, Arc<FastUpdateStats>) {
        let stats = Arc::new(FastUpdateStats::default());
        let f = merge_callback(stats.clone());
        let payload = encode_payload(&update, 1_000).expect("payload");
        (f(b"k", current, &payload), stats)
    }

    #[test]
    fn operators_apply_to_the_stored_document() {
        let old = raw(doc! {"_id": 1, "n": 1, "s": "x"});
        let (new, stats) = merge(
            Some(&old),
            doc! {"$inc": {"n": 2}, "$set": {"t": true}, "$unset": {"s": 1}, "$currentDate": {"d": true}},
        );
        let want = raw(doc! {"_id": 1, "n": 3, "d": bson::DateTime::from_millis(1_000), "t": true});
        assert_eq!(new, Some(want));
        assert_eq!(stats.applied.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_missing_document_stays_missing() {
        let (new, _) = merge(None, doc! {"$inc": {"n": 1}});
        assert_eq!(new, None);
    }

    #[test]
    fn an_update_that_cannot_apply_leaves_the_document_unchanged() {
        let old = raw(doc! {"_id": 1, "s": "x"});
        let (new, stats) = merge(Some(&old), doc! {"$inc": {"s": 1}});
        assert_eq!(new, Some(old.clone()));
        assert_eq!(stats.errors.load(Ordering::Relaxed), 1);
        let big = "x".repeat(9 << 20);
        let (grown, _) = merge(Some(&old), doc! {"$set": {"a": &big}});
        let (too_big, stats) = merge(grown.as_deref(), doc! {"$set": {"b": &big}});
        assert_eq!(too_big, grown, "over 16 MiB: unchanged");
        assert_eq!(stats.errors.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn garbage_never_panics_and_changes_nothing() {
        let stats = Arc::new(FastUpdateStats::default());
        let f = merge_callback(stats.clone());
        let good = encode_payload(&doc! {"$inc": {"n": 1}}, 0).expect("payload");
        let old = raw(doc! {"_id": 1, "n": 1});
        let mut seed = 7u64;
        for len in 0..200usize {
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    seed = seed
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    (seed >> 56) as u8
                })
                .collect();
            assert_eq!(f(b"k", Some(&bytes), &good), Some(bytes.clone()));
            assert_eq!(f(b"k", Some(&old), &bytes), Some(old.clone()));
            let mut cut = good.clone();
            cut.truncate(len.min(good.len()));
            let _ = f(b"k", Some(&old), &cut);
        }
        let mut v2 = good.clone();
        v2[1] = 2;
        assert_eq!(
            f(b"k", Some(&old), &v2),
            Some(old.clone()),
            "unknown version"
        );
    }
}
