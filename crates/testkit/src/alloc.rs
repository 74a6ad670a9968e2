//! The counting allocator of the allocation and memory tests: the system allocator, with
//! every `alloc`/`realloc` call counted per thread (the test harness's own threads allocate
//! too) and the live bytes counted process-wide, each allocation rounded to jemalloc's size
//! class (what the binaries' allocator really holds). A test installs it with
//! `#[global_allocator] static A: CountingAlloc = CountingAlloc;`. It never allocates itself
//! and never changes what the system allocator returns.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicIsize, Ordering};

/// Live bytes over all threads, each allocation rounded to its size class.
static LIVE: AtomicIsize = AtomicIsize::new(0);

thread_local! {
    /// `alloc` and `realloc` calls made on this thread.
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

/// The system allocator, counted. Install it as the global allocator of a test binary.
pub struct CountingAlloc;

/// jemalloc's size classes: 8, then 16 apart up to 128, then four per power of two.
pub fn size_class(n: usize) -> usize {
    match n {
        0..=8 => 8,
        9..=128 => n.div_ceil(16) * 16,
        _ => {
            let step = n.next_power_of_two() / 8;
            n.div_ceil(step) * step
        }
    }
}

fn count_call() {
    // `try_with`: a thread being torn down may still free and allocate.
    let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
}

// SAFETY: every method forwards to the system allocator unchanged; the counting touches only
// an atomic and a const-initialised thread-local, neither of which allocates.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count_call();
        LIVE.fetch_add(size_class(layout.size()) as isize, Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(size_class(layout.size()) as isize, Ordering::Relaxed);
        // SAFETY: `ptr` came from `alloc` or `realloc` above, which used the system allocator.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count_call();
        let delta = size_class(new_size) as isize - size_class(layout.size()) as isize;
        LIVE.fetch_add(delta, Ordering::Relaxed);
        // SAFETY: `ptr` came from the system allocator with `layout`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// `alloc`/`realloc` calls made on this thread so far (0 unless `CountingAlloc` is the
/// global allocator).
pub fn allocations_on_this_thread() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

/// The calls this thread made while running `f`, and its result.
pub fn allocations_during<T>(f: impl FnOnce() -> T) -> (u64, T) {
    let before = allocations_on_this_thread();
    let out = f();
    (allocations_on_this_thread() - before, out)
}

/// Live bytes over all threads, rounded to size classes (0 unless installed).
pub fn live_bytes() -> isize {
    LIVE.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::size_class;

    #[test]
    fn size_classes_are_jemallocs() {
        let got: Vec<usize> = [0, 8, 9, 16, 17, 128, 129, 160, 161, 4096, 4097]
            .iter()
            .map(|&n| size_class(n))
            .collect();
        assert_eq!(got, [8, 8, 16, 16, 32, 128, 160, 160, 192, 4096, 5120]);
    }
}
