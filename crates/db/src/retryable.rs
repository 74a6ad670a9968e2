//! Retryable writes: each statement of a write that carries a session's transaction number
//! (without `autocommit`) runs exactly once. The record of what ran is mongod's
//! `config.transactions` plus the oplog entries it points to, reduced to one engine tree
//! (`RETRY_TREE`, never a collection) with, per session:
//! - the session key (the 16 bytes of `lsid.id`) → `{txnNumber, lastWriteDate}`, the
//!   session's newest retryable write;
//! - a statement key (`lsid.id` ‖ the statement id, big-endian with the sign bit flipped so
//!   keys sort by id) → `{txnNumber, result}`, what that statement of that write returned
//!   (for findAndModify the whole result, document included, which mongod rebuilds from its
//!   pre- or post-image).
//!
//! A statement and its record are written in one engine transaction, so a crash keeps both
//! or neither, and a restarted server answers a retry from the record. A newer transaction
//! number replaces the session's statement keys; an older one is TransactionTooOld (225).
//! Two runs of one statement at once (a driver retrying on another connection) both write
//! the session key, so the second meets a write conflict, starts again and finds the record.
//! A statement that fails is not recorded (its transaction is aborted), so a retry runs it
//! again, as on mongod. This file never parses commands; the server says what a statement is.

use crate::oplog::entry::{lsid_document, OpTime, SessionInfo};
use crate::user_txn::UserTxn;
use crate::{engine_error, Database, DbResult};
use bson::{doc, Document};
use shale_doc::{ErrorCode, MongoError};
use shale_engine::{Env, TreeHandle, Txn};
use std::time::Duration;

/// The engine tree that holds the records (not a collection; the catalog keeps it).
pub const RETRY_TREE: &str = "__shale_retryable_writes";

/// Conflicting runs of one statement are retried this many times before the write fails.
const MAX_ATTEMPTS: u32 = 1_000;

/// Which retryable write a statement belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryId {
    /// The session (`lsid.id`).
    pub lsid: [u8; 16],
    /// Its user's digest (`lsid.uid`), for the oplog entries.
    pub uid: [u8; 32],
    /// The transaction number.
    pub txn_number: i64,
}

/// What running a statement came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Statement<T> {
    /// It ran now (recorded if it succeeded).
    Ran(T),
    /// It had run before: the result recorded then.
    Recorded(Document),
}

/// The records' tree.
pub(crate) struct RetryTree(TreeHandle);

impl std::fmt::Debug for RetryTree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RetryTree({RETRY_TREE})")
    }
}

/// Opens the records' tree, creating it in a new directory.
pub(crate) fn open_tree(env: &Env) -> DbResult<RetryTree> {
    let tree = match env.open_tree(RETRY_TREE) {
        Ok(t) => t,
        Err(_) => env.create_tree(RETRY_TREE, None).map_err(engine_error)?,
    };
    Ok(RetryTree(tree))
}

fn statement_key(lsid: &[u8; 16], stmt_id: i32) -> Vec<u8> {
    let mut key = lsid.to_vec();
    key.extend_from_slice(&((stmt_id as u32) ^ 0x8000_0000).to_be_bytes());
    key
}

impl Database {
    /// Refuses a transaction number older than the session's newest retryable write
    /// (TransactionTooOld), before any statement of the write runs.
    pub fn check_retry_number(&self, r: &RetryId) -> DbResult<()> {
        let _guard = self.data_lock();
        let stored = self.retry_tree.0.get(&r.lsid).map_err(engine_error)?;
        match stored_number(stored.as_deref())? {
            Some(n) if n > r.txn_number => Err(too_old(r, n)),
            _ => Ok(()),
        }
    }

    /// Runs statement `stmt_id` of the retryable write `r` exactly once: if it ran before,
    /// returns its recorded result; else runs `run` in a transaction of its own and, if
    /// `record` gives the result to keep (a failed statement gives none and is rolled
    /// back), commits the statement with its record. Write conflicts start it again.
    pub fn retryable_statement<T>(
        &self,
        r: &RetryId,
        stmt_id: i32,
        mut run: impl FnMut(&UserTxn) -> DbResult<T>,
        record: impl Fn(&T) -> Option<Document>,
    ) -> DbResult<Statement<T>> {
        for attempt in 0..MAX_ATTEMPTS {
            let t = self.begin_user_txn();
            match self.attempt(&t, r, stmt_id, &mut run, &record) {
                Err(e) if retry_again(&e) => {
                    self.abort_user_txn(&t);
                    std::thread::sleep(Duration::from_micros(50 << attempt.min(10)));
                }
                other => {
                    self.abort_user_txn(&t);
                    return other;
                }
            }
        }
        Err(MongoError::new(
            ErrorCode::WriteConflict,
            "a retryable write statement kept conflicting with another run of it",
        ))
    }

    fn attempt<T>(
        &self,
        t: &UserTxn,
        r: &RetryId,
        stmt_id: i32,
        run: &mut impl FnMut(&UserTxn) -> DbResult<T>,
        record: &impl Fn(&T) -> Option<Document>,
    ) -> DbResult<Statement<T>> {
        if let Some(done) = self.claim(t, r, stmt_id)? {
            return Ok(Statement::Recorded(done));
        }
        let out = run(t)?;
        let Some(result) = record(&out) else {
            return Ok(Statement::Ran(out));
        };
        self.write_record(t, r, stmt_id, result)?;
        self.commit_user_txn(t)?;
        Ok(Statement::Ran(out))
    }

    /// Looks the statement up in `t` and takes the session key for it: the recorded result
    /// if it ran before; else `None`, the session key now naming `r` (a newer number drops
    /// the older write's statement keys).
    fn claim(&self, t: &UserTxn, r: &RetryId, stmt_id: i32) -> DbResult<Option<Document>> {
        let _guard = self.data_lock();
        let tree = &self.retry_tree.0;
        t.with_open(|st| {
            let txn = st.txn_mut();
            let stored = txn.get(tree, &r.lsid).map_err(engine_error)?;
            let mut prev = OpTime::NULL;
            match stored_number(stored.as_deref())? {
                Some(n) if n > r.txn_number => return Err(too_old(r, n)),
                Some(n) if n == r.txn_number => {
                    if let Some(done) = recorded(txn, tree, r, stmt_id)? {
                        return Ok(Some(done));
                    }
                    prev = stored_op_time(stored.as_deref());
                }
                Some(_) => drop_statements(txn, tree, &r.lsid)?,
                None => {}
            }
            let session = doc! {"txnNumber": r.txn_number, "lastWriteDate": bson::DateTime::now()};
            txn.put(tree, &r.lsid, &to_bytes(&session))
                .map_err(engine_error)?;
            st.log_as_statement(
                r.lsid,
                SessionInfo {
                    lsid: lsid_document(r.lsid, r.uid),
                    txn_number: r.txn_number,
                    stmt_id: Some(stmt_id),
                    prev,
                },
            );
            Ok(None)
        })
    }

    fn write_record(
        &self,
        t: &UserTxn,
        r: &RetryId,
        stmt_id: i32,
        result: Document,
    ) -> DbResult<()> {
        let _guard = self.data_lock();
        let value = to_bytes(&doc! {"txnNumber": r.txn_number, "result": result});
        t.with_open(|st| {
            st.txn_mut()
                .put(&self.retry_tree.0, &statement_key(&r.lsid, stmt_id), &value)
                .map_err(engine_error)
        })
    }
}

impl Database {
    /// Records `last` as session `lsid`'s newest entry (the next statement's `prevOpTime`),
    /// in the statement's own transaction, after its entries are written.
    pub(crate) fn record_last_op(
        &self,
        txn: &mut Txn,
        lsid: &[u8; 16],
        txn_number: i64,
        last: OpTime,
    ) -> DbResult<()> {
        let session = doc! {
            "txnNumber": txn_number,
            "lastWriteDate": bson::DateTime::now(),
            "lastOpTime": last.document(),
        };
        txn.put(&self.retry_tree.0, lsid, &to_bytes(&session))
            .map_err(engine_error)
    }
}

/// The recorded result of `stmt_id` of `r`, if it ran.
fn recorded(txn: &Txn, tree: &TreeHandle, r: &RetryId, stmt_id: i32) -> DbResult<Option<Document>> {
    let Some(bytes) = txn
        .get(tree, &statement_key(&r.lsid, stmt_id))
        .map_err(engine_error)?
    else {
        return Ok(None);
    };
    let d = decode(&bytes)?;
    if d.get_i64("txnNumber") != Ok(r.txn_number) {
        return Ok(None);
    }
    d.get_document("result")
        .cloned()
        .map(Some)
        .map_err(|_| corrupt("a statement record has no result"))
}

/// Deletes every statement key of session `lsid`.
fn drop_statements(txn: &mut Txn, tree: &TreeHandle, lsid: &[u8; 16]) -> DbResult<()> {
    let mut keys = Vec::new();
    let mut cursor = txn.cursor(tree);
    cursor.seek(lsid).map_err(engine_error)?;
    while let Some((k, _)) = cursor.entry() {
        if !k.starts_with(lsid) {
            break;
        }
        if k.len() > lsid.len() {
            keys.push(k.to_vec());
        }
        cursor.next().map_err(engine_error)?;
    }
    drop(cursor);
    for k in keys {
        txn.delete(tree, &k).map_err(engine_error)?;
    }
    Ok(())
}

/// The optime of the session's newest entry, kept in its record (`prevOpTime` of its next).
fn stored_op_time(bytes: Option<&[u8]>) -> OpTime {
    let d = bytes.and_then(|b| decode(b).ok());
    let op = d.as_ref().and_then(|d| d.get_document("lastOpTime").ok());
    match op.and_then(|o| Some((o.get_timestamp("ts").ok()?, o.get_i64("t").ok()?))) {
        Some((ts, term)) => OpTime { ts, term },
        None => OpTime::NULL,
    }
}

fn stored_number(bytes: Option<&[u8]>) -> DbResult<Option<i64>> {
    let Some(bytes) = bytes else {
        return Ok(None);
    };
    decode(bytes)?
        .get_i64("txnNumber")
        .map(Some)
        .map_err(|_| corrupt("a session record has no txnNumber"))
}

/// Conflicts with another run, and transactions the server killed under the statement
/// (DDL, the lifetime limit): the statement starts again.
fn retry_again(e: &MongoError) -> bool {
    matches!(
        e.code,
        ErrorCode::WriteConflict | ErrorCode::NoSuchTransaction
    )
}

fn too_old(r: &RetryId, newest: i64) -> MongoError {
    MongoError::new(
        ErrorCode::TransactionTooOld,
        format!(
            "Retryable write with txnNumber {} is prohibited on session {} because a newer \
             retryable write with txnNumber {newest} has already started on this session.",
            r.txn_number,
            bson::Uuid::from_bytes(r.lsid)
        ),
    )
}

#[allow(
    clippy::expect_used,
    reason = "serialising a document built in memory into a Vec cannot fail"
)]
fn to_bytes(d: &Document) -> Vec<u8> {
    bson::to_vec(d).expect("serialising an in-memory document cannot fail")
}

fn decode(bytes: &[u8]) -> DbResult<Document> {
    bson::from_slice(bytes)
        .map_err(|e| corrupt(&format!("a retryable write record does not decode: {e}")))
}

fn corrupt(message: &str) -> MongoError {
    MongoError::new(
        ErrorCode::DataCorruptionDetected,
        format!("{RETRY_TREE}: {message}"),
    )
}
