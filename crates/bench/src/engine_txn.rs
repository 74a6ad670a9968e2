//! The `txn` phase of the `engine` workload: transactions that each move an amount between a
//! key of one tree and a key of another (read both, write both, commit), from 1, 2, 4 and 8
//! threads, with the "every commit" fsync policy so that group commit is what is measured.
//! A conflicting transaction is aborted and retried. Per thread count it reports commits/s,
//! log fsyncs per commit (group commit shares one fsync among the committers waiting on it)
//! and the conflict rate (conflicted attempts / all attempts).

use crate::report::{num, Table};
use anyhow::{Context, Result};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use shale_engine::{Env, EnvOptions, Error, FsyncPolicy, TreeHandle, Txn};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Thread counts measured, in order.
pub const THREAD_COUNTS: [usize; 4] = [1, 2, 4, 8];
/// Keys per tree: few enough that 8 threads collide now and then.
const KEYS: u64 = 10_000;

/// The figures of one thread count.
#[derive(Debug, Clone, Serialize)]
pub struct TxnRun {
    pub threads: usize,
    pub seconds: f64,
    pub commits: u64,
    pub commits_per_sec: f64,
    pub conflicts: u64,
    /// Conflicted attempts over all attempts.
    pub conflict_rate: f64,
    pub log_fsyncs: u64,
    pub fsyncs_per_commit: f64,
}

/// Runs every thread count for `seconds_each` on a fresh environment under `dir`.
pub fn run(
    dir: &Path,
    cache_bytes: usize,
    direct_io: bool,
    seconds_each: f64,
) -> Result<Vec<TxnRun>> {
    let options = EnvOptions {
        cache_bytes,
        fsync: FsyncPolicy::EveryCommit,
        direct_io,
        ..EnvOptions::default()
    };
    let env = Env::open(dir, options).context("opening the txn environment")?;
    let trees = [
        env.create_tree("txn-a", None)?,
        env.create_tree("txn-b", None)?,
    ];
    let mut runs = Vec::new();
    for threads in THREAD_COUNTS {
        let run = measure(&env, &trees, threads, Duration::from_secs_f64(seconds_each))?;
        eprintln!(
            "txn: {threads} threads: {} commits/s, {} fsyncs/commit, conflict rate {}",
            num(run.commits_per_sec),
            num(run.fsyncs_per_commit),
            num(run.conflict_rate)
        );
        runs.push(run);
    }
    let total: i64 = trees.iter().map(sum_amounts).sum::<Result<i64>>()?;
    anyhow::ensure!(
        total == 0,
        "transfers do not sum to 0 but {total}: lost atomicity"
    );
    drop(trees);
    env.close().context("closing the txn environment")?;
    Ok(runs)
}

fn measure(env: &Env, trees: &[TreeHandle; 2], threads: usize, limit: Duration) -> Result<TxnRun> {
    let commits = AtomicU64::new(0);
    let conflicts = AtomicU64::new(0);
    let fsyncs_before = env.counters().io.log.fsyncs;
    let started = Instant::now();
    std::thread::scope(|s| -> Result<()> {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let (commits, conflicts) = (&commits, &conflicts);
                s.spawn(move || -> Result<()> {
                    let mut rng = StdRng::seed_from_u64(0x7478_6e00 + t as u64);
                    while started.elapsed() < limit {
                        let mut txn = env.begin();
                        match transfer(&mut txn, trees, &mut rng) {
                            Ok(()) => {
                                txn.commit()?;
                                commits.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(Error::WriteConflict { .. }) => {
                                txn.abort();
                                conflicts.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(e) => return Err(e.into()),
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        for w in workers {
            w.join()
                .map_err(|_| anyhow::anyhow!("txn worker panicked"))??;
        }
        Ok(())
    })?;
    let seconds = started.elapsed().as_secs_f64();
    let commits = commits.load(Ordering::Relaxed);
    let conflicts = conflicts.load(Ordering::Relaxed);
    let log_fsyncs = env.counters().io.log.fsyncs - fsyncs_before;
    Ok(TxnRun {
        threads,
        seconds,
        commits,
        commits_per_sec: commits as f64 / seconds,
        conflicts,
        conflict_rate: conflicts as f64 / (commits + conflicts).max(1) as f64,
        log_fsyncs,
        fsyncs_per_commit: log_fsyncs as f64 / commits.max(1) as f64,
    })
}

/// Moves a random amount from a key of one tree to a key of the other.
fn transfer(txn: &mut Txn, trees: &[TreeHandle; 2], rng: &mut StdRng) -> Result<(), Error> {
    let from = rng.gen_range(0..2);
    let (src, dst) = (&trees[from], &trees[1 - from]);
    let (i, j) = (rng.gen_range(0..KEYS), rng.gen_range(0..KEYS));
    let amount: i64 = rng.gen_range(1..100);
    let a = amount_at(txn.get(src, &key(i))?);
    txn.put(src, &key(i), &(a - amount).to_le_bytes())?;
    let b = amount_at(txn.get(dst, &key(j))?);
    txn.put(dst, &key(j), &(b + amount).to_le_bytes())
}

fn key(i: u64) -> Vec<u8> {
    format!("acct{i:08}").into_bytes()
}

fn amount_at(v: Option<Vec<u8>>) -> i64 {
    v.and_then(|v| v.try_into().ok())
        .map_or(0, i64::from_le_bytes)
}

fn sum_amounts(t: &TreeHandle) -> Result<i64> {
    let mut c = t.cursor();
    c.seek_to_first()?;
    let mut total = 0;
    while c.valid() {
        total += amount_at(Some(c.value().to_vec()));
        c.next()?;
    }
    Ok(total)
}

/// The terminal table of the txn phase.
pub fn print(runs: &[TxnRun]) {
    let mut t = Table::new(["txn threads", "commits/s", "fsyncs/commit", "conflict rate"]);
    for r in runs {
        t.row([
            r.threads.to_string(),
            num(r.commits_per_sec),
            num(r.fsyncs_per_commit),
            num(r.conflict_rate),
        ]);
    }
    print!("{}", t.render());
}
