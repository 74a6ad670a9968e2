//! One B-epsilon tree stored in one block file.
//!
//! Writes become messages injected into the root's buffers; background flushes move the
//! heaviest buffer one level down; leaves apply messages, split and merge. Reads descend from
//! the root and combine the leaf entry with the messages still buffered above it.
//!
//! Concurrency: one `RwLock` per tree guards the node table. Readers share it; writers and
//! flushes take it exclusively for in-memory work only. Node and partition reads from disk
//! happen with no lock held: an operation that finds a node or basement missing returns a
//! `Stall::Load`, the driver loop (`with_read`/`with_write`) drops the lock, reads, installs
//! the piece if the node's on-disk image is still the one read, and retries.
//!
//! The tree knows nothing of the log or transactions: the environment logs first, then calls
//! `apply`; recovery calls the same `apply`.

pub(crate) mod basement;
mod buffer;
mod cache_mix;
mod cursor;
pub(crate) mod entry;
mod evict;
mod filter;
mod flush;
pub(crate) mod format;
mod load;
pub(crate) mod msg;
pub(crate) mod node;
mod packed;
pub(crate) mod pivots;
mod promote;
mod read;
pub(crate) mod salvage;
pub(crate) mod segment;
mod slot;
mod verify;
mod writeback;

#[cfg(test)]
mod partial_tests;

pub use cache_mix::CacheMix;
pub use cursor::Cursor;
pub use msg::{MergeFn, OpRef};
pub use verify::TreeShape;

use crate::block::{BlockFile, NodeId};
use crate::cache::Cache;
use crate::counters::EngineStats;
use crate::mvcc::{SnapshotGuard, Snapshots};
use crate::vocab::Ts;
use crate::{Compression, Error, Result, TreeOptions};
use msg::Msn;
use node::{Leaf, Node, NodeBody};
use parking_lot::{Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

/// Loads one operation may need before giving up (see `load_for_retry`).
const MAX_STALLS_PER_OPERATION: usize = 10_000;

/// Something an operation needs from disk before it can go on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Load {
    /// The whole node (a node that will be changed, or read by a scan with no upper bound).
    Node(NodeId),
    /// A node's header: pivots, child ids and partition descriptors, no partitions.
    Header(NodeId),
    /// One partition (basement or message buffer) of a cached node.
    Partition(NodeId, usize),
    /// Segment `s` of evicted partition `c` of a cached node (`segment.rs`): what a point
    /// lookup needs of a buffer or basement written in segments.
    Segment(NodeId, usize, usize),
    /// Basement `i` of a cached leaf and the unloaded basements after it, up to
    /// `SCAN_READ_BYTES` stored and no further than basement `last` (the last one holding
    /// keys below the scan's upper bound; `usize::MAX` for none), in one read: what a scan
    /// will want next (`load.rs`).
    Run(NodeId, usize, usize),
}

/// Why an operation under the lock stopped.
#[derive(Debug)]
pub(crate) enum Stall {
    Load(Load),
    Err(Error),
}

impl From<Error> for Stall {
    fn from(e: Error) -> Self {
        Stall::Err(e)
    }
}

pub(crate) type Step<T> = std::result::Result<T, Stall>;

/// The mutable part of a tree, behind its lock.
pub(crate) struct TreeState {
    pub root: NodeId,
    pub nodes: HashMap<NodeId, Node>,
    pub next_msn: u64,
    /// Clock ring of cached node ids and the hand's position.
    pub clock: Vec<NodeId>,
    pub clock_hand: usize,
    /// Internal nodes known to be over their size, each with its height and a key in its
    /// range: the flusher walks to them, lowest first.
    pub overfull: BTreeMap<NodeId, (u32, Vec<u8>)>,
    /// Bumped by every exclusive acquisition (`Tree::write_state`): a reader that sees it
    /// unchanged across a stall knows that nothing in the table changed meanwhile but
    /// basement pieces installed under the shared lock (`read.rs`, `Resume`).
    pub epoch: u64,
}

/// An open tree.
pub struct Tree {
    id: u64,
    name: String,
    options: TreeOptions,
    file: BlockFile,
    state: RwLock<TreeState>,
    /// Nodes that operations in flight loaded and still need: eviction skips them. Apart
    /// from the state's lock so that pinning and unpinning, twice per point read that
    /// loads, do not take the tree's write lock (lock order: state, then pins).
    pins: Mutex<HashMap<NodeId, u32>>,
    cache: Arc<Cache>,
    merge: Arc<MergeFn>,
    stats: Arc<EngineStats>,
    snapshots: Arc<Snapshots>,
    /// Entry count as callers keep it through `Count` log records (changed under the apply
    /// lock, recorded by checkpoints, redone by recovery).
    count: AtomicI64,
    /// Verifications running: background flushes wait, so the nodes below the root keep
    /// the ranges their parents give them while `verify` walks them one at a time.
    pub(crate) verifying: std::sync::atomic::AtomicUsize,
    /// Dirty nodes eviction took out of the table and is writing with no lock held
    /// (`writeback.rs`, K1-K3).
    writeback: writeback::Writeback,
    /// Held by the one writer at a time that flushes beside the flusher while it waits out
    /// backpressure (`help_flush`).
    helper: Mutex<()>,
}

impl std::fmt::Debug for Tree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tree")
            .field("id", &self.id)
            .field("name", &self.name)
            .finish()
    }
}

/// Everything a tree shares with its environment.
#[derive(Clone)]
pub(crate) struct TreeContext {
    pub cache: Arc<Cache>,
    pub merge: Arc<MergeFn>,
    pub stats: Arc<EngineStats>,
    pub snapshots: Arc<Snapshots>,
}

impl Tree {
    /// Builds a tree over `file`, whose durable checkpoint is `root` (NodeId(0) = empty) with
    /// the options and MSN recorded in `meta`.
    pub(crate) fn new(
        id: u64,
        name: String,
        file: BlockFile,
        root: NodeId,
        meta: &[u8],
        ctx: TreeContext,
    ) -> Result<Tree> {
        let (options, next_msn, count) = decode_meta(meta).map_err(|r| {
            Error::corruption(
                file.path(),
                crate::Location::Other("tree metadata".into()),
                r,
            )
        })?;
        let mut state = TreeState {
            root,
            nodes: HashMap::new(),
            next_msn,
            clock: Vec::new(),
            clock_hand: 0,
            overfull: BTreeMap::new(),
            epoch: 0,
        };
        if root == NodeId(0) {
            let root = file.allocate_node_id();
            state.root = root;
            state.insert_node(
                root,
                Node::new(NodeBody::Leaf(Leaf::empty()), true),
                &ctx.cache,
            );
        }
        Ok(Tree {
            id,
            name,
            options,
            file,
            state: RwLock::new(state),
            pins: Mutex::new(HashMap::new()),
            cache: ctx.cache,
            merge: ctx.merge,
            stats: ctx.stats,
            snapshots: ctx.snapshots,
            count: AtomicI64::new(count),
            verifying: std::sync::atomic::AtomicUsize::new(0),
            writeback: writeback::Writeback::default(),
            helper: Mutex::new(()),
        })
    }

    pub fn id(&self) -> u64 {
        self.id
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn options(&self) -> &TreeOptions {
        &self.options
    }

    pub(crate) fn file(&self) -> &BlockFile {
        &self.file
    }

    /// Applies one change of the commit with timestamp `ts` (already logged by the caller).
    /// Does not evict: the caller holds the environment's apply lock and evicts after
    /// releasing it.
    pub(crate) fn apply(&self, key: &[u8], ts: Ts, op: msg::OpRef<'_>) -> Result<()> {
        self.with_write(|t, st| t.inject(st, key, ts, op))
    }

    /// Applies a commit's changes to this tree, all stamped `ts` (`inject_run`): one lock
    /// acquisition and one pass per touched buffer for the batch. A stall (a load) retries
    /// from the first change not yet applied.
    pub(crate) fn apply_all(&self, ops: &[(&[u8], msg::OpRef<'_>)], ts: Ts) -> Result<()> {
        let mut done = 0;
        self.with_write(|t, st| {
            while done < ops.len() {
                if t.inject_run(st, &ops[done..], ts)? {
                    done = ops.len();
                } else {
                    let (key, op) = ops[done];
                    t.inject(st, key, ts, op)?;
                    done += 1;
                }
            }
            Ok(())
        })
    }

    /// Sends the abort message of the transaction stamped `stamp` for `key`: readers and the
    /// leaf drop what it wrote there (`mvcc::status`, T1).
    pub(crate) fn abort_provisional(&self, key: &[u8], stamp: Ts) -> Result<()> {
        assert!(
            stamp.is_provisional(),
            "only a provisional write is aborted"
        );
        self.with_write(|t, st| t.inject(st, key, stamp, msg::OpRef::Abort))
    }

    /// The newest committed value of `key`, or `None`. The snapshot is read under the tree's
    /// lock, so no collection that ran before it can have removed what it needs (M2).
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut resume = None;
        let v =
            self.with_read(|t, st| t.lookup_resuming(st, key, t.snapshots.visible(), &mut resume))?;
        self.evict_if_needed()?;
        Ok(v)
    }

    /// The value of `key` as of a registered snapshot.
    pub(crate) fn get_at(&self, key: &[u8], snapshot: &SnapshotGuard) -> Result<Option<Vec<u8>>> {
        let mut resume = None;
        let v = self.with_read(|t, st| t.lookup_resuming(st, key, snapshot.ts(), &mut resume))?;
        self.evict_if_needed()?;
        Ok(v)
    }

    /// A cursor over the tree in key order, reading as of `snapshot`.
    pub(crate) fn cursor(self: &Arc<Self>, snapshot: Arc<SnapshotGuard>) -> Cursor {
        Cursor::new(self.clone(), snapshot)
    }

    /// One unit of background flushing (`flush_step`); true if it moved anything. The unit's
    /// target is chosen once, so that the retries after loads finish that unit instead of
    /// starting others (and pinning what they load).
    pub(crate) fn flush_once(&self) -> Result<bool> {
        let mut target = None;
        let mut held = Vec::new();
        let worked = self.with_write(|t, st| {
            if t.verifying.load(Ordering::SeqCst) > 0 {
                return Ok(false);
            }
            if target.is_none() {
                target = t.next_flush(st);
            }
            match &target {
                Some(target) => t.flush_step(st, target, &mut held).map(|()| true),
                None => Ok(false),
            }
        });
        self.unpin(&held);
        let worked = worked?;
        self.evict_if_needed()?;
        Ok(worked)
    }

    /// One unit of flushing on the thread of a writer that is waiting out backpressure, so
    /// that two units overlap: while one holds the tree's lock to move messages, the other
    /// loads its nodes or writes what it evicts with no lock held (a random fill's flusher
    /// spent about two thirds of its time evicting and loading, the writer slept). At most
    /// one writer per tree helps at a time, so a server's many writers add one unit's pins
    /// to the cache, not one each. `None` when another writer is already helping.
    pub(crate) fn help_flush(&self) -> Option<Result<bool>> {
        let _one = self.helper.try_lock()?;
        let worked = self.flush_once();
        if matches!(worked, Ok(true)) {
            EngineStats::bump(&self.stats.writer_flush_units);
        }
        Some(worked)
    }

    /// Pushes every buffered message down to the leaves.
    pub(crate) fn drain(&self) -> Result<()> {
        let mut next = Some(Vec::new());
        while let Some(key) = next {
            next = self.with_write(|t, st| t.drain_path(st, &key))?;
            self.evict_if_needed()?;
        }
        self.with_write(|t, st| t.fix_root(st))?;
        self.evict_if_needed()
    }

    /// Drops every cached node and refunds the cache (the tree is being dropped).
    pub(crate) fn release_cache(&self) {
        // A node being written out holds its charge until its write ends (K1).
        let mut st = self.write_state_idle();
        let ids: Vec<NodeId> = st.nodes.keys().copied().collect();
        for id in ids {
            st.remove_node(id, &self.cache);
        }
    }

    /// True when the root, or an internal node below it, holds more buffered bytes than a
    /// node should: the flusher has work.
    pub(crate) fn needs_flush(&self) -> bool {
        let st = self.state.read();
        if !st.overfull.is_empty() {
            return true;
        }
        match st.nodes.get(&st.root).map(|n| &n.body) {
            Some(NodeBody::Internal(n)) => n.buffer_bytes() > self.options.node_size_bytes,
            _ => false,
        }
    }

    /// True when writers must wait for the flusher (root buffers at twice the node size).
    pub(crate) fn needs_backpressure(&self) -> bool {
        let st = self.state.read();
        match st.nodes.get(&st.root).map(|n| &n.body) {
            Some(NodeBody::Internal(n)) => n.buffer_bytes() > 2 * self.options.node_size_bytes,
            _ => false,
        }
    }

    /// Runs `f` under the read lock, loading whatever it stalls on, until it completes.
    pub(crate) fn with_read<T>(
        &self,
        mut f: impl FnMut(&Self, &TreeState) -> Step<T>,
    ) -> Result<T> {
        self.drive(|| f(self, &self.state.read()))
    }

    /// Runs `f` under the write lock, loading whatever it stalls on, until it completes.
    pub(crate) fn with_write<T>(
        &self,
        mut f: impl FnMut(&Self, &mut TreeState) -> Step<T>,
    ) -> Result<T> {
        self.drive(|| f(self, &mut self.write_state()))
    }

    /// The stall-load-retry driver behind `with_read` and `with_write`: runs `attempt`
    /// (which takes and drops the lock itself) until it completes, loading and pinning what
    /// it stalls on, then releases the pins.
    fn drive<T>(&self, mut attempt: impl FnMut() -> Step<T>) -> Result<T> {
        let mut stalls = 0;
        let mut pinned = Vec::new();
        let result = loop {
            match attempt() {
                Ok(v) => break Ok(v),
                Err(Stall::Err(e)) => break Err(e),
                Err(Stall::Load(l)) => {
                    if let Err(e) = self.load_for_retry(l, &mut stalls, &mut pinned) {
                        break Err(e);
                    }
                }
            }
        };
        self.unpin(&pinned);
        result
    }

    /// Releases the pins an operation took on the nodes it loaded.
    fn unpin(&self, pinned: &[NodeId]) {
        if pinned.is_empty() {
            return;
        }
        let mut pins = self.pins.lock();
        for id in pinned {
            if let Some(n) = pins.get_mut(id) {
                *n -= 1;
                if *n == 0 {
                    pins.remove(id);
                }
            }
        }
    }

    /// Loads what an operation stalled on. An operation needs at most one root-to-leaf path
    /// plus a sibling, so a bounded number of stalls means the cache cannot hold that much:
    /// fail with a clear error instead of spinning.
    fn load_for_retry(
        &self,
        what: Load,
        stalls: &mut usize,
        pinned: &mut Vec<NodeId>,
    ) -> Result<()> {
        *stalls += 1;
        if *stalls > MAX_STALLS_PER_OPERATION {
            return Err(Error::InvalidArgument(format!(
                "cache of {} bytes cannot hold the nodes one operation on tree {:?} needs; raise the cache size",
                self.cache.budget_bytes(),
                self.name
            )));
        }
        self.load(what, pinned)
    }

    /// Pins `id` for an operation that records what it holds in `held` (once per
    /// operation); `Tree::unpin(held)` releases them when the operation ends.
    pub(crate) fn pin(&self, id: NodeId, held: &mut Vec<NodeId>) {
        if !held.contains(&id) {
            *self.pins.lock().entry(id).or_insert(0) += 1;
            held.push(id);
        }
    }

    pub(crate) fn read_state(&self) -> RwLockReadGuard<'_, TreeState> {
        self.state.read()
    }

    pub(crate) fn write_state(&self) -> RwLockWriteGuard<'_, TreeState> {
        let mut st = self.state.write();
        st.epoch = st.epoch.wrapping_add(1);
        st
    }

    /// The write lock, taken with no eviction write in flight: waits for the writing set to
    /// empty with no lock held, then takes the lock and looks again (`writeback.rs`, lock
    /// order: a failed write out needs the lock before it leaves the set).
    pub(crate) fn write_state_idle(&self) -> RwLockWriteGuard<'_, TreeState> {
        loop {
            self.writeback.wait_idle();
            let st = self.write_state();
            if self.writeback.is_idle() {
                return st;
            }
        }
    }

    /// The entry count callers keep through commits (`Txn::add_count`).
    pub(crate) fn count(&self) -> i64 {
        self.count.load(Ordering::Acquire)
    }

    /// Applies a committed count change (under the apply lock, or by recovery).
    pub(crate) fn add_count(&self, delta: i64) {
        self.count.fetch_add(delta, Ordering::AcqRel);
    }

    fn next_msn(st: &mut TreeState) -> Msn {
        let m = Msn(st.next_msn);
        st.next_msn += 1;
        m
    }
}

impl TreeState {
    /// Adds a node to the table and charges it to the cache.
    pub fn insert_node(&mut self, id: NodeId, node: Node, cache: &Cache) {
        cache.recharge(0, node.mem_bytes());
        let old = self.nodes.insert(id, node);
        assert!(old.is_none(), "node {id:?} inserted twice");
        self.clock.push(id);
    }

    /// Removes a node from the table and refunds its charge.
    pub fn remove_node(&mut self, id: NodeId, cache: &Cache) -> Option<Node> {
        let node = self.nodes.remove(&id)?;
        cache.recharge(node.mem_bytes(), 0);
        if let Some(pos) = self.clock.iter().position(|&n| n == id) {
            self.clock.swap_remove(pos);
        }
        Some(node)
    }

    /// Changes a node in place, keeping the cache charge right.
    pub fn modify<T>(&mut self, id: NodeId, cache: &Cache, f: impl FnOnce(&mut Node) -> T) -> T {
        #[allow(
            clippy::expect_used,
            reason = "callers hold the node in the table under the same lock"
        )]
        let node = self.nodes.get_mut(&id).expect("modify of an uncached node");
        let before = node.mem_bytes();
        node.may_have_evictable.store(true, Ordering::Relaxed);
        let out = f(node);
        cache.recharge(before, node.mem_bytes());
        out
    }

    /// Drops a clean node's evictable partitions and refunds what they held. A leaf's refund
    /// is the sum over the basements dropped, not two passes over the whole node's charge
    /// (`modify`), which were 1.3% of a point read's CPU at mid size (docs/bench/history/
    /// 2026-11-26-point-find-express-path-cursor-replies-pivot-heads.md).
    pub fn evict_partitions(&mut self, id: NodeId, cache: &Cache) {
        #[allow(
            clippy::expect_used,
            reason = "callers hold the node in the table under the same lock"
        )]
        let node = self
            .nodes
            .get_mut(&id)
            .expect("evicting from an uncached node");
        if matches!(node.body, NodeBody::Leaf(_)) {
            #[cfg(debug_assertions)]
            let before = node.mem_bytes();
            let NodeBody::Leaf(l) = &mut node.body else {
                unreachable!("matched a leaf above")
            };
            let freed = l.evict_basements();
            #[cfg(debug_assertions)]
            assert_eq!(before - node.mem_bytes(), freed, "a leaf's eviction refund");
            cache.recharge(freed, 0);
            return;
        }
        self.modify(id, cache, |n| n.body.evict_partitions());
    }

    pub fn node(&self, id: NodeId) -> Option<&Node> {
        self.nodes.get(&id)
    }
}

/// Version 2 adds the entry count, version 3 the read page (docs/format-node.md, "Tree
/// metadata").
const META_VERSION: u8 = 3;
const META_BYTES: usize = 34;
/// Version 2's length: a tree of it writes basements whole (read page 0).
const META_V2_BYTES: usize = 30;

pub(crate) fn encode_meta(o: &TreeOptions, next_msn: u64, count: i64) -> Vec<u8> {
    let mut m = vec![META_VERSION];
    m.extend_from_slice(&(o.node_size_bytes as u32).to_le_bytes());
    m.extend_from_slice(&(o.basement_size_bytes as u32).to_le_bytes());
    m.extend_from_slice(&(o.fanout as u32).to_le_bytes());
    m.push(o.compression.options_byte());
    m.extend_from_slice(&next_msn.to_le_bytes());
    m.extend_from_slice(&count.to_le_bytes());
    #[allow(
        clippy::expect_used,
        reason = "the read page is at most the basement size, far below 4 GiB"
    )]
    let page = u32::try_from(o.read_page_bytes).expect("a read page is below the basement");
    m.extend_from_slice(&page.to_le_bytes());
    assert_eq!(m.len(), META_BYTES);
    m
}

#[allow(
    clippy::expect_used,
    reason = "constant 4- and 8-byte ranges convert to arrays; the length was checked above"
)]
fn decode_meta(m: &[u8]) -> std::result::Result<(TreeOptions, u64, i64), String> {
    let known = matches!(
        (m.first(), m.len()),
        (Some(2), META_V2_BYTES) | (Some(3), META_BYTES)
    );
    if !known {
        return Err(format!(
            "tree metadata of {} bytes, version {:?}",
            m.len(),
            m.first()
        ));
    }
    let u32_at = |i: usize| u32::from_le_bytes(m[i..i + 4].try_into().expect("4 bytes")) as usize;
    let compression = Compression::from_options_byte(m[13])
        .ok_or_else(|| format!("unknown codec or level {:#04x}", m[13]))?;
    let options = TreeOptions {
        node_size_bytes: u32_at(1),
        basement_size_bytes: u32_at(5),
        read_page_bytes: if m.len() == META_BYTES { u32_at(30) } else { 0 },
        fanout: u32_at(9),
        compression,
    };
    if options.fanout < 3 || options.node_size_bytes == 0 || options.basement_size_bytes == 0 {
        return Err(format!("invalid tree options {options:?}"));
    }
    let next_msn = u64::from_le_bytes(m[14..22].try_into().expect("8 bytes"));
    let count = i64::from_le_bytes(m[22..30].try_into().expect("8 bytes"));
    Ok((options, next_msn, count))
}

/// Metadata for a new, empty tree.
pub(crate) fn initial_meta(options: &TreeOptions) -> Vec<u8> {
    encode_meta(options, 1, 0)
}

#[cfg(test)]
mod meta_tests {
    use super::*;

    #[test]
    fn the_read_page_is_kept_in_the_metadata_and_version_2_reads_as_whole_basements() {
        let o = TreeOptions {
            read_page_bytes: 4096,
            ..TreeOptions::default()
        };
        let m = encode_meta(&o, 9, 42);
        assert_eq!(decode_meta(&m), Ok((o, 9, 42)));
        let mut v2 = m[..META_V2_BYTES].to_vec();
        v2[0] = 2;
        let whole = TreeOptions {
            read_page_bytes: 0,
            ..o
        };
        assert_eq!(decode_meta(&v2), Ok((whole, 9, 42)));
        assert!(
            decode_meta(&m[..META_V2_BYTES]).is_err(),
            "version 3 of 30 bytes"
        );
        let mut v4 = m.clone();
        v4[0] = 4;
        assert!(decode_meta(&v4).is_err());
    }
}
