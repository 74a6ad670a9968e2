//! Injected I/O failures during a workload with tiny nodes, a tiny cache, explicit
//! checkpoints and flushes, so that the fault lands in log writes, eviction writes, checkpoint
//! writes (nodes, translation tables, headers) and fsyncs.
//!
//! Checked for every injection point:
//! - once a write has failed, or the injected fault has fired before a write started, that
//!   write and every later one returns an error (`Io` or `Poisoned`), never `Ok`: the
//!   environment stays failed until reopened;
//! - reopened without faults, the environment opens, `verify` passes, every write
//!   acknowledged before the fault is there with its value (or a later value whose write
//!   failed, since a failed write may still have reached the disk), and no key holds a value
//!   that was never written.
//!
//! Seeds are printed on failure; rerun one with `SHALE_SEED=<seed>`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use shale_engine::{Env, EnvHooks, EnvOptions, Error, Fault, FaultInjector, WriteBatch};
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::Arc;

const KEYS: u64 = 400;
const STEPS: u64 = 700;

mod common;
use common::seeds;

fn options() -> EnvOptions {
    common::tiny_options(64 << 10)
}

/// Per key: the last acknowledged state (`None` = absent), plus every value written after it
/// whose write failed (it may or may not have reached the disk).
#[derive(Debug, Default, Clone)]
struct KeyState {
    acked: Option<Vec<u8>>,
    maybe: Vec<Option<Vec<u8>>>,
}

type Model = BTreeMap<Vec<u8>, KeyState>;

fn key(i: u64) -> Vec<u8> {
    format!("k{i:04}").into_bytes()
}

fn value(k: u64, seq: u64, rng: &mut StdRng) -> Vec<u8> {
    let mut v = format!("v{k:04}-seq{seq:06}-").into_bytes();
    let pad = if rng.gen_range(0..10) == 0 {
        rng.gen_range(300..1500)
    } else {
        rng.gen_range(0..80)
    };
    v.extend((0..pad).map(|i| b'a' + ((seq as usize + i) % 26) as u8));
    v
}

/// What one faulty run did, for the summary.
#[derive(Debug, Default)]
struct RunReport {
    acked: u64,
    first_error: Option<String>,
    tripped: bool,
}

/// The workload: puts and deletes of keys with a sequence number in the value, with flushes,
/// checkpoints and evictions. Returns the model of what was acknowledged.
fn workload(env: &Env, inj: Option<&FaultInjector>, seed: u64, model: &mut Model) -> RunReport {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut report = RunReport::default();
    let t = match env.create_tree("t", None) {
        Ok(t) => t,
        Err(e) => {
            report.first_error = Some(format!("create_tree: {e}"));
            report.tripped = inj.is_some_and(|i| i.tripped());
            return report;
        }
    };
    for seq in 0..STEPS {
        let tripped_before = inj.is_some_and(|i| i.tripped());
        let failed_before = report.first_error.is_some();
        // A single put or delete two steps in three, else a batch of distinct keys, so that
        // log writes do not crowd out eviction and checkpoint writes as injection points.
        let n = if rng.gen_range(0..3) == 0 {
            rng.gen_range(2..=12)
        } else {
            1
        };
        let mut ops: Vec<(Vec<u8>, Option<Vec<u8>>)> = Vec::new();
        while ops.len() < n {
            let k = rng.gen_range(0..KEYS);
            let kb = key(k);
            if ops.iter().any(|(o, _)| *o == kb) {
                continue;
            }
            let new = (rng.gen_range(0..100) >= 10).then(|| value(k, seq, &mut rng));
            ops.push((kb, new));
        }
        let result = if let [(k, new)] = &ops[..] {
            match new {
                Some(v) => t.put(k, v),
                None => t.delete(k),
            }
        } else {
            let mut b = WriteBatch::new();
            for (k, new) in &ops {
                match new {
                    Some(v) => b.put(&t, k, v),
                    None => b.delete(&t, k),
                }
            }
            env.write(b)
        };
        match result {
            Ok(()) => {
                assert!(
                    !failed_before,
                    "seq {seq}: a write returned Ok after an earlier write failed ({:?})",
                    report.first_error
                );
                assert!(
                    !tripped_before,
                    "seq {seq}: a write started after the fault fired returned Ok"
                );
                for (k, new) in ops {
                    let state = model.entry(k).or_default();
                    state.acked = new;
                    state.maybe.clear();
                }
                report.acked += 1;
            }
            Err(e) => {
                assert!(
                    matches!(e, Error::Io(_) | Error::Poisoned(_)),
                    "seq {seq}: a failed write must be Io or Poisoned: {e:?}"
                );
                assert!(
                    inj.is_some(),
                    "seq {seq}: a write failed without faults: {e}"
                );
                let op = match &ops[..] {
                    [(_, Some(_))] => "put",
                    [(_, None)] => "delete",
                    _ => "batch",
                };
                for (k, new) in ops {
                    model.entry(k).or_default().maybe.push(new);
                }
                report
                    .first_error
                    .get_or_insert_with(|| format!("{op}: {e}"));
            }
        }
        // Other operations once the environment failed must fail too.
        let maintenance = match seq {
            _ if seq % 97 == 40 => Some(("flush_all", env.flush_all())),
            _ if seq % 151 == 80 => Some(("checkpoint", env.checkpoint())),
            _ => None,
        };
        if let Some((what, r)) = maintenance {
            match r {
                Ok(()) => assert!(
                    report.first_error.is_none(),
                    "seq {seq}: {what} returned Ok after a write failed"
                ),
                Err(e) => {
                    assert!(
                        matches!(e, Error::Io(_) | Error::Poisoned(_)),
                        "seq {seq}: {what} failed with {e:?}"
                    );
                    report
                        .first_error
                        .get_or_insert_with(|| format!("{what}: {e}"));
                }
            }
        }
    }
    report.tripped = inj.is_some_and(|i| i.tripped());
    report
}

/// Reopens without faults and checks the recovered tree against the model.
fn check_recovered(dir: &Path, model: &Model, what: &str) {
    let env = Env::open(dir, options()).unwrap_or_else(|e| panic!("{what}: reopen failed: {e}"));
    let t = match env.open_tree("t") {
        Ok(t) => t,
        Err(Error::NoSuchTree(_)) => {
            // Only acceptable if the tree's creation itself failed: nothing was acknowledged.
            assert!(
                model.values().all(|s| s.acked.is_none()),
                "{what}: tree lost but writes were acknowledged"
            );
            return;
        }
        Err(e) => panic!("{what}: open tree: {e}"),
    };
    // A torn write may have hit the header slot a failed checkpoint was writing; open takes
    // the other slot, and verify rightly reports the torn one until a checkpoint rewrites it
    // (block::fault_tests). Checkpoint first, as a restarted server does, then verify.
    env.checkpoint()
        .unwrap_or_else(|e| panic!("{what}: checkpoint after reopen: {e}"));
    let count = t
        .verify()
        .unwrap_or_else(|e| panic!("{what}: verify after reopen: {e}"))
        .entries;
    let mut present = 0u64;
    for (k, s) in model {
        let got = t
            .get(k)
            .unwrap_or_else(|e| panic!("{what}: get {k:?}: {e}"));
        let ok = got == s.acked || s.maybe.contains(&got);
        assert!(
            ok,
            "{what}: key {} holds {:?}; acknowledged {:?}, possible {:?}",
            String::from_utf8_lossy(k),
            got.as_ref()
                .map(|v| String::from_utf8_lossy(&v[..v.len().min(16)])),
            s.acked
                .as_ref()
                .map(|v| String::from_utf8_lossy(&v[..v.len().min(16)])),
            s.maybe.len()
        );
        present += u64::from(got.is_some());
    }
    // No key that was never written: the scan sees only model keys, with checked values.
    let mut c = t.cursor();
    c.seek_to_first()
        .unwrap_or_else(|e| panic!("{what}: seek: {e}"));
    let mut scanned = 0u64;
    while c.valid() {
        let s = model.get(c.key()).unwrap_or_else(|| {
            panic!(
                "{what}: key {:?} was never written",
                String::from_utf8_lossy(c.key())
            )
        });
        let v = Some(c.value().to_vec());
        assert!(
            v == s.acked || s.maybe.contains(&v),
            "{what}: scan value of {:?} was never written",
            String::from_utf8_lossy(c.key())
        );
        scanned += 1;
        c.next().unwrap_or_else(|e| panic!("{what}: next: {e}"));
    }
    assert_eq!(scanned, present, "{what}: scan and gets disagree");
    assert_eq!(count, present, "{what}: verify count");
    // The environment works again: write, checkpoint, close.
    t.put(b"after-reopen", b"ok")
        .unwrap_or_else(|e| panic!("{what}: write after reopen: {e}"));
    drop(t);
    env.close()
        .unwrap_or_else(|e| panic!("{what}: close after reopen: {e}"));
}

/// Runs the workload once without faults and returns how many writes and fsyncs it issued,
/// by category, to aim the injection points.
fn calibrate(seed: u64) -> (u64, u64, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let env = Env::open(dir.path(), options()).expect("open");
    let mut model = Model::new();
    let r = workload(&env, None, seed, &mut model);
    assert!(r.first_error.is_none());
    let c = env.io_counters();
    let writes =
        c.log.write_calls + c.checkpoint.write_calls + c.eviction.write_calls + c.meta.write_calls;
    let syncs = c.log.fsyncs + c.checkpoint.fsyncs + c.eviction.fsyncs + c.meta.fsyncs;
    let counters = format!(
        "writes log {} checkpoint {} eviction {} meta {}; fsyncs log {} checkpoint {} eviction {} meta {}",
        c.log.write_calls,
        c.checkpoint.write_calls,
        c.eviction.write_calls,
        c.meta.write_calls,
        c.log.fsyncs,
        c.checkpoint.fsyncs,
        c.eviction.fsyncs,
        c.meta.fsyncs
    );
    assert!(
        c.eviction.write_calls > 0 && c.checkpoint.write_calls > 0,
        "the workload must evict and checkpoint: {counters}"
    );
    drop(env);
    (writes, syncs, counters)
}

/// Runs the workload with `fault` injected, then checks recovery; returns the first error.
fn run_one(seed: u64, fault: Fault) -> Option<String> {
    let what = format!("SHALE_SEED={seed} {fault:?}");
    let dir = tempfile::tempdir().expect("tempdir");
    let inj = Arc::new(FaultInjector::new(fault));
    let hooks = EnvHooks {
        faults: Some(inj.clone()),
        ..EnvHooks::default()
    };
    let mut model = Model::new();
    let report = match Env::open_with(dir.path(), options(), hooks) {
        Ok(env) => {
            let r = workload(&env, Some(&inj), seed, &mut model);
            // Close may fail (the environment failed); that is fine, it must not panic.
            let _ = env.close();
            r
        }
        Err(e) => {
            assert!(matches!(e, Error::Io(_)), "{what}: open with faults: {e:?}");
            RunReport {
                first_error: Some(e.to_string()),
                tripped: true,
                ..RunReport::default()
            }
        }
    };
    if report.tripped {
        assert!(
            report.first_error.is_some(),
            "{what}: the fault fired but no operation reported an error"
        );
    }
    check_recovered(dir.path(), &model, &what);
    report.first_error
}

/// A random injection point of the given kind within a run's `writes` writes and `syncs`
/// fsyncs; the first runs aim at the first calls (tree creation, first commit) and, for
/// fsyncs, at the first checkpoint.
fn fault_for(kind: &str, run: usize, writes: u64, syncs: u64, rng: &mut StdRng) -> Fault {
    let pick = |rng: &mut StdRng, n: u64| match run {
        0 => 1,
        1 => 2,
        // Only the test thread fsyncs, so fsync numbers are deterministic: 80..=91 covers
        // the first checkpoint's tree-file fsyncs (after about 85 commits' log fsyncs).
        2..=13 if kind == "sync" => 78 + run as u64,
        _ => rng.gen_range(1..=n),
    };
    match kind {
        "write" => Fault::FailWrite {
            after: pick(rng, writes),
        },
        "sync" => Fault::FailSync {
            after: pick(rng, syncs),
        },
        _ => Fault::TornWrite {
            after: pick(rng, writes),
            keep_bytes: [0, 1, 100, 511, 512, 4095, 4096, 6000][rng.gen_range(0..8)],
        },
    }
}

/// Runs at least `MIN_RUNS` injection points per seed, and more (up to `MAX_RUNS`) until
/// faults have landed both in the log and in the tree file; asserts that they did.
fn run_kind(kind: &str) {
    const MIN_RUNS: usize = 12;
    const MAX_RUNS: usize = 80;
    for seed in seeds(2) {
        let (writes, syncs, counters) = calibrate(seed);
        eprintln!("{kind}: seed {seed}: {counters}");
        let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed);
        // Where the first error came from: the log, a checkpoint's tree-file write or fsync,
        // or an eviction's tree-file write (seen by a write, flush_all, or as poison left by
        // the background flusher).
        let (mut in_log, mut in_checkpoint, mut in_eviction) = (0, 0, 0);
        let evictions_wanted = usize::from(kind != "sync");
        let mut run = 0;
        let mut places: BTreeMap<String, usize> = BTreeMap::new();
        let min_runs = if kind == "sync" { 16 } else { MIN_RUNS };
        while run < min_runs
            || (run < MAX_RUNS
                && (in_log == 0 || in_checkpoint == 0 || in_eviction < evictions_wanted))
        {
            let fault = fault_for(kind, run, writes, syncs, &mut rng);
            let first =
                catch_unwind(AssertUnwindSafe(|| run_one(seed, fault))).unwrap_or_else(|_| {
                    panic!("{kind} fault test failed with SHALE_SEED={seed}, {fault:?}")
                });
            let first = first.unwrap_or_default();
            // Runs 0 and 1 hit tree creation; count only faults within the workload.
            let file = match (first.contains(".wal"), first.contains(".shl")) {
                (true, _) => "log",
                (_, true) => "tree file",
                _ => "none",
            };
            let seen = if first.contains("must be reopened") {
                "poisoned"
            } else {
                "io"
            };
            let op = first.split(':').next().unwrap_or("-");
            *places.entry(format!("{op}/{seen}/{file}")).or_insert(0) += 1;
            if run >= 2 {
                let tree = first.contains(".shl");
                in_log += usize::from(first.contains(".wal"));
                in_checkpoint += usize::from(tree && op == "checkpoint");
                in_eviction += usize::from(tree && op != "checkpoint");
            }
            run += 1;
        }
        eprintln!("{kind}: seed {seed}: {run} runs, faults in the log {in_log}, in checkpoints {in_checkpoint}, in evictions {in_eviction}; first error seen by (operation/kind/file): {places:?}");
        assert!(
            in_log > 0 && in_checkpoint > 0 && in_eviction >= evictions_wanted,
            "SHALE_SEED={seed}: {kind} faults must land in the log, checkpoints and evictions: {places:?}"
        );
    }
}

#[test]
fn failed_writes_leave_the_environment_failed_and_recoverable() {
    run_kind("write");
}

#[test]
fn failed_fsyncs_leave_the_environment_failed_and_recoverable() {
    run_kind("sync");
}

#[test]
fn torn_writes_leave_the_environment_failed_and_recoverable() {
    run_kind("torn");
}
