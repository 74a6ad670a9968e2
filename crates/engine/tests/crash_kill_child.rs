//! Crash test: a child process writes forever and is killed with SIGKILL at a random moment;
//! the parent then recovers the environment and checks it, and starts the next child on the
//! same directory (so each recovery starts from state an earlier recovery produced, and some
//! kills land during the child's own start-up and recovery).
//!
//! The child (this same test binary, re-executed with `SHALE_CRASH_CHILD=<dir>`) commits one
//! atomic group per sequence number `s` across two trees, "a" and "b" — at random either a
//! `WriteBatch` or a transaction (`Env::begin`, reads through the transaction, commit), and
//! between commits now and then a transaction that writes garbage and aborts:
//! - moves an amount between key `k..` of one tree and key `k..` of the other, by read-free
//!   merge updates or by read + put/delete, so the sum of all amounts stays 0;
//! - puts `seq = s` in both trees, `h<s>` (a history record) in "b" and a padded filler record
//!   in "a" (so tiny nodes split, flush and get evicted while checkpoints run every 50 ms);
//!
//! and prints `ACK <s>` once `env.write` has returned. Every batch is a pure function of the
//! child's seeded RNG and the current contents, so the parent replays the same batches on a
//! `BTreeMap` model and compares both trees with it exactly after every kill: every
//! acknowledged commit survives (R1), at most the one in-flight unacknowledged commit is
//! added, batches and transactions are all-or-nothing, aborted transactions leave nothing, and
//! the amounts still sum to 0.
//!
//! The seed is printed on failure; rerun one with `SHALE_SEED=<seed>`. `SHALE_CRASH_KILLS`
//! sets the number of kills (default 60).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use shale_engine::{Env, EnvOptions, FsyncPolicy, TreeHandle, TreeOptions, Txn, WriteBatch};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const CHILD_DIR_VAR: &str = "SHALE_CRASH_CHILD";
const CHILD_SEED_VAR: &str = "SHALE_CRASH_CHILD_SEED";
const CHILD_TEST: &str = "crash_child_writer";
/// Amount keys per tree.
const AMOUNT_KEYS: u64 = 40;
/// Filler keys in tree "a" (rewritten cyclically).
const FILLER_KEYS: u64 = 1500;
/// A child that is never killed stops on its own after this long (the parent is gone).
const CHILD_MAX_RUN: Duration = Duration::from_secs(120);

fn options() -> EnvOptions {
    EnvOptions {
        cache_bytes: 256 << 10,
        tree_defaults: TreeOptions::tiny(),
        fsync: FsyncPolicy::EveryCommit,
        checkpoint_interval: Some(Duration::from_millis(50)),
        ..EnvOptions::default()
    }
}

/// The parent checks with the same options, background checkpointer included:
/// `TreeHandle::verify` holds checkpoints off and keeps the tree's file still while it checks.
fn parent_options() -> EnvOptions {
    options()
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn amount_key(i: u64) -> Vec<u8> {
    format!("k{i:03}").into_bytes()
}

fn as_i64(v: &[u8]) -> i64 {
    i64::from_le_bytes(v.try_into().expect("an amount is 8 bytes"))
}

fn as_u64(v: &[u8]) -> u64 {
    u64::from_le_bytes(v[..8].try_into().expect("a seq is at least 8 bytes"))
}

/// One commit's worth of changes, drawn from the RNG only (never from the data), so the
/// child and the parent's model draw the same sequence.
struct Move {
    /// Take the amount from tree "a" (else from "b").
    from_a: bool,
    from_key: u64,
    to_key: u64,
    amount: i64,
    /// Read-free merge updates (else read the values and put, or delete when 0).
    merge: bool,
    pad: usize,
    /// Commit as a transaction (else as a write batch).
    txn: bool,
    /// Before committing, run a transaction that writes garbage and aborts.
    aborted_txn_first: bool,
}

fn next_move(rng: &mut StdRng) -> Move {
    Move {
        from_a: rng.gen_bool(0.5),
        from_key: rng.gen_range(0..AMOUNT_KEYS),
        to_key: rng.gen_range(0..AMOUNT_KEYS),
        amount: rng.gen_range(1..100),
        merge: rng.gen_bool(0.5),
        pad: if rng.gen_range(0..10) == 0 {
            rng.gen_range(200..900)
        } else {
            rng.gen_range(0..120)
        },
        txn: rng.gen_bool(0.5),
        aborted_txn_first: rng.gen_range(0..8) == 0,
    }
}

/// One change of a batch; the `bool` is true for tree "a", false for tree "b".
#[derive(Debug, Clone)]
enum Change {
    Put(bool, Vec<u8>, Vec<u8>),
    Delete(bool, Vec<u8>),
    Add(bool, Vec<u8>, i64),
}

/// The changes of commit `seq`; `read(in_a, key)` returns a key's current value.
fn changes(
    seq: u64,
    m: &Move,
    mut read: impl FnMut(bool, &[u8]) -> Option<Vec<u8>>,
) -> Vec<Change> {
    let mut out = Vec::new();
    let src = (m.from_a, amount_key(m.from_key), -m.amount);
    let dst = (!m.from_a, amount_key(m.to_key), m.amount);
    for (in_a, key, delta) in [src, dst] {
        if m.merge {
            out.push(Change::Add(in_a, key, delta));
        } else {
            let cur = read(in_a, &key).map_or(0, |v| as_i64(&v));
            let next = cur + delta;
            if next == 0 {
                out.push(Change::Delete(in_a, key));
            } else {
                out.push(Change::Put(in_a, key, next.to_le_bytes().to_vec()));
            }
        }
    }
    let s = seq.to_le_bytes().to_vec();
    out.push(Change::Put(true, b"seq".to_vec(), s.clone()));
    out.push(Change::Put(false, b"seq".to_vec(), s.clone()));
    out.push(Change::Put(
        false,
        format!("h{seq:010}").into_bytes(),
        s.clone(),
    ));
    let mut filler = s;
    filler.extend((0..m.pad).map(|i| (seq as u8).wrapping_mul(13).wrapping_add(i as u8)));
    out.push(Change::Put(
        true,
        format!("f{:05}", seq % FILLER_KEYS).into_bytes(),
        filler,
    ));
    out
}

fn apply_to_model(a: &mut Model, b: &mut Model, changes: &[Change]) {
    for c in changes {
        match c {
            Change::Put(in_a, k, v) => {
                let t = if *in_a { &mut *a } else { &mut *b };
                t.insert(k.clone(), v.clone());
            }
            Change::Delete(in_a, k) => {
                let t = if *in_a { &mut *a } else { &mut *b };
                t.remove(k);
            }
            Change::Add(in_a, k, d) => {
                let t = if *in_a { &mut *a } else { &mut *b };
                let cur = t.get(k).map_or(0, |v| as_i64(v));
                t.insert(k.clone(), (cur + d).to_le_bytes().to_vec());
            }
        }
    }
}

fn child_seed(seed: u64, round: u64) -> u64 {
    seed ^ round.wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

fn read_seq(t: &TreeHandle) -> u64 {
    t.get(b"seq").expect("get seq").map_or(0, |v| as_u64(&v))
}

/// The child writer. Does nothing unless started by the parent test.
#[test]
fn crash_child_writer() {
    let Ok(dir) = std::env::var(CHILD_DIR_VAR) else {
        return;
    };
    let seed: u64 = std::env::var(CHILD_SEED_VAR)
        .expect("child seed")
        .parse()
        .expect("child seed is a number");
    let mut rng = StdRng::seed_from_u64(seed);
    let env = Env::open(&dir, options()).expect("child: open");
    let a = env.open_tree("a").expect("child: open tree a");
    let b = env.open_tree("b").expect("child: open tree b");
    let start = read_seq(&a);
    let mut out = std::io::stdout().lock();
    // The harness has printed "test crash_child_writer ... " without a newline: end it.
    writeln!(out, "\nREADY {start}").expect("stdout");
    out.flush().expect("stdout");
    let started = Instant::now();
    let mut seq = start;
    while started.elapsed() < CHILD_MAX_RUN {
        seq += 1;
        let m = next_move(&mut rng);
        if m.aborted_txn_first {
            write_then_abort(&env, &a, &b, seq);
        }
        if m.txn {
            let mut txn = env.begin();
            let cs = changes(seq, &m, |in_a, k| {
                txn.get(if in_a { &a } else { &b }, k)
                    .expect("child: txn get")
            });
            for c in &cs {
                match c {
                    Change::Put(in_a, k, v) => txn.put(if *in_a { &a } else { &b }, k, v),
                    Change::Delete(in_a, k) => txn.delete(if *in_a { &a } else { &b }, k),
                    Change::Add(in_a, k, d) => {
                        txn.update(if *in_a { &a } else { &b }, k, &d.to_le_bytes())
                    }
                }
                .expect("child: txn write (no other writer, so no conflict)");
            }
            txn.commit().expect("child: commit");
        } else {
            let cs = changes(seq, &m, |in_a, k| {
                let t = if in_a { &a } else { &b };
                t.get(k).expect("child: get")
            });
            let mut batch = WriteBatch::new();
            for c in &cs {
                match c {
                    Change::Put(in_a, k, v) => batch.put(if *in_a { &a } else { &b }, k, v),
                    Change::Delete(in_a, k) => batch.delete(if *in_a { &a } else { &b }, k),
                    Change::Add(in_a, k, d) => {
                        batch.update(if *in_a { &a } else { &b }, k, &d.to_le_bytes())
                    }
                }
            }
            env.write(batch).expect("child: write");
        }
        // A failed write to stdout means the parent is gone: the panic ends the child.
        writeln!(out, "ACK {seq}").expect("stdout");
        out.flush().expect("stdout");
    }
}

/// A transaction that overwrites amounts and adds a key in both trees, then aborts: none of
/// it may ever be seen (the parent's exact model comparison would find it).
fn write_then_abort(env: &Env, a: &TreeHandle, b: &TreeHandle, seq: u64) {
    let mut txn: Txn = env.begin();
    for t in [a, b] {
        txn.put(t, &amount_key(seq % AMOUNT_KEYS), &i64::MAX.to_le_bytes())
            .expect("child: abort-txn put");
        txn.put(t, format!("x{seq}").as_bytes(), b"aborted")
            .expect("child: abort-txn put");
    }
    txn.abort();
}

/// Kills the child when the parent panics.
struct ChildGuard(Option<Child>);

impl ChildGuard {
    fn kill_and_wait(&mut self) -> ExitStatus {
        let mut c = self.0.take().expect("child");
        // The child may already have died on its own: `kill` then fails, `wait` reports why.
        let _ = c.kill();
        c.wait().expect("wait for child")
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(c) = &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The number after `tag` when a line of the child's stdout is `<tag><number>`.
fn marker(line: &str, tag: &str) -> Option<u64> {
    let n = line.strip_prefix(tag)?;
    Some(n.trim().parse().expect("a number after the marker"))
}

fn scan(t: &TreeHandle) -> Model {
    let mut c = t.cursor();
    c.seek_to_first().expect("seek first");
    let mut m = Model::new();
    while c.valid() {
        m.insert(c.key().to_vec(), c.value().to_vec());
        c.next().expect("next");
    }
    m
}

fn amounts_total(m: &Model) -> i64 {
    m.iter()
        .filter(|(k, _)| k.starts_with(b"k"))
        .map(|(_, v)| as_i64(v))
        .sum()
}

/// First differing key between the model and the tree, for failure messages.
fn first_difference(want: &Model, got: &Model) -> String {
    for (k, v) in want {
        match got.get(k) {
            None => return format!("missing {:?}", String::from_utf8_lossy(k)),
            Some(g) if g != v => {
                return format!("{:?}: want {v:?}, got {g:?}", String::from_utf8_lossy(k))
            }
            _ => {}
        }
    }
    for k in got.keys() {
        if !want.contains_key(k) {
            return format!("unexpected {:?}", String::from_utf8_lossy(k));
        }
    }
    "none".to_owned()
}

#[derive(Debug, Default)]
struct Summary {
    kills: u64,
    max_acked: u64,
    /// Kills that landed after the child's READY line, i.e. while it was writing.
    kills_while_writing: u64,
    /// Kills after which the one unacknowledged, in-flight commit had been made durable.
    unacked_commit_survived: u64,
    commits_recovered: u64,
}

fn run(seed: u64, kills: u64) -> Summary {
    let mut rng = StdRng::seed_from_u64(seed);
    let root = tempfile::tempdir().expect("tempdir");
    let dir = root.path().join("data");
    let stderr_path = root.path().join("child-stderr.txt");
    {
        let env = Env::open(&dir, parent_options()).expect("create env");
        env.create_tree("a", None).expect("create a");
        env.create_tree("b", None).expect("create b");
        env.close().expect("close after create");
    }
    let exe = std::env::current_exe().expect("current_exe");
    let (mut model_a, mut model_b) = (Model::new(), Model::new());
    let mut recovered = 0u64;
    let mut summary = Summary::default();
    for round in 0..kills {
        let cseed = child_seed(seed, round);
        let stderr = std::fs::File::create(&stderr_path).expect("stderr file");
        let mut child = ChildGuard(Some(
            Command::new(&exe)
                .args(["--exact", CHILD_TEST, "--nocapture", "--test-threads=1"])
                .env(CHILD_DIR_VAR, &dir)
                .env(CHILD_SEED_VAR, cseed.to_string())
                .stdout(Stdio::piped())
                .stderr(Stdio::from(stderr))
                .spawn()
                .expect("spawn child"),
        ));
        let stdout = child.0.as_mut().unwrap().stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel::<String>();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        // Most kills land while the child writes (timed from its READY line); some land
        // during its start-up and recovery (timed from the spawn).
        let mut lines = Vec::new();
        let from_ready = rng.gen_range(0..6) != 0;
        if from_ready {
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                match rx.recv_timeout(left) {
                    Ok(l) => {
                        let ready = marker(&l, "READY ").is_some();
                        lines.push(l);
                        if ready {
                            break;
                        }
                    }
                    Err(_) => {
                        let status = child.kill_and_wait();
                        panic!(
                            "round {round}: child never became ready ({status}); stderr:\n{}",
                            std::fs::read_to_string(&stderr_path).unwrap_or_default()
                        );
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(rng.gen_range(3..300)));
        } else {
            std::thread::sleep(Duration::from_millis(rng.gen_range(0..40)));
        }
        let status = child.kill_and_wait();
        reader.join().expect("reader thread");
        lines.extend(rx.try_iter());
        {
            use std::os::unix::process::ExitStatusExt;
            assert_eq!(
                status.signal(),
                Some(libc::SIGKILL),
                "round {round}: the child must die by our SIGKILL, not on its own ({status}); stderr:\n{}",
                std::fs::read_to_string(&stderr_path).unwrap_or_default()
            );
        }
        let mut acked = recovered;
        let mut ready_seen = false;
        for l in &lines {
            if let Some(s) = marker(l, "READY ") {
                assert_eq!(
                    s, recovered,
                    "round {round}: the child recovered another seq"
                );
                ready_seen = true;
            } else if let Some(s) = marker(l, "ACK ") {
                assert_eq!(s, acked + 1, "round {round}: ACKs are consecutive");
                acked = s;
            }
        }
        summary.kills += 1;
        summary.kills_while_writing += u64::from(ready_seen);

        // (1) Recovery succeeds.
        let env = Env::open(&dir, parent_options())
            .unwrap_or_else(|e| panic!("round {round}: reopen after SIGKILL failed: {e}"));
        let a = env.open_tree("a").expect("open a");
        let b = env.open_tree("b").expect("open b");
        // (2) Both trees verify.
        let count_a = a
            .verify()
            .unwrap_or_else(|e| panic!("round {round}: verify a: {e}"))
            .entries;
        let count_b = b
            .verify()
            .unwrap_or_else(|e| panic!("round {round}: verify b: {e}"))
            .entries;
        let got_a = scan(&a);
        let got_b = scan(&b);
        assert_eq!(
            count_a as usize,
            got_a.len(),
            "round {round}: verify count a"
        );
        assert_eq!(
            count_b as usize,
            got_b.len(),
            "round {round}: verify count b"
        );
        // (3) Every acknowledged commit survived; nothing past the one in flight exists.
        let seq_a = got_a.get(&b"seq"[..]).map_or(0, |v| as_u64(v));
        let seq_b = got_b.get(&b"seq"[..]).map_or(0, |v| as_u64(v));
        assert_eq!(seq_a, seq_b, "round {round}: seq differs between trees");
        assert!(
            seq_a >= acked,
            "round {round}: acknowledged seq {acked} lost; recovered {seq_a}"
        );
        assert!(
            seq_a <= acked + 1,
            "round {round}: recovered seq {seq_a} but the child can have attempted at most {}",
            acked + 1
        );
        summary.unacked_commit_survived += u64::from(seq_a == acked + 1);
        // (4) Batches are atomic: the amounts still sum to 0, and both trees equal the model
        // after exactly `seq_a` commits (no lost, partial or extra batch).
        let total = amounts_total(&got_a) + amounts_total(&got_b);
        assert_eq!(total, 0, "round {round}: amounts sum to {total}, not 0");
        let mut crng = StdRng::seed_from_u64(cseed);
        for s in recovered + 1..=seq_a {
            let m = next_move(&mut crng);
            let cs = changes(s, &m, |in_a, k| {
                let t = if in_a { &model_a } else { &model_b };
                t.get(k).cloned()
            });
            apply_to_model(&mut model_a, &mut model_b, &cs);
        }
        assert!(
            got_a == model_a,
            "round {round}: tree a differs from the model: {}",
            first_difference(&model_a, &got_a)
        );
        assert!(
            got_b == model_b,
            "round {round}: tree b differs from the model: {}",
            first_difference(&model_b, &got_b)
        );
        // Point reads agree with the scan.
        for i in 0..AMOUNT_KEYS {
            let k = amount_key(i);
            assert_eq!(a.get(&k).expect("get"), model_a.get(&k).cloned());
            assert_eq!(b.get(&k).expect("get"), model_b.get(&k).cloned());
        }
        // (5) Close (a checkpoint) succeeds.
        drop((a, b));
        env.close()
            .unwrap_or_else(|e| panic!("round {round}: close after recovery: {e}"));
        recovered = seq_a;
        summary.max_acked = summary.max_acked.max(acked);
    }
    summary.commits_recovered = recovered;
    summary
}

#[test]
fn sigkill_during_writes_loses_no_acknowledged_commit() {
    if std::env::var_os(CHILD_DIR_VAR).is_some() {
        return;
    }
    let seed: u64 = match std::env::var("SHALE_SEED") {
        Ok(s) => s.parse().expect("SHALE_SEED is a number"),
        Err(_) => rand::random(),
    };
    let kills: u64 = std::env::var("SHALE_CRASH_KILLS")
        .map(|s| s.parse().expect("SHALE_CRASH_KILLS is a number"))
        .unwrap_or(60);
    let started = Instant::now();
    let result = std::panic::catch_unwind(|| run(seed, kills));
    match result {
        Ok(s) => {
            println!(
                "crash test SHALE_SEED={seed}: {} kills ({} while writing), max acked seq {}, \
                 {} commits recovered, unacknowledged in-flight commit survived {} times, {:.1}s",
                s.kills,
                s.kills_while_writing,
                s.max_acked,
                s.commits_recovered,
                s.unacked_commit_survived,
                started.elapsed().as_secs_f64()
            );
            assert!(
                s.kills_while_writing * 2 >= s.kills && s.commits_recovered >= s.kills,
                "the kills must land while the child writes: {s:?}"
            );
        }
        Err(_) => panic!("crash test failed with SHALE_SEED={seed}"),
    }
}
