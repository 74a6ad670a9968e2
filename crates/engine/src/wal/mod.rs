//! The write-ahead log: logical, checksummed records in a directory of log files, appended
//! with group commit and replayed at recovery. This module owns the `Wal` handle (open, append,
//! commit, file removal, close) and the invariants below; the byte layout is in `frame.rs`
//! and `record.rs`, group commit in `writer.rs`, replay in `reader.rs`, and the format is
//! documented in `docs/format-wal.md`.
//!
//! The log is one stream of frames (`[len][crc][lsn][payload]`) split over files named
//! `log-<20-digit first LSN>.wal`, each starting with a 4 KiB header page. An LSN is a byte
//! position in that stream, so it orders records and says where each one is.
//!
//! # Invariants
//!
//! W1–W10 (durability only after fdatasync, gapless LSNs, whole groups per file, whole
//! pages, complete headers before a file appears, poisoning, CRCs over the LSN, one leader,
//! the crash tail cut at open, safe file removal) have one home, `docs/format-wal.md`,
//! "Invariants"; this module and `frame.rs`, `writer.rs` and `reader.rs` cite them by number.

mod frame;
mod reader;
mod record;
pub(crate) mod salvage;
mod writer;

#[cfg(test)]
pub(crate) use frame::encode_frame;
pub use frame::{
    decode_frame, frame_len, Decoded, Lsn, FILE_HEADER_BYTES, FORMAT_VERSION, FRAME_HEADER_BYTES,
    MAX_PAYLOAD_BYTES,
};
pub use reader::replay;

/// The first LSN of the oldest log file in `dir`, `None` when there is no log yet.
pub fn oldest_lsn(dir: &Path) -> Result<Option<Lsn>> {
    Ok(reader::list_log_files(dir)?.first().map(|(lsn, _)| *lsn))
}
pub use record::{Change, LiveTxn, LogRecord, TxnId};

use crate::{Error, FsyncPolicy, Result};
use reader::{list_log_files, os_err, read_file_header};
use shale_io::{round_down_to_page, round_up_to_page, AlignedBuf, Category, DataFile};
use shale_io::{FaultInjector, IoStats, OpenMode};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use writer::{create_log_file, LogWriter, Shared};

/// Options of a write-ahead log.
#[derive(Debug, Clone)]
pub struct WalOptions {
    /// When commits become durable.
    pub fsync: FsyncPolicy,
    /// A new file is started at the next batch boundary once the current one is larger.
    pub file_bytes_max: u64,
    /// Use O_DIRECT where the filesystem allows it.
    pub direct_io: bool,
}

impl Default for WalOptions {
    fn default() -> Self {
        WalOptions {
            fsync: FsyncPolicy::EveryCommit,
            file_bytes_max: 64 << 20,
            direct_io: true,
        }
    }
}

/// An open write-ahead log, shared by many threads as `Arc<Wal>`.
#[derive(Debug)]
pub struct Wal {
    dir: PathBuf,
    policy: FsyncPolicy,
    shared: Arc<Shared>,
    syncer: Option<std::thread::JoinHandle<()>>,
}

impl Wal {
    /// Opens the log in `dir` (creating it if empty) for appending after [`replay`] has run.
    /// `end` is the LSN replay returned (the end of the valid log); everything from `end` on
    /// in the last file is cut (W9) and the file fsynced before anything is called durable.
    pub fn open(
        dir: &Path,
        end: Lsn,
        opts: WalOptions,
        stats: Arc<IoStats>,
        faults: Option<Arc<FaultInjector>>,
    ) -> Result<Wal> {
        std::fs::create_dir_all(dir).map_err(|e| os_err(dir, "mkdir", e))?;
        remove_temp_files(dir)?;
        let mut files: Vec<Lsn> = list_log_files(dir)?.into_iter().map(|(l, _)| l).collect();
        let (file, first, tail) = match files.last() {
            None => {
                let file = create_log_file(dir, end, opts.direct_io, &stats, &faults)?;
                files.push(end);
                (file, end, Vec::new())
            }
            Some(&first) => {
                if end < first {
                    return Err(Error::InvalidArgument(format!(
                        "log end {end} is before the start {first} of the last log file"
                    )));
                }
                let path = dir.join(frame::file_name(first));
                let file = DataFile::open(
                    &path,
                    OpenMode::Existing,
                    opts.direct_io,
                    stats.clone(),
                    faults.clone(),
                )?;
                read_file_header(&file, first)?;
                let tail = cut_after(&file, FILE_HEADER_BYTES + (end.0 - first.0))?;
                (file, first, tail)
            }
        };
        let writer = LogWriter {
            dir: dir.to_owned(),
            file,
            first,
            written: end,
            tail,
            file_bytes_max: opts.file_bytes_max,
            direct_io: opts.direct_io,
            stats,
            faults,
            cut_failed: false,
        };
        let shared = Arc::new(Shared::new(writer, files));
        let syncer = match opts.fsync {
            FsyncPolicy::EveryCommit => None,
            FsyncPolicy::EveryMillis(ms) => {
                let shared = shared.clone();
                let handle = std::thread::Builder::new()
                    .name("shale-wal-sync".into())
                    .spawn(move || shared.run_syncer(ms))
                    .map_err(|e| os_err(dir, "spawn log syncer", e))?;
                Some(handle)
            }
        };
        Ok(Wal {
            dir: dir.to_owned(),
            policy: opts.fsync,
            shared,
            syncer,
        })
    }

    /// Appends `records` (one commit: a `Group` record, or records and then their Commit)
    /// contiguously in log order (W3); returns the LSN just past the last one. Not yet durable.
    pub fn append(&self, records: &[LogRecord]) -> Result<Lsn> {
        self.shared.append(records)
    }

    /// With `EveryCommit`, blocks until everything below `lsn` is durable, sharing one
    /// fdatasync with every commit waiting at the same time (W1, W8). With `EveryMillis` it
    /// returns at once and the background syncer makes the records durable within N ms.
    pub fn commit(&self, lsn: Lsn) -> Result<()> {
        match self.policy {
            FsyncPolicy::EveryCommit => self.shared.sync_to(lsn),
            FsyncPolicy::EveryMillis(_) => {
                let st = self.shared.state.lock();
                if let Some(reason) = &st.poisoned {
                    return Err(Error::Poisoned(format!("write-ahead log: {reason}")));
                }
                if lsn > st.end {
                    return Err(Error::InvalidArgument(format!(
                        "commit of LSN {lsn} beyond the end of the log {}",
                        st.end
                    )));
                }
                Ok(())
            }
        }
    }

    /// Blocks until everything below `lsn` is durable, whatever the fsync policy (a
    /// checkpoint needs this for its begin record).
    pub fn sync_to(&self, lsn: Lsn) -> Result<()> {
        self.shared.sync_to(lsn)
    }

    /// The durable LSN as a shared counter, for readers that must not take the log's lock
    /// (the snapshot registry's horizon, `mvcc/snapshots.rs`).
    pub fn durable_watch(&self) -> Arc<std::sync::atomic::AtomicU64> {
        self.shared.durable_mirror.clone()
    }

    /// Everything below this LSN is durable.
    pub fn durable_lsn(&self) -> Lsn {
        self.shared.state.lock().durable
    }

    /// The next LSN to be assigned.
    pub fn end_lsn(&self) -> Lsn {
        self.shared.state.lock().end
    }

    /// Asks for the next batch to start a new file (W3: between batches) when the current
    /// file holds more than `min_bytes` of records. A checkpoint asks before it logs its
    /// redo point, so that the file before it can be removed once the checkpoint is
    /// durable (W10): the log a checkpoint leaves is what came after its redo point, not
    /// the rest of a file of up to `file_bytes_max`. Returns whether it asked.
    pub fn rotate_if_over(&self, min_bytes: u64) -> bool {
        let first = self.shared.files.lock().last().copied();
        let used = first.map_or(0, |f| self.end_lsn().0.saturating_sub(f.0));
        let ask = used > min_bytes;
        if ask {
            self.shared
                .rotate
                .store(true, std::sync::atomic::Ordering::SeqCst);
        }
        ask
    }

    /// Deletes the log files all of whose records are below `lsn` (W10); returns how many.
    /// Call it once a checkpoint covering them is durable.
    pub fn remove_before(&self, lsn: Lsn) -> Result<usize> {
        let mut files = self.shared.files.lock();
        let mut removed = 0;
        while files.len() >= 2 && files[1] <= lsn {
            let path = self.dir.join(frame::file_name(files[0]));
            match std::fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(os_err(&path, "unlink", e))
                }
                _ => {}
            }
            files.remove(0);
            removed += 1;
        }
        drop(files);
        if removed > 0 {
            shale_io::sync_dir(&self.dir)?;
        }
        Ok(removed)
    }

    /// Whether what this log wrote ends at its durable position, so that recovery may run
    /// on its files again while this process lives (`Env::reopen`): true unless a failed
    /// write could not be cut back (W11). Takes the writer's lock, so a leader's write in
    /// progress finishes first.
    pub fn ends_at_durable(&self) -> bool {
        !self.shared.writer.lock().cut_failed
    }

    /// Writes and fsyncs everything appended and stops the background syncer.
    pub fn close(mut self) -> Result<()> {
        self.stop_syncer();
        let end = self.end_lsn();
        self.shared.sync_to(end)
    }

    fn stop_syncer(&mut self) {
        if let Some(handle) = self.syncer.take() {
            *self.shared.stop.lock() = true;
            self.shared.stop_signal.notify_all();
            if handle.join().is_err() {
                tracing::error!("log syncer thread panicked");
            }
        }
    }
}

impl Drop for Wal {
    /// Stops the syncer; records appended but not yet synced are not written (use `close`).
    fn drop(&mut self) {
        self.stop_syncer();
    }
}

/// Cuts the log file at byte `pos` (W9): the partial page keeps its bytes before `pos` and is
/// zeroed after it, the file is truncated to the end of that page, and everything is synced.
/// Returns the bytes of the partial page before `pos`.
fn cut_after(file: &DataFile, pos: u64) -> Result<Vec<u8>> {
    let len = file.len()?;
    if len < pos {
        return Err(Error::InvalidArgument(format!(
            "log end at offset {pos} is beyond the end of {} ({len} bytes)",
            file.path().display()
        )));
    }
    let page = round_down_to_page(pos);
    let keep = (pos - page) as usize;
    let tail = if keep > 0 {
        let bytes = file.read_exact_at(page, keep, Category::Log)?.to_vec();
        file.write_at(page, &AlignedBuf::from_slice(&bytes), Category::Log)?;
        bytes
    } else {
        Vec::new()
    };
    let cut = round_up_to_page(pos as usize) as u64;
    if file.len()? != cut {
        file.set_len(cut)?;
    }
    file.sync(Category::Log)?;
    Ok(tail)
}

/// Removes `.tmp` leftovers of file creations a crash interrupted (W5: never data).
fn remove_temp_files(dir: &Path) -> Result<()> {
    let entries = std::fs::read_dir(dir).map_err(|e| os_err(dir, "read dir", e))?;
    for entry in entries {
        let entry = entry.map_err(|e| os_err(dir, "read dir", e))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with("log-") && name.ends_with(".wal.tmp") {
            std::fs::remove_file(entry.path()).map_err(|e| os_err(&entry.path(), "unlink", e))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
