//! `$lookup`: a left outer join with a collection of the same database, read through the
//! `LookupResolver` the database layer implements. Forms (MongoDB 7.0):
//! - equality: `localField`/`foreignField`/`as` — foreign documents whose `foreignField`
//!   matches any value at `localField` (arrays at any level of the local path are expanded; no
//!   value means null, which also matches a missing foreign field), by the query matcher's
//!   `$eq`/`$in` rules;
//! - pipeline: `let` variables (expressions over the input document) and a `pipeline` run over
//!   the foreign collection for each input document, parsed again for each with the variables
//!   bound to its values (on top of the command's: `Variables`);
//! - both together: the equality match first, then the pipeline over the matches.
//!
//! The foreign collection is scanned once per run; a pipeline without variables or equality is
//! run once and its result reused. Parse errors are `FailedToParse` (9) with MongoDB's texts.

use std::collections::HashMap;

use bson::raw::{RawArrayBuf, RawBson, RawBsonRef, RawDocument, RawDocumentBuf};
use bson::{Bson, Document};

use super::execute::{map_docs, raw_to_bson, run_to_vec, to_document, to_raw, Ctx, DocStream};
use super::field_path::{parse_field_path, set_path};
use super::simple::{render, type_name};
use super::{Pipeline, Place};
use crate::matcher::expr::Expr;
use crate::matcher::path::{bson_error, lookup};
use crate::matcher::Matcher;
use crate::variables::{check_user_write_name, Variables};
use crate::{ErrorCode, MongoError};

/// Read access to the other collections of the database, for `$lookup`.
pub trait LookupResolver {
    /// Every document of `collection`, in its natural order; empty when it does not exist.
    fn scan(&self, collection: &str) -> Result<Vec<RawDocumentBuf>, MongoError>;
}

/// A resolver for pipelines run without a database: every collection is empty.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoCollections;

impl LookupResolver for NoCollections {
    fn scan(&self, _collection: &str) -> Result<Vec<RawDocumentBuf>, MongoError> {
        Ok(Vec::new())
    }
}

/// Collections held in memory (tests, embedders).
#[derive(Debug, Clone, Default)]
pub struct MemoryCollections {
    collections: HashMap<String, Vec<RawDocumentBuf>>,
}

impl MemoryCollections {
    /// No collections.
    pub fn new() -> Self {
        Self::default()
    }

    /// Add (or replace) a collection.
    pub fn insert(&mut self, name: &str, documents: &[Document]) -> Result<(), MongoError> {
        let raw = documents
            .iter()
            .map(to_raw)
            .collect::<Result<Vec<_>, _>>()?;
        self.collections.insert(name.to_owned(), raw);
        Ok(())
    }
}

impl LookupResolver for MemoryCollections {
    fn scan(&self, collection: &str) -> Result<Vec<RawDocumentBuf>, MongoError> {
        Ok(self
            .collections
            .get(collection)
            .cloned()
            .unwrap_or_default())
    }
}

/// A parsed `$lookup`.
#[derive(Debug, Clone)]
pub(crate) struct Lookup {
    from: String,
    as_path: Vec<String>,
    equality: Option<(Vec<String>, String)>,
    pipeline: Option<SubPipeline>,
}

/// The `pipeline` of a `$lookup` and the `let` variables it sees.
#[derive(Debug, Clone)]
struct SubPipeline {
    lets: Vec<(String, Expr)>,
    stages: Vec<RawDocumentBuf>,
    /// The variables of the scope the `$lookup` is in (the command's, an outer `$lookup`'s).
    vars: Variables,
    /// The pipeline parsed once, when there are no variables to bind.
    fixed: Option<Pipeline>,
}

fn failed(message: impl Into<String>) -> MongoError {
    MongoError::new(ErrorCode::FailedToParse, message)
}

#[derive(Default)]
struct Args<'a> {
    from: Option<&'a str>,
    as_field: Option<&'a str>,
    local: Option<&'a str>,
    foreign: Option<&'a str>,
    lets: Option<&'a RawDocument>,
    pipeline: Option<Vec<RawDocumentBuf>>,
}

pub(crate) fn parse(spec: RawBsonRef<'_>, vars: &Variables) -> Result<Lookup, MongoError> {
    let RawBsonRef::Document(d) = spec else {
        return Err(failed(format!(
            "the $lookup stage specification must be an object, but found {}",
            type_name(spec)
        )));
    };
    let mut args = Args::default();
    for item in d.iter() {
        let (key, value) = item.map_err(bson_error)?;
        read_argument(&mut args, key, value)?;
    }
    let Some(as_field) = args.as_field else {
        return Err(failed("must specify 'as' field for a $lookup"));
    };
    let Some(from) = args.from else {
        return Err(failed(if args.pipeline.is_some() {
            "$lookup without 'from' needs a pipeline beginning with $documents, which is not \
             supported yet"
        } else {
            "must specify 'pipeline' when 'from' is empty"
        }));
    };
    let equality = match (args.local, args.foreign) {
        (Some(local), Some(foreign)) => {
            parse_field_path(foreign)?;
            Some((parse_field_path(local)?, foreign.to_owned()))
        }
        (None, None) => None,
        _ => {
            return Err(failed(
                "$lookup requires both or neither of 'localField' and 'foreignField' to be \
                 specified",
            ))
        }
    };
    if equality.is_none() && args.pipeline.is_none() {
        return Err(failed(
            "$lookup requires either 'pipeline' or both 'localField' and 'foreignField' to be \
             specified",
        ));
    }
    if args.lets.is_some() && args.pipeline.is_none() {
        return Err(failed(
            "$lookup with a 'let' argument must also specify 'pipeline'",
        ));
    }
    let pipeline = match args.pipeline {
        Some(stages) => Some(parse_sub_pipeline(args.lets, stages, vars)?),
        None => None,
    };
    Ok(Lookup {
        from: from.to_owned(),
        as_path: parse_field_path(as_field)?,
        equality,
        pipeline,
    })
}

fn read_argument<'a>(
    args: &mut Args<'a>,
    key: &str,
    value: RawBsonRef<'a>,
) -> Result<(), MongoError> {
    match (key, value) {
        ("pipeline", RawBsonRef::Array(items)) => {
            let mut stages = Vec::new();
            for item in items {
                match item.map_err(bson_error)? {
                    RawBsonRef::Document(s) => stages.push(s.to_raw_document_buf()),
                    other => {
                        return Err(MongoError::new(
                            ErrorCode::TypeMismatch,
                            format!(
                                "Each element of the 'pipeline' array must be an object, found {}",
                                type_name(other)
                            ),
                        ))
                    }
                }
            }
            args.pipeline = Some(stages);
        }
        ("pipeline", _) => return Err(failed("'pipeline' option must be specified as an array")),
        ("let", RawBsonRef::Document(lets)) => args.lets = Some(lets),
        ("let", other) => {
            return Err(failed(format!(
                "$lookup argument 'let: {}' must be an object, is type {}",
                render(other),
                type_name(other)
            )))
        }
        ("from" | "as" | "localField" | "foreignField", RawBsonRef::String(s)) => {
            let slot = match key {
                "from" => &mut args.from,
                "as" => &mut args.as_field,
                "localField" => &mut args.local,
                _ => &mut args.foreign,
            };
            *slot = Some(s);
        }
        ("from" | "as" | "localField" | "foreignField", other) => {
            return Err(failed(format!(
                "$lookup argument '{key}: {}' must be a string, is type {}",
                render(other),
                type_name(other)
            )))
        }
        (other, _) => return Err(failed(format!("unknown argument to $lookup: {other}"))),
    }
    Ok(())
}

/// Parse the variables, then check the pipeline with every variable bound to null.
fn parse_sub_pipeline(
    lets: Option<&RawDocument>,
    stages: Vec<RawDocumentBuf>,
    vars: &Variables,
) -> Result<SubPipeline, MongoError> {
    let mut parsed_lets = Vec::new();
    for item in lets.into_iter().flat_map(|d| d.iter()) {
        let (name, value) = item.map_err(bson_error)?;
        check_user_write_name(name)?;
        parsed_lets.push((name.to_owned(), Expr::parse_in(value, vars)?));
    }
    let placeholders = parsed_lets
        .iter()
        .map(|(name, _)| (name.clone(), Some(RawBson::Null)))
        .collect();
    let checked = Pipeline::parse_in(&stages, Place::Lookup, &vars.with_bindings(placeholders))?;
    Ok(SubPipeline {
        fixed: parsed_lets.is_empty().then_some(checked),
        lets: parsed_lets,
        stages,
        vars: vars.clone(),
    })
}

/// Join each input document with the foreign collection.
pub(crate) fn run<'a>(spec: &'a Lookup, input: DocStream<'a>, ctx: Ctx<'a>) -> DocStream<'a> {
    let mut foreign: Option<Vec<RawDocumentBuf>> = None;
    let mut reusable: Option<Vec<Bson>> = None;
    map_docs(input, move |doc| {
        let foreign = match &mut foreign {
            Some(docs) => docs,
            empty => empty.insert(ctx.resolver.scan(&spec.from)?),
        };
        let joined = match &reusable {
            Some(cached) => cached.clone(),
            None => {
                let joined = spec.join(&doc, foreign, ctx)?;
                if spec.equality.is_none()
                    && spec.pipeline.as_ref().is_some_and(|p| p.fixed.is_some())
                {
                    reusable = Some(joined.clone());
                }
                joined
            }
        };
        let mut out = to_document(&doc)?;
        set_path(&mut out, &spec.as_path, Bson::Array(joined));
        to_raw(&out)
    })
}

impl Lookup {
    fn join(
        &self,
        doc: &RawDocument,
        foreign: &[RawDocumentBuf],
        ctx: Ctx<'_>,
    ) -> Result<Vec<Bson>, MongoError> {
        let mut candidates = Vec::new();
        match &self.equality {
            None => candidates.extend(foreign.iter()),
            Some((local, foreign_field)) => {
                let matcher = equality_matcher(doc, local, foreign_field)?;
                for f in foreign {
                    if matcher.matches(f)? {
                        candidates.push(f);
                    }
                }
            }
        }
        let joined = match &self.pipeline {
            None => candidates.into_iter().cloned().collect(),
            Some(sub) => sub.run(doc, candidates, ctx)?,
        };
        joined
            .iter()
            .map(|d| raw_to_bson(RawBsonRef::Document(d)))
            .collect()
    }
}

impl SubPipeline {
    fn run(
        &self,
        outer: &RawDocument,
        input: Vec<&RawDocumentBuf>,
        ctx: Ctx<'_>,
    ) -> Result<Vec<RawDocumentBuf>, MongoError> {
        if let Some(fixed) = &self.fixed {
            return run_to_vec(fixed.stages(), input.into_iter().cloned(), ctx);
        }
        let mut values = Vec::with_capacity(self.lets.len());
        for (name, expr) in &self.lets {
            let value = expr.evaluate(outer)?.as_raw().map(|v| v.to_raw_bson());
            values.push((name.clone(), value));
        }
        let bound = Pipeline::parse_in(
            &self.stages,
            Place::Lookup,
            &self.vars.with_bindings(values),
        )?;
        run_to_vec(bound.stages(), input.into_iter().cloned(), ctx)
    }
}

/// `{foreign: {$eq: v}}`, `{foreign: {$in: [...]}}`, or with regexes among the values
/// `{$or: [{foreign: {$eq: v}}, ...]}` (so a regex is compared, not matched), as MongoDB builds.
fn equality_matcher(
    doc: &RawDocument,
    local: &[String],
    foreign: &str,
) -> Result<Matcher, MongoError> {
    let mut values = Vec::new();
    local_values(doc, local, &mut values)?;
    if values.is_empty() {
        values.push(RawBsonRef::Null);
    }
    let eq = |v: RawBsonRef<'_>| {
        let mut op = RawDocumentBuf::new();
        op.append_ref("$eq", v);
        let mut clause = RawDocumentBuf::new();
        clause.append(foreign, op);
        clause
    };
    let mut filter = RawDocumentBuf::new();
    if values.len() == 1 {
        filter = eq(values[0]);
    } else if values
        .iter()
        .any(|v| matches!(v, RawBsonRef::RegularExpression(_)))
    {
        let mut clauses = RawArrayBuf::new();
        for v in &values {
            clauses.push(eq(*v));
        }
        filter.append("$or", clauses);
    } else {
        let mut list = RawArrayBuf::new();
        for v in &values {
            list.push(v.to_raw_bson());
        }
        let mut op = RawDocumentBuf::new();
        op.append("$in", list);
        filter.append(foreign, op);
    }
    Matcher::parse(&filter)
}

/// Every value at `path`, arrays expanded at every level (MongoDB's `visitAllValuesAtPath`).
pub(crate) fn local_values<'a>(
    doc: &'a RawDocument,
    path: &[String],
    out: &mut Vec<RawBsonRef<'a>>,
) -> Result<(), MongoError> {
    let Some((first, rest)) = path.split_first() else {
        return Ok(());
    };
    if let Some(value) = lookup(doc, first)? {
        expand(value, rest, out)?;
    }
    Ok(())
}

fn expand<'a>(
    value: RawBsonRef<'a>,
    rest: &[String],
    out: &mut Vec<RawBsonRef<'a>>,
) -> Result<(), MongoError> {
    match value {
        RawBsonRef::Array(items) => {
            for item in items {
                let item = item.map_err(bson_error)?;
                match item {
                    _ if rest.is_empty() => out.push(item),
                    RawBsonRef::Document(d) => local_values(d, rest, out)?,
                    _ => {}
                }
            }
        }
        RawBsonRef::Document(d) if !rest.is_empty() => local_values(d, rest, out)?,
        _ if rest.is_empty() => out.push(value),
        _ => {}
    }
    Ok(())
}
