//! Key filters for evicted message buffers: a Bloom filter over the keys of one segment of
//! an internal node's buffer (or of the whole buffer, written as one segment), so a point
//! lookup whose key the buffer cannot hold skips the buffer's read.
//!
//! Without them, a lookup at 10x cache reads, besides its basement, the buffer of every
//! evicted internal node on its path (0.76 buffer reads per lookup in the quick engine
//! benchmark); with 10 bits per key and 7 probes about 1% of those reads remain.
//!
//! Since node format 6 the filters are part of an internal node's image (`docs/format-node.md`,
//! "Filter table"): written with the node, read with its header, so a node's skeleton has
//! them from its first load. Before, they lived in memory only, built when eviction dropped a
//! loaded buffer or segment, so a buffer only ever read one segment at a time gained its
//! filters one segment per lookup: at full size (37 million keys, 0.16 buffered messages per
//! key) 0.26 buffer reads per get where 0.16 needed one. Eviction still builds a filter for a
//! buffer whose node was written before format 6. The hash and the probe sequence are
//! therefore part of the format: `stored_filters_are_stable` pins them.
//!
//! A filter stays valid while its node is clean and not fully loaded, which cannot change
//! (N3): loading the buffer back keeps the filter for the next eviction (rebuilding it hashed
//! every key of the buffer, 6% of uncached point reads' CPU), and every change first loads
//! the node whole, which drops the filters (N4 in `node.rs`).

use crate::bytes::Reader;

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
        let mut words = vec![0u64; words_for(count)].into_boxed_slice();
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

    /// Bytes `put` writes for a filter of `count` keys, or `put_none` for none.
    pub fn stored_len(count: usize) -> usize {
        4 + if count == 0 { 0 } else { 8 * words_for(count) }
    }

    /// Appends the stored form: u32 word count, then the words (little-endian u64s).
    pub fn put(&self, out: &mut Vec<u8>) {
        #[allow(
            clippy::expect_used,
            reason = "a filter of one segment's keys has far fewer than 2^32 words"
        )]
        let n = u32::try_from(self.words.len()).expect("filter word count");
        out.extend_from_slice(&n.to_le_bytes());
        for w in &self.words {
            out.extend_from_slice(&w.to_le_bytes());
        }
    }

    /// Appends the stored form of no filter (an empty segment).
    pub fn put_none(out: &mut Vec<u8>) {
        out.extend_from_slice(&0u32.to_le_bytes());
    }

    /// Reads a stored filter (`None`: none stored), refusing a word count the bytes left
    /// cannot hold.
    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Option<KeyFilter>, String> {
        let n = r.u32()? as usize;
        if n == 0 {
            return Ok(None);
        }
        if n > r.remaining() / 8 {
            return Err(format!("key filter of {n} words past the header's end"));
        }
        let words = (0..n).map(|_| r.u64()).collect::<Result<Box<[u64]>, _>>()?;
        Ok(Some(KeyFilter { words }))
    }
}

/// Words of a filter sized for `count` keys.
fn words_for(count: usize) -> usize {
    (count * BITS_PER_KEY).max(64).div_ceil(64)
}

/// The bit positions of `key`: double hashing of one 64-bit hash (Kirsch and Mitzenmacher).
fn probes(key: &[u8], nbits: u64) -> impl Iterator<Item = u64> {
    let h = hash(key);
    let (h1, h2) = (h & 0xffff_ffff, (h >> 32) | 1);
    (0..PROBES as u64).map(move |i| h1.wrapping_add(i.wrapping_mul(h2)) % nbits)
}

/// A 64-bit hash of `key` for the filter: a multiply-xorshift over 8-byte words and the
/// length, finished with MurmurHash3's 64-bit mixer (`docs/format-node.md` gives it step by
/// step: stored filters depend on it, so it must not change without a format version). It
/// replaced SipHash, whose per-call setup made building filters 2% of uncached point reads'
/// CPU.
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
    fn stored_filters_read_back_and_are_stable() {
        let keys: Vec<Vec<u8>> = (0..300).map(key).collect();
        let f = KeyFilter::build(keys.len(), keys.iter().map(Vec::as_slice));
        let mut out = Vec::new();
        f.put(&mut out);
        KeyFilter::put_none(&mut out);
        assert_eq!(
            out.len(),
            KeyFilter::stored_len(300) + KeyFilter::stored_len(0)
        );
        let mut r = Reader::new(&out);
        assert_eq!(KeyFilter::read(&mut r).expect("read"), Some(f.clone()));
        assert_eq!(KeyFilter::read(&mut r).expect("read"), None);
        assert_eq!(r.remaining(), 0);
        // The hash and probes are part of node format 6: these values must not change.
        assert_eq!(hash(b""), 0);
        assert_eq!(hash(b"key-00000001"), 0x3ea8_b04f_49b4_6f83);
        let bits: Vec<u64> = probes(b"key-00000001", 3008).collect();
        assert_eq!(bits, [67, 786, 1505, 2224, 2943, 654, 1373]);
    }

    #[test]
    fn a_word_count_past_the_end_is_refused() {
        let mut out = Vec::new();
        out.extend_from_slice(&3u32.to_le_bytes());
        out.extend_from_slice(&[0u8; 16]);
        assert!(KeyFilter::read(&mut Reader::new(&out)).is_err());
        assert!(KeyFilter::read(&mut Reader::new(&[1, 0])).is_err());
    }

    #[test]
    fn an_empty_filter_holds_nothing() {
        let f = KeyFilter::build(0, std::iter::empty());
        assert!(!f.may_contain(b"anything"));
        assert_eq!(f.bytes(), 8);
    }
}
