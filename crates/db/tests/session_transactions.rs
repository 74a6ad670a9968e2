//! Session transactions through the database layer (`UserTxn`): a transaction reads its own
//! writes and its snapshot, others see nothing until it commits, abort leaves nothing, the
//! second writer of a key gets WriteConflict, DDL and the lifetime reaper end a live
//! transaction (NoSuchTransaction afterwards), and a write set past the engine's limit fails
//! the statement and leaves nothing once the transaction is aborted.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

use bson::{doc, Bson, Document, RawDocumentBuf};
use shale_db::{Database, DeleteOp, FindSpec, Namespace, TxnEnd, UpdateOp};
use shale_doc::UpdateSpec;
use shale_engine::FsyncPolicy;
use std::time::Duration;

mod common;

fn open(dir: &std::path::Path, txn_max_bytes: Option<usize>) -> Database {
    let mut options = common::tiny_db(4 << 20, FsyncPolicy::EveryMillis(20));
    options.engine.txn_max_bytes = txn_max_bytes;
    Database::open(dir, options).expect("open")
}

fn raw(d: Document) -> RawDocumentBuf {
    RawDocumentBuf::from_document(&d).expect("encodes")
}

fn ns() -> Namespace {
    Namespace::new("test", "txn").expect("ns")
}

/// Every document of `ns` as a stand-alone find sees it, in `_id` order.
fn committed(db: &Database) -> Vec<Document> {
    let mut q = db.find(&ns(), &FindSpec::default()).expect("find");
    let mut out = Vec::new();
    while let Some(d) = q.next_doc().expect("next") {
        out.push(Document::try_from(d.as_ref()).expect("doc"));
    }
    out
}

fn set(filter: Document, update: Document) -> UpdateOp {
    UpdateOp {
        filter,
        update: UpdateSpec::parse_value(&Bson::Document(update), None).expect("update"),
        multi: false,
        upsert: false,
        hint: None,
        vars: Default::default(),
    }
}

fn ids_in(db: &Database, t: &shale_db::UserTxn) -> Vec<Bson> {
    db.find_in(t, &ns(), &FindSpec::default())
        .expect("find_in")
        .iter()
        .map(|d| {
            let d = Document::try_from(d.as_ref()).expect("doc");
            d.get("_id").cloned().expect("_id")
        })
        .collect()
}

#[test]
fn own_writes_are_seen_inside_and_nothing_outside_until_commit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(dir.path(), None);
    db.insert(&ns(), &[raw(doc! {"_id": 1, "a": 1})], true)
        .expect("seed");
    let t = db.begin_user_txn();
    db.insert_in(&t, &ns(), &[raw(doc! {"_id": 2, "a": 2})])
        .expect("insert_in");
    db.update_in(&t, &ns(), &[set(doc! {"_id": 1}, doc! {"$set": {"a": 10}})])
        .expect("update_in");
    assert_eq!(ids_in(&db, &t), vec![Bson::Int32(1), Bson::Int32(2)]);
    let filtered = FindSpec {
        filter: doc! {"a": {"$gte": 2}},
        ..FindSpec::default()
    };
    let matched = db.find_in(&t, &ns(), &filtered).expect("find_in");
    assert_eq!(matched.len(), 2, "a filter sees the update and the insert");
    let values = db
        .distinct_in(
            &t,
            &ns(),
            "a",
            &Document::new(),
            &shale_doc::Variables::new(),
        )
        .expect("distinct_in");
    assert_eq!(values, vec![Bson::Int32(2), Bson::Int32(10)]);
    let summed = db
        .aggregate_in(
            &t,
            &ns(),
            &[doc! {"$group": {"_id": null, "s": {"$sum": "$a"}}}],
            None,
            &Default::default(),
        )
        .expect("aggregate_in");
    assert_eq!(summed[0].get_i32("s").expect("s"), 12);
    // Outside the transaction: the seed, unchanged.
    assert_eq!(committed(&db), vec![doc! {"_id": 1, "a": 1}]);
    db.commit_user_txn(&t).expect("commit");
    assert_eq!(t.ended(), Some(TxnEnd::Committed));
    assert_eq!(
        committed(&db),
        vec![doc! {"_id": 1, "a": 10}, doc! {"_id": 2, "a": 2}]
    );
    // A retried commit is Ok; a statement after commit is NoSuchTransaction.
    db.commit_user_txn(&t).expect("commit again");
    let e = db
        .insert_in(&t, &ns(), &[raw(doc! {"_id": 3})])
        .expect_err("ended");
    assert_eq!(e.code.code(), 251);
    assert_eq!(db.open_user_txns(), 0);
}

#[test]
fn abort_leaves_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(dir.path(), None);
    db.insert(&ns(), &[raw(doc! {"_id": 1, "a": 1})], true)
        .expect("seed");
    let t = db.begin_user_txn();
    db.insert_in(&t, &ns(), &[raw(doc! {"_id": 2})])
        .expect("insert_in");
    db.update_in(&t, &ns(), &[set(doc! {"_id": 1}, doc! {"$set": {"a": 5}})])
        .expect("update_in");
    let deleted = db
        .delete_in(
            &t,
            &ns(),
            &[DeleteOp {
                filter: doc! {"_id": 2},
                limit_one: true,
                hint: None,
                vars: Default::default(),
            }],
        )
        .expect("delete_in");
    assert_eq!(deleted.n, 1);
    db.abort_user_txn(&t);
    db.abort_user_txn(&t);
    assert_eq!(t.ended(), Some(TxnEnd::Aborted));
    assert_eq!(committed(&db), vec![doc! {"_id": 1, "a": 1}]);
    assert_eq!(
        db.commit_user_txn(&t).expect_err("aborted").code.code(),
        251
    );
}

#[test]
fn the_second_writer_of_a_key_gets_a_write_conflict() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(dir.path(), None);
    db.insert(&ns(), &[raw(doc! {"_id": 1, "n": 0})], true)
        .expect("seed");
    let first = db.begin_user_txn();
    let second = db.begin_user_txn();
    db.update_in(
        &first,
        &ns(),
        &[set(doc! {"_id": 1}, doc! {"$inc": {"n": 1}})],
    )
    .expect("first");
    let e = db
        .update_in(
            &second,
            &ns(),
            &[set(doc! {"_id": 1}, doc! {"$inc": {"n": 1}})],
        )
        .expect_err("conflict");
    assert_eq!(e.code.code(), 112);
    // The same for an insert of one _id by two transactions.
    db.insert_in(&first, &ns(), &[raw(doc! {"_id": 2})])
        .expect("first insert");
    let e = db
        .insert_in(&second, &ns(), &[raw(doc! {"_id": 2})])
        .expect_err("conflict");
    assert_eq!(e.code.code(), 112);
    db.abort_user_txn(&second);
    db.commit_user_txn(&first).expect("commit");
    assert_eq!(
        committed(&db),
        vec![doc! {"_id": 1, "n": 1}, doc! {"_id": 2}]
    );
}

#[test]
fn a_transaction_reads_its_snapshot_not_later_commits() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(dir.path(), None);
    db.insert(&ns(), &[raw(doc! {"_id": 1})], true)
        .expect("seed");
    let t = db.begin_user_txn();
    db.insert(&ns(), &[raw(doc! {"_id": 2})], true)
        .expect("later commit");
    assert_eq!(ids_in(&db, &t), vec![Bson::Int32(1)]);
    db.commit_user_txn(&t).expect("read-only commit");
}

#[test]
fn ddl_on_an_existing_collection_aborts_live_transactions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(dir.path(), None);
    db.insert(&ns(), &[raw(doc! {"_id": 1, "a": 1})], true)
        .expect("seed");
    let t = db.begin_user_txn();
    db.insert_in(&t, &ns(), &[raw(doc! {"_id": 2, "a": 2})])
        .expect("insert_in");
    // Creating another collection aborts nothing.
    let other = Namespace::new("test", "other").expect("ns");
    db.create_collection(&other, Document::new())
        .expect("create");
    assert_eq!(t.ended(), None);
    db.create_indexes(&ns(), &[doc! {"key": {"a": 1}, "name": "a_1"}])
        .expect("index");
    assert!(matches!(t.ended(), Some(TxnEnd::Killed(_))));
    let e = db
        .insert_in(&t, &ns(), &[raw(doc! {"_id": 3})])
        .expect_err("killed");
    assert_eq!(e.code.code(), 251);
    assert_eq!(db.commit_user_txn(&t).expect_err("killed").code.code(), 251);
    assert_eq!(committed(&db), vec![doc! {"_id": 1, "a": 1}]);
    // A drop too.
    let t = db.begin_user_txn();
    db.insert_in(&t, &ns(), &[raw(doc! {"_id": 4})])
        .expect("insert_in");
    db.drop_collection(&ns()).expect("drop");
    assert!(matches!(t.ended(), Some(TxnEnd::Killed(_))));
    assert_eq!(db.open_user_txns(), 0);
}

#[test]
fn the_reaper_aborts_transactions_past_the_lifetime_limit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(dir.path(), None);
    let old = db.begin_user_txn();
    db.insert_in(&old, &ns(), &[raw(doc! {"_id": 1})])
        .expect("insert_in");
    // Wide margins: a loaded machine (CI, parallel builds) can stall a thread for tens of
    // milliseconds between `young`'s begin and the reap.
    std::thread::sleep(Duration::from_millis(1_200));
    let young = db.begin_user_txn();
    assert_eq!(db.reap_user_txns(Duration::from_millis(600)), 1);
    assert!(matches!(old.ended(), Some(TxnEnd::Killed(_))));
    assert_eq!(young.ended(), None);
    assert_eq!(
        db.commit_user_txn(&old).expect_err("reaped").code.code(),
        251
    );
    assert!(committed(&db).is_empty());
    db.commit_user_txn(&young).expect("young commits");
}

#[test]
fn a_write_set_past_the_limit_fails_and_leaves_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(dir.path(), Some(64 << 10));
    db.insert(&ns(), &[raw(doc! {"_id": 0})], true)
        .expect("seed");
    let t = db.begin_user_txn();
    let docs: Vec<RawDocumentBuf> = (1..200)
        .map(|i| raw(doc! {"_id": i, "pad": "x".repeat(1000)}))
        .collect();
    let e = db.insert_in(&t, &ns(), &docs).expect_err("too large");
    assert_eq!(e.code.code(), 388, "{e:?}");
    db.abort_user_txn(&t);
    assert_eq!(committed(&db), vec![doc! {"_id": 0}]);
}

#[test]
fn close_aborts_open_transactions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(dir.path(), None);
    let t = db.begin_user_txn();
    db.insert_in(&t, &ns(), &[raw(doc! {"_id": 1})])
        .expect("insert_in");
    db.close().expect("close");
    assert!(matches!(t.ended(), Some(TxnEnd::Killed(_))));
    let db = open(dir.path(), None);
    assert!(committed(&db).is_empty());
}
