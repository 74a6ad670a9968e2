//! Group commit: the in-memory tail of the log (`State`, under one mutex), the leader protocol
//! that turns many waiting commits into one write and one fdatasync (W1, W8), poisoning on any
//! I/O error (W6), and `LogWriter`, the leader's view of the current file: its partial last
//! page, page-aligned rewrites (W4) and the creation of new files at batch boundaries (W3, W5).

use super::frame::{self, Lsn, FILE_HEADER_BYTES, FRAME_HEADER_BYTES, MAX_PAYLOAD_BYTES};
use super::record::LogRecord;
use crate::{Error, Result};
use parking_lot::{Condvar, Mutex, MutexGuard};
use shale_io::{round_down_to_page, AlignedBuf, Category, DataFile, FaultInjector, IoStats};
use shale_io::{OpenMode, PAGE_SIZE};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// What appenders and committers share, under `Shared::state`.
#[derive(Debug)]
pub(crate) struct State {
    /// Sealed frames not yet handed to a leader; they start at `pending_start`.
    pub pending: Vec<u8>,
    pub pending_start: Lsn,
    /// Next LSN to assign: `pending_start + pending.len()`.
    pub end: Lsn,
    /// Everything below this is durable (W1).
    pub durable: Lsn,
    /// A leader is writing and syncing a batch without the lock (W8).
    pub flushing: bool,
    /// Set by the first I/O error; never cleared (W6).
    pub poisoned: Option<String>,
}

/// Everything a `Wal` and its background syncer share.
#[derive(Debug)]
pub(crate) struct Shared {
    pub state: Mutex<State>,
    /// Signalled whenever a leader finishes (durable_lsn moved or the log was poisoned).
    pub flushed: Condvar,
    /// The current file; locked only by the leader of the moment and by `Wal::open`.
    pub writer: Mutex<LogWriter>,
    /// First LSNs of the files on disk, oldest first; the last one is being written.
    pub files: Mutex<Vec<Lsn>>,
    /// Set to stop the background syncer.
    pub stop: Mutex<bool>,
    /// Wakes the background syncer: to stop, or early because `pending` grew large.
    pub stop_signal: Condvar,
    /// The next batch starts a new file whatever the current one's size (`Wal::rotate`).
    pub rotate: AtomicBool,
    /// `State::durable`, readable without the lock (`Wal::durable_watch`).
    pub durable_mirror: Arc<AtomicU64>,
}

/// Pending bytes past which an append wakes the `EveryMillis` syncer before its period
/// ends: a fast writer would otherwise hold its period's worth of log twice over (the
/// pending frames and the leader's aligned copy; 3.6 MB each at 300k puts/s and 100 ms).
/// Syncing earlier is always allowed; the policy bounds only how late.
const EARLY_SYNC_BYTES: usize = 1 << 20;

impl Shared {
    pub fn new(writer: LogWriter, files: Vec<Lsn>) -> Shared {
        let end = writer.written;
        Shared {
            state: Mutex::new(State {
                pending: Vec::new(),
                pending_start: end,
                end,
                durable: end,
                flushing: false,
                poisoned: None,
            }),
            flushed: Condvar::new(),
            writer: Mutex::new(writer),
            files: Mutex::new(files),
            stop: Mutex::new(false),
            rotate: AtomicBool::new(false),
            durable_mirror: Arc::new(AtomicU64::new(end.0)),
            stop_signal: Condvar::new(),
        }
    }

    /// Encodes and frames `records` as one contiguous group (W3); returns the LSN after it.
    pub fn append(&self, records: &[LogRecord]) -> Result<Lsn> {
        // Encode payloads (and checksum long ones) before taking the lock; only the LSNs and
        // frame CRCs are filled in under it (`frame::COMBINE_FROM_BYTES`).
        let mut group = Vec::new();
        let mut frames = Vec::with_capacity(records.len());
        for record in records {
            let at = group.len();
            group.resize(at + FRAME_HEADER_BYTES, 0);
            record.encode(&mut group);
            let payload = &group[at + FRAME_HEADER_BYTES..];
            if payload.len() > MAX_PAYLOAD_BYTES {
                return Err(Error::TooLarge {
                    what: "log record",
                    len: payload.len(),
                    max: MAX_PAYLOAD_BYTES,
                });
            }
            let crc = (payload.len() >= frame::COMBINE_FROM_BYTES).then(|| crc32c::crc32c(payload));
            frames.push((at, group.len(), crc));
        }
        let mut st = self.state.lock();
        check_poisoned(&st)?;
        let base = st.end;
        for (at, end, crc) in frames {
            frame::seal_frame(&mut group[at..end], base.advance(at as u64), crc);
        }
        let before = st.pending.len();
        if st.pending.is_empty() {
            st.pending = group;
        } else {
            st.pending.extend_from_slice(&group);
        }
        st.end = st.pending_start.advance(st.pending.len() as u64);
        if before < EARLY_SYNC_BYTES && st.pending.len() >= EARLY_SYNC_BYTES {
            self.stop_signal.notify_all();
        }
        Ok(st.end)
    }

    /// Returns once everything below `target` is durable, leading a flush if nobody else is
    /// (group commit, W8). The leader's own I/O error is returned as is; everyone else then
    /// sees `Poisoned` (W6).
    pub fn sync_to(&self, target: Lsn) -> Result<()> {
        let mut st = self.state.lock();
        if target > st.end {
            return Err(Error::InvalidArgument(format!(
                "commit of LSN {target} beyond the end of the log {}",
                st.end
            )));
        }
        loop {
            check_poisoned(&st)?;
            if st.durable >= target {
                return Ok(());
            }
            if st.flushing {
                self.flushed.wait(&mut st);
                continue;
            }
            // Lead: take every pending frame, including those of commits that arrived while
            // the previous leader was syncing, and make them durable with one fdatasync.
            st.flushing = true;
            let batch = std::mem::take(&mut st.pending);
            let start = st.pending_start;
            st.pending_start = st.end;
            let result = MutexGuard::unlocked(&mut st, || {
                self.writer
                    .lock()
                    .write_batch(start, &batch, &self.files, &self.rotate)
            });
            st.flushing = false;
            match result {
                // W1: durable moves only after the fdatasync covering the batch returned.
                Ok(written) => {
                    st.durable = written;
                    self.durable_mirror.store(written.0, Ordering::Release);
                }
                Err(e) => {
                    st.poisoned = Some(e.to_string());
                    self.flushed.notify_all();
                    return Err(e);
                }
            }
            self.flushed.notify_all();
        }
    }

    /// Background syncer of `FsyncPolicy::EveryMillis`: syncs everything appended every
    /// `millis` ms, or at once when `EARLY_SYNC_BYTES` are pending, until told to stop or
    /// the log is poisoned.
    pub fn run_syncer(&self, millis: u64) {
        let period = std::time::Duration::from_millis(millis.max(1));
        loop {
            // Appends wake the syncer when they cross the threshold; one that crossed it
            // while the syncer was busy syncing is caught here instead of waiting a period.
            let large = self.state.lock().pending.len() >= EARLY_SYNC_BYTES;
            {
                let mut stop = self.stop.lock();
                if !*stop && !large {
                    self.stop_signal.wait_for(&mut stop, period);
                }
                if *stop {
                    return;
                }
            }
            let end = self.state.lock().end;
            if let Err(e) = self.sync_to(end) {
                tracing::error!(error = %e, "background log sync failed; the log is poisoned");
                return;
            }
        }
    }
}

fn check_poisoned(st: &State) -> Result<()> {
    match &st.poisoned {
        Some(reason) => Err(Error::Poisoned(format!("write-ahead log: {reason}"))),
        None => Ok(()),
    }
}

/// The leader's view of the file being appended to.
#[derive(Debug)]
pub(crate) struct LogWriter {
    pub dir: PathBuf,
    pub file: DataFile,
    /// LSN of the first record of `file`.
    pub first: Lsn,
    /// End of the bytes written and synced to `file`.
    pub written: Lsn,
    /// The bytes of the last, partially filled page: file bytes `[round_down(pos), pos)`.
    pub tail: Vec<u8>,
    pub file_bytes_max: u64,
    pub direct_io: bool,
    pub stats: Arc<IoStats>,
    pub faults: Option<Arc<FaultInjector>>,
    /// A failed write could not be cut back (W11): the file may hold frames past `written`.
    pub cut_failed: bool,
}

impl LogWriter {
    /// File offset of LSN `written`.
    fn pos(&self) -> u64 {
        FILE_HEADER_BYTES + (self.written.0 - self.first.0)
    }

    /// Writes `batch` (sealed frames starting at LSN `start`) and fdatasyncs it; returns the
    /// new end. A new file is started first if the current one is over its size (W3, W5).
    pub fn write_batch(
        &mut self,
        start: Lsn,
        batch: &[u8],
        files: &Mutex<Vec<Lsn>>,
        rotate: &AtomicBool,
    ) -> Result<Lsn> {
        assert_eq!(
            start, self.written,
            "batches are contiguous in the stream (W2)"
        );
        if batch.is_empty() {
            return Ok(self.written);
        }
        let full = self.pos() > self.file_bytes_max || rotate.swap(false, Ordering::SeqCst);
        if full && self.pos() > FILE_HEADER_BYTES {
            self.start_new_file(files)?;
        }
        // W4: rewrite the partial last page (its old bytes unchanged) followed by the batch.
        let page_off = round_down_to_page(self.pos());
        let mut buf = AlignedBuf::zeroed(self.tail.len() + batch.len());
        buf[..self.tail.len()].copy_from_slice(&self.tail);
        buf[self.tail.len()..].copy_from_slice(batch);
        let written = self
            .file
            .write_at(page_off, &buf, Category::Log)
            .and_then(|()| self.file.sync(Category::Log));
        if let Err(e) = written {
            self.cut_back();
            return Err(e.into());
        }
        self.written = self.written.advance(batch.len() as u64);
        let keep = buf.len() % PAGE_SIZE;
        self.tail = buf[buf.len() - keep..].to_vec();
        Ok(self.written)
    }

    /// W11: after a failed write or sync, cuts the file back to the durable end, so that no
    /// frame of a batch that was never acknowledged (a short write may have left whole
    /// frames of it, ENOSPC after a few pages) is replayed by a later recovery, nor read as
    /// damage in the middle of the log (W9). Cutting frees space rather than taking it. If
    /// the cut fails too, `cut_failed` is set: only a restart may then recover (its
    /// replay stops at the first torn frame), never an in-process reopen.
    fn cut_back(&mut self) {
        match super::cut_after(&self.file, self.pos()) {
            Ok(tail) => self.tail = tail,
            Err(e) => {
                tracing::error!(error = %e, "could not cut the log back to its durable end");
                self.cut_failed = true;
            }
        }
    }

    /// Switches to a new file starting at `written` (every byte of the current file is
    /// already durable: each batch is synced before the next starts).
    fn start_new_file(&mut self, files: &Mutex<Vec<Lsn>>) -> Result<()> {
        let first = self.written;
        self.file = create_log_file(&self.dir, first, self.direct_io, &self.stats, &self.faults)?;
        self.first = first;
        self.tail.clear();
        files.lock().push(first);
        Ok(())
    }
}

/// Creates the log file for `first` atomically (W5): the header goes to a temporary name,
/// is fsynced, then the file is renamed into place and the directory fsynced.
pub(crate) fn create_log_file(
    dir: &Path,
    first: Lsn,
    direct_io: bool,
    stats: &Arc<IoStats>,
    faults: &Option<Arc<FaultInjector>>,
) -> Result<DataFile> {
    let path = dir.join(frame::file_name(first));
    let tmp = dir.join(format!("{}.tmp", frame::file_name(first)));
    match std::fs::remove_file(&tmp) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(super::reader::os_err(&tmp, "unlink", e))
        }
        _ => {}
    }
    {
        let f = DataFile::open(
            &tmp,
            OpenMode::CreateNew,
            direct_io,
            stats.clone(),
            faults.clone(),
        )?;
        let header = AlignedBuf::from_slice(&frame::encode_file_header(first));
        f.write_at(0, &header, Category::Log)?;
        f.sync(Category::Log)?;
    }
    std::fs::rename(&tmp, &path).map_err(|e| super::reader::os_err(&tmp, "rename", e))?;
    shale_io::sync_dir(dir)?;
    Ok(DataFile::open(
        &path,
        OpenMode::Existing,
        direct_io,
        stats.clone(),
        faults.clone(),
    )?)
}
