//! `Slot`: one basement position of a cached leaf, loaded or evicted.
//!
//! A slot is filled in two ways. Code that changes the leaf (flushes, splits, decoding a
//! whole node) holds the tree's exclusive lock and sets slots like an `Option`. A point read
//! or a scan that read an evicted basement from disk installs it holding only the shared
//! lock (`Slot::fill`, in `load.rs`): with every reader taking the exclusive lock to install
//! what it read, readers queued behind each other's installs, and the lock's spinning and
//! futex waits were ~10% of an uncached point read's CPU at 4 readers (docs/benchmarks.md,
//! "Engine, mid-size A/Bs: sector-aligned reads, installs under the shared lock, ...").
//!
//! Invariant (L1): a slot is emptied or replaced only under the exclusive lock, so a
//! reference to a loaded basement taken under the shared lock stays valid while that lock
//! is held, and a slot filled under the shared lock is only ever filled from empty (the
//! first of two racing readers wins; the other's copy is dropped, not charged).

use super::basement::Basement;
use std::sync::OnceLock;

/// A basement position of a leaf: `None`-like when evicted (read it back through the
/// leaf's descriptor), or the loaded basement.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Slot(OnceLock<Basement>);

impl Slot {
    /// A loaded slot.
    pub fn loaded(b: Basement) -> Self {
        Slot(OnceLock::from(b))
    }

    /// An evicted (empty) slot.
    pub fn empty() -> Self {
        Slot(OnceLock::new())
    }

    pub fn as_ref(&self) -> Option<&Basement> {
        self.0.get()
    }

    pub fn as_mut(&mut self) -> Option<&mut Basement> {
        self.0.get_mut()
    }

    pub fn is_some(&self) -> bool {
        self.0.get().is_some()
    }

    pub fn is_none(&self) -> bool {
        self.0.get().is_none()
    }

    /// Empties the slot (exclusive lock), returning what it held.
    pub fn take(&mut self) -> Option<Basement> {
        self.0.take()
    }

    /// Empties the slot if its basement satisfies `pred` (exclusive lock).
    pub fn take_if(&mut self, pred: impl FnOnce(&mut Basement) -> bool) -> Option<Basement> {
        if pred(self.0.get_mut()?) {
            self.0.take()
        } else {
            None
        }
    }

    /// Fills an empty slot holding only the shared lock (L1): true if `b` went in, false
    /// if another reader filled it first.
    pub fn fill(&self, b: Basement) -> bool {
        self.0.set(b).is_ok()
    }
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
        self.0.get().into_iter()
    }
}

impl<'a> IntoIterator for &'a mut Slot {
    type Item = &'a mut Basement;
    type IntoIter = std::option::IntoIter<&'a mut Basement>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.get_mut().into_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_fills_once_from_empty_and_empties_only_by_take() {
        let s = Slot::empty();
        assert!(s.is_none());
        assert!(s.fill(Basement::new()));
        assert!(
            !s.fill(Basement::new()),
            "the second reader's copy is refused"
        );
        assert!(s.is_some());
        let mut s = s;
        assert!(s.take_if(|_| false).is_none());
        assert!(s.take_if(|_| true).is_some());
        assert!(s.is_none() && s.take().is_none());
        assert_eq!(Slot::from(Some(Basement::new())).into_iter().count(), 1);
    }
}
