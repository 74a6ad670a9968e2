//! Conditions on single array elements, for `$pull` and `arrayFilters`: the `ElementPredicate`
//! trait and the conditions this module evaluates itself — plain values (MongoDB's order via
//! `compare_values`) and `$eq $ne $gt $gte $lt $lte $in $nin` on the element or on fields of
//! document elements. Every other query form (`$and`/`$or`, `$elemMatch`, `$exists`, `$type`,
//! `$regex` and regex values, `$size`, `$all`, `$mod`, `$not`, bit tests, `$expr`) is refused at
//! parse time with `NotImplemented` until the crate's matcher is wired in behind this trait.
//! It never evaluates whole documents for a query; that is the matcher's job.

use std::cmp::Ordering;
use std::fmt;

use bson::{Bson, Document};

use super::path::array_index;
use crate::compare::{canonical_type_order, compare_values};
use crate::error_code::{ErrorCode, MongoError};

/// A condition on one array element.
pub trait ElementPredicate: fmt::Debug + Send + Sync {
    fn matches(&self, element: &Bson) -> bool;
}

/// One comparison operator with its operand.
#[derive(Debug, Clone, PartialEq)]
enum Test {
    Eq(Bson),
    Ne(Bson),
    Gt(Bson),
    Gte(Bson),
    Lt(Bson),
    Lte(Bson),
    In(Vec<Bson>),
    Nin(Vec<Bson>),
}

/// Tests that all apply to the value at `path` below the element (the element itself when
/// `path` is empty).
#[derive(Debug, Clone, PartialEq)]
struct Clause {
    path: Vec<String>,
    tests: Vec<Test>,
}

/// A conjunction of clauses, optionally requiring the element to be a document (the form
/// `$pull: {arr: {field: cond}}` takes).
#[derive(Debug, Clone, PartialEq)]
pub struct SimplePredicate {
    clauses: Vec<Clause>,
    documents_only: bool,
}

/// `$pull`'s plain-value form: the element equals the value (no array traversal).
#[derive(Debug, Clone, PartialEq)]
pub struct EqualsValue(pub Bson);

impl ElementPredicate for EqualsValue {
    fn matches(&self, element: &Bson) -> bool {
        compare_values(element, &self.0) == Ordering::Equal
    }
}

impl ElementPredicate for SimplePredicate {
    fn matches(&self, element: &Bson) -> bool {
        if self.documents_only && !matches!(element, Bson::Document(_)) {
            return false;
        }
        self.clauses.iter().all(|c| clause_matches(c, element))
    }
}

impl SimplePredicate {
    /// A condition on the element itself: `{$gte: 5}` or a plain value.
    pub fn on_element(condition: &Bson) -> Result<SimplePredicate, MongoError> {
        Ok(SimplePredicate {
            clauses: vec![Clause {
                path: Vec::new(),
                tests: parse_tests(condition)?,
            }],
            documents_only: false,
        })
    }

    /// A query over the fields of the element: `{score: {$gt: 5}, item: "B"}` with each key a
    /// dotted path below the element. With `documents_only`, non-document elements never match.
    pub fn on_fields(
        fields: &[(Vec<String>, &Bson)],
        documents_only: bool,
    ) -> Result<SimplePredicate, MongoError> {
        let mut clauses = Vec::with_capacity(fields.len());
        for (path, condition) in fields {
            clauses.push(Clause {
                path: path.clone(),
                tests: parse_tests(condition)?,
            });
        }
        Ok(SimplePredicate {
            clauses,
            documents_only,
        })
    }
}

/// True when `value` is an operator document (`{$gt: 1}`) rather than a literal.
pub fn is_operator_document(value: &Bson) -> bool {
    match value {
        Bson::Document(d) => d.keys().next().is_some_and(|k| k.starts_with('$')),
        _ => false,
    }
}

/// The refusal for a query form that needs the matcher.
pub fn needs_matcher(what: &str) -> MongoError {
    MongoError::new(
        ErrorCode::NotImplemented,
        format!(
            "{what} is not supported in updates yet ($pull conditions and arrayFilters accept \
             plain values and $eq, $ne, $gt, $gte, $lt, $lte, $in, $nin)"
        ),
    )
}

fn parse_tests(condition: &Bson) -> Result<Vec<Test>, MongoError> {
    if let Bson::RegularExpression(_) = condition {
        return Err(needs_matcher("A regular expression condition"));
    }
    let Bson::Document(ops) = condition else {
        return Ok(vec![Test::Eq(condition.clone())]);
    };
    if !is_operator_document(condition) {
        return Ok(vec![Test::Eq(condition.clone())]);
    }
    ops.iter().map(|(op, arg)| parse_test(op, arg)).collect()
}

fn parse_test(op: &str, arg: &Bson) -> Result<Test, MongoError> {
    Ok(match op {
        "$eq" => Test::Eq(arg.clone()),
        "$ne" => Test::Ne(arg.clone()),
        "$gt" => Test::Gt(arg.clone()),
        "$gte" => Test::Gte(arg.clone()),
        "$lt" => Test::Lt(arg.clone()),
        "$lte" => Test::Lte(arg.clone()),
        "$in" => Test::In(in_list(op, arg)?),
        "$nin" => Test::Nin(in_list(op, arg)?),
        "$exists" | "$type" | "$regex" | "$options" | "$elemMatch" | "$size" | "$all" | "$mod"
        | "$not" | "$bitsAllSet" | "$bitsAnySet" | "$bitsAllClear" | "$bitsAnyClear" | "$expr"
        | "$where" | "$and" | "$or" | "$nor" | "$jsonSchema" | "$geoWithin" | "$geoIntersects"
        | "$near" | "$nearSphere" | "$text" => {
            return Err(needs_matcher(&format!("The query operator {op}")))
        }
        _ => {
            return Err(MongoError::new(
                ErrorCode::BadValue,
                format!("unknown operator: {op}"),
            ))
        }
    })
}

fn in_list(op: &str, arg: &Bson) -> Result<Vec<Bson>, MongoError> {
    match arg {
        Bson::Array(items) => {
            if items
                .iter()
                .any(|v| matches!(v, Bson::RegularExpression(_)))
            {
                return Err(needs_matcher(&format!("A regular expression inside {op}")));
            }
            Ok(items.clone())
        }
        _ => Err(MongoError::new(
            ErrorCode::BadValue,
            format!("{op} needs an array"),
        )),
    }
}

fn clause_matches(clause: &Clause, element: &Bson) -> bool {
    let mut values = Vec::new();
    collect_values(element, &clause.path, &mut values);
    clause.tests.iter().all(|t| test_matches(t, &values))
}

/// The values a dotted path reaches, traversing arrays of documents as queries do.
fn collect_values<'a>(value: &'a Bson, path: &[String], out: &mut Vec<&'a Bson>) {
    let Some((first, rest)) = path.split_first() else {
        out.push(value);
        return;
    };
    match value {
        Bson::Document(d) => {
            if let Some(v) = d.get(first) {
                collect_values(v, rest, out);
            }
        }
        Bson::Array(items) => {
            if let Some(v) = array_index(first).and_then(|i| items.get(i)) {
                collect_values(v, rest, out);
            }
            for item in items.iter().filter(|i| matches!(i, Bson::Document(_))) {
                collect_values(item, path, out);
            }
        }
        _ => {}
    }
}

fn test_matches(test: &Test, values: &[&Bson]) -> bool {
    match test {
        Test::Ne(v) => !any_value(values, |x| equal(x, v)),
        Test::Nin(vs) => !vs.iter().any(|v| any_value(values, |x| equal(x, v))),
        Test::Eq(v) => any_value(values, |x| equal(x, v)),
        Test::In(vs) => vs.iter().any(|v| any_value(values, |x| equal(x, v))),
        Test::Gt(v) => any_value(values, |x| ordered(x, v, |o| o == Ordering::Greater)),
        Test::Gte(v) => any_value(values, |x| ordered(x, v, |o| o != Ordering::Less)),
        Test::Lt(v) => any_value(values, |x| ordered(x, v, |o| o == Ordering::Less)),
        Test::Lte(v) => any_value(values, |x| ordered(x, v, |o| o != Ordering::Greater)),
    }
}

/// True when `pred` holds for a reached value, one of its array members, or — when nothing
/// was reached — for null (a missing field compares as null).
fn any_value(values: &[&Bson], pred: impl Fn(&Bson) -> bool) -> bool {
    if values.is_empty() {
        return pred(&Bson::Null);
    }
    values.iter().any(|v| {
        pred(v)
            || match v {
                Bson::Array(items) => items.iter().any(&pred),
                _ => false,
            }
    })
}

fn equal(x: &Bson, v: &Bson) -> bool {
    compare_values(x, v) == Ordering::Equal
}

/// Range comparisons only hold within one type bracket (numbers with numbers, and so on).
fn ordered(x: &Bson, v: &Bson, accept: impl Fn(Ordering) -> bool) -> bool {
    canonical_type_order(x) == canonical_type_order(v) && accept(compare_values(x, v))
}

/// The fields of a query document as (path below the element, condition) pairs; logical
/// operators at the top need the matcher.
pub fn query_fields(query: &Document) -> Result<Vec<(Vec<String>, &Bson)>, MongoError> {
    let mut fields = Vec::with_capacity(query.len());
    for (key, condition) in query {
        if key.starts_with('$') {
            return Err(needs_matcher(&format!("The query operator {key}")));
        }
        fields.push((key.split('.').map(str::to_string).collect(), condition));
    }
    Ok(fields)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{bson, doc};

    fn on(cond: Bson) -> SimplePredicate {
        SimplePredicate::on_element(&cond).expect("supported condition")
    }

    #[test]
    fn comparisons_stay_in_their_type_bracket() {
        let p = on(bson!({"$gte": 6}));
        assert!(p.matches(&bson!(6.0)));
        assert!(!p.matches(&bson!("z")));
        assert!(!p.matches(&bson!(5)));
    }

    #[test]
    fn in_nin_and_ne() {
        assert!(on(bson!({"$in": [1, "a"]})).matches(&bson!("a")));
        assert!(on(bson!({"$nin": [1, "a"]})).matches(&bson!(2)));
        assert!(on(bson!({"$ne": 1})).matches(&bson!(2)));
        assert!(!on(bson!({"$ne": 1})).matches(&bson!([1, 2])));
    }

    #[test]
    fn fields_of_documents() {
        let q = doc! {"score": {"$gt": 5}, "item": "B"};
        let fields = query_fields(&q).expect("plain fields");
        let p = SimplePredicate::on_fields(&fields, true).expect("supported");
        assert!(p.matches(&bson!({"item": "B", "score": 8, "x": 1})));
        assert!(!p.matches(&bson!({"item": "B", "score": 4})));
        assert!(!p.matches(&bson!(8)));
    }

    #[test]
    fn missing_fields_equal_null() {
        let q = doc! {"a": null};
        let fields = query_fields(&q).expect("plain fields");
        let p = SimplePredicate::on_fields(&fields, false).expect("supported");
        assert!(p.matches(&bson!({"b": 1})));
    }

    #[test]
    fn unsupported_forms_are_refused() {
        let e = SimplePredicate::on_element(&bson!({"$exists": true})).expect_err("matcher");
        assert_eq!(e.code, ErrorCode::NotImplemented);
        let e = SimplePredicate::on_element(&bson!({"$bogus": 1})).expect_err("unknown");
        assert_eq!(e.code, ErrorCode::BadValue);
    }
}
