//! `aggregate` on a collection: the pipeline's leading `$match`/`$sort`/`$skip`/`$limit` run
//! as a planned query (so they use indexes), the remaining stages run in `shale_doc`'s
//! pipeline executor over that query's documents, and `$lookup` reads foreign collections of
//! the same database through a snapshot query. Results are computed whole (the executor's
//! output borrows the pipeline), then served by a cursor.

use crate::namespace::Namespace;
use crate::query_ops::FindSpec;
use crate::{Database, DbResult};
use bson::{Document, RawDocument, RawDocumentBuf};
use shale_doc::aggregate::{LookupResolver, Pipeline, RunOptions};
use shale_doc::{ErrorCode, MongoError};

/// Largest total size of an aggregation's results held for its cursor.
const MAX_RESULT_BYTES: usize = 256 << 20;

struct Foreign<'a> {
    db: &'a Database,
    name: &'a str,
}

impl LookupResolver for Foreign<'_> {
    fn scan(&self, collection: &str) -> Result<Vec<RawDocumentBuf>, MongoError> {
        let ns = Namespace::new(self.name, collection)?;
        let mut q = self.db.find(&ns, &FindSpec::default())?;
        let mut out = Vec::new();
        while let Some(d) = q.next_doc()? {
            out.push(d);
        }
        Ok(out)
    }
}

fn to_doc(d: &RawDocument) -> DbResult<Document> {
    Document::try_from(d).map_err(|e| MongoError::new(ErrorCode::BadValue, e.to_string()))
}

/// The find that runs a pipeline's leading `$match`/`$sort`/`$skip`/`$limit`.
fn prefix_spec(
    prefix: &shale_doc::aggregate::Prefix<'_>,
    hint: Option<bson::Bson>,
) -> DbResult<FindSpec> {
    Ok(FindSpec {
        filter: prefix.filter.map(to_doc).transpose()?.unwrap_or_default(),
        sort: prefix.sort.map(to_doc).transpose()?,
        skip: prefix.skip,
        limit: prefix.limit,
        hint,
        ..FindSpec::default()
    })
}

impl Database {
    /// Runs `stages` over collection `ns` and returns every result document.
    pub fn aggregate(
        &self,
        ns: &Namespace,
        stages: &[Document],
        hint: Option<bson::Bson>,
    ) -> DbResult<Vec<RawDocumentBuf>> {
        let pipeline = Pipeline::parse(stages)?;
        let prefix = pipeline.prefix();
        let spec = prefix_spec(&prefix, hint)?;
        let mut query = self.find(ns, &spec)?;
        let input = std::iter::from_fn(move || query.next_doc().transpose());
        let resolver = Foreign {
            db: self,
            name: &ns.db,
        };
        let mut out = Vec::new();
        let mut bytes = 0usize;
        for d in pipeline.run_from(prefix.stages, input, &resolver, RunOptions::default()) {
            let d = d?;
            bytes += d.as_bytes().len();
            if bytes > MAX_RESULT_BYTES {
                return Err(MongoError::new(
                    ErrorCode::QueryExceededMemoryLimitNoDiskUseAllowed,
                    format!("aggregation results exceed {MAX_RESULT_BYTES} bytes; add $limit or $project"),
                ));
            }
            out.push(d);
        }
        Ok(out)
    }

    /// The stage names of a pipeline and how its prefix is planned (aggregate explain).
    pub fn explain_aggregate(
        &self,
        ns: &Namespace,
        stages: &[Document],
        hint: Option<bson::Bson>,
    ) -> DbResult<Document> {
        let pipeline = Pipeline::parse(stages)?;
        let prefix = pipeline.prefix();
        let spec = prefix_spec(&prefix, hint)?;
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
