//! `$currentOp` (the first stage of `{aggregate: 1}` on `admin`), the `currentOp` command
//! (mongod runs it as that stage, a `$match` of its other fields and a `$group` into
//! `inprog`) and `killOp`. The operations come from the registry of operations in flight
//! (`op_registry.rs`), one document per connection running a command, in mongod's shape
//! (`type: "op"`, `opid`, `op`, `ns`, `command`, `secs_running`, `microsecs_running`, `client`,
//! `connectionId`, `active`, `lsid`); idle connections and sessions holding an open
//! transaction when asked. `killOp` raises the operation's interrupt flag: its scans stop at
//! the next document with `Interrupted` (11601).

use super::data::{raw_to_bson, wrong_type};
use super::{require_admin, CommandResult};
use crate::op_registry::{ActiveOp, OpView};
use crate::ConnectionCtx;
use bson::{doc, Bson, Document, RawDocument, RawDocumentBuf};
use shale_doc::aggregate::Pipeline;
use shale_doc::{type_name, ErrorCode, MongoError, Variables};
use std::time::SystemTime;

pub const STAGE: &str = "$currentOp";

/// Commands larger than this are shown truncated when the caller asks (`truncateOps`; the
/// `currentOp` command always does), as mongod's `CurOp` does.
const TRUNCATE_BYTES: usize = 1000;

/// What `$currentOp` reports.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Spec {
    idle_connections: bool,
    idle_sessions: bool,
    all_users: bool,
    truncate_ops: bool,
}

/// Whether `stages` starts with `$currentOp`.
pub fn leads(stages: &[Document]) -> bool {
    stages
        .first()
        .and_then(|s| s.keys().next())
        .is_some_and(|k| k == STAGE)
}

/// Refuses `$currentOp` anywhere but first, and outside `{aggregate: 1}` on `admin`.
pub fn check_placement(stages: &[Document], db: &str, collectionless: bool) -> CommandResult {
    let is_stage = |s: &Document| s.keys().next().is_some_and(|k| k == STAGE);
    if stages.iter().skip(1).any(is_stage) {
        return Err(MongoError::new(
            ErrorCode::Location40602,
            format!("{STAGE} is only valid as the first stage in a pipeline."),
        ));
    }
    if stages.first().is_some_and(is_stage) && (db != "admin" || !collectionless) {
        return Err(MongoError::new(
            ErrorCode::InvalidNamespace,
            "$currentOp must be run against the 'admin' database with {aggregate: 1}",
        ));
    }
    Ok(Document::new())
}

/// Runs a pipeline led by `$currentOp`: the operations, then the rest of the pipeline over
/// them (`vars`: the command's `let`, `$$NOW`).
pub fn run(
    ctx: &ConnectionCtx,
    stages: &[Document],
    vars: &Variables,
) -> Result<Vec<RawDocumentBuf>, MongoError> {
    let spec = parse_spec(stages.first().and_then(|s| s.get(STAGE)))?;
    Pipeline::parse_with(&stages[1..], vars)?;
    let ops = operations(ctx, &spec)?;
    ctx.db.aggregate_documents("admin", &stages[1..], ops, vars)
}

/// mongod's `$currentOp` options: every one a boolean; `idleCursors` and `backtrace` are
/// not built (refused when true); `localOps` and `targetAllNodes` only matter on mongos.
fn parse_spec(spec: Option<&Bson>) -> Result<Spec, MongoError> {
    let spec_doc = match spec {
        Some(Bson::Document(d)) => d,
        other => {
            return Err(MongoError::new(
                ErrorCode::FailedToParse,
                format!(
                    "$currentOp options must be specified in an object, but found: {}",
                    other.map_or("missing", type_name)
                ),
            ))
        }
    };
    let mut spec = Spec {
        idle_connections: false,
        idle_sessions: true,
        all_users: false,
        truncate_ops: false,
    };
    for (k, v) in spec_doc {
        let Bson::Boolean(on) = v else {
            return Err(MongoError::new(
                ErrorCode::FailedToParse,
                format!(
                    "The '{k}' parameter of the $currentOp stage must be a boolean value, but \
                     found: {}",
                    type_name(v)
                ),
            ));
        };
        match k.as_str() {
            "idleConnections" => spec.idle_connections = *on,
            "idleSessions" => spec.idle_sessions = *on,
            "allUsers" => spec.all_users = *on,
            "truncateOps" => spec.truncate_ops = *on,
            "localOps" | "targetAllNodes" => {}
            "idleCursors" | "backtrace" if !on => {}
            "idleCursors" | "backtrace" => {
                return Err(MongoError::new(
                    ErrorCode::NotImplemented,
                    format!("The '{k}' option of the $currentOp stage is not supported"),
                ))
            }
            other => {
                return Err(MongoError::new(
                    ErrorCode::FailedToParse,
                    format!("Unrecognized option '{other}' in $currentOp stage."),
                ))
            }
        }
    }
    Ok(spec)
}

/// The reported documents: connections in id order, then idle sessions.
fn operations(ctx: &ConnectionCtx, spec: &Spec) -> Result<Vec<RawDocumentBuf>, MongoError> {
    let host = super::server_status::host_and_port(ctx);
    let own_users = crate::auth::gate::lock(ctx)
        .users
        .iter()
        .map(|u| u.name.clone())
        .collect::<Vec<_>>();
    let mut out = Vec::new();
    for view in ctx.server.ops.snapshot() {
        // Without `allUsers` only the caller's users' operations (everyone's when no one
        // is logged in, as on a server without authentication).
        if !spec.all_users && view.users != own_users {
            continue;
        }
        let d = match &view.active {
            Some(op) => op_document(&host, &view, op, spec.truncate_ops)?,
            None if spec.idle_connections => connection_document(&host, &view, false),
            None => continue,
        };
        out.push(to_raw(&d)?);
    }
    if spec.idle_sessions {
        for (key, txn_number) in ctx.sessions.idle_transactions(&ctx.db) {
            let d = doc! {
                "type": "idleSession",
                "host": &host,
                "desc": "inactive transaction",
                "lsid": { "id": key.id, "uid": uid_binary(key.uid) },
                "transaction": {
                    "parameters": { "txnNumber": txn_number, "autocommit": false },
                },
                "waitingForLock": false,
                "active": false,
                "locks": {},
                "lockStats": {},
            };
            out.push(to_raw(&d)?);
        }
    }
    Ok(out)
}

/// The fields every connection's document has.
fn connection_document(host: &str, view: &OpView, active: bool) -> Document {
    let mut d = doc! {
        "type": "op",
        "host": host,
        "desc": format!("conn{}", view.connection_id),
        "connectionId": shale_doc::append_number(view.connection_id as i64),
        "client": &view.client,
    };
    if let Some(app) = &view.app_name {
        d.insert("appName", app);
    }
    d.insert("active", active);
    d.insert("currentOpTime", iso_time(SystemTime::now()));
    if !view.users.is_empty() {
        let users: Vec<Bson> = view
            .users
            .iter()
            .map(|u| Bson::Document(doc! {"user": &u.user, "db": &u.db}))
            .collect();
        d.insert("effectiveUsers", users);
    }
    d.insert("threaded", true);
    d
}

/// An active operation's document.
fn op_document(
    host: &str,
    view: &OpView,
    op: &ActiveOp,
    truncate: bool,
) -> Result<Document, MongoError> {
    let mut d = connection_document(host, view, true);
    let body = RawDocument::from_bytes(&op.command)
        .map_err(|e| MongoError::new(ErrorCode::InternalError, e.to_string()))?;
    let name = body
        .iter()
        .next()
        .and_then(Result::ok)
        .map_or("", |(k, _)| k);
    d.insert("opid", op.opid as i32);
    if let Ok(lsid) = body.get_document("lsid") {
        d.insert("lsid", raw_to_bson(&lsid.to_raw_document_buf())?);
    }
    d.insert("secs_running", (op.running_micros / 1_000_000) as i64);
    d.insert("microsecs_running", op.running_micros as i64);
    d.insert("op", op_type(name));
    d.insert("ns", namespace(&op.db, body));
    d.insert("redacted", false);
    d.insert("command", command_value(body, truncate)?);
    d.insert("numYields", 0);
    d.insert("locks", Document::new());
    d.insert("waitingForLock", false);
    d.insert("lockStats", Document::new());
    d.insert("waitingForFlowControl", false);
    d.insert("flowControlStats", Document::new());
    if op.killed {
        d.insert("killPending", true);
    }
    Ok(d)
}

/// mongod's `op` for a command: the legacy operation it stands for, else `command`.
pub fn op_type(command: &str) -> &'static str {
    match command {
        "find" => "query",
        "getMore" => "getmore",
        "insert" => "insert",
        "update" => "update",
        "delete" => "remove",
        "killCursors" => "killcursors",
        _ => "command",
    }
}

/// The namespace an operation works on: `db.coll` for a command on a collection,
/// `db.$cmd.aggregate` for `{aggregate: 1}`, `db.$cmd` otherwise.
pub fn namespace(db: &str, body: &RawDocument) -> String {
    let mut fields = body.iter().filter_map(Result::ok);
    let first = fields.next();
    let coll = match first {
        Some(("getMore", _)) => body.get_str("collection").ok(),
        Some((_, bson::RawBsonRef::String(c))) => Some(c),
        _ => None,
    };
    match (coll, first) {
        (Some(c), _) if !c.is_empty() => format!("{db}.{c}"),
        // mongod's namespace for a pipeline on no collection.
        (_, Some(("aggregate", _))) => format!("{db}.$cmd.aggregate"),
        _ => format!("{db}.$cmd"),
    }
}

/// The command as shown: whole, or `{$truncated: "<start of its JSON>"}` past 1000 bytes.
fn command_value(body: &RawDocument, truncate: bool) -> Result<Bson, MongoError> {
    let whole = raw_to_bson(&body.to_raw_document_buf())?;
    if !truncate || body.as_bytes().len() <= TRUNCATE_BYTES {
        return Ok(whole);
    }
    let text = whole.to_string();
    let cut = (0..=TRUNCATE_BYTES.min(text.len()))
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0);
    Ok(Bson::Document(
        doc! {"$truncated": format!("{} ...", &text[..cut])},
    ))
}

/// mongod's `currentOpTime`: ISO 8601 with milliseconds and a `+00:00` offset.
fn iso_time(t: SystemTime) -> String {
    let dt = bson::DateTime::from_system_time(t);
    let s = dt
        .try_to_rfc3339_string()
        .unwrap_or_else(|_| "1970-01-01T00:00:00Z".into());
    s.strip_suffix('Z')
        .map_or(s.clone(), |head| format!("{head}+00:00"))
}

fn uid_binary(uid: crate::session_table::UserDigest) -> bson::Binary {
    bson::Binary {
        subtype: bson::spec::BinarySubtype::Generic,
        bytes: uid.to_vec(),
    }
}

fn to_raw(d: &Document) -> Result<RawDocumentBuf, MongoError> {
    RawDocumentBuf::from_document(d)
        .map_err(|e| MongoError::new(ErrorCode::InternalError, e.to_string()))
}

/// `currentOp`: `$all` (idle connections too), `$ownOps` (only the caller's users'), the
/// other non-generic fields a filter on the operations; `{inprog: [...]}`, with `fsyncLock`
/// while the server is locked for writes.
pub fn current_op(ctx: &ConnectionCtx, db: &str, body: &Document) -> CommandResult {
    require_admin(db, "currentOp")?;
    let truthy = |k: &str| body.get(k).is_some_and(bson_true);
    let mut filter = Document::new();
    for (k, v) in body.iter().skip(1) {
        let generic = super::GENERIC_ARGUMENTS.contains(&k.as_str()) || k == "$readPreference";
        if generic || matches!(k.as_str(), "$all" | "$ownOps" | "$truncateOps") {
            continue;
        }
        filter.insert(k.clone(), v.clone());
    }
    let stages = vec![
        doc! {STAGE: {
            "idleConnections": truthy("$all"),
            "allUsers": !truthy("$ownOps"),
            "truncateOps": true,
        }},
        doc! {"$match": filter},
    ];
    let vars = Variables::default();
    let docs = run(ctx, &stages, &vars)?;
    let inprog = docs
        .iter()
        .map(raw_to_bson)
        .collect::<Result<Vec<_>, _>>()?;
    let mut reply = doc! {"inprog": inprog};
    if let Some(count) = ctx.server.fsync_lock.lock_count() {
        reply.insert("fsyncLock", true);
        reply.insert(
            "info",
            format!(
                "use db.fsyncUnlock() to terminate the fsync write/snapshot lock ({count} held)"
            ),
        );
    }
    Ok(reply)
}

fn bson_true(v: &Bson) -> bool {
    match v {
        Bson::Boolean(b) => *b,
        Bson::Int32(n) => *n != 0,
        Bson::Int64(n) => *n != 0,
        Bson::Double(n) => *n != 0.0,
        Bson::Null => false,
        _ => true,
    }
}

/// `killOp`: `{killOp: 1, op: <opid>}` on `admin`; interrupts the operation if it is still
/// running and answers `attempting to kill op` either way, as mongod.
pub fn kill_op(ctx: &ConnectionCtx, db: &str, body: &Document) -> CommandResult {
    require_admin(db, "killOp")?;
    let opid = parse_opid(body.get("op"))?;
    let found = ctx.server.ops.kill(opid);
    tracing::info!(op_id = opid, found, "Going to kill op");
    Ok(doc! {"info": "attempting to kill op"})
}

/// The `op` field: an integer (a whole double too) within 32 bits.
fn parse_opid(v: Option<&Bson>) -> Result<u32, MongoError> {
    let n: i64 = match v {
        None => {
            return Err(MongoError::new(
                ErrorCode::NoSuchKey,
                "Missing expected field \"op\"",
            ))
        }
        Some(Bson::Int32(n)) => (*n).into(),
        Some(Bson::Int64(n)) => *n,
        Some(Bson::Double(f)) if f.fract() == 0.0 && f.abs() < 9.0e18 => *f as i64,
        Some(other) => return Err(wrong_type("killOp.op", other, "long")),
    };
    if i32::try_from(n).is_err() {
        return Err(MongoError::new(
            ErrorCode::Location26823,
            format!("invalid op : {n}. Op ID cannot be represented with 32 bits"),
        ));
    }
    Ok(n as i32 as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_booleans_and_unknown_ones_are_refused() {
        let ok = parse_spec(Some(&Bson::Document(
            doc! {"allUsers": true, "idleConnections": true, "localOps": true},
        )))
        .expect("spec");
        assert!(ok.all_users && ok.idle_connections && ok.idle_sessions);
        let code = |d: Document| {
            parse_spec(Some(&Bson::Document(d)))
                .expect_err("bad")
                .code
                .code()
        };
        assert_eq!(code(doc! {"allUsers": 1}), 9);
        assert_eq!(code(doc! {"nope": true}), 9);
        assert_eq!(code(doc! {"idleCursors": true}), 238);
        assert!(parse_spec(Some(&Bson::Document(doc! {"idleCursors": false}))).is_ok());
        assert_eq!(
            parse_spec(Some(&Bson::Int32(1)))
                .expect_err("type")
                .code
                .code(),
            9
        );
    }

    #[test]
    fn it_runs_first_on_admin_without_a_collection() {
        let stage = doc! {STAGE: {}};
        assert!(check_placement(std::slice::from_ref(&stage), "admin", true).is_ok());
        let code = |db, cl| {
            check_placement(std::slice::from_ref(&stage), db, cl)
                .expect_err("refused")
                .code
                .code()
        };
        assert_eq!(code("test", true), 73);
        assert_eq!(code("admin", false), 73);
        let later = check_placement(&[doc! {"$match": {}}, stage.clone()], "admin", true);
        assert_eq!(later.expect_err("later").code.code(), 40602);
    }

    #[test]
    fn op_types_and_namespaces_are_mongods() {
        assert_eq!(op_type("find"), "query");
        assert_eq!(op_type("delete"), "remove");
        assert_eq!(op_type("aggregate"), "command");
        let find = bson::rawdoc! {"find": "c"};
        assert_eq!(namespace("d", &find), "d.c");
        let more = bson::rawdoc! {"getMore": 5_i64, "collection": "c"};
        assert_eq!(namespace("d", &more), "d.c");
        assert_eq!(namespace("admin", &bson::rawdoc! {"ping": 1}), "admin.$cmd");
        let agg = bson::rawdoc! {"aggregate": 1, "pipeline": []};
        assert_eq!(namespace("admin", &agg), "admin.$cmd.aggregate");
    }

    #[test]
    fn kill_op_reads_a_32_bit_opid() {
        assert_eq!(parse_opid(Some(&Bson::Int32(5))), Ok(5));
        assert_eq!(parse_opid(Some(&Bson::Double(7.0))), Ok(7));
        assert_eq!(parse_opid(None).expect_err("missing").code.code(), 4);
        let big = parse_opid(Some(&Bson::Int64(1 << 40))).expect_err("big");
        assert_eq!(big.code.code(), 26823);
        let s = parse_opid(Some(&Bson::String("1".into()))).expect_err("string");
        assert_eq!(s.code.code(), 14);
    }

    #[test]
    fn long_commands_are_truncated_only_when_asked() {
        let long = "x".repeat(2000);
        let body = bson::rawdoc! {"find": "c", "filter": {"s": long}};
        let whole = command_value(&body, false).expect("whole");
        assert!(matches!(whole, Bson::Document(ref d) if d.contains_key("filter")));
        let cut = command_value(&body, true).expect("cut");
        let Bson::Document(d) = cut else {
            panic!("document")
        };
        assert!(d.get_str("$truncated").expect("truncated").len() < 1100);
    }
}
