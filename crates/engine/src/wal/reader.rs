//! Replay: listing the log files of a directory, checking their headers and the continuity of
//! the stream between them, reading frames in order, and telling the crash tail of the last
//! file (cut, W9) from corruption anywhere else (reported, W5).

use super::frame::{self, Decoded, Lsn, FILE_HEADER_BYTES, FRAME_HEADER_BYTES};
use super::record::LogRecord;
use crate::{Error, Location, Result};
use shale_io::{round_down_to_page, Category, DataFile, IoStats, OpenMode};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Bytes read per call while scanning a file.
const SCAN_CHUNK: u64 = 1 << 20;

/// The log files in `dir` as (first LSN, path), sorted by LSN. Other names are ignored.
pub(crate) fn list_log_files(dir: &Path) -> Result<Vec<(Lsn, PathBuf)>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(os_err(dir, "read dir", e)),
    };
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| os_err(dir, "read dir", e))?;
        if let Some(lsn) = entry.file_name().to_str().and_then(frame::parse_file_name) {
            files.push((lsn, entry.path()));
        }
    }
    files.sort();
    Ok(files)
}

pub(crate) fn os_err(path: &Path, op: &'static str, source: std::io::Error) -> Error {
    Error::os(path.to_owned(), op, source)
}

/// Reads and checks the header page of `file`, which is named for LSN `named`.
pub(crate) fn read_file_header(file: &DataFile, named: Lsn) -> Result<()> {
    let corrupt =
        |reason: String| Error::corruption(file.path(), Location::LogRecord { offset: 0 }, reason);
    let len = file.len()?;
    if len < FILE_HEADER_BYTES {
        return Err(corrupt(format!(
            "file of {len} bytes has no complete header"
        )));
    }
    let page = file.read_exact_at(0, FILE_HEADER_BYTES as usize, Category::Log)?;
    let first = frame::decode_file_header(&page).map_err(corrupt)?;
    if first != named {
        return Err(corrupt(format!(
            "header says first LSN {first}, file name says {named}"
        )));
    }
    Ok(())
}

/// A forward reader over one file that fetches it in large page-aligned chunks.
pub(super) struct Scan {
    pub(super) file: DataFile,
    pub(super) len: u64,
    pub(super) buf: Vec<u8>,
    pub(super) buf_off: u64,
}

impl Scan {
    /// The bytes `[off, off + n)`, clipped to the end of the file.
    pub(super) fn get(&mut self, off: u64, n: usize) -> Result<&[u8]> {
        let end = off.saturating_add(n as u64).min(self.len);
        let off = off.min(end);
        let buf_end = self.buf_off + self.buf.len() as u64;
        if off < self.buf_off || end > buf_end {
            let start = round_down_to_page(off);
            let want = (end - start).max(SCAN_CHUNK).min(self.len - start);
            let got = self
                .file
                .read_exact_at(start, want as usize, Category::Log)?;
            self.buf = got.to_vec();
            self.buf_off = start;
        }
        let lo = (off - self.buf_off) as usize;
        let hi = (end - self.buf_off) as usize;
        Ok(&self.buf[lo..hi])
    }
}

/// How one file's scan ended.
enum FileEnd {
    /// Zeroes or the end of the file after the last valid frame at this LSN.
    Clean(Lsn),
    /// A torn or corrupt frame at this LSN and file offset.
    Bad {
        at: Lsn,
        offset: u64,
        reason: String,
    },
}

/// Reads every valid record with LSN >= `from`, in order, calling `f(lsn, record)`, and returns
/// the LSN where the valid log ends (the next LSN to assign).
///
/// It stops at the first torn or corrupt frame of the *last* file: that is the crash tail (W9),
/// which `Wal::open` then cuts. A bad frame in any earlier file, a bad file header, a gap or
/// overlap between files (W2), a frame whose checksum holds but whose record does not decode,
/// or a `from` outside the log (older files missing, or beyond its end) is
/// `Error::Corruption` naming the file and `Location::LogRecord { offset }` (0 for a header).
/// An empty or absent directory replays nothing and returns `from`.
pub fn replay(
    dir: &Path,
    from: Lsn,
    stats: Arc<IoStats>,
    mut f: impl FnMut(Lsn, LogRecord) -> Result<()>,
) -> Result<Lsn> {
    let files = list_log_files(dir)?;
    let Some(&(oldest, ref oldest_path)) = files.first() else {
        return Ok(from);
    };
    if from < oldest {
        return Err(Error::corruption(
            oldest_path,
            Location::LogRecord { offset: 0 },
            format!("replay from LSN {from} asked, but the oldest log file starts at {oldest}: older log files are missing"),
        ));
    }
    let start = files.partition_point(|(first, _)| *first <= from) - 1;
    let mut expected_first = None;
    let mut end = from;
    for (i, (first, path)) in files.iter().enumerate().skip(start) {
        let last = i + 1 == files.len();
        let file = DataFile::open(path, OpenMode::Existing, true, stats.clone(), None)?;
        read_file_header(&file, *first)?;
        if let Some(prev_end) = expected_first {
            if *first != prev_end {
                return Err(Error::corruption(
                    path,
                    Location::LogRecord { offset: 0 },
                    format!(
                        "file starts at LSN {first} but the previous file ends at LSN {prev_end}"
                    ),
                ));
            }
        }
        let len = file.len()?;
        let mut scan = Scan {
            file,
            len,
            buf: Vec::new(),
            buf_off: 0,
        };
        match scan_file(&mut scan, *first, from, path, &mut f)? {
            FileEnd::Clean(at) => {
                end = at;
                expected_first = Some(at);
            }
            FileEnd::Bad { at, offset, reason } if last => {
                // W9: a crash tears only the end of what was written, so a valid frame after
                // the bad one (at its own position, W7) means a damaged record in the middle
                // of the log: cutting there would drop the acknowledged commits after it.
                if let Some(later) = valid_frame_after(&mut scan, *first, offset)? {
                    return Err(Error::corruption(
                        path,
                        Location::LogRecord { offset },
                        format!(
                            "{reason} (not the crash tail: a valid record follows at LSN {later})"
                        ),
                    ));
                }
                end = at;
            }
            FileEnd::Bad { offset, reason, .. } => {
                return Err(Error::corruption(
                    path,
                    Location::LogRecord { offset },
                    format!("{reason} (not the crash tail: later log files exist)"),
                ));
            }
        }
    }
    if end < from {
        return Err(Error::corruption(
            dir,
            Location::Other(format!("log end at LSN {end}")),
            format!("replay from LSN {from} asked, beyond the end of the valid log"),
        ));
    }
    Ok(end)
}

/// The LSN of the first valid frame that starts after file offset `bad` at the position its
/// own LSN names (W2, W7), if any: proof that the bad frame at `bad` is not the crash tail.
pub(super) fn valid_frame_after(scan: &mut Scan, first: Lsn, bad: u64) -> Result<Option<Lsn>> {
    let mut p = bad + 1;
    while p + FRAME_HEADER_BYTES as u64 <= scan.len {
        let lsn = Lsn(first.0 + (p - FILE_HEADER_BYTES));
        let head = scan.get(p, FRAME_HEADER_BYTES)?;
        if head[8..16] == lsn.0.to_le_bytes() {
            if let Some(need) = frame::peek_frame_len(head) {
                if let Decoded::Frame { .. } = frame::decode_frame(scan.get(p, need)?, lsn) {
                    return Ok(Some(lsn));
                }
            }
        }
        p += 1;
    }
    Ok(None)
}

/// Reads the frames of one file (LSNs from `first`), passing records at or after `from` to `f`.
fn scan_file(
    scan: &mut Scan,
    first: Lsn,
    from: Lsn,
    path: &Path,
    f: &mut impl FnMut(Lsn, LogRecord) -> Result<()>,
) -> Result<FileEnd> {
    let mut at = first;
    loop {
        let offset = FILE_HEADER_BYTES + (at.0 - first.0);
        let need = frame::peek_frame_len(scan.get(offset, FRAME_HEADER_BYTES)?)
            .unwrap_or(FRAME_HEADER_BYTES);
        let bytes = scan.get(offset, need)?;
        let payload = match frame::decode_frame(bytes, at) {
            Decoded::End => return Ok(FileEnd::Clean(at)),
            Decoded::Bad(reason) => return Ok(FileEnd::Bad { at, offset, reason }),
            Decoded::Frame { payload, .. } => payload,
        };
        let next = at.advance(frame::frame_len(payload.len()) as u64);
        if at >= from {
            // The checksum held, so these are the bytes the writer produced: failing to decode
            // them is never a crash artifact.
            let record = LogRecord::decode(payload).map_err(|reason| {
                Error::corruption(
                    path,
                    Location::LogRecord { offset },
                    format!("record at LSN {at} does not decode: {reason}"),
                )
            })?;
            f(at, record)?;
        }
        at = next;
    }
}
