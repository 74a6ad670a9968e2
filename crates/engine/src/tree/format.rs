//! The byte format of a node block (version 3; `docs/format-node.md` is the reference).
//! A block is a header (kind, height, partition descriptors, pivots, child ids, CRC) followed
//! by partitions — message buffers for internal nodes, basements for leaves — each compressed
//! and checksummed on its own so that one basement can be read and checked alone.
//!
//! Decoding never panics: every length is checked and a failure is a reason string that the
//! caller turns into a corruption error naming the file and block.

use super::msg::MsgBuffer;
use super::node::{Basement, Internal, Leaf, NodeBody, PartDesc};
use crate::block::NodeId;
use crate::bytes::{put_bytes, Reader};
use crate::codec::{checksum, decompress};
use crate::Compression;

pub const NODE_MAGIC: &[u8; 4] = b"SHND";
/// Version 2: leaf entries hold version stacks and messages carry commit timestamps (MVCC);
/// version 3: a stamp may be provisional and a message may be an abort.
pub const NODE_FORMAT_VERSION: u8 = 3;
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
}

/// Serializes a node (every partition loaded). Returns the block bytes and the descriptors
/// of its partitions.
///
/// The header's length depends only on the partition count, pivots and children, so it is
/// reserved first and each partition is encoded and compressed straight after it, in order,
/// every other one on the compression helper thread (`codec_helper.rs`): encoding a node
/// holds the block and about two partitions' raw and compressed bytes, not every partition
/// twice over.
pub fn encode(body: &NodeBody, codec: Compression) -> (Vec<u8>, Vec<PartDesc>) {
    let (leaf, height, pivots, children, n_parts) = match body {
        NodeBody::Leaf(l) => (true, 0, &l.pivots, &[][..], l.basements.len()),
        NodeBody::Internal(n) => (false, n.height, &n.pivots, &n.children[..], n.buffers.len()),
    };
    let raw_part = |i: usize| match body {
        NodeBody::Leaf(l) => l.basements[i]
            .as_ref()
            .expect("encode needs a fully loaded node")
            .encode(),
        NodeBody::Internal(n) => n.buffers[i]
            .as_ref()
            .expect("encode needs a fully loaded node")
            .encode(),
    };
    let header_len = FIXED_HEADER_BYTES
        + DESC_BYTES * n_parts
        + pivots.iter().map(|p| 4 + p.len()).sum::<usize>()
        + 8 * children.len()
        + 4;
    let mut out = vec![0u8; header_len];
    let mut descs = Vec::with_capacity(n_parts);
    crate::codec_helper::compress_in_order(codec, n_parts, raw_part, |stored, raw_len| {
        descs.push(PartDesc {
            offset: out.len() as u32,
            stored_len: stored.len() as u32,
            raw_len: raw_len as u32,
            crc: checksum(&stored),
            codec,
        });
        out.extend_from_slice(&stored);
    });
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
    let crc = checksum(&h);
    h.extend_from_slice(&crc.to_le_bytes());
    assert_eq!(h.len(), header_len, "header length computed wrongly");
    out[..header_len].copy_from_slice(&h);
    (out, descs)
}

/// How many leading bytes hold the header, from its fixed prefix (for a partial read).
pub fn header_len_from_prefix(prefix: &[u8]) -> Result<usize, String> {
    let mut r = Reader::new(prefix);
    check_magic(&mut r)?;
    r.skip(7)?; // kind, reserved, height
    Ok(r.u32()? as usize)
}

/// Decodes a node header from the first `header_len` (or more) bytes of a block.
pub fn decode_header(bytes: &[u8]) -> Result<Header, String> {
    let mut r = Reader::new(bytes);
    check_magic(&mut r)?;
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
        for d in &h.parts {
            basements.push(Some(Basement::decode(decode_partition_raw(
                d,
                stored(d)?,
            )?)?));
        }
        Ok(NodeBody::Leaf(Leaf {
            pivots: h.pivots,
            basements,
            parts: h.parts,
        }))
    } else {
        let mut buffers = Vec::with_capacity(h.parts.len());
        for d in &h.parts {
            buffers.push(Some(MsgBuffer::decode(decode_partition_raw(
                d,
                stored(d)?,
            )?)?));
        }
        Ok(NodeBody::Internal(Internal {
            height: h.height,
            pivots: h.pivots,
            children: h.children,
            buffers,
            parts: h.parts,
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
                .map(|d| empty(d).then(Basement::new))
                .collect(),
            pivots: h.pivots,
            parts: h.parts,
        })
    } else {
        NodeBody::Internal(Internal {
            height: h.height,
            buffers: h
                .parts
                .iter()
                .map(|d| empty(d).then(MsgBuffer::new))
                .collect(),
            pivots: h.pivots,
            children: h.children,
            parts: h.parts,
            filters: Vec::new(),
        })
    }
}

fn check_magic(r: &mut Reader<'_>) -> Result<(), String> {
    let magic = r.take(4)?;
    if magic != NODE_MAGIC {
        return Err(format!("bad node magic {magic:02x?}"));
    }
    let version = r.u8()?;
    if !(OLDEST_NODE_FORMAT_VERSION..=NODE_FORMAT_VERSION).contains(&version) {
        return Err(format!("unsupported node format version {version}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mvcc::Ts;
    use crate::tree::buffer::MsgRef;
    use crate::tree::entry::Entry;
    use crate::tree::msg::{Msg, MsgOp, Msn, OpRef};

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
        buffers[0].push(b"a", msg(1, MsgOp::Put(b"x".to_vec())).as_msg_ref());
        buffers[1].push(b"m", msg(2, MsgOp::Delete).as_msg_ref());
        buffers[2].push(b"z", msg(3, MsgOp::Update(vec![1, 2])).as_msg_ref());
        // A provisional put, its transaction's abort, then a commit older than neither.
        let provisional = Ts::provisional(9);
        let put = msg(4, MsgOp::Put(b"p".to_vec()));
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
        buffers[2].push(b"z", msg(6, MsgOp::Delete).as_msg_ref());
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
                NodeBody::Leaf(l)
            }
            NodeBody::Internal(mut n) => {
                n.parts.clear();
                NodeBody::Internal(n)
            }
        }
    }

    #[test]
    fn nodes_round_trip_with_every_codec() {
        for codec in [Compression::None, Compression::Lz4, Compression::Zstd] {
            for body in [sample_leaf(), sample_internal()] {
                let (bytes, descs) = encode(&body, codec);
                let back = decode(&bytes).expect("decode");
                if let NodeBody::Leaf(l) = &back {
                    assert_eq!(l.parts, descs);
                }
                assert_eq!(strip_parts(back), body);
            }
        }
    }

    #[test]
    fn version_2_blocks_are_read_and_other_versions_refused() {
        let (bytes, _) = encode(&sample_internal(), Compression::None);
        let header_len = decode_header(&bytes).expect("header").header_len;
        let with_version = |v: u8| {
            let mut b = bytes.clone();
            b[4] = v;
            let crc = checksum(&b[..header_len - 4]);
            b[header_len - 4..header_len].copy_from_slice(&crc.to_le_bytes());
            decode(&b)
        };
        assert!(with_version(3).is_ok());
        assert!(with_version(2).is_ok(), "version 2 is still read");
        for v in [0, 1, 4, u8::MAX] {
            let err = with_version(v).expect_err("refused");
            assert!(err.contains("unsupported node format version"), "{err}");
        }
    }

    #[test]
    fn header_length_is_found_from_a_prefix() {
        let (bytes, _) = encode(&sample_internal(), Compression::Zstd);
        let h = decode_header(&bytes).expect("header");
        assert_eq!(header_len_from_prefix(&bytes[..32]), Ok(h.header_len));
    }

    #[test]
    fn one_partition_decodes_alone() {
        let body = sample_leaf();
        let (bytes, _) = encode(&body, Compression::Zstd);
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
        let (bytes, _) = encode(&sample_internal(), Compression::Lz4);
        for i in 0..bytes.len() * 8 {
            let mut bad = bytes.clone();
            bad[i / 8] ^= 1 << (i % 8);
            assert!(decode(&bad).is_err(), "flip of bit {i} went unnoticed");
        }
    }

    #[test]
    fn garbage_never_panics() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let (good, _) = encode(&sample_leaf(), Compression::None);
        for round in 0..2000 {
            let mut bytes = good.clone();
            for _ in 0..(round % 8 + 1) {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                let i = (seed as usize) % bytes.len();
                bytes[i] = (seed >> 40) as u8;
            }
            bytes.truncate((seed as usize >> 3) % (good.len() + 1));
            let _ = decode(&bytes);
            let _ = header_len_from_prefix(&bytes);
        }
    }
}
