//! TokuMX's connection-scoped transactions: `beginTransaction` (isolation `mvcc`, the
//! default; `serializable` and `readUncommitted` are refused), `commitTransaction` and
//! `rollbackTransaction` without session fields. While one is open, the connection's data
//! commands without an `lsid` run in it through the session transaction runner's statement
//! path (the same allowed commands, an abort after a failed statement); other commands
//! (`hello`, `ping`, ...) run outside it, and a command with an `lsid` runs in its own
//! session. Closing the connection aborts the transaction.
//!
//! Partial: a failed statement aborts the whole transaction (the engine has no savepoints
//! to undo one statement); its later statements then answer `NoSuchTransaction` until the
//! client sends `rollbackTransaction`. Error codes are mongod's (TokuMX's are not kept).

use super::transactions::{check_allowed, statement};
use super::{CommandResult, Reply};
use crate::session_table::{SessionState, TxnPhase};
use crate::ConnectionCtx;
use bson::{Bson, Document};
use shale_doc::{ErrorCode, MongoError};
use std::sync::MutexGuard;

/// The commands that manage a connection transaction (never run inside one).
const CONTROL: &[&str] = &[
    "beginTransaction",
    "commitTransaction",
    "rollbackTransaction",
    "abortTransaction",
];

fn state(ctx: &ConnectionCtx) -> MutexGuard<'_, SessionState> {
    ctx.conn_txn.lock().unwrap_or_else(|p| p.into_inner())
}

/// `beginTransaction: 1, isolation: "mvcc"`.
pub fn begin_transaction(ctx: &ConnectionCtx, _db: &str, body: &Document) -> CommandResult {
    check_isolation(body.get("isolation"))?;
    let mut st = state(ctx);
    if !matches!(st.phase, TxnPhase::None) {
        return Err(MongoError::new(
            ErrorCode::ConflictingOperationInProgress,
            "a transaction is already in progress on this connection; commit or roll it back \
             first",
        ));
    }
    st.phase = TxnPhase::InProgress(ctx.db.begin_user_txn());
    Ok(Document::new())
}

/// `rollbackTransaction`: aborts the connection's transaction.
pub fn rollback_transaction(ctx: &ConnectionCtx, _db: &str, _body: &Document) -> CommandResult {
    let mut st = state(ctx);
    if matches!(st.phase, TxnPhase::None) {
        return Err(MongoError::new(
            ErrorCode::CommandFailed,
            "rollbackTransaction must be run within a transaction",
        ));
    }
    st.abort(&ctx.db);
    st.finish(&ctx.db, TxnPhase::None);
    Ok(Document::new())
}

/// `commitTransaction` without session fields: commits the connection's transaction, or
/// `None` when it has none.
pub(crate) fn commit(ctx: &ConnectionCtx) -> Option<CommandResult> {
    let mut st = state(ctx);
    let txn = match &st.phase {
        // A connection's state never holds a retryable write's number.
        TxnPhase::None | TxnPhase::RetryableWrite => return None,
        TxnPhase::InProgress(t) => t.clone(),
        TxnPhase::Committed | TxnPhase::Aborted => {
            st.finish(&ctx.db, TxnPhase::None);
            return Some(Err(aborted()));
        }
    };
    let result = ctx.db.commit_user_txn(&txn);
    st.finish(&ctx.db, TxnPhase::None);
    Some(result.map(|()| Document::new()))
}

/// Runs `name` in the connection's transaction if one is open and `name` is a data
/// command; `None` to run it as it is.
pub(crate) fn run(
    ctx: &ConnectionCtx,
    db: &str,
    name: &str,
    is_data_command: bool,
    run: impl FnOnce(&ConnectionCtx) -> Reply,
) -> Option<Reply> {
    if !is_data_command || CONTROL.contains(&name) {
        return None;
    }
    let mut st = state(ctx);
    if matches!(st.phase, TxnPhase::None) {
        return None;
    }
    let refused = |e: MongoError| Some(Reply::Doc(super::error_reply(&e)));
    if let Err(e) = check_allowed(db, name, false) {
        return refused(e);
    }
    match st.open_txn(&ctx.db) {
        Some(txn) => Some(statement(ctx, &mut st, txn, run)),
        // Killed (lifetime limit, DDL) or aborted by a failed statement: refused until
        // the client rolls back, so nothing runs outside the transaction it believes open.
        None => refused(aborted()),
    }
}

/// Aborts the connection's transaction when the connection closes.
pub fn end_connection(ctx: &ConnectionCtx) {
    let mut st = state(ctx);
    st.abort(&ctx.db);
    st.finish(&ctx.db, TxnPhase::None);
}

fn aborted() -> MongoError {
    MongoError::new(
        ErrorCode::NoSuchTransaction,
        "the connection's transaction has been aborted (a statement failed, or the server \
         ended it); run rollbackTransaction",
    )
}

/// `isolation`: `mvcc` (snapshot isolation, the default) is all the engine gives.
fn check_isolation(isolation: Option<&Bson>) -> Result<(), MongoError> {
    match isolation {
        None => Ok(()),
        Some(Bson::String(s)) if s == "mvcc" => Ok(()),
        Some(Bson::String(s)) if s == "serializable" || s == "readUncommitted" => {
            Err(MongoError::new(
                ErrorCode::BadValue,
                format!(
                    "isolation level '{s}' is not supported: transactions here read one \
                     snapshot (use 'mvcc')"
                ),
            ))
        }
        Some(Bson::String(s)) => Err(MongoError::new(
            ErrorCode::BadValue,
            format!(
                "invalid isolation level '{s}': expected 'mvcc', 'serializable' or \
                 'readUncommitted'"
            ),
        )),
        Some(other) => Err(super::data::wrong_type(
            "beginTransaction.isolation",
            other,
            "string",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;
    use std::sync::Arc;

    fn ctx() -> (tempfile::TempDir, ConnectionCtx) {
        let dir = tempfile::tempdir().expect("tempdir");
        let db =
            shale_db::Database::open(dir.path(), shale_db::DbOptions::default()).expect("open");
        (dir, ConnectionCtx::detached(Arc::new(db)))
    }

    #[test]
    fn only_mvcc_isolation_is_accepted() {
        assert!(check_isolation(None).is_ok());
        assert!(check_isolation(Some(&Bson::from("mvcc"))).is_ok());
        for level in ["serializable", "readUncommitted", "other"] {
            let e = check_isolation(Some(&Bson::from(level))).expect_err(level);
            assert_eq!(e.code, ErrorCode::BadValue, "{level}");
        }
        assert_eq!(
            check_isolation(Some(&Bson::Int32(1)))
                .expect_err("type")
                .code,
            ErrorCode::TypeMismatch
        );
    }

    #[test]
    fn begin_commit_and_rollback_move_the_connection_state() {
        let (_dir, ctx) = ctx();
        assert!(commit(&ctx).is_none());
        assert!(rollback_transaction(&ctx, "app", &doc! {}).is_err());
        begin_transaction(&ctx, "app", &doc! {"beginTransaction": 1}).expect("begin");
        let again = begin_transaction(&ctx, "app", &doc! {}).expect_err("nested");
        assert_eq!(again.code, ErrorCode::ConflictingOperationInProgress);
        assert!(matches!(commit(&ctx), Some(Ok(_))));
        assert!(commit(&ctx).is_none());
        begin_transaction(&ctx, "app", &doc! {}).expect("begin");
        let txn = match &state(&ctx).phase {
            TxnPhase::InProgress(t) => t.clone(),
            other => panic!("not open: {other:?}"),
        };
        end_connection(&ctx);
        assert_eq!(txn.ended(), Some(shale_db::TxnEnd::Aborted));
        assert!(matches!(state(&ctx).phase, TxnPhase::None));
    }
}
