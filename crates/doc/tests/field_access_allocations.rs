//! Matching `{y: v}` and projecting `{y: 1}` on a document with 1000 fields before `y` must
//! allocate exactly as much as on a document with 1 field before `y`: nothing per skipped
//! field. A counting global allocator counts the allocations of the current thread only.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

use bson::{doc, Document, RawDocumentBuf};
use shale_doc::{Matcher, Projection};
use shale_testkit::{allocations_during, CountingAlloc};

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

fn document(fields_before: usize) -> RawDocumentBuf {
    let mut d = Document::new();
    for i in 0..fields_before {
        let value = match i % 4 {
            0 => bson::Bson::Int32(i as i32),
            1 => bson::Bson::String(format!("value {i}")),
            2 => bson::Bson::Document(doc! {"nested": i as i64, "y": "not this one"}),
            _ => bson::Bson::Array(vec![1.into(), "two".into()]),
        };
        d.insert(format!("f{i}"), value);
    }
    d.insert("y", "target");
    RawDocumentBuf::from_document(&d).expect("encodes")
}

fn raw(d: Document) -> RawDocumentBuf {
    RawDocumentBuf::from_document(&d).expect("encodes")
}

#[test]
fn skipped_fields_cost_no_allocations() {
    let (small, large) = (document(1), document(1000));
    let filters = [
        raw(doc! {"y": "target"}),
        raw(doc! {"y": {"$gte": "t"}}),
        raw(doc! {"y": {"$in": ["a", "target"]}}),
    ];
    for filter in &filters {
        let matcher = Matcher::parse(filter).expect("parses");
        let (on_small, hit_small) = allocations_during(|| matcher.matches(&small));
        let (on_large, hit_large) = allocations_during(|| matcher.matches(&large));
        assert!(hit_small.expect("runs") && hit_large.expect("runs"));
        let shown = filter.to_document().expect("valid filter");
        eprintln!("match {shown}: {on_small} allocations (1 field before y), {on_large} (1000)");
        assert_eq!(on_small, on_large, "matching allocated per skipped field");
    }

    let projection = Projection::parse(&raw(doc! {"y": 1})).expect("parses");
    let (on_small, out_small) = allocations_during(|| projection.apply(&small, None));
    let (on_large, out_large) = allocations_during(|| projection.apply(&large, None));
    assert_eq!(out_small.expect("applies"), out_large.expect("applies"));
    eprintln!("project {{y: 1}}: {on_small} allocations (1 field before y), {on_large} (1000)");
    assert_eq!(on_small, on_large, "projecting allocated per skipped field");
}
