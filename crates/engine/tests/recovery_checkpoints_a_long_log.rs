//! A long recovery is followed by a checkpoint (R9, issue 29 item 7): a process killed
//! before its first timed checkpoint, again and again, must not make every start replay the
//! whole log since the last checkpoint. After an open whose recovery replayed at least
//! `recovery_checkpoint_log_bytes`, the checkpointer checkpoints at its first tick, so the
//! log shrinks to what follows that checkpoint and the next crash replays little; a short
//! recovery leaves the timed schedule alone.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

mod common;

use common::log_bytes;
use shale_engine::{Env, EnvOptions, TreeHandle, TreeOptions, WriteBatch};
use std::time::{Duration, Instant};

const MIB: u64 = 1 << 20;

/// No timed or size-triggered checkpoints: only the one after recovery, if `after`.
fn options(after: Option<u64>) -> EnvOptions {
    EnvOptions {
        cache_bytes: 64 << 20,
        tree_defaults: TreeOptions::default(),
        checkpoint_interval: None,
        checkpoint_log_bytes: None,
        recovery_checkpoint_log_bytes: after,
        ..EnvOptions::default()
    }
}

/// Writes `batches` batches of 100 puts of 1 KiB values (about 100 KiB of log each).
fn fill(env: &Env, tree: &TreeHandle, first: u64, batches: u64) {
    for b in 0..batches {
        let mut batch = WriteBatch::new();
        for i in 0..100 {
            let k = first + b * 100 + i;
            batch.put(tree, &k.to_be_bytes(), &[k as u8; 1024]);
        }
        env.write(batch).expect("write");
    }
}

fn check(tree: &TreeHandle, keys: impl IntoIterator<Item = u64>) {
    for k in keys {
        assert_eq!(
            tree.get(&k.to_be_bytes()).expect("get"),
            Some(vec![k as u8; 1024]),
            "key {k}"
        );
    }
}

/// Waits until the environment has taken `n` checkpoints; false after 10 s.
fn wait_checkpoints(env: &Env, n: u64) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if env.counters().checkpoints >= n {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[test]
fn a_long_recovery_checkpoints_at_once_and_the_next_replays_little() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let env = Env::open(dir.path(), options(None)).expect("open");
        let t = env.create_tree("t", None).expect("create");
        fill(&env, &t, 0, 120); // ~12 MiB of log, never checkpointed
        drop(env); // a crash: the log holds everything
    }
    let before = log_bytes(dir.path());
    assert!(before > 10 * MIB, "the fill is in the log: {before}");
    {
        let env = Env::open(dir.path(), options(Some(4 * MIB))).expect("recover");
        assert!(
            wait_checkpoints(&env, 1),
            "no checkpoint after replaying {before} bytes of log"
        );
        let t = env.open_tree("t").expect("tree");
        fill(&env, &t, 12_000, 5); // ~0.5 MiB more, then a crash again
        drop(env);
    }
    let after = log_bytes(dir.path());
    assert!(
        after < 2 * MIB,
        "the checkpoint after recovery left {after} bytes of log (before: {before})"
    );
    let env = Env::open(dir.path(), options(Some(4 * MIB))).expect("recover again");
    let t = env.open_tree("t").expect("tree");
    check(&t, [0, 5_555, 11_999, 12_000, 12_499]);
    // Half a MiB replayed is under the threshold: no checkpoint of its own.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        env.counters().checkpoints,
        0,
        "a short recovery checkpointed"
    );
    env.close().expect("close");
}

#[test]
fn without_the_option_a_long_recovery_waits_for_the_schedule() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let env = Env::open(dir.path(), options(None)).expect("open");
        let t = env.create_tree("t", None).expect("create");
        fill(&env, &t, 0, 60);
        drop(env);
    }
    let env = Env::open(dir.path(), options(None)).expect("recover");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(env.counters().checkpoints, 0);
    assert!(log_bytes(dir.path()) > 5 * MIB);
    check(&env.open_tree("t").expect("tree"), [0, 5_999]);
}
