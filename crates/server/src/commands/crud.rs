//! Write commands: `insert`, `update`, `delete` and `findAndModify`, with MongoDB's reply
//! fields (`n`, `nModified`, `upserted`, `writeErrors[].index/code/errmsg`). A statement
//! mongod's IDL parser refuses (a field unknown, twice, missing or of the wrong type;
//! `statement_idl.rs`) fails the command before any statement runs; an error in a
//! statement's meaning (an update operator, `let`, a collation) is a write error at its
//! index, as mongod reports it; an ordered batch stops at the first error. Inside a session transaction (`ctx.txn`) every batch stops at its
//! first error, as mongod's does. A retryable write (`ctx.retry`) runs its statements one
//! at a time through `retryable_writes.rs`, each exactly once.

use super::data::{
    command_name, command_vars, missing, namespace, opt_bool, opt_doc, opt_idl_bool, raw_to_bson,
    with_collation, wrong_type,
};
use super::{raw_args, retryable_writes, statement_idl, CommandResult};
use crate::command::{to_bson, Command};
use crate::ConnectionCtx;
use bson::{doc, Bson, Document, RawBsonRef, RawDocumentBuf};
use shale_db::{prepare_for_insert, DeleteOp, FindAndModifyOp, UpdateOp, WriteResult};
use shale_doc::{ErrorCode, MongoError, UpdateSpec, Variables};

/// Most statements in one write command (`maxWriteBatchSize`).
const MAX_BATCH: usize = 100_000;

/// `insert` read from the raw body: its documents copied out of the body's array (or a
/// document sequence) as they are, never decoded.
pub fn insert(ctx: &ConnectionCtx, db: &str, cmd: &Command<'_>) -> CommandResult {
    let docs: Vec<RawDocumentBuf> = match (cmd.get("documents"), cmd.sequence("documents")) {
        (Some(RawBsonRef::Array(items)), _) => items
            .into_iter()
            .map(|v| match v {
                Ok(RawBsonRef::Document(d)) => Ok(d.to_owned()),
                Ok(other) => Err(wrong_type("insert.documents", &to_bson(other), "object")),
                Err(e) => Err(MongoError::new(ErrorCode::InvalidBSON, e.to_string())),
            })
            .collect::<Result<_, _>>()?,
        (Some(v), _) => return Err(wrong_type("insert.documents", &to_bson(v), "array")),
        (None, Some(seq)) => seq.to_vec(),
        (None, None) => return Err(missing("insert.documents")),
    };
    insert_documents(ctx, db, cmd, docs.into_iter().map(Ok).collect())
}

/// `insert` whose documents came as an OP_MSG document sequence: stored as they came (raw,
/// validated by the wire layer), never decoded.
pub fn insert_raw(
    ctx: &ConnectionCtx,
    db: &str,
    cmd: &Command<'_>,
    docs: Vec<RawDocumentBuf>,
) -> CommandResult {
    insert_documents(ctx, db, cmd, docs.into_iter().map(Ok).collect())
}

/// Prepares (`_id` first, generated if missing) and inserts `docs`; a document that failed
/// to convert or prepare is a write error at its index.
fn insert_documents(
    ctx: &ConnectionCtx,
    db: &str,
    cmd: &Command<'_>,
    docs: Vec<Result<RawDocumentBuf, MongoError>>,
) -> CommandResult {
    let ns = raw_args::namespace(db, cmd, "insert")?;
    check_batch_len(docs.len())?;
    let ordered = raw_args::opt_idl_bool(cmd, "insert", "ordered")?.unwrap_or(true);
    if ctx.db.timeseries(&ns).is_some() {
        let r = super::timeseries::insert(ctx, &ns, docs, ordered)?;
        return write_reply(r, false);
    }
    let mut prepared = Vec::with_capacity(docs.len());
    let mut early_errors = Vec::new();
    let mut positions = Vec::with_capacity(docs.len());
    for (i, d) in docs.into_iter().enumerate() {
        match d.and_then(prepare_for_insert) {
            Ok(r) => {
                prepared.push(r);
                positions.push(i);
            }
            Err(e) => {
                early_errors.push((i, e));
                if ordered {
                    break;
                }
            }
        }
    }
    let mut result = match (&ctx.txn, &ctx.retry) {
        (Some(t), _) => ctx.db.insert_in(t, &ns, &prepared)?,
        (None, Some(r)) => {
            let one = |t: &_, d: &RawDocumentBuf| ctx.db.insert_in(t, &ns, std::slice::from_ref(d));
            retryable_writes::each(ctx, r, &prepared, |j| positions[j], ordered, |_| None, one)?
        }
        (None, None) => ctx.db.insert(&ns, &prepared, ordered)?,
    };
    // Errors refer to positions in the prepared list; map them back to the request.
    for e in &mut result.errors {
        e.0 = positions[e.0];
    }
    result.errors.extend(early_errors);
    result.errors.sort_by_key(|(i, _)| *i);
    if ordered {
        // At most one error of each kind: the database's (it stops at its first), which
        // comes first when both exist, since an ordered early error ended the prepared list.
        result.errors.truncate(1);
    }
    write_reply(result, false)
}

/// `update`: each statement's fields checked as mongod's IDL parser checks them, its update
/// read from the bytes as sent (`UpdateSpec::parse_as_sent`), the rest of it decoded.
pub fn update(ctx: &ConnectionCtx, db: &str, cmd: &Command<'_>) -> CommandResult {
    let ns = raw_args::namespace(db, cmd, "update")?;
    let raw = raw_args::raw_statements(cmd, "update", "updates")?;
    check_batch_len(raw.len())?;
    // A statement field unknown, given twice, missing or of the wrong type fails the whole
    // command, as mongod's parser does before any statement runs.
    for s in &raw {
        statement_idl::check_update(s)?;
    }
    let mut statements = Vec::with_capacity(raw.len());
    for r in &raw {
        let mut s = raw_args::owned_except(r, "u")?;
        raw_args::filter_as_sent(&mut s, r, "q")?;
        statements.push(s);
    }
    let ordered = raw_args::opt_idl_bool(cmd, "update", "ordered")?.unwrap_or(true);
    if let Some(options) = ctx.db.timeseries(&ns) {
        let r = super::timeseries::update(ctx, &ns, &options, &raw, ordered)?;
        return write_reply(r, true);
    }
    // mongod binds `let` for each statement, so a bad one (not one of the wrong type) is
    // each statement's write error.
    let vars = raw_args::bind_let(raw_args::opt_doc(cmd, "update", "let")?);
    let mut ops = Vec::new();
    let mut result = WriteResult::default();
    let mut offset = Vec::new();
    for (i, s) in statements.iter().enumerate() {
        let statement_vars = vars
            .clone()
            .and_then(|v| with_collation(v, s, "update.updates"));
        let u = crate::command::get(raw[i], "u");
        let parsed = statement_vars.and_then(|vars| parse_update(s, u, &vars));
        match parsed {
            Ok(op) => {
                ops.push(op);
                offset.push(i);
            }
            Err(e) => {
                // Run what came before, then report this statement, unless an ordered batch
                // already stopped at an earlier statement's error.
                run_updates(ctx, &ns, &mut ops, &mut offset, ordered, &mut result)?;
                if !ordered || result.errors.is_empty() {
                    result.errors.push((i, e));
                }
                if ordered {
                    return write_reply(result, true);
                }
            }
        }
    }
    run_updates(ctx, &ns, &mut ops, &mut offset, ordered, &mut result)?;
    result.errors.sort_by_key(|(i, _)| *i);
    write_reply(result, true)
}

fn run_updates(
    ctx: &ConnectionCtx,
    ns: &shale_db::Namespace,
    ops: &mut Vec<UpdateOp>,
    offset: &mut Vec<usize>,
    ordered: bool,
    into: &mut WriteResult,
) -> Result<(), MongoError> {
    if ops.is_empty() {
        return Ok(());
    }
    let r = match (&ctx.txn, &ctx.retry) {
        (Some(t), _) => ctx.db.update_in(t, ns, ops)?,
        (None, Some(r)) => {
            let one = |t: &_, op: &UpdateOp| ctx.db.update_in(t, ns, std::slice::from_ref(op));
            let multi = |op: &UpdateOp| op.multi.then(|| not_retryable("multi=true"));
            retryable_writes::each(ctx, r, ops, |j| offset[j], ordered, multi, one)?
        }
        (None, None) => ctx.db.update(ns, ops, ordered)?,
    };
    into.n += r.n;
    into.n_modified += r.n_modified;
    into.upserted
        .extend(r.upserted.into_iter().map(|(i, id)| (offset[i], id)));
    into.errors
        .extend(r.errors.into_iter().map(|(i, e)| (offset[i], e)));
    ops.clear();
    offset.clear();
    Ok(())
}

/// One `update` statement: `s` is the statement decoded but for its update, `u` the update
/// as sent.
fn parse_update(
    s: &Document,
    u: Option<RawBsonRef<'_>>,
    vars: &Variables,
) -> Result<UpdateOp, MongoError> {
    let filter = opt_doc(s, "update.updates", "q")?
        .cloned()
        .ok_or_else(|| missing("update.updates.q"))?;
    let u = u.ok_or_else(|| missing("update.updates.u"))?;
    let filters = array_filters(s)?;
    let vars = &statement_constants(s, u, vars)?;
    let update = UpdateSpec::parse_as_sent(u, filters.as_deref(), vars)?;
    let multi = opt_idl_bool(s, "update.updates", "multi")?.unwrap_or(false);
    if multi && update.is_replacement() {
        return Err(MongoError::new(
            ErrorCode::FailedToParse,
            "multi update is not supported for replacement-style update",
        ));
    }
    Ok(UpdateOp {
        filter,
        update,
        multi,
        upsert: opt_idl_bool(s, "update.updates", "upsert")?.unwrap_or(false),
        hint: hint(s),
        vars: vars.clone(),
    })
}

/// A statement's constants (`c`), bound for its pipeline update as mongod binds them
/// (`$$name`, the value as given); on any other update `Location51198`. `upsertSupplied`
/// (mongos' upsert of a supplied document) is not built: refused when true.
fn statement_constants(
    s: &Document,
    u: RawBsonRef<'_>,
    vars: &Variables,
) -> Result<Variables, MongoError> {
    if opt_idl_bool(s, "update.updates", "upsertSupplied")? == Some(true) {
        return Err(MongoError::new(
            ErrorCode::NotImplemented,
            "update option 'upsertSupplied' is not supported by ShaleDB",
        ));
    }
    let constants = match s.get("c") {
        None | Some(Bson::Null) => return Ok(vars.clone()),
        Some(Bson::Document(c)) => c,
        Some(other) => return Err(wrong_type("update.updates.c", other, "object")),
    };
    if !matches!(u, RawBsonRef::Array(_)) {
        return Err(MongoError::new(
            ErrorCode::Location51198,
            "Constant values may only be specified for pipeline updates",
        ));
    }
    let raw = bson::RawDocumentBuf::from_document(constants)
        .map_err(|e| MongoError::new(ErrorCode::InvalidBSON, e.to_string()))?;
    vars.with_constants(&raw)
}

fn array_filters(s: &Document) -> Result<Option<Vec<Document>>, MongoError> {
    match s.get("arrayFilters") {
        None | Some(Bson::Null) => Ok(None),
        Some(Bson::Array(a)) => a
            .iter()
            .map(|v| match v {
                Bson::Document(d) => Ok(d.clone()),
                _ => Err(MongoError::new(
                    ErrorCode::TypeMismatch,
                    "arrayFilters entries must be objects",
                )),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(_) => Err(MongoError::new(
            ErrorCode::TypeMismatch,
            "arrayFilters must be an array",
        )),
    }
}

fn hint(s: &Document) -> Option<Bson> {
    match s.get("hint") {
        None | Some(Bson::Null) => None,
        Some(Bson::String(x)) if x.is_empty() => None,
        Some(Bson::Document(d)) if d.is_empty() => None,
        Some(h) => Some(h.clone()),
    }
}

pub fn delete(ctx: &ConnectionCtx, db: &str, cmd: &Command<'_>) -> CommandResult {
    let ns = raw_args::namespace(db, cmd, "delete")?;
    let raw = raw_args::raw_statements(cmd, "delete", "deletes")?;
    check_batch_len(raw.len())?;
    for s in &raw {
        statement_idl::check_delete(s)?;
    }
    let mut statements = raw_args::owned(&raw)?;
    for (s, r) in statements.iter_mut().zip(&raw) {
        raw_args::filter_as_sent(s, r, "q")?;
    }
    let ordered = raw_args::opt_idl_bool(cmd, "delete", "ordered")?.unwrap_or(true);
    // A `let` of the wrong type fails the command; its contents are bound after the
    // statements are parsed, as each statement's own.
    let vars = raw_args::bind_let(raw_args::opt_doc(cmd, "delete", "let")?);
    let mut ops = Vec::new();
    for s in &statements {
        let filter = opt_doc(s, "delete.deletes", "q")?
            .cloned()
            .ok_or_else(|| missing("delete.deletes.q"))?;
        // Compared as a double, as mongod does: 0.5 is neither a single nor a multi delete.
        let limit = match s.get("limit") {
            Some(v) => shale_doc::number_as_f64(v).ok_or_else(|| {
                MongoError::new(ErrorCode::TypeMismatch, "delete limit must be a number")
            })?,
            None => return Err(missing("delete.deletes.limit")),
        };
        if limit != 0.0 && limit != 1.0 {
            return Err(MongoError::new(
                ErrorCode::FailedToParse,
                format!("The limit field in delete objects must be 0 or 1. Got {limit}"),
            ));
        }
        let statement_vars = with_collation(vars.clone().unwrap_or_default(), s, "delete.deletes")?;
        ops.push(DeleteOp {
            filter,
            limit_one: limit == 1.0,
            hint: hint(s),
            vars: statement_vars,
        });
    }
    if let Err(e) = vars {
        // mongod binds `let` for each statement, so a bad one is each statement's write
        // error (the first's only, in an ordered batch).
        let failed = if ordered { 1 } else { ops.len() };
        let result = WriteResult {
            errors: (0..failed).map(|i| (i, e.clone())).collect(),
            ..WriteResult::default()
        };
        return write_reply(result, false);
    }
    if ctx.db.timeseries(&ns).is_some() {
        if ctx.txn.is_some() {
            return Err(MongoError::new(
                ErrorCode::OperationNotSupportedInTransaction,
                format!("Cannot delete from a time-series collection in a multi-document transaction: {ns}"),
            ));
        }
        let result = match &ctx.retry {
            Some(r) => {
                let one = |t: &_, op: &DeleteOp| {
                    ctx.db
                        .delete_timeseries_in(t, &ns, std::slice::from_ref(op))
                };
                let many = |op: &DeleteOp| (!op.limit_one).then(|| not_retryable("limit=0"));
                retryable_writes::each(ctx, r, &ops, |j| j, ordered, many, one)?
            }
            None => ctx.db.delete_timeseries(&ns, &ops, ordered)?,
        };
        return write_reply(result, false);
    }
    let result = match (&ctx.txn, &ctx.retry) {
        (Some(t), _) => ctx.db.delete_in(t, &ns, &ops)?,
        (None, Some(r)) => {
            let one = |t: &_, op: &DeleteOp| ctx.db.delete_in(t, &ns, std::slice::from_ref(op));
            let many = |op: &DeleteOp| (!op.limit_one).then(|| not_retryable("limit=0"));
            retryable_writes::each(ctx, r, &ops, |j| j, ordered, many, one)?
        }
        (None, None) => ctx.db.delete(&ns, &ops, ordered)?,
    };
    write_reply(result, false)
}

/// `findAndModify`: the body decoded but for its update, which is read from the bytes as
/// sent (`UpdateSpec::parse_as_sent`: a replacement stored as sent, operators given twice
/// applied).
pub fn find_and_modify(ctx: &ConnectionCtx, db: &str, cmd: &Command<'_>) -> CommandResult {
    let mut body = raw_args::owned_except(cmd.raw(), "update")?;
    raw_args::filter_as_sent(&mut body, cmd.raw(), "query")?;
    let body = &body;
    let c = command_name(body);
    let ns = namespace(db, body, c)?;
    let remove = opt_bool(body, c, "remove")?.unwrap_or(false);
    let return_new = opt_bool(body, c, "new")?.unwrap_or(false);
    let upsert = opt_bool(body, c, "upsert")?.unwrap_or(false);
    let vars = command_vars(body, c)?;
    let update = match cmd.get("update") {
        None | Some(RawBsonRef::Null) => None,
        Some(u) => Some(UpdateSpec::parse_as_sent(
            u,
            array_filters(body)?.as_deref(),
            &vars,
        )?),
    };
    let fail = |m: &str| Err(MongoError::new(ErrorCode::FailedToParse, m.to_owned()));
    match (&update, remove) {
        (Some(_), true) => return fail("Cannot specify both an update and remove=true"),
        (None, false) => return fail("Either an update or remove=true must be specified"),
        _ => {}
    }
    if remove && return_new {
        return fail("Cannot specify both new=true and remove=true; 'remove' always returns the deleted document");
    }
    if remove && upsert {
        return fail("Cannot specify both upsert=true and remove=true");
    }
    let op = FindAndModifyOp {
        filter: opt_doc(body, c, "query")?.cloned().unwrap_or_default(),
        sort: opt_doc(body, c, "sort")?.cloned(),
        remove,
        update,
        return_new,
        fields: opt_doc(body, c, "fields")?.cloned(),
        upsert,
        hint: hint(body),
        vars,
    };
    let r = match (&ctx.txn, &ctx.retry) {
        (Some(t), _) => ctx.db.find_and_modify_in(t, &ns, &op)?,
        (None, Some(r)) => {
            retryable_writes::find_and_modify(ctx, r, |t| ctx.db.find_and_modify_in(t, &ns, &op))?
        }
        (None, None) => ctx.db.find_and_modify(&ns, &op)?,
    };
    let mut last = doc! { "n": r.n as i32 };
    if !remove {
        last.insert("updatedExisting", r.updated_existing);
    }
    if let Some(id) = r.upserted {
        last.insert("upserted", id);
    }
    let value = match &r.value {
        Some(v) => raw_to_bson(v)?,
        None => Bson::Null,
    };
    Ok(doc! { "lastErrorObject": last, "value": value })
}

/// A statement mongod will not run as a retryable write (it may change many documents).
fn not_retryable(what: &str) -> MongoError {
    MongoError::new(
        ErrorCode::InvalidOptions,
        format!("Cannot use (or request) retryable writes with {what}"),
    )
}

fn check_batch_len(n: usize) -> Result<(), MongoError> {
    if n == 0 || n > MAX_BATCH {
        return Err(MongoError::new(
            ErrorCode::InvalidLength,
            format!("Write batch sizes must be between 1 and {MAX_BATCH}. Got {n} operations."),
        ));
    }
    Ok(())
}

/// `{n, nModified?, upserted?, writeErrors?}`. A statement stopped by an interruption
/// (`killOp`) fails the whole command instead, as mongod's write path rethrows those.
fn write_reply(r: WriteResult, is_update: bool) -> CommandResult {
    if let Some((_, e)) = r.errors.iter().find(|(_, e)| e.code.is_interruption()) {
        return Err(e.clone());
    }
    let mut reply = doc! { "n": r.n as i32 };
    if is_update {
        reply.insert("nModified", r.n_modified as i32);
        if !r.upserted.is_empty() {
            let ups: Vec<Bson> = r
                .upserted
                .into_iter()
                .map(|(i, id)| Bson::Document(doc! {"index": i as i32, "_id": id}))
                .collect();
            reply.insert("upserted", ups);
        }
    }
    if !r.errors.is_empty() {
        // As mongod: once the messages sent pass 1 MiB, later ones are empty, so that an
        // unordered batch whose every statement failed (a full device) still fits a reply.
        let mut message_bytes = 0;
        let errs: Vec<Bson> = r
            .errors
            .into_iter()
            .map(|(i, mut e)| {
                if message_bytes >= WRITE_ERROR_MESSAGE_BYTES_MAX {
                    e.message.clear();
                }
                message_bytes += e.message.len();
                Bson::Document(write_error(i, &e))
            })
            .collect();
        reply.insert("writeErrors", errs);
    }
    Ok(reply)
}

/// Bytes of write error messages after which mongod sends the rest empty.
const WRITE_ERROR_MESSAGE_BYTES_MAX: usize = 1 << 20;

fn write_error(index: usize, e: &MongoError) -> Document {
    let mut d = doc! { "index": index as i32, "code": e.code.code() };
    if let Some(info) = &e.info {
        d.extend(info.as_ref().clone());
    }
    d.insert("errmsg", e.message.clone());
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_error_messages_past_one_mib_are_sent_empty() {
        let long = "x".repeat(600 << 10);
        let errors = (0..3)
            .map(|i| (i, MongoError::new(ErrorCode::OutOfDiskSpace, long.clone())))
            .collect();
        let result = WriteResult {
            errors,
            ..WriteResult::default()
        };
        let reply = write_reply(result, false).expect("a reply");
        let errs = reply.get_array("writeErrors").expect("writeErrors");
        let lens: Vec<(i32, usize)> = errs
            .iter()
            .filter_map(Bson::as_document)
            .map(|e| {
                (
                    e.get_i32("code").unwrap_or(0),
                    e.get_str("errmsg").map_or(1, str::len),
                )
            })
            .collect();
        assert_eq!(
            lens,
            vec![(14031, 600 << 10), (14031, 600 << 10), (14031, 0)]
        );
    }
}
