//! Command dispatch: finds the handler for a command's first key and turns its result into a
//! reply document (`ok: 1` or `ok: 0` with `errmsg`, `code`, `codeName`). Dispatch reads the
//! raw body (`crate::command`); hot handlers do too, the rest get the body decoded once.
//! One file per command family; handlers never see the wire format.

mod aggregate;
mod api_version;
mod change_stream;
mod coll_mod;
mod coll_stats_stage;
mod collection_uuid;
mod compact;
mod connection_info;
pub mod connection_txn;
mod crud;
mod current_op;
mod cursor_reply;
mod data;
mod data_size;
mod ddl;
mod diagnostics;
mod express;
mod fail_command;
pub mod fsync;
mod get_last_error;
mod get_log;
mod hello;
mod host_info;
mod indexes;
mod known_fields;
mod list_commands;
mod list_local_sessions;
mod listings;
mod parameters;
mod pipeline_as_sent;
pub mod profile;
mod qe;
mod query;
pub(crate) mod raw_args;
mod repl_set;
pub mod retryable_writes;
mod roles;
mod roles_info;
mod sasl;
pub mod server_status;
mod sessions;
mod snapshot_read;
mod statement_idl;
mod storage_stats;
mod table;
mod timeseries;
mod transactions;
mod txn_fields;
mod users;
mod users_info;
mod write_concern;

pub use diagnostics::COMPATIBLE_VERSION;

use crate::command::Command;
use crate::ConnectionCtx;
use bson::{doc, Document, RawDocumentBuf};
use shale_doc::{ErrorCode, MongoError};
use txn_fields::Kind;

/// A command's outcome: the reply fields without `ok`, or an error.
pub type CommandResult = Result<Document, MongoError>;

pub(crate) type Handler = fn(&ConnectionCtx, &str, &Document) -> CommandResult;

/// A command's outcome built as raw BSON (cursor replies: documents are never decoded).
pub type RawResult = Result<RawDocumentBuf, MongoError>;

/// A handler that reads the command's raw body and builds a raw reply.
pub(crate) type RawHandler = fn(&ConnectionCtx, &str, &Command<'_>) -> RawResult;

/// A handler that reads the command's raw body and builds an owned reply.
pub(crate) type RawBodyHandler = fn(&ConnectionCtx, &str, &Command<'_>) -> CommandResult;

/// A reply body, owned or already serialised.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// An owned document, serialised when sent.
    Doc(Document),
    /// Bytes already serialised.
    Raw(RawDocumentBuf),
}

impl Reply {
    /// The body's BSON bytes (a raw reply's own buffer, not a copy).
    #[allow(
        clippy::expect_used,
        reason = "serialising a document built in memory into a Vec cannot fail"
    )]
    pub fn into_bytes(self) -> Vec<u8> {
        match self {
            Reply::Doc(d) => {
                bson::to_vec(&d).expect("serialising an in-memory document cannot fail")
            }
            Reply::Raw(r) => r.into_bytes(),
        }
    }
}

impl From<Document> for Reply {
    fn from(d: Document) -> Reply {
        Reply::Doc(d)
    }
}

/// Runs a command built in memory (the legacy opcodes, OP_QUERY commands, tests) against
/// database `db` and returns the reply.
pub fn dispatch(ctx: &ConnectionCtx, db: &str, body: &Document) -> Reply {
    match crate::command::raw_of(body) {
        Ok(raw) => {
            let cmd = Command::new(&raw, Vec::new()).with_owned(body.clone());
            dispatch_command(ctx, db, &cmd, None)
        }
        Err(e) => Reply::Doc(error_reply(&e)),
    }
}

/// Runs a command as the wire delivered it; `raw_documents` are an insert's documents
/// taken from its OP_MSG document sequence, stored as they came.
pub fn dispatch_command(
    ctx: &ConnectionCtx,
    db: &str,
    cmd: &Command<'_>,
    raw_documents: Option<Vec<RawDocumentBuf>>,
) -> Reply {
    // Queryable Encryption: an equality query's find payloads become `__safeContent__`
    // tags before the command runs (`qe.rs`), as mongod rewrites them.
    if let Some(rewritten) = qe::rewrite_reads(ctx, db, cmd) {
        let raw = rewritten.and_then(|doc| Ok((crate::command::raw_of(&doc)?, doc)));
        return match raw {
            Ok((raw, doc)) => {
                let cmd = Command::new(&raw, Vec::new()).with_owned(doc);
                dispatch_command(ctx, db, &cmd, raw_documents)
            }
            Err(e) => Reply::Doc(error_reply(&e)),
        };
    }
    let raw_count = raw_documents.as_ref().map(Vec::len);
    let on_collection = collection_of(cmd);
    let active = on_collection.map(|_| crate::top::Active::start(cmd.name()));
    // In the registry of operations in flight, killable, until the reply is built.
    let op = ctx.op.begin(&ctx.server.ops, db, cmd);
    // mongod keeps `bypassDocumentValidation` on the operation; here it lives on the thread
    // that runs the command, for as long as the command runs.
    let bypass = matches!(
        cmd.get("bypassDocumentValidation"),
        Some(bson::RawBsonRef::Boolean(true))
    );
    let _bypass = shale_db::bypass_document_validation(bypass);
    if let Some(bson::RawBsonRef::Boolean(allowed)) = cmd.get("allowDiskUse") {
        op.set_allow_disk_use(allowed);
    }
    let reply = match max_time(cmd) {
        Ok(limit) => {
            if let Some(limit) = limit {
                op.set_max_time(limit);
            }
            dispatch_checked(ctx, db, cmd, raw_documents)
        }
        Err(e) => Reply::Doc(error_reply(&e)),
    };
    let elapsed = op.elapsed();
    let work = op.work();
    drop(op);
    if let Some(coll) = on_collection {
        crate::top::record(db, coll, cmd.name(), elapsed);
    }
    drop(active);
    profile::record(ctx, db, cmd, &reply, elapsed, work);
    crate::op_counters::record(cmd, raw_count, &reply);
    reply
}

/// A command's `maxTimeMS` as a limit on its run (checked where `killOp` is: once per document
/// its scans reach); none when absent or 0. A `getMore` takes it as how long an awaitData
/// cursor waits instead (`commands/query.rs`). mongod's checks: a number, integral,
/// non-negative, at most `i32::MAX`, else `BadValue`.
fn max_time(cmd: &Command<'_>) -> Result<Option<std::time::Duration>, MongoError> {
    if cmd.name() == "getMore" {
        return Ok(None);
    }
    let ms = match cmd.get("maxTimeMS") {
        None => return Ok(None),
        Some(bson::RawBsonRef::Int32(n)) => f64::from(n),
        Some(bson::RawBsonRef::Int64(n)) => n as f64,
        Some(bson::RawBsonRef::Double(n)) => n,
        Some(_) => {
            return Err(MongoError::new(
                ErrorCode::BadValue,
                "maxTimeMS must be a number",
            ))
        }
    };
    if ms.fract() != 0.0 || !ms.is_finite() {
        return Err(MongoError::new(
            ErrorCode::BadValue,
            "maxTimeMS has a fractional component",
        ));
    }
    if !(0.0..=f64::from(i32::MAX)).contains(&ms) {
        return Err(MongoError::new(
            ErrorCode::BadValue,
            format!("{ms} value for maxTimeMS is out of range [0, 2147483647]"),
        ));
    }
    Ok((ms > 0.0).then(|| std::time::Duration::from_millis(ms as u64)))
}

/// The collection a command works on, for `top`: its first field's string value (the
/// `collection` field of a `getMore`).
fn collection_of<'a>(cmd: &Command<'a>) -> Option<&'a str> {
    let value = match cmd.name() {
        "getMore" => cmd.get("collection"),
        _ => cmd.raw().iter().next().and_then(Result::ok).map(|(_, v)| v),
    };
    match value {
        Some(bson::RawBsonRef::String(c)) if !c.is_empty() => Some(c),
        _ => None,
    }
}

/// Commands mongod 7.0 parses with its IDL parsers, which refuse a field given twice.
/// Others read a repeated field's first value (`Command::get`, `Command::doc`), as mongod's
/// hand-written parsers do.
const IDL_PARSED: &[&str] = &[
    "find",
    "insert",
    "update",
    "delete",
    "findAndModify",
    "aggregate",
    "count",
    "distinct",
    "getMore",
    "killCursors",
    "explain",
    "create",
    "createIndexes",
    "drop",
    "dropIndexes",
    "dropDatabase",
    "listCollections",
    "listIndexes",
    "collMod",
    "renameCollection",
    "endSessions",
    "commitTransaction",
    "abortTransaction",
];

/// A field given twice in a command mongod parses with IDL: `Location40413` "BSON field
/// 'insert.ordered' is a duplicate field" (the command's own name again is not one of its
/// fields: `Location40415`, unknown), parsed before access control as mongod parses.
fn refuse_duplicate_field(cmd: &Command<'_>) -> Result<(), MongoError> {
    let name = cmd.name();
    if !IDL_PARSED.contains(&name) {
        return Ok(());
    }
    match cmd.duplicate_field() {
        None => Ok(()),
        Some(f) if f == name => Err(MongoError::new(
            ErrorCode::Location40415,
            format!("BSON field '{name}.{f}' is an unknown field."),
        )),
        Some(f) => Err(duplicate_field(name, f)),
    }
}

/// mongod's IDL error for field `field` given twice where `context` (`insert`,
/// `update.updates`) is parsed: `Location40413` "BSON field 'insert.ordered' is a duplicate
/// field".
pub(crate) fn duplicate_field(context: &str, field: &str) -> MongoError {
    MongoError::new(
        ErrorCode::Location40413,
        format!("BSON field '{context}.{field}' is a duplicate field"),
    )
}

/// Checks access and session fields, then runs the command: as it is, as a statement of
/// its session's transaction, or as a retryable write (a transaction number without
/// `autocommit`).
fn dispatch_checked(
    ctx: &ConnectionCtx,
    db: &str,
    cmd: &Command<'_>,
    raw_documents: Option<Vec<RawDocumentBuf>>,
) -> Reply {
    let name = cmd.name();
    if name.is_empty() {
        return Reply::Doc(error_reply(&MongoError::new(
            ErrorCode::FailedToParse,
            "empty command document",
        )));
    }
    if let Err(e) = refuse_duplicate_field(cmd)
        .and_then(|()| known_fields::refuse_unknown_field(cmd))
        .and_then(|()| api_version::check(cmd))
    {
        return Reply::Doc(error_reply(&e));
    }
    // Access control first, as mongod: an unauthenticated client learns nothing more.
    if is_known(ctx, name) {
        if let Err(e) = crate::auth::gate::check(ctx, name, db, cmd) {
            return Reply::Doc(error_reply(&e));
        }
        // A replica-set member answers what one member cannot satisfy with a
        // writeConcernError after the write instead (`repl/concern.rs`).
        if !ctx.server.repl.is_replica_set() && cmd.get("writeConcern").is_some() {
            if let Err(e) = write_concern::check(cmd.raw()) {
                return Reply::Doc(error_reply(&e));
            }
        }
        if let Err(e) = collection_uuid::check(ctx, db, cmd) {
            return Reply::Doc(error_reply(&e));
        }
    }
    let (kind, lsid) = match txn_fields::classify_with_lsid(cmd) {
        Ok(ok) => ok,
        Err(e) => return Reply::Doc(error_reply(&e)),
    };
    let in_session;
    let ctx = match lsid {
        Some(id) => {
            let key = ctx.session_key(id);
            if let Err(e) = ctx.sessions.touch(key) {
                return Reply::Doc(error_reply(&e));
            }
            in_session = ConnectionCtx {
                lsid: Some(key),
                ..ctx.clone()
            };
            &in_session
        }
        None => ctx,
    };
    if is_known(ctx, name) {
        let labels = |code| error_labels(&kind, name, code);
        if let Some(reply) = fail_command::before(ctx, name, &labels) {
            return reply;
        }
    }
    let repl = &ctx.server.repl;
    let checked = repl
        .receive_cluster_time(cmd.raw())
        .and_then(|()| repl.check_command(db, name, cmd.raw()));
    // `fsync` with `lock: true` holds writes here until it is unlocked; the guard lives
    // until the write has run.
    let mut _write = None;
    let checked = checked.and_then(|()| {
        if fsync::is_write(name, cmd.raw()) {
            _write = Some(ctx.server.fsync_lock.enter_write()?);
        }
        Ok(())
    });
    // A snapshot read outside a transaction runs in its snapshot (`snapshot_read.rs`).
    let checked = checked.and_then(|()| match cmd.get("readConcern") {
        Some(_) => snapshot_read::requested(name, cmd.raw()),
        None => Ok(None),
    });
    let reply = match checked {
        Ok(None) => run_kind(ctx, db, cmd, &kind, lsid.is_some(), raw_documents),
        Ok(Some(at)) => snapshot_read::run(ctx, name, at, || {
            run_kind(ctx, db, cmd, &kind, lsid.is_some(), raw_documents)
        })
        .unwrap_or_else(|e| Reply::Doc(error_reply(&e))),
        Err(e) => {
            let mut reply = error_reply(&e);
            let labels = error_labels(&kind, name, e.code.code());
            if !labels.is_empty() {
                reply.insert("errorLabels", labels);
            }
            Reply::Doc(reply)
        }
    };
    crate::auth::authorize::after(ctx, cmd, &reply);
    let mut reply = fail_command::after(ctx, name, reply);
    repl.finish_reply(name, cmd.raw(), &mut reply);
    reply
}

/// Runs a command whose session fields are checked: as a transaction statement, in the
/// connection's TokuMX transaction, or as it is.
fn run_kind(
    ctx: &ConnectionCtx,
    db: &str,
    cmd: &Command<'_>,
    kind: &Kind,
    has_lsid: bool,
    raw_documents: Option<Vec<RawDocumentBuf>>,
) -> Reply {
    let name = cmd.name();
    match kind {
        Kind::Transaction(f) if is_command(name) => {
            transactions::run(ctx, db, cmd, f, |c| route(c, db, cmd, raw_documents))
        }
        Kind::RetryableWrite(f) if is_command(name) => {
            retryable_writes::run(ctx, name, f, |c| route(c, db, cmd, raw_documents))
        }
        _ if !has_lsid => {
            // The documents move into whichever closure runs.
            let mut docs = raw_documents;
            let in_conn_txn = connection_txn::run(ctx, db, name, is_data_command(name), |c| {
                route(c, db, cmd, docs.take())
            });
            in_conn_txn.unwrap_or_else(|| route(ctx, db, cmd, docs))
        }
        _ => route(ctx, db, cmd, raw_documents),
    }
}

/// Whether `name` is a command this server serves (test commands only when enabled).
fn is_known(ctx: &ConnectionCtx, name: &str) -> bool {
    is_command(name) || test_command(ctx, name).is_some()
}

/// The handler of test command `name`, when test commands are enabled.
fn test_command(ctx: &ConnectionCtx, name: &str) -> Option<Handler> {
    if !ctx.server.enable_test_commands {
        return None;
    }
    fail_command::TEST_COMMANDS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, h)| *h)
}

/// The labels mongod gives a failed command's error by its code (`getErrorLabels`): a
/// transaction statement's transient error may be retried with the whole transaction; a
/// retryable write's (or a commit's or abort's) network-like error may be retried alone.
fn error_labels(kind: &Kind, name: &str, code: i32) -> Vec<&'static str> {
    let mut labels = Vec::new();
    if matches!(kind, Kind::Transaction(_)) && transactions::is_transient(code) {
        labels.push("TransientTransactionError");
    }
    let ends = matches!(name, "commitTransaction" | "abortTransaction");
    let retryable = match kind {
        Kind::RetryableWrite(_) => true,
        Kind::Transaction(_) => ends,
        Kind::Plain => false,
    };
    if retryable && retryable_writes::is_retriable(code) {
        labels.push("RetryableWriteError");
    }
    labels
}

/// Whether `name` reads or writes collections (the `data` tables).
fn is_data_command(name: &str) -> bool {
    table::find(name).is_some_and(|e| e.data)
}

/// Whether `name` is one of the server's commands (test commands aside).
fn is_command(name: &str) -> bool {
    table::find(name).is_some()
}

/// Routes a command to its handler: raw insert documents, a raw handler (the hot paths,
/// which read the raw body), or an owned-body handler (the body decoded once, here).
fn route(
    ctx: &ConnectionCtx,
    db: &str,
    cmd: &Command<'_>,
    raw_documents: Option<Vec<RawDocumentBuf>>,
) -> Reply {
    let name = cmd.name();
    if let Some(docs) = raw_documents {
        return Reply::Doc(finish(crud::insert_raw(ctx, db, cmd, docs)));
    }
    let run = table::find(name)
        .map(|e| e.run)
        .or_else(|| test_command(ctx, name).map(table::Run::Doc));
    let result = match run {
        Some(table::Run::Raw(raw)) => {
            return match raw(ctx, db, cmd) {
                Ok(mut reply) => {
                    reply.append("ok", 1.0);
                    Reply::Raw(reply)
                }
                Err(e) => Reply::Doc(error_reply(&e)),
            };
        }
        Some(table::Run::RawBody(raw)) => raw(ctx, db, cmd),
        Some(table::Run::Doc(handler)) => cmd.doc().and_then(|body| handler(ctx, db, body)),
        None => Err(MongoError::new(
            ErrorCode::CommandNotFound,
            format!("no such command: '{name}'"),
        )),
    };
    Reply::Doc(finish(result))
}

/// The reply document for a command's outcome.
fn finish(result: CommandResult) -> Document {
    match result {
        // A handler may set `ok` itself: mongod's errmsg-style failures are `{ok: 0, errmsg}`
        // with no code.
        Ok(reply) if reply.contains_key("ok") => reply,
        Ok(mut reply) => {
            reply.insert("ok", 1.0);
            reply
        }
        Err(e) => error_reply(&e),
    }
}

/// The reply document for a failed command.
pub fn error_reply(e: &MongoError) -> Document {
    let mut reply = doc! {
        "ok": 0.0,
        "errmsg": e.message.clone(),
        "code": e.code.code(),
        "codeName": e.code.name(),
    };
    // A duplicate key error names the index's key pattern and the duplicate value.
    if let Some(info) = &e.info {
        reply.extend(info.as_ref().clone());
    }
    reply
}

/// Refuses a command that mongod runs only against the `admin` database.
pub(crate) fn require_admin(db: &str, command: &str) -> Result<(), MongoError> {
    if db == "admin" {
        return Ok(());
    }
    Err(MongoError::new(
        ErrorCode::Unauthorized,
        format!("{command} may only be run against the admin database."),
    ))
}

/// Names of all commands, for `listCommands` and tests.
pub fn command_names() -> impl Iterator<Item = &'static str> {
    table::COMMANDS.iter().map(|e| e.name)
}

/// Fields any command may carry besides its own (mongod's generic arguments).
pub(crate) const GENERIC_ARGUMENTS: &[&str] = &[
    "$db",
    "lsid",
    "txnNumber",
    "autocommit",
    "comment",
    "maxTimeMS",
    "writeConcern",
    "readConcern",
    "$readPreference",
    "apiVersion",
    "apiStrict",
    "apiDeprecationErrors",
    "$clusterTime",
];
