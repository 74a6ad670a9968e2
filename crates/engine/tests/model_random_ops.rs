//! Random operations against a `BTreeMap` model, with tiny nodes and a tiny cache so that
//! flushes, splits, merges, evictions, checkpoints and close/reopen happen in every run.
//! The seed is printed on failure; rerun one with `SHALE_SEED=<seed>`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use shale_engine::{Env, EnvOptions, TreeHandle, WriteBatch};
use std::collections::BTreeMap;
use std::time::Duration;

mod common;

fn options() -> EnvOptions {
    common::tiny_options(96 << 10)
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn key(rng: &mut StdRng) -> Vec<u8> {
    format!("k{:05}", rng.gen_range(0..3000)).into_bytes()
}

fn value(rng: &mut StdRng) -> Vec<u8> {
    let len = match rng.gen_range(0..20) {
        0 => rng.gen_range(1000..3000),
        _ => rng.gen_range(0..60),
    };
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(rng.gen::<u8>() % 4))
        .collect()
}

fn check_cursor(t: &TreeHandle, model: &Model, rng: &mut StdRng) {
    let got = common::scan_all(t);
    let mut c = t.cursor();
    let want: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(got.len(), want.len(), "forward scan length");
    assert!(got == want, "forward scan differs from the model");
    // Backward from a random point.
    let probe = key(rng);
    c.seek_for_prev(&probe).expect("seek_for_prev");
    let mut back = Vec::new();
    while c.valid() && back.len() < 50 {
        back.push(c.key().to_vec());
        c.prev().expect("prev");
    }
    let want_back: Vec<_> = model
        .range(..=probe.clone())
        .rev()
        .take(50)
        .map(|(k, _)| k.clone())
        .collect();
    assert_eq!(back, want_back, "backward scan from {probe:?}");
}

fn run(seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut env = Env::open(dir.path(), options()).expect("open");
    let mut t = env.create_tree("t", None).expect("create");
    let mut model = Model::new();
    let mut counters = BTreeMap::new();
    let mut totals = Totals::default();
    for step in 0..6000 {
        match rng.gen_range(0..100) {
            0..=54 => {
                let (k, v) = (key(&mut rng), value(&mut rng));
                t.put(&k, &v).expect("put");
                model.insert(k, v);
            }
            55..=69 => {
                let k = key(&mut rng);
                t.delete(&k).expect("delete");
                model.remove(&k);
            }
            70..=74 => {
                let k = format!("c{:03}", rng.gen_range(0..50)).into_bytes();
                let d: i64 = rng.gen_range(-5..10);
                t.update(&k, &d.to_le_bytes()).expect("update");
                let cur = counters.entry(k.clone()).or_insert(0i64);
                *cur += d;
                model.insert(k, cur.to_le_bytes().to_vec());
            }
            75..=79 => {
                let mut b = WriteBatch::new();
                for _ in 0..rng.gen_range(1..20) {
                    let (k, v) = (key(&mut rng), value(&mut rng));
                    b.put(&t, &k, &v);
                    model.insert(k, v);
                }
                env.write(b).expect("batch");
            }
            80..=93 => {
                let k = key(&mut rng);
                assert_eq!(
                    t.get(&k).expect("get"),
                    model.get(&k).cloned(),
                    "get {k:?} at step {step}"
                );
            }
            94..=95 => env.flush_all().expect("flush"),
            96 => env.checkpoint().expect("checkpoint"),
            97 => check_cursor(&t, &model, &mut rng),
            _ => {
                // Reopen: cleanly half the time, as after a crash the other half. Handles
                // keep the environment open, so they go first.
                drop(t);
                totals.add(&env.counters());
                if rng.gen_bool(0.5) {
                    env.close().expect("close");
                } else {
                    drop(env);
                }
                env = Env::open(dir.path(), options()).expect("reopen");
                t = env.open_tree("t").expect("open tree");
                assert_eq!(
                    t.verify().expect("verify after reopen").entries as usize,
                    model.len()
                );
            }
        }
    }
    env.flush_all().expect("flush");
    assert_eq!(t.verify().expect("verify").entries as usize, model.len());
    check_cursor(&t, &model, &mut rng);
    // Shrink: delete nine keys in ten so leaves and internal nodes merge.
    let doomed: Vec<Vec<u8>> = model
        .keys()
        .filter(|_| rng.gen_range(0..10) != 0)
        .cloned()
        .collect();
    for k in doomed {
        t.delete(&k).expect("delete");
        model.remove(&k);
    }
    env.flush_all().expect("flush");
    assert_eq!(
        t.verify().expect("verify after shrinking").entries as usize,
        model.len()
    );
    check_cursor(&t, &model, &mut rng);
    totals.add(&env.counters());
    env.close().expect("close");
    assert!(
        totals.flushes > 0
            && totals.leaf_splits > 0
            && totals.evictions > 0
            && totals.partial_evictions > 0,
        "tiny sizes must exercise the tree: {totals:?}"
    );
    assert!(
        totals.headers_read > 0 && totals.basements_read > 0 && totals.buffers_read > 0,
        "lookups must load skeletons and single partitions: {totals:?}"
    );
    assert!(
        totals.leaf_merges > 0,
        "deletes must merge leaves: {totals:?}"
    );
    assert!(
        totals.internal_splits > 0,
        "the tree must grow past two levels: {totals:?}"
    );
}

/// Counters summed over every open of the environment in one run.
#[derive(Debug, Default)]
struct Totals {
    flushes: u64,
    leaf_splits: u64,
    internal_splits: u64,
    leaf_merges: u64,
    evictions: u64,
    partial_evictions: u64,
    headers_read: u64,
    basements_read: u64,
    buffers_read: u64,
}

impl Totals {
    fn add(&mut self, c: &shale_engine::EngineCounters) {
        self.flushes += c.flushes;
        self.leaf_splits += c.leaf_splits;
        self.internal_splits += c.internal_splits;
        self.leaf_merges += c.leaf_merges;
        self.evictions += c.cache_evictions;
        self.partial_evictions += c.cache_partial_evictions;
        self.headers_read += c.headers_read;
        self.basements_read += c.basements_read;
        self.buffers_read += c.buffers_read;
    }
}

#[test]
fn random_operations_match_a_btreemap() {
    for seed in common::seeds(3) {
        let result = std::panic::catch_unwind(|| run(seed));
        if result.is_err() {
            panic!("model test failed with SHALE_SEED={seed}");
        }
    }
    let _ = Duration::ZERO;
}
