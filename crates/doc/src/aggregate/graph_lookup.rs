//! `$graphLookup: {from, startWith, connectFromField, connectToField, as, maxDepth,
//! depthField, restrictSearchWithMatch}`: for each input document, a breadth-first search
//! over another collection of the same database, as mongod 7.0's `DocumentSourceGraphLookUp`
//! runs it. The frontier starts as `startWith`'s value (each element of an array); each round
//! finds the foreign documents matching `{$and: [restrictSearchWithMatch,
//! {connectToField: {$in: frontier}}]}` (the query matcher's rules: arrays at any level of the
//! path, the command's collation; a null in the frontier matches an explicit null only, never a
//! missing field), keeps those whose `_id` was not reached before (so cycles are visited once),
//! with `depthField` set to the round (a long, from 0), and makes their `connectFromField`
//! values (arrays expanded) the next frontier. It stops when a round reaches nothing new, or
//! after round `maxDepth`. The documents reached go into `as` as an array, in the order found
//! (mongod's order is unspecified).
//!
//! The foreign collection is read once per run through `LookupResolver` and matched in memory.
//! The documents reached and the frontier of one search together stay under the stage memory
//! limit (40099, as mongod, which does not spill). `from` as `{db, coll}` is refused
//! (`FailedToParse`), as mongod 7.0 refuses it for user collections. Spec errors are mongod's:
//! 40100-40105, 40185, `FailedToParse` (9).

use std::collections::HashSet;

use bson::raw::{RawArrayBuf, RawBson, RawBsonRef, RawDocument, RawDocumentBuf};
use bson::Bson;

use super::execute::{map_docs, raw_to_bson, to_document, to_raw, Ctx, DocStream};
use super::field_path::{parse_field_path, set_path};
use super::lookup::local_values;
use super::simple::{render, type_name};
use crate::keystring::encode_value_exact;
use crate::matcher::expr::Expr;
use crate::matcher::path::{bson_error, lookup};
use crate::matcher::Matcher;
use crate::variables::Variables;
use crate::{ErrorCode, MongoError};

/// A parsed `$graphLookup`.
#[derive(Debug, Clone)]
pub(crate) struct GraphLookup {
    from: String,
    as_path: Vec<String>,
    start_with: Expr,
    connect_from: Vec<String>,
    connect_to: String,
    depth_field: Option<Vec<String>>,
    max_depth: Option<i64>,
    restrict: Option<RawDocumentBuf>,
    /// The command's variables and collation, for the frontier's matcher.
    vars: Variables,
}

fn failed(message: impl Into<String>) -> MongoError {
    MongoError::new(ErrorCode::FailedToParse, message)
}

fn fail(code: ErrorCode, message: impl Into<String>) -> MongoError {
    MongoError::new(code, message)
}

/// The arguments as read, before the required ones are checked.
#[derive(Default)]
struct Args<'a> {
    as_field: Option<&'a str>,
    start_with: Option<Expr>,
    connect_from: Option<&'a str>,
    connect_to: Option<&'a str>,
    depth_field: Option<Vec<String>>,
    max_depth: Option<i64>,
    restrict: Option<RawDocumentBuf>,
}

pub(crate) fn parse(spec: RawBsonRef<'_>, vars: &Variables) -> Result<GraphLookup, MongoError> {
    let RawBsonRef::Document(d) = spec else {
        return Err(failed(format!(
            "the $graphLookup stage specification must be an object, but found {}",
            type_name(spec)
        )));
    };
    let from = parse_from(d)?;
    let mut args = Args::default();
    for field in d {
        let (key, value) = field.map_err(bson_error)?;
        read_argument(&mut args, key, value, vars)?;
    }
    let missing = |s: Option<&str>| s.is_none_or(str::is_empty);
    if missing(args.as_field)
        || missing(args.connect_from)
        || missing(args.connect_to)
        || args.start_with.is_none()
        || from.is_empty()
    {
        return Err(fail(
            ErrorCode::Location40105,
            "$graphLookup requires 'from', 'as', 'startWith', 'connectFromField', and \
             'connectToField' to be specified.",
        ));
    }
    let connect_to = args.connect_to.unwrap_or_default();
    parse_field_path(connect_to)?;
    Ok(GraphLookup {
        from,
        as_path: parse_field_path(args.as_field.unwrap_or_default())?,
        start_with: args.start_with.unwrap_or(Expr::Remove),
        connect_from: parse_field_path(args.connect_from.unwrap_or_default())?,
        connect_to: connect_to.to_owned(),
        depth_field: args.depth_field,
        max_depth: args.max_depth,
        restrict: args.restrict,
        vars: vars.clone(),
    })
}

/// `from`, read first as mongod's lite parse does: a collection name of this database.
fn parse_from(spec: &RawDocument) -> Result<String, MongoError> {
    match spec.get("from").map_err(bson_error)? {
        None => Err(failed(format!(
            "missing 'from' option to $graphLookup stage specification: {}",
            render(RawBsonRef::Document(spec))
        ))),
        Some(RawBsonRef::String(name)) => Ok(name.to_owned()),
        Some(RawBsonRef::Document(ns)) => {
            let part = |k: &str| match ns.get_str(k) {
                Ok(s) => s.to_owned(),
                Err(_) => String::new(),
            };
            Err(failed(format!(
                "$graphLookup with syntax {{from: {{db:<>, coll:<>}},..}} is not supported for \
                 db: {} and coll: {}",
                part("db"),
                part("coll")
            )))
        }
        Some(other) => Err(failed(format!(
            "$graphLookup 'from' field must be a string, but found {}",
            type_name(other)
        ))),
    }
}

fn read_argument<'a>(
    args: &mut Args<'a>,
    key: &str,
    value: RawBsonRef<'a>,
    vars: &Variables,
) -> Result<(), MongoError> {
    match key {
        "startWith" => args.start_with = Some(Expr::parse_in(value, vars)?),
        "maxDepth" => args.max_depth = Some(parse_max_depth(value)?),
        "restrictSearchWithMatch" => args.restrict = Some(parse_restrict(value, vars)?),
        "from" => {}
        "as" | "connectFromField" | "connectToField" | "depthField" => {
            let RawBsonRef::String(s) = value else {
                return Err(fail(
                    ErrorCode::Location40103,
                    format!(
                        "expected string as argument for {key}, found: {}",
                        type_name(value)
                    ),
                ));
            };
            match key {
                "as" => args.as_field = Some(s),
                "connectFromField" => args.connect_from = Some(s),
                "connectToField" => args.connect_to = Some(s),
                _ => args.depth_field = Some(parse_field_path(s)?),
            }
        }
        other => {
            return Err(fail(
                ErrorCode::Location40104,
                format!("Unknown argument to $graphLookup: {other}"),
            ))
        }
    }
    Ok(())
}

/// `maxDepth`: a non-negative whole number (a fraction is 40102, as mongod reads it as a long).
fn parse_max_depth(value: RawBsonRef<'_>) -> Result<i64, MongoError> {
    let (depth, exact) = match value {
        RawBsonRef::Int32(i) => (i64::from(i), true),
        RawBsonRef::Int64(i) => (i, true),
        RawBsonRef::Double(d) if d.is_nan() => (0, false),
        RawBsonRef::Double(d) => (d as i64, (d as i64) as f64 == d),
        RawBsonRef::Decimal128(_) => {
            return Err(fail(
                ErrorCode::NotImplemented,
                "a decimal128 $graphLookup 'maxDepth' is not supported",
            ))
        }
        other => {
            return Err(fail(
                ErrorCode::Location40100,
                format!("maxDepth must be numeric, found type: {}", type_name(other)),
            ))
        }
    };
    if depth < 0 {
        return Err(fail(
            ErrorCode::Location40101,
            format!("maxDepth requires a nonnegative argument, found: {depth}"),
        ));
    }
    if !exact {
        return Err(fail(
            ErrorCode::Location40102,
            format!("maxDepth could not be represented as a long long: {depth}"),
        ));
    }
    Ok(depth)
}

fn parse_restrict(value: RawBsonRef<'_>, vars: &Variables) -> Result<RawDocumentBuf, MongoError> {
    let RawBsonRef::Document(filter) = value else {
        return Err(fail(
            ErrorCode::Location40185,
            format!(
                "restrictSearchWithMatch must be an object, found {}",
                type_name(value)
            ),
        ));
    };
    Matcher::parse_with(filter, vars).map_err(|e| {
        MongoError::new(
            e.code,
            format!(
                "Failed to parse 'restrictSearchWithMatch' option to $graphLookup :: caused by :: {}",
                e.message
            ),
        )
    })?;
    Ok(filter.to_raw_document_buf())
}

/// Search from each input document.
pub(crate) fn run<'a>(spec: &'a GraphLookup, input: DocStream<'a>, ctx: Ctx<'a>) -> DocStream<'a> {
    let mut foreign: Option<Vec<RawDocumentBuf>> = None;
    map_docs(input, move |doc| {
        let foreign = match &mut foreign {
            Some(docs) => docs,
            empty => empty.insert(ctx.resolver.scan(&spec.from)?),
        };
        let found = spec.search(&doc, foreign, ctx.options.memory_limit_bytes)?;
        let mut out = to_document(&doc)?;
        set_path(&mut out, &spec.as_path, Bson::Array(found));
        to_raw(&out)
    })
}

/// The state of one search: documents reached, by `_id`, and the bytes held.
struct Search {
    seen_ids: HashSet<Vec<u8>>,
    found: Vec<Bson>,
    held_bytes: usize,
    limit_bytes: usize,
}

impl Search {
    fn charge(&mut self, bytes: usize) -> Result<(), MongoError> {
        self.held_bytes = self.held_bytes.saturating_add(bytes);
        if self.held_bytes >= self.limit_bytes {
            return Err(fail(
                ErrorCode::Location40099,
                "$graphLookup reached maximum memory consumption",
            ));
        }
        Ok(())
    }
}

impl GraphLookup {
    fn search(
        &self,
        doc: &RawDocument,
        foreign: &[RawDocumentBuf],
        limit_bytes: usize,
    ) -> Result<Vec<Bson>, MongoError> {
        let mut search = Search {
            seen_ids: HashSet::new(),
            found: Vec::new(),
            held_bytes: 0,
            limit_bytes,
        };
        let mut frontier = self.start(doc)?;
        let mut depth: i64 = 0;
        while !frontier.is_empty() {
            search.charge(frontier.iter().map(raw_len).sum())?;
            let matcher = self.frontier_matcher(&frontier)?;
            let mut next = Vec::new();
            for candidate in foreign {
                if matcher.matches(candidate)? {
                    self.visit(candidate, depth, &mut search, &mut next)?;
                }
            }
            search.held_bytes = search.found.iter().map(bson_len).sum();
            depth += 1;
            if self.max_depth.is_some_and(|max| depth > max) {
                break;
            }
            frontier = next;
        }
        Ok(search.found)
    }

    /// `startWith`'s values: each element of an array, else the value (missing: none).
    fn start(&self, doc: &RawDocument) -> Result<Vec<RawBson>, MongoError> {
        let value = self.start_with.evaluate(doc)?;
        let mut out = Vec::new();
        match value.as_raw() {
            Some(RawBsonRef::Array(items)) => {
                for item in items {
                    out.push(item.map_err(bson_error)?.to_raw_bson());
                }
            }
            Some(other) => out.push(other.to_raw_bson()),
            None => {}
        }
        Ok(out)
    }

    /// Adds `candidate` to the results unless its `_id` was reached before, and its
    /// `connectFromField` values to the next frontier.
    fn visit(
        &self,
        candidate: &RawDocument,
        depth: i64,
        search: &mut Search,
        next: &mut Vec<RawBson>,
    ) -> Result<(), MongoError> {
        let Some(id) = lookup(candidate, "_id")? else {
            return Err(fail(
                ErrorCode::Location40271,
                format!(
                    "Documents in the '{}' namespace must contain an _id for de-duplication in \
                     $graphLookup",
                    self.from
                ),
            ));
        };
        let mut key = Vec::new();
        encode_value_exact(&raw_to_bson(id)?, &mut key);
        if !search.seen_ids.insert(key) {
            return Ok(());
        }
        let mut values = Vec::new();
        local_values(candidate, &self.connect_from, &mut values)?;
        next.extend(values.into_iter().map(|v| v.to_raw_bson()));
        let mut found = to_document(candidate)?;
        if let Some(path) = &self.depth_field {
            set_path(&mut found, path, Bson::Int64(depth));
        }
        let found = Bson::Document(found);
        search.charge(bson_len(&found))?;
        search.found.push(found);
        Ok(())
    }

    /// `{$and: [restrict, {to: {$in: frontier}}, ...]}`, with mongod's guards so that a null
    /// or undefined in the frontier matches neither a missing field nor the other of the two.
    fn frontier_matcher(&self, frontier: &[RawBson]) -> Result<Matcher, MongoError> {
        let has_null = frontier.iter().any(|v| matches!(v, RawBson::Null));
        let has_undefined = frontier.iter().any(|v| matches!(v, RawBson::Undefined));
        let mut values = RawArrayBuf::new();
        for v in frontier {
            values.push(v.clone());
        }
        let mut clauses = RawArrayBuf::new();
        if let Some(restrict) = &self.restrict {
            clauses.push(restrict.clone());
        }
        clauses.push(field_clause(
            &self.connect_to,
            "$in",
            RawBson::Array(values),
        ));
        if has_null || has_undefined {
            clauses.push(field_clause(
                &self.connect_to,
                "$exists",
                RawBson::Boolean(true),
            ));
        }
        let excluded = match (has_null, has_undefined) {
            (true, false) => Some("undefined"),
            (false, true) => Some("null"),
            _ => None,
        };
        if let Some(kind) = excluded {
            let mut not_type = RawDocumentBuf::new();
            not_type.append("$type", kind);
            clauses.push(field_clause(
                &self.connect_to,
                "$not",
                RawBson::Document(not_type),
            ));
        }
        let mut filter = RawDocumentBuf::new();
        filter.append("$and", clauses);
        Matcher::parse_with(&filter, &self.vars)
    }
}

fn field_clause(field: &str, op: &str, value: RawBson) -> RawDocumentBuf {
    let mut inner = RawDocumentBuf::new();
    inner.append(op, value);
    let mut clause = RawDocumentBuf::new();
    clause.append(field, inner);
    clause
}

fn bson_len(value: &Bson) -> usize {
    super::execute::approximate_size(value)
}

/// The approximate bytes a frontier value holds.
fn raw_len(value: &RawBson) -> usize {
    raw_to_bson(value.as_raw_bson_ref()).map_or(16, |b| bson_len(&b))
}

#[cfg(test)]
mod tests {
    use crate::aggregate::{MemoryCollections, Pipeline, RunOptions};
    use bson::{doc, Bson, Document, RawDocumentBuf};
    use std::collections::{BTreeMap, BTreeSet};

    fn run(
        stage: Document,
        input: &[Document],
        people: &[Document],
        options: RunOptions,
    ) -> Result<Vec<Document>, crate::MongoError> {
        let mut collections = MemoryCollections::new();
        collections.insert("people", people)?;
        let p = Pipeline::parse(&[doc! {"$graphLookup": stage}])?;
        let input = input
            .iter()
            .map(|d| Ok(RawDocumentBuf::from_document(d).expect("raw")));
        p.run_from(0, input, &collections, options)
            .map(|d| d.map(|d| d.to_document().expect("doc")))
            .collect()
    }

    /// `_id` to depth, the naive way: repeated passes over an adjacency list.
    fn naive(start: i32, edges: &BTreeMap<i32, Vec<i32>>, max: Option<i64>) -> BTreeMap<i32, i64> {
        let mut depth_of = BTreeMap::new();
        let mut frontier: BTreeSet<i32> = [start].into();
        let mut depth = 0;
        while !frontier.is_empty() && max.is_none_or(|m| depth <= m) {
            let mut next = BTreeSet::new();
            for id in frontier {
                if edges.contains_key(&id) && !depth_of.contains_key(&id) {
                    depth_of.insert(id, depth);
                    next.extend(edges[&id].iter().copied());
                }
            }
            frontier = next;
            depth += 1;
        }
        depth_of
    }

    fn found(out: &Document) -> BTreeMap<i32, i64> {
        out.get_array("r")
            .expect("as")
            .iter()
            .map(|d| {
                let d = d.as_document().expect("doc");
                (
                    d.get_i32("_id").expect("id"),
                    d.get_i64("d").expect("depth"),
                )
            })
            .collect()
    }

    #[test]
    fn breadth_first_search_matches_the_naive_walk() {
        let mut seed = 11_u64;
        for round in 0..30 {
            let n = 2 + round % 9;
            let mut edges = BTreeMap::new();
            for id in 0..n {
                let links: Vec<i32> = (0..round % 3 + 1)
                    .map(|_| {
                        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                        i32::try_from((seed >> 33) % (n as u64 + 1)).expect("small")
                    })
                    .collect();
                edges.insert(id, links);
            }
            let people: Vec<Document> = edges
                .iter()
                .map(|(id, links)| doc! {"_id": *id, "to": links.clone()})
                .collect();
            for max in [None, Some(0_i64), Some(1), Some(3)] {
                let mut stage = doc! {"from": "people", "startWith": "$s", "connectFromField": "to",
                "connectToField": "_id", "as": "r", "depthField": "d"};
                if let Some(m) = max {
                    stage.insert("maxDepth", m);
                }
                let out =
                    run(stage, &[doc! {"s": 0}], &people, RunOptions::default()).expect("runs");
                assert_eq!(found(&out[0]), naive(0, &edges, max), "{edges:?} {max:?}");
            }
        }
    }

    #[test]
    fn arrays_nulls_and_restrictions() {
        let people = vec![
            doc! {"_id": 1, "name": "a", "boss": "b", "keep": true},
            doc! {"_id": 2, "name": "b", "boss": ["c", "a"], "keep": true},
            doc! {"_id": 3, "name": "c", "keep": false},
            doc! {"_id": 4, "name": null, "keep": true},
            doc! {"_id": 5, "keep": true},
        ];
        let stage = |start: Bson, restrict: Option<Document>| {
            let mut s = doc! {"from": "people", "startWith": start, "connectFromField": "boss",
            "connectToField": "name", "as": "r"};
            if let Some(r) = restrict {
                s.insert("restrictSearchWithMatch", r);
            }
            s
        };
        let ids = |out: &[Document]| -> Vec<i32> {
            let mut v: Vec<i32> = out[0]
                .get_array("r")
                .expect("as")
                .iter()
                .map(|d| d.as_document().expect("doc").get_i32("_id").expect("id"))
                .collect();
            v.sort_unstable();
            v
        };
        let all = run(
            stage(Bson::String("a".into()), None),
            &[doc! {}],
            &people,
            RunOptions::default(),
        )
        .expect("runs");
        assert_eq!(ids(&all), vec![1, 2, 3]);
        let kept = run(
            stage(Bson::String("a".into()), Some(doc! {"keep": true})),
            &[doc! {}],
            &people,
            RunOptions::default(),
        )
        .expect("runs");
        assert_eq!(ids(&kept), vec![1, 2]);
        let null = run(
            stage(Bson::Null, None),
            &[doc! {}],
            &people,
            RunOptions::default(),
        )
        .expect("runs");
        assert_eq!(ids(&null), vec![4], "null matches an explicit null only");
        let missing = run(
            stage(Bson::String("$nope".into()), None),
            &[doc! {}],
            &people,
            RunOptions::default(),
        )
        .expect("runs");
        assert_eq!(ids(&missing), Vec::<i32>::new());
        let many = run(
            stage(Bson::Array(vec!["c".into(), "x".into()]), None),
            &[doc! {}],
            &people,
            RunOptions::default(),
        )
        .expect("runs");
        assert_eq!(ids(&many), vec![3]);
    }

    #[test]
    fn memory_limit_and_missing_ids_fail() {
        let people: Vec<Document> = (0..50)
            .map(|i| doc! {"_id": i, "n": i + 1, "pad": "x".repeat(100)})
            .collect();
        let stage = doc! {"from": "people", "startWith": 0, "connectFromField": "n",
        "connectToField": "_id", "as": "r"};
        let small = RunOptions {
            memory_limit_bytes: 2000,
            allow_disk_use: true,
        };
        let e = run(stage.clone(), &[doc! {}], &people, small).unwrap_err();
        assert_eq!(e.code.code(), 40099);
        let e = run(stage, &[doc! {}], &[doc! {"n": 1}], RunOptions::default());
        assert!(e.expect("runs")[0].get_array("r").expect("as").is_empty());
        let no_id = doc! {"from": "people", "startWith": 1, "connectFromField": "n",
        "connectToField": "n", "as": "r"};
        let e = run(no_id, &[doc! {}], &[doc! {"n": 1}], RunOptions::default()).unwrap_err();
        assert_eq!(e.code.code(), 40271);
    }

    #[test]
    fn specs_are_refused_with_mongods_codes() {
        let base = doc! {"from": "people", "startWith": "$x", "connectFromField": "a",
        "connectToField": "b", "as": "r"};
        let code = |change: Document| {
            let mut spec = base.clone();
            spec.extend(change);
            Pipeline::parse(&[doc! {"$graphLookup": spec}])
                .unwrap_err()
                .code
                .code()
        };
        let bare = |spec: Bson| {
            Pipeline::parse(&[doc! {"$graphLookup": spec}])
                .unwrap_err()
                .code
                .code()
        };
        assert_eq!(bare(Bson::Int32(1)), 9);
        assert_eq!(bare(Bson::Document(doc! {"as": "r"})), 9);
        assert_eq!(code(doc! {"from": {"db": "other", "coll": "people"}}), 9);
        assert_eq!(code(doc! {"from": 1}), 9);
        assert_eq!(code(doc! {"maxDepth": "1"}), 40100);
        assert_eq!(code(doc! {"maxDepth": -1}), 40101);
        assert_eq!(code(doc! {"maxDepth": 1.5}), 40102);
        assert_eq!(code(doc! {"as": 1}), 40103);
        assert_eq!(code(doc! {"bogus": 1}), 40104);
        assert_eq!(code(doc! {"as": ""}), 40105);
        assert_eq!(code(doc! {"restrictSearchWithMatch": 1}), 40185);
        assert_eq!(code(doc! {"restrictSearchWithMatch": {"$bad": 1}}), 2);
        assert_eq!(
            bare(Bson::Document(
                doc! {"from": "people", "as": "r", "connectFromField": "a", "connectToField": "b"}
            )),
            40105
        );
    }
}
