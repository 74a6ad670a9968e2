//! Message buffers: one child's pending messages, ordered by key then MSN, and their raw
//! byte format (`docs/format-node.md`, "Message buffer"). Like a basement (`basement.rs`) a
//! buffer is held in one of two forms:
//!
//! - **packed**: the raw bytes as decompressed from disk plus the offset where each key's
//!   messages start, searched in place. A lookup that has to read an evicted buffer (its key
//!   may have a message there) validates the bytes once and allocates twice, instead of
//!   building a map of every message in a buffer of hundreds of KB to use one.
//! - **map**: owned messages in a `BTreeMap`, which takes pushes, splits and drains. The
//!   first change to a packed buffer unpacks it.
//!
//! Invariants:
//! Q1. a packed buffer's bytes were validated when packed: every message lies whole inside
//!     the bytes, its op code is known (a delete has no payload), keys do not decrease, and
//!     one key's messages have increasing MSNs and non-decreasing timestamps; `groups[g]` is
//!     the offset of the first message of the `g`-th distinct key. The accessors rely on Q1
//!     and index without checking again.
//! Q2. `bytes` and `count` are the same in either form.

#[cfg(test)]
use super::msg::MsgOp;
use super::msg::{Msg, Msn, OpRef, MSG_OVERHEAD_BYTES};
use super::node::MSG_MEM_BYTES;
use super::packed::{u32_at, u64_at, Layout, Packed};
use crate::bytes::{put_bytes, Reader};
use crate::mvcc::Ts;
use std::borrow::Cow;
use std::collections::btree_map::{self, Entry};
use std::collections::BTreeMap;
use std::ops::{Bound, Range};

/// Smallest raw message: MSN, timestamp, op code and two lengths.
const MIN_MSG_BYTES: usize = 8 + 8 + 1 + 4 + 4;
/// Offset of the key length inside a raw message.
const KEY_LEN_AT: usize = 17;

/// One child's pending messages, by key and MSN.
#[derive(Debug, Clone, Default)]
pub struct MsgBuffer {
    form: Form,
    /// Serialized size of the messages (Q2).
    bytes: usize,
    count: usize,
    /// Unused room in the map form's message lists (capacity less length, summed), charged
    /// as memory: a key's second message grows its list to room for four.
    spare_slots: usize,
}

#[derive(Debug, Clone)]
enum Form {
    Map(BTreeMap<Vec<u8>, Vec<Msg>>),
    Packed(Packed<Groups>),
}

impl Default for Form {
    fn default() -> Self {
        Form::Map(BTreeMap::new())
    }
}

/// A buffer's key groups in the packed form (Q1): each starts with its first message,
/// whose key is at `KEY_LEN_AT`.
#[derive(Debug, Clone)]
struct Groups;

impl Layout for Groups {
    const NAME: &'static str = "PackedBuffer";

    fn key(item: &[u8]) -> &[u8] {
        let n = u32_at(item, KEY_LEN_AT);
        &item[KEY_LEN_AT + 4..KEY_LEN_AT + 4 + n]
    }
}

/// Group `g` of a packed buffer: its key, and its messages up to the next group's.
fn packed_group(p: &Packed<Groups>, g: usize) -> (&[u8], Msgs<'_>) {
    let msgs = MsgsForm::Packed {
        raw: &p.raw()[..p.end(g)],
        pos: p.start(g),
    };
    (p.key(g), Msgs(msgs))
}

/// One message, borrowed from either form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MsgRef<'a> {
    pub msn: Msn,
    pub ts: Ts,
    pub op: OpRef<'a>,
}

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
pub struct Msgs<'a>(MsgsForm<'a>);

#[derive(Debug, Clone)]
enum MsgsForm<'a> {
    Owned(std::slice::Iter<'a, Msg>),
    /// Messages from `pos` to the end of `raw`, which ends where the key's group does.
    Packed {
        raw: &'a [u8],
        pos: usize,
    },
}

impl Msgs<'_> {
    /// No messages (a key the buffer does not hold).
    pub fn empty() -> Self {
        Msgs(MsgsForm::Owned([].iter()))
    }
}

impl<'a> Iterator for Msgs<'a> {
    type Item = MsgRef<'a>;

    fn next(&mut self) -> Option<MsgRef<'a>> {
        match &mut self.0 {
            MsgsForm::Owned(it) => it.next().map(|m| MsgRef {
                msn: m.msn,
                ts: m.ts,
                op: m.op.as_op_ref(),
            }),
            MsgsForm::Packed { raw, pos } => {
                if *pos >= raw.len() {
                    return None;
                }
                let at = *pos;
                let klen = u32_at(raw, at + KEY_LEN_AT);
                let p_at = at + KEY_LEN_AT + 4 + klen;
                let plen = u32_at(raw, p_at);
                let payload = &raw[p_at + 4..p_at + 4 + plen];
                *pos = p_at + 4 + plen;
                let op = OpRef::from_code(raw[at + 16], payload)
                    .expect("packed messages were checked (Q1)");
                Some(MsgRef {
                    msn: Msn(u64_at(raw, at)),
                    ts: Ts(u64_at(raw, at + 8)),
                    op,
                })
            }
        }
    }
}

impl MsgBuffer {
    pub fn new() -> Self {
        Self::default()
    }

    /// Packs raw buffer bytes (decompressed from disk), checking everything Q1 promises.
    pub fn decode(raw: Vec<u8>) -> Result<MsgBuffer, String> {
        let (groups, bytes, count) = check_raw(&raw)?;
        Ok(MsgBuffer {
            form: Form::Packed(Packed::new(raw, groups)),
            bytes,
            count,
            spare_slots: 0,
        })
    }

    /// The raw bytes: a message count, then each message in (key, MSN) order. A packed
    /// buffer's are its bytes as they are.
    pub fn encode(&self) -> Cow<'_, [u8]> {
        if let Form::Packed(p) = &self.form {
            return Cow::Borrowed(p.raw());
        }
        let mut out = Vec::with_capacity(4 + self.bytes);
        out.extend_from_slice(&(self.count as u32).to_le_bytes());
        for (k, list) in self.iter() {
            for m in list {
                out.extend_from_slice(&m.msn.0.to_le_bytes());
                out.extend_from_slice(&m.ts.0.to_le_bytes());
                out.push(m.op.code());
                put_bytes(&mut out, k);
                put_bytes(&mut out, m.op.payload());
            }
        }
        Cow::Owned(out)
    }

    #[cfg(test)]
    pub fn is_packed(&self) -> bool {
        matches!(self.form, Form::Packed(_))
    }

    /// The map form, unpacking a packed buffer first.
    fn map_mut(&mut self) -> &mut BTreeMap<Vec<u8>, Vec<Msg>> {
        if let Form::Packed(p) = &self.form {
            let map = p
                .indexes()
                .map(|g| {
                    let (k, msgs) = packed_group(p, g);
                    // Room for one, as `push` gives: collecting would reserve four.
                    let mut list = Vec::with_capacity(1);
                    list.extend(msgs.map(MsgRef::to_msg));
                    (k.to_vec(), list)
                })
                .collect();
            self.spare_slots = spare_slots(&map);
            self.form = Form::Map(map);
        }
        match &mut self.form {
            Form::Map(m) => m,
            Form::Packed(_) => unreachable!("unpacked just above"),
        }
    }

    /// Adds a message; MSNs for one key must arrive in increasing order.
    pub fn push(&mut self, key: Vec<u8>, msg: Msg) {
        self.bytes += MSG_OVERHEAD_BYTES + key.len() + msg.op.payload().len();
        self.count += 1;
        let spare = match self.map_mut().entry(key) {
            // A list of exactly one: nearly every key has one message, and a list grown by
            // `push` would reserve four (144 bytes more per key).
            Entry::Vacant(v) => {
                v.insert(vec![msg]);
                (0, 0)
            }
            Entry::Occupied(mut o) => {
                let list = o.get_mut();
                assert!(
                    list.last()
                        .is_none_or(|last| last.msn < msg.msn && last.ts <= msg.ts),
                    "messages for one key must arrive in MSN and commit order"
                );
                let before = list.capacity() - list.len();
                list.push(msg);
                (before, list.capacity() - list.len())
            }
        };
        self.spare_slots = self.spare_slots - spare.0 + spare.1;
    }

    /// Serialized size of the buffer's messages (what it weighs against the node size).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Number of distinct keys.
    pub fn key_count(&self) -> usize {
        match &self.form {
            Form::Map(m) => m.len(),
            Form::Packed(p) => p.len(),
        }
    }

    /// Memory the buffer holds (what the cache charges for it).
    pub fn mem_bytes(&self) -> usize {
        match &self.form {
            Form::Map(_) => {
                self.bytes
                    + self.count * MSG_MEM_BYTES
                    + self.spare_slots * std::mem::size_of::<Msg>()
            }
            Form::Packed(p) => p.mem_bytes(),
        }
    }

    /// Pending messages for `key`, oldest first.
    pub fn get(&self, key: &[u8]) -> Msgs<'_> {
        match &self.form {
            Form::Map(m) => m
                .get(key)
                .map_or(Msgs::empty(), |l| Msgs(MsgsForm::Owned(l.iter()))),
            Form::Packed(p) => p.find(key).map_or(Msgs::empty(), |g| packed_group(p, g).1),
        }
    }

    /// All messages in (key, MSN) order, one item per key.
    pub fn iter(&self) -> Iter<'_> {
        self.range(None, None)
    }

    /// Messages with keys in `[lo, hi)` (unbounded where `None`), one item per key.
    pub fn range(&self, lo: Option<&[u8]>, hi: Option<&[u8]>) -> Iter<'_> {
        Iter(match &self.form {
            Form::Map(m) => {
                let lo_bound = lo.map_or(Bound::Unbounded, Bound::Included);
                let hi_bound = hi.map_or(Bound::Unbounded, Bound::Excluded);
                IterForm::Map(m.range::<[u8], _>((lo_bound, hi_bound)))
            }
            Form::Packed(p) => {
                let front = lo.map_or(0, |k| p.lower_bound(k));
                let back = hi.map_or(p.len(), |k| p.lower_bound(k));
                IterForm::Packed(p, front..back.max(front))
            }
        })
    }

    /// Takes every message, leaving the buffer empty.
    pub fn take_all(&mut self) -> BTreeMap<Vec<u8>, Vec<Msg>> {
        let map = std::mem::take(self.map_mut());
        self.bytes = 0;
        self.count = 0;
        self.spare_slots = 0;
        map
    }

    /// Takes the messages of the lowest keys, whole keys at a time, until at least
    /// `max_bytes` of serialized messages are taken or the buffer is empty. A flush moves a
    /// buffer in such pieces so that the messages in flight, charged to no node, stay small.
    pub fn take_first(&mut self, max_bytes: usize) -> BTreeMap<Vec<u8>, Vec<Msg>> {
        let mut taken = BTreeMap::new();
        let (mut bytes, mut count, mut spare) = (0, 0, 0);
        let map = self.map_mut();
        while bytes < max_bytes {
            let Some((k, list)) = map.pop_first() else {
                break;
            };
            count += list.len();
            spare += list.capacity() - list.len();
            bytes += list
                .iter()
                .map(|m| MSG_OVERHEAD_BYTES + k.len() + m.op.payload().len())
                .sum::<usize>();
            taken.insert(k, list);
        }
        self.bytes -= bytes;
        self.count -= count;
        self.spare_slots -= spare;
        taken
    }

    /// Splits off every message with key >= `pivot` into a new buffer.
    pub fn split_off(&mut self, pivot: &[u8]) -> MsgBuffer {
        let upper = self.map_mut().split_off(pivot);
        let mut other = MsgBuffer {
            form: Form::Map(upper),
            bytes: 0,
            count: 0,
            spare_slots: 0,
        };
        other.recount();
        self.recount();
        other
    }

    /// Moves all of `other`'s messages into this buffer (keys must not interleave MSNs
    /// out of order; used when merging siblings whose key ranges are disjoint).
    pub fn absorb(&mut self, mut other: MsgBuffer) {
        for (k, list) in other.take_all() {
            for msg in list {
                self.push(k.clone(), msg);
            }
        }
    }

    fn recount(&mut self) {
        let (mut count, mut bytes) = (0, 0);
        for (k, list) in self.iter() {
            for m in list {
                count += 1;
                bytes += MSG_OVERHEAD_BYTES + k.len() + m.op.payload().len();
            }
        }
        self.count = count;
        self.bytes = bytes;
        self.spare_slots = match &self.form {
            Form::Map(m) => spare_slots(m),
            Form::Packed(_) => 0,
        };
    }
}

/// Unused room in a map's message lists.
fn spare_slots(map: &BTreeMap<Vec<u8>, Vec<Msg>>) -> usize {
    map.values().map(|l| l.capacity() - l.len()).sum()
}

/// Equal messages, whatever the forms.
impl PartialEq for MsgBuffer {
    fn eq(&self, other: &Self) -> bool {
        self.count == other.count
            && self.key_count() == other.key_count()
            && self
                .iter()
                .zip(other.iter())
                .all(|((k1, m1), (k2, m2))| k1 == k2 && m1.eq(m2))
    }
}

impl Eq for MsgBuffer {}

/// Iterator over a buffer's keys in order, each with its messages.
pub struct Iter<'a>(IterForm<'a>);

enum IterForm<'a> {
    Map(btree_map::Range<'a, Vec<u8>, Vec<Msg>>),
    Packed(&'a Packed<Groups>, Range<usize>),
}

fn owned<'a>((k, list): (&'a Vec<u8>, &'a Vec<Msg>)) -> (&'a [u8], Msgs<'a>) {
    (k.as_slice(), Msgs(MsgsForm::Owned(list.iter())))
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a [u8], Msgs<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.0 {
            IterForm::Map(it) => it.next().map(owned),
            IterForm::Packed(p, groups) => groups.next().map(|g| packed_group(p, g)),
        }
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        match &mut self.0 {
            IterForm::Map(it) => it.next_back().map(owned),
            IterForm::Packed(p, groups) => groups.next_back().map(|g| packed_group(p, g)),
        }
    }
}

/// Checks raw buffer bytes (Q1); returns each key's first offset, the bytes and the count
/// (Q2). Never panics: every length is checked against what is left.
fn check_raw(raw: &[u8]) -> Result<(Vec<u32>, usize, usize), String> {
    if u32::try_from(raw.len()).is_err() {
        return Err(format!("buffer of {} bytes is too large", raw.len()));
    }
    let mut r = Reader::new(raw);
    let n = r.u32()? as usize;
    if n > r.remaining() / MIN_MSG_BYTES {
        return Err(format!("buffer claims {n} messages in {} bytes", raw.len()));
    }
    let mut groups = Vec::new();
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
        match prev {
            Some((pk, pmsn, pts)) if pk == key => {
                if pmsn >= msn || pts > ts {
                    return Err("buffer messages out of order".into());
                }
            }
            Some((pk, _, _)) if pk > key => return Err("buffer messages out of order".into()),
            _ => groups.push(at),
        }
        prev = Some((key, msn, ts));
        bytes += MSG_OVERHEAD_BYTES + klen + plen;
    }
    r.finish()?;
    groups.shrink_to_fit();
    Ok((groups, bytes, n))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(msn: u64, op: MsgOp) -> Msg {
        Msg {
            msn: Msn(msn),
            ts: Ts(msn),
            op,
        }
    }

    fn sample() -> MsgBuffer {
        let mut b = MsgBuffer::new();
        for i in 0..40u8 {
            b.push(vec![i], msg(i as u64 + 1, MsgOp::Put(vec![i; i as usize])));
            if i % 5 == 0 {
                b.push(vec![i], msg(100 + i as u64, MsgOp::Delete));
                b.push(vec![i], msg(200 + i as u64, MsgOp::Update(vec![7])));
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
                let piece = b.take_first(100);
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
    fn packed_and_map_forms_agree_on_every_read() {
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

    #[test]
    fn malformed_bytes_are_errors_never_panics() {
        let good = sample().encode().into_owned();
        for cut in 0..good.len() {
            assert!(
                MsgBuffer::decode(good[..cut].to_vec()).is_err(),
                "cut at {cut}"
            );
        }
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        for _ in 0..2_000 {
            let mut raw = good.clone();
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
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
        b.push(vec![1], msg(5, MsgOp::Delete));
        b.push(vec![1], msg(4, MsgOp::Delete));
    }
}
