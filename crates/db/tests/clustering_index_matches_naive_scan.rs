//! Clustering indexes (TokuMX's `clustering: true`: each entry carries the whole document)
//! under random inserts, updates (of indexed and of unindexed fields) and deletes, against a
//! model (a map of documents): every random query is run hinted onto each clustering index
//! and must return exactly the documents, byte for byte equal to the model's, that a naive
//! scan of the model returns, sorted queries in the model's order, with `explain` showing no
//! fetch. Tiny tree nodes and cache make the engine split, flush and evict throughout; the
//! database is closed and reopened between rounds and `validate` (which compares each
//! clustering entry with the stored document) must pass after each. A catalog written
//! before clustering indexes existed (record format 1) still opens. `SHALE_SEED` replays
//! one seed.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

use bson::{doc, Bson, Document, RawDocumentBuf};
use shale_db::{Database, DbOptions, DeleteOp, FindSpec, Namespace, UpdateOp};
use shale_doc::{compare_values, ApplyContext, ErrorCode, Matcher, UpdateSpec};
use shale_engine::{Env, EnvOptions, FsyncPolicy, WriteBatch};
use std::collections::BTreeMap;

mod common;
use common::{raw, run_find, sorted_by_id, tiny_db, tiny_engine, Rng};

fn engine_options() -> EnvOptions {
    tiny_engine(256 << 10, FsyncPolicy::EveryMillis(50))
}

fn options() -> DbOptions {
    tiny_db(256 << 10, FsyncPolicy::EveryMillis(50))
}

/// The clustering indexes every query is hinted onto, in turn.
const CLUSTERING: [&str; 4] = ["a_c", "b_a_c", "cd_c", "u_c"];

fn index_specs() -> Vec<Document> {
    vec![
        doc! {"key": {"a": 1}, "name": "a_c", "clustering": true},
        doc! {"key": {"b": -1, "a": 1}, "name": "b_a_c", "clustering": true},
        doc! {"key": {"c.d": 1}, "name": "cd_c", "clustering": true},
        doc! {"key": {"u": 1}, "name": "u_c", "clustering": true, "unique": true},
        doc! {"key": {"b": 1}, "name": "b_plain"},
    ]
}

fn value(r: &mut Rng) -> Bson {
    match r.below(8) {
        0 => Bson::String(format!("s{}", r.below(4))),
        1 => Bson::Array(
            (0..r.below(4))
                .map(|_| Bson::Int32(r.below(8) as i32))
                .collect(),
        ),
        2 => Bson::Null,
        _ => Bson::Int32(r.below(10) as i32),
    }
}

fn random_doc(r: &mut Rng, id: i64) -> Document {
    let mut d = doc! {"_id": id};
    if r.chance(90) {
        d.insert("a", value(r));
    }
    if r.chance(80) {
        d.insert("b", r.below(6) as i32);
    }
    if r.chance(50) {
        let c = if r.chance(30) {
            Bson::Array(vec![
                Bson::Document(doc! {"d": r.below(5) as i32}),
                Bson::Document(doc! {"d": r.below(5) as i32}),
            ])
        } else {
            Bson::Document(doc! {"d": r.below(5) as i32})
        };
        d.insert("c", c);
    }
    // A unique key for every document (a missing one would be a duplicate null).
    d.insert("u", id * 7);
    d.insert("pad", "x".repeat(r.below(200) as usize));
    d
}

fn random_filter(r: &mut Rng) -> Document {
    let x = r.below(10) as i32;
    let y = x + r.below(6) as i32;
    match r.below(9) {
        0 => doc! {"a": x},
        1 => doc! {"a": {"$gt": x, "$lte": y}},
        2 => doc! {"a": {"$in": [x, y, "s1"]}},
        3 => doc! {"b": (x % 6), "a": {"$gte": x}},
        4 => doc! {"c.d": (x % 5)},
        5 => doc! {"b": {"$lt": (x % 6)}},
        6 => doc! {"u": {"$gte": x * 7, "$lt": y * 21}},
        7 => doc! {"$or": [{"a": x}, {"b": (x % 6)}]},
        _ => doc! {},
    }
}

/// One random filter, hinted onto every clustering index, against the model.
fn check_queries(
    db: &Database,
    ns: &Namespace,
    model: &BTreeMap<i64, Document>,
    r: &mut Rng,
    seed: u64,
) {
    let filter = random_filter(r);
    let matcher = Matcher::parse(&raw(&filter)).expect("filter");
    let expected: Vec<Document> = model
        .values()
        .filter(|d| matcher.matches(&raw(d)).expect("match"))
        .cloned()
        .collect();
    let unhinted = FindSpec {
        filter: filter.clone(),
        ..FindSpec::default()
    };
    assert_eq!(
        sorted_by_id(run_find(db, ns, &unhinted)),
        expected,
        "seed {seed}: {filter}"
    );
    for name in CLUSTERING {
        let spec = FindSpec {
            hint: Some(Bson::String(name.to_owned())),
            ..unhinted.clone()
        };
        // Whole documents: a stale clustering entry would differ from the model here.
        let got = sorted_by_id(run_find(db, ns, &spec));
        assert_eq!(got, expected, "seed {seed}: {filter} hinted {name}");
        let projected = FindSpec {
            projection: Some(doc! {"b": 1, "_id": 0}),
            ..spec.clone()
        };
        let mut got: Vec<String> = run_find(db, ns, &projected)
            .iter()
            .map(|d| d.to_string())
            .collect();
        let mut want: Vec<String> = expected
            .iter()
            .map(|d| match d.get("b") {
                Some(b) => doc! {"b": b.clone()}.to_string(),
                None => Document::new().to_string(),
            })
            .collect();
        got.sort();
        want.sort();
        assert_eq!(got, want, "seed {seed}: projected {filter} hinted {name}");
        check_explain(db, ns, &spec, name, expected.len(), seed);
    }
    check_sorted(db, ns, &filter, &expected, r, seed);
}

/// `explain` of a hinted clustering scan: an IXSCAN that says `clustering`, no FETCH, and
/// documents examined no more than keys examined.
fn check_explain(db: &Database, ns: &Namespace, spec: &FindSpec, name: &str, n: usize, seed: u64) {
    let e = db.explain_find(ns, spec, true).expect("explain");
    let plan = e
        .get_document("queryPlanner")
        .and_then(|q| q.get_document("winningPlan"))
        .expect("winningPlan");
    assert_eq!(plan.get_str("stage"), Ok("IXSCAN"), "seed {seed}: {e}");
    assert_eq!(plan.get_str("indexName"), Ok(name), "seed {seed}: {e}");
    assert_eq!(plan.get_bool("clustering"), Ok(true), "seed {seed}: {e}");
    let stats = e.get_document("executionStats").expect("executionStats");
    // Counts are int32 where they fit, as mongod's `appendNumber` makes them.
    assert_eq!(stats.get_i32("nReturned"), Ok(n as i32), "seed {seed}: {e}");
    let keys = i64::from(stats.get_i32("totalKeysExamined").expect("keys"));
    let docs = i64::from(stats.get_i32("totalDocsExamined").expect("docs"));
    assert!(docs <= keys && docs >= n as i64, "seed {seed}: {e}");
}

/// Sorted on `{u: dir}` through `u_c` (never multikey, so its order, or its reverse, is
/// the sort's): the `_id`s in the model's order.
fn check_sorted(
    db: &Database,
    ns: &Namespace,
    filter: &Document,
    expected: &[Document],
    r: &mut Rng,
    seed: u64,
) {
    let dir = if r.chance(50) { 1 } else { -1 };
    let limit = r.below(20) + 1;
    let spec = FindSpec {
        filter: filter.clone(),
        sort: Some(doc! {"u": dir}),
        limit: Some(limit),
        hint: Some(Bson::String("u_c".to_owned())),
        ..FindSpec::default()
    };
    let e = db.explain_find(ns, &spec, false).expect("explain");
    let plan = e
        .get_document("queryPlanner")
        .and_then(|q| q.get_document("winningPlan"))
        .expect("winningPlan");
    assert_eq!(plan.get_str("stage"), Ok("IXSCAN"), "no SORT stage: {e}");
    let got: Vec<Bson> = run_find(db, ns, &spec)
        .iter()
        .map(|d| d.get("_id").cloned().expect("id"))
        .collect();
    let mut want = expected.to_vec();
    want.sort_by(|x, y| {
        let o = compare_values(x.get("u").expect("u"), y.get("u").expect("u"));
        if dir < 0 {
            o.reverse()
        } else {
            o
        }
    });
    let want: Vec<Bson> = want
        .iter()
        .take(limit as usize)
        .map(|d| d.get("_id").cloned().expect("id"))
        .collect();
    assert_eq!(got, want, "seed {seed}: sorted {filter} by u {dir}");
}

fn random_update(r: &mut Rng) -> Document {
    match r.below(4) {
        0 => doc! {"$set": {"a": value(r)}},
        1 => doc! {"$inc": {"b": 1}},
        // Changes no indexed field: the clustering entries must still be rewritten.
        2 => doc! {"$set": {"pad": "y".repeat(r.below(300) as usize)}},
        _ => doc! {"$set": {"c": {"d": r.below(5) as i32}}},
    }
}

fn apply_to_model(model: &mut BTreeMap<i64, Document>, filter: &Document, update: &Document) {
    let m = Matcher::parse(&raw(filter)).expect("filter");
    let spec = UpdateSpec::parse(update, None).expect("update");
    for d in model.values_mut() {
        if m.matches(&raw(d)).expect("match") {
            spec.apply(d, &ApplyContext::new(bson::DateTime::now()))
                .expect("apply");
        }
    }
}

fn step(
    db: &Database,
    ns: &Namespace,
    model: &mut BTreeMap<i64, Document>,
    next_id: &mut i64,
    r: &mut Rng,
    seed: u64,
) {
    match r.below(10) {
        0..=3 => {
            let docs: Vec<Document> = (0..r.below(8) + 1)
                .map(|_| {
                    *next_id += 1;
                    random_doc(r, *next_id)
                })
                .collect();
            let raws: Vec<RawDocumentBuf> = docs.iter().map(raw).collect();
            let res = db.insert(ns, &raws, true).expect("insert");
            assert!(res.errors.is_empty(), "seed {seed}: {:?}", res.errors);
            for d in docs {
                model.insert(d.get_i64("_id").expect("id"), d);
            }
        }
        4..=6 => {
            let filter = random_filter(r);
            let update = random_update(r);
            let op = UpdateOp {
                filter: filter.clone(),
                update: UpdateSpec::parse(&update, None).expect("update"),
                multi: true,
                upsert: false,
                hint: None,
                vars: Default::default(),
            };
            let res = db.update(ns, &[op], true).expect("update");
            assert!(res.errors.is_empty(), "seed {seed}: {:?}", res.errors);
            apply_to_model(model, &filter, &update);
        }
        7 | 8 => {
            let filter = random_filter(r);
            let m = Matcher::parse(&raw(&filter)).expect("filter");
            let op = DeleteOp {
                filter: filter.clone(),
                limit_one: false,
                hint: None,
                vars: Default::default(),
            };
            let res = db.delete(ns, &[op], true).expect("delete");
            let before = model.len();
            model.retain(|_, d| !m.matches(&raw(d)).expect("match"));
            assert_eq!(
                res.n as usize,
                before - model.len(),
                "seed {seed}: {filter}"
            );
        }
        _ => {
            // A unique clustering key taken by another document is refused, and so is an
            // update that would move a document onto one.
            let mut ids = model.keys().copied();
            let (Some(first), Some(second)) = (ids.next(), ids.next()) else {
                return;
            };
            let u = model[&first].get_i64("u").expect("u");
            *next_id += 1;
            let res = db
                .insert(ns, &[raw(&doc! {"_id": *next_id, "u": u})], true)
                .expect("insert");
            let code = res.errors.first().map(|e| e.1.code.code());
            assert_eq!(code, Some(11000), "seed {seed}");
            let op = UpdateOp {
                filter: doc! {"_id": second},
                update: UpdateSpec::parse(&doc! {"$set": {"u": u}}, None).expect("u"),
                multi: false,
                upsert: false,
                hint: None,
                vars: Default::default(),
            };
            let res = db.update(ns, &[op], true).expect("update");
            let code = res.errors.first().map(|e| e.1.code.code());
            assert_eq!(code, Some(11000), "seed {seed}");
        }
    }
}

fn assert_valid(db: &Database, ns: &Namespace, model: &BTreeMap<i64, Document>, seed: u64) {
    let v = db.validate(ns).expect("validate");
    assert!(v.get_bool("valid").expect("valid"), "seed {seed}: {v}");
    assert_eq!(v.get_i32("nrecords").expect("n") as usize, model.len());
}

fn run(seed: u64) {
    let dir = tempfile::tempdir().expect("tempdir");
    let ns = Namespace::new("test", "c").expect("ns");
    let mut r = Rng(seed | 1);
    let mut model: BTreeMap<i64, Document> = BTreeMap::new();
    let mut db = Database::open(dir.path(), options()).expect("open");
    let mut next_id = 0i64;
    // Some documents exist before the indexes: the build fills clustering entries too.
    for _ in 0..30 {
        next_id += 1;
        let d = random_doc(&mut r, next_id);
        db.insert(&ns, &[raw(&d)], true).expect("insert");
        model.insert(next_id, d);
    }
    db.create_indexes(&ns, &index_specs()).expect("indexes");
    let listed = db.list_indexes(&ns).expect("listIndexes");
    for name in CLUSTERING {
        let spec = listed
            .iter()
            .find(|s| s.get_str("name") == Ok(name))
            .expect("listed");
        assert_eq!(spec.get_bool("clustering"), Ok(true), "{spec}");
    }
    for round in 0..4 {
        for _ in 0..50 {
            step(&db, &ns, &mut model, &mut next_id, &mut r, seed);
            check_queries(&db, &ns, &model, &mut r, seed);
        }
        assert_valid(&db, &ns, &model, seed);
        db.close().expect("close");
        db = Database::open(dir.path(), options()).expect("reopen");
        let listed = db.list_indexes(&ns).expect("listIndexes");
        assert_eq!(listed.len(), 6, "seed {seed} round {round}");
    }
    let stats = db.coll_stats(&ns, 1).expect("collStats");
    let sizes = stats.get_document("indexSizes").expect("indexSizes");
    for name in CLUSTERING {
        assert!(sizes.contains_key(name), "{stats}");
    }
    db.drop_indexes(&ns, &Bson::String("cd_c".to_owned()))
        .expect("drop");
    assert_eq!(db.list_indexes(&ns).expect("list").len(), 5);
    assert_valid(&db, &ns, &model, seed);
    db.close().expect("close");
}

#[test]
fn clustering_indexes_match_a_naive_scan() {
    if let Ok(s) = std::env::var("SHALE_SEED") {
        run(s.parse().expect("SHALE_SEED is a number"));
        return;
    }
    for seed in [3u64, 0xc1a5, 0xfeed_f00d] {
        run(seed);
    }
}

/// Rewrites the stored catalog record of `ns` with `edit`, with only the engine open.
fn edit_record(dir: &std::path::Path, ns: &str, edit: impl FnOnce(&mut Document)) {
    let env = Env::open(dir, engine_options()).expect("env");
    let tree = env.open_tree("catalog").expect("catalog tree");
    let bytes = env
        .read_view()
        .get(&tree, ns.as_bytes())
        .expect("get")
        .expect("record");
    let mut record: Document = bson::from_slice(&bytes).expect("record decodes");
    edit(&mut record);
    let mut batch = WriteBatch::new();
    batch.put(
        &tree,
        ns.as_bytes(),
        &bson::to_vec(&record).expect("encode"),
    );
    env.write(batch).expect("write");
    env.close().expect("close env");
}

#[test]
fn format_1_catalogs_open_and_newer_ones_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ns = Namespace::new("test", "old").expect("ns");
    let db = Database::open(dir.path(), options()).expect("open");
    db.create_indexes(&ns, &[doc! {"key": {"a": 1}, "name": "a_1"}])
        .expect("index");
    let docs: Vec<RawDocumentBuf> = (0..40).map(|i| raw(&doc! {"_id": i, "a": i % 7})).collect();
    db.insert(&ns, &docs, true).expect("insert");
    db.close().expect("close");
    // What the code before clustering indexes wrote: no formatVersion.
    edit_record(dir.path(), "test.old", |r| {
        assert_eq!(r.get_i32("formatVersion"), Ok(2));
        r.remove("formatVersion");
    });
    let db = Database::open(dir.path(), options()).expect("a format 1 catalog opens");
    let spec = FindSpec {
        filter: doc! {"a": 3},
        ..FindSpec::default()
    };
    assert_eq!(run_find(&db, &ns, &spec).len(), 6);
    db.create_indexes(
        &ns,
        &[doc! {"key": {"a": -1}, "name": "a_c", "clustering": true}],
    )
    .expect("clustering index on an old catalog");
    let hinted = FindSpec {
        hint: Some(Bson::String("a_c".to_owned())),
        ..spec
    };
    assert_eq!(run_find(&db, &ns, &hinted).len(), 6);
    assert!(db
        .validate(&ns)
        .expect("validate")
        .get_bool("valid")
        .expect("valid"));
    db.close().expect("close");
    // A format 1 record cannot hold a clustering index; a newer format is not misread.
    edit_record(dir.path(), "test.old", |r| {
        r.remove("formatVersion");
    });
    let e = Database::open(dir.path(), options()).expect_err("clustering in format 1");
    assert_eq!(e.code, ErrorCode::DataCorruptionDetected, "{e:?}");
    edit_record(dir.path(), "test.old", |r| {
        r.insert("formatVersion", 3);
    });
    let e = Database::open(dir.path(), options()).expect_err("format 3");
    assert_eq!(e.code.code(), 12, "{e:?}");
}
