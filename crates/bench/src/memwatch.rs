//! Memory over a phase, sampled: a thread reads jemalloc's `stats.allocated` and
//! `stats.resident`, the process's `VmRSS` and the engine's cache charge every `PERIOD` and
//! keeps each phase's peaks. The phase-end figures (`allocated_bytes` at the end, `VmHWM` for the process)
//! miss what is held only for a while — a flush's messages in flight, a node image being
//! encoded — and the gap between what is allocated and what the cache charges at the same
//! moment is what the RSS bound (cache + 64 MiB) has to absorb.

use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{Scope, ScopedJoinHandle};
use std::time::Duration;

/// How often the thread samples.
const PERIOD: Duration = Duration::from_millis(20);

/// Peaks over one phase; null where jemalloc's statistics cannot be read.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct MemPeaks {
    /// Highest `stats.allocated`: live heap bytes, what the process really holds.
    pub allocated_peak_bytes: Option<u64>,
    /// Highest `stats.resident`: pages the allocator has mapped and touched.
    pub resident_peak_bytes: Option<u64>,
    /// Highest `VmRSS` of the process in this phase (`VmHWM` is the whole run's).
    pub rss_peak_bytes: Option<u64>,
    /// Highest `allocated - cache charge` at one sample: heap the cache does not account.
    pub uncharged_peak_bytes: Option<u64>,
    /// The cache charge at the sample of `uncharged_peak_bytes`.
    pub charge_at_uncharged_peak_bytes: Option<u64>,
    /// Highest `resident - allocated` at one sample: the allocator's own overhead.
    pub overhead_peak_bytes: Option<u64>,
    /// Of that overhead, freed pages not yet returned to the OS (jemalloc's dirty pages,
    /// which decay); the rest is allocator metadata and partly used pages (fragmentation).
    pub dirty_at_overhead_peak_bytes: Option<u64>,
    /// jemalloc's metadata at the same sample.
    pub metadata_at_overhead_peak_bytes: Option<u64>,
    /// Samples taken.
    pub samples: u64,
}

impl MemPeaks {
    fn record(&mut self, j: shale_heap::Stats, rss: Option<u64>, charge: u64) {
        let shale_heap::Stats {
            allocated,
            resident,
            dirty,
            metadata,
        } = j;
        let max = |a: Option<u64>, b: u64| Some(a.map_or(b, |a| a.max(b)));
        self.allocated_peak_bytes = max(self.allocated_peak_bytes, allocated);
        self.resident_peak_bytes = max(self.resident_peak_bytes, resident);
        if let Some(rss) = rss {
            self.rss_peak_bytes = max(self.rss_peak_bytes, rss);
        }
        let uncharged = allocated.saturating_sub(charge);
        if self.uncharged_peak_bytes.is_none_or(|u| uncharged > u) {
            self.uncharged_peak_bytes = Some(uncharged);
            self.charge_at_uncharged_peak_bytes = Some(charge);
        }
        let overhead = resident.saturating_sub(allocated);
        if self.overhead_peak_bytes.is_none_or(|o| overhead > o) {
            self.overhead_peak_bytes = Some(overhead);
            self.dirty_at_overhead_peak_bytes = dirty;
            self.metadata_at_overhead_peak_bytes = metadata;
        }
        self.samples += 1;
    }
}

/// The sampling thread, stopped when dropped.
pub struct MemWatch<'scope> {
    peaks: Arc<Mutex<MemPeaks>>,
    stop: Arc<AtomicBool>,
    thread: Option<ScopedJoinHandle<'scope, ()>>,
}

impl<'scope> MemWatch<'scope> {
    /// Starts sampling; `charge` reads the cache's charge in bytes.
    pub fn start<'env, F>(scope: &'scope Scope<'scope, 'env>, charge: F) -> Self
    where
        F: Fn() -> u64 + Send + 'scope,
    {
        let peaks = Arc::new(Mutex::new(MemPeaks::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (p, s) = (peaks.clone(), stop.clone());
        let thread = scope.spawn(move || {
            while !s.load(Ordering::Relaxed) {
                // The charge is read on both sides of the allocator's statistics and the
                // higher kept: an eviction between the two reads would otherwise count what
                // it freed as memory the cache does not charge.
                let before = charge();
                if let Some(j) = shale_heap::stats() {
                    let rss = crate::process::rss_now_bytes();
                    let c = before.max(charge());
                    p.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .record(j, rss, c);
                }
                std::thread::sleep(PERIOD);
            }
        });
        MemWatch {
            peaks,
            stop,
            thread: Some(thread),
        }
    }

    /// The peaks since the last call, and starts the next phase's.
    pub fn take(&self) -> MemPeaks {
        std::mem::take(&mut *self.peaks.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl Drop for MemWatch<'_> {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peaks_keep_the_highest_and_the_charge_at_the_widest_gap() {
        let mut p = MemPeaks::default();
        let j = |allocated, resident| shale_heap::Stats {
            allocated,
            resident,
            dirty: Some(resident / 2),
            metadata: None,
        };
        p.record(j(100, 150), Some(160), 90);
        p.record(j(300, 320), None, 150);
        p.record(j(200, 400), Some(150), 20);
        assert_eq!(p.allocated_peak_bytes, Some(300));
        assert_eq!(p.resident_peak_bytes, Some(400));
        assert_eq!(p.rss_peak_bytes, Some(160));
        assert_eq!(p.uncharged_peak_bytes, Some(180));
        assert_eq!(p.charge_at_uncharged_peak_bytes, Some(20));
        assert_eq!(p.overhead_peak_bytes, Some(200));
        assert_eq!(p.dirty_at_overhead_peak_bytes, Some(200));
        assert_eq!(p.samples, 3);
    }

    #[test]
    fn the_thread_samples_and_take_starts_over() {
        std::thread::scope(|s| {
            let w = MemWatch::start(s, || 0);
            std::thread::sleep(PERIOD * 5);
            let first = w.take();
            // The bench binary's allocator is jemalloc; under `cargo test` it is too.
            assert!(first.samples >= 1, "{first:?}");
            assert!(first.allocated_peak_bytes.is_some_and(|a| a > 0));
            assert!(w.take().samples <= first.samples + 1);
        });
    }
}
