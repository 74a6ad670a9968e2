//! Runs `shale-bench engine` end to end with tiny sizes and checks the shape of its JSON:
//! the four phases by name, every per-phase field, and work done in each. No timing is
//! asserted.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

use std::process::Command;

const PHASES: [&str; 4] = ["fill-random", "fill-sequential", "read-random", "scan"];
const FIELDS: [&str; 14] = [
    "name",
    "ops",
    "seconds",
    "ops_per_sec",
    "logical_bytes",
    "engine_bytes_written",
    "os_write_bytes",
    "engine_reads",
    "reads_per_op",
    "bytes_per_read",
    "db_bytes_on_disk",
    "rss_peak_bytes",
    "cache_bytes",
    "write_ratio_engine_to_os",
];

#[test]
fn quick_engine_run_reports_every_phase() {
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("engine.json");
    let data = dir.path().join("data");
    let out = Command::new(env!("CARGO_BIN_EXE_shale-bench"))
        .args([
            "engine",
            "--quick",
            "--data-mib",
            "4",
            "--cache-mib",
            "1",
            "--read-seconds",
            "2",
            "--txn-seconds",
            "0.3",
        ])
        .arg("--json")
        .arg(&json)
        .arg("--dir")
        .arg(&data)
        .output()
        .expect("run shale-bench");
    assert!(
        out.status.success(),
        "shale-bench engine failed:\nstdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&json).expect("read json");
    let report: serde_json::Value = serde_json::from_str(&text).expect("parse json");

    assert_eq!(report["workload"], "engine");
    assert!(report["params"].is_object(), "no params: {report}");
    assert!(report["machine"].is_object(), "no machine: {report}");
    assert!(report["summary"].is_object(), "no summary: {report}");
    let txn = report["txn"].as_array().expect("txn is an array");
    let threads: Vec<u64> = txn.iter().filter_map(|r| r["threads"].as_u64()).collect();
    assert_eq!(threads, [1, 2, 4, 8], "txn thread counts");
    for r in txn {
        for field in ["commits_per_sec", "fsyncs_per_commit", "conflict_rate"] {
            assert!(r[field].is_number(), "txn run lacks {field}: {r}");
        }
        assert!(
            r["commits"].as_u64().expect("commits") > 0,
            "no commits: {r}"
        );
    }
    let phases = report["phases"].as_array().expect("phases is an array");
    let names: Vec<&str> = phases.iter().filter_map(|p| p["name"].as_str()).collect();
    assert_eq!(names, PHASES);
    for phase in phases {
        let obj = phase.as_object().expect("phase is an object");
        for field in FIELDS {
            assert!(obj.contains_key(field), "{} lacks {field}", phase["name"]);
        }
        let ops = phase["ops"].as_u64().expect("ops is a count");
        assert!(ops > 0, "{} did no operations", phase["name"]);
        assert!(phase["logical_bytes"].as_u64().expect("logical_bytes") > 0);
        assert_eq!(phase["cache_bytes"].as_u64(), Some(1 << 20));
    }
    let keys = report["params"]["keys"].as_u64().expect("keys");
    assert_eq!(phases[0]["ops"].as_u64(), Some(keys));
    assert_eq!(phases[3]["ops"].as_u64(), Some(keys), "scan saw every key");
    assert_eq!(
        phases[2]["misses"].as_u64(),
        Some(0),
        "every get found its value"
    );
    // The work directory is removed afterwards.
    let left: Vec<_> = std::fs::read_dir(&data)
        .map(|d| d.flatten().collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "left behind: {left:?}");
}
