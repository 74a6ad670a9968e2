//! Point reads and scans install the basements they read holding only the tree's shared
//! lock (`tree/slot.rs`, L1). Four readers race each other's installs of the same leaves
//! while a writer overwrites other keys (flushes, splits and evictions under the exclusive
//! lock) and checkpoints run, with a cache a twentieth of the data so nearly every read
//! installs and eviction runs all the time. Every read of a key that never changes must
//! return its value, scans must stay in key order, the tree must verify, and when the tree
//! is dropped the cache's charge must come back to exactly where it was: a basement
//! installed twice, or charged without being installed, would leave a difference.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

use shale_engine::{Env, EnvOptions, TreeOptions, WriteBatch};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

const BUDGET: usize = 256 << 10;

fn key(i: u64) -> [u8; 8] {
    i.to_be_bytes()
}

/// The value of odd key `i`, which is never overwritten.
fn fixed(i: u64) -> Vec<u8> {
    let mut v = i.to_le_bytes().repeat(8);
    v.push(0xF1);
    v
}

/// The value even key `i` gets in writer round `round`.
fn churned(i: u64, round: u64) -> Vec<u8> {
    [i.to_le_bytes(), round.to_le_bytes()].concat().repeat(4)
}

/// A deterministic sequence for each reader (no rand dependency needed here).
fn next(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

#[test]
fn racing_readers_read_exact_values_and_leave_the_charge_exact() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = EnvOptions {
        cache_bytes: BUDGET,
        tree_defaults: TreeOptions {
            node_size_bytes: 16 << 10,
            basement_size_bytes: 1 << 10,
            ..TreeOptions::tiny()
        },
        checkpoint_interval: Some(std::time::Duration::from_millis(50)),
        ..EnvOptions::default()
    };
    let env = Env::open(dir.path(), options).expect("open");
    let base = env.counters().cache_used_bytes;
    let t = env.create_tree("t", None).expect("create");
    let n = (20 * BUDGET / 80) as u64;
    for start in (0..n).step_by(200) {
        let mut b = WriteBatch::new();
        for i in start..(start + 200).min(n) {
            let v = if i % 2 == 1 { fixed(i) } else { churned(i, 0) };
            b.put(&t, &key(i), &v);
        }
        env.write(b).expect("write");
    }
    env.checkpoint().expect("checkpoint");
    let stop = AtomicBool::new(false);
    let reads = AtomicU64::new(0);
    std::thread::scope(|s| {
        for r in 0..4u64 {
            let (t, stop, reads) = (&t, &stop, &reads);
            s.spawn(move || {
                let mut x = 0x9E37_79B9_7F4A_7C15 ^ (r + 1);
                while !stop.load(Ordering::Relaxed) {
                    let i = next(&mut x) % n;
                    if i.is_multiple_of(16) {
                        scan_from(t, i, n);
                    } else {
                        let i = i | 1;
                        let got = t.get(&key(i)).expect("get");
                        assert_eq!(got, Some(fixed(i)), "key {i}");
                    }
                    reads.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        for round in 1..=3 {
            for start in (0..n).step_by(2 * 64) {
                let mut b = WriteBatch::new();
                for i in (start..(start + 2 * 64).min(n)).step_by(2) {
                    b.put(&t, &key(i), &churned(i, round));
                }
                env.write(b).expect("write");
            }
        }
        stop.store(true, Ordering::Relaxed);
    });
    assert!(reads.load(Ordering::Relaxed) > 1000, "the readers ran");
    env.checkpoint().expect("checkpoint");
    t.verify().expect("verify");
    for i in (1..n).step_by(97) {
        let want = if i % 2 == 1 { fixed(i) } else { churned(i, 3) };
        assert_eq!(t.get(&key(i)).expect("get"), Some(want), "key {i}");
    }
    let c = env.counters();
    assert!(
        c.cache_evictions + c.cache_partial_evictions > 0,
        "the cache evicted: {c:?}"
    );
    drop(t);
    env.drop_tree("t").expect("drop");
    assert_eq!(
        env.counters().cache_used_bytes,
        base,
        "every install was charged once and refunded once"
    );
}

/// Reads up to 20 entries from `i`: keys strictly increase and odd keys hold their value.
fn scan_from(t: &shale_engine::TreeHandle, i: u64, n: u64) {
    let mut c = t.cursor();
    c.seek(&key(i)).expect("seek");
    let mut last = None;
    for _ in 0..20 {
        if !c.valid() {
            break;
        }
        let k = u64::from_be_bytes(c.key().try_into().expect("8-byte key"));
        assert!(
            k < n && last.is_none_or(|l| k > l),
            "order: {last:?} then {k}"
        );
        if k % 2 == 1 {
            assert_eq!(c.value(), &fixed(k)[..], "scanned key {k}");
        }
        last = Some(k);
        c.next().expect("next");
    }
}
