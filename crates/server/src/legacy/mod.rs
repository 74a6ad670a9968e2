//! The legacy opcodes as mongod 3.6 served them to pre-3.6 drivers: OP_QUERY on a
//! collection, OP_GET_MORE and OP_KILL_CURSORS (`query.rs`, `cursor_ops.rs`), and the
//! fire-and-forget writes OP_INSERT, OP_UPDATE and OP_DELETE whose outcome `getLastError`
//! reports (`writes.rs`, `last_error.rs`). Each is translated into the command an OP_MSG
//! client would send and run through the same dispatch (access control, the find path and
//! the cursor table included), so the legacy opcodes add no query or write logic of their
//! own. Every failure answered to an OP_QUERY or OP_GET_MORE is an OP_REPLY with the
//! QueryFailure flag and `{$err, code, ok: 0}` (CursorNotFound for an unknown cursor), never
//! a document a driver could take for a result. This module must never panic on a message.

mod cursor_ops;
pub mod last_error;
mod query;
mod writes;

use crate::commands::Reply;
use crate::wire::{
    encode_op_reply_docs, reply_flags, MsgHeader, OpCode, OpDelete, OpGetMore, OpInsert,
    OpKillCursors, OpQuery, OpUpdate, ReplyHead, WireError,
};
use crate::ConnectionCtx;
use bson::{doc, Document, RawDocument, RawDocumentBuf};
use last_error::LastError;
use shale_doc::{ErrorCode, MongoError};
use std::collections::HashMap;
use std::sync::atomic::{AtomicI32, Ordering};

pub use query::translate as translate_query;

static NEXT_REPLY_ID: AtomicI32 = AtomicI32::new(1 << 30);

/// Cursor positions a connection remembers before forgetting those already closed.
const POSITIONS_MAX: usize = 1024;

/// What a connection keeps for the legacy opcodes.
#[derive(Debug, Default)]
pub struct LegacyState {
    /// The outcome of the connection's last legacy write (`getLastError`).
    pub last_error: LastError,
    /// Documents already returned per open cursor (OP_REPLY's `startingFrom`).
    positions: HashMap<i64, i32>,
}

impl LegacyState {
    /// Where a batch of `requested` (0 for a query's first batch) starts; remembers the
    /// position after its `returned` documents while the cursor (`reply_id`) stays open.
    fn advance(&mut self, requested: i64, reply_id: i64, returned: usize) -> i32 {
        let start = self.positions.remove(&requested).unwrap_or(0);
        if reply_id != 0 {
            let next = start.saturating_add(i32::try_from(returned).unwrap_or(i32::MAX));
            self.positions.insert(reply_id, next);
        }
        start
    }

    /// Forgets the positions of cursors that are no longer open (killed, timed out).
    fn prune(&mut self, still_open: impl Fn(i64) -> bool) {
        if self.positions.len() > POSITIONS_MAX {
            self.positions.retain(|id, _| still_open(*id));
        }
    }
}

/// Runs a legacy OP_QUERY on a collection (not `$cmd`); returns the encoded OP_REPLY.
pub fn run_query(ctx: &ConnectionCtx, request_id: i32, q: &OpQuery) -> Vec<u8> {
    query::run(ctx, request_id, q)
}

/// Runs OP_GET_MORE, OP_KILL_CURSORS, OP_INSERT, OP_UPDATE or OP_DELETE; returns the
/// encoded reply (only OP_GET_MORE has one).
pub fn run_other(ctx: &ConnectionCtx, header: MsgHeader, whole: &[u8]) -> Option<Vec<u8>> {
    let id = header.request_id;
    let decoded = match header.op_code {
        OpCode::GetMore => {
            return Some(match OpGetMore::decode(whole) {
                Ok(g) => cursor_ops::get_more(ctx, id, &g),
                Err(e) => failure_reply(id, &wire_error(&e)),
            })
        }
        OpCode::KillCursors => OpKillCursors::decode(whole).map(|k| cursor_ops::kill(ctx, &k)),
        OpCode::Insert => OpInsert::decode(whole).map(|m| writes::insert(ctx, m)),
        OpCode::Update => OpUpdate::decode(whole).map(|m| writes::update(ctx, m)),
        OpCode::Delete => OpDelete::decode(whole).map(|m| writes::delete(ctx, m)),
        other => Err(WireError::UnsupportedOpCode(other.as_i32())),
    };
    if let Err(e) = decoded {
        // Nothing to answer to: the client learns of it through getLastError.
        tracing::warn!(conn = ctx.connection_id, error = %e, "bad legacy message");
        let failed = LastError::failed(&wire_error(&e));
        lock(ctx).last_error = failed;
    }
    None
}

/// The error for a message that could not be decoded, with mongod's code for it.
pub fn wire_error(e: &WireError) -> MongoError {
    let code = match e {
        WireError::ObjectTooLarge { .. } => ErrorCode::BSONObjectTooLarge,
        WireError::InvalidBson(_) => ErrorCode::InvalidBSON,
        WireError::TooDeep { .. } => ErrorCode::Overflow,
        _ => ErrorCode::ProtocolError,
    };
    MongoError::new(code, e.to_string())
}

/// An OP_REPLY with the QueryFailure flag and mongod 3.6's `{$err, code, ok: 0}`.
pub fn failure_reply(request_id: i32, e: &MongoError) -> Vec<u8> {
    failure_reply_parts(request_id, &e.message, e.code.code())
}

fn failure_reply_parts(request_id: i32, message: &str, code: i32) -> Vec<u8> {
    let body = doc! { "$err": message, "code": code, "ok": 0.0 };
    #[allow(
        clippy::expect_used,
        reason = "serialising a document built in memory into a Vec cannot fail"
    )]
    let bytes = bson::to_vec(&body).expect("serialising an in-memory document cannot fail");
    let head = ReplyHead {
        response_flags: reply_flags::QUERY_FAILURE,
        cursor_id: 0,
        starting_from: 0,
    };
    encode_op_reply_docs(next_reply_id(), request_id, head, &[bytes])
}

fn next_reply_id() -> i32 {
    NEXT_REPLY_ID.fetch_add(1, Ordering::Relaxed)
}

fn lock(ctx: &ConnectionCtx) -> std::sync::MutexGuard<'_, LegacyState> {
    ctx.legacy.lock().unwrap_or_else(|p| p.into_inner())
}

/// Splits `db.collection` at its first dot.
fn split_namespace(full: &str) -> Result<(&str, &str), MongoError> {
    match full.split_once('.') {
        Some((db, coll)) if !db.is_empty() && !coll.is_empty() => Ok((db, coll)),
        _ => Err(MongoError::new(
            ErrorCode::InvalidNamespace,
            format!("Invalid namespace specified '{full}'"),
        )),
    }
}

/// A command's reply as raw bytes.
#[allow(
    clippy::expect_used,
    reason = "serialising a document built in memory into a Vec cannot fail"
)]
fn reply_raw(reply: Reply) -> RawDocumentBuf {
    match reply {
        Reply::Raw(r) => r,
        Reply::Doc(d) => {
            RawDocumentBuf::from_document(&d).expect("a reply built in memory serialises")
        }
    }
}

/// A failed command reply's message and code (`None` when `ok` is 1).
fn failure_of(reply: &RawDocument) -> Option<(String, i32)> {
    let ok = match reply.get("ok") {
        Ok(Some(v)) => v.as_f64().or(v.as_i32().map(f64::from)).unwrap_or(0.0),
        _ => 0.0,
    };
    if ok == 1.0 {
        return None;
    }
    let message = reply
        .get_str("errmsg")
        .unwrap_or("command failed")
        .to_owned();
    let code = reply
        .get_i32("code")
        .unwrap_or(ErrorCode::OperationFailed.code());
    Some((message, code))
}

/// A reply of the documents of a cursor reply's batch (`firstBatch` or `nextBatch`).
fn batch_reply(
    ctx: &ConnectionCtx,
    request_id: i32,
    requested: i64,
    reply: &RawDocument,
    batch_field: &str,
) -> Vec<u8> {
    let batch = reply
        .get_document("cursor")
        .and_then(|c| Ok((c.get_array(batch_field)?, c.get_i64("id")?)));
    let (docs, cursor_id) = match batch {
        Ok(b) => b,
        Err(e) => {
            let msg = format!("cursor reply without {batch_field}: {e}");
            return failure_reply_parts(request_id, &msg, ErrorCode::InternalError.code());
        }
    };
    let docs: Vec<&[u8]> = docs
        .into_iter()
        .filter_map(|d| {
            d.ok()
                .and_then(|d| d.as_document())
                .map(RawDocument::as_bytes)
        })
        .collect();
    let mut state = lock(ctx);
    let starting_from = state.advance(requested, cursor_id, docs.len());
    state.prune(|id| ctx.db.cursors().namespace_of(id).is_some());
    drop(state);
    let head = ReplyHead {
        response_flags: reply_flags::AWAIT_CAPABLE,
        cursor_id,
        starting_from,
    };
    encode_op_reply_docs(next_reply_id(), request_id, head, &docs)
}

/// A command reply as an owned document (write outcomes are small).
fn reply_doc(reply: Reply) -> Document {
    match reply {
        Reply::Doc(d) => d,
        Reply::Raw(r) => Document::try_from(r.as_ref()).unwrap_or_else(|e| {
            doc! { "ok": 0.0, "errmsg": format!("reply does not decode: {e}"),
            "code": ErrorCode::InternalError.code() }
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_count_what_each_batch_returned() {
        let mut s = LegacyState::default();
        assert_eq!(s.advance(0, 7, 101), 0);
        assert_eq!(s.advance(7, 7, 50), 101);
        assert_eq!(s.advance(7, 0, 9), 151);
        assert!(s.positions.is_empty());
        assert_eq!(s.advance(0, 0, 3), 0);
        assert!(s.positions.is_empty());
    }

    #[test]
    fn namespaces_split_at_the_first_dot() {
        assert_eq!(split_namespace("db.a.b").expect("ok"), ("db", "a.b"));
        assert!(split_namespace("nodot").is_err());
        assert!(split_namespace(".c").is_err());
        assert!(split_namespace("db.").is_err());
    }

    #[test]
    fn a_failure_reply_has_the_flag_and_err() {
        let e = MongoError::new(ErrorCode::BadValue, "unknown operator: $bad");
        let bytes = failure_reply(5, &e);
        let flags = u32::from_le_bytes(bytes[16..20].try_into().expect("4"));
        assert_eq!(flags, reply_flags::QUERY_FAILURE);
        let n = i32::from_le_bytes(bytes[32..36].try_into().expect("4"));
        assert_eq!(n, 1);
        let d = Document::from_reader(&bytes[36..]).expect("doc");
        assert_eq!(
            d,
            doc! {"$err": "unknown operator: $bad", "code": 2, "ok": 0.0}
        );
    }
}

#[cfg(test)]
mod flow_tests;
