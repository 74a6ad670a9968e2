//! Options of an environment and of a tree, with their defaults and limits.

use std::time::Duration;

/// Largest key or value the engine accepts (16 MiB).
pub const MAX_KEY_OR_VALUE_BYTES: usize = 16 << 20;

/// Block compression codec, recorded in every partition's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compression {
    None,
    Lz4,
    #[default]
    Zstd,
}

impl Compression {
    /// On-disk code of the codec (see docs/format.md).
    pub fn code(self) -> u8 {
        match self {
            Compression::None => 0,
            Compression::Lz4 => 1,
            Compression::Zstd => 2,
        }
    }

    /// Codec for an on-disk code.
    pub fn from_code(code: u8) -> Option<Self> {
        match code {
            0 => Some(Compression::None),
            1 => Some(Compression::Lz4),
            2 => Some(Compression::Zstd),
            _ => None,
        }
    }
}

/// When commits are made durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FsyncPolicy {
    /// A commit returns only after the log record is fsynced (group commit shares fsyncs).
    #[default]
    EveryCommit,
    /// The log is fsynced every N milliseconds; a crash can lose the last N ms.
    EveryMillis(u64),
}

/// Per-tree layout options, fixed when the tree is created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TreeOptions {
    /// Target size of a node, uncompressed, before it splits (internal nodes also flush
    /// their heaviest buffer when they exceed it).
    pub node_size_bytes: usize,
    /// Target uncompressed size of a leaf's basement partition: the unit of a point read.
    pub basement_size_bytes: usize,
    /// Children per internal node before it splits.
    pub fanout: usize,
    pub compression: Compression,
}

impl Default for TreeOptions {
    fn default() -> Self {
        TreeOptions {
            node_size_bytes: 4 << 20,
            basement_size_bytes: 64 << 10,
            fanout: 16,
            compression: Compression::Zstd,
        }
    }
}

impl TreeOptions {
    /// Tiny sizes so tests split, flush and evict constantly.
    pub fn tiny() -> Self {
        TreeOptions {
            node_size_bytes: 4 << 10,
            basement_size_bytes: 512,
            fanout: 4,
            compression: Compression::Zstd,
        }
    }
}

/// Options of an environment (one data directory).
#[derive(Debug, Clone)]
pub struct EnvOptions {
    /// Hard budget for cached nodes, in bytes.
    pub cache_bytes: usize,
    /// Defaults for trees created without explicit options.
    pub tree_defaults: TreeOptions,
    pub fsync: FsyncPolicy,
    /// Interval between background checkpoints; `None` checkpoints only when asked and at close.
    pub checkpoint_interval: Option<Duration>,
    /// Use O_DIRECT where the filesystem allows it.
    pub direct_io: bool,
    /// The most memory one transaction's write set may hold (its writes stay in memory,
    /// charged to the cache, until commit); `None` means the default of `txn_limit`.
    pub txn_max_bytes: Option<usize>,
    /// The allocator's statistics, from a binary that knows its allocator. With one, a
    /// governor keeps the heap's resident memory under `cache_bytes + heap_headroom_bytes`
    /// (releasing freed pages, then lowering the cache's working limit); without one the
    /// budget bounds the cache's charge alone (`heap.rs`).
    pub heap: Option<std::sync::Arc<dyn crate::HeapProbe>>,
    /// What the heap may hold beyond the cache budget when `heap` is set.
    pub heap_headroom_bytes: usize,
}

/// The default `heap_headroom_bytes`: the process's memory target is the cache + 64 MiB,
/// and 16 MiB of that is left to what the allocator does not see (thread stacks, page
/// tables: 8 MiB at 10x a 400 MiB cache) and to what it allocates between two of the
/// governor's readings (the allocator's resident peak passed a 56 MiB headroom by 5 MiB in
/// a sequential fill; docs/benchmarks.md).
pub const DEFAULT_HEAP_HEADROOM: usize = 48 << 20;

/// The smallest write-set limit: a 16 MiB document replaced with its old and new index
/// entries fits with room to spare.
pub const MIN_TXN_MAX_BYTES: usize = 64 << 20;

impl EnvOptions {
    /// The write-set limit in force: `txn_max_bytes`, else a quarter of the cache but at
    /// least `MIN_TXN_MAX_BYTES`.
    pub fn txn_limit(&self) -> usize {
        self.txn_max_bytes
            .unwrap_or_else(|| (self.cache_bytes / 4).max(MIN_TXN_MAX_BYTES))
    }
}

impl Default for EnvOptions {
    fn default() -> Self {
        EnvOptions {
            cache_bytes: 256 << 20,
            tree_defaults: TreeOptions::default(),
            fsync: FsyncPolicy::EveryCommit,
            checkpoint_interval: Some(Duration::from_secs(60)),
            direct_io: true,
            txn_max_bytes: None,
            heap: None,
            heap_headroom_bytes: DEFAULT_HEAP_HEADROOM,
        }
    }
}
