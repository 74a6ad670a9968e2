//! Conditions on single array elements, for `$pull` and `arrayFilters`: the `ElementPredicate`
//! trait and its two implementations. `SimplePredicate` evaluates plain values (MongoDB's order
//! via `compare_values`) and `$eq $ne $gt $gte $lt $lte $in $nin` on the element or on fields
//! of document elements directly on owned BSON; every other query form (`$and`/`$or`,
//! `$elemMatch`, `$exists`, `$type`, `$regex` and regex values, `$size`, `$all`, `$mod`, `$not`,
//! bit tests) goes to `QueryPredicate`, which wraps the element in a one-field document and asks
//! the crate's `Matcher`. It never evaluates whole stored documents for a query.

use std::cmp::Ordering;
use std::fmt;

use bson::{Bson, Document, RawDocumentBuf};

use super::path::array_index;
use crate::compare::{canonical_type_order, compare_values};
use crate::matcher::Matcher;
use crate::{ErrorCode, MongoError};

/// A condition on one array element.
pub trait ElementPredicate: fmt::Debug + Send + Sync {
    /// Whether the element satisfies the condition; errors come from evaluating `$expr`.
    fn matches(&self, element: &Bson) -> Result<bool, MongoError>;
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
    fn matches(&self, element: &Bson) -> Result<bool, MongoError> {
        Ok(compare_values(element, &self.0) == Ordering::Equal)
    }
}

impl ElementPredicate for SimplePredicate {
    fn matches(&self, element: &Bson) -> Result<bool, MongoError> {
        if self.documents_only && !matches!(element, Bson::Document(_)) {
            return Ok(false);
        }
        Ok(self.clauses.iter().all(|c| clause_matches(c, element)))
    }
}

/// How `QueryPredicate` presents an element to the matcher.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Subject {
    /// The element is a document and the query runs against it (`$pull: {arr: {f: 1}}`).
    Document,
    /// The element is wrapped as `{name: element}` (array filters use their identifier).
    Named(String),
}

/// A condition evaluated by the crate's query `Matcher`.
#[derive(Debug, Clone)]
pub struct QueryPredicate {
    matcher: Matcher,
    subject: Subject,
}

/// The field name a `$pull` operator condition (`{$gte: 6}`) is wrapped under.
const PULL_FIELD: &str = "v";

impl QueryPredicate {
    /// `$pull`'s query form: a document element matching `query`.
    pub fn on_document(query: &Document) -> Result<QueryPredicate, MongoError> {
        Ok(QueryPredicate {
            matcher: Matcher::parse(&raw(query)?)?,
            subject: Subject::Document,
        })
    }

    /// `$pull`'s operator or regex form: the element itself satisfying `condition`.
    pub fn on_element(condition: &Bson) -> Result<QueryPredicate, MongoError> {
        let mut query = Document::new();
        query.insert(PULL_FIELD, condition.clone());
        QueryPredicate::named(&query, PULL_FIELD)
    }

    /// An array filter: `filter` over `{id: element}`.
    pub fn named(filter: &Document, id: &str) -> Result<QueryPredicate, MongoError> {
        Ok(QueryPredicate {
            matcher: Matcher::parse(&raw(filter)?)?,
            subject: Subject::Named(id.to_string()),
        })
    }
}

impl ElementPredicate for QueryPredicate {
    fn matches(&self, element: &Bson) -> Result<bool, MongoError> {
        match (&self.subject, element) {
            (Subject::Document, Bson::Document(d)) => self.matcher.matches(&raw(d)?),
            (Subject::Document, _) => Ok(false),
            (Subject::Named(name), _) => {
                let mut wrapped = Document::new();
                wrapped.insert(name.clone(), element.clone());
                self.matcher.matches(&raw(&wrapped)?)
            }
        }
    }
}

fn raw(doc: &Document) -> Result<RawDocumentBuf, MongoError> {
    RawDocumentBuf::from_document(doc)
        .map_err(|e| MongoError::new(ErrorCode::BadValue, format!("invalid BSON: {e}")))
}

/// The simple predicate when it could parse the condition, else the matcher's (which also
/// owns every error message for a malformed condition).
pub fn simple_or_query(
    simple: Result<SimplePredicate, MongoError>,
    query: impl FnOnce() -> Result<QueryPredicate, MongoError>,
) -> Result<Box<dyn ElementPredicate>, MongoError> {
    match simple {
        Ok(p) => Ok(Box::new(p)),
        Err(_) => Ok(Box::new(query()?)),
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

/// `SimplePredicate`'s refusal of a form only the matcher evaluates (`simple_or_query`
/// turns it into a `QueryPredicate`).
pub fn needs_matcher(what: &str) -> MongoError {
    MongoError::new(
        ErrorCode::NotImplemented,
        format!("{what} is evaluated by the query matcher, not by SimplePredicate"),
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

/// The values a dotted path reaches, traversing arrays of documents as queries do: `None` is
/// a missing field (it compares as null). Inside an array only document elements (or the
/// element a numeric component names) are followed, so an array of scalars, or an empty
/// array, reaches nothing at all.
fn collect_values<'a>(value: &'a Bson, path: &[String], out: &mut Vec<Option<&'a Bson>>) {
    let Some((first, rest)) = path.split_first() else {
        out.push(Some(value));
        return;
    };
    match value {
        Bson::Document(d) => match d.get(first) {
            Some(v) => collect_values(v, rest, out),
            None => out.push(None),
        },
        Bson::Array(items) => {
            if let Some(v) = array_index(first).and_then(|i| items.get(i)) {
                collect_values(v, rest, out);
            }
            for item in items.iter().filter(|i| matches!(i, Bson::Document(_))) {
                collect_values(item, path, out);
            }
        }
        _ => out.push(None),
    }
}

fn test_matches(test: &Test, values: &[Option<&Bson>]) -> bool {
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

/// True when `pred` holds for a reached value or one of its array members; a missing field
/// is tested as null.
fn any_value(values: &[Option<&Bson>], pred: impl Fn(&Bson) -> bool) -> bool {
    values.iter().any(|v| match v {
        None => pred(&Bson::Null),
        Some(array @ Bson::Array(items)) => pred(array) || items.iter().any(&pred),
        Some(other) => pred(other),
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

    fn hit(p: &dyn ElementPredicate, element: Bson) -> bool {
        p.matches(&element).expect("no $expr")
    }

    #[test]
    fn comparisons_stay_in_their_type_bracket() {
        let p = on(bson!({"$gte": 6}));
        assert!(hit(&p, bson!(6.0)));
        assert!(!hit(&p, bson!("z")));
        assert!(!hit(&p, bson!(5)));
    }

    #[test]
    fn in_nin_and_ne() {
        assert!(hit(&on(bson!({"$in": [1, "a"]})), bson!("a")));
        assert!(hit(&on(bson!({"$nin": [1, "a"]})), bson!(2)));
        assert!(hit(&on(bson!({"$ne": 1})), bson!(2)));
        assert!(!hit(&on(bson!({"$ne": 1})), bson!([1, 2])));
    }

    #[test]
    fn fields_of_documents() {
        let q = doc! {"score": {"$gt": 5}, "item": "B"};
        let fields = query_fields(&q).expect("plain fields");
        let p = SimplePredicate::on_fields(&fields, true).expect("supported");
        assert!(hit(&p, bson!({"item": "B", "score": 8, "x": 1})));
        assert!(!hit(&p, bson!({"item": "B", "score": 4})));
        assert!(!hit(&p, bson!(8)));
    }

    #[test]
    fn missing_fields_equal_null() {
        let q = doc! {"a": null};
        let fields = query_fields(&q).expect("plain fields");
        let p = SimplePredicate::on_fields(&fields, false).expect("supported");
        assert!(hit(&p, bson!({"b": 1})));
    }

    #[test]
    fn arrays_of_scalars_reach_no_field() {
        let q = doc! {"x": null};
        let fields = query_fields(&q).expect("plain fields");
        let p = SimplePredicate::on_fields(&fields, false).expect("supported");
        assert!(!hit(&p, bson!([])));
        assert!(!hit(&p, bson!([1, 2])));
        assert!(hit(&p, bson!([{"y": 1}])));
        assert!(hit(&p, bson!(5)));
    }

    #[test]
    fn other_forms_go_to_the_matcher() {
        let e = SimplePredicate::on_element(&bson!({"$exists": true})).expect_err("matcher");
        assert_eq!(e.code, ErrorCode::NotImplemented);
        let e = SimplePredicate::on_element(&bson!({"$bogus": 1})).expect_err("unknown");
        assert_eq!(e.code, ErrorCode::BadValue);
        let q = QueryPredicate::on_element(&bson!({"$exists": true})).expect("matcher parses");
        assert!(hit(&q, bson!(1)));
        let q = QueryPredicate::on_document(&doc! {"$or": [{"a": 1}, {"b": 2}]}).expect("parses");
        assert!(hit(&q, bson!({"b": 2})));
        assert!(!hit(&q, bson!(2)));
        let q = QueryPredicate::named(&doc! {"i.x": {"$elemMatch": {"$gt": 2}}}, "i").expect("ok");
        assert!(hit(&q, bson!({"x": [1, 3]})));
    }
}
