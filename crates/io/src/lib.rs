//! ShaleDB's I/O layer: the only code that touches data files.
//!
//! It owns opening files (O_DIRECT where the filesystem allows it, buffered with readahead
//! disabled otherwise), 4 KiB-aligned buffers, positional reads and writes of exact sizes, and
//! the counters that say what was asked of the operating system, by category, *including*
//! alignment padding, so that they agree with `/proc/self/io`.
//!
//! It must never interpret the bytes it moves: formats belong to the engine.

#![warn(missing_docs)]

mod aligned;
mod counters;
mod disk_usage;
mod error;
mod fault;
mod file;
pub mod proc_io;

pub use aligned::AlignedBuf;
pub use counters::{Category, CategoryCounters, IoCounters, IoStats};
pub use disk_usage::{dir_disk_bytes, fs_space, FsSpace};
pub use error::{Error, Result};
pub use fault::{Fault, FaultInjector};
pub use file::{sync_dir, DataFile, OpenMode, ReadBuf};

/// Every offset and length handed to the OS for a direct file is a multiple of this.
pub const PAGE_SIZE: usize = 4096;

/// Rounds `n` up to the next multiple of [`PAGE_SIZE`].
pub const fn round_up_to_page(n: usize) -> usize {
    n.div_ceil(PAGE_SIZE) * PAGE_SIZE
}

/// Rounds `n` down to a multiple of [`PAGE_SIZE`].
pub const fn round_down_to_page(n: u64) -> u64 {
    n / PAGE_SIZE as u64 * PAGE_SIZE as u64
}

const _: () = assert!(PAGE_SIZE.is_power_of_two());
