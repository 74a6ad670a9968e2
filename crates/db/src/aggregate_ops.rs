//! `aggregate` on a collection: the pipeline's leading `$match`/`$sort`/`$skip`/`$limit` run
//! as a planned query (so they use indexes), the remaining stages run in `shale_doc`'s
//! pipeline executor over that query's documents, and `$lookup` reads foreign collections of
//! the same database through a snapshot query. Results are computed whole (the executor's
//! output borrows the pipeline), then served by a cursor, or, when the pipeline ends in
//! `$out`/`$merge`, written (`aggregate_write.rs`) and answered with none. A pipeline led by
//! `$documents` runs on no collection (`{aggregate: 1}`).

use crate::exec::Snap;
use crate::namespace::Namespace;
use crate::query_ops::FindSpec;
use crate::{Database, DbResult};
use bson::{Document, RawDocument, RawDocumentBuf};
use shale_doc::aggregate::{LookupResolver, Pipeline, RunOptions, WriteStage};
use shale_doc::{ErrorCode, MongoError, Variables};
use shale_engine::Txn;

/// Largest total size of an aggregation's results held for its cursor.
pub(crate) const MAX_RESULT_BYTES: usize = 256 << 20;

/// `$lookup`'s foreign collections: each scanned on its own snapshot outside a transaction,
/// or on the transaction's (its own writes included) inside one, where the caller already
/// holds the data lock, so nothing here takes it again.
struct Foreign<'a> {
    db: &'a Database,
    name: &'a str,
    txn: Option<&'a Txn>,
}

impl LookupResolver for Foreign<'_> {
    fn scan(&self, collection: &str) -> Result<Vec<RawDocumentBuf>, MongoError> {
        let ns = Namespace::new(self.name, collection)?;
        let mut out = Vec::new();
        match self.txn {
            None => {
                let mut q = self.db.find(&ns, &FindSpec::default())?;
                while let Some(d) = q.next_doc()? {
                    out.push(d);
                }
            }
            Some(txn) => {
                if let Some(mut q) = self.db.query_for(&ns, &FindSpec::default())? {
                    while let Some(d) = q.next(Snap::Txn(txn))? {
                        out.push(d);
                    }
                }
            }
        }
        Ok(out)
    }
}

fn write_stage_name(stage: &WriteStage) -> &'static str {
    match stage {
        WriteStage::Out(_) => "$out",
        WriteStage::Merge(_) => "$merge",
    }
}

/// The pipeline's run options: the command's `allowDiskUse` (op_context.rs) decides the
/// code a stage past its memory limit fails with.
fn run_options() -> RunOptions {
    RunOptions {
        allow_disk_use: crate::op_context::allow_disk_use(),
        memory_limit_bytes: crate::exec::sort_memory_limit(),
    }
}

/// Collects a pipeline's output, refusing more than `MAX_RESULT_BYTES` in all.
fn collect_results(
    results: impl Iterator<Item = DbResult<RawDocumentBuf>>,
) -> DbResult<Vec<RawDocumentBuf>> {
    let mut out = Vec::new();
    let mut bytes = 0usize;
    for d in results {
        let d = d?;
        bytes += d.as_bytes().len();
        if bytes > MAX_RESULT_BYTES {
            return Err(too_large());
        }
        out.push(d);
    }
    Ok(out)
}

/// The error for results past `MAX_RESULT_BYTES` (a transaction's materialized find too).
pub(crate) fn too_large() -> MongoError {
    MongoError::new(
        ErrorCode::QueryExceededMemoryLimitNoDiskUseAllowed,
        format!("aggregation results exceed {MAX_RESULT_BYTES} bytes; add $limit or $project"),
    )
}

fn to_doc(d: &RawDocument) -> DbResult<Document> {
    Document::try_from(d).map_err(|e| MongoError::new(ErrorCode::BadValue, e.to_string()))
}

/// The find that runs a pipeline's leading `$match`/`$sort`/`$skip`/`$limit`.
fn prefix_spec(
    prefix: &shale_doc::aggregate::Prefix<'_>,
    hint: Option<bson::Bson>,
    vars: &Variables,
) -> DbResult<FindSpec> {
    Ok(FindSpec {
        filter: prefix.filter.map(to_doc).transpose()?.unwrap_or_default(),
        sort: prefix.sort.map(to_doc).transpose()?,
        skip: prefix.skip,
        limit: prefix.limit,
        hint,
        vars: vars.clone(),
        ..FindSpec::default()
    })
}

impl Database {
    /// `vars` with the collation an aggregate on `ns` runs under (its own, else the
    /// collection's default).
    pub(crate) fn aggregate_vars(&self, ns: &Namespace, vars: &Variables) -> Variables {
        match self.visible_collection(ns) {
            Some(c) => crate::collation_scope::statement_vars(&c, vars),
            None => vars.clone(),
        }
    }

    /// Runs `stages` over collection `ns` and returns every result document; the stages'
    /// expressions read `vars` (the command's `let`, `$$NOW`).
    pub fn aggregate(
        &self,
        ns: &Namespace,
        stages: &[Document],
        hint: Option<bson::Bson>,
        vars: &Variables,
    ) -> DbResult<Vec<RawDocumentBuf>> {
        if let Some((base, mut all)) = self.resolve_view(ns)? {
            all.extend(stages.iter().cloned());
            return self.aggregate_on(&base, &all, hint, &view_vars(vars)?);
        }
        self.aggregate_on(ns, stages, hint, vars)
    }

    /// `aggregate` on a collection (not a view).
    fn aggregate_on(
        &self,
        ns: &Namespace,
        stages: &[Document],
        hint: Option<bson::Bson>,
        vars: &Variables,
    ) -> DbResult<Vec<RawDocumentBuf>> {
        // A time series view's filter on meta and time also selects its buckets.
        let pushed = crate::timeseries::push_down(stages);
        let stages = pushed.as_deref().unwrap_or(stages);
        let vars = &self.aggregate_vars(ns, vars);
        let pipeline = Pipeline::parse_with(stages, vars)?;
        if pipeline.leads_with_documents() {
            return Err(MongoError::new(
                ErrorCode::InvalidNamespace,
                "$documents can only be run with database-level aggregation ({aggregate: 1})",
            ));
        }
        let prefix = pipeline.prefix();
        let spec = prefix_spec(&prefix, hint, vars)?;
        let mut query = self.find(ns, &spec)?;
        let input = std::iter::from_fn(move || query.next_doc().transpose());
        let resolver = Foreign {
            db: self,
            name: &ns.db,
            txn: None,
        };
        let results =
            collect_results(pipeline.run_from(prefix.stages, input, &resolver, run_options()))?;
        self.finish(&ns.db, &pipeline, results, vars)
    }

    /// `{aggregate: 1}` in database `db`: a pipeline led by `$documents` over no collection.
    pub fn aggregate_collectionless(
        &self,
        db: &str,
        stages: &[Document],
        vars: &Variables,
    ) -> DbResult<Vec<RawDocumentBuf>> {
        crate::namespace::validate_db_name(db)?;
        let pipeline = Pipeline::parse_with(stages, vars)?;
        if !pipeline.leads_with_documents() {
            let first = pipeline
                .stage_names()
                .first()
                .copied()
                .unwrap_or("an empty pipeline");
            return Err(MongoError::new(
                ErrorCode::InvalidNamespace,
                format!("{{aggregate: 1}} is not valid for '{first}'; a collection is required."),
            ));
        }
        let resolver = Foreign {
            db: self,
            name: db,
            txn: None,
        };
        let results =
            collect_results(pipeline.run_from(0, std::iter::empty(), &resolver, run_options()))?;
        self.finish(db, &pipeline, results, vars)
    }

    /// Runs `stages` (none of them a collection's: `$listLocalSessions`'s remainder) over
    /// `input` in database `db`, writing when they end in `$out`/`$merge`.
    pub fn aggregate_documents(
        &self,
        db: &str,
        stages: &[Document],
        input: Vec<RawDocumentBuf>,
        vars: &Variables,
    ) -> DbResult<Vec<RawDocumentBuf>> {
        let pipeline = Pipeline::parse_with(stages, vars)?;
        let resolver = Foreign {
            db: self,
            name: db,
            txn: None,
        };
        let input = input.into_iter().map(Ok);
        let results = collect_results(pipeline.run_from(0, input, &resolver, run_options()))?;
        self.finish(db, &pipeline, results, vars)
    }

    /// The results a client gets: `results` themselves, or none once a write stage has
    /// written them.
    fn finish(
        &self,
        db: &str,
        pipeline: &Pipeline,
        results: Vec<RawDocumentBuf>,
        vars: &Variables,
    ) -> DbResult<Vec<RawDocumentBuf>> {
        match pipeline.write_stage() {
            Some(stage) => {
                self.write_results(db, stage, results, vars)?;
                Ok(Vec::new())
            }
            None => Ok(results),
        }
    }

    /// `aggregate` inside a session transaction: every stage reads `txn`'s snapshot and own
    /// writes. The caller holds the data lock.
    pub(crate) fn aggregate_txn(
        &self,
        txn: &Txn,
        ns: &Namespace,
        stages: &[Document],
        hint: Option<bson::Bson>,
        vars: &Variables,
    ) -> DbResult<Vec<RawDocumentBuf>> {
        let resolved = self.resolve_view(ns)?;
        let (ns, stages) = match &resolved {
            Some((base, view_stages)) => {
                let mut all = view_stages.clone();
                all.extend(stages.iter().cloned());
                (base, std::borrow::Cow::Owned(all))
            }
            None => (ns, std::borrow::Cow::Borrowed(stages)),
        };
        let stages = match crate::timeseries::push_down(&stages) {
            Some(pushed) => std::borrow::Cow::Owned(pushed),
            None => stages,
        };
        let vars = &match resolved {
            Some(_) => view_vars(vars)?,
            None => self.aggregate_vars(ns, vars),
        };
        let pipeline = Pipeline::parse_with(&stages, vars)?;
        if let Some(name) = pipeline.write_stage().map(write_stage_name) {
            return Err(MongoError::new(
                ErrorCode::OperationNotSupportedInTransaction,
                format!("{name} cannot be used in a transaction"),
            ));
        }
        let prefix = pipeline.prefix();
        let spec = prefix_spec(&prefix, hint, vars)?;
        let mut query = self.query_for(ns, &spec)?;
        let input = std::iter::from_fn(move || match &mut query {
            Some(q) => q.next(Snap::Txn(txn)).transpose(),
            None => None,
        });
        let resolver = Foreign {
            db: self,
            name: &ns.db,
            txn: Some(txn),
        };
        collect_results(pipeline.run_from(prefix.stages, input, &resolver, run_options()))
    }

    /// The stage names of a pipeline and how its prefix is planned (aggregate explain).
    pub fn explain_aggregate(
        &self,
        ns: &Namespace,
        stages: &[Document],
        hint: Option<bson::Bson>,
        vars: &Variables,
    ) -> DbResult<Document> {
        let pipeline = Pipeline::parse_with(stages, vars)?;
        let prefix = pipeline.prefix();
        let spec = prefix_spec(&prefix, hint, vars)?;
        let mut out = self.explain_find(ns, &spec, false)?;
        let names: Vec<&str> = pipeline
            .stage_names()
            .into_iter()
            .skip(prefix.stages)
            .collect();
        out.insert("stages", names);
        Ok(out)
    }
}
/// The variables a read of a view runs with: a view's collation is the simple one (views
/// with a collation are refused at `create`), never its base collection's default, and a
/// read may not name another (mongod's 167).
fn view_vars(vars: &Variables) -> DbResult<Variables> {
    if vars.collation().is_some() {
        return Err(MongoError::new(
            ErrorCode::OptionNotSupportedOnView,
            "Cannot override a view's default collation",
        ));
    }
    Ok(vars.with_collation(None))
}
