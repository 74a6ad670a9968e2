//! The log stays bounded (issue 22, item 6): a checkpoint starts when the log since the last
//! one passes `checkpoint_log_bytes`, whatever the interval, and each checkpoint (a clean
//! close's too) leaves only the log after its redo point, not the rest of a 64 MiB file.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

mod common;

use common::log_bytes;
use shale_engine::{Env, EnvOptions, TreeOptions, WriteBatch};
use std::time::{Duration, Instant};

fn options(log_trigger: Option<u64>) -> EnvOptions {
    EnvOptions {
        cache_bytes: 64 << 20,
        tree_defaults: TreeOptions::default(),
        checkpoint_interval: None,
        checkpoint_log_bytes: log_trigger,
        ..EnvOptions::default()
    }
}

/// Writes `batches` batches of 100 puts of 1 KiB values, keys from `first` on.
fn fill(env: &Env, tree: &shale_engine::TreeHandle, first: u64, batches: u64) {
    for b in 0..batches {
        let mut batch = WriteBatch::new();
        for i in 0..100 {
            let k = first + b * 100 + i;
            batch.put(tree, &k.to_be_bytes(), &[k as u8; 1024]);
        }
        env.write(batch).expect("write");
    }
}

#[test]
fn a_clean_close_leaves_no_log_before_its_checkpoint() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let env = Env::open(dir.path(), options(None)).expect("open");
        let t = env.create_tree("t", None).expect("create");
        fill(&env, &t, 0, 100); // ~10 MiB of log
        assert!(log_bytes(dir.path()) > 8 << 20, "the fill is in the log");
        env.close().expect("close");
    }
    let left = log_bytes(dir.path());
    assert!(
        left < 64 << 10,
        "a clean close left {left} bytes of log after its checkpoint"
    );
    let env = Env::open(dir.path(), options(None)).expect("reopen");
    let t = env.open_tree("t").expect("tree");
    for k in [0u64, 4_321, 9_999] {
        assert_eq!(
            t.get(&k.to_be_bytes()).expect("get"),
            Some(vec![k as u8; 1024]),
            "key {k} after reopen"
        );
    }
    env.close().expect("close");
}

#[test]
fn the_log_since_a_checkpoint_stays_under_the_trigger() {
    let dir = tempfile::tempdir().expect("tempdir");
    let trigger = 4 << 20;
    let env = Env::open(dir.path(), options(Some(trigger))).expect("open");
    let t = env.create_tree("t", None).expect("create");
    let mut peak = 0;
    for round in 0..40 {
        fill(&env, &t, round * 1_000, 10); // ~1 MiB of log a round
        peak = peak.max(log_bytes(dir.path()));
    }
    // The checkpointer looks every 50 ms; give it the time of one checkpoint.
    let deadline = Instant::now() + Duration::from_secs(10);
    while env.counters().checkpoints < 5 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let checkpoints = env.counters().checkpoints;
    assert!(
        checkpoints >= 5,
        "40 MiB of log with a 4 MiB trigger made {checkpoints} checkpoints"
    );
    assert!(
        peak < 24 << 20,
        "the log reached {peak} bytes with a 4 MiB trigger"
    );
    env.close().expect("close");
}

#[test]
fn without_a_trigger_or_an_interval_nothing_checkpoints_on_its_own() {
    let dir = tempfile::tempdir().expect("tempdir");
    let env = Env::open(dir.path(), options(None)).expect("open");
    let t = env.create_tree("t", None).expect("create");
    fill(&env, &t, 0, 50);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(env.counters().checkpoints, 0);
    env.close().expect("close");
}
