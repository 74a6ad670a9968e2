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

use super::msg::OpRef;
use super::node::NodeBody;
use super::{decode_meta, format};
use crate::block::salvage::{self as block_salvage, DurableImage};
use crate::block::{Extent, NodeId};
use crate::mvcc::Ts;
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
    pub offset: u64,
    pub len: u64,
    pub reason: String,
    /// Keys `[low, high)` its parent routed to it (`None` = unbounded or unknown).
    pub low: Option<Vec<u8>>,
    pub high: Option<Vec<u8>>,
    /// True when the parent's pivots gave the range.
    pub range_known: bool,
}

/// How the contents were found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Table,
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
        options: decoded.as_ref().map(|(o, _, _)| o.clone()),
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
    for (id, e) in &image.missing {
        out.lost.push(lost(Some(id.0), e, "extent lies past the end of the file".into()));
    }
    let mut seen = HashSet::new();
    // (node, low, high): an explicit stack bounds the walk by the table, not the stack.
    let mut stack: Vec<(NodeId, Option<Vec<u8>>, Option<Vec<u8>>)> = Vec::new();
    if root != NodeId(0) {
        stack.push((root, None, None));
    }
    while let Some((id, low, high)) = stack.pop() {
        if !seen.insert(id) {
            out.problems.push(format!("node {} is reachable twice", id.0));
            continue;
        }
        let Some(e) = table.get(&id) else {
            if let Some(l) = out.lost.iter_mut().find(|l| l.node == Some(id.0)) {
                (l.low, l.high, l.range_known) = (low, high, true);
            }
            continue;
        };
        match read_node(path, id, e) {
            Ok(NodeBody::Internal(n)) => {
                out.internals += 1;
                for (c, child) in n.children.iter().enumerate() {
                    let lo = if c == 0 { low.clone() } else { n.pivots.get(c - 1).cloned() };
                    let hi = n.pivots.get(c).cloned().or_else(|| high.clone());
                    stack.push((*child, lo, hi));
                }
                take_buffers(NodeBody::Internal(n), leaves, buffered, out);
            }
            Ok(body) => take_buffers(body, leaves, buffered, out),
            Err(reason) => {
                let mut l = lost(Some(id.0), e, reason);
                (l.low, l.high, l.range_known) = (low, high, true);
                out.lost.push(l);
            }
        }
    }
    // Blocks under a lost internal node: their parent's range is gone, their keys are not.
    for (id, e) in &table {
        if seen.contains(id) {
            continue;
        }
        match read_node(path, *id, e) {
            Ok(body) => take_buffers(body, leaves, buffered, out),
            Err(reason) => out.lost.push(lost(Some(id.0), e, reason)),
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
            Some((len, body)) => {
                take_buffers(body, leaves, buffered, out);
                at += len.div_ceil(page).max(1) * page;
            }
            None => at += page,
        }
    }
    Ok(())
}

/// The node block starting at `at`, if one does and all of it checks out.
fn block_at(file: &File, at: u64, file_len: u64) -> std::io::Result<Option<(u64, NodeBody)>> {
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
        .unwrap_or(header_len as u64);
    if len > file_len - at {
        return Ok(None);
    }
    let mut block = vec![0u8; len as usize];
    file.read_exact_at(&mut block, at)?;
    Ok(format::decode(&block).ok().map(|body| (len, body)))
}

/// Reads and decodes one block of the table.
fn read_node(path: &Path, id: NodeId, e: &Extent) -> Result<NodeBody, String> {
    let bytes = block_salvage::read_block(path, id, e)?;
    format::decode(&bytes)
}

fn lost(node: Option<u64>, e: &Extent, reason: String) -> LostBlock {
    LostBlock {
        node,
        offset: e.offset,
        len: u64::from(e.len),
        reason,
        low: None,
        high: None,
        range_known: false,
    }
}

/// Files a decoded node's leaf versions or buffered messages.
fn take_buffers(body: NodeBody, leaves: &mut Leaves, buffered: &mut Buffered, out: &mut Extracted) {
    match body {
        NodeBody::Leaf(leaf) => {
            out.leaves += 1;
            for (key, entry) in leaf.into_entries() {
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
        NodeBody::Internal(n) => {
            out.internals += 1;
            for buffer in n.buffers.iter().flatten() {
                for (key, msgs) in buffer.iter() {
                    let list = buffered.entry(key.to_vec()).or_default();
                    for m in msgs {
                        let change = Change {
                            ts: m.ts,
                            code: m.op.code(),
                            payload: m.op.payload().to_vec(),
                        };
                        if !list.iter().any(|(h, c)| *h == n.height && *c == change) {
                            list.push((n.height, change));
                        }
                    }
                }
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
