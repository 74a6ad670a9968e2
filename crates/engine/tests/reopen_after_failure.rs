//! An environment whose log write failed on a full device writes again once reopened in
//! place (`Env::reopen`, issue 29 item 4), without a restart and without the failed write:
//! the handles made before keep working, what was acknowledged is there, and what failed is
//! not — neither on the live environment nor after a restart. The log is cut back to its
//! durable end when its write fails (W11), so whole frames a short write left behind are
//! not replayed.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

mod common;

use shale_engine::{Env, EnvOptions, FaultInjector, FsyncPolicy, WriteBatch};
use std::sync::Arc;

fn options(fsync: FsyncPolicy) -> EnvOptions {
    EnvOptions {
        cache_bytes: 64 << 20,
        fsync,
        checkpoint_interval: None,
        checkpoint_log_bytes: None,
        ..EnvOptions::default()
    }
}

fn open(dir: &std::path::Path, fsync: FsyncPolicy) -> (Env, Arc<FaultInjector>) {
    let (env, faults) = common::open_with_faults(dir, options(fsync));
    (env, faults)
}

#[test]
fn a_failed_environment_is_reopened_in_place_without_the_failed_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (env, faults) = open(dir.path(), FsyncPolicy::EveryCommit);
    let t = env.create_tree("t", None).expect("create");
    for i in 0..20u32 {
        t.put(&i.to_be_bytes(), &[7u8; 300]).expect("acknowledged");
    }
    assert!(env.failure().is_none());
    assert!(
        env.reopen().is_ok(),
        "reopening a healthy environment does nothing"
    );

    faults.no_space_on_next_write(100);
    let mut failed = WriteBatch::new();
    failed.put(&t, b"failed", b"never acknowledged");
    failed.delete(&t, &3u32.to_be_bytes());
    let e = env.write(failed).expect_err("the device is full");
    assert!(e.is_out_of_space(), "{e}");
    assert_eq!(t.get(b"failed").expect("get"), None);
    let refused = t.put(b"later", b"x").expect_err("refused until reopened");
    assert!(refused.is_out_of_space(), "{refused}");
    let before = env.begin();

    env.reopen().expect("reopen");
    assert!(env.failure().is_none());
    // The handle made before the reopen finds its tree in the new environment.
    assert_eq!(t.get(b"failed").expect("get"), None);
    for i in 0..20u32 {
        assert_eq!(t.get(&i.to_be_bytes()).expect("get"), Some(vec![7u8; 300]));
    }
    t.put(b"after", b"acknowledged").expect("writes go on");
    let mut txn = env.begin();
    txn.put(&t, b"in txn", b"1").expect("txn put");
    txn.commit().expect("commit");
    // A transaction begun before the reopen belongs to the failed environment.
    assert!(
        before.commit().is_ok(),
        "a read-only transaction commits nothing"
    );
    assert_eq!(
        env.read_view().get(&t, b"after").expect("view"),
        Some(b"acknowledged".to_vec())
    );
    assert_eq!(t.verify().expect("verify").entries, 22);
    drop(t);
    env.close().expect("close");

    let env = Env::open(dir.path(), options(FsyncPolicy::EveryCommit)).expect("restart");
    let t = env.open_tree("t").expect("tree");
    assert_eq!(t.get(b"failed").expect("get"), None);
    assert_eq!(
        t.get(&3u32.to_be_bytes()).expect("get"),
        Some(vec![7u8; 300])
    );
    assert_eq!(
        t.get(b"after").expect("get"),
        Some(b"acknowledged".to_vec())
    );
    assert_eq!(t.get(b"in txn").expect("get"), Some(b"1".to_vec()));
    env.close().expect("close");
}

#[test]
fn whole_frames_of_a_failed_log_write_are_cut_and_never_replayed() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Commits wait in memory for the syncer (which never runs on its own here), so one
    // log write carries several of them.
    let (env, faults) = open(dir.path(), FsyncPolicy::EveryMillis(3_600_000));
    let t = env.create_tree("t", None).expect("create");
    t.put(b"durable", b"1").expect("put");
    env.checkpoint().expect("checkpoint syncs the log");
    for i in 0..5u32 {
        t.put(&i.to_be_bytes(), &[9u8; 2000])
            .expect("appended, not yet durable");
    }
    // The whole write reaches the file, then ENOSPC: without W11 its frames would be
    // replayed by the next recovery.
    faults.no_space_on_next_write(usize::MAX);
    assert!(env.checkpoint().is_err(), "the log write failed");
    env.reopen().expect("reopen");
    assert_eq!(t.get(b"durable").expect("get"), Some(b"1".to_vec()));
    for i in 0..5u32 {
        assert_eq!(
            t.get(&i.to_be_bytes()).expect("get"),
            None,
            "commit {i} was never durable"
        );
    }
    t.put(b"after", b"2").expect("put");
    drop(t);
    env.close().expect("close");

    let env = Env::open(dir.path(), options(FsyncPolicy::EveryCommit)).expect("restart");
    let t = env.open_tree("t").expect("tree");
    assert_eq!(t.get(&0u32.to_be_bytes()).expect("get"), None);
    assert_eq!(t.get(b"after").expect("get"), Some(b"2".to_vec()));
    env.close().expect("close");
}
