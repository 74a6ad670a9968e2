//! Tiny engine options for tests: nodes small enough that a few hundred keys split, flush,
//! merge and evict, and no background checkpoints, so a test decides when one happens.

use shale_engine::{EnvOptions, FsyncPolicy, TreeOptions};

/// Tiny nodes (`TreeOptions::tiny`), a cache of `cache_bytes`, no background checkpoints;
/// every other option at its default.
pub fn tiny_options(cache_bytes: usize) -> EnvOptions {
    EnvOptions {
        cache_bytes,
        tree_defaults: TreeOptions::tiny(),
        checkpoint_interval: None,
        ..EnvOptions::default()
    }
}

/// `tiny_options` with the fsync policy `fsync` and buffered I/O (the database's tests).
pub fn tiny_engine(cache_bytes: usize, fsync: FsyncPolicy) -> EnvOptions {
    EnvOptions {
        fsync,
        direct_io: false,
        ..tiny_options(cache_bytes)
    }
}
