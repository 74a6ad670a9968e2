//! `Slot`: one basement position of a cached leaf, loaded or evicted.
//!
//! A slot is filled in two ways. Code that changes the leaf (flushes, splits, decoding a
//! whole node) holds the tree's exclusive lock and sets slots like an `Option`. A point read
//! or a scan that read an evicted basement from disk installs it holding only the shared
//! lock (`Slot::fill`, in `load.rs`): with every reader taking the exclusive lock to install
//! what it read, readers queued behind each other's installs, and the lock's spinning and
//! futex waits were ~10% of an uncached point read's CPU at 4 readers (docs/bench/history/
//! 2026-11-26-engine-mid-size-aligned-reads-shared-lock-installs-compression-runs.md).
//!
//! A basement written in segments (node format 5, `segment.rs`) may also hold, while it is
//! evicted, the segments point reads read alone (its **pieces**): a lookup reads the one
//! segment that holds its key, not the whole basement.
//!
//! Invariant (L1): a slot, and each of its pieces, is emptied or replaced only under the
//! exclusive lock, so a reference to a loaded basement or piece taken under the shared lock
//! stays valid while that lock is held, and what is filled under the shared lock is only
//! ever filled from empty (the first of two racing readers wins; the other's copy is
//! dropped, not charged).

use super::basement::Basement;
use std::sync::OnceLock;

/// A basement position of a leaf: `None`-like when evicted (read it back through the
/// leaf's descriptor), or the loaded basement; and the segments of it read alone. The
/// basement is boxed: a skeleton leaf holds a slot per basement, evicted, and an inline
/// basement made each 104 bytes instead of 40.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Slot(OnceLock<Box<Basement>>, Pieces);

/// Memory of a loaded basement's box.
const BOX_BYTES: usize = super::node::alloc_bytes(std::mem::size_of::<Basement>());

/// Segments of an evicted basement read alone, one place per segment of its table
/// (`Leaf::tables`, N6); allocated by the first segment read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Pieces(OnceLock<Box<[OnceLock<Basement>]>>);

impl Slot {
    /// A loaded slot.
    pub fn loaded(b: Basement) -> Self {
        Slot(OnceLock::from(Box::new(b)), Pieces::default())
    }

    /// An evicted (empty) slot.
    pub fn empty() -> Self {
        Slot(OnceLock::new(), Pieces::default())
    }

    /// Segment `s` of the basement, if it was read alone and is still held.
    pub fn piece(&self, s: usize) -> Option<&Basement> {
        self.1 .0.get()?.get(s)?.get()
    }

    /// Whether any segment read alone is held.
    pub fn has_pieces(&self) -> bool {
        self.1
             .0
            .get()
            .is_some_and(|p| p.iter().any(|x| x.get().is_some()))
    }

    /// How many segments the held pieces were read for (0: none were).
    pub fn piece_count(&self) -> usize {
        self.1 .0.get().map_or(0, |p| p.len())
    }

    /// Fills segment `s` of `count`, read alone, holding only the shared lock (L1): the
    /// bytes it adds to the leaf's charge (`pieces_mem_bytes`), or `None` if another
    /// reader filled it first or the pieces were read for another table.
    pub fn fill_piece(&self, count: usize, s: usize, b: Basement) -> Option<usize> {
        let mut added = 0;
        if self.1 .0.get().is_none() {
            let places: Box<[OnceLock<Basement>]> = (0..count).map(|_| OnceLock::new()).collect();
            if self.1 .0.set(places).is_ok() {
                added += places_bytes(count);
            }
        }
        let places = self.1 .0.get()?;
        if places.len() != count {
            return None;
        }
        let bytes = b.mem_bytes();
        places.get(s)?.set(b).ok()?;
        Some(added + bytes)
    }

    /// Drops every piece (exclusive lock), returning the memory they held.
    pub fn take_pieces(&mut self) -> usize {
        let freed = self.pieces_mem_bytes();
        self.1 = Pieces::default();
        freed
    }

    /// Memory the pieces hold: their places and the segments loaded in them.
    pub fn pieces_mem_bytes(&self) -> usize {
        self.1 .0.get().map_or(0, |p| {
            places_bytes(p.len())
                + p.iter()
                    .filter_map(OnceLock::get)
                    .map(Basement::mem_bytes)
                    .sum::<usize>()
        })
    }

    /// The pieces held, each `Some` where its segment is loaded (for checks).
    pub fn pieces(&self) -> impl Iterator<Item = Option<&Basement>> {
        self.1
             .0
            .get()
            .into_iter()
            .flat_map(|p| p.iter().map(OnceLock::get))
    }

    pub fn as_ref(&self) -> Option<&Basement> {
        self.0.get().map(|b| &**b)
    }

    pub fn as_mut(&mut self) -> Option<&mut Basement> {
        self.0.get_mut().map(|b| &mut **b)
    }

    /// Memory the slot holds besides its own place: the loaded basement and its box, and
    /// the pieces (part of `Node::mem_bytes`).
    pub fn mem_bytes(&self) -> usize {
        self.as_ref().map_or(0, |b| b.mem_bytes() + BOX_BYTES) + self.pieces_mem_bytes()
    }

    /// Drops the pieces, and the basement if it holds entries (an empty one costs nothing
    /// to keep and needs no read), under the exclusive lock; returns the memory freed.
    pub fn evict(&mut self) -> usize {
        let mut freed = self.take_pieces();
        if let Some(b) = self.take_if(|b| b.len() > 0) {
            freed += b.mem_bytes() + BOX_BYTES;
        }
        freed
    }

    pub fn is_some(&self) -> bool {
        self.0.get().is_some()
    }

    pub fn is_none(&self) -> bool {
        self.0.get().is_none()
    }

    /// Empties the slot (exclusive lock), returning what it held. The pieces stay.
    pub fn take(&mut self) -> Option<Basement> {
        self.0.take().map(|b| *b)
    }

    /// Empties the slot if its basement satisfies `pred` (exclusive lock).
    pub fn take_if(&mut self, pred: impl FnOnce(&mut Basement) -> bool) -> Option<Basement> {
        if pred(self.as_mut()?) {
            self.take()
        } else {
            None
        }
    }

    /// Fills an empty slot holding only the shared lock (L1): the bytes it adds to the
    /// leaf's charge, or `None` if another reader filled it first.
    pub fn fill(&self, b: Basement) -> Option<usize> {
        let bytes = b.mem_bytes() + BOX_BYTES;
        self.0.set(Box::new(b)).ok().map(|()| bytes)
    }
}

/// Memory of the places for `count` pieces.
fn places_bytes(count: usize) -> usize {
    super::node::alloc_bytes(count * std::mem::size_of::<OnceLock<Basement>>())
}

impl From<Option<Basement>> for Slot {
    fn from(b: Option<Basement>) -> Self {
        b.map_or_else(Slot::empty, Slot::loaded)
    }
}

impl<'a> IntoIterator for &'a Slot {
    type Item = &'a Basement;
    type IntoIter = std::option::IntoIter<&'a Basement>;
    fn into_iter(self) -> Self::IntoIter {
        self.as_ref().into_iter()
    }
}

impl<'a> IntoIterator for &'a mut Slot {
    type Item = &'a mut Basement;
    type IntoIter = std::option::IntoIter<&'a mut Basement>;
    fn into_iter(self) -> Self::IntoIter {
        self.as_mut().into_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_fills_once_from_empty_and_empties_only_by_take() {
        let s = Slot::empty();
        assert!(s.is_none());
        assert_eq!(s.fill(Basement::new()), Some(s.mem_bytes()));
        assert!(
            s.fill(Basement::new()).is_none(),
            "the second reader's copy is refused"
        );
        assert!(s.is_some());
        let mut s = s;
        assert!(s.take_if(|_| false).is_none());
        assert!(s.take_if(|_| true).is_some());
        assert!(s.is_none() && s.take().is_none());
        assert_eq!(Slot::from(Some(Basement::new())).into_iter().count(), 1);
    }

    #[test]
    fn pieces_fill_once_each_and_go_together() {
        let mut s = Slot::empty();
        assert!(!s.has_pieces() && s.piece(1).is_none() && s.pieces_mem_bytes() == 0);
        let added = s.fill_piece(4, 1, Basement::new()).expect("first fill");
        assert_eq!(added, s.pieces_mem_bytes());
        assert!(s.fill_piece(4, 1, Basement::new()).is_none(), "filled once");
        assert!(
            s.fill_piece(3, 2, Basement::new()).is_none(),
            "another table"
        );
        assert!(
            s.fill_piece(4, 4, Basement::new()).is_none(),
            "no such segment"
        );
        assert!(s.has_pieces() && s.piece(1).is_some() && s.piece(0).is_none());
        assert_eq!((s.piece_count(), s.pieces().flatten().count()), (4, 1));
        assert_eq!(s.take_pieces(), added);
        assert!(!s.has_pieces() && s.piece_count() == 0);
    }
}
