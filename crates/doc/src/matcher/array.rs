//! Array operators: `$all` (values, regexes, or `$elemMatch` clauses), `$elemMatch` in both
//! forms, and `$size`.
//!
//! - Value form (`{a: {$elemMatch: {$gt: 1, $lt: 5}}}`): one element must satisfy every
//!   operator itself, with no further array expansion.
//! - Document form (`{a: {$elemMatch: {b: 1, c: {$gt: 2}}}}`): one document element must
//!   match the whole sub-filter. The form is chosen as MongoDB does: by whether the first key
//!   is a field-level operator.
//! - Both report the matching element's index for the positional projection.

use bson::raw::{RawBsonRef, RawDocument};

use super::comparison::Compare;
use super::evaluation::RegexPred;
use super::{
    bad_value, is_operator_document, leaf, parse_filter, parse_operators, path::bson_error, Level,
    Node, Pred,
};
use crate::variables::Variables;
use crate::MongoError;

/// Operators that stand for a whole filter rather than a field, so that an `$elemMatch`
/// starting with one of them is the document form.
const PATHLESS: &[&str] = &[
    "$and",
    "$or",
    "$nor",
    "$expr",
    "$where",
    "$comment",
    "$text",
    "$jsonSchema",
    "$alwaysTrue",
    "$alwaysFalse",
];

/// `{field: {$elemMatch: arg}}`.
pub(crate) fn parse_elem_match(field: &str, arg: RawBsonRef<'_>) -> Result<Node, MongoError> {
    let RawBsonRef::Document(sub) = arg else {
        return Err(bad_value("$elemMatch needs an Object"));
    };
    if is_value_form(sub)? {
        let mut children = Vec::new();
        parse_operators("", sub, &mut children)?;
        return Ok(leaf(field, Pred::ElemMatchValue(children)));
    }
    // No expressions inside: `$expr` is refused at this level.
    let inner = parse_filter(sub, Level::SubDocument, &Variables::new())?;
    if contains_where(sub) {
        return Err(bad_value("$elemMatch cannot contain $where expression"));
    }
    Ok(leaf(field, Pred::ElemMatchObject(Box::new(inner))))
}

/// Whether `$elemMatch`'s argument is the value form (operators one element satisfies).
pub(crate) fn is_value_form(sub: &RawDocument) -> Result<bool, MongoError> {
    if !is_operator_document(sub)? {
        return Ok(false);
    }
    let first = sub.iter_elements().next().transpose().map_err(bson_error)?;
    Ok(first.is_some_and(|e| !PATHLESS.contains(&e.key())))
}

/// `$where` is refused by the parser anyway; this keeps MongoDB's message for it here.
fn contains_where(sub: &RawDocument) -> bool {
    sub.iter_elements().flatten().any(|e| e.key() == "$where")
}

/// Value form: the index of the first element satisfying every child.
pub(crate) fn elem_match_value(
    children: &[Node],
    value: Option<RawBsonRef<'_>>,
    position: &mut Option<usize>,
) -> Result<bool, MongoError> {
    let Some(RawBsonRef::Array(items)) = value else {
        return Ok(false);
    };
    'elements: for (i, item) in items.into_iter().enumerate() {
        let item = item.map_err(bson_error)?;
        for child in children {
            if !child.eval_on_value(item)? {
                continue 'elements;
            }
        }
        *position = Some(i);
        return Ok(true);
    }
    Ok(false)
}

/// Document form: the index of the first document element matching the sub-filter.
pub(crate) fn elem_match_object(
    filter: &Node,
    value: Option<RawBsonRef<'_>>,
    position: &mut Option<usize>,
) -> Result<bool, MongoError> {
    let Some(RawBsonRef::Array(items)) = value else {
        return Ok(false);
    };
    for (i, item) in items.into_iter().enumerate() {
        if let RawBsonRef::Document(d) = item.map_err(bson_error)? {
            if filter.eval(d, &mut None)? {
                *position = Some(i);
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// `{field: {$all: [...]}}`: an `$and` of equalities (regexes match as patterns), or of
/// `$elemMatch` clauses when the first entry is one. An empty list matches nothing.
pub(crate) fn parse_all(field: &str, arg: RawBsonRef<'_>) -> Result<Node, MongoError> {
    let RawBsonRef::Array(items) = arg else {
        return Err(bad_value("$all needs an array"));
    };
    let entries: Vec<RawBsonRef<'_>> = items
        .into_iter()
        .collect::<Result<_, _>>()
        .map_err(bson_error)?;
    if entries.is_empty() {
        return Ok(Node::Always(false));
    }
    let children = if first_key(entries[0]) == Some("$elemMatch") {
        all_elem_match(field, &entries)?
    } else {
        all_values(field, &entries)?
    };
    Ok(Node::And(children))
}

fn first_key(entry: RawBsonRef<'_>) -> Option<&str> {
    let RawBsonRef::Document(d) = entry else {
        return None;
    };
    d.iter_elements().next()?.ok().map(|e| e.key())
}

fn all_elem_match(field: &str, entries: &[RawBsonRef<'_>]) -> Result<Vec<Node>, MongoError> {
    let mut children = Vec::new();
    for entry in entries {
        let (RawBsonRef::Document(d), Some("$elemMatch")) = (*entry, first_key(*entry)) else {
            return Err(bad_value("$all/$elemMatch has to be consistent"));
        };
        #[allow(
            clippy::expect_used,
            reason = "first_key() just found $elemMatch as the first key"
        )]
        let arg = d
            .get("$elemMatch")
            .map_err(bson_error)?
            .expect("first key is $elemMatch");
        children.push(parse_elem_match(field, arg)?);
    }
    Ok(children)
}

fn all_values(field: &str, entries: &[RawBsonRef<'_>]) -> Result<Vec<Node>, MongoError> {
    let mut children = Vec::new();
    for entry in entries {
        let pred = match *entry {
            RawBsonRef::RegularExpression(re) => Pred::Regex(RegexPred::from_bson(re)?),
            RawBsonRef::Document(d) if is_operator_document(d)? => {
                return Err(bad_value("no $ expressions in $all"));
            }
            value => Pred::Compare(Compare::eq(value)),
        };
        children.push(leaf(field, pred));
    }
    Ok(children)
}

/// `{field: {$size: n}}`.
pub(crate) fn parse_size(field: &str, arg: RawBsonRef<'_>) -> Result<Node, MongoError> {
    let size = match arg {
        RawBsonRef::Int32(i) => i64::from(i),
        RawBsonRef::Int64(i) if i32::try_from(i).is_ok() => i,
        RawBsonRef::Int64(_) => {
            return Err(bad_value("$size must be representable as a 32-bit integer"))
        }
        RawBsonRef::Double(d) if d.fract() == 0.0 && d.abs() <= f64::from(i32::MAX) => d as i64,
        RawBsonRef::Double(_) => return Err(bad_value("$size must be a whole number")),
        _ => return Err(bad_value("$size needs a number")),
    };
    if size < 0 {
        return Err(bad_value("$size may not be negative"));
    }
    Ok(leaf(field, Pred::Size(size)))
}

pub(crate) fn size_matches(size: i64, value: Option<RawBsonRef<'_>>) -> Result<bool, MongoError> {
    let Some(RawBsonRef::Array(items)) = value else {
        return Ok(false);
    };
    let mut count = 0_i64;
    for item in items {
        item.map_err(bson_error)?;
        count += 1;
    }
    Ok(count == size)
}

#[cfg(test)]
mod tests {
    use crate::matcher::test_support::check;
    use bson::doc;

    #[test]
    fn elem_match_value_form_needs_one_element_for_all_operators() {
        let f = doc! {"a": {"$elemMatch": {"$gt": 1, "$lt": 5}}};
        assert!(check(f.clone(), doc! {"a": [0, 3, 9]}));
        assert!(!check(f.clone(), doc! {"a": [0, 9]}));
        assert!(!check(f, doc! {"a": 3}));
    }

    #[test]
    fn elem_match_document_form() {
        let f = doc! {"a": {"$elemMatch": {"b": 1, "c": {"$gt": 2}}}};
        assert!(check(
            f.clone(),
            doc! {"a": [{"b": 1, "c": 1}, {"b": 1, "c": 3}]}
        ));
        assert!(!check(f, doc! {"a": [{"b": 1, "c": 1}, {"b": 2, "c": 3}]}));
        let f = doc! {"a": {"$elemMatch": {"$or": [{"b": 1}, {"c": 1}]}}};
        assert!(check(f, doc! {"a": [{"c": 1}]}));
    }

    #[test]
    fn all_and_size() {
        assert!(check(doc! {"a": {"$all": [1, 2]}}, doc! {"a": [2, 3, 1]}));
        assert!(!check(doc! {"a": {"$all": [1, 4]}}, doc! {"a": [2, 3, 1]}));
        assert!(!check(doc! {"a": {"$all": []}}, doc! {"a": []}));
        assert!(check(doc! {"a": {"$all": [[1, 2]]}}, doc! {"a": [1, 2]}));
        let f = doc! {"a": {"$all": [{"$elemMatch": {"b": 1}}, {"$elemMatch": {"b": 2}}]}};
        assert!(check(f, doc! {"a": [{"b": 2}, {"b": 1}]}));
        assert!(check(doc! {"a": {"$size": 2}}, doc! {"a": [1, [2, 3]]}));
        assert!(!check(doc! {"a": {"$size": 1}}, doc! {"a": 1}));
    }
}
