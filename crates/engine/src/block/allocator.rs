//! Free space of a block file: a sorted list of free, page-aligned extents in the data area
//! `[DATA_START, end)`, where `end` is the file's allocated length.
//!
//! This module owns only the bookkeeping of free space (first fit, merging of neighbours,
//! extending the end, invariant B6); it does not decide *when* an extent becomes free: that is
//! the translation maps' business in `mod.rs` (B2..B5).

use shale_io::PAGE_SIZE;
use std::collections::BTreeMap;

/// First byte after the two header slots: blocks and serialized BTTs live from here on.
pub(crate) const DATA_START: u64 = 2 * PAGE_SIZE as u64;

/// Bytes of file an extent of `len` block bytes occupies: `len` rounded up to whole pages,
/// at least one page (B6).
pub(crate) fn alloc_len(len: u64) -> u64 {
    let page = PAGE_SIZE as u64;
    len.max(1).div_ceil(page) * page
}

/// The free extents of one file.
#[derive(Debug, Clone)]
pub(crate) struct Allocator {
    /// offset -> length, both page multiples; never adjacent (neighbours are merged).
    free: BTreeMap<u64, u64>,
    end: u64,
    free_bytes: u64,
}

impl Allocator {
    /// An allocator for a file whose data area `[DATA_START, end)` is entirely in use.
    pub(crate) fn new(end: u64) -> Self {
        assert!(
            end >= DATA_START && end.is_multiple_of(PAGE_SIZE as u64),
            "bad end {end}"
        );
        Allocator {
            free: BTreeMap::new(),
            end,
            free_bytes: 0,
        }
    }

    /// An allocator for a file of `end` bytes in which exactly `used` (offset, length)
    /// extents are referenced; every gap between them is free (B9). Fails, with a
    /// description, if an extent is unaligned, outside the data area, or overlaps another.
    pub(crate) fn from_used(end: u64, used: &[(u64, u64)]) -> Result<Self, String> {
        let mut sorted = used.to_vec();
        sorted.sort_unstable();
        let mut alloc = Allocator::new(end);
        let mut cursor = DATA_START;
        for &(off, len) in &sorted {
            if !off.is_multiple_of(PAGE_SIZE as u64)
                || !len.is_multiple_of(PAGE_SIZE as u64)
                || len == 0
            {
                return Err(format!(
                    "extent at {off} of {len} bytes is not page-aligned"
                ));
            }
            if off < cursor {
                return Err(format!(
                    "extent at {off} of {len} bytes overlaps the header or a previous extent (which ends at {cursor})"
                ));
            }
            let stop = off.checked_add(len).filter(|&s| s <= end).ok_or_else(|| {
                format!("extent at {off} of {len} bytes ends past the file end {end}")
            })?;
            if off > cursor {
                alloc.insert_free(cursor, off - cursor);
            }
            cursor = stop;
        }
        if cursor < end {
            alloc.insert_free(cursor, end - cursor);
        }
        Ok(alloc)
    }

    /// Takes `len` bytes (a page multiple): the first free extent large enough, from its
    /// front; otherwise the file end grows (B6).
    pub(crate) fn allocate(&mut self, len: u64) -> u64 {
        assert!(
            len > 0 && len.is_multiple_of(PAGE_SIZE as u64),
            "bad allocation {len}"
        );
        let found = self
            .free
            .iter()
            .find(|&(_, &l)| l >= len)
            .map(|(&o, &l)| (o, l));
        match found {
            Some((off, have)) => {
                self.free.remove(&off);
                if have > len {
                    self.free.insert(off + len, have - len);
                }
                self.free_bytes -= len;
                off
            }
            None => {
                let off = self.end;
                self.end += len;
                off
            }
        }
    }

    /// Returns an extent to the free list, merging it with free neighbours. Freeing anything
    /// outside the data area or overlapping a free extent is a bug (double free) and panics.
    pub(crate) fn free(&mut self, off: u64, len: u64) {
        assert!(
            off.is_multiple_of(PAGE_SIZE as u64) && len.is_multiple_of(PAGE_SIZE as u64) && len > 0,
            "freeing unaligned extent {off}+{len}"
        );
        assert!(
            off >= DATA_START && off + len <= self.end,
            "freeing extent {off}+{len} outside the data area [{DATA_START}, {})",
            self.end
        );
        self.insert_free(off, len);
    }

    fn insert_free(&mut self, mut off: u64, mut len: u64) {
        let before = self.free.range(..=off).next_back().map(|(&o, &l)| (o, l));
        let after = self.free.range(off..).next().map(|(&o, &l)| (o, l));
        if let Some((po, pl)) = before {
            assert!(
                po + pl <= off,
                "double free: {off}+{len} overlaps free extent {po}+{pl}"
            );
        }
        if let Some((no, nl)) = after {
            assert!(
                off + len <= no,
                "double free: {off}+{len} overlaps free extent {no}+{nl}"
            );
        }
        self.free_bytes += len;
        if let Some((po, pl)) = before.filter(|&(po, pl)| po + pl == off) {
            self.free.remove(&po);
            off = po;
            len += pl;
        }
        if let Some((no, nl)) = after.filter(|&(no, _)| off + len == no) {
            self.free.remove(&no);
            len += nl;
        }
        self.free.insert(off, len);
    }

    /// Takes off the free list whatever of `[off, off + len)` is on it, and returns those
    /// pieces in offset order (B11: they are punched, then freed again). Parts of the range
    /// that were reused meanwhile stay where they are.
    pub(crate) fn take_free_in(&mut self, off: u64, len: u64) -> Vec<(u64, u64)> {
        let stop = off.saturating_add(len);
        let first = self.free.range(..=off).next_back().map_or(off, |(&o, _)| o);
        let overlapping: Vec<(u64, u64)> = self
            .free
            .range(first..stop)
            .map(|(&o, &l)| (o, l))
            .filter(|&(o, l)| o + l > off)
            .collect();
        let mut taken = Vec::with_capacity(overlapping.len());
        for (o, l) in overlapping {
            let (from, to) = (o.max(off), (o + l).min(stop));
            self.free.remove(&o);
            if from > o {
                self.free.insert(o, from - o);
            }
            if o + l > to {
                self.free.insert(to, o + l - to);
            }
            self.free_bytes -= to - from;
            taken.push((from, to - from));
        }
        taken
    }

    /// Allocated length of the file (end of the data area).
    pub(crate) fn end(&self) -> u64 {
        self.end
    }

    /// Total bytes on the free list.
    pub(crate) fn free_bytes(&self) -> u64 {
        self.free_bytes
    }

    /// The free extents, in offset order.
    pub(crate) fn extents(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.free.iter().map(|(&o, &l)| (o, l))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: u64 = PAGE_SIZE as u64;

    #[test]
    fn take_free_in_takes_only_the_free_parts_of_a_range() {
        let mut a = Allocator::new(DATA_START);
        let base = a.allocate(8 * P);
        a.free(base, 3 * P);
        a.free(base + 4 * P, 2 * P);
        // Pages 1..5 of the eight: pages 1-2 and 4 are free, page 3 is in use.
        let taken = a.take_free_in(base + P, 4 * P);
        assert_eq!(taken, vec![(base + P, 2 * P), (base + 4 * P, P)]);
        assert_eq!(
            a.extents().collect::<Vec<_>>(),
            vec![(base, P), (base + 5 * P, P)]
        );
        assert_eq!(a.free_bytes(), 2 * P);
        // Nothing free in the range: nothing taken; freeing what was taken merges back.
        assert!(a.take_free_in(base + 2 * P, 2 * P).is_empty());
        for (o, l) in taken {
            a.free(o, l);
        }
        assert_eq!(
            a.extents().collect::<Vec<_>>(),
            vec![(base, 3 * P), (base + 4 * P, 2 * P)]
        );
    }

    #[test]
    fn alloc_len_rounds_to_pages() {
        assert_eq!(alloc_len(0), P);
        assert_eq!(alloc_len(1), P);
        assert_eq!(alloc_len(P), P);
        assert_eq!(alloc_len(P + 1), 2 * P);
    }

    #[test]
    fn extends_then_reuses_first_fit_and_merges() {
        let mut a = Allocator::new(DATA_START);
        let x = a.allocate(P);
        let y = a.allocate(2 * P);
        let z = a.allocate(P);
        assert_eq!((x, y, z), (DATA_START, DATA_START + P, DATA_START + 3 * P));
        assert_eq!(a.end(), DATA_START + 4 * P);
        a.free(x, P);
        a.free(z, P);
        assert_eq!(a.free_bytes(), 2 * P);
        // Two pages do not fit in either hole: extend.
        assert_eq!(a.allocate(2 * P), DATA_START + 4 * P);
        // Freeing y merges x, y and z into one four-page hole.
        a.free(y, 2 * P);
        assert_eq!(a.extents().collect::<Vec<_>>(), vec![(DATA_START, 4 * P)]);
        // First fit takes the front and leaves the remainder.
        assert_eq!(a.allocate(P), DATA_START);
        assert_eq!(
            a.extents().collect::<Vec<_>>(),
            vec![(DATA_START + P, 3 * P)]
        );
        assert_eq!(a.free_bytes(), 3 * P);
    }

    #[test]
    #[should_panic(expected = "double free")]
    fn double_free_panics() {
        let mut a = Allocator::new(DATA_START);
        let x = a.allocate(2 * P);
        a.free(x, 2 * P);
        a.free(x + P, P);
    }

    #[test]
    #[should_panic(expected = "outside the data area")]
    fn freeing_a_header_panics() {
        let mut a = Allocator::new(DATA_START + P);
        a.free(0, P);
    }

    #[test]
    fn from_used_finds_the_gaps() {
        let end = DATA_START + 10 * P;
        let used = [(DATA_START + 5 * P, P), (DATA_START + P, 2 * P)];
        let a = Allocator::from_used(end, &used).expect("valid");
        assert_eq!(
            a.extents().collect::<Vec<_>>(),
            vec![
                (DATA_START, P),
                (DATA_START + 3 * P, 2 * P),
                (DATA_START + 6 * P, 4 * P)
            ]
        );
        assert_eq!(a.free_bytes(), 7 * P);
    }

    #[test]
    fn from_used_rejects_bad_extents() {
        let end = DATA_START + 4 * P;
        assert!(Allocator::from_used(end, &[(DATA_START, P), (DATA_START, P)]).is_err());
        assert!(Allocator::from_used(end, &[(DATA_START, 2 * P), (DATA_START + P, P)]).is_err());
        assert!(Allocator::from_used(end, &[(P, P)]).is_err());
        assert!(Allocator::from_used(end, &[(DATA_START + 1, P)]).is_err());
        assert!(Allocator::from_used(end, &[(DATA_START + 3 * P, 2 * P)]).is_err());
        assert!(Allocator::from_used(end, &[(u64::MAX - P + 1, P)]).is_err());
    }
}
