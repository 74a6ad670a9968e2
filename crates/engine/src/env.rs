//! `Env`: one open data directory. It owns the directory lock and the I/O counters shared by
//! every file in it, and composes trees, cache, log and checkpoints as they are built.

use crate::lock::DirLock;
use crate::{EnvOptions, Error, IoCounters, Result};
use shale_io::IoStats;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// An open environment.
#[derive(Debug)]
pub struct Env {
    dir: PathBuf,
    options: EnvOptions,
    io_stats: Arc<IoStats>,
    _lock: DirLock,
}

impl Env {
    /// Opens (creating if needed) the environment in `dir`, taking its lock.
    pub fn open(dir: impl AsRef<Path>, options: EnvOptions) -> Result<Env> {
        let dir = dir.as_ref().to_owned();
        std::fs::create_dir_all(&dir).map_err(|source| {
            Error::Io(shale_io::Error::Os {
                path: dir.clone(),
                op: "mkdir",
                offset: 0,
                source,
            })
        })?;
        let lock = DirLock::acquire(&dir)?;
        Ok(Env {
            dir,
            options,
            io_stats: Arc::new(IoStats::default()),
            _lock: lock,
        })
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The options the environment was opened with.
    pub fn options(&self) -> &EnvOptions {
        &self.options
    }

    /// A snapshot of the I/O counters of every file in the environment.
    pub fn io_counters(&self) -> IoCounters {
        self.io_stats.snapshot()
    }
}
