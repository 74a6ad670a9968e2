//! MongoDB 7.0's aggregation pipeline as pure document logic. `Pipeline::parse` validates every
//! stage once, with MongoDB's codes (a stage document with other than one field 40323, an
//! unknown stage 40324, then each stage's own); `Pipeline::run` then streams documents through
//! the stages: `$match $project $addFields/$set $unset $unwind $replaceRoot/$replaceWith $limit
//! $skip $lookup` pass one document at a time, `$group $sort $count $sortByCount $facet` buffer
//! under a memory limit (292 when exceeded).
//!
//! This file owns the stage list, the per-stage parse dispatch and the public API, including
//! the leading `$match`/`$sort`/`$skip`/`$limit` a query planner may take over (`prefix`). Each
//! stage family lives in its own file. It knows no storage (foreign collections of `$lookup`
//! come through `LookupResolver`) and no wire protocol.

pub(crate) mod accumulator;
mod bucket;
mod bucket_auto;
mod bucket_auto_rounding;
mod densify;
mod densify_spec;
mod documents;
mod execute;
mod facet;
mod field_path;
mod fill;
mod graph_lookup;
mod group;
mod lookup;
mod project;
mod redact;
mod reshape;
mod sample;
mod set_fields;
mod simple;
mod sort;
mod union_with;
mod unpack_bucket;
mod unwind;
mod window;
mod write_stage;

use bson::raw::{RawArray, RawBsonRef, RawDocument, RawDocumentBuf};
use bson::Document;

use crate::matcher::expr::Expr;
use crate::matcher::path::bson_error;
use crate::matcher::Matcher;
use crate::variables::Variables;
use crate::{ErrorCode, MongoError};

pub use execute::{Documents, RunOptions, DEFAULT_MEMORY_LIMIT_BYTES};
pub use lookup::{LookupResolver, MemoryCollections, NoCollections};
pub use write_stage::{MergeSpec, WhenMatched, WhenNotMatched, WriteStage, WriteTarget};

/// A parsed, validated aggregation pipeline.
#[derive(Debug, Clone)]
pub struct Pipeline {
    stages: Vec<Stage>,
}

/// One parsed stage; one variant per stage a user writes (`$set` is `AddFields`).
#[derive(Debug, Clone)]
pub(crate) enum Stage {
    Match {
        filter: RawDocumentBuf,
        matcher: Box<Matcher>,
    },
    Project(reshape::Project),
    AddFields(set_fields::SetFields),
    Unset(reshape::Project),
    ReplaceRoot(reshape::ReplaceRoot),
    Group(group::GroupSpec),
    Sort(sort::SortSpec),
    Limit(u64),
    Skip(u64),
    Unwind(unwind::Unwind),
    Count(String),
    SortByCount {
        group: group::GroupSpec,
        sort: sort::SortSpec,
    },
    Lookup(Box<lookup::Lookup>),
    Facet(facet::Facet),
    /// `$documents`: its expression (an array of documents once evaluated).
    Documents(Expr),
    /// `$out` or `$merge`: documents pass through; the database writes them.
    Write(write_stage::WriteStage),
    /// `$bucket`: the `$group` and `$sort` it stands for (`bucket.rs`).
    Bucket {
        group: group::GroupSpec,
        sort: sort::SortSpec,
    },
    /// `$sample`: this many documents at random.
    Sample(u64),
    /// `$unionWith`: another collection's documents after the input's.
    UnionWith(Box<union_with::UnionWith>),
    /// `$_internalUnpackBucket`: a time series bucket's measurements (`unpack_bucket.rs`).
    UnpackBucket(crate::timeseries::UnpackSpec),
    /// `$redact`: each document pruned level by level (`redact.rs`).
    Redact(redact::Redact),
    /// `$bucketAuto`: the sorted input cut into buckets of about equal size (`bucket_auto.rs`).
    BucketAuto(Box<bucket_auto::BucketAuto>),
    /// `$graphLookup`: a breadth-first search over another collection (`graph_lookup.rs`).
    GraphLookup(Box<graph_lookup::GraphLookup>),
    /// `$setWindowFields`: window functions over sorted partitions (`window/`).
    SetWindowFields(Box<window::SetWindowFields>),
    /// `$fill`: the `$setWindowFields` and `$addFields` it stands for (`fill.rs`).
    Fill(Box<fill::Fill>),
    /// `$densify`: the missing steps of a field's values added (`densify.rs`).
    Densify(Box<densify_spec::Densify>),
}

/// Where a pipeline is parsed: stages banned inside `$facet` are refused there (40600).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place {
    Top,
    Facet,
    Lookup,
    UnionWith,
}

/// The leading stages of a pipeline that a query planner can run as a find: an optional
/// `$match`, then an optional `$sort`, `$skip` and `$limit`, in that order.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Prefix<'p> {
    /// The first stage's `$match` filter.
    pub filter: Option<&'p RawDocument>,
    /// The `$sort` specification (already validated: keys are 1 or -1).
    pub sort: Option<&'p RawDocument>,
    /// Documents to skip after sorting (0 when there is no `$skip`).
    pub skip: u64,
    /// Documents to return after skipping (`None` when there is no `$limit`).
    pub limit: Option<u64>,
    /// How many leading stages the fields above stand for; `run_from(stages, ..)` runs the rest.
    pub stages: usize,
}

fn one_field_error() -> MongoError {
    MongoError::new(
        ErrorCode::Location40323,
        "A pipeline stage specification object must contain exactly one field.",
    )
}

/// Stages MongoDB 7.0 has that this pipeline does not run yet.
const NOT_YET: &[&str] = &[
    "$changeStream",
    "$changeStreamSplitLargeEvent",
    "$collStats",
    "$currentOp",
    "$geoNear",
    "$indexStats",
    "$listLocalSessions",
    "$listSampledQueries",
    "$listSearchIndexes",
    "$listSessions",
    "$planCacheStats",
    "$search",
    "$searchMeta",
    "$shardedDataDistribution",
    "$vectorSearch",
];

/// Stages MongoDB refuses inside `$facet` (those it knows; the unsupported ones fail anyway).
const BANNED_IN_FACET: &[&str] = &[
    "$facet",
    "$out",
    "$merge",
    "$geoNear",
    "$indexStats",
    "$collStats",
    "$changeStream",
    "$planCacheStats",
    "$search",
    "$searchMeta",
];

/// Parse one stage document (`{$name: spec}`).
pub(crate) fn parse_stage(
    stage: &RawDocument,
    place: Place,
    vars: &Variables,
) -> Result<Stage, MongoError> {
    let mut fields = stage.iter();
    let (name, spec) = match (fields.next(), fields.next()) {
        (Some(first), None) => first.map_err(bson_error)?,
        _ => return Err(one_field_error()),
    };
    if place == Place::Facet && BANNED_IN_FACET.contains(&name) {
        return Err(MongoError::new(
            ErrorCode::Location40600,
            format!("{name} is not allowed to be used within a $facet stage"),
        ));
    }
    match name {
        "$match" => simple::parse_match(spec, vars),
        "$project" => reshape::parse_project(spec, vars).map(Stage::Project),
        "$addFields" | "$set" => set_fields::parse(name, spec, vars).map(Stage::AddFields),
        "$unset" => reshape::parse_unset(spec).map(Stage::Unset),
        "$replaceRoot" => reshape::parse_replace_root(spec, vars).map(Stage::ReplaceRoot),
        "$replaceWith" => reshape::parse_replace_with(spec, vars).map(Stage::ReplaceRoot),
        "$group" => group::parse(spec, vars).map(Stage::Group),
        "$sort" => sort::parse(spec, vars).map(Stage::Sort),
        "$limit" => simple::parse_limit(spec).map(Stage::Limit),
        "$skip" => simple::parse_skip(spec).map(Stage::Skip),
        "$unwind" => unwind::parse(spec).map(Stage::Unwind),
        "$count" => simple::parse_count(spec).map(Stage::Count),
        "$sortByCount" => simple::parse_sort_by_count(spec, vars),
        "$lookup" => lookup::parse(spec, vars).map(|l| Stage::Lookup(Box::new(l))),
        "$facet" => facet::parse(spec, vars).map(Stage::Facet),
        "$documents" => documents::parse(spec, vars).map(Stage::Documents),
        "$out" => write_stage::parse_out(spec).map(Stage::Write),
        "$merge" => write_stage::parse_merge(spec, vars).map(Stage::Write),
        "$sample" => sample::parse(spec).map(Stage::Sample),
        "$bucket" => bucket::parse(spec, vars).map(|(group, sort)| Stage::Bucket { group, sort }),
        "$unionWith" => union_with::parse(spec, vars).map(|u| Stage::UnionWith(Box::new(u))),
        "$_internalUnpackBucket" => unpack_bucket::parse(spec).map(Stage::UnpackBucket),
        "$graphLookup" => graph_lookup::parse(spec, vars).map(|g| Stage::GraphLookup(Box::new(g))),
        "$redact" => redact::parse(spec, vars).map(Stage::Redact),
        "$bucketAuto" => bucket_auto::parse(spec, vars).map(|b| Stage::BucketAuto(Box::new(b))),
        "$densify" => densify_spec::parse(spec).map(|d| Stage::Densify(Box::new(d))),
        "$fill" => fill::parse(spec, vars).map(|f| Stage::Fill(Box::new(f))),
        "$setWindowFields" => {
            window::parse(spec, vars).map(|w| Stage::SetWindowFields(Box::new(w)))
        }
        other if NOT_YET.contains(&other) => Err(MongoError::new(
            ErrorCode::NotImplemented,
            format!("The {other} aggregation stage is not supported yet"),
        )),
        other => Err(MongoError::new(
            ErrorCode::Location40324,
            format!("Unrecognized pipeline stage name: '{other}'"),
        )),
    }
}

impl Stage {
    /// The stage's name as a user writes it (`$set` reports `$addFields`).
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Stage::Match { .. } => "$match",
            Stage::Project(_) => "$project",
            Stage::AddFields(_) => "$addFields",
            Stage::Unset(_) => "$unset",
            Stage::ReplaceRoot(_) => "$replaceRoot",
            Stage::Group(_) => "$group",
            Stage::Sort(_) => "$sort",
            Stage::Limit(_) => "$limit",
            Stage::Skip(_) => "$skip",
            Stage::Unwind(_) => "$unwind",
            Stage::Count(_) => "$count",
            Stage::SortByCount { .. } => "$sortByCount",
            Stage::Lookup(_) => "$lookup",
            Stage::Facet(_) => "$facet",
            Stage::Documents(_) => "$documents",
            Stage::Write(write_stage::WriteStage::Out(_)) => "$out",
            Stage::Write(write_stage::WriteStage::Merge(_)) => "$merge",
            Stage::Sample(_) => "$sample",
            Stage::Bucket { .. } => "$bucket",
            Stage::UnionWith(_) => "$unionWith",
            Stage::UnpackBucket(_) => "$_internalUnpackBucket",
            Stage::Redact(_) => "$redact",
            Stage::BucketAuto(_) => "$bucketAuto",
            Stage::GraphLookup(_) => "$graphLookup",
            Stage::SetWindowFields(_) => "$setWindowFields",
            Stage::Fill(_) => "$fill",
            Stage::Densify(_) => "$densify",
        }
    }

    /// True for stages whose output documents can nest deeper than their input: reshaping
    /// stages can place `$$ROOT` or a field below new levels. Their output is depth-checked.
    pub(crate) fn may_nest_deeper(&self) -> bool {
        !matches!(
            self,
            Stage::Match { .. }
                | Stage::Unset(_)
                | Stage::Sort(_)
                | Stage::Limit(_)
                | Stage::Skip(_)
                | Stage::Unwind(_)
                | Stage::Count(_)
                | Stage::Write(_)
                | Stage::Sample(_)
                | Stage::Redact(_)
        )
    }
}

/// Most stages one pipeline may have (mongod's `internalPipelineLengthLimit`). The executor
/// nests one iterator per stage, so the bound is also the executor's recursion bound.
pub const MAX_PIPELINE_STAGES: usize = 1000;

impl Pipeline {
    /// Parse and validate a pipeline given as documents, for a command with no `let`
    /// variables (`$$NOW` is now).
    pub fn parse(stages: &[Document]) -> Result<Pipeline, MongoError> {
        Pipeline::parse_with(stages, &Variables::new())
    }

    /// Parse and validate a pipeline whose expressions read `vars` (the command's `let`
    /// variables, `$$NOW`, `$$CLUSTER_TIME`).
    pub fn parse_with(stages: &[Document], vars: &Variables) -> Result<Pipeline, MongoError> {
        let raw = stages
            .iter()
            .map(execute::to_raw)
            .collect::<Result<Vec<_>, _>>()?;
        Pipeline::parse_in(&raw, Place::Top, vars)
    }

    /// Parse and validate a pipeline given as the raw `pipeline` array of a command; a
    /// non-document element is a `TypeMismatch` (14), as MongoDB reports it.
    pub fn parse_raw(stages: &RawArray) -> Result<Pipeline, MongoError> {
        Pipeline::parse_raw_with(stages, &Variables::new())
    }

    /// `parse_raw` with the command's variables.
    pub fn parse_raw_with(stages: &RawArray, vars: &Variables) -> Result<Pipeline, MongoError> {
        let mut raw = Vec::new();
        for element in stages {
            match element.map_err(bson_error)? {
                RawBsonRef::Document(d) => raw.push(d.to_raw_document_buf()),
                _ => {
                    return Err(MongoError::new(
                        ErrorCode::TypeMismatch,
                        "Each element of the 'pipeline' array must be an object",
                    ))
                }
            }
        }
        Pipeline::parse_in(&raw, Place::Top, vars)
    }

    pub(crate) fn parse_in(
        stages: &[RawDocumentBuf],
        place: Place,
        vars: &Variables,
    ) -> Result<Pipeline, MongoError> {
        if stages.len() > MAX_PIPELINE_STAGES {
            return Err(MongoError::new(
                ErrorCode::Location7749501,
                format!("Pipeline length must be no longer than {MAX_PIPELINE_STAGES} stages"),
            ));
        }
        let stages = stages
            .iter()
            .map(|s| parse_stage(s, place, vars))
            .collect::<Result<Vec<_>, _>>()?;
        check_placement(&stages, place)?;
        Ok(Pipeline { stages })
    }

    /// Number of stages.
    pub fn len(&self) -> usize {
        self.stages.len()
    }

    /// True for a pipeline with no stage.
    pub fn is_empty(&self) -> bool {
        self.stages.is_empty()
    }

    /// The stage names in order (`$set` is reported as `$addFields`), e.g. for explain.
    pub fn stage_names(&self) -> Vec<&'static str> {
        self.stages.iter().map(Stage::name).collect()
    }

    /// The filter of a leading `$match`, which an index may answer.
    pub fn leading_match(&self) -> Option<&RawDocument> {
        match self.stages.first() {
            Some(Stage::Match { filter, .. }) => Some(filter),
            _ => None,
        }
    }

    /// The leading `$match`, `$sort`, `$skip`, `$limit` (each optional, in that order) that a
    /// query planner can run as a find before handing the rest to `run_from`.
    pub fn prefix(&self) -> Prefix<'_> {
        let mut prefix = Prefix {
            filter: None,
            sort: None,
            skip: 0,
            limit: None,
            stages: 0,
        };
        let mut rest = self.stages.iter().peekable();
        if let Some(Stage::Match { filter, .. }) = rest.peek() {
            prefix.filter = Some(filter);
            prefix.stages += 1;
            rest.next();
        }
        if let Some(Stage::Sort(spec)) = rest.peek() {
            prefix.sort = Some(spec.raw());
            prefix.stages += 1;
            rest.next();
        }
        if let Some(Stage::Skip(n)) = rest.peek() {
            prefix.skip = *n;
            prefix.stages += 1;
            rest.next();
        }
        if let Some(Stage::Limit(n)) = rest.peek() {
            prefix.limit = Some(*n);
            prefix.stages += 1;
        }
        prefix
    }

    /// Run every stage over `input` with the default options (100 MB per blocking stage).
    pub fn run<'a, I>(&'a self, input: I, resolver: &'a dyn LookupResolver) -> Documents<'a>
    where
        I: IntoIterator<Item = Result<RawDocumentBuf, MongoError>>,
        I::IntoIter: 'a,
    {
        self.run_from(0, input, resolver, RunOptions::default())
    }

    /// Run the stages from number `first_stage` on (0 = all) over `input`, e.g. after a query
    /// planner has done the `prefix`. Past the end, documents pass through unchanged.
    pub fn run_from<'a, I>(
        &'a self,
        first_stage: usize,
        input: I,
        resolver: &'a dyn LookupResolver,
        options: RunOptions,
    ) -> Documents<'a>
    where
        I: IntoIterator<Item = Result<RawDocumentBuf, MongoError>>,
        I::IntoIter: 'a,
    {
        let stages = self.stages.get(first_stage..).unwrap_or(&[]);
        let ctx = execute::Ctx { resolver, options };
        Documents::new(execute::chain(stages, Box::new(input.into_iter()), ctx))
    }

    /// Convenience for tests and embedders: run over owned documents, collect owned documents.
    pub fn run_documents(
        &self,
        input: &[Document],
        resolver: &dyn LookupResolver,
    ) -> Result<Vec<Document>, MongoError> {
        let raw = input.iter().map(execute::to_raw).collect::<Vec<_>>();
        self.run(raw, resolver)
            .map(|d| d.and_then(|d| execute::to_document(&d)))
            .collect()
    }

    pub(crate) fn stages(&self) -> &[Stage] {
        &self.stages
    }

    /// The `$out` or `$merge` that ends the pipeline, if any: the documents the run yields
    /// are what it must write.
    pub fn write_stage(&self) -> Option<&WriteStage> {
        match self.stages.last() {
            Some(Stage::Write(w)) => Some(w),
            _ => None,
        }
    }

    /// True when the pipeline starts with `$documents` (it needs no collection).
    pub fn leads_with_documents(&self) -> bool {
        matches!(self.stages.first(), Some(Stage::Documents(_)))
    }
}

/// Where the stages that must stand at one end of a pipeline may stand: `$out`/`$merge`
/// last (40601) and never inside `$lookup` (51047); `$documents` first (40602).
fn check_placement(stages: &[Stage], place: Place) -> Result<(), MongoError> {
    for (i, stage) in stages.iter().enumerate() {
        match stage {
            Stage::Write(_) if place == Place::UnionWith => {
                return Err(MongoError::new(
                    ErrorCode::Location31441,
                    format!(
                        "{} is not allowed within a $unionWith's sub-pipeline",
                        stage.name()
                    ),
                ))
            }
            Stage::Write(_) if place == Place::Lookup => {
                return Err(MongoError::new(
                    ErrorCode::Location51047,
                    format!(
                        "{} is not allowed within a $lookup's sub-pipeline",
                        stage.name()
                    ),
                ))
            }
            Stage::Write(_) if i + 1 != stages.len() => {
                return Err(MongoError::new(
                    ErrorCode::Location40601,
                    format!(
                        "{} can only be the final stage in the pipeline",
                        stage.name()
                    ),
                ))
            }
            Stage::Documents(_) if i != 0 => {
                return Err(MongoError::new(
                    ErrorCode::Location40602,
                    "$documents is only valid as the first stage in a pipeline",
                ))
            }
            _ => {}
        }
    }
    Ok(())
}
