//! Runs the real `shale-bench device` binary, shrunk to a 16 MiB file and 0.2 s per
//! measurement, and checks that its JSON report has every field with sensible values. No
//! timing is asserted: the figures only have to exist and be positive.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

use serde_json::Value;
use std::process::Command;

fn positive(v: &Value, path: &str) -> f64 {
    let x = v
        .pointer(path)
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("{path} missing or not a number in {v}"));
    assert!(x > 0.0 && x.is_finite(), "{path} = {x} is not positive");
    x
}

fn non_empty(v: &Value, path: &str) {
    let s = v
        .pointer(path)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("{path} missing or not a string"));
    assert!(!s.is_empty(), "{path} is empty");
}

#[test]
fn quick_device_run_writes_a_complete_report() {
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("device.json");
    let data = dir.path().join("data");
    std::fs::create_dir(&data).expect("mkdir");
    let out = Command::new(env!("CARGO_BIN_EXE_shale-bench"))
        .args(["device", "--quick", "--seconds", "0.2", "--file-mib", "16"])
        .arg("--dir")
        .arg(&data)
        .arg("--json")
        .arg(&json)
        .output()
        .expect("run shale-bench");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "shale-bench failed: {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    assert!(
        stdout.contains("random read"),
        "no table on stdout:\n{stdout}"
    );
    assert!(
        stdout.contains("fio"),
        "no word about fio on stdout:\n{stdout}"
    );

    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("read json")).expect("json");
    assert_eq!(v["workload"], "device");
    assert_eq!(v["params"]["quick"], true);
    positive(&v, "/params/seconds");
    assert_eq!(v["params"]["file_bytes"], 16 << 20);
    assert!(v["params"]["fio"]["available"].is_boolean());

    positive(&v, "/machine/cores");
    positive(&v, "/machine/memory_bytes");
    non_empty(&v, "/machine/device");
    non_empty(&v, "/machine/filesystem");
    assert!(v["machine"]["direct_io"].is_boolean());

    let results = v["results"].as_array().expect("results array");
    let of = |test: &str| -> Vec<&Value> { results.iter().filter(|r| r["test"] == test).collect() };

    let reads = of("random_read");
    assert_eq!(reads.len(), 12, "4 block sizes x 3 queue depths");
    for bs in [4096, 8192, 16384, 65536] {
        for qd in [1, 8, 32] {
            let r = reads
                .iter()
                .find(|r| r["block_bytes"] == bs && r["queue_depth"] == qd)
                .unwrap_or_else(|| panic!("no random_read point {bs} x QD{qd}"));
            for f in ["iops", "mib_per_sec", "p50_us", "p99_us"] {
                positive(r, &format!("/{f}"));
            }
            assert!(r["p99_us"].as_f64() >= r["p50_us"].as_f64());
            // The I/O layer's counters saw exactly the reads we timed.
            assert_eq!(
                r["counted_read_bytes"].as_u64(),
                r["ops"].as_u64().map(|n| n * bs)
            );
        }
    }

    let seq = of("seq_write");
    assert_eq!(seq.len(), 1);
    assert_eq!(seq[0]["block_bytes"], 1 << 20);
    for f in ["mib_per_sec", "p50_us", "p99_us"] {
        positive(seq[0], &format!("/{f}"));
    }

    let fsync = of("fsync");
    assert_eq!(fsync.len(), 1);
    for f in ["fsyncs_per_sec", "p50_us", "p99_us"] {
        positive(fsync[0], &format!("/{f}"));
    }

    for f in [
        "random_read_4k_qd1_iops",
        "random_read_4k_qd32_iops",
        "seq_write_mib_per_sec",
        "fsync_p50_us",
    ] {
        positive(&v, &format!("/summary/{f}"));
    }

    // The test files were removed with their temporary directory.
    let left: Vec<_> = std::fs::read_dir(&data).expect("read dir").collect();
    assert!(
        left.is_empty(),
        "left behind in {}: {left:?}",
        data.display()
    );
}
