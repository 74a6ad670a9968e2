//! Stored fixtures of every combination of on-disk format versions the engine reads (issue
//! 28 item 5): node blocks (docs/format-node.md), tree metadata (same document, "Tree
//! metadata"), the log (docs/format-wal.md) and block files (docs/format-blockfile.md).
//! Each fixture under `tests/fixtures/` is an environment directory written once by the
//! last commit on main that wrote those versions, left as a crash leaves it (a checkpoint
//! with buffered messages, version stacks, tombstones and, from node format 3, a live
//! transaction's provisional versions; a log tail after it), with the contents a reader
//! must see in `expected.txt`, written from the writer's own model. Its README.md names the
//! commit and holds the commands that wrote it; `fixtures/writer.rs` is the program (one for all of them).
//!
//! For each fixture, on a copy (the committed files are never opened for writing): the
//! stored versions are the ones the fixture's name promises (so a regenerated fixture
//! cannot quietly hold newer ones); the current code opens it, recovering the log tail and
//! aborting the live transaction; every tree verifies, holds exactly the expected keys and
//! values (by scan and by point reads), keeps the expected entry count, and shows none of
//! the live transaction's writes. Then it writes over every key, flushes, checkpoints and
//! closes: every node is rewritten in the current format, and a reopen reads it all back.
//! Every directory under `tests/fixtures/` must be in `FIXTURES`, so none goes unchecked.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

mod common;

use shale_engine::{Env, TreeHandle, WriteBatch};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Map = BTreeMap<Vec<u8>, Vec<u8>>;

/// The formats a fixture holds, as its name says: node format version, tree metadata
/// version and log format version (block files are version 1 in every fixture).
struct Formats {
    node: u8,
    meta: u8,
    wal: u32,
}

/// The versions the current code writes (`NODE_FORMAT_VERSION` in tree/format.rs,
/// `META_VERSION` in tree/mod.rs, `FORMAT_VERSION` in wal/frame.rs). When one of them is
/// bumped, this changes with it, and the last commit that wrote the old combination writes
/// a new fixture for `FIXTURES` (README.md beside each fixture says how).
const CURRENT: Formats = formats(6, 3, 3);

/// Every fixture: its directory under `tests/fixtures/` and the versions it holds.
const FIXTURES: &[(&str, Formats)] = &[
    ("node2-meta2-wal1", formats(2, 2, 1)),
    ("node2-meta2-wal2", formats(2, 2, 2)),
    ("node3-meta2-wal3", formats(3, 2, 3)),
    ("node4-meta2-wal3", formats(4, 2, 3)),
    ("node5-meta2-wal3", formats(5, 2, 3)),
    ("node5-meta3-wal3", formats(5, 3, 3)),
];

const fn formats(node: u8, meta: u8, wal: u32) -> Formats {
    Formats { node, meta, wal }
}

/// What `expected.txt` says a reader must see.
struct Expected {
    trees: BTreeMap<String, (i64, Map)>,
    /// The live transaction's writes: tree, key, and the value it wrote (`None` for a
    /// delete or an increment).
    uncommitted: Vec<(String, Vec<u8>, Option<Vec<u8>>)>,
}

fn fixture_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// `%XX` back to its byte; every other character is itself.
fn unescape(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(&b[i + 1..i + 3]).expect("hex");
            out.push(u8::from_str_radix(hex, 16).expect("a %XX escape"));
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

fn read_expected(path: &Path) -> Expected {
    let text = std::fs::read_to_string(path).expect("expected.txt");
    let mut e = Expected {
        trees: BTreeMap::new(),
        uncommitted: Vec::new(),
    };
    let mut current: Option<String> = None;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let f: Vec<&str> = line.split(' ').collect();
        match f.as_slice() {
            ["tree", name, count] => {
                let count = count.parse().expect("a count");
                e.trees.insert((*name).to_owned(), (count, Map::new()));
                current = Some((*name).to_owned());
            }
            ["uncommitted", tree, key, value] => {
                let v = (*value != "-" && !value.starts_with('+')).then(|| unescape(value));
                e.uncommitted.push(((*tree).to_owned(), unescape(key), v));
            }
            [key, value] => {
                let tree = current.as_ref().expect("an entry after its tree line");
                let map = &mut e.trees.get_mut(tree).expect("tree").1;
                map.insert(unescape(key), unescape(value));
            }
            _ => panic!("expected.txt: unreadable line {line:?}"),
        }
    }
    for (name, (count, map)) in &e.trees {
        assert_eq!(
            *count,
            map.len() as i64,
            "expected.txt: tree {name}'s count"
        );
    }
    e
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> usize {
    usize::try_from(u64::from_le_bytes(
        b[at..at + 8].try_into().expect("8 bytes"),
    ))
    .expect("fits")
}

/// The versions stored in an environment directory, read from the bytes as the format
/// documents lay them out: node format versions of every block the newer header slot's
/// table names, tree metadata versions, block file versions and log file versions.
#[derive(Debug, Default, PartialEq, Eq)]
struct Stored {
    node: BTreeSet<u8>,
    meta: BTreeSet<u8>,
    block_file: BTreeSet<u32>,
    wal: BTreeSet<u32>,
    nodes: usize,
}

fn stored_versions(dir: &Path) -> Stored {
    let mut s = Stored::default();
    for entry in std::fs::read_dir(dir).expect("read dir") {
        let path = entry.expect("entry").path();
        let name = path
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        if !name.starts_with("tree-") {
            continue;
        }
        let data = std::fs::read(&path).expect("tree file");
        let slot = (0..2)
            .map(|i| &data[i * 4096..(i + 1) * 4096])
            .filter(|h| &h[..8] == b"SHALETRE")
            .max_by_key(|h| u64_at(h, 12))
            .expect("a header slot");
        s.block_file.insert(u32_at(slot, 8));
        let meta_len = u32_at(slot, 64) as usize;
        assert!(meta_len > 0, "{name}: no tree metadata");
        s.meta.insert(slot[68]);
        let btt = u64_at(slot, 36);
        for i in 0..u64_at(&data, btt) {
            let at = btt + 8 + 24 * i;
            let block = &data[u64_at(&data, at + 8)..];
            assert_eq!(&block[..4], b"SHND", "{name}: a node block's magic");
            s.node.insert(block[4]);
            s.nodes += 1;
        }
    }
    for entry in std::fs::read_dir(dir.join("wal")).expect("wal dir") {
        let header = std::fs::read(entry.expect("entry").path()).expect("log file");
        assert_eq!(&header[..8], b"SHALELOG");
        s.wal.insert(u32_at(&header, 8));
    }
    s
}

fn open(dir: &Path) -> Env {
    Env::open(dir, common::tiny_options(4 << 20)).expect("open a stored environment")
}

/// Every tree of `env` is `want` (names, entries by scan and point reads, counts) and
/// verifies.
fn check_trees(env: &Env, want: &BTreeMap<String, (i64, Map)>, what: &str) {
    let names: Vec<String> = want.keys().cloned().collect();
    let mut listed = env.list_trees();
    listed.sort();
    assert_eq!(listed, names, "{what}: the trees");
    for (name, (count, map)) in want {
        let t = env.open_tree(name).expect("open a tree");
        let shape = t
            .verify()
            .unwrap_or_else(|e| panic!("{what}: verify {name}: {e}"));
        assert_eq!(shape.entries, map.len() as u64, "{what}: {name}'s entries");
        assert_eq!(t.count(), *count, "{what}: {name}'s count");
        let got: Map = common::scan_all(&t).into_iter().collect();
        if got != *map {
            let missing: Vec<_> = map.keys().filter(|k| !got.contains_key(*k)).collect();
            let extra: Vec<_> = got.keys().filter(|k| !map.contains_key(*k)).collect();
            let changed: Vec<_> = map
                .iter()
                .filter(|(k, v)| got.get(*k).is_some_and(|g| g != *v))
                .map(|(k, _)| k)
                .collect();
            panic!(
                "{what}: {name} scans wrong: missing {:?}, extra {:?}, changed {:?}",
                missing
                    .iter()
                    .map(|k| String::from_utf8_lossy(k))
                    .collect::<Vec<_>>(),
                extra
                    .iter()
                    .map(|k| String::from_utf8_lossy(k))
                    .collect::<Vec<_>>(),
                changed
                    .iter()
                    .map(|k| String::from_utf8_lossy(k))
                    .collect::<Vec<_>>(),
            );
        }
        for (k, v) in map {
            assert_eq!(
                t.get(k).expect("get").as_ref(),
                Some(v),
                "{what}: {name} get {}",
                String::from_utf8_lossy(k)
            );
        }
    }
}

/// None of the live transaction's writes shows: each of its keys reads as the last
/// commit left it (absent where that is absent).
fn check_uncommitted_absent(env: &Env, e: &Expected, what: &str) {
    assert!(
        !e.uncommitted.is_empty(),
        "{what}: the fixture has a live transaction"
    );
    for (tree, key, wrote) in &e.uncommitted {
        let t = env.open_tree(tree).expect("tree");
        let got = t.get(key).expect("get");
        let k = String::from_utf8_lossy(key);
        assert_eq!(
            got.as_ref(),
            e.trees[tree].1.get(key),
            "{what}: {tree} {k} after the live transaction's write"
        );
        if let Some(w) = wrote {
            assert_ne!(
                got.as_ref(),
                Some(w),
                "{what}: {tree} {k} shows an uncommitted write"
            );
        }
    }
}

/// Writes over every key of every tree (a new value, or a delete for every fifth), adds a
/// few keys, in batches and one transaction, keeping `want` and the counts; then flushes
/// every buffer down, so every node is rewritten.
fn rewrite_everything(env: &Env, want: &mut BTreeMap<String, (i64, Map)>) {
    for (name, (count, map)) in want.iter_mut() {
        let t = env.open_tree(name).expect("tree");
        let keys: Vec<Vec<u8>> = map.keys().cloned().collect();
        for (n, chunk) in keys.chunks(16).enumerate() {
            let mut b = WriteBatch::new();
            let mut delta = 0;
            for (i, k) in chunk.iter().enumerate() {
                if (n * 16 + i) % 5 == 0 {
                    b.delete(&t, k);
                    map.remove(k);
                    delta -= 1;
                } else {
                    let v = format!("rewritten-{name}-{}", n * 16 + i).into_bytes();
                    b.put(&t, k, &v);
                    map.insert(k.clone(), v);
                }
            }
            b.add_count(&t, delta);
            env.write(b).expect("write over stored keys");
        }
        add_in_a_transaction(env, &t, count, map);
        *count = map.len() as i64;
    }
    env.flush_all().expect("flush all");
}

fn add_in_a_transaction(env: &Env, t: &TreeHandle, count: &mut i64, map: &mut Map) {
    let mut txn = env.begin();
    for i in 0..10 {
        let (k, v) = (format!("new{i:02}"), format!("added-{i}"));
        txn.put(t, k.as_bytes(), v.as_bytes()).expect("put");
        if map.insert(k.into_bytes(), v.into_bytes()).is_none() {
            *count += 1;
            txn.add_count(t, 1);
        }
    }
    txn.commit().expect("commit");
}

fn check_fixture(name: &str) {
    let formats = &FIXTURES
        .iter()
        .find(|(n, _)| *n == name)
        .expect("a fixture listed in FIXTURES")
        .1;
    let fixture = fixture_dir(name);
    let expected = read_expected(&fixture.join("expected.txt"));
    let stored = stored_versions(&fixture.join("env"));
    assert_eq!(
        (&stored.node, &stored.meta, &stored.block_file, &stored.wal),
        (
            &BTreeSet::from([formats.node]),
            &BTreeSet::from([formats.meta]),
            &BTreeSet::from([1]),
            &BTreeSet::from([formats.wal]),
        ),
        "{name}: the fixture holds other versions than its name says: {stored:?}"
    );
    assert!(stored.nodes >= 10, "{name}: only {} nodes", stored.nodes);

    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("env");
    copy_dir(&fixture.join("env"), &dir);
    let what = format!("{name}, recovered");
    let env = open(&dir);
    check_trees(&env, &expected.trees, &what);
    check_uncommitted_absent(&env, &expected, &what);

    let mut want = expected.trees.clone();
    rewrite_everything(&env, &mut want);
    check_trees(&env, &want, &format!("{name}, rewritten"));
    env.checkpoint().expect("checkpoint");
    env.close().expect("close");
    let now = stored_versions(&dir);
    assert_eq!(
        (&now.node, &now.meta),
        (
            &BTreeSet::from([CURRENT.node]),
            &BTreeSet::from([CURRENT.meta])
        ),
        "{name}: after a rewrite and a checkpoint every node and tree header is current"
    );
    let env = open(&dir);
    check_trees(&env, &want, &format!("{name}, reopened"));
    env.close().expect("close");
}

#[test]
fn every_fixture_directory_is_listed() {
    let mut dirs: Vec<String> = std::fs::read_dir(fixture_dir(""))
        .expect("tests/fixtures")
        .map(|e| e.expect("entry"))
        .filter(|e| e.file_type().expect("type").is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    dirs.sort();
    let listed: Vec<&str> = FIXTURES.iter().map(|(n, _)| *n).collect();
    assert_eq!(dirs, listed, "tests/fixtures/ against FIXTURES");
}

#[test]
fn node2_meta2_wal1_written_by_e2928ac() {
    check_fixture("node2-meta2-wal1");
}

#[test]
fn node2_meta2_wal2_written_by_8649b02() {
    check_fixture("node2-meta2-wal2");
}

#[test]
fn node3_meta2_wal3_written_by_051a1da() {
    check_fixture("node3-meta2-wal3");
}

#[test]
fn node4_meta2_wal3_written_by_a5816c9() {
    check_fixture("node4-meta2-wal3");
}

#[test]
fn node5_meta2_wal3_written_by_15e8d2d() {
    check_fixture("node5-meta2-wal3");
}

#[test]
fn node5_meta3_wal3_written_by_3d6972f() {
    check_fixture("node5-meta3-wal3");
}
