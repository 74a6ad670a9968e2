//! `AlignedBuf`: a heap buffer whose address and capacity are multiples of 4 KiB, as O_DIRECT
//! requires. It owns the allocation and nothing else.

use crate::{round_up_to_page, PAGE_SIZE};
use std::alloc::{alloc, dealloc, Layout};
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

/// A zero-initialised buffer aligned to [`PAGE_SIZE`]; `len()` is the logical length, the
/// capacity is `len` rounded up to a page (at least one page) when created, and may be
/// more after `set_len` shortens it; the tail is zeroes.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
    capacity: usize,
}

// SAFETY: the buffer is uniquely owned heap memory, like a Vec<u8>.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared access only hands out &[u8].
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// A zeroed buffer of logical length `len`.
    ///
    /// Zeroed with a memset, not `alloc_zeroed`: jemalloc zeroes a recycled large extent
    /// with `madvise(MADV_DONTNEED)`, whose TLB shootdown interrupts every core and whose
    /// pages then fault back in one by one. That was 10% of the CPU of uncached point
    /// reads (one buffer per partition read); a memset of the same 50 KB costs microseconds.
    pub fn zeroed(len: usize) -> Self {
        let capacity = round_up_to_page(len.max(1));
        let layout = Self::layout(capacity);
        // SAFETY: layout has non-zero size.
        let raw = unsafe { alloc(layout) };
        // Opaque to the optimizer: LLVM fuses an allocation followed by a memset of zero
        // into `alloc_zeroed`, which is exactly the call this avoids.
        let raw = std::hint::black_box(raw);
        let ptr = NonNull::new(raw).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        // SAFETY: `ptr` points to `capacity` freshly allocated bytes, initialised here.
        unsafe { std::ptr::write_bytes(ptr.as_ptr(), 0, capacity) };
        AlignedBuf { ptr, len, capacity }
    }

    /// A buffer of logical length `len` whose bytes `fill` writes through a raw pointer to
    /// its whole capacity, returning how many leading bytes it wrote; the rest are zeroed
    /// here. For reads from a file: zeroing a buffer the read then overwrites was 2% of an
    /// uncached point read's CPU. No reference to the bytes exists until they are written.
    pub fn filled_by<E>(
        len: usize,
        fill: impl FnOnce(*mut u8, usize) -> Result<usize, E>,
    ) -> Result<(Self, usize), E> {
        let capacity = round_up_to_page(len.max(1));
        let layout = Self::layout(capacity);
        // SAFETY: layout has non-zero size.
        let raw = unsafe { alloc(layout) };
        let ptr = NonNull::new(raw).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        // Owned from here: dropping it (on an error) frees the memory without reading it.
        let buf = AlignedBuf { ptr, len, capacity };
        let done = fill(ptr.as_ptr(), capacity)?.min(capacity);
        // SAFETY: `fill` wrote `[0, done)`; the rest of the allocation is initialised here.
        unsafe { std::ptr::write_bytes(ptr.as_ptr().add(done), 0, capacity - done) };
        Ok((buf, done))
    }

    /// A buffer holding a copy of `data`, zero-padded to the page boundary.
    pub fn from_slice(data: &[u8]) -> Self {
        let mut buf = Self::zeroed(data.len());
        buf.copy_from_slice(data);
        buf
    }

    /// Bytes available without reallocating: `len` rounded up to a page.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The logical contents plus the zero tail up to the capacity: what O_DIRECT writes.
    pub fn padded(&self) -> &[u8] {
        // SAFETY: capacity bytes were allocated and zero-initialised.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.capacity) }
    }

    /// Mutable view of the whole capacity (used by reads that fill padded extents).
    pub fn padded_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `padded`, and we hold &mut self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.capacity) }
    }

    /// Changes the logical length within the capacity; bytes past the new length are zeroed
    /// so that a shorter buffer never writes stale padding.
    pub fn set_len(&mut self, len: usize) {
        assert!(
            len <= self.capacity,
            "set_len {len} beyond capacity {}",
            self.capacity
        );
        if len < self.len {
            let end = self.len;
            self.padded_mut()[len..end].fill(0);
        }
        self.len = len;
    }

    #[allow(
        clippy::expect_used,
        reason = "PAGE_SIZE is a power of two and capacities are far below isize::MAX"
    )]
    fn layout(capacity: usize) -> Layout {
        Layout::from_size_align(capacity, PAGE_SIZE).expect("page-aligned layout is valid")
    }
}

impl Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.padded()[..self.len]
    }
}

impl DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        let len = self.len;
        &mut self.padded_mut()[..len]
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `zeroed` with the same layout.
        unsafe { dealloc(self.ptr.as_ptr(), Self::layout(self.capacity)) }
    }
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AlignedBuf")
            .field("len", &self.len)
            .field("capacity", &self.capacity)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_filled_in_part_is_zero_past_what_was_written() {
        let (buf, done) = AlignedBuf::filled_by(5000, |ptr, cap| {
            assert_eq!(cap, 2 * PAGE_SIZE);
            // SAFETY: the first 10 bytes of the allocation.
            unsafe { std::ptr::write_bytes(ptr, 0xab, 10) };
            Ok::<_, ()>(10)
        })
        .expect("filled");
        assert_eq!((done, buf.len()), (10, 5000));
        assert!(buf[..10].iter().all(|&b| b == 0xab));
        assert!(buf.padded()[10..].iter().all(|&b| b == 0));
        let failed = AlignedBuf::filled_by(100, |_, _| Err::<usize, _>("no"));
        assert_eq!(failed.err(), Some("no"));
    }

    #[test]
    fn alignment_and_padding() {
        let buf = AlignedBuf::from_slice(b"hello");
        assert_eq!(buf.as_ptr() as usize % PAGE_SIZE, 0);
        assert_eq!(&buf[..], b"hello");
        assert_eq!(buf.capacity(), PAGE_SIZE);
        assert!(buf.padded()[5..].iter().all(|&b| b == 0));
    }

    #[test]
    fn shrinking_zeroes_the_tail() {
        let mut buf = AlignedBuf::from_slice(&[7u8; 100]);
        buf.set_len(10);
        assert!(buf.padded()[10..].iter().all(|&b| b == 0));
        buf.set_len(100);
        assert_eq!(buf[50], 0);
    }

    #[test]
    fn empty_buffer_has_one_page() {
        let buf = AlignedBuf::zeroed(0);
        assert_eq!(buf.len(), 0);
        assert_eq!(buf.capacity(), PAGE_SIZE);
    }
}
