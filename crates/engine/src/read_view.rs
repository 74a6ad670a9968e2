//! Read views: a registered snapshot that reads any number of trees as of one commit, for
//! callers that only read (a query that scans an index tree and fetches from a document
//! tree must see both as of the same moment). Unlike a `Txn` it takes no locks, has no write
//! set and is not counted as a transaction; like a transaction's snapshot it keeps the
//! versions it needs for as long as it lives (M2), and `open_snapshots` shows it.

use crate::inner::EnvInner;
use crate::mvcc::SnapshotGuard;
use crate::{Cursor, Result, TreeHandle};
use std::sync::Arc;

/// A consistent read-only view of every tree as of the newest commit when it was made.
#[derive(Clone)]
pub struct ReadView {
    env: Arc<EnvInner>,
    snapshot: Arc<SnapshotGuard>,
}

impl std::fmt::Debug for ReadView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadView")
            .field("snapshot", &self.snapshot.ts())
            .finish()
    }
}

impl ReadView {
    pub(crate) fn new(env: Arc<EnvInner>) -> ReadView {
        let snapshot = Arc::new(env.snapshots.register());
        ReadView { env, snapshot }
    }

    /// The commit timestamp this view reads as of.
    pub fn snapshot_ts(&self) -> u64 {
        self.snapshot.ts().0
    }

    /// The value of `key` in `tree` as of the view.
    pub fn get(&self, tree: &TreeHandle, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.env.check_open()?;
        tree.tree_in(&self.env)?.get_at(key, &self.snapshot)
    }

    /// An ordered cursor over `tree` as of the view; it shares the view's snapshot.
    pub fn cursor(&self, tree: &TreeHandle) -> Cursor {
        // A handle made in another environment (`Env::reopen`) reads this view's tree.
        let own = tree.tree_in(&self.env);
        own.as_deref()
            .unwrap_or(&tree.tree)
            .cursor(self.snapshot.clone())
    }
}

#[cfg(test)]
mod tests {
    use crate::{Env, EnvOptions, TreeOptions};

    #[test]
    fn a_view_reads_two_trees_as_of_one_moment() {
        let dir = tempfile::tempdir().expect("tempdir");
        let env = Env::open(dir.path(), EnvOptions::default()).expect("open");
        let a = env.create_tree("a", Some(TreeOptions::tiny())).expect("a");
        let b = env.create_tree("b", Some(TreeOptions::tiny())).expect("b");
        a.put(b"k", b"1").expect("put");
        b.put(b"k", b"1").expect("put");
        let view = env.read_view();
        let mut batch = crate::WriteBatch::new();
        batch.put(&a, b"k", b"2");
        batch.put(&b, b"k", b"2");
        env.write(batch).expect("write");
        assert_eq!(view.get(&a, b"k").expect("get").as_deref(), Some(&b"1"[..]));
        let mut c = view.cursor(&b);
        c.seek_to_first().expect("seek");
        assert_eq!(c.entry(), Some((&b"k"[..], &b"1"[..])));
        assert_eq!(env.counters().open_snapshots, 1);
        drop(c);
        drop(view);
        assert_eq!(env.counters().open_snapshots, 0);
        assert_eq!(a.get(b"k").expect("get").as_deref(), Some(&b"2"[..]));
    }
}
