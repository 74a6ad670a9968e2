//! Helpers shared by the doc crate's integration tests: raw BSON from documents, table-driven
//! filter matching, and applying an update and comparing the result byte for byte.

#![allow(
    dead_code,
    reason = "every test binary compiles this module and uses only part of it"
)]

use bson::{DateTime, Document, RawDocumentBuf};
use shale_doc::{ApplyContext, Matcher, UpdateSpec};

pub fn raw(d: &Document) -> RawDocumentBuf {
    RawDocumentBuf::from_document(d).expect("test document encodes")
}

/// Runs (filter, document, expected match) cases.
pub fn run_matches(cases: &[(Document, Document, bool)]) {
    for (filter, document, expected) in cases {
        let matcher = Matcher::parse(&raw(filter)).expect("filter parses");
        let got = matcher.matches(&raw(document)).expect("match runs");
        assert_eq!(got, *expected, "filter {filter} on {document}");
    }
}

/// An update context whose "now" is the epoch.
pub fn ctx() -> ApplyContext {
    ApplyContext::new(DateTime::from_millis(0))
}

/// A document's BSON bytes (so field order and numeric types count in comparisons).
pub fn bytes(d: &Document) -> Vec<u8> {
    let mut out = Vec::new();
    d.to_writer(&mut out).expect("in-memory BSON");
    out
}

/// Applies `update` to `before` under `ctx` and compares with `after` byte for byte;
/// returns whether the update counted as a modification.
pub fn check_update_in(
    ctx: &ApplyContext,
    before: Document,
    update: Document,
    after: Document,
) -> bool {
    let spec = UpdateSpec::parse(&update, None).unwrap_or_else(|e| panic!("{update}: {e}"));
    let mut doc = before.clone();
    let outcome = spec
        .apply(&mut doc, ctx)
        .unwrap_or_else(|e| panic!("{update} on {before}: {e}"));
    assert_eq!(
        bytes(&doc),
        bytes(&after),
        "{update} on {before}: got {doc}, want {after}"
    );
    outcome.modified
}

/// `check_update_in` with the epoch as "now".
pub fn check_update(before: Document, update: Document, after: Document) -> bool {
    check_update_in(&ctx(), before, update, after)
}

/// Runs `pipeline` over `input` and compares with `want` byte for byte (types and field
/// order), for the aggregation tests.
pub fn check_pipeline(input: &[Document], pipeline: &[Document], want: &[Document]) {
    use shale_doc::aggregate::{NoCollections, Pipeline};
    let parsed = Pipeline::parse(pipeline).unwrap_or_else(|e| panic!("{pipeline:?}: {e}"));
    let got = parsed
        .run_documents(input, &NoCollections)
        .unwrap_or_else(|e| panic!("{pipeline:?}: {e}"));
    let shown: Vec<String> = got.iter().map(Document::to_string).collect();
    assert_eq!(got.len(), want.len(), "{pipeline:?}: got {shown:?}");
    for (g, w) in got.iter().zip(want) {
        assert_eq!(bytes(g), bytes(w), "{pipeline:?}: got {g}, want {w}");
    }
}
