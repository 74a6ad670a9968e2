//! The byte format of a node block (version 5; `docs/format-node.md` is the reference).
//! A block is a header (kind, height, partition descriptors, pivots, child ids, segment
//! tables, CRC) followed by partitions — message buffers for internal nodes, basements for
//! leaves — each compressed and checksummed on its own so that one basement can be read and
//! checked alone; a buffer is written as segments of about the read unit, and a basement
//! as segments of about the read page, each compressed alone, so that one segment can be
//! read alone too (`segment.rs`).
//!
//! Decoding never panics: every length is checked and a failure is a reason string that the
//! caller turns into a corruption error naming the file and block.

use super::filter::KeyFilter;
use super::msg::MsgBuffer;
use super::node::{Basement, Internal, Leaf, NodeBody, PartDesc};
use super::segment::{self, BufferDesc, Seg, SegTable};
use super::slot::Slot;
use crate::block::NodeId;
use crate::bytes::{put_bytes, Reader};
use crate::codec::{checksum, decompress};
use crate::Compression;

pub const NODE_MAGIC: &[u8; 4] = b"SHND";
/// Version 2: leaf entries hold version stacks and messages carry commit timestamps (MVCC);
/// version 3: a stamp may be provisional and a message may be an abort; version 4: an
/// internal node's header ends with a segment table per child (buffers in segments);
/// version 5: a leaf's header ends with a segment table per basement too; version 6: an
/// internal node's header ends with a key filter per buffer segment (`filter.rs`).
pub const NODE_FORMAT_VERSION: u8 = 6;
/// The first version whose internal nodes carry segment tables.
const SEGMENTS_VERSION: u8 = 4;
/// The first version whose leaves carry segment tables.
const LEAF_SEGMENTS_VERSION: u8 = 5;
/// The first version whose internal nodes carry key filters.
const FILTERS_VERSION: u8 = 6;
/// The oldest node format version read (2 holds no provisional stamps or aborts).
pub const OLDEST_NODE_FORMAT_VERSION: u8 = 2;
const KIND_LEAF: u8 = 0;
const KIND_INTERNAL: u8 = 1;
/// Bytes before the partition descriptors.
pub const FIXED_HEADER_BYTES: usize = 20;
const DESC_BYTES: usize = 20;

/// The decoded header of a node block: enough to route a lookup and to find one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub leaf: bool,
    pub height: u32,
    pub header_len: usize,
    pub parts: Vec<PartDesc>,
    pub pivots: Vec<Vec<u8>>,
    pub children: Vec<NodeId>,
    /// Each partition's segment table (`None` = one segment); empty for an internal node
    /// of version 3 or older and a leaf of version 4 or older.
    pub segs: Vec<Option<Box<SegTable>>>,
    /// An internal node's key filters (version 6 or later): per partition, one per segment
    /// (`None`: an empty segment); empty for a leaf or an older internal node.
    pub filters: Vec<Vec<Option<KeyFilter>>>,
}

/// The descriptors of a node just encoded, in the form its kind keeps them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Descs {
    Leaf(Vec<PartDesc>, Vec<Option<Box<SegTable>>>),
    Internal(Vec<BufferDesc>),
}

/// One unit of compression: partition `part`'s messages or entries `range` (one segment of
/// a buffer or a basement, or the whole of it).
struct Unit {
    part: usize,
    range: std::ops::Range<usize>,
}

/// Serializes a node (every partition loaded), cutting each message buffer into segments
/// of about `segment_bytes` raw bytes and each basement into segments of about
/// `page_bytes` (0: basements whole). Returns the block bytes and the descriptors of its
/// partitions.
///
/// The header's length depends only on the partition count, pivots, children and segment
/// tables, so it is reserved first and each unit (basement or segment) is encoded and
/// compressed straight after it, in order, every other run of them on the compression helper
/// thread (`codec_helper.rs`): encoding a node holds the block and about two units' raw and
/// compressed bytes, not every partition twice over.
pub fn encode(
    body: &NodeBody,
    codec: Compression,
    segment_bytes: usize,
    page_bytes: usize,
) -> (Vec<u8>, Descs) {
    let (leaf, height, pivots, children) = match body {
        NodeBody::Leaf(l) => (true, 0, &l.pivots[..], &[][..]),
        NodeBody::Internal(n) => (false, n.height, &n.pivots[..], &n.children[..]),
    };
    let units = units(body, segment_bytes, page_bytes);
    let raw_unit = |i: usize| {
        let u = &units[i];
        match body {
            NodeBody::Leaf(l) => loaded(l, u.part).encode_range(u.range.clone()),
            NodeBody::Internal(n) => n.buf(u.part).encode_range(u.range.clone()),
        }
    };
    // Segment tables need only the segments' first keys to be sized: their lengths and
    // CRCs are fixed-width fields filled in below.
    let cuts = match body {
        NodeBody::Leaf(l) => cuts(l.basements.len(), &units, |p, i| loaded(l, p).key(i)),
        NodeBody::Internal(n) => cuts(n.buffers.len(), &units, |p, i| n.buf(p).key(i)),
    };
    let n_parts = units.last().map_or(0, |u| u.part + 1);
    let header_len = FIXED_HEADER_BYTES
        + DESC_BYTES * n_parts
        + pivots.iter().map(|p| 4 + p.len()).sum::<usize>()
        + 8 * children.len()
        + cuts
            .iter()
            .map(|c| segment::table_len(c.count, &c.lows))
            .sum::<usize>()
        + filters_len(body, &units)
        + 4;
    let mut out = vec![0u8; header_len];
    let mut unit_descs = Vec::with_capacity(units.len());
    let unit_bytes = match body {
        NodeBody::Leaf(_) if page_bytes > 0 => page_bytes.min(segment_bytes),
        _ => segment_bytes,
    };
    let per_job = crate::codec_helper::units_per_job(unit_bytes);
    crate::codec_helper::compress_in_order(
        codec,
        units.len(),
        per_job,
        raw_unit,
        |stored, raw_len| {
            unit_descs.push(PartDesc {
                offset: out.len() as u32,
                stored_len: stored.len() as u32,
                raw_len: raw_len as u32,
                crc: checksum(&stored),
                codec,
            });
            out.extend_from_slice(&stored);
        },
    );
    let (descs, tables) = group_units(&units, unit_descs, cuts, &out);
    let mut h = Vec::with_capacity(header_len);
    h.extend_from_slice(NODE_MAGIC);
    h.push(NODE_FORMAT_VERSION);
    h.push(if leaf { KIND_LEAF } else { KIND_INTERNAL });
    h.extend_from_slice(&[0, 0]);
    h.extend_from_slice(&height.to_le_bytes());
    h.extend_from_slice(&(header_len as u32).to_le_bytes());
    h.extend_from_slice(&(descs.len() as u32).to_le_bytes());
    for d in &descs {
        h.extend_from_slice(&d.offset.to_le_bytes());
        h.extend_from_slice(&d.stored_len.to_le_bytes());
        h.extend_from_slice(&d.raw_len.to_le_bytes());
        h.extend_from_slice(&d.crc.to_le_bytes());
        h.extend_from_slice(&[d.codec.code(), 0, 0, 0]);
    }
    for p in pivots {
        put_bytes(&mut h, p);
    }
    for c in children {
        h.extend_from_slice(&c.0.to_le_bytes());
    }
    for t in &tables {
        segment::put_table(&mut h, t.as_deref());
    }
    put_filters(&mut h, body, &units);
    let crc = checksum(&h);
    h.extend_from_slice(&crc.to_le_bytes());
    assert_eq!(h.len(), header_len, "header length computed wrongly");
    out[..header_len].copy_from_slice(&h);
    let descs = if leaf {
        Descs::Leaf(descs, tables)
    } else {
        Descs::Internal(
            descs
                .into_iter()
                .zip(tables)
                .map(|(whole, segs)| BufferDesc { whole, segs })
                .collect(),
        )
    };
    (out, descs)
}

/// The units of a node in block order: each basement's segments (or the basement whole),
/// each buffer's segments.
fn units(body: &NodeBody, segment_bytes: usize, page_bytes: usize) -> Vec<Unit> {
    match body {
        NodeBody::Leaf(l) => (0..l.basements.len())
            .flat_map(|part| {
                let b = loaded(l, part);
                let starts = match page_bytes {
                    0 => vec![0],
                    _ => b.segment_starts(page_bytes),
                };
                let ends = starts
                    .iter()
                    .skip(1)
                    .copied()
                    .chain([b.len()])
                    .collect::<Vec<_>>();
                starts
                    .into_iter()
                    .zip(ends)
                    .map(move |(a, e)| Unit { part, range: a..e })
            })
            .collect(),
        NodeBody::Internal(n) => (0..n.buffers.len())
            .flat_map(|part| {
                segment::cuts(n.buf(part), segment_bytes)
                    .into_iter()
                    .map(move |range| Unit { part, range })
            })
            .collect(),
    }
}

/// Bytes of an internal node's filter table: a filter per unit (segment) sized by its
/// message count (`KeyFilter::build` sizes by the count it is given; a key repeated in the
/// segment only makes the filter sparser).
fn filters_len(body: &NodeBody, units: &[Unit]) -> usize {
    match body {
        NodeBody::Leaf(_) => 0,
        NodeBody::Internal(_) => units
            .iter()
            .map(|u| KeyFilter::stored_len(u.range.len()))
            .sum(),
    }
}

/// Appends an internal node's filter table (`docs/format-node.md`): each unit's filter, in
/// block order (partition by partition, segment by segment).
fn put_filters(h: &mut Vec<u8>, body: &NodeBody, units: &[Unit]) {
    let NodeBody::Internal(n) = body else {
        return;
    };
    for u in units {
        if u.range.is_empty() {
            KeyFilter::put_none(h);
            continue;
        }
        let b = n.buf(u.part);
        KeyFilter::build(u.range.len(), u.range.clone().map(|i| b.key(i))).put(h);
    }
}

/// Basement `b` of a leaf being encoded, which is fully loaded.
#[allow(clippy::expect_used, reason = "encode takes only fully loaded nodes")]
fn loaded(l: &Leaf, b: usize) -> &Basement {
    l.basements[b]
        .as_ref()
        .expect("encode needs a fully loaded node")
}

/// How one partition is cut: its segment count and the first keys of segments `1..`.
#[derive(Default)]
struct Cut {
    count: usize,
    lows: Vec<Vec<u8>>,
}

/// How `units` cut each of `parts` partitions (`key(p, i)`: the key of item `i` of
/// partition `p`): what sizes the segment tables before the descriptors are known.
fn cuts<'a>(parts: usize, units: &[Unit], key: impl Fn(usize, usize) -> &'a [u8]) -> Vec<Cut> {
    let mut cuts: Vec<Cut> = (0..parts).map(|_| Cut::default()).collect();
    for u in units {
        let c = &mut cuts[u.part];
        if c.count > 0 {
            c.lows.push(key(u.part, u.range.start).to_vec());
        }
        c.count += 1;
    }
    cuts
}

/// One descriptor per partition from the units' descriptors, and the segment table of each
/// partition cut in two or more: a segmented partition's descriptor covers its segments
/// (lengths summed, CRC over all of their stored bytes in `block`).
fn group_units(
    units: &[Unit],
    unit_descs: Vec<PartDesc>,
    cuts: Vec<Cut>,
    block: &[u8],
) -> (Vec<PartDesc>, Vec<Option<Box<SegTable>>>) {
    let mut descs: Vec<PartDesc> = Vec::new();
    let mut tables = Vec::with_capacity(cuts.len());
    let mut first = 0;
    for cut in cuts {
        let segs = &unit_descs[first..first + cut.count];
        first += cut.count;
        tables.push((cut.count > 1).then(|| Box::new(SegTable::new(segs, &cut.lows))));
    }
    for (u, d) in units.iter().zip(unit_descs) {
        match descs.get_mut(u.part) {
            Some(whole) => {
                whole.stored_len += d.stored_len;
                whole.raw_len += d.raw_len;
            }
            None => descs.push(d),
        }
    }
    for (d, t) in descs.iter_mut().zip(tables.iter()) {
        if t.is_some() {
            let (a, b) = (d.offset as usize, (d.offset + d.stored_len) as usize);
            d.crc = checksum(&block[a..b]);
        }
    }
    (descs, tables)
}

/// How many leading bytes hold the header, from its fixed prefix (for a partial read).
pub fn header_len_from_prefix(prefix: &[u8]) -> Result<usize, String> {
    let mut r = Reader::new(prefix);
    check_magic(&mut r)?;
    r.skip(7)?; // kind, reserved, height
    Ok(r.u32()? as usize)
}

/// Decodes a node header from the first `header_len` (or more) bytes of a block.
#[allow(clippy::expect_used, reason = "a 4-byte range converts to [u8; 4]")]
pub fn decode_header(bytes: &[u8]) -> Result<Header, String> {
    let mut r = Reader::new(bytes);
    let version = check_magic(&mut r)?;
    let kind = r.u8()?;
    r.skip(2)?;
    let height = r.u32()?;
    let header_len = r.u32()? as usize;
    let n_parts = r.u32()? as usize;
    if header_len > bytes.len() || header_len < FIXED_HEADER_BYTES + 4 {
        return Err(format!("header length {header_len} out of range"));
    }
    let stored_crc = u32::from_le_bytes(
        bytes[header_len - 4..header_len]
            .try_into()
            .expect("4 bytes"),
    );
    if checksum(&bytes[..header_len - 4]) != stored_crc {
        return Err("node header checksum mismatch".into());
    }
    if n_parts == 0 || n_parts > header_len / DESC_BYTES {
        return Err(format!(
            "{n_parts} partitions in a {header_len}-byte header"
        ));
    }
    let leaf = match kind {
        KIND_LEAF if height == 0 => true,
        KIND_INTERNAL if height > 0 => false,
        _ => return Err(format!("node kind {kind} with height {height}")),
    };
    let mut parts = Vec::with_capacity(n_parts);
    for _ in 0..n_parts {
        let offset = r.u32()?;
        let stored_len = r.u32()?;
        let raw_len = r.u32()?;
        let crc = r.u32()?;
        let code = r.u8()?;
        r.skip(3)?;
        let codec = Compression::from_code(code).ok_or_else(|| format!("unknown codec {code}"))?;
        parts.push(PartDesc {
            offset,
            stored_len,
            raw_len,
            crc,
            codec,
        });
    }
    let pivots = (0..n_parts - 1)
        .map(|_| r.bytes())
        .collect::<Result<Vec<_>, _>>()?;
    let children = if leaf {
        Vec::new()
    } else {
        (0..n_parts)
            .map(|_| r.u64().map(NodeId))
            .collect::<Result<Vec<_>, _>>()?
    };
    let first = if leaf {
        LEAF_SEGMENTS_VERSION
    } else {
        SEGMENTS_VERSION
    };
    let segs = if version < first {
        Vec::new()
    } else {
        parts
            .iter()
            .map(|d| segment::read_table(&mut r, d))
            .collect::<Result<Vec<_>, _>>()?
    };
    let filters = if leaf || version < FILTERS_VERSION {
        Vec::new()
    } else {
        let per_part = segs.iter().map(|t| t.as_ref().map_or(1, |t| t.len()));
        per_part
            .map(|k| (0..k).map(|_| KeyFilter::read(&mut r)).collect())
            .collect::<Result<Vec<_>, _>>()?
    };
    if r.pos() + 4 != header_len {
        return Err("header fields do not fill the header length".into());
    }
    Ok(Header {
        leaf,
        height,
        header_len,
        parts,
        pivots,
        children,
        segs,
        filters,
    })
}

/// Checks and decompresses one partition from its stored bytes.
pub fn decode_partition_raw(desc: &PartDesc, stored: &[u8]) -> Result<Vec<u8>, String> {
    if stored.len() != desc.stored_len as usize {
        return Err(format!(
            "partition is {} bytes, descriptor says {}",
            stored.len(),
            desc.stored_len
        ));
    }
    let crc = checksum(stored);
    if crc != desc.crc {
        return Err(format!(
            "partition checksum mismatch: expected {:#010x}, found {crc:#010x}",
            desc.crc
        ));
    }
    decompress(desc.codec, stored, desc.raw_len as usize)
}

/// Decodes a whole block into a node body.
pub fn decode(bytes: &[u8]) -> Result<NodeBody, String> {
    let h = decode_header(bytes)?;
    let stored = |d: &PartDesc| -> Result<&[u8], String> {
        let start = d.offset as usize;
        let end = start
            .checked_add(d.stored_len as usize)
            .ok_or("partition extent overflows")?;
        if start < h.header_len || end > bytes.len() {
            return Err(format!(
                "partition [{start}, {end}) outside the {}-byte block",
                bytes.len()
            ));
        }
        Ok(&bytes[start..end])
    };
    if h.leaf {
        let mut basements = Vec::with_capacity(h.parts.len());
        let tables = h
            .segs
            .iter()
            .map(Option::as_deref)
            .chain(std::iter::repeat(None));
        for (d, t) in h.parts.iter().zip(tables) {
            let raws = segment::decompress_whole(d, t, stored(d)?)?;
            basements.push(Slot::loaded(Basement::join(raws)?));
        }
        Ok(NodeBody::Leaf(Leaf {
            pivots: h.pivots.into(),
            basements,
            parts: h.parts,
            tables: h.segs,
        }))
    } else {
        let parts = buffer_descs(h.parts, h.segs);
        let mut buffers = Vec::with_capacity(parts.len());
        for d in &parts {
            buffers.push(Some(segment::decode_whole(d, stored(&d.whole)?)?));
        }
        Ok(NodeBody::Internal(Internal {
            height: h.height,
            pivots: h.pivots.into(),
            children: h.children,
            buffers,
            parts,
            segments: Vec::new(),
            filters: Vec::new(),
        }))
    }
}

/// Raw length of an empty partition (its entry or message count alone).
const EMPTY_PARTITION_RAW_LEN: u32 = 4;

/// A node known by its header only: every partition evicted except the empty ones, which
/// need no read.
pub fn skeleton(h: Header) -> NodeBody {
    let empty = |d: &PartDesc| d.raw_len == EMPTY_PARTITION_RAW_LEN;
    if h.leaf {
        NodeBody::Leaf(Leaf {
            basements: h
                .parts
                .iter()
                .map(|d| Slot::from(empty(d).then(Basement::new)))
                .collect(),
            pivots: h.pivots.into(),
            parts: h.parts,
            tables: h.segs,
        })
    } else {
        let (segments, filters) = image_filters(&h.parts, h.filters);
        NodeBody::Internal(Internal {
            height: h.height,
            buffers: h
                .parts
                .iter()
                .map(|d| empty(d).then(MsgBuffer::new))
                .collect(),
            pivots: h.pivots.into(),
            children: h.children,
            parts: buffer_descs(h.parts, h.segs),
            segments,
            filters,
        })
    }
}

/// The key filters a skeleton starts with, from its image's filter table (version 6): a
/// buffer written whole keeps its filter as the buffer's (N4), one written in segments one
/// per segment, as evicted segments (N5, S3). Empty buffers, which a skeleton holds loaded,
/// get none, so a node whose buffers are all empty (fully loaded) has none (N4).
fn image_filters(
    parts: &[PartDesc],
    filters: Vec<Vec<Option<KeyFilter>>>,
) -> (Vec<Vec<Seg>>, Vec<Option<KeyFilter>>) {
    let mut segments: Vec<Vec<Seg>> = Vec::new();
    let mut whole: Vec<Option<KeyFilter>> = Vec::new();
    for (c, (d, mut per_seg)) in parts.iter().zip(filters).enumerate() {
        if d.raw_len == EMPTY_PARTITION_RAW_LEN {
            continue;
        }
        if per_seg.len() == 1 {
            whole.resize(c + 1, None);
            whole[c] = per_seg.pop().flatten();
        } else {
            segments.resize_with(c + 1, Vec::new);
            segments[c] = per_seg
                .into_iter()
                .map(|f| f.map_or(Seg::Unread, Seg::Evicted))
                .collect();
        }
    }
    (segments, whole)
}

/// An internal node's buffer descriptors from its header's partitions and segment tables
/// (none before version 4).
fn buffer_descs(parts: Vec<PartDesc>, segs: Vec<Option<Box<SegTable>>>) -> Vec<BufferDesc> {
    let segs = segs.into_iter().chain(std::iter::repeat(None));
    parts
        .into_iter()
        .zip(segs)
        .map(|(whole, segs)| BufferDesc { whole, segs })
        .collect()
}

/// Checks the magic and returns the format version.
fn check_magic(r: &mut Reader<'_>) -> Result<u8, String> {
    let magic = r.take(4)?;
    if magic != NODE_MAGIC {
        return Err(format!("bad node magic {magic:02x?}"));
    }
    let version = r.u8()?;
    if !(OLDEST_NODE_FORMAT_VERSION..=NODE_FORMAT_VERSION).contains(&version) {
        return Err(format!("unsupported node format version {version}"));
    }
    Ok(version)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::buffer::MsgRef;
    use crate::tree::entry::Entry;
    use crate::tree::msg::{Msg, Msn, OpRef};
    use crate::tree::node::{Node, Reach};
    use crate::vocab::Op;
    use crate::vocab::Ts;

    fn sample_leaf() -> NodeBody {
        let entries = (0..200u32)
            .map(|i| {
                let mut e = Entry::new(Ts(100), Some(vec![(i % 7) as u8; (i % 50) as usize]));
                if i % 3 == 0 {
                    e.push(Ts(200 + i as u64), None, Ts(0));
                }
                if i % 5 == 0 {
                    e.push(Ts::provisional(u64::from(i)), Some(b"p".to_vec()), Ts(0));
                }
                (format!("key{i:05}").into_bytes(), e)
            })
            .collect();
        NodeBody::Leaf(Leaf::from_entries(entries, 512))
    }

    fn sample_internal() -> NodeBody {
        let mut buffers = vec![MsgBuffer::new(), MsgBuffer::new(), MsgBuffer::new()];
        let msg = |msn, op| Msg {
            msn: Msn(msn),
            ts: Ts(1000 + msn),
            op,
        };
        buffers[0].push(b"a", msg(1, Op::Put(b"x".to_vec())).as_msg_ref());
        buffers[1].push(b"m", msg(2, Op::Delete).as_msg_ref());
        buffers[2].push(b"z", msg(3, Op::Update(vec![1, 2])).as_msg_ref());
        // A provisional put, its transaction's abort, then a commit older than neither.
        let provisional = Ts::provisional(9);
        let put = msg(4, Op::Put(b"p".to_vec()));
        buffers[2].push(
            b"z",
            MsgRef {
                ts: provisional,
                ..put.as_msg_ref()
            },
        );
        let abort = MsgRef {
            msn: Msn(5),
            ts: provisional,
            op: OpRef::Abort,
        };
        buffers[2].push(b"z", abort);
        buffers[2].push(b"z", msg(6, Op::Delete).as_msg_ref());
        NodeBody::Internal(Internal::new(
            1,
            vec![b"k".to_vec(), b"t".to_vec()],
            vec![NodeId(4), NodeId(5), NodeId(6)],
            buffers,
        ))
    }

    fn strip_parts(body: NodeBody) -> NodeBody {
        match body {
            NodeBody::Leaf(mut l) => {
                l.parts.clear();
                l.tables.clear();
                NodeBody::Leaf(l)
            }
            NodeBody::Internal(mut n) => {
                n.parts.clear();
                NodeBody::Internal(n)
            }
        }
    }

    /// An internal node whose buffers hold `keys` keys of two messages each.
    fn big_internal(keys: u32) -> NodeBody {
        let mut buffers = vec![MsgBuffer::new(), MsgBuffer::new()];
        let mut msn = 0;
        for i in 0..keys {
            let key = format!("key{i:05}").into_bytes();
            let c = usize::from(key.as_slice() >= b"key00100".as_slice());
            for op in [Op::Put(vec![(i % 13) as u8; 60]), Op::Update(vec![1])] {
                msn += 1;
                let m = Msg {
                    msn: Msn(msn),
                    ts: Ts(msn),
                    op,
                };
                buffers[c].push(&key, m.as_msg_ref());
            }
        }
        NodeBody::Internal(Internal::new(
            1,
            vec![b"key00100".to_vec()],
            vec![NodeId(4), NodeId(5)],
            buffers,
        ))
    }

    #[test]
    fn nodes_round_trip_with_every_codec() {
        for codec in [Compression::None, Compression::Lz4, Compression::Zstd] {
            for body in [sample_leaf(), sample_internal(), big_internal(300)] {
                for segment_bytes in [256, 1 << 20] {
                    let (bytes, descs) = encode(&body, codec, segment_bytes, segment_bytes / 4);
                    let back = decode(&bytes).expect("decode");
                    match (&back, descs) {
                        (NodeBody::Leaf(l), Descs::Leaf(d, t)) => {
                            assert_eq!((&l.parts, &l.tables), (&d, &t))
                        }
                        (NodeBody::Internal(n), Descs::Internal(d)) => assert_eq!(n.parts, d),
                        _ => panic!("kind changed"),
                    }
                    assert_eq!(strip_parts(back), body);
                }
            }
        }
    }

    #[test]
    fn buffers_are_written_in_segments_that_decode_alone() {
        let body = big_internal(300);
        let (bytes, descs) = encode(&body, Compression::Zstd, 1024, 0);
        let (Descs::Internal(descs), NodeBody::Internal(n)) = (descs, &body) else {
            panic!("internal")
        };
        for (c, d) in descs.iter().enumerate() {
            let t = d.segs.as_ref().expect("a buffer of ~20 KB is cut at 1 KiB");
            assert!(t.len() > 5, "{} segments", t.len());
            let mut joined = Vec::new();
            for (s, sd) in t.descs().enumerate() {
                let stored = &bytes[sd.offset as usize..(sd.offset + sd.stored_len) as usize];
                let raw = decode_partition_raw(&sd, stored).expect("segment alone");
                let piece = MsgBuffer::decode(raw).expect("a buffer");
                let last = piece.iter().next_back().map(|(k, _)| k);
                segment::check_piece(s, t.range(s), piece.first_key(), last)
                    .expect("in its range (S2)");
                joined.extend(piece.iter().map(|(k, _)| k.to_vec()));
                let key = piece.first_key().expect("non-empty");
                assert_eq!(t.index(key), s, "the table routes its keys to it");
            }
            let all: Vec<Vec<u8>> = n.buf(c).iter().map(|(k, _)| k.to_vec()).collect();
            assert_eq!(joined, all);
        }
    }

    /// `bytes` (a version-6 node whose partitions are single segments) as the block of
    /// `version` it would have been: without its filter table (an internal node before
    /// version 6) and its segment tables (before 4 for an internal node, 5 for a leaf).
    fn as_version(bytes: &[u8], version: u8) -> Vec<u8> {
        let h = decode_header(bytes).expect("header");
        assert!(h.segs.iter().all(Option::is_none));
        let filters: usize = h
            .filters
            .iter()
            .flatten()
            .map(|f| 4 + f.as_ref().map_or(0, KeyFilter::bytes))
            .sum();
        let tables_from = if h.leaf { 5 } else { 4 };
        let cut = if version < 6 { filters } else { 0 }
            + if version < tables_from {
                4 * h.parts.len()
            } else {
                0
            };
        let end = h.header_len - 4;
        let mut b = [&bytes[..end - cut], &[0u8; 4], &bytes[h.header_len..]].concat();
        b[4] = version;
        let new_len = (h.header_len - cut) as u32;
        b[12..16].copy_from_slice(&new_len.to_le_bytes());
        for i in 0..h.parts.len() {
            let at = FIXED_HEADER_BYTES + DESC_BYTES * i;
            let off = u32::from_le_bytes(b[at..at + 4].try_into().expect("4")) - cut as u32;
            b[at..at + 4].copy_from_slice(&off.to_le_bytes());
        }
        let crc = checksum(&b[..end - cut]);
        b[end - cut..end - cut + 4].copy_from_slice(&crc.to_le_bytes());
        b
    }

    #[test]
    fn versions_2_and_3_are_read_and_other_versions_refused() {
        let body = sample_internal();
        let (bytes, _) = encode(&body, Compression::None, 1 << 20, 0);
        let v3 = as_version(&bytes, 3);
        assert_eq!(strip_parts(decode(&v3).expect("version 3 is read")), body);
        let header_len = decode_header(&v3).expect("header").header_len;
        let with_version = |v: u8| {
            let mut b = v3.clone();
            b[4] = v;
            let crc = checksum(&b[..header_len - 4]);
            b[header_len - 4..header_len].copy_from_slice(&crc.to_le_bytes());
            decode(&b)
        };
        assert!(with_version(2).is_ok(), "version 2 is still read");
        for v in [4, 5, 6] {
            let err = with_version(v).expect_err("tables expected");
            assert!(!err.contains("unsupported"), "version {v}: {err}");
        }
        for v in [0, 1, 7, u8::MAX] {
            let err = with_version(v).expect_err("refused");
            assert!(err.contains("unsupported node format version"), "{err}");
        }
    }

    #[test]
    fn internal_nodes_carry_filters_from_version_6_and_skeletons_start_with_them() {
        let keys_of = |n: &Internal, c: usize| -> Vec<Vec<u8>> {
            n.buf(c).iter().map(|(k, _)| k.to_vec()).collect()
        };
        for (body, segment_bytes) in [(big_internal(300), 1024), (sample_internal(), 1 << 20)] {
            let NodeBody::Internal(n) = &body else {
                panic!("internal")
            };
            let (bytes, _) = encode(&body, Compression::Zstd, segment_bytes, 0);
            let h = decode_header(&bytes).expect("header");
            assert_eq!(h.filters.len(), n.buffers.len());
            let NodeBody::Internal(skel) = skeleton(h) else {
                panic!("internal")
            };
            let node = Node::new(NodeBody::Internal(skel.clone()), false);
            node.check()
                .expect("a skeleton with filters is a valid node (N4, N5)");
            let (mut ruled_out, mut considered) = (0, 0);
            for c in 0..n.buffers.len() {
                let keys = keys_of(n, c);
                for k in &keys {
                    let passes = !skel.filter_rules_out(c, k)
                        && !matches!(skel.reach(c, k), Reach::RuledOut);
                    assert!(passes, "a buffered key is never ruled out");
                }
                if keys.is_empty() {
                    assert!(skel.buffers[c].is_some(), "an empty buffer is held loaded");
                    continue;
                }
                let absent = (0..200u32).map(|i| format!("zz-absent-{i}").into_bytes());
                let absent: Vec<_> = absent.filter(|k| n.child_index(k) == c).collect();
                considered += absent.len();
                ruled_out += absent
                    .iter()
                    .filter(|k| {
                        skel.filter_rules_out(c, k) || matches!(skel.reach(c, k), Reach::RuledOut)
                    })
                    .count();
            }
            assert!(considered > 0);
            assert!(
                ruled_out * 10 >= considered * 9,
                "{ruled_out} of {considered} absent keys ruled out"
            );
        }
        // Version 5: the same internal node without its filter table; a skeleton has none.
        let body = sample_internal();
        let (bytes, _) = encode(&body, Compression::Zstd, 1 << 20, 0);
        let v5 = as_version(&bytes, 5);
        let h = decode_header(&v5).expect("version 5 is read");
        assert!(h.filters.is_empty());
        let NodeBody::Internal(skel) = skeleton(h) else {
            panic!("internal")
        };
        assert!(skel.filters.is_empty() && skel.segments.is_empty());
        assert_eq!(strip_parts(decode(&v5).expect("whole")), body);
    }

    #[test]
    fn leaves_of_version_4_are_read_without_tables() {
        let body = sample_leaf();
        let (bytes, _) = encode(&body, Compression::Zstd, 1 << 20, 0);
        let v4 = as_version(&bytes, 4);
        let back = decode(&v4).expect("version 4 is read");
        let NodeBody::Leaf(l) = &back else {
            panic!("a leaf")
        };
        assert!(l.tables.is_empty());
        assert_eq!(strip_parts(back), body);
    }

    #[test]
    fn basements_are_written_in_segments_that_decode_alone() {
        let body = sample_leaf();
        let (bytes, descs) = encode(&body, Compression::Zstd, 512, 128);
        let (Descs::Leaf(parts, tables), NodeBody::Leaf(l)) = (descs, &body) else {
            panic!("leaf")
        };
        assert_eq!(parts.len(), l.basements.len());
        let mut cut = 0;
        for (b, t) in tables.iter().enumerate() {
            let Some(t) = t else { continue };
            cut += 1;
            let mut joined = Vec::new();
            for (s, sd) in t.descs().enumerate() {
                let stored = &bytes[sd.offset as usize..(sd.offset + sd.stored_len) as usize];
                let raw = decode_partition_raw(&sd, stored).expect("segment alone");
                let piece = Basement::decode(raw).expect("a basement");
                segment::check_piece(s, t.range(s), piece.first_key(), piece.last_key())
                    .expect("in its range (S2)");
                let key = piece.first_key().expect("non-empty");
                assert_eq!(t.index(key), s, "the table routes its keys to it");
                joined.extend(piece.iter().map(|(k, _)| k.to_vec()));
            }
            let whole = l.basements[b].as_ref().expect("loaded");
            let all: Vec<Vec<u8>> = whole.iter().map(|(k, _)| k.to_vec()).collect();
            assert_eq!(joined, all);
        }
        assert!(cut > 3, "{cut} basements of ~512 bytes cut at 128");
    }

    #[test]
    fn header_length_is_found_from_a_prefix() {
        let (bytes, _) = encode(&sample_internal(), Compression::Zstd, 1 << 20, 0);
        let h = decode_header(&bytes).expect("header");
        assert_eq!(header_len_from_prefix(&bytes[..32]), Ok(h.header_len));
    }

    #[test]
    fn one_partition_decodes_alone() {
        let body = sample_leaf();
        let (bytes, _) = encode(&body, Compression::Zstd, 1 << 20, 0);
        let h = decode_header(&bytes).expect("header");
        assert!(h.parts.len() > 3);
        let d = h.parts[2];
        let part = &bytes[d.offset as usize..(d.offset + d.stored_len) as usize];
        let b = Basement::decode(decode_partition_raw(&d, part).expect("raw")).expect("basement");
        let NodeBody::Leaf(l) = body else {
            unreachable!()
        };
        assert_eq!(Some(&b), l.basements[2].as_ref());
    }

    #[test]
    fn every_flipped_bit_is_detected() {
        let (bytes, _) = encode(&big_internal(40), Compression::Lz4, 256, 64);
        for i in 0..bytes.len() * 8 {
            let mut bad = bytes.clone();
            bad[i / 8] ^= 1 << (i % 8);
            assert!(decode(&bad).is_err(), "flip of bit {i} went unnoticed");
        }
    }

    #[test]
    fn garbage_never_panics() {
        let mut rng = shale_testkit::Rng(0x9e37_79b9_7f4a_7c15);
        let (good, _) = encode(&sample_leaf(), Compression::None, 1 << 20, 128);
        for round in 0..2000 {
            let mut bytes = good.clone();
            for _ in 0..(round % 8 + 1) {
                let seed = rng.next();
                let i = (seed as usize) % bytes.len();
                bytes[i] = (seed >> 40) as u8;
            }
            bytes.truncate((rng.0 as usize >> 3) % (good.len() + 1));
            let _ = decode(&bytes);
            let _ = header_len_from_prefix(&bytes);
        }
    }
}
