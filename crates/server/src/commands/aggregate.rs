//! `aggregate`: the cursor form (`cursor: {batchSize}`; without one the command is refused as
//! mongod 3.6+ refuses it, pre-3.6 drivers' inline `{result: [...]}` form included);
//! `explain: true` shows how the pipeline's leading stages are planned. `{aggregate: 1}` serves pipelines led
//! by `$listLocalSessions` (`list_local_sessions.rs`), `$currentOp` (`current_op.rs`, on
//! `admin`) or `$documents`; a collection's pipeline
//! led by `$collStats` starts from that stage's document (`coll_stats_stage.rs`). A pipeline ending in
//! `$out`/`$merge` writes its results and answers with an empty cursor. A pipeline led by
//! `$changeStream` opens a change stream (`change_stream.rs`).

use super::data::{
    command_vars, cursor_reply_raw, missing, namespace, opt_bool, opt_count, opt_doc, opt_hint,
    wrong_type,
};
use super::pipeline_as_sent::matches_as_sent;
use super::{
    change_stream, coll_stats_stage, current_op, list_local_sessions, CommandResult, RawResult,
};
use crate::command::{raw_of, Command};
use crate::ConnectionCtx;
use bson::{Bson, Document, RawDocumentBuf};
use shale_db::VecSource;
use shale_doc::{ErrorCode, MongoError};

/// `aggregate`; its pipeline's `$match` stages read as sent (`pipeline_as_sent.rs`), the
/// rest of the command decoded.
pub fn aggregate(ctx: &ConnectionCtx, db: &str, cmd: &Command<'_>) -> RawResult {
    let body = cmd.doc()?;
    refuse_unbuilt(body)?;
    if opt_bool(body, "aggregate", "explain")? != Some(true) {
        cursor(body)?;
    }
    let mut stages = pipeline(body)?;
    matches_as_sent(cmd, &mut stages)?;
    let collectionless = matches!(
        body.get("aggregate"),
        Some(Bson::Int32(1) | Bson::Int64(1) | Bson::Double(_))
    );
    list_local_sessions::check_placement(&stages, !collectionless)?;
    current_op::check_placement(&stages, db, collectionless)?;
    if change_stream::leads(&stages)? {
        return owned(change_stream::run(ctx, db, body, &stages, collectionless));
    }
    if collectionless {
        return aggregate_database(ctx, db, body, &stages);
    }
    let ns = namespace(db, body, "aggregate")?;
    let hint = opt_hint(body)?;
    let vars = command_vars(body, "aggregate")?;
    if coll_stats_stage::leads(&stages)? {
        let results = coll_stats_stage::run(ctx, &ns, &stages, &vars)?;
        return reply(ctx, &ns.to_string(), results, cursor(body)?);
    }
    if opt_bool(body, "aggregate", "explain")?.unwrap_or(false) {
        if ctx.txn.is_some() {
            return Err(MongoError::new(
                ErrorCode::OperationNotSupportedInTransaction,
                "Cannot run 'explain' in a multi-document transaction.",
            ));
        }
        // The plan a run with the same hint would use.
        return owned(ctx.db.explain_aggregate(&ns, &stages, hint, &vars));
    }
    let cursor = cursor(body)?;
    let results = match &ctx.txn {
        Some(t) => ctx.db.aggregate_in(t, &ns, &stages, hint, &vars)?,
        None => ctx.db.aggregate(&ns, &stages, hint, &vars)?,
    };
    reply(ctx, &ns.to_string(), results, cursor)
}

/// `explain` of an `aggregate` on a collection: the plan `explain: true` shows, its
/// `$match` stages read as sent, as the command reads them.
pub fn explain_inner(ctx: &ConnectionCtx, db: &str, inner: &Command<'_>) -> CommandResult {
    let body = inner.doc()?;
    let mut stages = pipeline(body)?;
    matches_as_sent(inner, &mut stages)?;
    let ns = namespace(db, body, "aggregate")?;
    if change_stream::leads(&stages)? || coll_stats_stage::leads(&stages)? {
        return Err(MongoError::new(
            ErrorCode::NotImplemented,
            "explain of this pipeline's first stage is not supported",
        ));
    }
    let vars = command_vars(body, "aggregate")?;
    ctx.db
        .explain_aggregate(&ns, &stages, opt_hint(body)?, &vars)
}

/// `{aggregate: 1}`: a pipeline led by `$listLocalSessions` (served here, from the session
/// table), by `$currentOp` (from the registry of operations in flight) or by `$documents`
/// (served by the database); any other first stage needs a
/// collection (`InvalidNamespace`).
fn aggregate_database(
    ctx: &ConnectionCtx,
    db: &str,
    body: &Document,
    stages: &[Document],
) -> RawResult {
    let cursor = cursor(body)?;
    let vars = command_vars(body, "aggregate")?;
    let results = if list_local_sessions::leads(stages) {
        list_local_sessions::run(ctx, db, stages, &vars)?
    } else if current_op::leads(stages) {
        current_op::run(ctx, stages, &vars)?
    } else {
        if ctx.txn.is_some() {
            return Err(MongoError::new(
                ErrorCode::OperationNotSupportedInTransaction,
                "database-level aggregation cannot run in a transaction",
            ));
        }
        ctx.db.aggregate_collectionless(db, stages, &vars)?
    };
    reply(ctx, &format!("{db}.$cmd.aggregate"), results, cursor)
}

/// The parsed `pipeline` array.
fn pipeline(body: &Document) -> Result<Vec<Document>, MongoError> {
    match body.get("pipeline") {
        Some(Bson::Array(a)) => super::data::stage_documents(a),
        Some(other) => Err(wrong_type("aggregate.pipeline", other, "array")),
        None => Err(missing("aggregate.pipeline")),
    }
}

/// An owned reply (explain, change streams) as the raw one this command answers with.
fn owned(reply: CommandResult) -> RawResult {
    reply.and_then(|d| raw_of(&d))
}

/// The `cursor` option, which every aggregate but an explain must give (mongod 3.6+).
fn cursor(body: &Document) -> Result<&Document, MongoError> {
    opt_doc(body, "aggregate", "cursor")?.ok_or_else(|| {
        MongoError::new(
            ErrorCode::FailedToParse,
            "The 'cursor' option is required, except for aggregate with the explain argument",
        )
    })
}

/// Options that would change the result and are not built: resuming a scan by record id
/// (`$_requestResumeToken`, `$_resumeAfter`; a scan here has no record ids to resume from).
fn refuse_unbuilt(body: &Document) -> Result<(), MongoError> {
    let asked = |k: &str| match body.get(k) {
        None | Some(Bson::Null) | Some(Bson::Boolean(false)) => false,
        Some(_) => true,
    };
    match ["$_requestResumeToken", "$_resumeAfter"]
        .into_iter()
        .find(|k| asked(k))
    {
        Some(option) => Err(MongoError::new(
            ErrorCode::NotImplemented,
            format!("aggregate option '{option}' is not supported by ShaleDB"),
        )),
        None => Ok(()),
    }
}

/// Results as a cursor (`cursor: {batchSize}`); the documents as the pipeline produced
/// them, never decoded (a name a stored document repeats stays repeated, as on mongod).
fn reply(
    ctx: &ConnectionCtx,
    ns: &str,
    results: Vec<RawDocumentBuf>,
    cursor: &Document,
) -> RawResult {
    let batch_size = opt_count(cursor, "aggregate.cursor", "batchSize")?.map(|n| n as usize);
    let source = Box::new(VecSource(results.into_iter()));
    let batch = ctx
        .db
        .cursors()
        .first_batch(ns, source, batch_size, false, ctx.cursor_owner())?;
    Ok(cursor_reply_raw(ns, batch, "firstBatch"))
}
