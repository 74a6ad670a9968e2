//! What ShaleDB's tests share, so that each is written once: the seeded xorshift PRNG their
//! random operations come from (`rng.rs`), the counting allocator that allocation and memory
//! tests install as the global allocator (`alloc.rs`), and the tiny engine options that make
//! every tree path (flush, split, merge, eviction) run in a small test (`engine.rs`).
//!
//! Only ever a dev-dependency: nothing here is fit for production code.

#![warn(missing_docs)]

mod alloc;
mod engine;
mod rng;

pub use alloc::{
    allocations_during, allocations_on_this_thread, live_bytes, size_class, CountingAlloc,
};
pub use engine::{tiny_engine, tiny_options};
pub use rng::{seeds, Rng};
