//! Keys inserted in ascending order leave full leaves behind: a leaf that keeps receiving
//! flushes past its last key is split at its last basement, not in half, so a sequential
//! fill needs clearly fewer leaves than the same keys inserted in random order (whose even
//! splits leave leaves about two-thirds full), and every key reads back.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

mod common;

use rand::seq::SliceRandom;
use rand::SeedableRng;
use shale_engine::{Env, TreeHandle, WriteBatch};

const KEYS: u32 = 20_000;

fn key(i: u32) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

fn value(i: u32) -> Vec<u8> {
    format!("value-{i:08}-{}", "v".repeat(24)).into_bytes()
}

fn fill(env: &Env, tree: &TreeHandle, order: &[u32]) {
    for chunk in order.chunks(50) {
        let mut batch = WriteBatch::new();
        for &i in chunk {
            batch.put(tree, &key(i), &value(i));
        }
        env.write(batch).expect("write");
    }
    env.flush_all().expect("flush all");
    env.checkpoint().expect("checkpoint");
}

#[test]
fn a_sequential_fill_leaves_full_leaves() {
    let dir = tempfile::tempdir().expect("tempdir");
    let env = Env::open(dir.path(), common::tiny_options(8 << 20)).expect("open");
    let seq = env.create_tree("sequential", None).expect("create");
    let random = env.create_tree("random", None).expect("create");
    let ascending: Vec<u32> = (0..KEYS).collect();
    let mut shuffled = ascending.clone();
    shuffled.shuffle(&mut rand::rngs::StdRng::seed_from_u64(11));
    fill(&env, &seq, &ascending);
    fill(&env, &random, &shuffled);
    let (s, r) = (
        seq.verify().expect("verify"),
        random.verify().expect("verify"),
    );
    assert_eq!((s.entries, r.entries), (u64::from(KEYS), u64::from(KEYS)));
    eprintln!(
        "leaves: sequential fill {}, random fill {}",
        s.leaves, r.leaves
    );
    assert!(
        s.leaves * 10 <= r.leaves * 7,
        "sequential fill: {} leaves, random fill of the same keys: {}",
        s.leaves,
        r.leaves
    );
    for i in (0..KEYS).step_by(97) {
        assert_eq!(seq.get(&key(i)).expect("get"), Some(value(i)), "key {i}");
    }
}
