//! Updates and deletes on a time series collection, as mongod 7.0 allows them
//! (docs/design-timeseries.md §5):
//! - deletes take any query and `limit` 0 or 1: each bucket a scan reaches is unpacked, its
//!   measurements matched, and the bucket rewritten without the matched ones (removed when
//!   none is left), in the statement's transaction; `n` counts measurements. The rewrite is a
//!   version 1 bucket, a compressed one from mongod included (its `_id`, start and meta kept);
//! - updates are the metaField-only kind: the query may name only the meta field and the
//!   update may change only it, so an update is an update of the buckets' `meta` (the caller
//!   checks and translates the statement with `translate_filter`/`translate_update`); `n`
//!   and `nModified` count the measurements of the buckets matched and changed.

use super::{buckets_ns, meta_path};
use crate::catalog::Collection;
use crate::collation_scope::{plan_under, statement_vars};
use crate::doc_prepare::updated_document;
use crate::doc_write;
use crate::exec::{Query, QueryShape, Scan, Snap};
use crate::namespace::Namespace;
use crate::oplog::pending::Pending;
use crate::sort::SortSpec;
use crate::user_txn::{Mode, UserTxn};
use crate::write_ops::{each_statement, matcher, DeleteOp, UpdateOp, WriteResult};
use crate::{Database, DbResult};
use bson::{Bson, Document, RawBsonRef, RawDocument, RawDocumentBuf};
use shale_doc::timeseries::bucket::{self, Bucket, UnpackSpec};
use shale_doc::timeseries::TimeseriesOptions;
use shale_doc::{ErrorCode, Matcher, MongoError};
use shale_engine::Txn;
use std::sync::Arc;

impl Database {
    /// `delete` on time series collection `ns`.
    pub fn delete_timeseries(
        &self,
        ns: &Namespace,
        ops: &[DeleteOp],
        ordered: bool,
    ) -> DbResult<WriteResult> {
        let _guard = self.data_lock();
        self.delete_measurements_from(ns, ops, ordered, &mut Mode::Own)
    }

    /// `delete_timeseries` of one retryable write statement, in its statement transaction.
    pub fn delete_timeseries_in(
        &self,
        t: &UserTxn,
        ns: &Namespace,
        ops: &[DeleteOp],
    ) -> DbResult<WriteResult> {
        let _guard = self.data_lock();
        t.with_open(|st| self.delete_measurements_from(ns, ops, true, &mut Mode::User(st)))
    }

    fn delete_measurements_from(
        &self,
        ns: &Namespace,
        ops: &[DeleteOp],
        ordered: bool,
        mode: &mut Mode<'_>,
    ) -> DbResult<WriteResult> {
        let options = self
            .timeseries(ns)
            .ok_or_else(|| super::insert::not_timeseries(ns))?;
        let coll = self.catalog.get(&buckets_ns(ns)?);
        let in_session = mode.in_session();
        each_statement(ops, ordered, in_session, |op| match &coll {
            Some(coll) => self
                .delete_measurements(coll, &options, op, mode)
                .map(|n| (n, 0)),
            None => matcher(&op.filter, &op.vars).map(|_| (0, 0)),
        })
    }

    /// One delete statement: the buckets its meta and time clauses select (`push_down.rs`; all,
    /// when it has none),
    /// each rewritten without the measurements it matches.
    fn delete_measurements(
        &self,
        coll: &Arc<Collection>,
        options: &TimeseriesOptions,
        op: &DeleteOp,
        mode: &mut Mode<'_>,
    ) -> DbResult<i64> {
        let measurements = matcher(&op.filter, &op.vars)?;
        let spec = UnpackSpec {
            time_field: options.time_field.clone(),
            meta_field: options.meta_field.clone(),
        };
        let buckets_filter = super::push_down::bucket_filter(
            &op.filter,
            &options.time_field,
            options.meta_field.as_deref(),
        )
        .unwrap_or_default();
        let vars = statement_vars(coll, &op.vars);
        self.run_txn(mode, |txn, log| {
            let sort = SortSpec::parse(&Document::new())?;
            let p = plan_under(coll, &buckets_filter, &sort, None, &vars)?;
            let shape = QueryShape {
                matcher: Some(matcher(&buckets_filter, &vars)?),
                ..QueryShape::default()
            };
            let mut query = Query::new(Scan::new(coll.clone(), p), shape);
            let mut n = 0;
            while let Some((b, _)) = query.next_match(Snap::Txn(txn))? {
                let limit = op.limit_one.then_some(1 - n);
                n += delete_in_bucket(txn, log, coll, &b, &spec, &measurements, limit)?;
                if op.limit_one && n > 0 {
                    break;
                }
            }
            Ok(n)
        })
    }

    /// `update` on time series collection `ns`: `ops` already translated to the buckets
    /// (`translate_filter`, `translate_update`; `multi`, no upsert). Counts measurements.
    pub fn update_timeseries(
        &self,
        ns: &Namespace,
        ops: &[UpdateOp],
        ordered: bool,
    ) -> DbResult<WriteResult> {
        let buckets = buckets_ns(ns)?;
        each_statement(ops, ordered, false, |op| self.update_buckets(&buckets, op))
    }

    /// One meta update over the buckets: measurements matched and changed.
    fn update_buckets(&self, buckets: &Namespace, op: &UpdateOp) -> DbResult<(i64, i64)> {
        let _guard = self.data_lock();
        let Some(coll) = self.catalog.get(buckets) else {
            matcher(&op.filter, &op.vars)?;
            return Ok((0, 0));
        };
        let vars = statement_vars(&coll, &op.vars);
        let selected = matcher(&op.filter, &vars)?;
        let now = op.vars.now();
        self.in_logged_txn(|txn, log| {
            let sort = SortSpec::parse(&Document::new())?;
            let p = plan_under(&coll, &op.filter, &sort, op.hint.as_ref(), &vars)?;
            let shape = QueryShape {
                matcher: Some(selected.clone()),
                ..QueryShape::default()
            };
            let mut query = Query::new(Scan::new(coll.clone(), p), shape);
            let (mut n, mut modified) = (0, 0);
            while let Some((b, _)) = query.next_match(Snap::Txn(txn))? {
                let count = measurement_count(&b);
                n += count;
                if let Some(new) = updated_document(&op.update, &b, None, now)? {
                    doc_write::replace(txn, log, &coll, &b, &new, false)?;
                    modified += count;
                }
            }
            Ok((n, modified))
        })
    }
}

/// Removes from bucket `b` the measurements `matches` selects (at most `limit`); returns how
/// many it removed.
fn delete_in_bucket(
    txn: &mut Txn,
    log: &mut Pending,
    coll: &Collection,
    b: &RawDocument,
    spec: &UnpackSpec,
    matches: &Matcher,
    limit: Option<i64>,
) -> DbResult<i64> {
    let measurements = bucket::unpack(b, spec)?;
    let mut gone = vec![false; measurements.len()];
    let mut n = 0;
    for (i, m) in measurements.iter().enumerate() {
        if limit.is_some_and(|l| n >= l) {
            break;
        }
        if matches.matches(m)? {
            gone[i] = true;
            n += 1;
        }
    }
    if n == 0 {
        return Ok(0);
    }
    if n as usize == measurements.len() {
        doc_write::remove(txn, log, coll, b)?;
        return Ok(n);
    }
    let old = Document::try_from(b).map_err(corrupt)?;
    let start = old
        .get_document("control")
        .and_then(|c| c.get_document("min"))
        .and_then(|m| m.get_datetime(&spec.time_field))
        .map_err(|_| corrupt("control.min"))?;
    let id = old.get_object_id("_id").map_err(|_| corrupt("_id"))?;
    let mut kept = Bucket::new(id, &spec.time_field, *start, old.get("meta").cloned());
    for (m, _) in measurements.iter().zip(&gone).filter(|(_, g)| !**g) {
        kept.push(
            &m.to_document().map_err(corrupt)?,
            spec.meta_field.as_deref(),
        );
    }
    let new = crate::doc_prepare::to_raw(&kept.to_document())?;
    doc_write::replace(txn, log, coll, b, &new, true)?;
    Ok(n)
}

fn corrupt(e: impl std::fmt::Display) -> MongoError {
    MongoError::new(
        ErrorCode::DataCorruptionDetected,
        format!("time series bucket: {e}"),
    )
}

/// Measurements in bucket `b`: a compressed bucket's `control.count`, else the entries of
/// its longest data column (the time field's, which every measurement has).
fn measurement_count(b: &RawDocumentBuf) -> i64 {
    if let Ok(Some(RawBsonRef::Document(control))) = b.get("control") {
        match control.get("count") {
            Ok(Some(RawBsonRef::Int32(n))) => return i64::from(n),
            Ok(Some(RawBsonRef::Int64(n))) => return n,
            _ => {}
        }
    }
    let Ok(Some(RawBsonRef::Document(data))) = b.get("data") else {
        return 0;
    };
    data.into_iter()
        .filter_map(Result::ok)
        .map(|(_, col)| match col {
            RawBsonRef::Document(c) => c.into_iter().count() as i64,
            _ => 0,
        })
        .max()
        .unwrap_or(0)
}

fn not_meta(meta: &str) -> MongoError {
    MongoError::new(
        ErrorCode::InvalidOptions,
        format!(
            "Cannot perform an update or delete on a time-series collection when querying \
             on a field that is not the metaField '{meta}'"
        ),
    )
}

/// A query on a time series collection as a query on its buckets: it may name only the
/// meta field (through `$and`, `$or`, `$nor`), as mongod 7.0 requires of updates.
pub fn translate_filter(filter: &Document, meta: &str) -> Result<Document, MongoError> {
    let mut out = Document::new();
    for (k, v) in filter {
        match k.as_str() {
            "$and" | "$or" | "$nor" => {
                let Bson::Array(items) = v else {
                    return Err(MongoError::new(
                        ErrorCode::BadValue,
                        format!("{k} must be an array"),
                    ));
                };
                let mut clauses = Vec::with_capacity(items.len());
                for item in items {
                    let Bson::Document(d) = item else {
                        return Err(MongoError::new(
                            ErrorCode::BadValue,
                            format!("{k} argument's entries must be objects"),
                        ));
                    };
                    clauses.push(Bson::Document(translate_filter(d, meta)?));
                }
                out.insert(k, clauses);
            }
            "$comment" => {
                out.insert(k, v.clone());
            }
            "$expr" | "$where" => {
                return Err(MongoError::new(
                    ErrorCode::InvalidOptions,
                    format!(
                        "Cannot use {k} when performing an update or delete on a time-series \
                         collection"
                    ),
                ))
            }
            path => {
                let Some(to) = meta_path(path, meta) else {
                    return Err(not_meta(meta));
                };
                out.insert(to, v.clone());
            }
        }
    }
    Ok(out)
}

/// An update's operators on a time series collection as operators on its buckets' `meta`:
/// only the meta field may change, and only by operators (mongod 7.0's rule).
pub fn translate_update(update: &Document, meta: &str) -> Result<Document, MongoError> {
    let not_meta = || {
        MongoError::new(
            ErrorCode::InvalidOptions,
            format!(
                "Cannot perform an update on a time-series collection which updates a field \
                 that is not the metaField '{meta}'"
            ),
        )
    };
    if !update.keys().next().is_some_and(|k| k.starts_with('$')) {
        return Err(MongoError::new(
            ErrorCode::InvalidOptions,
            "Cannot perform an update on a time-series collection using a replacement document",
        ));
    }
    let mut out = Document::new();
    for (op, args) in update {
        let Bson::Document(args) = args else {
            out.insert(op, args.clone());
            continue;
        };
        let mut moved = Document::new();
        for (path, v) in args {
            let to = meta_path(path, meta).ok_or_else(not_meta)?;
            let v = match (op.as_str(), v) {
                ("$rename", Bson::String(target)) => {
                    Bson::String(meta_path(target, meta).ok_or_else(not_meta)?)
                }
                _ => v.clone(),
            };
            moved.insert(to, v);
        }
        out.insert(op, moved);
    }
    Ok(out)
}

/// The checks mongod 7.0 makes of an update statement on a time series collection before
/// its query and update are translated.
pub fn check_update_statement(
    options: &TimeseriesOptions,
    multi: bool,
    upsert: bool,
    pipeline: bool,
) -> Result<&str, MongoError> {
    let invalid = |why: &str| MongoError::new(ErrorCode::InvalidOptions, why.to_owned());
    let Some(meta) = options.meta_field.as_deref() else {
        return Err(invalid(
            "Cannot perform an update on a time-series collection that does not have a metaField",
        ));
    };
    if !multi {
        return Err(invalid(
            "Cannot perform a non-multi update on a time-series collection",
        ));
    }
    if upsert {
        return Err(invalid(
            "Cannot perform an upsert on a time-series collection",
        ));
    }
    if pipeline {
        return Err(invalid(
            "Cannot perform an update on a time-series collection using a pipeline update",
        ));
    }
    Ok(meta)
}
