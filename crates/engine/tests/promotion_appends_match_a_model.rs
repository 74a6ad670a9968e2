//! Batches that append past the last key go straight to the leaf (`tree/promote.rs`), and
//! the tree stays the one a model says: appends mixed with overwrites and deletes of old
//! keys (which wait in buffers, so the next appends below them are not promoted until a
//! flush empties the path), a key put and deleted in one batch, snapshots taken before an
//! append, checkpoints and reopens, tiny nodes and a tiny cache so that splits up to a new
//! root, evictions and flushes happen throughout. The seed is printed on failure; rerun one
//! with `SHALE_SEED=<seed>`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

mod common;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use shale_engine::{Env, EnvOptions, TreeHandle, WriteBatch};
use std::collections::BTreeMap;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn options() -> EnvOptions {
    common::tiny_options(128 << 10)
}

fn key(n: u64) -> Vec<u8> {
    format!("key{n:010}").into_bytes()
}

fn value(rng: &mut StdRng, n: u64) -> Vec<u8> {
    let len = rng.gen_range(0..80);
    let mut v = n.to_le_bytes().to_vec();
    v.extend((0..len).map(|i| (i as u8) ^ (rng.gen::<u8>() % 3)));
    v
}

/// Every key and value, in order, as a cursor sees them, and each key alone.
fn check(t: &TreeHandle, model: &Model) {
    let got = common::scan_all(t);
    let want: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(got.len(), want.len(), "scan length");
    assert!(got == want, "the scan differs from the model");
    for (k, v) in model.iter().step_by(7) {
        assert_eq!(t.get(k).expect("get").as_ref(), Some(v), "key {k:?}");
    }
    let shape = t.verify().expect("verify");
    assert_eq!(shape.entries as usize, model.len(), "entries in the leaves");
}

/// One batch: appends past every key so far (sometimes with a key put twice or put and
/// deleted); the newest keys again followed by appends (those keys may still wait in a
/// buffer, not yet in the leaf: A1 in `tree/promote.rs` is what keeps their new values from being overtaken by
/// the old ones); or overwrites and deletes of old keys.
fn batch(rng: &mut StdRng, t: &TreeHandle, model: &mut Model, next: &mut u64) -> WriteBatch {
    let mut b = WriteBatch::new();
    let put = |b: &mut WriteBatch, model: &mut Model, k: Vec<u8>, v: Vec<u8>| {
        b.put(t, &k, &v);
        model.insert(k, v);
    };
    match rng.gen_range(0..20) {
        0..=1 if !model.is_empty() => {
            for _ in 0..rng.gen_range(1..10) {
                let k = key(rng.gen_range(0..*next));
                if rng.gen_bool(0.3) {
                    b.delete(t, &k);
                    model.remove(&k);
                } else {
                    put(&mut b, model, k, value(rng, 0));
                }
            }
            return b;
        }
        2..=5 => {
            let newest: Vec<Vec<u8>> = model
                .keys()
                .rev()
                .take(rng.gen_range(1..6))
                .cloned()
                .collect();
            for k in newest {
                let v = value(rng, 1);
                put(&mut b, model, k, v);
            }
        }
        _ => {}
    }
    for _ in 0..rng.gen_range(1..60) {
        let k = key(*next);
        *next += rng.gen_range(1..3);
        let v = value(rng, *next);
        put(&mut b, model, k.clone(), v);
        match rng.gen_range(0..20) {
            0 => {
                b.delete(t, &k);
                model.remove(&k);
            }
            1 => {
                let v = value(rng, *next + 1);
                put(&mut b, model, k, v);
            }
            _ => {}
        }
    }
    b
}

fn run(seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut env = Env::open(dir.path(), options()).expect("open");
    let mut t = env.create_tree("appends", None).expect("create");
    let mut model = Model::new();
    let mut next = 0u64;
    // Counters start over with each open: (promoted, injected, leaf splits) summed.
    let mut sums = (0, 0, 0);
    let mut add = |env: &Env| {
        let c = env.counters();
        sums.0 += c.messages_promoted;
        sums.1 += c.messages_injected;
        sums.2 += c.leaf_splits;
    };
    for round in 0..4 {
        for _ in 0..100 {
            // A snapshot before a batch sees none of it, promoted or not.
            let view = env.read_view();
            let before = model.clone();
            let b = batch(&mut rng, &t, &mut model, &mut next);
            env.write(b).expect("write");
            for k in model.keys().rev().take(3) {
                let seen = view.get(&t, k).expect("view get");
                assert_eq!(seen.as_ref(), before.get(k), "snapshot read of {k:?}");
            }
            if rng.gen_range(0..40) == 0 {
                env.checkpoint().expect("checkpoint");
            }
        }
        check(&t, &model);
        if round % 2 == 1 {
            env.checkpoint().expect("checkpoint");
            add(&env);
            drop(t);
            drop(env);
            env = Env::open(dir.path(), options()).expect("reopen");
            t = env.open_tree("appends").expect("open tree");
            check(&t, &model);
        }
    }
    env.flush_all().expect("flush all");
    check(&t, &model);
    add(&env);
    let (promoted, injected, splits) = sums;
    eprintln!("{promoted} of {injected} messages promoted, {splits} leaf splits");
    assert!(
        promoted * 3 > injected,
        "most appends should be promoted: {promoted} of {injected} messages"
    );
    assert!(splits > 10, "{splits} leaf splits");
}

#[test]
fn appends_promoted_to_leaves_match_the_model() {
    for seed in common::seeds(2) {
        eprintln!("seed {seed}");
        run(seed);
    }
}
