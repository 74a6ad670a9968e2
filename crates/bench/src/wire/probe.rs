//! Truth from the OS next to what the server says: before and after each phase the runner
//! samples `/proc/<pid>/io` of the server process (when it knows the pid), `/proc/diskstats`
//! of the data directory's device, and the server's own `serverStatus.shale.engine` counters
//! (when the server has them), and the server process's CPU seconds from `/proc/<pid>/stat`,
//! and adds the deltas and their ratios to the phase's row (`server_cpu_us_per_op` divides
//! the CPU by the row's operation count: queries, scans, inserts, updates or documents loaded).
//! Device counts are device-wide: anything else writing to the same disk shows up in them.

use super::diskstats::{self, DiskStat};
use super::rows::{ratio, Row};
use anyhow::Result;
use mongodb::bson::{doc, Bson, Document};
use mongodb::Client;
use shale_io::proc_io::{self, ProcIo};

/// The engine's counters that matter for I/O accounting, from `serverStatus`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct EngineIo {
    pub read_calls: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub fsyncs: u64,
    pub log_write_bytes: u64,
    pub log_write_calls: u64,
    pub log_fsyncs: u64,
    pub commits: u64,
}

impl EngineIo {
    /// Reads `shale.engine` of a `serverStatus` reply; `None` when the server has no such
    /// section (a peer that is not ShaleDB).
    pub fn from_server_status(status: &Document) -> Option<EngineIo> {
        let engine = status
            .get_document("shale")
            .ok()?
            .get_document("engine")
            .ok()?;
        let total = engine.get_document("ioTotal").ok()?;
        let log = engine
            .get_document("io")
            .ok()
            .and_then(|io| io.get_document("log").ok());
        let log_n = |k: &str| log.map_or(0, |l| int(l.get(k)));
        Some(EngineIo {
            read_calls: int(total.get("readCalls")),
            read_bytes: int(total.get("readBytes")),
            write_bytes: int(total.get("writeBytes")),
            fsyncs: int(total.get("fsyncs")),
            log_write_bytes: log_n("writeBytes"),
            log_write_calls: log_n("writeCalls"),
            log_fsyncs: log_n("fsyncs"),
            commits: int(engine.get("commits")),
        })
    }

    fn since(&self, b: &EngineIo) -> EngineIo {
        EngineIo {
            read_calls: self.read_calls.saturating_sub(b.read_calls),
            read_bytes: self.read_bytes.saturating_sub(b.read_bytes),
            write_bytes: self.write_bytes.saturating_sub(b.write_bytes),
            fsyncs: self.fsyncs.saturating_sub(b.fsyncs),
            log_write_bytes: self.log_write_bytes.saturating_sub(b.log_write_bytes),
            log_write_calls: self.log_write_calls.saturating_sub(b.log_write_calls),
            log_fsyncs: self.log_fsyncs.saturating_sub(b.log_fsyncs),
            commits: self.commits.saturating_sub(b.commits),
        }
    }
}

fn int(v: Option<&Bson>) -> u64 {
    match v {
        Some(Bson::Int32(n)) => u64::try_from(*n).unwrap_or(0),
        Some(Bson::Int64(n)) => u64::try_from(*n).unwrap_or(0),
        Some(Bson::Double(n)) if *n >= 0.0 => *n as u64,
        _ => 0,
    }
}

/// Where the counters of one target come from.
#[derive(Debug, Clone)]
pub struct Probe {
    /// The server's pid, for `/proc/<pid>/io`.
    pub pid: Option<u32>,
    /// The `/proc/diskstats` name of the data directory's device.
    pub disk: Option<String>,
}

/// One reading of every source.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sample {
    pub proc_io: Option<ProcIo>,
    pub disk: Option<DiskStat>,
    pub engine: Option<EngineIo>,
    /// The server's user + system CPU seconds.
    pub server_cpu: Option<f64>,
    /// The server's user-mode CPU seconds alone (its own code, not the kernel's sockets
    /// and I/O on its behalf).
    pub server_user_cpu: Option<f64>,
}

/// What happened between two samples.
#[derive(Debug, Clone, Copy, Default)]
pub struct Delta {
    pub proc_io: Option<ProcIo>,
    pub disk: Option<DiskStat>,
    pub engine: Option<EngineIo>,
    pub server_cpu: Option<f64>,
    pub server_user_cpu: Option<f64>,
}

/// Figures that count a row's operations, in the order `server_cpu_us_per_op` looks for one.
const OP_COUNT_FIGURES: &[&str] = &["queries", "scans", "inserts", "updates", "docs"];

impl Probe {
    pub async fn sample(&self, client: &Client) -> Result<Sample> {
        let status = client
            .database("admin")
            .run_command(doc! {"serverStatus": 1})
            .await?;
        Ok(Sample {
            proc_io: self.pid.and_then(proc_io::read_pid),
            disk: self.disk.as_deref().and_then(diskstats::read),
            engine: EngineIo::from_server_status(&status),
            server_cpu: self.pid.and_then(crate::process::cpu_seconds_of),
            server_user_cpu: self.pid.and_then(crate::process::user_cpu_seconds_of),
        })
    }
}

impl Sample {
    pub fn since(&self, before: &Sample) -> Delta {
        Delta {
            proc_io: self.proc_io.zip(before.proc_io).map(|(a, b)| a.since(&b)),
            disk: self.disk.zip(before.disk).map(|(a, b)| a.since(&b)),
            engine: self.engine.zip(before.engine).map(|(a, b)| a.since(&b)),
            server_cpu: self
                .server_cpu
                .zip(before.server_cpu)
                .map(|(a, b)| (a - b).max(0.0)),
            server_user_cpu: self
                .server_user_cpu
                .zip(before.server_user_cpu)
                .map(|(a, b)| (a - b).max(0.0)),
        }
    }
}

impl Delta {
    /// Adds every available count, and the OS-to-server ratios, to `row`.
    pub fn add_to(&self, mut row: Row) -> Row {
        if let Some(p) = self.proc_io {
            row = row
                .fig("os_read_bytes", p.read_bytes as f64)
                .fig("os_write_bytes", p.write_bytes as f64)
                .fig("os_syscr", p.syscr as f64)
                .fig("os_syscw", p.syscw as f64);
        }
        if let Some(d) = self.disk {
            row = row
                .fig("dev_reads", d.reads as f64)
                .fig("dev_read_bytes", d.read_bytes() as f64)
                .fig("dev_writes", d.writes as f64)
                .fig("dev_write_bytes", d.write_bytes() as f64)
                .fig("dev_flushes", d.flushes as f64);
        }
        if let Some(e) = self.engine {
            row = row
                .fig("server_read_calls", e.read_calls as f64)
                .fig("server_read_bytes", e.read_bytes as f64)
                .fig("server_write_bytes", e.write_bytes as f64)
                .fig("server_fsyncs", e.fsyncs as f64)
                .fig("server_log_write_bytes", e.log_write_bytes as f64)
                .fig("server_log_fsyncs", e.log_fsyncs as f64)
                .fig("server_commits", e.commits as f64);
        }
        if let (Some(p), Some(e)) = (self.proc_io, self.engine) {
            row = row
                .fig(
                    "os_to_server_write_ratio",
                    ratio(p.write_bytes as f64, e.write_bytes as f64),
                )
                .fig(
                    "os_to_server_read_ratio",
                    ratio(p.read_bytes as f64, e.read_bytes as f64),
                );
        }
        if let (Some(d), Some(e)) = (self.disk, self.engine) {
            row = row.fig(
                "dev_to_server_reads_ratio",
                ratio(d.reads as f64, e.read_calls as f64),
            );
        }
        if let Some(cpu) = self.server_cpu {
            row = row.fig("server_cpu_seconds", cpu);
            if let Some(ops) = OP_COUNT_FIGURES.iter().find_map(|f| row.get(f)) {
                row = row.fig("server_cpu_us_per_op", ratio(cpu * 1e6, ops));
            }
        }
        if let Some(cpu) = self.server_user_cpu {
            if let Some(ops) = OP_COUNT_FIGURES.iter().find_map(|f| row.get(f)) {
                row = row.fig("server_user_cpu_us_per_op", ratio(cpu * 1e6, ops));
            }
        }
        row
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_counters_from_server_status() {
        let status = doc! {"shale": {"engine": {
            "io": {"log": {"writeBytes": 4096_i64, "writeCalls": 1_i64, "fsyncs": 1_i64}},
            "ioTotal": {"readCalls": 3_i64, "readBytes": 12288_i64, "writeCalls": 2_i64,
                        "writeBytes": 8192_i64, "fsyncs": 2_i64},
            "commits": 7_i64,
        }}};
        let e = EngineIo::from_server_status(&status).expect("engine");
        assert_eq!(e.log_write_bytes, 4096);
        assert_eq!(e.read_calls, 3);
        assert_eq!(e.commits, 7);
        assert!(EngineIo::from_server_status(&doc! {"ok": 1}).is_none());
    }

    #[test]
    fn delta_adds_ratios() {
        let before = Sample {
            proc_io: Some(ProcIo::default()),
            disk: Some(DiskStat::default()),
            engine: Some(EngineIo::default()),
            server_cpu: Some(1.0),
            server_user_cpu: Some(0.5),
        };
        let after = Sample {
            server_cpu: Some(1.5),
            server_user_cpu: Some(0.6),
            proc_io: Some(ProcIo {
                write_bytes: 8192,
                ..ProcIo::default()
            }),
            disk: Some(DiskStat {
                reads: 3,
                ..DiskStat::default()
            }),
            engine: Some(EngineIo {
                write_bytes: 4096,
                read_calls: 2,
                ..EngineIo::default()
            }),
        };
        let row = after
            .since(&before)
            .add_to(Row::new("p").fig("queries", 1000.0));
        assert_eq!(row.get("server_cpu_us_per_op"), Some(500.0));
        let user = row.get("server_user_cpu_us_per_op").expect("user cpu");
        assert!((user - 100.0).abs() < 1e-6, "{user}");
        assert_eq!(row.get("os_to_server_write_ratio"), Some(2.0));
        assert_eq!(row.get("dev_to_server_reads_ratio"), Some(1.5));
        assert!(row.get("os_to_server_read_ratio").expect("ratio").is_nan());
    }
}
