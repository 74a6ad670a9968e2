//! Multi-document transactions on sessions: runs a command that carries `lsid`,
//! `txnNumber` and `autocommit: false` as a statement of the session's transaction, and
//! serves `commitTransaction` / `abortTransaction`. Holds the session's lock for the whole
//! command; moves the session through mongod's states (start, continue, commit, abort) with
//! its error codes; aborts the transaction after any failed statement, as mongod does; and
//! labels transient errors `TransientTransactionError` so drivers retry the transaction.
//!
//! ShaleDB runs transactions on a standalone (as TokuMX did); mongod would refuse them
//! there. Retryable writes run in `retryable_writes.rs`.

use super::txn_fields::TxnFields;
use super::{error_reply, require_admin, CommandResult, Reply};
use crate::command::{to_bson, Command};
use crate::session_table::{SessionState, TxnPhase};
use crate::ConnectionCtx;
use bson::{doc, Bson, Document, RawBsonRef};
use shale_db::UserTxn;
use shale_doc::{ErrorCode, MongoError};

/// The commands a transaction may run (`create` and `createIndexes` of a new collection, as
/// mongod 4.4+: `shale-db`'s `txn_ddl.rs`). `count` is refused with mongod's own message
/// for it (drivers count with an `aggregate`, which runs).
const ALLOWED: &[&str] = &[
    "create",
    "createIndexes",
    "find",
    "getMore",
    "killCursors",
    "insert",
    "update",
    "delete",
    "findAndModify",
    "findandmodify",
    "aggregate",
    "distinct",
    "commitTransaction",
    "abortTransaction",
];

/// mongod's `isTransientTransactionError` codes: the whole transaction may be retried.
const TRANSIENT: &[ErrorCode] = &[
    ErrorCode::WriteConflict,
    ErrorCode::NoSuchTransaction,
    ErrorCode::LockTimeout,
    ErrorCode::PreparedTransactionInProgress,
    ErrorCode::SnapshotUnavailable,
    ErrorCode::SnapshotTooOld,
];

/// Runs `name` as a statement (or the commit or abort) of the session transaction `f`;
/// `run` runs the command itself with a context that carries the transaction.
pub(crate) fn run(
    ctx: &ConnectionCtx,
    db: &str,
    cmd: &Command<'_>,
    f: &TxnFields,
    run: impl FnOnce(&ConnectionCtx) -> Reply,
) -> Reply {
    match run_checked(ctx, db, cmd, f, run) {
        Ok(reply) => reply,
        Err(e) => Reply::Doc(labelled(error_reply(&e))),
    }
}

fn run_checked(
    ctx: &ConnectionCtx,
    db: &str,
    cmd: &Command<'_>,
    f: &TxnFields,
    run: impl FnOnce(&ConnectionCtx) -> Reply,
) -> Result<Reply, MongoError> {
    let name = cmd.name();
    let ends = matches!(name, "commitTransaction" | "abortTransaction");
    check_allowed(db, name, ends)?;
    if ends {
        require_admin(db, name)?;
    } else if cmd.has("writeConcern") {
        return Err(MongoError::new(
            ErrorCode::InvalidOptions,
            "writeConcern is not allowed within a multi-statement transaction",
        ));
    }
    let session = ctx.sessions.checkout(ctx.session_key(f.lsid))?;
    let mut st = session.lock();
    let Some(txn) = enter(ctx, &mut st, f, name, cmd)? else {
        // A retried commit of a committed transaction.
        return Ok(ok_reply());
    };
    match name {
        "commitTransaction" => {
            commit(ctx, &mut st, &txn, f)?;
            Ok(ok_reply())
        }
        "abortTransaction" => {
            st.abort(&ctx.db);
            Ok(ok_reply())
        }
        _ => Ok(statement(ctx, &mut st, txn, run)),
    }
}

/// Refuses a command a transaction may not run, and the databases it may not use.
pub(crate) fn check_allowed(db: &str, name: &str, ends: bool) -> Result<(), MongoError> {
    if name == "count" {
        return Err(MongoError::new(
            ErrorCode::OperationNotSupportedInTransaction,
            "Cannot run 'count' in a multi-document transaction. Please see \
             http://dochub.mongodb.org/core/transaction-count for a recommended alternative.",
        ));
    }
    if !ALLOWED.contains(&name) {
        return Err(MongoError::new(
            ErrorCode::OperationNotSupportedInTransaction,
            format!("Cannot run '{name}' in a multi-document transaction."),
        ));
    }
    let system_db = db == "local" || db == "config" || (db == "admin" && !ends);
    if system_db {
        return Err(MongoError::new(
            ErrorCode::OperationNotSupportedInTransaction,
            format!("Cannot run command against the '{db}' database in a transaction."),
        ));
    }
    Ok(())
}

/// Moves the session to the transaction `f` names and returns it, open; `None` for a
/// retried commit of a committed transaction (mongod answers it ok again).
fn enter(
    ctx: &ConnectionCtx,
    st: &mut SessionState,
    f: &TxnFields,
    name: &str,
    cmd: &Command<'_>,
) -> Result<Option<UserTxn>, MongoError> {
    let (n, active) = (f.txn_number, st.txn_number);
    if n < active {
        return Err(MongoError::new(
            ErrorCode::TransactionTooOld,
            format!(
                "Cannot start transaction with {{ txnNumber: {n} }} on session {{ id: {} }} \
                 because a newer transaction with txnNumberAndRetryCounter {{ txnNumber: \
                 {active}, txnRetryCounter: 0 }} has already started on this session.",
                f.lsid
            ),
        ));
    }
    if n > active {
        if !f.start {
            return Err(MongoError::new(
                ErrorCode::NoSuchTransaction,
                format!(
                    "Given transaction number {n} does not match any in-progress \
                     transactions. The active transaction number is {active}"
                ),
            ));
        }
        check_first_read_concern(cmd.get("readConcern").map(to_bson).as_ref())?;
        // A newer transaction number aborts the session's open transaction.
        st.abort(&ctx.db);
        st.txn_number = n;
        let uid = ctx.session_key(f.lsid).uid;
        let txn = ctx.db.begin_session_txn(f.lsid.bytes(), uid, n);
        st.phase = TxnPhase::InProgress(txn.clone());
        return Ok(Some(txn));
    }
    if f.start {
        return Err(MongoError::new(
            ErrorCode::ConflictingOperationInProgress,
            "Only servers in a sharded cluster can start a new transaction at the active \
             transaction number",
        ));
    }
    if matches!(cmd.get("readConcern"), Some(RawBsonRef::Document(r)) if !r.is_empty()) {
        return Err(MongoError::new(
            ErrorCode::InvalidOptions,
            "Only the first command in a transaction may specify a readConcern",
        ));
    }
    if let Some(txn) = st.open_txn(&ctx.db) {
        return Ok(Some(txn));
    }
    match st.phase {
        TxnPhase::Committed if name == "commitTransaction" => Ok(None),
        TxnPhase::Committed => Err(MongoError::new(
            ErrorCode::TransactionCommitted,
            format!("Transaction with {{ txnNumber: {n} }} has been committed."),
        )),
        _ => Err(aborted(n, None)),
    }
}

/// The first statement's readConcern: level local, majority or snapshot (all read the
/// newest commit on this single node), or none.
fn check_first_read_concern(read_concern: Option<&Bson>) -> Result<(), MongoError> {
    let rc = match read_concern {
        None | Some(Bson::Null) => return Ok(()),
        Some(Bson::Document(d)) => d,
        Some(_) => {
            return Err(MongoError::new(
                ErrorCode::TypeMismatch,
                "readConcern must be an object",
            ))
        }
    };
    let level_ok = match rc.get("level") {
        None => true,
        Some(Bson::String(l)) => matches!(l.as_str(), "local" | "majority" | "snapshot"),
        Some(_) => false,
    };
    if !level_ok {
        return Err(MongoError::new(
            ErrorCode::InvalidOptions,
            "The readConcern level must be either 'local' (default), 'majority' or \
             'snapshot' in order to run in a transaction",
        ));
    }
    for field in ["afterOpTime", "atClusterTime"] {
        if rc.contains_key(field) {
            return Err(MongoError::new(
                ErrorCode::InvalidOptions,
                format!("The readConcern cannot specify '{field}' in a transaction"),
            ));
        }
    }
    Ok(())
}

/// Commits; any failure leaves the transaction aborted.
fn commit(
    ctx: &ConnectionCtx,
    st: &mut SessionState,
    txn: &UserTxn,
    f: &TxnFields,
) -> Result<(), MongoError> {
    match ctx.db.commit_user_txn(txn) {
        Ok(()) => {
            st.finish(&ctx.db, TxnPhase::Committed);
            Ok(())
        }
        Err(e) => {
            st.finish(&ctx.db, TxnPhase::Aborted);
            Err(restate(e, f.txn_number))
        }
    }
}

/// Runs one statement in `txn`; aborts the transaction if it failed (an error, or write
/// errors in an ok reply).
pub(crate) fn statement(
    ctx: &ConnectionCtx,
    st: &mut SessionState,
    txn: UserTxn,
    run: impl FnOnce(&ConnectionCtx) -> Reply,
) -> Reply {
    let mut in_txn = ctx.clone();
    in_txn.txn = Some(txn.clone());
    let reply = run(&in_txn);
    let failed = match &reply {
        Reply::Doc(d) => !is_ok(d) || d.contains_key("writeErrors"),
        Reply::Raw(_) => false,
    };
    if !failed {
        st.cursors.extend(opened_cursor(&reply));
        return reply;
    }
    st.abort(&ctx.db);
    match reply {
        Reply::Doc(d) if !is_ok(&d) => Reply::Doc(labelled(d)),
        other => other,
    }
}

/// The client cursor a statement's reply leaves open (`cursor: {id, ns}` with a nonzero id).
fn opened_cursor(reply: &Reply) -> Option<(String, i64)> {
    let (id, ns) = match reply {
        Reply::Raw(r) => {
            let c = r.get_document("cursor").ok()?;
            (c.get_i64("id").ok()?, c.get_str("ns").ok()?.to_owned())
        }
        Reply::Doc(d) => {
            let c = d.get_document("cursor").ok()?;
            (c.get_i64("id").ok()?, c.get_str("ns").ok()?.to_owned())
        }
    };
    (id != 0).then_some((ns, id))
}

fn is_ok(d: &Document) -> bool {
    match d.get("ok") {
        Some(Bson::Double(x)) => *x != 0.0,
        Some(Bson::Int32(x)) => *x != 0,
        Some(Bson::Int64(x)) => *x != 0,
        Some(Bson::Boolean(b)) => *b,
        _ => false,
    }
}

/// Whether an error code says the whole transaction may be retried.
pub(crate) fn is_transient(code: i32) -> bool {
    TRANSIENT.iter().any(|t| t.code() == code)
}

/// Adds `errorLabels: ["TransientTransactionError"]` to an error reply whose code says
/// the transaction may be retried.
fn labelled(mut reply: Document) -> Document {
    let transient = reply.get_i32("code").is_ok_and(is_transient);
    if transient {
        reply.insert("errorLabels", vec![Bson::from("TransientTransactionError")]);
    }
    reply
}

/// The database's "transaction has ended" error, restated with the transaction number.
fn restate(e: MongoError, n: i64) -> MongoError {
    if e.code == ErrorCode::NoSuchTransaction {
        return aborted(n, Some(&e.message));
    }
    e
}

fn aborted(n: i64, why: Option<&str>) -> MongoError {
    let mut message = format!("Transaction with {{ txnNumber: {n} }} has been aborted.");
    if let Some(why) = why {
        message.push_str(&format!(" ({why})"));
    }
    MongoError::new(ErrorCode::NoSuchTransaction, message)
}

fn ok_reply() -> Reply {
    Reply::Doc(doc! {"ok": 1.0})
}

/// `commitTransaction` or `abortTransaction` without a transaction's fields: commits the
/// connection's TokuMX-style transaction if it has one (`connection_txn.rs`).
pub fn commit_plain(ctx: &ConnectionCtx, db: &str, _body: &Document) -> CommandResult {
    if let Some(result) = super::connection_txn::commit(ctx) {
        return result;
    }
    outside_transaction(db, "commitTransaction")
}

pub fn abort_plain(_ctx: &ConnectionCtx, db: &str, _body: &Document) -> CommandResult {
    outside_transaction(db, "abortTransaction")
}

fn outside_transaction(db: &str, name: &str) -> CommandResult {
    require_admin(db, name)?;
    Err(MongoError::new(
        ErrorCode::CommandFailed,
        format!("{name} must be run within a transaction"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transient_codes_get_the_label_and_others_do_not() {
        let conflict = labelled(error_reply(&MongoError::new(ErrorCode::WriteConflict, "x")));
        assert_eq!(
            conflict.get_array("errorLabels").expect("labels"),
            &vec![Bson::from("TransientTransactionError")]
        );
        let dup = labelled(error_reply(&MongoError::new(ErrorCode::DuplicateKey, "x")));
        assert!(!dup.contains_key("errorLabels"));
        let too_large = labelled(error_reply(&MongoError::new(
            ErrorCode::TransactionTooLargeForCache,
            "x",
        )));
        assert!(!too_large.contains_key("errorLabels"));
    }

    #[test]
    fn only_snapshot_majority_or_local_may_start_a_transaction() {
        for level in ["local", "majority", "snapshot"] {
            let body = doc! {"find": "c", "readConcern": {"level": level}};
            assert!(
                check_first_read_concern(body.get("readConcern")).is_ok(),
                "{level}"
            );
        }
        let body = doc! {"find": "c", "readConcern": {"level": "linearizable"}};
        assert_eq!(
            check_first_read_concern(body.get("readConcern"))
                .expect_err("refused")
                .code,
            ErrorCode::InvalidOptions
        );
        assert!(check_first_read_concern(None).is_ok());
    }

    #[test]
    fn only_transaction_commands_may_run_in_one() {
        assert!(check_allowed("app", "insert", false).is_ok());
        assert!(check_allowed("admin", "commitTransaction", true).is_ok());
        assert!(check_allowed("app", "create", false).is_ok());
        assert!(check_allowed("app", "createIndexes", false).is_ok());
        for (db, name) in [
            ("app", "dropIndexes"),
            ("app", "drop"),
            ("app", "listCollections"),
            ("app", "count"),
            ("local", "find"),
        ] {
            let e = check_allowed(db, name, false).expect_err("refused");
            assert_eq!(e.code.code(), 263, "{db} {name}");
        }
    }
}
