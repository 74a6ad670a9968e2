//! The process heap as the cache budget sees it: a hard memory limit, not only a cache limit.
//!
//! The cache charges what the engine holds (`cache.rs`), but the process's resident memory
//! is larger: allocations nobody charges (the caller's, the log's buffers, a decoder's
//! scratch), the allocator's metadata and partly used pages, and pages freed but not yet
//! returned to the OS (jemalloc's dirty pages, which at 10x a 400 MiB cache were 40-90 MiB
//! under reads that churn basements). Nothing inside the engine can see that, so a binary
//! that knows its allocator hands the environment a [`HeapProbe`], and a governor thread
//! (`background.rs`) keeps resident memory under `cache_bytes + heap_headroom_bytes`:
//!
//! 1. when resident memory comes within `RELEASE_BELOW` of the limit and enough is dirty,
//!    it asks the allocator to return its dirty pages (`HeapProbe::release`);
//! 2. it then lowers the cache's working limit (`Cache::set_shrink`) by however much the
//!    memory beyond the charge (resident, less dirty, less the charge) would otherwise take
//!    the process over the limit, leaving `DIRTY_ROOM` for pages freed between releases;
//!    never by more than a quarter of the budget, so a caller holding a lot of memory cannot
//!    starve the cache;
//! 3. a lowered limit stays where it is for `HOLD_TICKS` after it was last raised — memory
//!    beyond the charge comes in bursts (a sequential fill's spikes were 30 MiB), and a limit
//!    that relaxed between them would meet every burst late — then relaxes by `RELAX_STEP`
//!    per tick.
//!
//! 4. a tick starts with a quick reading of the resident set (`HeapProbe::quick_resident`,
//!    one read of `/proc/self/statm`): with no shrink in force and the process at least
//!    `QUICK_MARGIN` short of both points where the tick would act — a release, or a shrink,
//!    taking all memory beyond the charge as not dirty — it stops there. The full sample
//!    refreshes every statistic of jemalloc (~100 µs here), and an idle server took 1.2% of
//!    a core for it, 100 times a second.
//!
//! Releasing costs page faults when the pages are used again, so it happens only near the
//! limit; without a probe (tests, other allocators) none of this runs and the budget bounds
//! the cache's charge alone.

use crate::cache::Cache;
use std::fmt;
use std::sync::atomic::Ordering;

/// One reading of the allocator's statistics, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HeapSample {
    /// Pages the allocator has mapped and touched (what it adds to the RSS).
    pub resident: usize,
    /// Of `resident`, pages freed and not yet returned to the OS.
    pub dirty: usize,
}

/// The allocator, as a binary that chose it describes it to the engine.
pub trait HeapProbe: Send + Sync + fmt::Debug {
    /// Fresh statistics; `None` when they cannot be read (the governor then does nothing).
    fn sample(&self) -> Option<HeapSample>;
    /// Returns freed (dirty) pages to the OS now.
    fn release(&self);
    /// A cheap reading of the resident memory `sample` bounds, without the allocator's
    /// statistics (4.); `None` when there is none, and every tick samples.
    fn quick_resident(&self) -> Option<usize> {
        None
    }
}

/// Below the limit by less than this, the governor releases dirty pages.
pub(crate) const RELEASE_BELOW: usize = 8 << 20;
/// What the working limit leaves free for pages freed between two releases.
pub(crate) const DIRTY_ROOM: usize = 24 << 20;
/// Releasing less than this is not worth its page faults.
pub(crate) const MIN_RELEASE: usize = 2 << 20;
/// How much a lowered working limit rises per tick once the pressure is gone.
pub(crate) const RELAX_STEP: usize = 1 << 20;
/// Ticks a lowered working limit holds after its last raise before it relaxes (2 s).
pub(crate) const HOLD_TICKS: u32 = 200;
/// The working limit never falls below the budget less this fraction of it.
pub(crate) const MAX_SHRINK_DIVISOR: usize = 4;
/// How far from acting a quick reading must be for a tick to stop there (4.).
pub(crate) const QUICK_MARGIN: usize = 8 << 20;

/// The governor's inputs at one tick.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reading {
    pub budget: usize,
    pub headroom: usize,
    pub charged: usize,
    pub shrink: usize,
    /// Ticks since the shrink last grew.
    pub quiet_ticks: u32,
    pub heap: HeapSample,
}

/// Whether to release: resident memory close to the limit and enough dirty to matter.
pub(crate) fn wants_release(r: &Reading) -> bool {
    let limit = r.budget + r.headroom;
    r.heap.resident + RELEASE_BELOW > limit && r.heap.dirty >= MIN_RELEASE
}

/// The cache's next shrink (its working limit is the budget less this): what keeps
/// `charge + what lies beyond it + DIRTY_ROOM` under the limit, reached at once when it
/// grows, held for `HOLD_TICKS`, then left by `RELAX_STEP` a tick when it falls.
pub(crate) fn shrink(r: &Reading) -> usize {
    let limit = r.budget + r.headroom;
    let beyond = r
        .heap
        .resident
        .saturating_sub(r.heap.dirty)
        .saturating_sub(r.charged);
    let room = limit.saturating_sub(beyond + DIRTY_ROOM);
    let wanted = r
        .budget
        .saturating_sub(room)
        .min(r.budget / MAX_SHRINK_DIVISOR);
    if wanted >= r.shrink {
        wanted
    } else if r.quiet_ticks < HOLD_TICKS {
        r.shrink
    } else {
        wanted.max(r.shrink.saturating_sub(RELAX_STEP))
    }
}

/// Whether a quick reading (no dirty pages known: all memory beyond the charge counts) is
/// `QUICK_MARGIN` short of a release and of a shrink, with no shrink in force (4.).
pub(crate) fn far_from_acting(r: &Reading) -> bool {
    let margin = Reading {
        heap: HeapSample {
            resident: r.heap.resident + QUICK_MARGIN,
            dirty: 0,
        },
        ..*r
    };
    r.shrink == 0
        && margin.heap.resident + RELEASE_BELOW <= r.budget + r.headroom
        && shrink(&margin) == 0
}

/// The governor's memory between ticks.
#[derive(Debug, Default)]
pub(crate) struct Governor {
    quiet_ticks: u32,
}

impl Governor {
    /// One tick: reads the heap, releases dirty pages if it is near the limit, and sets the
    /// cache's shrink. True when the shrink grew (the caller evicts down to it).
    pub(crate) fn tick(&mut self, cache: &Cache, headroom: usize, probe: &dyn HeapProbe) -> bool {
        let grew = govern(cache, headroom, self.quiet_ticks, probe);
        self.quiet_ticks = if grew {
            0
        } else {
            self.quiet_ticks.saturating_add(1)
        };
        grew
    }
}

fn govern(cache: &Cache, headroom: usize, quiet_ticks: u32, probe: &dyn HeapProbe) -> bool {
    let reading = |heap| Reading {
        budget: cache.budget_bytes(),
        headroom,
        charged: cache.used_bytes(),
        shrink: cache.shrink_bytes(),
        quiet_ticks,
        heap,
    };
    if let Some(resident) = probe.quick_resident() {
        let quick = reading(HeapSample { resident, dirty: 0 });
        if far_from_acting(&quick) {
            cache
                .heap_resident_bytes
                .store(resident as u64, Ordering::Relaxed);
            return false;
        }
    }
    let Some(mut heap) = probe.sample() else {
        return false;
    };
    if wants_release(&reading(heap)) {
        probe.release();
        cache.heap_releases.fetch_add(1, Ordering::Relaxed);
        cache
            .heap_released_bytes
            .fetch_add(heap.dirty as u64, Ordering::Relaxed);
        match probe.sample() {
            Some(h) => heap = h,
            None => return false,
        }
    }
    cache
        .heap_resident_bytes
        .store(heap.resident as u64, Ordering::Relaxed);
    let r = reading(heap);
    let next = shrink(&r);
    cache.set_shrink(next);
    next > r.shrink
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1 << 20;

    fn reading(charged: usize, resident: usize, dirty: usize, shrink: usize) -> Reading {
        Reading {
            budget: 400 * MIB,
            headroom: 56 * MIB,
            charged,
            shrink,
            quiet_ticks: HOLD_TICKS,
            heap: HeapSample { resident, dirty },
        }
    }

    #[test]
    fn a_quick_reading_stops_a_tick_only_far_from_acting() {
        // Limit 456 MiB; a shrink starts past 32 MiB beyond the charge, a release within
        // 8 MiB of the limit; the quick reading must clear both by QUICK_MARGIN.
        assert!(far_from_acting(&reading(100 * MIB, 110 * MIB, 0, 0)));
        assert!(far_from_acting(&reading(100 * MIB, 124 * MIB, 0, 0)));
        assert!(!far_from_acting(&reading(100 * MIB, 125 * MIB, 0, 0)));
        assert!(!far_from_acting(&reading(400 * MIB, 441 * MIB, 0, 0)));
        assert!(!far_from_acting(&reading(100 * MIB, 110 * MIB, 0, MIB)));
    }

    #[test]
    fn a_heap_well_under_the_limit_neither_releases_nor_shrinks() {
        let r = reading(400 * MIB, 420 * MIB, 5 * MIB, 0);
        assert!(!wants_release(&r));
        assert_eq!(shrink(&r), 0);
    }

    #[test]
    fn near_the_limit_it_releases_only_when_enough_is_dirty() {
        assert!(wants_release(&reading(400 * MIB, 450 * MIB, 30 * MIB, 0)));
        assert!(!wants_release(&reading(400 * MIB, 450 * MIB, MIB, 0)));
        assert!(!wants_release(&reading(400 * MIB, 440 * MIB, 30 * MIB, 0)));
    }

    #[test]
    fn memory_beyond_the_charge_shrinks_the_cache_by_what_does_not_fit() {
        // 40 MiB beyond the charge (not dirty) + 24 MiB of dirty room = 64 > 56: shrink 8.
        assert_eq!(shrink(&reading(400 * MIB, 450 * MIB, 10 * MIB, 0)), 8 * MIB);
        // Dirty pages do not count: they are released, not cached around.
        assert_eq!(shrink(&reading(400 * MIB, 480 * MIB, 40 * MIB, 0)), 8 * MIB);
    }

    #[test]
    fn the_shrink_is_capped_at_a_quarter_of_the_budget() {
        assert_eq!(shrink(&reading(400 * MIB, 900 * MIB, 0, 0)), 100 * MIB);
    }

    #[test]
    fn a_shrink_holds_for_a_while_after_it_grew() {
        let r = Reading {
            quiet_ticks: HOLD_TICKS - 1,
            ..reading(300 * MIB, 310 * MIB, 0, 50 * MIB)
        };
        assert_eq!(shrink(&r), 50 * MIB);
    }

    #[test]
    fn a_shrink_relaxes_a_step_at_a_time() {
        assert_eq!(
            shrink(&reading(300 * MIB, 310 * MIB, 0, 50 * MIB)),
            49 * MIB
        );
        assert_eq!(shrink(&reading(300 * MIB, 310 * MIB, 0, MIB / 2)), 0);
    }
}
