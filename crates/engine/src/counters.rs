//! Engine counters beyond raw I/O: tree work (flushes, splits, merges), cache behaviour and
//! the log. Readable as one plain struct, `EngineCounters`.

use crate::IoCounters;
use std::sync::atomic::{AtomicU64, Ordering};

/// Live counters, shared by an environment's trees.
#[derive(Debug, Default)]
pub struct EngineStats {
    pub(crate) flushes: AtomicU64,
    pub(crate) messages_flushed: AtomicU64,
    pub(crate) leaf_splits: AtomicU64,
    pub(crate) internal_splits: AtomicU64,
    pub(crate) leaf_merges: AtomicU64,
    pub(crate) internal_merges: AtomicU64,
    pub(crate) nodes_written: AtomicU64,
    pub(crate) nodes_read: AtomicU64,
    pub(crate) basements_read: AtomicU64,
    pub(crate) buffers_read: AtomicU64,
    pub(crate) headers_read: AtomicU64,
    pub(crate) checkpoints: AtomicU64,
    pub(crate) commits: AtomicU64,
    pub(crate) backpressure_waits: AtomicU64,
}

impl EngineStats {
    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// A snapshot of every engine counter.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EngineCounters {
    pub io: IoCounters,
    pub cache_budget_bytes: u64,
    pub cache_used_bytes: u64,
    pub cache_peak_bytes: u64,
    pub cache_hits: u64,
    pub cache_misses: u64,
    pub cache_evictions: u64,
    pub cache_partial_evictions: u64,
    pub flushes: u64,
    pub messages_flushed: u64,
    pub leaf_splits: u64,
    pub internal_splits: u64,
    pub leaf_merges: u64,
    pub internal_merges: u64,
    pub nodes_written: u64,
    pub nodes_read: u64,
    /// Leaf basements read alone (partial loads).
    pub basements_read: u64,
    /// Internal-node message buffers read alone (partial loads).
    pub buffers_read: u64,
    /// Node headers read alone (a node known by its pivots and descriptors only).
    pub headers_read: u64,
    pub checkpoints: u64,
    pub commits: u64,
    pub backpressure_waits: u64,
}

impl EngineCounters {
    pub(crate) fn collect(io: IoCounters, cache: &crate::cache::Cache, s: &EngineStats) -> Self {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        EngineCounters {
            io,
            cache_budget_bytes: cache.budget_bytes() as u64,
            cache_used_bytes: cache.used_bytes() as u64,
            cache_peak_bytes: cache.peak_bytes() as u64,
            cache_hits: g(&cache.hits),
            cache_misses: g(&cache.misses),
            cache_evictions: g(&cache.evictions),
            cache_partial_evictions: g(&cache.partial_evictions),
            flushes: g(&s.flushes),
            messages_flushed: g(&s.messages_flushed),
            leaf_splits: g(&s.leaf_splits),
            internal_splits: g(&s.internal_splits),
            leaf_merges: g(&s.leaf_merges),
            internal_merges: g(&s.internal_merges),
            nodes_written: g(&s.nodes_written),
            nodes_read: g(&s.nodes_read),
            basements_read: g(&s.basements_read),
            buffers_read: g(&s.buffers_read),
            headers_read: g(&s.headers_read),
            checkpoints: g(&s.checkpoints),
            commits: g(&s.commits),
            backpressure_waits: g(&s.backpressure_waits),
        }
    }
}
