//! Tests of the log as a whole, on real files: append/commit/replay across files, file
//! removal, torn tails and reopening, corruption reports, group commit, injected faults and
//! the byte counters. Unit tests of the formats live beside them in `frame.rs`/`record.rs`.

use super::*;
use crate::Location;
use shale_io::Fault;
use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;

const SMALL_FILES: u64 = 16 << 10;

fn opts(file_bytes_max: u64) -> WalOptions {
    WalOptions {
        fsync: FsyncPolicy::EveryCommit,
        file_bytes_max,
        direct_io: true,
    }
}

fn stats() -> Arc<IoStats> {
    Arc::new(IoStats::default())
}

/// A Put whose size varies with `i` (some span pages).
fn put(txn: u64, i: u64) -> LogRecord {
    LogRecord::Put {
        txn: TxnId(txn),
        tree: i % 3,
        key: format!("key-{txn}-{i}").into_bytes(),
        value: vec![(i % 251) as u8; (i as usize * 37) % 700],
    }
}

fn replay_all(dir: &Path, from: Lsn) -> Result<(Vec<(Lsn, LogRecord)>, Lsn)> {
    let mut out = Vec::new();
    let end = replay(dir, from, stats(), |lsn, rec| {
        out.push((lsn, rec));
        Ok(())
    })?;
    Ok((out, end))
}

/// Appends `groups` groups of 1–3 puts and a commit, committing each; returns every record
/// with the LSN it must replay at.
fn write_groups(wal: &Wal, groups: u64, txn_base: u64) -> Vec<(Lsn, LogRecord)> {
    let mut expected = Vec::new();
    for g in 0..groups {
        let txn = txn_base + g;
        let mut recs: Vec<LogRecord> = (0..1 + g % 3).map(|i| put(txn, g * 3 + i)).collect();
        recs.push(LogRecord::Commit { txn: TxnId(txn) });
        let mut at = wal.end_lsn();
        let end = wal.append(&recs).expect("append");
        for r in recs {
            let next = at.advance(frame::frame_len(r.encoded_len()) as u64);
            expected.push((at, r));
            at = next;
        }
        assert_eq!(at, end, "append returns the LSN past its last record");
        wal.commit(end).expect("commit");
        assert!(wal.durable_lsn() >= end);
    }
    expected
}

fn log_files(dir: &Path) -> Vec<(Lsn, PathBuf)> {
    list_log_files(dir).expect("list")
}

fn flip_byte(path: &Path, offset: u64) {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .expect("open");
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, offset).expect("read byte");
    f.write_all_at(&[b[0] ^ 0x5a], offset).expect("write byte");
}

#[test]
fn wal_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Wal>();
}

#[test]
fn empty_or_absent_directory_replays_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (recs, end) = replay_all(&dir.path().join("absent"), Lsn(77)).expect("replay");
    assert!(recs.is_empty());
    assert_eq!(end, Lsn(77));
    let (recs, end) = replay_all(dir.path(), Lsn(5)).expect("replay");
    assert!(recs.is_empty());
    assert_eq!(end, Lsn(5));
}

#[test]
fn append_commit_close_then_replay_across_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let wal = Wal::open(dir.path(), Lsn(0), opts(SMALL_FILES), stats(), None).expect("open");
    let expected = write_groups(&wal, 120, 1);
    let end = wal.end_lsn();
    wal.close().expect("close");
    let files = log_files(dir.path());
    assert!(files.len() >= 4, "only {} files", files.len());
    for pair in files.windows(2) {
        let size = std::fs::metadata(&pair[0].1).expect("stat").len();
        assert!(
            size > SMALL_FILES,
            "a full file rolls over only past its size"
        );
    }
    let (got, replay_end) = replay_all(dir.path(), Lsn(0)).expect("replay");
    assert_eq!(replay_end, end);
    assert_eq!(got.len(), expected.len());
    assert_eq!(got, expected);

    // Replay from the middle starts at that record, whatever file it is in.
    let (mid, _) = expected[expected.len() / 2].clone();
    let (tail, _) = replay_all(dir.path(), mid).expect("replay from mid");
    assert_eq!(tail, expected[expected.len() / 2..].to_vec());

    // Reopening a cleanly closed log appends after it.
    let wal = Wal::open(dir.path(), end, opts(SMALL_FILES), stats(), None).expect("reopen");
    let more = write_groups(&wal, 10, 1000);
    wal.close().expect("close");
    let (got, _) = replay_all(dir.path(), Lsn(0)).expect("replay");
    assert_eq!(got, [expected, more].concat());
}

#[test]
fn records_on_both_sides_of_the_combine_threshold_replay() {
    // Frames under `COMBINE_FROM_BYTES` are hashed under the append lock, longer ones carry
    // a CRC computed before it and combined; both must replay.
    let dir = tempfile::tempdir().expect("tempdir");
    let wal = Wal::open(dir.path(), Lsn(0), opts(SMALL_FILES), stats(), None).expect("open");
    let records: Vec<LogRecord> = [10, frame::COMBINE_FROM_BYTES + 1, 300]
        .iter()
        .enumerate()
        .map(|(i, &len)| LogRecord::Put {
            txn: TxnId(1),
            tree: 0,
            key: vec![i as u8],
            value: vec![(i * 7) as u8; len],
        })
        .chain([LogRecord::Commit { txn: TxnId(1) }])
        .collect();
    let end = wal.append(&records).expect("append");
    wal.commit(end).expect("commit");
    wal.close().expect("close");
    let (got, replay_end) = replay_all(dir.path(), Lsn(0)).expect("replay");
    assert_eq!(replay_end, end);
    assert_eq!(got.into_iter().map(|(_, r)| r).collect::<Vec<_>>(), records);
}

#[test]
fn remove_before_deletes_only_fully_covered_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let wal = Wal::open(dir.path(), Lsn(0), opts(SMALL_FILES), stats(), None).expect("open");
    let expected = write_groups(&wal, 120, 1);
    let before = log_files(dir.path());
    assert!(before.len() >= 4);
    // An LSN in the middle of the third file: only the first two are fully below it.
    let cut = Lsn((before[2].0 .0 + before[3].0 .0) / 2);
    assert_eq!(wal.remove_before(cut).expect("remove"), 2);
    let after = log_files(dir.path());
    assert_eq!(after, before[2..].to_vec());
    assert_eq!(wal.remove_before(cut).expect("again"), 0);
    // The file being written is never removed, even below the end.
    assert_eq!(
        wal.remove_before(wal.end_lsn()).expect("all"),
        after.len() - 1
    );
    assert_eq!(log_files(dir.path()).len(), 1);
    let last_first = log_files(dir.path())[0].0;
    wal.close().expect("close");

    let (got, _) = replay_all(dir.path(), last_first).expect("replay");
    let want: Vec<_> = expected
        .into_iter()
        .filter(|(l, _)| *l >= last_first)
        .collect();
    assert_eq!(got, want);
    // Asking for records older than the oldest file is missing log, not an empty answer.
    let err = replay_all(dir.path(), Lsn(0)).unwrap_err();
    assert!(err.is_corruption(), "{err}");
}

/// Writes a log, damages its last frame with `damage(path, frame_offset, frame_len)`, and
/// checks that replay stops before it, that reopening cuts it, and that new records follow.
fn torn_tail_case(damage: impl FnOnce(&Path, u64, u64)) {
    let dir = tempfile::tempdir().expect("tempdir");
    let wal = Wal::open(dir.path(), Lsn(0), opts(SMALL_FILES), stats(), None).expect("open");
    let mut expected = write_groups(&wal, 40, 1);
    wal.close().expect("close");
    let (last_lsn, last_rec) = expected.pop().expect("records");
    let (first, path) = log_files(dir.path()).pop().expect("a file");
    let offset = FILE_HEADER_BYTES + (last_lsn.0 - first.0);
    damage(
        &path,
        offset,
        frame::frame_len(last_rec.encoded_len()) as u64,
    );

    let (got, end) = replay_all(dir.path(), Lsn(0)).expect("replay of a torn tail");
    assert_eq!(end, last_lsn);
    assert_eq!(got, expected);

    let wal = Wal::open(dir.path(), end, opts(SMALL_FILES), stats(), None).expect("reopen");
    let on_disk = std::fs::read(&path).expect("read");
    assert_eq!(on_disk.len() as u64, offset.div_ceil(4096) * 4096);
    assert!(
        on_disk[offset as usize..].iter().all(|&b| b == 0),
        "tail cut"
    );
    let more = write_groups(&wal, 30, 500);
    wal.close().expect("close");
    let (got, _) = replay_all(dir.path(), Lsn(0)).expect("replay");
    assert_eq!(got, [expected, more].concat());
}

#[test]
fn torn_tail_with_a_flipped_byte_is_cut() {
    torn_tail_case(|path, offset, len| flip_byte(path, offset + len - 1));
}

#[test]
fn torn_tail_cut_mid_frame_is_cut() {
    torn_tail_case(|path, offset, len| {
        let f = OpenOptions::new().write(true).open(path).expect("open");
        f.set_len(offset + len / 2).expect("truncate");
    });
}

#[test]
fn torn_tail_with_a_cut_header_is_cut() {
    torn_tail_case(|path, offset, _| {
        let f = OpenOptions::new().write(true).open(path).expect("open");
        f.set_len(offset + 5).expect("truncate");
    });
}

#[test]
fn corruption_in_an_earlier_file_is_reported() {
    let dir = tempfile::tempdir().expect("tempdir");
    let wal = Wal::open(dir.path(), Lsn(0), opts(SMALL_FILES), stats(), None).expect("open");
    let expected = write_groups(&wal, 60, 1);
    wal.close().expect("close");
    let files = log_files(dir.path());
    assert!(files.len() >= 2);
    // Damage the second record of the first file.
    let (lsn, _) = &expected[1];
    let offset = FILE_HEADER_BYTES + lsn.0;
    flip_byte(&files[0].1, offset + 20);
    match replay_all(dir.path(), Lsn(0)) {
        Err(Error::Corruption {
            file,
            location,
            reason,
        }) => {
            assert_eq!(file, files[0].1);
            assert_eq!(location, Location::LogRecord { offset });
            assert!(reason.contains("checksum"), "{reason}");
        }
        other => panic!("expected corruption, got {other:?}"),
    }
}

#[test]
fn corrupt_file_header_is_reported() {
    let dir = tempfile::tempdir().expect("tempdir");
    let wal = Wal::open(dir.path(), Lsn(0), opts(SMALL_FILES), stats(), None).expect("open");
    write_groups(&wal, 5, 1);
    wal.close().expect("close");
    let (_, path) = log_files(dir.path()).pop().expect("file");
    flip_byte(&path, 3);
    match replay_all(dir.path(), Lsn(0)) {
        Err(Error::Corruption { file, location, .. }) => {
            assert_eq!(file, path);
            assert_eq!(location, Location::LogRecord { offset: 0 });
        }
        other => panic!("expected corruption, got {other:?}"),
    }
}

#[test]
fn group_commit_shares_fsyncs() {
    const THREADS: u64 = 8;
    const COMMITS: u64 = 200;
    let dir = tempfile::tempdir().expect("tempdir");
    let stats = stats();
    let wal =
        Arc::new(Wal::open(dir.path(), Lsn(0), opts(64 << 20), stats.clone(), None).expect("open"));
    let before = stats.snapshot();
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let wal = wal.clone();
            std::thread::spawn(move || {
                for i in 0..COMMITS {
                    let end = wal.append(&[put(t, i)]).expect("append");
                    wal.commit(end).expect("commit");
                    assert!(wal.durable_lsn() >= end);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("thread");
    }
    let fsyncs = stats.snapshot().since(&before).log.fsyncs;
    let commits = THREADS * COMMITS;
    println!(
        "{fsyncs} fsyncs for {commits} commits: {:.3} per commit",
        fsyncs as f64 / commits as f64
    );
    assert!(fsyncs <= commits, "{fsyncs} fsyncs for {commits} commits");
    Arc::try_unwrap(wal)
        .expect("sole owner")
        .close()
        .expect("close");

    let (got, _) = replay_all(dir.path(), Lsn(0)).expect("replay");
    assert_eq!(got.len() as u64, commits);
    let mut next = vec![0u64; THREADS as usize];
    for (_, rec) in got {
        let LogRecord::Put { txn, .. } = &rec else {
            panic!("unexpected {rec:?}")
        };
        let t = txn.0;
        assert_eq!(
            rec,
            put(t, next[t as usize]),
            "each thread's records in its order"
        );
        next[t as usize] += 1;
    }
    assert!(next.iter().all(|&n| n == COMMITS));
}

#[test]
fn failed_fsync_poisons_the_log() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The first fsync is the new file's header at open (W5): the fourth is the third commit's.
    let faults = Arc::new(FaultInjector::new(Fault::FailSync { after: 4 }));
    let wal =
        Wal::open(dir.path(), Lsn(0), opts(SMALL_FILES), stats(), Some(faults)).expect("open");
    let mut acknowledged = Vec::new();
    for i in 0..2 {
        let end = wal.append(&[put(1, i)]).expect("append");
        wal.commit(end).expect("commit");
        acknowledged.push(put(1, i));
    }
    let durable = wal.durable_lsn();
    let end = wal.append(&[put(1, 2)]).expect("append before the failure");
    let err = wal.commit(end).unwrap_err();
    assert!(matches!(err, Error::Io(_)), "{err}");
    assert_eq!(
        wal.durable_lsn(),
        durable,
        "a failed fsync never makes anything durable"
    );
    assert!(matches!(wal.commit(end), Err(Error::Poisoned(_))));
    assert!(matches!(wal.append(&[put(1, 3)]), Err(Error::Poisoned(_))));
    assert!(matches!(wal.close(), Err(Error::Poisoned(_))));

    let (got, end) = replay_all(dir.path(), Lsn(0)).expect("replay");
    let got: Vec<LogRecord> = got.into_iter().map(|(_, r)| r).collect();
    assert!(
        got.starts_with(&acknowledged),
        "every acknowledged commit replays"
    );
    assert!(got.len() <= 3, "nothing beyond the failed commit: {got:?}");
    let wal = Wal::open(dir.path(), end, opts(SMALL_FILES), stats(), None).expect("reopen");
    let e = wal.append(&[put(2, 0)]).expect("append after reopen");
    wal.commit(e).expect("commit after reopen");
    wal.close().expect("close");
    let (again, _) = replay_all(dir.path(), Lsn(0)).expect("replay");
    assert_eq!(again.last().map(|(_, r)| r.clone()), Some(put(2, 0)));
}

#[test]
fn written_bytes_are_whole_pages_as_issued() {
    let dir = tempfile::tempdir().expect("tempdir");
    let stats = stats();
    let wal = Wal::open(dir.path(), Lsn(0), opts(SMALL_FILES), stats.clone(), None).expect("open");
    // Model of the writer: one page-rounded write per commit from the start of its partial
    // page, and one header page per file.
    let page = 4096u64;
    let (mut pos, mut bytes, mut calls) = (FILE_HEADER_BYTES, page, 1u64);
    for g in 0..80u64 {
        let recs = vec![put(g, g), LogRecord::Commit { txn: TxnId(g) }];
        let group: u64 = recs
            .iter()
            .map(|r| frame::frame_len(r.encoded_len()) as u64)
            .sum();
        if pos > SMALL_FILES {
            (pos, bytes, calls) = (FILE_HEADER_BYTES, bytes + page, calls + 1);
        }
        bytes += (pos % page + group).div_ceil(page) * page;
        calls += 1;
        pos += group;
        let end = wal.append(&recs).expect("append");
        wal.commit(end).expect("commit");
    }
    let end = wal.end_lsn();
    wal.close().expect("close");
    let log = stats.snapshot().log;
    assert_eq!(log.write_bytes, bytes);
    assert_eq!(log.write_calls, calls);
    assert_eq!(log.write_bytes % page, 0);
    assert!(
        log.write_bytes >= end.0,
        "at least the valid log was written"
    );
}

#[test]
fn every_millis_syncs_in_the_background() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = WalOptions {
        fsync: FsyncPolicy::EveryMillis(5),
        ..opts(SMALL_FILES)
    };
    let wal = Wal::open(dir.path(), Lsn(0), opts, stats(), None).expect("open");
    let end = wal.append(&[put(1, 1)]).expect("append");
    wal.commit(end).expect("commit returns at once");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while wal.durable_lsn() < end {
        assert!(std::time::Instant::now() < deadline, "syncer never ran");
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    let end = wal.append(&[put(1, 2)]).expect("append");
    wal.close().expect("close syncs the rest");
    let (got, replay_end) = replay_all(dir.path(), Lsn(0)).expect("replay");
    assert_eq!(replay_end, end);
    assert_eq!(got.len(), 2);
}

#[test]
fn every_millis_syncs_early_once_a_megabyte_is_pending() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = WalOptions {
        fsync: FsyncPolicy::EveryMillis(60_000),
        ..opts(64 << 20)
    };
    let wal = Wal::open(dir.path(), Lsn(0), opts, stats(), None).expect("open");
    let started = std::time::Instant::now();
    let small = wal.append(&[put(1, 1)]).expect("append");
    wal.commit(small).expect("commit returns at once");
    let value = vec![7u8; 64 << 10];
    let mut end = small;
    for i in 0..20u64 {
        let rec = LogRecord::Put {
            txn: TxnId(2),
            tree: 1,
            key: i.to_le_bytes().to_vec(),
            value: value.clone(),
        };
        end = wal.append(&[rec]).expect("append");
        wal.commit(end).expect("commit returns at once");
    }
    // 1.25 MB pending: the syncer runs now, not at the end of its 60 s period.
    while wal.durable_lsn() < Lsn(1 << 20) {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "nothing synced early: durable {:?} of {end:?}",
            wal.durable_lsn()
        );
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    wal.close().expect("close");
}

#[test]
fn a_record_larger_than_a_file_gets_a_file_of_its_own() {
    let dir = tempfile::tempdir().expect("tempdir");
    let wal = Wal::open(dir.path(), Lsn(0), opts(SMALL_FILES), stats(), None).expect("open");
    let big = LogRecord::Put {
        txn: TxnId(1),
        tree: 1,
        key: b"big".to_vec(),
        value: (0..40_000u32).map(|i| i as u8).collect(),
    };
    let mut all = Vec::new();
    for i in 0..3 {
        let recs = vec![big.clone(), put(9, i)];
        let end = wal.append(&recs).expect("append");
        wal.commit(end).expect("commit");
        all.extend(recs);
    }
    wal.close().expect("close");
    assert_eq!(log_files(dir.path()).len(), 3);
    let (got, _) = replay_all(dir.path(), Lsn(0)).expect("replay");
    assert_eq!(got.into_iter().map(|(_, r)| r).collect::<Vec<_>>(), all);
}

#[test]
fn torn_write_keeps_every_acknowledged_record() {
    for keep_bytes in [0, 30, 700, 4096 + 100] {
        let dir = tempfile::tempdir().expect("tempdir");
        // Write 1 is the header at open; write 4 is the third commit's, which rewrites the
        // partial page holding the two acknowledged records (W4) and tears.
        let faults = Arc::new(FaultInjector::new(Fault::TornWrite {
            after: 4,
            keep_bytes,
        }));
        let wal =
            Wal::open(dir.path(), Lsn(0), opts(SMALL_FILES), stats(), Some(faults)).expect("open");
        let mut acknowledged = Vec::new();
        for i in 0..2 {
            let end = wal.append(&[put(3, i)]).expect("append");
            wal.commit(end).expect("commit");
            acknowledged.push(put(3, i));
        }
        let end = wal.append(&[put(3, 2), put(3, 20)]).expect("append");
        assert!(wal.commit(end).is_err(), "keep {keep_bytes}");
        drop(wal);
        let (got, end) = replay_all(dir.path(), Lsn(0)).expect("replay");
        let got: Vec<LogRecord> = got.into_iter().map(|(_, r)| r).collect();
        assert!(got.starts_with(&acknowledged), "keep {keep_bytes}: {got:?}");
        let wal = Wal::open(dir.path(), end, opts(SMALL_FILES), stats(), None).expect("reopen");
        let e = wal.append(&[put(4, 0)]).expect("append");
        wal.commit(e).expect("commit");
        wal.close().expect("close");
        let (again, _) = replay_all(dir.path(), Lsn(0)).expect("replay");
        let again: Vec<LogRecord> = again.into_iter().map(|(_, r)| r).collect();
        assert_eq!(again, [got, vec![put(4, 0)]].concat(), "keep {keep_bytes}");
    }
}
