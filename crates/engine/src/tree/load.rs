//! Reading nodes and partitions from the block file and installing them in the node table.
//! Reads happen with no tree lock held: each captures the node's image (extent and write
//! number, B10 in `block`) before reading exactly that image, and installs what it read only
//! if the image is still the live one. Comparing extents is not enough: first fit gives a
//! rewritten node back the extent it had two writes ago, and installing the older bytes
//! found there lost the newer versions (a flaky snapshot-isolation model test, 2026-11).

use super::basement::Basement;
use super::format;
use super::msg::MsgBuffer;
use super::node::{Leaf, Node, NodeBody, PartDesc};
use super::segment::{self, BufferDesc, Seg, SegRead, SegTable};
use super::slot::Slot;
use super::{Load, Tree, TreeState};
use crate::block::{Extent, Image, NodeId};
use crate::counters::EngineStats;
use crate::{Category, Error, Location, Result};
use std::sync::atomic::Ordering;

/// The most stored bytes a scan reads ahead in one `pread` (`Load::Run`): the basements
/// after the one it needs, which it will need next. With small read units a scan read
/// each basement on its own: 4 KiB basements scanned at a third of the rate of 64 KiB ones.
pub(crate) const SCAN_READ_BYTES: u32 = 256 << 10;

impl Tree {
    /// Performs one `Load`, then evicts if the cache went over budget.
    ///
    /// A read races with a concurrent rewrite of the same node, whose old extent may be
    /// reused at once: if the read fails while the node's extent changed underneath it, the
    /// failure is stale and the caller simply retries against the new image.
    ///
    /// The loaded node is pinned for the calling operation (recorded in `pinned`) so that the
    /// eviction this load may trigger cannot take it before the operation retries.
    pub(crate) fn load(&self, what: Load, pinned: &mut Vec<NodeId>) -> Result<()> {
        self.cache.misses.fetch_add(1, Ordering::Relaxed);
        let id = match what {
            Load::Node(id)
            | Load::Header(id)
            | Load::Partition(id, _)
            | Load::Segment(id, _, _)
            | Load::Run(id, _, _) => id,
        };
        // K2: the live image of a node being written out is older than the node.
        self.writeback.wait_for(id);
        let before = self.file.image(id);
        let outcome = match what {
            Load::Node(id) => self.load_node(id),
            Load::Header(id) => self.load_header(id),
            Load::Partition(id, i) => self.load_partition(id, i, 0, usize::MAX),
            Load::Segment(id, c, s) => self.load_segment(id, c, s),
            Load::Run(id, i, last) => self.load_partition(id, i, SCAN_READ_BYTES, last),
        };
        match outcome {
            Err(e) if self.file.image(id) != before && !matches!(e, Error::Io(_)) => {}
            other => other?,
        }
        // Pinned even if a racing eviction already took it: the pin then protects nothing
        // and `unpin` drops it with the operation's others.
        *self.pins.lock().entry(id).or_insert(0) += 1;
        pinned.push(id);
        self.evict_if_needed()
    }

    fn image_of(&self, id: NodeId) -> Result<Image> {
        self.file.image(id).ok_or_else(|| {
            Error::corruption(
                self.file.path(),
                Location::Block {
                    node: id.0,
                    offset: 0,
                    len: 0,
                },
                "node is referenced but has no entry in the block translation table",
            )
        })
    }

    pub(crate) fn corrupt(&self, id: NodeId, e: &Extent, reason: impl Into<String>) -> Error {
        Error::corruption(
            self.file.path(),
            Location::Block {
                node: id.0,
                offset: e.offset,
                len: e.len as u64,
            },
            reason,
        )
    }

    /// Reads and decodes the live image of a whole node (no installation).
    pub(crate) fn read_node_image(&self, id: NodeId, cat: Category) -> Result<(Image, NodeBody)> {
        let img = self.image_of(id)?;
        let extent = img.extent;
        let bytes = self.file.read_image(id, &img, cat)?;
        let body = format::decode(&bytes).map_err(|r| self.corrupt(id, &extent, r))?;
        let node = Node::new(body, false);
        node.check().map_err(|r| self.corrupt(id, &extent, r))?;
        EngineStats::bump(&self.stats.nodes_read);
        Ok((img, node.body))
    }

    fn load_node(&self, id: NodeId) -> Result<()> {
        // The image read and what it decodes to (partitions are about twice their stored
        // size), held until the node's own charge replaces them.
        let len = self.image_of(id)?.extent.len as usize;
        let flight = self.hold(3 * len)?;
        let (img, body) = self.read_node_image(id, Category::UserRead)?;
        let node = Node::new(body, false);
        drop(flight);
        self.make_room(node.mem_bytes())?;
        self.install_node(id, img, node);
        Ok(())
    }

    /// Installs `node`, read from image `img`, in place of nothing or of a clean skeleton;
    /// true if it did. A node rewritten since the read is left alone (B10): the caller
    /// retries and decides again.
    pub(crate) fn install_node(&self, id: NodeId, img: Image, node: Node) -> bool {
        let mut st = self.write_state();
        // K2: not an image a write out is replacing.
        if self.file.image(id) != Some(img) || self.writeback.contains(id) {
            return false;
        }
        let replace = match st.node(id) {
            None => true,
            Some(n) => !n.dirty && !n.body.all_loaded(),
        };
        if replace {
            st.remove_node(id, &self.cache);
            st.insert_node(id, node, &self.cache);
        }
        replace
    }

    fn load_header(&self, id: NodeId) -> Result<()> {
        let img = self.image_of(id)?;
        let extent = img.extent;
        let prefix_len = extent.len.min(4096);
        let prefix = self
            .file
            .read_image_range(&img, 0, prefix_len, Category::UserRead)?;
        let header_len =
            format::header_len_from_prefix(&prefix).map_err(|r| self.corrupt(id, &extent, r))?;
        if header_len > extent.len as usize {
            return Err(self.corrupt(
                id,
                &extent,
                format!("header length {header_len} exceeds the block"),
            ));
        }
        let header = if header_len <= prefix.len() {
            format::decode_header(&prefix)
        } else {
            let full =
                self.file
                    .read_image_range(&img, 0, header_len as u32, Category::UserRead)?;
            format::decode_header(&full)
        }
        .map_err(|r| self.corrupt(id, &extent, r))?;
        EngineStats::bump(&self.stats.headers_read);
        let node = Node::new(format::skeleton(header), false);
        node.check().map_err(|r| self.corrupt(id, &extent, r))?;
        self.make_room(node.mem_bytes())?;
        let mut st = self.write_state();
        // K2, as in `install_node`.
        let live = self.file.image(id) == Some(img) && !self.writeback.contains(id);
        if st.node(id).is_none() && live {
            st.insert_node(id, node, &self.cache);
        }
        Ok(())
    }

    /// Reads partition `i` (a basement or a message buffer) of a cached, partially loaded node
    /// with one exact-size read, and installs it if the node's image is still the one read.
    /// Of a leaf it also reads the unloaded basements after `i` whose stored bytes follow
    /// on, while the read stays within `run_bytes` and basement `last` (`Load::Run`;
    /// `run_bytes` 0 for a point read).
    fn load_partition(&self, id: NodeId, i: usize, run_bytes: u32, last: usize) -> Result<()> {
        // What to read and the image are taken under one lock: a cached node's descriptors
        // describe its live image (`write_node` changes both under the write lock).
        let (wanted, img) = {
            let st = self.read_state();
            let wanted = match st.node(id).map(|n| &n.body) {
                Some(NodeBody::Leaf(l)) => {
                    basement_run(l, i, run_bytes, last).map(Wanted::Basements)
                }
                Some(NodeBody::Internal(n)) if n.buffers.get(i).is_some_and(Option::is_none) => {
                    n.parts.get(i).cloned().map(Wanted::Buffer)
                }
                _ => None,
            };
            let Some(wanted) = wanted else {
                return Ok(());
            };
            (wanted, self.image_of(id)?)
        };
        match wanted {
            Wanted::Buffer(desc) => self.read_buffer(id, i, desc, img),
            Wanted::Basements(descs) => self.read_basements(id, &descs, img),
        }
    }

    /// Reads and installs message buffer `i` of internal node `id` (`load_partition`).
    fn read_buffer(&self, id: NodeId, i: usize, bdesc: BufferDesc, img: Image) -> Result<()> {
        let desc = bdesc.whole;
        let what = format!("partition {i}");
        let buffer = self.read_buffer_bytes(id, &img, &desc, &what, |stored| {
            segment::decode_whole(&bdesc, stored)
        })?;
        let mut st = self.write_state();
        if self.file.image(id) != Some(img) || st.node(id).is_none() {
            return Ok(());
        }
        let cache = self.cache.clone();
        st.modify(id, &cache, |n| {
            if let NodeBody::Internal(x) = &mut n.body {
                if x.parts.get(i).map(|d| d.whole) == Some(desc) && x.buffers[i].is_none() {
                    x.buffers[i] = Some(buffer);
                    // N5: the whole buffer replaces any segments read alone.
                    if let Some(p) = x.segments.get_mut(i) {
                        *p = Vec::new();
                    }
                    // N4: the buffer keeps its filter for its next eviction; a whole node,
                    // which may change, has none.
                    if x.all_loaded() {
                        x.filters = Vec::new();
                        x.segments = Vec::new();
                    }
                }
            }
        });
        Ok(())
    }

    /// Reads the stored bytes `desc` of a buffer (whole or one segment, named `what` in
    /// errors) from image `img` of node `id` with one exact `pread`, decodes them, counts
    /// the read, and makes room for the result; the stored and decompressed bytes are
    /// charged until then.
    fn read_buffer_bytes(
        &self,
        id: NodeId,
        img: &Image,
        desc: &PartDesc,
        what: &str,
        decode: impl FnOnce(&[u8]) -> std::result::Result<MsgBuffer, String>,
    ) -> Result<MsgBuffer> {
        let extent = img.extent;
        if desc.offset as u64 + desc.stored_len as u64 > extent.len as u64 {
            return Err(self.corrupt(id, &extent, format!("{what} extends past the block")));
        }
        let flight = self.hold(desc.stored_len as usize + desc.raw_len as usize)?;
        let stored =
            self.file
                .read_image_range(img, desc.offset, desc.stored_len, Category::UserRead)?;
        let buffer =
            decode(&stored).map_err(|r| self.corrupt(id, &extent, format!("{what}: {r}")))?;
        EngineStats::bump(&self.stats.buffers_read);
        let bytes = &self.stats.buffer_read_bytes;
        bytes.fetch_add(stored.device_bytes() as u64, Ordering::Relaxed);
        drop((flight, stored));
        self.make_room(buffer.mem_bytes())?;
        Ok(buffer)
    }

    /// Reads segment `s` of evicted partition `c` of node `id` alone (one exact `pread`)
    /// and installs it if the node's image and the partition's descriptor are still the
    /// ones read (B10, S3, N6).
    fn load_segment(&self, id: NodeId, c: usize, s: usize) -> Result<()> {
        // Only this segment's descriptor and range leave the lock, not the whole table.
        let (whole, seg, img) = {
            let st = self.read_state();
            let n = match st.node(id).map(|n| &n.body) {
                Some(NodeBody::Internal(n)) => n,
                Some(NodeBody::Leaf(l)) => {
                    let Some(read) = leaf_segment(l, c, s) else {
                        return Ok(());
                    };
                    let img = self.image_of(id)?;
                    drop(st);
                    return self.read_basement_segment(id, c, s, read, img);
                }
                None => return Ok(()),
            };
            let slot = n.segments.get(c).and_then(|p| p.get(s));
            let loaded = slot.is_some_and(Seg::is_loaded);
            let seg = n
                .parts
                .get(c)
                .and_then(|d| Some((d.whole, d.segs.as_ref()?.read_of(s)?)));
            match seg {
                Some((whole, seg)) if n.buffers[c].is_none() && !loaded => {
                    (whole, seg, self.image_of(id)?)
                }
                _ => return Ok(()),
            }
        };
        let desc = seg.desc;
        let what = format!("buffer {c} segment {s}");
        let piece = self.read_buffer_bytes(id, &img, &desc, &what, |stored| {
            let b = format::decode_partition_raw(&desc, stored).and_then(MsgBuffer::decode)?;
            let last = b.iter().next_back().map(|(k, _)| k);
            segment::check_piece(s, seg.range(), b.first_key(), last).map(|()| b)
        })?;
        let mut st = self.write_state();
        if self.file.image(id) != Some(img) || st.node(id).is_none() {
            return Ok(());
        }
        // The segment adds exactly its own bytes to the node's charge: `modify` recomputed
        // the whole node's, walking every buffer and segment of it, per segment read.
        let cache = self.cache.clone();
        let Some(node) = st.nodes.get_mut(&id) else {
            return Ok(());
        };
        let NodeBody::Internal(x) = &mut node.body else {
            return Ok(());
        };
        if x.parts.get(c).map(|d| d.whole) != Some(whole) || x.buffers[c].is_some() {
            return Ok(());
        }
        let k = seg.count;
        if x.segments.len() <= c {
            x.segments.resize_with(c + 1, Vec::new);
        }
        let p = &mut x.segments[c];
        if p.len() != k {
            // Empty: segments are kept only for this image's table (S3).
            p.clear();
            p.resize_with(k, Seg::default);
        }
        let before = p[s].mem_bytes();
        p[s].load(piece);
        cache.recharge(before, p[s].mem_bytes());
        node.may_have_evictable.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// Reads segment `s` of evicted basement `b` of leaf `id` alone (`load_segment`), and
    /// installs it as one of the basement's pieces (under the shared lock: `slot.rs`, L1)
    /// if the leaf's image and the basement's descriptor are still the ones read (B10, N6).
    fn read_basement_segment(
        &self,
        id: NodeId,
        b: usize,
        s: usize,
        seg: (PartDesc, SegRead),
        img: Image,
    ) -> Result<()> {
        let (whole, seg) = seg;
        let extent = img.extent;
        let desc = seg.desc;
        if desc.offset as u64 + desc.stored_len as u64 > extent.len as u64 {
            let what = format!("basement {b} segment {s} extends past the block");
            return Err(self.corrupt(id, &extent, what));
        }
        let flight = self.hold(desc.stored_len as usize + desc.raw_len as usize)?;
        let stored =
            self.file
                .read_image_range(&img, desc.offset, desc.stored_len, Category::UserRead)?;
        let piece = format::decode_partition_raw(&desc, &stored)
            .and_then(Basement::decode)
            .and_then(|p| {
                segment::check_piece(s, seg.range(), p.first_key(), p.last_key()).map(|()| p)
            })
            .map_err(|r| self.corrupt(id, &extent, format!("basement {b} segment {s}: {r}")))?;
        EngineStats::bump(&self.stats.basements_read);
        let bytes = &self.stats.basement_read_bytes;
        bytes.fetch_add(stored.device_bytes() as u64, Ordering::Relaxed);
        drop((flight, stored));
        self.make_room(piece.mem_bytes())?;
        let st = self.read_state();
        let Some((node, l)) = self.live_leaf(&st, id, img) else {
            return Ok(());
        };
        let same_table = l
            .tables
            .get(b)
            .and_then(Option::as_deref)
            .map(|t| t.desc(s));
        if l.parts.get(b) != Some(&whole) || same_table != Some(Some(desc)) {
            return Ok(());
        }
        if let Some(added) = l.basements[b].fill_piece(seg.count, s, piece) {
            self.cache.recharge(0, added);
        }
        node.may_have_evictable.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// Reads the basements `descs` (consecutive in the block, from `basement_run`) of leaf
    /// `id` with one exact-size `pread`, and installs each that is still unloaded if the
    /// leaf's image is still the one read (B10).
    fn read_basements(&self, id: NodeId, descs: &[Wanted1], img: Image) -> Result<()> {
        let extent = img.extent;
        let (first, last) = (&descs[0], &descs[descs.len() - 1]);
        let start = first.1.offset;
        let end = last.1.offset as u64 + last.1.stored_len as u64;
        if end > extent.len as u64 {
            let j = last.0;
            return Err(self.corrupt(id, &extent, format!("basement {j} extends past the block")));
        }
        let len = (end - start as u64) as u32;
        let raw: usize = descs.iter().map(|(_, d, _)| d.raw_len as usize).sum();
        // The stored bytes and the decompressed ones, held until the basements' own charges
        // replace them.
        let flight = self.hold(len as usize + raw)?;
        let stored = self
            .file
            .read_image_range(&img, start, len, Category::UserRead)?;
        let mut basements = Vec::with_capacity(descs.len());
        for (j, d, t) in descs {
            let at = (d.offset - start) as usize;
            let bytes = &stored[at..at + d.stored_len as usize];
            let b = segment::decompress_whole(d, t.as_deref(), bytes)
                .and_then(Basement::join)
                .map_err(|r| self.corrupt(id, &extent, format!("partition {j}: {r}")))?;
            basements.push((*j, *d, b));
        }
        EngineStats::bump(&self.stats.basements_read);
        let bytes = &self.stats.basement_read_bytes;
        bytes.fetch_add(stored.device_bytes() as u64, Ordering::Relaxed);
        drop((flight, stored));
        self.make_room(basements.iter().map(|(_, _, b)| b.mem_bytes()).sum())?;
        // Installed under the shared lock (`slot.rs`, L1): the image and the descriptors
        // change only under the exclusive lock, so what is checked here holds until the
        // lock is released.
        let st = self.read_state();
        let Some((node, l)) = self.live_leaf(&st, id, img) else {
            return Ok(());
        };
        // A basement adds exactly its own bytes to the leaf's charge: recomputing the
        // leaf's whole charge (`modify`) walked every basement of it, per point read.
        for (j, d, b) in basements {
            if l.parts.get(j) != Some(&d) {
                continue;
            }
            if let Some(bytes) = l.basements[j].fill(b) {
                self.cache.recharge(0, bytes);
            }
        }
        node.may_have_evictable.store(true, Ordering::Relaxed);
        Ok(())
    }
}

impl Tree {
    /// Leaf `id` as cached, if image `img` (the one just read) is still its live image:
    /// under the shared lock `st` the image and descriptors cannot change (`slot.rs`, L1),
    /// so what was read can be installed while it is held.
    fn live_leaf<'a>(
        &self,
        st: &'a TreeState,
        id: NodeId,
        img: Image,
    ) -> Option<(&'a Node, &'a Leaf)> {
        if self.file.image(id) != Some(img) {
            return None;
        }
        let node = st.nodes.get(&id)?;
        match &node.body {
            NodeBody::Leaf(l) => Some((node, l)),
            NodeBody::Internal(_) => None,
        }
    }
}

/// What `load_partition` reads, decided under the read lock.
enum Wanted {
    Buffer(BufferDesc),
    /// Basements consecutive in the block.
    Basements(Vec<Wanted1>),
}

/// A basement to read whole: its index, descriptor and segment table.
type Wanted1 = (usize, PartDesc, Option<Box<SegTable>>);

/// What reading segment `s` of basement `b` alone needs, if the basement is evicted, was
/// written in segments and that segment is not held: the basement's descriptor (to check
/// it is unchanged at install) and the segment's.
fn leaf_segment(l: &Leaf, b: usize, s: usize) -> Option<(PartDesc, SegRead)> {
    let slot = l.basements.get(b)?;
    if slot.is_some() || slot.piece(s).is_some() {
        return None;
    }
    let t = l.tables.get(b)?.as_deref()?;
    Some((*l.parts.get(b)?, t.read_of(s)?))
}

/// Basement `i` of `l` if it is unloaded, then the unloaded basements after it whose stored
/// bytes follow on in the block, while the span stays within `max_bytes` and ends at
/// basement `last` (basement `i` is taken whatever its size and bound); `None` when
/// basement `i` is loaded or does not exist.
fn basement_run(l: &Leaf, i: usize, max_bytes: u32, last: usize) -> Option<Vec<Wanted1>> {
    let mut descs: Vec<Wanted1> = Vec::new();
    let mut end = 0u64;
    let last = last.max(i);
    for (j, d) in l
        .parts
        .iter()
        .enumerate()
        .skip(i)
        .take_while(|(j, _)| *j <= last)
    {
        let next_end = d.offset as u64 + d.stored_len as u64;
        let fits = descs.first().is_none_or(|(_, f, _)| {
            next_end - f.offset as u64 <= max_bytes as u64 && d.offset as u64 == end
        });
        if l.basements.get(j).is_none_or(Slot::is_some) || !fits {
            break;
        }
        descs.push((j, *d, l.tables.get(j).cloned().flatten()));
        end = next_end;
    }
    (!descs.is_empty()).then_some(descs)
}
