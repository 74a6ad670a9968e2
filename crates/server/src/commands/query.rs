//! Read commands: `find`, `getMore`, `killCursors`, `count`, `distinct` and `explain`.
//! A find's cursor holds its snapshot between batches; the first batch defaults to 101
//! documents and every batch stops before 16 MiB. Inside a session transaction a find is
//! read whole on the transaction's snapshot and served from memory.

use super::data::{
    command_name, command_vars, cursor_reply_raw, missing, namespace, opt_count, opt_doc, opt_hint,
    opt_i64, req_str, type_name, wrong_type,
};
use super::{raw_args, CommandResult, RawResult};
use crate::command::{to_bson, Command};
use crate::session_table::describe_lsid;
use crate::ConnectionCtx;
use bson::{doc, Bson, Document, RawBsonRef, RawDocument};
use shale_db::{DocSource, FindSpec, Namespace, VecSource};
use shale_doc::{ErrorCode, MongoError};

/// Parses a find command's query fields from its raw body; only the filter, sort and
/// projection are decoded (the planner and sort still take owned documents).
fn find_spec(cmd: &Command<'_>, c: &str) -> Result<(FindSpec, Option<u64>, bool), MongoError> {
    refuse_unbuilt(cmd, c)?;
    let owned = |d: Option<&RawDocument>| d.map(owned_doc).transpose();
    // `limit: 0` means no limit.
    let limit = raw_args::opt_count(cmd, c, "limit")?.filter(|n| *n > 0);
    let spec = FindSpec {
        filter: raw_args::opt_doc(cmd, c, "filter")?
            .map(raw_args::owned_filter)
            .transpose()?
            .unwrap_or_default(),
        sort: owned(raw_args::opt_doc(cmd, c, "sort")?)?.filter(|s| !s.is_empty()),
        projection: owned(raw_args::opt_doc(cmd, c, "projection")?)?,
        skip: raw_args::opt_count(cmd, c, "skip")?.unwrap_or(0),
        limit,
        hint: raw_args::opt_hint(cmd)?,
        vars: raw_args::command_vars(cmd, c)?,
    };
    // Type-checked here (14 for a non-boolean); its value reaches the sort through the
    // operation's scope, set by dispatch for every command (`op_context.rs`).
    raw_args::opt_bool(cmd, c, "allowDiskUse")?;
    let batch_size = raw_args::opt_count(cmd, c, "batchSize")?;
    let single = raw_args::opt_bool(cmd, c, "singleBatch")?.unwrap_or(false);
    Ok((spec, batch_size, single))
}

/// Find options that change the result and are not built yet are refused (mongod serves
/// them; accepting and ignoring them would return other documents or other fields):
/// `min`/`max` bounds, `returnKey`, `showRecordId`, and resuming a scan by record id
/// (`$_requestResumeToken`, `$_resumeAfter`: a scan here has no record ids to resume from). A
/// false flag or a null asks nothing.
pub(super) fn refuse_unbuilt(cmd: &Command<'_>, c: &str) -> Result<(), MongoError> {
    for option in ["min", "max", "$_resumeAfter"] {
        if raw_args::opt_doc(cmd, c, option)?.is_some() {
            return Err(not_built(option));
        }
    }
    for option in ["returnKey", "showRecordId", "$_requestResumeToken"] {
        if raw_args::opt_bool(cmd, c, option)? == Some(true) {
            return Err(not_built(option));
        }
    }
    Ok(())
}

/// A find on a view (a time series collection included) runs as an aggregate, so the find
/// options an aggregate lacks are refused as mongod refuses them (`asAggregationCommand`:
/// `InvalidPipelineOperator`, 168).
fn refuse_on_view(cmd: &Command<'_>) -> Result<(), MongoError> {
    let refuse = |why: String| Err(MongoError::new(ErrorCode::InvalidPipelineOperator, why));
    for option in ["min", "max"] {
        if raw_args::opt_doc(cmd, "find", option)?.is_some_and(|d| !d.is_empty()) {
            return refuse(format!("Option {option} not supported in aggregation."));
        }
    }
    if raw_args::opt_bool(cmd, "find", "tailable")? == Some(true) {
        return refuse("Tailable cursors are not supported in aggregation.".into());
    }
    for option in [
        "returnKey",
        "noCursorTimeout",
        "allowPartialResults",
        "readOnce",
    ] {
        if raw_args::opt_bool(cmd, "find", option)? == Some(true) {
            return refuse(format!("Option {option} not supported in aggregation."));
        }
    }
    let limit_one = raw_args::opt_i64(cmd, "find", "limit")? == Some(1);
    if raw_args::opt_bool(cmd, "find", "singleBatch")? == Some(true) && !limit_one {
        return refuse("Option singleBatch not supported in aggregation.".into());
    }
    if raw_args::opt_doc(cmd, "find", "sort")?
        .is_some_and(|s| s.get("$natural").ok().flatten().is_some())
    {
        return refuse("Sort option $natural not supported in aggregation.".into());
    }
    Ok(())
}

fn not_built(option: &str) -> MongoError {
    MongoError::new(
        ErrorCode::NotImplemented,
        format!("find option '{option}' is not supported by ShaleDB"),
    )
}

/// An owned copy of a checked raw sub-document.
fn owned_doc(d: &RawDocument) -> Result<Document, MongoError> {
    Document::try_from(d).map_err(|e| {
        MongoError::new(
            ErrorCode::InvalidBSON,
            format!("document does not decode: {e}"),
        )
    })
}

#[allow(
    clippy::expect_used,
    reason = "the match guard checked that it is Some"
)]
pub fn find(ctx: &ConnectionCtx, db: &str, cmd: &Command<'_>) -> RawResult {
    if let Some(reply) = super::express::find(ctx, db, cmd) {
        return reply;
    }
    let ns = raw_args::namespace(db, cmd, "find")?;
    if ctx.db.is_view(&ns) {
        refuse_on_view(cmd)?;
    }
    let (spec, batch_size, single) = find_spec(cmd, "find")?;
    let (tailable, await_data) = check_tailable(ctx, cmd, &ns)?;
    let batch_size = batch_size.map(|b| b as usize);
    let natural: Option<Box<dyn DocSource>> = match (&ctx.txn, shale_db::oplog::is_oplog(&ns)) {
        (None, true) => ctx
            .db
            .find_oplog(&spec, tailable, await_data)?
            .map(|s| Box::new(s) as Box<dyn DocSource>),
        (None, false) => ctx
            .db
            .find_capped(&ns, &spec, tailable, await_data)?
            .map(|s| Box::new(s) as Box<dyn DocSource>),
        _ => None,
    };
    let source: Box<dyn DocSource> = match &ctx.txn {
        _ if natural.is_some() => natural.expect("checked"),
        // Read whole on the transaction's snapshot: later getMores cannot reach it.
        Some(t) => Box::new(VecSource(ctx.db.find_in(t, &ns, &spec)?.into_iter())),
        None => Box::new(ctx.db.find(&ns, &spec)?),
    };
    let ns = ns.to_string();
    let batch =
        ctx.db
            .cursors()
            .first_batch(&ns, source, batch_size, single, ctx.cursor_owner())?;
    if batch.cursor_id != 0 && raw_args::opt_bool(cmd, "find", "noCursorTimeout")? == Some(true) {
        ctx.db.cursors().set_no_timeout(batch.cursor_id);
    }
    Ok(cursor_reply_raw(&ns, batch, "firstBatch"))
}

/// `tailable` and `awaitData`. A tailable cursor needs a capped collection (one created
/// `capped`, or a replica-set member's oplog): a tailable find on any other existing
/// collection is refused as mongod refuses it (on a missing one mongod answers an empty
/// batch, and so does this find). Returns the two flags.
fn check_tailable(
    ctx: &ConnectionCtx,
    cmd: &Command<'_>,
    ns: &Namespace,
) -> Result<(bool, bool), MongoError> {
    let tailable = raw_args::opt_bool(cmd, "find", "tailable")?.unwrap_or(false);
    let await_data = raw_args::opt_bool(cmd, "find", "awaitData")?.unwrap_or(false);
    if await_data && !tailable {
        return Err(MongoError::new(
            ErrorCode::FailedToParse,
            "Cannot set 'awaitData' without also setting 'tailable'",
        ));
    }
    let exists = || {
        ctx.db
            .list_collections(&ns.db)
            .iter()
            .any(|c| c.get_str("name") == Ok(ns.coll.as_str()))
    };
    let capped = ctx.db.is_capped(ns);
    if tailable && !capped && exists() {
        return Err(MongoError::new(
            ErrorCode::BadValue,
            format!("error processing query: ns={ns} tailable cursor requested on non capped collection"),
        ));
    }
    Ok((tailable, await_data))
}

pub fn get_more(ctx: &ConnectionCtx, db: &str, cmd: &Command<'_>) -> RawResult {
    let id = match cmd.get("getMore") {
        Some(RawBsonRef::Int64(id)) => id,
        Some(other) => return Err(wrong_type("getMore.getMore", &to_bson(other), "long")),
        None => {
            return Err(MongoError::new(
                ErrorCode::FailedToParse,
                "getMore needs a cursor id",
            ))
        }
    };
    let ns = cursor_namespace(db, raw_args::req_str(cmd, "getMore", "collection")?)?;
    let batch_size = raw_args::opt_count(cmd, "getMore", "batchSize")?.map(|b| b as usize);
    if let Some(owner) = ctx.db.cursors().owner(id) {
        check_session(id, owner, ctx.lsid.map(|l| l.id))?;
    }
    // An awaitData cursor with nothing new waits up to `maxTimeMS` (mongod's default 1 s);
    // every other source ignores the wait.
    let wait = raw_args::opt_count(cmd, "getMore", "maxTimeMS")?.unwrap_or(1000);
    let change_stream = ctx.db.cursors().is_change_stream(id);
    if ctx.server.enable_test_commands && ctx.db.cursors().owner(id).is_some() {
        if let Some(data) = ctx.server.fail_points.fire_get_more() {
            ctx.db.cursors().kill(&ns, &[id]);
            let e = super::change_stream::injected_get_more_error(&data);
            return Err(super::change_stream::label(e, change_stream));
        }
    }
    let batch = ctx
        .db
        .cursors()
        .get_more_waiting(
            id,
            &ns,
            batch_size,
            Some(std::time::Duration::from_millis(wait)),
        )
        .map_err(|e| match change_stream {
            true => super::change_stream::label(e, true),
            false => e,
        })?;
    Ok(cursor_reply_raw(&ns, batch, "nextBatch"))
}

/// The namespace a cursor is named by: a collection's, or `<db>.$cmd.aggregate` for a
/// database-level aggregate's (a database or deployment change stream).
fn cursor_namespace(db: &str, coll: &str) -> Result<String, MongoError> {
    if coll == "$cmd.aggregate" {
        shale_db::validate_db_name(db)?;
        return Ok(format!("{db}.{coll}"));
    }
    Ok(Namespace::new(db, coll)?.to_string())
}

/// A getMore must run in the session its cursor was opened in, or in none if it was opened
/// in none (mongod's `validateLSID`, with its codes and messages).
fn check_session(
    id: i64,
    owner: Option<shale_db::CursorOwner>,
    lsid: Option<bson::Uuid>,
) -> Result<(), MongoError> {
    let owner = owner.map(bson::Uuid::from_bytes);
    let (code, message) = match (owner, lsid) {
        (None, Some(l)) => (
            ErrorCode::Location50736,
            format!(
                "Cannot run getMore on cursor {id}, which was not created in a session, in \
                 session {}",
                describe_lsid(&l)
            ),
        ),
        (Some(o), None) => (
            ErrorCode::Location50737,
            format!(
                "Cannot run getMore on cursor {id}, which was created in session {}, without \
                 an lsid",
                describe_lsid(&o)
            ),
        ),
        (Some(o), Some(l)) if o != l => (
            ErrorCode::Location50738,
            format!(
                "Cannot run getMore on cursor {id}, which was created in session {}, in \
                 session {}",
                describe_lsid(&o),
                describe_lsid(&l)
            ),
        ),
        _ => return Ok(()),
    };
    Err(MongoError::new(code, message))
}

pub fn kill_cursors(ctx: &ConnectionCtx, db: &str, body: &Document) -> CommandResult {
    let ns = match body.get("killCursors") {
        Some(Bson::String(c)) if c == "$cmd.aggregate" => cursor_namespace(db, c)?,
        _ => namespace(db, body, "killCursors")?.to_string(),
    };
    let ids: Vec<i64> = match body.get("cursors") {
        Some(Bson::Array(a)) => a
            .iter()
            .map(|v| match v {
                Bson::Int64(i) => Ok(*i),
                other => Err(MongoError::new(
                    ErrorCode::TypeMismatch,
                    format!("cursor ids must be longs, not {}", type_name(other)),
                )),
            })
            .collect::<Result<_, _>>()?,
        _ => return Err(missing("killCursors.cursors")),
    };
    let (killed, not_found) = ctx.db.cursors().kill(&ns, &ids);
    Ok(doc! {
        "cursorsKilled": killed,
        "cursorsNotFound": not_found,
        "cursorsAlive": [],
        "cursorsUnknown": [],
    })
}

/// `count`; its `query` read as sent (`raw_args::decoded_filter`), the rest decoded.
pub fn count(ctx: &ConnectionCtx, db: &str, cmd: &Command<'_>) -> CommandResult {
    let body = cmd.doc()?;
    let ns = namespace(db, body, "count")?;
    let filter = raw_args::decoded_filter(cmd, "query", opt_doc(body, "count", "query")?)?;
    let skip = opt_count(body, "count", "skip")?.unwrap_or(0);
    // A negative limit means the same as its absolute value for count.
    let limit = opt_i64(body, "count", "limit")?
        .map(|l| l.unsigned_abs())
        .filter(|l| *l > 0);
    let hint = match body.get("hint") {
        Some(h @ (Bson::String(_) | Bson::Document(_)))
            if h != &Bson::Document(Document::new()) =>
        {
            Some(h.clone())
        }
        _ => None,
    };
    // The transaction runner refuses `count` in a transaction, as mongod does.
    debug_assert!(
        ctx.txn.is_none(),
        "count never runs in a session transaction"
    );
    let vars = command_vars(body, "count")?;
    let n = ctx.db.count(&ns, &filter, skip, limit, hint, &vars)?;
    Ok(doc! { "n": shale_doc::append_number(n as i64) })
}

/// `distinct`; its `query` read as sent, as `count`'s.
pub fn distinct(ctx: &ConnectionCtx, db: &str, cmd: &Command<'_>) -> CommandResult {
    let body = cmd.doc()?;
    let ns = namespace(db, body, "distinct")?;
    let key = req_str(body, "distinct", "key")?;
    let filter = raw_args::decoded_filter(cmd, "query", opt_doc(body, "distinct", "query")?)?;
    let vars = command_vars(body, "distinct")?;
    let values = match &ctx.txn {
        Some(t) => ctx.db.distinct_in(t, &ns, key, &filter, &vars)?,
        None => ctx.db.distinct(&ns, key, &filter, &vars)?,
    };
    Ok(doc! { "values": values })
}

pub fn explain(ctx: &ConnectionCtx, db: &str, cmd: &Command<'_>) -> CommandResult {
    let body = cmd.doc()?;
    let (inner, inner_raw) = match (body.get("explain"), cmd.get("explain")) {
        (Some(Bson::Document(d)), Some(RawBsonRef::Document(raw))) => (d, raw),
        _ => {
            return Err(MongoError::new(
                ErrorCode::FailedToParse,
                "explain command requires a nested object",
            ))
        }
    };
    let verbosity = match body.get("verbosity") {
        None => "allPlansExecution",
        Some(Bson::String(v)) if ["queryPlanner", "executionStats", "allPlansExecution"].contains(&v.as_str()) => v.as_str(),
        Some(other) => return Err(MongoError::new(ErrorCode::BadValue, format!("verbosity string must be one of {{'queryPlanner', 'executionStats', 'allPlansExecution'}}, not {other}"))),
    };
    let name = command_name(inner);
    let inner_cmd = Command::new(inner_raw, Vec::new()).with_owned(inner.clone());
    if name == "aggregate" {
        return super::aggregate::explain_inner(ctx, db, &inner_cmd);
    }
    let (ns, spec) = explained_spec(db, name, &inner_cmd)?;
    // A write's explain runs only the read that finds its documents (mongod runs the plan
    // without writing): never the write.
    let execute = verbosity != "queryPlanner";
    let mut reply = ctx.db.explain_find(&ns, &spec, execute)?;
    reply.insert("command", inner.clone());
    reply.insert(
        "serverInfo",
        doc! {
            "host": super::server_status::hostname(),
            "port": i32::from(super::server_status::port(ctx)),
            "version": super::COMPATIBLE_VERSION,
            "gitVersion": "unknown",
        },
    );
    Ok(reply)
}

/// The namespace and query of the command `explain` wraps (`inner`, its raw body with its
/// decoded form), its filter read as the command itself reads it: as sent, a name given
/// twice the `$and` of both (`raw_args::owned_filter`); with the command's own hint, skip
/// and limit (count's; one document for findAndModify and a single update or delete), so
/// the plan and `executionStats` are the command's.
fn explained_spec(
    db: &str,
    name: &str,
    inner: &Command<'_>,
) -> Result<(Namespace, FindSpec), MongoError> {
    let owned = inner.doc()?;
    let ns = match name {
        "find" | "count" | "distinct" | "delete" | "update" | "findAndModify" | "findandmodify" => {
            namespace(db, owned, name)?
        }
        other => {
            return Err(MongoError::new(
                ErrorCode::CommandNotFound,
                format!("Explain failed due to unknown command: {other}"),
            ))
        }
    };
    if name == "find" {
        return Ok((ns, find_spec(inner, "find")?.0));
    }
    let spec = match name {
        "delete" | "update" => statement_spec(inner, name)?,
        _ => {
            let query = opt_doc(owned, name, "query")?;
            let mut spec = FindSpec {
                filter: raw_args::decoded_filter(inner, "query", query)?,
                hint: opt_hint(owned)?,
                ..FindSpec::default()
            };
            match name {
                // count's own skip and limit (a negative limit counts as its absolute value).
                "count" => {
                    spec.skip = opt_i64(owned, name, "skip")?.unwrap_or(0).max(0) as u64;
                    spec.limit = opt_i64(owned, name, "limit")?
                        .map(i64::unsigned_abs)
                        .filter(|n| *n > 0);
                }
                "distinct" => {}
                // findAndModify changes one document: the first its sort gives.
                _ => {
                    spec.sort = opt_doc(owned, name, "sort")?.cloned();
                    spec.limit = Some(1);
                }
            }
            spec
        }
    };
    let spec = FindSpec {
        vars: command_vars(owned, name)?,
        ..spec
    };
    Ok((ns, spec))
}

/// The query of an `update` or `delete` explain: its first statement's filter and hint, one
/// document for a single update (`multi: false`) or delete (`limit: 1`).
fn statement_spec(inner: &Command<'_>, name: &str) -> Result<FindSpec, MongoError> {
    let list = if name == "delete" {
        "deletes"
    } else {
        "updates"
    };
    let first = match inner.get(list) {
        Some(RawBsonRef::Array(items)) => match items.into_iter().next() {
            Some(Ok(RawBsonRef::Document(statement))) => Some(statement),
            _ => None,
        },
        _ => None,
    };
    let Some(first) = first else {
        return Ok(FindSpec::default());
    };
    let get = |k: &str| crate::command::get(first, k);
    let filter = match get("q") {
        Some(RawBsonRef::Document(q)) => raw_args::owned_filter(q)?,
        _ => Document::new(),
    };
    let hint = match get("hint") {
        Some(h @ (RawBsonRef::String(_) | RawBsonRef::Document(_))) => Some(to_bson(h)),
        _ => None,
    }
    .filter(|h| !matches!(h, Bson::Document(d) if d.is_empty()));
    let single = match name {
        "delete" => {
            get("limit")
                .map(to_bson)
                .and_then(|l| shale_doc::number_as_f64(&l))
                == Some(1.0)
        }
        _ => !matches!(get("multi"), Some(RawBsonRef::Boolean(true))),
    };
    Ok(FindSpec {
        filter,
        hint,
        limit: single.then_some(1),
        ..FindSpec::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_get_more_runs_in_its_cursors_session_only() {
        let (a, b) = (bson::Uuid::new(), bson::Uuid::new());
        assert!(check_session(7, None, None).is_ok());
        assert!(check_session(7, Some(a.bytes()), Some(a)).is_ok());
        let code = |owner: Option<bson::Uuid>, lsid| {
            check_session(7, owner.map(|o| o.bytes()), lsid)
                .expect_err("refused")
                .code
                .code()
        };
        assert_eq!(code(None, Some(a)), 50736);
        assert_eq!(code(Some(a), None), 50737);
        assert_eq!(code(Some(a), Some(b)), 50738);
        let e = check_session(7, Some(a.bytes()), Some(b)).expect_err("refused");
        assert_eq!(
            e.message,
            format!(
                "Cannot run getMore on cursor 7, which was created in session {}, in session {}",
                describe_lsid(&a),
                describe_lsid(&b)
            )
        );
        assert!(
            describe_lsid(&a).ends_with(" - 47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU= -  - ")
        );
    }
}
