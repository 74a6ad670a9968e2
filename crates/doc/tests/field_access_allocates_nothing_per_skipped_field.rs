//! The seeds' "nth attribute" experiment as a test of allocation, not time: matching
//! `{_id: v, y: v}` and projecting `{_id: 1, y: 1}` on a document where `y` follows N other
//! fields must allocate the same whether N is 1 or 1,000 — documents are read as raw BSON in
//! place, and skipping a field costs no allocation. Counted by a global allocator wrapper,
//! per thread (the test harness's own threads allocate too).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

use bson::{doc, Document, RawDocumentBuf};
use shale_doc::{Matcher, Projection};
use shale_testkit::{allocations_during, CountingAlloc};

#[global_allocator]
static ALLOCATOR: CountingAlloc = CountingAlloc;

fn allocations(f: impl FnOnce()) -> u64 {
    allocations_during(f).0
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
