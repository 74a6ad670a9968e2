//! The cache charges what its nodes really hold. A counting allocator (rounding every
//! allocation up to jemalloc's size classes, as the binaries' allocator does) measures the
//! memory a tree's cached nodes take while messages sit in buffers and after every message
//! has reached a leaf, and the cache's charge must be within a band of it. This failed while
//! an entry was charged 48 bytes beyond its serialized size and a message 64 (the charge was
//! about 0.75x the memory, so the process held a third more than its budget), and while a
//! buffer's first message for a key reserved room for four (0.84x with buffers).
//!
//! The same holds for partitions read back from disk, which arrive packed and are unpacked
//! by the first change: this failed while unpacking gave every entry an empty list of older
//! versions with room for four and every buffered key a list with room for four messages
//! (0.67x after overwriting reopened data, a third of the memory uncharged).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

use shale_engine::{Env, EnvOptions, FsyncPolicy, TreeOptions, WriteBatch};
use shale_testkit::{live_bytes, CountingAlloc};

#[global_allocator]
static ALLOCATOR: CountingAlloc = CountingAlloc;

fn key(i: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&i.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes());
    k[8..].copy_from_slice(&i.to_be_bytes());
    k
}

/// Live bytes and the cache's charge now, to count both from.
fn base(env: &Env) -> (isize, u64) {
    (live_bytes(), env.counters().cache_used_bytes)
}

/// The cache's charge over the memory the allocator holds, both counted from `base`.
fn charge_ratio(env: &Env, base: (isize, u64)) -> f64 {
    let live = live_bytes() - base.0;
    let charged = env.counters().cache_used_bytes - base.1;
    charged as f64 / live as f64
}

fn options() -> EnvOptions {
    EnvOptions {
        cache_bytes: 1 << 30,
        tree_defaults: TreeOptions {
            node_size_bytes: 1 << 20,
            basement_size_bytes: 64 << 10,
            ..TreeOptions::default()
        },
        fsync: FsyncPolicy::EveryCommit,
        checkpoint_interval: None,
        ..EnvOptions::default()
    }
}

/// Puts keys `0..n` with `value`, 1,000 per batch.
fn put_all(env: &Env, t: &shale_engine::TreeHandle, n: u64, value: &[u8]) {
    for start in (0..n).step_by(1000) {
        let mut b = WriteBatch::new();
        for i in start..start + 1000 {
            b.put(t, &key(i), value);
        }
        env.write(b).expect("write");
    }
}

fn check_band(when: &str, r: f64) {
    println!("charge / memory {when}: {r:.3}");
    assert!(
        (0.9..=1.35).contains(&r),
        "{when}: the cache charges {r:.3}x the memory its nodes hold"
    );
}

/// One test, in stages: the counting allocator is global, so no other test may run
/// beside it in this binary.
#[test]
fn the_charge_follows_the_memory_of_buffers_and_leaves() {
    let dir = tempfile::tempdir().expect("tempdir");
    let n = 300_000u64;
    {
        let env = Env::open(dir.path(), options()).expect("open");
        let t = env.create_tree("t", None).expect("create");
        let base = base(&env);
        put_all(&env, &t, n, &[0x5a; 100]);
        check_band("with buffers", charge_ratio(&env, base));
        env.flush_all().expect("flush_all");
        check_band("in leaves", charge_ratio(&env, base));
        // Half of the keys again, left in buffers: the reopened tree has packed buffers.
        put_all(&env, &t, n / 2, &[0x6b; 100]);
        t.verify().expect("verify");
        drop(t);
        env.close().expect("close");
    }
    // Reopened, every partition is read packed; overwriting every key unpacks the buffers
    // the messages pass through and, once flushed, every leaf.
    let env = Env::open(dir.path(), options()).expect("reopen");
    let t = env.open_tree("t").expect("open tree");
    let base = base(&env);
    put_all(&env, &t, n, &[0x7c; 100]);
    check_band("after overwriting reopened data", charge_ratio(&env, base));
    env.flush_all().expect("flush_all");
    check_band("after flushing it to the leaves", charge_ratio(&env, base));
    t.verify().expect("verify");
    drop(t);
    env.close().expect("close");
}
