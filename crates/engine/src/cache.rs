//! The node cache's budget: one byte counter shared by every tree of an environment and a
//! hard limit. Trees charge the memory of the nodes they hold; a load makes room for what it
//! read before installing it, and a writer whose change pushed the total over the budget
//! evicts (clock order, clean partitions first) before it returns — backpressure, not a soft
//! overshoot.
//!
//! Memory an operation holds outside the node table for a while — a partition or node being
//! read and decoded, a node image being encoded and written, a dirty node being written out
//! by eviction (`tree/writeback.rs`) — is charged too, for as long as it is held
//! (`InFlight`), so the budget bounds the engine's memory, not only its cache. Such charges
//! are taken where no room can be made (under a tree lock, or while the node they replace
//! is still charged), so they, and nodes pinned by operations in flight, can hold the total
//! over the budget until the next eviction: a mid-size random fill (80 MiB budget) peaked at
//! 86-89 MiB charged, 92-93 MiB since eviction writes leave the lock (docs/bench/history/
//! 2026-11-27-engine-mid-size-eviction-writes-outside-the-tree-lock.md).
//!
//! Eviction works against the *working limit*: the budget less a shrink the heap governor
//! sets while memory the cache cannot see (allocator overhead, uncharged allocations) would
//! take the process over its memory limit (`heap.rs`). Without a governor the two are equal.

use crate::Result;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

/// What the cache evicts from (a tree), seen only through this: the cache does not know the
/// tree, and the loop over every tree of the budget lives here (`make_room`).
pub(crate) trait Evictable: Send + Sync {
    /// One clock pass over this holder's nodes, evicting until the cache's eviction target
    /// is met with room for `incoming` more bytes.
    fn evict_some(&self, incoming: usize) -> Result<()>;
}

/// Eviction frees down to the budget less this fraction of it (`eviction_target`).
const EVICTION_SLACK_DIVISOR: usize = 50;

/// The flusher keeps this share of the budget free ahead of writers once one asks
/// (`request_room_ahead`, `evict_ahead`): a twenty-fifth.
const AHEAD_DIVISOR: usize = 25;

/// Shared cache accounting.
#[derive(Debug)]
pub struct Cache {
    budget_bytes: usize,
    /// Set by the heap governor: the working limit is `budget_bytes - shrink_bytes`.
    shrink_bytes: AtomicUsize,
    used_bytes: AtomicUsize,
    peak_bytes: AtomicUsize,
    pub(crate) hits: AtomicU64,
    pub(crate) misses: AtomicU64,
    pub(crate) evictions: AtomicU64,
    pub(crate) partial_evictions: AtomicU64,
    /// Times the governor asked the allocator to return dirty pages, and how many bytes
    /// were dirty when it did.
    pub(crate) heap_releases: AtomicU64,
    pub(crate) heap_released_bytes: AtomicU64,
    /// The allocator's resident bytes at the governor's last reading (0 without one).
    pub(crate) heap_resident_bytes: AtomicU64,
    trees: Mutex<Vec<Weak<dyn Evictable>>>,
    next_victim: AtomicUsize,
    /// Set by a writer that found the cache within `headroom` of its limit, cleared by the
    /// flusher when it evicts ahead.
    ahead_requested: AtomicBool,
}

impl Cache {
    pub fn new(budget_bytes: usize) -> Self {
        assert!(budget_bytes > 0, "cache budget must be positive");
        Cache {
            budget_bytes,
            shrink_bytes: AtomicUsize::new(0),
            used_bytes: AtomicUsize::new(0),
            peak_bytes: AtomicUsize::new(0),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
            partial_evictions: AtomicU64::new(0),
            heap_releases: AtomicU64::new(0),
            heap_released_bytes: AtomicU64::new(0),
            heap_resident_bytes: AtomicU64::new(0),
            trees: Mutex::new(Vec::new()),
            next_victim: AtomicUsize::new(0),
            ahead_requested: AtomicBool::new(false),
        }
    }

    pub fn budget_bytes(&self) -> usize {
        self.budget_bytes
    }

    /// What eviction keeps the charge under: the budget less the governor's shrink.
    pub fn limit_bytes(&self) -> usize {
        self.budget_bytes - self.shrink_bytes()
    }

    pub fn shrink_bytes(&self) -> usize {
        self.shrink_bytes.load(Ordering::Relaxed)
    }

    /// The governor's setting (`heap::shrink` caps it at a quarter of the budget).
    pub(crate) fn set_shrink(&self, bytes: usize) {
        assert!(bytes < self.budget_bytes, "shrink {bytes} leaves no cache");
        self.shrink_bytes.store(bytes, Ordering::Relaxed);
    }

    pub fn used_bytes(&self) -> usize {
        self.used_bytes.load(Ordering::Relaxed)
    }

    pub fn peak_bytes(&self) -> usize {
        self.peak_bytes.load(Ordering::Relaxed)
    }

    /// Moves a node's charge from `old` to `new` bytes.
    pub fn recharge(&self, old: usize, new: usize) {
        if new >= old {
            let now = self.used_bytes.fetch_add(new - old, Ordering::Relaxed) + (new - old);
            self.peak_bytes.fetch_max(now, Ordering::Relaxed);
        } else {
            self.used_bytes.fetch_sub(old - new, Ordering::Relaxed);
        }
    }

    /// Charges `bytes` held outside the node table until the guard is dropped. The caller
    /// makes room first where it holds no tree lock (`Tree::hold`).
    pub(crate) fn in_flight(&self, bytes: usize) -> InFlight<'_> {
        self.recharge(0, bytes);
        InFlight { cache: self, bytes }
    }

    /// Registers a tree whose nodes count against this budget.
    pub(crate) fn register<T: Evictable + 'static>(&self, tree: &Arc<T>) {
        let tree: Weak<dyn Evictable> = Arc::downgrade(tree) as Weak<T>;
        let mut trees = self.trees.lock();
        trees.retain(|t| t.strong_count() > 0);
        trees.push(tree);
    }

    /// Makes room for `incoming` more bytes before they are charged: when they would take
    /// the cache over its working limit, evicts (every registered tree, clock order, a
    /// different tree first each time) until they fit under the eviction target. Loads call
    /// it between decoding and installing, so that a node read does not push the charge over
    /// the budget first and evict after. Pinned nodes and in-flight charges (module doc) can
    /// keep the charge above the budget. Not under a tree lock: eviction takes them.
    pub(crate) fn make_room(&self, incoming: usize) -> Result<()> {
        if self.used_bytes() + incoming <= self.limit_bytes() {
            return Ok(());
        }
        for tree in self.victims() {
            if self.used_bytes() + incoming <= self.eviction_target() {
                break;
            }
            tree.evict_some(incoming)?;
        }
        Ok(())
    }

    /// Bytes the flusher keeps free ahead of writers (`evict_ahead`).
    fn headroom(&self) -> usize {
        self.budget_bytes / AHEAD_DIVISOR
    }

    /// Called by a writer after its write: when the cache is within the headroom of its
    /// limit, asks the flusher to make room ahead and returns true if the flusher should be
    /// woken (the first ask since it last evicted ahead). Eviction writes dirty nodes, which
    /// is mostly compression: in a sequential fill, where the writer is the busy thread and
    /// the flusher idle, the writer spent a third of its time evicting the leaves it filled.
    /// Reads never ask, so a read-only cache keeps its whole budget.
    pub(crate) fn request_room_ahead(&self) -> bool {
        self.used_bytes() + self.headroom() > self.limit_bytes()
            && !self.ahead_requested.swap(true, Ordering::AcqRel)
    }

    /// The flusher's side of `request_room_ahead`: if a writer asked, evicts until the
    /// headroom is free (`make_room`). Writers still evict on their own thread whenever the
    /// cache is over its limit, so the budget holds however far behind this falls.
    pub(crate) fn evict_ahead(&self) -> Result<()> {
        if self.ahead_requested.swap(false, Ordering::AcqRel) {
            self.make_room(self.headroom())?;
        }
        Ok(())
    }

    /// Trees to evict from, starting with a different one each call.
    fn victims(&self) -> Vec<Arc<dyn Evictable>> {
        let trees: Vec<Arc<dyn Evictable>> =
            self.trees.lock().iter().filter_map(Weak::upgrade).collect();
        if trees.is_empty() {
            return trees;
        }
        let start = self.next_victim.fetch_add(1, Ordering::Relaxed) % trees.len();
        trees[start..]
            .iter()
            .chain(&trees[..start])
            .cloned()
            .collect()
    }

    /// Where eviction stops: a little under the working limit so it does not run on every call,
    /// and only a little, because what one eviction frees at once waits in the allocator
    /// (resident, not reused) until loads take it back: at a tenth of a 400 MiB budget that
    /// was 40 MiB at a time.
    pub fn eviction_target(&self) -> usize {
        self.limit_bytes() - self.budget_bytes / EVICTION_SLACK_DIVISOR
    }
}

/// A charge for memory in flight (see the module doc), released when dropped.
#[must_use = "the charge is released when the guard is dropped"]
pub(crate) struct InFlight<'a> {
    cache: &'a Cache,
    bytes: usize,
}

impl InFlight<'_> {
    /// Moves the charge to `bytes` (what is held turned out larger or smaller).
    pub(crate) fn set(&mut self, bytes: usize) {
        self.cache.recharge(self.bytes, bytes);
        self.bytes = bytes;
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.cache.recharge(self.bytes, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tree stand-in holding `held` bytes of the cache's charge; a pass frees chunks until
    /// the cache is at its eviction target, as a tree's clock pass does.
    struct Holder {
        cache: Arc<Cache>,
        held: Mutex<usize>,
        calls: AtomicUsize,
    }

    impl Evictable for Holder {
        fn evict_some(&self, incoming: usize) -> Result<()> {
            self.calls.fetch_add(1, Ordering::Relaxed);
            let mut held = self.held.lock();
            while *held > 0 && self.cache.used_bytes() + incoming > self.cache.eviction_target() {
                let chunk = (*held).min(1000);
                self.cache.recharge(chunk, 0);
                *held -= chunk;
            }
            Ok(())
        }
    }

    fn cache_holding(bytes: usize) -> (Arc<Cache>, Arc<Holder>) {
        let cache = Arc::new(Cache::new(100_000));
        let holder = Arc::new(Holder {
            cache: cache.clone(),
            held: Mutex::new(bytes),
            calls: AtomicUsize::new(0),
        });
        cache.recharge(0, bytes);
        cache.register(&holder);
        (cache, holder)
    }

    #[test]
    fn room_ahead_is_asked_for_once_near_the_limit_and_made_by_the_flusher() {
        // 90% used: a twenty-fifth of the budget is still free, nothing to ask.
        let (cache, holder) = cache_holding(90_000);
        assert!(!cache.request_room_ahead());
        cache.evict_ahead().expect("evict ahead");
        assert_eq!(holder.calls.load(Ordering::Relaxed), 0, "nobody asked");
        // 97% used: the first writer asks (and wakes the flusher), the next finds it asked.
        cache.recharge(0, 7_000);
        *holder.held.lock() += 7_000;
        assert!(cache.request_room_ahead());
        assert!(!cache.request_room_ahead());
        cache.evict_ahead().expect("evict ahead");
        assert!(
            cache.used_bytes() + cache.headroom() <= cache.eviction_target(),
            "the headroom is free: {} used",
            cache.used_bytes()
        );
        // Asked again only once the writers bring the cache near its limit again.
        assert!(!cache.request_room_ahead());
        let calls = holder.calls.load(Ordering::Relaxed);
        cache.evict_ahead().expect("evict ahead");
        assert_eq!(holder.calls.load(Ordering::Relaxed), calls, "no second ask");
    }
}
