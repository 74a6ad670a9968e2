//! Helpers shared by the engine's integration tests: the seeds a randomized test runs with,
//! and the tiny configuration that makes every tree path (flush, split, merge, eviction) run,
//! both from `shale-testkit`.

#![allow(
    dead_code,
    unused_imports,
    reason = "every test binary compiles this module and uses only part of it"
)]

pub use shale_testkit::{seeds, tiny_options};
