//! TTL indexes' expiry (mongod's TTL monitor): one pass deletes, from every collection, the
//! documents a TTL index says have expired — a single-field index with
//! `expireAfterSeconds: n` expires a document once the date in that field (the earliest
//! one, when it holds an array of dates) is more than `n` seconds old. Documents without a
//! date there never expire. A partial TTL index expires only the documents its filter
//! covers. The deletes are ordinary deletes (`write_ops.rs`): each in its own transaction,
//! retried on conflict, indexes and counters kept. The server runs a pass every
//! `ttlMonitorSleepSecs`.

use crate::write_ops::DeleteOp;
use crate::{Database, DbResult};
use bson::{doc, Bson, DateTime, Document};

/// What one pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TtlPass {
    /// TTL indexes looked at.
    pub indexes: u64,
    /// Documents deleted.
    pub deleted: u64,
}

impl Database {
    /// Deletes what every TTL index says has expired at `now`.
    pub fn expire_ttl(&self, now: DateTime) -> DbResult<TtlPass> {
        let mut pass = TtlPass::default();
        for coll in self.catalog.list(None) {
            // A clustered collection's `expireAfterSeconds`: dates in `_id` (`clustered.rs`).
            if let Some(filter) = crate::clustered::expiry_filter(&coll.options, now) {
                pass.indexes += 1;
                pass.deleted += self.expire_with(&coll.ns, filter, "_id_")?;
            }
            // A time series collection's: whole buckets past their span (`timeseries/`).
            if let Some(filter) = crate::timeseries::expiry_filter(&coll.options, now) {
                pass.indexes += 1;
                pass.deleted += self.expire_with(&coll.ns, filter, "_id_")?;
            }
            for index in coll.ready_indexes() {
                let Some(filter) = expiry_filter(&index.spec, now) else {
                    continue;
                };
                pass.indexes += 1;
                pass.deleted += self.expire_with(&coll.ns, filter, &index.def.name)?;
            }
        }
        Ok(pass)
    }

    /// Deletes what `filter` matches in `ns` (one TTL index's expired documents).
    fn expire_with(&self, ns: &crate::Namespace, filter: Document, index: &str) -> DbResult<u64> {
        let op = DeleteOp {
            filter,
            limit_one: false,
            hint: None,
            vars: Default::default(),
        };
        let r = self.delete(ns, &[op], true)?;
        if let Some((_, e)) = r.errors.first() {
            tracing::warn!(%ns, index, error = %e.message, "TTL deletes failed");
        }
        Ok(u64::try_from(r.n).unwrap_or(0))
    }
}

/// The filter of what TTL index `spec` has expired at `now`; `None` when the index is not
/// a TTL index (no numeric `expireAfterSeconds`, or more than one key field).
fn expiry_filter(spec: &Document, now: DateTime) -> Option<Document> {
    let seconds = match spec.get("expireAfterSeconds")? {
        Bson::Int32(n) => i64::from(*n),
        Bson::Int64(n) => *n,
        Bson::Double(n) if n.is_finite() => *n as i64,
        _ => return None,
    };
    let key = spec.get_document("key").ok()?;
    let (field, _) = match key.iter().collect::<Vec<_>>().as_slice() {
        [one] => *one,
        _ => return None,
    };
    let cutoff = now
        .timestamp_millis()
        .saturating_sub(seconds.saturating_mul(1000));
    // `$lt` a date matches only dates (and arrays holding one below the cutoff: their
    // earliest date is), as mongod's monitor expires.
    let expired = doc! { field.clone(): { "$lt": DateTime::from_millis(cutoff) } };
    Some(match spec.get_document("partialFilterExpression") {
        Ok(partial) => doc! { "$and": [expired, partial.clone()] },
        Err(_) => expired,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DbOptions, FindSpec, Namespace};
    use bson::RawDocumentBuf;

    fn raw(d: Document) -> RawDocumentBuf {
        RawDocumentBuf::from_document(&d).expect("raw")
    }

    #[test]
    fn only_ttl_indexes_give_a_filter() {
        let now = DateTime::from_millis(1_000_000);
        let ttl = doc! {"key": {"at": 1}, "name": "at_1", "expireAfterSeconds": 10};
        assert_eq!(
            expiry_filter(&ttl, now),
            Some(doc! {"at": {"$lt": DateTime::from_millis(990_000)}})
        );
        let compound = doc! {"key": {"at": 1, "b": 1}, "name": "x", "expireAfterSeconds": 10};
        assert_eq!(expiry_filter(&compound, now), None);
        assert_eq!(
            expiry_filter(&doc! {"key": {"at": 1}, "name": "at_1"}, now),
            None
        );
    }

    #[test]
    fn a_pass_deletes_expired_dates_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Database::open(dir.path(), DbOptions::default()).expect("open");
        let ns = Namespace::new("t", "sessions").expect("ns");
        db.create_indexes(
            &ns,
            &[doc! {"key": {"at": 1}, "name": "at_1", "expireAfterSeconds": 60}],
        )
        .expect("ttl index");
        let now = DateTime::from_millis(10_000_000);
        let old = DateTime::from_millis(now.timestamp_millis() - 61_000);
        let fresh = DateTime::from_millis(now.timestamp_millis() - 59_000);
        let docs = [
            doc! {"_id": 1, "at": old},
            doc! {"_id": 2, "at": fresh},
            doc! {"_id": 3, "at": "not a date"},
            doc! {"_id": 4},
            doc! {"_id": 5, "at": [fresh, old]},
            doc! {"_id": 6, "at": [fresh]},
        ];
        db.insert(&ns, &docs.map(raw), true).expect("insert");
        let pass = db.expire_ttl(now).expect("pass");
        assert_eq!(
            pass,
            TtlPass {
                indexes: 1,
                deleted: 2
            }
        );
        let mut q = db.find(&ns, &FindSpec::default()).expect("find");
        let mut left = Vec::new();
        while let Some(d) = q.next_doc().expect("next") {
            left.push(d.get_i32("_id").expect("id"));
        }
        assert_eq!(left, [2, 3, 4, 6]);
        drop(q);
        let v = db.validate(&ns).expect("validate");
        assert!(v.get_bool("valid").expect("valid"), "{v}");
    }
}
