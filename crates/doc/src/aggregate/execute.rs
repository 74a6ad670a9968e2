//! Running a parsed pipeline: stages composed as a chain of boxed iterators over raw
//! documents. Streaming stages map or filter one document at a time; blocking stages drain
//! their input on the first pull, under a per-stage memory budget (MongoDB's 100 MB, error 292),
//! then hand out their results. After the first error the run yields nothing more.
//!
//! It also owns the small conversions every stage shares (raw ⇄ owned documents, expression
//! values to `Bson`, an approximate size of a value). It never looks inside a stage's spec.

use bson::raw::{RawBsonRef, RawDocument, RawDocumentBuf};
use bson::{Bson, Document};

use super::lookup::LookupResolver;
use super::{
    bucket_auto, densify, documents, facet, fill, graph_lookup, group, lookup, sample, simple,
    sort, union_with, window, Stage,
};
use crate::matcher::expr::Value;
use crate::{ErrorCode, MongoError};

pub(crate) type DocResult = Result<RawDocumentBuf, MongoError>;
pub(crate) type DocStream<'a> = Box<dyn Iterator<Item = DocResult> + 'a>;

/// MongoDB's default memory limit for one blocking stage: 100 MB.
pub const DEFAULT_MEMORY_LIMIT_BYTES: usize = 100 * 1024 * 1024;

/// Options for one run of a pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunOptions {
    /// Bytes one blocking stage (`$group`, `$sort`, `$facet`, ...) may hold before the run fails;
    /// no stage of the pipeline itself spills to disk (a leading `$sort` the planner runs as a
    /// find's sort does: shale-db's `spill_sort.rs`).
    pub memory_limit_bytes: usize,
    /// The command's `allowDiskUse` (mongod 7.0's default, true): past the limit the run fails
    /// with `QueryExceededMemoryLimitNoDiskUseAllowed` (292) when disk use was not allowed,
    /// and with `ExceededMemoryLimit` (146, "spilling is not built") when it was.
    pub allow_disk_use: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            memory_limit_bytes: DEFAULT_MEMORY_LIMIT_BYTES,
            allow_disk_use: true,
        }
    }
}

/// What every stage may need while running.
#[derive(Clone, Copy)]
pub(crate) struct Ctx<'a> {
    pub resolver: &'a dyn LookupResolver,
    pub options: RunOptions,
}

/// The output of a run: documents in order, or the first error (after which it ends).
pub struct Documents<'a> {
    inner: DocStream<'a>,
    finished: bool,
}

impl<'a> Documents<'a> {
    pub(crate) fn new(inner: DocStream<'a>) -> Self {
        Documents {
            inner,
            finished: false,
        }
    }
}

impl Iterator for Documents<'_> {
    type Item = Result<RawDocumentBuf, MongoError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.finished {
            return None;
        }
        let item = self.inner.next();
        self.finished = !matches!(item, Some(Ok(_)));
        item
    }
}

/// Compose `stages` over `input`. A `$sort` followed by a `$limit` (or `$skip` then `$limit`)
/// keeps only the top documents it needs (MongoDB's sort/limit coalescence), which bounds its
/// memory.
pub(crate) fn chain<'a>(stages: &'a [Stage], input: DocStream<'a>, ctx: Ctx<'a>) -> DocStream<'a> {
    let mut stream = input;
    for (i, stage) in stages.iter().enumerate() {
        stream = match stage {
            Stage::Match { matcher, .. } => filter_docs(stream, move |d| matcher.matches(d)),
            Stage::Project(p) | Stage::Unset(p) => map_docs(stream, move |d| p.apply(&d)),
            Stage::AddFields(spec) => map_docs(stream, move |d| spec.apply(&d)),
            Stage::ReplaceRoot(r) => map_docs(stream, move |d| r.apply(&d)),
            Stage::Unwind(u) => flat_map_docs(stream, move |d| u.apply(&d)),
            Stage::Limit(n) => Box::new(stream.take(usize::try_from(*n).unwrap_or(usize::MAX))),
            Stage::Skip(n) => simple::skip(stream, *n),
            Stage::Count(field) => simple::count(stream, field),
            Stage::Group(spec) => group::run(spec, stream, ctx),
            Stage::Sort(spec) => {
                let limit = match (stages.get(i + 1), stages.get(i + 2)) {
                    (Some(Stage::Limit(n)), _) => Some(*n),
                    (Some(Stage::Skip(skip)), Some(Stage::Limit(n))) => {
                        Some(skip.saturating_add(*n))
                    }
                    _ => None,
                };
                sort::run(spec, stream, limit, ctx)
            }
            Stage::SortByCount { group, sort } | Stage::Bucket { group, sort } => {
                sort::run(sort, group::run(group, stream, ctx), None, ctx)
            }
            Stage::Lookup(spec) => lookup::run(spec, stream, ctx),
            Stage::Facet(spec) => facet::run(spec, stream, ctx),
            Stage::Documents(expr) => documents::run(expr, stream),
            // The database writes what reaches a write stage (`write_stage.rs`).
            Stage::Write(_) => stream,
            Stage::Sample(size) => sample::run(*size, stream, ctx),
            Stage::UnionWith(spec) => union_with::run(spec, stream, ctx),
            Stage::UnpackBucket(spec) => {
                flat_map_docs(stream, move |d| crate::timeseries::unpack(&d, spec))
            }
            Stage::GraphLookup(spec) => graph_lookup::run(spec, stream, ctx),
            Stage::BucketAuto(spec) => bucket_auto::run(spec, stream, ctx),
            Stage::SetWindowFields(spec) => window::run(spec, stream, ctx),
            Stage::Fill(spec) => fill::run(spec, stream, ctx),
            Stage::Densify(spec) => densify::run(spec, stream, ctx),
            Stage::Redact(spec) => {
                flat_map_docs(stream, move |d| Ok(spec.apply(&d)?.into_iter().collect()))
            }
        };
        if stage.may_nest_deeper() {
            stream = bound_depth(stream);
        }
    }
    stream
}

/// Refuses any document a reshaping stage made deeper than a client may send (`Overflow`):
/// each stage nests its input at most as deep as its own spec (itself within the wire limit),
/// so checking after every such stage keeps every document any stage sees within twice the
/// limit, and the recursive code that builds and encodes documents within its stack bound.
/// The check is one iterative pass over the document's bytes.
fn bound_depth(input: DocStream<'_>) -> DocStream<'_> {
    map_docs(input, |d| {
        match crate::depth::check_depth(d.as_bytes(), crate::depth::MAX_WIRE_DEPTH) {
            Ok(_) => Ok(d),
            Err(e) => Err(e.to_wire_error()),
        }
    })
}

/// A streaming stage that turns each document into one.
pub(crate) fn map_docs<'a, F>(input: DocStream<'a>, mut f: F) -> DocStream<'a>
where
    F: FnMut(RawDocumentBuf) -> DocResult + 'a,
{
    Box::new(input.map(move |d| d.and_then(&mut f)))
}

/// A streaming stage that keeps the documents `keep` accepts.
pub(crate) fn filter_docs<'a, F>(input: DocStream<'a>, mut keep: F) -> DocStream<'a>
where
    F: FnMut(&RawDocument) -> Result<bool, MongoError> + 'a,
{
    Box::new(input.filter_map(move |d| match d {
        Ok(d) => match keep(&d) {
            Ok(true) => Some(Ok(d)),
            Ok(false) => None,
            Err(e) => Some(Err(e)),
        },
        Err(e) => Some(Err(e)),
    }))
}

/// A streaming stage that turns each document into any number (only one input document's
/// outputs are held at a time).
pub(crate) fn flat_map_docs<'a, F>(input: DocStream<'a>, mut f: F) -> DocStream<'a>
where
    F: FnMut(RawDocumentBuf) -> Result<Vec<RawDocumentBuf>, MongoError> + 'a,
{
    Box::new(input.flat_map(move |d| {
        let out: Vec<DocResult> = match d.and_then(&mut f) {
            Ok(docs) => docs.into_iter().map(Ok).collect(),
            Err(e) => vec![Err(e)],
        };
        out
    }))
}

/// A blocking stage: `compute` drains the input on the first pull; its results (or its
/// error) are then handed out.
pub(crate) fn blocking<'a, F>(input: DocStream<'a>, compute: F) -> DocStream<'a>
where
    F: FnOnce(DocStream<'a>) -> Result<Vec<RawDocumentBuf>, MongoError> + 'a,
{
    let mut pending = Some((input, compute));
    Box::new(
        std::iter::from_fn(move || pending.take()).flat_map(|(input, compute)| {
            let out: Vec<DocResult> = match compute(input) {
                Ok(docs) => docs.into_iter().map(Ok).collect(),
                Err(e) => vec![Err(e)],
            };
            out
        }),
    )
}

/// Bytes held by one blocking stage, checked against the run's limit.
pub(crate) struct MemoryBudget {
    used_bytes: usize,
    limit_bytes: usize,
    stage: &'static str,
    allow_disk_use: bool,
}

impl MemoryBudget {
    pub(crate) fn new(stage: &'static str, options: RunOptions) -> Self {
        MemoryBudget {
            used_bytes: 0,
            limit_bytes: options.memory_limit_bytes,
            stage,
            allow_disk_use: options.allow_disk_use,
        }
    }

    /// Account for `bytes` more; fails once the total passes the limit.
    pub(crate) fn charge(&mut self, bytes: usize) -> Result<(), MongoError> {
        self.used_bytes = self.used_bytes.saturating_add(bytes);
        if self.used_bytes <= self.limit_bytes {
            return Ok(());
        }
        if self.allow_disk_use {
            return Err(MongoError::new(
                ErrorCode::ExceededMemoryLimit,
                format!(
                    "Exceeded memory limit of {} bytes for {}: spilling this stage to disk \
                     (allowDiskUse) is not supported by ShaleDB; reduce its input with \
                     $match, $project or $limit",
                    self.limit_bytes, self.stage
                ),
            ));
        }
        let message = match self.stage {
            "$sort" => format!(
                "Sort exceeded memory limit of {} bytes, but did not opt in to external sorting.",
                self.limit_bytes
            ),
            stage => format!(
                "Exceeded memory limit for {stage}, but didn't allow external sort. Pass \
                 allowDiskUse:true to opt in."
            ),
        };
        Err(MongoError::new(
            ErrorCode::QueryExceededMemoryLimitNoDiskUseAllowed,
            message,
        ))
    }

    /// Give back `bytes` (documents dropped by a top-k sort, replaced accumulator values).
    pub(crate) fn release(&mut self, bytes: usize) {
        self.used_bytes = self.used_bytes.saturating_sub(bytes);
    }
}

fn bson_failure(what: &str, e: impl std::fmt::Display) -> MongoError {
    MongoError::new(ErrorCode::InvalidBSON, format!("{what}: {e}"))
}

pub(crate) fn to_raw(doc: &Document) -> DocResult {
    RawDocumentBuf::from_document(doc).map_err(|e| bson_failure("cannot encode document", e))
}

/// `raw` decoded, a name it repeats read at its first occurrence (as mongod's documents and
/// this crate's matcher read it; the later occurrences are not kept).
pub(crate) fn to_document(raw: &RawDocument) -> Result<Document, MongoError> {
    crate::update::StoredDocument::decode(raw)
        .map(|stored| stored.doc)
        .map_err(|e| bson_failure("malformed BSON", e))
}

pub(crate) fn raw_to_bson(value: RawBsonRef<'_>) -> Result<Bson, MongoError> {
    Bson::try_from(value).map_err(|e| bson_failure("malformed BSON", e))
}

/// An expression's result as owned BSON; `None` when it is missing.
pub(crate) fn value_to_bson(value: &Value<'_>) -> Result<Option<Bson>, MongoError> {
    value.as_raw().map(raw_to_bson).transpose()
}

/// An estimate of the memory a value takes, for the blocking stages' budgets.
pub(crate) fn approximate_size(value: &Bson) -> usize {
    const OVERHEAD: usize = 16;
    OVERHEAD
        + match value {
            Bson::String(s) | Bson::Symbol(s) | Bson::JavaScriptCode(s) => s.len(),
            Bson::Document(d) => d
                .iter()
                .map(|(k, v)| k.len() + approximate_size(v))
                .sum::<usize>(),
            Bson::Array(items) => items.iter().map(approximate_size).sum::<usize>(),
            Bson::Binary(b) => b.bytes.len(),
            Bson::RegularExpression(r) => r.pattern.len() + r.options.len(),
            Bson::JavaScriptCodeWithScope(c) => {
                c.code.len() + approximate_size(&Bson::Document(c.scope.clone()))
            }
            _ => 8,
        }
}

/// Run a sub-pipeline (of `$facet` or `$lookup`) over borrowed documents, collecting its output.
pub(crate) fn run_to_vec<'b>(
    stages: &'b [Stage],
    input: impl Iterator<Item = RawDocumentBuf> + 'b,
    ctx: Ctx<'b>,
) -> Result<Vec<RawDocumentBuf>, MongoError> {
    chain(stages, Box::new(input.map(Ok)), ctx).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_fails_past_the_limit_and_releases() {
        let options = RunOptions {
            memory_limit_bytes: 100,
            allow_disk_use: false,
        };
        let mut budget = MemoryBudget::new("$group", options);
        budget.charge(60).expect("under the limit");
        budget.release(30);
        budget.charge(70).expect("exactly at the limit");
        let e = budget.charge(1).unwrap_err();
        assert_eq!(e.code, ErrorCode::QueryExceededMemoryLimitNoDiskUseAllowed);
        assert!(e.message.contains("$group"));
        let mut sort = MemoryBudget::new("$sort", options);
        let e = sort.charge(101).unwrap_err();
        assert_eq!(
            e.message,
            "Sort exceeded memory limit of 100 bytes, but did not opt in to external sorting."
        );
    }

    #[test]
    fn blocking_runs_once_and_documents_stop_after_an_error() {
        let input: DocStream<'_> = Box::new(
            vec![
                Ok(RawDocumentBuf::new()),
                Err(MongoError::new(ErrorCode::BadValue, "boom")),
                Ok(RawDocumentBuf::new()),
            ]
            .into_iter(),
        );
        let mut docs = Documents::new(input);
        assert!(docs.next().expect("first").is_ok());
        assert!(docs.next().expect("second").is_err());
        assert!(docs.next().is_none());

        let input: DocStream<'_> =
            Box::new(std::iter::repeat_with(|| Ok(RawDocumentBuf::new())).take(3));
        let counted = blocking(input, |s| {
            let n = s.count();
            let mut d = RawDocumentBuf::new();
            d.append("n", i32::try_from(n).expect("small"));
            Ok(vec![d])
        });
        let out: Vec<_> = counted.collect::<Result<_, _>>().expect("runs");
        assert_eq!(out.len(), 1);
    }
}
