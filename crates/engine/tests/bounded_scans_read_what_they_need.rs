//! A forward scan that says where it ends (`Cursor::set_upper_bound`) reads the basements
//! that hold its range, not a whole `SCAN_READ_BYTES` run of the leaf after them: a short
//! range scan (an index range of one owner's documents) then costs what it returns. The
//! bound is a hint: the cursor still returns every key, in order, past the bound as before
//! it, the same as an unbounded cursor and a model.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

mod common;

use shale_engine::{Env, TreeHandle, TreeOptions, WriteBatch};
use std::path::Path;

const KEYS: u32 = 40_000;

fn key(i: u32) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

fn value(i: u32) -> Vec<u8> {
    format!("value-{i:08}-{}", "v".repeat(40)).into_bytes()
}

fn load(dir: &Path) {
    let env = Env::open(dir, common::tiny_options(64 << 20)).expect("open");
    // Leaves of many basements, as at the default sizes (4 MiB of 16 KiB), so that a
    // `SCAN_READ_BYTES` run reads far past a short range.
    let options = TreeOptions {
        node_size_bytes: 1 << 20,
        basement_size_bytes: 4 << 10,
        read_page_bytes: shale_engine::default_read_page(4 << 10),
        fanout: 8,
        ..TreeOptions::tiny()
    };
    let tree = env.create_tree("t", Some(options)).expect("create");
    for chunk in (0..KEYS).collect::<Vec<_>>().chunks(200) {
        let mut batch = WriteBatch::new();
        for &i in chunk {
            batch.put(&tree, &key(i), &value(i));
        }
        env.write(batch).expect("write");
    }
    env.flush_all().expect("flush all");
    env.checkpoint().expect("checkpoint");
}

/// The keys of `[from, to)` read by a fresh cursor on a cold cache (a reopened environment),
/// and the bytes its reads took from the tree's file.
fn cold_range(dir: &Path, from: u32, to: u32, bounded: bool) -> (Vec<Vec<u8>>, u64) {
    let env = Env::open(dir, common::tiny_options(64 << 20)).expect("reopen");
    let tree = env.open_tree("t").expect("open tree");
    let before = env.counters().io.user_read.read_bytes;
    let got = range(&tree, from, to, bounded);
    (got, env.counters().io.user_read.read_bytes - before)
}

fn range(tree: &TreeHandle, from: u32, to: u32, bounded: bool) -> Vec<Vec<u8>> {
    let mut c = tree.cursor();
    if bounded {
        c.set_upper_bound(Some(key(to)));
    }
    c.seek(&key(from)).expect("seek");
    let mut got = Vec::new();
    while c.valid() && c.key() < &key(to)[..] {
        let i: u32 = std::str::from_utf8(&c.key()[3..])
            .expect("utf8")
            .parse()
            .expect("index");
        assert_eq!(c.value(), &value(i)[..]);
        got.push(c.key().to_vec());
        c.next().expect("next");
    }
    got
}

#[test]
fn a_bounded_short_scan_reads_far_less_than_a_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    load(dir.path());
    let model: Vec<Vec<u8>> = (20_000..20_020).map(key).collect();
    let (bounded, bounded_bytes) = cold_range(dir.path(), 20_000, 20_020, true);
    let (unbounded, unbounded_bytes) = cold_range(dir.path(), 20_000, 20_020, false);
    assert_eq!(bounded, model);
    assert_eq!(unbounded, model);
    eprintln!("bytes read: bounded {bounded_bytes}, unbounded {unbounded_bytes}");
    assert!(bounded_bytes > 0);
    assert!(
        bounded_bytes * 3 <= unbounded_bytes,
        "a 20-key scan read {bounded_bytes} bytes with its bound, {unbounded_bytes} without"
    );
}

#[test]
fn a_cursor_goes_on_past_its_bound_as_without_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    load(dir.path());
    let env = Env::open(dir.path(), common::tiny_options(64 << 20)).expect("reopen");
    let tree = env.open_tree("t").expect("open tree");
    // Bound early, read to the end: every key once, in order.
    let mut c = tree.cursor();
    c.set_upper_bound(Some(key(100)));
    c.seek(&key(50)).expect("seek");
    let mut n = 50;
    while c.valid() {
        assert_eq!(c.key(), &key(n)[..]);
        assert_eq!(c.value(), &value(n)[..]);
        n += 1;
        c.next().expect("next");
    }
    assert_eq!(n, KEYS);
    // A bound that falls on nothing and one past every key change nothing either.
    for bound in [b"key00003000x".to_vec(), b"zzz".to_vec(), Vec::new()] {
        let mut c = tree.cursor();
        c.set_upper_bound(Some(bound.clone()));
        c.seek(&key(2_990)).expect("seek");
        let mut got = Vec::new();
        while c.valid() && got.len() < 40 {
            got.push(c.key().to_vec());
            c.next().expect("next");
        }
        assert_eq!(
            got,
            (2_990..3_030).map(key).collect::<Vec<_>>(),
            "bound {bound:?}"
        );
    }
    tree.verify().expect("verify");
}
