//! The I/O layer's error type. It reports what the OS (or the fault injector) said, with the
//! file, operation and offset; it never judges content, so it has no corruption variant: a
//! short read is reported as such and the engine decides what it means.

use std::path::PathBuf;

/// Result of an I/O-layer operation.
pub type Result<T> = std::result::Result<T, Error>;

/// What went wrong talking to the OS.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The OS returned an error.
    #[error("{op} on {} at offset {offset}: {source}", path.display())]
    Os {
        /// The file.
        path: PathBuf,
        /// The operation that failed (`pread`, `fsync`, ...).
        op: &'static str,
        /// Where in the file.
        offset: u64,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// The fault injector failed this operation on purpose (tests only).
    #[error("injected fault: {op} on {} at offset {offset}", path.display())]
    Injected {
        /// The file.
        path: PathBuf,
        /// The operation the injector failed.
        op: &'static str,
        /// Where in the file.
        offset: u64,
    },
    /// The file ended before the requested extent did.
    #[error("short read on {} at offset {offset}: wanted {wanted} bytes, file has {got}", path.display())]
    ShortRead {
        /// The file.
        path: PathBuf,
        /// Where the read started.
        offset: u64,
        /// Bytes asked for.
        wanted: usize,
        /// Bytes the read returned from `offset` on.
        got: usize,
    },
}

impl Error {
    /// The OS said the device is full (ENOSPC) or the quota is used up (EDQUOT).
    pub fn is_out_of_space(&self) -> bool {
        match self {
            Error::Os { source, .. } => {
                matches!(
                    source.raw_os_error(),
                    Some(libc::ENOSPC) | Some(libc::EDQUOT)
                )
            }
            _ => false,
        }
    }

    /// The file the error is about.
    pub fn path(&self) -> &std::path::Path {
        match self {
            Error::Os { path, .. }
            | Error::Injected { path, .. }
            | Error::ShortRead { path, .. } => path,
        }
    }
}
