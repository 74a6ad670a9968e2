//! Key filters for evicted message buffers: a Bloom filter over the keys of one internal
//! node's buffer, built when partial eviction drops the buffer and kept with the node's
//! skeleton, so a point lookup whose key the buffer cannot hold skips the buffer's read.
//!
//! Without it, a lookup at 10x cache reads, besides its basement, the buffer of every
//! evicted internal node on its path (0.76 buffer reads per lookup in the quick engine
//! benchmark); with 10 bits per key and 7 probes about 1% of those reads remain.
//!
//! Filters live in memory only (no on-disk format change): a node read from disk has none
//! until one of its buffers is loaded and evicted again. A filter stays valid while its node
//! is clean and not fully loaded, which cannot change (N3): loading the buffer back keeps
//! the filter for the next eviction (rebuilding it hashed every key of the buffer, 6% of
//! uncached point reads' CPU), and every change first loads the node whole, which drops the
//! filters (N4 in `node.rs`).

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
    /// A filter holding `keys`, sized for `count` of them (the number `keys` yields).
    pub fn build<'a>(count: usize, keys: impl Iterator<Item = &'a [u8]>) -> Self {
        let bits = (count * BITS_PER_KEY).max(64);
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
    let h = hash(key);
    let (h1, h2) = (h & 0xffff_ffff, (h >> 32) | 1);
    (0..PROBES as u64).map(move |i| h1.wrapping_add(i.wrapping_mul(h2)) % nbits)
}

/// A 64-bit hash of `key` for the filter: a multiply-xorshift over 8-byte words and the
/// length, finished with MurmurHash3's 64-bit mixer. In memory only, so it may change
/// freely; it replaced SipHash, whose per-call setup made building filters (every buffer
/// eviction hashes every key of the buffer) 2% of uncached point reads' CPU.
fn hash(key: &[u8]) -> u64 {
    const M: u64 = 0x9E37_79B9_7F4A_7C15;
    let mix = |h: u64, w: u64| {
        let h = (h ^ w).wrapping_mul(M);
        h ^ (h >> 32)
    };
    let mut h = (key.len() as u64).wrapping_mul(M);
    let mut words = key.chunks_exact(8);
    for w in &mut words {
        let mut a = [0u8; 8];
        a.copy_from_slice(w);
        h = mix(h, u64::from_le_bytes(a));
    }
    let rest = words.remainder();
    if !rest.is_empty() {
        let mut a = [0u8; 8];
        a[..rest.len()].copy_from_slice(rest);
        h = mix(h, u64::from_le_bytes(a));
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
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
        let f = KeyFilter::build(keys.len(), keys.iter().map(Vec::as_slice));
        assert!(keys.iter().all(|k| f.may_contain(k)));
        assert_eq!(f.bytes(), (5000 * BITS_PER_KEY).div_ceil(64) * 8);
    }

    #[test]
    fn false_positive_rate_is_about_one_percent() {
        let keys: Vec<Vec<u8>> = (0..5000).map(key).collect();
        let f = KeyFilter::build(keys.len(), keys.iter().map(Vec::as_slice));
        let false_hits = (5000..105_000).filter(|&i| f.may_contain(&key(i))).count();
        // Expected ~0.8%; a broken hash or probe sequence lands far above 2%.
        assert!(false_hits < 2000, "{false_hits} false positives in 100000");
    }

    #[test]
    fn binary_keys_differing_in_one_byte_spread_too() {
        // The engine benchmark's keys: 16 bytes, a big-endian counter at the end.
        let key = |i: u64| [[0u8; 8], i.to_be_bytes()].concat();
        let keys: Vec<_> = (0..5000).map(key).collect();
        let f = KeyFilter::build(keys.len(), keys.iter().map(Vec::as_slice));
        assert!((0..5000).all(|i| f.may_contain(&key(i))));
        let false_hits = (5000..105_000).filter(|&i| f.may_contain(&key(i))).count();
        assert!(false_hits < 2000, "{false_hits} false positives in 100000");
    }

    #[test]
    fn an_empty_filter_holds_nothing() {
        let f = KeyFilter::build(0, std::iter::empty());
        assert!(!f.may_contain(b"anything"));
        assert_eq!(f.bytes(), 8);
    }
}
