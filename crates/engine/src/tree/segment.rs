//! Segments: a message buffer written as several separately compressed pieces (node format
//! 4, `docs/format-node.md`, "Segment table"), so that a point lookup that needs an evicted
//! buffer reads and decompresses the one piece holding its key instead of the whole buffer.
//!
//! A child's buffer of an internal node is cut, when the node is written, into segments of
//! about the tree's read unit (`basement_size_bytes`) of raw bytes, only between two keys:
//! one key's messages always lie in one segment. Each segment is a complete buffer encoding
//! of its own (message count, then messages), compressed and checksummed alone; the
//! segments are stored one after another, so the child's partition descriptor still covers
//! the whole buffer (stored length = the sum, raw length = the sum, CRC over all the stored
//! bytes) and a whole-buffer read (a flush, a scan) is one `pread` as before.
//!
//! Before this, a lookup through an evicted buffer read the whole child buffer: at 10x the
//! cache ~0.1 such reads per get of ~255 KB stored each, which decompressed to more bytes than
//! the basements the gets read (docs/bench/history/2026-11-26-engine-mid-size-buffer-segments.md).
//!
//! A leaf's basements are written the same way (node format 5) in segments of the tree's
//! read page (`TreeOptions::read_page_bytes`, 4 KiB by default), cut between entries: a
//! point read of an evicted 16 KiB basement reads and decompresses one ~4 KiB segment, and
//! keeps it as one of the basement's pieces (`slot.rs`, N6 in `node.rs`); scans and changes
//! read basements whole
//! (docs/bench/history/2026-11-26-engine-mid-size-read-pages-4k-segments-of-16k-basements.md).
//! The invariants below hold for
//! both kinds; S3 is the buffers' (a leaf's pieces are N6).
//!
//! Invariants (checked when a header is decoded, and by `Node::check`):
//! S1. a segment table has at least two segments; their stored and raw lengths sum to the
//!     child's descriptor's, and `lows` (the first key of segments 1..k) strictly increase.
//! S2. every key of segment `s` lies in `[lows[s-1], lows[s])` (the child's own range for
//!     the ends); checked when a segment is read alone (`check_piece`), and implied by the
//!     order check of a whole-buffer read.
//! S3. a segment read alone (`Internal::segments`) is kept only while its buffer is
//!     evicted, and describes the node's on-disk image (the node is clean: N3). When
//!     eviction drops it, a key filter of its keys stays in its place (the one it was loaded
//!     with, from the image's filter table, or else one built from its keys), so later
//!     lookups of keys it does not hold read nothing (as a whole buffer's filter does: N4).
//!     Without these filters a buffer only ever read in segments would have none, and every
//!     lookup through it would read a segment.

use super::filter::KeyFilter;
use super::msg::MsgBuffer;
use super::node::{alloc_bytes, PartDesc};
use crate::bytes::{put_bytes, Reader};
use crate::codec::{checksum, decompress};
use crate::Compression;
use std::ops::Range;

/// Where one child's buffer lies in a node block: the whole partition and, when it was
/// written in segments, their table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BufferDesc {
    pub whole: PartDesc,
    pub segs: Option<Box<SegTable>>,
}

impl BufferDesc {
    pub fn mem_bytes(&self) -> usize {
        std::mem::size_of::<Self>() + self.segs.as_ref().map_or(0, |t| t.mem_bytes())
    }
}

/// One segment of an evicted buffer, as lookups left it (S3).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Seg {
    #[default]
    Unread,
    /// Read by a lookup, with the filter of its keys it had while evicted (from the image's
    /// filter table or an earlier eviction), kept for its next eviction.
    Loaded(MsgBuffer, Option<KeyFilter>),
    /// Dropped by eviction: the filter of its keys remains.
    Evicted(KeyFilter),
}

impl Seg {
    pub fn is_loaded(&self) -> bool {
        matches!(self, Seg::Loaded(..))
    }

    /// This segment loaded with `piece`, keeping the filter it had (S3).
    pub fn load(&mut self, piece: MsgBuffer) {
        let filter = match std::mem::take(self) {
            Seg::Evicted(f) | Seg::Loaded(_, Some(f)) => Some(f),
            Seg::Unread | Seg::Loaded(_, None) => None,
        };
        *self = Seg::Loaded(piece, filter);
    }

    /// Drops a loaded segment, keeping a filter of its keys: the one it was loaded with,
    /// which still holds (its node is clean and its image unchanged, S3), or one built from
    /// its keys. Building it hashed every key of the segment under the tree's write lock,
    /// 2.4% of a full-size point read's CPU, for a filter the image's table already had.
    pub fn evict(&mut self) {
        if let Seg::Loaded(b, kept) = self {
            let filter = kept
                .take()
                .unwrap_or_else(|| KeyFilter::build(b.key_count(), b.iter().map(|(k, _)| k)));
            *self = Seg::Evicted(filter);
        }
    }

    pub fn mem_bytes(&self) -> usize {
        match self {
            Seg::Unread => 0,
            Seg::Loaded(b, f) => b.mem_bytes() + f.as_ref().map_or(0, KeyFilter::bytes),
            Seg::Evicted(f) => f.bytes(),
        }
    }
}

/// The segments of one partition (S1), held compactly: a skeleton leaf keeps one table per
/// basement (256 for a 4 MiB leaf of 16 KiB basements), and a table of a vector of
/// descriptors and a vector of separately allocated keys took ~310 bytes of cache per
/// basement of four segments, four times the rest of the skeleton; this form takes ~150.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegTable {
    /// Where segment 0 starts in the block; the others follow it back to back.
    first_offset: u32,
    /// The partition's codec (every segment's).
    codec: Compression,
    /// Per segment its stored length, raw length and CRC; then, per key of `keys`, where
    /// its bytes end.
    words: Box<[u32]>,
    /// The first keys of segments `1..`, back to back.
    keys: Box<[u8]>,
}

impl SegTable {
    /// A table of the segments `descs` (consecutive in the block) whose first keys, from the
    /// second segment on, are `lows`.
    #[allow(
        clippy::expect_used,
        reason = "keys are limited to MAX_KEY_OR_VALUE_BYTES, far below 4 GiB"
    )]
    pub fn new(descs: &[PartDesc], lows: &[Vec<u8>]) -> SegTable {
        assert_eq!(
            lows.len() + 1,
            descs.len(),
            "a low key per segment after the first"
        );
        let mut words = Vec::with_capacity(3 * descs.len() + lows.len());
        for d in descs {
            words.extend_from_slice(&[d.stored_len, d.raw_len, d.crc]);
        }
        let mut end = 0u32;
        for l in lows {
            end += u32::try_from(l.len()).expect("keys are bounded far below 4 GiB");
            words.push(end);
        }
        SegTable {
            first_offset: descs.first().map_or(0, |d| d.offset),
            codec: descs.first().map_or(Compression::None, |d| d.codec),
            words: words.into_boxed_slice(),
            keys: lows.concat().into_boxed_slice(),
        }
    }

    /// How many segments.
    pub fn len(&self) -> usize {
        (self.words.len() + 1) / 4
    }

    /// Segment `s`'s descriptor.
    pub fn desc(&self, s: usize) -> Option<PartDesc> {
        if s >= self.len() {
            return None;
        }
        let before: u32 = (0..s).map(|j| self.words[3 * j]).sum();
        Some(PartDesc {
            offset: self.first_offset + before,
            stored_len: self.words[3 * s],
            raw_len: self.words[3 * s + 1],
            crc: self.words[3 * s + 2],
            codec: self.codec,
        })
    }

    /// Every segment's descriptor, in order.
    pub fn descs(&self) -> impl Iterator<Item = PartDesc> + '_ {
        let mut offset = self.first_offset;
        (0..self.len()).map(move |s| {
            let d = PartDesc {
                offset,
                stored_len: self.words[3 * s],
                raw_len: self.words[3 * s + 1],
                crc: self.words[3 * s + 2],
                codec: self.codec,
            };
            offset += d.stored_len;
            d
        })
    }

    /// The first key of segment `j + 1`.
    pub fn low(&self, j: usize) -> &[u8] {
        let ends = &self.words[3 * self.len()..];
        let start = j.checked_sub(1).map_or(0, |i| ends[i] as usize);
        &self.keys[start..ends[j] as usize]
    }

    /// The first keys of segments `1..`.
    pub fn lows(&self) -> impl Iterator<Item = &[u8]> + '_ {
        (0..self.len() - 1).map(|j| self.low(j))
    }

    /// The segment that holds `key`'s messages or entries.
    pub fn index(&self, key: &[u8]) -> usize {
        let (mut lo, mut hi) = (0, self.len() - 1);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.low(mid) <= key {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// The key range `[lo, hi)` of segment `s` within the partition (`None` = the
    /// partition's own bound on that side).
    pub fn range(&self, s: usize) -> (Option<&[u8]>, Option<&[u8]>) {
        let lo = s.checked_sub(1).map(|j| self.low(j));
        (lo, (s + 1 < self.len()).then(|| self.low(s)))
    }

    /// What reading segment `s` alone needs, copied out of the table: its descriptor, the
    /// segment count and its key range (the table itself stays in the node).
    pub fn read_of(&self, s: usize) -> Option<SegRead> {
        let desc = self.desc(s)?;
        let (lo, hi) = self.range(s);
        Some(SegRead {
            desc,
            count: self.len(),
            lo: lo.map(<[u8]>::to_vec),
            hi: hi.map(<[u8]>::to_vec),
        })
    }

    /// Memory the table holds (the cache charges it): its box and its two slices.
    pub fn mem_bytes(&self) -> usize {
        alloc_bytes(std::mem::size_of::<Self>())
            + alloc_bytes(self.words.len() * 4)
            + alloc_bytes(self.keys.len())
    }
}

/// One segment to read alone (`SegTable::read_of`).
#[derive(Debug, Clone)]
pub struct SegRead {
    pub desc: PartDesc,
    /// Segments in the buffer's table.
    pub count: usize,
    pub lo: Option<Vec<u8>>,
    pub hi: Option<Vec<u8>>,
}

impl SegRead {
    pub fn range(&self) -> (Option<&[u8]>, Option<&[u8]>) {
        (self.lo.as_deref(), self.hi.as_deref())
    }
}

/// Bytes a segment table of `count` segments with first keys `lows` takes in a header
/// (`put_table`; one segment: no table but its count).
pub fn table_len(count: usize, lows: &[Vec<u8>]) -> usize {
    match count {
        0 | 1 => 4,
        k => 4 + 12 * k + lows.iter().map(|l| 4 + l.len()).sum::<usize>(),
    }
}

/// Appends a child's segment table to a header: u32 segment count, then for two or more
/// segments each one's stored length, raw length and CRC, then the first keys of segments
/// `1..`.
pub fn put_table(out: &mut Vec<u8>, segs: Option<&SegTable>) {
    let Some(t) = segs else {
        out.extend_from_slice(&1u32.to_le_bytes());
        return;
    };
    out.extend_from_slice(&(t.len() as u32).to_le_bytes());
    for d in t.descs() {
        out.extend_from_slice(&d.stored_len.to_le_bytes());
        out.extend_from_slice(&d.raw_len.to_le_bytes());
        out.extend_from_slice(&d.crc.to_le_bytes());
    }
    for l in t.lows() {
        put_bytes(out, l);
    }
}

/// Reads a child's segment table for the buffer `whole` (S1).
pub fn read_table(r: &mut Reader<'_>, whole: &PartDesc) -> Result<Option<Box<SegTable>>, String> {
    let k = r.u32()? as usize;
    if k == 1 {
        return Ok(None);
    }
    if k == 0 || k > r.remaining() / 12 {
        return Err(format!("segment table of {k} segments"));
    }
    let mut descs = Vec::with_capacity(k);
    let (mut offset, mut raw) = (u64::from(whole.offset), 0u64);
    for _ in 0..k {
        let stored_len = r.u32()?;
        let raw_len = r.u32()?;
        let crc = r.u32()?;
        descs.push(PartDesc {
            offset: u32::try_from(offset).map_err(|_| "segment offset overflows")?,
            stored_len,
            raw_len,
            crc,
            codec: whole.codec,
        });
        offset += u64::from(stored_len);
        raw += u64::from(raw_len);
    }
    if offset != u64::from(whole.offset) + u64::from(whole.stored_len)
        || raw != u64::from(whole.raw_len)
    {
        return Err("segment lengths do not sum to the buffer's (S1)".into());
    }
    let lows = (1..k).map(|_| r.bytes()).collect::<Result<Vec<_>, _>>()?;
    if lows.windows(2).any(|w| w[0] >= w[1]) {
        return Err("segment keys not increasing (S1)".into());
    }
    Ok(Some(Box::new(SegTable::new(&descs, &lows))))
}

/// Cuts `buffer` for writing: the message ranges of its segments (one range for a buffer of
/// at most `target` raw bytes or a single key).
pub fn cuts(buffer: &MsgBuffer, target: usize) -> Vec<Range<usize>> {
    let starts = buffer.segment_starts(target);
    let ends = starts.iter().skip(1).copied().chain([buffer.len()]);
    starts
        .iter()
        .copied()
        .zip(ends)
        .map(|(a, b)| a..b)
        .collect()
}

/// Decodes a whole buffer from its stored bytes: checks the buffer's CRC once, then
/// decompresses each segment and joins them (the order check across segments is
/// `MsgBuffer::decode`'s).
pub fn decode_whole(d: &BufferDesc, stored: &[u8]) -> Result<MsgBuffer, String> {
    MsgBuffer::join(decompress_whole(&d.whole, d.segs.as_deref(), stored)?)
}

/// The raw bytes of a whole partition (a buffer or a basement) from its stored bytes, one
/// vector per segment: checks the partition's CRC once, then decompresses each segment.
pub fn decompress_whole(
    whole: &PartDesc,
    segs: Option<&SegTable>,
    stored: &[u8],
) -> Result<Vec<Vec<u8>>, String> {
    let Some(t) = segs else {
        return super::format::decode_partition_raw(whole, stored).map(|raw| vec![raw]);
    };
    if stored.len() != whole.stored_len as usize {
        return Err(format!(
            "partition is {} bytes, descriptor says {}",
            stored.len(),
            whole.stored_len
        ));
    }
    let crc = checksum(stored);
    if crc != whole.crc {
        return Err(format!(
            "partition checksum mismatch: expected {:#010x}, found {crc:#010x}",
            whole.crc
        ));
    }
    let mut raws = Vec::with_capacity(t.len());
    for s in t.descs() {
        let at = (s.offset - whole.offset) as usize;
        let bytes = &stored[at..at + s.stored_len as usize];
        raws.push(decompress(s.codec, bytes, s.raw_len as usize)?);
    }
    Ok(raws)
}

/// Joins the raw bytes of consecutive segments (each a u32 item count, then its items: a
/// buffer's messages or a basement's entries) into the raw bytes of the whole: the counts
/// summed, the items back to back. The caller's decode checks the order across segments.
pub fn join_raw(mut raws: Vec<Vec<u8>>) -> Result<Vec<u8>, String> {
    const COUNT_BYTES: usize = 4;
    if raws.len() == 1 {
        return Ok(raws.pop().unwrap_or_default());
    }
    let mut count = 0u32;
    let mut len = COUNT_BYTES;
    for r in &raws {
        let n = r
            .get(..COUNT_BYTES)
            .ok_or("segment shorter than its item count")?;
        let n = u32::from_le_bytes(n.try_into().map_err(|_| "count")?);
        count = count.checked_add(n).ok_or("segment counts overflow")?;
        len += r.len() - COUNT_BYTES;
    }
    let mut raw = Vec::with_capacity(len);
    raw.extend_from_slice(&count.to_le_bytes());
    for r in &raws {
        raw.extend_from_slice(&r[COUNT_BYTES..]);
    }
    Ok(raw)
}

/// Checks that segment `s`, read alone and holding keys `first..=last` (`None`: it is
/// empty), lies in its range `[lo, hi)` (S2). A segment is never empty: cuts fall between
/// items.
pub fn check_piece(
    s: usize,
    (lo, hi): (Option<&[u8]>, Option<&[u8]>),
    first: Option<&[u8]>,
    last: Option<&[u8]>,
) -> Result<(), String> {
    let below = matches!((first, lo), (Some(f), Some(lo)) if f < lo);
    let above = matches!((last, hi), (Some(l), Some(hi)) if l >= hi);
    if below || above || first.is_none() {
        return Err(format!("segment {s} holds keys outside its range (S2)"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::msg::{Msg, Msn};
    use crate::vocab::Op;
    use crate::vocab::Ts;

    fn buffer(keys: usize, per_key: usize) -> MsgBuffer {
        let mut b = MsgBuffer::new();
        let mut msn = 0;
        for k in 0..keys {
            for _ in 0..per_key {
                msn += 1;
                let m = Msg {
                    msn: Msn(msn),
                    ts: Ts(msn),
                    op: Op::Put(vec![7; 100]),
                };
                b.push(format!("key{k:05}").as_bytes(), m.as_msg_ref());
            }
        }
        b
    }

    #[test]
    fn cuts_fall_between_keys_and_near_the_target() {
        let b = buffer(300, 3);
        let cuts = cuts(&b, 4096);
        assert!(cuts.len() > 20, "{} segments", cuts.len());
        assert_eq!(cuts.first().map(|r| r.start), Some(0));
        assert_eq!(cuts.last().map(|r| r.end), Some(b.len()));
        let keys: Vec<Vec<u8>> = b
            .iter()
            .flat_map(|(k, m)| m.map(move |_| k.to_vec()))
            .collect();
        for w in cuts.windows(2) {
            assert_eq!(w[0].end, w[1].start);
            assert_ne!(
                keys[w[1].start - 1],
                keys[w[1].start],
                "a key split across segments"
            );
        }
        for r in &cuts {
            let bytes = b.encode_range(r.clone()).len();
            assert!(bytes <= 4096 + 400, "segment of {bytes} bytes");
        }
    }

    #[test]
    fn a_table_answers_as_its_descriptors_and_keys() {
        let codec = crate::Compression::Zstd;
        let descs: Vec<PartDesc> = (0..5u32)
            .scan(100u32, |at, i| {
                let d = PartDesc {
                    offset: *at,
                    stored_len: 10 + i,
                    raw_len: 40 + i,
                    crc: 7 * i,
                    codec,
                };
                *at += d.stored_len;
                Some(d)
            })
            .collect();
        let lows: Vec<Vec<u8>> = ["b", "bb", "d", "x"]
            .iter()
            .map(|k| k.as_bytes().to_vec())
            .collect();
        let t = SegTable::new(&descs, &lows);
        assert_eq!(t.len(), 5);
        assert_eq!(t.descs().collect::<Vec<_>>(), descs);
        assert!((0..5).all(|s| t.desc(s) == Some(descs[s])) && t.desc(5).is_none());
        assert_eq!(t.lows().map(<[u8]>::to_vec).collect::<Vec<_>>(), lows);
        for probe in ["", "a", "b", "ba", "bb", "c", "d", "w", "x", "z"] {
            let want = lows.partition_point(|l| l.as_slice() <= probe.as_bytes());
            assert_eq!(t.index(probe.as_bytes()), want, "{probe}");
        }
        assert_eq!(t.range(0), (None, Some(&b"b"[..])));
        assert_eq!(t.range(2), (Some(&b"bb"[..]), Some(&b"d"[..])));
        assert_eq!(t.range(4), (Some(&b"x"[..]), None));
        let mut header = Vec::new();
        put_table(&mut header, Some(&t));
        assert_eq!(header.len(), table_len(5, &lows));
        let whole = PartDesc {
            offset: 100,
            stored_len: descs.iter().map(|d| d.stored_len).sum(),
            raw_len: descs.iter().map(|d| d.raw_len).sum(),
            crc: 0,
            codec,
        };
        let back = read_table(&mut Reader::new(&header), &whole).expect("read back");
        assert_eq!(back.as_deref(), Some(&t));
    }

    #[test]
    fn a_small_buffer_or_one_key_is_one_segment() {
        assert_eq!(cuts(&buffer(3, 2), 4096).len(), 1);
        assert_eq!(cuts(&buffer(1, 200), 4096).len(), 1);
        assert_eq!(cuts(&MsgBuffer::new(), 4096), vec![0..0]);
    }

    #[test]
    fn joined_segments_are_the_buffer() {
        let b = buffer(200, 2);
        let raws = cuts(&b, 2048)
            .into_iter()
            .map(|r| b.encode_range(r).into_owned())
            .collect();
        let joined = MsgBuffer::join(raws).expect("join");
        assert_eq!(joined.encode(), b.encode());
        // A buffer read from disk (canonical) cuts to the same bytes by slicing its arena.
        let read = MsgBuffer::decode(b.encode().into_owned()).expect("decode");
        assert!(read.is_packed());
        for r in cuts(&b, 2048) {
            assert_eq!(read.encode_range(r.clone()), b.encode_range(r));
        }
    }
}
