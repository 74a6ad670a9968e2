//! Sorted separator keys with a search index: a node's pivots.
//!
//! A search of `Vec<Vec<u8>>` chases one heap pointer per probe and compares through
//! `memcmp`: with 4 MiB leaves of 16 KiB basements that is ~8 cache misses to pick a
//! basement, and picking children, basements and buffer segments was ~7% of a point read's
//! CPU (mid-size read-random profile, docs/bench/history/
//! 2026-11-26-point-find-express-path-cursor-replies-pivot-heads.md). Beside the keys this
//! keeps each
//! key's first 8 bytes as a big-endian `u64` (its **head**, zero-padded), in one contiguous
//! array: a search runs on the heads and compares whole keys only among pivots whose head
//! equals the key's.
//!
//! Invariants:
//! V1. `heads[i] == head(&keys[i])` for every `i` (every change goes through this type's
//!     methods, which keep both arrays in step).
//! V2. heads order as their keys do, ties aside: `head(a) < head(b)` implies `a < b`, and
//!     `a < b` implies `head(a) <= head(b)` (big-endian prefix order; a zero pad sorts a
//!     shorter key before any key it is a prefix of, or ties with it). So every key whose
//!     head is below the key searched for is below it, every key whose head is above is
//!     above, and only equal heads need a whole comparison.

use std::ops::Deref;

/// Sorted keys and their heads (V1). Reads as a slice of keys.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pivots {
    keys: Vec<Vec<u8>>,
    heads: Vec<u64>,
}

/// A key's first 8 bytes, big-endian, zero-padded (V2).
fn head(key: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = key.len().min(8);
    b[..n].copy_from_slice(&key[..n]);
    u64::from_be_bytes(b)
}

impl Deref for Pivots {
    type Target = [Vec<u8>];
    fn deref(&self) -> &[Vec<u8>] {
        &self.keys
    }
}

impl<'a> IntoIterator for &'a Pivots {
    type Item = &'a Vec<u8>;
    type IntoIter = std::slice::Iter<'a, Vec<u8>>;
    fn into_iter(self) -> Self::IntoIter {
        self.keys.iter()
    }
}

impl From<Vec<Vec<u8>>> for Pivots {
    fn from(keys: Vec<Vec<u8>>) -> Pivots {
        let heads = keys.iter().map(|k| head(k)).collect();
        Pivots { keys, heads }
    }
}

impl Pivots {
    pub fn new() -> Pivots {
        Pivots::default()
    }

    /// How many keys are at or below `key` (the slot that holds `key`, N2/S2).
    pub fn count_le(&self, key: &[u8]) -> usize {
        self.count(key, true)
    }

    /// How many keys are below `key`.
    pub fn count_lt(&self, key: &[u8]) -> usize {
        self.count(key, false)
    }

    fn count(&self, key: &[u8], inclusive: bool) -> usize {
        let h = head(key);
        // V2: below `lo` every key is smaller, from `hi` on every key is larger.
        let lo = self.heads.partition_point(|&x| x < h);
        let hi = lo + self.heads[lo..].partition_point(|&x| x == h);
        lo + self.keys[lo..hi].partition_point(|k| match inclusive {
            true => k.as_slice() <= key,
            false => k.as_slice() < key,
        })
    }

    pub fn push(&mut self, key: Vec<u8>) {
        self.heads.push(head(&key));
        self.keys.push(key);
    }

    pub fn insert(&mut self, at: usize, key: Vec<u8>) {
        self.heads.insert(at, head(&key));
        self.keys.insert(at, key);
    }

    pub fn remove(&mut self, at: usize) -> Vec<u8> {
        self.heads.remove(at);
        self.keys.remove(at)
    }

    /// Appends `other`'s keys (which follow this one's).
    pub fn extend(&mut self, other: Pivots) {
        self.heads.extend(other.heads);
        self.keys.extend(other.keys);
    }

    /// Inserts `other`'s keys before key `at`.
    pub fn splice_at(&mut self, at: usize, other: Pivots) {
        self.heads.splice(at..at, other.heads);
        self.keys.splice(at..at, other.keys);
    }

    /// Keys from `at` on, taken off this one.
    pub fn split_off(&mut self, at: usize) -> Pivots {
        Pivots {
            keys: self.keys.split_off(at),
            heads: self.heads.split_off(at),
        }
    }

    /// Memory the index adds to the keys' own (the cache charges it).
    pub fn index_bytes(&self) -> usize {
        self.heads.capacity() * std::mem::size_of::<u64>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn keys() -> impl Strategy<Value = Vec<Vec<u8>>> {
        // Short keys over a small alphabet: shared prefixes, prefixes of each other, zero
        // bytes (which tie with a shorter key's padding) and equal heads are all common.
        prop::collection::btree_set(prop::collection::vec(0u8..3, 0..11), 0..40)
            .prop_map(|s| s.into_iter().collect())
    }

    proptest! {
        #[test]
        fn searches_agree_with_a_plain_search(keys in keys(), probes in prop::collection::vec(prop::collection::vec(0u8..3, 0..11), 1..20)) {
            let p = Pivots::from(keys.clone());
            for k in probes.iter().chain(keys.iter()) {
                prop_assert_eq!(p.count_le(k), keys.partition_point(|x| x <= k));
                prop_assert_eq!(p.count_lt(k), keys.partition_point(|x| x < k));
            }
        }

        #[test]
        fn every_change_keeps_the_heads_in_step(keys in keys(), at in 0usize..40) {
            let mut p = Pivots::from(keys.clone());
            let at = at.min(p.len());
            let right = p.split_off(at);
            prop_assert_eq!(&right[..], &keys[at..]);
            let mut back = Pivots::new();
            back.extend(p.clone());
            back.extend(right.clone());
            prop_assert_eq!(&back, &Pivots::from(keys.clone()));
            let mut spliced = right;
            spliced.splice_at(0, p);
            prop_assert_eq!(&spliced, &Pivots::from(keys.clone()));
            if !keys.is_empty() {
                let i = at.min(keys.len() - 1);
                let k = spliced.remove(i);
                spliced.insert(i, k);
                spliced.push(vec![9; 12]);
                let mut want = keys.clone();
                want.push(vec![9; 12]);
                prop_assert_eq!(&spliced, &Pivots::from(want));
            }
        }
    }
}
