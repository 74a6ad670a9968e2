//! The planner: picks how a query reads a collection — a point read by `_id`, a range of the
//! `_id`-ordered document tree, a range scan of one secondary index, or a full scan — from
//! the filter's top-level conjunction, the sort and a hint. Every candidate's bounds are a
//! superset of the matches (bounds.rs) and the executor filters every document, so the
//! choice changes cost, never results.
//!
//! Scoring (a simple rule set, not a cost model): an `_id` point wins outright; otherwise the
//! candidate with the most leading bounded fields wins (equality-pinned fields count first), a
//! unique index pinned on every field, an index that also yields the requested sort order and
//! then a clustering index (no document read per entry) break ties. With no bounded
//! candidate, an index that yields the sort order (a clustering one first) is scanned whole
//! instead of sorting in memory; else the collection is scanned.

use crate::bounds::{field_bound, key_ranges, FieldBound, Interval, KeyRange};
use crate::catalog::{Collection, Index};
use crate::index_spec::id_index_spec;
use crate::sort::SortSpec;
use crate::DbResult;
use bson::{doc, Bson, Document};
use shale_doc::{Direction, ErrorCode, MongoError};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Where the documents come from.
#[derive(Debug, Clone)]
pub enum Access {
    /// The whole document tree in `_id` order.
    CollScan,
    /// Ranges of the document tree (bounds on `_id`); `point` when it is one `_id`.
    IdRanges { point: bool },
    /// Ranges of a secondary index, each entry fetched from the document tree (or, for a
    /// clustering index, read from the entry itself).
    Index(Arc<Index>),
    /// A top-level `$or` whose every clause has a bounded plan: the clauses' plans run one
    /// after another and a document found by several is returned once.
    Or(Vec<Plan>),
}

/// A chosen plan.
#[derive(Debug, Clone)]
pub struct Plan {
    pub access: Access,
    /// Key ranges of the tree `access` reads, ascending (ignored for `CollScan`).
    pub ranges: Vec<KeyRange>,
    pub backward: bool,
    /// The scan already returns documents in the requested sort order.
    pub sort_covered: bool,
    /// The index is multikey: one document can appear under several keys.
    pub dedupe: bool,
    /// Per-field bounds of the chosen index, for `explain`.
    pub bounds: Vec<(String, FieldBound)>,
}

struct Candidate {
    index: Option<Arc<Index>>,
    fields: Vec<(String, Direction)>,
    multikey: bool,
    unique: bool,
    sparse: bool,
    clustering: bool,
    /// The position of a hashed field (`hashed.rs`): only its points bound it.
    hashed: Option<usize>,
}

/// Plans a query on `coll`.
pub fn plan(
    coll: &Collection,
    filter: &Document,
    sort: &SortSpec,
    hint: Option<&Bson>,
) -> DbResult<Plan> {
    if let Some(dir) = natural_hint(hint).or(sort.natural.filter(|_| sort.is_empty())) {
        return Ok(collscan(dir == Direction::Descending, sort.is_empty()));
    }
    // mongod's IDHACK: one `_id` is one point of the document tree, the best plan there
    // is, found before the other candidates are gathered (the loop below would pick it
    // first too: the document tree is its first candidate).
    if hint.is_none() && filter.contains_key("_id") {
        let p = build(&id_candidate(), filter, sort);
        if matches!(p.access, Access::IdRanges { point: true }) {
            return Ok(p);
        }
    }
    let candidates = candidates(coll);
    if let Some(h) = hint {
        let c = candidates.iter().find(|c| hint_matches(c, h)).ok_or_else(|| {
            MongoError::new(
                ErrorCode::BadValue,
                format!("error processing query: planner returned error :: caused by :: hint provided does not correspond to an existing index: {h}"),
            )
        })?;
        return Ok(build(c, filter, sort));
    }
    let mut best: Option<(u32, Plan)> = None;
    for c in candidates
        .iter()
        .filter(|c| c.index.as_ref().is_none_or(|i| usable(i)))
    {
        let p = build(c, filter, sort);
        let bounded = p
            .bounds
            .iter()
            .take_while(|(_, b)| *b != FieldBound::All)
            .count() as u32;
        if bounded == 0 {
            continue;
        }
        if matches!(p.access, Access::IdRanges { point: true }) {
            return Ok(p);
        }
        let pinned = p
            .bounds
            .iter()
            .take_while(|(_, b)| b.is_single_point())
            .count() as u32;
        let score = bounded * 100
            + pinned * 10
            + u32::from(c.unique && pinned as usize == c.fields.len()) * 5
            + u32::from(p.sort_covered) * 2
            + u32::from(c.clustering);
        if best.as_ref().is_none_or(|(s, _)| score > *s) {
            best = Some((score, p));
        }
    }
    if let Some((_, p)) = best {
        return Ok(p);
    }
    if let Some(p) = or_plan(coll, filter, sort)? {
        return Ok(p);
    }
    if !sort.is_empty() {
        // The document tree first, then clustering indexes, then the others.
        let mut ordered: Vec<&Candidate> = candidates
            .iter()
            .filter(|c| !c.sparse && c.index.as_ref().is_none_or(|i| usable(i)))
            .collect();
        ordered.sort_by_key(|c| (c.index.is_some(), !c.clustering));
        for c in ordered {
            let p = build(c, filter, sort);
            if p.sort_covered {
                return Ok(if c.index.is_none() {
                    collscan(p.backward, true)
                } else {
                    p
                });
            }
        }
    }
    Ok(collscan(false, sort.is_empty()))
}

/// A union plan for a filter that is (or has at its top level) an `$or` whose every clause
/// can use an index on its own; `None` when some clause would need a collection scan.
fn or_plan(coll: &Collection, filter: &Document, sort: &SortSpec) -> DbResult<Option<Plan>> {
    let Some(Bson::Array(clauses)) = filter.get("$or") else {
        return Ok(None);
    };
    let unsorted = SortSpec {
        fields: Vec::new(),
        natural: None,
        collation: None,
    };
    let mut plans = Vec::with_capacity(clauses.len());
    for clause in clauses {
        let Bson::Document(clause) = clause else {
            return Ok(None);
        };
        let p = plan(coll, clause, &unsorted, None)?;
        if matches!(p.access, Access::CollScan) {
            return Ok(None);
        }
        plans.push(p);
    }
    Ok(Some(Plan {
        access: Access::Or(plans),
        ranges: Vec::new(),
        backward: false,
        sort_covered: sort.is_empty(),
        dedupe: true,
        bounds: Vec::new(),
    }))
}

fn usable(index: &Index) -> bool {
    index.def.partial.is_none() && !index.def.has_positional_path()
}

/// The document tree as a candidate: unique on `_id`, holding the whole document.
fn id_candidate() -> Candidate {
    Candidate {
        index: None,
        fields: vec![("_id".to_owned(), Direction::Ascending)],
        multikey: false,
        unique: true,
        sparse: false,
        clustering: true,
        hashed: None,
    }
}

fn candidates(coll: &Collection) -> Vec<Candidate> {
    let mut v = vec![id_candidate()];
    for i in coll.ready_indexes().filter(|i| !i.def.hidden) {
        v.push(Candidate {
            index: Some(i.clone()),
            fields: i.def.fields.clone(),
            multikey: i.multikey.load(Ordering::SeqCst),
            unique: i.def.unique,
            sparse: i.def.sparse,
            clustering: i.def.clustering,
            hashed: i.def.hashed,
        });
    }
    v
}

fn build(c: &Candidate, filter: &Document, sort: &SortSpec) -> Plan {
    let mut bounds: Vec<FieldBound> = c
        .fields
        .iter()
        .map(|(p, _)| field_bound(filter, p, c.multikey))
        .collect();
    if let Some(h) = c.hashed {
        bounds[h] = hashed_bound(&bounds[h]);
    }
    let dirs: Vec<Direction> = c.fields.iter().map(|(_, d)| *d).collect();
    let ranges = key_ranges(&bounds, &dirs);
    let (sort_covered, backward) = sort_order(c, &bounds, sort);
    let access = match &c.index {
        None => Access::IdRanges {
            point: bounds[0].is_single_point(),
        },
        Some(i) => Access::Index(i.clone()),
    };
    Plan {
        access,
        ranges,
        backward,
        sort_covered,
        dedupe: c.multikey,
        bounds: c
            .fields
            .iter()
            .map(|(p, _)| p.clone())
            .zip(bounds)
            .collect(),
    }
}

/// A hashed field's bound: equality points become the points of their hashes; any other
/// bound (a range, a regex) is the whole field, since hashes keep no order.
fn hashed_bound(bound: &FieldBound) -> FieldBound {
    match bound.point_values() {
        Some(values) => {
            let mut points: Vec<Bson> = values
                .iter()
                .map(|v| Bson::Int64(shale_doc::hashed::hash64(v)))
                .collect();
            points.sort_by_key(|p| p.as_i64());
            points.dedup();
            FieldBound::Intervals(points.iter().map(Interval::point).collect())
        }
        None => FieldBound::All,
    }
}

/// Whether scanning `c` yields `sort`'s order, and in which direction.
fn sort_order(c: &Candidate, bounds: &[FieldBound], sort: &SortSpec) -> (bool, bool) {
    // A hashed index keeps no order of its hashed field's values (nor of fields after it).
    if let Some(h) = c.hashed {
        if sort
            .fields
            .iter()
            .any(|(p, _)| c.fields[h..].iter().any(|(f, _)| f == p))
        {
            return (false, false);
        }
    }
    if sort.is_empty() {
        return (true, false);
    }
    if c.multikey {
        return (false, false);
    }
    let pinned = bounds.iter().take_while(|b| b.is_single_point()).count();
    for start in 0..=pinned.min(c.fields.len()) {
        let rest = &c.fields[start..];
        if sort.fields.len() > rest.len() {
            break;
        }
        let paths_match = sort.fields.iter().zip(rest).all(|((a, _), (b, _))| a == b);
        if !paths_match {
            continue;
        }
        let same = sort.fields.iter().zip(rest).all(|((_, x), (_, y))| x == y);
        let opposite = sort.fields.iter().zip(rest).all(|((_, x), (_, y))| x != y);
        if same || opposite {
            return (true, opposite);
        }
    }
    (false, false)
}

fn collscan(backward: bool, sort_covered: bool) -> Plan {
    Plan {
        access: Access::CollScan,
        ranges: vec![KeyRange {
            start: Vec::new(),
            end: None,
        }],
        backward,
        sort_covered,
        dedupe: false,
        bounds: Vec::new(),
    }
}

fn natural_hint(hint: Option<&Bson>) -> Option<Direction> {
    let Some(Bson::Document(h)) = hint else {
        return None;
    };
    let n = h.get("$natural")?;
    let v = match n {
        Bson::Int32(i) => f64::from(*i),
        Bson::Int64(i) => *i as f64,
        Bson::Double(d) => *d,
        _ => 1.0,
    };
    Some(if v < 0.0 {
        Direction::Descending
    } else {
        Direction::Ascending
    })
}

fn hint_matches(c: &Candidate, hint: &Bson) -> bool {
    let (name, pattern) = match &c.index {
        None => ("_id_".to_owned(), doc! {"_id": 1}),
        Some(i) => (i.def.name.clone(), i.def.key_pattern()),
    };
    match hint {
        Bson::String(s) => *s == name,
        Bson::Document(d) => {
            d.len() == pattern.len()
                && d.iter().zip(pattern.iter()).all(|((k1, v1), (k2, v2))| {
                    k1 == k2 && shale_doc::compare_values(v1, v2) == std::cmp::Ordering::Equal
                })
        }
        _ => false,
    }
}

impl Plan {
    /// Name of the index read, if any (`_id_` for `_id` ranges).
    pub fn index_name(&self) -> Option<String> {
        match &self.access {
            Access::CollScan | Access::Or(_) => None,
            Access::IdRanges { .. } => Some("_id_".to_owned()),
            Access::Index(i) => Some(i.def.name.clone()),
        }
    }

    /// `queryPlanner.winningPlan` as MongoDB's explain shapes it.
    pub fn explain(&self, filter: &Document, in_memory_sort: Option<&Document>) -> Document {
        let direction = if self.backward { "backward" } else { "forward" };
        let mut stage = match &self.access {
            Access::CollScan => {
                doc! { "stage": "COLLSCAN", "filter": filter.clone(), "direction": direction }
            }
            Access::IdRanges { point: true } => doc! { "stage": "IDHACK" },
            Access::IdRanges { point: false } => {
                doc! { "stage": "FETCH", "filter": filter.clone(), "inputStage": self.ixscan(&id_index_spec(), direction) }
            }
            Access::Index(i) if i.def.clustering => {
                // No FETCH: the index entries are the documents, matched where they are read.
                let mut ixscan = self.ixscan(&i.spec, direction);
                ixscan.insert("clustering", true);
                if !filter.is_empty() {
                    ixscan.insert("filter", filter.clone());
                }
                ixscan
            }
            Access::Index(i) => {
                doc! { "stage": "FETCH", "filter": filter.clone(), "inputStage": self.ixscan(&i.spec, direction) }
            }
            Access::Or(plans) => {
                let inputs: Vec<Bson> = plans
                    .iter()
                    .map(|p| Bson::Document(p.explain(&Document::new(), None)))
                    .collect();
                doc! { "stage": "SUBPLAN", "inputStage": { "stage": "OR", "filter": filter.clone(), "inputStages": inputs } }
            }
        };
        if let Some(sort) = in_memory_sort {
            stage = doc! { "stage": "SORT", "sortPattern": sort.clone(), "memLimit": 104857600_i64, "type": "simple", "inputStage": stage };
        }
        stage
    }

    fn ixscan(&self, spec: &Document, direction: &str) -> Document {
        let mut bounds = Document::new();
        for (path, b) in &self.bounds {
            let shown: Vec<Bson> = match b {
                FieldBound::All => vec![Bson::String("[MinKey, MaxKey]".into())],
                FieldBound::Intervals(v) => v.iter().map(|i| Bson::String(i.text())).collect(),
            };
            bounds.insert(path.clone(), shown);
        }
        doc! {
            "stage": "IXSCAN",
            "keyPattern": spec.get("key").cloned().unwrap_or(Bson::Null),
            "indexName": spec.get("name").cloned().unwrap_or(Bson::Null),
            "isMultiKey": self.dedupe,
            "isUnique": spec.get_bool("unique").unwrap_or(false),
            "isSparse": spec.get_bool("sparse").unwrap_or(false),
            "isPartial": spec.contains_key("partialFilterExpression"),
            "direction": direction,
            "indexBounds": bounds,
        }
    }
}
