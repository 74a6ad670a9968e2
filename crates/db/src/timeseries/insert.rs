//! Inserts into a time series collection: each measurement joins the open bucket of its meta
//! value when the bucket admits it (within its span, under 1,000 measurements and 125 KiB, as
//! mongod's bucket catalog decides), else opens a new bucket starting at its time rounded
//! down. The open buckets are remembered per collection (meta value → bucket `_id`) and read
//! back from the buckets collection in the insert's own transaction, so a bucket a delete,
//! an update or a direct write changed is extended as it now is, and one that is gone is
//! replaced by a new one. Inserts into one time series collection are serialised (one
//! bucket document takes each measurement; two inserts would conflict on it anyway).
//! After a restart no bucket is open: the first measurements open new ones (mongod 7.0
//! may reopen an old one; either is a valid bucketing).

use super::buckets_ns;
use super::stats::BucketCounters;
use crate::catalog::Collection;
use crate::doc_write;
use crate::index_keys::id_key;
use crate::namespace::Namespace;
use crate::user_txn::{Mode, UserTxn};
use crate::write_ops::WriteResult;
use crate::{engine_error, Database, DbResult};
use bson::oid::ObjectId;
use bson::{Bson, DateTime, Document, RawDocumentBuf};
use shale_doc::timeseries::bucket::{self, Bucket};
use shale_doc::timeseries::TimeseriesOptions;
use shale_doc::{ErrorCode, MongoError};
use shale_engine::Txn;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Measurements per insert transaction.
const CHUNK: usize = 1000;

/// One collection's open buckets: the encoded meta value → the bucket's `_id`.
type Open = HashMap<Vec<u8>, ObjectId>;

/// One collection's bucket catalog: its open buckets and its counters.
#[derive(Debug, Default)]
pub(super) struct Catalog {
    open: Mutex<Open>,
    pub(super) counters: BucketCounters,
}

/// Every time series collection's open buckets.
#[derive(Debug, Default)]
pub(crate) struct OpenBuckets {
    by_ns: Mutex<HashMap<Namespace, Arc<Catalog>>>,
}

impl OpenBuckets {
    /// Forgets `ns`'s open buckets and counters (its collection was dropped).
    pub(super) fn forget(&self, ns: &Namespace) {
        let mut all = self.by_ns.lock().unwrap_or_else(|p| p.into_inner());
        all.remove(ns);
    }

    pub(super) fn of(&self, ns: &Namespace) -> Arc<Catalog> {
        let mut all = self.by_ns.lock().unwrap_or_else(|p| p.into_inner());
        all.entry(ns.clone()).or_default().clone()
    }
}

/// A bucket the insert is filling: as read (if it existed) and as it will be written.
struct Touched {
    old: Option<RawDocumentBuf>,
    bucket: Bucket,
    dirty: bool,
}

impl Database {
    /// `insert` into time series collection `ns` (documents as the command sent them). A
    /// measurement without a date in its time field is that document's write error
    /// (`BadValue`); an ordered insert stops there.
    pub fn insert_timeseries(
        &self,
        ns: &Namespace,
        docs: &[RawDocumentBuf],
        ordered: bool,
    ) -> DbResult<WriteResult> {
        let (coll, _guard) = self.collection_or_create(&buckets_ns(ns)?)?;
        self.insert_measurements(ns, &coll, docs, ordered, &mut Mode::Own)
    }

    /// `insert_timeseries` of one retryable write statement, in its statement transaction
    /// `t` (whose commit writes the statement's record with it; `retryable.rs`).
    pub fn insert_timeseries_in(
        &self,
        t: &UserTxn,
        ns: &Namespace,
        docs: &[RawDocumentBuf],
    ) -> DbResult<WriteResult> {
        let buckets = buckets_ns(ns)?;
        let _guard = self.data_lock();
        let coll = self
            .catalog
            .get(&buckets)
            .ok_or_else(|| not_timeseries(ns))?;
        t.with_open(|st| self.insert_measurements(ns, &coll, docs, true, &mut Mode::User(st)))
    }

    fn insert_measurements(
        &self,
        ns: &Namespace,
        coll: &Arc<Collection>,
        docs: &[RawDocumentBuf],
        ordered: bool,
        mode: &mut Mode<'_>,
    ) -> DbResult<WriteResult> {
        let options = self.timeseries(ns).ok_or_else(|| not_timeseries(ns))?;
        let mut result = WriteResult::default();
        let mut batch = Vec::with_capacity(docs.len());
        for (i, d) in docs.iter().enumerate() {
            match bucket::measurement_time(d, &options.time_field) {
                Ok(t) => batch.push((i, t)),
                Err(e) => {
                    result.errors.push((i, e));
                    if ordered {
                        break;
                    }
                }
            }
        }
        let catalog = self.ts_open.of(ns);
        let mut open = catalog.open.lock().unwrap_or_else(|p| p.into_inner());
        for chunk in batch.chunks(CHUNK) {
            let (opened, closed) = self.run_write(mode, coll, |txn, log| {
                let mut closed = Closed::default();
                let touched = fill_buckets(txn, coll, &options, &open, docs, chunk, &mut closed)?;
                let mut opened = Vec::new();
                for (key, t) in touched {
                    write_bucket(txn, log, coll, &t)?;
                    opened.push((key, t.bucket.id(), t.old.is_some()));
                }
                Ok((opened, closed))
            })?;
            count_commit(&catalog.counters, &opened, &closed, chunk.len());
            open.extend(opened.into_iter().map(|(k, id, _)| (k, id)));
            result.n += chunk.len() as i64;
        }
        result.errors.sort_by_key(|(i, _)| *i);
        Ok(result)
    }
}

/// Why buckets were closed during one transaction (mongod's counters).
#[derive(Debug, Default)]
struct Closed {
    count: i64,
    size: i64,
    time_forward: i64,
    time_backward: i64,
    new_meta: i64,
}

impl Closed {
    /// Counts why `b` did not admit a measurement at `time`.
    fn note(&mut self, b: &Bucket, time: DateTime, span_seconds: i64) {
        let t = time.timestamp_millis();
        let start = b.start().timestamp_millis();
        if t < start {
            self.time_backward += 1;
        } else if t >= start.saturating_add(span_seconds.saturating_mul(1000)) {
            self.time_forward += 1;
        } else if b.len() >= bucket::MAX_MEASUREMENTS {
            self.count += 1;
        } else {
            self.size += 1;
        }
    }
}

fn count_commit(
    c: &BucketCounters,
    opened: &[(Vec<u8>, ObjectId, bool)],
    closed: &Closed,
    n: usize,
) {
    let updates = opened.iter().filter(|o| o.2).count() as i64;
    BucketCounters::add(&c.bucket_updates, updates);
    BucketCounters::add(&c.bucket_inserts, opened.len() as i64 - updates);
    BucketCounters::add(&c.opened_due_to_metadata, closed.new_meta);
    BucketCounters::add(&c.closed_due_to_count, closed.count);
    BucketCounters::add(&c.closed_due_to_size, closed.size);
    BucketCounters::add(&c.closed_due_to_time_forward, closed.time_forward);
    BucketCounters::add(&c.closed_due_to_time_backward, closed.time_backward);
    BucketCounters::add(&c.commits, 1);
    BucketCounters::add(&c.measurements_committed, n as i64);
}

/// Places each measurement of `chunk` in a bucket: the last bucket of each meta value, in
/// the order the measurements came.
fn fill_buckets(
    txn: &Txn,
    coll: &Collection,
    options: &TimeseriesOptions,
    open: &Open,
    docs: &[RawDocumentBuf],
    chunk: &[(usize, DateTime)],
    closed: &mut Closed,
) -> DbResult<Vec<(Vec<u8>, Touched)>> {
    let meta_field = options.meta_field.as_deref();
    let span = i64::from(options.bucket_max_span_seconds);
    let mut touched: Vec<(Vec<u8>, Touched)> = Vec::new();
    let mut last: HashMap<Vec<u8>, usize> = HashMap::new();
    for &(i, time) in chunk {
        let doc = docs[i].to_document().map_err(|e| {
            MongoError::new(ErrorCode::BadValue, format!("invalid measurement: {e}"))
        })?;
        let meta = meta_field
            .and_then(|m| doc.get(m))
            .map(bucket::normalize_meta);
        let key = meta_key(meta.as_ref())?;
        let at = match last.get(&key) {
            Some(at) => Some(*at),
            None => match open.get(&key) {
                Some(id) => read_bucket(txn, coll, *id, &options.time_field)?.map(|t| {
                    touched.push((key.clone(), t));
                    touched.len() - 1
                }),
                None => None,
            },
        };
        let bytes = docs[i].as_bytes().len();
        match at {
            Some(at) if !touched[at].1.bucket.admits(time, bytes, span) => {
                closed.note(&touched[at].1.bucket, time, span)
            }
            None if !open.contains_key(&key) && !last.contains_key(&key) => closed.new_meta += 1,
            _ => {}
        }
        let at = match at {
            Some(at) if touched[at].1.bucket.admits(time, bytes, span) => at,
            _ => {
                let start = bucket::rounded_start(time, options.rounding_seconds());
                let fresh = Bucket::new(bucket::bucket_id(start), &options.time_field, start, meta);
                touched.push((
                    key.clone(),
                    Touched {
                        old: None,
                        bucket: fresh,
                        dirty: true,
                    },
                ));
                touched.len() - 1
            }
        };
        last.insert(key, at);
        let t = &mut touched[at].1;
        t.bucket.push(&doc, meta_field);
        t.dirty = true;
    }
    // The buckets read and not extended are left as they are; of those written, the last
    // of each meta value is the one that stays open (the caller records them in order).
    Ok(touched.into_iter().filter(|(_, t)| t.dirty).collect())
}

/// The open bucket `id`, as this transaction sees it; `None` if it is gone or not a bucket
/// this code can extend.
fn read_bucket(
    txn: &Txn,
    coll: &Collection,
    id: ObjectId,
    time_field: &str,
) -> DbResult<Option<Touched>> {
    let Some(bytes) = txn
        .get(&coll.docs, &id_key(&Bson::ObjectId(id)))
        .map_err(engine_error)?
    else {
        return Ok(None);
    };
    let old = RawDocumentBuf::from_bytes(bytes).map_err(|e| {
        MongoError::new(
            ErrorCode::DataCorruptionDetected,
            format!("bucket {id}: {e}"),
        )
    })?;
    let doc: Document = old.to_document().map_err(|e| {
        MongoError::new(
            ErrorCode::DataCorruptionDetected,
            format!("bucket {id}: {e}"),
        )
    })?;
    Ok(Bucket::from_document(&doc, time_field)
        .ok()
        .map(|bucket| Touched {
            old: Some(old),
            bucket,
            dirty: false,
        }))
}

fn write_bucket(
    txn: &mut Txn,
    log: &mut crate::oplog::pending::Pending,
    coll: &Collection,
    t: &Touched,
) -> DbResult<()> {
    let new = crate::doc_prepare::to_raw(&t.bucket.to_document())?;
    match &t.old {
        Some(old) => doc_write::replace(txn, log, coll, old, &new, true),
        None => doc_write::insert(txn, log, coll, &new),
    }
}

/// The key measurements with meta value `meta` share a bucket under.
fn meta_key(meta: Option<&Bson>) -> DbResult<Vec<u8>> {
    match meta {
        None => Ok(Vec::new()),
        Some(m) => {
            let d = bson::doc! {"": m.clone()};
            bson::to_vec(&d).map_err(|e| MongoError::new(ErrorCode::BadValue, e.to_string()))
        }
    }
}

pub(super) fn not_timeseries(ns: &Namespace) -> MongoError {
    MongoError::new(
        ErrorCode::NamespaceNotFound,
        format!("{ns} is not a time series collection"),
    )
}
