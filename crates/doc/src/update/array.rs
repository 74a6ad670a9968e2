//! The array update operators: `$push` (with `$each`, `$slice`, `$sort`, `$position`),
//! `$addToSet` (with `$each`), `$pop`, `$pull` and `$pullAll` — argument checks at parse time
//! and the new array each produces from the current value at one concrete path. Element
//! equality is MongoDB's (`compare_values`, so `1` equals `1.0`). `$pull` conditions are
//! `ElementPredicate`s from `predicate.rs`. This file never walks paths itself.

use std::cmp::Ordering;

use bson::{Bson, Document};

use super::predicate::{
    query_fields, simple_or_query, ElementPredicate, EqualsValue, QueryPredicate, SimplePredicate,
};
use super::{render, Change, Site};
use crate::compare::compare_values;
use crate::{ErrorCode, MongoError};

/// How `$push` sorts the array after inserting.
#[derive(Debug, Clone, PartialEq)]
pub enum PushSort {
    /// Whole elements; `true` for descending.
    Whole(bool),
    /// By fields of the elements: (dotted path, descending) in priority order.
    Pattern(Vec<(Vec<String>, bool)>),
}

/// A parsed `$push` argument.
#[derive(Debug, Clone, PartialEq)]
pub struct PushSpec {
    values: Vec<Bson>,
    slice: Option<i64>,
    sort: Option<PushSort>,
    position: Option<i64>,
}

/// One array operator with its parsed argument.
#[derive(Debug)]
pub enum ArrayOp {
    Push(PushSpec),
    AddToSet(Vec<Bson>),
    Pop { from_front: bool },
    Pull(Box<dyn ElementPredicate>),
    PullAll(Vec<Bson>),
}

impl ArrayOp {
    /// Parse the argument of `op` for `field`; `None` when `op` is no array operator.
    pub fn parse(op: &str, field: &str, arg: &Bson) -> Option<Result<ArrayOp, MongoError>> {
        Some(match op {
            "$push" => parse_push(arg).map(ArrayOp::Push),
            "$addToSet" => parse_add_to_set(arg).map(ArrayOp::AddToSet),
            "$pop" => parse_pop(field, arg).map(|from_front| ArrayOp::Pop { from_front }),
            "$pull" => parse_pull(arg).map(ArrayOp::Pull),
            "$pullAll" => parse_pull_all(arg).map(ArrayOp::PullAll),
            _ => return None,
        })
    }

    /// Whether the operator creates the array when the path is missing.
    pub fn creates_path(&self) -> bool {
        matches!(self, ArrayOp::Push(_) | ArrayOp::AddToSet(_))
    }

    /// The change at one concrete path, given the value there (`None` when missing).
    pub fn compute(&self, current: Option<&Bson>, site: &Site<'_>) -> Result<Change, MongoError> {
        match self {
            ArrayOp::Push(spec) => push(spec, current, site),
            ArrayOp::AddToSet(values) => add_to_set(values, current, site),
            ArrayOp::Pop { from_front } => pop(*from_front, current, site),
            ArrayOp::Pull(pred) => cull(current, |e| pred.matches(e)),
            ArrayOp::PullAll(values) => cull(current, |e| Ok(values.iter().any(|v| same(e, v)))),
        }
    }
}

fn same(a: &Bson, b: &Bson) -> bool {
    compare_values(a, b) == Ordering::Equal
}

fn bad_value(message: String) -> MongoError {
    MongoError::new(ErrorCode::BadValue, message)
}

fn parse_push(arg: &Bson) -> Result<PushSpec, MongoError> {
    let mut spec = PushSpec {
        values: vec![arg.clone()],
        slice: None,
        sort: None,
        position: None,
    };
    let Bson::Document(clauses) = arg else {
        return Ok(spec);
    };
    if !clauses.contains_key("$each") {
        return Ok(spec);
    }
    let mut seen: Vec<&str> = Vec::new();
    for (name, value) in clauses {
        if !matches!(name.as_str(), "$each" | "$slice" | "$sort" | "$position") {
            return Err(bad_value(format!("Unrecognized clause in $push: {name}")));
        }
        if seen.contains(&name.as_str()) {
            return Err(bad_value(format!("Only one {name} is supported.")));
        }
        seen.push(name);
        parse_push_clause(&mut spec, name, value)?;
    }
    Ok(spec)
}

fn parse_push_clause(spec: &mut PushSpec, name: &str, value: &Bson) -> Result<(), MongoError> {
    match name {
        "$each" => match value {
            Bson::Array(items) => spec.values = items.clone(),
            other => {
                return Err(bad_value(format!(
                    "The argument to $each in $push must be an array but it was of type: {}",
                    render::type_name(other)
                )))
            }
        },
        "$slice" => {
            spec.slice = Some(integral(value).ok_or_else(|| {
                bad_value(format!(
                    "The value for $slice must be an integer value but was given type: {}",
                    render::type_name(value)
                ))
            })?)
        }
        "$position" => {
            spec.position = Some(integral(value).ok_or_else(|| {
                bad_value(format!(
                    "The value for $position must be an integer value, not of type: {}",
                    render::type_name(value)
                ))
            })?)
        }
        _ => spec.sort = Some(parse_sort(value)?),
    }
    Ok(())
}

/// An integral number as i64 (int32, int64, or a double with no fraction).
fn integral(v: &Bson) -> Option<i64> {
    match v {
        Bson::Int32(i) => Some(i64::from(*i)),
        Bson::Int64(i) => Some(*i),
        Bson::Double(d) if d.fract() == 0.0 && d.abs() < 9.2e18 => Some(*d as i64),
        _ => None,
    }
}

/// 1 or -1 as a sort direction (`true` for descending).
fn direction(v: &Bson) -> Option<bool> {
    let d = match v {
        Bson::Int32(i) => f64::from(*i),
        Bson::Int64(i) => *i as f64,
        Bson::Double(d) => *d,
        _ => return None,
    };
    match d {
        1.0 => Some(false),
        -1.0 => Some(true),
        _ => None,
    }
}

fn parse_sort(value: &Bson) -> Result<PushSort, MongoError> {
    let must_be_one = || bad_value("The $sort element value must be either 1 or -1".to_string());
    match value {
        Bson::Document(pattern) => parse_sort_pattern(pattern),
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => direction(value)
            .map(PushSort::Whole)
            .ok_or_else(must_be_one),
        _ => Err(bad_value(
            "The $sort is invalid: use 1/-1 to sort the whole element, or {field:1/-1} to sort \
             embedded fields"
                .to_string(),
        )),
    }
}

fn parse_sort_pattern(pattern: &Document) -> Result<PushSort, MongoError> {
    if pattern.is_empty() {
        return Err(bad_value(
            "The $sort pattern is empty when it should be a set of fields.".to_string(),
        ));
    }
    let mut keys = Vec::with_capacity(pattern.len());
    for (field, dir) in pattern {
        let descending = direction(dir).ok_or_else(|| {
            bad_value("The $sort element value must be either 1 or -1".to_string())
        })?;
        if field.is_empty() {
            return Err(bad_value("The $sort field cannot be empty".to_string()));
        }
        if field.split('.').any(str::is_empty) {
            return Err(bad_value(format!(
                "The $sort field is a dotted field but has an empty part: {field}"
            )));
        }
        keys.push((field.split('.').map(str::to_string).collect(), descending));
    }
    Ok(PushSort::Pattern(keys))
}

fn parse_add_to_set(arg: &Bson) -> Result<Vec<Bson>, MongoError> {
    let each = match arg {
        Bson::Document(d) if d.keys().next().map(String::as_str) == Some("$each") => d,
        other => return Ok(vec![other.clone()]),
    };
    let items = match each.get("$each") {
        Some(Bson::Array(items)) => items,
        other => {
            let shown = other.map_or("missing", render::type_name);
            return Err(MongoError::new(
                ErrorCode::TypeMismatch,
                format!("The argument to $each in $addToSet must be an array but it was of type {shown}"),
            ));
        }
    };
    if each.len() > 1 {
        return Err(bad_value(format!(
            "Found unexpected fields after $each in $addToSet: {}",
            render::document(each)
        )));
    }
    let mut unique: Vec<Bson> = Vec::with_capacity(items.len());
    for item in items {
        if !unique.iter().any(|u| same(u, item)) {
            unique.push(item.clone());
        }
    }
    Ok(unique)
}

fn parse_pop(field: &str, arg: &Bson) -> Result<bool, MongoError> {
    let n = match arg {
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) => integral(arg),
        _ => {
            return Err(MongoError::new(
                ErrorCode::FailedToParse,
                format!("Expected a number in: {}", render::element(field, arg)),
            ))
        }
    };
    match n {
        Some(1) => Ok(false),
        Some(-1) => Ok(true),
        _ => Err(MongoError::new(
            ErrorCode::FailedToParse,
            format!("$pop expects 1 or -1, found: {}", render::value(arg)),
        )),
    }
}

/// `$pull`'s three forms, as the server's `PullNode`: a query over document elements, an
/// operator condition (or regex) on the element itself, or plain equality.
fn parse_pull(arg: &Bson) -> Result<Box<dyn ElementPredicate>, MongoError> {
    match arg {
        Bson::Document(query) if !starts_with_path_operator(query) => {
            let simple = query_fields(query).and_then(|f| SimplePredicate::on_fields(&f, true));
            simple_or_query(simple, || QueryPredicate::on_document(query))
        }
        Bson::Document(_) | Bson::RegularExpression(_) => {
            simple_or_query(SimplePredicate::on_element(arg), || {
                QueryPredicate::on_element(arg)
            })
        }
        other => Ok(Box::new(EqualsValue(other.clone()))),
    }
}

/// True when the first key is a path-accepting operator (`$gt`, `$in`, `$elemMatch`...),
/// the server's test for the operator form; top-level ones (`$or`, `$and`, `$expr`...) make
/// the argument a query over document elements instead.
fn starts_with_path_operator(query: &Document) -> bool {
    const TOP_LEVEL: &[&str] = &[
        "$and",
        "$or",
        "$nor",
        "$expr",
        "$where",
        "$text",
        "$comment",
        "$jsonSchema",
        "$alwaysTrue",
        "$alwaysFalse",
    ];
    query
        .keys()
        .next()
        .is_some_and(|k| k.starts_with('$') && !TOP_LEVEL.contains(&k.as_str()))
}

fn parse_pull_all(arg: &Bson) -> Result<Vec<Bson>, MongoError> {
    match arg {
        Bson::Array(items) => Ok(items.clone()),
        other => Err(bad_value(format!(
            "$pullAll requires an array argument but was given a {}",
            render::type_name(other)
        ))),
    }
}

fn push(spec: &PushSpec, current: Option<&Bson>, site: &Site<'_>) -> Result<Change, MongoError> {
    let mut items = match current {
        None => Vec::new(),
        Some(Bson::Array(items)) => items.clone(),
        Some(other) => {
            return Err(bad_value(format!(
                "The field '{}' must be an array but is of type {} in document {{{}}}",
                site.dotted(),
                render::type_name(other),
                render::id_element(site.doc_id)
            )))
        }
    };
    insert_at(&mut items, spec.position, &spec.values);
    if let Some(sort) = &spec.sort {
        sort_elements(&mut items, sort);
    }
    if let Some(slice) = spec.slice {
        apply_slice(&mut items, slice);
    }
    // The server reports a `$push` with `$sort` as a modification even when nothing moved.
    Ok(if spec.sort.is_some() {
        Change::Rewrite(Bson::Array(items))
    } else {
        Change::Write(Bson::Array(items))
    })
}

/// Insert `values` at `position` as the server does: past the end appends, negative counts
/// from the end, and a negative position beyond the start inserts at the front.
fn insert_at(items: &mut Vec<Bson>, position: Option<i64>, values: &[Bson]) {
    let len = items.len() as i64;
    let at = match position {
        None => len,
        Some(p) if p >= len => len,
        Some(p) if p >= 0 => p,
        Some(p) if p.unsigned_abs() < len as u64 => len + p,
        Some(_) => 0,
    };
    #[allow(
        clippy::expect_used,
        reason = "the position is clamped to 0..=len just above"
    )]
    let at = usize::try_from(at).expect("position clamped to 0..=len");
    items.splice(at..at, values.iter().cloned());
}

fn sort_elements(items: &mut [Bson], sort: &PushSort) {
    match sort {
        PushSort::Whole(descending) => {
            items.sort_by(|a, b| directed(compare_values(a, b), *descending))
        }
        PushSort::Pattern(keys) => items.sort_by(|a, b| compare_by_pattern(a, b, keys)),
    }
}

fn directed(ord: Ordering, descending: bool) -> Ordering {
    if descending {
        ord.reverse()
    } else {
        ord
    }
}

fn compare_by_pattern(a: &Bson, b: &Bson, keys: &[(Vec<String>, bool)]) -> Ordering {
    for (path, descending) in keys {
        let ord = compare_values(&sort_key(a, path), &sort_key(b, path));
        if ord != Ordering::Equal {
            return directed(ord, *descending);
        }
    }
    Ordering::Equal
}

/// The value at a dotted path inside an element, null when absent.
fn sort_key(element: &Bson, path: &[String]) -> Bson {
    let mut current = element;
    for part in path {
        match current {
            Bson::Document(d) => match d.get(part) {
                Some(v) => current = v,
                None => return Bson::Null,
            },
            _ => return Bson::Null,
        }
    }
    current.clone()
}

/// Keep the first `slice` elements, or the last `-slice` when negative.
fn apply_slice(items: &mut Vec<Bson>, slice: i64) {
    let keep = usize::try_from(slice.unsigned_abs()).unwrap_or(usize::MAX);
    if items.len() <= keep {
        return;
    }
    if slice >= 0 {
        items.truncate(keep);
    } else {
        items.drain(..items.len() - keep);
    }
}

fn add_to_set(
    values: &[Bson],
    current: Option<&Bson>,
    site: &Site<'_>,
) -> Result<Change, MongoError> {
    let mut items = match current {
        None => Vec::new(),
        Some(Bson::Array(items)) => items.clone(),
        Some(other) => {
            return Err(bad_value(format!(
                "Cannot apply $addToSet to non-array field. Field named '{}' has non-array type {}",
                site.field_name(),
                render::type_name(other)
            )))
        }
    };
    for v in values {
        if !items.iter().any(|e| same(e, v)) {
            items.push(v.clone());
        }
    }
    Ok(Change::Write(Bson::Array(items)))
}

fn pop(from_front: bool, current: Option<&Bson>, site: &Site<'_>) -> Result<Change, MongoError> {
    match current {
        None => Ok(Change::Keep),
        Some(Bson::Array(items)) if items.is_empty() => Ok(Change::Keep),
        Some(Bson::Array(items)) => {
            let mut items = items.clone();
            if from_front {
                items.remove(0);
            } else {
                items.pop();
            }
            Ok(Change::Write(Bson::Array(items)))
        }
        Some(other) => Err(MongoError::new(
            ErrorCode::TypeMismatch,
            format!(
                "Path '{}' contains an element of non-array type '{}'",
                site.dotted(),
                render::type_name(other)
            ),
        )),
    }
}

/// `$pull` and `$pullAll`: drop the elements `remove` selects.
fn cull(
    current: Option<&Bson>,
    remove: impl Fn(&Bson) -> Result<bool, MongoError>,
) -> Result<Change, MongoError> {
    match current {
        None => Ok(Change::Keep),
        Some(Bson::Array(items)) => {
            let mut kept = Vec::with_capacity(items.len());
            for e in items {
                if !remove(e)? {
                    kept.push(e.clone());
                }
            }
            Ok(Change::Write(Bson::Array(kept)))
        }
        Some(_) => Err(bad_value(
            "Cannot apply $pull to a non-array value".to_string(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::bson;

    fn ints(v: &[i32]) -> Vec<Bson> {
        v.iter().map(|i| Bson::Int32(*i)).collect()
    }

    #[test]
    fn position_rules() {
        let mut a = ints(&[1, 2, 3]);
        insert_at(&mut a, Some(-1), &ints(&[9]));
        assert_eq!(a, ints(&[1, 2, 9, 3]));
        let mut a = ints(&[1, 2]);
        insert_at(&mut a, Some(-5), &ints(&[9]));
        assert_eq!(a, ints(&[9, 1, 2]));
        let mut a = ints(&[1, 2]);
        insert_at(&mut a, Some(7), &ints(&[9]));
        assert_eq!(a, ints(&[1, 2, 9]));
    }

    #[test]
    fn slices() {
        let mut a = ints(&[1, 2, 3, 4]);
        apply_slice(&mut a, -2);
        assert_eq!(a, ints(&[3, 4]));
        apply_slice(&mut a, 0);
        assert!(a.is_empty());
    }

    #[test]
    fn push_clause_errors() {
        let err = |arg: Bson| parse_push(&arg).expect_err("bad clause").message;
        assert_eq!(
            err(bson!({"$each": [1], "$foo": 1})),
            "Unrecognized clause in $push: $foo"
        );
        assert_eq!(
            err(bson!({"$each": 1})),
            "The argument to $each in $push must be an array but it was of type: int"
        );
        assert_eq!(
            err(bson!({"$each": [], "$sort": 2})),
            "The $sort element value must be either 1 or -1"
        );
    }

    #[test]
    fn pop_arguments() {
        assert!(parse_pop("a", &bson!(-1)).expect("valid"));
        assert!(!parse_pop("a", &bson!(1.0)).expect("valid"));
        let e = parse_pop("a", &bson!(2)).expect_err("invalid");
        assert_eq!(e.message, "$pop expects 1 or -1, found: 2");
        let e = parse_pop("a", &bson!("x")).expect_err("invalid");
        assert_eq!(e.message, "Expected a number in: a: \"x\"");
    }
}
