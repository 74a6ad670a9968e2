//! Key filters for evicted message buffers: a Bloom filter over the keys of one internal
//! node's buffer, built when partial eviction drops the buffer and kept with the node's
//! skeleton, so a point lookup whose key the buffer cannot hold skips the buffer's read.
//!
//! Without it, a lookup at 10x cache reads, besides its basement, the buffer of every
//! evicted internal node on its path (0.76 buffer reads per lookup in the quick engine
//! benchmark); with 10 bits per key and 7 probes about 1% of those reads remain.
//!
//! Filters live in memory only (no on-disk format change): a node read from disk has none
//! until one of its buffers is loaded and evicted again. A filter is valid exactly while its
//! buffer is evicted from a clean node, which cannot change (N3): every change first loads
//! the node whole, which replaces the body and drops the filters.

use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};

/// Bits per key: with `PROBES` probes, about a 1% false-positive rate.
const BITS_PER_KEY: usize = 10;
/// Probes per key (the optimum for 10 bits per key is ln 2 x 10 ~ 7).
const PROBES: u32 = 7;

/// A Bloom filter over a set of keys. No false negatives: a key it was built from is
/// always reported as possibly present.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyFilter {
    words: Box<[u64]>,
}

impl KeyFilter {
    /// A filter holding `keys` (their number sizes it).
    pub fn build<'a>(keys: impl ExactSizeIterator<Item = &'a [u8]>) -> Self {
        let bits = (keys.len() * BITS_PER_KEY).max(64);
        let mut words = vec![0u64; bits.div_ceil(64)].into_boxed_slice();
        let nbits = words.len() as u64 * 64;
        for key in keys {
            for bit in probes(key, nbits) {
                words[(bit / 64) as usize] |= 1 << (bit % 64);
            }
        }
        KeyFilter { words }
    }

    /// False only if `key` was certainly not among the keys the filter was built from.
    pub fn may_contain(&self, key: &[u8]) -> bool {
        let nbits = self.words.len() as u64 * 64;
        probes(key, nbits).all(|bit| self.words[(bit / 64) as usize] & (1 << (bit % 64)) != 0)
    }

    /// Memory the filter holds.
    pub fn bytes(&self) -> usize {
        self.words.len() * 8
    }
}

/// The bit positions of `key`: double hashing of one 64-bit hash (Kirsch and Mitzenmacher).
fn probes(key: &[u8], nbits: u64) -> impl Iterator<Item = u64> {
    let h = BuildHasherDefault::<DefaultHasher>::default().hash_one(key);
    let (h1, h2) = (h & 0xffff_ffff, (h >> 32) | 1);
    (0..PROBES as u64).map(move |i| h1.wrapping_add(i.wrapping_mul(h2)) % nbits)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: u32) -> Vec<u8> {
        format!("key-{i:08}").into_bytes()
    }

    #[test]
    fn every_key_built_from_is_found() {
        let keys: Vec<Vec<u8>> = (0..5000).map(key).collect();
        let f = KeyFilter::build(keys.iter().map(Vec::as_slice));
        assert!(keys.iter().all(|k| f.may_contain(k)));
        assert_eq!(f.bytes(), (5000 * BITS_PER_KEY).div_ceil(64) * 8);
    }

    #[test]
    fn false_positive_rate_is_about_one_percent() {
        let keys: Vec<Vec<u8>> = (0..5000).map(key).collect();
        let f = KeyFilter::build(keys.iter().map(Vec::as_slice));
        let false_hits = (5000..105_000).filter(|&i| f.may_contain(&key(i))).count();
        // Expected ~0.8%; a broken hash or probe sequence lands far above 2%.
        assert!(false_hits < 2000, "{false_hits} false positives in 100000");
    }

    #[test]
    fn an_empty_filter_holds_nothing() {
        let f = KeyFilter::build(std::iter::empty());
        assert!(!f.may_contain(b"anything"));
        assert_eq!(f.bytes(), 8);
    }
}
