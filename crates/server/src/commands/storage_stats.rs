//! Sizes and checks of what is stored: `collStats`, `dbStats`, `validate`.

use super::data::{namespace, opt_i64};
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

pub fn validate(ctx: &ConnectionCtx, db: &str, body: &Document) -> CommandResult {
    let ns = namespace(db, body, "validate")?;
    ctx.db.validate(&ns)
}
