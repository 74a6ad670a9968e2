//! Tests of `BlockFile` as a whole: reopening, space reuse across checkpoints, crash
//! semantics (B5), checkpoints that run while nodes change (B3), concurrency and a seeded
//! model test; plus the helpers `fault_tests` shares. The format modules test their own
//! encodings.

use super::*;
use crate::Error;
use rand::{Rng, SeedableRng};
use shale_io::PAGE_SIZE;
use std::collections::HashMap;
use std::os::unix::fs::FileExt;

pub(super) const P: u64 = PAGE_SIZE as u64;

pub(super) fn stats() -> Arc<IoStats> {
    Arc::new(IoStats::default())
}

pub(super) fn create(path: &Path) -> BlockFile {
    BlockFile::create(path, b"opts", true, stats(), None).expect("create")
}

pub(super) fn reopen(path: &Path) -> (BlockFile, CheckpointState) {
    BlockFile::open(path, true, stats(), None).expect("open")
}

/// Deterministic bytes for (node, version).
pub(super) fn image(node: u64, version: u64, len: usize) -> Vec<u8> {
    let mut rng =
        shale_testkit::Rng(node.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ version.wrapping_add(1));
    (0..len).map(|_| rng.next() as u8).collect()
}

/// Xors one byte of the file at `offset`, as a bit flip on the device would.
pub(super) fn flip(path: &Path, offset: u64) {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .expect("open for flip");
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, offset).expect("read byte");
    b[0] ^= 0x10;
    f.write_all_at(&b, offset).expect("write byte");
}

pub(super) fn write(bf: &BlockFile, id: NodeId, bytes: &[u8]) -> Extent {
    bf.write_block(id, bytes, false, Category::Eviction)
        .expect("write")
}

pub(super) fn checkpoint(bf: &BlockFile, root: NodeId, lsn: u64) -> u64 {
    let seq = bf.checkpoint_begin();
    bf.checkpoint_end(root, lsn, b"opts").expect("checkpoint");
    seq
}

pub(super) fn assert_blocks(bf: &BlockFile, want: &HashMap<NodeId, Vec<u8>>) {
    for (id, bytes) in want {
        let got = bf.read_block(*id, Category::UserRead).expect("read");
        assert!(got == *bytes, "node {} differs", id.0);
    }
}

/// Writes a new image of every node, `len(node)` bytes long, and records it in `last`.
fn write_round(
    bf: &BlockFile,
    nodes: &[NodeId],
    round: u64,
    mut len: impl FnMut() -> usize,
    last: &mut HashMap<NodeId, Vec<u8>>,
) {
    for &id in nodes {
        let bytes = image(id.0, round, len());
        write(bf, id, &bytes);
        last.insert(id, bytes);
    }
}

/// Whether the filesystem under `dir` punches holes, asked of a scratch file.
fn punches_holes(dir: &Path) -> bool {
    let path = dir.join("probe");
    let f = DataFile::open(&path, OpenMode::CreateNew, true, stats(), None).expect("probe");
    f.write_at(0, &AlignedBuf::zeroed(PAGE_SIZE), Category::Meta)
        .expect("probe write");
    let punched = f.punch_hole(0, P).expect("probe punch");
    drop(f);
    std::fs::remove_file(&path).expect("remove probe");
    punched
}

/// A fresh block file of 64 node ids in a directory whose filesystem punches holes (the
/// directory is returned to keep it alive), or `None` where it cannot (B11 then leaves the
/// pages allocated).
fn punching_file() -> Option<(
    tempfile::TempDir,
    std::path::PathBuf,
    BlockFile,
    Vec<NodeId>,
)> {
    let dir = tempfile::tempdir().expect("tempdir");
    if !punches_holes(dir.path()) {
        return None;
    }
    let path = dir.path().join("t.shale");
    let bf = create(&path);
    let nodes = (0..64).map(|_| bf.allocate_node_id()).collect();
    Some((dir, path, bf, nodes))
}

/// Bytes the filesystem has allocated to the file at `path` (holes excluded).
fn allocated_on_disk(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).expect("stat").blocks() * 512
}

#[test]
fn block_file_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<BlockFile>();
}

#[test]
fn write_checkpoint_reopen_reads_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t.shale");
    let bf = create(&path);
    bf.verify().expect("verify fresh");
    let mut want = HashMap::new();
    for (i, len) in [0usize, 1, 4095, 4096, 4097, 10_000, 70_000]
        .into_iter()
        .enumerate()
    {
        let id = bf.allocate_node_id();
        let e = write(&bf, id, &image(id.0, 0, len));
        assert_eq!(e.offset % P, 0);
        assert_eq!(e.len as usize, len, "node {i}");
        want.insert(id, image(id.0, 0, len));
    }
    bf.verify().expect("verify before checkpoint");
    let root = NodeId(3);
    assert_eq!(checkpoint(&bf, root, 99), 2);
    bf.verify().expect("verify after checkpoint");
    let extents: HashMap<_, _> = want.keys().map(|&id| (id, bf.extent(id))).collect();
    drop(bf);

    let (bf, st) = reopen(&path);
    assert_eq!(
        st,
        CheckpointState {
            seq: 2,
            root,
            lsn: 99,
            meta: b"opts".to_vec()
        }
    );
    for (id, e) in &extents {
        assert_eq!(bf.extent(*id), *e);
    }
    assert_blocks(&bf, &want);
    bf.verify().expect("verify after reopen");
    // Node ids continue after the persisted next id.
    assert_eq!(bf.allocate_node_id(), NodeId(8));
    // Ranges: one pread of the covering pages, bounds checked.
    let r = bf
        .read_block_range(NodeId(6), 4000, 5000, Category::UserRead)
        .expect("range");
    assert_eq!(&r[..], &want[&NodeId(6)][4000..9000]);
    let err = bf
        .read_block_range(NodeId(6), 9000, 1001, Category::UserRead)
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert!(matches!(
        bf.read_block(NodeId(100), Category::UserRead),
        Err(Error::InvalidArgument(_))
    ));
    // Ids that were never allocated are refused.
    assert!(matches!(
        bf.write_block(NodeId(1000), b"x", false, Category::Eviction),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        bf.write_block(NodeId(0), b"x", false, Category::Eviction),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn create_rejects_big_metadata_and_existing_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t.shale");
    let err = BlockFile::create(&path, &[0; 1025], true, stats(), None).unwrap_err();
    assert!(matches!(err, Error::TooLarge { .. }), "{err}");
    drop(create(&path));
    let err = BlockFile::create(&path, b"", true, stats(), None).unwrap_err();
    assert!(matches!(err, Error::Io(_)), "{err}");
}

#[test]
fn rewriting_across_checkpoints_reuses_space() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t.shale");
    let bf = create(&path);
    let nodes: Vec<NodeId> = (0..10).map(|_| bf.allocate_node_id()).collect();
    let max_len = 3 * PAGE_SIZE - 100;
    // At most D, L and the BTTs of D and C are referenced; first fit with equal-or-smaller
    // holes must stay within three times one generation plus the tables.
    let generation = nodes.len() as u64 * alloc_len(max_len as u64);
    let bound = DATA_START + 3 * generation + 4 * P;
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let mut last = HashMap::new();
    for round in 0..50u64 {
        write_round(&bf, &nodes, round, || rng.gen_range(1..max_len), &mut last);
        checkpoint(&bf, nodes[0], round);
        bf.verify().expect("verify");
        assert!(
            bf.file_len() <= bound,
            "round {round}: file of {} bytes exceeds {bound}",
            bf.file_len()
        );
    }
    let on_disk = std::fs::metadata(&path).expect("stat").len();
    assert!(on_disk <= bound, "file on disk {on_disk} > {bound}");
    drop(bf);
    let (bf, st) = reopen(&path);
    assert_eq!(st.seq, 51);
    assert_blocks(&bf, &last);
    bf.verify().expect("verify after reopen");
}

#[test]
fn space_the_old_checkpoint_held_is_punched_back_to_the_filesystem() {
    let Some((_dir, path, bf, nodes)) = punching_file() else {
        return; // B11 leaves the pages allocated on such a filesystem
    };
    let len = 16 * PAGE_SIZE;
    let mut last = HashMap::new();
    for round in 0..3u64 {
        write_round(&bf, &nodes, round, || len, &mut last);
        checkpoint(&bf, nodes[0], round);
        bf.verify().expect("verify");
    }
    // Every round after the first rewrote every node: what the previous checkpoint held is
    // retired (B5) and its blocks punched (B11): two generations.
    let generation = nodes.len() as u64 * alloc_len(len as u64);
    assert!(
        bf.punched_bytes() >= 2 * generation,
        "punched {} of {} retired bytes",
        bf.punched_bytes(),
        2 * generation
    );
    // The file holds one generation (plus tables and headers) on disk though it spans about
    // two; the free space in it is holes.
    let allocated = allocated_on_disk(&path);
    assert!(
        bf.file_len() >= 2 * generation,
        "file spans {}",
        bf.file_len()
    );
    assert!(
        allocated <= generation + 16 * P,
        "{allocated} bytes allocated on disk for one generation of {generation}"
    );
    assert_blocks(&bf, &last);
    drop(bf);
    let (bf, _) = reopen(&path);
    assert_blocks(&bf, &last);
    bf.verify().expect("verify after reopen");
}

#[test]
fn space_freed_between_checkpoints_and_not_reused_is_punched_at_the_next() {
    let Some((_dir, path, bf, nodes)) = punching_file() else {
        return; // B11 leaves the pages allocated on such a filesystem
    };
    let len = 16 * PAGE_SIZE;
    let generation = nodes.len() as u64 * alloc_len(len as u64);
    let mut last = HashMap::new();
    write_round(&bf, &nodes, 0, || len, &mut last);
    checkpoint(&bf, nodes[0], 0);
    // Nodes made, written and freed again between two checkpoints (a split undone by a
    // merge, say): no checkpoint references their extents, so B3 frees them at once, and
    // nothing reuses them before the checkpoint ends.
    let passing: Vec<NodeId> = (0..64).map(|_| bf.allocate_node_id()).collect();
    let mut gone = HashMap::new();
    write_round(&bf, &passing, 1, || len, &mut gone);
    for &id in &passing {
        bf.free_node(id);
    }
    let allocated = || allocated_on_disk(&path);
    assert!(
        allocated() >= 2 * generation,
        "{} bytes allocated before the checkpoint",
        allocated()
    );
    let punched_before = bf.punched_bytes();
    checkpoint(&bf, nodes[0], 1);
    bf.verify().expect("verify");
    assert!(
        bf.punched_bytes() - punched_before >= generation,
        "punched {} bytes at the checkpoint of the {generation} freed",
        bf.punched_bytes() - punched_before
    );
    assert!(
        allocated() <= generation + 16 * P,
        "{} bytes allocated on disk for one generation of {generation}",
        allocated()
    );
    // The punched space is reused: a rewrite of every node fits without growing the file.
    let span = bf.file_len();
    write_round(&bf, &nodes, 2, || len, &mut last);
    checkpoint(&bf, nodes[0], 2);
    assert_eq!(bf.file_len(), span, "the punched space was not reused");
    bf.verify().expect("verify");
    assert_blocks(&bf, &last);
    drop(bf);
    let (bf, _) = reopen(&path);
    assert_blocks(&bf, &last);
    bf.verify().expect("verify after reopen");
}

#[test]
fn crash_leaves_the_durable_checkpoint_intact() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t.shale");
    let bf = create(&path);
    let mut durable = HashMap::new();
    for _ in 0..20 {
        let id = bf.allocate_node_id();
        let bytes = image(id.0, 0, 3000 + id.0 as usize * 500);
        write(&bf, id, &bytes);
        durable.insert(id, bytes);
    }
    checkpoint(&bf, NodeId(1), 5);
    let durable_extents: Vec<_> = durable.keys().map(|&id| bf.extent(id)).collect();
    // Lots of churn without a checkpoint: rewrites, frees, new nodes.
    for v in 1..5u64 {
        for id in (1..=10).map(NodeId) {
            write(&bf, id, &image(id.0, v, 1000 * v as usize));
        }
        for id in (11..=15).map(NodeId) {
            bf.free_node(id);
        }
        let fresh = bf.allocate_node_id();
        write(&bf, fresh, &image(fresh.0, v, 9000));
        bf.verify().expect("verify during churn");
    }
    // A checkpoint that never ends is part of the crash too.
    bf.checkpoint_begin();
    write(&bf, NodeId(16), b"late");
    drop(bf);

    let (bf, st) = reopen(&path);
    assert_eq!((st.seq, st.root, st.lsn), (2, NodeId(1), 5));
    let extents: Vec<_> = durable.keys().map(|&id| bf.extent(id)).collect();
    assert_eq!(extents, durable_extents);
    assert_blocks(&bf, &durable);
    bf.verify().expect("verify after crash");
    // Node ids handed out after the checkpoint may be reused only if never persisted: the
    // header persisted 21, so the next id is 21 again (those nodes never became durable).
    assert_eq!(bf.allocate_node_id(), NodeId(21));
    // The churn's extents are free space now.
    assert!(bf.free_bytes() > 0);
}

#[test]
fn checkpoint_in_progress_captures_exactly_its_images() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t.shale");
    let bf = create(&path);
    let mut base = HashMap::new();
    for _ in 0..6 {
        let id = bf.allocate_node_id();
        base.insert(id, image(id.0, 0, 5000));
        write(&bf, id, &base[&id]);
    }
    checkpoint(&bf, NodeId(1), 1);
    let n = NodeId;
    // Nodes 7 and 8 are written after that checkpoint, so only L and then C reference them.
    for _ in 0..2 {
        let id = bf.allocate_node_id();
        base.insert(id, image(id.0, 0, 5000));
        write(&bf, id, &base[&id]);
    }
    let seq = bf.checkpoint_begin();
    assert_eq!(seq, 3);
    bf.verify().expect("verify at begin");
    let ck = |id: u64| image(id, 1, 6000);
    let lv = |id: u64| image(id, 2, 7000);
    for id in [1, 2] {
        bf.write_block(n(id), &ck(id), true, Category::Checkpoint)
            .expect("ckpt write");
        bf.verify().expect("verify after checkpoint write");
    }
    for id in [3, 4] {
        write(&bf, n(id), &lv(id));
        bf.verify().expect("verify after live write");
    }
    // Node 4 rewritten again, for the checkpoint this time: C and L both take it.
    bf.write_block(n(4), &ck(4), true, Category::Checkpoint)
        .expect("ckpt write");
    bf.free_node(n(5));
    bf.verify().expect("verify after free");
    // C alone keeps the old extents of 7 (rewritten) and 8 (freed): fresh writes of the
    // same size must not land on them (B3).
    write(&bf, n(7), &lv(7));
    bf.free_node(n(8));
    let n9 = bf.allocate_node_id();
    write(&bf, n9, &lv(9));
    let n10 = bf.allocate_node_id();
    bf.write_block(n10, &ck(10), true, Category::Checkpoint)
        .expect("ckpt write");
    for _ in 0..4 {
        let id = bf.allocate_node_id();
        write(&bf, id, &image(id.0, 3, 5000));
        bf.free_node(id);
    }
    bf.verify().expect("verify before end");
    bf.checkpoint_end(n(1), 2, b"opts").expect("end");
    bf.verify().expect("verify after end");

    // Live state: the latest image of everything, node 5 gone.
    let mut live = base.clone();
    live.remove(&n(5));
    live.remove(&n(8));
    for id in [1, 2, 4, 10] {
        live.insert(n(id), ck(id));
    }
    for id in [3, 7, 9] {
        live.insert(n(id), lv(id));
    }
    assert_blocks(&bf, &live);
    assert_eq!(bf.extent(n(5)), None);
    assert_eq!(bf.extent(n(8)), None);
    drop(bf);

    // Durable state: the images of the checkpoint only.
    let (bf, st) = reopen(&path);
    assert_eq!(st.seq, 3);
    let mut durable = base;
    for id in [1, 2, 4, 10] {
        durable.insert(n(id), ck(id));
    }
    assert_eq!(durable.len(), 9);
    assert_blocks(&bf, &durable);
    assert_eq!(bf.extent(n9), None);
    assert!(bf.extent(n(5)).is_some() && bf.extent(n(8)).is_some());
    bf.verify().expect("verify after reopen");
}

#[test]
fn concurrent_readers_and_a_writer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t.shale");
    let bf = Arc::new(create(&path));
    let stable: Vec<NodeId> = (0..8).map(|_| bf.allocate_node_id()).collect();
    for &id in &stable {
        write(&bf, id, &image(id.0, 0, 5000));
    }
    let churn = bf.allocate_node_id();
    std::thread::scope(|s| {
        for t in 0..3 {
            let bf = &bf;
            let stable = &stable;
            s.spawn(move || {
                for i in 0..200 {
                    let id = stable[(i + t) % stable.len()];
                    let got = bf.read_block(id, Category::UserRead).expect("read");
                    assert!(got == image(id.0, 0, 5000));
                }
            });
        }
        s.spawn(|| {
            for v in 0..200u64 {
                write(&bf, churn, &image(churn.0, v, 3000 + v as usize));
                if v % 50 == 0 {
                    checkpoint(&bf, churn, v);
                }
            }
        });
    });
    bf.verify().expect("verify");
}

/// The durable and live states of a file, as plain maps.
struct Model {
    durable: HashMap<NodeId, Vec<u8>>,
    ckpt: Option<HashMap<NodeId, Vec<u8>>>,
    live: HashMap<NodeId, Vec<u8>>,
    root: NodeId,
}

#[test]
fn random_operations_match_a_model() {
    let seed: u64 = std::env::var("SHALE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::thread_rng().gen());
    eprintln!("block model test seed {seed} (rerun with SHALE_SEED={seed})");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t.shale");
    let mut bf = create(&path);
    let mut m = Model {
        durable: HashMap::new(),
        ckpt: None,
        live: HashMap::new(),
        root: NodeId(0),
    };
    let mut version = 0u64;
    for step in 0..400 {
        let ctx = format!("seed {seed}, step {step}");
        let roll = rng.gen_range(0..100);
        let ids: Vec<NodeId> = m.live.keys().copied().collect();
        match roll {
            0..=44 => {
                let id = if ids.is_empty() || rng.gen_bool(0.3) {
                    bf.allocate_node_id()
                } else {
                    ids[rng.gen_range(0..ids.len())]
                };
                version += 1;
                let bytes = image(id.0, version, rng.gen_range(0..3 * PAGE_SIZE));
                let for_ckpt = m.ckpt.is_some() && rng.gen_bool(0.5);
                let cat = Category::Eviction;
                bf.write_block(id, &bytes, for_ckpt, cat).expect(&ctx);
                if for_ckpt {
                    m.ckpt.as_mut().map(|c| c.insert(id, bytes.clone()));
                }
                m.live.insert(id, bytes);
            }
            45..=59 => {
                if let Some(&id) = ids.get(rng.gen_range(0..ids.len().max(1))) {
                    bf.free_node(id);
                    m.live.remove(&id);
                }
            }
            60..=74 if m.ckpt.is_none() => {
                bf.checkpoint_begin();
                m.ckpt = Some(m.live.clone());
            }
            60..=84 => {
                if m.ckpt.is_none() {
                    bf.checkpoint_begin();
                    m.ckpt = Some(m.live.clone());
                }
                let c = m.ckpt.take().expect("running");
                let root = c.keys().next().copied().unwrap_or(NodeId(0));
                bf.checkpoint_end(root, step, &step.to_le_bytes())
                    .expect(&ctx);
                m.durable = c;
                m.root = root;
            }
            _ => {
                // Clean reopen or crash: either way the durable state is what remains.
                drop(bf);
                let (f, st) = reopen(&path);
                bf = f;
                assert_eq!(st.root, m.root, "{ctx}");
                m.live = m.durable.clone();
                m.ckpt = None;
                assert_blocks(&bf, &m.durable);
            }
        }
        bf.verify().unwrap_or_else(|e| panic!("{ctx}: {e}"));
        if step % 25 == 0 {
            assert_blocks(&bf, &m.live);
        }
        for (id, bytes) in &m.live {
            let e = bf
                .extent(*id)
                .unwrap_or_else(|| panic!("{ctx}: node {id:?}"));
            assert_eq!(e.len as usize, bytes.len(), "{ctx}");
        }
        for id in bf.state.lock().live.keys() {
            assert!(m.live.contains_key(id), "{ctx}: extra node {id:?}");
        }
    }
    assert_blocks(&bf, &m.live);
}
