//! Writing nodes and making room: `write_node` (copy-on-write through the block file),
//! clock eviction with partial eviction of clean basements, and the tree's part of a
//! checkpoint (mark dirty nodes pending, write them, end the block file's checkpoint).

use super::format;
use super::node::{alloc_bytes, Basement, Node, NodeBody};
use super::{Tree, TreeState};
use crate::block::NodeId;
use crate::cache::{Evictable, InFlight};
use crate::counters::EngineStats;
use crate::{Category, Result};
use parking_lot::RwLockWriteGuard;
use std::sync::atomic::Ordering;

/// Clock sweeps one eviction pass may take: the first clears reference bits, the second may
/// evict what the first spared, so the budget holds. Nodes pinned by operations in flight
/// (what they loaded and will use on retry) are never evicted: the budget can be exceeded by
/// those alone.
const CLOCK_SWEEPS: usize = 2;

/// What becomes of a node just written, which decides the form its basements are left in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AfterWrite {
    /// It stays cached and clean (a checkpoint's write): its basements are packed before
    /// encoding, which then borrows their bytes, so a leaf is encoded once and held packed.
    StaysClean,
    /// It changes at once or leaves the cache: its basements keep their form.
    ChangesOrGoes,
}

impl Tree {
    /// Serializes node `id` (verified first) and writes it copy-on-write. The node is clean
    /// afterwards and no longer pending for the checkpoint.
    pub(crate) fn write_node(
        &self,
        st: &mut TreeState,
        id: NodeId,
        for_checkpoint: bool,
        cat: Category,
        after: AfterWrite,
    ) -> Result<()> {
        self.collect_versions(st, id, !for_checkpoint);
        if after == AfterWrite::StaysClean {
            self.pack_leaf(st, id);
        }
        #[allow(
            clippy::expect_used,
            reason = "the node was found in the node table under the same lock"
        )]
        let node = st.nodes.get(&id).expect("write of an uncached node");
        let descs = self.write_image(id, node, for_checkpoint, cat)?;
        let cache = self.cache.clone();
        st.modify(id, &cache, |n| {
            n.dirty = false;
            n.checkpoint_pending = false;
            match (&mut n.body, descs) {
                (NodeBody::Leaf(l), format::Descs::Leaf(d, t)) => l.set_image(d, t),
                (NodeBody::Internal(x), format::Descs::Internal(d)) => x.parts = d,
                _ => unreachable!("a node is encoded as its own kind"),
            }
        });
        Ok(())
    }

    /// Verifies `node`, encodes it and writes the image as node `id`'s (copy-on-write),
    /// returning the new image's partition descriptors. Takes no lock of the tree's: its
    /// callers hold the write lock (`write_node`) or own the node (`write_out`).
    fn write_image(
        &self,
        id: NodeId,
        node: &Node,
        for_checkpoint: bool,
        cat: Category,
    ) -> Result<format::Descs> {
        if let Err(reason) = node.check() {
            panic!(
                "refusing to write node {id:?} of {}: {reason}",
                self.file.path().display()
            );
        }
        // The image is charged from before it is encoded (at most the raw bytes of the
        // partitions) until it is written (its vector and write_block's aligned copy). No
        // room is made here (the caller may hold the tree lock): the next `make_room`
        // evicts for it.
        let mut image = self.cache.in_flight(raw_bytes(&node.body));
        let o = &self.options;
        let (bytes, descs) = format::encode(
            &node.body,
            o.compression,
            o.basement_size_bytes,
            o.read_page_bytes,
        );
        image.set(alloc_bytes(bytes.capacity()) + bytes.len());
        self.file.write_block(id, &bytes, for_checkpoint, cat)?;
        drop((image, bytes));
        EngineStats::bump(&self.stats.nodes_written);
        Ok(descs)
    }

    /// Evicts dirty node `id`: takes it out of the table into the writing set under the
    /// write lock `st` (K1), releases the lock, and writes it — for the running checkpoint
    /// if it is pending. On failure the node goes back into the table, dirty, before it
    /// leaves the set (K1). Its memory stays charged until it is dropped.
    pub(super) fn write_out(
        &self,
        mut st: RwLockWriteGuard<'_, TreeState>,
        id: NodeId,
    ) -> Result<()> {
        let pending = st.nodes[&id].checkpoint_pending;
        self.collect_versions(&mut st, id, !pending);
        let held = self.cache.in_flight(st.nodes[&id].mem_bytes());
        #[allow(
            clippy::expect_used,
            reason = "the node was found in the node table under the same lock"
        )]
        let node = st.remove_node(id, &self.cache).expect("in the clock");
        self.writeback.begin(id);
        drop(st);
        let cat = if pending {
            Category::Checkpoint
        } else {
            Category::Eviction
        };
        let written = self.write_image(id, &node, pending, cat);
        if written.is_err() {
            self.write_state().insert_node(id, node, &self.cache);
        } else {
            drop(node);
        }
        self.writeback.end(id);
        drop(held);
        written.map(|_| ())
    }

    /// Packs the basements of a leaf about to be written that stays cached (`basement.rs`):
    /// clean, it takes about half the memory packed and reads decode nothing.
    fn pack_leaf(&self, st: &mut TreeState, id: NodeId) {
        let cache = self.cache.clone();
        st.modify(id, &cache, |n| {
            if let NodeBody::Leaf(l) = &mut n.body {
                l.basements.iter_mut().flatten().for_each(Basement::pack);
            }
        });
    }

    /// Drops the versions of a leaf that no snapshot can see before it is written (M2), and
    /// resolves provisional versions of ended transactions (E2) — but not in a checkpoint's
    /// image: that is the state at its redo point, and a transaction committed since then
    /// is redone from the log after its provisional versions are aborted (R8), which
    /// needs them still provisional.
    fn collect_versions(&self, st: &mut TreeState, id: NodeId, resolve: bool) {
        let horizon = self.snapshots.horizon();
        let status = resolve.then(|| self.snapshots.status());
        let cache = self.cache.clone();
        let collected = st.modify(id, &cache, |n| match &mut n.body {
            NodeBody::Leaf(l) => l
                .basements
                .iter_mut()
                .flatten()
                .map(|b| b.collect(horizon, status))
                .sum(),
            NodeBody::Internal(_) => 0,
        });
        self.stats.count_versions(0, collected);
    }

    /// Evicts from every tree of the environment until the cache is under its target.
    pub(crate) fn evict_if_needed(&self) -> Result<()> {
        self.make_room(0)
    }

    /// Makes room in the cache for `incoming` more bytes (`Cache::make_room`: every tree of
    /// the budget, clock order).
    pub(crate) fn make_room(&self, incoming: usize) -> Result<()> {
        self.cache.make_room(incoming)
    }

    /// Makes room for `bytes` an operation is about to hold outside the node table and
    /// charges them until the guard drops. Not under a tree lock (`make_room` takes them).
    pub(crate) fn hold(&self, bytes: usize) -> Result<InFlight<'_>> {
        self.make_room(bytes)?;
        Ok(self.cache.in_flight(bytes))
    }

    /// One clock pass over this tree's nodes, evicting until the cache target is met.
    ///
    /// An unreferenced clean node first loses its partitions (partial eviction) and stays
    /// as a skeleton: pivots, child ids and descriptors, so that the next lookup through it
    /// reads one partition and no header. Skeletons are small; they are removed only in the
    /// second sweep and only while the cache is still over its budget (partial eviction alone
    /// bringing it under the budget, if not yet to the target, spares them).
    fn clock_pass(&self, incoming: usize) -> Result<()> {
        let mut st = self.write_state();
        let mut pins = self.pins.lock();
        let ring = st.clock.len();
        let over_budget = || self.cache.used_bytes() + incoming > self.cache.limit_bytes();
        for step in 0..ring * CLOCK_SWEEPS {
            if self.cache.used_bytes() + incoming <= self.cache.eviction_target()
                || st.clock.is_empty()
            {
                break;
            }
            let hand = st.clock_hand % st.clock.len();
            let id = st.clock[hand];
            let node = &st.nodes[&id];
            if pins.contains_key(&id) || node.referenced.swap(false, Ordering::Relaxed) {
                st.clock_hand = hand + 1;
                continue;
            }
            let clean = !node.dirty;
            let evictable = clean
                && node.may_have_evictable.load(Ordering::Relaxed)
                && node.body.has_evictable_partitions();
            if evictable {
                let cache = self.cache.clone();
                st.evict_partitions(id, &cache);
            }
            if clean {
                // Nothing left to drop (just dropped, or none found) until a load or a
                // change sets the hint again.
                #[allow(
                    clippy::expect_used,
                    reason = "the node was found in the node table under the same lock"
                )]
                let node = st.nodes.get_mut(&id).expect("in the clock");
                node.may_have_evictable.store(false, Ordering::Relaxed);
            }
            let node = &st.nodes[&id];
            if evictable {
                self.cache.partial_evictions.fetch_add(1, Ordering::Relaxed);
                st.clock_hand = hand + 1;
                continue;
            }
            let skeleton = !node.dirty && !node.body.all_loaded();
            if skeleton && (step < ring || !over_budget()) {
                st.clock_hand = hand + 1;
                continue;
            }
            let dirty = node.dirty;
            // swap_remove moves the last id into `hand`: look at that slot next.
            st.clock_hand = hand;
            if dirty {
                // Written with neither lock held (K1); the ring may change meanwhile, and
                // the pass goes on from wherever the hand then points.
                drop(pins);
                self.write_out(st, id)?;
                st = self.write_state();
                pins = self.pins.lock();
            } else {
                st.remove_node(id, &self.cache);
            }
            self.cache.evictions.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Checkpoint step 1 (under the environment's apply lock, R3): every dirty node becomes
    /// pending; the block file starts its checkpoint. Returns the root, MSN and entry count to
    /// record.
    pub(crate) fn checkpoint_mark(&self) -> CheckpointMark {
        // K3: no eviction's write for the live table alone ends after C := L below.
        let mut st = self.write_state_idle();
        for n in st.nodes.values_mut() {
            n.checkpoint_pending = n.dirty;
        }
        self.file.checkpoint_begin();
        CheckpointMark {
            root: st.root,
            next_msn: st.next_msn,
            count: self.count(),
        }
    }

    /// Checkpoint step 2: writes every node still pending (writers may have written some
    /// already), then makes the checkpoint durable with `lsn` as its redo point.
    pub(crate) fn checkpoint_finish(&self, mark: &CheckpointMark, lsn: u64) -> Result<()> {
        let pending: Vec<NodeId> = {
            let st = self.read_state();
            st.nodes
                .iter()
                .filter(|(_, n)| n.checkpoint_pending)
                .map(|(id, _)| *id)
                .collect()
        };
        for id in pending {
            let mut st = self.write_state();
            if st.nodes.get(&id).is_some_and(|n| n.checkpoint_pending) {
                let after = AfterWrite::StaysClean;
                self.write_node(&mut st, id, true, Category::Checkpoint, after)?;
            }
        }
        // K3: the pending nodes eviction took out of the table are written, for C.
        self.writeback.wait_idle();
        let meta = super::encode_meta(&self.options, mark.next_msn, mark.count);
        self.file.checkpoint_end(mark.root, lsn, &meta)
    }
}

/// What a checkpoint records for a tree, as of its start.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CheckpointMark {
    pub root: NodeId,
    pub next_msn: u64,
    pub count: i64,
}

/// The uncompressed bytes of a node's loaded partitions: what its image holds at most.
fn raw_bytes(body: &NodeBody) -> usize {
    match body {
        NodeBody::Leaf(l) => l.loaded_bytes(),
        NodeBody::Internal(n) => n.buffers.iter().flatten().map(|b| b.bytes()).sum(),
    }
}

/// The cache evicts from a tree through this (`Cache::make_room`).
impl Evictable for Tree {
    fn evict_some(&self, incoming: usize) -> Result<()> {
        self.clock_pass(incoming)
    }
}
