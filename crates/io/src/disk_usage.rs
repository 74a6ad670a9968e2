//! How much disk a directory tree occupies: the one measure every "bytes on disk" figure of
//! the engine and the benchmarks uses, so that figures compared side by side count alike.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Bytes allocated on disk by every file under `dir`, recursively (`st_blocks` x 512, so
/// holes count nothing and a partly filled last block counts whole). 0 for a directory that
/// cannot be read.
pub fn dir_disk_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_disk_bytes(&e.path()),
            Ok(m) => m.blocks() * 512,
            Err(_) => 0,
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_allocated_blocks_recursively() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(dir_disk_bytes(dir.path()), 0);
        std::fs::write(dir.path().join("a"), vec![1u8; 10_000]).expect("write a");
        std::fs::create_dir(dir.path().join("sub")).expect("mkdir");
        std::fs::write(dir.path().join("sub/b"), vec![2u8; 5_000]).expect("write b");
        let bytes = dir_disk_bytes(dir.path());
        // Each file takes whole blocks: at least its length, less than one extra 64 KiB.
        assert!((15_000..15_000 + 2 * 65_536).contains(&bytes), "{bytes}");
        assert_eq!(dir_disk_bytes(&dir.path().join("missing")), 0);
    }
}
