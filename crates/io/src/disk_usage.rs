//! How much disk a directory tree occupies: the one measure every "bytes on disk" figure of
//! the engine and the benchmarks uses, so that figures compared side by side count alike;
//! and how large the file system holding a path is (`statvfs`, what `dbStats` reports).

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The size of a file system and what of it an unprivileged writer may still use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsSpace {
    /// The file system's size.
    pub total_bytes: u64,
    /// What an unprivileged writer may still use (`f_bavail`).
    pub available_bytes: u64,
}

/// `statvfs` of the file system holding `path` (as boost's `space()`, which mongod's
/// `dbStats` uses: capacity is blocks x fragment size, available is what non-root may use).
pub fn fs_space(path: &Path) -> std::io::Result<FsSpace> {
    let c_path = CString::new(path.as_os_str().as_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    // SAFETY: `statvfs` is plain old data, so all-zero bytes are a valid value.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c_path` is a NUL-terminated string and `st` a valid out-pointer for the call.
    let rc = unsafe { libc::statvfs(c_path.as_ptr(), &mut st) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // 64-bit on the Linux targets ShaleDB builds for.
    let (fragment, blocks, available): (u64, u64, u64) = (st.f_frsize, st.f_blocks, st.f_bavail);
    Ok(FsSpace {
        total_bytes: blocks.saturating_mul(fragment),
        available_bytes: available.saturating_mul(fragment),
    })
}

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
    fn a_file_system_has_a_size_and_a_missing_path_has_none() {
        let dir = tempfile::tempdir().expect("tempdir");
        let space = fs_space(dir.path()).expect("statvfs");
        assert!(space.total_bytes > 0);
        assert!(space.available_bytes <= space.total_bytes);
        assert!(fs_space(&dir.path().join("missing")).is_err());
    }

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
