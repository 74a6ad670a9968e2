//! Sizes and checks of what is stored: `collStats`, `dbStats`, `validate`.

use super::data::{namespace, opt_bool, opt_i64};
use super::CommandResult;
use crate::ConnectionCtx;
use bson::Document;
use shale_doc::{ErrorCode, MongoError};

fn scale(body: &Document, c: &str) -> Result<i64, MongoError> {
    match opt_i64(body, c, "scale")? {
        Some(s) if s < 1 => Err(MongoError::new(
            ErrorCode::BadValue,
            "Scale factor must be greater than zero",
        )),
        s => Ok(s.unwrap_or(1)),
    }
}

pub fn coll_stats(ctx: &ConnectionCtx, db: &str, body: &Document) -> CommandResult {
    let ns = namespace(db, body, "collStats")?;
    ctx.db.coll_stats(&ns, scale(body, "collStats")?)
}

/// `dbStats`; with `freeStorage: 1` also mongod's free-space figures, which are 0 here: a
/// tree punches the blocks it retires out of its file, so its file holds no reusable free
/// space (as `collStats.freeStorageSize` says).
pub fn db_stats(ctx: &ConnectionCtx, db: &str, body: &Document) -> CommandResult {
    let mut stats = ctx.db.db_stats(db, scale(body, "dbStats")?)?;
    if opt_i64(body, "dbStats", "freeStorage")?.is_some_and(|n| n != 0) {
        stats.insert("freeStorageSize", 0.0);
        stats.insert("indexFreeStorageSize", 0.0);
        stats.insert("totalFreeStorageSize", 0.0);
    }
    Ok(stats)
}

/// `validate`: every document and index entry checked, always (what `full` and
/// `checkBSONConformance` ask); `background` compares counters without correcting them,
/// `enforceFastCount` makes a wrong counter an error; `repair` and `metadata` (a repair in
/// place, a catalog-only check) are not built and are refused.
pub fn validate(ctx: &ConnectionCtx, db: &str, body: &Document) -> CommandResult {
    let ns = namespace(db, body, "validate")?;
    let flag = |f: &str| opt_bool(body, "validate", f).map(|v| v.unwrap_or(false));
    for unbuilt in ["repair", "metadata"] {
        if flag(unbuilt)? {
            return Err(MongoError::new(
                ErrorCode::NotImplemented,
                format!("validate option '{unbuilt}' is not supported by ShaleDB (offline repair: `shale repair`)"),
            ));
        }
    }
    let (full, _conformance) = (flag("full")?, flag("checkBSONConformance")?);
    let opts = shale_db::ValidateOptions {
        background: flag("background")?,
        enforce_fast_count: flag("enforceFastCount")?,
    };
    if opts.background && full {
        return Err(MongoError::new(
            ErrorCode::InvalidOptions,
            "Running the validate command with both { background: true } and { full: true } is not supported.",
        ));
    }
    ctx.db.validate_with(&ns, opts)
}
