//! Read commands: find (a snapshot query a client cursor can hold), count (O(1) from the
//! engine's exact count when there is no filter), distinct, and explain.

use crate::collation_scope::{plan_under, statement_vars};
use crate::doc_prepare::to_raw;
use crate::exec::{Query, QueryShape, Scan, ViewQuery};
use crate::index_keys::present_values;
use crate::namespace::Namespace;
use crate::sort::SortSpec;
use crate::write_ops::matcher;
use crate::{Database, DbResult};
use bson::{doc, Bson, Document, RawDocumentBuf};
use shale_doc::collation::value::collate;
use shale_doc::{compare_values, Collation, Projection, Variables};
use std::sync::Arc;
use std::time::Instant;

/// A find: filter, sort, projection, skip, limit, hint, and the variables its expressions
/// read (the command's `let`, `$$NOW`).
#[derive(Debug, Default, Clone)]
pub struct FindSpec {
    /// The filter.
    pub filter: Document,
    /// The sort, if any.
    pub sort: Option<Document>,
    /// The projection, if any.
    pub projection: Option<Document>,
    /// Documents to skip.
    pub skip: u64,
    /// Documents to return at most.
    pub limit: Option<u64>,
    /// The index hint (a name or a key pattern).
    pub hint: Option<Bson>,
    /// The variables its expressions read.
    pub vars: Variables,
}

impl Database {
    /// Plans and starts a query on one snapshot. A missing collection gives no documents.
    pub fn find(&self, ns: &Namespace, spec: &FindSpec) -> DbResult<ViewQuery> {
        if let Some(docs) = self.find_on_view(ns, spec)? {
            return Ok(ViewQuery::computed(self.engine().read_view(), docs));
        }
        let _guard = self.data_lock();
        let query = self.query_for(ns, spec)?;
        // A snapshot read reads its pinned snapshot (`snapshot_read.rs`).
        let view = match crate::snapshot_read::active() {
            Some(read) => read.view(),
            None => self.engine().read_view(),
        };
        Ok(match query {
            Some(q) => ViewQuery::new(view, q),
            None => ViewQuery::empty(view),
        })
    }

    /// Plans a query with no snapshot and no lock (the caller holds the data lock): `None`
    /// when the collection does not exist. The spec is checked either way.
    pub(crate) fn query_for(&self, ns: &Namespace, spec: &FindSpec) -> DbResult<Option<Query>> {
        let coll = match crate::snapshot_read::active() {
            Some(read) => read.collection(ns, self.catalog.get(ns))?,
            None => self.visible_collection(ns),
        };
        let vars = match &coll {
            Some(c) => statement_vars(c, &spec.vars),
            None => spec.vars.clone(),
        };
        let matcher = matcher(&spec.filter, &vars)?;
        let sort = SortSpec::parse(spec.sort.as_ref().unwrap_or(&Document::new()))?
            .collated(vars.collation());
        let projection = match &spec.projection {
            Some(p) if !p.is_empty() => Some(Projection::parse_with(&to_raw(p)?, &vars)?),
            _ => None,
        };
        let Some(coll) = coll else {
            return Ok(None);
        };
        let p = plan_under(&coll, &spec.filter, &sort, spec.hint.as_ref(), &vars)?;
        let in_memory = (!p.sort_covered && !sort.is_empty()).then_some(sort);
        let shape = QueryShape {
            matcher: (!spec.filter.is_empty()).then_some(matcher),
            sort: in_memory,
            skip: spec.skip,
            limit: spec.limit,
            projection,
            // The command's `allowDiskUse`, read when the query is planned (its getMores
            // keep it with the plan).
            spill_dir: crate::op_context::allow_disk_use()
                .then(|| self.engine().dir().to_path_buf()),
        };
        Ok(Some(Query::new(Scan::new(coll, p), shape)))
    }

    /// Number of documents matching `filter`, after skip and limit. Without a filter it is
    /// the engine's exact count (no scan).
    pub fn count(
        &self,
        ns: &Namespace,
        filter: &Document,
        skip: u64,
        limit: Option<u64>,
        hint: Option<Bson>,
        vars: &Variables,
    ) -> DbResult<u64> {
        if filter.is_empty() && hint.is_none() && !self.is_view(ns) {
            let total = {
                let _guard = self.data_lock();
                self.catalog
                    .get(ns)
                    .map_or(0, |c| c.docs.count().max(0) as u64)
            };
            let n = total.saturating_sub(skip);
            return Ok(limit.filter(|l| *l > 0).map_or(n, |l| n.min(l)));
        }
        let mut q = self.find(ns, &count_spec(filter, skip, limit, hint, vars))?;
        let mut n = 0;
        while q.next_doc()?.is_some() {
            n += 1;
        }
        Ok(n)
    }

    /// The distinct values of `key` among documents matching `filter` (array elements count
    /// one by one), in MongoDB's order.
    pub fn distinct(
        &self,
        ns: &Namespace,
        key: &str,
        filter: &Document,
        vars: &Variables,
    ) -> DbResult<Vec<Bson>> {
        let collation = self.collation_of(ns, vars);
        let mut q = self.find(ns, &distinct_spec(filter, vars))?;
        let docs = std::iter::from_fn(|| q.next_doc().transpose());
        distinct_values(docs, key, collation.as_deref())
    }

    /// The collation a statement with `vars` runs under on `ns` (`None`: simple).
    pub(crate) fn collation_of(&self, ns: &Namespace, vars: &Variables) -> Option<Arc<Collation>> {
        match self.visible_collection(ns) {
            Some(c) => statement_vars(&c, vars).collation().cloned(),
            None => vars.collation().cloned(),
        }
    }

    /// `explain` of a find: the plan, and with `executionStats` the work of running it.
    pub fn explain_find(
        &self,
        ns: &Namespace,
        spec: &FindSpec,
        execute: bool,
    ) -> DbResult<Document> {
        let started = Instant::now();
        let mut q = self.find(ns, spec)?;
        let mut out = doc! {};
        let winning = match q.query() {
            Some(query) => {
                let sort = if query.plan().sort_covered {
                    None
                } else {
                    spec.sort.as_ref()
                };
                query.plan().explain(&spec.filter, sort)
            }
            None => doc! { "stage": "EOF" },
        };
        out.insert(
            "queryPlanner",
            doc! {
                "namespace": ns.to_string(),
                "parsedQuery": spec.filter.clone(),
                "indexFilterSet": false,
                "winningPlan": winning,
                "rejectedPlans": [],
            },
        );
        if execute {
            let mut returned = 0i64;
            while q.next_doc()?.is_some() {
                returned += 1;
            }
            let stats = q.query().map(|x| x.stats()).unwrap_or_default();
            out.insert(
                "executionStats",
                doc! {
                    "executionSuccess": true,
                    "nReturned": shale_doc::append_number(returned),
                    "executionTimeMillis": shale_doc::append_number(started.elapsed().as_millis() as i64),
                    "totalKeysExamined": shale_doc::append_number(stats.keys_examined as i64),
                    "totalDocsExamined": shale_doc::append_number(stats.docs_examined as i64),
                },
            );
        }
        Ok(out)
    }
}

/// The find a filtered `count` runs (only `_id` is read back).
fn count_spec(
    filter: &Document,
    skip: u64,
    limit: Option<u64>,
    hint: Option<Bson>,
    vars: &Variables,
) -> FindSpec {
    FindSpec {
        filter: filter.clone(),
        vars: vars.clone(),
        skip,
        limit: limit.filter(|l| *l > 0),
        hint,
        projection: Some(doc! {"_id": 1}),
        ..FindSpec::default()
    }
}

/// The find a `distinct` runs.
pub(crate) fn distinct_spec(filter: &Document, vars: &Variables) -> FindSpec {
    FindSpec {
        filter: filter.clone(),
        vars: vars.clone(),
        ..FindSpec::default()
    }
}

/// The distinct values of `key` in `docs`, in MongoDB's order under `collation` (values it
/// calls equal count once: the first one read).
pub(crate) fn distinct_values(
    docs: impl Iterator<Item = DbResult<RawDocumentBuf>>,
    key: &str,
    collation: Option<&Collation>,
) -> DbResult<Vec<Bson>> {
    let mut values = Vec::new();
    for d in docs {
        for v in present_values(&d?, key)? {
            values.push((collate(collation, &v), v));
        }
    }
    values.sort_by(|a, b| compare_values(&a.0, &b.0));
    values.dedup_by(|a, b| compare_values(&a.0, &b.0) == std::cmp::Ordering::Equal);
    Ok(values.into_iter().map(|(_, v)| v).collect())
}
