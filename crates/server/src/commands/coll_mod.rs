//! `collMod`: changes a collection's validation settings (`validator`, `validationLevel`,
//! `validationAction`) and its change streams' pre- and post-images
//! (`changeStreamPreAndPostImages`; `shale_db::Database::set_collection_options`). mongod's
//! other `collMod` options (index changes, views, capped sizes) are not
//! built and are refused with `CommandNotSupported` (115), never accepted and ignored;
//! unknown fields are 40415. A time series collection's `collMod` (`expireAfterSeconds`,
//! `timeseries`) is `timeseries.rs`'s.

use super::data::namespace;
use super::{CommandResult, GENERIC_ARGUMENTS};
use crate::ConnectionCtx;
use bson::Document;
use shale_doc::{ErrorCode, MongoError};

/// The `collMod` options this server changes.
const CHANGED: &[&str] = &[
    "validator",
    "validationLevel",
    "validationAction",
    "changeStreamPreAndPostImages",
];

/// mongod's other `collMod` options.
const NOT_BUILT: &[&str] = &[
    "index",
    "viewOn",
    "pipeline",
    "expireAfterSeconds",
    "clusteredIndex",
    "timeseries",
    "cappedSize",
    "cappedMax",
    "timeseriesBucketsMayHaveMixedSchemaData",
];

pub fn coll_mod(ctx: &ConnectionCtx, db: &str, body: &Document) -> CommandResult {
    let ns = namespace(db, body, "collMod")?;
    if ctx.db.timeseries(&ns).is_some() {
        return super::timeseries::coll_mod(ctx, &ns, body);
    }
    let mut changes = Document::new();
    for (k, v) in body.iter().skip(1) {
        match k.as_str() {
            k if k.starts_with('$') || GENERIC_ARGUMENTS.contains(&k) => {}
            k if CHANGED.contains(&k) => {
                changes.insert(k, v.clone());
            }
            k if NOT_BUILT.contains(&k) => {
                return Err(MongoError::new(
                    ErrorCode::CommandNotSupported,
                    format!("collMod option '{k}' is not supported by shale"),
                ))
            }
            k => {
                return Err(MongoError::new(
                    ErrorCode::Location40415,
                    format!("BSON field 'collMod.{k}' is an unknown field."),
                ))
            }
        }
    }
    ctx.db.set_collection_options(&ns, &changes)?;
    Ok(Document::new())
}
