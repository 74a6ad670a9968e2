//! The `update` and `delete` statements' fields checked as mongod 7.0's IDL parser checks
//! them (`UpdateOpEntry`, `DeleteOpEntry` in `write_ops.idl`): a field it does not know
//! (`Location40415`), one given twice (`Location40413`), a required one missing
//! (`Location40414`), one of the wrong BSON type (`TypeMismatch` 14, null read as absent).
//! mongod parses the whole command before it writes anything, so each of these fails the
//! command, never one statement; what is wrong only in meaning (an update operator, a
//! collation's locale) stays the statement's write error, checked where it runs.
//! Reads the statement's bytes; decodes nothing.

use super::data::missing;
use crate::command::to_bson;
use bson::{RawBsonRef, RawDocument};
use shale_doc::{ErrorCode, MongoError};

/// Fields an update statement may carry in MongoDB 7.0 (`sort` arrived in 8.0).
pub(super) const UPDATE_FIELDS: &[&str] = &[
    "q",
    "u",
    "multi",
    "upsert",
    "arrayFilters",
    "hint",
    "collation",
    "c",
    "upsertSupplied",
    "sampleId",
];
/// Fields a delete statement may carry.
pub(super) const DELETE_FIELDS: &[&str] = &["q", "limit", "hint", "collation", "sampleId"];

// Each statement field's bit in `statement_fields`' set of names seen.
const _: () = assert!(UPDATE_FIELDS.len() <= 32 && DELETE_FIELDS.len() <= 32);

/// Checks update statement `s` as mongod's IDL parser does (`update.updates.<field>`).
pub(super) fn check_update(s: &RawDocument) -> Result<(), MongoError> {
    const AT: &str = "update.updates";
    statement_fields(s, AT, UPDATE_FIELDS)?;
    required_doc(s, AT, "q")?;
    match crate::command::get(s, "u") {
        None => return Err(missing("update.updates.u")),
        Some(RawBsonRef::Document(_) | RawBsonRef::Array(_)) => {}
        // mongod's `UpdateModification` parser, which takes null too.
        Some(_) => {
            return Err(MongoError::new(
                ErrorCode::FailedToParse,
                "Update argument must be either an object or an array",
            ))
        }
    }
    for field in ["multi", "upsert", "upsertSupplied"] {
        typed(s, AT, field, "bool", |v| {
            matches!(v, RawBsonRef::Boolean(_))
        })?;
    }
    typed(s, AT, "c", "object", is_doc)?;
    typed(s, AT, "collation", "object", is_doc)?;
    array_of_docs(s, AT, "arrayFilters")?;
    hint(s)
}

/// Checks delete statement `s` as mongod's IDL parser does (`delete.deletes.<field>`);
/// `limit`'s value is read where the statement is built (mongod reads it as a double).
pub(super) fn check_delete(s: &RawDocument) -> Result<(), MongoError> {
    const AT: &str = "delete.deletes";
    statement_fields(s, AT, DELETE_FIELDS)?;
    required_doc(s, AT, "q")?;
    typed(s, AT, "collation", "object", is_doc)?;
    hint(s)
}

/// Refuses the first statement field mongod 7.0's IDL parser refuses: one it does not know
/// (`Location40415`) or one given twice (`Location40413`, which decoding the statement
/// would have hidden by keeping the last value). No allocation: a statement has a few fields.
pub(super) fn statement_fields(
    s: &RawDocument,
    context: &str,
    known: &[&str],
) -> Result<(), MongoError> {
    let mut seen = 0u32;
    for element in s {
        let (k, _) = element.map_err(|e| MongoError::new(ErrorCode::InvalidBSON, e.to_string()))?;
        let Some(bit) = known.iter().position(|n| *n == k).map(|i| 1u32 << i) else {
            return Err(MongoError::new(
                ErrorCode::Location40415,
                format!("BSON field '{context}.{k}' is an unknown field."),
            ));
        };
        if seen & bit != 0 {
            return Err(super::duplicate_field(context, k));
        }
        seen |= bit;
    }
    Ok(())
}

fn is_doc(v: RawBsonRef<'_>) -> bool {
    matches!(v, RawBsonRef::Document(_))
}

fn is_null(v: RawBsonRef<'_>) -> bool {
    matches!(v, RawBsonRef::Null | RawBsonRef::Undefined)
}

/// A required object field: absent or null `Location40414`, another type 14.
fn required_doc(s: &RawDocument, at: &str, field: &str) -> Result<(), MongoError> {
    match crate::command::get(s, field) {
        None => Err(missing(&format!("{at}.{field}"))),
        Some(v) if is_null(v) => Err(missing(&format!("{at}.{field}"))),
        Some(v) if is_doc(v) => Ok(()),
        Some(v) => Err(wrong(at, field, v, "object")),
    }
}

/// An optional field of one BSON type; null or undefined is read as absent, as mongod's
/// `checkAndAssertType` reads them.
fn typed(
    s: &RawDocument,
    at: &str,
    field: &str,
    expected: &str,
    ok: fn(RawBsonRef<'_>) -> bool,
) -> Result<(), MongoError> {
    match crate::command::get(s, field) {
        Some(v) if !ok(v) && !is_null(v) => Err(wrong(at, field, v, expected)),
        _ => Ok(()),
    }
}

/// `arrayFilters`: an array of objects (an entry's path is `<field>.<index>`).
fn array_of_docs(s: &RawDocument, at: &str, field: &str) -> Result<(), MongoError> {
    let items = match crate::command::get(s, field) {
        Some(RawBsonRef::Array(items)) => items,
        Some(v) if !is_null(v) => return Err(wrong(at, field, v, "array")),
        _ => return Ok(()),
    };
    for (i, item) in items.into_iter().enumerate() {
        let item = item.map_err(|e| MongoError::new(ErrorCode::InvalidBSON, e.to_string()))?;
        if !is_doc(item) {
            return Err(wrong(at, &format!("{field}.{i}"), item, "object"));
        }
    }
    Ok(())
}

/// `hint`: mongod's `IndexHint` parser takes a string or an object, and nothing else.
fn hint(s: &RawDocument) -> Result<(), MongoError> {
    match crate::command::get(s, "hint") {
        None | Some(RawBsonRef::String(_) | RawBsonRef::Document(_)) => Ok(()),
        Some(_) => Err(MongoError::new(
            ErrorCode::FailedToParse,
            "Hint must be a string or an object",
        )),
    }
}

fn wrong(at: &str, field: &str, v: RawBsonRef<'_>, expected: &str) -> MongoError {
    super::data::wrong_type(&format!("{at}.{field}"), &to_bson(v), expected)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{rawdoc, RawDocumentBuf};

    #[test]
    fn a_statement_field_unknown_or_given_twice_is_mongods_idl_error() {
        let mut s = RawDocumentBuf::new();
        s.append("q", RawDocumentBuf::new());
        s.append("limit", 1);
        assert_eq!(
            statement_fields(&s, "delete.deletes", DELETE_FIELDS),
            Ok(())
        );
        s.append("limit", 0);
        s.append("bogus", 1);
        let e = statement_fields(&s, "delete.deletes", DELETE_FIELDS).expect_err("twice");
        assert_eq!(e.code, ErrorCode::Location40413);
        assert_eq!(
            e.message,
            "BSON field 'delete.deletes.limit' is a duplicate field"
        );
        let mut s = RawDocumentBuf::new();
        s.append("sort", RawDocumentBuf::new());
        s.append("q", RawDocumentBuf::new());
        s.append("q", RawDocumentBuf::new());
        let e = statement_fields(&s, "update.updates", UPDATE_FIELDS).expect_err("unknown");
        assert_eq!(e.code, ErrorCode::Location40415);
        assert_eq!(
            e.message,
            "BSON field 'update.updates.sort' is an unknown field."
        );
    }

    fn update_error(s: &RawDocument) -> (ErrorCode, String) {
        let e = check_update(s).expect_err("refused");
        (e.code, e.message)
    }

    #[test]
    fn update_statement_types_are_mongods_idl_types() {
        assert_eq!(
            check_update(&rawdoc! {"q": {}, "u": {"$set": {"a": 1}}}),
            Ok(())
        );
        assert_eq!(
            check_update(&rawdoc! {"q": {}, "u": [], "multi": null, "c": null}),
            Ok(())
        );
        assert_eq!(
            update_error(&rawdoc! {"q": {}, "u": {}, "multi": "yes"}),
            (
                ErrorCode::TypeMismatch,
                "BSON field 'update.updates.multi' is the wrong type 'string', expected type 'bool'"
                    .into()
            )
        );
        assert_eq!(
            update_error(&rawdoc! {"q": {}, "u": {}, "upsert": 1.5}).0,
            ErrorCode::TypeMismatch
        );
        assert_eq!(
            update_error(&rawdoc! {"q": 5, "u": {}}).1,
            "BSON field 'update.updates.q' is the wrong type 'int', expected type 'object'"
        );
        assert_eq!(update_error(&rawdoc! {"u": {}}).0, ErrorCode::Location40414);
        assert_eq!(update_error(&rawdoc! {"q": {}}).0, ErrorCode::Location40414);
        assert_eq!(
            update_error(&rawdoc! {"q": {}, "u": 1}).0,
            ErrorCode::FailedToParse
        );
        assert_eq!(
            update_error(&rawdoc! {"q": {}, "u": {}, "arrayFilters": [{}, 3]}).1,
            "BSON field 'update.updates.arrayFilters.1' is the wrong type 'int', expected type 'object'"
        );
        assert_eq!(
            update_error(&rawdoc! {"q": {}, "u": {}, "hint": 1}).0,
            ErrorCode::FailedToParse
        );
    }

    #[test]
    fn delete_statement_types_are_mongods_idl_types() {
        assert_eq!(check_delete(&rawdoc! {"q": {}, "limit": 0}), Ok(()));
        let e = check_delete(&rawdoc! {"q": [], "limit": 0}).expect_err("q");
        assert_eq!(e.code, ErrorCode::TypeMismatch);
        let e = check_delete(&rawdoc! {"q": {}, "collation": "fr"}).expect_err("collation");
        assert_eq!(e.code, ErrorCode::TypeMismatch);
    }
}
