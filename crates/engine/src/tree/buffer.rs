//! Message buffers: one child's pending messages, ordered by key then MSN, and their raw
//! byte format (`docs/format-node.md`, "Message buffer"). Like a basement (`basement.rs`) a
//! buffer is held as raw messages in one byte arena plus the offset of each message in
//! (key, MSN) order:
//!
//! - read from disk, the arena is exactly the decompressed bytes (**canonical**), validated
//!   once: a lookup that has to read an evicted buffer allocates twice, instead of building
//!   a map of every message in a buffer of hundreds of KB to use one;
//! - a push appends the message to the arena and inserts its offset; taking or splitting
//!   messages off leaves their bytes as garbage, and the arena is rewritten in order when
//!   garbage passes a quarter of it.
//!
//! A raw message is exactly as long as it weighs against the node size (`MSG_OVERHEAD_BYTES`
//! plus key and payload), so the garbage is the arena's length less the count slot and
//! `bytes`. The map form this replaced held ~150 bytes of memory per message beyond its
//! bytes in a map slot, a message list and two allocations.
//!
//! Invariants:
//! Q1. every offset starts a whole message inside the arena that was validated (read from
//!     disk) or written here: its op code is known (a delete has no payload); in offset
//!     order keys do not decrease and one key's messages have increasing MSNs and
//!     non-decreasing commit timestamps (a provisional stamp may be followed by any stamp:
//!     `mvcc::stamps_in_order`). The accessors rely on Q1 and index without checking again.
//! Q2. `bytes` is the sum of the messages' sizes and the offsets are the count.
//! Q3. the arena is empty (no messages), or holds the count slot, the messages, and
//!     `arena.len() - 4 - bytes` bytes of garbage; when `canonical` and not empty it is the
//!     buffer's encoding (count right, messages in order, no garbage).
//! Q4. `heads[i]` is `head(key of message i)`: its first 8 bytes, big-endian, zero-padded.
//!     Heads never decrease in key order, so a search compares heads first and reads the
//!     arena only among equal heads. A binary search over the offsets alone touched the
//!     arena at a random place per probe: 15% of a random fill's CPU went to those cache
//!     misses in root buffers
//!     (docs/bench/history/2026-11-26-engine-mid-size-cpu-per-operation-busy-machine.md).

#[cfg(test)]
use super::msg::Msg;
use super::msg::{Msn, OpRef, MSG_OVERHEAD_BYTES};
use super::node::alloc_bytes;
use super::packed::{u32_at, u64_at};
use crate::bytes::{put_bytes, Reader};
use crate::mvcc::stamps_in_order;
#[cfg(test)]
use crate::vocab::Op;
use crate::vocab::Ts;
use std::borrow::Cow;
#[cfg(test)]
use std::collections::BTreeMap;

/// Smallest raw message: MSN, timestamp, op code and two lengths.
const MIN_MSG_BYTES: usize = 8 + 8 + 1 + 4 + 4;
/// Offset of the key length inside a raw message.
const KEY_LEN_AT: usize = 17;
/// The message count at the start of the encoding.
const COUNT_BYTES: usize = 4;
/// Garbage below this is never worth a rewrite of the arena.
const GARBAGE_MIN_BYTES: usize = 4096;

/// One child's pending messages, by key and MSN.
#[derive(Debug, Clone)]
pub struct MsgBuffer {
    /// The count slot, then messages (Q1, Q3).
    arena: Vec<u8>,
    /// Where each message starts, in (key, MSN) order.
    starts: Vec<u32>,
    /// Each message's key head, beside its offset (Q4).
    heads: Vec<u64>,
    /// Serialized size of the messages (Q2).
    bytes: usize,
    /// The arena is the encoding (Q3).
    canonical: bool,
}

/// An empty buffer holds no allocation: its arena is empty, not a count slot.
impl Default for MsgBuffer {
    fn default() -> Self {
        MsgBuffer {
            arena: Vec::new(),
            starts: Vec::new(),
            heads: Vec::new(),
            bytes: 0,
            canonical: true,
        }
    }
}

/// One message, borrowed from a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MsgRef<'a> {
    pub msn: Msn,
    pub ts: Ts,
    pub op: OpRef<'a>,
}

#[cfg(test)]
impl Msg {
    pub fn as_msg_ref(&self) -> MsgRef<'_> {
        MsgRef {
            msn: self.msn,
            ts: self.ts,
            op: self.op.as_op_ref(),
        }
    }
}

#[cfg(test)]
impl MsgRef<'_> {
    pub fn to_msg(self) -> Msg {
        Msg {
            msn: self.msn,
            ts: self.ts,
            op: self.op.to_op(),
        }
    }
}

/// One key's messages, oldest first.
#[derive(Debug, Clone)]
pub struct Msgs<'a> {
    arena: &'a [u8],
    starts: std::slice::Iter<'a, u32>,
}

impl<'a> Iterator for Msgs<'a> {
    type Item = MsgRef<'a>;

    fn next(&mut self) -> Option<MsgRef<'a>> {
        self.starts.next().map(|&s| msg_at(self.arena, s as usize))
    }
}

/// The message starting at `at` of checked bytes (Q1).
#[allow(
    clippy::expect_used,
    reason = "buffered messages were checked when the buffer was decoded (Q1)"
)]
fn msg_at(arena: &[u8], at: usize) -> MsgRef<'_> {
    let klen = u32_at(arena, at + KEY_LEN_AT);
    let p_at = at + KEY_LEN_AT + 4 + klen;
    let plen = u32_at(arena, p_at);
    let payload = &arena[p_at + 4..p_at + 4 + plen];
    let op =
        OpRef::from_code(arena[at + 16], payload).expect("buffered messages were checked (Q1)");
    MsgRef {
        msn: Msn(u64_at(arena, at)),
        ts: Ts(u64_at(arena, at + 8)),
        op,
    }
}

/// The key of the message starting at `at` of checked bytes (Q1).
fn key_at(arena: &[u8], at: usize) -> &[u8] {
    let n = u32_at(arena, at + KEY_LEN_AT);
    &arena[at + KEY_LEN_AT + 4..at + KEY_LEN_AT + 4 + n]
}

/// Messages for one key must arrive in MSN and commit order (Q1).
fn assert_in_order(prev: MsgRef<'_>, m: MsgRef<'_>) {
    assert!(
        prev.msn < m.msn && stamps_in_order(prev.ts, m.ts),
        "messages for one key must arrive in MSN and commit order"
    );
}

/// A key's head (Q4): its first 8 bytes as a big-endian number, zero-padded. For keys a
/// and b, a <= b implies head(a) <= head(b).
fn head(key: &[u8]) -> u64 {
    let mut h = [0u8; 8];
    let n = key.len().min(8);
    h[..n].copy_from_slice(&key[..n]);
    u64::from_be_bytes(h)
}

/// How long the message starting at `at` of checked bytes is (Q1).
fn msg_len(arena: &[u8], at: usize) -> usize {
    let klen = u32_at(arena, at + KEY_LEN_AT);
    MIN_MSG_BYTES + klen + u32_at(arena, at + KEY_LEN_AT + 4 + klen)
}

impl MsgBuffer {
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes raw buffer bytes (decompressed from disk) as the arena, checking everything Q1
    /// promises.
    pub fn decode(raw: Vec<u8>) -> Result<MsgBuffer, String> {
        let (starts, bytes) = check_raw(&raw)?;
        let heads = starts
            .iter()
            .map(|&s| head(key_at(&raw, s as usize)))
            .collect();
        Ok(MsgBuffer {
            arena: raw,
            starts,
            heads,
            bytes,
            canonical: true,
        })
    }

    /// The raw bytes: a message count, then each message in (key, MSN) order. A canonical
    /// arena's are its bytes as they are (Q3).
    pub fn encode(&self) -> Cow<'_, [u8]> {
        if self.starts.is_empty() {
            Cow::Borrowed(&[0; COUNT_BYTES])
        } else if self.canonical {
            Cow::Borrowed(&self.arena)
        } else {
            Cow::Owned(self.copy_of(0..self.len()).arena)
        }
    }

    /// The raw bytes of messages `range` alone, as a buffer of their own (a segment:
    /// `segment.rs`).
    pub fn encode_range(&self, range: std::ops::Range<usize>) -> Cow<'_, [u8]> {
        if range == (0..self.len()) {
            return self.encode();
        }
        if !self.canonical || range.is_empty() {
            return Cow::Owned(self.copy_of(range).arena);
        }
        // A canonical arena holds the range's messages back to back (Q3): one copy.
        let start = self.starts[range.start] as usize;
        let last = self.starts[range.end - 1] as usize;
        let end = last + msg_len(&self.arena, last);
        #[allow(
            clippy::expect_used,
            reason = "a buffer's messages fit its arena, below 4 GiB"
        )]
        let count = u32::try_from(range.len()).expect("a buffer's messages fit its arena");
        let mut out = Vec::with_capacity(COUNT_BYTES + end - start);
        out.extend_from_slice(&count.to_le_bytes());
        out.extend_from_slice(&self.arena[start..end]);
        Cow::Owned(out)
    }

    /// Where segments of about `target` raw bytes start (`segment::cuts`): message indexes,
    /// the first 0, each later one the first message of a key, so one key's messages stay
    /// in one segment.
    pub fn segment_starts(&self, target: usize) -> Vec<usize> {
        let mut out = vec![0];
        let mut size = COUNT_BYTES;
        for i in 0..self.len() {
            let at = self.starts[i] as usize;
            let new_key = i > 0
                && (self.heads[i] != self.heads[i - 1]
                    || key_at(&self.arena, at) != key_at(&self.arena, self.starts[i - 1] as usize));
            let len = msg_len(&self.arena, at);
            if new_key && size + len > target {
                out.push(i);
                size = COUNT_BYTES;
            }
            size += len;
        }
        out
    }

    /// Joins the raw bytes of consecutive segments into one buffer, checking everything Q1
    /// promises across them.
    pub fn join(raws: Vec<Vec<u8>>) -> Result<MsgBuffer, String> {
        MsgBuffer::decode(super::segment::join_raw(raws)?)
    }

    #[cfg(test)]
    pub fn is_packed(&self) -> bool {
        self.canonical
    }

    /// Adds a message; MSNs for one key must arrive in increasing order.
    pub fn push(&mut self, key: &[u8], m: MsgRef<'_>) {
        let at = self.upper_bound(key);
        self.assert_follows(at, key, m);
        let start = self.append(key, m);
        self.starts.insert(at, start);
        self.heads.insert(at, head(key));
    }

    /// Adds a run of messages in (key, MSN) order, each newer than any message here for its
    /// key (a flush's piece for one child). The run is merged in one pass: inserting its
    /// messages one at a time moved the offsets behind each of them, 10-18% of a random
    /// fill's CPU
    /// (docs/bench/history/2026-11-26-engine-mid-size-cpu-per-operation-busy-machine.md).
    pub fn push_run<'k>(&mut self, run: impl Iterator<Item = (&'k [u8], MsgRef<'k>)>) {
        let mut inserts: Vec<(usize, u32, u64)> = Vec::new();
        let mut last: Option<(&[u8], MsgRef<'_>)> = None;
        for (key, m) in run {
            let at = self.upper_bound(key);
            match last {
                Some((k, prev)) if k == key => assert_in_order(prev, m),
                Some((k, _)) => assert!(k < key, "a pushed run must be in key order"),
                None => {}
            }
            if last.is_none_or(|(k, _)| k != key) {
                self.assert_follows(at, key, m);
            }
            let start = self.append(key, m);
            inserts.push((at, start, head(key)));
            last = Some((key, m));
        }
        if inserts.is_empty() {
            return;
        }
        self.merge_in(&inserts);
    }

    /// Inserts `(at, start, head)` slots, `at` non-decreasing positions in the current
    /// arrays, in place: from the back, each block of old slots moves once, and the slots
    /// before the first insertion point do not move at all.
    fn merge_in(&mut self, inserts: &[(usize, u32, u64)]) {
        let old = self.starts.len();
        self.starts.reserve_exact(inserts.len());
        self.heads.reserve_exact(inserts.len());
        self.starts.resize(old + inserts.len(), 0);
        self.heads.resize(old + inserts.len(), 0);
        let (mut read, mut write) = (old, old + inserts.len());
        for &(at, start, h) in inserts.iter().rev() {
            let block = read - at;
            self.starts.copy_within(at..read, write - block);
            self.heads.copy_within(at..read, write - block);
            write -= block + 1;
            read = at;
            self.starts[write] = start;
            self.heads[write] = h;
        }
        debug_assert_eq!(
            read, write,
            "every old slot before the first insertion stays"
        );
    }

    /// Checks that `m` may follow the message before offset slot `at` if that one has the
    /// same key: MSNs for one key arrive in increasing order and commit stamps in order.
    fn assert_follows(&self, at: usize, key: &[u8], m: MsgRef<'_>) {
        // The previous message can be the same key's only if its head is (Q4): reading it
        // from the arena otherwise would be a cache miss per push for nothing.
        let same_head = at.checked_sub(1).filter(|&i| self.heads[i] == head(key));
        if let Some(&prev) = same_head.map(|i| &self.starts[i]) {
            let prev = prev as usize;
            if key_at(&self.arena, prev) == key {
                assert_in_order(msg_at(&self.arena, prev), m);
            }
        }
    }

    /// Serialized size of the buffer's messages (what it weighs against the node size).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn len(&self) -> usize {
        self.starts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }

    /// Number of distinct keys.
    pub fn key_count(&self) -> usize {
        self.iter().count()
    }

    /// Memory the buffer holds (what the cache charges for it): the arena's and the
    /// offsets' allocations, spare room included.
    pub fn mem_bytes(&self) -> usize {
        alloc_bytes(self.arena.capacity())
            + alloc_bytes(self.starts.capacity() * std::mem::size_of::<u32>())
            + alloc_bytes(self.heads.capacity() * std::mem::size_of::<u64>())
    }

    /// The key of message `i` (in key order).
    pub fn key(&self, i: usize) -> &[u8] {
        key_at(&self.arena, self.starts[i] as usize)
    }

    /// The smallest key with a message here.
    pub fn first_key(&self) -> Option<&[u8]> {
        self.starts
            .first()
            .map(|&s| key_at(&self.arena, s as usize))
    }

    /// Pending messages for `key`, oldest first.
    pub fn get(&self, key: &[u8]) -> Msgs<'_> {
        let lo = self.lower_bound(key);
        // A message whose head differs holds another key (Q4): the arena is read only for
        // equal heads, so a key with nothing buffered here (most lookups) costs no miss in it.
        let h = head(key);
        let hi = lo
            + self.starts[lo..]
                .iter()
                .zip(&self.heads[lo..])
                .take_while(|&(&s, &hd)| hd == h && key_at(&self.arena, s as usize) == key)
                .count();
        self.msgs(lo, hi)
    }

    /// All messages in (key, MSN) order, one item per key.
    pub fn iter(&self) -> Iter<'_> {
        self.range(None, None)
    }

    /// Messages with keys in `[lo, hi)` (unbounded where `None`), one item per key.
    pub fn range(&self, lo: Option<&[u8]>, hi: Option<&[u8]>) -> Iter<'_> {
        let front = lo.map_or(0, |k| self.lower_bound(k));
        let back = hi.map_or(self.len(), |k| self.lower_bound(k));
        Iter {
            buffer: self,
            front,
            back: back.max(front),
        }
    }

    /// Takes every message, leaving the buffer empty.
    #[cfg(test)]
    pub fn take_all(&mut self) -> BTreeMap<Vec<u8>, Vec<Msg>> {
        let all = self.owned(self.iter());
        *self = MsgBuffer::new();
        all
    }

    /// Takes the messages of the lowest keys, whole keys at a time, until at least
    /// `max_bytes` of serialized messages are taken or the buffer is empty. A flush moves a
    /// buffer in such pieces so that the messages in flight, charged to no node, stay small;
    /// they move as raw bytes, one copy, never as a message per allocation.
    pub fn take_first(&mut self, max_bytes: usize) -> MsgBuffer {
        let mut groups = self.iter();
        let mut bytes = 0;
        while bytes < max_bytes && groups.front < groups.back {
            let before = groups.front;
            groups.next();
            bytes += self.bytes_of(before..groups.front);
        }
        let n = groups.front;
        let taken = self.copy_of(0..n);
        self.remove_first(n, bytes);
        taken
    }

    /// Splits off every message with key >= `pivot` into a new buffer.
    pub fn split_off(&mut self, pivot: &[u8]) -> MsgBuffer {
        let at = self.lower_bound(pivot);
        if at == self.len() {
            return MsgBuffer::new();
        }
        let upper = self.copy_of(at..self.len());
        self.starts.truncate(at);
        self.heads.truncate(at);
        self.bytes -= upper.bytes;
        self.canonical = false;
        self.compact_if_wasteful();
        upper
    }

    /// Moves all of `other`'s messages into this buffer (keys must not interleave MSNs
    /// out of order; used when merging siblings whose key ranges are disjoint).
    pub fn absorb(&mut self, other: MsgBuffer) {
        for (key, msgs) in other.iter() {
            for m in msgs {
                self.push(key, m);
            }
        }
    }

    /// Messages `lo..hi` (one key's).
    fn msgs(&self, lo: usize, hi: usize) -> Msgs<'_> {
        Msgs {
            arena: &self.arena,
            starts: self.starts[lo..hi].iter(),
        }
    }

    /// The first message whose key is not below `key` (the count if there is none).
    fn lower_bound(&self, key: &[u8]) -> usize {
        self.bound(key, |k| k < key)
    }

    /// The first message whose key is above `key`.
    fn upper_bound(&self, key: &[u8]) -> usize {
        self.bound(key, |k| k <= key)
    }

    /// The first message whose key fails `below` (a predicate true for a prefix of the
    /// messages): searched by heads (Q4), then in the arena among the heads equal to `key`'s.
    fn bound(&self, key: &[u8], below: impl Fn(&[u8]) -> bool) -> usize {
        let h = head(key);
        let lo = self.heads.partition_point(|&x| x < h);
        let tie = self.heads[lo..].partition_point(|&x| x == h);
        lo + self.starts[lo..lo + tie].partition_point(|&s| below(key_at(&self.arena, s as usize)))
    }

    /// Serialized size of messages `range`.
    fn bytes_of(&self, range: std::ops::Range<usize>) -> usize {
        self.starts[range]
            .iter()
            .map(|&s| msg_len(&self.arena, s as usize))
            .sum()
    }

    #[cfg(test)]
    fn owned<'a>(&self, groups: Iter<'a>) -> BTreeMap<Vec<u8>, Vec<Msg>> {
        groups
            .map(|(k, msgs)| (k.to_vec(), msgs.map(MsgRef::to_msg).collect()))
            .collect()
    }

    /// Drops the first `n` messages, which weigh `bytes`.
    fn remove_first(&mut self, n: usize, bytes: usize) {
        self.starts.drain(..n);
        self.heads.drain(..n);
        self.bytes -= bytes;
        if self.starts.is_empty() {
            *self = MsgBuffer::new();
            return;
        }
        self.canonical = false;
        self.compact_if_wasteful();
    }

    /// A canonical buffer of copies of messages `range`.
    fn copy_of(&self, range: std::ops::Range<usize>) -> MsgBuffer {
        let bytes = self.bytes_of(range.clone());
        let mut out = MsgBuffer::new();
        if range.is_empty() {
            return out;
        }
        out.arena.reserve_exact(COUNT_BYTES + bytes);
        out.arena.extend_from_slice(&[0; COUNT_BYTES]);
        out.starts.reserve_exact(range.len());
        out.heads = self.heads[range.clone()].to_vec();
        for &s in &self.starts[range] {
            let s = s as usize;
            out.starts.push(out.arena.len() as u32);
            out.arena
                .extend_from_slice(&self.arena[s..s + msg_len(&self.arena, s)]);
        }
        out.bytes = bytes;
        out.canonical = true;
        #[allow(
            clippy::expect_used,
            reason = "a buffer's messages fit its arena, below 4 GiB"
        )]
        let count = u32::try_from(out.len()).expect("a buffer's messages fit its arena");
        out.arena[..COUNT_BYTES].copy_from_slice(&count.to_le_bytes());
        out
    }

    /// Rewrites the arena in order when a quarter of it is garbage (Q3).
    fn compact_if_wasteful(&mut self) {
        let garbage = self.arena.len().saturating_sub(COUNT_BYTES + self.bytes);
        if garbage > GARBAGE_MIN_BYTES && garbage * 4 > self.arena.len() {
            *self = self.copy_of(0..self.len());
        }
    }

    /// Writes a message at the arena's end and returns where it starts. The arena grows by
    /// an eighth at least, not by doubling: its spare room is charged to the cache.
    fn append(&mut self, key: &[u8], m: MsgRef<'_>) -> u32 {
        let need = MIN_MSG_BYTES + key.len() + m.op.payload().len();
        if self.arena.is_empty() {
            self.arena.reserve_exact(COUNT_BYTES + need);
            self.arena.extend_from_slice(&[0; COUNT_BYTES]);
        }
        if self.arena.capacity() - self.arena.len() < need {
            self.arena.reserve_exact(need.max(self.arena.len() / 8));
        }
        #[allow(
            clippy::expect_used,
            reason = "a buffer's arena stays below 4 GiB (node sizes are bounded)"
        )]
        let start = u32::try_from(self.arena.len()).expect("a buffer's arena stays below 4 GiB");
        self.arena.extend_from_slice(&m.msn.0.to_le_bytes());
        self.arena.extend_from_slice(&m.ts.0.to_le_bytes());
        self.arena.push(m.op.code());
        put_bytes(&mut self.arena, key);
        put_bytes(&mut self.arena, m.op.payload());
        self.bytes += need;
        self.canonical = false;
        start
    }
}

/// Equal messages, whatever the arenas hold besides. Equal totals and equal groups as far as
/// both go leave no room for an extra group on either side.
impl PartialEq for MsgBuffer {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len()
            && self
                .iter()
                .zip(other.iter())
                .all(|((k1, m1), (k2, m2))| k1 == k2 && m1.eq(m2))
    }
}

impl Eq for MsgBuffer {}

/// Iterator over a buffer's keys in order, each with its messages: messages `front..back`
/// are left, and both ends fall between keys.
pub struct Iter<'a> {
    buffer: &'a MsgBuffer,
    front: usize,
    back: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a [u8], Msgs<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        if self.front >= self.back {
            return None;
        }
        let b = self.buffer;
        let key = key_at(&b.arena, b.starts[self.front] as usize);
        let lo = self.front;
        self.front += 1;
        while self.front < self.back && key_at(&b.arena, b.starts[self.front] as usize) == key {
            self.front += 1;
        }
        Some((key, b.msgs(lo, self.front)))
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.front >= self.back {
            return None;
        }
        let b = self.buffer;
        let key = key_at(&b.arena, b.starts[self.back - 1] as usize);
        let hi = self.back;
        self.back -= 1;
        while self.back > self.front && key_at(&b.arena, b.starts[self.back - 1] as usize) == key {
            self.back -= 1;
        }
        Some((key, b.msgs(self.back, hi)))
    }
}

/// Checks raw buffer bytes (Q1); returns each message's offset and the bytes (Q2). Never panics: every length is checked against what is left.
fn check_raw(raw: &[u8]) -> Result<(Vec<u32>, usize), String> {
    if u32::try_from(raw.len()).is_err() {
        return Err(format!("buffer of {} bytes is too large", raw.len()));
    }
    let mut r = Reader::new(raw);
    let n = r.u32()? as usize;
    if n > r.remaining() / MIN_MSG_BYTES {
        return Err(format!("buffer claims {n} messages in {} bytes", raw.len()));
    }
    let mut starts = Vec::with_capacity(n);
    let mut bytes = 0;
    let mut prev: Option<(&[u8], u64, u64)> = None;
    for _ in 0..n {
        let at = r.pos() as u32;
        let msn = r.u64()?;
        let ts = r.u64()?;
        let code = r.u8()?;
        let klen = r.u32()? as usize;
        let key = r.take(klen)?;
        let plen = r.u32()? as usize;
        let payload = r.take(plen)?;
        if OpRef::from_code(code, payload).is_none() {
            return Err(format!("bad message op {code}"));
        }
        let out_of_order = prev.is_some_and(|(pk, pmsn, pts)| {
            pk > key || (pk == key && (pmsn >= msn || !stamps_in_order(Ts(pts), Ts(ts))))
        });
        if out_of_order {
            return Err("buffer messages out of order".into());
        }
        starts.push(at);
        prev = Some((key, msn, ts));
        bytes += MSG_OVERHEAD_BYTES + klen + plen;
    }
    r.finish()?;
    Ok((starts, bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{rngs::StdRng, Rng, SeedableRng};

    fn msg(msn: u64, op: Op) -> Msg {
        Msg {
            msn: Msn(msn),
            ts: Ts(msn),
            op,
        }
    }

    fn push(b: &mut MsgBuffer, key: &[u8], m: Msg) {
        b.push(key, m.as_msg_ref());
    }

    fn sample() -> MsgBuffer {
        let mut b = MsgBuffer::new();
        for i in 0..40u8 {
            push(
                &mut b,
                &[i],
                msg(i as u64 + 1, Op::Put(vec![i; i as usize])),
            );
            if i % 5 == 0 {
                push(&mut b, &[i], msg(100 + i as u64, Op::Delete));
                push(&mut b, &[i], msg(200 + i as u64, Op::Update(vec![7])));
            }
        }
        b
    }

    fn packed(b: &MsgBuffer) -> MsgBuffer {
        MsgBuffer::decode(b.encode().into_owned()).expect("well formed")
    }

    #[test]
    fn split_and_absorb_keep_counts() {
        for mut b in [sample(), packed(&sample())] {
            let total = b.bytes();
            let n = b.len();
            let upper = b.split_off(&[20]);
            assert_eq!(b.len() + upper.len(), n);
            assert_eq!(b.bytes() + upper.bytes(), total);
            b.absorb(upper);
            assert_eq!(b.len(), n);
            assert_eq!(b.bytes(), total);
            assert_eq!(b, sample());
        }
    }

    #[test]
    fn take_first_moves_whole_lowest_keys_and_keeps_counts() {
        for mut b in [sample(), packed(&sample())] {
            let (total, n) = (b.bytes(), b.len());
            let mut seen = Vec::new();
            let mut moved = (0, 0);
            while !b.is_empty() {
                let before = b.bytes();
                let piece = b.take_first(100).take_all();
                assert!(!piece.is_empty(), "a non-empty buffer gives something");
                let bytes: usize = piece
                    .iter()
                    .flat_map(|(k, l)| l.iter().map(move |m| (k, m)))
                    .map(|(k, m)| MSG_OVERHEAD_BYTES + k.len() + m.op.payload().len())
                    .sum();
                assert_eq!(before - b.bytes(), bytes, "Q2 after taking a piece");
                moved.0 += piece.values().map(Vec::len).sum::<usize>();
                moved.1 += bytes;
                seen.extend(piece.into_keys());
            }
            assert_eq!(moved, (n, total));
            assert_eq!(b.mem_bytes(), 0, "nothing left charged");
            let want: Vec<Vec<u8>> = (0..40u8).map(|i| vec![i]).collect();
            assert_eq!(seen, want, "whole keys, lowest first, each once");
        }
    }

    #[test]
    fn canonical_and_changed_arenas_agree_on_every_read() {
        let map = sample();
        let p = packed(&map);
        assert!(p.is_packed() && !map.is_packed());
        assert_eq!(p, map);
        assert_eq!((p.len(), p.bytes()), (map.len(), map.bytes()), "Q2");
        assert_eq!((p.key_count(), map.key_count()), (40, 40));
        for k in 0..45u8 {
            assert!(p.get(&[k]).eq(map.get(&[k])), "key {k}");
        }
        let bounds = [
            None,
            Some(&[0u8][..]),
            Some(&[5u8][..]),
            Some(&[39u8][..]),
            Some(&[50u8][..]),
        ];
        for lo in bounds {
            // A range whose start is above its end is a caller's bug (the map panics).
            for hi in bounds
                .into_iter()
                .filter(|hi| lo.zip(*hi).is_none_or(|(l, h)| l <= h))
            {
                let a: Vec<_> = p.range(lo, hi).map(|(k, m)| (k, m.count())).collect();
                let b: Vec<_> = map.range(lo, hi).map(|(k, m)| (k, m.count())).collect();
                assert_eq!(a, b, "range {lo:?}..{hi:?}");
            }
        }
        assert!(p
            .iter()
            .rev()
            .map(|e| e.0)
            .eq(map.iter().rev().map(|e| e.0)));
        assert_eq!(p.encode(), map.encode());
        let mut unpacked = p.clone();
        let all = unpacked.take_all();
        assert_eq!(all.len(), 40);
        assert!(unpacked.is_empty());
    }

    /// Q2 and Q3 hold, and the buffer holds exactly the model's messages.
    fn agrees(b: &MsgBuffer, model: &BTreeMap<Vec<u8>, Vec<Msg>>) {
        let bytes: usize = (0..b.len()).map(|i| b.bytes_of(i..i + 1)).sum();
        assert_eq!(b.bytes, bytes, "Q2");
        assert!(
            b.arena.is_empty() || b.arena.len() >= COUNT_BYTES + b.bytes,
            "Q3"
        );
        if b.canonical && !b.arena.is_empty() {
            assert_eq!(check_raw(&b.arena), Ok((b.starts.clone(), b.bytes)), "Q3");
        }
        let heads: Vec<u64> = b
            .starts
            .iter()
            .map(|&s| head(key_at(&b.arena, s as usize)))
            .collect();
        assert_eq!(b.heads, heads, "Q4");
        let got: BTreeMap<Vec<u8>, Vec<Msg>> = b
            .iter()
            .map(|(k, m)| (k.to_vec(), m.map(MsgRef::to_msg).collect()))
            .collect();
        assert_eq!(&got, model);
        assert_eq!(b.key_count(), model.len());
        assert_eq!(b.len(), model.values().map(Vec::len).sum::<usize>());
    }

    /// Random pushes, pieces taken, splits and absorbs against a map of message lists.
    #[test]
    fn changes_match_a_model_of_message_lists() {
        let mut rng = StdRng::seed_from_u64(0x9E37_79B9_7F4A_7C15);
        let mut next = move |n: u64| rng.gen_range(0..n);
        let (mut b, mut model) = (MsgBuffer::new(), BTreeMap::new());
        let mut msn = 0;
        for step in 0..20_000u64 {
            match next(100) {
                0 => {
                    let piece = b.take_first(next(3_000) as usize).take_all();
                    for (k, list) in piece {
                        assert_eq!(model.pop_first(), Some((k, list)), "lowest keys first");
                    }
                }
                1 | 2 => {
                    let pivot = vec![next(256) as u8];
                    let upper = b.split_off(&pivot);
                    let model_upper = model.split_off(&pivot);
                    agrees(&upper, &model_upper);
                    let lower = MsgBuffer::decode(b.encode().into_owned());
                    assert_eq!(lower.as_ref(), Ok(&b), "what a split leaves encodes whole");
                    if next(2) == 0 {
                        b.absorb(upper);
                        model.extend(model_upper);
                    }
                }
                3 | 4 => {
                    // A run as a flush pushes it: sorted keys, several messages per key,
                    // keys sharing their 8-byte head among others (Q4's ties).
                    let mut run: BTreeMap<Vec<u8>, Vec<Msg>> = BTreeMap::new();
                    for _ in 0..next(40) {
                        let mut key = vec![next(256) as u8];
                        if next(2) == 0 {
                            key.extend_from_slice(&[9; 8]);
                            key.push(next(8) as u8);
                        }
                        msn += 1;
                        let op = Op::Put(vec![step as u8; next(30) as usize]);
                        run.entry(key).or_default().push(msg(msn, op));
                    }
                    b.push_run(
                        run.iter().flat_map(|(k, l)| {
                            l.iter().map(move |m| (k.as_slice(), m.as_msg_ref()))
                        }),
                    );
                    for (k, list) in run {
                        model.entry(k).or_insert_with(Vec::new).extend(list);
                    }
                }
                _ => {
                    msn += 1;
                    let key = vec![next(256) as u8, next(4) as u8];
                    let op = match next(3) {
                        0 => Op::Delete,
                        1 => Op::Update(vec![step as u8; next(50) as usize]),
                        _ => Op::Put(vec![step as u8; next(300) as usize]),
                    };
                    push(&mut b, &key, msg(msn, op.clone()));
                    model.entry(key).or_insert_with(Vec::new).push(msg(msn, op));
                }
            }
            if step % 500 == 0 {
                agrees(&b, &model);
                assert_eq!(MsgBuffer::decode(b.encode().into_owned()).as_ref(), Ok(&b));
            }
        }
        agrees(&b, &model);
    }

    #[test]
    fn malformed_bytes_are_errors_never_panics() {
        let good = sample().encode().into_owned();
        for cut in 0..good.len() {
            assert!(
                MsgBuffer::decode(good[..cut].to_vec()).is_err(),
                "cut at {cut}"
            );
        }
        let mut rng = shale_testkit::Rng(0x2545_F491_4F6C_DD1D);
        for _ in 0..2_000 {
            let mut raw = good.clone();
            let state = rng.next();
            let at = (state as usize) % raw.len();
            raw[at] ^= 1 << (state >> 61);
            if let Ok(b) = MsgBuffer::decode(raw) {
                // Whatever passes the checks must be readable without a panic.
                for (k, list) in b.iter() {
                    let _ = (k.len(), list.map(MsgRef::to_msg).count());
                }
            }
        }
    }

    #[test]
    #[should_panic(expected = "MSN and commit order")]
    fn out_of_order_msns_are_refused() {
        let mut b = MsgBuffer::new();
        push(&mut b, &[1], msg(5, Op::Delete));
        push(&mut b, &[1], msg(4, Op::Delete));
    }
}
