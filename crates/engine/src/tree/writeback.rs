//! Evicted dirty nodes written with no tree lock held. Eviction used to encode, compress
//! and write a dirty node (megabytes, milliseconds) under the tree's write lock, so every
//! reader, writer and the flusher of that tree waited for each eviction's I/O. Now eviction
//! takes a dirty node out of the node table under the lock and writes it after releasing
//! the lock (`Tree::write_out`). Measured at mid size this changed no fill's rate (the
//! flusher's own work is what limits a fill: docs/bench/history/
//! 2026-11-27-engine-mid-size-eviction-writes-outside-the-tree-lock.md); it is kept
//! so that no reader or writer waits on an eviction's I/O
//! (checkpoint writes, and the checkpoint image written before a pending node changes,
//! still happen under the lock), whatever the flusher's speed. Until a write out ends, the
//! node's live image on disk is older than the node, and these invariants keep anyone from
//! using it:
//!
//! - **K1** (one home at every moment): a dirty node being evicted leaves the node table and
//!   enters this set in one step under the tree's write lock, and leaves the set only after
//!   its write ended: with its new image live in the block table (success), or back in the
//!   node table, dirty, under the write lock (failure). So a node's newest state is always in
//!   the table, in the set (held by the writing thread), or in its live image.
//! - **K2** (no stale install): a load of a node in the set waits until it leaves (a read
//!   started then would read the image being replaced), and every install of a node read
//!   from disk checks under the write lock that the node is not in the set, besides that
//!   the image it read is still live (B10): a load that looked before the eviction began
//!   may read the old image while the write is under way, when the image is still live.
//! - **K3** (a checkpoint misses no write): `checkpoint_mark` holds the tree's write lock
//!   with the set empty (`Tree::write_state_idle`), so that no write started before the mark (for
//!   the live table only) ends after the checkpoint copied the live table; and
//!   `checkpoint_finish` waits again before ending the checkpoint, so that the pending nodes
//!   evicted since the mark (written for the checkpoint) are in it.
//!
//! Lock order: the tree's state, then this set's mutex; the condition variable is waited
//! on with no tree lock held. Who needs the write lock with the set empty (`checkpoint_mark`
//! for K3, `release_cache`) waits first and then takes the lock and looks again
//! (`Tree::write_state_idle`): a write out begins only under the write lock, so none begins
//! while it is held. Waiting while holding the lock would never end if a write out failed,
//! since a failed one puts its node back under the write lock before it leaves the set (K1).

use crate::block::NodeId;
use parking_lot::{Condvar, Mutex};
use std::collections::HashSet;

/// The nodes being written out by eviction, and a condition variable for their ends.
#[derive(Debug, Default)]
pub(crate) struct Writeback {
    writing: Mutex<HashSet<NodeId>>,
    ended: Condvar,
}

impl Writeback {
    /// Enters `id` (K1: the caller holds the tree's write lock and has just taken the node
    /// out of the table).
    pub(crate) fn begin(&self, id: NodeId) {
        let fresh = self.writing.lock().insert(id);
        assert!(fresh, "node {id:?} written out twice at once");
    }

    /// Removes `id` once its write ended (K1) and wakes whoever waits for it.
    pub(crate) fn end(&self, id: NodeId) {
        self.writing.lock().remove(&id);
        self.ended.notify_all();
    }

    /// Whether `id` is being written out (K2: an install checks it under the write lock).
    pub(crate) fn contains(&self, id: NodeId) -> bool {
        self.writing.lock().contains(&id)
    }

    /// Waits until `id` is not being written out (K2: before a load reads its image).
    pub(crate) fn wait_for(&self, id: NodeId) {
        let mut writing = self.writing.lock();
        while writing.contains(&id) {
            self.ended.wait(&mut writing);
        }
    }

    /// Whether no node is being written out.
    pub(crate) fn is_idle(&self) -> bool {
        self.writing.lock().is_empty()
    }

    /// Waits until no node is being written out (K3).
    pub(crate) fn wait_idle(&self) {
        let mut writing = self.writing.lock();
        while !writing.is_empty() {
            self.ended.wait(&mut writing);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn waiters_wake_when_the_write_ends() {
        let wb = Arc::new(Writeback::default());
        wb.begin(NodeId(7));
        assert!(wb.contains(NodeId(7)));
        wb.wait_for(NodeId(8));
        let other = wb.clone();
        let waiter = std::thread::spawn(move || {
            other.wait_for(NodeId(7));
            other.wait_idle();
            other.contains(NodeId(7))
        });
        std::thread::sleep(Duration::from_millis(20));
        assert!(
            !waiter.is_finished(),
            "a wait ended while the write was under way"
        );
        wb.end(NodeId(7));
        assert!(!waiter.join().expect("waiter"));
    }

    /// K1's failure clause: a write out that fails puts the node back in the table, dirty,
    /// and takes it out of the set, so reads find its newest values (a lookup of a node
    /// missing from the table would load the older image still on disk) and the cache's
    /// charge is what it was.
    #[test]
    fn a_failed_write_out_puts_the_node_back_dirty() {
        use crate::{Env, EnvHooks, EnvOptions, FaultInjector, TreeOptions, WriteBatch};
        let dir = tempfile::tempdir().expect("tempdir");
        let faults = Arc::new(FaultInjector::default());
        let hooks = EnvHooks {
            faults: Some(faults.clone()),
            ..EnvHooks::default()
        };
        let options = EnvOptions {
            cache_bytes: 64 << 20,
            tree_defaults: TreeOptions::tiny(),
            checkpoint_interval: None,
            ..EnvOptions::default()
        };
        let env = Env::open_with(dir.path(), options, hooks).expect("open");
        let t = env.create_tree("t", None).expect("create");
        let write_all = |round: u8| {
            let mut b = WriteBatch::new();
            for i in 0..40u8 {
                b.put(&t, &[b'k', i], &[round; 40]);
            }
            env.write(b).expect("write");
        };
        write_all(0);
        env.checkpoint().expect("checkpoint");
        write_all(1);
        let tree = &t.tree;
        let id = {
            let st = tree.read_state();
            let dirty = st.nodes.iter().find(|(_, n)| n.dirty);
            *dirty.expect("a dirty node after the overwrite").0
        };
        let charged = env.counters().cache_used_bytes;
        let node_bytes = tree.read_state().nodes[&id].mem_bytes();
        faults.fail_next_write();
        assert!(tree.write_out(tree.write_state(), id).is_err());
        assert!(faults.tripped(), "the write out's write failed");
        let st = tree.read_state();
        assert!(st.nodes[&id].dirty, "back in the table, dirty");
        assert!(!tree.writeback.contains(id));
        // Charged as it is now: the write out first dropped the overwritten versions.
        let dropped = node_bytes - st.nodes[&id].mem_bytes();
        drop(st);
        assert_eq!(env.counters().cache_used_bytes, charged - dropped as u64);
        for i in 0..40u8 {
            let got = tree
                .with_read(|t, st| t.lookup(st, &[b'k', i], t.snapshots.visible()))
                .expect("lookup");
            assert_eq!(got, Some(vec![1; 40]), "key {i}");
        }
    }

    /// A write out that fails takes the tree's write lock before it leaves the set (K1), so
    /// whoever waits for the set to empty must not hold that lock while waiting: with the
    /// lock held (as `checkpoint_mark` and `release_cache` did) the two waited for each
    /// other forever.
    #[test]
    fn waiting_for_an_empty_set_leaves_the_write_lock_to_a_failed_write_out() {
        use crate::{Env, EnvOptions, TreeOptions};
        let dir = tempfile::tempdir().expect("tempdir");
        let options = EnvOptions {
            tree_defaults: TreeOptions::tiny(),
            checkpoint_interval: None,
            ..EnvOptions::default()
        };
        let env = Env::open(dir.path(), options).expect("open");
        let t = env.create_tree("t", None).expect("create");
        let tree = &t.tree;
        let id = NodeId(1 << 40);
        tree.writeback.begin(id);
        std::thread::scope(|s| {
            let waiter = s.spawn(|| {
                let _st = tree.write_state_idle();
            });
            std::thread::sleep(Duration::from_millis(50));
            // The failed write out's step: the node back under the write lock.
            let got = tree.state.try_write_for(Duration::from_secs(10)).is_some();
            let went_on = waiter.is_finished();
            tree.writeback.end(id);
            waiter.join().expect("waiter");
            assert!(got, "the waiter held the write lock while it waited");
            assert!(!went_on, "the waiter went on with a write in flight");
        });
        assert!(tree.writeback.is_idle());
    }

    #[test]
    #[should_panic(expected = "written out twice")]
    fn one_node_is_written_out_once_at_a_time() {
        let wb = Writeback::default();
        wb.begin(NodeId(3));
        wb.begin(NodeId(3));
    }
}
