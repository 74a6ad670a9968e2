//! Messages: the unit of change in a B-epsilon tree. A message carries a sequence number
//! (MSN, increasing per tree) and the timestamp of the commit that sent it, and is applied to
//! a leaf entry as a new version when it reaches the leaf. `MsgBuffer` holds one child's
//! pending messages, ordered by key then MSN.

use crate::mvcc::Ts;
use std::collections::btree_map::Entry;
use std::collections::BTreeMap;

/// Message sequence number: later messages for the same key have larger MSNs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Msn(pub u64);

/// What a message does to the entry of its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MsgOp {
    /// Replace the value (insert or overwrite).
    Put(Vec<u8>),
    /// Remove the entry (blind: no read to find out whether it existed).
    Delete,
    /// Apply a payload with the environment's merge callback (read-free update).
    Update(Vec<u8>),
}

impl MsgOp {
    pub fn code(&self) -> u8 {
        match self {
            MsgOp::Put(_) => 1,
            MsgOp::Delete => 2,
            MsgOp::Update(_) => 3,
        }
    }

    pub fn payload(&self) -> &[u8] {
        match self {
            MsgOp::Put(v) | MsgOp::Update(v) => v,
            MsgOp::Delete => &[],
        }
    }

    pub fn from_code(code: u8, payload: Vec<u8>) -> Option<MsgOp> {
        match code {
            1 => Some(MsgOp::Put(payload)),
            2 if payload.is_empty() => Some(MsgOp::Delete),
            3 => Some(MsgOp::Update(payload)),
            _ => None,
        }
    }
}

/// One buffered message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Msg {
    pub msn: Msn,
    /// The commit that sent it: readers at snapshots below it skip it.
    pub ts: Ts,
    pub op: MsgOp,
}

/// The merge callback: given the key, the current value (if any) and an update payload,
/// returns the new value (`None` deletes the entry).
pub type MergeFn = dyn Fn(&[u8], Option<&[u8]>, &[u8]) -> Option<Vec<u8>> + Send + Sync;

/// Applies `op` to the current value of `key`.
pub fn apply(merge: &MergeFn, key: &[u8], current: Option<Vec<u8>>, op: &MsgOp) -> Option<Vec<u8>> {
    match op {
        MsgOp::Put(v) => Some(v.clone()),
        MsgOp::Delete => None,
        MsgOp::Update(payload) => merge(key, current.as_deref(), payload),
    }
}

/// Fixed per-message overhead counted against node sizes (MSN, timestamp, op code, lengths).
pub const MSG_OVERHEAD_BYTES: usize = 8 + 8 + 1 + 4 + 4;

/// One child's pending messages, by key and MSN.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MsgBuffer {
    msgs: BTreeMap<Vec<u8>, Vec<Msg>>,
    bytes: usize,
    count: usize,
}

impl MsgBuffer {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a message; MSNs for one key must arrive in increasing order.
    pub fn push(&mut self, key: Vec<u8>, msg: Msg) {
        self.bytes += MSG_OVERHEAD_BYTES + key.len() + msg.op.payload().len();
        self.count += 1;
        match self.msgs.entry(key) {
            // A list of exactly one: nearly every key has one message, and a list grown by
            // `push` would reserve four (144 bytes more per key).
            Entry::Vacant(v) => {
                v.insert(vec![msg]);
            }
            Entry::Occupied(mut o) => {
                let list = o.get_mut();
                assert!(
                    list.last()
                        .is_none_or(|last| last.msn < msg.msn && last.ts <= msg.ts),
                    "messages for one key must arrive in MSN and commit order"
                );
                list.push(msg);
            }
        }
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

    /// Pending messages for `key`, oldest first.
    pub fn get(&self, key: &[u8]) -> &[Msg] {
        self.msgs.get(key).map(Vec::as_slice).unwrap_or(&[])
    }

    /// All messages in (key, MSN) order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&Vec<u8>, &[Msg])> + ExactSizeIterator {
        self.msgs.iter().map(|(k, v)| (k, v.as_slice()))
    }

    /// Messages with keys in `[lo, hi)` (unbounded where `None`).
    pub fn range<'a>(
        &'a self,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
    ) -> impl DoubleEndedIterator<Item = (&'a Vec<u8>, &'a [Msg])> + 'a {
        use std::ops::Bound;
        let lo = lo.map_or(Bound::Unbounded, |k| Bound::Included(k.to_vec()));
        let hi = hi.map_or(Bound::Unbounded, |k| Bound::Excluded(k.to_vec()));
        self.msgs.range((lo, hi)).map(|(k, v)| (k, v.as_slice()))
    }

    /// Takes every message, leaving the buffer empty.
    pub fn take_all(&mut self) -> BTreeMap<Vec<u8>, Vec<Msg>> {
        self.bytes = 0;
        self.count = 0;
        std::mem::take(&mut self.msgs)
    }

    /// A buffer of `groups`: distinct keys in increasing order, each with its messages in
    /// MSN order (the caller checked both, as `decode_buffer` does). Builds the map in bulk
    /// instead of inserting key by key.
    pub fn from_sorted(groups: Vec<(Vec<u8>, Vec<Msg>)>) -> MsgBuffer {
        let mut b = MsgBuffer {
            msgs: groups.into_iter().collect(),
            bytes: 0,
            count: 0,
        };
        b.recount();
        b
    }

    /// Splits off every message with key >= `pivot` into a new buffer.
    pub fn split_off(&mut self, pivot: &[u8]) -> MsgBuffer {
        let mut other = MsgBuffer {
            msgs: self.msgs.split_off(pivot),
            bytes: 0,
            count: 0,
        };
        other.recount();
        self.recount();
        other
    }

    /// Moves all of `other`'s messages into this buffer (keys must not interleave MSNs
    /// out of order; used when merging siblings whose key ranges are disjoint).
    pub fn absorb(&mut self, other: MsgBuffer) {
        for (k, list) in other.msgs {
            for msg in list {
                self.push(k.clone(), msg);
            }
        }
    }

    fn recount(&mut self) {
        self.count = self.msgs.values().map(Vec::len).sum();
        self.bytes = self
            .msgs
            .iter()
            .flat_map(|(k, l)| {
                l.iter()
                    .map(move |m| MSG_OVERHEAD_BYTES + k.len() + m.op.payload().len())
            })
            .sum();
    }
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

    #[test]
    fn split_and_absorb_keep_counts() {
        let mut b = MsgBuffer::new();
        for i in 0..10u8 {
            b.push(vec![i], msg(i as u64 + 1, MsgOp::Put(vec![i; 3])));
        }
        let total = b.bytes();
        let upper = b.split_off(&[5]);
        assert_eq!(b.len(), 5);
        assert_eq!(upper.len(), 5);
        assert_eq!(b.bytes() + upper.bytes(), total);
        b.absorb(upper);
        assert_eq!(b.len(), 10);
        assert_eq!(b.bytes(), total);
    }

    #[test]
    #[should_panic(expected = "MSN and commit order")]
    fn out_of_order_msns_are_refused() {
        let mut b = MsgBuffer::new();
        b.push(vec![1], msg(5, MsgOp::Delete));
        b.push(vec![1], msg(4, MsgOp::Delete));
    }
}
