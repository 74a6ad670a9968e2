//! Capped collections (`create` with `capped: true, size, max`; docs/compat.md, `create`):
//! the options checked as mongod 7.0 checks them, the natural (insertion) order kept beside
//! the documents, and the trimming that keeps a collection under its bounds.
//!
//! The document tree stays keyed by `_id`; insertion order lives in the collection's size
//! tree (`c<id>.size`, whose entry count is the documents' bytes and whose keys were free
//! but for the fast-update marker): `NATURAL` + an 8-byte big-endian sequence number maps
//! to the document's encoded `_id`, and `BY_ID` + encoded `_id` maps back to its number, so
//! a delete finds its natural entry (docs/format-collections.md). Inserts into one capped
//! collection are serialised by its `writer` lock, held from the sequence number's
//! allocation through the commit, so commit order is sequence order and a reader at the
//! newest commit always sees a prefix of the sequence: natural reads and tailable cursors
//! (`oplog/reader.rs`, shared with the oplog) need no visibility point of their own.
//! After an insert statement's documents, in the same engine transaction, the oldest
//! documents are deleted until the collection is within `size` bytes (sum of BSON sizes)
//! and `max` documents (`trim`); those deletes are not logged, as mongod 7.0 does not
//! replicate capped deletes. Writes to capped collections in session transactions are
//! refused (263), as on mongod.

use crate::catalog::Collection;
use crate::{engine_error, DbResult};
use bson::{Bson, Document, RawDocument};
use shale_doc::{ErrorCode, MongoError};
use shale_engine::{TreeHandle, Txn};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// mongod's largest `size`: 1 PB.
pub const MAX_CAPPED_SIZE: i64 = 1 << 50;
/// `max` must be below 2^31; no `max` (or one at most 0) is mongod's 2^31 - 1.
const MAX_DOCS_LIMIT: i64 = 1 << 31;
const NO_MAX: i64 = 0x7fff_ffff;

/// Key prefix of the natural-order entries in the size tree.
const NATURAL: &[u8] = b"\x00N";
/// Key prefix of the `_id` to sequence number entries in the size tree.
const BY_ID: &[u8] = b"\x00R";

/// The bounds `create` gives a capped collection, as `listCollections` shows them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CappedOptions {
    /// Bytes of BSON kept at most (rounded up to a multiple of 256).
    pub size: i64,
    /// Documents kept at most (`None`: no bound given).
    pub max: Option<i64>,
}

impl CappedOptions {
    /// Reads `create`'s `capped`, `size` and `max` (each `None` when absent or null), with
    /// mongod 7.0's checks in its order: the IDL's types and ranges first (`TypeMismatch`
    /// 14, `Location51024`), then `size` required with `capped` and `capped` required with
    /// `size` or `max` (`InvalidOptions` 72). `None` for a collection that is not capped.
    pub fn from_create(
        capped: Option<&Bson>,
        size: Option<&Bson>,
        max: Option<&Bson>,
    ) -> Result<Option<CappedOptions>, MongoError> {
        let capped = match capped {
            None => false,
            Some(Bson::Boolean(b)) => *b,
            Some(v) => match number(v) {
                Some(n) => n != 0.0,
                None => {
                    return Err(wrong_type(
                        "capped",
                        v,
                        "[bool, long, int, decimal, double]",
                    ))
                }
            },
        };
        let size = size.map(|v| integer("size", v)).transpose()?;
        let max = max.map(|v| integer("max", v)).transpose()?;
        if let Some(s) = size {
            if s < 1 {
                return Err(range("size", ">=", 1, s));
            }
            if s > MAX_CAPPED_SIZE {
                return Err(range("size", "<=", MAX_CAPPED_SIZE, s));
            }
        }
        if let Some(m) = max {
            if m >= MAX_DOCS_LIMIT {
                return Err(range("max", "<", MAX_DOCS_LIMIT, m));
            }
        }
        if capped && size.is_none() {
            return Err(MongoError::new(
                ErrorCode::InvalidOptions,
                "the 'size' field is required when 'capped' is true",
            ));
        }
        if !capped && (size.is_some() || max.is_some()) {
            return Err(MongoError::new(
                ErrorCode::InvalidOptions,
                "the 'capped' field needs to be true when either the 'size' or 'max' fields are present",
            ));
        }
        Ok(size.filter(|_| capped).map(|s| CappedOptions {
            size: round_size(s),
            max: max.map(|m| if m <= 0 { NO_MAX } else { m }),
        }))
    }

    /// The options a catalog record's `options` carry (`capped: true, size, max?`).
    pub fn from_stored(options: &Document) -> Option<CappedOptions> {
        if options.get_bool("capped") != Ok(true) {
            return None;
        }
        let int = |k: &str| match options.get(k) {
            Some(Bson::Int64(n)) => Some(*n),
            Some(Bson::Int32(n)) => Some(i64::from(*n)),
            _ => None,
        };
        Some(CappedOptions {
            size: int("size")?,
            max: int("max"),
        })
    }

    /// Puts the options into a collection's `options`, as mongod lists them.
    pub fn store(&self, options: &mut Document) {
        options.insert("capped", true);
        // Listed through mongod's `appendNumber`.
        options.insert("size", shale_doc::append_number(self.size));
        if let Some(m) = self.max {
            options.insert("max", shale_doc::append_number(m));
        }
    }
}

/// mongod rounds `size` up to a multiple of 256 bytes.
pub fn round_size(size: i64) -> i64 {
    (size + 0xff) & !0xff
}

fn number(v: &Bson) -> Option<f64> {
    match v {
        Bson::Int32(n) => Some(f64::from(*n)),
        Bson::Int64(n) => Some(*n as f64),
        Bson::Double(d) => Some(*d),
        Bson::Decimal128(d) => d.to_string().parse().ok(),
        _ => None,
    }
}

/// A `safeInt64` field: any number, truncated (a NaN is 0, as `safeNumberLong`).
fn integer(field: &str, v: &Bson) -> Result<i64, MongoError> {
    match v {
        Bson::Int64(n) => Ok(*n),
        v => match number(v) {
            Some(d) if d.is_nan() => Ok(0),
            Some(d) => Ok(d as i64),
            None => Err(wrong_type(field, v, "[long, int, decimal, double]")),
        },
    }
}

fn wrong_type(field: &str, v: &Bson, expected: &str) -> MongoError {
    MongoError::new(
        ErrorCode::TypeMismatch,
        format!(
            "BSON field 'create.{field}' is the wrong type '{}', expected types '{expected}'",
            shale_doc::type_name(v)
        ),
    )
}

fn range(field: &str, op: &str, bound: i64, actual: i64) -> MongoError {
    MongoError::new(
        ErrorCode::Location51024,
        format!("BSON field '{field}' value must be {op} {bound}, actual value '{actual}'"),
    )
}

/// A capped collection's bounds and the state its writers and tailing readers share. The
/// catalog makes one per capped collection (not the oplog, which has its own) and carries
/// it across DDL that replaces the collection's record.
#[derive(Debug)]
pub struct Capped {
    /// The bounds.
    pub options: CappedOptions,
    /// Held by inserts from sequence allocation through commit.
    writer: Mutex<()>,
    /// The next sequence number.
    next_seq: AtomicU64,
    /// The newest committed sequence number, with the condition tailing readers wait on.
    committed: Mutex<u64>,
    moved: Condvar,
}

impl Capped {
    /// The state of a collection with `options` whose size tree is `size` (its newest
    /// natural entry gives the next sequence number).
    pub(crate) fn open(options: CappedOptions, size: &TreeHandle) -> DbResult<Capped> {
        let mut cursor = size.cursor();
        cursor.seek_for_prev(&natural_end()).map_err(engine_error)?;
        let newest = cursor
            .entry()
            .and_then(|(k, _)| natural_seq(k))
            .unwrap_or(0);
        Ok(Capped {
            options,
            writer: Mutex::new(()),
            next_seq: AtomicU64::new(newest + 1),
            committed: Mutex::new(newest),
            moved: Condvar::new(),
        })
    }

    /// Serialises an insert into the collection (see the header).
    pub(crate) fn lock_writer(&self) -> MutexGuard<'_, ()> {
        self.writer.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The next sequence number to be allocated (a write that moved it inserted).
    pub(crate) fn sequence(&self) -> u64 {
        self.next_seq.load(Ordering::SeqCst)
    }

    /// Wakes tailing readers after an insert committed (its writer lock still held).
    pub(crate) fn published(&self) {
        let newest = self.next_seq.load(Ordering::SeqCst).saturating_sub(1);
        let mut c = self.committed.lock().unwrap_or_else(|p| p.into_inner());
        *c = newest;
        self.moved.notify_all();
    }

    /// Waits until a sequence number after `after` commits or `deadline` comes.
    pub(crate) fn wait_past(&self, after: u64, deadline: Instant) {
        let mut c = self.committed.lock().unwrap_or_else(|p| p.into_inner());
        while *c <= after {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            c = self
                .moved
                .wait_timeout(c, left.min(Duration::from_secs(1)))
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
        }
    }
}

/// The natural-order key of sequence number `seq`.
pub(crate) fn natural_key(seq: u64) -> Vec<u8> {
    let mut k = NATURAL.to_vec();
    k.extend_from_slice(&seq.to_be_bytes());
    k
}

/// The key prefix of natural-order entries.
pub(crate) fn natural_prefix() -> &'static [u8] {
    NATURAL
}

/// The sequence number of a natural-order key.
pub(crate) fn natural_seq(key: &[u8]) -> Option<u64> {
    let rest = key.strip_prefix(NATURAL)?;
    Some(u64::from_be_bytes(rest.try_into().ok()?))
}

/// A key past every natural-order key and before every other entry.
fn natural_end() -> Vec<u8> {
    let mut k = NATURAL.to_vec();
    k.extend_from_slice(&[0xff; 9]);
    k
}

fn by_id_key(idk: &[u8]) -> Vec<u8> {
    let mut k = BY_ID.to_vec();
    k.extend_from_slice(idk);
    k
}

/// Records an inserted document's place in natural order (`idk`: its encoded `_id`).
pub(crate) fn record_insert(
    txn: &mut Txn,
    coll: &Collection,
    capped: &Capped,
    idk: &[u8],
) -> DbResult<()> {
    let seq = capped.next_seq.fetch_add(1, Ordering::SeqCst);
    txn.put(&coll.size, &natural_key(seq), idk)
        .map_err(engine_error)?;
    txn.put(&coll.size, &by_id_key(idk), &seq.to_be_bytes())
        .map_err(engine_error)
}

/// Removes a deleted document's natural-order entries.
pub(crate) fn record_remove(txn: &mut Txn, coll: &Collection, idk: &[u8]) -> DbResult<()> {
    let by_id = by_id_key(idk);
    if let Some(seq) = txn.get(&coll.size, &by_id).map_err(engine_error)? {
        let seq: [u8; 8] = seq.as_slice().try_into().map_err(|_| {
            MongoError::new(
                ErrorCode::DataCorruptionDetected,
                format!("{}: a malformed natural-order entry", coll.ns),
            )
        })?;
        txn.delete(&coll.size, &natural_key(u64::from_be_bytes(seq)))
            .map_err(engine_error)?;
        txn.delete(&coll.size, &by_id).map_err(engine_error)?;
    }
    Ok(())
}

/// A document larger than the whole collection is refused, as mongod refuses it.
pub(crate) fn check_fits(capped: &Capped, doc: &RawDocument) -> DbResult<()> {
    if doc.as_bytes().len() as i64 > capped.options.size {
        return Err(MongoError::new(
            ErrorCode::BadValue,
            "object to insert exceeds cappedMaxSize",
        ));
    }
    Ok(())
}

/// mongod's refusal of a write to a capped collection in a session transaction.
pub(crate) fn refuse_in_transaction(coll: &Collection) -> DbResult<()> {
    if coll.capped.is_some() {
        return Err(MongoError::new(
            ErrorCode::OperationNotSupportedInTransaction,
            format!(
                "Collection '{}' is a capped collection. Writes in transactions are not \
                 allowed on capped collections.",
                coll.ns
            ),
        ));
    }
    Ok(())
}

/// Deletes the oldest documents until `coll` is within its bounds, in `txn` (see the
/// header). Returns how many it deleted.
pub(crate) fn trim(txn: &mut Txn, coll: &Collection, capped: &Capped) -> DbResult<u64> {
    let count = txn.count(&coll.docs);
    let bytes = txn.count(&coll.size);
    let max = capped.options.max.unwrap_or(i64::MAX);
    let over = |count: i64, bytes: i64| count > max || bytes > capped.options.size;
    if !over(count, bytes) {
        return Ok(0);
    }
    let mut doomed = Vec::new();
    // What is left once the doomed documents are gone.
    let (mut c, mut b) = (count, bytes);
    {
        let mut cursor = txn.cursor(&coll.size);
        cursor.seek(NATURAL).map_err(engine_error)?;
        while let Some((k, idk)) = cursor.entry() {
            if !k.starts_with(NATURAL) || !over(c, b) {
                break;
            }
            let doc = txn.get(&coll.docs, idk).map_err(engine_error)?;
            if let Some(d) = &doc {
                c -= 1;
                b -= d.len() as i64;
            }
            doomed.push((k.to_vec(), idk.to_vec(), doc));
            cursor.next().map_err(engine_error)?;
        }
    }
    let mut deleted = 0;
    let mut unlogged = crate::oplog::pending::Pending::new(false);
    for (nat, idk, doc) in doomed {
        match doc {
            Some(d) => {
                let d = RawDocument::from_bytes(&d).map_err(|_| {
                    MongoError::new(
                        ErrorCode::DataCorruptionDetected,
                        format!("{}: a stored document is not BSON", coll.ns),
                    )
                })?;
                crate::doc_write::remove(txn, &mut unlogged, coll, d)?;
                deleted += 1;
            }
            // A natural entry whose document is gone: dropped with it.
            None => {
                txn.delete(&coll.size, &nat).map_err(engine_error)?;
                txn.delete(&coll.size, &by_id_key(&idk))
                    .map_err(engine_error)?;
            }
        }
    }
    debug_assert!(!over(c, b) || c <= 0);
    Ok(deleted)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn parse(d: Document) -> Result<Option<CappedOptions>, MongoError> {
        CappedOptions::from_create(d.get("capped"), d.get("size"), d.get("max"))
    }

    fn code(d: Document) -> i32 {
        parse(d).expect_err("refused").code.code()
    }

    #[test]
    fn sizes_round_up_to_256_bytes() {
        assert_eq!(round_size(1), 256);
        assert_eq!(round_size(256), 256);
        assert_eq!(round_size(1000), 1024);
        let o = parse(doc! {"capped": true, "size": 1000, "max": 5})
            .expect("ok")
            .expect("capped");
        assert_eq!(
            o,
            CappedOptions {
                size: 1024,
                max: Some(5)
            }
        );
        let o = parse(doc! {"capped": true, "size": 4096.7, "max": 0})
            .expect("ok")
            .expect("capped");
        assert_eq!(
            o,
            CappedOptions {
                size: 4096,
                max: Some(NO_MAX)
            }
        );
    }

    #[test]
    fn mongods_checks_and_codes() {
        assert_eq!(code(doc! {"capped": true}), 72);
        assert_eq!(code(doc! {"capped": true, "max": 5}), 72);
        assert_eq!(code(doc! {"size": 4096}), 72);
        assert_eq!(code(doc! {"capped": false, "max": 5}), 72);
        assert_eq!(code(doc! {"capped": true, "size": 0}), 51024);
        assert_eq!(code(doc! {"capped": true, "size": -5}), 51024);
        assert_eq!(
            code(doc! {"capped": true, "size": MAX_CAPPED_SIZE + 1}),
            51024
        );
        assert_eq!(
            code(doc! {"capped": true, "size": 4096, "max": 1i64 << 31}),
            51024
        );
        assert_eq!(code(doc! {"capped": true, "size": "x"}), 14);
        assert_eq!(code(doc! {"capped": "x", "size": 1}), 14);
        assert!(parse(doc! {"capped": true, "size": MAX_CAPPED_SIZE})
            .expect("ok")
            .is_some());
        assert_eq!(parse(doc! {"capped": false}).expect("ok"), None);
        assert_eq!(parse(doc! {}).expect("ok"), None);
        let e = parse(doc! {"capped": true, "size": 0}).expect_err("refused");
        assert_eq!(
            e.message,
            "BSON field 'size' value must be >= 1, actual value '0'"
        );
    }

    #[test]
    fn stored_options_round_trip() {
        let o = CappedOptions {
            size: 4096,
            max: Some(3),
        };
        let mut d = Document::new();
        o.store(&mut d);
        assert_eq!(d, doc! {"capped": true, "size": 4096i32, "max": 3i32});
        assert_eq!(CappedOptions::from_stored(&d), Some(o));
        assert_eq!(CappedOptions::from_stored(&doc! {"capped": false}), None);
    }

    #[test]
    fn natural_keys_order_by_sequence() {
        assert!(natural_key(1) < natural_key(2));
        assert!(natural_key(255) < natural_key(256));
        assert_eq!(natural_seq(&natural_key(77)), Some(77));
        assert_eq!(natural_seq(b"fastUpdated"), None);
        let end = natural_end();
        assert!(natural_key(u64::MAX) < end && end < by_id_key(b""));
    }
}
