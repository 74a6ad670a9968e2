//! Salvage of a damaged log (`shale_engine::salvage`, docs/operations.md): commits of five
//! keys each are logged and the process "crashes" (no checkpoint), then a byte in the middle
//! of the log is flipped. Opening refuses (the damage is not the crash tail, W9); `verify`
//! names the file and offset; `repair` cuts the log there, and after it every commit before
//! the damaged record is there whole and nothing after it is — never part of a commit (R1).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

use shale_engine::salvage;
use shale_engine::{add_i64_merge, Env, EnvOptions, WriteBatch};
use std::sync::Arc;

mod common;

const COMMITS: usize = 400;
const KEYS_PER_COMMIT: usize = 5;

fn options() -> EnvOptions {
    common::tiny_options(1 << 20)
}

fn key(commit: usize, k: usize) -> Vec<u8> {
    format!("c{commit:05}-{k}").into_bytes()
}

#[test]
fn a_damaged_record_keeps_every_commit_before_it_whole() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let env = Env::open(dir.path(), options()).expect("open");
        let t = env.create_tree("t", None).expect("create");
        env.checkpoint().expect("checkpoint");
        for c in 0..COMMITS {
            let mut batch = WriteBatch::new();
            for k in 0..KEYS_PER_COMMIT {
                batch.put(&t, &key(c, k), format!("v{c}").as_bytes());
            }
            env.write(batch).expect("write");
        }
        // As after a crash: the log holds every commit, no checkpoint has them.
    }
    let log = std::fs::read_dir(dir.path().join("wal"))
        .expect("wal dir")
        .flatten()
        .map(|e| e.path())
        .max()
        .expect("a log file");
    let mut bytes = std::fs::read(&log).expect("read log");
    let middle = 4096 + (bytes.len() - 4096) / 2;
    bytes[middle] ^= 0xFF;
    std::fs::write(&log, bytes).expect("write log");

    let refused = Env::open(dir.path(), options()).expect_err("a damaged log refuses to open");
    assert!(refused.is_corruption(), "{refused}");
    let merge = || Arc::new(add_i64_merge) as Arc<shale_engine::MergeFn>;
    let report = salvage::verify(dir.path(), merge()).expect("verify");
    let damage = report.log.damage.clone().expect("verify finds the damage");
    assert_eq!(damage.file, log);
    assert!(
        damage.offset <= middle as u64 && damage.readable_after > 0,
        "{report}"
    );

    let repaired = salvage::repair(dir.path(), &options(), merge()).expect("repair");
    assert!(
        repaired.actions.iter().any(|a| a.starts_with("log: kept")),
        "{repaired}"
    );
    let env = Env::open(dir.path(), options()).expect("open after repair");
    let t = env.open_tree("t").expect("tree");
    let whole = |c: usize| (0..KEYS_PER_COMMIT).all(|k| t.get(&key(c, k)).expect("get").is_some());
    let none = |c: usize| (0..KEYS_PER_COMMIT).all(|k| t.get(&key(c, k)).expect("get").is_none());
    let kept = (0..COMMITS).take_while(|&c| whole(c)).count();
    assert!(
        kept > 0 && kept < COMMITS,
        "kept {kept} of {COMMITS} commits"
    );
    for c in kept..COMMITS {
        assert!(none(c), "commit {c} after the damage is (partly) there");
    }
    assert_eq!(
        kept as u64,
        report.log.records - 1,
        "every record before the damage but the tree's creation is a commit"
    );
    t.verify().expect("tree verifies");
    drop(t);
    env.close().expect("close");
    assert!(salvage::verify(dir.path(), merge())
        .expect("verify")
        .is_clean());
}
