//! `EnvInner`: the state every part of an open environment shares (options, cache, catalog,
//! trees, log, MVCC, locks, lifecycle) and the commit path on it. `Env` (the public facade,
//! `env.rs`), transactions (`txn.rs`), recovery and the background threads all reach it
//! from above; it imports none of them, so the environment's files depend one way.
//!
//! Write path (recovery invariants R1–R8 and M1–M2 are in docs/recovery.md):
//! 1. a write batch (an implicit transaction) locks its keys, so it conflicts with a live
//!    transaction writing the same key instead of overwriting it (`mvcc::locks`);
//! 2. a commit group — a batch's or a transaction's changes plus a commit record — is
//!    appended under the apply lock together with the tree changes, each stamped with the
//!    commit's timestamp (the log position after it, M1), so trees see changes in log order
//!    (R2); the timestamp is then published, making the whole group visible at once —
//!    once its log record is durable, when commits are fsynced (M3);
//! 3. the lock is released and the caller waits for group commit (R1);
//! 4. writers wait while a root's buffers are twice the node size (backpressure) and the
//!    flusher thread moves messages down.

use crate::cache::Cache;
use crate::catalog::Catalog;
use crate::counters::EngineStats;
use crate::lock::DirLock;
use crate::mvcc::{Held, LockMode, LockTable, Refusal, Snapshots, Ts};
use crate::roles::{Lifecycle, TxnRegistry};
use crate::tree::{MergeFn, OpRef, Tree, TreeContext};
use crate::vocab::Op;
use crate::wal::{Change, LogRecord, TxnId, Wal, WalOptions};
use crate::{EnvOptions, Error, Result};
use parking_lot::{Mutex, RwLock};
use shale_io::{FaultInjector, IoStats};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One operation of a commit: the tree, the key and what is done to it.
pub(crate) type KeyOp = (Arc<Tree>, Vec<u8>, Op);

/// Extras that are not plain options: the merge callback and, for tests, a fault injector.
#[derive(Clone)]
pub struct EnvHooks {
    /// Applies update messages' payloads to values (`MergeFn`).
    pub merge: Arc<MergeFn>,
    /// Fails or holds chosen writes and fsyncs (tests only).
    pub faults: Option<Arc<FaultInjector>>,
}

impl Default for EnvHooks {
    fn default() -> Self {
        EnvHooks {
            merge: Arc::new(add_i64_merge),
            faults: None,
        }
    }
}

/// The default merge callback: the payload is a little-endian i64 added to the value (an
/// i64 too, 0 when absent) — a read-free counter increment.
pub fn add_i64_merge(_key: &[u8], current: Option<&[u8]>, payload: &[u8]) -> Option<Vec<u8>> {
    let as_i64 = |b: &[u8]| b.try_into().map(i64::from_le_bytes).unwrap_or(0);
    let sum = current.map_or(0, as_i64).wrapping_add(as_i64(payload));
    Some(sum.to_le_bytes().to_vec())
}

pub(crate) struct EnvInner {
    pub dir: PathBuf,
    pub options: EnvOptions,
    pub io_stats: Arc<IoStats>,
    pub faults: Option<Arc<FaultInjector>>,
    pub cache: Arc<Cache>,
    pub stats: Arc<EngineStats>,
    pub merge: Arc<MergeFn>,
    pub catalog: Mutex<Catalog>,
    pub trees: RwLock<HashMap<String, Arc<Tree>>>,
    pub wal: Wal,
    /// Held while appending to the log and applying to trees, and by a checkpoint's start.
    pub apply_lock: Mutex<()>,
    pub checkpoint_lock: Mutex<()>,
    /// The redo point of the last checkpoint (where recovery would start replaying): the
    /// log since it is what `checkpoint_log_bytes` bounds.
    pub last_redo_lsn: AtomicU64,
    /// Transaction ids, the live transactions and their keys (`roles.rs`).
    pub txns: TxnRegistry,
    pub snapshots: Arc<Snapshots>,
    pub locks: LockTable,
    /// Open, shut down or poisoned; the flusher's wake-up (`roles.rs`).
    pub life: Lifecycle,
    /// The directory lock, handed on to the environment that `Env::reopen` recovers.
    pub dir_lock: Arc<DirLock>,
    /// Set by `Env::reopen`: the environment recovered from this one's files after it
    /// failed. Handles made before the reopen find their tree there (`TreeHandle`).
    pub successor: std::sync::OnceLock<Arc<EnvInner>>,
}

impl EnvInner {
    /// The environment now serving this directory: this one, or the last of its successors.
    pub(crate) fn newest(self: &Arc<Self>) -> Arc<EnvInner> {
        let mut env = self.clone();
        while let Some(next) = env.successor.get() {
            env = next.clone();
        }
        env
    }

    pub(crate) fn tree_context(&self) -> TreeContext {
        TreeContext {
            cache: self.cache.clone(),
            merge: self.merge.clone(),
            stats: self.stats.clone(),
            snapshots: self.snapshots.clone(),
        }
    }

    /// Reads need only an open environment: after a failure they go on, as of the durable
    /// log (`Snapshots::freeze`).
    pub(crate) fn check_open(&self) -> Result<()> {
        if self.life.is_shut_down() {
            return Err(Error::Closed);
        }
        Ok(())
    }

    pub(crate) fn check_usable(&self) -> Result<()> {
        self.check_open()?;
        if !self.life.is_poisoned() {
            return Ok(());
        }
        match self.life.poisoned() {
            Some(reason) => Err(Error::Poisoned(reason)),
            None => Ok(()),
        }
    }

    /// Poisons the environment for `reason` (a background thread died): writes fail with
    /// `Error::Poisoned` instead of waiting for work that will never be done.
    pub(crate) fn poison(&self, reason: String) {
        self.life.poison(|| reason);
        self.snapshots.freeze();
        self.life.wake();
    }

    /// Records an I/O failure: the environment refuses writes until reopened.
    pub(crate) fn poison_on<T>(&self, r: Result<T>) -> Result<T> {
        if let Err(e) = &r {
            if e.poisons() {
                self.life.poison(|| e.to_string());
                self.snapshots.freeze();
            }
        }
        r
    }

    /// Commits a write batch's operations and count changes (an implicit transaction).
    pub(crate) fn write(&self, ops: Vec<KeyOp>, counts: Vec<(Arc<Tree>, i64)>) -> Result<()> {
        self.check_usable()?;
        if ops.is_empty() && counts.is_empty() {
            return Ok(());
        }
        for (tree, key, op) in &ops {
            op.check_sizes(key)?;
            check_current(tree)?;
        }
        for (tree, _) in &counts {
            check_current(tree)?;
        }
        let txn = self.txns.next_id();
        let held = self.lock_batch(txn, &ops)?;
        let committed = self.commit_group(txn, ops, &counts, false, |ts| {
            self.release_locks(txn, &held, Some(ts));
        });
        if committed.is_err() {
            self.release_locks(txn, &held, None);
        }
        let (_, mut trees) = committed?;
        // A tree once per run of its keys: its checks take locks and read atomics.
        trees.dedup_by(|a, b| Arc::ptr_eq(a, b));
        self.after_write(trees.iter())
    }

    /// Locks every key of a batch (a blind write conflicts only with live holders, L1).
    fn lock_batch(&self, txn: TxnId, ops: &[KeyOp]) -> Result<Vec<Held>> {
        let mut held = Vec::with_capacity(ops.len());
        for (tree, key, _) in ops {
            let id = self.locks.id(tree.id(), key);
            let got = self
                .locks
                .acquire(txn, Ts(u64::MAX), id, LockMode::Exclusive);
            if let Err(refusal) = got {
                self.release_locks(txn, &held, None);
                return Err(self.conflict(tree.name(), refusal));
            }
            held.push((id, LockMode::Exclusive));
        }
        Ok(held)
    }

    /// Logs `ops` and `counts` as one group ending in a commit record and applies them to
    /// their trees with the commit's timestamp, under the apply lock (R2, M1); publishes the
    /// timestamp and calls `released` (still under the lock, so a conflicting writer sees the
    /// commit), then waits for group commit (R1). Returns the commit's timestamp.
    ///
    /// A transaction whose writes are already in the trees as provisional versions
    /// (`provisional`) sends no message per key: it is marked committed at the timestamp
    /// before the timestamp is published (T1), and its versions become visible with it.
    ///
    /// The operations move into the log's group record uncopied, and the trees apply them
    /// borrowed from it (`crate::vocab`). Returns the timestamp and the trees of `ops`, in order.
    pub(crate) fn commit_group(
        &self,
        txn: TxnId,
        ops: Vec<KeyOp>,
        counts: &[(Arc<Tree>, i64)],
        provisional: bool,
        released: impl FnOnce(Ts),
    ) -> Result<(Ts, Vec<Arc<Tree>>)> {
        // One group record holds the whole commit (docs/format-wal.md, version 2).
        let mut trees = Vec::with_capacity(ops.len());
        let mut changes = Vec::with_capacity(ops.len() + counts.len());
        for (tree, key, op) in ops {
            changes.push(Change::Op {
                tree: tree.id(),
                key,
                op,
            });
            trees.push(tree);
        }
        changes.extend(counts.iter().map(|(t, delta)| Change::Count {
            tree: t.id(),
            delta: *delta,
        }));
        let records = [LogRecord::Group { txn, changes }];
        let end = {
            let _apply = self.apply_lock.lock();
            // A poisoned environment commits nothing: `Snapshots::lock_horizon` relies on it.
            self.check_usable()?;
            let end = self.poison_on(self.wal.append(&records))?;
            let ts = Ts(end.0);
            if provisional {
                self.snapshots.status().commit(txn.0, ts);
                self.txns.forget(txn.0);
            } else {
                let LogRecord::Group { changes, .. } = &records[0] else {
                    unreachable!("built as a group above")
                };
                for (tree, tree_ops) in by_tree(&trees, changes) {
                    self.poison_on(tree.apply_all(&tree_ops, ts))?;
                }
            }
            for (tree, delta) in counts {
                tree.add_count(*delta);
            }
            self.snapshots.publish(ts);
            released(ts);
            end
        };
        self.snapshots.status().prune(|| self.snapshots.horizon());
        if let Err(e) = self.poison_on(self.wal.commit(end)) {
            // The commit was never acknowledged and no snapshot will read it (M3, M2's cap);
            // the entry counts, which are not versioned, forget it too.
            for (tree, delta) in counts {
                tree.add_count(-delta);
            }
            return Err(e);
        }
        EngineStats::bump(&self.stats.commits);
        Ok((Ts(end.0), trees))
    }

    /// Wakes the flusher, waits out backpressure and evicts, after writes to these trees.
    /// While it waits, one writer per tree flushes beside the flusher (`Tree::help_flush`);
    /// a cache near its limit asks the flusher to evict ahead (`Cache::request_room_ahead`).
    pub(crate) fn after_write<'a>(
        &self,
        trees: impl IntoIterator<Item = &'a Arc<Tree>>,
    ) -> Result<()> {
        let mut waited = false;
        for tree in trees {
            if tree.needs_flush() {
                self.life.wake();
            }
            while tree.needs_backpressure() && !self.life.is_shut_down() {
                self.check_usable()?;
                waited = true;
                let helped = match tree.help_flush() {
                    Some(Ok(worked)) => worked,
                    // An I/O failure poisons the environment, as the flusher's would. Any
                    // other (a cache too small for the unit's nodes) is not this committed
                    // write's: the flusher meets it on its own turn.
                    Some(Err(e)) if e.poisons() => {
                        return self.poison_on(Err(e));
                    }
                    Some(Err(_)) | None => false,
                };
                if !helped {
                    self.life.wake_and_wait(Some(Duration::from_millis(50)));
                }
            }
            self.poison_on(tree.evict_if_needed())?;
        }
        if self.cache.request_room_ahead() {
            self.life.wake();
        }
        if waited {
            EngineStats::bump(&self.stats.backpressure_waits);
        }
        Ok(())
    }

    /// Bytes of log written since the last checkpoint's redo point.
    pub(crate) fn log_since_checkpoint(&self) -> u64 {
        self.wal
            .end_lsn()
            .0
            .saturating_sub(self.last_redo_lsn.load(Ordering::SeqCst))
    }

    /// Checkpoint: mark under the apply lock (so the redo point splits the log exactly), then
    /// write pending nodes and headers while writers go on, then trim the log (R3–R6).
    pub(crate) fn checkpoint(&self) -> Result<()> {
        self.check_usable()?;
        let _one = self.checkpoint_lock.lock();
        let started = Instant::now();
        let (redo_lsn, live_end, marks) = {
            let _apply = self.apply_lock.lock();
            // W10: the records before the redo point go to a file of their own, which R6
            // below removes, so a checkpoint (and a clean close) leaves only the log after it.
            self.wal.rotate_if_over(LOG_ROTATE_MIN_BYTES);
            let redo_lsn = self.wal.end_lsn();
            let trees: Vec<Arc<Tree>> = self.trees.read().values().cloned().collect();
            let marks: Vec<_> = trees
                .into_iter()
                .map(|t| {
                    let m = t.checkpoint_mark();
                    (t, m)
                })
                .collect();
            // R8: the live transactions and the next id, at the redo point, after the marks
            // (every provisional write in a marked image was registered before it was made).
            let live = self.poison_on(self.wal.append(&[self.live_record()]))?;
            (redo_lsn, live, marks)
        };
        // R5: the log up to the redo point is durable before any header names it, and with
        // it the live-transaction record that starts at the redo point (R8).
        self.poison_on(self.wal.sync_to(live_end))?;
        for (tree, mark) in &marks {
            self.poison_on(tree.checkpoint_finish(mark, redo_lsn.0))?;
        }
        // R6: only now may the log before the redo point go.
        self.poison_on(self.wal.remove_before(redo_lsn))?;
        self.last_redo_lsn.store(redo_lsn.0, Ordering::SeqCst);
        EngineStats::bump(&self.stats.checkpoints);
        tracing::debug!(
            ms = started.elapsed().as_millis() as u64,
            trees = marks.len(),
            "checkpoint done"
        );
        Ok(())
    }
}

impl EnvInner {
    /// The `Live` record a checkpoint logs at its redo point (R8, T3): called under the
    /// apply lock, so no transaction commits or finishes its abort meanwhile.
    fn live_record(&self) -> LogRecord {
        let (next_txn, txns) = self.txns.snapshot();
        LogRecord::Live { next_txn, txns }
    }
}

/// A batch built before an `Env::reopen` names the failed environment's trees, whose files
/// are retired: it must be built again, or it would change trees nobody reads.
fn check_current(tree: &Tree) -> Result<()> {
    if tree.file().is_retired() {
        return Err(Error::Poisoned(format!(
            "tree {} belongs to an environment reopened since the batch was built",
            tree.name()
        )));
    }
    Ok(())
}

/// One tree's share of a commit: keys and the messages they get, borrowed from the batch.
type TreeOps<'a> = Vec<(&'a [u8], OpRef<'a>)>;

/// A checkpoint starts a new log file when the current one holds more than this, so that
/// the file's records before the redo point can be removed (`Wal::rotate_if_over`); an
/// idle database's checkpoints, a few hundred bytes each, do not make a file apiece.
const LOG_ROTATE_MIN_BYTES: u64 = 1 << 20;

/// A commit's operations grouped by tree, each tree's in batch order, as the tree applies
/// them (`Tree::apply_all`): borrowed from the log record, the values are not copied.
/// `trees[i]` is the tree of `changes[i]`; the count changes after them have no tree here.
fn by_tree<'a>(trees: &'a [Arc<Tree>], changes: &'a [Change]) -> Vec<(&'a Arc<Tree>, TreeOps<'a>)> {
    let mut groups: Vec<(&Arc<Tree>, TreeOps<'_>)> = Vec::new();
    for (tree, change) in trees.iter().zip(changes) {
        let Change::Op { key, op, .. } = change else {
            continue;
        };
        let at = match groups.iter().position(|(t, _)| Arc::ptr_eq(t, tree)) {
            Some(at) => at,
            None => {
                groups.push((tree, Vec::new()));
                groups.len() - 1
            }
        };
        groups[at].1.push((key.as_slice(), op.as_op_ref()));
    }
    groups
}

impl EnvInner {
    /// The error for a refused lock (counted). A commit after the caller's snapshot that is
    /// not yet durable is not yet visible either (M3): wait for its fsync first, so that the
    /// caller's retry, on a new snapshot, sees it instead of conflicting with it again.
    pub(crate) fn conflict(&self, tree: &str, refusal: Refusal) -> Error {
        crate::counters::EngineStats::bump(&self.stats.write_conflicts);
        if let Refusal::NewerCommit(ts) = refusal {
            if self.snapshots.visible() < ts {
                // A failure here is the commit's, reported to its writer; this caller gets
                // its conflict, and its retry the environment's state.
                let _ = self.wal.sync_to(crate::wal::Lsn(ts.0));
            }
        }
        let reason = match refusal {
            Refusal::Held(other) => format!("held by live transaction {}", other.0),
            Refusal::NewerCommit(ts) => {
                format!("written by a commit (ts {}) after this snapshot", ts.0)
            }
        };
        Error::WriteConflict {
            tree: tree.to_owned(),
            reason,
        }
    }

    /// Releases `held` keys of `txn`; `committed` marks the keys it locked to write as
    /// written at that timestamp (L2). A key can be held more than once — every write takes
    /// its lock again, and a `get_shared` read followed by a write holds it both ways — and
    /// `LockTable::release` frees all of a key's holds at once, recording the commit when the
    /// key was held exclusively, whichever hold comes first (releasing a shared hold first
    /// used to prune the entry before the commit's timestamp was recorded, so an older
    /// snapshot could then overwrite the key).
    pub(crate) fn release_locks(&self, txn: TxnId, held: &[Held], committed: Option<Ts>) {
        if held.is_empty() {
            return;
        }
        let horizon = self.snapshots.lock_horizon();
        for (id, _) in held {
            self.locks.release(txn, *id, committed, horizon);
        }
        self.locks.maybe_prune(horizon);
    }
}

pub(crate) fn wal_options(o: &EnvOptions) -> WalOptions {
    WalOptions {
        fsync: o.fsync,
        direct_io: o.direct_io,
        ..WalOptions::default()
    }
}

pub(crate) fn wal_dir(dir: &Path) -> PathBuf {
    dir.join("wal")
}
