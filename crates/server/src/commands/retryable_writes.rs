//! Retryable writes: runs an `insert`, `update`, `delete` or `findAndModify` that carries
//! `lsid` and `txnNumber` without `autocommit` so that each of its statements happens once
//! however often the driver sends it. Holds the session's lock for the whole command (one
//! command of a session at a time, as mongod's session checkout), checks the number
//! against the session's (TransactionTooOld 225 for an older one; 217 when the number is a
//! transaction's), and gives the write handlers (`crud.rs`) a `Retrying` through which each
//! statement runs in the database's `retryable_statement` (the record of what ran is the
//! database's, `crates/db/src/retryable.rs`). A retried statement's result comes from that
//! record; the reply lists them in `retriedStmtIds`. Errors drivers may retry get the
//! `RetryableWriteError` label.
//!
//! mongod answers retryable writes only on replica sets and mongos, and drivers send them
//! only there; this standalone serves them to any client that sends them.

use super::txn_fields::RetryFields;
use super::{error_reply, Reply};
use crate::session_table::TxnPhase;
use crate::ConnectionCtx;
use bson::{doc, Bson, Document, RawDocumentBuf};
use shale_db::{FindAndModifyResult, RetryId, Statement, UserTxn, WriteResult};
use shale_doc::{ErrorCode, MongoError};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

/// The commands that may be retryable writes.
const RETRYABLE: &[&str] = &[
    "insert",
    "update",
    "delete",
    "findAndModify",
    "findandmodify",
];

/// One retryable write command in progress: its id, statement numbering and the statements
/// answered from the record.
#[derive(Debug)]
pub struct Retrying {
    /// The session and transaction number.
    pub id: RetryId,
    fields: RetryFields,
    retried: Mutex<Vec<i32>>,
}

impl Retrying {
    fn retried(&self, stmt_id: i32) {
        self.retried
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(stmt_id);
    }
}

/// Runs `name` as the retryable write `f`; `run` runs the command with a context that
/// carries it.
pub(crate) fn run(
    ctx: &ConnectionCtx,
    name: &str,
    f: &RetryFields,
    run: impl FnOnce(&ConnectionCtx) -> Reply,
) -> Reply {
    match run_checked(ctx, name, f, run) {
        Ok(reply) => labelled(reply),
        Err(e) => labelled(Reply::Doc(error_reply(&e))),
    }
}

fn run_checked(
    ctx: &ConnectionCtx,
    name: &str,
    f: &RetryFields,
    run: impl FnOnce(&ConnectionCtx) -> Reply,
) -> Result<Reply, MongoError> {
    if !RETRYABLE.contains(&name) {
        return Err(MongoError::new(
            ErrorCode::Location50768,
            format!(
                "txnNumber may only be provided for multi-document transactions and retryable \
                 write commands. autocommit:false was not provided, and {name} is not a \
                 retryable write command."
            ),
        ));
    }
    let key = ctx.session_key(f.lsid);
    let session = ctx.sessions.checkout(key)?;
    let mut st = session.lock();
    let id = RetryId {
        lsid: f.lsid.bytes(),
        uid: key.uid,
        txn_number: f.txn_number,
    };
    if f.txn_number < st.txn_number {
        return Err(too_old(f, st.txn_number));
    }
    if f.txn_number == st.txn_number && !matches!(st.phase, TxnPhase::RetryableWrite) {
        return Err(MongoError::new(
            ErrorCode::IncompleteTransactionHistory,
            "Cannot retry a retryable write that has been converted into a transaction",
        ));
    }
    ctx.db.check_retry_number(&id)?;
    if f.txn_number > st.txn_number {
        // A newer number ends the session's transaction, as on mongod.
        st.abort(&ctx.db);
        st.txn_number = f.txn_number;
        st.phase = TxnPhase::RetryableWrite;
    }
    let retrying = Arc::new(Retrying {
        id,
        fields: f.clone(),
        retried: Mutex::default(),
    });
    let mut in_write = ctx.clone();
    in_write.retry = Some(retrying.clone());
    let reply = run(&in_write);
    let retried = std::mem::take(&mut *retrying.retried.lock().unwrap_or_else(|p| p.into_inner()));
    Ok(with_retried(reply, retried))
}

fn too_old(f: &RetryFields, active: i64) -> MongoError {
    MongoError::new(
        ErrorCode::TransactionTooOld,
        format!(
            "Retryable write with txnNumber {} is prohibited on session {} because a newer \
             transaction with txnNumber {active} has already started on this session.",
            f.txn_number, f.lsid
        ),
    )
}

/// Adds `retriedStmtIds` to an ok reply when some statements came from the record.
fn with_retried(reply: Reply, retried: Vec<i32>) -> Reply {
    match reply {
        Reply::Doc(mut d) if !retried.is_empty() => {
            d.insert("retriedStmtIds", retried);
            Reply::Doc(d)
        }
        other => other,
    }
}

/// Adds `errorLabels: ["RetryableWriteError"]` to an error reply, or a reply with a
/// `writeConcernError`, whose code drivers may retry.
fn labelled(reply: Reply) -> Reply {
    let Reply::Doc(mut d) = reply else {
        return reply;
    };
    let code = d.get_i32("code").ok().or_else(|| {
        d.get_document("writeConcernError")
            .ok()
            .and_then(|w| w.get_i32("code").ok())
    });
    if code.is_some_and(is_retriable) && !d.contains_key("errorLabels") {
        d.insert("errorLabels", vec![Bson::from("RetryableWriteError")]);
    }
    Reply::Doc(d)
}

/// Whether drivers may retry a write that failed with `code`.
pub(crate) fn is_retriable(code: i32) -> bool {
    ErrorCode::from_code(code).is_some_and(ErrorCode::is_retriable)
}

/// Runs `stmts` (at request positions `index(j)`) one statement at a time through the
/// record; `refuse` gives a statement's error when it may not be a retryable write.
/// Returns what `Database::insert`/`update`/`delete` return: a result indexed like `stmts`.
pub(crate) fn each<S>(
    ctx: &ConnectionCtx,
    r: &Retrying,
    stmts: &[S],
    index: impl Fn(usize) -> usize,
    ordered: bool,
    refuse: impl Fn(&S) -> Option<MongoError>,
    run: impl Fn(&UserTxn, &S) -> Result<WriteResult, MongoError>,
) -> Result<WriteResult, MongoError> {
    let mut total = WriteResult::default();
    for (j, s) in stmts.iter().enumerate() {
        let stmt_id = r.fields.stmt_id(index(j));
        let outcome = match refuse(s) {
            Some(e) => Err(e),
            None => ctx.db.retryable_statement(
                &r.id,
                stmt_id,
                |t| run(t, s).and_then(|w| before_commit(ctx).map(|()| w)),
                summary,
            ),
        };
        let failed = match outcome {
            Ok(Statement::Ran(w)) => add(&mut total, w, j),
            Ok(Statement::Recorded(d)) => {
                r.retried(stmt_id);
                add(&mut total, from_summary(&d), j)
            }
            Err(e) if e.code == ErrorCode::TransactionTooOld => return Err(e),
            Err(e) => {
                total.errors.push((j, e));
                true
            }
        };
        if failed && ordered {
            break;
        }
    }
    Ok(total)
}

/// Adds one statement's result (at position `j`); true if it failed.
fn add(total: &mut WriteResult, w: WriteResult, j: usize) -> bool {
    total.n += w.n;
    total.n_modified += w.n_modified;
    total
        .upserted
        .extend(w.upserted.into_iter().map(|(_, id)| (j, id)));
    let failed = !w.errors.is_empty();
    total
        .errors
        .extend(w.errors.into_iter().map(|(_, e)| (j, e)));
    failed
}

/// What to record of a statement that succeeded.
fn summary(w: &WriteResult) -> Option<Document> {
    if !w.errors.is_empty() {
        return None;
    }
    let mut d = doc! {"n": w.n, "nModified": w.n_modified};
    if let Some((_, id)) = w.upserted.first() {
        d.insert("upserted", id.clone());
    }
    Some(d)
}

fn from_summary(d: &Document) -> WriteResult {
    WriteResult {
        n: d.get_i64("n").unwrap_or(0),
        n_modified: d.get_i64("nModified").unwrap_or(0),
        upserted: d
            .get("upserted")
            .map(|id| (0, id.clone()))
            .into_iter()
            .collect(),
        errors: Vec::new(),
    }
}

/// Runs a findAndModify (statement 0 of its command) through the record.
pub(crate) fn find_and_modify(
    ctx: &ConnectionCtx,
    r: &Retrying,
    run: impl Fn(&UserTxn) -> Result<FindAndModifyResult, MongoError>,
) -> Result<FindAndModifyResult, MongoError> {
    let stmt_id = r.fields.stmt_id(0);
    let run = |t: &UserTxn| run(t).and_then(|f| before_commit(ctx).map(|()| f));
    match ctx
        .db
        .retryable_statement(&r.id, stmt_id, run, |f| Some(image(f)))?
    {
        Statement::Ran(f) => Ok(f),
        Statement::Recorded(d) => {
            r.retried(stmt_id);
            from_image(&d)
        }
    }
}

/// The test fail point `onPrimaryTransactionalWrite` (with test commands on), where mongod
/// checks it: a statement has run and not yet committed. It closes the connection (the
/// reply is never sent) unless its data says `closeConnection: false`, and with
/// `failBeforeCommitExceptionCode` fails the statement with that code, so its transaction
/// rolls back and nothing of it is kept or recorded.
fn before_commit(ctx: &ConnectionCtx) -> Result<(), MongoError> {
    if !ctx.server.enable_test_commands {
        return Ok(());
    }
    let Some(data) = ctx.server.fail_points.fire_on_primary_write() else {
        return Ok(());
    };
    if data.get_bool("closeConnection").unwrap_or(true) {
        ctx.close_requested.store(true, Ordering::Relaxed);
    }
    // A code this server has no name for fails as InternalError (1).
    match crate::fail_point::integer(&data, "failBeforeCommitExceptionCode") {
        Some(code) => Err(MongoError::new(
            i32::try_from(code)
                .ok()
                .and_then(ErrorCode::from_code)
                .unwrap_or(ErrorCode::InternalError),
            "Failing write for test due to failpoint",
        )),
        None => Ok(()),
    }
}

/// A findAndModify's whole result, the document it returned included.
fn image(f: &FindAndModifyResult) -> Document {
    let mut d = doc! {"n": f.n, "updatedExisting": f.updated_existing};
    if let Some(v) = &f.value {
        d.insert("value", Bson::Document(v.to_document().unwrap_or_default()));
    }
    if let Some(id) = &f.upserted {
        d.insert("upserted", id.clone());
    }
    d
}

fn from_image(d: &Document) -> Result<FindAndModifyResult, MongoError> {
    let value = match d.get_document("value") {
        Ok(v) => Some(RawDocumentBuf::from_document(v).map_err(|e| {
            MongoError::new(ErrorCode::InternalError, format!("recorded document: {e}"))
        })?),
        Err(_) => None,
    };
    Ok(FindAndModifyResult {
        value,
        n: d.get_i64("n").unwrap_or(0),
        updated_existing: d.get_bool("updatedExisting").unwrap_or(false),
        upserted: d.get("upserted").cloned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retriable_codes_get_the_label_and_others_do_not() {
        let e = |code| Reply::Doc(error_reply(&MongoError::new(code, "x")));
        let Reply::Doc(d) = labelled(e(ErrorCode::NotWritablePrimary)) else {
            panic!("doc");
        };
        assert_eq!(d.get_array("errorLabels").map(Vec::len), Ok(1));
        let Reply::Doc(d) = labelled(e(ErrorCode::DuplicateKey)) else {
            panic!("doc");
        };
        assert!(!d.contains_key("errorLabels"));
        let wce = Reply::Doc(doc! {"ok": 1.0, "writeConcernError": {"code": 91}});
        let Reply::Doc(d) = labelled(wce) else {
            panic!("doc");
        };
        assert!(d.contains_key("errorLabels"));
    }

    #[test]
    fn summaries_round_trip() {
        let w = WriteResult {
            n: 1,
            n_modified: 0,
            upserted: vec![(0, Bson::Int32(7))],
            errors: Vec::new(),
        };
        let back = from_summary(&summary(&w).expect("ok statement"));
        assert_eq!((back.n, back.upserted.len()), (1, 1));
    }
}
