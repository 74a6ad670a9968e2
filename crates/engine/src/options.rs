//! Options of an environment and of a tree, with their defaults and limits.

use std::time::Duration;

/// Largest key or value the engine accepts (16 MiB).
pub const MAX_KEY_OR_VALUE_BYTES: usize = 16 << 20;

/// Block compression codec of a tree, recorded in every partition's header (the codec alone:
/// decoding needs no level) and, with its zstd level, in the tree's options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// Stored as is.
    None,
    /// lz4 block compression.
    Lz4,
    /// zstd at `RECORDED_AS_ZERO_ZSTD_LEVEL` (3): the level of every tree written before
    /// levels were recorded, whose options byte holds no level.
    Zstd,
    /// zstd at another level in `MIN_ZSTD_LEVEL..=MAX_ZSTD_LEVEL`; made by `Compression::zstd`,
    /// which gives `Zstd` for the default level, so equal settings compare equal.
    ZstdLevel(u8),
}

/// The zstd level of `Compression::Zstd`, which an options byte records as level 0: the one
/// level trees had before levels were recorded, so it never changes.
pub const RECORDED_AS_ZERO_ZSTD_LEVEL: i32 = 3;
/// The zstd level of new trees. Chosen by measurement
/// (docs/bench/history/2026-11-26-compression-per-collection-and-index-defaults.md): against
/// level 3, level 1 cost 13% less server CPU per bakeoff
/// insert and 8-18% less per uncached pk-lookup read, stored the bakeoff's trees 3% larger
/// and pk-lookup's 6% smaller; levels 9 and 19 gained 4% and 8% for 2x and 20x the CPU.
pub const DEFAULT_ZSTD_LEVEL: i32 = 1;
/// The levels a tree may take: zstd's ordinary range (20-22 need windows of 32 MiB+ to
/// gain anything over 19, and negative levels give less than lz4 here).
pub const MIN_ZSTD_LEVEL: i32 = 1;
/// The highest level a tree may take.
pub const MAX_ZSTD_LEVEL: i32 = 19;

impl Default for Compression {
    /// zstd at `DEFAULT_ZSTD_LEVEL`.
    #[allow(clippy::expect_used, reason = "the default level is in range")]
    fn default() -> Self {
        Compression::zstd(DEFAULT_ZSTD_LEVEL).expect("the default level is in range")
    }
}

impl Compression {
    /// zstd at `level`, or `None` outside `MIN_ZSTD_LEVEL..=MAX_ZSTD_LEVEL`.
    pub fn zstd(level: i32) -> Option<Self> {
        match level {
            RECORDED_AS_ZERO_ZSTD_LEVEL => Some(Compression::Zstd),
            MIN_ZSTD_LEVEL..=MAX_ZSTD_LEVEL => Some(Compression::ZstdLevel(level as u8)),
            _ => None,
        }
    }

    /// The zstd level, for the zstd codec.
    pub fn zstd_level(self) -> Option<i32> {
        match self {
            Compression::Zstd => Some(RECORDED_AS_ZERO_ZSTD_LEVEL),
            Compression::ZstdLevel(l) => Some(i32::from(l)),
            Compression::None | Compression::Lz4 => None,
        }
    }

    /// The codec's name: "none", "lz4" or "zstd".
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Lz4 => "lz4",
            Compression::Zstd | Compression::ZstdLevel(_) => "zstd",
        }
    }

    /// On-disk code of the codec in a partition descriptor (see docs/format-node.md).
    pub fn code(self) -> u8 {
        match self {
            Compression::None => 0,
            Compression::Lz4 => 1,
            Compression::Zstd | Compression::ZstdLevel(_) => 2,
        }
    }

    /// Codec for a partition descriptor's code (the level is not recorded there: decoding
    /// does not need it).
    pub fn from_code(code: u8) -> Option<Self> {
        match code {
            0 => Some(Compression::None),
            1 => Some(Compression::Lz4),
            2 => Some(Compression::Zstd),
            _ => None,
        }
    }

    /// The byte a tree's options record (tree metadata, CATALOG): the codec's code in the low
    /// 3 bits, the zstd level in the high 5 (0 = level 3, `Compression::Zstd`). Files written before
    /// levels existed hold 0, 1 or 2, which read back as before.
    pub fn options_byte(self) -> u8 {
        match self {
            Compression::ZstdLevel(l) => self.code() | (l << 3),
            _ => self.code(),
        }
    }

    /// The codec and level of an options byte.
    pub fn from_options_byte(byte: u8) -> Option<Self> {
        let level = byte >> 3;
        match (Compression::from_code(byte & 7)?, level) {
            (c, 0) => Some(c),
            (Compression::Zstd, l) => Compression::zstd(i32::from(l)),
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
    /// Target uncompressed size of a leaf's basement partition: the unit a leaf is cut into
    /// and scans read by.
    pub basement_size_bytes: usize,
    /// Target uncompressed size of the segments a basement is written in, each compressed
    /// alone: the unit of a point read of an evicted basement (TokuMX's `readPageSize`).
    /// 0, or a size not below the basement's, writes basements whole. Stored in the tree's
    /// metadata (version 3); trees of older metadata write basements whole. Small frames
    /// lose what zstd finds between entries: the engine's 116-byte records lose 5%, but
    /// documents that repeat field names and values lose far more, so the database layer
    /// writes its trees whole
    /// (docs/bench/history/2026-11-26-engine-mid-size-read-pages-4k-segments-of-16k-basements.md).
    pub read_page_bytes: usize,
    /// Children per internal node before it splits.
    pub fanout: usize,
    /// The codec (and zstd level) of the tree's partitions.
    pub compression: Compression,
}

/// The default read unit. Chosen by measurement
/// (docs/bench/history/2026-11-26-engine-mid-size-read-unit-16k-basements-scans-by-runs.md): at 10x
/// the cache a point read costs ~60 us of CPU with 16 KiB basements
/// against ~97 with 64 KiB (the decompression of the basement) and the same with 4 KiB,
/// where fills cost 15% more CPU per put; scans read runs of basements (`Load::Run`), so
/// the smaller unit costs them ~8%.
pub const DEFAULT_BASEMENT_BYTES: usize = 16 << 10;

/// The read page of a layout whose basements are `basement_bytes`: a quarter of the
/// basement, at most 4 KiB (measured in
/// docs/bench/history/2026-11-26-engine-mid-size-read-pages-4k-segments-of-16k-basements.md).
pub const fn default_read_page(basement_bytes: usize) -> usize {
    let quarter = basement_bytes / 4;
    if quarter < 4096 {
        quarter
    } else {
        4096
    }
}

impl Default for TreeOptions {
    fn default() -> Self {
        TreeOptions {
            node_size_bytes: 4 << 20,
            basement_size_bytes: DEFAULT_BASEMENT_BYTES,
            read_page_bytes: default_read_page(DEFAULT_BASEMENT_BYTES),
            fanout: 16,
            compression: Compression::default(),
        }
    }
}

/// The fewest nodes of the default size a cache holds: a flush pins a parent and a child,
/// a split or merge their siblings, and a database has a tree per collection and index. A
/// 4 MiB node in an 8 MiB cache thrashed: `pk-lookup --quick` loaded 25 MB in two minutes
/// (issue 22, item 8).
pub const MIN_CACHED_NODES: usize = 16;
/// The smallest node the default layout shrinks to for a small cache.
pub const MIN_FITTED_NODE_BYTES: usize = 64 << 10;

impl TreeOptions {
    /// This layout with its node size cut to fit `MIN_CACHED_NODES` in `cache_bytes` (never
    /// below `MIN_FITTED_NODE_BYTES`, never above what it was), and its basement no larger
    /// than a quarter of the node. The environment fits its `tree_defaults` so at open;
    /// layouts a tree was created with explicitly are kept.
    pub fn fitted_to_cache(mut self, cache_bytes: usize) -> TreeOptions {
        let fit = (cache_bytes / MIN_CACHED_NODES).max(MIN_FITTED_NODE_BYTES);
        if self.node_size_bytes > fit {
            self.node_size_bytes = fit;
            self.basement_size_bytes = self.basement_size_bytes.min(fit / 4);
            self.read_page_bytes = self.read_page_bytes.min(self.basement_size_bytes / 4);
        }
        self
    }

    /// Tiny sizes so tests split, flush and evict constantly.
    pub fn tiny() -> Self {
        TreeOptions {
            node_size_bytes: 4 << 10,
            basement_size_bytes: 512,
            read_page_bytes: default_read_page(512),
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
    /// When commits are fsynced.
    pub fsync: FsyncPolicy,
    /// Interval between background checkpoints; `None` checkpoints only when asked and at close.
    pub checkpoint_interval: Option<Duration>,
    /// A background checkpoint also starts once the log since the last checkpoint's redo
    /// point passes this many bytes, whatever the interval (WiredTiger's `log_size`), so the
    /// log a recovery replays stays bounded under any write rate; `None` disables it.
    pub checkpoint_log_bytes: Option<u64>,
    /// When the recovery at open replayed at least this many bytes of log, the checkpointer
    /// checkpoints at once instead of waiting for its interval, so a process killed again
    /// soon after starting (before its first timed checkpoint) does not make the next start
    /// replay the same log and more (docs/recovery.md, R9); `None` disables it.
    pub recovery_checkpoint_log_bytes: Option<u64>,
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
/// a sequential fill; docs/bench/history/
/// 2026-11-25-engine-full-size-heap-governor-and-lookups-stopping-at-buffered-puts.md).
pub const DEFAULT_HEAP_HEADROOM: usize = 48 << 20;

/// The default `checkpoint_log_bytes`: 1 GiB of log between checkpoints at most.
pub const DEFAULT_CHECKPOINT_LOG_BYTES: u64 = 1 << 30;

/// The default `recovery_checkpoint_log_bytes`: a recovery that replayed 16 MiB of log or
/// more is followed by a checkpoint. Replaying 16 MiB takes well under a second; 300 MB took
/// 24 s to listen after 100 kills without it (issue 29).
pub const DEFAULT_RECOVERY_CHECKPOINT_LOG_BYTES: u64 = 16 << 20;

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
            checkpoint_log_bytes: Some(DEFAULT_CHECKPOINT_LOG_BYTES),
            recovery_checkpoint_log_bytes: Some(DEFAULT_RECOVERY_CHECKPOINT_LOG_BYTES),
            direct_io: true,
            txn_max_bytes: None,
            heap: None,
            heap_headroom_bytes: DEFAULT_HEAP_HEADROOM,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_bytes_keep_the_zstd_level_and_read_old_codes() {
        for code in 0..3u8 {
            let c = Compression::from_options_byte(code).expect("an old code");
            assert_eq!(c, Compression::from_code(code).expect("a code"));
            assert_eq!(c.options_byte(), code);
        }
        for level in MIN_ZSTD_LEVEL..=MAX_ZSTD_LEVEL {
            let c = Compression::zstd(level).expect("in range");
            assert_eq!(Compression::from_options_byte(c.options_byte()), Some(c));
            assert_eq!(c.zstd_level(), Some(level));
            assert_eq!(c.code(), 2, "a partition records the codec only");
        }
        assert_eq!(
            Compression::zstd(RECORDED_AS_ZERO_ZSTD_LEVEL),
            Some(Compression::Zstd)
        );
        assert_eq!(Compression::zstd(0), None);
        assert_eq!(Compression::zstd(MAX_ZSTD_LEVEL + 1), None);
        assert_eq!(
            Compression::from_options_byte(1 | (5 << 3)),
            None,
            "lz4 has no level"
        );
        assert_eq!(Compression::from_options_byte(3), None);
    }

    #[test]
    fn the_default_layout_fits_a_small_cache_and_keeps_a_large_one() {
        let d = TreeOptions::default();
        assert_eq!(
            d.fitted_to_cache(400 << 20),
            d,
            "a 400 MiB cache keeps 4 MiB nodes"
        );
        assert_eq!(
            d.fitted_to_cache(256 << 20),
            d,
            "so does the server's default"
        );
        let small = d.fitted_to_cache(8 << 20);
        assert_eq!(small.node_size_bytes, 512 << 10);
        assert!(small.basement_size_bytes <= small.node_size_bytes / 4);
        let tiny_cache = d.fitted_to_cache(1 << 20);
        assert_eq!(tiny_cache.node_size_bytes, MIN_FITTED_NODE_BYTES);
        let tiny = TreeOptions::tiny();
        assert_eq!(
            tiny.fitted_to_cache(64 << 10),
            tiny,
            "smaller nodes are kept"
        );
    }
}
