//! Salvage of a damaged tree file (`shale_engine::salvage`, docs/operations.md): a random
//! byte of a closed tree file is flipped — a node's header or partitions, a header slot, the
//! translation table, or bytes nothing reads — and then `verify` and `repair` run. After the
//! repair the environment opens and the tree verifies; every key it returns has exactly the
//! value written (never garbage), and every key it lost lies in a range the report
//! dropped; a key may hold its older value (or come back after its delete) only in a range
//! whose buffered changes the report says were lost, or after a page scan. A flip `verify`
//! calls clean loses nothing.
//!
//! Seeds are printed on failure; rerun one with `SHALE_SEED=<seed>`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use shale_engine::salvage::{self, LostBlock};
use shale_engine::{add_i64_merge, Env, EnvOptions, MergeFn};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

mod common;
use common::seeds;

const KEYS: usize = 800;
/// Seeds per run (`SHALE_SALVAGE_SEEDS` overrides, for a longer hunt).
const SEEDS: usize = 8;

fn options() -> EnvOptions {
    common::tiny_options(256 << 10)
}

fn merge() -> Arc<MergeFn> {
    Arc::new(add_i64_merge)
}

fn key_for(i: usize) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

fn value_for(i: usize, round: usize) -> Vec<u8> {
    let mut v = format!("value-{i:05}-{round}-").into_bytes();
    v.extend((0..(i * 7 + round) % 60).map(|j| b'a' + (j % 26) as u8));
    v
}

/// A closed environment with one tree of `KEYS` keys, a third of them rewritten and a few
/// deleted, so the file holds copied blocks and free space.
fn build(dir: &Path) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let env = Env::open(dir, options()).expect("open");
    let t = env.create_tree("t", None).expect("create");
    let mut model = BTreeMap::new();
    for i in 0..KEYS {
        t.put(&key_for(i), &value_for(i, 0)).expect("put");
        model.insert(key_for(i), value_for(i, 0));
    }
    env.checkpoint().expect("checkpoint");
    for i in (0..KEYS).step_by(3) {
        t.put(&key_for(i), &value_for(i, 1)).expect("rewrite");
        model.insert(key_for(i), value_for(i, 1));
    }
    for i in (1..KEYS).step_by(50) {
        t.delete(&key_for(i)).expect("delete");
        model.remove(&key_for(i));
    }
    drop(t);
    env.close().expect("close");
    model
}

fn tree_file(dir: &Path) -> PathBuf {
    std::fs::read_dir(dir)
        .expect("read dir")
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "shl"))
        .expect("a tree file")
}

/// Whether `key` lies in a range the report says was dropped (only ranges of lost buffered
/// changes with `messages_only`).
fn reported(lost: &[LostBlock], key: &[u8], messages_only: bool) -> bool {
    lost.iter()
        .filter(|l| l.messages || !messages_only)
        .any(|l| {
            !l.range_known
                || (l.low.as_deref().is_none_or(|lo| key >= lo)
                    && l.high.as_deref().is_none_or(|hi| key < hi))
        })
}

#[test]
fn a_flipped_byte_costs_only_the_keys_the_report_names() {
    let count = std::env::var("SHALE_SALVAGE_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(SEEDS);
    for seed in seeds(count) {
        let mut rng = StdRng::seed_from_u64(seed);
        let dir = tempfile::tempdir().expect("tempdir");
        let model = build(dir.path());
        let file = tree_file(dir.path());
        let len = std::fs::metadata(&file).expect("stat").len() as usize;
        let at = rng.gen_range(0..len);
        let mut bytes = std::fs::read(&file).expect("read");
        bytes[at] ^= 1 << rng.gen_range(0..8);
        std::fs::write(&file, bytes).expect("write");

        let before = salvage::verify(dir.path(), merge()).expect("verify");
        let report = salvage::repair(dir.path(), &options(), merge()).expect("repair");
        let lost: Vec<LostBlock> = report
            .before
            .trees
            .iter()
            .flat_map(|t| t.lost.clone())
            .collect();
        let scanned = report
            .before
            .trees
            .iter()
            .any(|t| t.source == Some(salvage::Source::Scan));
        let env = Env::open(dir.path(), options()).expect("open after repair");
        let t = env.open_tree("t").expect("tree");
        t.verify()
            .unwrap_or_else(|e| panic!("seed {seed}, flip at {at}: tree after repair: {e}"));
        let mut cursor = t.cursor();
        cursor.seek_to_first().expect("seek");
        let mut found = BTreeMap::new();
        while let Some((k, v)) = cursor.entry() {
            found.insert(k.to_vec(), v.to_vec());
            cursor.next().expect("next");
        }
        for (k, v) in &found {
            match model.get(k) {
                Some(want) if v == want => {}
                Some(want) => {
                    let i: usize = std::str::from_utf8(&k[3..])
                        .expect("key")
                        .parse()
                        .expect("key number");
                    assert!(
                        *v == value_for(i, 0) && reported(&lost, k, true),
                        "seed {seed}, flip at {at}: wrong value for {k:?}: {v:?}, want {want:?}\n{before}"
                    );
                }
                // A deleted key comes back with its old value when the message buffer
                // holding its delete is lost (the report says so for its range), or when a
                // page scan meets an old image (its tombstone was collected).
                None => assert!(
                    scanned || reported(&lost, k, true),
                    "seed {seed}, flip at {at}: key {k:?} was deleted but came back\n{before}"
                ),
            }
        }
        for k in model.keys() {
            if !found.contains_key(k) {
                assert!(
                    !before.is_clean() && (scanned || reported(&lost, k, false)),
                    "seed {seed}, flip at {at}: key {k:?} lost outside every reported range\n{before}"
                );
            }
        }
        let after = salvage::verify(dir.path(), merge());
        drop(cursor);
        drop(t);
        env.close().expect("close");
        let after = after.err().map(|e| e.to_string());
        assert_eq!(
            after.as_deref(),
            Some(
                "data directory ".to_owned()
                    + &dir.path().display().to_string()
                    + " is locked by another process"
            )
            .as_deref(),
            "verify refuses while the environment is open"
        );
        let clean = salvage::verify(dir.path(), merge()).expect("verify after");
        assert!(
            clean.is_clean(),
            "seed {seed}, flip at {at}: after repair\n{clean}"
        );
    }
}
