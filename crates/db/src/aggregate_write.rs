//! The writing stages of an aggregation, `$out` and `$merge` (parsed in `shale_doc`'s
//! `aggregate/write_stage.rs`): the pipeline's documents are computed first, then written.
//!
//! `$out` writes into a temporary collection `tmp.agg_out.<uuid>` of the target's database,
//! created with the target's options and indexes, then renames it over the target in one
//! catalog write (`Catalog::replace`): readers see the old contents or the new, never a mix,
//! and a failure leaves the target as it was (the temporary collection is dropped; one left by
//! a crash is dropped at the next open). If the target's options or indexes changed while the
//! documents were written, the rename is refused (`CommandFailed`), as mongod refuses it.
//!
//! `$merge` writes document by document into the target (created if missing): each source
//! document is looked up in the target by its `on` fields (which a unique index must cover,
//! 51183), then replaced, merged (`$set`), kept, updated by the `whenMatched` pipeline or
//! refused; an unmatched one inserted, discarded or refused (13113). Like mongod's, a `$merge`
//! is not atomic: the writes before a failure stay.
//!
//! Neither stage may write to a view, a `system.` collection or the `admin`, `local` and
//! `config` databases, nor run in a session transaction (the server refuses that).

use crate::catalog::Collection;
use crate::doc_prepare::prepare_for_insert;
use crate::namespace::Namespace;
use crate::write_ops::UpdateOp;
use crate::{Database, DbResult};
use bson::raw::RawBsonRef;
use bson::{doc, Bson, Document, RawDocument, RawDocumentBuf};
use shale_doc::aggregate::{MergeSpec, WhenMatched, WhenNotMatched, WriteStage, WriteTarget};
use shale_doc::{ErrorCode, MongoError, UpdateSpec, Variables};

/// Databases no aggregation writes into.
const INTERNAL_DATABASES: &[&str] = &["admin", "local", "config"];

/// The name prefix of `$out`'s temporary collections.
pub(crate) const TEMP_OUT_PREFIX: &str = "tmp.agg_out.";

impl Database {
    /// Writes `docs`, the output of a pipeline run in database `db`, as `stage` says.
    pub(crate) fn write_results(
        &self,
        db: &str,
        stage: &WriteStage,
        docs: Vec<RawDocumentBuf>,
        vars: &Variables,
    ) -> DbResult<()> {
        match stage {
            WriteStage::Out(target) => {
                let ns = self.stage_target("$out", db, target)?;
                self.out(&ns, docs)
            }
            WriteStage::Merge(spec) => {
                let ns = self.stage_target("$merge", db, &spec.into)?;
                self.merge(&ns, spec, docs, vars)
            }
        }
    }

    /// Drops the temporary collections of `$out`s a crash interrupted (at open; on a member
    /// once the oplog is enabled, each with its `drop` entry, as mongod drops them when it
    /// becomes primary).
    pub(crate) fn drop_temporary_out_collections(&self) -> DbResult<()> {
        let _ddl = self.ddl_lock();
        for c in self.catalog.list(None) {
            if c.ns.coll.starts_with(TEMP_OUT_PREFIX) {
                tracing::warn!(ns = %c.ns, "dropping a temporary $out collection left by a crash");
                let drop = doc! {"drop": &c.ns.coll};
                let ops = vec![crate::ddl_log::ddl_op(&c.ns.db, Some(c.uuid), drop)?];
                self.catalog
                    .remove(self.engine(), &c.ns, &self.ddl_commit(ops))?;
            }
        }
        Ok(())
    }

    /// The namespace a write stage names, refused as mongod refuses it.
    fn stage_target(&self, stage: &str, db: &str, target: &WriteTarget) -> DbResult<Namespace> {
        let db = target.db.as_deref().unwrap_or(db);
        let ns = Namespace::new(db, &target.coll).map_err(|_| {
            MongoError::new(
                ErrorCode::InvalidNamespace,
                format!("Invalid {stage} target namespace, {db}.{}", target.coll),
            )
        })?;
        let (special, internal) = match stage {
            "$out" => (ErrorCode::Location17385, ErrorCode::Location31321),
            _ => (ErrorCode::Location31319, ErrorCode::Location31320),
        };
        if ns.coll.starts_with("system.") {
            return Err(MongoError::new(
                special,
                format!("Can't {stage} to special collection: {}", ns.coll),
            ));
        }
        if INTERNAL_DATABASES.contains(&ns.db.as_str()) {
            return Err(MongoError::new(
                internal,
                format!("Can't {stage} to internal database: {}", ns.db),
            ));
        }
        self.refuse_view(&ns)?;
        Ok(ns)
    }

    /// `$out`: the documents replace the target's, through a temporary collection.
    fn out(&self, target: &Namespace, docs: Vec<RawDocumentBuf>) -> DbResult<()> {
        let original = self.catalog.get(target);
        if let Some(c) = &original {
            if c.options.get_bool("capped").unwrap_or(false) {
                return Err(MongoError::new(
                    ErrorCode::Location17152,
                    format!("namespace '{target}' is capped so it can't be used for $out"),
                ));
            }
        }
        let temp = Namespace::new(
            &target.db,
            &format!("{TEMP_OUT_PREFIX}{}", bson::Uuid::new()),
        )?;
        let (options, specs) = match &original {
            Some(c) => (c.options.clone(), crate::ddl::index_specs(c)),
            None => (Document::new(), Vec::new()),
        };
        self.create_with_indexes(&temp, options, &specs)?;
        let result = self
            .fill(&temp, docs)
            .and_then(|()| self.replace_collection(&temp, target, original.as_deref()));
        if result.is_err() {
            // Best effort: a temporary collection left behind is dropped at the next open.
            let _ = self.drop_collection(&temp);
        }
        result
    }

    /// Inserts `docs` into `ns` in order, stopping at the first refused one.
    fn fill(&self, ns: &Namespace, docs: Vec<RawDocumentBuf>) -> DbResult<()> {
        let prepared = docs
            .into_iter()
            .map(prepare_for_insert)
            .collect::<DbResult<Vec<_>>>()?;
        let result = self.insert(ns, &prepared, true)?;
        match result.errors.into_iter().next() {
            Some((_, e)) => Err(e),
            None => Ok(()),
        }
    }

    /// `$merge`: each document matched by its `on` fields and written per the modes.
    fn merge(
        &self,
        target: &Namespace,
        spec: &MergeSpec,
        docs: Vec<RawDocumentBuf>,
        vars: &Variables,
    ) -> DbResult<()> {
        self.check_on_fields(target, &spec.on)?;
        for doc in docs {
            self.merge_one(target, spec, &doc, vars)?;
        }
        Ok(())
    }

    /// `on` other than `_id` needs a unique index on exactly those fields (51183).
    fn check_on_fields(&self, target: &Namespace, on: &[String]) -> DbResult<()> {
        if on == ["_id"] {
            return Ok(());
        }
        let coll = self.catalog.get(target);
        let supported = coll.as_deref().is_some_and(|c| has_unique_index_on(c, on));
        if supported {
            return Ok(());
        }
        Err(MongoError::new(
            ErrorCode::Location51183,
            "Cannot find index to verify that join fields will be unique",
        ))
    }

    fn merge_one(
        &self,
        target: &Namespace,
        spec: &MergeSpec,
        doc: &RawDocument,
        vars: &Variables,
    ) -> DbResult<()> {
        let filter = on_filter(doc, &spec.on)?;
        let update = match &spec.when_matched {
            WhenMatched::Fail => return self.insert_new(target, doc),
            WhenMatched::KeepExisting => None,
            WhenMatched::Replace => Some(UpdateSpec::parse_as_sent(
                RawBsonRef::Document(doc),
                None,
                vars,
            )?),
            WhenMatched::Merge => {
                let fields = to_document(doc)?;
                (!fields.is_empty())
                    .then(|| UpdateSpec::parse(&doc! { "$set": fields }, None))
                    .transpose()?
            }
            WhenMatched::Pipeline(_) => spec.pipeline_update(doc)?,
        };
        let matched = match update {
            Some(update) => {
                let op = UpdateOp {
                    filter: filter.clone(),
                    update,
                    multi: false,
                    upsert: false,
                    hint: None,
                    vars: vars.clone(),
                };
                let result = self.update(target, std::slice::from_ref(&op), true)?;
                if let Some((_, e)) = result.errors.into_iter().next() {
                    return Err(e);
                }
                result.n > 0
            }
            None => self.exists(target, &filter)?,
        };
        if matched {
            return Ok(());
        }
        match spec.when_not_matched {
            WhenNotMatched::Insert => self.insert_new(target, doc),
            WhenNotMatched::Discard => Ok(()),
            WhenNotMatched::Fail => Err(MongoError::new(
                ErrorCode::MergeStageNoMatchingDocument,
                "$merge could not find a matching document in the target collection for at \
                 least one document in the source collection",
            )),
        }
    }

    fn insert_new(&self, target: &Namespace, doc: &RawDocument) -> DbResult<()> {
        self.fill(target, vec![doc.to_raw_document_buf()])
    }

    /// Whether any document of `ns` matches `filter`.
    fn exists(&self, ns: &Namespace, filter: &Document) -> DbResult<bool> {
        let spec = crate::FindSpec {
            filter: filter.clone(),
            limit: Some(1),
            ..crate::FindSpec::default()
        };
        Ok(self.find(ns, &spec)?.next_doc()?.is_some())
    }
}

/// True if `coll` has a unique, non-partial index whose key fields are exactly `on`.
fn has_unique_index_on(coll: &Collection, on: &[String]) -> bool {
    coll.ready_indexes().any(|i| {
        let mut fields: Vec<&str> = i.def.fields.iter().map(|(p, _)| p.as_str()).collect();
        let mut wanted: Vec<&str> = on.iter().map(String::as_str).collect();
        fields.sort_unstable();
        wanted.sort_unstable();
        i.def.unique && !i.spec.contains_key("partialFilterExpression") && fields == wanted
    })
}

/// `{f: {$eq: v}, ...}` for the `on` fields of `doc`; each must be present, not null and not
/// an array (51132).
fn on_filter(doc: &RawDocument, on: &[String]) -> DbResult<Document> {
    let mut filter = Document::new();
    for field in on {
        let value = match path_value(doc, field)? {
            None | Some(RawBsonRef::Null | RawBsonRef::Undefined | RawBsonRef::Array(_)) => {
                return Err(MongoError::new(
                    ErrorCode::Location51132,
                    format!(
                        "$merge write error: 'on' field '{field}' cannot be missing, null, \
                         undefined or an array"
                    ),
                ))
            }
            Some(v) => Bson::try_from(v.to_raw_bson()).map_err(|e| bad_bson(&e))?,
        };
        filter.insert(field.clone(), doc! { "$eq": value });
    }
    Ok(filter)
}

/// The value at dotted `path`, through embedded documents only.
fn path_value<'a>(doc: &'a RawDocument, path: &str) -> DbResult<Option<RawBsonRef<'a>>> {
    let mut current = doc;
    let mut parts = path.split('.').peekable();
    while let Some(part) = parts.next() {
        let value = current.get(part).map_err(|e| bad_bson(&e))?;
        match (value, parts.peek()) {
            (v, None) => return Ok(v),
            (Some(RawBsonRef::Document(d)), Some(_)) => current = d,
            // A path through an array names several values: refused like an array.
            (Some(a @ RawBsonRef::Array(_)), Some(_)) => return Ok(Some(a)),
            _ => return Ok(None),
        }
    }
    Ok(None)
}

fn to_document(doc: &RawDocument) -> DbResult<Document> {
    Document::try_from(doc).map_err(|e| bad_bson(&e))
}

fn bad_bson(e: &dyn std::fmt::Display) -> MongoError {
    MongoError::new(ErrorCode::InvalidBSON, e.to_string())
}
