//! Tests of `BlockFile` against damage: bit flips in blocks, headers and the translation
//! table (B9), and injected I/O faults: failed fsyncs, torn header writes and failed block
//! writes (B4, B8).

use super::tests::{checkpoint, create, flip, image, reopen, stats, write};
use super::*;
use crate::Error;
use shale_io::Fault;

#[test]
fn flipped_block_bit_is_reported_as_corruption() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t.shale");
    let bf = create(&path);
    let id = bf.allocate_node_id();
    let e = write(&bf, id, &image(id.0, 0, 9000));
    checkpoint(&bf, id, 1);
    drop(bf);
    flip(&path, e.offset + 5000);
    let (bf, _) = reopen(&path);
    let err = bf.read_block(id, Category::UserRead).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("t.shale") && msg.contains("block 1"), "{msg}");
    assert!(msg.contains("checksum mismatch"), "{msg}");
    match err {
        Error::Corruption { file, location, .. } => {
            assert_eq!(file, path);
            assert_eq!(
                location,
                Location::Block {
                    node: 1,
                    offset: e.offset,
                    len: 9000
                }
            );
        }
        other => panic!("not corruption: {other}"),
    }
    assert!(bf.verify().unwrap_err().is_corruption());
    // The range read does not check (the caller checks its partitions).
    assert!(bf
        .read_block_range(id, 4000, 2000, Category::UserRead)
        .is_ok());
}

#[test]
fn flipped_newest_header_falls_back_to_the_older_slot() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t.shale");
    let bf = create(&path);
    let a = bf.allocate_node_id();
    write(&bf, a, &image(a.0, 0, 100));
    checkpoint(&bf, a, 10); // seq 2, slot 0
    let b = bf.allocate_node_id();
    write(&bf, b, &image(b.0, 0, 100));
    checkpoint(&bf, a, 20); // seq 3, slot 1
    drop(bf);
    flip(&path, slot_offset(1) + 30);
    let (bf, st) = reopen(&path);
    assert_eq!((st.seq, st.lsn), (2, 10));
    assert_eq!(
        bf.read_block(a, Category::UserRead).expect("a"),
        image(a.0, 0, 100)
    );
    assert_eq!(bf.extent(b), None);
    match bf.verify().unwrap_err() {
        Error::Corruption { location, .. } => assert_eq!(location, Location::Header { slot: 1 }),
        other => panic!("{other}"),
    }
    // The next checkpoint rewrites slot 1 and the file is whole again.
    checkpoint(&bf, a, 30);
    bf.verify().expect("verify after repair");
    drop(bf);

    flip(&path, slot_offset(0) + 30);
    flip(&path, slot_offset(1) + 30);
    let err = BlockFile::open(&path, true, stats(), None).unwrap_err();
    match &err {
        Error::Corruption { file, location, .. } => {
            assert_eq!(file, &path);
            assert!(matches!(location, Location::Header { .. }));
        }
        other => panic!("{other}"),
    }
    assert!(err.to_string().contains("header slot"), "{err}");
}

#[test]
fn flipped_translation_table_fails_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t.shale");
    let bf = create(&path);
    let a = bf.allocate_node_id();
    write(&bf, a, b"hello");
    checkpoint(&bf, a, 1);
    let btt_offset = bf.state.lock().durable_btt.0;
    drop(bf);
    flip(&path, btt_offset + 9);
    match BlockFile::open(&path, true, stats(), None).unwrap_err() {
        Error::Corruption { location, .. } => {
            assert_eq!(location, Location::TranslationTable { offset: btt_offset })
        }
        other => panic!("{other}"),
    }
}

#[test]
fn failed_sync_poisons_and_keeps_the_durable_checkpoint() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t.shale");
    let bf = create(&path);
    let a = bf.allocate_node_id();
    write(&bf, a, &image(a.0, 0, 5000));
    checkpoint(&bf, a, 1);
    drop(bf);

    let inj = Arc::new(FaultInjector::new(Fault::FailSync { after: 1 }));
    let (bf, _) = BlockFile::open(&path, true, stats(), Some(inj.clone())).expect("open");
    write(&bf, a, &image(a.0, 1, 6000));
    let b = bf.allocate_node_id();
    write(&bf, b, b"new");
    bf.checkpoint_begin();
    assert!(matches!(bf.checkpoint_end(a, 2, b"x"), Err(Error::Io(_))));
    assert!(inj.tripped());
    let err = bf
        .write_block(a, b"more", false, Category::Eviction)
        .unwrap_err();
    assert!(matches!(err, Error::Poisoned(_)), "{err}");
    assert!(matches!(bf.sync(Category::Meta), Err(Error::Poisoned(_))));
    assert!(matches!(
        bf.checkpoint_end(a, 3, b""),
        Err(Error::Poisoned(_))
    ));
    bf.verify().expect("maps stay consistent");
    drop(bf);

    let (bf, st) = reopen(&path);
    assert_eq!((st.seq, st.lsn), (2, 1));
    assert_eq!(
        bf.read_block(a, Category::UserRead).expect("a"),
        image(a.0, 0, 5000)
    );
    assert_eq!(bf.extent(b), None);
    bf.verify().expect("verify");
}

#[test]
fn torn_header_write_falls_back_and_failed_block_write_poisons() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t.shale");
    let bf = create(&path);
    let a = bf.allocate_node_id();
    write(&bf, a, &image(a.0, 0, 100));
    checkpoint(&bf, a, 1); // seq 2
    drop(bf);
    // Writes: block (1), BTT (2), header (3, torn).
    let inj = Arc::new(FaultInjector::new(Fault::TornWrite {
        after: 3,
        keep_bytes: 40,
    }));
    let (bf, _) = BlockFile::open(&path, true, stats(), Some(inj)).expect("open");
    write(&bf, a, &image(a.0, 1, 100));
    bf.checkpoint_begin();
    assert!(bf.checkpoint_end(a, 2, b"").is_err());
    drop(bf);
    let (bf, st) = reopen(&path);
    assert_eq!(st.seq, 2);
    assert_eq!(
        bf.read_block(a, Category::UserRead).expect("a"),
        image(a.0, 0, 100)
    );
    drop(bf);

    let inj = Arc::new(FaultInjector::new(Fault::FailWrite { after: 1 }));
    let (bf, _) = BlockFile::open(&path, true, stats(), Some(inj)).expect("open");
    assert!(matches!(
        bf.write_block(a, b"x", false, Category::Eviction),
        Err(Error::Io(_))
    ));
    assert!(matches!(
        bf.write_block(a, b"y", false, Category::Eviction),
        Err(Error::Poisoned(_))
    ));
    // Reads still work. The maps are consistent, but the torn slot 1 is still torn (only a
    // successful checkpoint rewrites it), which verify reports.
    assert_eq!(
        bf.read_block(a, Category::UserRead).expect("a"),
        image(a.0, 0, 100)
    );
    match bf.verify().unwrap_err() {
        Error::Corruption { location, .. } => assert_eq!(location, Location::Header { slot: 1 }),
        other => panic!("{other}"),
    }
    drop(bf);
    let (bf, _) = reopen(&path);
    checkpoint(&bf, a, 3);
    bf.verify().expect("verify after the next checkpoint");
}
