//! Two of `EnvInner`'s roles as small types with narrow methods, so the rest of the engine
//! asks questions instead of reaching into flags and maps:
//!
//! - `Lifecycle`: whether the environment is open and usable (shut down, poisoned by a
//!   failure and why), and the flusher's wake-up with the writers that wait on it;
//! - `TxnRegistry`: transaction ids, the transactions live now, and the `(tree, key)`s each
//!   live transaction's provisional writes may have reached (T1, R8 in docs/recovery.md).

use crate::vocab::TxnId;
use crate::wal::LiveTxn;
use parking_lot::{Condvar, Mutex};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// Whether the environment is open and usable, and the flusher's wake-up.
#[derive(Default)]
pub(crate) struct Lifecycle {
    poisoned: Mutex<Option<String>>,
    /// `poisoned.is_some()`, readable without the lock (`Env::has_failed`, once per operation).
    failed: AtomicBool,
    shutdown: AtomicBool,
    /// Wakes the flusher; tells backpressured writers that the flusher made progress.
    work: (Mutex<()>, Condvar),
}

impl Lifecycle {
    pub fn is_shut_down(&self) -> bool {
        self.shutdown.load(Ordering::SeqCst)
    }

    /// Marks the environment closed and wakes every thread waiting on the flusher.
    pub fn shut_down(&self) {
        self.shutdown.store(true, Ordering::SeqCst);
        self.wake();
    }

    /// Why the environment refuses writes, if it does.
    pub fn poisoned(&self) -> Option<String> {
        self.poisoned.lock().clone()
    }

    pub fn is_poisoned(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }

    /// Records the first failure; later ones keep the first reason.
    pub fn poison(&self, reason: impl FnOnce() -> String) {
        self.poisoned.lock().get_or_insert_with(reason);
        self.failed.store(true, Ordering::Release);
    }

    /// Wakes the flusher and every writer waiting for it.
    pub fn wake(&self) {
        self.work.1.notify_all();
    }

    /// Wakes the flusher and the writers, then waits up to `timeout` (if any) for a signal.
    pub fn wake_and_wait(&self, timeout: Option<Duration>) {
        let mut g = self.work.0.lock();
        self.work.1.notify_all();
        if let Some(t) = timeout {
            self.work.1.wait_for(&mut g, t);
        }
    }
}

/// The `(tree, key)`s a live transaction's provisional writes may have reached.
type LiveKeys = Vec<(u64, Vec<u8>)>;

/// Transaction ids and the transactions live now.
pub(crate) struct TxnRegistry {
    next: AtomicU64,
    active: AtomicU64,
    /// Each live transaction's `(tree, key)`s that its provisional writes may have reached,
    /// registered before each write (T1); a checkpoint logs them at its redo point (R8).
    live: Mutex<HashMap<u64, LiveKeys>>,
}

impl TxnRegistry {
    /// Ids start at `next` (recovery passes one past the largest it saw: T3).
    pub fn new(next: u64) -> TxnRegistry {
        TxnRegistry {
            next: AtomicU64::new(next),
            active: AtomicU64::new(0),
            live: Mutex::new(HashMap::new()),
        }
    }

    /// A fresh id for a write batch's implicit transaction.
    pub fn next_id(&self) -> TxnId {
        TxnId(self.next.fetch_add(1, Ordering::Relaxed))
    }

    /// A fresh id for a transaction that stays open; counted until `finished`.
    pub fn begin(&self) -> TxnId {
        self.active.fetch_add(1, Ordering::Relaxed);
        self.next_id()
    }

    /// A transaction from `begin` ended (committed or aborted).
    pub fn finished(&self) {
        self.active.fetch_sub(1, Ordering::Relaxed);
    }

    /// Transactions begun and not finished.
    pub fn active(&self) -> u64 {
        self.active.load(Ordering::Relaxed)
    }

    /// Registers `key` of `tree` as reachable by `txn`'s provisional writes (before the write).
    pub fn register_key(&self, txn: u64, tree: u64, key: &[u8]) {
        self.live
            .lock()
            .entry(txn)
            .or_default()
            .push((tree, key.to_vec()));
    }

    /// `txn` is no longer live: committed, or its aborts are all sent.
    pub fn forget(&self, txn: u64) {
        self.live.lock().remove(&txn);
    }

    /// Every live transaction with its keys, in id order, and the next id (R8's record).
    pub fn snapshot(&self) -> (u64, Vec<LiveTxn>) {
        let mut txns: Vec<LiveTxn> = self
            .live
            .lock()
            .iter()
            .map(|(txn, keys)| LiveTxn {
                txn: TxnId(*txn),
                keys: keys.clone(),
            })
            .collect();
        txns.sort_by_key(|t| t.txn);
        (self.next.load(Ordering::SeqCst), txns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_increase_and_live_keys_come_back_in_id_order() {
        let r = TxnRegistry::new(7);
        let a = r.begin();
        let b = r.next_id();
        assert_eq!((a, b), (TxnId(7), TxnId(8)));
        assert_eq!(r.active(), 1);
        r.register_key(9, 1, b"k");
        r.register_key(a.0, 2, b"x");
        let (next, live) = r.snapshot();
        assert_eq!(next, 9);
        assert_eq!(
            live.iter().map(|t| t.txn).collect::<Vec<_>>(),
            [TxnId(7), TxnId(9)]
        );
        r.forget(9);
        r.finished();
        assert_eq!((r.snapshot().1.len(), r.active()), (1, 0));
    }

    #[test]
    fn the_first_poison_reason_stays() {
        let l = Lifecycle::default();
        assert!(!l.is_poisoned() && !l.is_shut_down());
        l.poison(|| "disk".to_owned());
        l.poison(|| "later".to_owned());
        assert_eq!(l.poisoned().as_deref(), Some("disk"));
        l.shut_down();
        assert!(l.is_shut_down());
    }
}
