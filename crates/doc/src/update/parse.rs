//! Classifying and validating an update before any document is touched: an operator document
//! (`{$set: ...}`), a replacement document, or an aggregation pipeline (refused for now). Every
//! operator name, field path and argument is checked up front, two operators on overlapping
//! paths are refused (`ConflictingUpdateOperators`), and the operations are put in the order the
//! server applies them (path by path, numbers numerically). It never applies anything.

use std::cmp::Ordering;

use bson::{Bson, Document, RawDocumentBuf};

use super::array::ArrayOp;
use super::field::FieldOp;
use super::path::{compare_components, FieldPath};
use super::positional::{check_identifiers, ArrayFilters};
use super::{render, replacement, Action, Form, Operation};
use crate::{ErrorCode, MongoError};

/// Every operator name the server knows. `$bit` is known but not built here.
const KNOWN_OPERATORS: &[&str] = &[
    "$set",
    "$unset",
    "$inc",
    "$mul",
    "$min",
    "$max",
    "$rename",
    "$setOnInsert",
    "$currentDate",
    "$push",
    "$addToSet",
    "$pop",
    "$pull",
    "$pullAll",
    "$bit",
];

/// Refuse an update given as anything but a document.
pub fn refuse_non_document(update: &Bson) -> MongoError {
    MongoError::new(
        ErrorCode::TypeMismatch,
        format!(
            "Update argument must be either an object or an array, not {}",
            render::type_name(update)
        ),
    )
}

/// Parse an update document with its optional `arrayFilters`.
pub fn parse(
    update: &Document,
    raw_filters: Option<&[Document]>,
) -> Result<(Form, ArrayFilters), MongoError> {
    let filters = ArrayFilters::parse(raw_filters.unwrap_or(&[]))?;
    let is_operator_form = update.keys().next().is_some_and(|k| k.starts_with('$'));
    if !is_operator_form {
        let raw = RawDocumentBuf::from_document(update)
            .map_err(|e| MongoError::new(ErrorCode::BadValue, e.to_string()))?;
        return replacement_form(raw, filters);
    }
    let mut ops = Vec::new();
    let mut registered: Vec<Vec<String>> = Vec::new();
    for (op, arg) in update {
        parse_operator(op, arg, &mut ops, &mut registered)?;
    }
    let paths: Vec<&FieldPath> = ops.iter().map(|o: &Operation| &o.path).collect();
    check_identifiers(&paths, &filters, update)?;
    ops.sort_by(|a, b| compare_paths(application_path(a), application_path(b)));
    Ok((Form::Operators(ops), filters))
}

/// A replacement document as sent, with its (already parsed) `arrayFilters`.
pub fn replacement_form(
    update: RawDocumentBuf,
    filters: ArrayFilters,
) -> Result<(Form, ArrayFilters), MongoError> {
    replacement::validate(&update)?;
    Ok((Form::Replacement(update), filters))
}

/// `$rename` is applied where it writes (its destination), like the server's tree.
fn application_path(op: &Operation) -> &FieldPath {
    match &op.action {
        Action::Rename(to) => to,
        _ => &op.path,
    }
}

fn compare_paths(a: &FieldPath, b: &FieldPath) -> Ordering {
    let (pa, pb) = (a.literal_parts(), b.literal_parts());
    for (x, y) in pa.iter().zip(pb.iter()) {
        let ord = compare_components(x, y);
        if ord != Ordering::Equal {
            return ord;
        }
    }
    pa.len().cmp(&pb.len())
}

fn parse_operator(
    op: &str,
    arg: &Bson,
    ops: &mut Vec<Operation>,
    registered: &mut Vec<Vec<String>>,
) -> Result<(), MongoError> {
    if !KNOWN_OPERATORS.contains(&op) {
        return Err(MongoError::new(
            ErrorCode::FailedToParse,
            format!(
                "Unknown modifier: {op}. Expected a valid update modifier or pipeline-style \
                 update specified as an array"
            ),
        ));
    }
    let Bson::Document(fields) = arg else {
        return Err(MongoError::new(
            ErrorCode::FailedToParse,
            format!(
                "Modifiers operate on fields but we found type {} instead. For example: {{$mod: \
                 {{<field>: ...}}}} not {{{}}}",
                render::type_name(arg),
                render::element(op, arg)
            ),
        ));
    };
    // An empty operand (`{$set: {}}`) is a no-op since MongoDB 5.0, not an error.
    if op == "$bit" {
        return Err(MongoError::new(
            ErrorCode::NotImplemented,
            "The $bit update operator is not supported yet",
        ));
    }
    for (field, value) in fields {
        let operation = parse_field(op, field, value)?;
        register(registered, &operation.path)?;
        if let Action::Rename(to) = &operation.action {
            register(registered, to)?;
        }
        ops.push(operation);
    }
    Ok(())
}

fn parse_field(op: &str, field: &str, value: &Bson) -> Result<Operation, MongoError> {
    let path = FieldPath::parse(field)?;
    let action = if op == "$rename" {
        Action::Rename(parse_rename(field, value)?)
    } else if let Some(parsed) = FieldOp::parse(op, field, value) {
        Action::Field(parsed?)
    } else if let Some(parsed) = ArrayOp::parse(op, field, value) {
        Action::Array(parsed?)
    } else {
        unreachable!("every known operator but $bit has a parser, and $bit is refused earlier")
    };
    Ok(Operation { path, action })
}

fn parse_rename(from: &str, to: &Bson) -> Result<FieldPath, MongoError> {
    let bad = |message: String| MongoError::new(ErrorCode::BadValue, message);
    let Bson::String(to_str) = to else {
        return Err(bad(format!(
            "The 'to' field for $rename must be a string: {}",
            render::element(from, to)
        )));
    };
    if to_str.contains('\0') {
        return Err(bad(
            "The 'to' field for $rename cannot contain an embedded null byte".to_string(),
        ));
    }
    let from_parts: Vec<&str> = from.split('.').collect();
    let to_parts: Vec<&str> = to_str.split('.').collect();
    if from_parts == to_parts {
        return Err(bad(format!(
            "The source and target field for $rename must differ: {}",
            render::element(from, to)
        )));
    }
    if from_parts.starts_with(&to_parts) || to_parts.starts_with(&from_parts) {
        return Err(bad(format!(
            "The source and target field for $rename must not be on the same path: {}",
            render::element(from, to)
        )));
    }
    if from_parts.iter().any(|p| p.starts_with('$')) {
        return Err(bad(format!(
            "The source field for $rename may not be dynamic: {from}"
        )));
    }
    if to_parts.iter().any(|p| p.starts_with('$')) {
        return Err(bad(format!(
            "The destination field for $rename may not be dynamic: {to_str}"
        )));
    }
    FieldPath::parse(to_str)
}

/// Record `path`, refusing it when it overlaps a path already recorded, with the server's
/// message: the conflict is reported at the shortest recorded prefix of `path`, or at `path`
/// itself when it equals or is a prefix of a recorded one.
fn register(registered: &mut Vec<Vec<String>>, path: &FieldPath) -> Result<(), MongoError> {
    let parts: Vec<String> = path
        .literal_parts()
        .into_iter()
        .map(str::to_string)
        .collect();
    let conflict = |at: String| {
        MongoError::new(
            ErrorCode::ConflictingUpdateOperators,
            format!(
                "Updating the path '{}' would create a conflict at '{at}'",
                path.dotted()
            ),
        )
    };
    for depth in 1..parts.len() {
        if registered.iter().any(|r| r[..] == parts[..depth]) {
            return Err(conflict(parts[..depth].join(".")));
        }
    }
    if registered.iter().any(|r| r.starts_with(&parts)) {
        return Err(conflict(path.dotted().to_string()));
    }
    registered.push(parts);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{bson, doc};

    fn parse_err(update: Document) -> MongoError {
        parse(&update, None).expect_err("invalid update")
    }

    #[test]
    fn classifies_forms() {
        assert!(matches!(
            parse(&doc! {"a": 1}, None),
            Ok((Form::Replacement(_), _))
        ));
        assert!(matches!(
            parse(&doc! {}, None),
            Ok((Form::Replacement(_), _))
        ));
        assert!(matches!(
            parse(&doc! {"$set": {"a": 1}}, None),
            Ok((Form::Operators(_), _))
        ));
        let e = refuse_non_document(&bson!(5));
        assert_eq!(e.code, ErrorCode::TypeMismatch);
    }

    #[test]
    fn operator_errors() {
        let e = parse_err(doc! {"$foo": {"a": 1}});
        assert_eq!(e.code, ErrorCode::FailedToParse);
        assert!(e.message.starts_with("Unknown modifier: $foo. Expected"));
        assert!(parse(&doc! {"$set": {}}, None).is_ok());
        let e = parse_err(doc! {"$set": 5});
        assert_eq!(
            e.message,
            "Modifiers operate on fields but we found type int instead. For example: {$mod: \
             {<field>: ...}} not {$set: 5}"
        );
    }

    #[test]
    fn conflicts() {
        let e = parse_err(doc! {"$set": {"a": 1}, "$inc": {"a": 1}});
        assert_eq!(e.code, ErrorCode::ConflictingUpdateOperators);
        assert_eq!(
            e.message,
            "Updating the path 'a' would create a conflict at 'a'"
        );
        let e = parse_err(doc! {"$set": {"a": 1, "a.b": 1}});
        assert_eq!(
            e.message,
            "Updating the path 'a.b' would create a conflict at 'a'"
        );
        let e = parse_err(doc! {"$set": {"a.b": 1, "a": 1}});
        assert_eq!(
            e.message,
            "Updating the path 'a' would create a conflict at 'a'"
        );
        assert!(parse(&doc! {"$set": {"a.b": 1, "a.c": 1}}, None).is_ok());
    }

    #[test]
    fn orders_by_path() {
        let (form, _) = parse(&doc! {"$set": {"b": 1, "a.10": 1, "a.9": 1}}, None).expect("valid");
        let Form::Operators(ops) = form else {
            panic!("operator form expected")
        };
        let order: Vec<&str> = ops.iter().map(|o| o.path.dotted()).collect();
        assert_eq!(order, vec!["a.9", "a.10", "b"]);
    }
}
