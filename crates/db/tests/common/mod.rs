//! What the db crate's integration tests share: the seeded xorshift PRNG their random
//! operations come from (`SHALE_SEED` replays one), and the tiny engine layout they run on,
//! so that splits, flushes and evictions happen in every test (both from `shale-testkit`).
//! Each test file includes this module and uses the part it needs; the document helpers
//! serve the model tests.
#![allow(
    dead_code,
    unused_imports,
    reason = "every test binary compiles this module and uses only part of it"
)]

use bson::{Document, RawDocumentBuf};
use shale_db::{Database, DbOptions, FindSpec, Namespace};
use shale_doc::compare_values;
use shale_engine::FsyncPolicy;

pub use shale_testkit::{tiny_engine, Rng};

/// Database options over `tiny_engine`, every other option at its default.
pub fn tiny_db(cache_bytes: usize, fsync: FsyncPolicy) -> DbOptions {
    DbOptions {
        engine: tiny_engine(cache_bytes, fsync),
        ..DbOptions::default()
    }
}

pub fn raw(d: &Document) -> RawDocumentBuf {
    RawDocumentBuf::from_document(d).expect("encodes")
}

/// Every document a find returns, decoded.
pub fn run_find(db: &Database, ns: &Namespace, spec: &FindSpec) -> Vec<Document> {
    let mut q = db.find(ns, spec).expect("find");
    let mut out = Vec::new();
    while let Some(d) = q.next_doc().expect("next") {
        out.push(Document::try_from(d.as_ref()).expect("doc"));
    }
    out
}

/// `docs` in `_id` order (BSON comparison order).
pub fn sorted_by_id(mut docs: Vec<Document>) -> Vec<Document> {
    docs.sort_by(|a, b| compare_values(a.get("_id").expect("id"), b.get("_id").expect("id")));
    docs
}
