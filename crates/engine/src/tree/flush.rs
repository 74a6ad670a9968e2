//! Changing the tree under the exclusive lock: injecting a message at the root, flushing the
//! heaviest buffer of an over-full node one level down, applying messages at leaves, and
//! keeping the shape: leaves and internal nodes split when too big and merge with a sibling
//! when too small; the root grows and shrinks a level as needed.
//!
//! Every mutation first calls `prepare_modify`, which writes a node's checkpoint image if the
//! running checkpoint still needs it (recovery invariant R4 in docs/recovery.md).

use super::buffer::MsgRef;
use super::entry::Applied;
use super::evict::AfterWrite;
use super::msg::{self, MsgBuffer, Msn, OpRef};
use super::node::{Basement, Internal, Leaf, Node, NodeBody};
use super::{Load, Stall, Step, Tree, TreeState};
use crate::block::NodeId;
use crate::counters::EngineStats;
use crate::mvcc::TxnStatus;
use crate::vocab::Ts;
use crate::Category;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

impl Tree {
    /// Adds a commit's changes to this tree at an internal root, all stamped `ts`: each
    /// child's share goes into its buffer as one sorted run (`MsgBuffer::push_run`), so a
    /// batch costs one pass over each buffer it touches, not one insertion per change; a
    /// share that appends to a cached leaf, with no message for its keys waiting above it,
    /// goes straight to that leaf (`promote.rs`). MSNs follow the batch's order, and the
    /// sort is stable, so one key's changes keep it. Returns false, changing nothing, when
    /// the root is a leaf (the caller injects one by one then).
    pub(crate) fn inject_run(
        &self,
        st: &mut TreeState,
        ops: &[(&[u8], OpRef<'_>)],
        ts: Ts,
    ) -> Step<bool> {
        let root = st.root;
        self.prepare_modify(st, root)?;
        if !matches!(st.nodes[&root].body, NodeBody::Internal(_)) {
            return Ok(false);
        }
        let first = st.next_msn;
        st.next_msn += ops.len() as u64;
        let mut order: Vec<usize> = (0..ops.len()).collect();
        order.sort_by_key(|&i| ops[i].0);
        for (_, op) in ops {
            EngineStats::bump(&self.stats.messages_injected);
            if matches!(op, OpRef::Abort) {
                EngineStats::bump(&self.stats.abort_messages);
            }
        }
        let msg = |i: usize| {
            let (key, op) = ops[i];
            let m = MsgRef {
                msn: Msn(first + i as u64),
                ts,
                op,
            };
            (key, m)
        };
        // Each child's share of the batch, by its range in `order`: promoted where it can
        // be (a promotion may split the root's children, so each share's child is looked
        // up again below); the rest go into the root's buffers in one change of the root.
        // Nothing here stalls (A3), so a retry never sees part of the batch applied.
        let mut buffered = Vec::new();
        let mut promoted = false;
        let mut at = 0;
        while at < order.len() {
            let int = internal(st, root);
            let c = int.child_index(ops[order[at]].0);
            let hi = int.pivots.get(c);
            let len = order[at..]
                .iter()
                .take_while(|&&j| hi.is_none_or(|p| ops[j].0 < p.as_slice()))
                .count();
            let share = at..at + len;
            if self.promote_run(st, order[share.clone()].iter().map(|&j| msg(j)))? {
                promoted = true;
            } else {
                buffered.push(share);
            }
            at += len;
        }
        let cache = self.cache.clone();
        if !buffered.is_empty() {
            st.modify(root, &cache, |n| {
                n.dirty = true;
                n.touch();
                let int = internal_mut(n);
                for share in buffered {
                    let c = int.child_index(ops[order[share.start]].0);
                    int.buf_mut(c)
                        .push_run(order[share].iter().map(|&j| msg(j)));
                }
            });
        }
        if promoted {
            // The root's children may now be past the fanout.
            super::promote::after_change(self.fix_root(st))?;
        }
        Ok(true)
    }

    /// Adds one change at the root, stamped with the timestamp of the commit that sent it or
    /// with its transaction's provisional stamp.
    pub(crate) fn inject(&self, st: &mut TreeState, key: &[u8], ts: Ts, op: OpRef<'_>) -> Step<()> {
        let root = st.root;
        self.prepare_modify(st, root)?;
        let msn = Tree::next_msn(st);
        let cache = self.cache.clone();
        let merge = self.merge.clone();
        let horizon = self.snapshots.horizon();
        let basement_bytes = self.options.basement_size_bytes;
        let msg = MsgRef { msn, ts, op };
        EngineStats::bump(&self.stats.messages_injected);
        if matches!(op, OpRef::Abort) {
            EngineStats::bump(&self.stats.abort_messages);
        }
        let status = self.snapshots.status();
        let applied = st.modify(root, &cache, |n| {
            n.dirty = true;
            n.touch();
            match &mut n.body {
                NodeBody::Internal(int) => {
                    let c = int.child_index(key);
                    int.buf_mut(c).push(key, msg);
                    None
                }
                NodeBody::Leaf(l) => {
                    let applied = apply_to_leaf(l, &*merge, key, msg, horizon, status);
                    l.recut_oversized(basement_bytes);
                    Some(applied)
                }
            }
        });
        if let Some(applied) = applied {
            self.stats
                .count_versions(applied.retained, applied.collected);
            self.fix_root(st)?;
        }
        Ok(())
    }

    /// What the flusher should work on next: the lowest remembered over-full node, else the
    /// root if its buffers are over the node size, else nothing. Remembered nodes go first,
    /// so the root takes in no more while the levels below it are over their size.
    pub(crate) fn next_flush(&self, st: &mut TreeState) -> Option<FlushTarget> {
        let lowest = st
            .overfull
            .iter()
            .min_by_key(|(id, (height, _))| (*height, **id))
            .map(|(id, _)| *id);
        if let Some(id) = lowest {
            #[allow(
                clippy::expect_used,
                reason = "just found in this map, under the same lock"
            )]
            let (height, key) = st.overfull.remove(&id).expect("just found");
            return Some(FlushTarget::Remembered { height, key });
        }
        match st.node(st.root).map(|n| &n.body) {
            Some(NodeBody::Internal(n)) if n.buffer_bytes() > self.options.node_size_bytes => {
                Some(FlushTarget::Root)
            }
            _ => None,
        }
    }

    /// Does one unit of flushing: walks from the root to the target, splitting or merging
    /// the children it descends into, and if the target is over its size flushes downwards
    /// from it (`flush_down`). Over-full nodes passed on the way are left to their own turn
    /// (they are remembered): flushing them here would pour more into nodes below them
    /// that are waiting for their turn, which is how buffers grew to 30x the node size.
    /// Holds (pins, recorded in `held`) every node it walks through until the unit ends:
    /// the loads of its later steps make room by evicting, and a cache of a few nodes would
    /// otherwise evict the path just walked and have the retry read it again. Below the
    /// target it holds at most one child (and a sibling for a merge).
    pub(crate) fn flush_step(
        &self,
        st: &mut TreeState,
        target: &FlushTarget,
        held: &mut Vec<NodeId>,
    ) -> Step<()> {
        let (height, key): (u32, &[u8]) = match target {
            FlushTarget::Root => (u32::MAX, &[]),
            FlushTarget::Remembered { height, key } => (*height, key),
        };
        let mut id = st.root;
        loop {
            self.ensure_full(st, id)?;
            self.pin(id, held);
            let h = match &st.nodes[&id].body {
                NodeBody::Leaf(_) => break,
                NodeBody::Internal(n) => n.height,
            };
            if h <= height {
                self.flush_down(st, id, held)?;
                break;
            }
            let c = internal(st, id).child_index(key);
            self.rebalance_child(st, id, c)?;
            let c = internal(st, id).child_index(key);
            id = internal(st, id).children[c];
        }
        self.fix_root(st)
    }

    /// Flushes the heaviest buffer of over-full internal node `id` one level down, and
    /// follows the messages: while the child that took them is an internal node over its
    /// size and the child its heaviest buffer goes to is already loaded, flushes that buffer
    /// in turn, so a path is drained in one unit where the cache holds it. A unit loads at
    /// most the node and one child below its walk (each load is pinned until the unit ends).
    /// A node left over-full is remembered.
    ///
    /// Why sizes stay bounded: the flusher takes the lowest remembered node first and the
    /// root only when nothing is remembered, so a node takes in a parent's buffer only while
    /// it is at most its size. A node therefore holds at most its size plus one buffer of
    /// its parent: about twice the node size under random keys, and `height + 2` node sizes
    /// in the worst case (sequential keys, every message in one buffer at every level).
    fn flush_down(&self, st: &mut TreeState, mut id: NodeId, held: &mut Vec<NodeId>) -> Step<()> {
        let mut first = true;
        loop {
            self.ensure_full(st, id)?;
            self.pin(id, held);
            let c = match st.node(id).map(|n| &n.body) {
                Some(NodeBody::Internal(n)) if n.buffer_bytes() > self.options.node_size_bytes => {
                    n.heaviest_child()
                }
                _ => {
                    st.overfull.remove(&id);
                    return Ok(());
                }
            };
            if !first && !is_loaded(st, internal(st, id).children[c]) {
                // Following on would load (and pin) a third node in this unit; the node is
                // remembered and gets a unit of its own.
                return Ok(());
            }
            self.flush_child(st, id, c)?;
            self.rebalance_child(st, id, c)?;
            self.remember_if_overfull(st, id);
            let p = internal(st, id);
            id = p.children[c.min(p.children.len() - 1)];
            first = false;
        }
    }

    /// Remembers internal node `id` (by its height and the first key of its heaviest buffer)
    /// if it is over its size, so that the flusher walks back to it; forgets it otherwise.
    fn remember_if_overfull(&self, st: &mut TreeState, id: NodeId) {
        let entry = match st.node(id).map(|n| &n.body) {
            Some(NodeBody::Internal(n)) if n.buffer_bytes() > self.options.node_size_bytes => n
                .buf(n.heaviest_child())
                .iter()
                .next()
                .map(|(k, _)| (n.height, k.to_vec())),
            _ => None,
        };
        match entry {
            Some(e) => {
                st.overfull.insert(id, e);
            }
            None => {
                st.overfull.remove(&id);
            }
        }
    }

    /// Hot optimize, one step: flushes every buffer on the path from the root to the leaf
    /// holding `key`, rebalances that path bottom-up, and returns where the next step starts
    /// (the leaf's upper bound), `None` after the last leaf. Visiting leaves in key order, the
    /// first leaf under each buffer's child empties that buffer, so every message ends in a
    /// leaf while only one path (and a sibling) is ever needed in the cache.
    pub(crate) fn drain_path(&self, st: &mut TreeState, key: &[u8]) -> Step<Option<Vec<u8>>> {
        let mut path = Vec::new();
        let mut hi: Option<Vec<u8>> = None;
        let mut id = st.root;
        loop {
            self.ensure_full(st, id)?;
            let (c, bound, pending) = match &st.nodes[&id].body {
                NodeBody::Leaf(_) => break,
                NodeBody::Internal(n) => {
                    let c = n.child_index(key);
                    (c, n.pivots.get(c).cloned(), !n.buf(c).is_empty())
                }
            };
            if pending {
                self.flush_child(st, id, c)?;
            }
            if bound.is_some() {
                hi = bound;
            }
            path.push((id, c));
            id = internal(st, id).children[c];
        }
        for (parent, c) in path.into_iter().rev() {
            if c < internal(st, parent).children.len() {
                self.rebalance_child(st, parent, c)?;
            }
        }
        Ok(hi)
    }

    /// Moves buffer `c` of internal node `id` into child `c`, a piece of about
    /// `flush_piece_bytes` at a time: messages between the two nodes are charged to
    /// neither, so moving a whole buffer at once held up to a node's worth of memory outside
    /// the cache budget (the largest uncharged allocation during sequential fills).
    fn flush_child(&self, st: &mut TreeState, id: NodeId, c: usize) -> Step<()> {
        let child = internal(st, id).children[c];
        self.prepare_modify(st, id)?;
        self.prepare_modify(st, child)?;
        let cache = self.cache.clone();
        let merge = self.merge.clone();
        let horizon = self.snapshots.horizon();
        let basement_bytes = self.options.basement_size_bytes;
        let piece_bytes = flush_piece_bytes(self.options.node_size_bytes, basement_bytes);
        let mut moved = 0u64;
        loop {
            let msgs = st.modify(id, &cache, |n| {
                n.dirty = true;
                internal_mut(n).buf_mut(c).take_first(piece_bytes)
            });
            if msgs.is_empty() {
                break;
            }
            moved += msgs.len() as u64;
            let applied = st.modify(child, &cache, |n| {
                n.dirty = true;
                n.touch();
                n.note_append(msgs.first_key());
                push_down(
                    &mut n.body,
                    &*merge,
                    &msgs,
                    horizon,
                    self.snapshots.status(),
                )
            });
            self.stats
                .count_versions(applied.retained, applied.collected);
        }
        st.modify(child, &cache, |n| {
            if let NodeBody::Leaf(l) = &mut n.body {
                l.recut_oversized(basement_bytes);
            }
        });
        // Remember an over-full child by a key in its range: the flusher walks to it later;
        // and forget the parent if this emptied it below its size (hot optimize drains
        // nodes the flusher remembered: a stale entry sent the flusher walking to them
        // through the root, loading it whole).
        self.remember_if_overfull(st, child);
        self.remember_if_overfull(st, id);
        EngineStats::bump(&self.stats.flushes);
        self.stats
            .messages_flushed
            .fetch_add(moved, Ordering::Relaxed);
        Ok(())
    }

    /// Splits or merges child `c` of `parent` if its size calls for it.
    fn rebalance_child(&self, st: &mut TreeState, parent: NodeId, c: usize) -> Step<()> {
        let child = internal(st, parent).children[c];
        self.ensure_full(st, child)?;
        let o = &self.options;
        let body = &st.nodes[&child].body;
        let too_small = match body {
            NodeBody::Leaf(l) => l.loaded_bytes() < o.node_size_bytes / 4,
            NodeBody::Internal(n) => n.children.len() < (o.fanout / 4).max(2),
        };
        if self.too_big(body) {
            self.split_child(st, parent, c)
        } else if too_small && internal(st, parent).children.len() > 1 {
            self.merge_child(st, parent, c)
        } else {
            Ok(())
        }
    }

    /// Whether a (fully loaded) node should split: a leaf past the node size with at least
    /// two entries, an internal node past the fanout.
    pub(super) fn too_big(&self, body: &NodeBody) -> bool {
        let o = &self.options;
        match body {
            NodeBody::Leaf(l) => {
                l.loaded_bytes() > o.node_size_bytes
                    && l.basements.iter().flatten().map(|b| b.len()).sum::<usize>() >= 2
            }
            NodeBody::Internal(n) => n.children.len() > o.fanout,
        }
    }

    /// Splits child `c` of `parent` into as many nodes as its size needs.
    pub(super) fn split_child(&self, st: &mut TreeState, parent: NodeId, c: usize) -> Step<()> {
        let child = internal(st, parent).children[c];
        self.prepare_modify(st, parent)?;
        self.prepare_modify(st, child)?;
        let cache = self.cache.clone();
        #[allow(clippy::expect_used, reason = "loaded and pinned by this flush")]
        let node = st.remove_node(child, &cache).expect("child is cached");
        let appends = node.appends;
        let right_edge = appends >= SEQUENTIAL_FLUSHES;
        let full_cuts = match &node.body {
            NodeBody::Leaf(l) if right_edge => full_leaf_cuts(l, self.options.node_size_bytes),
            _ => None,
        };
        let (first, rest) = match (node.body, full_cuts) {
            (NodeBody::Leaf(l), Some(cuts)) => {
                EngineStats::bump(&self.stats.leaf_splits);
                split_leaf_at_basements(l, &cuts)
            }
            (NodeBody::Leaf(l), None) => {
                EngineStats::bump(&self.stats.leaf_splits);
                split_leaf(
                    l,
                    self.options.node_size_bytes / 2,
                    self.options.basement_size_bytes,
                )
            }
            (NodeBody::Internal(n), _) => {
                EngineStats::bump(&self.stats.internal_splits);
                split_internal(n)
            }
        };
        st.insert_node(child, Node::new(first, true), &cache);
        let pieces = rest.len();
        for (at, (pivot, piece)) in (c..).zip(rest) {
            let id = self.file.allocate_node_id();
            let mut node = Node::new(piece, true);
            if at + 1 == c + pieces {
                // The last piece keeps the node's last key, so the appends counted so far
                // are its own (an even split of a leaf that has not yet taken
                // `SEQUENTIAL_FLUSHES` appends keeps counting: a promoted batch can be a
                // good part of a small node, and the count would never get there).
                node.appends = appends;
            }
            st.insert_node(id, node, &cache);
            st.modify(parent, &cache, |n| {
                n.dirty = true;
                let p = internal_mut(n);
                let upper = p.buf_mut(at).split_off(&pivot);
                p.pivots.insert(at, pivot);
                p.children.insert(at + 1, id);
                p.buffers.insert(at + 1, Some(upper));
            });
        }
        Ok(())
    }

    /// Merges child `c` with a neighbour when the two fit in one node.
    #[allow(
        clippy::expect_used,
        reason = "loaded and pinned by this flush; a changed node is fully loaded (N3)"
    )]
    fn merge_child(&self, st: &mut TreeState, parent: NodeId, c: usize) -> Step<()> {
        let n_children = internal(st, parent).children.len();
        let left_idx = if c + 1 < n_children { c } else { c - 1 };
        let (left, right) = {
            let p = internal(st, parent);
            (p.children[left_idx], p.children[left_idx + 1])
        };
        self.ensure_full(st, left)?;
        self.ensure_full(st, right)?;
        let fits = match (&st.nodes[&left].body, &st.nodes[&right].body) {
            (NodeBody::Leaf(a), NodeBody::Leaf(b)) => {
                a.loaded_bytes() + b.loaded_bytes() <= self.options.node_size_bytes
            }
            (NodeBody::Internal(a), NodeBody::Internal(b)) => {
                a.children.len() + b.children.len() <= self.options.fanout
            }
            _ => false,
        };
        if !fits {
            return Ok(());
        }
        self.prepare_modify(st, parent)?;
        self.prepare_modify(st, left)?;
        self.prepare_modify(st, right)?;
        let cache = self.cache.clone();
        let pivot = st.modify(parent, &cache, |n| {
            n.dirty = true;
            let p = internal_mut(n);
            let pivot = p.pivots.remove(left_idx);
            p.children.remove(left_idx + 1);
            let upper = p
                .buffers
                .remove(left_idx + 1)
                .expect("a changed node is fully loaded");
            p.buf_mut(left_idx).absorb(upper);
            pivot
        });
        let right_body = st
            .remove_node(right, &cache)
            .expect("right sibling is cached")
            .body;
        self.file.free_node(right);
        let basement_bytes = self.options.basement_size_bytes;
        let stats = self.stats.clone();
        st.modify(left, &cache, |n| {
            n.dirty = true;
            match (&mut n.body, right_body) {
                (NodeBody::Leaf(a), NodeBody::Leaf(b)) => {
                    EngineStats::bump(&stats.leaf_merges);
                    let mut all = std::mem::replace(a, Leaf::empty()).into_entries();
                    all.append(&mut b.into_entries());
                    *a = Leaf::from_entries(all, basement_bytes);
                }
                (NodeBody::Internal(a), NodeBody::Internal(b)) => {
                    EngineStats::bump(&stats.internal_merges);
                    a.pivots.push(pivot);
                    a.pivots.extend(b.pivots);
                    a.children.extend(b.children);
                    a.buffers.extend(b.buffers);
                    a.parts.clear();
                }
                _ => unreachable!("siblings have the same height"),
            }
        });
        Ok(())
    }

    /// Grows the root a level when it must split, shrinks it when it has one child left.
    pub(crate) fn fix_root(&self, st: &mut TreeState) -> Step<()> {
        for _ in 0..64 {
            let root = st.root;
            self.ensure_full(st, root)?;
            let o = &self.options;
            let (split, collapse) = match &st.nodes[&root].body {
                NodeBody::Leaf(l) => {
                    let n: usize = l.basements.iter().flatten().map(|b| b.len()).sum();
                    (l.loaded_bytes() > o.node_size_bytes && n >= 2, None)
                }
                NodeBody::Internal(n) => (
                    n.children.len() > o.fanout,
                    (n.children.len() == 1 && n.buf(0).is_empty()).then(|| n.children[0]),
                ),
            };
            if split {
                let height = match &st.nodes[&root].body {
                    NodeBody::Leaf(_) => 1,
                    NodeBody::Internal(n) => n.height + 1,
                };
                let new_root = self.file.allocate_node_id();
                let body = NodeBody::Internal(Internal::new(
                    height,
                    Vec::new(),
                    vec![root],
                    vec![MsgBuffer::new()],
                ));
                st.insert_node(new_root, Node::new(body, true), &self.cache);
                st.root = new_root;
                self.split_child(st, new_root, 0)?;
            } else if let Some(only) = collapse {
                self.prepare_modify(st, root)?;
                st.remove_node(root, &self.cache);
                self.file.free_node(root);
                st.root = only;
            } else {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Stalls until `id` is cached with every partition loaded (N3: it may be changed).
    pub(crate) fn ensure_full(&self, st: &TreeState, id: NodeId) -> Step<()> {
        if is_loaded(st, id) {
            Ok(())
        } else {
            Err(Stall::Load(Load::Node(id)))
        }
    }

    /// Writes a node's checkpoint image if the running checkpoint still needs it, so that the
    /// change about to be made cannot leak into the checkpoint (R4).
    /// It also stalls until the node is fully loaded: only whole nodes change (N3).
    pub(crate) fn prepare_modify(&self, st: &mut TreeState, id: NodeId) -> Step<()> {
        self.ensure_full(st, id)?;
        if st.nodes.get(&id).is_some_and(|n| n.checkpoint_pending) {
            self.write_node(
                st,
                id,
                true,
                Category::Checkpoint,
                AfterWrite::ChangesOrGoes,
            )?;
        }
        Ok(())
    }
}

/// Moves flushed messages into a child: into its buffers, or applied to its entries as new
/// versions (collecting against `horizon`).
fn push_down(
    body: &mut NodeBody,
    merge: &msg::MergeFn,
    msgs: &MsgBuffer,
    horizon: Ts,
    status: &TxnStatus,
) -> Applied {
    let mut applied = Applied::default();
    match body {
        NodeBody::Internal(n) => {
            // Each child's share of the piece is one key range, merged as one run.
            for c in 0..n.children.len() {
                let lo = c.checked_sub(1).map(|p| n.pivots[p].as_slice());
                let hi = n.pivots.get(c).map(Vec::as_slice);
                let mut share = msgs.range(lo, hi).peekable();
                if share.peek().is_some() {
                    let run = share.flat_map(|(k, list)| list.map(move |m| (k, m)));
                    n.buf_mut(c).push_run(run);
                }
            }
        }
        NodeBody::Leaf(l) => {
            for (k, list) in msgs.iter() {
                for m in list {
                    applied.add(apply_to_leaf(l, merge, k, m, horizon, status));
                }
            }
        }
    }
    applied
}

/// Flushes in a row that must land after a leaf's last key for its split to leave it
/// full: it is cut into full pieces (`full_leaf_cuts`), and the last, new right leaf takes
/// the next appends. An even split would leave every leaf of a sequential fill half full for good
/// (PerconaFT splits such leaves unevenly too).
const SEQUENTIAL_FLUSHES: u32 = 4;

/// Serialized bytes of messages a flush moves at a time: a sixteenth of a node (one
/// child's share of a full buffer), never less than a basement.
fn flush_piece_bytes(node_bytes: usize, basement_bytes: usize) -> usize {
    (node_bytes / 16).max(basement_bytes).max(1)
}

/// Applies one message to a fully loaded leaf: the entry gets the version it makes.
pub(super) fn apply_to_leaf(
    l: &mut Leaf,
    merge: &msg::MergeFn,
    key: &[u8],
    m: MsgRef<'_>,
    horizon: Ts,
    status: &TxnStatus,
) -> Applied {
    let b = l.basement_index(key);
    l.forget_image();
    #[allow(clippy::expect_used, reason = "a changed node is fully loaded (N3)")]
    let basement = l.basements[b]
        .as_mut()
        .expect("a changed leaf is fully loaded (N3)");
    if matches!(m.op, OpRef::Abort) {
        basement.abort(key, m.ts);
        return Applied::default();
    }
    let current = basement
        .get(key)
        .and_then(|e| e.newest_value())
        .map(<[u8]>::to_vec);
    let new = msg::apply(merge, key, current, m.op);
    basement.apply(key, m.ts, new, horizon, status)
}

/// Splits a leaf into pieces of about `target_bytes`; later pieces come with their pivot.
/// The cut falls between basements when that gives pieces of at least half the target
/// (the usual case: basements are a small fraction of a node), so the basements move as
/// they are — packed ones stay packed — and the leaf is never rebuilt entry by entry; a
/// leaf of few, large basements is cut by entries.
#[allow(clippy::expect_used, reason = "a changed node is fully loaded (N3)")]
fn split_leaf(
    l: Leaf,
    target_bytes: usize,
    basement_bytes: usize,
) -> (NodeBody, Vec<(Vec<u8>, NodeBody)>) {
    let sizes: Vec<usize> = l
        .basements
        .iter()
        .map(|b| b.as_ref().expect("a leaf is split fully loaded").bytes())
        .collect();
    match basement_cuts(&sizes, target_bytes) {
        Some(cuts) => split_leaf_at_basements(l, &cuts),
        None => split_leaf_by_entries(l, target_bytes, basement_bytes),
    }
}

/// Where to cut a leaf that takes sequential appends so that every piece but the last is
/// full: each cut goes before the basement that would take its piece past `node_bytes`. The
/// last piece, which takes the next appends, holds the rest. `None` when no cut leaves both
/// sides non-empty (one basement).
fn full_leaf_cuts(l: &Leaf, node_bytes: usize) -> Option<Vec<usize>> {
    let mut cuts = Vec::new();
    let mut piece = 0usize;
    for (i, b) in l.basements.iter().enumerate() {
        let bytes = b.as_ref().map_or(0, Basement::bytes);
        if i > 0 && piece > 0 && piece + bytes > node_bytes {
            cuts.push(i);
            piece = 0;
        }
        piece += bytes;
    }
    if cuts.is_empty() && l.basements.len() >= 2 {
        cuts.push(l.basements.len() - 1);
    }
    (!cuts.is_empty()).then_some(cuts)
}

/// Where to cut a leaf whose basements weigh `sizes` into pieces of about `target_bytes`:
/// the indexes of the first basement of every piece after the first (each the boundary
/// nearest an even share), or `None` when basement boundaries cannot give at least two
/// pieces of half the even share each.
fn basement_cuts(sizes: &[usize], target_bytes: usize) -> Option<Vec<usize>> {
    // prefix[j] = bytes of basements 0..j; a cut before basement j leaves prefix[j] left.
    let prefix: Vec<usize> = std::iter::once(0)
        .chain(sizes.iter().scan(0, |sum, &sz| {
            *sum += sz;
            Some(*sum)
        }))
        .collect();
    let total = prefix[sizes.len()];
    let pieces_n = total.div_ceil(target_bytes.max(1)).max(2);
    let mut cuts: Vec<usize> = Vec::with_capacity(pieces_n - 1);
    for k in 1..pieces_n {
        let want = total * k / pieces_n;
        // The boundary nearest to `want`: the first at or past it, or the one before.
        let after = prefix.partition_point(|&p| p < want).clamp(1, sizes.len());
        let before = after - 1;
        // prefix[before] <= want <= prefix[after]: `after` is the first boundary at or
        // past `want` (clamped to 1 when `want` is 0, where prefix[0] = 0 = want).
        let cut = if want - prefix[before] < prefix[after] - want {
            before
        } else {
            after
        };
        if cut > 0 && cut < sizes.len() && cuts.last().is_none_or(|&c| c < cut) {
            cuts.push(cut);
        }
    }
    let bounds: Vec<usize> = std::iter::once(0)
        .chain(cuts.iter().copied())
        .chain(std::iter::once(sizes.len()))
        .collect();
    let fair = total / pieces_n;
    let even = !cuts.is_empty()
        && bounds.windows(2).all(|w| {
            let bytes = prefix[w[1]] - prefix[w[0]];
            bytes > 0 && bytes >= fair / 2
        });
    even.then_some(cuts)
}

/// Cuts a fully loaded leaf before each basement index in `cuts` (ascending, non-zero).
fn split_leaf_at_basements(mut l: Leaf, cuts: &[usize]) -> (NodeBody, Vec<(Vec<u8>, NodeBody)>) {
    let mut rest = Vec::with_capacity(cuts.len());
    l.forget_image();
    for &at in cuts.iter().rev() {
        let basements = l.basements.split_off(at);
        let mut pivots = l.pivots.split_off(at - 1);
        let separator = pivots.remove(0);
        let piece = Leaf {
            pivots,
            basements,
            parts: Vec::new(),
            tables: Vec::new(),
        };
        rest.push((separator, NodeBody::Leaf(piece)));
    }
    rest.reverse();
    (NodeBody::Leaf(l), rest)
}

/// Splits a leaf by rebuilding it from its entries (for leaves of few, large basements).
fn split_leaf_by_entries(
    l: Leaf,
    target_bytes: usize,
    basement_bytes: usize,
) -> (NodeBody, Vec<(Vec<u8>, NodeBody)>) {
    let entries = l.into_entries();
    let total: usize = entries
        .iter()
        .map(|(k, e)| super::node::entry_bytes(k, e))
        .sum();
    let pieces_n = total.div_ceil(target_bytes.max(1)).max(2);
    let per_piece = total.div_ceil(pieces_n);
    let mut pieces = Vec::new();
    let mut current = BTreeMap::new();
    let mut bytes = 0;
    for (k, v) in entries {
        let sz = super::node::entry_bytes(&k, &v);
        if bytes > 0 && bytes + sz > per_piece {
            pieces.push(NodeBody::Leaf(Leaf::from_entries(
                std::mem::take(&mut current),
                basement_bytes,
            )));
            bytes = 0;
        }
        bytes += sz;
        current.insert(k, v);
    }
    pieces.push(NodeBody::Leaf(Leaf::from_entries(current, basement_bytes)));
    let mut pieces = pieces.into_iter();
    #[allow(clippy::expect_used, reason = "the loop always pushes a last piece")]
    let first = pieces.next().expect("at least one piece");
    let rest = pieces.map(|p| (first_key(&p), p)).collect();
    (first, rest)
}

/// Splits an internal node in two; the right half comes with the separator that moves up.
fn split_internal(mut n: Internal) -> (NodeBody, Vec<(Vec<u8>, NodeBody)>) {
    let m = n.children.len() / 2;
    let right_children = n.children.split_off(m);
    let right_buffers = n.buffers.split_off(m);
    let mut right_pivots = n.pivots.split_off(m - 1);
    let up = right_pivots.remove(0);
    n.parts.clear();
    let right = Internal {
        height: n.height,
        pivots: right_pivots,
        children: right_children,
        buffers: right_buffers,
        parts: Vec::new(),
        segments: Vec::new(),
        filters: Vec::new(),
    };
    (NodeBody::Internal(n), vec![(up, NodeBody::Internal(right))])
}

/// The lowest key of a leaf piece.
#[allow(clippy::expect_used, reason = "a changed node is fully loaded (N3)")]
fn first_key(piece: &NodeBody) -> Vec<u8> {
    match piece {
        NodeBody::Leaf(l) => l
            .basements
            .iter()
            .flatten()
            .find_map(|b| b.first_key().map(<[u8]>::to_vec))
            .expect("split pieces are non-empty"),
        NodeBody::Internal(_) => unreachable!("internal pieces carry their separator"),
    }
}

/// Where a unit of background flushing goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FlushTarget {
    /// The root, whose buffers are over the node size.
    Root,
    /// A node remembered as over-full, by its height and a key in its range: a walk by the
    /// key to the height finds it (or, after a merge freed it, the node that took its range).
    Remembered { height: u32, key: Vec<u8> },
}

/// True when node `id` is cached with every partition loaded.
fn is_loaded(st: &TreeState, id: NodeId) -> bool {
    st.node(id).is_some_and(|n| n.body.all_loaded())
}

fn internal(st: &TreeState, id: NodeId) -> &Internal {
    match &st.nodes[&id].body {
        NodeBody::Internal(n) => n,
        NodeBody::Leaf(_) => panic!("node {id:?} is not internal"),
    }
}

fn internal_mut(n: &mut Node) -> &mut Internal {
    match &mut n.body {
        NodeBody::Internal(n) => n,
        NodeBody::Leaf(_) => panic!("expected an internal node"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::entry::Entry;

    fn leaf_of(n: u32, basement_bytes: usize) -> Leaf {
        let entries: BTreeMap<Vec<u8>, Entry> = (0..n)
            .map(|i| {
                let e = Entry::new(Ts(1), Some(vec![7u8; 40]));
                (i.to_be_bytes().to_vec(), e)
            })
            .collect();
        Leaf::from_entries(entries, basement_bytes)
    }

    fn keys(body: &NodeBody) -> Vec<Vec<u8>> {
        match body {
            NodeBody::Leaf(l) => l.clone().into_entries().into_keys().collect(),
            NodeBody::Internal(_) => unreachable!(),
        }
    }

    #[test]
    fn a_leaf_of_many_basements_is_cut_between_them_keeping_every_entry() {
        let l = leaf_of(2000, 1024);
        let all = keys(&NodeBody::Leaf(l.clone()));
        let n_basements = l.basements.len();
        assert!(n_basements > 20, "{n_basements} basements");
        let total = l.loaded_bytes();
        let (first, rest) = split_leaf(l.clone(), total.div_ceil(3), 1024);
        assert_eq!(rest.len(), 2, "three pieces");
        let mut got = keys(&first);
        let mut lower = got.last().cloned();
        for (sep, piece) in &rest {
            let NodeBody::Leaf(p) = piece else { panic!() };
            assert!(p.parts.is_empty());
            let bytes = p.loaded_bytes();
            assert!(bytes > total / 6 && bytes < total / 2, "{bytes} of {total}");
            let ks = keys(piece);
            assert!(
                lower.as_ref().is_some_and(|lo| lo < sep),
                "separator above the left"
            );
            assert!(ks[0] >= *sep, "separator at or below the right");
            lower = ks.last().cloned();
            got.extend(ks);
        }
        assert_eq!(got, all, "every entry once, in order");
        let NodeBody::Leaf(f) = &first else { panic!() };
        let pieces = 1 + rest.len();
        let basements: usize = f.basements.len()
            + rest
                .iter()
                .map(|(_, p)| match p {
                    NodeBody::Leaf(p) => p.basements.len(),
                    NodeBody::Internal(_) => 0,
                })
                .sum::<usize>();
        assert_eq!(
            basements, n_basements,
            "basements moved, not rebuilt ({pieces} pieces)"
        );
    }

    #[test]
    fn a_leaf_of_one_basement_is_cut_by_entries() {
        let l = leaf_of(300, 1 << 20);
        assert_eq!(l.basements.len(), 1);
        let all = keys(&NodeBody::Leaf(l.clone()));
        let (first, rest) = split_leaf(l, 4096, 1 << 20);
        assert!(!rest.is_empty());
        let mut got = keys(&first);
        for (sep, piece) in &rest {
            assert_eq!(keys(piece)[0], *sep, "entry cuts carry the first key");
            got.extend(keys(piece));
        }
        assert_eq!(got, all);
    }

    #[test]
    fn basement_cuts_refuse_lopsided_pieces() {
        assert_eq!(basement_cuts(&[10, 10, 10, 10], 20), Some(vec![2]));
        assert_eq!(
            basement_cuts(&[100, 1], 60),
            None,
            "one piece would be tiny"
        );
        assert_eq!(basement_cuts(&[0, 0], 1), None, "empty pieces");
        assert_eq!(basement_cuts(&[5], 1), None, "one basement");
    }

    #[test]
    fn a_leaf_taking_appends_is_cut_into_full_pieces_and_a_remainder() {
        let l = leaf_of(400, 1000);
        let sizes: Vec<usize> = l.basements.iter().flatten().map(Basement::bytes).collect();
        let node_bytes = 4 * sizes[0] + sizes[0] / 2;
        let cuts = full_leaf_cuts(&l, node_bytes).expect("cuts");
        let mut start = 0;
        for &cut in &cuts {
            let piece: usize = sizes[start..cut].iter().sum();
            assert!(
                piece <= node_bytes,
                "piece of {piece} bytes over {node_bytes}"
            );
            assert!(
                piece + sizes[cut] > node_bytes,
                "piece of {piece} bytes could have taken the next basement"
            );
            start = cut;
        }
        assert!(start < sizes.len(), "the last piece is empty");
        let (first, rest) = split_leaf_at_basements(l.clone(), &cuts);
        let mut all = keys(&first);
        rest.iter().for_each(|(_, p)| all.extend(keys(p)));
        assert_eq!(all, keys(&NodeBody::Leaf(l)), "every entry kept, in order");
        assert_eq!(
            full_leaf_cuts(&leaf_of(3, 1 << 20), 10),
            None,
            "one basement"
        );
    }
}
