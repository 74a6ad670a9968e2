//! What the engine workload's peers share (RocksDB in `peer_rocksdb.rs`, SQLite as the
//! B-tree in `peer_sqlite.rs`): the figures of one peer phase, how they are measured from the
//! process's counters, the shale ÷ peer ratios, and the two printed tables. A peer's own
//! settings and its way of running the phases stay in its file.

use super::print::{mib, opt};
use super::{Phase as ShalePhase, Progress};
use crate::report::{num, Table};
use serde::Serialize;
use shale_io::proc_io::{self, ProcIo};
use std::path::Path;
use std::time::Instant;

/// The figures of one peer phase, named as in shale's phases.
#[derive(Debug, Clone, Serialize)]
pub(super) struct PeerPhase {
    pub(super) name: &'static str,
    pub(super) ops: u64,
    pub(super) seconds: f64,
    pub(super) ops_per_sec: f64,
    /// User + system CPU seconds of the process from the phase's start to its end, a
    /// RocksDB fill's compaction wait included (its background threads work then).
    pub(super) cpu_seconds: Option<f64>,
    pub(super) cpu_us_per_op: Option<f64>,
    /// The user-mode part of `cpu_us_per_op`.
    pub(super) user_cpu_us_per_op: Option<f64>,
    pub(super) logical_bytes: u64,
    /// The engine's own count of bytes written (RocksDB: WAL + flush + compaction, from its
    /// statistics); null where the engine keeps none (SQLite).
    pub(super) engine_bytes_written: Option<u64>,
    /// `write_bytes` of `/proc/self/io` over the phase (including `settle_seconds`).
    pub(super) os_write_bytes: Option<u64>,
    pub(super) write_ratio_engine_to_os: Option<f64>,
    pub(super) os_read_bytes: Option<u64>,
    /// Blocks or pages the engine read from its files (RocksDB: block cache misses;
    /// SQLite: page cache misses of its connections).
    pub(super) engine_reads: Option<u64>,
    pub(super) reads_per_op: Option<f64>,
    /// read-random: the device's rate just before the phase and this phase's device reads
    /// per second as a fraction of it (`read_probe.rs`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) device_probe: Option<crate::read_probe::DeviceProbe>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) fraction_of_device_reads: Option<f64>,
    /// `os_read_bytes / engine_reads`: the device bytes per engine read. RocksDB's reads
    /// are O_DIRECT, so the kernel sees them all; SQLite's are buffered, so a figure under
    /// its page size means some reads were served by the OS page cache.
    pub(super) bytes_per_read: Option<f64>,
    /// Bytes of the files in the database directory at the phase's end.
    pub(super) db_bytes_on_disk: u64,
    /// `VmHWM` of the process, which ran shale first: only meaningful if above shale's.
    pub(super) rss_peak_bytes: Option<u64>,
    pub(super) cache_bytes: u64,
    /// RocksDB fills: seconds spent waiting for background compactions, not in `seconds`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) settle_seconds: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) threads: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) misses: Option<u64>,
}

/// The process's counters at the start of a peer phase.
pub(super) struct PeerStart {
    pub(super) at: Instant,
    cpu: Option<f64>,
    user_cpu: Option<f64>,
    os: Option<ProcIo>,
}

impl PeerStart {
    pub(super) fn now() -> PeerStart {
        PeerStart {
            os: proc_io::read_self(),
            cpu: crate::process::cpu_seconds(),
            user_cpu: crate::process::user_cpu_seconds(),
            at: Instant::now(),
        }
    }
}

/// What a peer knows at the end of a phase beyond the process's counters.
pub(super) struct PeerEnd<'a> {
    pub(super) name: &'static str,
    pub(super) ops: u64,
    pub(super) logical_bytes: u64,
    /// Passed in because a RocksDB fill's time excludes its compaction wait.
    pub(super) seconds: f64,
    pub(super) engine_bytes_written: Option<u64>,
    pub(super) engine_reads: Option<u64>,
    pub(super) path: &'a Path,
    pub(super) cache_bytes: u64,
}

impl PeerPhase {
    /// Builds a phase from the counters at its start and now.
    pub(super) fn measure(start: &PeerStart, end: PeerEnd<'_>) -> PeerPhase {
        let cpu_seconds = start
            .cpu
            .zip(crate::process::cpu_seconds())
            .map(|(a, b)| b - a);
        let user_cpu_seconds = start
            .user_cpu
            .zip(crate::process::user_cpu_seconds())
            .map(|(a, b)| b - a);
        let os = start.os.zip(proc_io::read_self()).map(|(a, b)| b.since(&a));
        let os_write_bytes = os.map(|o| o.write_bytes);
        let os_read_bytes = os.map(|o| o.read_bytes);
        let ops = end.ops;
        PeerPhase {
            name: end.name,
            ops,
            seconds: end.seconds,
            ops_per_sec: ops as f64 / end.seconds.max(1e-9),
            cpu_seconds,
            cpu_us_per_op: cpu_seconds
                .filter(|_| ops > 0)
                .map(|c| c * 1e6 / ops as f64),
            user_cpu_us_per_op: user_cpu_seconds
                .filter(|_| ops > 0)
                .map(|c| c * 1e6 / ops as f64),
            logical_bytes: end.logical_bytes,
            engine_bytes_written: end.engine_bytes_written,
            os_write_bytes,
            write_ratio_engine_to_os: end
                .engine_bytes_written
                .zip(os_write_bytes.filter(|&o| o > 0))
                .map(|(e, o)| e as f64 / o as f64),
            os_read_bytes,
            engine_reads: end.engine_reads,
            reads_per_op: end
                .engine_reads
                .filter(|_| ops > 0)
                .map(|r| r as f64 / ops as f64),
            device_probe: None,
            fraction_of_device_reads: None,
            bytes_per_read: end
                .engine_reads
                .filter(|&r| r > 0)
                .zip(os_read_bytes)
                .map(|(r, b)| b as f64 / r as f64),
            db_bytes_on_disk: shale_io::dir_disk_bytes(end.path),
            rss_peak_bytes: crate::process::rss_peak_bytes(),
            cache_bytes: end.cache_bytes,
            settle_seconds: None,
            threads: None,
            misses: None,
        }
    }
}

/// Shale's figures divided by a peer's, per phase (above 1 means shale is higher).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(super) struct Ratios {
    name: &'static str,
    /// shale ops/s ÷ peer ops/s.
    ops_per_sec: Option<f64>,
    /// shale ops/s ÷ the peer's ops over its phase plus `settle_seconds` (its compaction
    /// until it settles): the ratio issue 22 judges fills by. Equal to `ops_per_sec` for a
    /// phase with no settle; shale's own phases include their closing checkpoint.
    ops_per_sec_incl_settle: Option<f64>,
    /// shale CPU µs per op ÷ the peer's (above 1: shale spends more CPU per operation).
    cpu_us_per_op: Option<f64>,
    /// The same for user-mode CPU only (the engines' own work, without the kernel's).
    user_cpu_us_per_op: Option<f64>,
    /// (shale os_write_bytes / logical) ÷ (peer os_write_bytes / logical).
    os_write_bytes_per_logical: Option<f64>,
    /// shale db_bytes_on_disk ÷ peer db_bytes_on_disk.
    db_bytes_on_disk: Option<f64>,
}

fn div(a: f64, b: f64) -> Option<f64> {
    (b > 0.0 && a.is_finite() && b.is_finite()).then(|| a / b)
}

fn ratios(shale: &ShalePhase, peer: &PeerPhase) -> Ratios {
    let per_logical = |w: Option<u64>, logical: u64| w.and_then(|w| div(w as f64, logical as f64));
    Ratios {
        name: peer.name,
        ops_per_sec: div(shale.ops_per_sec, peer.ops_per_sec),
        ops_per_sec_incl_settle: div(
            shale.ops_per_sec,
            peer.ops as f64 / (peer.seconds + peer.settle_seconds.unwrap_or(0.0)),
        ),
        cpu_us_per_op: shale
            .cpu_us_per_op
            .zip(peer.cpu_us_per_op)
            .and_then(|(s, r)| div(s, r)),
        user_cpu_us_per_op: shale
            .user_cpu_us_per_op
            .zip(peer.user_cpu_us_per_op)
            .and_then(|(s, r)| div(s, r)),
        os_write_bytes_per_logical: per_logical(shale.os_write_bytes, shale.logical_bytes)
            .zip(per_logical(peer.os_write_bytes, peer.logical_bytes))
            .and_then(|(s, r)| div(s, r)),
        db_bytes_on_disk: div(shale.db_bytes_on_disk as f64, peer.db_bytes_on_disk as f64),
    }
}

/// The ratios of every peer phase that shale also ran.
pub(super) fn compare(shale: &[ShalePhase], peer: &[PeerPhase]) -> Vec<Ratios> {
    peer.iter()
        .filter_map(|p| {
            shale
                .iter()
                .find(|s| s.name == p.name)
                .map(|s| ratios(s, p))
        })
        .collect()
}

/// Ends a progress line (shale's `Progress::done` takes a shale phase).
pub(super) fn end_progress(progress: Progress, phase: &PeerPhase) {
    eprintln!(
        "\r{}: {} ops in {} s, {} ops/s          ",
        progress.name,
        phase.ops,
        num(phase.seconds),
        num(phase.ops_per_sec)
    );
}

/// A peer's phase table and the shale ÷ peer ratios, after shale's table; `peer` names the
/// engine in the ratio table's title.
pub(super) fn print(peer: &str, phases: &[PeerPhase], ratios: &[Ratios]) {
    let mut t = Table::new([
        "phase",
        "ops",
        "secs",
        "settle",
        "ops/s",
        "cpu us/op",
        "user us/op",
        "reads/op",
        "B/read",
        "engine wr",
        "os wr",
        "eng/os",
        "logical",
        "on disk",
    ]);
    for p in phases {
        t.row([
            p.name.to_owned(),
            p.ops.to_string(),
            num(p.seconds),
            opt(p.settle_seconds, num),
            num(p.ops_per_sec),
            opt(p.cpu_us_per_op, num),
            opt(p.user_cpu_us_per_op, num),
            opt(p.reads_per_op, num),
            opt(p.bytes_per_read, num),
            opt(p.engine_bytes_written, mib),
            opt(p.os_write_bytes, mib),
            opt(p.write_ratio_engine_to_os, |v| format!("{v:.3}")),
            mib(p.logical_bytes),
            mib(p.db_bytes_on_disk),
        ]);
    }
    print!("{}", t.render());
    for p in phases {
        crate::read_probe::print(
            &format!("{peer} {}", p.name),
            p.device_probe,
            p.fraction_of_device_reads,
        );
    }
    println!();
    println!("shale / {peer} (above 1: shale higher)");
    let mut t = Table::new([
        "phase",
        "ops/s",
        "ops/s incl. settle",
        "cpu/op",
        "user cpu/op",
        "os wr per logical",
        "on disk",
    ]);
    for x in ratios {
        let f = |v: f64| format!("{v:.3}");
        t.row([
            x.name.to_owned(),
            opt(x.ops_per_sec, f),
            opt(x.ops_per_sec_incl_settle, f),
            opt(x.cpu_us_per_op, f),
            opt(x.user_cpu_us_per_op, f),
            opt(x.os_write_bytes_per_logical, f),
            opt(x.db_bytes_on_disk, f),
        ]);
    }
    print!("{}", t.render());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(name: &'static str, ops_per_sec: f64, cpu: f64, written: u64, disk: u64) -> PeerPhase {
        PeerPhase {
            name,
            ops: 1000,
            seconds: 1000.0 / ops_per_sec,
            ops_per_sec,
            cpu_seconds: Some(cpu * 1000.0 / 1e6),
            cpu_us_per_op: Some(cpu),
            user_cpu_us_per_op: Some(cpu / 2.0),
            logical_bytes: 1000,
            engine_bytes_written: None,
            os_write_bytes: Some(written),
            write_ratio_engine_to_os: None,
            os_read_bytes: None,
            engine_reads: None,
            reads_per_op: None,
            device_probe: None,
            fraction_of_device_reads: None,
            bytes_per_read: None,
            db_bytes_on_disk: disk,
            rss_peak_bytes: None,
            cache_bytes: 0,
            settle_seconds: None,
            threads: None,
            misses: None,
        }
    }

    #[test]
    fn ratios_divide_shale_by_the_peer() {
        let shale = super::super::tests::phase("fill-random", 5000.0, 20.0, 3000, 800);
        let r = ratios(&shale, &peer("fill-random", 1000.0, 40.0, 2000, 400));
        assert_eq!(r.ops_per_sec, Some(5.0));
        assert_eq!(r.ops_per_sec_incl_settle, Some(5.0));
        assert_eq!(r.cpu_us_per_op, Some(0.5));
        // Both phases have 1000 logical bytes: 3.0 per logical byte against 2.0.
        assert_eq!(r.os_write_bytes_per_logical, Some(1.5));
        assert_eq!(r.db_bytes_on_disk, Some(2.0));
    }

    #[test]
    fn the_settled_ratio_counts_the_peers_compaction_wait() {
        let shale = super::super::tests::phase("fill-random", 1000.0, 20.0, 3000, 800);
        // 1000 ops in 1 s, then 3 s of compaction: 250 ops/s settled.
        let mut p = peer("fill-random", 1000.0, 40.0, 2000, 400);
        p.settle_seconds = Some(3.0);
        let r = ratios(&shale, &p);
        assert_eq!(r.ops_per_sec, Some(1.0));
        assert_eq!(r.ops_per_sec_incl_settle, Some(4.0));
    }

    #[test]
    fn missing_or_zero_figures_give_no_ratio() {
        let mut shale = super::super::tests::phase("scan", 5000.0, 20.0, 0, 800);
        shale.cpu_us_per_op = None;
        let mut p = peer("scan", 0.0, 40.0, 0, 0);
        p.os_write_bytes = None;
        let r = ratios(&shale, &p);
        assert_eq!(r.ops_per_sec, None);
        assert_eq!(r.cpu_us_per_op, None);
        assert_eq!(r.os_write_bytes_per_logical, None);
        assert_eq!(r.db_bytes_on_disk, None);
    }

    #[test]
    fn compare_pairs_phases_by_name() {
        let shale = [
            super::super::tests::phase("fill-random", 10.0, 1.0, 1, 1),
            super::super::tests::phase("scan", 30.0, 1.0, 1, 1),
        ];
        let peers = [
            peer("scan", 10.0, 1.0, 1, 1),
            peer("read-random", 10.0, 1.0, 1, 1),
        ];
        let r = compare(&shale, &peers);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].name, "scan");
        assert_eq!(r[0].ops_per_sec, Some(3.0));
    }
}
