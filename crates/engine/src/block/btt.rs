//! The block translation table (BTT): node id -> extent, as held in memory (the D, C and L
//! maps of `mod.rs`) and as serialized into its own copy-on-write extent at a checkpoint
//! (B4). This module owns the serialized format and its checked decoding, and the one
//! question the invariants ask of a map: does it reference a given extent (B2)?

use super::allocator::{alloc_len, DATA_START};
use super::{Extent, NodeId};
use crate::bytes::Reader;
use shale_io::PAGE_SIZE;
use std::collections::BTreeMap;

/// A translation map. Sorted by node id, which is the serialized order.
pub(crate) type Btt = BTreeMap<NodeId, Extent>;

/// Serialized size of one entry: node id u64, offset u64, len u32, crc32c u32.
pub(crate) const ENTRY_SIZE: usize = 24;

/// True when `map` maps `id` to exactly `ext`. Extents are never shared between nodes (each
/// write allocates a fresh one, B1), so this is "does `map` reference `ext`" (B2).
pub(crate) fn references(map: &Btt, id: NodeId, ext: &Extent) -> bool {
    map.get(&id) == Some(ext)
}

/// The serialized table: u64 entry count, then the entries in node id order.
pub(crate) fn encode(map: &Btt) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + map.len() * ENTRY_SIZE);
    out.extend_from_slice(&(map.len() as u64).to_le_bytes());
    for (id, e) in map {
        out.extend_from_slice(&id.0.to_le_bytes());
        out.extend_from_slice(&e.offset.to_le_bytes());
        out.extend_from_slice(&e.len.to_le_bytes());
        out.extend_from_slice(&e.crc.to_le_bytes());
    }
    out
}

/// Decodes a serialized table, checking its shape: exact length, strictly increasing
/// non-zero node ids, extents page-aligned in the data area. (Whether extents overlap or fit
/// in the file is checked by the caller, which knows the file.) Never panics on bad input.
pub(crate) fn decode(bytes: &[u8]) -> Result<Btt, String> {
    let mut r = Reader::new(bytes);
    let count = r.u64()?;
    usize::try_from(count)
        .ok()
        .and_then(|c| c.checked_mul(ENTRY_SIZE))
        .filter(|&n| n == r.remaining())
        .ok_or_else(|| {
            format!(
                "entry count {count} does not match the {} bytes of entries",
                r.remaining()
            )
        })?;
    let mut map = Btt::new();
    let mut prev = 0u64;
    for i in 0..count {
        let id = r.u64()?;
        let offset = r.u64()?;
        let len = r.u32()?;
        let crc = r.u32()?;
        if id == 0 || id <= prev {
            return Err(format!(
                "entry {i}: node id {id} is zero or not above the previous id {prev}"
            ));
        }
        if offset < DATA_START || !offset.is_multiple_of(PAGE_SIZE as u64) {
            return Err(format!(
                "entry {i}: node {id} has an unaligned or header offset {offset}"
            ));
        }
        if offset.checked_add(alloc_len(u64::from(len))).is_none() {
            return Err(format!(
                "entry {i}: node {id} extent {offset}+{len} overflows"
            ));
        }
        prev = id;
        map.insert(NodeId(id), Extent { offset, len, crc });
    }
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, RngCore, SeedableRng};

    fn sample(n: u64) -> Btt {
        (1..=n)
            .map(|i| {
                (
                    NodeId(i * 3),
                    Extent {
                        offset: DATA_START + i * 4096 * 2,
                        len: (i * 1000) as u32,
                        crc: (i as u32).wrapping_mul(0x9e37_79b9),
                    },
                )
            })
            .collect()
    }

    #[test]
    fn round_trip() {
        for n in [0, 1, 2, 100] {
            let map = sample(n);
            let enc = encode(&map);
            assert_eq!(enc.len(), 8 + ENTRY_SIZE * n as usize);
            assert_eq!(decode(&enc), Ok(map));
        }
    }

    #[test]
    fn references_needs_the_same_extent() {
        let map = sample(3);
        let e = map[&NodeId(3)];
        assert!(references(&map, NodeId(3), &e));
        assert!(!references(&map, NodeId(6), &e));
        let moved = Extent {
            offset: e.offset + 4096,
            ..e
        };
        assert!(!references(&map, NodeId(3), &moved));
    }

    #[test]
    fn shape_errors_are_reported() {
        let enc = encode(&sample(3));
        // Truncated, extended, or count not matching.
        assert!(decode(&enc[..enc.len() - 1]).is_err());
        let mut longer = enc.clone();
        longer.push(0);
        assert!(decode(&longer).is_err());
        let mut huge = enc.clone();
        huge[..8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(decode(&huge).unwrap_err().contains("entry count"));
        assert!(decode(&[]).is_err());
        // Unsorted ids.
        let mut unsorted = enc.clone();
        unsorted[8 + ENTRY_SIZE..16 + ENTRY_SIZE].copy_from_slice(&1u64.to_le_bytes());
        assert!(decode(&unsorted).unwrap_err().contains("not above"));
        // Node id zero.
        let mut zero = enc.clone();
        zero[8..16].copy_from_slice(&0u64.to_le_bytes());
        assert!(decode(&zero).is_err());
        // Offsets in the header area or unaligned.
        let mut header = enc.clone();
        header[16..24].copy_from_slice(&4096u64.to_le_bytes());
        assert!(decode(&header).unwrap_err().contains("offset"));
        let mut unaligned = enc;
        unaligned[16..24].copy_from_slice(&(DATA_START + 7).to_le_bytes());
        assert!(decode(&unaligned).is_err());
    }

    #[test]
    fn garbage_never_panics() {
        let seed: u64 = rand::thread_rng().gen();
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let good = encode(&sample(20));
        for i in 0..5000 {
            let mut buf = if i % 2 == 0 {
                let mut b = vec![0u8; rng.gen_range(0..600)];
                rng.fill_bytes(&mut b);
                if b.len() >= 8 && rng.gen_bool(0.5) {
                    // A plausible count so decoding gets past the length check.
                    let count = ((b.len() - 8) / ENTRY_SIZE) as u64;
                    b[..8].copy_from_slice(&count.to_le_bytes());
                    b.truncate(8 + count as usize * ENTRY_SIZE);
                }
                b
            } else {
                let mut b = good.clone();
                for _ in 0..rng.gen_range(1..4) {
                    let at = rng.gen_range(0..b.len());
                    b[at] = rng.gen();
                }
                b
            };
            if rng.gen_bool(0.2) {
                let cut = rng.gen_range(0..=buf.len());
                buf.truncate(cut);
            }
            let result = std::panic::catch_unwind(|| decode(&buf));
            assert!(
                result.is_ok(),
                "decode panicked; seed {seed}, iteration {i}"
            );
        }
    }
}
