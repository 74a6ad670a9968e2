//! A transaction's cursor: the tree as of the transaction's snapshot merged with the
//! transaction's own writes (as they were when the cursor was made). Keys its writes deleted
//! are skipped; keys it updated show the merge callback's result over the snapshot's value.

use crate::tree::msg::MergeFn;
use crate::vocab::Op;
use crate::{Cursor, Result};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dir {
    Forward,
    Backward,
}

/// A position in a tree as a transaction sees it.
pub struct TxnCursor {
    base: Cursor,
    own: BTreeMap<Vec<u8>, Vec<Op>>,
    merge: Arc<MergeFn>,
    current: Option<(Vec<u8>, Vec<u8>)>,
    /// Where `base` stands relative to `current`: on the first key at or after it when going
    /// forward, on the last at or before it going backward.
    dir: Dir,
}

impl TxnCursor {
    pub(crate) fn new(base: Cursor, own: BTreeMap<Vec<u8>, Vec<Op>>, merge: Arc<MergeFn>) -> Self {
        TxnCursor {
            base,
            own,
            merge,
            current: None,
            dir: Dir::Forward,
        }
    }

    /// True when the cursor is at an entry.
    pub fn valid(&self) -> bool {
        self.current.is_some()
    }

    /// Key at the cursor. Panics if not `valid()`.
    #[allow(
        clippy::expect_used,
        reason = "documented to panic on an unpositioned cursor: callers check valid() first"
    )]
    pub fn key(&self) -> &[u8] {
        &self.current.as_ref().expect("cursor is not positioned").0
    }

    /// Value at the cursor. Panics if not `valid()`.
    #[allow(
        clippy::expect_used,
        reason = "documented to panic on an unpositioned cursor: callers check valid() first"
    )]
    pub fn value(&self) -> &[u8] {
        &self.current.as_ref().expect("cursor is not positioned").1
    }

    /// The key and value at the cursor, if it is at one.
    pub fn entry(&self) -> Option<(&[u8], &[u8])> {
        self.current
            .as_ref()
            .map(|(k, v)| (k.as_slice(), v.as_slice()))
    }

    /// The tree cursor's `set_upper_bound`: a forward scan's end, a hint for its reads.
    pub fn set_upper_bound(&mut self, bound: Option<Vec<u8>>) {
        self.base.set_upper_bound(bound);
    }

    /// Positions at the first entry with key >= `key`.
    pub fn seek(&mut self, key: &[u8]) -> Result<()> {
        self.base.seek(key)?;
        self.settle(Dir::Forward, Bound::Included(key.to_vec()))
    }

    /// Positions at the last entry with key <= `key`.
    pub fn seek_for_prev(&mut self, key: &[u8]) -> Result<()> {
        self.base.seek_for_prev(key)?;
        self.settle(Dir::Backward, Bound::Included(key.to_vec()))
    }

    /// Positions at the first entry.
    pub fn seek_to_first(&mut self) -> Result<()> {
        self.base.seek_to_first()?;
        self.settle(Dir::Forward, Bound::Unbounded)
    }

    /// Positions at the last entry.
    pub fn seek_to_last(&mut self) -> Result<()> {
        self.base.seek_to_last()?;
        self.settle(Dir::Backward, Bound::Unbounded)
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
        let (cur, _) = self.current.take().expect("next on an unpositioned cursor");
        if self.dir == Dir::Backward {
            self.base.seek(&cur)?;
        }
        if self.base.valid() && self.base.key() == cur.as_slice() {
            self.base.next()?;
        }
        self.settle(Dir::Forward, Bound::Excluded(cur))
    }

    /// Moves to the previous entry (invalid before the first).
    pub fn prev(&mut self) -> Result<()> {
        #[allow(
            clippy::expect_used,
            reason = "documented to panic on an unpositioned cursor: callers check valid() first"
        )]
        let (cur, _) = self.current.take().expect("prev on an unpositioned cursor");
        if self.dir == Dir::Forward {
            self.base.seek_for_prev(&cur)?;
        }
        if self.base.valid() && self.base.key() == cur.as_slice() {
            self.base.prev()?;
        }
        self.settle(Dir::Backward, Bound::Excluded(cur))
    }

    /// With `base` on the nearest snapshot key within `bound` in direction `dir` (the first
    /// at or after it going forward, the last at or before it going backward), lands on the
    /// nearest key — of the snapshot or of the own writes — that exists for the transaction.
    fn settle(&mut self, dir: Dir, mut bound: Bound<Vec<u8>>) -> Result<()> {
        self.dir = dir;
        loop {
            let own = self.nearest_own(dir, &bound);
            let base = self.base.entry().map(|(k, _)| k.to_vec());
            let Some(key) = nearer(base.as_ref(), own.as_ref(), dir) else {
                self.current = None;
                return Ok(());
            };
            let on_base = base.as_ref() == Some(&key);
            if let Some(v) = self.resolve(&key, on_base) {
                self.current = Some((key, v));
                return Ok(());
            }
            if on_base {
                match dir {
                    Dir::Forward => self.base.next()?,
                    Dir::Backward => self.base.prev()?,
                }
            }
            bound = Bound::Excluded(key);
        }
    }

    /// The own write nearest to `bound` in direction `dir`.
    fn nearest_own(&self, dir: Dir, bound: &Bound<Vec<u8>>) -> Option<Vec<u8>> {
        let mut keys = match dir {
            Dir::Forward => self.own.range((bound.clone(), Bound::Unbounded)),
            Dir::Backward => self.own.range((Bound::Unbounded, bound.clone())),
        };
        let nearest = match dir {
            Dir::Forward => keys.next(),
            Dir::Backward => keys.next_back(),
        };
        nearest.map(|(k, _)| k.clone())
    }

    /// The transaction's value of `key`; `on_base` says `base` stands on it.
    fn resolve(&self, key: &[u8], on_base: bool) -> Option<Vec<u8>> {
        let base = on_base.then(|| self.base.value().to_vec());
        match self.own.get(key) {
            Some(ops) => fold_own(&*self.merge, key, base, ops),
            None => base,
        }
    }
}

/// The nearer of two candidate keys: the smaller going forward, the larger going backward.
fn nearer(a: Option<&Vec<u8>>, b: Option<&Vec<u8>>, dir: Dir) -> Option<Vec<u8>> {
    let backward = dir == Dir::Backward;
    match (a, b) {
        (Some(a), Some(b)) => Some(if (a < b) != backward { a } else { b }.clone()),
        (Some(x), None) | (None, Some(x)) => Some(x.clone()),
        (None, None) => None,
    }
}

/// Applies a transaction's own operations on `key` to the value its snapshot sees.
pub(crate) fn fold_own(
    merge: &MergeFn,
    key: &[u8],
    base: Option<Vec<u8>>,
    ops: &[Op],
) -> Option<Vec<u8>> {
    ops.iter().fold(base, |cur, op| {
        crate::tree::msg::apply(merge, key, cur, op.as_op_ref())
    })
}
