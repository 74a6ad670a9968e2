//! A write whose log record fails to reach the disk is never read (issue 29, item 4): the
//! commit is applied to the trees before group commit writes its record, so when that write
//! fails the environment freezes new snapshots at the durable log position. The value before
//! it is still read (collection never passes the durable position), and a reopened
//! environment agrees.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

mod common;

use shale_engine::{Env, EnvOptions, FsyncPolicy, WriteBatch};

fn options() -> EnvOptions {
    EnvOptions {
        cache_bytes: 64 << 20,
        fsync: FsyncPolicy::EveryCommit,
        checkpoint_interval: None,
        checkpoint_log_bytes: None,
        ..EnvOptions::default()
    }
}

#[test]
fn a_commit_whose_log_write_failed_is_not_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (env, faults) = common::open_with_faults(dir.path(), options());
    let t = env.create_tree("t", None).expect("create");
    let mut first = WriteBatch::new();
    first.put(&t, b"k", b"acknowledged");
    env.write(first).expect("the first write is acknowledged");
    // Many versions of another key, so that collection has something to drop.
    for i in 0..50u32 {
        let mut b = WriteBatch::new();
        b.put(&t, b"busy", &i.to_le_bytes());
        env.write(b).expect("write");
    }

    faults.fail_next_write();
    let mut failed = WriteBatch::new();
    failed.put(&t, b"k", b"never acknowledged");
    failed.put(&t, b"new", b"never acknowledged");
    failed.delete(&t, b"busy");
    assert!(env.write(failed).is_err(), "the log write failed");

    assert_eq!(t.get(b"k").expect("get"), Some(b"acknowledged".to_vec()));
    assert_eq!(t.get(b"new").expect("get"), None);
    assert_eq!(
        t.get(b"busy").expect("get"),
        Some(49u32.to_le_bytes().to_vec())
    );
    let view = env.read_view();
    assert_eq!(
        view.get(&t, b"k").expect("view get"),
        Some(b"acknowledged".to_vec())
    );
    let mut cursor = view.cursor(&t);
    cursor.seek_to_first().expect("seek");
    let mut keys = Vec::new();
    while let Some((k, _)) = cursor.entry() {
        keys.push(k.to_vec());
        cursor.next().expect("next");
    }
    assert_eq!(keys, vec![b"busy".to_vec(), b"k".to_vec()], "a scan agrees");
    drop((cursor, view, t));
    drop(env);

    let env = Env::open(dir.path(), options()).expect("reopen");
    let t = env.open_tree("t").expect("tree");
    assert_eq!(t.get(b"k").expect("get"), Some(b"acknowledged".to_vec()));
    assert_eq!(t.get(b"new").expect("get"), None);
    env.close().expect("close");
}
