//! Hot index builds (issue 23 item 9): a writer keeps inserting, updating and deleting while
//! `createIndexes` fills a new index over a populated collection. The writes must go on
//! during the build — no write waits more than half the build (the old build held the DDL
//! lock for the whole scan, so one write waited nearly all of it) — and the finished index
//! must be exact: `validate` agrees, and every query
//! planned on the index returns what a model of the writer's changes says. A unique build
//! that meets a duplicate fails with 11000 and leaves no index behind.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

use bson::{doc, Bson, Document};
use shale_db::{Database, DeleteOp, FindSpec, Namespace, UpdateOp};
use shale_doc::UpdateSpec;
use shale_engine::FsyncPolicy;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;
use common::{raw, run_find, Rng};

const DOCS: i64 = 12_000;
const VALUES: i64 = 37;

fn open(dir: &std::path::Path) -> Database {
    Database::open(dir, common::tiny_db(1 << 20, FsyncPolicy::EveryMillis(20))).expect("open")
}

fn load(db: &Database, ns: &Namespace) -> BTreeMap<i64, i64> {
    let mut model = BTreeMap::new();
    let docs: Vec<_> = (0..DOCS)
        .map(|i| {
            model.insert(i, i % VALUES);
            raw(&doc! {"_id": i, "a": i % VALUES, "pad": "x".repeat(40)})
        })
        .collect();
    for chunk in docs.chunks(1000) {
        let r = db.insert(ns, chunk, true).expect("load");
        assert!(r.errors.is_empty(), "{:?}", r.errors);
    }
    model
}

/// One random write, applied to the database and to `model`.
fn write_one(db: &Database, ns: &Namespace, rng: &mut Rng, model: &mut BTreeMap<i64, i64>, n: i64) {
    let a = rng.below(VALUES as u64) as i64;
    match rng.below(3) {
        0 => {
            let id = DOCS + n;
            let r = db
                .insert(ns, &[raw(&doc! {"_id": id, "a": a})], true)
                .expect("insert");
            assert!(r.errors.is_empty(), "{:?}", r.errors);
            model.insert(id, a);
        }
        1 => {
            let id = rng.below(DOCS as u64) as i64;
            let op = UpdateOp {
                filter: doc! {"_id": id},
                update: UpdateSpec::parse(&doc! {"$set": {"a": a}}, None).expect("update"),
                multi: false,
                upsert: false,
                hint: None,
                vars: Default::default(),
            };
            let r = db.update(ns, &[op], true).expect("update");
            assert!(r.errors.is_empty(), "{:?}", r.errors);
            if let Some(v) = model.get_mut(&id) {
                *v = a;
            }
        }
        _ => {
            let id = rng.below(DOCS as u64) as i64;
            let op = DeleteOp {
                filter: doc! {"_id": id},
                limit_one: true,
                hint: None,
                vars: Default::default(),
            };
            let r = db.delete(ns, &[op], true).expect("delete");
            assert!(r.errors.is_empty(), "{:?}", r.errors);
            model.remove(&id);
        }
    }
}

fn ids(docs: Vec<Document>) -> Vec<i64> {
    let mut v: Vec<i64> = docs
        .iter()
        .map(|d| match d.get("_id") {
            Some(Bson::Int64(i)) => *i,
            Some(Bson::Int32(i)) => i64::from(*i),
            other => panic!("_id {other:?}"),
        })
        .collect();
    v.sort_unstable();
    v
}

#[test]
fn writes_go_on_during_a_build_and_the_index_is_exact() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Arc::new(open(dir.path()));
    let ns = Namespace::new("test", "hot").expect("ns");
    let mut model = load(&db, &ns);
    let started = Arc::new(AtomicBool::new(false));
    let builder = {
        let (db, ns, started) = (db.clone(), ns.clone(), started.clone());
        std::thread::spawn(move || {
            while !started.load(Ordering::SeqCst) {
                std::thread::yield_now();
            }
            let t = Instant::now();
            db.create_indexes(&ns, &[doc! {"key": {"a": 1}, "name": "a_1"}])
                .expect("build");
            t.elapsed()
        })
    };
    let mut rng = Rng(0x5eed_1234);
    let (mut n, mut during, mut longest) = (0, 0, Duration::ZERO);
    while !builder.is_finished() {
        let t = Instant::now();
        write_one(&db, &ns, &mut rng, &mut model, n);
        longest = longest.max(t.elapsed());
        n += 1;
        during += 1;
        started.store(true, Ordering::SeqCst);
    }
    let build = builder.join().expect("builder");
    assert!(
        build > Duration::from_millis(100),
        "the build took {build:?}: too short to tell a hot build from a blocking one"
    );
    assert!(
        longest < build / 2,
        "a write waited {longest:?} during a build of {build:?} ({during} writes)"
    );
    // A few more writes after the build, on the ready index.
    for _ in 0..200 {
        write_one(&db, &ns, &mut rng, &mut model, n);
        n += 1;
    }
    let v = db.validate(&ns).expect("validate");
    assert!(v.get_bool("valid").expect("valid"), "{v}");
    assert!(db
        .list_indexes(&ns)
        .expect("list")
        .iter()
        .any(|s| s.get_str("name") == Ok("a_1")));
    for a in 0..VALUES {
        let spec = FindSpec {
            filter: doc! {"a": a},
            hint: Some(Bson::String("a_1".into())),
            ..FindSpec::default()
        };
        let want: Vec<i64> = model
            .iter()
            .filter(|(_, v)| **v == a)
            .map(|(k, _)| *k)
            .collect();
        assert_eq!(ids(run_find(&db, &ns, &spec)), want, "a = {a}");
    }
}

#[test]
fn a_unique_build_over_duplicates_fails_and_leaves_no_index() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(dir.path());
    let ns = Namespace::new("test", "dups").expect("ns");
    load(&db, &ns);
    let e = db
        .create_indexes(
            &ns,
            &[doc! {"key": {"a": 1}, "name": "a_1", "unique": true}],
        )
        .expect_err("duplicates");
    assert_eq!(e.code.code(), 11000, "{e:?}");
    let names: Vec<String> = db
        .list_indexes(&ns)
        .expect("list")
        .iter()
        .map(|s| s.get_str("name").expect("name").to_owned())
        .collect();
    assert_eq!(names, vec!["_id_".to_owned()]);
    let v = db.validate(&ns).expect("validate");
    assert!(v.get_bool("valid").expect("valid"), "{v}");
    // The same index over distinct values builds.
    db.create_indexes(
        &ns,
        &[doc! {"key": {"_id": 1, "a": 1}, "name": "ida", "unique": true}],
    )
    .expect("unique over distinct keys");
}
