//! Promotion: a commit's run of messages that comes after the last key of a cached leaf,
//! with no message for its keys in the buffers on the way down, is applied to the leaf at once
//! instead of waiting in the root's buffer to be flushed down level by level. This is what
//! a sequential fill does with every batch (PerconaFT injects such runs into its rightmost
//! leaf for the same reason): each message is copied and applied once, not once per level,
//! and the internal nodes above the append point stay small.
//!
//! Invariants:
//! - **A1** (why it is the same tree): a key's messages wait only in the buffers on its
//!   path from the root to its leaf. When none of those buffers holds a message for a key
//!   between the run's first and last, no message for any key of the run waits above the
//!   leaf, so applying the run there, in MSN order, gives every key of the run what pushing
//!   it into the root's buffer and flushing it down at once would (`flush.rs`'s
//!   `flush_child`, which applies with the same `apply_to_leaf`); messages for other keys
//!   stay where they were, and a key's versions never depend on another key's messages.
//!   (Requiring empty buffers instead let one buffered overwrite on the path stop every
//!   promotion below it until the flusher came by.)
//! - **A2** (only appends): the run's first key is after the leaf's last key. Under random
//!   keys the buffers are where the writes should wait (a leaf changed by every small run
//!   would be written for every few messages); appends are what the buffers cannot batch
//!   any better.
//! - **A3** (nothing stalls once anything changed): the whole path is checked to be cached
//!   and fully loaded before the leaf changes, and the splits after it need nothing else;
//!   a caller that retries a stalled step would otherwise apply the run twice.

use super::buffer::MsgRef;
use super::entry::Applied;
use super::flush::apply_to_leaf;
use super::node::NodeBody;
use super::{Stall, Step, Tree, TreeState};
use crate::block::NodeId;
use std::sync::atomic::Ordering;

impl Tree {
    /// Applies `run` (keys in order, each key's messages in MSN order) straight to the leaf
    /// it falls in when A1 and A2 hold, then splits what grew too big on the way back up.
    /// Returns false, changing nothing, when the run must go into the root's buffer.
    pub(super) fn promote_run<'k>(
        &self,
        st: &mut TreeState,
        run: impl Iterator<Item = (&'k [u8], MsgRef<'k>)> + Clone,
    ) -> Step<bool> {
        let Some(first) = run.clone().next().map(|(k, _)| k) else {
            return Ok(false);
        };
        let last = run.clone().last().map_or(first, |(k, _)| k);
        let Some((path, leaf)) = promotion_path(st, first, last) else {
            return Ok(false);
        };
        // A3: every node on the path is loaded, so this can only write a checkpoint image.
        self.prepare_modify(st, leaf)?;
        let merge = self.merge.clone();
        let horizon = self.snapshots.horizon();
        let status = self.snapshots.status();
        let basement_bytes = self.options.basement_size_bytes;
        let cache = self.cache.clone();
        let mut moved = 0u64;
        let applied = st.modify(leaf, &cache, |n| {
            n.dirty = true;
            n.touch();
            n.note_append(Some(first));
            let NodeBody::Leaf(l) = &mut n.body else {
                unreachable!("promotion_path ends at a leaf");
            };
            let mut applied = Applied::default();
            for (key, m) in run {
                applied.add(apply_to_leaf(l, &*merge, key, m, horizon, status));
                moved += 1;
            }
            l.recut_oversized(basement_bytes);
            applied
        });
        self.stats
            .count_versions(applied.retained, applied.collected);
        self.stats
            .messages_promoted
            .fetch_add(moved, Ordering::Relaxed);
        self.split_path(st, &path)?;
        Ok(true)
    }

    /// Splits, bottom-up, each node on `path` that the promotion made too big (a leaf past
    /// the node size, then a parent past the fanout). The root's own split is left to the
    /// caller's `fix_root`. A3: every node here is loaded (`after_change`).
    fn split_path(&self, st: &mut TreeState, path: &[(NodeId, usize)]) -> Step<()> {
        for &(parent, c) in path.iter().rev() {
            let NodeBody::Internal(p) = &st.nodes[&parent].body else {
                unreachable!("a path's parents are internal");
            };
            let child = p.children[c];
            if st.node(child).is_some_and(|n| self.too_big(&n.body)) {
                after_change(self.split_child(st, parent, c))?;
            }
        }
        Ok(())
    }
}

/// A step taken after the leaf changed (a split, the root's fix): A3 says it cannot stall
/// on a load, and were it to, the node waits for the flusher's next walk through it rather
/// than the caller retrying, which would apply the run twice. Errors pass through.
pub(super) fn after_change(step: Step<()>) -> Step<()> {
    match step {
        Err(Stall::Load(_)) => Ok(()),
        other => other,
    }
}

/// The path of a promotion (each internal node with the child it goes through) and the
/// leaf at its end, if A1-A3 allow one for a run from `first` to `last`: every node on
/// the way is cached and fully loaded, the run stays in one child at each level, that
/// child's buffer holds no message for a key in `first..=last`, and the leaf's last key is
/// before `first`. `None` when the root is a leaf (the caller applies to it directly).
fn promotion_path(
    st: &TreeState,
    first: &[u8],
    last: &[u8],
) -> Option<(Vec<(NodeId, usize)>, NodeId)> {
    let mut path = Vec::new();
    let mut id = st.root;
    loop {
        let node = st.node(id).filter(|n| n.body.all_loaded())?;
        match &node.body {
            NodeBody::Internal(n) => {
                let c = n.child_index(first);
                let waiting = n.buf(c).range(Some(first), None).next();
                if n.child_index(last) != c || waiting.is_some_and(|(k, _)| k <= last) {
                    return None;
                }
                path.push((id, c));
                id = n.children[c];
            }
            NodeBody::Leaf(l) => {
                let appends = l.last_key().is_none_or(|k| first > k);
                return (!path.is_empty() && appends).then_some((path, id));
            }
        }
    }
}
