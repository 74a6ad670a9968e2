//! `Tree::verify`: checks every invariant of a tree — node invariants N1–N3, key ranges
//! against the parents' pivots, heights, that every leaf is at the same depth, that no node
//! is reachable twice, and (through the block file) checksums, the translation table and
//! free space. Nodes not in the cache are read from disk without being cached.

use super::node::{Internal, Leaf, NodeBody, PartDesc};
use super::segment::Seg;
use super::{Stall, Tree};
use crate::block::NodeId;
use crate::{Category, Error, Location, Result};
use std::collections::HashSet;
use std::sync::Arc;

/// The shape of a tree as `verify_report` found it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TreeShape {
    /// Entries a full scan returns (buffered messages applied).
    pub entries: u64,
    /// Levels above the leaves (0 = the root is a leaf).
    pub height: u32,
    /// Internal nodes.
    pub internal_nodes: u64,
    /// Leaves.
    pub leaves: u64,
    /// Leaf basements.
    pub basements: u64,
    /// Messages waiting in internal nodes' buffers.
    pub buffered_messages: u64,
    /// Largest sum of buffer bytes in one internal node.
    pub max_internal_buffer_bytes: u64,
    /// Largest sum of entry bytes in one leaf.
    pub max_leaf_bytes: u64,
    /// Median raw size of a basement, in bytes.
    pub median_basement_bytes: u64,
    /// Median on-disk (compressed, checksummed) size of a basement of a written leaf: what a
    /// point lookup that misses the cache reads, before rounding to the I/O alignment.
    pub median_stored_basement_bytes: u64,
    /// What a point lookup of a uniformly chosen key reads for its basement, on average:
    /// the stored size of each basement of a written leaf rounded up to the 4 KiB I/O unit,
    /// weighted by the basement's entries (a big basement holds more of the keys looked up,
    /// so the median understates it when sizes are spread).
    pub mean_read_basement_bytes: u64,
}

impl Tree {
    /// Checks the whole tree; returns its shape, with the number of entries it holds (after
    /// applying buffered messages).
    pub fn verify(self: &std::sync::Arc<Self>) -> Result<TreeShape> {
        // Hold off background flushes (which split and merge below the root) for the walk,
        // and wait out a flush step already running: the walk reads a parent, then its
        // children, each at its own moment. Writers still add to the root, which is read in
        // one piece.
        let _quiet = Quiet::new(&self.verifying);
        self.with_write(|_, _| Ok(()))?;
        let root = self.read_state().root;
        let mut seen = HashSet::new();
        let mut leaf_depth = None;
        let mut shape = TreeShape::default();
        let mut basement_sizes = Vec::new();
        let mut stored_sizes = Vec::new();
        let mut read_weighted = (0u128, 0u128);
        let mut walk = Walk {
            seen: &mut seen,
            leaf_depth: &mut leaf_depth,
            shape: &mut shape,
            basement_sizes: &mut basement_sizes,
            stored_sizes: &mut stored_sizes,
            read_weighted: &mut read_weighted,
        };
        self.verify_node(root, None, None, None, 0, &mut walk)?;
        shape.median_basement_bytes = median(&mut basement_sizes);
        shape.median_stored_basement_bytes = median(&mut stored_sizes);
        shape.mean_read_basement_bytes = read_weighted
            .0
            .checked_div(read_weighted.1)
            .map_or(0, |m| m as u64);
        shape.height = leaf_depth.unwrap_or(0) as u32;
        {
            // Every block write and free happens under the tree's write lock: holding the read
            // lock keeps the file still while it is checked (checkpoints are held off by the
            // caller, `TreeHandle::verify`).
            let _still = self.read_state();
            self.file.verify()?;
        }
        let mut cursor_count = 0u64;
        let mut c = super::Cursor::new(self.clone(), Arc::new(self.snapshots.register()));
        c.seek_to_first()?;
        let mut last: Option<Vec<u8>> = None;
        while c.valid() {
            if last.as_deref().is_some_and(|l| l >= c.key()) {
                return Err(self.bad(root, "cursor returned keys out of order"));
            }
            last = Some(c.key().to_vec());
            cursor_count += 1;
            c.next()?;
        }
        shape.entries = cursor_count;
        Ok(shape)
    }

    fn verify_node(
        &self,
        id: NodeId,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
        expect_height: Option<u32>,
        depth: usize,
        w: &mut Walk<'_>,
    ) -> Result<()> {
        if !w.seen.insert(id) {
            return Err(self.bad(id, "node reachable twice"));
        }
        let body = self.snapshot_node(id)?;
        w.record(&body);
        let (height, pivots, children, first, last) = match &body {
            NodeBody::Leaf(l) => {
                let keys: Vec<&[u8]> = l
                    .basements
                    .iter()
                    .flatten()
                    .flat_map(|b| b.iter().map(|(k, _)| k))
                    .collect();
                (
                    0,
                    l.pivots.clone(),
                    Vec::new(),
                    keys.first().map(|k| k.to_vec()),
                    keys.last().map(|k| k.to_vec()),
                )
            }
            NodeBody::Internal(n) => {
                let first = n
                    .buffers
                    .iter()
                    .flatten()
                    .find_map(|b| b.iter().next().map(|(k, _)| k.to_vec()));
                let last = n
                    .buffers
                    .iter()
                    .flatten()
                    .rev()
                    .find_map(|b| b.iter().next_back().map(|(k, _)| k.to_vec()));
                (n.height, n.pivots.clone(), n.children.clone(), first, last)
            }
        };
        if expect_height.is_some_and(|h| h != height) {
            return Err(self.bad(
                id,
                format!("height {height}, parent expects {expect_height:?}"),
            ));
        }
        let in_range = |k: &[u8]| lo.is_none_or(|lo| k >= lo) && hi.is_none_or(|hi| k < hi);
        for k in pivots.iter().chain(first.iter()).chain(last.iter()) {
            if !in_range(k) {
                return Err(self.bad(id, "key or pivot outside the range its parent gives it"));
            }
        }
        if height == 0 {
            match w.leaf_depth {
                Some(d) if *d != depth => return Err(self.bad(id, "leaves at different depths")),
                _ => *w.leaf_depth = Some(depth),
            }
            return Ok(());
        }
        for (i, child) in children.iter().enumerate() {
            let clo = if i == 0 {
                lo
            } else {
                Some(pivots[i - 1].as_slice())
            };
            let chi = if i == pivots.len() {
                hi
            } else {
                Some(pivots[i].as_slice())
            };
            self.verify_node(*child, clo, chi, Some(height - 1), depth + 1, w)?;
        }
        Ok(())
    }
}

/// Counts a running verification for as long as it lives.
struct Quiet<'a>(&'a std::sync::atomic::AtomicUsize);

impl<'a> Quiet<'a> {
    fn new(counter: &'a std::sync::atomic::AtomicUsize) -> Self {
        counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Quiet(counter)
    }
}

impl Drop for Quiet<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// What a verification walk carries down the tree.
struct Walk<'a> {
    seen: &'a mut HashSet<NodeId>,
    leaf_depth: &'a mut Option<usize>,
    shape: &'a mut TreeShape,
    basement_sizes: &'a mut Vec<u64>,
    stored_sizes: &'a mut Vec<u64>,
    /// Sum over written basements of entries x rounded stored size, and of entries.
    read_weighted: &'a mut (u128, u128),
}

fn median(sizes: &mut [u64]) -> u64 {
    sizes.sort_unstable();
    sizes.get(sizes.len() / 2).copied().unwrap_or(0)
}

impl Walk<'_> {
    fn record(&mut self, body: &NodeBody) {
        match body {
            NodeBody::Leaf(l) => {
                self.shape.leaves += 1;
                self.shape.basements += l.basements.len() as u64;
                self.shape.max_leaf_bytes = self.shape.max_leaf_bytes.max(l.loaded_bytes() as u64);
                self.basement_sizes
                    .extend(l.basements.iter().flatten().map(|b| b.bytes() as u64));
                self.stored_sizes
                    .extend(l.parts.iter().map(|d| u64::from(d.stored_len)));
                if l.parts.len() == l.basements.len() {
                    let page = shale_io::PAGE_SIZE as u128;
                    let tables = l.tables.iter().map(Option::as_deref);
                    let tables = tables.chain(std::iter::repeat(None));
                    for ((b, d), t) in l.basements.iter().zip(&l.parts).zip(tables) {
                        let entries = b.as_ref().map_or(0, |b| b.len()) as u128;
                        let rounded = |d: &PartDesc| u128::from(d.stored_len).div_ceil(page) * page;
                        // A point read of a basement written in segments reads one segment:
                        // their mean, as if the entries were spread evenly.
                        let read = match t {
                            None => rounded(d),
                            Some(t) => {
                                let all: u128 = t.descs().map(|d| rounded(&d)).sum();
                                all / t.len() as u128
                            }
                        };
                        self.read_weighted.0 += entries * read;
                        self.read_weighted.1 += entries;
                    }
                }
            }
            NodeBody::Internal(n) => {
                self.shape.internal_nodes += 1;
                self.shape.buffered_messages += n
                    .buffers
                    .iter()
                    .flatten()
                    .map(|b| b.len() as u64)
                    .sum::<u64>();
                self.shape.max_internal_buffer_bytes = self
                    .shape
                    .max_internal_buffer_bytes
                    .max(n.buffer_bytes() as u64);
            }
        }
    }
}

impl Tree {
    /// A copy of a node's contents: from the cache (checked), or read from disk.
    fn snapshot_node(&self, id: NodeId) -> Result<NodeBody> {
        let cached = self.with_read(|_, st| match st.node(id) {
            Some(n) => {
                n.check().map_err(|r| Stall::Err(self.bad(id, r)))?;
                match &n.body {
                    NodeBody::Leaf(l) if !l.all_loaded() => {
                        // Under the read lock the image cannot change (every write takes
                        // the write lock), so the pieces are compared with it as it is.
                        self.check_pieces_against_image(id, l).map_err(Stall::Err)?;
                        Ok(None)
                    }
                    NodeBody::Internal(x) if !x.all_loaded() => {
                        self.check_filters_against_image(id, x)
                            .map_err(Stall::Err)?;
                        Ok(None)
                    }
                    body if !body.all_loaded() => Ok(None),
                    body => Ok(Some(body.clone())),
                }
            }
            None => Ok(None),
        })?;
        if let Some(body) = cached {
            return Ok(body);
        }
        // A concurrent rewrite may free and reuse the extent being read: a failure while the
        // node's extent moved is stale, so read again; so is an image replaced since.
        // A node being written out is read once its write ended (K2).
        loop {
            self.writeback.wait_for(id);
            let before = self.file.image(id);
            match self.read_node_image(id, Category::Meta) {
                Ok((img, body)) => {
                    if Some(img) == self.file.image(id) && !self.writeback.contains(id) {
                        return Ok(body);
                    }
                }
                Err(e) if self.file.image(id) != before && !matches!(e, Error::Io(_)) => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Checks that every piece of cached leaf `l` (a segment of an evicted basement read
    /// alone, N6) holds exactly the entries of its segment in the leaf's on-disk image.
    fn check_pieces_against_image(&self, id: NodeId, l: &Leaf) -> Result<()> {
        if !l.basements.iter().any(|s| s.has_pieces()) {
            return Ok(());
        }
        let (_, image) = self.read_node_image(id, Category::Meta)?;
        let NodeBody::Leaf(disk) = image else {
            return Err(self.bad(id, "a cached leaf is an internal node on disk"));
        };
        for (b, slot) in l.basements.iter().enumerate() {
            let Some(t) = l.tables.get(b).and_then(Option::as_deref) else {
                continue;
            };
            let Some(whole) = disk.basements.get(b).and_then(|s| s.as_ref()) else {
                return Err(self.bad(id, format!("basement {b} missing from the image")));
            };
            for (s, piece) in slot.pieces().enumerate() {
                let Some(piece) = piece else { continue };
                let (lo, hi) = t.range(s);
                let want: Vec<_> = whole
                    .iter()
                    .filter(|(k, _)| lo.is_none_or(|lo| *k >= lo) && hi.is_none_or(|hi| *k < hi))
                    .map(|(k, e)| (k.to_vec(), e.to_entry()))
                    .collect();
                let have: Vec<_> = piece
                    .iter()
                    .map(|(k, e)| (k.to_vec(), e.to_entry()))
                    .collect();
                if want != have {
                    let what = format!("basement {b} segment {s} differs from the image (N6)");
                    return Err(self.bad(id, what));
                }
            }
        }
        Ok(())
    }

    /// Checks that every key filter of cached internal node `x` (a buffer's, N4, or an
    /// evicted segment's, S3: read from the image's filter table or built in memory) passes
    /// every key its buffer or segment holds in the node's on-disk image: a filter that
    /// ruled out a buffered key would hide the key's newest messages from lookups.
    fn check_filters_against_image(&self, id: NodeId, x: &Internal) -> Result<()> {
        let has_segment_filters = x
            .segments
            .iter()
            .flatten()
            .any(|s| matches!(s, Seg::Evicted(_) | Seg::Loaded(_, Some(_))));
        if x.filters.iter().all(Option::is_none) && !has_segment_filters {
            return Ok(());
        }
        let (_, image) = self.read_node_image(id, Category::Meta)?;
        let NodeBody::Internal(disk) = image else {
            return Err(self.bad(id, "a cached internal node is a leaf on disk"));
        };
        for c in 0..x.buffers.len() {
            let Some(keys) = disk.buffers.get(c).and_then(Option::as_ref) else {
                return Err(self.bad(id, format!("buffer {c} missing from the image")));
            };
            let table = x.parts.get(c).and_then(|d| d.segs.as_deref());
            for (k, _) in keys.iter() {
                let whole = x.filters.get(c).and_then(Option::as_ref);
                let seg = table.and_then(|t| x.segments.get(c)?.get(t.index(k)));
                let seg = match seg {
                    Some(Seg::Evicted(f) | Seg::Loaded(_, Some(f))) => Some(f),
                    _ => None,
                };
                if whole.into_iter().chain(seg).any(|f| !f.may_contain(k)) {
                    let what =
                        format!("a key filter of buffer {c} rules out a key it holds (N4, S3)");
                    return Err(self.bad(id, what));
                }
            }
        }
        Ok(())
    }

    fn bad(&self, id: NodeId, reason: impl Into<String>) -> Error {
        let e = self.file.extent(id);
        Error::corruption(
            self.file.path(),
            Location::Block {
                node: id.0,
                offset: e.map_or(0, |e| e.offset),
                len: e.map_or(0, |e| e.len as u64),
            },
            reason,
        )
    }
}
