//! Diagnostic commands that report on the server itself: `ping`, `buildInfo`.

use super::CommandResult;
use crate::wire::MAX_BSON_OBJECT_BYTES;
use crate::ConnectionCtx;
use bson::{doc, Document};

/// The MongoDB release whose behaviour we implement and report.
pub const COMPATIBLE_VERSION: &str = "7.0.0";
const COMPATIBLE_VERSION_ARRAY: [i32; 4] = [7, 0, 0, 0];

pub fn ping(_ctx: &ConnectionCtx, _db: &str, _body: &Document) -> CommandResult {
    Ok(Document::new())
}

pub fn build_info(_ctx: &ConnectionCtx, _db: &str, _body: &Document) -> CommandResult {
    Ok(doc! {
        "version": COMPATIBLE_VERSION,
        "versionArray": COMPATIBLE_VERSION_ARRAY.to_vec(),
        "shaleVersion": env!("CARGO_PKG_VERSION"),
        "gitVersion": "unknown",
        "modules": [],
        "allocator": "system",
        "javascriptEngine": "none",
        "sysInfo": "deprecated",
        "bits": 64,
        "debug": cfg!(debug_assertions),
        "maxBsonObjectSize": MAX_BSON_OBJECT_BYTES as i32,
        "storageEngines": ["shale"],
        "openssl": { "running": "disabled", "compiled": "disabled" },
    })
}
