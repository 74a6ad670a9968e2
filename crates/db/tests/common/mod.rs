//! What the db crate's integration tests share: the seeded xorshift PRNG their random
//! operations come from (`SHALE_SEED` replays one), and the tiny engine layout they run on,
//! so that splits, flushes and evictions happen in every test. Each test file includes this
//! module and uses the part it needs.
#![allow(dead_code)]

use shale_db::DbOptions;
use shale_engine::{EnvOptions, FsyncPolicy, TreeOptions};

/// Xorshift64: small, seeded, the same sequence on every machine.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// True with a probability of `pct` percent.
    pub fn chance(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }
}

/// Engine options with tiny nodes (`TreeOptions::tiny`), a cache of `cache_bytes`, no
/// background checkpoints and buffered I/O.
pub fn tiny_engine(cache_bytes: usize, fsync: FsyncPolicy) -> EnvOptions {
    EnvOptions {
        tree_defaults: TreeOptions::tiny(),
        cache_bytes,
        fsync,
        checkpoint_interval: None,
        direct_io: false,
        ..EnvOptions::default()
    }
}

/// Database options over `tiny_engine`, every other option at its default.
pub fn tiny_db(cache_bytes: usize, fsync: FsyncPolicy) -> DbOptions {
    DbOptions {
        engine: tiny_engine(cache_bytes, fsync),
        ..DbOptions::default()
    }
}
