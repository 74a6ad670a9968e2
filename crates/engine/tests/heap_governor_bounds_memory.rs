//! With a `HeapProbe`, the environment keeps the heap's resident memory under the cache
//! budget plus its headroom: it has the allocator release dirty pages near the limit, lowers
//! the cache's working limit by what memory beyond the charge would otherwise take over it
//! (never by more than a quarter of the budget), and relaxes once that memory is gone.
//!
//! The probe here is a model heap: resident = the cache's charge + `beyond` (memory the
//! cache does not see) + `dirty`, which grows a little at every reading and falls to zero on
//! release — so the test knows exactly what the governor should decide.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

mod common;

use shale_engine::{Env, EnvOptions, HeapProbe, HeapSample, TreeHandle, WriteBatch};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

const MIB: usize = 1 << 20;
const BUDGET: usize = 8 * MIB;
const HEADROOM: usize = 40 * MIB;
/// What each reading adds to the model's dirty pages.
const DIRTY_PER_SAMPLE: usize = MIB;

#[derive(Debug, Default)]
struct ModelHeap {
    /// The environment whose charge the model adds to (weak: the environment owns the probe).
    env: Mutex<Weak<Env>>,
    beyond: AtomicUsize,
    dirty: AtomicUsize,
    releases: AtomicUsize,
    /// The highest resident figure reported.
    peak: AtomicUsize,
}

impl HeapProbe for ModelHeap {
    fn sample(&self) -> Option<HeapSample> {
        let env = self.env.lock().expect("probe lock").upgrade()?;
        let charged = env.counters().cache_used_bytes as usize;
        let dirty = self.dirty.fetch_add(DIRTY_PER_SAMPLE, Ordering::SeqCst) + DIRTY_PER_SAMPLE;
        let resident = charged + self.beyond.load(Ordering::SeqCst) + dirty;
        self.peak.fetch_max(resident, Ordering::SeqCst);
        Some(HeapSample { resident, dirty })
    }

    fn release(&self) {
        self.dirty.store(0, Ordering::SeqCst);
        self.releases.fetch_add(1, Ordering::SeqCst);
    }
}

fn open(dir: &std::path::Path, heap: &Arc<ModelHeap>) -> Arc<Env> {
    let options = EnvOptions {
        heap: Some(heap.clone() as _),
        heap_headroom_bytes: HEADROOM,
        ..common::tiny_options(BUDGET)
    };
    let env = Arc::new(Env::open(dir, options).expect("open"));
    *heap.env.lock().expect("probe lock") = Arc::downgrade(&env);
    env
}

/// Unbinds the probe and takes the environment back once the governor holds no reference.
fn unwrap(heap: &ModelHeap, mut env: Arc<Env>) -> Env {
    *heap.env.lock().expect("probe lock") = Weak::new();
    let start = Instant::now();
    loop {
        match Arc::try_unwrap(env) {
            Ok(e) => return e,
            Err(e) => env = e,
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "environment still shared"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn fill(env: &Env, t: &TreeHandle, model: &mut BTreeMap<Vec<u8>, Vec<u8>>, from: u32, n: u32) {
    for chunk in (from..from + n).collect::<Vec<_>>().chunks(100) {
        let mut b = WriteBatch::new();
        for &i in chunk {
            let k = format!("key{:08}", i.wrapping_mul(2_654_435_761) % 1_000_000).into_bytes();
            let v = vec![(i % 251) as u8; 400];
            b.put(t, &k, &v);
            model.insert(k, v);
        }
        env.write(b).expect("write");
    }
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn the_governor_releases_shrinks_the_cache_and_relaxes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let heap = Arc::new(ModelHeap::default());
    // 17 MiB beyond the charge + 24 MiB left for dirty pages = 41, with a 48 MiB limit:
    // the cache may hold 7 MiB of its 8.
    heap.beyond.store(17 * MIB, Ordering::SeqCst);
    let env = open(dir.path(), &heap);
    let t = env.create_tree("t", None).expect("create");
    let mut model = BTreeMap::new();
    fill(&env, &t, &mut model, 0, 40_000); // 16 MiB of values: twice the cache

    // The model reads the charge a moment before the governor does, so an eviction in
    // between can move the shrink by a few KiB; the rules say 1 MiB.
    wait_until("a release and the shrink", || {
        let c = env.counters();
        c.heap_releases > 0 && c.cache_shrink_bytes.abs_diff(MIB as u64) <= 64 << 10
    });
    let c = env.counters();
    assert_eq!(
        c.heap_releases as usize,
        heap.releases.load(Ordering::SeqCst)
    );
    assert!(c.heap_released_bytes >= 8 * MIB as u64, "{c:?}");
    assert!(c.heap_resident_bytes > 17 * MIB as u64, "{c:?}");
    wait_until("the charge under the working limit", || {
        let c = env.counters();
        c.cache_used_bytes <= BUDGET as u64 - c.cache_shrink_bytes
    });
    let peak = heap.peak.load(Ordering::SeqCst);
    assert!(
        peak <= BUDGET + HEADROOM,
        "the model heap reached {peak} bytes, over the {} limit",
        BUDGET + HEADROOM
    );

    // A caller holding far more than the headroom: the cache gives up a quarter, no more,
    // and keeps working.
    heap.beyond.store(200 * MIB, Ordering::SeqCst);
    wait_until("the capped shrink", || {
        env.counters().cache_shrink_bytes == (BUDGET / 4) as u64
    });
    fill(&env, &t, &mut model, 40_000, 10_000);
    wait_until("the charge under the capped limit", || {
        env.counters().cache_used_bytes <= (BUDGET - BUDGET / 4) as u64
    });

    // The memory is gone: the working limit comes back to the budget a step at a time.
    heap.beyond.store(0, Ordering::SeqCst);
    wait_until("the shrink relaxed", || {
        env.counters().cache_shrink_bytes == 0
    });

    t.verify().expect("verify");
    for (k, v) in model.iter().step_by(97) {
        assert_eq!(t.get(k).expect("get").as_deref(), Some(&v[..]));
    }
    drop(t);
    unwrap(&heap, env).close().expect("close");
    let env = Env::open(dir.path(), common::tiny_options(BUDGET)).expect("reopen");
    let t = env.open_tree("t").expect("open tree");
    t.verify().expect("verify after reopen");
    for (k, v) in model.iter().step_by(31) {
        assert_eq!(
            t.get(k).expect("get").as_deref(),
            Some(&v[..]),
            "after reopen"
        );
    }
}

#[test]
fn without_a_probe_the_working_limit_is_the_budget() {
    let dir = tempfile::tempdir().expect("tempdir");
    let env = Env::open(dir.path(), common::tiny_options(BUDGET)).expect("open");
    let t = env.create_tree("t", None).expect("create");
    fill(&env, &t, &mut BTreeMap::new(), 0, 30_000);
    let c = env.counters();
    assert_eq!(
        (c.cache_shrink_bytes, c.heap_releases, c.heap_resident_bytes),
        (0, 0, 0)
    );
}
