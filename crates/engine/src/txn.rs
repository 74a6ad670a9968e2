//! Transactions: snapshot reads, key locks, a private write set, and an atomic commit.
//!
//! A transaction reads as of the snapshot taken at `begin` plus its own writes. Each write
//! first takes the key's exclusive lock (L1, L2 in `mvcc::locks`): a conflict fails at once
//! with `Error::WriteConflict`. The write then goes into the tree at once as a message
//! stamped provisional (`mvcc::status`): readers skip it while the transaction lives. It is
//! also kept in the write set, from which the transaction reads its own writes and which
//! `commit` logs as one group record (the changes and the commit). Commit, under the apply
//! lock, appends that record and marks the transaction committed at its timestamp before
//! publishing it — no message per key: every provisional version becomes visible at once,
//! and leaves resolve them lazily (E2). `abort` (or drop) sends one abort message per key
//! written, then forgets the transaction and releases the locks (T1). A crash keeps a
//! transaction whole or not at all: redo applies a logged group; provisional versions in a
//! checkpoint of a transaction live at its redo point are aborted by recovery (R1, R8).
//!
//! The write set's memory is charged to the cache while the transaction lives (a write that
//! grows it makes room first, like a load) and is bounded by `EnvOptions::txn_limit`: a write
//! that would take it past the limit fails with `Error::TransactionTooLarge`, MongoDB's
//! `TransactionTooLargeForCache`.

use crate::inner::EnvInner;
use crate::mvcc::{Held, LockMode, SnapshotGuard, Ts, TxnId};
use crate::tree::Tree;
use crate::txn_cursor::fold_own;
use crate::vocab::Op;
use crate::{Error, Result, TreeHandle, TxnCursor};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

/// One tree's pending changes: per key, the operations in the order they were made (a put or
/// delete drops what came before it).
pub(crate) struct TreeWrites {
    pub tree: Arc<Tree>,
    pub keys: BTreeMap<Vec<u8>, Vec<Op>>,
}

/// What a write-set key costs in memory beyond its bytes: its map slot and vectors.
const KEY_OVERHEAD: usize = 64;
/// What one operation on a key costs beyond its payload.
const OP_OVERHEAD: usize = 32;

/// A live transaction. Dropping it without `commit` aborts it.
pub struct Txn {
    env: Arc<EnvInner>,
    id: TxnId,
    snapshot: Arc<SnapshotGuard>,
    writes: BTreeMap<u64, TreeWrites>,
    /// Entry count changes by tree id, applied at commit.
    counts: BTreeMap<u64, (Arc<Tree>, i64)>,
    /// Keys this transaction locked, by tree id, to release at the end.
    held: Vec<Held>,
    /// The write set's memory as charged to the cache (KEY_OVERHEAD, OP_OVERHEAD).
    bytes: usize,
    /// The transaction is in the status table: its writes may be in trees (T1).
    provisional: bool,
    finished: bool,
}

impl std::fmt::Debug for Txn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Txn")
            .field("id", &self.id)
            .field("snapshot", &self.snapshot.ts())
            .finish()
    }
}

impl Txn {
    pub(crate) fn begin(env: Arc<EnvInner>) -> Txn {
        let id = env.txns.begin();
        let snapshot = Arc::new(env.snapshots.register());
        Txn {
            env,
            id,
            snapshot,
            writes: BTreeMap::new(),
            counts: BTreeMap::new(),
            held: Vec::new(),
            bytes: 0,
            provisional: false,
            finished: false,
        }
    }

    /// `tree`'s tree in this transaction's environment (`TreeHandle::tree_in`; a handle
    /// made before an `Env::reopen` used by a transaction begun after it, or the reverse),
    /// else the handle's own, which the checks of this transaction's environment refuse.
    fn tree_of<'a>(&self, tree: &'a TreeHandle) -> Cow<'a, Arc<Tree>> {
        tree.tree_in(&self.env).unwrap_or(Cow::Borrowed(&tree.tree))
    }

    /// The commit timestamp this transaction reads as of.
    pub fn snapshot_ts(&self) -> u64 {
        self.snapshot.ts().0
    }

    /// The value of `key` as this transaction sees it: its snapshot plus its own writes.
    pub fn get(&self, tree: &TreeHandle, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.env.check_usable()?;
        let ops = self
            .writes
            .get(&tree.tree.id())
            .and_then(|w| w.keys.get(key));
        let base = match ops.map(|o| o.first()) {
            Some(Some(Op::Put(_) | Op::Delete)) => None,
            _ => self.tree_of(tree).get_at(key, &self.snapshot)?,
        };
        Ok(fold_own(
            &*self.env.merge,
            key,
            base,
            ops.map_or(&[][..], Vec::as_slice),
        ))
    }

    /// A serializable read: takes a shared lock on `key` first, so no other transaction can
    /// write it until this one ends (readers never conflict with each other), and fails with
    /// `WriteConflict` if a commit after the snapshot wrote it.
    pub fn get_shared(&mut self, tree: &TreeHandle, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.lock_shared(tree, key)?;
        self.get(tree, key)
    }

    /// `get_shared`'s lock without its read, for a caller that already has the value from a
    /// cursor on this transaction's snapshot: no other transaction can write `key` until
    /// this one ends, and a commit after the snapshot that wrote it is a `WriteConflict`.
    pub fn lock_shared(&mut self, tree: &TreeHandle, key: &[u8]) -> Result<()> {
        self.lock(tree, key, LockMode::Shared)
    }

    /// Inserts or overwrites `key`.
    pub fn put(&mut self, tree: &TreeHandle, key: &[u8], value: &[u8]) -> Result<()> {
        self.write(tree, key, Op::Put(value.to_vec()))
    }

    /// Deletes `key` (blind: no read).
    pub fn delete(&mut self, tree: &TreeHandle, key: &[u8]) -> Result<()> {
        self.write(tree, key, Op::Delete)
    }

    /// A read-free update applied by the merge callback.
    pub fn update(&mut self, tree: &TreeHandle, key: &[u8], payload: &[u8]) -> Result<()> {
        self.write(tree, key, Op::Update(payload.to_vec()))
    }

    /// Changes `tree`'s entry count by `delta` when this transaction commits.
    pub fn add_count(&mut self, tree: &TreeHandle, delta: i64) {
        let own = self.tree_of(tree);
        let slot = self
            .counts
            .entry(tree.tree.id())
            .or_insert_with(|| (own.into_owned(), 0));
        slot.1 += delta;
    }

    /// `tree`'s entry count as of the newest commit plus this transaction's own changes.
    pub fn count(&self, tree: &TreeHandle) -> i64 {
        let own = self.counts.get(&tree.tree.id()).map_or(0, |c| c.1);
        self.tree_of(tree).count() + own
    }

    /// An ordered cursor over `tree` as this transaction sees it (its writes so far included).
    pub fn cursor(&self, tree: &TreeHandle) -> TxnCursor {
        let own = self
            .writes
            .get(&tree.tree.id())
            .map(|w| w.keys.clone())
            .unwrap_or_default();
        TxnCursor::new(
            self.tree_of(tree).cursor(self.snapshot.clone()),
            own,
            self.env.merge.clone(),
        )
    }

    /// Makes every write durable (per the fsync policy) and visible, atomically.
    pub fn commit(mut self) -> Result<()> {
        self.finished = true;
        let result = self.commit_writes();
        self.end(result.as_ref().ok().copied().flatten());
        if result.is_ok() {
            crate::counters::EngineStats::bump(&self.env.stats.txn_commits);
        }
        result.map(|_| ())
    }

    /// Forgets every write and releases the locks.
    pub fn abort(mut self) {
        self.finished = true;
        self.end(None);
        crate::counters::EngineStats::bump(&self.env.stats.txn_aborts);
    }

    fn write(&mut self, tree: &TreeHandle, key: &[u8], m: Op) -> Result<()> {
        self.env.check_usable()?;
        m.check_sizes(key)?;
        let bytes = self.bytes_after(tree, key, &m);
        let limit = self.env.options.txn_limit();
        if bytes > limit {
            return Err(Error::TransactionTooLarge { bytes, limit });
        }
        self.lock(tree, key, LockMode::Exclusive)?;
        self.write_provisional(tree, key, &m)?;
        let live = tree.tree_in(&self.env)?;
        let writes = self
            .writes
            .entry(tree.tree.id())
            .or_insert_with(|| TreeWrites {
                tree: Arc::clone(&live),
                keys: BTreeMap::new(),
            });
        let ops = match writes.keys.get_mut(key) {
            Some(ops) => ops,
            None => writes.keys.entry(key.to_vec()).or_default(),
        };
        if !matches!(m, Op::Update(_)) {
            ops.clear();
        }
        ops.push(m);
        self.charge(&live, bytes)
    }

    /// Puts `m` into the tree as a provisional version of this transaction: the status
    /// table knows the transaction and the key is registered before the message goes in
    /// (T1, R8).
    fn write_provisional(&mut self, tree: &TreeHandle, key: &[u8], m: &Op) -> Result<()> {
        if !self.provisional {
            self.env.snapshots.status().begin(self.id.0);
            self.provisional = true;
        }
        let known = self
            .writes
            .get(&tree.tree.id())
            .is_some_and(|w| w.keys.contains_key(key));
        if !known {
            self.env.txns.register_key(self.id.0, tree.tree.id(), key);
        }
        let live = self.tree_of(tree);
        live.apply(key, Ts::provisional(self.id.0), m.as_op_ref())?;
        self.env.after_write([&*live])
    }

    /// The write set's memory once `m` on `key` is recorded: a put or delete drops the key's
    /// earlier operations, an update adds to them.
    fn bytes_after(&self, tree: &TreeHandle, key: &[u8], m: &Op) -> usize {
        let ops = self
            .writes
            .get(&tree.tree.id())
            .and_then(|w| w.keys.get(key));
        let (added_key, dropped) = match ops {
            // The key is held twice: in the write set and in the live-key registry (R8).
            None => (KEY_OVERHEAD + 2 * key.len(), 0),
            Some(ops) if !matches!(m, Op::Update(_)) => {
                (0, ops.iter().map(op_bytes).sum::<usize>())
            }
            Some(_) => (0, 0),
        };
        self.bytes + added_key + op_bytes(m) - dropped
    }

    /// Moves the cache charge to `bytes`; a grown write set makes room for itself, so a
    /// transaction's memory presses on eviction like a node's.
    fn charge(&mut self, tree: &Tree, bytes: usize) -> Result<()> {
        let old = std::mem::replace(&mut self.bytes, bytes);
        self.env.cache.recharge(old, bytes);
        if bytes > old {
            tree.make_room(0)?;
        }
        Ok(())
    }

    fn lock(&mut self, tree: &TreeHandle, key: &[u8], mode: LockMode) -> Result<()> {
        let id = self.env.locks.id(tree.tree.id(), key);
        let got = self
            .env
            .locks
            .acquire(self.id, self.snapshot.ts(), id, mode);
        match got {
            Ok(()) => {
                self.held.push((id, mode));
                Ok(())
            }
            Err(refusal) => Err(self.env.conflict(tree.name(), refusal)),
        }
    }

    /// Logs and applies the write set; the commit timestamp, or `None` for a read-only
    /// transaction.
    fn commit_writes(&mut self) -> Result<Option<Ts>> {
        if self.writes.is_empty() && self.counts.values().all(|c| c.1 == 0) {
            return Ok(None);
        }
        // The write set is consumed: its operations move into the log record uncopied (a
        // key with several operations, only updates, is copied for each after the first).
        let mut ops = Vec::new();
        for w in std::mem::take(&mut self.writes).into_values() {
            for (key, mut list) in w.keys {
                let last = list.pop();
                for m in list {
                    ops.push((w.tree.clone(), key.clone(), m));
                }
                if let Some(m) = last {
                    ops.push((w.tree.clone(), key, m));
                }
            }
        }
        let counts: Vec<(Arc<Tree>, i64)> =
            self.counts.values().filter(|c| c.1 != 0).cloned().collect();
        let held = std::mem::take(&mut self.held);
        let env = self.env.clone();
        let id = self.id;
        let ts = self
            .env
            .commit_group(id, ops, &counts, self.provisional, |ts| {
                env.release_locks(id, &held, Some(ts));
            });
        if let Err(e) = &ts {
            // The write set is gone, so no abort message can be sent: the environment is
            // poisoned by the failure, and the transaction stays live in the status table
            // so that its provisional versions stay invisible.
            self.env
                .poison(format!("commit of transaction {} failed: {e}", id.0));
            self.provisional = false;
            self.env.release_locks(id, &held, None);
        }
        ts.map(|(ts, _)| Some(ts))
    }

    /// Sends an abort message for every key this transaction wrote, then forgets it (T1).
    /// If a message cannot be sent the environment is poisoned and the transaction stays
    /// live in the status table, so its versions stay invisible.
    fn abort_provisional(&mut self) {
        if !std::mem::take(&mut self.provisional) {
            return;
        }
        let stamp = Ts::provisional(self.id.0);
        for w in self.writes.values() {
            for key in w.keys.keys() {
                if let Err(e) = w.tree.abort_provisional(key, stamp) {
                    self.env
                        .poison(format!("abort of transaction {} failed: {e}", self.id.0));
                    return;
                }
            }
        }
        let _apply = self.env.apply_lock.lock();
        self.env.txns.forget(self.id.0);
        self.env.snapshots.status().forget(self.id.0);
    }

    /// Releases whatever locks remain and leaves the active set; an uncommitted
    /// transaction's provisional writes are aborted first.
    fn end(&mut self, committed: Option<Ts>) {
        if committed.is_none() {
            self.abort_provisional();
        }
        let held = std::mem::take(&mut self.held);
        self.env.release_locks(self.id, &held, committed);
        self.writes.clear();
        self.counts.clear();
        self.env.cache.recharge(std::mem::take(&mut self.bytes), 0);
        self.env.txns.finished();
    }
}

impl Drop for Txn {
    fn drop(&mut self) {
        if !self.finished {
            self.finished = true;
            self.end(None);
            crate::counters::EngineStats::bump(&self.env.stats.txn_aborts);
        }
    }
}

/// What one recorded operation costs in the write set.
fn op_bytes(m: &Op) -> usize {
    OP_OVERHEAD + m.payload().len()
}
