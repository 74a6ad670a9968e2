//! Views (MongoDB 3.4's `create` with `viewOn` and `pipeline`): a named pipeline over a
//! collection or another view of the same database. A view stores no documents: reading one
//! runs its pipeline (and the pipelines of the views under it, innermost first) over the
//! collection at the bottom, then the reader's own stages — a find's filter, sort, skip,
//! limit and projection, a count's or distinct's query, an aggregate's pipeline. Views are
//! read-only: every write, index and rename command refuses them with
//! `CommandNotSupportedOnView` (166).
//!
//! A view is a catalog record of its own kind (docs/format-collections.md, version 3):
//! `{formatVersion: 3, kind: "view", ns, viewOn, pipeline}`, under its namespace like a
//! collection's record, so a name is a collection or a view, never both. Creating a view
//! refuses a cycle (`GraphContainsCycle`, 5) and a chain deeper than mongod's 20 views
//! (`ViewDepthLimitExceeded`, 165).

use crate::catalog::{Catalog, CatalogCommit};
use crate::ddl_log::view_op;
use crate::namespace::Namespace;
use crate::query_ops::FindSpec;
use crate::{Database, DbResult};
use bson::{doc, Bson, Document, RawDocumentBuf};
use shale_doc::aggregate::Pipeline;
use shale_doc::timeseries::TimeseriesOptions;
use shale_doc::{ErrorCode, MongoError, Projection};
use std::sync::Arc;

/// The catalog format version of a view record.
pub const VIEW_FORMAT_VERSION: i32 = 3;

/// The catalog format version of a time series collection's view record (a view record
/// with `timeseries`; docs/format-collections.md, version 5): a binary that reads only
/// version 3 refuses it rather than serving the collection as a read-only view.
pub const TIMESERIES_VIEW_FORMAT_VERSION: i32 = 5;

/// mongod's `ViewGraph::kMaxViewDepth`.
pub const MAX_VIEW_DEPTH: usize = 20;

/// One view.
#[derive(Debug, Clone, PartialEq)]
pub struct View {
    /// The view's namespace.
    pub ns: Namespace,
    /// The collection or view it reads, in the same database.
    pub view_on: String,
    /// Its pipeline.
    pub pipeline: Vec<Document>,
    /// Set for a time series collection: its options (`timeseries/`); the view then reads
    /// `system.buckets.<name>` through `$_internalUnpackBucket`, and writes go to its buckets.
    pub timeseries: Option<TimeseriesOptions>,
}

/// True for a catalog record that describes a view.
pub(crate) fn is_view_record(record: &Document) -> bool {
    record.get_str("kind") == Ok("view")
}

impl View {
    fn record(&self) -> Document {
        let version = match self.timeseries {
            Some(_) => TIMESERIES_VIEW_FORMAT_VERSION,
            None => VIEW_FORMAT_VERSION,
        };
        let mut record = doc! {
            "formatVersion": version,
            "kind": "view",
            "ns": self.ns.to_string(),
            "viewOn": self.view_on.clone(),
            "pipeline": self.pipeline.iter().cloned().map(Bson::Document).collect::<Vec<_>>(),
        };
        if let Some(ts) = &self.timeseries {
            record.insert("timeseries", ts.to_document());
        }
        record
    }

    pub(crate) fn from_record(record: &Document) -> DbResult<View> {
        let field = |name: &str| {
            MongoError::new(
                ErrorCode::DataCorruptionDetected,
                format!("view catalog record lacks a valid '{name}': {record}"),
            )
        };
        match record.get("formatVersion") {
            Some(Bson::Int32(VIEW_FORMAT_VERSION | TIMESERIES_VIEW_FORMAT_VERSION)) => {}
            Some(Bson::Int32(v)) if *v > TIMESERIES_VIEW_FORMAT_VERSION => {
                return Err(MongoError::new(
                    ErrorCode::UnsupportedFormat,
                    format!(
                        "view record format {v} is newer than this binary reads \
                         ({TIMESERIES_VIEW_FORMAT_VERSION}): {record}"
                    ),
                ))
            }
            _ => return Err(field("formatVersion")),
        }
        let timeseries = match record.get_document("timeseries") {
            Ok(ts) => Some(TimeseriesOptions::from_document(ts)?),
            Err(_) => None,
        };
        let ns = Namespace::parse(record.get_str("ns").map_err(|_| field("ns"))?)?;
        let view_on = record.get_str("viewOn").map_err(|_| field("viewOn"))?;
        let mut pipeline = Vec::new();
        for stage in record
            .get_array("pipeline")
            .map_err(|_| field("pipeline"))?
        {
            match stage {
                Bson::Document(d) => pipeline.push(d.clone()),
                _ => return Err(field("pipeline")),
            }
        }
        Ok(View {
            ns,
            view_on: view_on.to_owned(),
            pipeline,
            timeseries,
        })
    }

    /// listCollections' entry for this view.
    pub(crate) fn listing(&self) -> Document {
        doc! {
            "name": self.ns.coll.clone(),
            "type": "view",
            "options": {
                "viewOn": self.view_on.clone(),
                "pipeline": self.pipeline.iter().cloned().map(Bson::Document).collect::<Vec<_>>(),
            },
            "info": { "readOnly": true },
        }
    }
}

impl Catalog {
    pub fn view(&self, ns: &Namespace) -> Option<Arc<View>> {
        self.views
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(ns)
            .cloned()
    }

    /// The views of `db` (every database's if `None`), in name order.
    pub fn list_views(&self, db: Option<&str>) -> Vec<Arc<View>> {
        self.views
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .filter(|v| db.is_none_or(|d| v.ns.db == d))
            .cloned()
            .collect()
    }

    /// Stores `view` durably (through `commit`), then publishes it. The caller holds the
    /// DDL lock.
    pub(crate) fn put_view(&self, view: View, commit: CatalogCommit<'_>) -> DbResult<()> {
        let bytes = bson::to_vec(&view.record()).map_err(|e| {
            MongoError::new(ErrorCode::InternalError, format!("encoding a view: {e}"))
        })?;
        commit(self.view_change(&view.ns, Some(bytes)))?;
        self.views
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(view.ns.clone(), Arc::new(view));
        Ok(())
    }

    /// Removes the view `ns` durably; false if there is none. The caller holds the DDL lock.
    pub(crate) fn remove_view(&self, ns: &Namespace, commit: CatalogCommit<'_>) -> DbResult<bool> {
        if self.view(ns).is_none() {
            return Ok(false);
        }
        commit(self.view_change(ns, None))?;
        self.views
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(ns);
        Ok(true)
    }

    /// Removes every view of `db` in one change; false if there is none. The caller holds
    /// the DDL lock.
    pub(crate) fn remove_views(&self, db: &str, commit: CatalogCommit<'_>) -> DbResult<bool> {
        let gone: Vec<Namespace> = self
            .list_views(Some(db))
            .iter()
            .map(|v| v.ns.clone())
            .collect();
        if gone.is_empty() {
            return Ok(false);
        }
        commit(self.removal(gone.iter()))?;
        let mut views = self.views.write().unwrap_or_else(|p| p.into_inner());
        for ns in &gone {
            views.remove(ns);
        }
        Ok(true)
    }
}

impl Database {
    /// `create` with `viewOn`: a new view of `db` over `view_on` running `pipeline`.
    pub fn create_view(
        &self,
        ns: &Namespace,
        view_on: &str,
        pipeline: Vec<Document>,
    ) -> DbResult<()> {
        let on = Namespace::new(&ns.db, view_on)?;
        if view_on.starts_with(crate::timeseries::BUCKETS_PREFIX) {
            // mongod 6.1+: a time series collection's buckets are read through it alone.
            return Err(MongoError::new(
                ErrorCode::InvalidNamespace,
                format!("Invalid view: cannot define a view over a time-series buckets collection: {on}"),
            ));
        }
        check_view_pipeline(&pipeline)?;
        let _ddl = self.ddl_lock();
        if self.catalog.get(ns).is_some() || self.catalog.view(ns).is_some() {
            return Err(MongoError::new(
                ErrorCode::NamespaceExists,
                format!("Namespace {ns} already exists"),
            ));
        }
        self.check_view_graph(ns, &on)?;
        let view = View {
            ns: ns.clone(),
            view_on: view_on.to_owned(),
            pipeline,
            timeseries: None,
        };
        let ops = vec![view_op(&view, true)?];
        self.catalog.put_view(view, &self.ddl_commit(ops))
    }

    /// Refuses a chain from `on` that comes back to `ns` or passes `MAX_VIEW_DEPTH` views.
    fn check_view_graph(&self, ns: &Namespace, on: &Namespace) -> DbResult<()> {
        let mut path = vec![ns.to_string(), on.to_string()];
        let mut at = on.clone();
        let mut depth = 1;
        while let Some(v) = self.catalog.view(&at) {
            at = Namespace::new(&at.db, &v.view_on)?;
            path.push(at.to_string());
            if at == *ns {
                return Err(MongoError::new(
                    ErrorCode::GraphContainsCycle,
                    format!("View cycle detected: [{}]", path.join(" => ")),
                ));
            }
            depth += 1;
            if depth >= MAX_VIEW_DEPTH {
                return Err(depth_exceeded());
            }
        }
        Ok(())
    }

    /// CommandNotSupportedOnView (166) if `ns` is a view: what every write refuses.
    pub(crate) fn refuse_view(&self, ns: &Namespace) -> DbResult<()> {
        if self.catalog.view(ns).is_some() {
            return Err(MongoError::new(
                ErrorCode::CommandNotSupportedOnView,
                format!("Namespace {ns} is a view, not a collection"),
            ));
        }
        Ok(())
    }

    /// Whether `ns` names a view.
    pub fn is_view(&self, ns: &Namespace) -> bool {
        self.catalog.view(ns).is_some()
    }

    /// For a view: the collection at the bottom of its chain and the stages that compute the
    /// view from it (innermost view's first). `None` if `ns` is not a view.
    pub(crate) fn resolve_view(
        &self,
        ns: &Namespace,
    ) -> DbResult<Option<(Namespace, Vec<Document>)>> {
        let Some(mut view) = self.catalog.view(ns) else {
            return Ok(None);
        };
        let mut stages: Vec<Document> = Vec::new();
        for _ in 0..MAX_VIEW_DEPTH {
            let mut before = view.pipeline.clone();
            before.append(&mut stages);
            stages = before;
            let on = Namespace::new(&view.ns.db, &view.view_on)?;
            match self.catalog.view(&on) {
                Some(inner) => view = inner,
                None => return Ok(Some((on, stages))),
            }
        }
        Err(depth_exceeded())
    }

    /// A find on view `ns`: its stages, then the find's as stages, run over the collection
    /// under it; the find's projection is applied to the results (find's own projection
    /// rules). `None` if `ns` is not a view.
    pub(crate) fn find_on_view(
        &self,
        ns: &Namespace,
        spec: &FindSpec,
    ) -> DbResult<Option<Vec<RawDocumentBuf>>> {
        let Some((base, mut stages)) = self.resolve_view(ns)? else {
            return Ok(None);
        };
        stages.extend(find_stages(spec));
        let docs = self.aggregate(&base, &stages, spec.hint.clone(), &spec.vars)?;
        project(spec, docs).map(Some)
    }

    /// `find_on_view` in session transaction `t`.
    pub(crate) fn find_on_view_in(
        &self,
        t: &crate::UserTxn,
        ns: &Namespace,
        spec: &FindSpec,
    ) -> DbResult<Option<Vec<RawDocumentBuf>>> {
        let Some((base, mut stages)) = self.resolve_view(ns)? else {
            return Ok(None);
        };
        stages.extend(find_stages(spec));
        let docs = self.aggregate_in(t, &base, &stages, spec.hint.clone(), &spec.vars)?;
        project(spec, docs).map(Some)
    }
}

/// A find's projection applied to documents a view computed.
fn project(spec: &FindSpec, docs: Vec<RawDocumentBuf>) -> DbResult<Vec<RawDocumentBuf>> {
    match &spec.projection {
        Some(p) if !p.is_empty() => {
            let raw = crate::doc_prepare::to_raw(p)?;
            let projection = Projection::parse_with(&raw, &spec.vars)?;
            docs.iter().map(|d| projection.apply(d, None)).collect()
        }
        _ => Ok(docs),
    }
}

/// The stages a find's filter, sort, skip and limit become over a view.
pub(crate) fn find_stages(spec: &FindSpec) -> Vec<Document> {
    let mut stages = Vec::new();
    if !spec.filter.is_empty() {
        stages.push(doc! { "$match": spec.filter.clone() });
    }
    if let Some(sort) = spec.sort.as_ref().filter(|s| !s.is_empty()) {
        stages.push(doc! { "$sort": sort.clone() });
    }
    if spec.skip > 0 {
        stages.push(doc! { "$skip": spec.skip as i64 });
    }
    if let Some(limit) = spec.limit {
        stages.push(doc! { "$limit": limit as i64 });
    }
    stages
}

fn depth_exceeded() -> MongoError {
    MongoError::new(
        ErrorCode::ViewDepthLimitExceeded,
        format!("View depth too deep or view cycle detected; maximum depth is {MAX_VIEW_DEPTH}"),
    )
}

/// A view's pipeline must parse, and may not write or supply its own documents.
fn check_view_pipeline(pipeline: &[Document]) -> DbResult<()> {
    let parsed = Pipeline::parse(pipeline)?;
    for name in parsed.stage_names() {
        if matches!(name, "$out" | "$merge" | "$documents") {
            return Err(MongoError::new(
                ErrorCode::OptionNotSupportedOnView,
                format!("{name} cannot be used in a view definition"),
            ));
        }
    }
    Ok(())
}
