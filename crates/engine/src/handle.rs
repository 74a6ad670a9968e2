//! `TreeHandle` (one tree of an open environment: reads, single writes, cursors, checks) and
//! `WriteBatch` (changes to any number of trees committed as one). Both reach the
//! environment only through `EnvInner` (`inner.rs`), so transactions and read views can use
//! them without importing the facade (`env.rs`).

use crate::inner::{EnvInner, KeyOp};
use crate::tree::Tree;
use crate::vocab::Op;
use crate::{Error, Result, TreeOptions};
use std::borrow::Cow;
use std::sync::Arc;

/// A handle to one tree of an environment.
#[derive(Clone)]
pub struct TreeHandle {
    pub(crate) env: Arc<EnvInner>,
    pub(crate) tree: Arc<Tree>,
}

impl TreeHandle {
    /// This handle in the environment serving now: itself, unless the environment was
    /// reopened since it was made (`Env::reopen`); then the tree of the same name there.
    /// The check is one atomic load while no reopen has happened.
    fn live(&self) -> Cow<'_, TreeHandle> {
        if self.env.successor.get().is_none() {
            return Cow::Borrowed(self);
        }
        let env = self.env.newest();
        let tree = env.trees.read().get(self.tree.name()).cloned();
        match tree {
            Some(tree) => Cow::Owned(TreeHandle { env, tree }),
            // Dropped since: the old environment answers, shut down.
            None => Cow::Borrowed(self),
        }
    }

    /// The tree this handle names in `env`, a transaction's or read view's environment:
    /// the handle's own unless one of them was made before a reopen and the other after.
    pub(crate) fn tree_in(&self, env: &Arc<EnvInner>) -> Result<Cow<'_, Arc<Tree>>> {
        if Arc::ptr_eq(&self.env, env) {
            return Ok(Cow::Borrowed(&self.tree));
        }
        let tree = env.trees.read().get(self.tree.name()).cloned();
        match tree {
            Some(tree) => Ok(Cow::Owned(tree)),
            None => {
                env.check_usable()?;
                Err(Error::NoSuchTree(self.tree.name().to_owned()))
            }
        }
    }

    /// The tree's name.
    pub fn name(&self) -> &str {
        self.tree.name()
    }
    /// The tree's options.
    pub fn options(&self) -> &TreeOptions {
        self.tree.options()
    }
    /// The newest committed value of `key`, if any.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.live().tree.get(key)
    }
    /// Writes `key` = `value` as a batch of one.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let h = self.live();
        let mut b = WriteBatch::new();
        b.put(&h, key, value);
        h.env.write(b.ops, b.counts)
    }
    /// Deletes `key` as a batch of one.
    pub fn delete(&self, key: &[u8]) -> Result<()> {
        let h = self.live();
        let mut b = WriteBatch::new();
        b.delete(&h, key);
        h.env.write(b.ops, b.counts)
    }
    /// Read-free update: `payload` is applied by the merge callback when it reaches the leaf.
    pub fn update(&self, key: &[u8], payload: &[u8]) -> Result<()> {
        let h = self.live();
        let mut b = WriteBatch::new();
        b.update(&h, key, payload);
        h.env.write(b.ops, b.counts)
    }
    /// A cursor reading as of the newest commit; it keeps that snapshot (and the versions it
    /// needs) for as long as it lives.
    pub fn cursor(&self) -> crate::tree::Cursor {
        let h = self.live();
        let snapshot = Arc::new(h.env.snapshots.register());
        h.tree.cursor(snapshot)
    }
    /// Checks every invariant of the tree and its file; returns its shape (entry count,
    /// height, node counts, buffered messages, sizes). Holds off checkpoints while it runs;
    /// writers may continue.
    pub fn verify(&self) -> Result<crate::TreeShape> {
        let h = self.live();
        let _no_checkpoint = h.env.checkpoint_lock.lock();
        h.tree.verify()
    }
    /// The tree's entry count as its writers keep it (`WriteBatch::add_count`,
    /// `Txn::add_count`), as of the newest commit: exact through commits, aborts, checkpoints
    /// and recovery, and O(1). The engine does not know whether a blind put inserts or
    /// overwrites, so the caller (which does) says how the count changes.
    pub fn count(&self) -> i64 {
        self.live().tree.count()
    }
    /// What the tree's cached nodes hold, by kind (`tree/cache_mix.rs`).
    pub fn cache_mix(&self) -> crate::CacheMix {
        self.live().tree.cache_mix()
    }
    /// Bytes of the tree's file.
    pub fn file_bytes(&self) -> u64 {
        self.live().tree.file().file_len()
    }
    /// Raw and stored bytes of the tree's written nodes, from their headers (one small read
    /// per node; `tree_space.rs`). Nodes changed since their last write count as written.
    pub fn space(&self) -> Result<crate::TreeSpace> {
        crate::tree_space::measure(self.live().tree.file())
    }
}

/// Changes to any number of trees, committed atomically (all or nothing after a crash).
#[derive(Debug, Clone, Default)]
pub struct WriteBatch {
    pub(crate) ops: Vec<KeyOp>,
    pub(crate) counts: Vec<(Arc<Tree>, i64)>,
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }
    /// Adds a put of `key` = `value` in `tree`.
    pub fn put(&mut self, tree: &TreeHandle, key: &[u8], value: &[u8]) {
        self.push(tree, key, Op::Put(value.to_vec()));
    }
    /// Adds a delete of `key` in `tree`.
    pub fn delete(&mut self, tree: &TreeHandle, key: &[u8]) {
        self.push(tree, key, Op::Delete);
    }
    /// Adds an update of `key` in `tree`, applied by the tree's merge callback.
    pub fn update(&mut self, tree: &TreeHandle, key: &[u8], payload: &[u8]) {
        self.push(tree, key, Op::Update(payload.to_vec()));
    }
    fn push(&mut self, tree: &TreeHandle, key: &[u8], op: Op) {
        self.ops.push((tree.live().tree.clone(), key.to_vec(), op));
    }
    /// Changes the tree's entry count by `delta` with the batch (see `TreeHandle::count`).
    pub fn add_count(&mut self, tree: &TreeHandle, delta: i64) {
        self.counts.push((tree.live().tree.clone(), delta));
    }
    /// Key operations in the batch.
    pub fn len(&self) -> usize {
        self.ops.len()
    }
    /// True when the batch holds no operation and no count change.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty() && self.counts.is_empty()
    }
}
