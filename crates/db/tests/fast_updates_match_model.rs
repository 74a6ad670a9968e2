//! Read-free ("fast") updates against a model: a random mix of fast-eligible updates by
//! `_id` (`$inc`, `$set`, `$unset`, `$min`, `$max`, `$mul`, `$push`, `$rename`, and some that
//! cannot apply, such as `$inc` on a string), ineligible ones (an indexed field, an upsert, a
//! multi-document filter), inserts, deletes and point reads, with `fastUpdates` switched on
//! and off and the database closed and reopened (or dropped without a close, so recovery
//! replays the log's update messages) between rounds. The model applies the same operators
//! directly with `UpdateSpec::apply`, leaving a document unchanged where they fail. Tiny tree
//! nodes and cache make messages wait in buffers, flush, and meet evicted leaves. Every
//! round compares a full scan, the exact count, and `validate`. `SHALE_SEED` replays one seed.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

use bson::{doc, Document};
use shale_db::{Database, DbOptions, DeleteOp, FindSpec, Namespace, UpdateOp};
use shale_doc::{ApplyContext, UpdateSpec};
use shale_engine::FsyncPolicy;
use std::collections::BTreeMap;

mod common;
use common::{raw, tiny_engine, Rng};

fn options(fast: bool) -> DbOptions {
    DbOptions {
        engine: tiny_engine(256 << 10, FsyncPolicy::EveryCommit),
        fast_updates: fast,
        ..DbOptions::default()
    }
}

const IDS: u64 = 40;

/// An update by `_id` and whether fast updates may take it.
fn random_update(r: &mut Rng) -> (Document, bool) {
    let x = r.below(7) as i32 - 3;
    match r.below(12) {
        0 => (doc! {"$inc": {"n": x}}, true),
        1 => (doc! {"$set": {"t": x, "sub.a": x * 2}}, true),
        2 => (doc! {"$unset": {"t": 1}}, true),
        3 => (doc! {"$min": {"n": x}}, true),
        4 => (doc! {"$max": {"n": x}, "$inc": {"m": 1i64}}, true),
        5 => (doc! {"$mul": {"n": 2}}, true),
        6 => (doc! {"$push": {"l": x}}, true),
        7 => (doc! {"$rename": {"t": "u"}}, true),
        // Fails on every stored document (`s` is a string): unchanged either way.
        8 => (doc! {"$inc": {"s": 1}}, true),
        9 => (doc! {"$set": {"s.x": 1}}, true),
        // `k` is indexed: the read-modify-write path.
        10 => (doc! {"$set": {"k": x}}, false),
        _ => (doc! {"$inc": {"k": 1, "n": 1}}, false),
    }
}

/// The model's update: the operators applied to a copy, kept only if they succeed.
fn model_update(model: &mut BTreeMap<i32, Document>, id: i32, update: &Document) {
    let spec = UpdateSpec::parse(update, None).expect("parse");
    if let Some(d) = model.get_mut(&id) {
        let mut copy = d.clone();
        let ctx = ApplyContext::new(bson::DateTime::from_millis(0));
        if spec.apply(&mut copy, &ctx).is_ok() {
            *d = copy;
        }
    }
}

fn scan(db: &Database, ns: &Namespace) -> BTreeMap<i32, Document> {
    let spec = FindSpec {
        filter: doc! {},
        sort: None,
        projection: None,
        skip: 0,
        limit: None,
        hint: None,
        vars: Default::default(),
    };
    let mut q = db.find(ns, &spec).expect("find");
    let mut out = BTreeMap::new();
    while let Some(d) = q.next_doc().expect("next") {
        let d = Document::try_from(d.as_ref()).expect("doc");
        out.insert(d.get_i32("_id").expect("id"), d);
    }
    out
}

fn check(db: &Database, ns: &Namespace, model: &BTreeMap<i32, Document>, seed: u64) {
    assert_eq!(&scan(db, ns), model, "seed {seed}: scan differs from model");
    let n = db
        .count(ns, &doc! {}, 0, None, None, &shale_doc::Variables::new())
        .expect("count");
    assert_eq!(n, model.len() as u64, "seed {seed}: count");
    let v = db.validate(ns).expect("validate");
    assert_eq!(v.get_bool("valid"), Ok(true), "seed {seed}: {v}");
}

fn step(
    db: &Database,
    ns: &Namespace,
    model: &mut BTreeMap<i32, Document>,
    r: &mut Rng,
    seed: u64,
) {
    let id = r.below(IDS) as i32;
    match r.below(10) {
        0 | 1 => {
            let d = doc! {"_id": id, "n": r.below(9) as i32, "s": "str", "k": id};
            let res = db.insert(ns, &[raw(&d)], true).expect("insert");
            match model.entry(id) {
                std::collections::btree_map::Entry::Occupied(_) => {
                    assert_eq!(res.errors.len(), 1, "seed {seed}: duplicate")
                }
                std::collections::btree_map::Entry::Vacant(slot) => {
                    slot.insert(d);
                }
            }
        }
        2 => {
            let op = DeleteOp {
                filter: doc! {"_id": id},
                limit_one: true,
                hint: None,
                vars: Default::default(),
            };
            db.delete(ns, &[op], true).expect("delete");
            model.remove(&id);
        }
        3 => {
            let got = scan(db, ns).remove(&id);
            assert_eq!(got.as_ref(), model.get(&id), "seed {seed}: read of {id}");
        }
        4 => {
            // A multi-document filter: never fast.
            let op = UpdateOp {
                filter: doc! {"_id": {"$gte": id}},
                update: UpdateSpec::parse(&doc! {"$inc": {"m": 1i64}}, None).expect("p"),
                multi: true,
                upsert: false,
                hint: None,
                vars: Default::default(),
            };
            let res = db.update(ns, &[op], true).expect("update");
            let ids: Vec<i32> = model.range(id..).map(|(k, _)| *k).collect();
            assert_eq!(res.n, ids.len() as i64, "seed {seed}: multi");
            for k in ids {
                model_update(model, k, &doc! {"$inc": {"m": 1i64}});
            }
        }
        _ => {
            let (update, eligible) = random_update(r);
            let upsert = r.below(8) == 0;
            let op = UpdateOp {
                filter: doc! {"_id": id},
                update: UpdateSpec::parse(&update, None).expect("parse"),
                multi: false,
                upsert,
                hint: None,
                vars: Default::default(),
            };
            let existed = model.contains_key(&id);
            let res = db.update(ns, &[op], true).expect("update");
            let fast = eligible && !upsert && db.fast_updates();
            if fast {
                assert_eq!((res.n, res.n_modified), (1, 1), "seed {seed}: fast counts");
                assert!(
                    res.errors.is_empty(),
                    "seed {seed}: a fast update reports no error"
                );
            } else if res.errors.is_empty() {
                let upserted = i64::from(!existed && upsert);
                assert_eq!(
                    res.n,
                    i64::from(existed) + upserted,
                    "seed {seed}: {update}"
                );
            }
            if !existed && upsert && res.errors.is_empty() {
                let seed_doc = UpdateSpec::parse(&update, None)
                    .expect("parse")
                    .build_upsert(
                        &doc! {"_id": id},
                        &ApplyContext::new(bson::DateTime::from_millis(0)),
                    )
                    .expect("upsert");
                model.insert(id, seed_doc);
            } else {
                model_update(model, id, &update);
            }
        }
    }
}

fn run(seed: u64) {
    let dir = tempfile::tempdir().expect("tempdir");
    let ns = Namespace::new("test", "fast").expect("ns");
    let mut r = Rng(seed | 1);
    let mut model = BTreeMap::new();
    let mut db = Database::open(dir.path(), options(true)).expect("open");
    db.create_indexes(&ns, &[doc! {"key": {"k": 1}, "name": "k_1"}])
        .expect("index");
    for round in 0..6 {
        for _ in 0..250 {
            step(&db, &ns, &mut model, &mut r, seed);
        }
        check(&db, &ns, &model, seed);
        if db.fast_updates() {
            assert!(
                db.fast_update_counts().0 > 0,
                "seed {seed}: no message was sent"
            );
        }
        let fast = r.below(4) != 0;
        if round % 2 == 0 {
            db.close().expect("close");
        } else {
            // No close: the next open replays the log, update messages included.
            drop(db);
        }
        db = Database::open(dir.path(), options(fast)).expect("reopen");
        check(&db, &ns, &model, seed);
    }
    db.close().expect("close");
}

#[test]
fn fast_updates_match_a_model_across_reopens() {
    if let Some(seed) = std::env::var("SHALE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        return run(seed);
    }
    for seed in [1u64, 0x5eed, 0xfa57_0b7d, 977] {
        run(seed);
    }
}

#[test]
fn an_update_message_reaches_a_document_after_a_crash() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ns = Namespace::new("test", "crash").expect("ns");
    {
        let db = Database::open(dir.path(), options(true)).expect("open");
        db.insert(&ns, &[raw(&doc! {"_id": 1, "n": 1})], true)
            .expect("insert");
        for _ in 0..10 {
            let op = UpdateOp {
                filter: doc! {"_id": 1},
                update: UpdateSpec::parse(&doc! {"$inc": {"n": 1}}, None).expect("parse"),
                multi: false,
                upsert: false,
                hint: None,
                vars: Default::default(),
            };
            db.update(&ns, &[op], true).expect("update");
        }
        assert_eq!(db.fast_update_counts().0, 10, "all ten were messages");
        // Dropped without a close: the messages are only in the log.
    }
    let db = Database::open(dir.path(), options(false)).expect("reopen");
    let got = scan(&db, &ns);
    assert_eq!(got.get(&1), Some(&doc! {"_id": 1, "n": 11}));
    let (_, applied, _) = db.fast_update_counts();
    assert!(
        applied > 0,
        "the replayed messages went through the callback"
    );
}

#[test]
fn a_missing_document_is_not_created_and_the_count_stays_exact() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ns = Namespace::new("test", "missing").expect("ns");
    let db = Database::open(dir.path(), options(true)).expect("open");
    db.insert(&ns, &[raw(&doc! {"_id": 1})], true)
        .expect("insert");
    let op = UpdateOp {
        filter: doc! {"_id": 2},
        update: UpdateSpec::parse(&doc! {"$set": {"a": 1}}, None).expect("parse"),
        multi: false,
        upsert: false,
        hint: None,
        vars: Default::default(),
    };
    let res = db.update(&ns, &[op], true).expect("update");
    assert_eq!((res.n, res.n_modified), (1, 1), "TokuMX's counts: no read");
    assert_eq!(scan(&db, &ns).len(), 1);
    assert_eq!(
        db.count(&ns, &doc! {}, 0, None, None, &shale_doc::Variables::new())
            .expect("count"),
        1
    );
    db.close().expect("close");
}
