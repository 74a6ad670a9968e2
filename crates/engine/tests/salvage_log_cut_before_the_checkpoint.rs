//! A log cut short before the last checkpoint's redo point (`shale_engine::salvage`,
//! docs/operations.md): the environment refuses to open (the redo point lies past the end of
//! the log); `repair` restarts the log empty at the redo point. Afterwards every key the
//! checkpoint holds is there, and new writes — to the same keys, so their versions must
//! stack above the checkpoint's (E1, M1) — are accepted, read back and survive a crash.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

use shale_engine::salvage;
use shale_engine::{add_i64_merge, Env, EnvOptions, MergeFn};
use std::sync::Arc;

mod common;

const KEYS: usize = 300;

fn options() -> EnvOptions {
    common::tiny_options(1 << 20)
}

fn merge() -> Arc<MergeFn> {
    Arc::new(add_i64_merge)
}

fn key(i: usize) -> Vec<u8> {
    format!("k{i:04}").into_bytes()
}

#[test]
fn a_log_cut_before_the_redo_point_restarts_past_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let env = Env::open(dir.path(), options()).expect("open");
        let t = env.create_tree("t", None).expect("create");
        for i in 0..KEYS {
            t.put(&key(i), b"one").expect("put");
        }
        drop(t);
        env.close().expect("close"); // a final checkpoint: everything is in the tree file
    }
    let log = std::fs::read_dir(dir.path().join("wal"))
        .expect("wal dir")
        .flatten()
        .map(|e| e.path())
        .max()
        .expect("a log file");
    // Keep the file's header only: the log now ends at its first LSN, before the redo point.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&log)
        .and_then(|f| f.set_len(4096))
        .expect("truncate");
    let refused = Env::open(dir.path(), options()).expect_err("the log ends before the redo point");
    assert!(refused.is_corruption(), "{refused}");
    assert!(!salvage::verify(dir.path(), merge())
        .expect("verify")
        .is_clean());

    let report = salvage::repair(dir.path(), &options(), merge()).expect("repair");
    assert!(
        report.actions.iter().any(|a| a.contains("restarted empty")),
        "{report}"
    );
    {
        let env = Env::open(dir.path(), options()).expect("open after repair");
        let t = env.open_tree("t").expect("tree");
        for i in 0..KEYS {
            assert_eq!(t.get(&key(i)).expect("get").as_deref(), Some(&b"one"[..]));
            t.put(&key(i), b"two")
                .expect("a new version above the checkpoint's");
        }
        t.verify().expect("verify");
        // As after a crash: the new versions are in the log only.
    }
    let env = Env::open(dir.path(), options()).expect("reopen");
    let t = env.open_tree("t").expect("tree");
    for i in 0..KEYS {
        assert_eq!(t.get(&key(i)).expect("get").as_deref(), Some(&b"two"[..]));
    }
    drop(t);
    env.close().expect("close");
    assert!(salvage::verify(dir.path(), merge())
        .expect("verify")
        .is_clean());
}
