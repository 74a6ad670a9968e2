//! Replacement-style updates (`{a: 1, b: 2}` instead of operators), kept as the client sent
//! them: raw, a name given twice stored twice, as mongod stores a replacement (decoding one
//! into a `Document` would keep only the last value). Validation of the replacement's
//! top-level names, and the swap itself, which keeps the stored `_id` (first, when the
//! replacement has none), refuses to change it (`ImmutableField`) and refuses a second `_id`
//! (`BadValue`, mongod's storage validation). It never interprets `$`-operators; `parse.rs`
//! routes those elsewhere.

use std::cmp::Ordering;

use bson::{Bson, Document, RawBsonRef, RawDocument, RawDocumentBuf};

use super::path::dollar_prefixed;
use super::raw_apply::RawApply;
use super::{immutable_id, render, same_document};
use crate::compare::compare_values;
use crate::{ErrorCode, MongoError};

/// Refuse top-level `$`-prefixed names, which the server never stores from a replacement.
pub fn validate(replacement: &RawDocument) -> Result<(), MongoError> {
    for element in replacement {
        let (field, _) = element.map_err(invalid)?;
        if field.starts_with('$') {
            return Err(dollar_prefixed(field, field));
        }
    }
    Ok(())
}

/// `doc` replaced by `replacement` as sent, without decoding either: the stored `_id` put
/// first when the replacement has none. `Unchanged` when no byte would change.
pub fn apply_raw(replacement: &RawDocument, doc: &RawDocument) -> Result<RawApply, MongoError> {
    let new_id = only_id(replacement)?;
    let old_id = doc.get("_id").map_err(invalid)?;
    let new_doc = match (old_id, new_id) {
        (Some(old), Some(new)) => {
            keeps_id(old, new)?;
            None
        }
        (Some(old), None) => Some(with_id_first(old, replacement)?),
        (None, _) => None,
    };
    let new_bytes = new_doc
        .as_ref()
        .map_or(replacement.as_bytes(), |d| d.as_bytes());
    if new_bytes == doc.as_bytes() {
        return Ok(RawApply::Unchanged);
    }
    Ok(RawApply::Changed(
        new_doc.unwrap_or_else(|| replacement.to_owned()),
    ))
}

/// The document an upsert with `replacement` inserts: the replacement as sent, after the
/// filter's `_id` equality (`seed_id`) when it has none of its own.
pub fn upsert_raw(
    replacement: &RawDocument,
    seed_id: Option<&Bson>,
) -> Result<RawDocumentBuf, MongoError> {
    let mut seed = RawDocumentBuf::new();
    if let Some(id) = seed_id {
        let id = bson::RawBson::try_from(id.clone())
            .map_err(|e| MongoError::new(ErrorCode::BadValue, e.to_string()))?;
        seed.append("_id", id);
    }
    Ok(match apply_raw(replacement, &seed)? {
        RawApply::Changed(d) => d,
        RawApply::Unchanged => seed,
    })
}

/// Replace `doc` by `replacement`, keeping its `_id`, for callers that hold a decoded
/// document (a name the replacement repeats keeps its last value there; the write path
/// takes `apply_raw`). Returns whether the document changed.
pub fn apply(replacement: &RawDocument, doc: &mut Document) -> Result<bool, MongoError> {
    only_id(replacement)?;
    let replacement = Document::try_from(replacement).map_err(invalid)?;
    let new_doc = match (doc.get("_id"), replacement.get("_id")) {
        (Some(old), Some(new)) if compare_values(old, new) != Ordering::Equal => {
            return Err(altered_id(new));
        }
        (Some(old), None) => {
            let mut out = Document::new();
            out.insert("_id", old.clone());
            out.extend(replacement);
            out
        }
        _ => replacement,
    };
    let modified = !same_document(doc, &new_doc);
    *doc = new_doc;
    Ok(modified)
}

/// The replacement's `_id`, refused when it gives one twice: mongod's storage validation
/// of the replaced document, "Can't have multiple _id fields in one document".
fn only_id(replacement: &RawDocument) -> Result<Option<RawBsonRef<'_>>, MongoError> {
    let mut id = None;
    for element in replacement {
        let (field, value) = element.map_err(invalid)?;
        if field == "_id" {
            if id.is_some() {
                return Err(MongoError::new(
                    ErrorCode::BadValue,
                    "Can't have multiple _id fields in one document",
                ));
            }
            id = Some(value);
        }
    }
    Ok(id)
}

/// Refuses a replacement `_id` that is not the stored one: a different value is "altered",
/// an equal value of another type (`1` and `1.0`) would still change the stored bytes.
fn keeps_id(old: RawBsonRef<'_>, new: RawBsonRef<'_>) -> Result<(), MongoError> {
    let (old, new) = (decoded(old)?, decoded(new)?);
    if compare_values(&old, &new) != Ordering::Equal {
        return Err(altered_id(&new));
    }
    if old.element_type() != new.element_type() {
        return Err(immutable_id(&["_id".to_owned()]));
    }
    Ok(())
}

/// `{_id: id}` followed by the replacement's elements as they are.
fn with_id_first(
    id: RawBsonRef<'_>,
    replacement: &RawDocument,
) -> Result<RawDocumentBuf, MongoError> {
    let mut out = RawDocumentBuf::new();
    out.append_ref("_id", id);
    for element in replacement {
        let (field, value) = element.map_err(invalid)?;
        out.append_ref(field, value);
    }
    Ok(out)
}

fn decoded(value: RawBsonRef<'_>) -> Result<Bson, MongoError> {
    Bson::try_from(value).map_err(invalid)
}

fn invalid(e: bson::raw::Error) -> MongoError {
    MongoError::new(ErrorCode::InvalidBSON, e.to_string())
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
    use bson::{doc, rawdoc};

    fn raw(d: Document) -> RawDocumentBuf {
        RawDocumentBuf::from_document(&d).expect("raw")
    }

    /// `{a: 1, b: 2, a: 3}`: a name given twice.
    fn repeated() -> RawDocumentBuf {
        let mut r = RawDocumentBuf::new();
        r.append("a", 1);
        r.append("b", 2);
        r.append("a", 3);
        r
    }

    #[test]
    fn keeps_the_id_first() {
        let mut d = doc! {"x": 0, "_id": 1};
        assert!(apply(&raw(doc! {"a": 2}), &mut d).expect("valid replacement"));
        assert_eq!(d, doc! {"_id": 1, "a": 2});
    }

    #[test]
    fn same_content_is_unmodified() {
        let mut d = doc! {"_id": 1, "a": 2};
        assert!(!apply(&raw(doc! {"a": 2}), &mut d).expect("valid replacement"));
    }

    #[test]
    fn refuses_a_new_id() {
        let mut d = doc! {"_id": 1};
        let e = apply(&raw(doc! {"_id": 2}), &mut d).expect_err("immutable");
        assert_eq!(e.code, ErrorCode::ImmutableField);
        assert!(e.message.ends_with("altered to _id: 2"));
        assert!(apply(&raw(doc! {"_id": 1.0, "b": 1}), &mut d).is_ok());
    }

    #[test]
    fn refuses_operators_inside() {
        let e = validate(&raw(doc! {"a": 1, "$set": {"b": 1}})).expect_err("dollar field");
        assert_eq!(e.code, ErrorCode::DollarPrefixedFieldName);
    }

    #[test]
    fn a_repeated_name_is_kept_as_sent() {
        let stored = rawdoc! {"_id": 7, "x": 0};
        let RawApply::Changed(new) = apply_raw(&repeated(), &stored).expect("applies") else {
            panic!("a change");
        };
        let mut want = rawdoc! {"_id": 7};
        for (k, v) in repeated().iter().map(|e| e.expect("element")) {
            want.append_ref(k, v);
        }
        assert_eq!(new, want);
        assert_eq!(
            apply_raw(&repeated(), &want).expect("applies"),
            RawApply::Unchanged
        );
        let upserted = upsert_raw(&repeated(), Some(&Bson::Int32(7))).expect("upsert");
        assert_eq!(upserted, want);
        assert_eq!(upsert_raw(&repeated(), None).expect("upsert"), repeated());
    }

    #[test]
    fn a_second_id_is_refused_and_a_changed_one_too() {
        let mut two = rawdoc! {"_id": 1, "a": 1};
        two.append("_id", 1);
        let stored = rawdoc! {"_id": 1};
        for e in [
            apply_raw(&two, &stored).expect_err("two ids"),
            upsert_raw(&two, None).expect_err("two ids"),
            apply(&two, &mut doc! {"_id": 1}).expect_err("two ids"),
        ] {
            assert_eq!(e.code, ErrorCode::BadValue);
            assert_eq!(e.message, "Can't have multiple _id fields in one document");
        }
        let e = apply_raw(&rawdoc! {"_id": 2}, &stored).expect_err("altered");
        assert!(e.message.ends_with("altered to _id: 2"), "{}", e.message);
        let e = apply_raw(&rawdoc! {"_id": 1.0}, &stored).expect_err("another type");
        assert_eq!(e.code, ErrorCode::ImmutableField);
        let e = upsert_raw(&rawdoc! {"_id": 2}, Some(&Bson::Int32(1))).expect_err("altered");
        assert_eq!(e.code, ErrorCode::ImmutableField);
    }
}
