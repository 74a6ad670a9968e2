//! Which collation a statement runs under, and what a collation changes in how it is
//! planned.
//!
//! A statement that names no collation takes its collection's default (`create`'s
//! `collation`); one that names `{locale: "simple"}` compares binary whatever the default.
//!
//! Index keys are always stored binary (docs/compat.md, Collation), so an index can answer a
//! comparison only under the simple collation: under another one the planner gets the
//! filter without its string comparisons (`bounds_filter`: the bounds stay a superset of
//! the matches and the executor's collated matcher filters every document) and no index
//! order counts as the sort order (strings may sort differently). Numbers, dates and other
//! types are unaffected by a collation and keep their index bounds. This file never reads
//! documents.

use crate::catalog::Collection;
use crate::plan::{plan, Plan};
use crate::sort::SortSpec;
use crate::DbResult;
use bson::{Bson, Document};
use shale_doc::{Collation, Variables};
use std::sync::Arc;

/// The collection's default collation (`None`: simple).
pub(crate) fn default_collation(coll: &Collection) -> Option<Arc<Collation>> {
    match coll.options.get("collation") {
        Some(spec) => Collation::parse(spec, "create")
            .ok()
            .flatten()
            .map(Arc::new),
        None => None,
    }
}

/// `vars` with the collation the statement runs under: its own, else `coll`'s default.
pub(crate) fn statement_vars(coll: &Collection, vars: &Variables) -> Variables {
    if vars.collation_given() {
        return vars.clone();
    }
    match default_collation(coll) {
        Some(c) => vars.with_collation(Some(c)),
        None => vars.clone(),
    }
}

/// Plans `filter` and `sort` on `coll` under the collation in `vars` (already resolved by
/// `statement_vars`).
pub(crate) fn plan_under(
    coll: &Collection,
    filter: &Document,
    sort: &SortSpec,
    hint: Option<&Bson>,
    vars: &Variables,
) -> DbResult<Plan> {
    if vars.collation().is_none() {
        return plan(coll, filter, sort, hint);
    }
    let unsorted = SortSpec {
        fields: Vec::new(),
        natural: sort.natural,
        collation: None,
    };
    let mut p = plan(coll, &bounds_filter(filter), &unsorted, hint)?;
    if !sort.is_empty() {
        p.sort_covered = false;
    }
    Ok(p)
}

/// `filter` without the comparisons a collation changes (those with a string anywhere in
/// their argument). Everything kept is what the filter asks, so its bounds hold the
/// collated matches.
pub(crate) fn bounds_filter(filter: &Document) -> Document {
    let mut out = Document::new();
    for (k, v) in filter {
        match (k.as_str(), v) {
            ("$and", Bson::Array(clauses)) => {
                let kept = clauses
                    .iter()
                    .map(|c| match c {
                        Bson::Document(d) => Bson::Document(bounds_filter(d)),
                        other => other.clone(),
                    })
                    .collect::<Vec<_>>();
                out.insert(k.clone(), kept);
            }
            (op, _) if op.starts_with('$') => {
                if !has_strings(v) || op != "$or" {
                    out.insert(k.clone(), v.clone());
                }
            }
            (_, Bson::Document(ops)) if is_operator_document(ops) => {
                let kept: Document = ops
                    .iter()
                    .filter(|(op, arg)| !(collated_operator(op) && has_strings(arg)))
                    .map(|(op, arg)| (op.clone(), arg.clone()))
                    .collect();
                if !kept.is_empty() {
                    out.insert(k.clone(), kept);
                }
            }
            (_, Bson::RegularExpression(_)) => {
                out.insert(k.clone(), v.clone());
            }
            (_, value) if has_strings(value) => {}
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    out
}

/// The operators whose answer a collation changes.
fn collated_operator(op: &str) -> bool {
    matches!(
        op,
        "$eq"
            | "$ne"
            | "$gt"
            | "$gte"
            | "$lt"
            | "$lte"
            | "$in"
            | "$nin"
            | "$all"
            | "$elemMatch"
            | "$not"
    )
}

fn is_operator_document(d: &Document) -> bool {
    d.keys().next().is_some_and(|k| k.starts_with('$'))
}

fn has_strings(v: &Bson) -> bool {
    match v {
        Bson::String(_) | Bson::Symbol(_) => true,
        Bson::Document(d) => d.values().any(has_strings),
        Bson::Array(a) => a.iter().any(has_strings),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn string_comparisons_leave_the_bounds_and_others_stay() {
        let f = doc! {
            "a": "PING", "b": 5, "c": {"$gt": "x", "$lt": 10}, "d": {"$in": [1, "y"]},
            "e": {"$regex": "^p"}, "$and": [{"f": "q"}, {"g": 1}], "$or": [{"h": "z"}],
        };
        assert_eq!(
            bounds_filter(&f),
            doc! {"b": 5, "c": {"$lt": 10}, "e": {"$regex": "^p"}, "$and": [{}, {"g": 1}]}
        );
    }
}
