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
use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;

/// An open environment.
pub struct Env {
    inner: Arc<EnvInner>,
    threads: Vec<JoinHandle<()>>,
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
        self.inner.write(batch.ops, batch.counts)
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
            active_txns: self.inner.txns.active(),
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
        let result = if !self.inner.life.is_poisoned() {
            self.inner.checkpoint()
        } else {
            Ok(())
        };
        self.stop_threads();
        result
    }

    fn stop_threads(&mut self) {
        self.inner.life.shut_down();
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
