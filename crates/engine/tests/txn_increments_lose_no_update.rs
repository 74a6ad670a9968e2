//! Read-modify-write increments from many threads, each in its own transaction with a retry
//! on `WriteConflict`, lose no update: the final counters equal the number of commits. Tiny
//! nodes and cache so flushes, splits and evictions run under the contention.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

mod common;

use shale_engine::{Env, Error, TreeHandle};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

const THREADS: usize = 6;
const INCREMENTS_PER_THREAD: u64 = 300;
const COUNTERS: u64 = 3;

fn read_u64(v: Option<Vec<u8>>) -> u64 {
    v.map_or(0, |v| {
        u64::from_le_bytes(v.try_into().expect("8-byte counter"))
    })
}

/// One increment of counter `c` (and a matching one in `mirror`), retried until it commits.
/// Returns how many attempts conflicted.
fn increment(env: &Env, t: &TreeHandle, mirror: &TreeHandle, c: u64) -> u64 {
    let key = format!("counter{c}").into_bytes();
    let mut conflicts = 0;
    loop {
        let mut txn = env.begin();
        let attempt = (|| {
            let n = read_u64(txn.get(t, &key)?);
            txn.put(t, &key, &(n + 1).to_le_bytes())?;
            let m = read_u64(txn.get(mirror, &key)?);
            txn.put(mirror, &key, &(m + 1).to_le_bytes())?;
            Ok::<(), Error>(())
        })();
        match attempt {
            Ok(()) => match txn.commit() {
                Ok(()) => return conflicts,
                Err(e) => panic!("commit failed: {e}"),
            },
            Err(Error::WriteConflict { .. }) => {
                conflicts += 1;
                txn.abort();
                std::thread::yield_now();
            }
            Err(e) => panic!("unexpected error: {e}"),
        }
    }
}

#[test]
fn concurrent_read_modify_write_increments_lose_no_update() {
    let dir = tempfile::tempdir().expect("tempdir");
    let env = Arc::new(Env::open(dir.path(), common::tiny_options(128 << 10)).expect("open"));
    let t = env.create_tree("t", None).expect("create t");
    let mirror = env.create_tree("mirror", None).expect("create mirror");
    // Filler so the trees have several levels and nodes get evicted meanwhile.
    for i in 0..3000u32 {
        t.put(format!("fill{i:05}").as_bytes(), &[7u8; 40])
            .expect("fill");
    }
    let conflicts = Arc::new(AtomicU64::new(0));
    std::thread::scope(|s| {
        for th in 0..THREADS {
            let (env, t, mirror, conflicts) = (&env, &t, &mirror, &conflicts);
            s.spawn(move || {
                for i in 0..INCREMENTS_PER_THREAD {
                    let c = (i + th as u64) % COUNTERS;
                    let n = increment(env, t, mirror, c);
                    conflicts.fetch_add(n, Ordering::Relaxed);
                }
            });
        }
    });
    let total: u64 = (0..COUNTERS)
        .map(|c| read_u64(t.get(format!("counter{c}").as_bytes()).expect("get")))
        .sum();
    assert_eq!(
        total,
        THREADS as u64 * INCREMENTS_PER_THREAD,
        "lost updates"
    );
    for c in 0..COUNTERS {
        let k = format!("counter{c}").into_bytes();
        assert_eq!(
            t.get(&k).expect("get"),
            mirror.get(&k).expect("get"),
            "both trees changed together"
        );
    }
    let counters = env.counters();
    assert_eq!(counters.active_txns, 0);
    assert_eq!(counters.write_conflicts, conflicts.load(Ordering::Relaxed));
    assert!(
        counters.write_conflicts > 0,
        "{THREADS} threads on {COUNTERS} counters must conflict"
    );
    t.verify().expect("verify t");
    mirror.verify().expect("verify mirror");
    println!(
        "{} commits, {} conflicts, {} versions retained in total, {} collected",
        counters.txn_commits,
        counters.write_conflicts,
        counters.versions_retained_total,
        counters.versions_collected
    );
}
