//! A reader racing a commit whose log fsync then fails never sees that commit (M3, issue 29
//! item 4): not a point read, a read view, a scan or a transaction that starts while the
//! fsync is on its way to the disk, nor any reader after the failure, before or after the
//! environment is reopened in place. A commit whose fsync succeeds becomes visible once it
//! returns, so a writer reads its own write.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

mod common;

use shale_engine::{Env, EnvOptions, FaultInjector, FsyncPolicy, TreeHandle, WriteBatch};
use std::sync::Arc;

fn options() -> EnvOptions {
    EnvOptions {
        cache_bytes: 64 << 20,
        fsync: FsyncPolicy::EveryCommit,
        checkpoint_interval: None,
        checkpoint_log_bytes: None,
        ..EnvOptions::default()
    }
}

fn open(dir: &std::path::Path) -> (Arc<Env>, Arc<FaultInjector>) {
    let (env, faults) = common::open_with_faults(dir, options());
    (Arc::new(env), faults)
}

/// What one reader saw: the value of `k` and the keys a scan found.
type Seen = (Option<Vec<u8>>, Vec<Vec<u8>>);

/// Every way to read `t`.
fn every_reader(env: &Env, t: &TreeHandle) -> Vec<Seen> {
    let view = env.read_view();
    let mut cursor = view.cursor(t);
    cursor.seek_to_first().expect("seek");
    let mut keys = Vec::new();
    while let Some((k, _)) = cursor.entry() {
        keys.push(k.to_vec());
        cursor.next().expect("next");
    }
    let mut seen = vec![
        (t.get(b"k").expect("point read"), keys.clone()),
        (view.get(t, b"k").expect("view read"), keys.clone()),
    ];
    // A failed environment refuses transactions' reads (they are for writing).
    match env.begin().get(t, b"k") {
        Ok(v) => seen.push((v, keys)),
        Err(e) => assert!(env.failure().is_some(), "txn read: {e}"),
    }
    seen
}

fn commit_in_background(
    env: &Arc<Env>,
    t: &TreeHandle,
    value: &'static [u8],
) -> std::thread::JoinHandle<shale_engine::Result<()>> {
    let (env, t) = (env.clone(), t.clone());
    std::thread::spawn(move || {
        let mut b = WriteBatch::new();
        b.put(&t, b"k", value);
        b.put(&t, b"new", value);
        b.add_count(&t, 1);
        env.write(b)
    })
}

#[test]
fn a_commit_is_read_only_once_its_fsync_returned_and_never_if_it_failed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (env, faults) = open(dir.path());
    let t = env.create_tree("t", None).expect("create");
    t.put(b"k", b"acknowledged").expect("first write");
    let before = (Some(b"acknowledged".to_vec()), vec![b"k".to_vec()]);

    // An fsync that succeeds: invisible while it runs, visible once the commit returns.
    faults.hold_next_sync(false);
    let writer = commit_in_background(&env, &t, b"second");
    faults.wait_until_sync_held();
    for seen in every_reader(&env, &t) {
        assert_eq!(seen, before, "read while its fsync runs");
    }
    // A transaction on a snapshot taken meanwhile conflicts with that commit on `k`; its
    // refusal waits for the fsync, so a retry sees the commit.
    let mut racing = env.begin();
    let conflicting = std::thread::spawn({
        let t = t.clone();
        move || racing.put(&t, b"k", b"racing")
    });
    faults.release_held_sync();
    writer.join().expect("writer").expect("acknowledged");
    let refused = conflicting.join().expect("txn").expect_err("conflict");
    assert!(
        matches!(refused, shale_engine::Error::WriteConflict { .. }),
        "{refused}"
    );
    assert_eq!(t.count(), 1);
    let after = (
        Some(b"second".to_vec()),
        vec![b"k".to_vec(), b"new".to_vec()],
    );
    for seen in every_reader(&env, &t) {
        assert_eq!(seen, after, "read after the commit returned");
    }

    // An fsync that fails: invisible while it runs, and after.
    faults.hold_next_sync(true);
    let writer = commit_in_background(&env, &t, b"never acknowledged");
    faults.wait_until_sync_held();
    for seen in every_reader(&env, &t) {
        assert_eq!(seen, after, "read while the failing fsync runs");
    }
    faults.release_held_sync();
    let e = writer.join().expect("writer").expect_err("fsync failed");
    assert!(e.is_out_of_space(), "{e}");
    for seen in every_reader(&env, &t) {
        assert_eq!(seen, after, "read after the failure");
    }
    assert_eq!(
        t.count(),
        1,
        "the failed commit's count change is taken back"
    );

    env.reopen().expect("reopen in place");
    for seen in every_reader(&env, &t) {
        assert_eq!(seen, after, "read after the reopen");
    }
    t.put(b"k", b"third").expect("writes go on");
    assert_eq!(t.get(b"k").expect("get"), Some(b"third".to_vec()));
    drop(t);
    Arc::into_inner(env)
        .expect("one owner")
        .close()
        .expect("close");

    let env = Env::open(dir.path(), options()).expect("restart");
    let t = env.open_tree("t").expect("tree");
    assert_eq!(t.get(b"k").expect("get"), Some(b"third".to_vec()));
    assert_eq!(t.get(b"new").expect("get"), Some(b"second".to_vec()));
    env.close().expect("close");
}
