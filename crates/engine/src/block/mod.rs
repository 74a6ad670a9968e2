//! Copy-on-write block files: one file per tree, holding opaque blocks (serialized nodes,
//! never interpreted here) under node ids, a block translation table (BTT) per checkpoint,
//! and two alternating headers. This module owns the lifetime of extents; `btt` owns the
//! table format, `header` the header format, `allocator` the free list, `verify` the
//! consistency check. Byte formats: `docs/format-blockfile.md`.
//!
//! Three translation maps exist: **D**, the BTT of the last durable checkpoint (the one the
//! newest valid on-disk header points to); **C**, the BTT of the checkpoint in progress
//! (between `checkpoint_begin` and the end of `checkpoint_end`); **L**, the live BTT.
//!
//! # Invariants
//!
//! B1–B11 (copy-on-write, which extents are referenced, freeing at once what neither D nor C
//! holds, the durable order of a checkpoint, retiring the old D, page-aligned first-fit
//! allocation, node ids never reused, poisoning, open from the newest valid header, images
//! numbered per write, retired blocks punched out) have one home,
//! `docs/format-blockfile.md`, "Extent lifetime invariants"; the code cites them by number.
//!
//! Readers take the lock only to look up an image and then read without it, so reads run
//! concurrently. A node may be rewritten or freed while it is being read (its old extent may
//! be reused at once, B3): the read then fails its checksum or returns the old image's bytes,
//! and the reader tells which by comparing images (B10).

mod allocator;
pub(crate) mod btt;
#[cfg(test)]
mod fault_tests;
pub(crate) mod header;
pub(crate) mod salvage;
#[cfg(test)]
mod tests;
mod verify;

use crate::{Error, Location, Result};
use allocator::{alloc_len, Allocator, DATA_START};
use btt::Btt;
use header::{slot_of, slot_offset, Header, MAX_META, SLOT_SIZE};
use parking_lot::Mutex;
use shale_io::{AlignedBuf, Category, DataFile, FaultInjector, IoStats, OpenMode, ReadBuf};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Sorts `ranges` and merges those that touch or overlap, so each run of freed pages is one
/// call and a range freed twice (freed, reused, freed again) is one range.
fn merge_ranges(mut ranges: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    ranges.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
    for (offset, len) in ranges {
        match out.last_mut() {
            Some(last) if last.0 + last.1 >= offset => {
                last.1 = last.1.max(offset + len - last.0);
            }
            _ => out.push((offset, len)),
        }
    }
    out
}

/// Ranges B3 freed that `State` keeps for the next checkpoint's punch before it first merges
/// them; after a merge, the next comes when the list has doubled (amortized O(log n) a free).
const FREED_RANGES_COMPACT_AT: usize = 1 << 16;

/// The id of a node (block) in one tree file. `NodeId(0)` means "no node".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u64);

/// Where a block lives: page-aligned `offset`, exact byte length `len` (not rounded), and
/// the crc32c of the block's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    /// Page-aligned byte offset in the file.
    pub offset: u64,
    /// Exact length of the block's bytes.
    pub len: u32,
    /// CRC-32C of the block's bytes.
    pub crc: u32,
}

/// One image of a node as the live BTT maps it: its extent and which write made it. Extents
/// alone cannot tell two images of a node apart: first fit hands the extent freed by one
/// rewrite straight back to the next rewrite of the same node (B10). `write` can: it numbers
/// this file's block writes since open (0 = an image found at open), so equal images are
/// the same bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Image {
    /// Where the image is.
    pub extent: Extent,
    /// Which block write since open made it (0: found at open).
    pub write: u64,
}

/// What the durable checkpoint recorded, as found by [`BlockFile::open`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointState {
    /// The checkpoint's sequence number.
    pub seq: u64,
    /// The tree's root node.
    pub root: NodeId,
    /// The log position recorded with the checkpoint.
    pub lsn: u64,
    /// The tree's metadata bytes (options, next MSN, entry count).
    pub meta: Vec<u8>,
}

/// One tree's copy-on-write block file. `Send + Sync`; see the module docs.
#[derive(Debug)]
pub struct BlockFile {
    file: DataFile,
    path: PathBuf,
    next_id: AtomicU64,
    state: Mutex<State>,
    /// Bytes given back to the filesystem as holes since open (B11).
    punched_bytes: AtomicU64,
    /// Set by `retire`: readable without the state's lock (`is_retired`).
    retired: AtomicBool,
}

/// Everything that changes, under one lock.
#[derive(Debug)]
struct State {
    /// D: the last durable checkpoint's BTT.
    durable: Btt,
    /// The serialized BTT extent of D (offset, allocated length).
    durable_btt: (u64, u64),
    durable_seq: u64,
    /// C, while a checkpoint runs.
    ckpt: Option<Checkpoint>,
    /// L: the live BTT.
    live: Btt,
    alloc: Allocator,
    /// Bytes allocated to block writes not yet entered in L (B2: neither free nor mapped).
    in_flight: u64,
    /// Block writes since open, and the write that made each node's live image (B10).
    writes: u64,
    stamps: HashMap<NodeId, u64>,
    poisoned: Option<String>,
    /// Extents B3 freed since the last checkpoint ended, possibly reused since: what of them
    /// is still free when the next one ends is punched out with what it retires (B11).
    freed: Vec<(u64, u64)>,
    /// The length of `freed` at which it is merged next.
    freed_compact_at: usize,
}

#[derive(Debug)]
struct Checkpoint {
    seq: u64,
    map: Btt,
    /// Set once `checkpoint_end` has allocated C's serialized BTT (offset, allocated length).
    ending: Option<(u64, u64)>,
}

impl State {
    fn check_writable(&self) -> Result<()> {
        match &self.poisoned {
            Some(why) => Err(Error::Poisoned(why.clone())),
            None => Ok(()),
        }
    }

    /// B8: remember the first write-path failure.
    fn poison(&mut self, err: &shale_io::Error) {
        if self.poisoned.is_none() {
            self.poisoned = Some(err.to_string());
        }
    }

    /// B3: an extent that was just unmapped from L or C is freed unless D, C or L still
    /// references it.
    fn release(&mut self, id: NodeId, old: Option<Extent>) {
        let Some(e) = old else { return };
        let in_c = self
            .ckpt
            .as_ref()
            .is_some_and(|c| btt::references(&c.map, id, &e));
        if !in_c && !btt::references(&self.durable, id, &e) && !btt::references(&self.live, id, &e)
        {
            let len = alloc_len(u64::from(e.len));
            self.alloc.free(e.offset, len);
            self.freed.push((e.offset, len));
            if self.freed.len() >= self.freed_compact_at {
                self.freed = merge_ranges(std::mem::take(&mut self.freed));
                self.freed_compact_at = (2 * self.freed.len()).max(FREED_RANGES_COMPACT_AT);
            }
        }
    }
}

impl BlockFile {
    /// Creates the file (it must not exist) holding an empty durable checkpoint: seq 1, no
    /// root, empty BTT, `meta` as the caller's metadata. Slot 0 gets an equally empty
    /// checkpoint 0 so that both slots parse. Fsyncs the file and its directory.
    pub fn create(
        path: &Path,
        meta: &[u8],
        direct_io: bool,
        stats: Arc<IoStats>,
        faults: Option<Arc<FaultInjector>>,
    ) -> Result<BlockFile> {
        check_meta(meta)?;
        let file = DataFile::open(path, OpenMode::CreateNew, direct_io, stats, faults)?;
        let empty = btt::encode(&Btt::new());
        let btt_size = alloc_len(empty.len() as u64);
        file.write_at(DATA_START, &AlignedBuf::from_slice(&empty), Category::Meta)?;
        for seq in [0u64, 1] {
            let h = Header {
                seq,
                root: 0,
                next_node_id: 1,
                btt_offset: DATA_START,
                btt_len: empty.len() as u64,
                btt_crc: crc32c::crc32c(&empty),
                lsn: 0,
                meta: meta.to_vec(),
            };
            let slot = slot_offset(slot_of(seq));
            file.write_at(slot, &AlignedBuf::from_slice(&h.encode()), Category::Meta)?;
        }
        file.sync(Category::Meta)?;
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        shale_io::sync_dir(dir)?;
        Ok(BlockFile {
            file,
            path: path.to_owned(),
            next_id: AtomicU64::new(1),
            punched_bytes: AtomicU64::new(0),
            retired: AtomicBool::new(false),
            state: Mutex::new(State {
                durable: Btt::new(),
                durable_btt: (DATA_START, btt_size),
                durable_seq: 1,
                ckpt: None,
                live: Btt::new(),
                alloc: Allocator::new(DATA_START + btt_size),
                in_flight: 0,
                freed: Vec::new(),
                freed_compact_at: FREED_RANGES_COMPACT_AT,
                writes: 0,
                stamps: HashMap::new(),
                poisoned: None,
            }),
        })
    }

    /// Opens an existing file at its last durable checkpoint (B9): L := D.
    pub fn open(
        path: &Path,
        direct_io: bool,
        stats: Arc<IoStats>,
        faults: Option<Arc<FaultInjector>>,
    ) -> Result<(BlockFile, CheckpointState)> {
        let file = DataFile::open(path, OpenMode::Existing, direct_io, stats, faults)?;
        let file_len = file.len()?;
        let slots = [read_slot(&file, 0)?, read_slot(&file, 1)?];
        let (slot, h) = match &slots {
            [Ok(a), Ok(b)] if b.seq > a.seq => (1u8, b.clone()),
            [Ok(a), _] => (0, a.clone()),
            [Err(_), Ok(b)] => (1, b.clone()),
            [Err(a), Err(b)] => {
                return Err(Error::corruption(
                    path,
                    Location::Header { slot: 0 },
                    format!("no valid header: slot 0: {a}; slot 1: {b}"),
                ));
            }
        };
        let table_loc = Location::TranslationTable {
            offset: h.btt_offset,
        };
        let corrupt = |reason: String| Error::corruption(path, table_loc.clone(), reason);
        let btt_fits = h.btt_offset >= DATA_START
            && h.btt_offset.is_multiple_of(shale_io::PAGE_SIZE as u64)
            && h.btt_len >= 8
            && h.btt_offset
                .checked_add(h.btt_len)
                .is_some_and(|e| e <= file_len);
        if !btt_fits {
            return Err(corrupt(format!(
                "header slot {slot} names a BTT extent of {} bytes at {} that does not fit the file of {file_len} bytes",
                h.btt_len, h.btt_offset
            )));
        }
        let raw = file.read_exact_at(h.btt_offset, h.btt_len as usize, Category::Meta)?;
        let found = crc32c::crc32c(&raw);
        if found != h.btt_crc {
            return Err(corrupt(format!(
                "checksum mismatch: expected {:#010x} found {found:#010x}",
                h.btt_crc
            )));
        }
        let durable = btt::decode(&raw).map_err(&corrupt)?;
        if let Some((id, _)) = durable.iter().find(|(id, _)| id.0 >= h.next_node_id) {
            return Err(corrupt(format!(
                "node {} is not below the next node id {}",
                id.0, h.next_node_id
            )));
        }
        if h.root != 0 && !durable.contains_key(&NodeId(h.root)) {
            return Err(corrupt(format!("root node {} has no entry", h.root)));
        }
        let btt_size = alloc_len(h.btt_len);
        let mut used: Vec<(u64, u64)> = durable
            .values()
            .map(|e| (e.offset, alloc_len(u64::from(e.len))))
            .collect();
        used.push((h.btt_offset, btt_size));
        let end = alloc_len(file_len).max(DATA_START);
        let alloc = Allocator::from_used(end, &used).map_err(&corrupt)?;
        let state = CheckpointState {
            seq: h.seq,
            root: NodeId(h.root),
            lsn: h.lsn,
            meta: h.meta,
        };
        let bf = BlockFile {
            file,
            path: path.to_owned(),
            next_id: AtomicU64::new(h.next_node_id),
            punched_bytes: AtomicU64::new(0),
            retired: AtomicBool::new(false),
            state: Mutex::new(State {
                live: durable.clone(),
                durable,
                durable_btt: (h.btt_offset, btt_size),
                durable_seq: h.seq,
                ckpt: None,
                alloc,
                in_flight: 0,
                freed: Vec::new(),
                freed_compact_at: FREED_RANGES_COMPACT_AT,
                writes: 0,
                stamps: HashMap::new(),
                poisoned: None,
            }),
        };
        Ok((bf, state))
    }

    /// A fresh node id (B7: never reused; persisted at the next checkpoint).
    pub fn allocate_node_id(&self) -> NodeId {
        NodeId(self.next_id.fetch_add(1, Ordering::SeqCst))
    }

    /// The live (L) extent of `id`.
    pub fn extent(&self, id: NodeId) -> Option<Extent> {
        self.state.lock().live.get(&id).copied()
    }

    /// The live image of `id` (B10): a reader that captured it before reading installs what
    /// it read only if the image is still the same.
    pub fn image(&self, id: NodeId) -> Option<Image> {
        let st = self.state.lock();
        st.live.get(&id).map(|&extent| Image {
            extent,
            write: st.stamps.get(&id).copied().unwrap_or(0),
        })
    }

    /// Every node's live (L) image, in node id order: what the tree's nodes hold on disk as
    /// of their last write (a checkpoint or an eviction).
    pub fn live_images(&self) -> Vec<(NodeId, Image)> {
        let st = self.state.lock();
        st.live
            .iter()
            .map(|(&id, &extent)| {
                let write = st.stamps.get(&id).copied().unwrap_or(0);
                (id, Image { extent, write })
            })
            .collect()
    }

    /// Reads the whole block of image `img` of `id` (one pread of its page-rounded extent) and
    /// verifies its crc; a mismatch is `Error::Corruption` naming the file and the block. The
    /// image may have been replaced (and its extent reused) meanwhile: then the bytes fail the
    /// crc, or are the image's own if the extent was not yet rewritten; the caller checks
    /// `image` again.
    pub fn read_image(&self, id: NodeId, img: &Image, cat: Category) -> Result<ReadBuf> {
        self.read_checked(id, img.extent, cat)
    }

    /// Reads `len` bytes at `offset_in_block` within image `img` (see `read_image`), with one
    /// pread of the page-aligned range covering them. No checksum: the caller checks its own.
    pub fn read_image_range(
        &self,
        img: &Image,
        offset_in_block: u32,
        len: u32,
        cat: Category,
    ) -> Result<ReadBuf> {
        let e = img.extent;
        if u64::from(offset_in_block) + u64::from(len) > u64::from(e.len) {
            return Err(Error::InvalidArgument(format!(
                "range {offset_in_block}+{len} is outside a block of {} bytes",
                e.len
            )));
        }
        let at = e.offset + u64::from(offset_in_block);
        Ok(self.file.read_exact_at(at, len as usize, cat)?)
    }

    /// Reads the block at `e` and checks it against `e.crc`.
    fn read_checked(&self, id: NodeId, e: Extent, cat: Category) -> Result<ReadBuf> {
        let buf = self.file.read_exact_at(e.offset, e.len as usize, cat)?;
        let found = crc32c::crc32c(&buf);
        if found != e.crc {
            return Err(Error::corruption(
                &self.path,
                Location::Block {
                    node: id.0,
                    offset: e.offset,
                    len: u64::from(e.len),
                },
                format!(
                    "checksum mismatch: expected {:#010x} found {found:#010x}",
                    e.crc
                ),
            ));
        }
        // The read buffer itself, not a copy: a whole node image is megabytes.
        Ok(buf)
    }

    /// Copy-on-write write of a new image of `id` to a fresh extent (B1). Updates L, and C
    /// too when `for_checkpoint` is set and a checkpoint is running; frees the old extent(s)
    /// per B3. Returns the new extent.
    pub fn write_block(
        &self,
        id: NodeId,
        bytes: &[u8],
        for_checkpoint: bool,
        cat: Category,
    ) -> Result<Extent> {
        let len = u32::try_from(bytes.len()).map_err(|_| {
            Error::InvalidArgument(format!("block of {} bytes is too large", bytes.len()))
        })?;
        let next = self.next_id.load(Ordering::SeqCst);
        if id.0 == 0 || id.0 >= next {
            return Err(Error::InvalidArgument(format!(
                "node id {} was not allocated (next id {next})",
                id.0
            )));
        }
        let size = alloc_len(u64::from(len));
        let offset = {
            let mut st = self.state.lock();
            st.check_writable()?;
            if for_checkpoint && st.ckpt.as_ref().is_some_and(|c| c.ending.is_some()) {
                return Err(Error::InvalidArgument(
                    "write for a checkpoint that is already ending".into(),
                ));
            }
            st.in_flight += size;
            st.alloc.allocate(size)
        };
        let crc = crc32c::crc32c(bytes);
        let result = self
            .file
            .write_at(offset, &AlignedBuf::from_slice(bytes), cat);
        let mut st = self.state.lock();
        st.in_flight -= size;
        if let Err(e) = result {
            st.alloc.free(offset, size);
            st.poison(&e);
            return Err(e.into());
        }
        let ext = Extent { offset, len, crc };
        let old_live = st.live.insert(id, ext);
        st.writes += 1;
        let write = st.writes;
        st.stamps.insert(id, write);
        let old_ckpt = match st.ckpt.as_mut() {
            Some(c) if for_checkpoint && c.ending.is_none() => c.map.insert(id, ext),
            _ => None,
        };
        // B3, once per distinct old extent.
        st.release(id, old_live);
        if old_ckpt != old_live {
            st.release(id, old_ckpt);
        }
        Ok(ext)
    }

    /// The environment this file belonged to was reopened (`Env::reopen`): a newer
    /// `BlockFile` owns the file from now on, and its allocator knows nothing of this one's,
    /// so this one refuses every write (block, checkpoint, sync) as if poisoned (B8).
    pub fn retire(&self) {
        self.retired.store(true, Ordering::SeqCst);
        let mut st = self.state.lock();
        if st.poisoned.is_none() {
            st.poisoned =
                Some("the environment was reopened; this handle of the file is retired".into());
        }
    }

    /// Whether `retire` was called: the environment this file belonged to was reopened.
    pub fn is_retired(&self) -> bool {
        self.retired.load(Ordering::Relaxed)
    }

    /// Removes `id` from L and frees its extent unless D or C references it (B3). Freeing a
    /// node that has no live block is a no-op.
    pub fn free_node(&self, id: NodeId) {
        let mut st = self.state.lock();
        let old = st.live.remove(&id);
        st.stamps.remove(&id);
        st.release(id, old);
    }

    /// Starts a checkpoint: C := L. Returns its sequence number. Only one runs at a time.
    pub fn checkpoint_begin(&self) -> u64 {
        let mut st = self.state.lock();
        assert!(st.ckpt.is_none(), "a checkpoint is already running");
        let seq = st.durable_seq + 1;
        let map = st.live.clone();
        st.ckpt = Some(Checkpoint {
            seq,
            map,
            ending: None,
        });
        seq
    }

    /// Ends the running checkpoint: writes C's BTT and the header in the order of B4, then
    /// D := C and the old D's unreferenced extents are freed (B5). I/O is `Checkpoint`.
    /// Writers are not blocked while it writes and syncs.
    #[allow(
        clippy::expect_used,
        reason = "checkpoint_end is only called after checkpoint_begin set the checkpoint; the checkpoint set by checkpoint_begin is taken only here, under the same lock"
    )]
    pub fn checkpoint_end(&self, root: NodeId, lsn: u64, meta: &[u8]) -> Result<()> {
        check_meta(meta)?;
        let (seq, table, btt_offset, btt_size) = {
            let mut st = self.state.lock();
            st.check_writable()?;
            let c = st
                .ckpt
                .as_ref()
                .expect("checkpoint_end without checkpoint_begin");
            assert!(c.ending.is_none(), "checkpoint_end called twice");
            if root.0 != 0 && !c.map.contains_key(&root) {
                return Err(Error::InvalidArgument(format!(
                    "root node {} has no block in the checkpoint",
                    root.0
                )));
            }
            let table = btt::encode(&c.map);
            let seq = c.seq;
            let size = alloc_len(table.len() as u64);
            let offset = st.alloc.allocate(size);
            if let Some(c) = st.ckpt.as_mut() {
                c.ending = Some((offset, size));
            }
            (seq, table, offset, size)
        };
        let header = Header {
            seq,
            root: root.0,
            next_node_id: self.next_id.load(Ordering::SeqCst),
            btt_offset,
            btt_len: table.len() as u64,
            btt_crc: crc32c::crc32c(&table),
            lsn,
            meta: meta.to_vec(),
        };
        // B4: blocks and BTT durable before the header that names them.
        let cat = Category::Checkpoint;
        let result = self
            .file
            .write_at(btt_offset, &AlignedBuf::from_slice(&table), cat)
            .and_then(|()| self.file.sync(cat))
            .and_then(|()| {
                let slot = slot_offset(slot_of(seq));
                let page = AlignedBuf::from_slice(&header.encode());
                self.file.write_at(slot, &page, cat)
            })
            .and_then(|()| self.file.sync(cat));
        let mut st = self.state.lock();
        if let Err(e) = result {
            // B8: C stays "running" and its extents stay referenced; the file is dead.
            st.poison(&e);
            return Err(e.into());
        }
        let c = st.ckpt.take().expect("checkpoint vanished");
        let old_durable = std::mem::replace(&mut st.durable, c.map);
        let old_btt = std::mem::replace(&mut st.durable_btt, (btt_offset, btt_size));
        st.durable_seq = seq;
        // B5: retire what only the old D referenced.
        let retired: Vec<(u64, u64)> = old_durable
            .into_iter()
            .filter(|(id, e)| {
                !btt::references(&st.durable, *id, e) && !btt::references(&st.live, *id, e)
            })
            .map(|(_, e)| (e.offset, alloc_len(u64::from(e.len))))
            .collect();
        // B11: so do the extents B3 freed since the last checkpoint that are still free;
        // they leave the free list for the punch. Taken before the old D's table is freed,
        // which is not punched: it is small, and while nothing reuses it the older header
        // slot stays a fallback (docs/format-blockfile.md).
        let mut retired = retired;
        st.freed_compact_at = FREED_RANGES_COMPACT_AT;
        for (offset, len) in merge_ranges(std::mem::take(&mut st.freed)) {
            retired.extend(st.alloc.take_free_in(offset, len));
        }
        st.alloc.free(old_btt.0, old_btt.1);
        // B11: the blocks' pages go back to the filesystem before the allocator can hand
        // them out; meanwhile they count as in flight (B2).
        let retired_bytes: u64 = retired.iter().map(|r| r.1).sum();
        st.in_flight += retired_bytes;
        drop(st);
        let retired = merge_ranges(retired);
        self.punch_holes(&retired);
        let mut st = self.state.lock();
        st.in_flight -= retired_bytes;
        for (offset, len) in retired {
            st.alloc.free(offset, len);
        }
        Ok(())
    }

    /// Punches `ranges` out of the file (B11). A failure leaves the pages allocated and
    /// costs nothing else: the space is unreferenced either way, so it is not an error.
    fn punch_holes(&self, ranges: &[(u64, u64)]) {
        for &(offset, len) in ranges {
            match self.file.punch_hole(offset, len) {
                Ok(true) => {
                    self.punched_bytes.fetch_add(len, Ordering::Relaxed);
                }
                Ok(false) => return,
                Err(e) => {
                    tracing::warn!(error = %e, "could not return freed pages to the filesystem");
                    return;
                }
            }
        }
    }

    /// Sequence number of the last durable checkpoint.
    pub fn durable_seq(&self) -> u64 {
        self.state.lock().durable_seq
    }

    /// Allocated length of the file in bytes (headers, blocks, tables and free space).
    pub fn file_len(&self) -> u64 {
        self.state.lock().alloc.end()
    }

    /// Bytes given back to the filesystem as holes since open (B11).
    pub fn punched_bytes(&self) -> u64 {
        self.punched_bytes.load(Ordering::Relaxed)
    }

    /// Bytes on the free list.
    pub fn free_bytes(&self) -> u64 {
        self.state.lock().alloc.free_bytes()
    }

    /// The tree file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Makes every completed write durable (fdatasync); a failure poisons the file (B8).
    pub fn sync(&self, cat: Category) -> Result<()> {
        self.state.lock().check_writable()?;
        if let Err(e) = self.file.sync(cat) {
            self.state.lock().poison(&e);
            return Err(e.into());
        }
        Ok(())
    }

    /// The live image of `id`, or `InvalidArgument` when it has no block.
    #[cfg(test)]
    fn live_image(&self, id: NodeId) -> Result<Image> {
        self.image(id)
            .ok_or_else(|| Error::InvalidArgument(format!("node {} has no block", id.0)))
    }

    /// Reads the whole live block of `id` and verifies its crc (tests: the tree reads images).
    #[cfg(test)]
    pub(crate) fn read_block(&self, id: NodeId, cat: Category) -> Result<Vec<u8>> {
        Ok(self.read_image(id, &self.live_image(id)?, cat)?.to_vec())
    }

    /// Reads a range of the live block of `id` (tests: the tree reads images).
    #[cfg(test)]
    pub(crate) fn read_block_range(
        &self,
        id: NodeId,
        offset_in_block: u32,
        len: u32,
        cat: Category,
    ) -> Result<ReadBuf> {
        self.read_image_range(&self.live_image(id)?, offset_in_block, len, cat)
    }
}

fn check_meta(meta: &[u8]) -> Result<()> {
    if meta.len() > MAX_META {
        return Err(Error::TooLarge {
            what: "block file metadata",
            len: meta.len(),
            max: MAX_META,
        });
    }
    Ok(())
}

/// Reads and decodes header slot `slot`. The outer result is the I/O; the inner one says
/// whether the slot is valid (a file too short to hold the slot is an invalid slot).
fn read_slot(file: &DataFile, slot: u8) -> Result<std::result::Result<Header, String>> {
    match file.read_exact_at(slot_offset(slot), SLOT_SIZE, Category::Meta) {
        Ok(page) => Ok(Header::decode(&page, slot)),
        Err(shale_io::Error::ShortRead { got, .. }) => {
            Ok(Err(format!("file too short: slot has {got} bytes")))
        }
        Err(e) => Err(e.into()),
    }
}
