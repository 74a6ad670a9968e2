//! Transactions against a serial model of snapshot isolation. One thread interleaves up to
//! four live transactions with plain writes and reads, at random: every read (point, cursor
//! forward and backward, inside a transaction or not) and every conflict decision is compared
//! with the model. Tiny nodes and cache, so flushes, splits, evictions, checkpoints, hot
//! optimizes and close/crash reopens happen in every run. The seed is printed on failure;
//! rerun one with `SHALE_SEED=<seed>`.
//!
//! The model: the committed state of each tree is a map; a transaction copies it at begin (its
//! snapshot) and overlays its own writes; commit applies its writes. The conflict rule is the
//! documented one (docs/transactions.md): a write fails if another live transaction wrote or
//! share-locked the key, or a commit after the snapshot wrote it (L1, L2); a plain write fails
//! if a live transaction holds the key.
//!
//! Every writer keeps the trees' entry counts the way the database layer will (it knows
//! whether a key existed), and the engine's O(1) `count` must equal the committed model's size
//! after every step, through commits, aborts, checkpoints and recovery.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use shale_engine::{add_i64_merge, Env, Error, TreeHandle, Txn, WriteBatch};
use std::collections::{BTreeMap, HashMap, HashSet};

mod common;

type State = BTreeMap<Vec<u8>, Vec<u8>>;
const TREES: usize = 2;
const MAX_LIVE: usize = 4;

struct ModelTxn {
    txn: Txn,
    /// Commits counted when it began: a key committed later conflicts (L2).
    began: u64,
    view: [State; TREES],
    writes: [BTreeMap<Vec<u8>, Option<Vec<u8>>>; TREES],
    shared: HashSet<(usize, Vec<u8>)>,
}

#[derive(Default)]
struct Model {
    committed: [State; TREES],
    commits: u64,
    last_commit: HashMap<(usize, Vec<u8>), u64>,
}

fn key(rng: &mut StdRng) -> Vec<u8> {
    format!("k{:03}", rng.gen_range(0..400)).into_bytes()
}

fn value(rng: &mut StdRng) -> Vec<u8> {
    if rng.gen_bool(0.5) {
        rng.gen_range(-1000i64..1000).to_le_bytes().to_vec()
    } else {
        vec![rng.gen(); rng.gen_range(0..300)]
    }
}

/// What a write does to the value it lands on (None = delete).
#[derive(Clone, Debug)]
enum Op {
    Put(Vec<u8>),
    Delete,
    Add(i64),
}

fn apply(key: &[u8], cur: Option<Vec<u8>>, op: &Op) -> Option<Vec<u8>> {
    match op {
        Op::Put(v) => Some(v.clone()),
        Op::Delete => None,
        Op::Add(d) => add_i64_merge(key, cur.as_deref(), &d.to_le_bytes()),
    }
}

fn random_op(rng: &mut StdRng) -> Op {
    match rng.gen_range(0..6) {
        0 => Op::Delete,
        1 | 2 => Op::Add(rng.gen_range(-50..50)),
        _ => Op::Put(value(rng)),
    }
}

impl Model {
    /// Whether a live transaction other than `me` holds `key` of tree `t`.
    fn held_by_other(
        live: &[ModelTxn],
        me: Option<usize>,
        t: usize,
        key: &[u8],
        exclusive: bool,
    ) -> bool {
        live.iter().enumerate().any(|(i, x)| {
            Some(i) != me
                && (x.writes[t].contains_key(key)
                    || (exclusive && x.shared.contains(&(t, key.to_vec()))))
        })
    }

    fn newer_commit(&self, t: usize, key: &[u8], began: u64) -> bool {
        self.last_commit
            .get(&(t, key.to_vec()))
            .is_some_and(|&c| c > began)
    }

    fn commit(&mut self, writes: Vec<(usize, Vec<u8>, Option<Vec<u8>>)>) {
        self.commits += 1;
        for (t, k, v) in writes {
            self.last_commit.insert((t, k.clone()), self.commits);
            match v {
                Some(v) => self.committed[t].insert(k, v),
                None => self.committed[t].remove(&k),
            };
        }
    }
}

fn txn_op(t: &TreeHandle, txn: &mut Txn, key: &[u8], op: &Op) -> Result<(), Error> {
    match op {
        Op::Put(v) => txn.put(t, key, v),
        Op::Delete => txn.delete(t, key),
        Op::Add(d) => txn.update(t, key, &d.to_le_bytes()),
    }
}

fn check_txn_cursor(t: &TreeHandle, x: &ModelTxn, ti: usize, rng: &mut StdRng) {
    let want: Vec<(Vec<u8>, Vec<u8>)> = x.view[ti].clone().into_iter().collect();
    let mut c = x.txn.cursor(t);
    let probe = key(rng);
    c.seek(&probe).expect("seek");
    let mut got = Vec::new();
    while c.valid() {
        got.push((c.key().to_vec(), c.value().to_vec()));
        c.next().expect("next");
    }
    let want_fwd: Vec<_> = want.iter().filter(|(k, _)| *k >= probe).cloned().collect();
    assert!(
        got == want_fwd,
        "txn cursor forward from {probe:?} differs: got {got:?} want {want_fwd:?}"
    );
    c.seek_for_prev(&probe).expect("seek_for_prev");
    let mut back = Vec::new();
    while c.valid() && back.len() < 30 {
        back.push(c.key().to_vec());
        if back.len() % 7 == 0 {
            // Change direction once and come back: the merge must stay right.
            c.next().expect("next");
            c.prev().expect("prev");
        }
        c.prev().expect("prev");
    }
    let want_back: Vec<_> = want
        .iter()
        .rev()
        .filter(|(k, _)| *k <= probe)
        .take(30)
        .map(|(k, _)| k.clone())
        .collect();
    assert_eq!(back, want_back, "txn cursor backward from {probe:?}");
}

fn check_counts(trees: &[TreeHandle], m: &Model) {
    for (ti, t) in trees.iter().enumerate() {
        assert_eq!(
            t.count(),
            m.committed[ti].len() as i64,
            "count of tree {ti}"
        );
    }
}

fn check_committed(trees: &[TreeHandle], m: &Model) {
    check_counts(trees, m);
    for (ti, t) in trees.iter().enumerate() {
        let mut c = t.cursor();
        c.seek_to_first().expect("seek");
        let mut got = State::new();
        while c.valid() {
            got.insert(c.key().to_vec(), c.value().to_vec());
            c.next().expect("next");
        }
        assert!(
            got == m.committed[ti],
            "tree {ti} differs from the committed model: {:?}",
            got.iter()
                .filter(|(k, v)| m.committed[ti].get(*k) != Some(*v))
                .map(|(k, v)| (k, v, m.committed[ti].get(k)))
                .chain(
                    m.committed[ti]
                        .iter()
                        .filter(|(k, _)| !got.contains_key(*k))
                        .map(|(k, v)| (k, v, None))
                )
                .collect::<Vec<_>>()
        );
    }
}

fn step(
    rng: &mut StdRng,
    env: &Env,
    trees: &[TreeHandle],
    m: &mut Model,
    live: &mut Vec<ModelTxn>,
) {
    let ti = rng.gen_range(0..TREES);
    let t = &trees[ti];
    let k = key(rng);
    match rng.gen_range(0..100) {
        0..=9 if live.len() < MAX_LIVE => live.push(ModelTxn {
            txn: env.begin(),
            began: m.commits,
            view: m.committed.clone(),
            writes: Default::default(),
            shared: HashSet::new(),
        }),
        10..=39 if !live.is_empty() => {
            let i = rng.gen_range(0..live.len());
            let op = random_op(rng);
            let refused = Model::held_by_other(live, Some(i), ti, &k, true)
                || m.newer_commit(ti, &k, live[i].began);
            let x = &mut live[i];
            match (txn_op(t, &mut x.txn, &k, &op), refused) {
                (Ok(()), false) => {
                    let before = x.view[ti].contains_key(&k);
                    let v = apply(&k, x.view[ti].get(&k).cloned(), &op);
                    x.txn
                        .add_count(t, i64::from(v.is_some()) - i64::from(before));
                    match &v {
                        Some(v) => x.view[ti].insert(k.clone(), v.clone()),
                        None => x.view[ti].remove(&k),
                    };
                    x.writes[ti].insert(k, v);
                }
                (Err(Error::WriteConflict { .. }), true) => {}
                (got, want_refused) => {
                    panic!("txn write {op:?}: got {got:?}, model refuses: {want_refused}")
                }
            }
        }
        40..=54 if !live.is_empty() => {
            let i = rng.gen_range(0..live.len());
            let shared = rng.gen_range(0..4) == 0;
            let x = &mut live[i];
            if shared {
                let refused = Model::held_by_other(live, Some(i), ti, &k, false)
                    || m.newer_commit(ti, &k, live[i].began);
                let x = &mut live[i];
                match (x.txn.get_shared(t, &k), refused) {
                    (Ok(v), false) => {
                        assert_eq!(v.as_ref(), x.view[ti].get(&k), "shared read");
                        x.shared.insert((ti, k));
                    }
                    (Err(Error::WriteConflict { .. }), true) => {}
                    (got, want) => panic!("shared read: got {got:?}, model refuses: {want}"),
                }
            } else {
                assert_eq!(
                    x.txn.get(t, &k).expect("txn get").as_ref(),
                    x.view[ti].get(&k),
                    "txn get"
                );
            }
        }
        55..=59 if !live.is_empty() => {
            let i = rng.gen_range(0..live.len());
            check_txn_cursor(t, &live[i], ti, rng);
        }
        60..=69 if !live.is_empty() => {
            let x = live.swap_remove(rng.gen_range(0..live.len()));
            let writes: Vec<_> = (0..TREES)
                .flat_map(|ti| {
                    x.writes[ti]
                        .iter()
                        .map(move |(k, v)| (ti, k.clone(), v.clone()))
                })
                .collect();
            x.txn.commit().expect("commit");
            if !writes.is_empty() {
                m.commit(writes);
            }
        }
        70..=73 if !live.is_empty() => {
            live.swap_remove(rng.gen_range(0..live.len())).txn.abort();
        }
        74..=89 => {
            let op = random_op(rng);
            let refused = Model::held_by_other(live, None, ti, &k, true);
            let mut b = WriteBatch::new();
            match &op {
                Op::Put(v) => b.put(t, &k, v),
                Op::Delete => b.delete(t, &k),
                Op::Add(d) => b.update(t, &k, &d.to_le_bytes()),
            }
            let before = m.committed[ti].contains_key(&k);
            let after = apply(&k, m.committed[ti].get(&k).cloned(), &op).is_some();
            b.add_count(t, i64::from(after) - i64::from(before));
            match (env.write(b), refused) {
                (Ok(()), false) => {
                    let v = apply(&k, m.committed[ti].get(&k).cloned(), &op);
                    m.commit(vec![(ti, k, v)]);
                }
                (Err(Error::WriteConflict { .. }), true) => {}
                (got, want) => panic!("plain write: got {got:?}, model refuses: {want}"),
            }
        }
        _ => assert_eq!(
            t.get(&k).expect("get").as_ref(),
            m.committed[ti].get(&k),
            "plain get"
        ),
    }
}

fn run(seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().expect("tempdir");
    let options = common::tiny_options(40 << 10);
    let mut env = Env::open(dir.path(), options.clone()).expect("open");
    let mut trees: Vec<TreeHandle> = (0..TREES)
        .map(|i| env.create_tree(&format!("t{i}"), None).expect("create"))
        .collect();
    let mut m = Model::default();
    let mut live: Vec<ModelTxn> = Vec::new();
    // Counters restart at each open: add them up (conflicts, commits, aborts, flushes,
    // evictions).
    let mut seen = [0u64; 5];
    for round in 0..6 {
        for _ in 0..1500 {
            step(&mut rng, &env, &trees, &mut m, &mut live);
            check_counts(&trees, &m);
            if rng.gen_range(0..400) == 0 {
                env.checkpoint().expect("checkpoint");
            }
            if rng.gen_range(0..700) == 0 {
                env.flush_all().expect("hot optimize");
            }
        }
        check_committed(&trees, &m);
        let c = env.counters();
        let now = [
            c.write_conflicts,
            c.txn_commits,
            c.txn_aborts,
            c.flushes,
            c.cache_evictions + c.cache_partial_evictions,
        ];
        seen.iter_mut().zip(now).for_each(|(s, n)| *s += n);
        // Live transactions end with the process: abort them (a crash would lose them too).
        for x in live.drain(..) {
            x.txn.abort();
        }
        trees.clear();
        if round % 2 == 0 {
            env.close().expect("close");
        } else {
            drop(env); // like a crash: recovery replays the log
        }
        env = Env::open(dir.path(), options.clone()).expect("reopen");
        trees = (0..TREES)
            .map(|i| env.open_tree(&format!("t{i}")).expect("open tree"))
            .collect();
        check_committed(&trees, &m);
        for t in &trees {
            t.verify().expect("verify");
        }
    }
    assert!(
        seen.iter().all(|&n| n > 0),
        "conflicts, commits, aborts, flushes, evictions: {seen:?}"
    );
}

#[test]
fn transactions_match_a_serial_model_of_snapshot_isolation() {
    for seed in common::seeds(3) {
        if std::panic::catch_unwind(|| run(seed)).is_err() {
            panic!("snapshot isolation model test failed with SHALE_SEED={seed}");
        }
    }
}
