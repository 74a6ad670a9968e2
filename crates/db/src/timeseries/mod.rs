//! Time series collections (MongoDB 5.0's, as mongod 7.0 has them; docs/design-timeseries.md
//! is the research they follow, docs/compat.md what is built). A time series collection
//! `db.X` is stored as mongod stores it:
//! - `db.system.buckets.X`, an ordinary collection (options `clusteredIndex: true`,
//!   `timeseries`, `expireAfterSeconds`) whose documents are buckets
//!   (`shale_doc::timeseries::bucket`): mongodump dumps it and mongorestore writes it back
//!   as it does from mongod;
//! - `db.X`, a view record with `timeseries` (format version 5) whose pipeline is
//!   `[{$_internalUnpackBucket: …}]` over the buckets: every read (find, aggregate, count,
//!   distinct) is a read of that view.
//!
//! Writes to `db.X` do not go through the view: inserts choose buckets (`insert.rs`), updates
//! and deletes rewrite them (`modify.rs`), index commands translate keys (`indexes.rs`).
//! Creating one makes the buckets collection, the view and (with a `metaField`) mongod's
//! default index, each its own catalog commit, in that order: a crash between them leaves a
//! buckets collection without its view, which a repeated `create` adopts (as `create` does
//! for one whose options match).

mod indexes;
mod insert;
mod modify;
mod push_down;
mod stats;

pub use indexes::IndexTranslation;
pub(crate) use insert::OpenBuckets;
pub use modify::{check_update_statement, translate_filter, translate_update};
pub(crate) use push_down::push_down;

use crate::ddl_log::view_op;
use crate::namespace::Namespace;
use crate::views::View;
use crate::{Database, DbResult};
use bson::{doc, oid::ObjectId, Bson, DateTime, Document};
use shale_doc::timeseries::TimeseriesOptions;
use shale_doc::{ErrorCode, MongoError};

/// The prefix of a time series collection's buckets collection.
pub const BUCKETS_PREFIX: &str = "system.buckets.";

/// `db.system.buckets.X` for `db.X`.
pub fn buckets_ns(ns: &Namespace) -> DbResult<Namespace> {
    Namespace::new(&ns.db, &format!("{BUCKETS_PREFIX}{}", ns.coll))
}

/// A path on the meta field (`m`, `m.a.b`) as the buckets' path (`meta`, `meta.a.b`);
/// `None` for any other path.
pub(crate) fn meta_path(path: &str, meta: &str) -> Option<String> {
    if path == meta {
        return Some("meta".to_owned());
    }
    path.strip_prefix(meta)?
        .strip_prefix('.')
        .map(|rest| format!("meta.{rest}"))
}

/// `create`'s options other than `timeseries` that a time series collection keeps.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct TimeseriesCreate {
    /// `expireAfterSeconds` (checked by the caller: 0 or more).
    pub expire_after_seconds: Option<i64>,
    /// `storageEngine`, `indexOptionDefaults`, `collation` as given.
    pub other: Document,
}

impl Database {
    /// The options of time series collection `ns`; `None` if it is not one.
    pub fn timeseries(&self, ns: &Namespace) -> Option<TimeseriesOptions> {
        self.catalog.view(ns).and_then(|v| v.timeseries.clone())
    }

    /// `create` with `timeseries`: the buckets collection, the view and the default index.
    pub fn create_timeseries(
        &self,
        ns: &Namespace,
        options: TimeseriesOptions,
        create: TimeseriesCreate,
    ) -> DbResult<()> {
        let buckets = buckets_ns(ns)?;
        let stored = buckets_options(&options, &create);
        {
            let _ddl = self.ddl_lock();
            self.check_timeseries_name_free(ns)?;
            match self.catalog.get(&buckets) {
                // Left by a create a crash interrupted, or restored before its view.
                Some(existing) if existing.options == stored => {}
                Some(_) => {
                    return Err(MongoError::new(
                        ErrorCode::NamespaceExists,
                        format!("Collection {buckets} already exists."),
                    ))
                }
                None => {
                    self.create_logged(&buckets, stored)?;
                }
            }
            let view = View {
                ns: ns.clone(),
                view_on: buckets.coll.clone(),
                pipeline: vec![options.unpack_stage()],
                timeseries: Some(options.clone()),
            };
            let ops = vec![view_op(&view, true)?];
            self.catalog.put_view(view, &self.ddl_commit(ops))?;
        }
        if let Some(meta) = &options.meta_field {
            let spec = doc! {
                "v": 2,
                "key": {meta.clone(): 1, options.time_field.clone(): 1},
                "name": format!("{meta}_1_{}_1", options.time_field),
            };
            self.create_timeseries_indexes(ns, &[spec])?;
        }
        Ok(())
    }

    /// mongod's `checkIfNamespaceExists` answers for a new time series collection.
    fn check_timeseries_name_free(&self, ns: &Namespace) -> DbResult<()> {
        let exists = |what: String| MongoError::new(ErrorCode::NamespaceExists, what);
        if let Some(v) = self.catalog.view(ns) {
            return Err(exists(match v.timeseries {
                Some(_) => format!("A timeseries collection already exists. NS: {ns}"),
                None => format!("A view already exists. NS: {ns}"),
            }));
        }
        if self.catalog.get(ns).is_some() {
            return Err(exists(format!("Collection {ns} already exists.")));
        }
        Ok(())
    }

    /// `drop` of time series collection `ns`: its view, then its buckets. `None` if `ns` is
    /// not one.
    pub(crate) fn drop_timeseries(&self, ns: &Namespace) -> DbResult<Option<usize>> {
        let Some(view) = self.catalog.view(ns).filter(|v| v.timeseries.is_some()) else {
            return Ok(None);
        };
        let ops = vec![view_op(&view, false)?];
        self.catalog.remove_view(ns, &self.ddl_commit(ops))?;
        self.ts_open.forget(ns);
        let buckets = buckets_ns(ns)?;
        self.cursors.kill_namespace(&buckets.to_string());
        let ops = match self.catalog.get(&buckets) {
            Some(c) => vec![crate::ddl_log::ddl_op(
                &ns.db,
                Some(c.uuid),
                doc! {"drop": &buckets.coll},
            )?],
            None => Vec::new(),
        };
        self.catalog
            .remove(self.engine(), &buckets, &self.ddl_commit(ops))?;
        Ok(Some(0))
    }

    /// listCollections' entry for time series view `view`: its buckets collection's
    /// options that a user gave, as mongod's `buildTimeseriesBson` lists them.
    pub(crate) fn timeseries_listing(&self, view: &View) -> Option<Document> {
        view.timeseries.as_ref()?;
        let buckets = Namespace::new(&view.ns.db, &view.view_on).ok()?;
        let stored = self.catalog.get(&buckets).map(|c| c.options.clone());
        let mut options = Document::new();
        for k in [
            "storageEngine",
            "indexOptionDefaults",
            "collation",
            "expireAfterSeconds",
            "timeseries",
        ] {
            if let Some(v) = stored.as_ref().and_then(|o| o.get(k)) {
                options.insert(k, v.clone());
            }
        }
        Some(doc! {
            "name": view.ns.coll.clone(),
            "type": "timeseries",
            "options": options,
            "info": {"readOnly": false},
        })
    }
}

/// A `collMod` of a time series collection: `expireAfterSeconds` (`Some(None)`: `"off"`)
/// and the bucketing options.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct TimeseriesMod {
    /// The new TTL, or its removal.
    pub expire_after_seconds: Option<Option<i64>>,
    /// `collMod`'s `timeseries` document.
    pub timeseries: Option<Bson>,
}

impl Database {
    /// `collMod` of time series collection `ns`: the buckets collection's options and the
    /// view's record change together under the DDL lock (two catalog commits, the buckets'
    /// first; a crash between them leaves the view's bucketing the older one, which reads
    /// every bucket the same).
    pub fn coll_mod_timeseries(&self, ns: &Namespace, change: &TimeseriesMod) -> DbResult<()> {
        let _ddl = self.ddl_lock();
        let view = self
            .catalog
            .view(ns)
            .filter(|v| v.timeseries.is_some())
            .ok_or_else(|| insert::not_timeseries(ns))?;
        let current = view
            .timeseries
            .clone()
            .ok_or_else(|| insert::not_timeseries(ns))?;
        let next = match &change.timeseries {
            Some(ts) => current.coll_mod(ts)?,
            None => current.clone(),
        };
        let buckets = buckets_ns(ns)?;
        let coll = self.existing(&buckets)?;
        let mut options = coll.options.clone();
        match change.expire_after_seconds {
            Some(Some(n)) => {
                options.insert("expireAfterSeconds", n);
            }
            Some(None) => {
                options.remove("expireAfterSeconds");
            }
            None => {}
        }
        options.insert("timeseries", next.to_document());
        let mut changed = coll.with_indexes(coll.indexes.clone());
        changed.options = options;
        let mut command = doc! {"collMod": &buckets.coll};
        if let Some(e) = change.expire_after_seconds {
            command.insert(
                "expireAfterSeconds",
                e.map_or(Bson::String("off".into()), Bson::Int64),
            );
        }
        command.insert("timeseries", next.to_document());
        let ops = vec![crate::ddl_log::ddl_op(&ns.db, Some(coll.uuid), command)?];
        self.catalog.commit(changed, &self.ddl_commit(ops))?;
        if next != current {
            let view = View {
                pipeline: vec![next.unpack_stage()],
                timeseries: Some(next),
                ..(*view).clone()
            };
            self.catalog.put_view(view, &self.ddl_commit(Vec::new()))?;
        }
        Ok(())
    }
}

/// The buckets collection's options, in mongod's order.
fn buckets_options(options: &TimeseriesOptions, create: &TimeseriesCreate) -> Document {
    let mut stored = create.other.clone();
    stored.insert("clusteredIndex", true);
    if let Some(s) = create.expire_after_seconds {
        stored.insert("expireAfterSeconds", s);
    }
    stored.insert("timeseries", options.to_document());
    stored
}

/// What a time series collection's `expireAfterSeconds` has expired at `now`: buckets whose
/// whole span is more than that many seconds old (their start, the `_id`'s timestamp, plus
/// the span), as mongod's TTL monitor expires them. `None`: not a buckets collection or no TTL.
pub fn expiry_filter(options: &Document, now: DateTime) -> Option<Document> {
    let ts = TimeseriesOptions::from_document(options.get_document("timeseries").ok()?).ok()?;
    let seconds = match options.get("expireAfterSeconds")? {
        Bson::Int64(n) => *n,
        Bson::Int32(n) => i64::from(*n),
        _ => return None,
    };
    let cutoff = now.timestamp_millis() / 1000
        - seconds.saturating_add(i64::from(ts.bucket_max_span_seconds));
    let secs = u32::try_from(cutoff.max(0)).unwrap_or(u32::MAX);
    let mut bytes = [0u8; 12];
    bytes[..4].copy_from_slice(&secs.to_be_bytes());
    Some(doc! {"_id": {"$lt": ObjectId::from_bytes(bytes)}})
}

#[cfg(test)]
mod tests;
