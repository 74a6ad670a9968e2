//! The argument helpers the data and catalog commands share (their handlers are in their
//! families' files, their names in `table.rs`): typed field access with mongod's IDL messages
//! (`TypeMismatch` for a wrong type, `Location40414` for a missing field), namespaces, and the
//! cursor reply shape (`cursor: {firstBatch|nextBatch, id, ns}`).

use bson::{doc, Bson, Document, RawDocumentBuf};
use shale_db::{Batch, Namespace};
use shale_doc::{ErrorCode, MongoError, Variables};

/// The name a command was sent under (its first key): an alias (`findandmodify`,
/// `deleteIndexes`) names its fields in errors by the name the client used.
pub fn command_name(body: &Document) -> &str {
    body.keys().next().map_or("", String::as_str)
}

/// The collection a command names in its first field.
pub fn namespace(db: &str, body: &Document, command: &str) -> Result<Namespace, MongoError> {
    match body.get(command) {
        Some(Bson::String(coll)) => Namespace::new(db, coll),
        Some(other) => Err(MongoError::new(
            ErrorCode::InvalidNamespace,
            format!("collection name has invalid type {}", type_name(other)),
        )),
        None => Err(MongoError::new(
            ErrorCode::InvalidNamespace,
            "no collection name",
        )),
    }
}

pub use shale_doc::type_name;

/// A field of the wrong type; `path` is its full name as mongod's parser gives it
/// (`insert.documents`, `endSessions.endSessions.id`).
pub fn wrong_type(path: &str, v: &Bson, expected: &str) -> MongoError {
    MongoError::new(
        ErrorCode::TypeMismatch,
        format!(
            "BSON field '{path}' is the wrong type '{}', expected type '{expected}'",
            type_name(v)
        ),
    )
}

/// A required field that is absent; `path` as for `wrong_type`.
pub fn missing(path: &str) -> MongoError {
    MongoError::new(
        ErrorCode::Location40414,
        format!("BSON field '{path}' is missing but a required field"),
    )
}

/// A required string field.
pub fn req_str<'a>(body: &'a Document, command: &str, field: &str) -> Result<&'a str, MongoError> {
    match body.get(field) {
        Some(Bson::String(s)) => Ok(s),
        Some(v) => Err(wrong_type(&format!("{command}.{field}"), v, "string")),
        None => Err(missing(&format!("{command}.{field}"))),
    }
}

/// An optional document field (null counts as absent).
pub fn opt_doc<'a>(
    body: &'a Document,
    command: &str,
    field: &str,
) -> Result<Option<&'a Document>, MongoError> {
    match body.get(field) {
        None | Some(Bson::Null) => Ok(None),
        Some(Bson::Document(d)) => Ok(Some(d)),
        Some(v) => Err(wrong_type(&format!("{command}.{field}"), v, "object")),
    }
}

/// An optional boolean field (numbers count as booleans, as mongod's IDL allows).
pub fn opt_bool(body: &Document, command: &str, field: &str) -> Result<Option<bool>, MongoError> {
    match body.get(field) {
        None | Some(Bson::Null) => Ok(None),
        Some(Bson::Boolean(b)) => Ok(Some(*b)),
        Some(Bson::Int32(n)) => Ok(Some(*n != 0)),
        Some(Bson::Int64(n)) => Ok(Some(*n != 0)),
        Some(Bson::Double(n)) => Ok(Some(*n != 0.0)),
        Some(v) => Err(wrong_type(&format!("{command}.{field}"), v, "bool")),
    }
}

/// An optional field mongod's IDL types `bool` (not `safeBool`): a boolean and nothing else
/// (`update.updates.multi`); a number is `TypeMismatch`, as mongod answers.
pub fn opt_idl_bool(
    body: &Document,
    command: &str,
    field: &str,
) -> Result<Option<bool>, MongoError> {
    match body.get(field) {
        None | Some(Bson::Null) => Ok(None),
        Some(Bson::Boolean(b)) => Ok(Some(*b)),
        Some(v) => Err(wrong_type(&format!("{command}.{field}"), v, "bool")),
    }
}

/// An optional integer field (any whole number type).
pub fn opt_i64(body: &Document, command: &str, field: &str) -> Result<Option<i64>, MongoError> {
    match body.get(field) {
        None | Some(Bson::Null) => Ok(None),
        Some(Bson::Int32(n)) => Ok(Some(i64::from(*n))),
        Some(Bson::Int64(n)) => Ok(Some(*n)),
        Some(Bson::Double(n)) if n.fract() == 0.0 => Ok(Some(*n as i64)),
        Some(Bson::Decimal128(_)) => Err(MongoError::new(
            ErrorCode::TypeMismatch,
            format!("'{field}' must be a number"),
        )),
        Some(v) => Err(wrong_type(
            &format!("{command}.{field}"),
            v,
            "[long, int, decimal, double]",
        )),
    }
}

/// An optional `hint`: an index name or key pattern (null and `{}` mean none).
pub fn opt_hint(body: &Document) -> Result<Option<Bson>, MongoError> {
    match body.get("hint") {
        None | Some(Bson::Null) => Ok(None),
        Some(Bson::Document(d)) if d.is_empty() => Ok(None),
        Some(h @ (Bson::String(_) | Bson::Document(_))) => Ok(Some(h.clone())),
        Some(other) => Err(MongoError::new(
            ErrorCode::FailedToParse,
            format!(
                "hint must be a string or an object, not {}",
                type_name(other)
            ),
        )),
    }
}

/// A non-negative count field (`skip`, `limit`, `batchSize`).
pub fn opt_count(body: &Document, command: &str, field: &str) -> Result<Option<u64>, MongoError> {
    match opt_i64(body, command, field)? {
        Some(n) if n < 0 => Err(MongoError::new(
            ErrorCode::BadValue,
            format!("BSON field '{field}' value must be >= 0, actual value '{n}'"),
        )),
        n => Ok(n.map(|n| n as u64)),
    }
}

/// A required array of documents.
pub fn doc_array<'a>(
    body: &'a Document,
    command: &str,
    field: &str,
) -> Result<Vec<&'a Document>, MongoError> {
    match body.get(field) {
        Some(Bson::Array(items)) => items
            .iter()
            .map(|v| match v {
                Bson::Document(d) => Ok(d),
                other => Err(wrong_type(&format!("{command}.{field}"), other, "object")),
            })
            .collect(),
        Some(v) => Err(wrong_type(&format!("{command}.{field}"), v, "array")),
        None => Err(missing(&format!("{command}.{field}"))),
    }
}

/// `{cursor: {<batch_field>: [...], id, ns}}`.
pub fn cursor_reply(ns: &str, batch: Batch, batch_field: &str) -> Result<Document, MongoError> {
    let docs = batch
        .docs
        .iter()
        .map(raw_to_bson)
        .collect::<Result<Vec<Bson>, MongoError>>()?;
    let mut cursor = Document::new();
    cursor.insert(batch_field, docs);
    if let Some(t) = &batch.resume_token {
        cursor.insert("postBatchResumeToken", raw_to_bson(t)?);
    }
    cursor.insert("id", batch.cursor_id);
    cursor.insert("ns", ns);
    Ok(doc! { "cursor": cursor })
}

pub use super::cursor_reply::cursor_reply_raw;

/// A stored or computed raw document as a reply value.
pub fn raw_to_bson(d: &RawDocumentBuf) -> Result<Bson, MongoError> {
    Document::try_from(d.as_ref())
        .map(Bson::Document)
        .map_err(|e| {
            MongoError::new(
                ErrorCode::InvalidBSON,
                format!("document does not decode: {e}"),
            )
        })
}

/// A `pipeline` array's stages, each of which must be a document (mongod's message).
pub fn stage_documents(stages: &[Bson]) -> Result<Vec<Document>, MongoError> {
    stages
        .iter()
        .map(|s| match s {
            Bson::Document(d) => Ok(d.clone()),
            other => Err(MongoError::new(
                ErrorCode::TypeMismatch,
                format!(
                    "Each element of the 'pipeline' array must be an object, not {}",
                    type_name(other)
                ),
            )),
        })
        .collect()
}

/// A document received in a command, as raw BSON.
pub use crate::command::raw_of as to_raw;

/// The variables a command's expressions read: `$$NOW` and `$$CLUSTER_TIME` fixed now, and
/// its `let` document (find, aggregate, update, delete, findAndModify), evaluated once.
pub fn command_vars(body: &Document, command: &str) -> Result<Variables, MongoError> {
    let vars = bind_let(opt_doc(body, command, "let")?)?;
    with_collation(vars, body, command)
}

/// `vars` with the collation `doc` (a command or one of its statements) names, parsed and
/// checked with mongod's codes; unchanged when it names none.
pub fn with_collation(
    vars: Variables,
    doc: &Document,
    command: &str,
) -> Result<Variables, MongoError> {
    match doc.get("collation") {
        None => Ok(vars),
        Some(spec) => {
            let c = shale_doc::Collation::parse(spec, command)?;
            Ok(vars.with_collation(c.map(std::sync::Arc::new)))
        }
    }
}

/// The variables of a command whose `let` document (already checked to be one) is `spec`.
pub fn bind_let(spec: Option<&Document>) -> Result<Variables, MongoError> {
    let raw = spec.map(to_raw).transpose()?;
    super::raw_args::bind_let(raw.as_deref())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_cursor_replies_match_the_owned_shape() {
        let docs = vec![
            to_raw(&doc! {"_id": 1, "a": {"b": [1, 2]}}).expect("raw"),
            to_raw(&doc! {"_id": "x"}).expect("raw"),
        ];
        let batch = || Batch {
            docs: docs.clone(),
            cursor_id: 42,
            resume_token: None,
        };
        let raw = cursor_reply_raw("db.c", batch(), "firstBatch");
        let owned = cursor_reply("db.c", batch(), "firstBatch").expect("owned");
        assert_eq!(Document::try_from(raw.as_ref()).expect("decodes"), owned);
    }
}
