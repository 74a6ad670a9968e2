//! Bank transfers: writer threads move money between accounts kept in two trees, each move a
//! transaction (read both balances, write both); reader threads meanwhile sum every account
//! through snapshot cursors, through transactions' point reads, and through transactions'
//! cursors. Every reader sees the constant total, however long its scan runs while commits,
//! flushes, evictions and checkpoints go on.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

mod common;

use rand::{Rng, SeedableRng};
use shale_engine::{Env, Error, TreeHandle, Txn};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

const ACCOUNTS_PER_TREE: u64 = 200;
const START_BALANCE: i64 = 1000;
const WRITERS: usize = 3;
const MOVES_PER_WRITER: usize = 400;

fn account(i: u64) -> Vec<u8> {
    format!("acct{i:04}").into_bytes()
}

fn balance(v: Option<Vec<u8>>) -> i64 {
    v.map_or(0, |v| {
        i64::from_le_bytes(v.try_into().expect("8-byte balance"))
    })
}

fn transfer(
    txn: &mut Txn,
    from: (&TreeHandle, u64),
    to: (&TreeHandle, u64),
    amount: i64,
) -> Result<(), Error> {
    let a = balance(txn.get(from.0, &account(from.1))?);
    txn.put(from.0, &account(from.1), &(a - amount).to_le_bytes())?;
    let b = balance(txn.get(to.0, &account(to.1))?);
    txn.put(to.0, &account(to.1), &(b + amount).to_le_bytes())?;
    Ok(())
}

fn sum_by_cursor(t: &TreeHandle) -> i64 {
    let mut c = t.cursor();
    c.seek_to_first().expect("seek");
    let mut total = 0;
    while c.valid() {
        total += balance(Some(c.value().to_vec()));
        // Give writers time to commit while this scan holds its snapshot.
        std::thread::yield_now();
        c.next().expect("next");
    }
    total
}

#[test]
fn concurrent_readers_always_see_the_constant_total() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut options = common::tiny_options(192 << 10);
    options.checkpoint_interval = Some(Duration::from_millis(30));
    let env = Env::open(dir.path(), options).expect("open");
    let trees = [
        env.create_tree("checking", None).expect("create"),
        env.create_tree("savings", None).expect("create"),
    ];
    for t in &trees {
        for i in 0..ACCOUNTS_PER_TREE {
            t.put(&account(i), &START_BALANCE.to_le_bytes())
                .expect("seed");
        }
    }
    let expected = 2 * ACCOUNTS_PER_TREE as i64 * START_BALANCE;
    let done = AtomicBool::new(false);
    let reads = AtomicU64::new(0);
    std::thread::scope(|s| {
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let (env, trees) = (&env, &trees);
                s.spawn(move || {
                    let mut rng = rand::rngs::StdRng::seed_from_u64(w as u64);
                    let mut moved = 0;
                    while moved < MOVES_PER_WRITER {
                        let from = (
                            &trees[rng.gen_range(0..2)],
                            rng.gen_range(0..ACCOUNTS_PER_TREE),
                        );
                        let to = (
                            &trees[rng.gen_range(0..2)],
                            rng.gen_range(0..ACCOUNTS_PER_TREE),
                        );
                        let mut txn = env.begin();
                        match transfer(&mut txn, from, to, rng.gen_range(1..50)) {
                            Ok(()) => {
                                txn.commit().expect("commit");
                                moved += 1;
                            }
                            Err(Error::WriteConflict { .. }) => txn.abort(),
                            Err(e) => panic!("transfer: {e}"),
                        }
                    }
                })
            })
            .collect();
        // Cursor readers: each cursor reads one tree as of its own snapshot, so a consistent
        // total over both trees needs one transaction's snapshot: use txn cursors for that,
        // and plain cursors only for the per-tree total when no writer is left.
        for r in 0..2 {
            let (env, trees, done, reads) = (&env, &trees, &done, &reads);
            s.spawn(move || {
                while !done.load(Ordering::Relaxed) {
                    let txn = env.begin();
                    let total: i64 = if r == 0 {
                        trees
                            .iter()
                            .map(|t| {
                                let mut c = txn.cursor(t);
                                c.seek_to_first().expect("seek");
                                let mut sum = 0;
                                while c.valid() {
                                    sum += balance(Some(c.value().to_vec()));
                                    std::thread::yield_now();
                                    c.next().expect("next");
                                }
                                sum
                            })
                            .sum()
                    } else {
                        trees
                            .iter()
                            .flat_map(|t| (0..ACCOUNTS_PER_TREE).map(move |i| (t, i)))
                            .map(|(t, i)| balance(txn.get(t, &account(i)).expect("get")))
                            .sum()
                    };
                    assert_eq!(total, expected, "reader {r} saw a partial transfer");
                    reads.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        for w in writers {
            w.join().expect("writer");
        }
        done.store(true, Ordering::Relaxed);
    });
    assert!(reads.load(Ordering::Relaxed) > 0, "readers ran");
    let total = sum_by_cursor(&trees[0]) + sum_by_cursor(&trees[1]);
    assert_eq!(total, expected);
    let c = env.counters();
    assert_eq!((c.active_txns, c.open_snapshots), (0, 0), "{c:?}");
    assert!(
        c.versions_retained_total > 0,
        "long scans must have kept old versions: {c:?}"
    );
    for t in &trees {
        t.verify().expect("verify");
    }
    println!(
        "{} full reads, {} conflicts, versions retained {} / collected {}",
        reads.load(Ordering::Relaxed),
        c.write_conflicts,
        c.versions_retained_total,
        c.versions_collected
    );
    env.close().expect("close");
}
