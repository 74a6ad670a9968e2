//! The packed form shared by leaf basements (`basement.rs`, P1) and message buffers
//! (`buffer.rs`, Q1): a partition's raw bytes exactly as decompressed from disk, plus the
//! offset where each item starts (an entry of a basement, a key's group of messages in a
//! buffer), read in place.
//!
//! What is the same for both lives here: the offset table, finding an item by key, where an
//! item ends, the memory the form holds, and the little-endian reads of bytes that were
//! validated when they were packed. What an item looks like stays with its owner, which
//! says where an item's key is through [`Layout`].

use super::node::alloc_bytes;
use std::marker::PhantomData;
use std::ops::Range;

/// Where an item's key is, for one kind of partition.
pub(super) trait Layout {
    /// The name `Debug` prints.
    const NAME: &'static str;

    /// The key of the item whose bytes start `item` (and run on to the partition's end).
    /// Called only on validated bytes, so it may index without checking.
    fn key(item: &[u8]) -> &[u8];
}

/// Validated raw bytes and where each item starts, in key order.
pub(super) struct Packed<L> {
    raw: Vec<u8>,
    starts: Vec<u32>,
    layout: PhantomData<L>,
}

impl<L: Layout> Packed<L> {
    /// Bytes whose every item was validated by the owner; `starts` increase and each is
    /// inside `raw`.
    pub fn new(raw: Vec<u8>, starts: Vec<u32>) -> Self {
        debug_assert!(starts.windows(2).all(|w| w[0] < w[1]));
        debug_assert!(starts.last().is_none_or(|&s| (s as usize) < raw.len()));
        Packed {
            raw,
            starts,
            layout: PhantomData,
        }
    }

    pub fn raw(&self) -> &[u8] {
        &self.raw
    }

    /// Number of items.
    pub fn len(&self) -> usize {
        self.starts.len()
    }

    /// Every item's index, in key order.
    pub fn indexes(&self) -> Range<usize> {
        0..self.starts.len()
    }

    /// Where item `i` starts.
    pub fn start(&self, i: usize) -> usize {
        self.starts[i] as usize
    }

    /// Where item `i` ends: where the next starts, or the end of the bytes.
    pub fn end(&self, i: usize) -> usize {
        self.starts
            .get(i + 1)
            .map_or(self.raw.len(), |&s| s as usize)
    }

    /// Item `i`'s key.
    pub fn key(&self, i: usize) -> &[u8] {
        L::key(&self.raw[self.start(i)..])
    }

    /// The item whose key is `key`.
    pub fn find(&self, key: &[u8]) -> Option<usize> {
        self.starts
            .binary_search_by(|&s| L::key(&self.raw[s as usize..]).cmp(key))
            .ok()
    }

    /// The first item whose key is not below `key` (the item count if there is none).
    pub fn lower_bound(&self, key: &[u8]) -> usize {
        self.starts
            .partition_point(|&s| L::key(&self.raw[s as usize..]) < key)
    }

    /// Memory the form holds (what the cache charges for it).
    pub fn mem_bytes(&self) -> usize {
        alloc_bytes(self.raw.capacity())
            + alloc_bytes(self.starts.capacity() * std::mem::size_of::<u32>())
    }
}

impl<L> Clone for Packed<L> {
    fn clone(&self) -> Self {
        Packed {
            raw: self.raw.clone(),
            starts: self.starts.clone(),
            layout: PhantomData,
        }
    }
}

impl<L: Layout> std::fmt::Debug for Packed<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct(L::NAME)
            .field("items", &self.starts.len())
            .field("raw_bytes", &self.raw.len())
            .finish()
    }
}

/// The little-endian `u32` at `at` of validated bytes, as a length or count.
pub(super) fn u32_at(b: &[u8], at: usize) -> usize {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]) as usize
}

/// The little-endian `u64` at `at` of validated bytes.
pub(super) fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Items of a one-byte key length and the key.
    struct Short;

    impl Layout for Short {
        const NAME: &'static str = "Short";
        fn key(item: &[u8]) -> &[u8] {
            &item[1..1 + item[0] as usize]
        }
    }

    fn sample() -> Packed<Short> {
        let mut raw = Vec::new();
        let mut starts = Vec::new();
        for key in [&b"b"[..], b"d", b"dd", b"f"] {
            starts.push(raw.len() as u32);
            raw.push(key.len() as u8);
            raw.extend_from_slice(key);
        }
        Packed::new(raw, starts)
    }

    #[test]
    fn finds_bounds_and_ends_items() {
        let p = sample();
        assert_eq!(p.len(), 4);
        assert_eq!(p.key(2), b"dd");
        assert_eq!((p.start(1), p.end(1)), (2, 4));
        assert_eq!(p.end(3), p.raw().len());
        assert_eq!(p.find(b"dd"), Some(2));
        assert_eq!(p.find(b"c"), None);
        assert_eq!(p.lower_bound(b"d"), 1);
        assert_eq!(p.lower_bound(b"da"), 2);
        assert_eq!(p.lower_bound(b"a"), 0);
        assert_eq!(p.lower_bound(b"z"), 4);
        assert_eq!(format!("{p:?}"), "Short { items: 4, raw_bytes: 9 }");
        assert!(p.mem_bytes() >= 9 + 16);
    }

    #[test]
    fn reads_little_endian() {
        let b = [0, 1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 1];
        assert_eq!(u32_at(&b, 1), 1);
        assert_eq!(u64_at(&b, 5), 2 + (1 << 56));
    }
}
