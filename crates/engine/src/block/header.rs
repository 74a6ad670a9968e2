//! The two 4 KiB header slots of a block file (at offsets 0 and 4096): their byte format,
//! encoding and checked decoding, and the bounds-checked little-endian reader that the BTT
//! decoder shares. A header names one durable checkpoint (B4, B9); see
//! `docs/format-blockfile.md` for the byte layout.

use crate::bytes::Reader;
use shale_io::PAGE_SIZE;

/// `b"SHALETRE"`: the first eight bytes of both header slots.
pub(crate) const MAGIC: &[u8; 8] = b"SHALETRE";
/// Format version written by this code and the only one it reads.
pub(crate) const VERSION: u32 = 1;
/// Largest caller metadata blob a header carries.
pub(crate) const MAX_META: usize = 1024;
/// Size of one header slot.
pub(crate) const SLOT_SIZE: usize = PAGE_SIZE;
/// Bytes before the metadata blob: magic 8, version 4, seq 8, root 8, next id 8, BTT offset
/// 8, BTT length 8, BTT crc 4, LSN 8, metadata length 4.
const FIXED: usize = 68;

/// File offset of header slot `slot` (0 or 1).
pub(crate) fn slot_offset(slot: u8) -> u64 {
    assert!(slot < 2, "header slot {slot}");
    u64::from(slot) * SLOT_SIZE as u64
}

/// Slot that checkpoint `seq` is written into.
pub(crate) fn slot_of(seq: u64) -> u8 {
    (seq % 2) as u8
}

/// One decoded header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Header {
    pub(crate) seq: u64,
    pub(crate) root: u64,
    pub(crate) next_node_id: u64,
    pub(crate) btt_offset: u64,
    pub(crate) btt_len: u64,
    pub(crate) btt_crc: u32,
    pub(crate) lsn: u64,
    pub(crate) meta: Vec<u8>,
}

impl Header {
    /// The header's bytes (at most `FIXED + MAX_META + 4`, well under one slot), ending with
    /// the crc32c of everything before it.
    pub(crate) fn encode(&self) -> Vec<u8> {
        assert!(self.meta.len() <= MAX_META, "header metadata too large");
        let mut out = Vec::with_capacity(FIXED + self.meta.len() + 4);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&self.seq.to_le_bytes());
        out.extend_from_slice(&self.root.to_le_bytes());
        out.extend_from_slice(&self.next_node_id.to_le_bytes());
        out.extend_from_slice(&self.btt_offset.to_le_bytes());
        out.extend_from_slice(&self.btt_len.to_le_bytes());
        out.extend_from_slice(&self.btt_crc.to_le_bytes());
        out.extend_from_slice(&self.lsn.to_le_bytes());
        out.extend_from_slice(&(self.meta.len() as u32).to_le_bytes());
        out.extend_from_slice(&self.meta);
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        debug_assert!(out.len() <= SLOT_SIZE);
        out
    }

    /// Decodes the contents of slot `slot`. Every failure is a reason string (the caller
    /// wraps it in a corruption error naming the slot); nothing here panics on bad input.
    pub(crate) fn decode(bytes: &[u8], slot: u8) -> Result<Header, String> {
        let mut r = Reader::new(bytes);
        let magic = r.take(8)?;
        if magic != MAGIC {
            return Err(format!("bad magic {magic:02x?}"));
        }
        let version = r.u32()?;
        if version != VERSION {
            return Err(format!("unsupported format version {version}"));
        }
        let seq = r.u64()?;
        let root = r.u64()?;
        let next_node_id = r.u64()?;
        let btt_offset = r.u64()?;
        let btt_len = r.u64()?;
        let btt_crc = r.u32()?;
        let lsn = r.u64()?;
        let meta_len = r.u32()? as usize;
        if meta_len > MAX_META {
            return Err(format!(
                "metadata length {meta_len} exceeds the limit of {MAX_META}"
            ));
        }
        let meta = r.take(meta_len)?.to_vec();
        let covered = r.pos();
        let stored = r.u32()?;
        let computed = crc32c::crc32c(&bytes[..covered]);
        if stored != computed {
            return Err(format!(
                "checksum mismatch: expected {stored:#010x} found {computed:#010x}"
            ));
        }
        if slot_of(seq) != slot {
            return Err(format!("checkpoint {seq} does not belong in slot {slot}"));
        }
        if next_node_id == 0 || (root != 0 && root >= next_node_id) {
            return Err(format!(
                "root node {root} is not below the next node id {next_node_id}"
            ));
        }
        Ok(Header {
            seq,
            root,
            next_node_id,
            btt_offset,
            btt_len,
            btt_crc,
            lsn,
            meta,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, RngCore, SeedableRng};

    fn sample(seq: u64) -> Header {
        Header {
            seq,
            root: 7,
            next_node_id: 42,
            btt_offset: 3 * 4096,
            btt_len: 8 + 24 * 5,
            btt_crc: 0xdead_beef,
            lsn: 123_456_789,
            meta: b"tree options".to_vec(),
        }
    }

    #[test]
    fn round_trip_in_a_zero_padded_slot() {
        for seq in [0u64, 1, 2, 77, u64::MAX] {
            let h = sample(seq);
            let mut slot = vec![0u8; SLOT_SIZE];
            let enc = h.encode();
            slot[..enc.len()].copy_from_slice(&enc);
            assert_eq!(Header::decode(&slot, slot_of(seq)), Ok(h.clone()));
            assert!(Header::decode(&slot, 1 - slot_of(seq)).is_err());
        }
    }

    #[test]
    fn largest_metadata_fits_and_larger_is_rejected() {
        let mut h = sample(4);
        h.meta = vec![0xab; MAX_META];
        let enc = h.encode();
        assert!(enc.len() <= SLOT_SIZE);
        assert_eq!(Header::decode(&enc, 0), Ok(h));
        // A length field above the limit is corruption even with a matching crc.
        let mut bad = enc.clone();
        bad[64..68].copy_from_slice(&(MAX_META as u32 + 1).to_le_bytes());
        let err = Header::decode(&bad, 0).unwrap_err();
        assert!(err.contains("exceeds"), "{err}");
    }

    #[test]
    fn every_single_bit_flip_is_detected() {
        let enc = sample(2).encode();
        for bit in 0..enc.len() * 8 {
            let mut bad = enc.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            assert!(Header::decode(&bad, 0).is_err(), "bit {bit} flip accepted");
        }
    }

    #[test]
    fn wrong_version_and_magic_are_named() {
        let mut h = sample(2).encode();
        h[8] = 2;
        let len = h.len();
        let crc = crc32c::crc32c(&h[..len - 4]);
        h[len - 4..].copy_from_slice(&crc.to_le_bytes());
        assert!(Header::decode(&h, 0).unwrap_err().contains("version 2"));
        assert!(Header::decode(&[0u8; SLOT_SIZE], 0)
            .unwrap_err()
            .contains("magic"));
    }

    #[test]
    fn garbage_never_panics() {
        let seed: u64 = rand::thread_rng().gen();
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let good = sample(6).encode();
        for i in 0..5000 {
            let mut buf = if i % 2 == 0 {
                let mut b = vec![0u8; rng.gen_range(0..SLOT_SIZE)];
                rng.fill_bytes(&mut b);
                if b.len() >= 8 {
                    b[..8].copy_from_slice(MAGIC);
                }
                b
            } else {
                good.clone()
            };
            // Corrupt a few random bytes and maybe truncate.
            for _ in 0..rng.gen_range(1..4) {
                if !buf.is_empty() {
                    let at = rng.gen_range(0..buf.len());
                    buf[at] = rng.gen();
                }
            }
            let cut = rng.gen_range(0..=buf.len());
            if rng.gen_bool(0.3) {
                buf.truncate(cut);
            }
            let result = std::panic::catch_unwind(|| Header::decode(&buf, 0));
            assert!(
                result.is_ok(),
                "decode panicked; seed {seed}, iteration {i}"
            );
        }
    }
}
