//! Key locks and write-write conflict detection (first writer wins, never waits).
//!
//! Each locked or recently committed key has an entry: the transaction holding it exclusively
//! (a writer), those holding it shared (serializable readers), and the timestamp of the last
//! commit that wrote it. A request conflicts at once — `Error::WriteConflict`, no waiting, so
//! no deadlock — when another live transaction holds the key exclusively, or (for an
//! exclusive request) shared, while two shared holders never conflict (L1); or when a commit
//! newer than the requester's snapshot wrote the key, which the requester would overwrite or
//! depend on without seeing it (L2). L1 and L2 are defined in `docs/transactions.md`.
//!
//! An entry with no holder is kept while its commit timestamp is above the lock horizon (some
//! live snapshot may still request the key, L2: `Snapshots::lock_horizon`, which is not held
//! at the durable log as the collection horizon is) and pruned after.
//!
//! Keys are identified by a 64-bit keyed hash of (tree, key) (`LockId`), so taking and
//! releasing a lock copies no key. Two keys whose ids collide (about one pair in 10^19, and
//! the hash key is random per environment) share a lock: the cost is a spurious
//! `WriteConflict`, which callers retry like any other, never a missed conflict.
//!
//! It must never: block, or forget a commit timestamp that a live snapshot is older than.

use super::{Ts, TxnId};
use parking_lot::Mutex;
use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};

const SHARDS: usize = 64;

/// How a key is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockMode {
    /// Read under a shared lock: others may read-lock it too.
    Shared,
    /// Written: no one else may lock it.
    Exclusive,
}

/// A lock a transaction took, and whether it took it to write the key.
pub type Held = (LockId, LockMode);

/// A lock request was refused: someone else holds the key, or wrote it after the snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// This live transaction holds it.
    Held(TxnId),
    /// A commit at this timestamp, newer than the snapshot, wrote it.
    NewerCommit(Ts),
}

#[derive(Debug, Default)]
struct LockEntry {
    writer: Option<TxnId>,
    readers: Vec<TxnId>,
    last_commit: Ts,
}

impl LockEntry {
    fn is_free(&self) -> bool {
        self.writer.is_none() && self.readers.is_empty()
    }
}

/// Which lock a key of a tree takes: a keyed 64-bit hash of both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LockId(u64);

/// Hashes a `LockId` for the shard maps. The id is already a keyed hash, so hashing it
/// again with SipHash (the maps' default) was pure cost: the lock table took 11% of a
/// sequential fill's CPU, most of it there. One multiply spreads its bits, so the bits that
/// chose the shard (all alike within one) do not end up in hashbrown's tag or bucket bits.
#[derive(Debug, Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0.wrapping_mul(0x9E37_79B9_7F4A_7C15)
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is used (`LockId` is one u64); any other input still hashes.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

type Shard = HashMap<LockId, LockEntry, BuildHasherDefault<IdHasher>>;

/// The lock table, sharded by lock id.
#[derive(Debug)]
pub struct LockTable {
    shards: Vec<Mutex<Shard>>,
    hasher: RandomState,
    entries: AtomicUsize,
    prune_at: AtomicUsize,
}

impl Default for LockTable {
    fn default() -> Self {
        LockTable {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            hasher: RandomState::new(),
            entries: AtomicUsize::new(0),
            prune_at: AtomicUsize::new(4096),
        }
    }
}

impl LockTable {
    /// The lock of `key` in tree `tree`.
    pub fn id(&self, tree: u64, key: &[u8]) -> LockId {
        LockId(self.hasher.hash_one((tree, key)))
    }

    fn shard(&self, id: LockId) -> &Mutex<Shard> {
        &self.shards[(id.0 >> 58) as usize % SHARDS]
    }

    /// Takes lock `id` for `txn` reading at `snapshot`, or says why not (L1, L2). Taking a
    /// lock already held in the same or a weaker mode by `txn` is allowed.
    pub fn acquire(
        &self,
        txn: TxnId,
        snapshot: Ts,
        id: LockId,
        mode: LockMode,
    ) -> Result<(), Refusal> {
        let mut shard = self.shard(id).lock();
        let entry = shard.entry(id).or_insert_with(|| {
            self.entries.fetch_add(1, Ordering::Relaxed);
            LockEntry::default()
        });
        if let Some(w) = entry.writer.filter(|w| *w != txn) {
            return Err(Refusal::Held(w));
        }
        if mode == LockMode::Exclusive {
            if let Some(r) = entry.readers.iter().find(|r| **r != txn) {
                return Err(Refusal::Held(*r));
            }
        }
        if entry.last_commit > snapshot {
            return Err(Refusal::NewerCommit(entry.last_commit));
        }
        match mode {
            LockMode::Exclusive => entry.writer = Some(txn),
            LockMode::Shared if !entry.readers.contains(&txn) && entry.writer != Some(txn) => {
                entry.readers.push(txn)
            }
            LockMode::Shared => {}
        }
        Ok(())
    }

    /// Releases everything `txn` holds on lock `id` (shared and exclusive alike); `committed`
    /// is the commit's timestamp, recorded when `txn` held the key exclusively (it wrote it).
    /// Entries no snapshot needs any more go (at or below `horizon`). A second call for the
    /// same key finds nothing held and changes nothing, so callers need not deduplicate.
    pub fn release(&self, txn: TxnId, id: LockId, committed: Option<Ts>, horizon: Ts) {
        let mut shard = self.shard(id).lock();
        let Some(entry) = shard.get_mut(&id) else {
            return;
        };
        if entry.writer == Some(txn) {
            entry.writer = None;
            if let Some(ts) = committed {
                entry.last_commit = entry.last_commit.max(ts);
            }
        }
        entry.readers.retain(|r| *r != txn);
        if entry.is_free() && entry.last_commit <= horizon {
            shard.remove(&id);
            self.entries.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Drops free entries at or below `horizon` once the table has doubled since the last
    /// prune (amortized O(1) per commit).
    pub fn maybe_prune(&self, horizon: Ts) {
        let n = self.entries.load(Ordering::Relaxed);
        if n < self.prune_at.load(Ordering::Relaxed) {
            return;
        }
        let mut left = 0;
        for shard in &self.shards {
            let mut s = shard.lock();
            s.retain(|_, e| !(e.is_free() && e.last_commit <= horizon));
            left += s.len();
        }
        self.entries.store(left, Ordering::Relaxed);
        self.prune_at.store((2 * left).max(4096), Ordering::Relaxed);
    }

    /// Entries in the table (held keys and recent commits a snapshot may still conflict with).
    pub fn len(&self) -> usize {
        self.entries.load(Ordering::Relaxed)
    }

    /// True when no key is locked.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use LockMode::*;

    #[test]
    fn writers_conflict_readers_do_not() {
        let t = LockTable::default();
        let k = t.id(1, b"k");
        let (a, b, c) = (TxnId(1), TxnId(2), TxnId(3));
        assert_eq!(t.acquire(a, Ts(10), k, Shared), Ok(()));
        assert_eq!(t.acquire(b, Ts(10), k, Shared), Ok(()), "readers share");
        assert_eq!(t.acquire(c, Ts(10), k, Exclusive), Err(Refusal::Held(a)));
        t.release(a, k, None, Ts(10));
        t.release(b, k, None, Ts(10));
        assert_eq!(t.acquire(c, Ts(10), k, Exclusive), Ok(()));
        assert_eq!(t.acquire(a, Ts(10), k, Shared), Err(Refusal::Held(c)));
        assert_eq!(t.acquire(c, Ts(10), k, Shared), Ok(()), "own lock");
        let same_key_other_tree = t.id(2, b"k");
        assert_ne!(k, same_key_other_tree);
        assert_eq!(t.acquire(a, Ts(10), same_key_other_tree, Exclusive), Ok(()));
    }

    #[test]
    fn a_commit_after_the_snapshot_refuses_the_key_until_the_horizon_passes_it() {
        let t = LockTable::default();
        let k = t.id(1, b"k");
        let (a, b) = (TxnId(1), TxnId(2));
        t.acquire(a, Ts(10), k, Exclusive).expect("free");
        t.release(a, k, Some(Ts(20)), Ts(10));
        assert_eq!(
            t.acquire(b, Ts(15), k, Exclusive),
            Err(Refusal::NewerCommit(Ts(20)))
        );
        assert_eq!(t.acquire(b, Ts(20), k, Exclusive), Ok(()));
        t.release(b, k, None, Ts(20));
        assert!(t.is_empty(), "free and at the horizon: pruned");
    }

    #[test]
    fn pruning_keeps_entries_a_snapshot_may_still_need() {
        let t = LockTable::default();
        for i in 0..5000u32 {
            let k = t.id(1, &i.to_le_bytes());
            t.acquire(TxnId(1), Ts(0), k, Exclusive).expect("free");
            t.release(TxnId(1), k, Some(Ts(100 + i as u64)), Ts(0));
        }
        t.maybe_prune(Ts(2099));
        assert_eq!(t.len(), 3000);
        let last = t.id(1, &4999u32.to_le_bytes());
        assert_eq!(
            t.acquire(TxnId(2), Ts(50), last, Exclusive),
            Err(Refusal::NewerCommit(Ts(5099)))
        );
    }
}
