//! Concurrent writers through the database layer: threads racing to insert the same unique
//! keys end with exactly one document per key (the losers get duplicate key errors, never a
//! second document), threads running `$inc` on one document lose no increment (write
//! conflicts are retried inside the database), and afterwards the exact count, the size
//! counter and every index agree with the documents (`validate`).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

use bson::{doc, Document, RawDocumentBuf};
use shale_db::{Database, FindSpec, Namespace, UpdateOp};
use shale_doc::UpdateSpec;
use shale_engine::FsyncPolicy;
use std::sync::Arc;

mod common;

fn open(dir: &std::path::Path) -> Database {
    let options = common::tiny_db(1 << 20, FsyncPolicy::EveryMillis(20));
    Database::open(dir, options).expect("open")
}

fn raw(d: Document) -> RawDocumentBuf {
    RawDocumentBuf::from_document(&d).expect("encodes")
}

#[test]
fn racing_unique_inserts_and_increments() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Arc::new(open(dir.path()));
    let ns = Namespace::new("test", "race").expect("ns");
    db.create_indexes(
        &ns,
        &[doc! {"key": {"u": 1}, "name": "u_1", "unique": true}],
    )
    .expect("index");
    db.insert(&ns, &[raw(doc! {"_id": "counter", "u": -1, "n": 0})], true)
        .expect("counter");
    const THREADS: i64 = 4;
    const KEYS: i64 = 150;
    const INCS: i64 = 100;
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let db = db.clone();
            let ns = ns.clone();
            std::thread::spawn(move || {
                let mut won = 0;
                for k in 0..KEYS {
                    let d = raw(doc! {"_id": format!("t{t}-{k}"), "u": k});
                    let r = db.insert(&ns, &[d], true).expect("insert");
                    match r.errors.first() {
                        None => won += 1,
                        Some((_, e)) => assert_eq!(e.code.code(), 11000, "{e:?}"),
                    }
                }
                for _ in 0..INCS {
                    let op = UpdateOp {
                        filter: doc! {"_id": "counter"},
                        update: UpdateSpec::parse(&doc! {"$inc": {"n": 1}}, None).expect("u"),
                        multi: false,
                        upsert: false,
                        hint: None,
                        vars: Default::default(),
                    };
                    let r = db.update(&ns, &[op], true).expect("update");
                    assert_eq!((r.n, r.errors.len()), (1, 0));
                }
                won
            })
        })
        .collect();
    let won: i64 = handles.into_iter().map(|h| h.join().expect("thread")).sum();
    assert_eq!(won, KEYS, "exactly one insert per unique key succeeds");
    assert_eq!(
        db.count(&ns, &doc! {}, 0, None, None, &shale_doc::Variables::new())
            .expect("count"),
        (KEYS + 1) as u64
    );
    let mut q = db
        .find(
            &ns,
            &FindSpec {
                filter: doc! {"_id": "counter"},
                ..FindSpec::default()
            },
        )
        .expect("find");
    let counter = q.next_doc().expect("next").expect("counter doc");
    assert_eq!(counter.get_i32("n").expect("n"), (THREADS * INCS) as i32);
    drop(q);
    let v = db.validate(&ns).expect("validate");
    assert!(v.get_bool("valid").expect("valid"), "{v}");
}
