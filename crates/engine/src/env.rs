//! `Env`: one open data directory. It composes the pieces: the catalog of trees, one block
//! file and `Tree` per tree, the shared cache budget, the write-ahead log, the background
//! flusher and checkpointer, and recovery at open.
//!
//! The commit path and the state it works on are `EnvInner` (`inner.rs`); this file is the
//! public facade: opening, trees, batches, transactions, checkpoints, counters, closing.

use crate::catalog::{tree_path, TreeEntry};
use crate::counters::EngineCounters;
use crate::handle::{TreeHandle, WriteBatch};
use crate::inner::{EnvHooks, EnvInner};
use crate::tree::Tree;
use crate::txn::Txn;
use crate::{block::BlockFile, EnvOptions, Error, Result, TreeOptions};
use parking_lot::Mutex;
use std::borrow::Cow;
use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;

/// An open environment.
pub struct Env {
    /// The environment opened first; after `reopen`, the newest of its successors serves
    /// (`live`). Its directory and options are every successor's too.
    inner: Arc<EnvInner>,
    /// The background threads of the live environment.
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// Kept for `reopen`, which recovers with the same merge callback and test hooks.
    hooks: EnvHooks,
}

#[cfg(test)]
impl Env {
    /// The log, for tests that write records the way older format versions did.
    pub(crate) fn wal_for_tests(&self) -> &crate::wal::Wal {
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
            hooks.clone(),
        )?);
        let threads = Mutex::new(crate::background::start(&inner));
        Ok(Env {
            inner,
            threads,
            hooks,
        })
    }

    /// The environment serving now: the one opened, or the last one `reopen` recovered.
    fn live(&self) -> Cow<'_, Arc<EnvInner>> {
        match self.inner.successor.get() {
            None => Cow::Borrowed(&self.inner),
            Some(_) => Cow::Owned(self.inner.newest()),
        }
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    #[cfg(test)]
    pub(crate) fn inner_for_tests(&self) -> &EnvInner {
        &self.inner
    }

    /// The options the environment was opened with.
    pub fn options(&self) -> &EnvOptions {
        &self.inner.options
    }

    /// Creates a tree; `None` options take the environment's defaults.
    pub fn create_tree(&self, name: &str, options: Option<TreeOptions>) -> Result<TreeHandle> {
        let env = self.live();
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
        let made = BlockFile::create(
            &path,
            &meta,
            env.options.direct_io,
            env.io_stats.clone(),
            env.faults.clone(),
        )
        .and_then(|file| {
            // R3: the new tree's redo point is the log's end now; nothing before it is its own.
            file.checkpoint_begin();
            let end = env.wal.end_lsn().0;
            env.poison_on(file.checkpoint_end(crate::block::NodeId(0), end, &meta))?;
            Ok(file)
        });
        let file = match made {
            Ok(file) => file,
            Err(e) => {
                // R7: no catalog names the file, so it goes (a restart would delete it): the
                // next tree, which gets the same id, must find the name free.
                let _ = std::fs::remove_file(&path);
                return Err(e);
            }
        };
        let mut next = catalog.clone();
        next.next_tree_id += 1;
        next.trees
            .insert(name.to_owned(), TreeEntry { id, options });
        // A failed replace may have happened or not (the rename is durable only with the
        // directory's fsync): writes stop until a reopen reads the catalog on disk (R7).
        env.poison_on(next.store(&env.dir))?;
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
            env: Arc::clone(&env),
            tree,
        })
    }

    /// Opens an existing tree.
    pub fn open_tree(&self, name: &str) -> Result<TreeHandle> {
        let env = self.live().into_owned();
        let tree = env
            .trees
            .read()
            .get(name)
            .cloned()
            .ok_or_else(|| Error::NoSuchTree(name.to_owned()))?;
        Ok(TreeHandle { env, tree })
    }

    /// Drops a tree: it leaves the catalog durably and its file is unlinked at once.
    pub fn drop_tree(&self, name: &str) -> Result<()> {
        let env = self.live();
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
        // As in `create_tree`: a failed replace leaves the catalog on disk unknown (R7).
        env.poison_on(next.store(&env.dir))?;
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
        self.live().catalog.lock().trees.keys().cloned().collect()
    }

    /// Commits a batch atomically and durably (per the fsync policy). It is a one-statement
    /// transaction: `WriteConflict` if a live transaction holds one of its keys.
    pub fn write(&self, batch: WriteBatch) -> Result<()> {
        self.live().write(batch.ops, batch.counts)
    }

    /// Begins a transaction reading as of the newest commit (snapshot isolation).
    pub fn begin(&self) -> Txn {
        Txn::begin(self.live().into_owned())
    }

    /// A read-only view of every tree as of the newest commit (no locks, not a transaction).
    pub fn read_view(&self) -> crate::ReadView {
        crate::ReadView::new(self.live().into_owned())
    }

    /// Makes every change so far part of a durable checkpoint and trims the log.
    pub fn checkpoint(&self) -> Result<()> {
        self.live().checkpoint()
    }

    /// Pushes every buffered message of every tree down to the leaves, merging and splitting
    /// as it goes (TokuMX's hot optimize). Writers may continue meanwhile.
    pub fn flush_all(&self) -> Result<()> {
        let env = self.live();
        env.check_usable()?;
        let trees: Vec<Arc<Tree>> = env.trees.read().values().cloned().collect();
        for t in trees {
            env.poison_on(t.drain())?;
        }
        Ok(())
    }

    /// Every engine counter.
    pub fn counters(&self) -> EngineCounters {
        let env = self.live();
        let mvcc = crate::counters::MvccGauges {
            active_txns: env.txns.active(),
            open_snapshots: env.snapshots.open_count(),
            oldest_snapshot_age_ms: env.snapshots.oldest_age_ms(),
            lock_entries: env.locks.len() as u64,
            txn_status_entries: env.snapshots.status().len() as u64,
        };
        EngineCounters::collect(env.io_stats.snapshot(), &env.cache, &env.stats, mvcc)
    }

    /// A snapshot of the I/O counters of every file in the environment.
    pub fn io_counters(&self) -> shale_io::IoCounters {
        self.inner.io_stats.snapshot()
    }

    /// Bytes used on disk by tree files and the log.
    pub fn disk_bytes(&self) -> u64 {
        shale_io::dir_disk_bytes(&self.inner.dir)
    }

    /// Why the environment refuses writes (an I/O error, a background thread's panic), or
    /// `None` while it accepts them.
    pub fn failure(&self) -> Option<String> {
        self.live().life.poisoned()
    }

    /// Whether the environment refuses writes (`failure`), in two atomic loads.
    pub fn has_failed(&self) -> bool {
        self.live().life.is_poisoned()
    }

    /// Recovers a failed environment in place, as a restart would: the live environment's
    /// files are recovered into a new one (docs/recovery.md, procedure steps 1-4, R1-R8,
    /// M1) that serves from then on, under the same directory lock. A commit the failed
    /// environment applied but never made durable is not recovered: the log was cut back to
    /// its durable end when its write failed (W11) and tree blocks written after the last
    /// checkpoint are free space (B9). So after a full device is given space again, writes
    /// go on without a restart, and no failed write is ever read.
    ///
    /// Handles made before keep working: a `TreeHandle` finds its tree in the newest
    /// environment by name. Transactions, read views and cursors made before fail or read
    /// the old environment, which is shut down and whose files refuse writes (B8), so the
    /// caller must have none in flight (the database layer holds its DDL lock, kills its
    /// cursors and aborts its transactions first). Does nothing when the environment has
    /// not failed; on an error (recovery failed: the device may still be full) the failed
    /// environment goes on serving reads, and `reopen` may be called again.
    pub fn reopen(&self) -> Result<()> {
        let mut threads = self.threads.lock();
        let failed = self.live().into_owned();
        let Some(reason) = failed.life.poisoned() else {
            return Ok(());
        };
        if !failed.wal.ends_at_durable() {
            return Err(Error::Poisoned(format!(
                "{reason}; the log could not be cut back to its durable end, so only a \
                 restart recovers it"
            )));
        }
        // From here no write of the failed environment reaches a tree file (B8): recovery
        // reads the files' durable checkpoints, which no write ever touches (B5).
        let old_trees: Vec<Arc<Tree>> = failed.trees.read().values().cloned().collect();
        for t in &old_trees {
            t.file().retire();
        }
        let fresh = Arc::new(crate::recovery::reopen(&failed, self.hooks.clone())?);
        let old_threads: Vec<JoinHandle<()>> = threads.drain(..).collect();
        *threads = crate::background::start(&fresh);
        // Under `threads`' lock, so only this call sets it.
        let _ = failed.successor.set(fresh);
        failed.life.shut_down();
        for t in old_threads {
            let _ = t.join();
        }
        failed.trees.write().clear();
        for t in &old_trees {
            t.release_cache();
        }
        tracing::info!(failure = %reason, "environment reopened after a failure");
        Ok(())
    }

    /// Checkpoints, stops the background threads and releases the directory.
    /// Tree handles keep the directory locked until they are dropped; after `close` they
    /// return `Error::Closed`.
    pub fn close(mut self) -> Result<()> {
        let env = self.live().into_owned();
        let result = if !env.life.is_poisoned() {
            env.checkpoint()
        } else {
            Ok(())
        };
        self.stop_threads();
        result
    }

    fn stop_threads(&mut self) {
        self.live().life.shut_down();
        for t in self.threads.get_mut().drain(..) {
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
