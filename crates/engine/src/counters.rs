//! Engine counters beyond raw I/O: tree work (flushes, splits, merges), cache behaviour and
//! the log. Readable as one plain struct, `EngineCounters`.

use crate::IoCounters;
use std::sync::atomic::{AtomicU64, Ordering};

/// Live counters, shared by an environment's trees.
#[derive(Debug, Default)]
pub struct EngineStats {
    pub(crate) flushes: AtomicU64,
    pub(crate) messages_flushed: AtomicU64,
    pub(crate) messages_injected: AtomicU64,
    pub(crate) messages_promoted: AtomicU64,
    pub(crate) abort_messages: AtomicU64,
    pub(crate) leaf_splits: AtomicU64,
    pub(crate) internal_splits: AtomicU64,
    pub(crate) leaf_merges: AtomicU64,
    pub(crate) internal_merges: AtomicU64,
    pub(crate) nodes_written: AtomicU64,
    pub(crate) nodes_read: AtomicU64,
    pub(crate) basements_read: AtomicU64,
    pub(crate) basement_read_bytes: AtomicU64,
    pub(crate) buffers_read: AtomicU64,
    pub(crate) buffer_read_bytes: AtomicU64,
    pub(crate) headers_read: AtomicU64,
    pub(crate) checkpoints: AtomicU64,
    pub(crate) commits: AtomicU64,
    pub(crate) backpressure_waits: AtomicU64,
    pub(crate) writer_flush_units: AtomicU64,
    pub(crate) versions_retained: AtomicU64,
    pub(crate) versions_collected: AtomicU64,
    pub(crate) txn_commits: AtomicU64,
    pub(crate) txn_aborts: AtomicU64,
    pub(crate) write_conflicts: AtomicU64,
}

impl EngineStats {
    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Records what applying versions to leaf entries kept (`retained` older versions) and
    /// collected (dropped, no snapshot can see them).
    pub(crate) fn count_versions(&self, retained: u64, collected: u64) {
        if retained > 0 {
            self.versions_retained
                .fetch_add(retained, Ordering::Relaxed);
        }
        if collected > 0 {
            self.versions_collected
                .fetch_add(collected, Ordering::Relaxed);
        }
    }
}

/// A snapshot of every engine counter.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EngineCounters {
    /// I/O by category, padding included.
    pub io: IoCounters,
    /// The cache's byte budget.
    pub cache_budget_bytes: u64,
    /// Bytes charged to the cache now.
    pub cache_used_bytes: u64,
    /// The most bytes ever charged to the cache.
    pub cache_peak_bytes: u64,
    /// Node lookups served from the cache.
    pub cache_hits: u64,
    /// Node lookups that had to read.
    pub cache_misses: u64,
    /// Whole nodes evicted.
    pub cache_evictions: u64,
    /// Nodes that shed partitions but stayed cached.
    pub cache_partial_evictions: u64,
    /// How far the heap governor has lowered the cache's working limit below the budget.
    pub cache_shrink_bytes: u64,
    /// Times the governor had the allocator return freed pages, and the bytes it returned.
    pub heap_releases: u64,
    /// Bytes those releases returned.
    pub heap_released_bytes: u64,
    /// The allocator's resident bytes at the governor's last reading (0 without a probe).
    pub heap_resident_bytes: u64,
    /// Buffer flushes from a parent to a child.
    pub flushes: u64,
    /// Messages moved down by those flushes.
    pub messages_flushed: u64,
    /// Messages added at tree roots: one per write of a batch or a transaction (a
    /// transaction's commit adds none), and one per key of an aborted transaction.
    pub messages_injected: u64,
    /// Abort messages among them (docs/transactions.md, "Provisional versions").
    pub abort_messages: u64,
    /// Messages applied straight to a leaf they append to, skipping the buffers above it
    /// (`tree/promote.rs`): counted in `messages_injected` too, never in `messages_flushed`.
    pub messages_promoted: u64,
    /// Leaves split.
    pub leaf_splits: u64,
    /// Internal nodes split.
    pub internal_splits: u64,
    /// Leaves merged into a sibling.
    pub leaf_merges: u64,
    /// Internal nodes merged into a sibling.
    pub internal_merges: u64,
    /// Node images written (checkpoints and eviction).
    pub nodes_written: u64,
    /// Whole nodes read.
    pub nodes_read: u64,
    /// Leaf basements read alone (partial loads).
    pub basements_read: u64,
    /// Device bytes of those basement reads (page-aligned extents).
    pub basement_read_bytes: u64,
    /// Internal-node message buffers read alone (partial loads).
    pub buffers_read: u64,
    /// Device bytes of those buffer reads.
    pub buffer_read_bytes: u64,
    /// Node headers read alone (a node known by its pivots and descriptors only).
    pub headers_read: u64,
    /// Checkpoints completed.
    pub checkpoints: u64,
    /// Log commits (batches and transactions).
    pub commits: u64,
    /// Writes that waited for the flusher because a root's buffers were over-full.
    pub backpressure_waits: u64,
    /// Flush units run by writers while they waited out backpressure (`Tree::help_flush`).
    pub writer_flush_units: u64,
    /// Transactions begun and not yet committed or aborted.
    pub active_txns: u64,
    /// Registered snapshots (transactions and cursors).
    pub open_snapshots: u64,
    /// Age of the oldest registered snapshot in milliseconds (0 with none).
    pub oldest_snapshot_age_ms: u64,
    /// Transactions committed.
    pub txn_commits: u64,
    /// Transactions aborted.
    pub txn_aborts: u64,
    /// Writes refused with `WriteConflict`.
    pub write_conflicts: u64,
    /// Older versions kept in leaf entries because a snapshot could still see them, minus
    /// those collected since (since open: a gauge of what open snapshots cost).
    pub versions_retained: u64,
    /// Older versions kept, ever (since open).
    pub versions_retained_total: u64,
    /// Older versions collected once no snapshot could see them (since open).
    pub versions_collected: u64,
    /// Lock-table entries: held keys plus recent commits a live snapshot could conflict with.
    pub lock_entries: u64,
    /// Transactions in the status table: live ones that wrote, and committed ones whose
    /// timestamp is still above the horizon (T2).
    pub txn_status_entries: u64,
}

/// MVCC figures read from the environment rather than counted.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct MvccGauges {
    pub active_txns: u64,
    pub open_snapshots: u64,
    pub oldest_snapshot_age_ms: u64,
    pub lock_entries: u64,
    pub txn_status_entries: u64,
}

impl EngineCounters {
    pub(crate) fn collect(
        io: IoCounters,
        cache: &crate::cache::Cache,
        s: &EngineStats,
        m: MvccGauges,
    ) -> Self {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let retained = g(&s.versions_retained);
        let collected = g(&s.versions_collected);
        EngineCounters {
            io,
            cache_budget_bytes: cache.budget_bytes() as u64,
            cache_used_bytes: cache.used_bytes() as u64,
            cache_peak_bytes: cache.peak_bytes() as u64,
            cache_hits: g(&cache.hits),
            cache_misses: g(&cache.misses),
            cache_evictions: g(&cache.evictions),
            cache_partial_evictions: g(&cache.partial_evictions),
            cache_shrink_bytes: cache.shrink_bytes() as u64,
            heap_releases: g(&cache.heap_releases),
            heap_released_bytes: g(&cache.heap_released_bytes),
            heap_resident_bytes: g(&cache.heap_resident_bytes),
            flushes: g(&s.flushes),
            messages_flushed: g(&s.messages_flushed),
            messages_injected: g(&s.messages_injected),
            abort_messages: g(&s.abort_messages),
            messages_promoted: g(&s.messages_promoted),
            leaf_splits: g(&s.leaf_splits),
            internal_splits: g(&s.internal_splits),
            leaf_merges: g(&s.leaf_merges),
            internal_merges: g(&s.internal_merges),
            nodes_written: g(&s.nodes_written),
            nodes_read: g(&s.nodes_read),
            basements_read: g(&s.basements_read),
            basement_read_bytes: g(&s.basement_read_bytes),
            buffers_read: g(&s.buffers_read),
            buffer_read_bytes: g(&s.buffer_read_bytes),
            headers_read: g(&s.headers_read),
            checkpoints: g(&s.checkpoints),
            commits: g(&s.commits),
            backpressure_waits: g(&s.backpressure_waits),
            writer_flush_units: g(&s.writer_flush_units),
            active_txns: m.active_txns,
            open_snapshots: m.open_snapshots,
            oldest_snapshot_age_ms: m.oldest_snapshot_age_ms,
            txn_commits: g(&s.txn_commits),
            txn_aborts: g(&s.txn_aborts),
            write_conflicts: g(&s.write_conflicts),
            // Versions read back from disk and collected were counted by an earlier run.
            versions_retained: retained.saturating_sub(collected),
            versions_retained_total: retained,
            versions_collected: collected,
            lock_entries: m.lock_entries,
            txn_status_entries: m.txn_status_entries,
        }
    }
}
