//! Ordered cursors, forward and backward, with seek. A cursor holds one basement's merged range
//! at a time (`LeafBatch`) and moves to the neighbouring leaf by key when it runs off either
//! end, so it never pins nodes and stays valid while the tree splits and merges under it.
//! Every leaf is read as of the cursor's registered snapshot, so the whole scan sees one
//! consistent state however long it runs: commits after the snapshot are invisible, and the
//! versions it needs are kept while it holds the snapshot (M2).

use super::read::{LeafBatch, Target};
use super::Tree;
use crate::mvcc::SnapshotGuard;
use crate::Result;
use std::sync::Arc;

/// A position in a tree.
pub struct Cursor {
    tree: Arc<Tree>,
    snapshot: Arc<SnapshotGuard>,
    batch: LeafBatch,
    /// Index into `batch.entries`; `None` when the cursor is not on an entry.
    pos: Option<usize>,
    /// Whether `batch` was read (a new cursor holds none).
    fetched: bool,
    /// Where the caller's forward scan ends, if it said (`set_upper_bound`).
    upper: Option<Vec<u8>>,
    /// Entries of `batch` whose values `take_value` moved out (a bit per entry); landing on
    /// one again reads the leaf anew.
    taken: Vec<u64>,
}

impl Cursor {
    pub(crate) fn new(tree: Arc<Tree>, snapshot: Arc<SnapshotGuard>) -> Self {
        Cursor {
            tree,
            snapshot,
            batch: LeafBatch::default(),
            pos: None,
            fetched: false,
            upper: None,
            taken: Vec::new(),
        }
    }

    /// Tells the cursor that a forward scan stops before `bound`, so its reads and batches
    /// go no further than the basement holding the last keys below it (a short range scan
    /// then reads the few basements it needs, not `SCAN_READ_BYTES` of them). A hint only:
    /// the cursor still moves past the bound if asked. `None` removes it.
    pub fn set_upper_bound(&mut self, bound: Option<Vec<u8>>) {
        self.upper = bound;
    }

    /// True when positioned on an entry.
    pub fn valid(&self) -> bool {
        self.pos.is_some()
    }

    /// Key at the cursor. Panics if not `valid()`.
    #[allow(
        clippy::expect_used,
        reason = "documented to panic on an unpositioned cursor: callers check valid() first"
    )]
    pub fn key(&self) -> &[u8] {
        &self.batch.entries[self.pos.expect("cursor is not positioned")].0
    }

    /// Value at the cursor. Panics if not `valid()`.
    #[allow(
        clippy::expect_used,
        reason = "documented to panic on an unpositioned cursor: callers check valid() first"
    )]
    pub fn value(&self) -> &[u8] {
        &self.batch.entries[self.pos.expect("cursor is not positioned")].1
    }

    /// The value at the cursor moved out to the caller, with no copy (a scan that returns
    /// each value it passes, as the executor's document scans do, would otherwise copy each
    /// one). The cursor stays where it is; if it lands on this entry again it reads the leaf
    /// anew. `None` when not positioned.
    pub fn take_value(&mut self) -> Option<Vec<u8>> {
        let i = self.pos?;
        let word = i / 64;
        if self.taken.len() <= word {
            self.taken.resize(word + 1, 0);
        }
        self.taken[word] |= 1 << (i % 64);
        self.batch
            .entries
            .get_mut(i)
            .map(|(_, v)| std::mem::take(v))
    }

    /// Whether `take_value` moved entry `i`'s value out of the batch in hand.
    fn was_taken(&self, i: usize) -> bool {
        self.taken
            .get(i / 64)
            .is_some_and(|w| w & (1 << (i % 64)) != 0)
    }

    /// The current entry, if any.
    pub fn entry(&self) -> Option<(&[u8], &[u8])> {
        self.pos.map(|i| {
            let (k, v) = &self.batch.entries[i];
            (k.as_slice(), v.as_slice())
        })
    }

    /// Positions at the first entry with key >= `key`.
    pub fn seek(&mut self, key: &[u8]) -> Result<()> {
        if !self.covers(key) {
            self.fetch(Target::Containing(key.to_vec()))?;
        }
        let i = self
            .batch
            .entries
            .partition_point(|(k, _)| k.as_slice() < key);
        self.settle_forward(i)
    }

    /// Positions at the last entry with key <= `key`.
    pub fn seek_for_prev(&mut self, key: &[u8]) -> Result<()> {
        if !self.covers(key) {
            self.fetch(Target::Containing(key.to_vec()))?;
        }
        let i = self
            .batch
            .entries
            .partition_point(|(k, _)| k.as_slice() <= key);
        self.settle_backward(i)
    }

    /// Positions at the first entry.
    pub fn seek_to_first(&mut self) -> Result<()> {
        self.fetch(Target::First)?;
        self.settle_forward(0)
    }

    /// Positions at the last entry.
    pub fn seek_to_last(&mut self) -> Result<()> {
        self.fetch(Target::Last)?;
        let n = self.batch.entries.len();
        self.settle_backward(n)
    }

    /// Moves to the next entry (invalid past the last).
    #[expect(
        clippy::should_implement_trait,
        reason = "a positioned cursor, not an iterator: next() can fail"
    )]
    pub fn next(&mut self) -> Result<()> {
        #[allow(
            clippy::expect_used,
            reason = "documented to panic on an unpositioned cursor: callers check valid() first"
        )]
        let i = self.pos.expect("next on an unpositioned cursor");
        self.settle_forward(i + 1)
    }

    /// Moves to the previous entry (invalid before the first).
    pub fn prev(&mut self) -> Result<()> {
        #[allow(
            clippy::expect_used,
            reason = "documented to panic on an unpositioned cursor: callers check valid() first"
        )]
        let i = self.pos.expect("prev on an unpositioned cursor");
        self.settle_backward(i)
    }

    /// True when the batch in hand holds `key`'s range `[lo, hi)`: it was read as of this
    /// cursor's snapshot, which does not change, so a seek inside it needs no new read (a
    /// scan over many nearby ranges, such as an `$in` through an index, reads each leaf once).
    fn covers(&self, key: &[u8]) -> bool {
        self.fetched
            && self.batch.lo.as_deref().is_none_or(|lo| lo <= key)
            && self.batch.hi.as_deref().is_none_or(|hi| key < hi)
    }

    fn fetch(&mut self, target: Target) -> Result<()> {
        let ts = self.snapshot.ts();
        let upper = self.upper.as_deref();
        self.batch = self
            .tree
            .with_read(|t, st| t.scan_leaf(st, &target, ts, upper))?;
        self.fetched = true;
        self.taken.clear();
        Ok(())
    }

    /// Lands on entry `i` of the batch, or on the first entry of later leaves.
    fn settle_forward(&mut self, mut i: usize) -> Result<()> {
        loop {
            if i < self.batch.entries.len() && self.was_taken(i) {
                let key = self.batch.entries[i].0.clone();
                self.fetch(Target::Containing(key.clone()))?;
                i = self.batch.entries.partition_point(|(k, _)| *k < key);
                continue;
            }
            if i < self.batch.entries.len() {
                self.pos = Some(i);
                return Ok(());
            }
            let Some(hi) = self.batch.hi.clone() else {
                self.pos = None;
                return Ok(());
            };
            self.fetch(Target::Containing(hi.clone()))?;
            // A concurrent merge may hand back a leaf that starts before `hi`.
            i = self.batch.entries.partition_point(|(k, _)| *k < hi);
        }
    }

    /// Lands on the entry before index `i`, or on the last entry of earlier leaves.
    fn settle_backward(&mut self, mut i: usize) -> Result<()> {
        loop {
            if i > 0 && self.was_taken(i - 1) {
                let key = self.batch.entries[i - 1].0.clone();
                self.fetch(Target::Containing(key.clone()))?;
                i = self.batch.entries.partition_point(|(k, _)| *k <= key);
                continue;
            }
            if i > 0 {
                self.pos = Some(i - 1);
                return Ok(());
            }
            let Some(lo) = self.batch.lo.clone() else {
                self.pos = None;
                return Ok(());
            };
            self.fetch(Target::Before(lo.clone()))?;
            i = self.batch.entries.partition_point(|(k, _)| *k < lo);
        }
    }
}
