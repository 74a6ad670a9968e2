//! What the engine benchmark reports of the cache's contents after read-random: the
//! engine's `CacheMix` (bytes of the tree's cached nodes by kind) as the JSON carries it,
//! and its line in the report.

use serde::Serialize;

/// `shale_engine::CacheMix` as the JSON carries it (bytes by kind of what the cache held).
#[derive(Debug, Clone, Copy, Serialize)]
pub(super) struct CacheMixBytes {
    leaves: u64,
    internals: u64,
    leaf_skeleton_bytes: u64,
    leaf_entry_bytes: u64,
    internal_skeleton_bytes: u64,
    buffer_bytes: u64,
    segment_bytes: u64,
    filter_bytes: u64,
}

impl From<shale_engine::CacheMix> for CacheMixBytes {
    fn from(m: shale_engine::CacheMix) -> Self {
        CacheMixBytes {
            leaves: m.leaves,
            internals: m.internals,
            leaf_skeleton_bytes: m.leaf_skeleton_bytes,
            leaf_entry_bytes: m.leaf_entry_bytes,
            internal_skeleton_bytes: m.internal_skeleton_bytes,
            buffer_bytes: m.buffer_bytes,
            segment_bytes: m.segment_bytes,
            filter_bytes: m.filter_bytes,
        }
    }
}

impl CacheMixBytes {
    /// One line for the report.
    pub(super) fn line(&self) -> String {
        let mib = |b: u64| format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64);
        format!(
            "cache held {} leaves ({} skeleton, {} entries) and {} internal nodes ({} skeleton, \
             {} whole buffers, {} buffer segments, {} filters)",
            self.leaves,
            mib(self.leaf_skeleton_bytes),
            mib(self.leaf_entry_bytes),
            self.internals,
            mib(self.internal_skeleton_bytes),
            mib(self.buffer_bytes),
            mib(self.segment_bytes),
            mib(self.filter_bytes),
        )
    }
}
