//! Tree-level salvage: what a damaged tree file still holds, read block by block without
//! opening it as a tree, for `verify` and `repair` (docs/operations.md). It reads only; the
//! environment's `salvage` module writes what it finds into a fresh file.
//!
//! Two sources, best first:
//! - **table**: the newest checkpoint whose translation table checks out
//!   (`block::salvage`). The walk starts at the root with its key range, so a block that
//!   fails its checksum or does not decode is reported with the key range its parent gave
//!   it; blocks under a lost internal node are then read from the table directly (their
//!   messages above are lost, their own entries are not).
//! - **scan**: no usable table (both headers or the table lost, or the table cut off by a
//!   truncation): every page of the data area is tried as the start of a node block. Old
//!   images of a node may be found beside the current one; per key the newest version wins,
//!   and messages are kept only when newer than what the leaves hold. A delete whose
//!   tombstone was already collected cannot be seen, so such a key may come back.
//!
//! What it hands on keeps the order a flush would apply (E1, Q1): each key's leaf versions
//! oldest first, then its buffered messages from the lowest level up, in buffer order.

use super::msg::{MsgBuffer, OpRef};
use super::node::Basement;
use super::segment::{self, BufferDesc};
use super::{decode_meta, format};
use crate::block::salvage::{self as block_salvage, DurableImage};
use crate::block::{Extent, NodeId};
use crate::vocab::Ts;
use crate::TreeOptions;
use std::collections::{BTreeMap, HashSet};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// One change to replay into the fresh tree: a leaf version or a buffered message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Change {
    pub ts: Ts,
    /// `OpRef::code` of the op.
    pub code: u8,
    pub payload: Vec<u8>,
}

impl Change {
    pub(crate) fn op(&self) -> Option<OpRef<'_>> {
        OpRef::from_code(self.code, &self.payload)
    }
}

/// A block that could not be read, with what is known of the keys it held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LostBlock {
    /// Node id (none for a block found by a page scan).
    pub node: Option<u64>,
    /// The partition (basement or message buffer) lost, when the rest of the block read.
    pub partition: Option<usize>,
    /// Byte offset of the block in the file.
    pub offset: u64,
    /// Its length in bytes.
    pub len: u64,
    /// Why it did not read.
    pub reason: String,
    /// Keys `[low, high)` its parent routed to it (`None` = unbounded or unknown).
    pub low: Option<Vec<u8>>,
    /// See `low`.
    pub high: Option<Vec<u8>>,
    /// True when the parent's pivots gave the range.
    pub range_known: bool,
    /// True when what was lost may be buffered messages (a message buffer, or a whole block
    /// of unknown kind): keys in the range then keep the values the leaves below hold, which
    /// may be older than the lost messages made them.
    pub messages: bool,
}

/// How the contents were found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Through the checkpoint's translation table.
    Table,
    /// By scanning the file's pages for blocks (the table did not read).
    Scan,
}

/// Everything readable in one tree file.
#[derive(Debug)]
pub(crate) struct Extracted {
    pub options: Option<TreeOptions>,
    /// The redo LSN of the checkpoint read (0 when unknown).
    pub lsn: u64,
    pub next_msn: u64,
    pub source: Source,
    /// Per key, the changes that rebuild it, in apply order.
    pub keys: BTreeMap<Vec<u8>, Vec<Change>>,
    pub lost: Vec<LostBlock>,
    pub problems: Vec<String>,
    pub leaves: u64,
    pub internals: u64,
}

/// Messages found in internal nodes, by key: (height, changes in buffer order).
type Buffered = BTreeMap<Vec<u8>, Vec<(u32, Change)>>;

/// The tree options recorded in a header's metadata, if it decodes.
pub(crate) fn options_from_meta(meta: &[u8]) -> Option<TreeOptions> {
    decode_meta(meta).ok().map(|(options, _, _)| options)
}

/// Reads what `path` still holds.
pub(crate) fn extract(path: &Path) -> std::io::Result<Extracted> {
    let image = block_salvage::read_durable(path)?;
    let (lsn, meta) = match &image.checkpoint {
        Some(cp) => (cp.lsn, Some(cp.meta.clone())),
        None => match block_salvage::lenient_meta(path)? {
            Some((lsn, meta)) => (lsn, Some(meta)),
            None => (0, None),
        },
    };
    let decoded = meta.as_deref().map(decode_meta).and_then(|m| m.ok());
    let mut out = Extracted {
        options: decoded.as_ref().map(|(o, _, _)| *o),
        lsn,
        next_msn: decoded.as_ref().map_or(1, |(_, msn, _)| *msn),
        source: Source::Table,
        keys: BTreeMap::new(),
        lost: Vec::new(),
        problems: image.problems.clone(),
        leaves: 0,
        internals: 0,
    };
    let mut leaves = BTreeMap::new();
    let mut buffered = Buffered::new();
    match image.checkpoint.as_ref() {
        Some(cp) => from_table(path, &image, cp.root, &mut leaves, &mut buffered, &mut out),
        None => {
            out.source = Source::Scan;
            from_scan(path, image.file_len, &mut leaves, &mut buffered, &mut out)?;
        }
    }
    out.keys = order(leaves, buffered, out.source == Source::Scan);
    Ok(out)
}

/// The newest leaf versions of each key, oldest first, with the newest's timestamp.
type Leaves = BTreeMap<Vec<u8>, Vec<Change>>;

/// One partition of a node: a leaf's basement or an internal node's buffer.
enum Part {
    Basement(Basement),
    Buffer(MsgBuffer),
}

/// A node as far as it decodes: its header (which has its own checksum) and each partition,
/// or why that partition did not read.
struct Partial {
    height: u32,
    pivots: Vec<Vec<u8>>,
    children: Vec<NodeId>,
    parts: Vec<Result<Part, String>>,
}

/// Decodes a block partition by partition (a message buffer whole, all its segments, since
/// format version 4 cuts buffers into segments under one buffer checksum).
fn decode_partial(bytes: &[u8]) -> Result<Partial, String> {
    let h = format::decode_header(bytes)?;
    let parts = h
        .parts
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let start = d.offset as usize;
            let end = start
                .checked_add(d.stored_len as usize)
                .filter(|&e| start >= h.header_len && e <= bytes.len())
                .ok_or_else(|| format!("partition outside the {}-byte block", bytes.len()))?;
            let stored = &bytes[start..end];
            if h.leaf {
                let t = h.segs.get(i).and_then(Option::as_deref);
                let raws = segment::decompress_whole(d, t, stored)?;
                Basement::join(raws).map(Part::Basement)
            } else {
                let desc = BufferDesc {
                    whole: *d,
                    segs: h.segs.get(i).cloned().flatten(),
                };
                segment::decode_whole(&desc, stored).map(Part::Buffer)
            }
        })
        .collect();
    Ok(Partial {
        height: h.height,
        pivots: h.pivots,
        children: h.children,
        parts,
    })
}

/// The keys partition `i` of a node covering `[low, high)` holds.
fn part_range(
    pivots: &[Vec<u8>],
    i: usize,
    low: &Option<Vec<u8>>,
    high: &Option<Vec<u8>>,
) -> (Option<Vec<u8>>, Option<Vec<u8>>) {
    let lo = if i == 0 {
        low.clone()
    } else {
        pivots.get(i - 1).cloned()
    };
    let hi = pivots.get(i).cloned().or_else(|| high.clone());
    (lo, hi)
}

/// A node's key range while walking: `None` when a parent was lost.
type Range = Option<(Option<Vec<u8>>, Option<Vec<u8>>)>;

/// The table walk: from the root with key ranges, then blocks no walk reached.
fn from_table(
    path: &Path,
    image: &DurableImage,
    root: NodeId,
    leaves: &mut Leaves,
    buffered: &mut Buffered,
    out: &mut Extracted,
) {
    let table: BTreeMap<NodeId, Extent> = image.blocks.iter().copied().collect();
    let mut missing: BTreeMap<NodeId, Extent> = image.missing.iter().copied().collect();
    let rest: Vec<NodeId> = table.keys().chain(missing.keys()).copied().collect();
    let mut seen = HashSet::new();
    // An explicit stack bounds the walk by the table, not the thread's stack.
    let mut stack: Vec<(NodeId, Range)> = Vec::new();
    if root != NodeId(0) {
        stack.push((root, Some((None, None))));
    }
    // Children of height-1 nodes: leaves, so losing one loses entries, not messages.
    let mut leaf_ids = HashSet::new();
    let mut visit =
        |id: NodeId, range: Range, stack: &mut Vec<(NodeId, Range)>, out: &mut Extracted| {
            if !seen.insert(id) {
                return;
            }
            let whole = |e: &Extent, reason: String, range: Range| {
                let mut l = lost(Some(id.0), None, e, reason, range);
                l.messages = !leaf_ids.contains(&id);
                l
            };
            let Some(e) = table.get(&id) else {
                if let Some(e) = missing.remove(&id) {
                    let reason = "extent lies past the end of the file".into();
                    out.lost.push(whole(&e, reason, range));
                }
                return;
            };
            let node = block_salvage::read_block(path, id, e).and_then(|(bytes, crc)| {
                if let Some(problem) = crc {
                    out.problems
                        .push(format!("block {} (offset {}): {problem}", id.0, e.offset));
                }
                decode_partial(&bytes)
            });
            match node {
                Err(reason) => out.lost.push(whole(e, reason, range)),
                Ok(node) => {
                    if node.height == 1 {
                        leaf_ids.extend(node.children.iter().copied());
                    }
                    let (low, high) = range.clone().unwrap_or_default();
                    for (c, child) in node.children.iter().enumerate() {
                        let child_range = range
                            .as_ref()
                            .map(|_| part_range(&node.pivots, c, &low, &high));
                        stack.push((*child, child_range));
                    }
                    take_partial(node, Some(id.0), Some(e), range, leaves, buffered, out);
                }
            }
        };
    while let Some((id, range)) = stack.pop() {
        visit(id, range, &mut stack, out);
    }
    // Blocks under a lost internal node: their parent's range is gone, their keys are not.
    for id in rest {
        visit(id, None, &mut stack, out);
        while let Some((child, range)) = stack.pop() {
            visit(child, range, &mut stack, out);
        }
    }
}

/// The page scan: every page of the data area tried as a node block's start.
fn from_scan(
    path: &Path,
    file_len: u64,
    leaves: &mut Leaves,
    buffered: &mut Buffered,
    out: &mut Extracted,
) -> std::io::Result<()> {
    let file = File::open(path)?;
    let page = shale_io::PAGE_SIZE as u64;
    let mut at = block_salvage::data_start();
    while at + format::FIXED_HEADER_BYTES as u64 <= file_len {
        match block_at(&file, at, file_len)? {
            Some((len, node)) => {
                let e = Extent {
                    offset: at,
                    len: u32::try_from(len).unwrap_or(u32::MAX),
                    crc: 0,
                };
                take_partial(node, None, Some(&e), None, leaves, buffered, out);
                at += len.div_ceil(page).max(1) * page;
            }
            None => at += page,
        }
    }
    Ok(())
}

/// The node block starting at `at`, if one does and its header checks out; its length is
/// what its partitions span, cut at the end of the file (a partition past it is lost).
fn block_at(file: &File, at: u64, file_len: u64) -> std::io::Result<Option<(u64, Partial)>> {
    let mut prefix = [0u8; format::FIXED_HEADER_BYTES];
    file.read_exact_at(&mut prefix, at)?;
    if &prefix[..4] != format::NODE_MAGIC {
        return Ok(None);
    }
    let Ok(header_len) = format::header_len_from_prefix(&prefix) else {
        return Ok(None);
    };
    if header_len as u64 > file_len - at {
        return Ok(None);
    }
    let mut head = vec![0u8; header_len];
    file.read_exact_at(&mut head, at)?;
    let Ok(h) = format::decode_header(&head) else {
        return Ok(None);
    };
    let len = h
        .parts
        .iter()
        .map(|p| u64::from(p.offset) + u64::from(p.stored_len))
        .max()
        .unwrap_or(header_len as u64)
        .min(file_len - at);
    let mut block = vec![0u8; len as usize];
    file.read_exact_at(&mut block, at)?;
    Ok(decode_partial(&block).ok().map(|node| (len, node)))
}

fn lost(
    node: Option<u64>,
    part: Option<usize>,
    e: &Extent,
    reason: String,
    range: Range,
) -> LostBlock {
    let (low, high) = range.clone().unwrap_or_default();
    LostBlock {
        node,
        partition: part,
        offset: e.offset,
        len: u64::from(e.len),
        reason,
        low,
        high,
        range_known: range.is_some(),
        messages: part.is_none(),
    }
}

/// Files a node's readable partitions as leaf versions or buffered messages, and its
/// unreadable ones as lost with the keys they held.
fn take_partial(
    node: Partial,
    id: Option<u64>,
    e: Option<&Extent>,
    range: Range,
    leaves: &mut Leaves,
    buffered: &mut Buffered,
    out: &mut Extracted,
) {
    let leaf = node.children.is_empty();
    if leaf {
        out.leaves += 1;
    } else {
        out.internals += 1;
    }
    let (low, high) = range.clone().unwrap_or_default();
    for (i, part) in node.parts.into_iter().enumerate() {
        match part {
            Ok(Part::Basement(b)) => take_basement(b, leaves),
            Ok(Part::Buffer(b)) => take_buffer(&b, node.height, buffered),
            Err(reason) => {
                let what = if leaf { "basement" } else { "message buffer" };
                let part_range = range
                    .as_ref()
                    .map(|_| part_range(&node.pivots, i, &low, &high));
                let fallback = Extent {
                    offset: 0,
                    len: 0,
                    crc: 0,
                };
                let mut l = lost(
                    id,
                    Some(i),
                    e.unwrap_or(&fallback),
                    format!("{what} {i}: {reason}"),
                    part_range,
                );
                l.messages = !leaf;
                out.lost.push(l);
            }
        }
    }
}

fn take_basement(b: Basement, leaves: &mut Leaves) {
    for (key, entry) in b.into_entries() {
        let mut versions: Vec<Change> = entry
            .versions()
            .map(|v| Change {
                ts: v.ts,
                code: match v.value {
                    Some(_) => OpRef::Put(&[]).code(),
                    None => OpRef::Delete.code(),
                },
                payload: v.value.clone().unwrap_or_default(),
            })
            .collect();
        versions.reverse();
        // A scan may meet old images of a leaf: the image with the newest version wins.
        let newer = leaves
            .get(&key)
            .is_none_or(|held| newest(held) < newest(&versions));
        if newer {
            leaves.insert(key, versions);
        }
    }
}

fn take_buffer(b: &MsgBuffer, height: u32, buffered: &mut Buffered) {
    for (key, msgs) in b.iter() {
        let list = buffered.entry(key.to_vec()).or_default();
        for m in msgs {
            let change = Change {
                ts: m.ts,
                code: m.op.code(),
                payload: m.op.payload().to_vec(),
            };
            // A scan may meet the same message in two images of a node.
            if !list.iter().any(|(h, c)| *h == height && *c == change) {
                list.push((height, change));
            }
        }
    }
}

fn newest(versions: &[Change]) -> Ts {
    versions.last().map_or(Ts(0), |c| c.ts)
}

/// Each key's changes in apply order: leaf versions oldest first, then messages from the
/// lowest level up (a lower buffer holds older messages, Q1). After a scan, a committed
/// message not newer than the leaf's newest committed version is dropped: only an old image
/// holds such, and the leaf already has its effect.
fn order(leaves: Leaves, buffered: Buffered, scanned: bool) -> BTreeMap<Vec<u8>, Vec<Change>> {
    let mut out = leaves;
    for (key, mut msgs) in buffered {
        msgs.sort_by_key(|(height, _)| *height);
        let list = out.entry(key).or_default();
        let base = list
            .iter()
            .rev()
            .find(|c| !c.ts.is_provisional())
            .map_or(Ts(0), |c| c.ts);
        list.extend(
            msgs.into_iter()
                .map(|(_, c)| c)
                .filter(|c| !scanned || c.ts.is_provisional() || c.ts > base),
        );
    }
    out
}
