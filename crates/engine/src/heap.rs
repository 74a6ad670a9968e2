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
//!    one read of `/proc/self/statm`): with no shrink in force and the process more than
//!    `DIRTY_ROOM + QUICK_MARGIN` under the limit — where neither a release nor a shrink
//!    would change anything yet (`far_from_acting`) — it stops there. The full sample
//!    refreshes every statistic of jemalloc (~100 µs here), and an idle server took 1.2% of
//!    a core for it, 100 times a second; a server whose data fits well in its cache does
//!    not need it either. With `SKIP_ROOM` more to spare it sleeps `SKIPPED_TICKS` ticks
//!    before the next reading.
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
/// Further room that lets the governor sleep `SKIPPED_TICKS` more ticks (4.): growth
/// faster than this per 50 ms (1.3 GB/s) would be needed to pass the point of acting unseen.
pub(crate) const SKIP_ROOM: usize = 64 << 20;
/// Ticks a reading with `SKIP_ROOM` to spare lets the governor sleep through (4.): its
/// ticks then come as often as the checkpointer's, so closing waits no longer for it.
pub(crate) const SKIPPED_TICKS: u32 = 4;

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

/// Whether a quick reading is `QUICK_MARGIN` short of any point where a tick would change
/// something, with no shrink in force (4.): a release needs resident memory within
/// `RELEASE_BELOW` of the limit; a shrink evicts only what takes the charge past the budget
/// less the shrink, that is, only while `resident - dirty + DIRTY_ROOM` passes the limit —
/// so a process `DIRTY_ROOM` below it has nothing to shrink yet, whatever lies beyond the
/// charge, and a shrink is set by the first tick that comes closer.
pub(crate) fn far_from_acting(r: &Reading) -> bool {
    r.shrink == 0
        && r.heap.resident + RELEASE_BELOW.max(DIRTY_ROOM) + QUICK_MARGIN <= r.budget + r.headroom
}

/// Ticks to sleep through after a reading far from acting (4.): `SKIPPED_TICKS` with
/// `SKIP_ROOM` to spare beyond what `far_from_acting` asks, else none.
pub(crate) fn ticks_to_skip(r: &Reading) -> u32 {
    let roomy = Reading {
        heap: HeapSample {
            resident: r.heap.resident + SKIP_ROOM,
            ..r.heap
        },
        ..*r
    };
    if far_from_acting(&roomy) {
        SKIPPED_TICKS
    } else {
        0
    }
}

/// The governor's memory between ticks.
#[derive(Debug, Default)]
pub(crate) struct Governor {
    quiet_ticks: u32,
}

/// What one tick asks of its caller.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Tick {
    /// The shrink grew: evict down to it.
    pub shrink_grew: bool,
    /// Ticks to sleep through before the next (4.).
    pub skip: u32,
}

impl Governor {
    /// One tick: reads the heap, releases dirty pages if it is near the limit, and sets the
    /// cache's shrink.
    pub(crate) fn tick(&mut self, cache: &Cache, headroom: usize, probe: &dyn HeapProbe) -> Tick {
        let tick = govern(cache, headroom, self.quiet_ticks, probe);
        self.quiet_ticks = if tick.shrink_grew {
            0
        } else {
            self.quiet_ticks.saturating_add(1)
        };
        tick
    }
}

fn govern(cache: &Cache, headroom: usize, quiet_ticks: u32, probe: &dyn HeapProbe) -> Tick {
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
            return Tick {
                shrink_grew: false,
                skip: ticks_to_skip(&quick),
            };
        }
    }
    let Some(mut heap) = probe.sample() else {
        return Tick::default();
    };
    if wants_release(&reading(heap)) {
        probe.release();
        cache.heap_releases.fetch_add(1, Ordering::Relaxed);
        cache
            .heap_released_bytes
            .fetch_add(heap.dirty as u64, Ordering::Relaxed);
        match probe.sample() {
            Some(h) => heap = h,
            None => return Tick::default(),
        }
    }
    cache
        .heap_resident_bytes
        .store(heap.resident as u64, Ordering::Relaxed);
    let r = reading(heap);
    let next = shrink(&r);
    cache.set_shrink(next);
    Tick {
        shrink_grew: next > r.shrink,
        skip: 0,
    }
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
        // Limit 456 MiB: a tick may stop at 424 MiB resident (DIRTY_ROOM + QUICK_MARGIN
        // under it), however much of that lies beyond the charge.
        assert!(far_from_acting(&reading(100 * MIB, 110 * MIB, 0, 0)));
        assert!(far_from_acting(&reading(100 * MIB, 424 * MIB, 0, 0)));
        assert!(!far_from_acting(&reading(100 * MIB, 425 * MIB, 0, 0)));
        assert!(!far_from_acting(&reading(100 * MIB, 110 * MIB, 0, MIB)));
        // Where it stops, a full tick would have released nothing and evicted nothing: the
        // shrink it computes leaves the working limit above the charge.
        for (charged, resident, dirty) in [(100, 424, 0), (0, 424, 0), (380, 424, 30)] {
            let r = reading(charged * MIB, resident * MIB, dirty * MIB, 0);
            assert!(far_from_acting(&r));
            assert!(!wants_release(&r));
            assert!(
                r.charged <= r.budget - shrink(&r),
                "{charged} {resident} {dirty}"
            );
        }
        // With 64 MiB more to spare the governor sleeps four more ticks.
        assert_eq!(
            ticks_to_skip(&reading(100 * MIB, 360 * MIB, 0, 0)),
            SKIPPED_TICKS
        );
        assert_eq!(ticks_to_skip(&reading(100 * MIB, 361 * MIB, 0, 0)), 0);
        assert_eq!(ticks_to_skip(&reading(100 * MIB, 10 * MIB, 0, MIB)), 0);
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
