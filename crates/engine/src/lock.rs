//! The data directory lock: one process owns an environment at a time (`flock` on `LOCK`,
//! released by the kernel when the process dies, so a crash never leaves a stale lock).

use crate::{Error, Result};
use std::fs::{File, OpenOptions};
use std::os::unix::io::AsRawFd;
use std::path::Path;

/// Holds the directory lock for as long as it lives.
#[derive(Debug)]
pub struct DirLock {
    _file: File,
}

impl DirLock {
    /// Takes the lock on `dir/LOCK`, failing at once if another process holds it.
    pub fn acquire(dir: &Path) -> Result<Self> {
        let path = dir.join("LOCK");
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|source| Error::os(&path, "open", source))?;
        // SAFETY: the fd is valid for the life of `file`.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
                return Err(Error::Locked(dir.to_owned()));
            }
            return Err(Error::os(&path, "flock", e));
        }
        Ok(DirLock { _file: file })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_lock_in_another_descriptor_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let _held = DirLock::acquire(dir.path()).expect("first");
        // flock locks are per open file description, so a second open conflicts.
        assert!(matches!(
            DirLock::acquire(dir.path()),
            Err(Error::Locked(_))
        ));
    }
}
