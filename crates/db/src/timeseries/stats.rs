//! What `collStats` says of a time series collection (docs/design-timeseries.md §8): its
//! buckets collection's figures under the collection's name, without `count` and
//! `avgObjSize` (mongod treats the collection as a view there), and the `timeseries`
//! section: the buckets namespace, how many buckets and their average size, and the bucket
//! catalog's counters this server keeps (since it started, as mongod's reset on restart).
//! mongod's counters of events that cannot happen here (archiving and reopening buckets,
//! closing them under memory pressure, compression) are not listed.

use super::buckets_ns;
use crate::namespace::Namespace;
use crate::{Database, DbResult};
use bson::{doc, Document};
use std::sync::atomic::{AtomicI64, Ordering};

/// The bucket catalog's counters of one collection.
#[derive(Debug, Default)]
pub(crate) struct BucketCounters {
    pub bucket_inserts: AtomicI64,
    pub bucket_updates: AtomicI64,
    pub opened_due_to_metadata: AtomicI64,
    pub closed_due_to_count: AtomicI64,
    pub closed_due_to_size: AtomicI64,
    pub closed_due_to_time_forward: AtomicI64,
    pub closed_due_to_time_backward: AtomicI64,
    pub commits: AtomicI64,
    pub measurements_committed: AtomicI64,
}

impl BucketCounters {
    pub(crate) fn add(counter: &AtomicI64, n: i64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    fn document(&self) -> Document {
        let get = |c: &AtomicI64| c.load(Ordering::Relaxed);
        let commits = get(&self.commits);
        let measurements = get(&self.measurements_committed);
        let mut d = doc! {
            "numBucketInserts": get(&self.bucket_inserts),
            "numBucketUpdates": get(&self.bucket_updates),
            "numBucketsOpenedDueToMetadata": get(&self.opened_due_to_metadata),
            "numBucketsClosedDueToCount": get(&self.closed_due_to_count),
            "numBucketsClosedDueToSize": get(&self.closed_due_to_size),
            "numBucketsClosedDueToTimeForward": get(&self.closed_due_to_time_forward),
            "numBucketsClosedDueToTimeBackward": get(&self.closed_due_to_time_backward),
            "numCommits": commits,
            "numMeasurementsCommitted": measurements,
        };
        if commits > 0 {
            d.insert("avgNumMeasurementsPerCommit", measurements / commits);
        }
        d
    }
}

impl Database {
    /// `collStats` of time series collection `ns` (`None`: not one).
    pub(crate) fn timeseries_stats(
        &self,
        ns: &Namespace,
        scale: i64,
    ) -> DbResult<Option<Document>> {
        if self.timeseries(ns).is_none() {
            return Ok(None);
        }
        let buckets = buckets_ns(ns)?;
        let mut stats = self.coll_stats(&buckets, scale)?;
        let count = stats
            .get("count")
            .and_then(shale_doc::number_as_f64)
            .unwrap_or(0.0) as i64;
        let size = stats
            .get("size")
            .and_then(shale_doc::number_as_f64)
            .unwrap_or(0.0) as i64;
        stats.insert("ns", ns.to_string());
        stats.remove("count");
        stats.remove("avgObjSize");
        let mut ts = doc! {"bucketsNs": buckets.to_string(), "bucketCount": count};
        if count > 0 {
            ts.insert("avgBucketSize", size / count);
        }
        ts.extend(self.ts_open.of(ns).counters.document());
        stats.insert("timeseries", ts);
        Ok(Some(stats))
    }
}
