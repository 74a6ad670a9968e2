//! The base document of an upsert: the equality conditions of the query filter (implicit
//! `{a: 1}`, `{a: {$eq: 1}}`, a one-element `{a: {$in: [1]}}`, the same inside `$and`, dotted
//! paths creating nested documents), with `_id` first. Two conditions on the same or
//! overlapping paths are refused (`NotSingleValueField`), as the server does. It never applies
//! the update itself.

use bson::{Bson, Document};

use super::path;
use super::predicate::is_operator_document;
use crate::{ErrorCode, MongoError};

/// Build the document an upsert starts from when its filter matched nothing.
pub fn upsert_seed(filter: &Document) -> Result<Document, MongoError> {
    let mut equalities: Vec<(Vec<String>, Bson)> = Vec::new();
    collect(filter, &mut equalities);
    // `_id` (and paths below it) first; otherwise the filter's order.
    equalities.sort_by_key(|(parts, _)| parts[0] != "_id");
    let mut seed = Document::new();
    let mut written: Vec<Vec<String>> = Vec::new();
    for (parts, value) in equalities {
        // `path::write` recurses per component; a longer path could only build a document
        // deeper than any stored one.
        if parts.len() > crate::depth::MAX_WIRE_DEPTH {
            return Err(crate::depth::storage_depth_error(false));
        }
        check_overlap(&written, &parts)?;
        path::write(&mut seed, &parts, value)?;
        written.push(parts);
    }
    Ok(seed)
}

fn collect(filter: &Document, out: &mut Vec<(Vec<String>, Bson)>) {
    for (key, condition) in filter {
        if key == "$and" {
            if let Bson::Array(clauses) = condition {
                for clause in clauses {
                    if let Bson::Document(d) = clause {
                        collect(d, out);
                    }
                }
            }
            continue;
        }
        if key.starts_with('$') {
            continue;
        }
        if let Some(value) = equality_value(condition) {
            out.push((key.split('.').map(str::to_string).collect(), value));
        }
    }
}

/// The value a condition pins its field to, if it is an equality.
fn equality_value(condition: &Bson) -> Option<Bson> {
    match condition {
        Bson::RegularExpression(_) => None,
        Bson::Document(ops) if is_operator_document(condition) => {
            if let Some(v) = ops.get("$eq") {
                return Some(v.clone()).filter(|v| !is_operator_document(v));
            }
            match ops.get("$in") {
                Some(Bson::Array(items)) if items.len() == 1 && ops.len() == 1 => {
                    Some(items[0].clone()).filter(|v| !matches!(v, Bson::RegularExpression(_)))
                }
                _ => None,
            }
        }
        other => Some(other.clone()),
    }
}

fn check_overlap(written: &[Vec<String>], parts: &[String]) -> Result<(), MongoError> {
    for prior in written {
        if prior.as_slice() == parts {
            return Err(MongoError::new(
                ErrorCode::NotSingleValueField,
                format!(
                    "cannot infer query fields to set, path '{}' is matched twice",
                    path::dotted(parts)
                ),
            ));
        }
        if prior.starts_with(parts) || parts.starts_with(prior) {
            return Err(MongoError::new(
                ErrorCode::NotSingleValueField,
                format!(
                    "cannot infer query fields to set, both paths '{}' and '{}' are matched",
                    path::dotted(parts),
                    path::dotted(prior)
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn equalities_become_fields_with_id_first() {
        let filter = doc! {
            "a.b": 1, "c": {"$eq": 2}, "d": {"$gt": 3}, "_id": 7,
            "$and": [{"e": {"$in": [4]}}], "$or": [{"f": 1}]
        };
        let seed = upsert_seed(&filter).expect("no overlap");
        assert_eq!(seed, doc! {"_id": 7, "a": {"b": 1}, "c": 2, "e": 4});
    }

    #[test]
    fn overlapping_equalities_fail() {
        let e = upsert_seed(&doc! {"a": 1, "$and": [{"a": 2}]}).expect_err("twice");
        assert_eq!(e.code, ErrorCode::NotSingleValueField);
        let e = upsert_seed(&doc! {"a": {"b": 1}, "a.b": 1}).expect_err("overlap");
        assert_eq!(e.code, ErrorCode::NotSingleValueField);
    }
}
