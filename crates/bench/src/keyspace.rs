//! The key/value data of the engine workload: 16-byte keys whose first 8 bytes are the
//! big-endian key number (so byte order is numeric order), a memory-free pseudo-random
//! permutation of `0..n` (a Feistel network with cycle walking) for random insertion order,
//! and a pool of semi-compressible bytes (about half of every 32-byte run is random, the
//! rest repeats it) that values are sliced from.

use rand::rngs::StdRng;
use rand::{RngCore, SeedableRng};

/// Bytes of every key.
pub const KEY_BYTES: usize = 16;

/// SplitMix64's finalizer: a cheap, well-mixed 64-bit hash.
pub fn mix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// The key of number `i`: big-endian `i`, then a big-endian hash of `i` as a suffix.
pub fn key(i: u64) -> [u8; KEY_BYTES] {
    let mut k = [0u8; KEY_BYTES];
    k[..8].copy_from_slice(&i.to_be_bytes());
    k[8..].copy_from_slice(&mix64(i).to_be_bytes());
    k
}

/// A bijection of `0..n` onto itself, computed per element without storing it.
#[derive(Debug, Clone)]
pub struct Permutation {
    n: u64,
    half_bits: u32,
    mask: u64,
    round_keys: [u64; 4],
}

impl Permutation {
    /// A permutation of `0..n` (`n >= 1`) chosen by `seed`.
    pub fn new(n: u64, seed: u64) -> Self {
        assert!(n >= 1, "a permutation needs a non-empty domain");
        let bits = 64 - (n - 1).leading_zeros();
        let half_bits = bits.div_ceil(2).max(1);
        let mut round_keys = [0u64; 4];
        for (r, k) in round_keys.iter_mut().enumerate() {
            *k = mix64(seed ^ mix64(r as u64 + 1));
        }
        Permutation {
            n,
            half_bits,
            mask: (1u64 << half_bits) - 1,
            round_keys,
        }
    }

    /// The image of `i < n`. The Feistel network permutes a power-of-two domain of at most
    /// 4n elements; images outside `0..n` are mapped again until they land inside, which
    /// keeps the restriction to `0..n` a bijection.
    pub fn apply(&self, i: u64) -> u64 {
        assert!(i < self.n, "{i} is outside 0..{}", self.n);
        let mut x = i;
        loop {
            x = self.feistel(x);
            if x < self.n {
                return x;
            }
        }
    }

    fn feistel(&self, x: u64) -> u64 {
        let mut left = x >> self.half_bits;
        let mut right = x & self.mask;
        for &k in &self.round_keys {
            let next = left ^ (mix64(right ^ k) & self.mask);
            left = right;
            right = next;
        }
        (left << self.half_bits) | right
    }
}

/// Semi-compressible bytes that values are sliced from.
#[derive(Debug, Clone)]
pub struct ValuePool {
    bytes: Vec<u8>,
    value_bytes: usize,
}

impl ValuePool {
    /// A pool for values of `value_bytes` bytes, filled from `seed`.
    pub fn new(value_bytes: usize, seed: u64) -> Self {
        let len = (1usize << 20).max(2 * value_bytes) + value_bytes;
        let mut rng = StdRng::seed_from_u64(seed);
        let mut bytes = vec![0u8; len.next_multiple_of(32)];
        for run in bytes.chunks_exact_mut(32) {
            let (fresh, repeat) = run.split_at_mut(16);
            rng.fill_bytes(fresh);
            repeat.copy_from_slice(fresh);
        }
        bytes.truncate(len);
        ValuePool { bytes, value_bytes }
    }

    /// The value stored under key number `i`.
    pub fn value(&self, i: u64) -> &[u8] {
        let span = (self.bytes.len() - self.value_bytes + 1) as u64;
        let start = (mix64(i ^ 0x5EED) % span) as usize;
        &self.bytes[start..start + self.value_bytes]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permutation_is_a_bijection() {
        for n in [1u64, 2, 3, 7, 64, 1000, 4097] {
            let p = Permutation::new(n, 42);
            let mut seen = vec![false; n as usize];
            for i in 0..n {
                let j = p.apply(i);
                assert!(!seen[j as usize], "n={n}: {j} hit twice");
                seen[j as usize] = true;
            }
        }
    }

    #[test]
    fn permutation_shuffles() {
        let p = Permutation::new(10_000, 7);
        let fixed = (0..10_000).filter(|&i| p.apply(i) == i).count();
        assert!(fixed < 100, "{fixed} fixed points");
    }

    #[test]
    fn keys_sort_by_number() {
        assert!(key(1) < key(2));
        assert!(key(255) < key(256));
        assert!(key(u64::MAX - 1) < key(u64::MAX));
    }

    #[test]
    fn values_have_the_requested_size_and_are_stable() {
        let pool = ValuePool::new(100, 1);
        assert_eq!(pool.value(5).len(), 100);
        assert_eq!(pool.value(5), ValuePool::new(100, 1).value(5));
        let big = ValuePool::new(3 << 20, 1);
        assert_eq!(big.value(9).len(), 3 << 20);
    }
}
