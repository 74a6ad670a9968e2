//! Replacement-style updates (`{a: 1, b: 2}` instead of operators): validation of the
//! replacement's top-level field names, and the swap itself, which keeps the stored `_id`
//! (first, when the replacement has none) and refuses to change it (`ImmutableField`).
//! It never interprets `$`-operators; `parse.rs` routes those elsewhere.

use std::cmp::Ordering;

use bson::{Bson, Document};

use super::path::dollar_prefixed;
use super::{render, same_document};
use crate::compare::compare_values;
use crate::{ErrorCode, MongoError};

/// Refuse top-level `$`-prefixed names, which the server never stores from a replacement.
pub fn validate(replacement: &Document) -> Result<(), MongoError> {
    match replacement.keys().find(|k| k.starts_with('$')) {
        Some(field) => Err(dollar_prefixed(field, field)),
        None => Ok(()),
    }
}

/// Replace `doc` by `replacement`, keeping its `_id`. Returns whether the document changed.
pub fn apply(replacement: &Document, doc: &mut Document) -> Result<bool, MongoError> {
    let new_doc = match (doc.get("_id"), replacement.get("_id")) {
        (Some(old), Some(new)) if compare_values(old, new) != Ordering::Equal => {
            return Err(altered_id(new));
        }
        (Some(old), None) => with_id_first(old, replacement),
        _ => replacement.clone(),
    };
    let modified = !same_document(doc, &new_doc);
    *doc = new_doc;
    Ok(modified)
}

fn with_id_first(id: &Bson, replacement: &Document) -> Document {
    let mut out = Document::new();
    out.insert("_id", id.clone());
    for (k, v) in replacement {
        out.insert(k.clone(), v.clone());
    }
    out
}

fn altered_id(new: &Bson) -> MongoError {
    MongoError::new(
        ErrorCode::ImmutableField,
        format!(
            "After applying the update, the (immutable) field '_id' was found to have been \
             altered to {}",
            render::element("_id", new)
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn keeps_the_id_first() {
        let mut d = doc! {"x": 0, "_id": 1};
        assert!(apply(&doc! {"a": 2}, &mut d).expect("valid replacement"));
        assert_eq!(d, doc! {"_id": 1, "a": 2});
    }

    #[test]
    fn same_content_is_unmodified() {
        let mut d = doc! {"_id": 1, "a": 2};
        assert!(!apply(&doc! {"a": 2}, &mut d).expect("valid replacement"));
    }

    #[test]
    fn refuses_a_new_id() {
        let mut d = doc! {"_id": 1};
        let e = apply(&doc! {"_id": 2}, &mut d).expect_err("immutable");
        assert_eq!(e.code, ErrorCode::ImmutableField);
        assert!(e.message.ends_with("altered to _id: 2"));
        assert!(apply(&doc! {"_id": 1.0, "b": 1}, &mut d).is_ok());
    }

    #[test]
    fn refuses_operators_inside() {
        let e = validate(&doc! {"a": 1, "$set": {"b": 1}}).expect_err("dollar field");
        assert_eq!(e.code, ErrorCode::DollarPrefixedFieldName);
    }
}
