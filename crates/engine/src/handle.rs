//! `TreeHandle` (one tree of an open environment: reads, single writes, cursors, checks) and
//! `WriteBatch` (changes to any number of trees committed as one). Both reach the
//! environment only through `EnvInner` (`inner.rs`), so transactions and read views can use
//! them without importing the facade (`env.rs`).

use crate::inner::{EnvInner, KeyOp};
use crate::tree::Tree;
use crate::vocab::Op;
use crate::{Result, TreeOptions};
use std::sync::Arc;

/// A handle to one tree of an environment.
#[derive(Clone)]
pub struct TreeHandle {
    pub(crate) env: Arc<EnvInner>,
    pub(crate) tree: Arc<Tree>,
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
        self.env.write(b.ops, b.counts)
    }
    pub fn delete(&self, key: &[u8]) -> Result<()> {
        let mut b = WriteBatch::new();
        b.delete(self, key);
        self.env.write(b.ops, b.counts)
    }
    /// Read-free update: `payload` is applied by the merge callback when it reaches the leaf.
    pub fn update(&self, key: &[u8], payload: &[u8]) -> Result<()> {
        let mut b = WriteBatch::new();
        b.update(self, key, payload);
        self.env.write(b.ops, b.counts)
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

/// Changes to any number of trees, committed atomically (all or nothing after a crash).
#[derive(Debug, Clone, Default)]
pub struct WriteBatch {
    pub(crate) ops: Vec<KeyOp>,
    pub(crate) counts: Vec<(Arc<Tree>, i64)>,
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
