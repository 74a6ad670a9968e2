//! A command's session fields (`lsid`, `txnNumber`, `autocommit`, `startTransaction`):
//! checked in mongod's order (`initializeOperationSessionInfo`) with its error codes and
//! messages, and classified as a plain command, a retryable write, or a statement of a
//! multi-document transaction. Nothing here keeps state; `transactions.rs` runs the
//! transaction statements against the session table.

use crate::command::{get, to_bson, Command};
use bson::{spec::BinarySubtype, Bson, RawBsonRef};
use shale_doc::{ErrorCode, MongoError};

/// What a command's session fields ask for.
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    /// No transaction number: run it as it is (in its session, if it names one).
    Plain,
    /// `txnNumber` without `autocommit`: a retryable write (`retryable_writes.rs`).
    RetryableWrite(RetryFields),
    /// `autocommit: false`: a statement of a multi-document transaction.
    Transaction(TxnFields),
}

/// The fields of a transaction statement.
#[derive(Debug, Clone, PartialEq)]
pub struct TxnFields {
    pub lsid: bson::Uuid,
    pub txn_number: i64,
    /// `startTransaction: true`: the first statement.
    pub start: bool,
}

fn invalid(message: &str) -> MongoError {
    MongoError::new(ErrorCode::InvalidOptions, message)
}

/// The fields of a retryable write.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryFields {
    pub lsid: bson::Uuid,
    pub txn_number: i64,
    /// `stmtIds`: each statement's id, when the client numbers them.
    pub stmt_ids: Option<Vec<i32>>,
    /// `stmtId`: the first statement's id (default 0; the next ones follow).
    pub first_stmt_id: i32,
}

impl RetryFields {
    /// The id of the statement at `index` in the command (mongod's `getStmtIdForWriteAt`).
    pub fn stmt_id(&self, index: usize) -> i32 {
        match &self.stmt_ids {
            Some(ids) => ids.get(index).copied().unwrap_or(-1),
            None => self
                .first_stmt_id
                .saturating_add(i32::try_from(index).unwrap_or(i32::MAX)),
        }
    }
}

/// Checks and classifies `body`'s session fields; with the session id, if it names one.
pub fn classify_with_lsid(body: &Command<'_>) -> Result<(Kind, Option<bson::Uuid>), MongoError> {
    let lsid = lsid(body)?;
    Ok((classify_for(body, lsid)?, lsid))
}

/// The classification, given the command's `lsid` already read.
fn classify_for(body: &Command<'_>, lsid: Option<bson::Uuid>) -> Result<Kind, MongoError> {
    const FIELDS: [&str; 3] = ["txnNumber", "autocommit", "startTransaction"];
    if !FIELDS.iter().any(|f| body.get(f).is_some()) {
        return Ok(Kind::Plain);
    }
    let txn_number = txn_number(body)?;
    if txn_number.is_some() && lsid.is_none() {
        return Err(invalid(
            "Transaction number requires a session ID to also be specified",
        ));
    }
    let autocommit = flag(body, "autocommit")?;
    let start = flag(body, "startTransaction")?;
    if autocommit.is_some() && txn_number.is_none() {
        return Err(invalid(
            "'autocommit' field requires a transaction number to also be specified",
        ));
    }
    if autocommit == Some(true) {
        return Err(invalid("Specifying autocommit=true is not allowed."));
    }
    if start.is_some() && autocommit.is_none() {
        return Err(invalid(
            "'startTransaction' field requires 'autocommit' field to also be specified",
        ));
    }
    if start == Some(false) {
        return Err(invalid("Specifying startTransaction=false is not allowed."));
    }
    Ok(match (lsid, txn_number, autocommit) {
        (Some(lsid), Some(n), Some(false)) => Kind::Transaction(TxnFields {
            lsid,
            txn_number: n,
            start: start == Some(true),
        }),
        (Some(lsid), Some(n), None) => Kind::RetryableWrite(RetryFields {
            lsid,
            txn_number: n,
            stmt_ids: stmt_ids(body)?,
            first_stmt_id: first_stmt_id(body)?,
        }),
        _ => Kind::Plain,
    })
}

/// `stmtIds: [int, ...]`.
fn stmt_ids(body: &Command<'_>) -> Result<Option<Vec<i32>>, MongoError> {
    let Some(v) = field(body, "stmtIds") else {
        return Ok(None);
    };
    let bad = || MongoError::new(ErrorCode::TypeMismatch, "stmtIds must be an array of ints");
    let Bson::Array(items) = v else {
        return Err(bad());
    };
    items
        .iter()
        .map(|i| match i {
            Bson::Int32(n) => Ok(*n),
            _ => Err(bad()),
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// `stmtId: int` (0 when absent).
fn first_stmt_id(body: &Command<'_>) -> Result<i32, MongoError> {
    match field(body, "stmtId").as_ref() {
        None => Ok(0),
        Some(Bson::Int32(n)) => Ok(*n),
        Some(_) => Err(MongoError::new(
            ErrorCode::TypeMismatch,
            "stmtId must be an int",
        )),
    }
}

/// `txnNumber`: a non-negative long (an int is accepted too).
fn txn_number(body: &Command<'_>) -> Result<Option<i64>, MongoError> {
    let n = match field(body, "txnNumber").as_ref() {
        None => return Ok(None),
        Some(Bson::Int64(n)) => *n,
        Some(Bson::Int32(n)) => i64::from(*n),
        Some(other) => {
            return Err(MongoError::new(
                ErrorCode::TypeMismatch,
                format!(
                    "BSON field 'OperationSessionInfo.txnNumber' is the wrong type '{}', \
                     expected type 'long'",
                    shale_doc::type_name(other)
                ),
            ))
        }
    };
    if n < 0 {
        return Err(invalid("Transaction number cannot be negative"));
    }
    Ok(Some(n))
}

/// `lsid: {id: UUID, ...}`; absent is `None`.
fn lsid(body: &Command<'_>) -> Result<Option<bson::Uuid>, MongoError> {
    let Some(v) = body.get("lsid") else {
        return Ok(None);
    };
    let id = match v {
        RawBsonRef::Document(d) => get(d, "id"),
        _ => None,
    };
    match id {
        Some(RawBsonRef::Binary(b)) if b.subtype == BinarySubtype::Uuid => {
            let bytes: [u8; 16] = b.bytes.try_into().map_err(|_| {
                MongoError::new(ErrorCode::InvalidOptions, "lsid.id must be a 16-byte UUID")
            })?;
            Ok(Some(bson::Uuid::from_bytes(bytes)))
        }
        _ => Err(MongoError::new(
            ErrorCode::TypeMismatch,
            "BSON field 'OperationSessionInfo.lsid' must be an object with a UUID 'id'",
        )),
    }
}

/// An owned copy of session field `key` (only commands that carry one pay for it).
fn field(body: &Command<'_>, key: &str) -> Option<Bson> {
    body.get(key).map(to_bson)
}

/// A boolean session flag.
fn flag(body: &Command<'_>, field: &str) -> Result<Option<bool>, MongoError> {
    match self::field(body, field).as_ref() {
        None => Ok(None),
        Some(Bson::Boolean(b)) => Ok(Some(*b)),
        Some(other) => Err(MongoError::new(
            ErrorCode::TypeMismatch,
            format!(
                "BSON field 'OperationSessionInfo.{field}' is the wrong type '{}', expected \
                 type 'bool'",
                shale_doc::type_name(other)
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, Document};

    fn classify(body: &Document) -> Result<Kind, MongoError> {
        let raw = bson::RawDocumentBuf::from_document(body).expect("raw");
        super::classify_with_lsid(&Command::new(&raw, Vec::new())).map(|(k, _)| k)
    }

    fn code(body: Document) -> i32 {
        classify(&body).expect_err("refused").code.code()
    }

    #[test]
    fn session_fields_are_checked_in_mongods_order() {
        let id = bson::Uuid::new();
        let start = doc! {"insert": "c", "lsid": {"id": id}, "txnNumber": 1i64,
        "autocommit": false, "startTransaction": true};
        assert_eq!(
            classify(&start),
            Ok(Kind::Transaction(TxnFields {
                lsid: id,
                txn_number: 1,
                start: true
            }))
        );
        let next = doc! {"find": "c", "lsid": {"id": id}, "txnNumber": 1, "autocommit": false};
        assert!(matches!(classify(&next), Ok(Kind::Transaction(f)) if !f.start));
        let retryable = doc! {"insert": "c", "lsid": {"id": id}, "txnNumber": 7i64};
        let Ok(Kind::RetryableWrite(r)) = classify(&retryable) else {
            panic!("a retryable write");
        };
        assert_eq!((r.txn_number, r.stmt_id(0), r.stmt_id(2)), (7, 0, 2));
        let numbered = doc! {"insert": "c", "lsid": {"id": id}, "txnNumber": 7i64,
        "stmtIds": [5, 9]};
        let Ok(Kind::RetryableWrite(r)) = classify(&numbered) else {
            panic!("a retryable write");
        };
        assert_eq!((r.stmt_id(0), r.stmt_id(1)), (5, 9));
        assert_eq!(
            classify(&doc! {"find": "c", "lsid": {"id": id}}),
            Ok(Kind::Plain)
        );
        assert_eq!(code(doc! {"find": "c", "txnNumber": 1i64}), 72);
        assert_eq!(
            code(doc! {"find": "c", "lsid": {"id": id}, "txnNumber": -1i64}),
            72
        );
        assert_eq!(
            code(doc! {"find": "c", "lsid": {"id": id}, "autocommit": false}),
            72
        );
        assert_eq!(
            code(doc! {"find": "c", "lsid": {"id": id}, "txnNumber": 1i64, "autocommit": true}),
            72
        );
        assert_eq!(
            code(
                doc! {"find": "c", "lsid": {"id": id}, "txnNumber": 1i64, "startTransaction": true}
            ),
            72
        );
        assert_eq!(
            code(
                doc! {"find": "c", "lsid": {"id": id}, "txnNumber": 1i64, "autocommit": false,
                "startTransaction": false}
            ),
            72
        );
        assert_eq!(
            code(doc! {"find": "c", "lsid": {"id": 1}, "txnNumber": 1i64}),
            14
        );
    }
}
