//! Eviction writes a dirty node after taking it out of the node table and releasing the
//! tree's lock (`tree/writeback.rs`, K1-K3). Until that write ends, the node's live image on
//! disk is older than the node: a load that read it and installed it would bring back
//! values already overwritten. Here one writer rewrites every key round after round with a
//! cache about an eighth of the data (1.7 MB of keys and values, 192 KiB) and 16 KiB nodes,
//! so nearly every write evicts dirty nodes and
//! nearly every read loads one, while readers check that no key's value is ever older than
//! the round the writer had finished before the read began, and checkpoints run every few
//! milliseconds (K3). At the end the tree verifies, and after a reopen every key holds its
//! last value. (A failed write out, which puts the node back, is a unit test in
//! `tree/writeback.rs`: here, after the failure, whether a read gets its value or the
//! eviction's error depends on timing.)

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

use shale_engine::{Env, EnvOptions, TreeOptions, WriteBatch};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

const BUDGET: usize = 192 << 10;
const KEYS: u64 = 8_000;
const ROUNDS: u64 = 6;

fn key(i: u64) -> [u8; 8] {
    i.to_be_bytes()
}

/// The value key `i` gets in round `round`: the round first, then filler.
fn value(i: u64, round: u64) -> Vec<u8> {
    let mut v = round.to_be_bytes().to_vec();
    v.extend(i.to_le_bytes().repeat(24));
    v
}

fn round_of(v: &[u8]) -> u64 {
    u64::from_be_bytes(v[..8].try_into().expect("8-byte round"))
}

fn next(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

fn options() -> EnvOptions {
    EnvOptions {
        cache_bytes: BUDGET,
        tree_defaults: TreeOptions {
            node_size_bytes: 16 << 10,
            basement_size_bytes: 2 << 10,
            ..TreeOptions::tiny()
        },
        checkpoint_interval: Some(Duration::from_millis(20)),
        ..EnvOptions::default()
    }
}

#[test]
fn readers_never_see_a_value_older_than_a_finished_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let env = Env::open(dir.path(), options()).expect("open");
    let t = env.create_tree("t", None).expect("create");
    // done[i]: the last round whose write of key i had returned.
    let done: Vec<AtomicU64> = (0..KEYS).map(|_| AtomicU64::new(0)).collect();
    write_round(&env, &t, 0, &done);
    let stop = AtomicBool::new(false);
    let reads = AtomicU64::new(0);
    std::thread::scope(|s| {
        for r in 0..3u64 {
            let (t, stop, reads, done) = (&t, &stop, &reads, &done);
            s.spawn(move || {
                let mut x = 0x2545_F491_4F6C_DD1D ^ (r + 1);
                while !stop.load(Ordering::Relaxed) {
                    let i = next(&mut x) % KEYS;
                    let floor = done[i as usize].load(Ordering::Acquire);
                    let got = t.get(&key(i)).expect("get").expect("every key exists");
                    assert!(
                        round_of(&got) >= floor,
                        "key {i}: read round {} after round {floor} was written",
                        round_of(&got)
                    );
                    reads.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        for round in 1..=ROUNDS {
            write_round(&env, &t, round, &done);
        }
        stop.store(true, Ordering::Relaxed);
    });
    assert!(reads.load(Ordering::Relaxed) > 1_000, "the readers ran");
    let io = env.io_counters();
    assert!(
        io.eviction.write_calls > 100,
        "eviction wrote dirty nodes: {:?}",
        io.eviction
    );
    t.verify().expect("verify");
    env.reopen().expect("reopen");
    let t = env.open_tree("t").expect("open tree");
    for i in 0..KEYS {
        let got = t.get(&key(i)).expect("get after reopen");
        assert_eq!(got, Some(value(i, ROUNDS)), "key {i} after reopen");
    }
    t.verify().expect("verify after reopen");
}

/// Writes every key's value for `round` in random-order batches, recording each batch's
/// keys as done once the write returned.
fn write_round(env: &Env, t: &shale_engine::TreeHandle, round: u64, done: &[AtomicU64]) {
    let mut order: Vec<u64> = (0..KEYS).collect();
    let mut x = 0x9E37_79B9_7F4A_7C15 ^ round;
    for j in (1..order.len()).rev() {
        order.swap(j, (next(&mut x) % (j as u64 + 1)) as usize);
    }
    for chunk in order.chunks(50) {
        let mut b = WriteBatch::new();
        for &i in chunk {
            b.put(t, &key(i), &value(i, round));
        }
        env.write(b).expect("write");
        for &i in chunk {
            done[i as usize].store(round, Ordering::Release);
        }
    }
}
