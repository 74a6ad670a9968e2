//! `serverStatus`: process facts, connection and network counters (mongod's `connections`
//! and `network`, with wire-compression bytes per compressor), the operation counters
//! mongostat and the exporters read (`opcounters`, `opcountersRepl`, `asserts`,
//! `metrics.document`, `metrics.cursor`; `crate::op_counters`), `mem` from the kernel's view
//! of the process, plus the storage engine's counters under `shale.engine`, the figures that
//! benchmarks compare with what the operating system reports, the in-flight request budget
//! under `shale.inflightRequests` (`crate::inflight`) and fast updates' counters under
//! `shale.fastUpdates`, and `globalLock` (`crate::top`: commands running now; nothing
//! queues behind a global lock). `locks` and `wiredTiger` are not reported. Also `top`, the
//! per-collection usage `mongotop` polls.

use super::CommandResult;
use crate::{op_counters, ConnectionCtx};
use bson::{doc, Bson, Document};
use shale_db::engine_counters_document;
use std::sync::OnceLock;
use std::time::Instant;

static STARTED: OnceLock<Instant> = OnceLock::new();

/// Records the process start (called when the server starts listening).
pub fn mark_started() {
    STARTED.get_or_init(Instant::now);
}

/// `top` (admin only): time and count per collection by mongod's event types.
pub fn top(_ctx: &ConnectionCtx, db: &str, _body: &Document) -> CommandResult {
    super::require_admin(db, "top")?;
    Ok(doc! {"totals": crate::top::totals_document()})
}

/// The fields of `serverStatus` that are not sections: always sent, whatever the command
/// asks, as mongod sends them.
const BASIC_FIELDS: &[&str] = &[
    "host",
    "version",
    "process",
    "pid",
    "uptime",
    "uptimeMillis",
    "uptimeEstimate",
    "localTime",
];

/// `serverStatus`; a section the command sets to 0 or false (`{serverStatus: 1, metrics: 0}`)
/// is left out, as mongod leaves it out.
pub fn server_status(ctx: &ConnectionCtx, db: &str, body: &Document) -> CommandResult {
    let mut status = full_status(ctx, db)?;
    for (k, v) in body.iter().skip(1) {
        let off = matches!(v, Bson::Boolean(false))
            || matches!(v, Bson::Int32(0) | Bson::Int64(0))
            || matches!(v, Bson::Double(n) if *n == 0.0);
        if off && !BASIC_FIELDS.contains(&k.as_str()) {
            status.remove(k);
        }
    }
    Ok(status)
}

fn full_status(ctx: &ConnectionCtx, _db: &str) -> CommandResult {
    let uptime = STARTED.get_or_init(Instant::now).elapsed();
    Ok(doc! {
        "host": host_and_port(ctx),
        "version": super::diagnostics::COMPATIBLE_VERSION,
        "process": "shale",
        "pid": std::process::id() as i64,
        "uptime": uptime.as_secs_f64().floor(),
        "uptimeMillis": uptime.as_millis() as i64,
        "uptimeEstimate": uptime.as_secs() as i64,
        "localTime": bson::DateTime::now(),
        "asserts": op_counters::asserts_document(),
        "globalLock": crate::top::global_lock_document(uptime),
        "connections": crate::net_stats::connections_document(ctx.server.max_connections),
        "mem": mem_document(),
        "network": crate::net_stats::network_document(),
        "opcounters": op_counters::opcounters_document(),
        "opcountersRepl": op_counters::opcounters_repl_document(),
        "metrics": {
            "cursor": cursor_metrics(ctx),
            "document": op_counters::document_metrics(),
            "ttl": crate::ttl_monitor::metrics_document(),
        },
        "storageEngine": { "name": "shale", "supportsCommittedReads": true, "persistent": true },
        "shale": {
            "engine": engine_counters_document(&ctx.db.engine().counters()),
            "inflightRequests": {
                "limitBytes": crate::inflight::limit() as i64,
                "inUseBytes": crate::inflight::in_use() as i64,
            },
            "fastUpdates": fast_update_counts(ctx),
        },
    })
}

/// `shale.fastUpdates`: update messages sent by fast updates, and the merge callback's
/// applications that changed a document and that left one unchanged (an update that could
/// not apply, TokuMX's `fastupdates.errors`); a message folded by a reader and later at its
/// leaf counts twice.
fn fast_update_counts(ctx: &ConnectionCtx) -> Document {
    let (sent, applied, errors) = ctx.db.fast_update_counts();
    doc! {
        "enabled": ctx.db.fast_updates(),
        "sent": sent as i64,
        "applied": applied as i64,
        "errors": errors as i64,
    }
}

/// `metrics.cursor`: open cursors (none is exempt from the timeout) and those timed out.
fn cursor_metrics(ctx: &ConnectionCtx) -> Document {
    let cursors = ctx.db.cursors();
    doc! {
        "timedOut": cursors.timed_out() as i64,
        "open": { "noTimeout": 0i64, "total": cursors.len() as i64 },
    }
}

/// `mem`: resident and virtual size in MiB, as mongod reports them.
fn mem_document() -> Document {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    // mongod's `ProcessInfo` sizes are ints.
    let mib = |field: &str| {
        status_kib(&status, field).map(|kib| shale_doc::append_number((kib / 1024) as i64))
    };
    match (mib("VmRSS:"), mib("VmSize:")) {
        (Some(resident), Some(virt)) => doc! {
            "bits": 64i32, "resident": resident, "virtual": virt, "supported": true,
        },
        _ => doc! { "bits": 64i32, "supported": false },
    }
}

/// A `/proc/<pid>/status` line's value in KiB (`VmRSS:   1234 kB`).
fn status_kib(status: &str, field: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with(field))?;
    line[field.len()..].split_whitespace().next()?.parse().ok()
}

/// The port clients reach this server on: the one this connection came in on (27017, the
/// default, for a context with no socket behind it).
pub(crate) fn port(ctx: &ConnectionCtx) -> u16 {
    ctx.local.map_or(DEFAULT_PORT, |a| a.port())
}

const DEFAULT_PORT: u16 = 27017;

/// mongod's `prettyHostName`: the host name, with `:port` unless the port is the default.
pub(crate) fn host_and_port(ctx: &ConnectionCtx) -> String {
    match port(ctx) {
        DEFAULT_PORT => hostname(),
        p => format!("{}:{p}", hostname()),
    }
}

pub(crate) fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "localhost".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines_parse_in_kib() {
        let s = "Name:\tshale\nVmSize:\t  204800 kB\nVmRSS:\t   10240 kB\n";
        assert_eq!(status_kib(s, "VmRSS:"), Some(10240));
        assert_eq!(status_kib(s, "VmSize:"), Some(204800));
        assert_eq!(status_kib(s, "VmSwap:"), None);
        assert_eq!(mem_document().get_bool("supported"), Ok(true));
    }
}
