//! Runs every wire workload of `shale-bench` with `--quick` at the tiniest sizes against the
//! `shale` binary (`SHALE_BIN`, or built here with the same profile and target directory as
//! the test), and checks that each completes and that its JSON has the envelope and every
//! summary field the issue names. No timing is asserted. One workload also writes its
//! `--report` directory.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The `shale` binary to run: `SHALE_BIN` when set (scripts/test.sh sets it to the one its
/// test build made), else built next to the `shale-bench` binary under test, once per test
/// process. It is built as `cargo test --workspace --no-run` builds it (for the cli crate's
/// integration test), so after a workspace test build it is already there: `cargo build -p
/// shale-cli` resolved features for the cli alone and compiled the server stack again (258 s
/// of this test's 329 s on a fresh machine).
fn shale_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(bin) = std::env::var_os("SHALE_BIN").map(PathBuf::from) {
            assert!(bin.exists(), "SHALE_BIN={} does not exist", bin.display());
            return bin;
        }
        let bench = PathBuf::from(env!("CARGO_BIN_EXE_shale-bench"));
        let profile_dir = bench.parent().expect("profile dir").to_owned();
        let target_dir = profile_dir.parent().expect("target dir").to_owned();
        let mut cmd = Command::new(env!("CARGO"));
        cmd.args([
            "test",
            "--workspace",
            "--no-run",
            "--test",
            "serve_answers_and_stops_cleanly",
        ])
        .env("CARGO_TARGET_DIR", &target_dir)
        .current_dir(env!("CARGO_MANIFEST_DIR"));
        if profile_dir.file_name().is_some_and(|n| n == "release") {
            cmd.arg("--release");
        }
        let out = cmd.output().expect("run cargo test --no-run");
        assert!(
            out.status.success(),
            "building shale failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let bin = profile_dir.join("shale");
        assert!(bin.exists(), "{} was not built", bin.display());
        bin
    })
}

/// Runs `shale-bench <workload> --quick <extra>` and returns its JSON report.
fn run(workload: &str, extra: &[&str], report: Option<&Path>) -> Value {
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("out.json");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_shale-bench"));
    cmd.arg(workload)
        .arg("--quick")
        .args(extra)
        .arg("--shale-bin")
        .arg(shale_bin())
        .arg("--dir")
        .arg(dir.path().join("data"))
        .arg("--json")
        .arg(&json);
    if let Some(r) = report {
        cmd.arg("--report").arg(r);
    }
    let out = cmd.output().expect("run shale-bench");
    assert!(
        out.status.success(),
        "shale-bench {workload} failed: {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).expect("read json"))
        .expect("parse json");
    assert_eq!(v["workload"], workload);
    for k in ["params", "machine", "summary"] {
        assert!(v[k].is_object(), "{k} missing: {v}");
    }
    assert!(
        !v["results"].as_array().expect("results").is_empty(),
        "no results"
    );
    assert_eq!(
        v["servers"][0]["shale"], true,
        "the started server is shale"
    );
    v
}

/// Every field must be there; `numbers` must also be numbers (the others may be null when
/// the tiny run did no device I/O to divide by).
fn has_summary(v: &Value, numbers: &[&str], maybe_null: &[&str]) {
    let s = v["summary"].as_object().expect("summary");
    for f in numbers {
        assert!(
            s.get(*f).is_some_and(Value::is_number),
            "summary.{f}: {v:#}"
        );
    }
    for f in maybe_null {
        assert!(s.contains_key(*f), "summary.{f} missing: {v:#}");
    }
}

/// How many result rows of `phase` the JSON holds.
fn rows_of(v: &Value, phase: &str) -> usize {
    let results = v["results"].as_array().expect("results");
    results.iter().filter(|r| r["phase"] == phase).count()
}

const TINY: [&str; 6] = ["--seconds", "0.2", "--cache-mib", "8", "--data-mib", "1"];

#[test]
fn nth_attribute() {
    let v = run("nth-attribute", &TINY, None);
    has_summary(&v, &["qps_ratio_1000_to_1", "p50_ratio_1000_to_1"], &[]);
    assert_eq!(rows_of(&v, "query"), 16, "8 attribute counts x 2 variants");
}

#[test]
fn log_write_amp() {
    let v = run("log-write-amp", &TINY, None);
    has_summary(
        &v,
        &["os_to_server_write_ratio", "fsyncs_per_commit_at_32"],
        &[],
    );
}

#[test]
fn bakeoff_with_report() {
    let r = tempfile::tempdir().expect("tempdir");
    let v = run("bakeoff", &TINY, Some(r.path()));
    has_summary(
        &v,
        &[
            "raw_bson_bytes_per_doc",
            "stored_bytes_per_doc",
            "compression_ratio",
            "inserts_per_sec",
            "scan_docs_per_sec",
        ],
        &[],
    );
    let md = std::fs::read_to_string(r.path().join("report.md")).expect("report.md");
    assert!(md.contains("## Summary"), "{md}");
}

#[test]
fn pk_lookup() {
    let v = run("pk-lookup", &TINY, None);
    has_summary(
        &v,
        &[],
        &[
            "reads_per_query",
            "bytes_per_read",
            "fraction_of_device_iops",
        ],
    );
    assert_eq!(rows_of(&v, "lookup"), 16, "4 page sizes x 4 client counts");
}

#[test]
fn iibench() {
    let v = run("iibench", &TINY, None);
    has_summary(&v, &["inserts_per_sec_at_end"], &[]);
}
