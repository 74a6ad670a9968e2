//! Bit flips on disk: a flipped bit in a tree file (node block, header, translation table) or
//! in a log record must surface as `Error::Corruption` naming the file, the place and a
//! reason — never as wrong data and never as a panic. A flip in bytes nothing reads (free
//! space, page padding) must leave every read correct.
//!
//! Seeds are printed on failure; rerun one with `SHALE_SEED=<seed>`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use shale_engine::{Env, EnvOptions, Error};
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

const PAGE: usize = 4096;
/// Log file header size: frames start at this offset (docs/format-wal.md).
const LOG_HEADER: usize = 4096;
/// Bytes of a log frame header before its payload.
const FRAME_HEADER: usize = 16;

mod common;
use common::seeds;

fn options() -> EnvOptions {
    common::tiny_options(64 << 10)
}

fn value_for(key: usize, round: usize) -> Vec<u8> {
    let mut v = format!("value-{key:05}-{round}-").into_bytes();
    // Varied lengths so that leaves hold several basements.
    v.extend((0..(key * 7 + round) % 90).map(|i| b'a' + (i % 26) as u8));
    v
}

fn key_for(i: usize) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// Copies every file under `from` into `to` (created), recursively.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir copy");
    for e in std::fs::read_dir(from).expect("read dir").flatten() {
        let p = e.path();
        let dst = to.join(e.file_name());
        if p.is_dir() {
            copy_dir(&p, &dst);
        } else {
            std::fs::copy(&p, &dst).expect("copy file");
        }
    }
}

fn flip_bit(path: &Path, offset: usize, bit: u8) {
    let mut bytes = std::fs::read(path).expect("read for flip");
    bytes[offset] ^= 1 << bit;
    std::fs::write(path, bytes).expect("write flipped");
}

fn tree_file(dir: &Path) -> PathBuf {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("read data dir")
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("tree-") && n.ends_with(".shl"))
        })
        .collect();
    assert_eq!(found.len(), 1, "one tree file expected: {found:?}");
    found.pop().expect("tree file")
}

fn log_files(dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir.join("wal"))
        .expect("read wal dir")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "wal"))
        .collect();
    found.sort();
    found
}

/// A corruption error must name `file` and say where (block, header or translation table for
/// a tree file; the log record offset for a log file) and why.
fn assert_names(err: &Error, file: &Path, places: &[&str], what: &str) {
    let text = err.to_string();
    assert!(
        err.is_corruption(),
        "{what}: expected a corruption error, got {err:?} ({text})"
    );
    assert!(
        text.contains(&file.display().to_string()),
        "{what}: error does not name {}: {text}",
        file.display()
    );
    assert!(
        places.iter().any(|p| text.contains(p)),
        "{what}: error names none of {places:?}: {text}"
    );
    if let Error::Corruption { reason, .. } = err {
        assert!(!reason.trim().is_empty(), "{what}: empty reason: {text}");
    }
}

/// Builds a closed environment holding `n` keys in one tiny-node tree, all on disk.
fn build_tree_dir(dir: &Path, n: usize) -> Model {
    let env = Env::open(dir, options()).expect("open");
    let t = env.create_tree("t", None).expect("create");
    let mut model = Model::new();
    for round in 0..2 {
        for i in 0..n {
            // The second round rewrites one key in three so some blocks are copied (COW).
            if round == 1 && i % 3 != 0 {
                continue;
            }
            let (k, v) = (key_for(i), value_for(i, round));
            t.put(&k, &v).expect("put");
            model.insert(k, v);
        }
        env.flush_all().expect("flush");
        env.checkpoint().expect("checkpoint");
    }
    assert_eq!(t.verify().expect("verify").entries as usize, model.len());
    drop(t);
    env.close().expect("close");
    model
}

/// What reading a damaged environment gave.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    /// Every read and `verify` returned the right data.
    AllCorrect,
    /// Some operation reported corruption (and nothing returned wrong data).
    Corruption,
}

/// Opens `dir`, reads every key of `model` with `get`, scans with a cursor and runs `verify`.
/// Panics on wrong data or on an error that is not a corruption naming `file`.
fn read_back(dir: &Path, model: &Model, file: &Path, places: &[&str], what: &str) -> Outcome {
    let env = match Env::open(dir, options()) {
        Ok(env) => env,
        Err(e) => {
            assert_names(&e, file, places, &format!("{what}: open"));
            return Outcome::Corruption;
        }
    };
    let t = env.open_tree("t").expect("tree in catalog");
    let mut corrupt = false;
    for (k, v) in model {
        match t.get(k) {
            Ok(got) => assert_eq!(
                got.as_deref(),
                Some(v.as_slice()),
                "{what}: wrong data for {:?}",
                String::from_utf8_lossy(k)
            ),
            Err(e) => {
                assert_names(&e, file, places, &format!("{what}: get"));
                corrupt = true;
            }
        }
    }
    // A full scan must yield exactly the model's pairs, in order, until any corruption.
    let mut c = t.cursor();
    let mut expected = model.iter();
    let mut step = c.seek_to_first();
    loop {
        if let Err(e) = step {
            assert_names(&e, file, places, &format!("{what}: cursor"));
            corrupt = true;
            break;
        }
        if !c.valid() {
            assert!(expected.next().is_none(), "{what}: scan ended early");
            break;
        }
        let (k, v) = expected
            .next()
            .expect("scan returned a key the model lacks");
        assert_eq!(c.key(), k.as_slice(), "{what}: scan key");
        assert_eq!(c.value(), v.as_slice(), "{what}: scan value");
        step = c.next();
    }
    match t.verify() {
        Ok(shape) => assert_eq!(shape.entries as usize, model.len(), "{what}: verify count"),
        Err(e) => {
            assert_names(&e, file, places, &format!("{what}: verify"));
            corrupt = true;
        }
    }
    drop(t);
    drop(env);
    if corrupt {
        Outcome::Corruption
    } else {
        Outcome::AllCorrect
    }
}

/// Page-aligned offsets (past the two headers) of blocks that start with the node magic.
fn node_blocks(bytes: &[u8]) -> Vec<usize> {
    (2 * PAGE..bytes.len())
        .step_by(PAGE)
        .filter(|&o| bytes[o..].starts_with(b"SHND"))
        .collect()
}

/// Bytes a node block spans: its header and every partition (docs/format-node.md).
fn node_block_len(bytes: &[u8], at: usize) -> usize {
    let u32_at = |o: usize| u32::from_le_bytes(bytes[at + o..at + o + 4].try_into().unwrap());
    let header_len = u32_at(12) as usize;
    let n = u32_at(16) as usize;
    (0..n)
        .map(|i| {
            let d = 20 + 20 * i;
            (u32_at(d) + u32_at(d + 4)) as usize
        })
        .max()
        .unwrap_or(0)
        .max(header_len)
}

const TREE_PLACES: &[&str] = &["block", "header slot", "translation table"];

fn flip_and_check(base: &Path, model: &Model, offset: usize, bit: u8, what: &str) -> Outcome {
    let scratch = tempfile::tempdir().expect("tempdir");
    copy_dir(base, scratch.path());
    let file = tree_file(scratch.path());
    flip_bit(&file, offset, bit);
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        read_back(scratch.path(), model, &file, TREE_PLACES, what)
    }));
    match outcome {
        Ok(o) => o,
        Err(p) => std::panic::resume_unwind(p),
    }
}

/// Flips one bit inside node blocks (header and partitions), inside used extents at random,
/// and anywhere in the file at random. Every read is correct or a named corruption.
#[test]
fn a_flipped_bit_in_a_tree_file_is_corruption_or_harmless() {
    let base = tempfile::tempdir().expect("tempdir");
    let model = build_tree_dir(base.path(), 1500);
    let file = tree_file(base.path());
    let bytes = std::fs::read(&file).expect("read tree file");
    let blocks = node_blocks(&bytes);
    assert!(blocks.len() > 10, "tiny nodes must give many blocks");
    let mut corrupt_seen = 0;
    let mut harmless_seen = 0;
    for seed in seeds(3) {
        let mut rng = StdRng::seed_from_u64(seed);
        let run = catch_unwind(AssertUnwindSafe(|| {
            // Inside node blocks: a third in the node header, the rest in the partitions.
            for i in 0..40 {
                let at = blocks[rng.gen_range(0..blocks.len())];
                let len = node_block_len(&bytes, at).max(24);
                let header_len =
                    u32::from_le_bytes(bytes[at + 12..at + 16].try_into().unwrap()) as usize;
                let off = if i % 3 == 0 {
                    at + rng.gen_range(0..header_len.clamp(1, len))
                } else {
                    at + rng.gen_range(0..len)
                };
                let bit = rng.gen_range(0..8);
                let what = format!("seed {seed}: node block at {at}, flip {off}.{bit}");
                // A node block found by scanning may be free space (an older copy), so
                // harmless is allowed here too; wrong data never is.
                match flip_and_check(base.path(), &model, off, bit, &what) {
                    Outcome::Corruption => corrupt_seen += 1,
                    Outcome::AllCorrect => harmless_seen += 1,
                }
            }
            // Anywhere in the file: headers, translation tables, padding, free space.
            for _ in 0..25 {
                let off = rng.gen_range(0..bytes.len());
                let bit = rng.gen_range(0..8);
                let what = format!("seed {seed}: random flip {off}.{bit}");
                match flip_and_check(base.path(), &model, off, bit, &what) {
                    Outcome::Corruption => corrupt_seen += 1,
                    Outcome::AllCorrect => harmless_seen += 1,
                }
            }
            // The used bytes of both header slots (72 + meta bytes each).
            for _ in 0..6 {
                let slot = rng.gen_range(0..2);
                let off = slot * PAGE + rng.gen_range(0..72);
                let bit = rng.gen_range(0..8);
                let what = format!("seed {seed}: header slot {slot} flip {off}.{bit}");
                match flip_and_check(base.path(), &model, off, bit, &what) {
                    Outcome::Corruption => corrupt_seen += 1,
                    Outcome::AllCorrect => harmless_seen += 1,
                }
            }
        }));
        if let Err(p) = run {
            eprintln!("tree-file bit flip failed with SHALE_SEED={seed}");
            std::panic::resume_unwind(p);
        }
    }
    // Flips inside live node blocks must be caught at least sometimes: if every flip were
    // harmless, the reads would not be reading what we flipped.
    assert!(
        corrupt_seen > 0,
        "no flip was detected ({harmless_seen} harmless)"
    );
}

/// Every flip inside a live node block's header or partitions is detected: each of those
/// bytes is covered by a checksum and every key is read.
#[test]
fn a_flipped_bit_in_a_live_block_is_always_corruption() {
    let base = tempfile::tempdir().expect("tempdir");
    let model = build_tree_dir(base.path(), 1500);
    let file = tree_file(base.path());
    let bytes = std::fs::read(&file).expect("read tree file");
    // Find a live block: flip its magic; if the reads stay correct it is free space.
    let blocks = node_blocks(&bytes);
    let live: Vec<usize> = blocks
        .iter()
        .rev()
        .copied()
        .filter(|&at| flip_and_check(base.path(), &model, at, 0, "probe") == Outcome::Corruption)
        .take(3)
        .collect();
    assert!(
        !live.is_empty(),
        "no live node block found among {blocks:?}"
    );
    for seed in seeds(2) {
        let mut rng = StdRng::seed_from_u64(seed);
        for &at in &live {
            let len = node_block_len(&bytes, at);
            for _ in 0..8 {
                let off = at + rng.gen_range(0..len);
                let bit = rng.gen_range(0..8);
                let what = format!("SHALE_SEED={seed}: live block at {at}, flip {off}.{bit}");
                assert_eq!(
                    flip_and_check(base.path(), &model, off, bit, &what),
                    Outcome::Corruption,
                    "{what}: a flip inside a live block's checked bytes went unnoticed"
                );
            }
        }
    }
}

/// One frame of the log: its file offset and total length.
fn frames(bytes: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut at = LOG_HEADER;
    while at + FRAME_HEADER <= bytes.len() {
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        if len == 0 {
            break;
        }
        out.push((at, FRAME_HEADER + len));
        at += FRAME_HEADER + len;
    }
    out
}

/// Writes `n` single-put commits and drops the environment without closing, so that the
/// data is only in the log. Each put is one frame: its commit's Group record.
fn build_log_dir(dir: &Path, n: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    let env = Env::open(dir, options()).expect("open");
    let t = env.create_tree("t", None).expect("create");
    let mut acked = Vec::new();
    for i in 0..n {
        let (k, v) = (key_for(i), value_for(i, 0));
        t.put(&k, &v).expect("put");
        acked.push((k, v));
    }
    drop(t);
    drop(env);
    acked
}

/// A flip inside a log record before the last one must fail the open with a corruption naming
/// the log file and the record's offset: cutting there would silently lose acknowledged
/// commits after it. A flip in the very last record is the crash tail: it is cut and every
/// earlier acknowledged commit survives.
#[test]
fn a_flipped_bit_in_a_log_record_is_corruption_unless_it_is_the_tail() {
    const N: usize = 60;
    let base = tempfile::tempdir().expect("tempdir");
    let acked = build_log_dir(base.path(), N);
    let logs = log_files(base.path());
    assert_eq!(logs.len(), 1, "one log file expected: {logs:?}");
    let log_name = logs[0].file_name().expect("name").to_owned();
    let bytes = std::fs::read(&logs[0]).expect("read log");
    let all = frames(&bytes);
    assert_eq!(all.len(), N, "one Group frame per write");
    for seed in seeds(3) {
        let mut rng = StdRng::seed_from_u64(seed);
        let run = catch_unwind(AssertUnwindSafe(|| {
            for round in 0..12 {
                // Last frame one round in four; otherwise a frame in the middle.
                let idx = if round % 4 == 0 {
                    all.len() - 1
                } else {
                    rng.gen_range(0..all.len() - 1)
                };
                let (at, len) = all[idx];
                let off = at + rng.gen_range(0..len);
                let bit = rng.gen_range(0..8);
                let what = format!(
                    "SHALE_SEED={seed}: frame {idx} at {at} ({len} bytes), flip {off}.{bit}"
                );
                let scratch = tempfile::tempdir().expect("tempdir");
                copy_dir(base.path(), scratch.path());
                let log = scratch.path().join("wal").join(&log_name);
                flip_bit(&log, off, bit);
                let opened = Env::open(scratch.path(), options());
                if idx + 1 < all.len() {
                    let err = match opened {
                        Ok(_) => panic!(
                            "{what}: open succeeded after a flip in a record that is not the tail"
                        ),
                        Err(e) => e,
                    };
                    assert_names(&err, &log, &[&format!("log record at offset {at}")], &what);
                } else {
                    // The tail: the last commit's group record is cut, so the last put is
                    // gone and every earlier one is present.
                    let env = opened.unwrap_or_else(|e| panic!("{what}: open failed: {e}"));
                    let t = env.open_tree("t").expect("tree");
                    for (i, (k, v)) in acked.iter().enumerate() {
                        let got = t.get(k).unwrap_or_else(|e| panic!("{what}: get: {e}"));
                        if i + 1 < acked.len() {
                            assert_eq!(got.as_deref(), Some(v.as_slice()), "{what}: put {i}");
                        } else {
                            assert_eq!(got, None, "{what}: the cut commit's put is present");
                        }
                    }
                    assert_eq!(
                        t.verify()
                            .unwrap_or_else(|e| panic!("{what}: verify: {e}"))
                            .entries as usize,
                        acked.len() - 1
                    );
                }
            }
        }));
        if let Err(p) = run {
            eprintln!("log bit flip failed with SHALE_SEED={seed}");
            std::panic::resume_unwind(p);
        }
    }
}
