//! Compression and checksums of node partitions: one codec per partition, recorded in the
//! partition's descriptor, and a CRC-32C over the compressed bytes as stored.

use crate::{Compression, DEFAULT_ZSTD_LEVEL};
use parking_lot::Mutex;

// zstd contexts are kept between calls (creating a decompression context per partition
// read was 2% of uncached point reads' CPU), in two pools every thread shares rather than
// one per thread: zstd allocates its contexts itself, with the C allocator, outside the
// Rust heap and the cache's charge (94 KiB to decompress; 213 KiB to compress 16 KiB, 569 KiB
// for 4 MiB), and a context per thread that ever read or wrote a partition — every
// connection's thread — grew with the connections: 11 MiB of the C allocator's arenas under
// 40 soak clients, 3 MiB with the pools (docs/operations.md, Memory). A thread takes a
// context, uses it and puts it back; one that finds the pool empty makes one; no more than
// `IDLE_CONTEXTS_MAX` wait in a pool, the rest are freed. So the contexts alive are at most
// the threads compressing or decompressing at that moment, plus the idle ones.
static COMPRESSORS: Mutex<Vec<(zstd::bulk::Compressor<'static>, i32)>> = Mutex::new(Vec::new());
static DECOMPRESSORS: Mutex<Vec<zstd::bulk::Decompressor<'static>>> = Mutex::new(Vec::new());

/// The most contexts of each kind a pool keeps while nobody uses them.
const IDLE_CONTEXTS_MAX: usize = 8;

/// Gives a context back to its pool, or frees it when the pool is full.
fn put_back<T>(pool: &Mutex<Vec<T>>, context: T) {
    let mut idle = pool.lock();
    if idle.len() < IDLE_CONTEXTS_MAX {
        idle.push(context);
    }
}

#[allow(
    clippy::expect_used,
    reason = "zstd fails here only on allocation failure, which aborts elsewhere too; levels are range-checked by Compression::zstd"
)]
fn zstd_compress(raw: &[u8], level: i32) -> Vec<u8> {
    let taken = COMPRESSORS.lock().pop();
    // The compressor keeps the level it was last set to: trees of different levels share it.
    let (mut c, mut at) = match taken {
        Some(c) => c,
        None => (
            zstd::bulk::Compressor::new(DEFAULT_ZSTD_LEVEL).expect("a zstd context can be created"),
            DEFAULT_ZSTD_LEVEL,
        ),
    };
    if at != level {
        c.set_compression_level(level)
            .expect("levels are checked by Compression::zstd");
        at = level;
    }
    let out = c
        .compress(raw)
        .expect("zstd compression of memory cannot fail");
    put_back(&COMPRESSORS, (c, at));
    out
}

fn zstd_decompress(stored: &[u8], raw_len: usize) -> Result<Vec<u8>, String> {
    let taken = DECOMPRESSORS.lock().pop();
    let mut d = match taken {
        Some(d) => d,
        None => zstd::bulk::Decompressor::new().map_err(|e| format!("zstd context: {e}"))?,
    };
    let out = d
        .decompress(stored, raw_len)
        .map_err(|e| format!("zstd decompression failed: {e}"));
    put_back(&DECOMPRESSORS, d);
    out
}

/// Compresses `raw` with `codec`.
#[allow(clippy::expect_used, reason = "a zstd codec always has a level")]
pub fn compress(codec: Compression, raw: &[u8]) -> Vec<u8> {
    match codec {
        Compression::None => raw.to_vec(),
        Compression::Lz4 => lz4_flex::block::compress(raw),
        Compression::Zstd | Compression::ZstdLevel(_) => {
            zstd_compress(raw, codec.zstd_level().expect("a zstd codec has a level"))
        }
    }
}

/// Decompresses `stored` (which must decompress to exactly `raw_len` bytes).
pub fn decompress(codec: Compression, stored: &[u8], raw_len: usize) -> Result<Vec<u8>, String> {
    let out = match codec {
        Compression::None => stored.to_vec(),
        Compression::Lz4 => lz4_flex::block::decompress(stored, raw_len)
            .map_err(|e| format!("lz4 decompression failed: {e}"))?,
        Compression::Zstd | Compression::ZstdLevel(_) => zstd_decompress(stored, raw_len)?,
    };
    if out.len() != raw_len {
        return Err(format!(
            "partition decompressed to {} bytes, descriptor says {raw_len}",
            out.len()
        ));
    }
    Ok(out)
}

/// CRC-32C of stored bytes.
pub fn checksum(bytes: &[u8]) -> u32 {
    crc32c::crc32c(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_codec_round_trips() {
        let raw: Vec<u8> = (0..10_000u32)
            .flat_map(|i| (i % 97).to_le_bytes())
            .collect();
        for codec in [Compression::None, Compression::Lz4, Compression::Zstd] {
            let stored = compress(codec, &raw);
            assert_eq!(
                decompress(codec, &stored, raw.len()).expect("round trip"),
                raw
            );
        }
    }

    #[test]
    fn levels_share_one_context_and_decode_alike() {
        let raw: Vec<u8> = (0..50_000u32)
            .flat_map(|i| (i % 1013).to_le_bytes())
            .collect();
        let mut sizes = Vec::new();
        for level in [1, 19, 3, 1] {
            let codec = Compression::zstd(level).expect("a level");
            let stored = compress(codec, &raw);
            // A partition records only the codec: the default-level codec decodes any level.
            assert_eq!(
                decompress(Compression::Zstd, &stored, raw.len()).expect("round trip"),
                raw
            );
            sizes.push(stored.len());
        }
        assert_eq!(sizes[0], sizes[3], "the level is set again on each change");
    }

    #[test]
    fn contexts_are_shared_and_the_idle_ones_bounded() {
        let raw: Vec<u8> = (0..20_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        let stored = compress(Compression::Zstd, &raw);
        std::thread::scope(|s| {
            for _ in 0..3 * IDLE_CONTEXTS_MAX {
                s.spawn(|| {
                    for _ in 0..20 {
                        assert_eq!(compress(Compression::Zstd, &raw), stored);
                        let back = decompress(Compression::Zstd, &stored, raw.len());
                        assert_eq!(back.expect("round trip"), raw);
                    }
                });
            }
        });
        assert!(COMPRESSORS.lock().len() <= IDLE_CONTEXTS_MAX);
        assert!(DECOMPRESSORS.lock().len() <= IDLE_CONTEXTS_MAX);
        assert!(
            !DECOMPRESSORS.lock().is_empty(),
            "contexts are kept for reuse"
        );
    }

    #[test]
    fn wrong_length_is_an_error_not_a_panic() {
        let stored = compress(Compression::Zstd, b"hello hello hello");
        assert!(decompress(Compression::Zstd, &stored, 3).is_err());
        assert!(decompress(Compression::Lz4, b"\xff\xff\xff", 100).is_err());
    }
}
