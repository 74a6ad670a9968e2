//! The engine's base vocabulary, shared by the tree, the log, MVCC and transactions without
//! any of them importing another for it: a write's operation (`Op`), a transaction's id
//! (`TxnId`) and a commit timestamp or provisional stamp (`Ts`).
//!
//! The same `Op` value travels the whole write path without being converted or copied: a
//! transaction's write set records it (`txn.rs`), a commit moves it into the log's group
//! record (`wal::Change::Op`), and the trees apply it borrowed from that record as a message
//! (`tree::msg::OpRef`, which adds the tree's own abort message). Recovery reads the same
//! `Change` back and applies it the same way. Before this type a put took three shapes
//! (`BatchOp`, `MsgOp`, the log's `Change`) and its value was cloned once per conversion.
//!
//! This module is at the bottom of the engine: it imports nothing from the tree, the log or
//! transactions.

use crate::{Error, Result, MAX_KEY_OR_VALUE_BYTES};

/// A transaction id (also the id of a plain batch's commit in the log).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TxnId(pub u64);

/// A commit timestamp (the log position just past the commit record), or a provisional
/// stamp: `PROVISIONAL | txn id` on versions a live transaction wrote (`mvcc::status`, T1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Ts(pub u64);

/// The bit that marks a provisional stamp.
pub const PROVISIONAL: u64 = 1 << 63;

impl Ts {
    /// The stamp of transaction `txn`'s provisional writes.
    pub fn provisional(txn: u64) -> Ts {
        assert!(txn < PROVISIONAL, "transaction id {txn} out of range");
        Ts(PROVISIONAL | txn)
    }

    /// True for a transaction's provisional stamp, false for a commit timestamp.
    pub fn is_provisional(self) -> bool {
        self.0 & PROVISIONAL != 0
    }

    /// The writing transaction's id, for a provisional stamp.
    pub fn txn(self) -> Option<u64> {
        self.is_provisional().then_some(self.0 & !PROVISIONAL)
    }
}

/// What a write does to the entry of its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Replace the value (insert or overwrite).
    Put(Vec<u8>),
    /// Remove the entry (blind: no read to find out whether it existed).
    Delete,
    /// Apply a payload with the environment's merge callback (read-free update).
    Update(Vec<u8>),
}

impl Op {
    /// The value of a put, the payload of an update; empty for a delete.
    pub fn payload(&self) -> &[u8] {
        match self {
            Op::Put(v) | Op::Update(v) => v,
            Op::Delete => &[],
        }
    }

    /// Refuses a key or payload over `MAX_KEY_OR_VALUE_BYTES` before anything is logged.
    pub(crate) fn check_sizes(&self, key: &[u8]) -> Result<()> {
        let too_large = |what: &'static str, len: usize| {
            (len > MAX_KEY_OR_VALUE_BYTES).then_some(Error::TooLarge {
                what,
                len,
                max: MAX_KEY_OR_VALUE_BYTES,
            })
        };
        match too_large("key", key.len()).or_else(|| too_large("value", self.payload().len())) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_at_the_limit_pass_and_over_it_are_refused() {
        let max = vec![0u8; MAX_KEY_OR_VALUE_BYTES];
        let over = vec![0u8; MAX_KEY_OR_VALUE_BYTES + 1];
        assert!(Op::Put(max.clone()).check_sizes(&max).is_ok());
        assert!(Op::Delete.check_sizes(&over).is_err());
        assert!(Op::Update(over).check_sizes(b"k").is_err());
        assert_eq!(Op::Delete.payload(), b"");
    }
}
