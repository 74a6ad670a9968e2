//! A connection's last error, as mongod 3.6 kept it for `getLastError`: set by each legacy
//! write (OP_INSERT, OP_UPDATE, OP_DELETE) from the write command's reply, cleared by each
//! legacy query, and reported in mongod's shape (`n`, `err`, `code`, `codeName`,
//! `updatedExisting`, `upserted`). Pure: no I/O, no locking.

use bson::{doc, Bson, Document};
use shale_doc::{ErrorCode, MongoError};

/// Which write produced the outcome (each reports `n` its own way).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteKind {
    /// An insert.
    Insert,
    /// An update.
    Update,
    /// A delete.
    Delete,
}

/// The outcome `getLastError` reports.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LastError {
    /// Documents the write affected.
    pub n: i64,
    /// The error message and code, when the write failed.
    pub err: Option<(String, i32)>,
    /// Set after an update only.
    pub updated_existing: Option<bool>,
    /// The `_id` an upsert inserted.
    pub upserted: Option<Bson>,
}

impl LastError {
    /// The outcome of a message that failed before any write ran.
    pub fn failed(e: &MongoError) -> LastError {
        LastError {
            err: Some((e.message.clone(), e.code.code())),
            ..LastError::default()
        }
    }

    /// The outcome of a write command's reply. Inserts report `n: 0`, as mongod's legacy
    /// inserts did; updates the documents matched (or 1 upserted); deletes those removed.
    pub fn from_reply(kind: WriteKind, reply: &Document) -> LastError {
        if let Some(err) = command_error(reply).or_else(|| last_write_error(reply)) {
            return LastError {
                err: Some(err),
                ..LastError::default()
            };
        }
        let n = number(reply.get("n"));
        match kind {
            WriteKind::Insert => LastError::default(),
            WriteKind::Delete => LastError {
                n,
                ..LastError::default()
            },
            WriteKind::Update => {
                let upserted = reply
                    .get_array("upserted")
                    .ok()
                    .and_then(|a| a.first())
                    .and_then(Bson::as_document)
                    .and_then(|d| d.get("_id").cloned());
                LastError {
                    n,
                    err: None,
                    updated_existing: Some(n > 0 && upserted.is_none()),
                    upserted,
                }
            }
        }
    }

    /// The `getLastError` reply fields (without `ok`).
    pub fn to_document(&self, connection_id: u64) -> Document {
        let mut d = doc! { "connectionId": small(connection_id as i64) };
        if let Some(u) = self.updated_existing {
            d.insert("updatedExisting", u);
        }
        if let Some(id) = &self.upserted {
            d.insert("upserted", id.clone());
        }
        d.insert("n", small(self.n));
        d.insert("syncMillis", 0i32);
        d.insert("writtenTo", Bson::Null);
        match &self.err {
            None => {
                d.insert("err", Bson::Null);
            }
            Some((message, code)) => {
                d.insert("err", message.clone());
                d.insert("code", *code);
                if let Some(name) = ErrorCode::from_code(*code) {
                    d.insert("codeName", name.name());
                }
            }
        }
        d
    }
}

/// An int32 where it fits, as mongod's `appendNumber`.
fn small(n: i64) -> Bson {
    i32::try_from(n).map_or(Bson::Int64(n), Bson::Int32)
}

fn number(v: Option<&Bson>) -> i64 {
    match v {
        Some(Bson::Int32(n)) => i64::from(*n),
        Some(Bson::Int64(n)) => *n,
        Some(Bson::Double(n)) => *n as i64,
        _ => 0,
    }
}

/// The command's own failure (`ok: 0`).
fn command_error(reply: &Document) -> Option<(String, i32)> {
    let ok = match reply.get("ok") {
        Some(Bson::Double(v)) => *v,
        Some(Bson::Int32(v)) => f64::from(*v),
        _ => 0.0,
    };
    (ok != 1.0).then(|| {
        let message = reply.get_str("errmsg").unwrap_or("write failed").to_owned();
        let code = reply
            .get_i32("code")
            .unwrap_or(ErrorCode::OperationFailed.code());
        (message, code)
    })
}

/// The last of the statement errors (mongod kept the last).
fn last_write_error(reply: &Document) -> Option<(String, i32)> {
    let last = reply.get_array("writeErrors").ok()?.last()?.as_document()?;
    let message = last.get_str("errmsg").unwrap_or("write failed").to_owned();
    Some((
        message,
        last.get_i32("code")
            .unwrap_or(ErrorCode::OperationFailed.code()),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn updates_report_matched_upserted_and_existing() {
        let e = LastError::from_reply(WriteKind::Update, &doc! {"n": 2, "nModified": 1, "ok": 1.0});
        assert_eq!((e.n, e.updated_existing), (2, Some(true)));
        let u = LastError::from_reply(
            WriteKind::Update,
            &doc! {"n": 1, "upserted": [{"index": 0, "_id": 5}], "ok": 1.0},
        );
        assert_eq!(
            (u.upserted, u.updated_existing),
            (Some(Bson::Int32(5)), Some(false))
        );
        let none = LastError::from_reply(WriteKind::Update, &doc! {"n": 0, "ok": 1.0});
        assert_eq!(
            none.to_document(3),
            doc! {"connectionId": 3, "updatedExisting": false,
            "n": 0, "syncMillis": 0, "writtenTo": null, "err": null}
        );
    }

    #[test]
    fn errors_carry_message_code_and_name() {
        let reply =
            doc! {"n": 0, "writeErrors": [{"index": 0, "code": 11000, "errmsg": "dup"}], "ok": 1.0};
        let e = LastError::from_reply(WriteKind::Insert, &reply);
        let d = e.to_document(1);
        assert_eq!(d.get_str("err").expect("err"), "dup");
        assert_eq!(d.get_i32("code").expect("code"), 11000);
        assert_eq!(d.get_str("codeName").expect("name"), "DuplicateKey");
        let failed = LastError::from_reply(
            WriteKind::Delete,
            &doc! {"ok": 0.0, "errmsg": "x", "code": 2},
        );
        assert_eq!(failed.err, Some(("x".into(), 2)));
        let del = LastError::from_reply(WriteKind::Delete, &doc! {"n": 4, "ok": 1.0});
        assert_eq!((del.n, del.updated_existing), (4, None));
        assert_eq!(
            LastError::from_reply(WriteKind::Insert, &doc! {"n": 3, "ok": 1.0}).n,
            0
        );
    }
}
