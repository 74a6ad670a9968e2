//! The device's random-read rate, measured just before a read phase: 4 KiB O_DIRECT reads
//! at the phase's thread count, for a few seconds, at random offsets of one big data file
//! of the run (the same file for every engine of the run). The engine workload runs each
//! engine's read-random minutes apart, and on a shared VM the device's rate between them
//! has differed by 2x (issue 22's read comparison); each engine's device reads per second
//! are held against the rate the device gave at that moment (`fraction_of_device_reads`).

use crate::device::random_read_iops;
use crate::report::num;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Bytes of each probe read: the engines' read unit (RocksDB's block, shale's read page).
const PROBE_BLOCK: usize = 4096;
/// How long a probe reads.
const PROBE_SECONDS: f64 = 3.0;

/// What a probe measured.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct DeviceProbe {
    pub(crate) block_bytes: usize,
    pub(crate) queue_depth: usize,
    pub(crate) reads_per_sec: f64,
}

impl DeviceProbe {
    /// A phase's device reads per second (`reads_per_op` x `ops_per_sec`) as a fraction of
    /// what the device gave the probe.
    pub(crate) fn fraction(&self, reads_per_op: f64, ops_per_sec: f64) -> Option<f64> {
        (self.reads_per_sec > 0.0).then(|| reads_per_op * ops_per_sec / self.reads_per_sec)
    }
}

/// Probes the device with `queue_depth` readers on `file`; `None` (with a warning) when the
/// probe fails: the phase is measured all the same.
pub(crate) fn probe(file: &Path, queue_depth: usize) -> Option<DeviceProbe> {
    let dur = Duration::from_secs_f64(PROBE_SECONDS);
    match random_read_iops(file, PROBE_BLOCK, queue_depth.max(1), dur) {
        Ok(reads_per_sec) => Some(DeviceProbe {
            block_bytes: PROBE_BLOCK,
            queue_depth: queue_depth.max(1),
            reads_per_sec,
        }),
        Err(e) => {
            eprintln!("warning: device probe on {}: {e:#}", file.display());
            None
        }
    }
}

/// The largest regular file under `dir` (not recursing): the file the probes read.
pub(crate) fn largest_file(dir: &Path) -> Option<PathBuf> {
    std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter_map(|e| {
            let meta = e.metadata().ok()?;
            meta.is_file().then(|| (meta.len(), e.path()))
        })
        .max()
        .map(|(_, path)| path)
}

/// One line for a read phase's probe: nothing without one.
pub(crate) fn print(label: &str, probe: Option<DeviceProbe>, fraction: Option<f64>) {
    if let Some(p) = probe {
        let fraction = fraction.map_or("-".to_owned(), |v| format!("{v:.3}"));
        println!(
            "{label}: the device gave {} random {} B reads/s at queue depth {} just before; \
             the phase's device reads were {fraction} of that",
            num(p.reads_per_sec),
            p.block_bytes,
            p.queue_depth,
        );
    }
}
