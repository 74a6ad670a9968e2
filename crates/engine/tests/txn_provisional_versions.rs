//! A transaction's writes reach the trees as provisional versions when they are made
//! (docs/transactions.md, "Provisional versions"): nobody else sees them while it lives,
//! its commit sends no message per key and makes them all visible at its timestamp, its
//! abort sends one abort message per key and leaves nothing, and a checkpoint taken while it
//! lives keeps them provisional so recovery can abort them (R8) — whether the transaction
//! then committed (redone whole, an increment counted once) or not (gone). Tiny nodes, so
//! the provisional versions are flushed into leaves, written and read back.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

mod common;

use shale_engine::{Env, EnvOptions, TreeHandle};
use std::path::Path;

const KEYS: u32 = 300;

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

fn num(v: Option<Vec<u8>>) -> Option<i64> {
    v.map(|v| i64::from_le_bytes(v.try_into().expect("8-byte value")))
}

fn options() -> EnvOptions {
    common::tiny_options(256 << 10)
}

/// A tree of `KEYS` keys holding 100 each, checkpointed.
fn setup(dir: &Path) -> (Env, TreeHandle) {
    let env = Env::open(dir, options()).expect("open");
    let t = env.create_tree("t", None).expect("create");
    for i in 0..KEYS {
        t.put(&key(i), &100i64.to_le_bytes()).expect("put");
    }
    env.checkpoint().expect("checkpoint");
    (env, t)
}

/// Drops the environment without a checkpoint (as a crash would leave it: everything
/// acknowledged is in the log) and recovers it.
fn crash_and_recover(dir: &Path, env: Env, t: TreeHandle) -> (Env, TreeHandle) {
    drop(t);
    drop(env);
    let env = Env::open(dir, options()).expect("recover");
    let t = env.open_tree("t").expect("tree");
    (env, t)
}

/// Every key's value through a cursor of the newest commit.
fn scan(t: &TreeHandle) -> Vec<(Vec<u8>, Option<i64>)> {
    let mut c = t.cursor();
    c.seek_to_first().expect("seek");
    let mut out = Vec::new();
    while c.valid() {
        out.push((c.key().to_vec(), num(Some(c.value().to_vec()))));
        c.next().expect("next");
    }
    out
}

/// What the transaction below writes, as the tree should hold it once committed: even keys
/// +1 by a read-free update, keys divisible by 3 deleted (after the update), and `KEYS` new
/// keys past the end.
fn expected_after_commit() -> Vec<(Vec<u8>, Option<i64>)> {
    let mut out = Vec::new();
    for i in 0..KEYS * 2 {
        let v = if i >= KEYS {
            Some(7)
        } else if i % 3 == 0 {
            None
        } else if i % 2 == 0 {
            Some(101)
        } else {
            Some(100)
        };
        if let Some(v) = v {
            out.push((key(i), Some(v)));
        }
    }
    out
}

fn unchanged() -> Vec<(Vec<u8>, Option<i64>)> {
    (0..KEYS).map(|i| (key(i), Some(100))).collect()
}

/// Writes the changes `expected_after_commit` describes into `txn`.
fn write_changes(txn: &mut shale_engine::Txn, t: &TreeHandle) {
    for i in 0..KEYS {
        if i % 2 == 0 {
            txn.update(t, &key(i), &1i64.to_le_bytes()).expect("update");
        }
        if i % 3 == 0 {
            txn.delete(t, &key(i)).expect("delete");
        }
        txn.put(t, &key(KEYS + i), &7i64.to_le_bytes())
            .expect("put");
    }
}

#[test]
fn live_writes_are_in_the_tree_invisible_and_commit_sends_no_message_per_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (env, t) = setup(dir.path());
    let before_begin = env.begin();
    let mut txn = env.begin();
    let injected = env.counters().messages_injected;
    write_changes(&mut txn, &t);
    let writes = env.counters().messages_injected - injected;
    assert_eq!(
        writes,
        u64::from(KEYS + KEYS.div_ceil(2) + KEYS.div_ceil(3)),
        "each write goes into the tree as it is made"
    );
    // Flushed into the leaves, written and read back: still invisible to everyone else.
    env.flush_all().expect("flush");
    env.checkpoint().expect("checkpoint");
    assert_eq!(
        scan(&t),
        unchanged(),
        "a live transaction's writes are invisible"
    );
    assert_eq!(num(t.get(&key(0)).expect("get")), Some(100));
    assert_eq!(num(t.get(&key(KEYS)).expect("get")), None);
    // The transaction itself sees its writes.
    assert_eq!(num(txn.get(&t, &key(2)).expect("own get")), Some(101));
    assert_eq!(num(txn.get(&t, &key(3)).expect("own get")), None);
    assert_eq!(env.counters().txn_status_entries, 1);

    let injected = env.counters().messages_injected;
    txn.commit().expect("commit");
    assert_eq!(
        env.counters().messages_injected,
        injected,
        "commit sends no message per key"
    );
    assert_eq!(scan(&t), expected_after_commit(), "all visible at once");
    assert_eq!(
        num(before_begin.get(&t, &key(2)).expect("get")),
        Some(100),
        "an older snapshot does not see the commit"
    );
    assert_eq!(num(before_begin.get(&t, &key(KEYS)).expect("get")), None);
    drop(before_begin);
    // Once the horizon passes the commit the status table forgets it (T2), and the
    // versions are still seen (and resolved as leaves take messages or are written).
    t.put(b"zz", &1i64.to_le_bytes())
        .expect("a later commit prunes the table");
    assert_eq!(env.counters().txn_status_entries, 0);
    env.flush_all().expect("flush");
    let mut want = expected_after_commit();
    want.push((b"zz".to_vec(), Some(1)));
    assert_eq!(scan(&t), want);
    t.verify().expect("verify");
    drop(t);
    env.close().expect("close");

    let env = Env::open(dir.path(), options()).expect("reopen");
    let t = env.open_tree("t").expect("tree");
    assert_eq!(
        scan(&t).len(),
        want.len(),
        "the commit survives a clean reopen"
    );
    t.verify().expect("verify");
}

#[test]
fn abort_sends_one_abort_message_per_key_and_leaves_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (env, t) = setup(dir.path());
    let mut txn = env.begin();
    write_changes(&mut txn, &t);
    env.flush_all()
        .expect("flush: provisional versions reach the leaves");
    let before = env.counters();
    txn.abort();
    let after = env.counters();
    let keys_written = u64::from(KEYS) + u64::from(KEYS.div_ceil(2)) + u64::from(KEYS.div_ceil(3))
        - u64::from(KEYS.div_ceil(6));
    assert_eq!(after.abort_messages - before.abort_messages, keys_written);
    assert_eq!(
        after.txn_status_entries, 0,
        "an aborted transaction is forgotten"
    );
    assert_eq!(scan(&t), unchanged(), "abort leaves nothing");
    // A writer after the abort builds on the committed value, not the aborted one.
    t.update(&key(0), &5i64.to_le_bytes()).expect("update");
    assert_eq!(num(t.get(&key(0)).expect("get")), Some(105));
    env.flush_all().expect("flush");
    env.checkpoint().expect("checkpoint");
    t.verify().expect("verify");
    drop(t);
    drop(env);

    let env = Env::open(dir.path(), options()).expect("reopen");
    let t = env.open_tree("t").expect("tree");
    let mut want = unchanged();
    want[0].1 = Some(105);
    assert_eq!(scan(&t), want);
    t.verify().expect("verify");
}

/// A checkpoint taken while a transaction lives holds its provisional versions; the crash
/// comes after the transaction `ends` one way or another, with no checkpoint in between.
fn crash_with_a_transaction_live_at_the_checkpoint(commit: bool) -> Vec<(Vec<u8>, Option<i64>)> {
    let dir = tempfile::tempdir().expect("tempdir");
    let (env, t) = setup(dir.path());
    let mut txn = env.begin();
    write_changes(&mut txn, &t);
    env.flush_all()
        .expect("flush: the checkpoint's leaves hold provisional versions");
    env.checkpoint()
        .expect("checkpoint while the transaction lives");
    if commit {
        txn.commit().expect("commit after the checkpoint");
    } else {
        // Dropped: its abort messages stay in memory, never checkpointed, as in a crash
        // while it was still live.
        drop(txn);
    }
    let (env, t) = crash_and_recover(dir.path(), env, t);
    t.verify().expect("verify after recovery");
    let got = scan(&t);
    env.flush_all().expect("flush");
    assert_eq!(
        scan(&t),
        got,
        "the same after the recovered messages reach the leaves"
    );
    env.checkpoint().expect("checkpoint");
    drop(t);
    env.close().expect("close");
    let env = Env::open(dir.path(), options()).expect("reopen");
    let t = env.open_tree("t").expect("tree");
    assert_eq!(
        scan(&t),
        got,
        "the same after a checkpoint and a clean reopen"
    );
    got
}

#[test]
fn recovery_aborts_a_transaction_live_at_the_checkpoint_that_never_committed() {
    assert_eq!(
        crash_with_a_transaction_live_at_the_checkpoint(false),
        unchanged()
    );
}

#[test]
fn recovery_redoes_once_a_transaction_live_at_the_checkpoint_that_committed_after_it() {
    assert_eq!(
        crash_with_a_transaction_live_at_the_checkpoint(true),
        expected_after_commit(),
        "every increment counted once"
    );
}

#[test]
fn a_commit_checkpointed_before_its_versions_are_resolved_survives_a_crash() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (env, t) = setup(dir.path());
    let mut txn = env.begin();
    write_changes(&mut txn, &t);
    env.flush_all().expect("flush");
    txn.commit().expect("commit");
    // The image keeps the committed transaction's provisional versions as they are (a
    // checkpoint's leaves are not resolved): after the crash the empty status table reads
    // them as committed before every snapshot (T2).
    env.checkpoint().expect("checkpoint");
    let (env, t) = crash_and_recover(dir.path(), env, t);
    assert_eq!(scan(&t), expected_after_commit());
    // A write batch on top resolves them as it reaches the leaves.
    t.update(&key(2), &1i64.to_le_bytes()).expect("update");
    env.flush_all().expect("flush");
    assert_eq!(num(t.get(&key(2)).expect("get")), Some(102));
    t.verify().expect("verify");
}

#[test]
fn new_transaction_ids_start_above_every_id_a_checkpoint_holds() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The setup's writes take ids too (each write batch is a one-statement transaction).
    let (env, t) = setup(dir.path());
    let mut txn = env.begin();
    txn.put(&t, b"x", &1i64.to_le_bytes()).expect("put");
    env.flush_all().expect("flush");
    txn.commit().expect("commit");
    // The checkpoint holds x's provisional version; the log after its redo point holds no
    // transaction id at all, only the `Live` record's next id (T3).
    env.checkpoint().expect("checkpoint");
    let (env, t) = crash_and_recover(dir.path(), env, t);
    // If ids restarted low, one of these would take the committed transaction's id and,
    // live, hide its version from everyone else.
    let mut live = Vec::new();
    for i in 0..KEYS + 100 {
        let mut txn = env.begin();
        txn.put(&t, format!("other{i}").as_bytes(), b"v")
            .expect("put");
        live.push(txn);
        assert_eq!(
            num(t.get(b"x").expect("get")),
            Some(1),
            "after {i} transactions"
        );
    }
}
