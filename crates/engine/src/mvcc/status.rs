//! Provisional versions and the transaction status table.
//!
//! A transaction's writes go into the trees as it makes them, each stamped *provisional*:
//! the stamp is `PROVISIONAL | txn id` instead of a commit timestamp (docs/transactions.md,
//! "The model"). Commit stamps are log positions, far below 2^63, so a provisional
//! stamp compares above every commit and code that knows nothing of provisional versions
//! treats them as invisible. Whether a reader sees one is decided here:
//!
//! - **live** (in the table, not committed): nobody sees it through the tree (the transaction
//!   reads its own writes from its write set);
//! - **committed at `T`** (in the table): a reader at snapshot `S` sees it when `T <= S`;
//! - **not in the table**: committed at or below the horizon, so every reader sees it.
//!
//! Invariants T1–T3 (live in the table before the first provisional write, committed entries
//! kept until the horizon passes them, ids never reused) are defined in
//! `docs/transactions.md`, "The model"; the code here keeps them.

use crate::vocab::Ts;
use parking_lot::{Mutex, RwLock};
use std::collections::{HashMap, VecDeque};

/// Whether a message stamped `later` may follow one stamped `earlier` for the same key:
/// commit timestamps do not decrease, and a provisional stamp may be followed by anything
/// (its transaction ended before another could write the key, at an unknown timestamp).
pub fn stamps_in_order(earlier: Ts, later: Ts) -> bool {
    earlier <= later || earlier.is_provisional()
}

/// What a provisional stamp stands for now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolved {
    /// Its transaction is still running (or ending): nobody else sees it.
    Live,
    /// Committed at this timestamp.
    Committed(Ts),
    /// Committed at or below the horizon: everyone sees it (T2).
    Old,
}

/// The stamp every reader sees that `Resolved::Old` versions take when they are resolved in a
/// leaf (older versions under them are collected at the same time): below every snapshot,
/// since a commit's timestamp is at least one record's length past the log's start.
pub const OLD_TS: Ts = Ts(1);

/// Live and recently committed transactions that may have provisional versions in the trees.
#[derive(Debug, Default)]
pub struct TxnStatus {
    /// Transaction id → `None` while live, its commit timestamp once committed.
    table: RwLock<HashMap<u64, Option<Ts>>>,
    /// Committed entries in commit order, to drop them once the horizon passes them (T2).
    committed: Mutex<VecDeque<(Ts, u64)>>,
}

impl TxnStatus {
    /// Marks `txn` live (T1); its provisional writes may follow.
    pub fn begin(&self, txn: u64) {
        self.table.write().insert(txn, None);
    }

    /// Marks `txn` committed at `ts` (T1: under the apply lock, before `ts` is published).
    pub fn commit(&self, txn: u64, ts: Ts) {
        self.table.write().insert(txn, Some(ts));
        self.committed.lock().push_back((ts, txn));
    }

    /// Forgets a transaction whose abort messages are in place, or that wrote nothing (T1).
    pub fn forget(&self, txn: u64) {
        self.table.write().remove(&txn);
    }

    /// Drops committed entries every reader sees anyway (T2). `horizon` is asked for only
    /// when there is a committed entry (most commits are write batches, which add none).
    pub fn prune(&self, horizon: impl FnOnce() -> Ts) {
        if self.committed.lock().is_empty() {
            return;
        }
        let horizon = horizon();
        let mut committed = self.committed.lock();
        let mut gone = Vec::new();
        while committed.front().is_some_and(|(ts, _)| *ts <= horizon) {
            gone.extend(committed.pop_front().map(|(_, txn)| txn));
        }
        drop(committed);
        if !gone.is_empty() {
            let mut table = self.table.write();
            for txn in gone {
                table.remove(&txn);
            }
        }
    }

    /// What the provisional stamp `stamp` stands for.
    pub fn resolve(&self, stamp: Ts) -> Resolved {
        let Some(txn) = stamp.txn() else {
            return Resolved::Committed(stamp);
        };
        match self.table.read().get(&txn) {
            Some(None) => Resolved::Live,
            Some(Some(ts)) => Resolved::Committed(*ts),
            None => Resolved::Old,
        }
    }

    /// Whether a reader at `snapshot` sees a version or message stamped `stamp`.
    pub fn sees(&self, stamp: Ts, snapshot: Ts) -> bool {
        if !stamp.is_provisional() {
            return stamp <= snapshot;
        }
        match self.resolve(stamp) {
            Resolved::Live => false,
            Resolved::Committed(ts) => ts <= snapshot,
            Resolved::Old => true,
        }
    }

    /// Transactions in the table: live ones and committed ones not yet below the horizon.
    pub fn len(&self) -> usize {
        self.table.read().len()
    }

    /// True when the table holds no transaction.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_provisional_stamp_is_seen_by_the_rules_of_its_transaction() {
        let s = TxnStatus::default();
        let p = Ts::provisional(7);
        assert_eq!(p.txn(), Some(7));
        assert!(p > Ts(u64::MAX >> 1), "above every commit timestamp");
        s.begin(7);
        assert!(!s.sees(p, Ts(100)), "live: nobody sees it");
        s.commit(7, Ts(50));
        assert!(!s.sees(p, Ts(49)));
        assert!(s.sees(p, Ts(50)));
        s.prune(|| Ts(49));
        assert_eq!(s.resolve(p), Resolved::Committed(Ts(50)));
        s.prune(|| Ts(50));
        assert_eq!(s.resolve(p), Resolved::Old, "pruned at the horizon (T2)");
        assert!(s.sees(p, OLD_TS));
        assert!(s.is_empty());
        assert!(s.sees(Ts(10), Ts(10)) && !s.sees(Ts(11), Ts(10)));
    }
}
