//! `serverStatus`: process facts, connection and network counters (mongod's `connections`
//! and `network`, with wire-compression bytes per compressor), plus the storage engine's
//! counters under `shale.engine`, the figures that benchmarks compare with what the
//! operating system reports.

use super::CommandResult;
use crate::ConnectionCtx;
use bson::{doc, Document};
use shale_db::engine_counters_document;
use std::sync::OnceLock;
use std::time::Instant;

static STARTED: OnceLock<Instant> = OnceLock::new();

/// Records the process start (called when the server starts listening).
pub fn mark_started() {
    STARTED.get_or_init(Instant::now);
}

pub fn server_status(ctx: &ConnectionCtx, _db: &str, _body: &Document) -> CommandResult {
    let uptime = STARTED.get_or_init(Instant::now).elapsed();
    Ok(doc! {
        "host": hostname(),
        "version": super::diagnostics::COMPATIBLE_VERSION,
        "process": "shale",
        "pid": std::process::id() as i64,
        "uptime": uptime.as_secs_f64().floor(),
        "uptimeMillis": uptime.as_millis() as i64,
        "localTime": bson::DateTime::now(),
        "connections": crate::net_stats::connections_document(),
        "network": crate::net_stats::network_document(),
        "storageEngine": { "name": "shale", "supportsCommittedReads": true, "persistent": true },
        "shale": { "engine": engine_counters_document(&ctx.db.engine().counters()) },
    })
}

pub(crate) fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "localhost".into())
}
