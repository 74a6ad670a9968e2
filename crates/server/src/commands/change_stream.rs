//! `aggregate` led by `$changeStream` (issue 24 item 7): on a collection, on a database
//! (`aggregate: 1`) or on the deployment (`allChangesForCluster` on `admin`). The stream is
//! a cursor over the oplog (`shale_db::change_stream`); each batch carries its
//! `postBatchResumeToken`, and a getMore waits up to its `maxTimeMS` (the driver's
//! `maxAwaitTimeMS`) for events. A collection stream's cursor is on `<db>.<coll>`, the others'
//! on `<db>.$cmd.aggregate`, as mongod names them.

use super::data::{command_vars, cursor_reply, namespace, opt_bool, opt_count, opt_doc};
use super::CommandResult;
use crate::ConnectionCtx;
use bson::{Bson, Document};
use shale_db::change_stream::{ChangeStreamSpec, Scope};
use shale_doc::{ErrorCode, MongoError};

/// Whether a pipeline starts with `$changeStream`; one that has it later is refused (40602).
pub fn leads(stages: &[Document]) -> Result<bool, MongoError> {
    if stages
        .iter()
        .skip(1)
        .any(|s| s.contains_key("$changeStream"))
    {
        return Err(MongoError::new(
            ErrorCode::Location40602,
            "$changeStream is only valid as the first stage in a pipeline",
        ));
    }
    Ok(stages
        .first()
        .is_some_and(|s| s.contains_key("$changeStream")))
}

/// Codes after which a driver resumes a change stream (mongod labels a getMore's error
/// with `ResumableChangeStreamError` for them): network, not-primary, shutdown, stale
/// routing and `RetryChangeStream` errors.
const RESUMABLE: [ErrorCode; 17] = [
    ErrorCode::HostUnreachable,
    ErrorCode::HostNotFound,
    ErrorCode::NetworkTimeout,
    ErrorCode::ShutdownInProgress,
    ErrorCode::PrimarySteppedDown,
    ErrorCode::ExceededTimeLimit,
    ErrorCode::SocketException,
    ErrorCode::NotWritablePrimary,
    ErrorCode::InterruptedAtShutdown,
    ErrorCode::InterruptedDueToReplStateChange,
    ErrorCode::NotPrimaryNoSecondaryOk,
    ErrorCode::NotPrimaryOrSecondary,
    ErrorCode::StaleShardVersion,
    ErrorCode::StaleEpoch,
    ErrorCode::StaleConfig,
    ErrorCode::RetryChangeStream,
    ErrorCode::FailedToSatisfyReadPreference,
];

/// Adds mongod's change-stream error label to `e`: `NonResumableChangeStreamError` for a
/// stream that cannot go on (280, 286), and, on a getMore (`get_more`),
/// `ResumableChangeStreamError` for the codes a driver resumes after.
pub fn label(e: MongoError, get_more: bool) -> MongoError {
    let label = match e.code {
        ErrorCode::ChangeStreamFatalError | ErrorCode::ChangeStreamHistoryLost => {
            "NonResumableChangeStreamError"
        }
        c if get_more && RESUMABLE.contains(&c) => "ResumableChangeStreamError",
        _ => return e,
    };
    let mut info = e.info.as_deref().cloned().unwrap_or_default();
    info.insert("errorLabels", vec![Bson::from(label)]);
    e.with_info(info)
}

/// The error `failGetMoreAfterCursorCheckout` injects into a getMore (`data.errorCode`).
pub fn injected_get_more_error(data: &Document) -> MongoError {
    let code = crate::fail_point::integer(data, "errorCode")
        .and_then(|c| i32::try_from(c).ok())
        .and_then(ErrorCode::from_code)
        .unwrap_or(ErrorCode::InternalError);
    MongoError::new(code, "Hit the 'failGetMoreAfterCursorCheckout' failpoint")
}

/// Opens the stream and answers its first batch.
pub fn run(
    ctx: &ConnectionCtx,
    db: &str,
    body: &Document,
    stages: &[Document],
    collectionless: bool,
) -> CommandResult {
    if ctx.txn.is_some() {
        return Err(MongoError::new(
            ErrorCode::OperationNotSupportedInTransaction,
            "Operation not permitted in transaction :: caused by :: $changeStream is not \
             permitted in a multi-document transaction",
        ));
    }
    if opt_bool(body, "aggregate", "explain")?.unwrap_or(false) {
        return Err(MongoError::new(
            ErrorCode::NotImplemented,
            "explain of a $changeStream is not supported by ShaleDB",
        ));
    }
    check_read_concern(body)?;
    let stage = stages
        .first()
        .and_then(|s| s.get("$changeStream"))
        .unwrap_or(&Bson::Null);
    let spec = ChangeStreamSpec::parse(stage)?;
    let (scope, ns) = if collectionless {
        if spec.all_changes_for_cluster && db == "admin" {
            (Scope::Cluster, "admin.$cmd.aggregate".to_owned())
        } else {
            (
                Scope::Database(db.to_owned()),
                format!("{db}.$cmd.aggregate"),
            )
        }
    } else {
        let ns = namespace(db, body, "aggregate")?;
        let name = ns.to_string();
        (Scope::Collection(ns), name)
    };
    let vars = command_vars(body, "aggregate")?;
    let source = ctx
        .db
        .open_change_stream(scope, spec, &stages[1..], &vars)
        .map_err(|e| label(e, false))?;
    let cursor = opt_doc(body, "aggregate", "cursor")?;
    let batch_size = match cursor {
        Some(c) => opt_count(c, "aggregate.cursor", "batchSize")?.map(|n| n as usize),
        None => None,
    };
    let batch = ctx
        .db
        .cursors()
        .first_batch(&ns, Box::new(source), batch_size, false, ctx.cursor_owner())
        .map_err(|e| label(e, false))?;
    cursor_reply(&ns, batch, "firstBatch")
}

/// A change stream reads at `majority` (mongod upgrades an unspecified level to it); an
/// explicit other level is refused, as mongod refuses it.
fn check_read_concern(body: &Document) -> Result<(), MongoError> {
    let level = match body.get("readConcern") {
        Some(Bson::Document(rc)) => rc.get_str("level").ok(),
        _ => None,
    };
    match level {
        None | Some("majority") => Ok(()),
        Some(other) => Err(MongoError::new(
            ErrorCode::InvalidOptions,
            format!(
                "Aggregation stage $changeStream cannot run with a readConcern other than                  'majority'. Current readConcern: {other}"
            ),
        )),
    }
}
