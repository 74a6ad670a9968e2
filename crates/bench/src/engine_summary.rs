//! The `engine` workload's summary: the headline figures of a run, and warnings where its
//! figures miss a target or look wrong (engine counters disagreeing with `/proc/self/io`,
//! more than one read per point query or reads larger than a basement, peak RSS over the
//! cache + 64 MiB bound, wrong values read back).

use super::{Params, Phase, MIB};
use crate::engine_txn::TxnRun;
use crate::report::num;
use serde::Serialize;

/// Minimum write volume over which the engine and the kernel are compared.
const COMPARE_MIN_BYTES: u64 = MIB;
/// Allowed disagreement between engine counters and `/proc/self/io` (docs/design.md §6).
const COUNTER_TOLERANCE: f64 = 0.02;
/// Device I/O alignment the compressed basement size is rounded up to.
const IO_ALIGN: u64 = 4096;
/// How far a basement read may exceed the rounded basement size (issue 3: within 10%).
const BASEMENT_READ_TOLERANCE: f64 = 0.10;
/// Resident memory the engine may hold beyond its cache budget (issue 3).
const RSS_SLACK_BYTES: u64 = 64 * MIB;

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
    /// From `verify` of the random tree after the timed phases.
    pub(super) median_raw_basement_bytes: u64,
    pub(super) median_compressed_basement_bytes: u64,
    pub(super) median_compressed_basement_rounded_bytes: u64,
    /// What a point read of a uniformly chosen key should read for its basement: the
    /// rounded compressed basement sizes weighted by their entries (`TreeShape`).
    pub(super) expected_basement_read_bytes: u64,
    /// read-random's device bytes per basement read, and that over the expected read
    /// (`expected_basement_read_bytes`; the median understates it when sizes spread).
    pub(super) read_random_bytes_per_basement_read: Option<f64>,
    pub(super) basement_read_to_expected_read: Option<f64>,
    /// read-random's reads per get by kind (they sum to `read_random_reads_per_op`).
    pub(super) read_random_basement_reads_per_op: f64,
    pub(super) read_random_buffer_reads_per_op: f64,
    pub(super) read_random_header_reads_per_op: f64,
    /// Messages buffered in internal nodes per entry of the random tree after the phases
    /// (a point lookup of a key with a pending message must see its buffer).
    pub(super) buffered_messages_per_entry: f64,
    /// Largest `rss_peak_over_baseline_bytes` of any phase.
    pub(super) rss_peak_over_baseline_bytes: Option<u64>,
    /// Things that look wrong in the engine's figures.
    pub(super) warnings: Vec<String>,
}

/// The headline figures of a run and the warnings its phases raise.
pub(super) fn summarize(
    phases: &[Phase],
    txn: &[TxnRun],
    params: &Params,
    shape: &shale_engine::TreeShape,
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
    let rounded = shape.median_stored_basement_bytes.div_ceil(IO_ALIGN) * IO_ALIGN;
    let expected = shape.mean_read_basement_bytes;
    let per_basement_read = read.and_then(|p| p.bytes_per_basement_read);
    let basement_ratio = per_basement_read
        .filter(|_| expected > 0)
        .map(|b| b / expected as f64);
    if let Some(r) = basement_ratio.filter(|&r| r > 1.0 + BASEMENT_READ_TOLERANCE) {
        warnings.push(format!(
            "read-random: a basement read is {r:.2}x the compressed basement rounded to 4 KiB, \
             weighted by entries (target <= {:.2})",
            1.0 + BASEMENT_READ_TOLERANCE
        ));
    }
    let rss_over = phases
        .iter()
        .filter_map(|p| p.rss_peak_over_baseline_bytes)
        .max();
    if let Some(r) = rss_over.filter(|&r| r > params.cache_bytes + RSS_SLACK_BYTES) {
        warnings.push(format!(
            "peak RSS over the pre-open baseline is {:.1} MiB (target <= cache + 64 MiB = {:.1} MiB)",
            r as f64 / MIB as f64,
            (params.cache_bytes + RSS_SLACK_BYTES) as f64 / MIB as f64
        ));
    }
    let per_get = |f: fn(&Phase) -> u64| read.map_or(0.0, |p| f(p) as f64 / p.ops.max(1) as f64);
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
        median_raw_basement_bytes: shape.median_basement_bytes,
        median_compressed_basement_bytes: shape.median_stored_basement_bytes,
        median_compressed_basement_rounded_bytes: rounded,
        expected_basement_read_bytes: expected,
        read_random_bytes_per_basement_read: per_basement_read,
        basement_read_to_expected_read: basement_ratio,
        read_random_basement_reads_per_op: per_get(|p| p.basements_read),
        read_random_buffer_reads_per_op: per_get(|p| p.buffers_read),
        read_random_header_reads_per_op: per_get(|p| p.headers_read),
        buffered_messages_per_entry: shape.buffered_messages as f64 / shape.entries.max(1) as f64,
        rss_peak_over_baseline_bytes: rss_over,
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
