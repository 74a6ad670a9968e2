//! The allocator ShaleDB's binaries (`shale`, `shale-bench`) run on — jemalloc — as far as
//! anything but the binaries themselves needs to know it: its settings (`JEMALLOC_CONF`, and
//! `SERVER_JEMALLOC_CONF` for the server, which each binary exports as `_rjem_malloc_conf`
//! next to its `#[global_allocator]`), its
//! statistics (`stats`), and the [`JemallocProbe`] through which the engine's heap governor
//! reads resident memory and has freed pages returned (`shale_engine::HeapProbe`).
//!
//! What the governor bounds is the process's resident set, not only jemalloc's: the probe
//! reports `VmRSS` (from `/proc/self/statm`), which also holds what jemalloc never sees —
//! thread stacks as deep as they were used, C libraries' own `malloc` (zstd's contexts go
//! to glibc's allocator), the binary's text — less the bytes a binary excuses (the server's
//! requests in flight, which its promise bounds separately: cache + 64 MiB + the in-flight
//! cap). So memory outside the heap is charged to the cache: the governor lowers the
//! cache's working limit by it.
//!
//! The engine stays allocator-agnostic: it sees only the probe's trait.

#![warn(missing_docs)]

use shale_engine::{HeapProbe, HeapSample};

/// jemalloc settings for binaries that use it with this engine (`shale`, `shale-bench`):
/// one arena, so memory freed by one thread (an eviction) is reused by the next allocation
/// of any thread instead of waiting as dirty pages in the arena of the thread that
/// allocated it; and a background thread returns freed pages to the OS after 200 ms, so
/// resident memory follows the cache budget instead of the largest burst of node images.
/// At 10x a 400 MiB cache one arena took the peak RSS from 561.5 to 483.1 MiB over the
/// baseline (docs/bench/history/
/// 2026-11-24-engine-full-size-byte-arena-partitions-one-jemalloc-arena.md).
/// Allocation-heavy paths keep per-thread caches, and the
/// machines measured have 2 cores; on many cores a few arenas may be worth measuring.
/// Pages freed faster than 200 ms of decay returns them are the heap governor's to release
/// (`JemallocProbe`).
pub const JEMALLOC_CONF: &[u8; 69] =
    b"narenas:1,background_thread:true,dirty_decay_ms:200,muzzy_decay_ms:0\0";

/// The server's settings: [`JEMALLOC_CONF`] with each thread's cache limited to sizes up to
/// 4 KiB (`tcache_max`, 32 KiB by default). The server runs a thread per connection, and
/// each thread's cache keeps up to twenty freed blocks of each size class it has used
/// until that thread allocates again, outside anything the cache charges: in the quick
/// soak (40 clients, a 32 MiB cache, `shale-bench soak --quick --kills 0`) the default's RSS
/// peaked at 93.5-101.6 MiB and passed cache + 64 MiB in 0-3 of 60 samples, with 4 KiB
/// at 74.8 MiB (median 67.5 against 70-77). Blocks over 4 KiB (a connection's read
/// buffer, a batch's reply) then come from the one arena; the engine's own threads are
/// few, so `shale-bench` keeps the default (docs/operations.md, Memory).
pub const SERVER_JEMALLOC_CONF: &[u8; 85] =
    b"narenas:1,background_thread:true,dirty_decay_ms:200,muzzy_decay_ms:0,tcache_max:4096\0";

/// `MALLCTL_ARENAS_ALL`: in a mallctl name, every arena at once.
const ALL_ARENAS: &str = "4096";

/// One reading of jemalloc's statistics, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    /// Live allocations.
    pub allocated: u64,
    /// Pages mapped and touched.
    pub resident: u64,
    /// Dirty pages of all arenas (`None` if the statistic cannot be read).
    pub dirty: Option<u64>,
    /// jemalloc's own metadata.
    pub metadata: Option<u64>,
}

/// The mallctls `stats` reads, each name looked up once: by name, every read parsed it
/// again (a tenth of a governor tick's CPU, `perf record -t` of the `shale-heap` thread).
struct Mibs {
    epoch: tikv_jemalloc_ctl::epoch_mib,
    allocated: tikv_jemalloc_ctl::stats::allocated_mib,
    resident: tikv_jemalloc_ctl::stats::resident_mib,
    metadata: Option<tikv_jemalloc_ctl::stats::metadata_mib>,
    /// `stats.arenas.<ALL_ARENAS>.pdirty`, and the page size it counts in.
    dirty_pages: Option<([usize; 4], usize)>,
}

/// The looked-up mallctls; `None` when jemalloc's statistics are not there.
fn mibs() -> Option<&'static Mibs> {
    static MIBS: std::sync::OnceLock<Option<Mibs>> = std::sync::OnceLock::new();
    MIBS.get_or_init(|| {
        let mut dirty = [0usize; 4];
        let name = format!("stats.arenas.{ALL_ARENAS}.pdirty\0");
        let dirty_mib = tikv_jemalloc_ctl::raw::name_to_mib(name.as_bytes(), &mut dirty).ok();
        // SAFETY: `arenas.page` is a NUL-terminated mallctl of type size_t.
        let page = unsafe { tikv_jemalloc_ctl::raw::read::<usize>(b"arenas.page\0") }.ok();
        Some(Mibs {
            epoch: tikv_jemalloc_ctl::epoch::mib().ok()?,
            allocated: tikv_jemalloc_ctl::stats::allocated::mib().ok()?,
            resident: tikv_jemalloc_ctl::stats::resident::mib().ok()?,
            metadata: tikv_jemalloc_ctl::stats::metadata::mib().ok(),
            dirty_pages: dirty_mib.and(page).map(|p| (dirty, p)),
        })
    })
    .as_ref()
}

/// jemalloc's statistics, refreshed (they are cached per epoch); `None` when the process
/// does not run on jemalloc's statistics-enabled build.
pub fn stats() -> Option<Stats> {
    let m = mibs()?;
    m.epoch.advance().ok()?;
    let allocated = m.allocated.read().ok()?;
    let resident = m.resident.read().ok()?;
    let metadata = m.metadata.as_ref().and_then(|mib| mib.read().ok());
    let dirty = m.dirty_pages.and_then(|(mib, page)| {
        // SAFETY: the mib is `stats.arenas.<i>.pdirty`'s, a size_t.
        let pages = unsafe { tikv_jemalloc_ctl::raw::read_mib::<usize>(&mib) }.ok()?;
        Some((pages * page) as u64)
    });
    Some(Stats {
        allocated: allocated as u64,
        resident: resident as u64,
        dirty,
        metadata: metadata.map(|m| m as u64),
    })
}

/// Returns every arena's dirty pages to the OS now; false if jemalloc refused.
pub fn release() -> bool {
    let name = format!("arena.{ALL_ARENAS}.purge\0");
    // SAFETY: `arena.<i>.purge` takes and returns nothing: both pointers null, length 0.
    let rc = unsafe {
        tikv_jemalloc_sys::mallctl(
            name.as_ptr().cast(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        )
    };
    rc == 0
}

/// This process's resident set (`VmRSS`: anonymous, file-backed and shared pages), in
/// bytes, from `/proc/self/statm` (one short line, cheap enough for every governor tick).
/// The file is opened once and re-read from its start: opening it on every tick took a
/// descriptor 100 times a second, and a server at its descriptor limit then failed accepts
/// it would otherwise have served (`test_connection_limits.py` saw a third episode).
pub fn process_resident_bytes() -> Option<u64> {
    use std::os::unix::fs::FileExt;
    static STATM: std::sync::OnceLock<Option<std::fs::File>> = std::sync::OnceLock::new();
    let file = STATM
        .get_or_init(|| std::fs::File::open("/proc/self/statm").ok())
        .as_ref()?;
    let mut buf = [0u8; 160];
    let n = file.read_at(&mut buf, 0).ok()?;
    let text = std::str::from_utf8(buf.get(..n)?).ok()?;
    let pages: u64 = text.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * page_bytes())
}

/// The kernel's page size.
fn page_bytes() -> u64 {
    // SAFETY: sysconf only reads a configuration value.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(n).ok().filter(|&n| n > 0).unwrap_or(4096)
}

/// The engine's view of the process's memory (`EnvOptions::heap`): the resident set (all of
/// it, not only jemalloc's pages) less what the binary excuses, and jemalloc's dirty pages,
/// which `release` returns. `heap_only` reads jemalloc's resident pages alone, as before
/// issue 29 (the engine benchmark, whose bound is over its pre-open baseline).
#[derive(Debug, Default, Clone, Copy)]
pub struct JemallocProbe {
    /// Bytes held now that the memory promise bounds apart from the cache (the server's
    /// requests in flight); `None`: nothing is excused.
    pub excused: Option<fn() -> usize>,
    /// Read jemalloc's resident pages only, not the process's resident set.
    pub heap_only: bool,
}

impl JemallocProbe {
    /// A probe that leaves out of the resident set what `excused` returns.
    pub fn excusing(excused: fn() -> usize) -> Self {
        JemallocProbe {
            excused: Some(excused),
            heap_only: false,
        }
    }

    /// A probe of jemalloc's resident pages alone.
    pub fn heap_only() -> Self {
        JemallocProbe {
            excused: None,
            heap_only: true,
        }
    }
}

impl HeapProbe for JemallocProbe {
    fn sample(&self) -> Option<HeapSample> {
        let s = stats()?;
        let size = |b: u64| usize::try_from(b).unwrap_or(usize::MAX);
        // The process's resident set when it can be read, never less than jemalloc's own.
        let rss = match self.heap_only {
            true => 0,
            false => process_resident_bytes().map_or(0, size),
        };
        let excused = self.excused.map_or(0, |f| f());
        Some(HeapSample {
            resident: rss.saturating_sub(excused).max(size(s.resident)),
            dirty: size(s.dirty.unwrap_or(0)),
        })
    }

    fn release(&self) {
        release();
    }

    /// The resident set less what is excused, from `/proc/self/statm` alone; none for a
    /// heap-only probe (its figure is jemalloc's, which only the full sample reads).
    fn quick_resident(&self) -> Option<usize> {
        if self.heap_only {
            return None;
        }
        let rss = usize::try_from(process_resident_bytes()?).unwrap_or(usize::MAX);
        Some(rss.saturating_sub(self.excused.map_or(0, |f| f())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[global_allocator]
    static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

    /// The tests read process-wide figures (jemalloc's resident pages, the resident set), so
    /// one test's 64 MiB burst must not land between another's two readings: they take turns.
    /// CI once saw jemalloc's resident pages move by 1 MiB between a sample and `stats()`.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn alone() -> std::sync::MutexGuard<'static, ()> {
        ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
    }

    #[test]
    fn freed_pages_are_dirty_until_released() {
        let _turn = alone();
        let before = stats().expect("jemalloc statistics");
        assert!(before.allocated > 0 && before.resident >= before.allocated);
        // 64 MiB in 1 MiB pieces, touched, then freed: dirty pages the decay has not
        // returned yet (200 ms is not configured here: the default is 10 s).
        let blocks: Vec<Vec<u8>> = (0..64).map(|i| vec![i as u8; 1 << 20]).collect();
        assert!(blocks.iter().all(|b| b[4095] == b[0]));
        drop(blocks);
        let probe = JemallocProbe::default();
        let freed = probe.sample().expect("sample");
        assert!(freed.dirty >= 32 << 20, "{freed:?}");
        probe.release();
        let after = probe.sample().expect("sample");
        assert!(after.dirty < 1 << 20, "{after:?}");
        assert!(
            after.resident + (32 << 20) <= freed.resident,
            "{freed:?} -> {after:?}"
        );
    }

    #[test]
    fn the_probe_reads_the_whole_resident_set_less_what_is_excused() {
        let _turn = alone();
        // Read twice through the one open file: the second reading is fresh, not the first.
        let first = process_resident_bytes().expect("statm");
        let grown: Vec<u8> = vec![7; 32 << 20];
        let second = process_resident_bytes().expect("statm again");
        assert!(second >= first + (24 << 20), "{first} -> {second}");
        drop(grown);
        let probe = JemallocProbe::default();
        let before = probe.sample().expect("sample").resident;
        // A thread's stack touched 8 MiB deep is resident, and none of it is jemalloc's.
        let during = std::thread::Builder::new()
            .stack_size(16 << 20)
            .spawn(move || {
                let mut deep = [1u8; 8 << 20];
                std::hint::black_box(&mut deep);
                probe.sample().expect("sample").resident
            })
            .expect("spawn")
            .join()
            .expect("join");
        assert!(during >= before + (6 << 20), "{before} -> {during}");
        // What is excused leaves the reading, down to jemalloc's own resident pages, read
        // just before and just after (the harness's own threads may allocate between).
        let jemalloc = || stats().expect("stats").resident as usize;
        let low = jemalloc();
        let less = JemallocProbe::excusing(|| 1 << 30)
            .sample()
            .expect("sample");
        let high = jemalloc();
        let (low, high) = (low.min(high), low.max(high));
        assert!(
            less.resident + (1 << 20) > low && less.resident < high + (1 << 20),
            "{less:?} vs {low}..={high}"
        );
    }
}
