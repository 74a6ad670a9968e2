//! Time series collections against a naive model: measurements inserted (in and out of time
//! order, across meta values, past a bucket's limits) read back exactly; deletes and meta
//! updates change what a naive evaluation says they change; buckets stay within mongod's
//! limits; the TTL expires whole buckets.

use super::*;
use crate::write_ops::{DeleteOp, UpdateOp};
use crate::{DbOptions, FindSpec};
use bson::{doc, RawDocumentBuf};
use shale_doc::timeseries::bucket::MAX_MEASUREMENTS;
use shale_doc::{compare_documents, Matcher, UpdateSpec};

fn open() -> (tempfile::TempDir, Database) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Database::open(dir.path(), DbOptions::default()).expect("open");
    (dir, db)
}

fn ts(db: &Database, meta: bool) -> Namespace {
    let ns = Namespace::new("d", "ts").expect("ns");
    let spec = match meta {
        true => doc! {"timeField": "t", "metaField": "m"},
        false => doc! {"timeField": "t"},
    };
    let options = TimeseriesOptions::parse(&Bson::Document(spec), "d.ts").expect("options");
    db.create_timeseries(&ns, options, TimeseriesCreate::default())
        .expect("create");
    ns
}

fn raw(d: &Document) -> RawDocumentBuf {
    RawDocumentBuf::from_document(d).expect("raw")
}

fn all(db: &Database, ns: &Namespace, filter: Document) -> Vec<Document> {
    let spec = FindSpec {
        filter,
        ..FindSpec::default()
    };
    let mut q = db.find(ns, &spec).expect("find");
    let mut out = Vec::new();
    while let Some(d) = q.next_doc().expect("next") {
        out.push(d.to_document().expect("doc"));
    }
    out
}

/// Sorted by `_id` (each measurement here has a distinct one), for comparison.
fn sorted(mut docs: Vec<Document>) -> Vec<Document> {
    docs.sort_by(|a, b| compare_documents(&doc! {"i": a.get("_id")}, &doc! {"i": b.get("_id")}));
    docs
}

/// A measurement as it reads back: time, meta, then the rest.
fn as_read(d: &Document) -> Document {
    let mut out = doc! {"t": d.get("t").cloned().expect("t")};
    if let Some(m) = d.get("m") {
        out.insert("m", m.clone());
    }
    for (k, v) in d {
        if k != "t" && k != "m" {
            out.insert(k, v.clone());
        }
    }
    out
}

fn measurements(n: i64) -> Vec<Document> {
    // Times go back and forth across hours; three meta values; every 7th lacks `x`.
    (0..n)
        .map(|i| {
            let t = DateTime::from_millis(1_700_000_000_000 + ((i * 7919) % 10_000) * 1_000);
            let mut d = doc! {"_id": i, "t": t, "m": {"site": i % 3}, "x": i};
            if i % 7 == 0 {
                d.remove("x");
            }
            d
        })
        .collect()
}

#[test]
fn inserts_read_back_as_a_naive_model_says() {
    let (_dir, db) = open();
    let ns = ts(&db, true);
    let model = measurements(2_500);
    let docs: Vec<RawDocumentBuf> = model.iter().map(raw).collect();
    let r = db
        .insert_timeseries(&ns, &docs[..1_200], true)
        .expect("insert");
    assert_eq!((r.n, r.errors.len()), (1_200, 0));
    let r = db
        .insert_timeseries(&ns, &docs[1_200..], false)
        .expect("insert");
    assert_eq!(r.n, 1_300);
    let want: Vec<Document> = model.iter().map(as_read).collect();
    assert_eq!(sorted(all(&db, &ns, doc! {})), want);
    let filtered = all(&db, &ns, doc! {"m.site": 1, "x": {"$gte": 100}});
    let naive: Vec<Document> = want
        .iter()
        .filter(|d| d.get_document("m").expect("m").get_i64("site") == Ok(1))
        .filter(|d| d.get_i64("x").is_ok_and(|x| x >= 100))
        .cloned()
        .collect();
    assert_eq!(sorted(filtered), naive);
    // Every bucket within mongod's limits and span.
    let buckets = all(&db, &buckets_ns(&ns).expect("ns"), doc! {});
    assert!(buckets.len() >= 3);
    for b in &buckets {
        let data = b.get_document("data").expect("data");
        let times = data.get_document("t").expect("t column");
        assert!(times.len() <= MAX_MEASUREMENTS);
        let min = b
            .get_document("control")
            .expect("c")
            .get_document("min")
            .expect("min");
        let start = min.get_datetime("t").expect("start").timestamp_millis();
        assert_eq!(
            b.get_object_id("_id")
                .expect("id")
                .timestamp()
                .timestamp_millis(),
            start
        );
        for (_, t) in times {
            let t = t.as_datetime().expect("date").timestamp_millis();
            assert!(t >= start && t < start + 3_600_000, "{t} outside {start}");
        }
    }
}

#[test]
fn a_measurement_without_a_date_is_its_write_error() {
    let (_dir, db) = open();
    let ns = ts(&db, false);
    let t = DateTime::from_millis(0);
    let docs = [doc! {"t": 1}, doc! {"t": t, "a": 1}, doc! {"a": 2}].map(|d| raw(&d));
    let r = db.insert_timeseries(&ns, &docs, false).expect("unordered");
    assert_eq!(r.n, 1);
    assert_eq!(r.errors.iter().map(|e| e.0).collect::<Vec<_>>(), vec![0, 2]);
    assert_eq!(r.errors[0].1.code.code(), 2);
    let r = db
        .insert_timeseries(&ns, &docs[1..], true)
        .expect("ordered");
    assert_eq!((r.n, r.errors.len()), (1, 1));
    assert_eq!(all(&db, &ns, doc! {}).len(), 2);
}

#[test]
fn deletes_and_meta_updates_match_the_model() {
    let (_dir, db) = open();
    let ns = ts(&db, true);
    let mut model: Vec<Document> = measurements(1_500).iter().map(as_read).collect();
    let docs: Vec<RawDocumentBuf> = measurements(1_500).iter().map(raw).collect();
    db.insert_timeseries(&ns, &docs, true).expect("insert");
    // A delete on a measurement field: some of many buckets' measurements.
    let filter = doc! {"x": {"$mod": [5, 0]}};
    let m = Matcher::parse(&raw(&filter)).expect("matcher");
    let before = model.len();
    model.retain(|d| !m.matches(&raw(d)).expect("matches"));
    let op = DeleteOp {
        filter: filter.clone(),
        limit_one: false,
        hint: None,
        vars: Default::default(),
    };
    let r = db.delete_timeseries(&ns, &[op], true).expect("delete");
    assert_eq!(r.n as usize, before - model.len());
    assert_eq!(sorted(all(&db, &ns, doc! {})), model);
    // deleteOne removes exactly one.
    let one = DeleteOp {
        filter: doc! {"m.site": 2},
        limit_one: true,
        hint: None,
        vars: Default::default(),
    };
    assert_eq!(db.delete_timeseries(&ns, &[one], true).expect("one").n, 1);
    assert_eq!(all(&db, &ns, doc! {}).len(), model.len() - 1);
    // A meta update counts measurements.
    let sites0 = all(&db, &ns, doc! {"m.site": 0}).len() as i64;
    let update = translate_update(&doc! {"$set": {"m.site": 10}}, "m").expect("update");
    let op = UpdateOp {
        filter: translate_filter(&doc! {"m.site": 0}, "m").expect("filter"),
        update: UpdateSpec::parse(&update, None).expect("spec"),
        multi: true,
        upsert: false,
        hint: None,
        vars: Default::default(),
    };
    let r = db.update_timeseries(&ns, &[op], true).expect("update");
    assert_eq!((r.n, r.n_modified), (sites0, sites0));
    assert_eq!(all(&db, &ns, doc! {"m.site": 10}).len() as i64, sites0);
    assert!(all(&db, &ns, doc! {"m.site": 0}).is_empty());
    // Inserts after the rewrites still land and read back.
    let late =
        raw(&doc! {"_id": -1, "t": DateTime::from_millis(1_700_000_000_000), "m": {"site": 1}});
    db.insert_timeseries(&ns, &[late], true)
        .expect("insert after");
    assert_eq!(all(&db, &ns, doc! {"_id": -1}).len(), 1);
}

fn column(hex: &str) -> Bson {
    let bytes = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
        .collect();
    Bson::Binary(bson::Binary {
        subtype: bson::spec::BinarySubtype::Column,
        bytes,
    })
}

#[test]
fn a_restored_compressed_bucket_reads_updates_and_deletes() {
    // mongod 7.0's version 2 bucket of jstests/noPassthrough/timeseries/
    // timeseries_insert_decompression_failure.js, inserted as mongorestore inserts it.
    let (_dir, db) = open();
    let ns = ts(&db, true);
    let id = |s| bson::oid::ObjectId::parse_str(s).expect("oid");
    let time = DateTime::from_millis(1_705_438_119_448);
    let bucket = doc! {
        "_id": id("65a6eb806ffc9fa4280ecac4"),
        "control": {"version": 2, "min": {"t": DateTime::from_millis(1_705_438_080_000)},
                    "max": {"t": time}, "count": 2},
        "meta": 0,
        "data": {
            "t": column("0900188608148d010000800e0000000000000000"),
            "a": column("01000000000000000000902e0000000000000000"),
            "_id": column("070065a6eba7e6d2e848e08c3750802e0000000000000000"),
        },
    };
    let buckets = buckets_ns(&ns).expect("ns");
    db.insert(&buckets, &[raw(&bucket)], true).expect("restore");
    let first = doc! {"t": time, "m": 0, "a": 0.0, "_id": id("65a6eba7e6d2e848e08c3750")};
    let second = doc! {"t": time, "m": 0, "a": 1.0, "_id": id("65a6eba7e6d2e848e08c3751")};
    assert_eq!(all(&db, &ns, doc! {}), vec![first.clone(), second]);
    // A meta update changes the compressed bucket's `meta` and counts its measurements.
    let update = translate_update(&doc! {"$set": {"m": 5}}, "m").expect("update");
    let op = UpdateOp {
        filter: translate_filter(&doc! {"m": 0}, "m").expect("filter"),
        update: UpdateSpec::parse(&update, None).expect("spec"),
        multi: true,
        upsert: false,
        hint: None,
        vars: Default::default(),
    };
    let r = db.update_timeseries(&ns, &[op], true).expect("update");
    assert_eq!((r.n, r.n_modified), (2, 2));
    // A delete rewrites the kept measurement as a version 1 bucket under the same `_id`.
    let op = DeleteOp {
        filter: doc! {"a": 1.0},
        limit_one: false,
        hint: None,
        vars: Default::default(),
    };
    assert_eq!(db.delete_timeseries(&ns, &[op], true).expect("delete").n, 1);
    let mut kept = first.clone();
    kept.insert("m", 5);
    assert_eq!(all(&db, &ns, doc! {}), vec![kept.clone()]);
    let stored = all(&db, &buckets, doc! {});
    assert_eq!(stored.len(), 1);
    assert_eq!(
        stored[0].get_object_id("_id"),
        Ok(id("65a6eb806ffc9fa4280ecac4"))
    );
    let control = stored[0].get_document("control").expect("control");
    assert_eq!(control.get_i32("version"), Ok(1));
    // New measurements of that meta value land and read back beside it.
    let late = raw(&doc! {"t": time, "m": 5, "_id": 7});
    db.insert_timeseries(&ns, &[late], true).expect("insert");
    assert_eq!(all(&db, &ns, doc! {"m": 5}).len(), 2);
}

#[test]
fn statements_outside_the_meta_field_are_refused() {
    assert_eq!(
        translate_filter(&doc! {"x": 1}, "m")
            .expect_err("x")
            .code
            .code(),
        72
    );
    assert_eq!(
        translate_filter(&doc! {"$expr": {"$eq": [1, 1]}}, "m")
            .expect_err("expr")
            .code
            .code(),
        72
    );
    assert_eq!(
        translate_filter(&doc! {"$or": [{"m.a": 1}, {"m": 2}]}, "m").expect("meta"),
        doc! {"$or": [{"meta.a": 1}, {"meta": 2}]}
    );
    assert_eq!(
        translate_update(&doc! {"$set": {"x": 1}}, "m")
            .expect_err("x")
            .code
            .code(),
        72
    );
    assert_eq!(
        translate_update(&doc! {"m": 1}, "m")
            .expect_err("replace")
            .code
            .code(),
        72
    );
    assert_eq!(
        translate_update(&doc! {"$rename": {"m.a": "m.b"}}, "m").expect("rename"),
        doc! {"$rename": {"meta.a": "meta.b"}}
    );
}

#[test]
fn listing_indexes_ttl_and_drop() {
    let (_dir, db) = open();
    let ns = ts(&db, true);
    let listed = db.list_collections("d");
    let names: Vec<_> = listed
        .iter()
        .map(|c| {
            (
                c.get_str("name").unwrap_or(""),
                c.get_str("type").unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        names,
        vec![("system.buckets.ts", "collection"), ("ts", "timeseries")]
    );
    let indexes = db.list_timeseries_indexes(&ns).expect("indexes");
    assert_eq!(indexes.len(), 1);
    assert_eq!(indexes[0].get_str("name"), Ok("m_1_t_1"));
    assert_eq!(
        indexes[0].get_document("key").expect("key"),
        &doc! {"m": 1, "t": 1}
    );
    // TTL: a bucket goes once its whole span is older than expireAfterSeconds.
    let options = doc! {"timeseries": {"timeField": "t", "bucketMaxSpanSeconds": 3600, "granularity": "seconds"}, "expireAfterSeconds": 60i64};
    let now = DateTime::from_millis(10_000_000_000);
    let f = expiry_filter(&options, now).expect("filter");
    let cutoff = f
        .get_document("_id")
        .expect("_id")
        .get_object_id("$lt")
        .expect("oid");
    assert_eq!(
        cutoff.timestamp().timestamp_millis(),
        10_000_000_000 - 3_660_000
    );
    db.drop_collection(&ns).expect("drop");
    assert!(db.list_collections("d").is_empty());
}
