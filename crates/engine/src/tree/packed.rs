//! Little-endian reads of partition bytes that were checked when they were read from disk
//! or written in memory: a basement's (`basement.rs`, P1) or a buffer's (`buffer.rs`, Q1).
//! They index without checking again, which those invariants allow.

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

    #[test]
    fn reads_little_endian() {
        let b = [0, 1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 1];
        assert_eq!(u32_at(&b, 1), 1);
        assert_eq!(u64_at(&b, 5), 2 + (1 << 56));
    }
}
