//! Reading a block file that `BlockFile::open` refuses, for `verify` and `repair`
//! (docs/operations.md). It owns no state and never writes: it finds the newest checkpoint
//! whose translation table still checks out, leniently when a header is damaged, and
//! reads single blocks against their recorded checksums. It must never be used to open a
//! file for writing: a file that only this reader accepts is salvaged into a fresh file.
//!
//! How far it goes, in order:
//! 1. the newest checkpoint whose header slot decodes — as written (B9), or with its magic,
//!    version and checksum rewritten (a damaged byte elsewhere in the slot usually leaves its
//!    fields right) — and whose translation table matches the table checksum that header
//!    records; a header whose fields were hit fails that test;
//! 2. else no table: the caller scans the file's pages for node blocks.
//!
//! A table entry whose extent lies past the end of the file (a truncated file) is reported
//! as missing, not read.

use super::allocator::DATA_START;
use super::header::{slot_offset, Header, MAGIC, MAX_META, SLOT_SIZE, VERSION};
use super::{btt, CheckpointState, Extent, NodeId};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// Bytes of a header before its metadata blob (see `header.rs`).
const HEADER_FIXED: usize = 68;
/// Offset of the metadata length in a header.
const META_LEN_AT: usize = 64;

/// What a possibly damaged block file still says about its last durable checkpoint.
#[derive(Debug, Clone)]
pub struct DurableImage {
    /// The checkpoint found (root, redo LSN, tree metadata), if any header could be used.
    pub checkpoint: Option<CheckpointState>,
    /// The blocks of that checkpoint that lie inside the file, by node id.
    pub blocks: Vec<(NodeId, Extent)>,
    /// Blocks of that checkpoint whose extents start past the end of the file (one cut
    /// short is in `blocks`: its partitions before the end may still read).
    pub missing: Vec<(NodeId, Extent)>,
    /// What was wrong with the headers and the table (empty for a sound file).
    pub problems: Vec<String>,
    /// The file's length in bytes.
    pub file_len: u64,
}

/// Reads the headers and translation table of the block file at `path` as far as they go.
/// Only I/O errors are errors; damage is described in the result.
pub fn read_durable(path: &Path) -> std::io::Result<DurableImage> {
    let file = File::open(path)?;
    let file_len = file.metadata()?.len();
    let slots = [read_slot(&file, 0)?, read_slot(&file, 1)?];
    let mut problems = Vec::new();
    // (slot, header, read leniently): every slot as written, or leniently if it fails.
    let mut candidates: Vec<(u8, Header, bool)> = Vec::new();
    for s in 0..2u8 {
        match Header::decode(&slots[s as usize], s) {
            Ok(h) => candidates.push((s, h, false)),
            Err(reason) => {
                problems.push(format!("header slot {s}: {reason}"));
                if let Some(h) = lenient_header(&slots[s as usize], s) {
                    candidates.push((s, h, true));
                }
            }
        }
    }
    // Newest checkpoint first; the first whose table checks out wins.
    // A lenient header is believed only through its table's checksum, which a header whose
    // fields were hit fails; so the newest checkpoint wins even when its header is damaged
    // (the older one's blocks are already reused or punched out, B5, B11).
    candidates.sort_by_key(|(_, h, _)| std::cmp::Reverse(h.seq));
    for (slot, h, lenient) in candidates {
        match read_table(&file, file_len, &h) {
            Ok(table) => {
                if lenient {
                    problems.push(format!(
                        "used header slot {slot} with its checksum ignored (checkpoint {}, its table checks out)",
                        h.seq
                    ));
                }
                let (blocks, missing) = table.into_iter().partition(|(_, e)| e.offset < file_len);
                let checkpoint = CheckpointState {
                    seq: h.seq,
                    root: NodeId(h.root),
                    lsn: h.lsn,
                    meta: h.meta,
                };
                return Ok(DurableImage {
                    checkpoint: Some(checkpoint),
                    blocks,
                    missing,
                    problems,
                    file_len,
                });
            }
            Err(reason) => problems.push(format!(
                "translation table of header slot {slot} (checkpoint {}): {reason}",
                h.seq
            )),
        }
    }
    if problems.is_empty() {
        problems.push("no header names a usable checkpoint".into());
    }
    Ok(DurableImage {
        checkpoint: None,
        blocks: Vec::new(),
        missing: Vec::new(),
        problems,
        file_len,
    })
}

/// The metadata blob of the first header slot that decodes leniently (the tree's options
/// survive in either slot), for a file whose table is lost.
pub fn lenient_meta(path: &Path) -> std::io::Result<Option<(u64, Vec<u8>)>> {
    let file = File::open(path)?;
    for s in 0..2u8 {
        if let Some(h) = lenient_header(&read_slot(&file, s)?, s) {
            return Ok(Some((h.lsn, h.meta)));
        }
    }
    Ok(None)
}

/// Reads block `id` at `e`, with why its bytes fail the checksum the table recorded, if
/// they do (the node format checks each partition on its own, so a block with one damaged
/// partition still yields the others).
pub fn read_block(
    path: &Path,
    id: NodeId,
    e: &Extent,
) -> Result<(Vec<u8>, Option<String>), String> {
    let file = File::open(path).map_err(|err| format!("open: {err}"))?;
    let file_len = file.metadata().map_err(|err| format!("stat: {err}"))?.len();
    let len = u64::from(e.len).min(file_len.saturating_sub(e.offset));
    let mut buf = vec![0u8; len as usize];
    file.read_exact_at(&mut buf, e.offset)
        .map_err(|err| format!("block {} at offset {}: {err}", id.0, e.offset))?;
    let found = crc32c::crc32c(&buf);
    let problem = if len < u64::from(e.len) {
        Some(format!(
            "cut short by the end of the file: {len} of {} bytes",
            e.len
        ))
    } else {
        None
    };
    let problem = problem.or_else(|| {
        (found != e.crc).then(|| {
            format!(
                "checksum mismatch: expected {:#010x} found {found:#010x}",
                e.crc
            )
        })
    });
    Ok((buf, problem))
}

/// First byte of the data area: where a page scan for node blocks starts.
pub fn data_start() -> u64 {
    DATA_START
}

/// One header slot's bytes (zeros past the end of a short file).
fn read_slot(file: &File, slot: u8) -> std::io::Result<Vec<u8>> {
    let mut page = vec![0u8; SLOT_SIZE];
    let mut got = 0;
    let at = slot_offset(slot);
    while got < page.len() {
        match file.read_at(&mut page[got..], at + got as u64)? {
            0 => break,
            n => got += n,
        }
    }
    Ok(page)
}

/// Decodes a slot with its magic, version and checksum rewritten, so that a damaged byte
/// in one of those (or anywhere the checksum covers) does not hide the fields.
fn lenient_header(bytes: &[u8], slot: u8) -> Option<Header> {
    let mut b = bytes.to_vec();
    let meta_len = u32::from_le_bytes(b.get(META_LEN_AT..META_LEN_AT + 4)?.try_into().ok()?);
    let meta_len = usize::try_from(meta_len).ok().filter(|&n| n <= MAX_META)?;
    let covered = HEADER_FIXED + meta_len;
    if covered + 4 > b.len() {
        return None;
    }
    b[..8].copy_from_slice(MAGIC);
    b[8..12].copy_from_slice(&VERSION.to_le_bytes());
    let crc = crc32c::crc32c(&b[..covered]);
    b[covered..covered + 4].copy_from_slice(&crc.to_le_bytes());
    Header::decode(&b, slot).ok()
}

/// The translation table header `h` names, checked against its recorded checksum.
fn read_table(file: &File, file_len: u64, h: &Header) -> Result<Vec<(NodeId, Extent)>, String> {
    let end = h
        .btt_offset
        .checked_add(h.btt_len)
        .ok_or("extent overflows")?;
    if h.btt_offset < DATA_START || h.btt_len < 8 || end > file_len {
        return Err(format!(
            "extent of {} bytes at {} does not fit the file of {file_len} bytes",
            h.btt_len, h.btt_offset
        ));
    }
    let len = usize::try_from(h.btt_len).map_err(|_| "table too large")?;
    let mut raw = vec![0u8; len];
    file.read_exact_at(&mut raw, h.btt_offset)
        .map_err(|e| format!("read: {e}"))?;
    let found = crc32c::crc32c(&raw);
    if found != h.btt_crc {
        return Err(format!(
            "checksum mismatch: expected {:#010x} found {found:#010x}",
            h.btt_crc
        ));
    }
    Ok(btt::decode(&raw)?.into_iter().collect())
}
