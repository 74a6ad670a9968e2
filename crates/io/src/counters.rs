//! Counters of what was asked of the OS, by category. Bytes are counted as issued, so the
//! zero padding that O_DIRECT requires is included: these are the figures that must agree
//! with `/proc/self/io`.

use std::sync::atomic::{AtomicU64, Ordering};

/// Why an I/O was issued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Category {
    /// Write-ahead log appends and reads during recovery.
    Log,
    /// Nodes, translation tables and headers written by a checkpoint.
    Checkpoint,
    /// Dirty nodes written to make room in the cache.
    Eviction,
    /// Node and partition reads that serve a lookup, cursor or write.
    UserRead,
    /// Everything else: file headers at open, verification, recovery reads of tree files.
    Meta,
}

impl Category {
    /// Every category, in the order of their counter slots.
    pub const ALL: [Category; 5] = [
        Category::Log,
        Category::Checkpoint,
        Category::Eviction,
        Category::UserRead,
        Category::Meta,
    ];

    fn index(self) -> usize {
        self as usize
    }

    /// Lower-case name used in JSON and `serverStatus`.
    pub fn name(self) -> &'static str {
        match self {
            Category::Log => "log",
            Category::Checkpoint => "checkpoint",
            Category::Eviction => "eviction",
            Category::UserRead => "user_read",
            Category::Meta => "meta",
        }
    }
}

#[derive(Default)]
struct Slot {
    read_calls: AtomicU64,
    read_bytes: AtomicU64,
    write_calls: AtomicU64,
    write_bytes: AtomicU64,
    fsyncs: AtomicU64,
}

/// Live counters shared by every file of one environment.
#[derive(Default)]
pub struct IoStats {
    slots: [Slot; 5],
}

/// A snapshot of one category's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CategoryCounters {
    /// Read calls issued.
    pub read_calls: u64,
    /// Bytes read, alignment padding included.
    pub read_bytes: u64,
    /// Write calls issued.
    pub write_calls: u64,
    /// Bytes written, alignment padding included.
    pub write_bytes: u64,
    /// fsync (or fdatasync) calls issued.
    pub fsyncs: u64,
}

/// A snapshot of all counters, by category.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IoCounters {
    /// Write-ahead log appends and recovery's log reads.
    pub log: CategoryCounters,
    /// What checkpoints wrote.
    pub checkpoint: CategoryCounters,
    /// Dirty nodes written to make room in the cache.
    pub eviction: CategoryCounters,
    /// Reads that served lookups, cursors and writes.
    pub user_read: CategoryCounters,
    /// Everything else (file headers, verification, recovery's tree reads).
    pub meta: CategoryCounters,
}

impl std::fmt::Debug for IoStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.snapshot().fmt(f)
    }
}

impl IoStats {
    pub(crate) fn add_read(&self, cat: Category, bytes: usize) {
        let s = &self.slots[cat.index()];
        s.read_calls.fetch_add(1, Ordering::Relaxed);
        s.read_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    pub(crate) fn add_write(&self, cat: Category, bytes: usize) {
        let s = &self.slots[cat.index()];
        s.write_calls.fetch_add(1, Ordering::Relaxed);
        s.write_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    pub(crate) fn add_fsync(&self, cat: Category) {
        self.slots[cat.index()]
            .fsyncs
            .fetch_add(1, Ordering::Relaxed);
    }

    /// Reads every counter (each is exact; the set is not one atomic cut).
    pub fn snapshot(&self) -> IoCounters {
        let get = |cat: Category| {
            let s = &self.slots[cat.index()];
            CategoryCounters {
                read_calls: s.read_calls.load(Ordering::Relaxed),
                read_bytes: s.read_bytes.load(Ordering::Relaxed),
                write_calls: s.write_calls.load(Ordering::Relaxed),
                write_bytes: s.write_bytes.load(Ordering::Relaxed),
                fsyncs: s.fsyncs.load(Ordering::Relaxed),
            }
        };
        IoCounters {
            log: get(Category::Log),
            checkpoint: get(Category::Checkpoint),
            eviction: get(Category::Eviction),
            user_read: get(Category::UserRead),
            meta: get(Category::Meta),
        }
    }
}

impl IoCounters {
    /// The counters of one category.
    pub fn get(&self, cat: Category) -> CategoryCounters {
        match cat {
            Category::Log => self.log,
            Category::Checkpoint => self.checkpoint,
            Category::Eviction => self.eviction,
            Category::UserRead => self.user_read,
            Category::Meta => self.meta,
        }
    }

    /// Sum over all categories.
    pub fn total(&self) -> CategoryCounters {
        Category::ALL
            .iter()
            .map(|&c| self.get(c))
            .fold(CategoryCounters::default(), |a, b| CategoryCounters {
                read_calls: a.read_calls + b.read_calls,
                read_bytes: a.read_bytes + b.read_bytes,
                write_calls: a.write_calls + b.write_calls,
                write_bytes: a.write_bytes + b.write_bytes,
                fsyncs: a.fsyncs + b.fsyncs,
            })
    }

    /// Counter-wise difference `self - earlier`, for measuring one phase.
    pub fn since(&self, earlier: &IoCounters) -> IoCounters {
        let d = |a: CategoryCounters, b: CategoryCounters| CategoryCounters {
            read_calls: a.read_calls - b.read_calls,
            read_bytes: a.read_bytes - b.read_bytes,
            write_calls: a.write_calls - b.write_calls,
            write_bytes: a.write_bytes - b.write_bytes,
            fsyncs: a.fsyncs - b.fsyncs,
        };
        IoCounters {
            log: d(self.log, earlier.log),
            checkpoint: d(self.checkpoint, earlier.checkpoint),
            eviction: d(self.eviction, earlier.eviction),
            user_read: d(self.user_read, earlier.user_read),
            meta: d(self.meta, earlier.meta),
        }
    }
}
