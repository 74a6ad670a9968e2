//! The optional cross-check against `fio`: finding the binary on PATH, running one random-read
//! job shaped like ours (psync engine, one thread per queue slot, O_DIRECT, the same file),
//! and reading IOPS and completion latency out of its `--output-format=json` report. fio is
//! never installed by us; when it is absent the caller says so.

use anyhow::{anyhow, bail, Context, Result};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// What one fio run measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FioResult {
    pub iops: f64,
    /// Completion-latency percentiles, when fio reported them.
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
}

/// The `fio` executable on PATH, if any.
pub fn find_on_path() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("fio"))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// `fio --version`, e.g. `fio-3.36`.
pub fn version(fio: &Path) -> Option<String> {
    let out = Command::new(fio).arg("--version").output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Runs a read-only random-read job over the first `file_bytes` of `file`.
pub fn random_read(
    fio: &Path,
    file: &Path,
    file_bytes: u64,
    block_bytes: usize,
    queue_depth: usize,
    direct: bool,
    runtime: Duration,
) -> Result<FioResult> {
    let runtime_ms = runtime.as_millis().max(100);
    let out = Command::new(fio)
        .arg("--name=shale-bench-randread")
        .arg(format!("--filename={}", file.display()))
        .arg("--readonly")
        .arg("--rw=randread")
        .arg(format!("--bs={block_bytes}"))
        .arg(format!("--size={file_bytes}"))
        .arg(format!("--direct={}", u8::from(direct)))
        .arg("--ioengine=psync")
        .arg("--thread")
        .arg(format!("--numjobs={queue_depth}"))
        .arg("--group_reporting")
        .arg("--norandommap")
        .arg("--randrepeat=0")
        .arg("--time_based")
        .arg(format!("--runtime={runtime_ms}ms"))
        .arg("--output-format=json")
        .output()
        .with_context(|| format!("running {}", fio.display()))?;
    if !out.status.success() {
        bail!(
            "fio exited with {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    parse_json(&String::from_utf8_lossy(&out.stdout))
}

/// Reads the read-side IOPS and completion-latency percentiles of the first job (with
/// `--group_reporting` there is one) from fio's JSON report. Text before the first `{`
/// (fio sometimes prints notes there) is skipped.
pub fn parse_json(text: &str) -> Result<FioResult> {
    let start = text
        .find('{')
        .ok_or_else(|| anyhow!("no JSON object in fio output"))?;
    let root: Value = serde_json::from_str(&text[start..]).context("parsing fio JSON")?;
    let job = root
        .get("jobs")
        .and_then(|j| j.get(0))
        .ok_or_else(|| anyhow!("fio JSON has no jobs"))?;
    if let Some(err) = job.get("error").and_then(Value::as_i64).filter(|&e| e != 0) {
        bail!("fio job reported error {err}");
    }
    let read = job
        .get("read")
        .ok_or_else(|| anyhow!("fio job has no read section"))?;
    let iops = read
        .get("iops")
        .and_then(Value::as_f64)
        .ok_or_else(|| anyhow!("fio read section has no iops"))?;
    let pct = |key: &str| {
        read.get("clat_ns")
            .and_then(|c| c.get("percentile"))
            .and_then(|p| p.get(key))
            .and_then(Value::as_f64)
            .map(|ns| ns / 1000.0)
    };
    Ok(FioResult {
        iops,
        p50_us: pct("50.000000"),
        p99_us: pct("99.000000"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hand-trimmed report in the shape fio 3.x prints for a psync randread job, with the
    /// note line fio can print before the JSON.
    const SAMPLE: &str = r#"note: both iodepth >= 1 and synchronous I/O engine are selected, queue depth will be capped at 1
{
  "fio version" : "fio-3.33",
  "timestamp" : 1700000000,
  "time" : "Tue Nov 14 22:13:20 2023",
  "global options" : {},
  "jobs" : [
    {
      "jobname" : "shale-bench-randread",
      "groupid" : 0,
      "error" : 0,
      "read" : {
        "io_bytes" : 209715200,
        "io_kbytes" : 204800,
        "bw_bytes" : 41943040,
        "bw" : 40960,
        "iops" : 10240.512345,
        "runtime" : 5000,
        "total_ios" : 51200,
        "clat_ns" : {
          "min" : 41000,
          "max" : 2100000,
          "mean" : 95000.5,
          "stddev" : 12000.1,
          "N" : 51200,
          "percentile" : {
            "1.000000" : 60160,
            "50.000000" : 89600,
            "99.000000" : 183296,
            "99.990000" : 1089536
          }
        },
        "lat_ns" : { "min" : 42000, "max" : 2101000, "mean" : 96000.0, "stddev" : 12000.0, "N" : 51200 }
      },
      "write" : { "io_bytes" : 0, "iops" : 0.000000, "runtime" : 0 }
    }
  ]
}
"#;

    #[test]
    fn parses_iops_and_percentiles() {
        let r = parse_json(SAMPLE).expect("parse");
        assert!((r.iops - 10240.512345).abs() < 1e-9);
        assert_eq!(r.p50_us, Some(89.6));
        assert_eq!(r.p99_us, Some(183.296));
    }

    #[test]
    fn missing_percentiles_are_none() {
        let r = parse_json(r#"{"jobs":[{"error":0,"read":{"iops":5.5}}]}"#).expect("parse");
        assert_eq!(r.iops, 5.5);
        assert_eq!(r.p50_us, None);
    }

    #[test]
    fn rejects_bad_reports() {
        assert!(parse_json("fio: file not found").is_err());
        assert!(parse_json(r#"{"jobs":[]}"#).is_err());
        assert!(parse_json(r#"{"jobs":[{"error":5,"read":{"iops":1.0}}]}"#).is_err());
        assert!(parse_json(r#"{"jobs":[{"error":0,"write":{"iops":1.0}}]}"#).is_err());
    }
}
