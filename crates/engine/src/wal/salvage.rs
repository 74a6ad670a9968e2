//! The log offline: `check` reads it the way recovery would and says where its first
//! damaged record is (a bad frame that is not the crash tail, W5/W9, a bad file header, or
//! a gap between files, W2) and how many readable records lie beyond it; `cut_at_damage`
//! keeps every record before the damage and sets the rest aside, and `restart_at` starts an
//! empty log past the checkpoints when what is left ends before them, for `repair`
//! (docs/operations.md). Nothing here runs while an environment has the log open.
//!
//! Cutting relies on W2 (a record's file offset follows from its LSN) and W9 (the cut page
//! is zeroed after the cut, so nothing past it is ever read as data). Files after the
//! damaged one are renamed `*.wal.damaged`, which the log never lists, rather than deleted:
//! the operator keeps them for inspection.

use super::frame::{self, Decoded, Lsn, FILE_HEADER_BYTES, FRAME_HEADER_BYTES};
use super::reader::{list_log_files, os_err, valid_frame_after, Scan};
use super::writer::create_log_file;
use crate::{Error, Location, Result};
use shale_io::{DataFile, IoStats, OpenMode};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What the log holds.
#[derive(Debug, Clone)]
pub struct LogCheck {
    /// Log files found.
    pub files: usize,
    /// Valid records before the end or the damage.
    pub records: u64,
    /// Where the valid log ends (the damage, if any).
    pub end: Lsn,
    /// The first damaged record, if any.
    pub damage: Option<LogDamage>,
}

/// The first damaged record of a log and what lies beyond it.
#[derive(Debug, Clone)]
pub struct LogDamage {
    /// The log file it is in.
    pub file: PathBuf,
    /// File offset of the damaged frame (0: the file's header, or the file is out of place).
    pub offset: u64,
    /// The LSN expected there.
    pub lsn: Lsn,
    /// Why it did not read.
    pub reason: String,
    /// Records that still read after the damaged one, in its file and the later ones.
    pub readable_after: u64,
    /// Bytes from the damaged frame to the end of its file.
    pub bytes_after: u64,
    /// Log files after the damaged one.
    pub later_files: Vec<PathBuf>,
}

/// Reads the whole log in `dir` as recovery would, stopping at the first damaged record.
pub fn check(dir: &Path) -> Result<LogCheck> {
    let files = list_log_files(dir)?;
    let Some(&(oldest, _)) = files.first() else {
        return Ok(LogCheck {
            files: 0,
            records: 0,
            end: Lsn(0),
            damage: None,
        });
    };
    let stats = Arc::new(IoStats::default());
    let mut records = 0u64;
    let outcome = super::replay(dir, oldest, stats.clone(), |_, _| {
        records += 1;
        Ok(())
    });
    let (file, location, reason) = match outcome {
        Ok(end) => {
            return Ok(LogCheck {
                files: files.len(),
                records,
                end,
                damage: None,
            })
        }
        Err(Error::Corruption {
            file,
            location,
            reason,
        }) => (file, location, reason),
        Err(e) => return Err(e),
    };
    let offset = match location {
        Location::LogRecord { offset } => offset,
        _ => 0,
    };
    // The damaged file, by path; a damage not in a listed file (the log ends before a
    // checkpoint's redo point) is placed at the last file's end.
    let at = files.iter().position(|(_, p)| *p == file);
    let (index, offset) = match at {
        Some(i) => (i, offset),
        None => (files.len() - 1, u64::MAX),
    };
    let (first, path) = files[index].clone();
    let len = std::fs::metadata(&path)
        .map_err(|e| os_err(&path, "stat", e))?
        .len();
    let offset = offset.min(len);
    let lsn = Lsn(first.0 + offset.saturating_sub(FILE_HEADER_BYTES));
    let mut readable_after = 0;
    if offset >= FILE_HEADER_BYTES {
        let mut scan = open_scan(&path, &stats)?;
        if let Some(next) = valid_frame_after(&mut scan, first, offset)? {
            readable_after += count_frames(&mut scan, first, next)?;
        }
    }
    let later: Vec<(Lsn, PathBuf)> = files[index + 1..].to_vec();
    for (f, p) in &later {
        let mut scan = open_scan(p, &stats)?;
        readable_after += count_frames(&mut scan, *f, *f)?;
    }
    Ok(LogCheck {
        files: files.len(),
        records,
        end: lsn,
        damage: Some(LogDamage {
            file: path,
            offset,
            lsn,
            reason,
            readable_after,
            bytes_after: len - offset,
            later_files: later.into_iter().map(|(_, p)| p).collect(),
        }),
    })
}

/// Keeps the records before `damage` and sets everything after it aside: the damaged file
/// is cut at the damaged frame (W9), or renamed aside when its header is what is damaged,
/// and every later file is renamed aside.
pub fn cut_at_damage(dir: &Path, damage: &LogDamage) -> Result<()> {
    if damage.offset >= FILE_HEADER_BYTES {
        let file = DataFile::open(
            &damage.file,
            OpenMode::Existing,
            false,
            Arc::new(IoStats::default()),
            None,
        )?;
        super::cut_after(&file, damage.offset)?;
    } else {
        set_aside(&damage.file)?;
    }
    for p in &damage.later_files {
        set_aside(p)?;
    }
    shale_io::sync_dir(dir)?;
    Ok(())
}

/// Sets every log file aside and starts the log afresh, empty, at LSN `first`: for a log
/// that ends before the checkpoints' redo points, whose records no tree needs any more. The
/// next commit's timestamp is then above every version the trees hold (M1), as it was
/// before the damage.
pub fn restart_at(dir: &Path, first: Lsn) -> Result<()> {
    for (_, p) in list_log_files(dir)? {
        set_aside(&p)?;
    }
    let stats = Arc::new(IoStats::default());
    create_log_file(dir, first, false, &stats, &None)?;
    shale_io::sync_dir(dir)?;
    Ok(())
}

/// Renames a log file to `<name>.damaged`, out of the log's listing.
fn set_aside(path: &Path) -> Result<()> {
    let mut to = path.as_os_str().to_owned();
    to.push(".damaged");
    std::fs::rename(path, &to).map_err(|e| os_err(path, "rename", e))
}

fn open_scan(path: &Path, stats: &Arc<IoStats>) -> Result<Scan> {
    let file = DataFile::open(path, OpenMode::Existing, false, stats.clone(), None)?;
    let len = file.len()?;
    Ok(Scan {
        file,
        len,
        buf: Vec::new(),
        buf_off: 0,
    })
}

/// Valid frames from LSN `at` on, in a file whose first LSN is `first`, until the first
/// end or bad frame.
fn count_frames(scan: &mut Scan, first: Lsn, mut at: Lsn) -> Result<u64> {
    let mut n = 0;
    loop {
        let offset = FILE_HEADER_BYTES + (at.0 - first.0);
        if offset + FRAME_HEADER_BYTES as u64 > scan.len {
            return Ok(n);
        }
        let need = frame::peek_frame_len(scan.get(offset, FRAME_HEADER_BYTES)?)
            .unwrap_or(FRAME_HEADER_BYTES);
        match frame::decode_frame(scan.get(offset, need)?, at) {
            Decoded::Frame { payload, .. } => {
                n += 1;
                at = at.advance(frame::frame_len(payload.len()) as u64);
            }
            Decoded::End | Decoded::Bad(_) => return Ok(n),
        }
    }
}
