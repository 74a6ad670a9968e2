//! Messages: the unit of change in a B-epsilon tree. A message carries a sequence number
//! (MSN, increasing per tree) and the timestamp of the commit that sent it, and is applied to
//! a leaf entry as a new version when it reaches the leaf. `MsgBuffer` (`buffer.rs`) holds
//! one child's pending messages, ordered by key then MSN.

pub use super::buffer::MsgBuffer;
use crate::vocab::Op;
#[cfg(test)]
use crate::vocab::Ts;

/// Message sequence number: later messages for the same key have larger MSNs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Msn(pub u64);

/// A message's op is the engine's one write vocabulary (`crate::op`), seen as the tree
/// borrows it.
impl Op {
    /// The op borrowed, as a packed buffer hands it out.
    pub fn as_op_ref(&self) -> OpRef<'_> {
        match self {
            Op::Put(v) => OpRef::Put(v),
            Op::Delete => OpRef::Delete,
            Op::Update(v) => OpRef::Update(v),
        }
    }
}

/// A message's op borrowed from a buffer of either form (`buffer.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpRef<'a> {
    Put(&'a [u8]),
    Delete,
    Update(&'a [u8]),
    /// Drops the provisional version its stamp's transaction wrote to the key (the
    /// transaction aborted). Readers drop that transaction's messages and version under it.
    Abort,
}

impl<'a> OpRef<'a> {
    /// The op of a stored message (`docs/format-node.md`): `None` for an unknown code or a
    /// delete with a payload.
    pub fn from_code(code: u8, payload: &'a [u8]) -> Option<OpRef<'a>> {
        match code {
            1 => Some(OpRef::Put(payload)),
            2 if payload.is_empty() => Some(OpRef::Delete),
            3 => Some(OpRef::Update(payload)),
            4 if payload.is_empty() => Some(OpRef::Abort),
            _ => None,
        }
    }

    pub fn code(self) -> u8 {
        match self {
            OpRef::Put(_) => 1,
            OpRef::Delete => 2,
            OpRef::Update(_) => 3,
            OpRef::Abort => 4,
        }
    }

    pub fn payload(self) -> &'a [u8] {
        match self {
            OpRef::Put(v) | OpRef::Update(v) => v,
            OpRef::Delete | OpRef::Abort => &[],
        }
    }

    #[cfg(test)]
    pub fn to_op(self) -> Op {
        match self {
            OpRef::Put(v) => Op::Put(v.to_vec()),
            OpRef::Delete => Op::Delete,
            OpRef::Update(v) => Op::Update(v.to_vec()),
            OpRef::Abort => unreachable!("tests build no abort messages as owned ops"),
        }
    }
}

/// One buffered message, owned (tests build and compare these; buffers hold raw bytes).
#[cfg(test)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Msg {
    pub msn: Msn,
    /// The commit that sent it: readers at snapshots below it skip it.
    pub ts: Ts,
    pub op: Op,
}

/// The merge callback: given the key, the current value (if any) and an update payload,
/// returns the new value (`None` deletes the entry).
pub type MergeFn = dyn Fn(&[u8], Option<&[u8]>, &[u8]) -> Option<Vec<u8>> + Send + Sync;

/// Applies `op` to the current value of `key` (an abort changes nothing here: what it
/// undoes is dropped before values are folded).
pub fn apply(
    merge: &MergeFn,
    key: &[u8],
    current: Option<Vec<u8>>,
    op: OpRef<'_>,
) -> Option<Vec<u8>> {
    match op {
        OpRef::Put(v) => Some(v.to_vec()),
        OpRef::Delete => None,
        OpRef::Update(payload) => merge(key, current.as_deref(), payload),
        // Readers drop an abort and what it aborts before folding (`read.rs`).
        OpRef::Abort => current,
    }
}

/// Fixed per-message overhead counted against node sizes (MSN, timestamp, op code, lengths).
pub const MSG_OVERHEAD_BYTES: usize = 8 + 8 + 1 + 4 + 4;
