//! A filter read as sent, for the callers that decode it into a `bson::Document` (the
//! planner and the executor take one), which keeps only a repeated name's last value.
//! mongod's matcher parses every element of a filter and of a field's operator document,
//! so a name given twice is the AND of both: `{a: {$gte: 1}, a: {$lte: 2}}` and
//! `{a: {$gt: 3, $gt: 1}}` (`a > 3`). `filter_as_sent` writes such a filter as the `$and`
//! that means the same, and costs one scan of names, with no allocation, when no name
//! repeats. It never judges a filter: what it rewrites, the matcher still parses and
//! refuses as it would the filter sent.
//!
//! Where it looks: the filter's own names, each field's operator document (with the
//! operator documents of its `$not` and `$elemMatch` and the filter of `$elemMatch`'s
//! document form, `as_sent_ops.rs`), and the filters inside `$and`/`$or`/`$nor`, at any
//! depth.

use bson::raw::{RawBsonRef, RawDocument};
use bson::{Bson, Document};

use super::as_sent_ops::{field_clauses, ops_repeat};
use super::{is_operator_document, path::bson_error};
use crate::update::first_repeat;
use crate::MongoError;

/// A filter that repeats a name the decoded form would lose (`{a: {$gte: 1}, a: {$lte: 2}}`,
/// `{a: {$gt: 3, $gt: 1}}`, either inside `$or`) rewritten as mongod reads it: each level
/// that repeats a name becomes the `$and` of its elements in order, a field's operator
/// document split where an operator repeats (`{$and: [{a: {$gt: 3}}, {a: {$gt: 1}}]}`).
/// `None` when no name repeats, and the decoded filter is then exact. Allocates nothing
/// when no name repeats: callers run it on every filter they decode.
pub fn filter_as_sent(filter: &RawDocument) -> Result<Option<Document>, MongoError> {
    if !repeats(filter)? {
        return Ok(None);
    }
    level(filter).map(Some)
}

/// `$and`, `$or`, `$nor`: operators whose argument is an array of filters.
fn is_tree(name: &str) -> bool {
    matches!(name, "$and" | "$or" | "$nor")
}

/// A field's operator document that names an operator twice, at its level or below its
/// `$not` or `$elemMatch`.
fn repeated_operators<'a>(
    name: &str,
    value: RawBsonRef<'a>,
) -> Result<Option<&'a RawDocument>, MongoError> {
    match value {
        RawBsonRef::Document(ops) if !name.starts_with('$') && is_operator_document(ops)? => {
            Ok(ops_repeat(ops)?.then_some(ops))
        }
        _ => Ok(None),
    }
}

/// Whether a name repeats where `level` would rewrite it (no allocation).
pub(super) fn repeats(filter: &RawDocument) -> Result<bool, MongoError> {
    if first_repeat(filter).is_some() {
        return Ok(true);
    }
    for element in filter {
        let (name, value) = element.map_err(bson_error)?;
        if repeated_operators(name, value)?.is_some() {
            return Ok(true);
        }
        if let RawBsonRef::Array(items) = value {
            if is_tree(name) {
                for item in items {
                    if let RawBsonRef::Document(sub) = item.map_err(bson_error)? {
                        if repeats(sub)? {
                            return Ok(true);
                        }
                    }
                }
            }
        }
    }
    Ok(false)
}

/// One level of a filter decoded with every repeat kept: the `$and` of its clauses when a
/// name repeats in it or among a field's operators, else a document of its fields.
pub(super) fn level(filter: &RawDocument) -> Result<Document, MongoError> {
    let mut split = first_repeat(filter).is_some();
    let mut clauses: Vec<(String, Bson)> = Vec::new();
    for element in filter {
        let (name, value) = element.map_err(bson_error)?;
        if let Some(ops) = repeated_operators(name, value)? {
            let read = field_clauses(name, ops)?;
            // One clause on the field itself keeps its place; anything else is an `$and`.
            split |= read.len() != 1 || read.iter().any(|(n, _)| n != name);
            clauses.extend(read);
            continue;
        }
        let value = match value {
            RawBsonRef::Array(items) if is_tree(name) => {
                let mut filters = Vec::new();
                for item in items {
                    filters.push(match item.map_err(bson_error)? {
                        RawBsonRef::Document(sub) => Bson::Document(level(sub)?),
                        other => Bson::try_from(other).map_err(bson_error)?,
                    });
                }
                Bson::Array(filters)
            }
            other => Bson::try_from(other).map_err(bson_error)?,
        };
        clauses.push((name.to_owned(), value));
    }
    if !split {
        return Ok(clauses.into_iter().collect());
    }
    let and: Vec<Bson> = clauses
        .into_iter()
        .map(|(name, value)| {
            let mut clause = Document::new();
            clause.insert(name, value);
            Bson::Document(clause)
        })
        .collect();
    let mut out = Document::new();
    out.insert("$and", and);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::filter_as_sent;
    use crate::matcher::test_support::{check, raw};
    use bson::{doc, rawdoc, RawDocumentBuf};

    fn fields(elements: &[(&str, bson::Bson)]) -> RawDocumentBuf {
        let mut out = RawDocumentBuf::new();
        for (name, value) in elements {
            out.append(
                *name,
                bson::RawBson::try_from(value.clone()).expect("a raw value"),
            );
        }
        out
    }

    fn read(filter: &RawDocumentBuf) -> bson::Document {
        filter_as_sent(filter).expect("reads").expect("a repeat")
    }

    #[test]
    fn a_name_given_twice_is_the_and_of_both() {
        let mut twice = RawDocumentBuf::new();
        twice.append("a", rawdoc! {"$gte": 1});
        twice.append("b", 0);
        twice.append("a", rawdoc! {"$lte": 2});
        let and = read(&twice);
        assert_eq!(
            and,
            doc! {"$and": [{"a": {"$gte": 1}}, {"b": 0}, {"a": {"$lte": 2}}]}
        );
        assert!(check(and.clone(), doc! {"a": 2, "b": 0}));
        assert!(!check(and, doc! {"a": 3, "b": 0}));
        assert_eq!(filter_as_sent(&raw(doc! {"a": 1, "b": 2})), Ok(None));
    }

    #[test]
    fn an_operator_given_twice_is_the_and_of_both() {
        let gt_twice = fields(&[("$gt", 3.into()), ("$gt", 1.into())]);
        let mut filter = RawDocumentBuf::new();
        filter.append("a", gt_twice.clone());
        let and = read(&filter);
        assert_eq!(and, doc! {"$and": [{"a": {"$gt": 3}}, {"a": {"$gt": 1}}]});
        assert!(!check(and.clone(), doc! {"a": 2}));
        assert!(check(and, doc! {"a": 4}));

        let range = fields(&[("$gte", 3.into()), ("$lte", 4.into()), ("$gte", 1.into())]);
        let mut filter = RawDocumentBuf::new();
        filter.append("b", 0);
        filter.append("a", range);
        assert_eq!(
            read(&filter),
            doc! {"$and": [{"b": 0}, {"a": {"$gte": 3, "$lte": 4}}, {"a": {"$gte": 1}}]}
        );
    }

    #[test]
    fn repeats_inside_and_or_nor_are_kept_at_their_level() {
        let gt_twice = fields(&[("$gt", 3.into()), ("$gt", 1.into())]);
        let mut branch = RawDocumentBuf::new();
        branch.append("a", gt_twice);
        let mut items = bson::RawArrayBuf::new();
        items.push(branch);
        items.push(rawdoc! {"a": 0});
        let mut filter = RawDocumentBuf::new();
        filter.append("$or", items);
        filter.append("c", 1);
        let read = read(&filter);
        assert_eq!(
            read,
            doc! {"$or": [{"$and": [{"a": {"$gt": 3}}, {"a": {"$gt": 1}}]}, {"a": 0}], "c": 1}
        );
        assert!(check(read.clone(), doc! {"a": 0, "c": 1}));
        assert!(!check(read, doc! {"a": 2, "c": 1}));
    }

    #[test]
    fn nothing_repeated_is_none() {
        for filter in [
            doc! {},
            doc! {"a": {"$gt": 1, "$lt": 5}, "$or": [{"b": 1}, {"b": {"$in": [2]}}]},
            doc! {"a": {"b": 1}},
            doc! {"$and": [{"a": 1}], "$nor": [{"a": 2}]},
        ] {
            assert_eq!(filter_as_sent(&raw(filter)), Ok(None));
        }
    }

    #[test]
    fn what_the_matcher_refuses_is_left_for_it_to_refuse() {
        let mut filter = RawDocumentBuf::new();
        filter.append("a", fields(&[("$gt", 1.into()), ("$gt", 2.into())]));
        filter.append("$or", 1);
        let read = read(&filter);
        assert_eq!(
            read,
            doc! {"$and": [{"a": {"$gt": 1}}, {"a": {"$gt": 2}}, {"$or": 1}]}
        );
        assert!(crate::Matcher::parse(&raw(read)).is_err());
    }
}
