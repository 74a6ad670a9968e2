//! Helpers shared by the engine's integration tests: the seeds a randomized test runs with,
//! and the tiny configuration that makes every tree path (flush, split, merge, eviction) run.

#![allow(
    dead_code,
    reason = "every test binary compiles this module and uses only part of it"
)]

use shale_engine::{EnvOptions, TreeOptions};

/// `SHALE_SEED` alone when set (to replay a failure), else `default_count` random seeds.
pub fn seeds(default_count: usize) -> Vec<u64> {
    match std::env::var("SHALE_SEED") {
        Ok(s) => vec![s.parse().expect("SHALE_SEED is a number")],
        Err(_) => (0..default_count).map(|_| rand::random()).collect(),
    }
}

/// Tiny nodes, a cache of `cache_bytes`, and no background checkpoints.
pub fn tiny_options(cache_bytes: usize) -> EnvOptions {
    EnvOptions {
        cache_bytes,
        tree_defaults: TreeOptions::tiny(),
        checkpoint_interval: None,
        ..EnvOptions::default()
    }
}
