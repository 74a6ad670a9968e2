//! In-memory tree nodes. An internal node holds pivots, child ids and one message buffer per
//! child; a leaf holds pivots between its basement partitions and the basements themselves.
//! Every partition (buffer or basement) of a clean node is either loaded or known only by its
//! on-disk descriptor (partial eviction): a point lookup then reads just the one it needs.
//!
//! Invariants (checked by `Node::check` before a node is written and after it is read):
//! N1. pivots are strictly increasing; an internal node has `pivots + 1` children and
//!     buffers, a leaf has `pivots + 1` basements.
//! N2. every key in child/basement `i` lies in `[pivots[i-1], pivots[i])`.
//! N3. a dirty node has every partition loaded (so it can be written whole); only a clean
//!     node, whose descriptors describe its on-disk image, has evicted partitions.
//! N4. an internal node's key filters exist only in a clean node that is not fully loaded,
//!     and `filters[c]` was built from buffer `c`'s keys as written (so a lookup may trust a
//!     negative answer). Loading buffer `c` back keeps its filter, so evicting it again
//!     needs no rebuild; a node that becomes fully loaded (the only kind that changes, N3)
//!     drops them all.
//! N5. `segments[c]` (segments of buffer `c` that lookups read alone, loaded or evicted
//!     with a key filter: `segment.rs`) holds something only while buffer `c` is evicted
//!     and its descriptor has a segment table of as many segments (S3); loading the whole
//!     buffer drops them.
//! N6. a leaf's pieces (segments of basement `b` read alone: `slot.rs`) are held only in
//!     a clean leaf whose `tables[b]` has as many segments, and describe its on-disk image:
//!     eviction drops them with the basement, and a leaf that is changed or written drops
//!     them all (`forget_image`, `set_image`). A lookup consults them only while basement
//!     `b` is evicted; a whole basement read under the shared lock cannot drop them (L1),
//!     so the two may be held together until the next eviction.

pub use super::basement::{entry_bytes, Basement};
use super::entry::Entry;
use super::filter::KeyFilter;
use super::msg::MsgBuffer;
use super::pivots::Pivots;
use super::segment::{BufferDesc, Seg, SegTable};
use super::slot::Slot;
use crate::block::NodeId;
use crate::Compression;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};

/// Per-entry overhead counted against node sizes (kind byte and two lengths).
pub const ENTRY_OVERHEAD_BYTES: usize = 1 + 4 + 4;

/// Where a partition's bytes are inside the node's block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartDesc {
    pub offset: u32,
    pub stored_len: u32,
    pub raw_len: u32,
    pub crc: u32,
    pub codec: Compression,
}

/// A leaf node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leaf {
    pub pivots: Pivots,
    /// Empty = evicted; read it back through `parts[i]` (`slot.rs`, L1).
    pub basements: Vec<Slot>,
    /// Descriptors of the on-disk image; empty for a leaf never written.
    pub parts: Vec<PartDesc>,
    /// Segment tables of the image's basements (`None` = written whole; empty when `parts`
    /// is, or for an image of format 4 or older).
    pub tables: Vec<Option<Box<SegTable>>>,
}

/// How a lookup reaches basement `b` of a leaf (`Leaf::reach`).
pub enum LeafReach<'a> {
    /// The basement, or the segment of it that holds the key, is loaded.
    Loaded(&'a Basement),
    /// Segment `s` must be read.
    Read(usize),
    /// The basement has no segments: read it whole.
    Whole,
}

impl Leaf {
    /// The largest key of the loaded basements.
    pub fn last_key(&self) -> Option<&[u8]> {
        self.basements
            .iter()
            .rev()
            .flatten()
            .find_map(Basement::last_key)
    }

    pub fn empty() -> Self {
        Leaf {
            pivots: Pivots::new(),
            basements: vec![Slot::loaded(Basement::new())],
            parts: Vec::new(),
            tables: Vec::new(),
        }
    }

    /// Builds a leaf from sorted entries, starting a new basement before an entry that
    /// would take the current one past `basement_bytes` (never before its first entry).
    pub fn from_entries(entries: BTreeMap<Vec<u8>, Entry>, basement_bytes: usize) -> Self {
        let mut pivots = Pivots::new();
        let mut basements = Vec::new();
        let mut current = BTreeMap::new();
        let mut bytes = 0;
        for (k, v) in entries {
            let sz = entry_bytes(&k, &v);
            if !current.is_empty() && bytes + sz > basement_bytes {
                pivots.push(k.clone());
                basements.push(Slot::loaded(Basement::from_entries(std::mem::take(
                    &mut current,
                ))));
                bytes = 0;
            }
            bytes += sz;
            current.insert(k, v);
        }
        basements.push(Slot::loaded(Basement::from_entries(current)));
        Leaf {
            pivots,
            basements,
            parts: Vec::new(),
            tables: Vec::new(),
        }
    }

    /// Re-cuts every basement that applied messages grew past twice `basement_bytes` into
    /// basements of about `basement_bytes`, so the read unit stays the configured size
    /// between splits (a leaf filled by messages would otherwise keep one basement the size
    /// of the node, and a point read of it would read the whole node). The leaf is fully
    /// loaded (it is being changed: N3); its pivots stay sorted and bound each basement.
    pub fn recut_oversized(&mut self, basement_bytes: usize) {
        for b in (0..self.basements.len()).rev() {
            let oversized = |bm: &mut Basement| bm.bytes() > 2 * basement_bytes && bm.len() > 1;
            let Some(basement) = self.basements[b].take_if(oversized) else {
                continue;
            };
            let pieces = basement.bytes().div_ceil(basement_bytes.max(1));
            let cut = basement.split_evenly(pieces);
            let mut pivots = Pivots::new();
            for piece in &cut[1..] {
                pivots.push(piece.key(0).to_vec());
            }
            self.basements
                .splice(b..=b, cut.into_iter().map(Slot::loaded));
            self.pivots.splice_at(b, pivots);
            self.forget_image();
        }
    }

    pub fn basement_index(&self, key: &[u8]) -> usize {
        self.pivots.count_le(key)
    }

    /// How a lookup of `key` reaches basement `b`: loaded (whole, or the segment holding
    /// the key, N6), by reading one segment, or by reading the whole basement.
    pub fn reach(&self, b: usize, key: &[u8]) -> LeafReach<'_> {
        let slot = &self.basements[b];
        if let Some(whole) = slot.as_ref() {
            return LeafReach::Loaded(whole);
        }
        let Some(t) = self.tables.get(b).and_then(Option::as_deref) else {
            return LeafReach::Whole;
        };
        let s = t.index(key);
        match slot.piece(s) {
            Some(piece) => LeafReach::Loaded(piece),
            None => LeafReach::Read(s),
        }
    }

    /// Forgets the on-disk image of a leaf being changed (N3, N6): its descriptors, segment
    /// tables and the pieces read from them.
    pub fn forget_image(&mut self) {
        // Pieces are read only through a table (N6): without one there are none to drop,
        // and a flush calls this for every message it applies.
        if self.parts.is_empty() && self.tables.is_empty() {
            return;
        }
        self.parts.clear();
        self.tables.clear();
        self.basements.iter_mut().for_each(|b| {
            b.take_pieces();
        });
    }

    /// Records the image just written: its descriptors and segment tables (N6: pieces of
    /// the image before are dropped).
    pub fn set_image(&mut self, parts: Vec<PartDesc>, tables: Vec<Option<Box<SegTable>>>) {
        self.forget_image();
        self.parts = parts;
        self.tables = tables;
    }

    pub fn all_loaded(&self) -> bool {
        self.basements.iter().all(Slot::is_some)
    }

    /// Drops every loaded basement that holds entries, and every piece (N6); returns the
    /// memory they held (their part of `Node::mem_bytes`, which an empty slot does not
    /// count).
    pub fn evict_basements(&mut self) -> usize {
        self.basements.iter_mut().map(Slot::evict).sum()
    }

    /// Whether eviction could drop something: a loaded basement with entries, or a piece.
    fn has_evictable(&self) -> bool {
        self.basements
            .iter()
            .any(|s| s.as_ref().is_some_and(|b| b.len() > 0) || s.has_pieces())
    }

    /// Memory of the slots (their places, loaded basements and pieces) and of the segment
    /// tables (part of `Node::mem_bytes`).
    fn slots_mem_bytes(&self) -> usize {
        let tables = self.tables.iter().flatten().map(|t| t.mem_bytes());
        let slots = self.basements.iter().map(Slot::mem_bytes);
        tables.chain(slots).sum::<usize>()
            + alloc_bytes(self.tables.capacity() * 8)
            + alloc_bytes(self.basements.capacity() * std::mem::size_of::<Slot>())
    }

    /// Bytes of entries in loaded basements.
    pub fn loaded_bytes(&self) -> usize {
        self.basements.iter().flatten().map(Basement::bytes).sum()
    }

    /// All entries of a fully loaded leaf, consuming it.
    pub fn into_entries(self) -> BTreeMap<Vec<u8>, Entry> {
        let mut all = BTreeMap::new();
        for mut b in self.basements {
            #[allow(
                clippy::expect_used,
                reason = "into_entries takes only fully loaded leaves"
            )]
            let b = b.take().expect("leaf must be fully loaded");
            all.append(&mut b.into_entries());
        }
        all
    }
}

/// An internal node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Internal {
    /// Distance to the leaves (1 = children are leaves).
    pub height: u32,
    pub pivots: Pivots,
    pub children: Vec<NodeId>,
    /// `None` = evicted; read it back through `parts[i]`.
    pub buffers: Vec<Option<MsgBuffer>>,
    /// Descriptors of the on-disk image; empty for a node never written.
    pub parts: Vec<BufferDesc>,
    /// Segments of evicted buffers that lookups read alone (N5); shorter than `buffers`
    /// (or an empty vector per child) where none was read.
    pub segments: Vec<Vec<Seg>>,
    /// Key filters of buffers (N4: only in a clean node not fully loaded; consulted only
    /// while `buffers[c]` is `None`; a shorter vector or `None` = no filter, the buffer must
    /// be read). See `filter.rs`.
    pub filters: Vec<Option<KeyFilter>>,
}

impl Internal {
    /// A node built in memory (every buffer loaded, never written).
    pub fn new(
        height: u32,
        pivots: Vec<Vec<u8>>,
        children: Vec<NodeId>,
        buffers: Vec<MsgBuffer>,
    ) -> Self {
        Internal {
            height,
            pivots: pivots.into(),
            children,
            buffers: buffers.into_iter().map(Some).collect(),
            parts: Vec::new(),
            segments: Vec::new(),
            filters: Vec::new(),
        }
    }

    pub fn child_index(&self, key: &[u8]) -> usize {
        self.pivots.count_le(key)
    }

    pub fn all_loaded(&self) -> bool {
        self.buffers.iter().all(Option::is_some)
    }

    /// True when evicted buffer `c` has a key filter (N4) that rules `key` out, so a lookup
    /// need not read the buffer.
    pub fn filter_rules_out(&self, c: usize, key: &[u8]) -> bool {
        self.filters
            .get(c)
            .and_then(Option::as_ref)
            .is_some_and(|f| !f.may_contain(key))
    }

    /// How a lookup of `key` reaches evicted buffer `c` (whose own filter, if any, did not
    /// rule the key out): through a loaded segment, not at all when the evicted segment's
    /// filter rules the key out, by reading one segment, or by reading the whole buffer
    /// (written as one segment).
    pub fn reach(&self, c: usize, key: &[u8]) -> Reach<'_> {
        let Some(t) = self.parts.get(c).and_then(|d| d.segs.as_deref()) else {
            return Reach::Whole;
        };
        let s = t.index(key);
        match self.segments.get(c).and_then(|p| p.get(s)) {
            Some(Seg::Loaded(b, _)) => Reach::Loaded(b),
            Some(Seg::Evicted(f)) if !f.may_contain(key) => Reach::RuledOut,
            _ => Reach::Read(s),
        }
    }

    /// Buffer `c` of a node being changed, which is fully loaded (N3).
    #[allow(
        clippy::expect_used,
        reason = "a changed internal node is fully loaded (N3)"
    )]
    pub fn buf(&self, c: usize) -> &MsgBuffer {
        self.buffers[c]
            .as_ref()
            .expect("a changed internal node is fully loaded (N3)")
    }

    #[allow(
        clippy::expect_used,
        reason = "a changed internal node is fully loaded (N3)"
    )]
    pub fn buf_mut(&mut self, c: usize) -> &mut MsgBuffer {
        self.buffers[c]
            .as_mut()
            .expect("a changed internal node is fully loaded (N3)")
    }

    /// Buffered bytes of child `c`: counted if loaded, the on-disk raw size if evicted.
    pub fn child_bytes(&self, c: usize) -> usize {
        match &self.buffers[c] {
            Some(b) => b.bytes(),
            None => self.parts.get(c).map_or(0, |d| d.whole.raw_len as usize),
        }
    }

    pub fn buffer_bytes(&self) -> usize {
        (0..self.buffers.len()).map(|c| self.child_bytes(c)).sum()
    }

    /// Index of the child with the heaviest buffer.
    #[allow(
        clippy::expect_used,
        reason = "an internal node has at least one child (N1)"
    )]
    pub fn heaviest_child(&self) -> usize {
        (0..self.buffers.len())
            .max_by_key(|&c| self.child_bytes(c))
            .expect("an internal node has at least one child")
    }
}

/// How a lookup reaches an evicted buffer (`Internal::reach`).
pub enum Reach<'a> {
    Loaded(&'a MsgBuffer),
    /// The key's segment holds no message for it.
    RuledOut,
    /// Segment `s` must be read.
    Read(usize),
    /// The buffer has no segments: read it whole.
    Whole,
}

/// What a node holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeBody {
    Leaf(Leaf),
    Internal(Internal),
}

impl NodeBody {
    /// Every partition loaded: the node can be changed or written.
    pub fn all_loaded(&self) -> bool {
        match self {
            NodeBody::Leaf(l) => l.all_loaded(),
            NodeBody::Internal(n) => n.all_loaded(),
        }
    }

    /// Whether partial eviction could free something: the node has an on-disk image and a
    /// loaded, non-empty partition. (Only clean nodes may be partially evicted: N3.)
    pub fn has_evictable_partitions(&self) -> bool {
        match self {
            NodeBody::Leaf(l) => l.parts.len() == l.basements.len() && l.has_evictable(),
            NodeBody::Internal(n) => {
                n.parts.len() == n.buffers.len()
                    && (n.buffers.iter().flatten().any(|b| !b.is_empty())
                        || n.segments.iter().flatten().any(Seg::is_loaded))
            }
        }
    }

    /// Drops every loaded, non-empty partition (empty ones cost nothing and need no read).
    pub fn evict_partitions(&mut self) {
        match self {
            NodeBody::Leaf(l) => {
                l.evict_basements();
            }
            NodeBody::Internal(n) => {
                n.segments.iter_mut().flatten().for_each(Seg::evict);
                n.filters.resize(n.buffers.len(), None);
                for (b, f) in n.buffers.iter_mut().zip(n.filters.iter_mut()) {
                    if let Some(buf) = b.take_if(|b| !b.is_empty()) {
                        // A filter kept from the buffer's last eviction still holds (N4).
                        f.get_or_insert_with(|| {
                            KeyFilter::build(buf.key_count(), buf.iter().map(|(k, _)| k))
                        });
                    }
                }
            }
        }
    }
}

/// A cached node with its cache and checkpoint state.
#[derive(Debug)]
pub struct Node {
    pub body: NodeBody,
    /// Changed since it was last written.
    pub dirty: bool,
    /// Part of the running checkpoint and not yet written for it: must be written (as it is)
    /// before anyone changes it.
    pub checkpoint_pending: bool,
    /// Clock reference bit.
    pub referenced: AtomicBool,
    /// Of a leaf: how many flushes in a row landed wholly after its last key (sequential
    /// inserts at its right edge); its split then leaves it full (`flush.rs`). In memory only.
    pub appends: u32,
    /// False only when eviction found no partition of this node to drop and nothing has been
    /// loaded or changed since: the clock then skips the scan of its partitions (with 4 KiB
    /// basements a skeleton leaf has ~1,000 slots, and that scan was 7% of a point read's
    /// CPU). Set by `Node::new` and again by every path that loads or changes a partition
    /// (`TreeState::modify`, `load.rs`'s basement reads); a hint that errs towards scanning.
    /// Atomic because a read installs basements under the shared lock (`slot.rs`, L1).
    pub may_have_evictable: AtomicBool,
}

impl Node {
    pub fn new(body: NodeBody, dirty: bool) -> Self {
        Node {
            body,
            dirty,
            checkpoint_pending: false,
            referenced: AtomicBool::new(true),
            may_have_evictable: AtomicBool::new(true),
            appends: 0,
        }
    }

    /// Counts a flush (or a promotion) of messages whose first key is `first` into this
    /// leaf: one more append if they all come after its last key, else the count starts
    /// over.
    pub fn note_append(&mut self, first: Option<&[u8]>) {
        if let NodeBody::Leaf(l) = &self.body {
            let after = match (l.last_key(), first) {
                (Some(last), Some(first)) => first > last,
                _ => true,
            };
            self.appends = if after {
                self.appends.saturating_add(1)
            } else {
                0
            };
        }
    }

    pub fn touch(&self) {
        self.referenced.store(true, Ordering::Relaxed);
    }

    /// Approximate memory held by this node (what the cache budget counts).
    pub fn mem_bytes(&self) -> usize {
        const NODE_OVERHEAD: usize = 256;
        NODE_OVERHEAD
            + match &self.body {
                NodeBody::Leaf(l) => {
                    l.pivots.iter().map(|p| p.len() + 32).sum::<usize>()
                        + l.pivots.index_bytes()
                        + l.parts.len() * 24
                        + l.slots_mem_bytes()
                }
                NodeBody::Internal(n) => {
                    n.pivots.iter().map(|p| p.len() + 32).sum::<usize>()
                        + n.pivots.index_bytes()
                        + n.children.len() * 8
                        + n.parts.iter().map(BufferDesc::mem_bytes).sum::<usize>()
                        + n.segments
                            .iter()
                            .flatten()
                            .map(Seg::mem_bytes)
                            .sum::<usize>()
                        + n.buffers
                            .iter()
                            .flatten()
                            .map(MsgBuffer::mem_bytes)
                            .sum::<usize>()
                        + n.filters
                            .iter()
                            .flatten()
                            .map(KeyFilter::bytes)
                            .sum::<usize>()
                }
            }
    }

    /// Checks N1–N3 (see the module doc). Cheap enough to run on every write and read.
    pub fn check(&self) -> Result<(), String> {
        match &self.body {
            NodeBody::Leaf(l) => {
                check_pivots(&l.pivots)?;
                if l.basements.len() != l.pivots.len() + 1 {
                    return Err(format!(
                        "leaf has {} basements for {} pivots",
                        l.basements.len(),
                        l.pivots.len()
                    ));
                }
                if self.dirty && !l.all_loaded() {
                    return Err("dirty leaf with an evicted basement (N3)".into());
                }
                if !l.all_loaded() && l.parts.len() != l.basements.len() {
                    return Err("evicted basement without a descriptor".into());
                }
                for (i, b) in l.basements.iter().enumerate() {
                    if let Some(b) = b.as_ref() {
                        check_range(&l.pivots, i, b.first_key(), b.last_key())?;
                    }
                }
                check_leaf_pieces(l, self.dirty)
            }
            NodeBody::Internal(n) => {
                check_pivots(&n.pivots)?;
                if n.children.len() != n.pivots.len() + 1 || n.buffers.len() != n.children.len() {
                    return Err(format!(
                        "internal node has {} children, {} buffers, {} pivots",
                        n.children.len(),
                        n.buffers.len(),
                        n.pivots.len()
                    ));
                }
                if n.height == 0 {
                    return Err("internal node with height 0".into());
                }
                if self.dirty && !n.all_loaded() {
                    return Err("dirty internal node with an evicted buffer (N3)".into());
                }
                if !n.all_loaded() && n.parts.len() != n.buffers.len() {
                    return Err("evicted buffer without a descriptor".into());
                }
                if (n.all_loaded() || self.dirty) && !n.filters.is_empty() {
                    return Err("key filter in a fully loaded or changed node (N4)".into());
                }
                if n.filters.len() > n.buffers.len() {
                    return Err("key filter without a buffer (N4)".into());
                }
                check_pieces(n)?;
                for (i, b) in n.buffers.iter().enumerate() {
                    let Some(b) = b else { continue };
                    let first = b.iter().next().map(|(k, _)| k);
                    let last = b.iter().next_back().map(|(k, _)| k);
                    check_range(&n.pivots, i, first, last)?;
                }
                Ok(())
            }
        }
    }
}

/// Memory one heap allocation of `n` bytes takes: jemalloc's size classes are 16 bytes
/// apart up to 128 and four per power of two above (so a 90 KB basement takes 96 KiB).
pub const fn alloc_bytes(n: usize) -> usize {
    if n <= 128 {
        return n.next_multiple_of(16);
    }
    let spacing = n.next_power_of_two() / 8;
    n.next_multiple_of(spacing)
}

/// Checks N5: loaded segments only of evicted buffers with a table of as many segments.
fn check_pieces(n: &Internal) -> Result<(), String> {
    if n.segments.len() > n.buffers.len() || (n.all_loaded() && !n.segments.is_empty()) {
        return Err("segments without an evicted buffer (N5)".into());
    }
    for (c, p) in n.segments.iter().enumerate() {
        if p.iter().all(|s| matches!(s, Seg::Unread)) {
            continue;
        }
        let k = n
            .parts
            .get(c)
            .and_then(|d| d.segs.as_ref())
            .map(|t| t.len());
        if n.buffers[c].is_some() || k != Some(p.len()) {
            return Err(format!(
                "segments of buffer {c} do not match its image (N5)"
            ));
        }
    }
    Ok(())
}

/// Checks N6: pieces only in a clean leaf, of basements whose table has as many segments,
/// each in its segment's range (S2).
fn check_leaf_pieces(l: &Leaf, dirty: bool) -> Result<(), String> {
    if !l.tables.is_empty() && l.tables.len() != l.parts.len() {
        return Err("leaf segment tables do not match its descriptors".into());
    }
    for (b, slot) in l.basements.iter().enumerate() {
        if slot.piece_count() == 0 {
            continue;
        }
        let t = l.tables.get(b).and_then(Option::as_deref);
        if dirty || t.map(|t| t.len()) != Some(slot.piece_count()) {
            return Err(format!(
                "pieces of basement {b} do not match its image (N6)"
            ));
        }
        #[allow(clippy::expect_used, reason = "the match above returned on None")]
        let t = t.expect("matched above");
        for (s, piece) in slot.pieces().enumerate() {
            if let Some(p) = piece {
                super::segment::check_piece(s, t.range(s), p.first_key(), p.last_key())
                    .map_err(|r| format!("basement {b}: {r}"))?;
            }
        }
    }
    Ok(())
}

fn check_pivots(pivots: &[Vec<u8>]) -> Result<(), String> {
    match pivots.windows(2).position(|w| w[0] >= w[1]) {
        Some(i) => Err(format!("pivots {i} and {} are not increasing", i + 1)),
        None => Ok(()),
    }
}

fn check_range(
    pivots: &[Vec<u8>],
    i: usize,
    first: Option<&[u8]>,
    last: Option<&[u8]>,
) -> Result<(), String> {
    if let (Some(first), Some(lo)) = (first, i.checked_sub(1).map(|j| pivots[j].as_slice())) {
        if first < lo {
            return Err(format!("partition {i} holds a key below its lower pivot"));
        }
    }
    if let (Some(last), Some(hi)) = (last, pivots.get(i).map(Vec::as_slice)) {
        if last >= hi {
            return Err(format!(
                "partition {i} holds a key at or above its upper pivot"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::Ts;

    #[test]
    fn a_basement_grown_by_messages_is_recut_to_the_read_unit() {
        let mut leaf = Leaf::empty();
        let basement = leaf.basements[0].as_mut().expect("loaded");
        for i in 0..2_000u32 {
            let key = format!("k{i:06}").into_bytes();
            basement.apply(&key, Ts(1), Some(vec![7; 40]), Ts(0), &Default::default());
        }
        let total = leaf.loaded_bytes();
        leaf.recut_oversized(4096);
        assert!(
            leaf.basements.len() >= total / 4096,
            "{} basements",
            leaf.basements.len()
        );
        assert_eq!(leaf.pivots.len() + 1, leaf.basements.len());
        assert!(leaf.pivots.windows(2).all(|w| w[0] < w[1]));
        for (b, bm) in leaf.basements.iter().enumerate() {
            let bm = bm.as_ref().expect("loaded");
            assert!(
                bm.bytes() <= 4096 + 200,
                "basement {b} has {} bytes",
                bm.bytes()
            );
            for (k, _) in bm.iter() {
                assert_eq!(leaf.basement_index(k), b);
            }
        }
        assert_eq!(leaf.loaded_bytes(), total);
        let sizes: Vec<usize> = leaf
            .basements
            .iter()
            .flatten()
            .map(Basement::bytes)
            .collect();
        let (min, max) = (sizes.iter().min(), sizes.iter().max());
        assert!(
            min.zip(max).is_some_and(|(min, max)| min * 10 >= max * 9),
            "even pieces, no small remainder: {sizes:?}"
        );
    }
}
