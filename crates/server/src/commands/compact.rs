//! `compact`: mongod rewrites a WiredTiger collection to hand free space back to the file
//! system. A ShaleDB tree needs no such pass: it writes nodes copy-on-write and punches the
//! blocks it retires out of its file (`shale-engine`'s block allocator), so the space a
//! delete frees goes back as the next checkpoint retires the old nodes. `compact` therefore
//! checks its collection as mongod does and answers mongod's reply with nothing freed.

use super::data::{namespace, wrong_type};
use super::CommandResult;
use crate::ConnectionCtx;
use bson::{doc, Bson, Document};
use shale_doc::{ErrorCode, MongoError};

/// `{compact: <collection>, force, freeSpaceTargetMB, dryRun}`: `{bytesFreed: 0}` (with
/// `dryRun`, `{estimatedBytesFreed: 0}`).
pub fn compact(ctx: &ConnectionCtx, db: &str, body: &Document) -> CommandResult {
    let ns = namespace(db, body, "compact")?;
    let mut dry_run = false;
    for (k, v) in body.iter().skip(1) {
        match (k.as_str(), v) {
            ("force" | "dryRun", Bson::Boolean(b)) => {
                if k == "dryRun" {
                    dry_run = *b;
                }
            }
            ("force" | "dryRun", other) => {
                return Err(wrong_type(&format!("compact.{k}"), other, "bool"))
            }
            // A threshold below which mongod skips the work: nothing is freed either way.
            ("freeSpaceTargetMB", Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_)) => {}
            ("freeSpaceTargetMB", other) => {
                return Err(wrong_type("compact.freeSpaceTargetMB", other, "long"))
            }
            (k, _) if super::GENERIC_ARGUMENTS.contains(&k) => {}
            (k, _) => {
                return Err(MongoError::new(
                    ErrorCode::Location40415,
                    format!("BSON field 'compact.{k}' is an unknown field."),
                ))
            }
        }
    }
    ctx.db.existing(&ns)?;
    Ok(if dry_run {
        doc! {"estimatedBytesFreed": 0_i64}
    } else {
        doc! {"bytesFreed": 0_i32}
    })
}
