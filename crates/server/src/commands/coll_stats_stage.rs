//! The `$collStats` aggregation stage (what mongosh's `db.coll.stats()`, `totalSize()` and
//! `latencyStats()` run): one document with `ns`, `host`, `localTime` and what the stage's
//! spec asks for — `storageStats` (the `collStats` figures at `scale`), `count`, and
//! `latencyStats` (time and operations by reads, writes, commands and transactions, from
//! `crate::top`) — which the rest of the pipeline then runs over. `queryExecStats` is not
//! built and is refused rather than answered with zeros.

use crate::ConnectionCtx;
use bson::{doc, Bson, Document, RawDocumentBuf};
use shale_db::Namespace;
use shale_doc::{ErrorCode, MongoError, Variables};

/// Whether `stages` start with `$collStats`; `$collStats` anywhere else is refused with
/// mongod's error.
pub fn leads(stages: &[Document]) -> Result<bool, MongoError> {
    let at = |s: &Document| s.keys().next().is_some_and(|k| k == "$collStats");
    if stages.iter().skip(1).any(at) {
        return Err(MongoError::new(
            ErrorCode::Location40602,
            "$collStats is only valid as the first stage in a pipeline",
        ));
    }
    Ok(stages.first().is_some_and(at))
}

/// Runs a pipeline led by `$collStats` on `ns`.
pub fn run(
    ctx: &ConnectionCtx,
    ns: &Namespace,
    stages: &[Document],
    vars: &Variables,
) -> Result<Vec<RawDocumentBuf>, MongoError> {
    if ctx.txn.is_some() {
        return Err(MongoError::new(
            ErrorCode::OperationNotSupportedInTransaction,
            "Operation not permitted in transaction :: caused by :: $collStats",
        ));
    }
    let spec = match stages[0].get("$collStats") {
        Some(Bson::Document(d)) => d,
        _ => {
            return Err(MongoError::new(
                ErrorCode::FailedToParse,
                "$collStats must take a nested object but found a different type",
            ))
        }
    };
    let stats = stats_document(ctx, ns, spec)?;
    let raw = RawDocumentBuf::from_document(&stats)
        .map_err(|e| MongoError::new(ErrorCode::InternalError, e.to_string()))?;
    ctx.db
        .aggregate_documents(&ns.db, &stages[1..], vec![raw], vars)
}

/// The stage's one document for `spec`.
fn stats_document(
    ctx: &ConnectionCtx,
    ns: &Namespace,
    spec: &Document,
) -> Result<Document, MongoError> {
    let mut out = doc! {
        "ns": ns.to_string(),
        "host": super::server_status::hostname(),
        "localTime": bson::DateTime::now(),
    };
    for (field, value) in spec {
        let Bson::Document(options) = value else {
            return Err(MongoError::new(
                ErrorCode::TypeMismatch,
                format!(
                    "BSON field '$collStats.{field}' is the wrong type, expected type 'object'"
                ),
            ));
        };
        match field.as_str() {
            "storageStats" => {
                let scale = scale(options)?;
                let mut stats = ctx
                    .db
                    .coll_stats(ns, scale)
                    .map_err(|e| caused_by("storageStats", e))?;
                stats.remove("ns");
                stats.insert("scaleFactor", scale as i32);
                out.insert("storageStats", stats);
            }
            "count" => {
                // The engine's exact counter: no need for the storage figures' node reads.
                let coll = ctx.db.existing(ns).map_err(|e| caused_by("count", e))?;
                let n = coll.docs.count().max(0);
                let n = i32::try_from(n).map_or(Bson::Int64(n), Bson::Int32);
                out.insert("count", n);
            }
            "latencyStats" => {
                if options.get_bool("histograms").unwrap_or(false) {
                    return Err(MongoError::new(
                        ErrorCode::NotImplemented,
                        "$collStats latencyStats histograms are not supported by ShaleDB",
                    ));
                }
                out.insert(
                    "latencyStats",
                    crate::top::latency_document(&ns.db, &ns.coll),
                );
            }
            "queryExecStats" => {
                return Err(MongoError::new(
                    ErrorCode::NotImplemented,
                    "$collStats queryExecStats is not supported by ShaleDB",
                ))
            }
            other => {
                return Err(MongoError::new(
                    ErrorCode::Location40415,
                    format!("BSON field '$collStats.{other}' is an unknown field."),
                ))
            }
        }
    }
    Ok(out)
}

/// `storageStats.scale`: a positive whole number (default 1).
fn scale(options: &Document) -> Result<i64, MongoError> {
    let n =
        match options.get("scale") {
            None => return Ok(1),
            Some(Bson::Int32(n)) => i64::from(*n),
            Some(Bson::Int64(n)) => *n,
            Some(Bson::Double(n)) if n.fract() == 0.0 => *n as i64,
            Some(_) => return Err(MongoError::new(
                ErrorCode::TypeMismatch,
                "BSON field '$collStats.storageStats.scale' is the wrong type, expected a number",
            )),
        };
    if n < 1 {
        return Err(MongoError::new(
            ErrorCode::BadValue,
            format!("BSON field 'scale' value must be >= 1, actual value '{n}'"),
        ));
    }
    Ok(n)
}

/// mongod's wording for a section that failed.
fn caused_by(section: &str, e: MongoError) -> MongoError {
    MongoError::new(
        e.code,
        format!(
            "Unable to retrieve {section} in $collStats stage :: caused by :: {}",
            e.message
        ),
    )
}
