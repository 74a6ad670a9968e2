//! A writer that waits out backpressure runs flush units beside the flusher
//! (`Tree::help_flush`), so two units are in flight at once: one moving messages under the
//! tree's lock while the other loads nodes or writes what it evicts with no lock held. Here
//! four writers put and delete random keys of their own (a model each) into one tree with
//! 16 KiB nodes and a cache of about a sixteenth of the data, so the root's buffers fill
//! faster than one flusher empties them, while readers look up keys and checkpoints run
//! every few milliseconds. Writers must have run units (the counter), and afterwards the
//! tree verifies and holds exactly the models' keys, before and after a reopen.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

use shale_engine::{Env, EnvOptions, TreeHandle, TreeOptions, WriteBatch};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

const WRITERS: u64 = 4;
const KEYS_PER_WRITER: u64 = 6_000;
const BATCHES: u64 = 500;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn next(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// Key `i` of writer `w`: the writers' keys interleave, so they share leaves and buffers.
fn key(w: u64, i: u64) -> Vec<u8> {
    (i * WRITERS + w).to_be_bytes().to_vec()
}

fn value(w: u64, i: u64, batch: u64) -> Vec<u8> {
    let mut v = batch.to_be_bytes().to_vec();
    v.extend((w * 31 + i).to_le_bytes().repeat(12));
    v
}

fn options() -> EnvOptions {
    EnvOptions {
        cache_bytes: 256 << 10,
        tree_defaults: TreeOptions {
            node_size_bytes: 16 << 10,
            basement_size_bytes: 2 << 10,
            ..TreeOptions::tiny()
        },
        checkpoint_interval: Some(Duration::from_millis(15)),
        ..EnvOptions::default()
    }
}

/// Writer `w`'s batches: mostly puts, a fifth deletes, each batch 40 changes.
fn write(env: &Env, t: &TreeHandle, w: u64) -> Model {
    let mut model = Model::new();
    let mut x = 0x9E37_79B9_7F4A_7C15 ^ (w + 1);
    for batch in 0..BATCHES {
        let mut b = WriteBatch::new();
        for _ in 0..40 {
            let i = next(&mut x) % KEYS_PER_WRITER;
            let k = key(w, i);
            if next(&mut x).is_multiple_of(5) {
                b.delete(t, &k);
                model.remove(&k);
            } else {
                let v = value(w, i, batch);
                b.put(t, &k, &v);
                model.insert(k, v);
            }
        }
        env.write(b).expect("write");
    }
    model
}

fn check(t: &TreeHandle, model: &Model) {
    t.verify().expect("verify");
    let mut c = t.cursor();
    c.seek_to_first().expect("seek");
    let mut seen = 0usize;
    let mut expected = model.iter();
    while let Some((k, v)) = c.entry() {
        let (mk, mv) = expected
            .next()
            .expect("the tree holds a key the models do not");
        assert_eq!((k, v), (mk.as_slice(), mv.as_slice()), "entry {seen}");
        seen += 1;
        c.next().expect("next");
    }
    assert_eq!(seen, model.len(), "the tree lacks keys the models hold");
}

#[test]
fn writers_flushing_beside_the_flusher_keep_every_change() {
    let dir = tempfile::tempdir().expect("tempdir");
    let env = Env::open(dir.path(), options()).expect("open");
    let t = env.create_tree("t", None).expect("create");
    let stop = AtomicBool::new(false);
    let reads = AtomicU64::new(0);
    let mut model = Model::new();
    std::thread::scope(|s| {
        for r in 0..2u64 {
            let (t, stop, reads) = (&t, &stop, &reads);
            s.spawn(move || {
                let mut x = 0x2545_F491_4F6C_DD1D ^ (r + 1);
                while !stop.load(Ordering::Relaxed) {
                    let k = key(next(&mut x) % WRITERS, next(&mut x) % KEYS_PER_WRITER);
                    t.get(&k).expect("get");
                    reads.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let (env, t) = (&env, &t);
                s.spawn(move || write(env, t, w))
            })
            .collect();
        for w in writers {
            model.extend(w.join().expect("writer"));
        }
        stop.store(true, Ordering::Relaxed);
    });
    assert!(reads.load(Ordering::Relaxed) > 100, "the readers ran");
    let stats = env.counters();
    assert!(
        stats.writer_flush_units > 0,
        "no writer flushed while waiting: {} backpressure waits",
        stats.backpressure_waits
    );
    check(&t, &model);
    env.reopen().expect("reopen");
    let t = env.open_tree("t").expect("open tree");
    check(&t, &model);
}
