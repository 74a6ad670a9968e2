//! `Env`: one open data directory. It composes the pieces: the catalog of trees, one block
//! file and `Tree` per tree, the shared cache budget, the write-ahead log, the background
//! flusher and checkpointer, and recovery at open.
//!
//! Write path (recovery invariants R1–R8 and M1–M2 are in docs/recovery.md):
//! 1. a write batch (an implicit transaction) locks its keys, so it conflicts with a live
//!    transaction writing the same key instead of overwriting it (`mvcc::locks`);
//! 2. a commit group — a batch's or a transaction's changes plus a commit record — is
//!    appended under the apply lock together with the tree changes, each stamped with the
//!    commit's timestamp (the log position after it, M1), so trees see changes in log order
//!    (R2); the timestamp is then published, making the whole group visible at once;
//! 3. the lock is released and the caller waits for group commit (R1);
//! 4. writers wait while a root's buffers are twice the node size (backpressure) and the
//!    flusher thread moves messages down.

use crate::cache::Cache;
use crate::catalog::{tree_path, Catalog, TreeEntry};
use crate::counters::{EngineCounters, EngineStats};
use crate::lock::DirLock;
use crate::mvcc::{LockMode, LockTable, Snapshots, Ts};
use crate::tree::{MergeFn, OpRef, Tree, TreeContext};
use crate::txn::{Held, Txn};
use crate::vocab::Op;
use crate::wal::{Change, LiveTxn, LogRecord, TxnId, Wal, WalOptions};
use crate::{block::BlockFile, EnvOptions, Error, Result, TreeOptions};
use parking_lot::{Condvar, Mutex, RwLock};
use shale_io::{FaultInjector, IoStats};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Extras that are not plain options: the merge callback and, for tests, a fault injector.
#[derive(Clone)]
pub struct EnvHooks {
    pub merge: Arc<MergeFn>,
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

/// Changes to any number of trees, committed atomically (all or nothing after a crash).
#[derive(Debug, Clone, Default)]
pub struct WriteBatch {
    ops: Vec<(Arc<Tree>, Vec<u8>, Op)>,
    counts: Vec<(Arc<Tree>, i64)>,
}

impl WriteBatch {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn put(&mut self, tree: &TreeHandle, key: &[u8], value: &[u8]) {
        self.push(tree, key, Op::Put(value.to_vec()));
    }
    pub fn delete(&mut self, tree: &TreeHandle, key: &[u8]) {
        self.push(tree, key, Op::Delete);
    }
    pub fn update(&mut self, tree: &TreeHandle, key: &[u8], payload: &[u8]) {
        self.push(tree, key, Op::Update(payload.to_vec()));
    }
    fn push(&mut self, tree: &TreeHandle, key: &[u8], op: Op) {
        self.ops.push((tree.tree.clone(), key.to_vec(), op));
    }
    /// Changes the tree's entry count by `delta` with the batch (see `TreeHandle::count`).
    pub fn add_count(&mut self, tree: &TreeHandle, delta: i64) {
        self.counts.push((tree.tree.clone(), delta));
    }
    pub fn len(&self) -> usize {
        self.ops.len()
    }
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty() && self.counts.is_empty()
    }
}

/// The `(tree, key)`s a live transaction has written (or is about to write).
pub(crate) type LiveKeys = Vec<(u64, Vec<u8>)>;

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
    pub next_txn: AtomicU64,
    /// Each live transaction's `(tree, key)`s that its provisional writes may have reached,
    /// registered before each write (T1); a checkpoint logs them at its redo point (R8).
    pub live: Mutex<HashMap<u64, LiveKeys>>,
    pub snapshots: Arc<Snapshots>,
    pub locks: LockTable,
    pub active_txns: AtomicU64,
    pub poisoned: Mutex<Option<String>>,
    pub shutdown: AtomicBool,
    /// Wakes the flusher; tells backpressured writers that the flusher made progress.
    pub work: (Mutex<()>, Condvar),
    pub _lock: DirLock,
}

/// An open environment.
pub struct Env {
    inner: Arc<EnvInner>,
    threads: Vec<JoinHandle<()>>,
}

/// A handle to one tree of an environment.
#[derive(Clone)]
pub struct TreeHandle {
    env: Arc<EnvInner>,
    pub(crate) tree: Arc<Tree>,
}

#[cfg(test)]
impl Env {
    /// The log, for tests that write records the way older format versions did.
    pub(crate) fn wal_for_tests(&self) -> &Wal {
        &self.inner.wal
    }
}

impl std::fmt::Debug for Env {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Env").field("dir", &self.inner.dir).finish()
    }
}

impl Env {
    /// Opens (creating if needed) the environment in `dir`, recovering after a crash.
    pub fn open(dir: impl AsRef<Path>, options: EnvOptions) -> Result<Env> {
        Self::open_with(dir, options, EnvHooks::default())
    }

    /// `open` with a merge callback and test hooks.
    pub fn open_with(
        dir: impl AsRef<Path>,
        mut options: EnvOptions,
        hooks: EnvHooks,
    ) -> Result<Env> {
        options.tree_defaults = options.tree_defaults.fitted_to_cache(options.cache_bytes);
        let inner = Arc::new(crate::recovery::open_and_recover(
            dir.as_ref(),
            options,
            hooks,
        )?);
        let threads = crate::background::start(&inner);
        Ok(Env { inner, threads })
    }

    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    #[cfg(test)]
    pub(crate) fn inner_for_tests(&self) -> &EnvInner {
        &self.inner
    }

    pub fn options(&self) -> &EnvOptions {
        &self.inner.options
    }

    /// Creates a tree; `None` options take the environment's defaults.
    pub fn create_tree(&self, name: &str, options: Option<TreeOptions>) -> Result<TreeHandle> {
        let env = &self.inner;
        env.check_usable()?;
        let options = options.unwrap_or(env.options.tree_defaults);
        validate_tree_options(&options)?;
        let _apply = env.apply_lock.lock();
        let mut catalog = env.catalog.lock();
        if catalog.trees.contains_key(name) {
            return Err(Error::TreeExists(name.to_owned()));
        }
        let id = catalog.next_tree_id;
        let path = tree_path(&env.dir, id);
        let meta = crate::tree::initial_meta(&options);
        let file = BlockFile::create(
            &path,
            &meta,
            env.options.direct_io,
            env.io_stats.clone(),
            env.faults.clone(),
        )?;
        // R3: the new tree's redo point is the log's end now; nothing before it is its own.
        file.checkpoint_begin();
        env.poison_on(file.checkpoint_end(crate::block::NodeId(0), env.wal.end_lsn().0, &meta))?;
        let mut next = catalog.clone();
        next.next_tree_id += 1;
        next.trees
            .insert(name.to_owned(), TreeEntry { id, options });
        next.store(&env.dir)?;
        *catalog = next;
        let tree = Arc::new(Tree::new(
            id,
            name.to_owned(),
            file,
            crate::block::NodeId(0),
            &meta,
            env.tree_context(),
        )?);
        env.cache.register(&tree);
        env.trees.write().insert(name.to_owned(), tree.clone());
        Ok(TreeHandle {
            env: env.clone(),
            tree,
        })
    }

    /// Opens an existing tree.
    pub fn open_tree(&self, name: &str) -> Result<TreeHandle> {
        let tree = self
            .inner
            .trees
            .read()
            .get(name)
            .cloned()
            .ok_or_else(|| Error::NoSuchTree(name.to_owned()))?;
        Ok(TreeHandle {
            env: self.inner.clone(),
            tree,
        })
    }

    /// Drops a tree: it leaves the catalog durably and its file is unlinked at once.
    pub fn drop_tree(&self, name: &str) -> Result<()> {
        let env = &self.inner;
        env.check_usable()?;
        let _apply = env.apply_lock.lock();
        let _cp = env.checkpoint_lock.lock();
        let mut catalog = env.catalog.lock();
        let entry = catalog
            .trees
            .get(name)
            .cloned()
            .ok_or_else(|| Error::NoSuchTree(name.to_owned()))?;
        let mut next = catalog.clone();
        next.trees.remove(name);
        next.store(&env.dir)?;
        *catalog = next;
        if let Some(tree) = env.trees.write().remove(name) {
            tree.release_cache();
        }
        let path = tree_path(&env.dir, entry.id);
        std::fs::remove_file(&path).map_err(|e| Error::os(&path, "unlink", e))?;
        shale_io::sync_dir(&env.dir)?;
        Ok(())
    }

    /// Names of all trees.
    pub fn list_trees(&self) -> Vec<String> {
        self.inner.catalog.lock().trees.keys().cloned().collect()
    }

    /// Commits a batch atomically and durably (per the fsync policy). It is a one-statement
    /// transaction: `WriteConflict` if a live transaction holds one of its keys.
    pub fn write(&self, batch: WriteBatch) -> Result<()> {
        self.inner.write(batch)
    }

    /// Begins a transaction reading as of the newest commit (snapshot isolation).
    pub fn begin(&self) -> Txn {
        Txn::begin(self.inner.clone())
    }

    /// A read-only view of every tree as of the newest commit (no locks, not a transaction).
    pub fn read_view(&self) -> crate::ReadView {
        crate::ReadView::new(self.inner.clone())
    }

    /// Makes every change so far part of a durable checkpoint and trims the log.
    pub fn checkpoint(&self) -> Result<()> {
        self.inner.checkpoint()
    }

    /// Pushes every buffered message of every tree down to the leaves, merging and splitting
    /// as it goes (TokuMX's hot optimize). Writers may continue meanwhile.
    pub fn flush_all(&self) -> Result<()> {
        self.inner.check_usable()?;
        let trees: Vec<Arc<Tree>> = self.inner.trees.read().values().cloned().collect();
        for t in trees {
            self.inner.poison_on(t.drain())?;
        }
        Ok(())
    }

    /// Every engine counter.
    pub fn counters(&self) -> EngineCounters {
        let mvcc = crate::counters::MvccGauges {
            active_txns: self.inner.active_txns.load(Ordering::Relaxed),
            open_snapshots: self.inner.snapshots.open_count(),
            oldest_snapshot_age_ms: self.inner.snapshots.oldest_age_ms(),
            lock_entries: self.inner.locks.len() as u64,
            txn_status_entries: self.inner.snapshots.status().len() as u64,
        };
        EngineCounters::collect(
            self.inner.io_stats.snapshot(),
            &self.inner.cache,
            &self.inner.stats,
            mvcc,
        )
    }

    /// A snapshot of the I/O counters of every file in the environment.
    pub fn io_counters(&self) -> shale_io::IoCounters {
        self.inner.io_stats.snapshot()
    }

    /// Bytes used on disk by tree files and the log.
    pub fn disk_bytes(&self) -> u64 {
        shale_io::dir_disk_bytes(&self.inner.dir)
    }

    /// Checkpoints, stops the background threads and releases the directory.
    /// Tree handles keep the directory locked until they are dropped; after `close` they
    /// return `Error::Closed`.
    pub fn close(mut self) -> Result<()> {
        let result = if self.inner.poisoned.lock().is_none() {
            self.inner.checkpoint()
        } else {
            Ok(())
        };
        self.stop_threads();
        result
    }

    fn stop_threads(&mut self) {
        self.inner.shutdown.store(true, Ordering::SeqCst);
        self.inner.work.1.notify_all();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Env {
    /// Dropping without `close` stops the threads but writes nothing: like a crash, except
    /// that everything acknowledged is already in the log.
    fn drop(&mut self) {
        self.stop_threads();
    }
}

impl TreeHandle {
    pub fn name(&self) -> &str {
        self.tree.name()
    }
    pub fn options(&self) -> &TreeOptions {
        self.tree.options()
    }
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.tree.get(key)
    }
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let mut b = WriteBatch::new();
        b.put(self, key, value);
        self.env.write(b)
    }
    pub fn delete(&self, key: &[u8]) -> Result<()> {
        let mut b = WriteBatch::new();
        b.delete(self, key);
        self.env.write(b)
    }
    /// Read-free update: `payload` is applied by the merge callback when it reaches the leaf.
    pub fn update(&self, key: &[u8], payload: &[u8]) -> Result<()> {
        let mut b = WriteBatch::new();
        b.update(self, key, payload);
        self.env.write(b)
    }
    /// A cursor reading as of the newest commit; it keeps that snapshot (and the versions it
    /// needs) for as long as it lives.
    pub fn cursor(&self) -> crate::tree::Cursor {
        let snapshot = Arc::new(self.env.snapshots.register());
        self.tree.cursor(snapshot)
    }
    /// Checks every invariant of the tree and its file; returns its shape (entry count,
    /// height, node counts, buffered messages, sizes). Holds off checkpoints while it runs;
    /// writers may continue.
    pub fn verify(&self) -> Result<crate::TreeShape> {
        let _no_checkpoint = self.env.checkpoint_lock.lock();
        self.tree.verify()
    }
    /// The tree's entry count as its writers keep it (`WriteBatch::add_count`,
    /// `Txn::add_count`), as of the newest commit: exact through commits, aborts, checkpoints
    /// and recovery, and O(1). The engine does not know whether a blind put inserts or
    /// overwrites, so the caller (which does) says how the count changes.
    pub fn count(&self) -> i64 {
        self.tree.count()
    }
    /// Bytes of the tree's file.
    pub fn file_bytes(&self) -> u64 {
        self.tree.file().file_len()
    }
    /// Raw and stored bytes of the tree's written nodes, from their headers (one small read
    /// per node; `tree_space.rs`). Nodes changed since their last write count as written.
    pub fn space(&self) -> Result<crate::TreeSpace> {
        crate::tree_space::measure(self.tree.file())
    }
}

impl EnvInner {
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
        if self.shutdown.load(Ordering::SeqCst) {
            return Err(Error::Closed);
        }
        Ok(())
    }

    pub(crate) fn check_usable(&self) -> Result<()> {
        self.check_open()?;
        match &*self.poisoned.lock() {
            Some(reason) => Err(Error::Poisoned(reason.clone())),
            None => Ok(()),
        }
    }

    /// Poisons the environment for `reason` (a background thread died): writes fail with
    /// `Error::Poisoned` instead of waiting for work that will never be done.
    pub(crate) fn poison(&self, reason: String) {
        self.poisoned.lock().get_or_insert(reason);
        self.snapshots.freeze();
        self.work.1.notify_all();
    }

    /// Records an I/O failure: the environment refuses writes until reopened.
    pub(crate) fn poison_on<T>(&self, r: Result<T>) -> Result<T> {
        if let Err(e) = &r {
            if matches!(e, Error::Io(_) | Error::Poisoned(_)) {
                self.poisoned.lock().get_or_insert_with(|| e.to_string());
                self.snapshots.freeze();
            }
        }
        r
    }

    fn write(&self, batch: WriteBatch) -> Result<()> {
        self.check_usable()?;
        if batch.is_empty() {
            return Ok(());
        }
        for (_, key, op) in &batch.ops {
            op.check_sizes(key)?;
        }
        let txn = TxnId(self.next_txn.fetch_add(1, Ordering::Relaxed));
        let held = self.lock_batch(txn, &batch)?;
        let WriteBatch { ops, counts } = batch;
        let committed = self.commit_group(txn, ops, &counts, false, |ts| {
            self.release_locks(txn, &held, Some(ts));
        });
        if committed.is_err() {
            self.release_locks(txn, &held, None);
        }
        let (_, trees) = committed?;
        self.after_write(trees.iter())
    }

    /// Locks every key of a batch (a blind write conflicts only with live holders, L1).
    fn lock_batch(&self, txn: TxnId, batch: &WriteBatch) -> Result<Vec<Held>> {
        let mut held = Vec::with_capacity(batch.ops.len());
        for (tree, key, _) in &batch.ops {
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
    /// borrowed from it (`crate::op`). Returns the timestamp and the trees of `ops`, in order.
    pub(crate) fn commit_group(
        &self,
        txn: TxnId,
        ops: Vec<(Arc<Tree>, Vec<u8>, Op)>,
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
            let end = self.poison_on(self.wal.append(&records))?;
            let ts = Ts(end.0);
            if provisional {
                self.snapshots.status().commit(txn.0, ts);
                self.live.lock().remove(&txn.0);
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
        self.poison_on(self.wal.commit(end))?;
        EngineStats::bump(&self.stats.commits);
        Ok((Ts(end.0), trees))
    }

    /// Wakes the flusher, waits out backpressure and evicts, after writes to these trees.
    pub(crate) fn after_write<'a>(
        &self,
        trees: impl IntoIterator<Item = &'a Arc<Tree>>,
    ) -> Result<()> {
        let mut waited = false;
        for tree in trees {
            if tree.needs_flush() {
                self.work.1.notify_all();
            }
            while tree.needs_backpressure() && !self.shutdown.load(Ordering::Relaxed) {
                self.check_usable()?;
                waited = true;
                let mut g = self.work.0.lock();
                self.work.1.notify_all();
                self.work.1.wait_for(&mut g, Duration::from_millis(50));
            }
            self.poison_on(tree.evict_if_needed())?;
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
        LogRecord::Live {
            next_txn: self.next_txn.load(Ordering::SeqCst),
            txns,
        }
    }
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

pub(crate) fn validate_tree_options(o: &TreeOptions) -> Result<()> {
    if o.fanout < 3 || o.fanout > 1024 {
        return Err(Error::InvalidArgument(format!(
            "fanout {} outside [3, 1024]",
            o.fanout
        )));
    }
    if o.node_size_bytes < 1024
        || o.basement_size_bytes < 128
        || o.basement_size_bytes > o.node_size_bytes
    {
        return Err(Error::InvalidArgument(format!(
            "node size {} and basement size {} must satisfy 128 <= basement <= node and node >= 1024",
            o.node_size_bytes, o.basement_size_bytes
        )));
    }
    Ok(())
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
