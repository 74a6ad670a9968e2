//! The `engine` workload's summary: the headline figures of a run, and warnings where its
//! figures look wrong (engine counters disagreeing with `/proc/self/io`, more than one read
//! per point query, wrong values read back).

use super::{Params, Phase, MIB};
use crate::engine_txn::TxnRun;
use crate::report::num;
use serde::Serialize;

/// Minimum write volume over which the engine and the kernel are compared.
const COMPARE_MIN_BYTES: u64 = MIB;
/// Allowed disagreement between engine counters and `/proc/self/io` (DESIGN.md §6).
const COUNTER_TOLERANCE: f64 = 0.02;
const BASEMENT_NOTE: &str = "not available: shale-engine's public API exposes no per-basement \
     sizes (only aggregate I/O counters); compare bytes_per_read with the basement size option";

#[derive(Debug, Serialize)]
pub(super) struct Summary {
    pub(super) fill_random_ops_per_sec: f64,
    pub(super) fill_sequential_ops_per_sec: f64,
    pub(super) read_random_ops_per_sec: f64,
    pub(super) read_random_threads: usize,
    pub(super) read_random_reads_per_op: f64,
    pub(super) read_random_bytes_per_read: Option<f64>,
    pub(super) scan_ops_per_sec: f64,
    /// Commits/s of the txn phase at its largest thread count, with fsyncs per commit there.
    pub(super) txn_commits_per_sec_max_threads: f64,
    pub(super) txn_fsyncs_per_commit_max_threads: f64,
    pub(super) median_compressed_basement_bytes: Option<u64>,
    pub(super) median_compressed_basement_note: &'static str,
    /// Things that look wrong in the engine's figures.
    pub(super) warnings: Vec<String>,
}

/// The headline figures of a run and the warnings its phases raise.
pub(super) fn summarize(
    phases: &[Phase],
    txn: &[TxnRun],
    params: &Params,
    direct_io: bool,
) -> Summary {
    let by = |name: &str| phases.iter().find(|p| p.name == name);
    let rate = |name: &str| by(name).map_or(0.0, |p| p.ops_per_sec);
    let mut warnings = Vec::new();
    for p in phases {
        warnings.extend(phase_warnings(p, direct_io));
    }
    if let Some(s) = by("scan") {
        if s.ops != params.keys {
            warnings.push(format!(
                "scan: saw {} entries, {} were inserted",
                s.ops, params.keys
            ));
        }
    }
    let read = by("read-random");
    Summary {
        fill_random_ops_per_sec: rate("fill-random"),
        fill_sequential_ops_per_sec: rate("fill-sequential"),
        read_random_ops_per_sec: rate("read-random"),
        read_random_threads: params.read_threads,
        read_random_reads_per_op: read.map_or(0.0, |p| p.reads_per_op),
        read_random_bytes_per_read: read.and_then(|p| p.bytes_per_read),
        scan_ops_per_sec: rate("scan"),
        txn_commits_per_sec_max_threads: txn.last().map_or(0.0, |r| r.commits_per_sec),
        txn_fsyncs_per_commit_max_threads: txn.last().map_or(0.0, |r| r.fsyncs_per_commit),
        median_compressed_basement_bytes: None,
        median_compressed_basement_note: BASEMENT_NOTE,
        warnings,
    }
}

/// What looks wrong in one phase's figures.
pub(super) fn phase_warnings(p: &Phase, direct_io: bool) -> Vec<String> {
    let mut w = Vec::new();
    if let Some(os) = p.os_write_bytes {
        w.extend(counter_mismatch(
            p.name,
            "written",
            p.engine_bytes_written,
            os,
        ));
    }
    if let Some(os) = p.os_read_bytes.filter(|_| direct_io) {
        w.extend(counter_mismatch(p.name, "read", p.engine_bytes_read, os));
    }
    if p.name == "read-random" && p.reads_per_op > 1.0 {
        w.push(format!(
            "read-random: {} reads per point query (target <= 1.0)",
            num(p.reads_per_op)
        ));
    }
    if let Some(m) = p.misses.filter(|&m| m > 0) {
        w.push(format!(
            "{}: {m} gets returned no value or a wrong one",
            p.name
        ));
    }
    w
}

/// A warning when the engine's byte count and `/proc/self/io`'s differ by more than the
/// tolerance (counts too small to compare give none).
fn counter_mismatch(phase: &str, what: &str, engine: u64, os: u64) -> Option<String> {
    let ratio = engine as f64 / os.max(1) as f64;
    (engine.max(os) >= COMPARE_MIN_BYTES && (ratio - 1.0).abs() > COUNTER_TOLERANCE).then(|| {
        format!(
            "{phase}: engine counted {engine} bytes {what}, /proc/self/io {os} ({:+.1}%)",
            (ratio - 1.0) * 100.0
        )
    })
}
