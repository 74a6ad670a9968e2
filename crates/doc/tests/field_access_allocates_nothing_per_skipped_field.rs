//! The seeds' "nth attribute" experiment as a test of allocation, not time: matching
//! `{_id: v, y: v}` and projecting `{_id: 1, y: 1}` on a document where `y` follows N other
//! fields must allocate the same whether N is 1 or 1,000 — documents are read as raw BSON in
//! place, and skipping a field costs no allocation. Counted by a global allocator wrapper,
//! per thread (the test harness's own threads allocate too).

use bson::{doc, Document, RawDocumentBuf};
use shale_doc::{Matcher, Projection};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn allocations(f: impl FnOnce()) -> u64 {
    let before = ALLOCATIONS.with(Cell::get);
    f();
    ALLOCATIONS.with(Cell::get) - before
}

/// `{_id: 7, x1: 1, ..., xN: N, y: 7}` as raw BSON.
fn nth_attribute_doc(n: usize) -> RawDocumentBuf {
    let mut d = Document::new();
    d.insert("_id", 7);
    for i in 1..=n {
        d.insert(format!("x{i}"), i as i32);
    }
    d.insert("y", 7);
    RawDocumentBuf::from_document(&d).expect("encodes")
}

#[test]
fn matching_and_projecting_y_allocates_the_same_for_1_and_1000_fields_before_it() {
    let filter = RawDocumentBuf::from_document(&doc! {"_id": 7, "y": 7}).expect("filter");
    let matcher = Matcher::parse(&filter).expect("matcher");
    let spec = RawDocumentBuf::from_document(&doc! {"_id": 1, "y": 1}).expect("spec");
    let projection = Projection::parse(&spec).expect("projection");
    let mut counts = Vec::new();
    for n in [1usize, 10, 100, 1000] {
        let d = nth_attribute_doc(n);
        // Warm up once (lazy statics, regex caches), then count.
        assert!(matcher.matches(&d).expect("match"));
        let _ = projection.apply(&d, None).expect("project");
        let m = allocations(|| assert!(matcher.matches(&d).expect("match")));
        let p = allocations(|| {
            let out = projection.apply(&d, None).expect("project");
            assert_eq!(
                out.as_bytes(),
                RawDocumentBuf::from_document(&doc! {"_id": 7, "y": 7})
                    .expect("e")
                    .as_bytes()
            );
        });
        counts.push((n, m, p));
    }
    let (_, m1, p1) = counts[0];
    for &(n, m, p) in &counts {
        assert_eq!(
            (m, p),
            (m1, p1),
            "allocations for N={n} differ from N=1: {counts:?}"
        );
    }
}
