//! Typed access to a raw command body's fields, for the handlers that read the body as it
//! came (`find`, `getMore`, `insert`): the same checks and the same mongod messages as the
//! owned-body helpers in `data.rs`, without decoding the command. A value is copied out only
//! to name its type in an error.

use super::data::{missing, wrong_type};
use crate::command::{to_bson, Command};
use bson::{Bson, Document, RawBsonRef, RawDocument};
use shale_db::Namespace;
use shale_doc::{ErrorCode, MongoError, Variables};

/// A field of the wrong type (the value copied out only for the message).
fn wrong(path: &str, v: RawBsonRef<'_>, expected: &str) -> MongoError {
    wrong_type(path, &to_bson(v), expected)
}

/// The collection a command names in its first field.
pub fn namespace(db: &str, cmd: &Command<'_>, command: &str) -> Result<Namespace, MongoError> {
    match cmd.get(command) {
        Some(RawBsonRef::String(coll)) => Namespace::new(db, coll),
        Some(other) => Err(MongoError::new(
            ErrorCode::InvalidNamespace,
            format!(
                "collection name has invalid type {}",
                shale_doc::type_name(&to_bson(other))
            ),
        )),
        None => Err(MongoError::new(
            ErrorCode::InvalidNamespace,
            "no collection name",
        )),
    }
}

/// A required string field.
pub fn req_str<'c>(
    cmd: &'c Command<'_>,
    command: &str,
    field: &str,
) -> Result<&'c str, MongoError> {
    match cmd.get(field) {
        Some(RawBsonRef::String(s)) => Ok(s),
        Some(v) => Err(wrong(&format!("{command}.{field}"), v, "string")),
        None => Err(missing(&format!("{command}.{field}"))),
    }
}

/// An optional document field (null counts as absent).
pub fn opt_doc<'c>(
    cmd: &'c Command<'_>,
    command: &str,
    field: &str,
) -> Result<Option<&'c RawDocument>, MongoError> {
    match cmd.get(field) {
        None | Some(RawBsonRef::Null) => Ok(None),
        Some(RawBsonRef::Document(d)) => Ok(Some(d)),
        Some(v) => Err(wrong(&format!("{command}.{field}"), v, "object")),
    }
}

/// An optional boolean field (numbers count as booleans, as mongod's IDL allows).
pub fn opt_bool(cmd: &Command<'_>, command: &str, field: &str) -> Result<Option<bool>, MongoError> {
    match cmd.get(field) {
        None | Some(RawBsonRef::Null) => Ok(None),
        Some(RawBsonRef::Boolean(b)) => Ok(Some(b)),
        Some(RawBsonRef::Int32(n)) => Ok(Some(n != 0)),
        Some(RawBsonRef::Int64(n)) => Ok(Some(n != 0)),
        Some(RawBsonRef::Double(n)) => Ok(Some(n != 0.0)),
        Some(v) => Err(wrong(&format!("{command}.{field}"), v, "bool")),
    }
}

/// An optional field mongod's IDL types `bool` (not `safeBool`): a boolean and nothing else
/// (`insert.ordered`); a number is `TypeMismatch`, as mongod answers.
pub fn opt_idl_bool(
    cmd: &Command<'_>,
    command: &str,
    field: &str,
) -> Result<Option<bool>, MongoError> {
    match cmd.get(field) {
        None | Some(RawBsonRef::Null) => Ok(None),
        Some(RawBsonRef::Boolean(b)) => Ok(Some(b)),
        Some(v) => Err(wrong(&format!("{command}.{field}"), v, "bool")),
    }
}

/// An optional integer field (any whole number type).
pub fn opt_i64(cmd: &Command<'_>, command: &str, field: &str) -> Result<Option<i64>, MongoError> {
    match cmd.get(field) {
        None | Some(RawBsonRef::Null) => Ok(None),
        Some(RawBsonRef::Int32(n)) => Ok(Some(i64::from(n))),
        Some(RawBsonRef::Int64(n)) => Ok(Some(n)),
        Some(RawBsonRef::Double(n)) if n.fract() == 0.0 => Ok(Some(n as i64)),
        Some(RawBsonRef::Decimal128(_)) => Err(MongoError::new(
            ErrorCode::TypeMismatch,
            format!("'{field}' must be a number"),
        )),
        Some(v) => Err(wrong(
            &format!("{command}.{field}"),
            v,
            "[long, int, decimal, double]",
        )),
    }
}

/// A non-negative count field (`skip`, `limit`, `batchSize`).
pub fn opt_count(cmd: &Command<'_>, command: &str, field: &str) -> Result<Option<u64>, MongoError> {
    match opt_i64(cmd, command, field)? {
        Some(n) if n < 0 => Err(MongoError::new(
            ErrorCode::BadValue,
            format!("BSON field '{field}' value must be >= 0, actual value '{n}'"),
        )),
        n => Ok(n.map(|n| n as u64)),
    }
}

/// An optional `hint`: an index name or key pattern (null and `{}` mean none).
pub fn opt_hint(cmd: &Command<'_>) -> Result<Option<Bson>, MongoError> {
    match cmd.get("hint") {
        None | Some(RawBsonRef::Null) => Ok(None),
        Some(RawBsonRef::Document(d)) if d.is_empty() => Ok(None),
        Some(h @ (RawBsonRef::String(_) | RawBsonRef::Document(_))) => Ok(Some(to_bson(h))),
        Some(other) => Err(MongoError::new(
            ErrorCode::FailedToParse,
            format!(
                "hint must be a string or an object, not {}",
                shale_doc::type_name(&to_bson(other))
            ),
        )),
    }
}

/// The variables a command's expressions read: `$$NOW` and `$$CLUSTER_TIME` fixed now, and
/// its `let` document, evaluated once; with the collation it names, if any.
pub fn command_vars(cmd: &Command<'_>, command: &str) -> Result<Variables, MongoError> {
    let vars = bind_let(opt_doc(cmd, command, "let")?)?;
    match cmd.get("collation") {
        None => Ok(vars),
        Some(spec) => {
            let c = shale_doc::Collation::parse(&to_bson(spec), command)?;
            Ok(vars.with_collation(c.map(std::sync::Arc::new)))
        }
    }
}

/// The variables of a command whose `let` document (already checked to be one) is `spec`.
pub fn bind_let(spec: Option<&RawDocument>) -> Result<Variables, MongoError> {
    let vars = Variables::new();
    match spec {
        Some(spec) => vars.with_let(spec),
        None => Ok(vars),
    }
}

/// Owned copies of raw statements (a write command's `deletes`: the statement parsers take
/// owned documents; the rest of the command stays raw).
pub fn owned(statements: &[&RawDocument]) -> Result<Vec<Document>, MongoError> {
    statements
        .iter()
        .map(|d| {
            Document::try_from(*d)
                .map_err(|e| MongoError::new(ErrorCode::InvalidBSON, e.to_string()))
        })
        .collect()
}

/// An owned copy of `doc` without its field `skip`, which the caller reads raw (an update
/// kept as sent); the rest decoded once, as `Document::try_from` decodes it.
pub fn owned_except(doc: &RawDocument, skip: &str) -> Result<Document, MongoError> {
    let invalid = |e: bson::raw::Error| MongoError::new(ErrorCode::InvalidBSON, e.to_string());
    let mut out = Document::new();
    for element in doc {
        let (k, v) = element.map_err(invalid)?;
        if k != skip {
            out.insert(k, Bson::try_from(v).map_err(invalid)?);
        }
    }
    Ok(out)
}

/// A filter decoded, a top-level name it gives twice read as mongod reads it (the `$and` of
/// its elements, `shale_doc::filter_as_sent`) rather than kept at its last value.
pub fn owned_filter(filter: &RawDocument) -> Result<Document, MongoError> {
    match shale_doc::filter_as_sent(filter)? {
        Some(and) => Ok(and),
        None => Document::try_from(filter)
            .map_err(|e| MongoError::new(ErrorCode::InvalidBSON, e.to_string())),
    }
}

/// `doc`'s filter field `field` (decoded in `doc`, sent in `raw`) as `owned_filter` reads
/// it, when it names a field twice.
pub fn filter_as_sent(
    doc: &mut Document,
    raw: &RawDocument,
    field: &str,
) -> Result<(), MongoError> {
    if let Some(RawBsonRef::Document(filter)) = crate::command::get(raw, field) {
        if let Some(and) = shale_doc::filter_as_sent(filter)? {
            doc.insert(field, and);
        }
    }
    Ok(())
}

/// A filter field a handler of the decoded body read (`decoded`, type-checked there) as
/// sent in `cmd`: the `$and` of its elements when it names a field twice
/// (`shale_doc::filter_as_sent`), else the decoded copy; empty when absent.
pub fn decoded_filter(
    cmd: &Command<'_>,
    field: &str,
    decoded: Option<&Document>,
) -> Result<Document, MongoError> {
    let Some(decoded) = decoded else {
        return Ok(Document::new());
    };
    if let Some(RawBsonRef::Document(filter)) = cmd.get(field) {
        if let Some(and) = shale_doc::filter_as_sent(filter)? {
            return Ok(and);
        }
    }
    Ok(decoded.clone())
}

/// The statements of `field` as sent: the body's array of documents or the document
/// sequence of that name.
pub fn raw_statements<'a>(
    cmd: &'a Command<'_>,
    command: &str,
    field: &str,
) -> Result<Vec<&'a RawDocument>, MongoError> {
    let path = format!("{command}.{field}");
    match (cmd.get(field), cmd.sequence(field)) {
        (Some(RawBsonRef::Array(items)), _) => items
            .into_iter()
            .map(|v| match v {
                Ok(RawBsonRef::Document(d)) => Ok(d),
                Ok(other) => Err(wrong(&path, other, "object")),
                Err(e) => Err(MongoError::new(ErrorCode::InvalidBSON, e.to_string())),
            })
            .collect(),
        (Some(v), _) => Err(wrong(&path, v, "array")),
        (None, Some(seq)) => Ok(seq.iter().map(|d| d.as_ref()).collect()),
        (None, None) => Err(missing(&path)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::raw_of;
    use bson::doc;

    #[test]
    fn a_filter_naming_a_field_twice_is_not_collapsed() {
        let mut q = bson::RawDocumentBuf::new();
        q.append("a", 1);
        q.append("a", 2);
        let and = doc! {"$and": [{"a": 1}, {"a": 2}]};
        assert_eq!(owned_filter(&q), Ok(and.clone()));
        let once = raw_of(&doc! {"a": 1, "b": 2}).expect("raw");
        assert_eq!(owned_filter(&once), Ok(doc! {"a": 1, "b": 2}));
        let mut statement = bson::RawDocumentBuf::new();
        statement.append("q", q);
        statement.append("u", bson::RawDocumentBuf::new());
        statement.append("multi", true);
        let mut owned = owned_except(&statement, "u").expect("decodes");
        assert_eq!(owned, doc! {"q": {"a": 2}, "multi": true});
        filter_as_sent(&mut owned, &statement, "q").expect("reads");
        assert_eq!(owned, doc! {"q": and, "multi": true});
    }

    #[test]
    fn a_decoded_filter_field_is_read_as_sent() {
        let mut q = bson::RawDocumentBuf::new();
        q.append("a", 1);
        q.append("a", 2);
        let mut body = bson::RawDocumentBuf::new();
        body.append("count", "c");
        body.append("query", q);
        let cmd = Command::new(&body, Vec::new());
        let decoded = cmd.doc().expect("owned").get_document("query").ok();
        assert_eq!(decoded, Some(&doc! {"a": 2}));
        assert_eq!(
            decoded_filter(&cmd, "query", decoded),
            Ok(doc! {"$and": [{"a": 1}, {"a": 2}]})
        );
        assert_eq!(decoded_filter(&cmd, "query", None), Ok(doc! {}));
        let once = raw_of(&doc! {"count": "c", "query": {"a": 1}}).expect("raw");
        let cmd = Command::new(&once, Vec::new());
        let decoded = cmd.doc().expect("owned").get_document("query").ok();
        assert_eq!(decoded_filter(&cmd, "query", decoded), Ok(doc! {"a": 1}));
    }

    #[test]
    fn raw_fields_are_checked_as_the_owned_helpers_check_them() {
        let raw = raw_of(&doc! {
            "find": "c", "limit": 2.0, "skip": -1, "singleBatch": 1, "filter": {"a": 1},
            "hint": {}, "sort": "x", "batchSize": "3", "let": {"v": 1},
        })
        .expect("raw");
        let cmd = Command::new(&raw, Vec::new());
        let owned = cmd.doc().expect("owned").clone();
        assert_eq!(
            namespace("db", &cmd, "find").expect("ns").to_string(),
            "db.c"
        );
        assert_eq!(opt_i64(&cmd, "find", "limit"), Ok(Some(2)));
        assert_eq!(
            opt_count(&cmd, "find", "skip"),
            super::super::data::opt_count(&owned, "find", "skip")
        );
        assert_eq!(
            opt_count(&cmd, "find", "batchSize"),
            super::super::data::opt_count(&owned, "find", "batchSize")
        );
        assert_eq!(opt_bool(&cmd, "find", "singleBatch"), Ok(Some(true)));
        assert_eq!(opt_hint(&cmd), Ok(None));
        assert!(opt_doc(&cmd, "find", "filter").expect("doc").is_some());
        assert_eq!(
            opt_doc(&cmd, "find", "sort").expect_err("a string").message,
            super::super::data::opt_doc(&owned, "find", "sort")
                .expect_err("a string")
                .message
        );
        assert_eq!(
            req_str(&cmd, "find", "nope").expect_err("missing").code,
            ErrorCode::Location40414
        );
        assert!(command_vars(&cmd, "find").is_ok());
        let raw = raw_of(&doc! {"find": 1}).expect("raw");
        let bad_ns = Command::new(&raw, Vec::new());
        assert_eq!(
            namespace("db", &bad_ns, "find").expect_err("a number").code,
            ErrorCode::InvalidNamespace
        );
    }
}
