//! The oplog through the database: each write kind leaves its entry in the same commit, a
//! rolled-back transaction leaves none, DDL entries commit with their catalog change (and a
//! refused change writes none), the size bound holds, tailing reads see new entries only
//! once visible, and a reopened oplog goes on after its newest entry.

use super::log::OplogClock;
use super::reader::OplogSource;
use crate::cursors::DocSource;
use crate::write_ops::{DeleteOp, FindAndModifyOp, UpdateOp};
use crate::{Database, DbOptions, FindSpec, Namespace, RetryId, Statement};
use bson::{doc, Bson, Document, RawDocumentBuf, Timestamp};
use shale_doc::{UpdateSpec, Variables};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A clock that counts: second 100, increments 1, 2, 3, ...
#[derive(Debug, Default)]
struct CountingClock(AtomicU64);

impl OplogClock for CountingClock {
    fn reserve(&self, n: u32) -> (Timestamp, i64) {
        let first = self.0.fetch_add(u64::from(n), Ordering::SeqCst) + 1;
        let ts = Timestamp {
            time: (first >> 32) as u32,
            increment: first as u32,
        };
        (ts, 7)
    }

    fn advance_to(&self, ts: Timestamp) {
        self.0.fetch_max(super::pack(ts), Ordering::SeqCst);
    }
}

fn open(dir: &std::path::Path, max_bytes: u64) -> (Database, Arc<CountingClock>) {
    let db = Database::open(dir, DbOptions::default()).expect("open");
    let clock = Arc::new(CountingClock::default());
    clock.advance_to(Timestamp {
        time: 100,
        increment: 0,
    });
    db.enable_oplog(clock.clone(), max_bytes).expect("enable");
    (db, clock)
}

fn ns() -> Namespace {
    Namespace::new("app", "c").expect("ns")
}

fn raw(d: Document) -> RawDocumentBuf {
    RawDocumentBuf::from_document(&d).expect("raw")
}

fn entries(db: &Database) -> Vec<Document> {
    let mut src = source(db, false);
    let mut out = Vec::new();
    while let Some(d) = src.next_doc().expect("read") {
        out.push(d.to_document().expect("doc"));
    }
    out
}

fn source(db: &Database, tailable: bool) -> OplogSource {
    db.find_oplog(&FindSpec::default(), tailable, false)
        .expect("find")
        .expect("an oplog")
}

fn ops(entries: &[Document]) -> Vec<(String, String)> {
    entries
        .iter()
        .map(|e| {
            (
                e.get_str("op").expect("op").to_owned(),
                e.get_str("ns").expect("ns").to_owned(),
            )
        })
        .collect()
}

fn update(filter: Document, u: Document) -> UpdateOp {
    UpdateOp {
        filter,
        update: UpdateSpec::parse(&u, None).expect("update"),
        multi: false,
        upsert: false,
        hint: None,
        vars: Variables::default(),
    }
}

#[test]
fn each_write_kind_leaves_its_entry() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (db, _) = open(dir.path(), 1 << 30);
    db.insert(
        &ns(),
        &[raw(doc! {"_id": 1, "a": 1}), raw(doc! {"_id": 2})],
        true,
    )
    .expect("insert");
    db.update(
        &ns(),
        &[update(doc! {"_id": 1}, doc! {"$set": {"a": 5}})],
        true,
    )
    .expect("update");
    let del = DeleteOp {
        filter: doc! {"_id": 2},
        limit_one: true,
        hint: None,
        vars: Variables::default(),
    };
    db.delete(&ns(), &[del], true).expect("delete");
    let fam = FindAndModifyOp {
        filter: doc! {"_id": 1},
        remove: true,
        ..FindAndModifyOp::default()
    };
    db.find_and_modify(&ns(), &fam).expect("findAndModify");
    let got = entries(&db);
    assert_eq!(
        ops(&got),
        [
            ("c", "app.$cmd"),
            ("i", "app.c"),
            ("i", "app.c"),
            ("u", "app.c"),
            ("d", "app.c"),
            ("d", "app.c")
        ]
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
    );
    assert_eq!(
        got[0].get_document("o"),
        Ok(&doc! {"create": "c", "idIndex": {"v": 2, "key": {"_id": 1}, "name": "_id_"}})
    );
    assert_eq!(got[1].get_document("o"), Ok(&doc! {"_id": 1, "a": 1}));
    assert_eq!(
        got[3].get_document("o"),
        Ok(&doc! {"$v": 2, "diff": {"u": {"a": 5}}})
    );
    assert_eq!(got[4].get_document("o"), Ok(&doc! {"_id": 2}));
    assert!(got.iter().all(|e| e.get_i64("t") == Ok(7)));
    let stamps: Vec<u64> = got
        .iter()
        .map(|e| super::pack(e.get_timestamp("ts").expect("ts")))
        .collect();
    assert!(stamps.windows(2).all(|w| w[0] < w[1]), "{stamps:?}");
    // The insert batch's two entries are one slot: consecutive increments.
    assert_eq!(stamps[2], stamps[1] + 1);
    let last = db.oplog().expect("oplog").last_visible();
    assert_eq!(super::pack(last.at.ts), *stamps.last().expect("some"));
}

#[test]
fn a_transaction_is_one_entry_and_a_rolled_back_one_none() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (db, _) = open(dir.path(), 1 << 30);
    db.insert(&ns(), &[raw(doc! {"_id": 0})], true)
        .expect("insert");
    let before = entries(&db).len();
    let t = db.begin_session_txn([9; 16], [1; 32], 4);
    db.insert_in(&t, &ns(), &[raw(doc! {"_id": 1}), raw(doc! {"_id": 2})])
        .expect("insert");
    db.update_in(
        &t,
        &ns(),
        &[update(doc! {"_id": 0}, doc! {"$set": {"x": 1}})],
    )
    .expect("update");
    db.commit_user_txn(&t).expect("commit");
    let aborted = db.begin_session_txn([9; 16], [1; 32], 5);
    db.insert_in(&aborted, &ns(), &[raw(doc! {"_id": 3})])
        .expect("insert");
    db.abort_user_txn(&aborted);
    // A duplicate key fails its statement: nothing of it is logged.
    let dup = db
        .insert(&ns(), &[raw(doc! {"_id": 0})], true)
        .expect("insert");
    assert_eq!(dup.errors.len(), 1);
    let got = entries(&db);
    assert_eq!(got.len(), before + 1, "{got:?}");
    let e = got.last().expect("entry");
    assert_eq!(
        (e.get_str("op"), e.get_str("ns")),
        (Ok("c"), Ok("admin.$cmd"))
    );
    assert_eq!(e.get_i64("txnNumber"), Ok(4));
    assert!(!e.contains_key("stmtId"));
    let lsid = e.get_document("lsid").expect("lsid");
    assert_eq!(
        lsid.get_binary_generic("uid").map(|u| u.as_slice()),
        Ok(&[1u8; 32][..]),
        "the lsid carries the user's digest, as mongod's entries do"
    );
    let inner = e
        .get_document("o")
        .and_then(|o| o.get_array("applyOps"))
        .expect("applyOps");
    assert_eq!(inner.len(), 3);
}

#[test]
fn a_retryable_statement_carries_its_session_and_chains_prev_op_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (db, _) = open(dir.path(), 1 << 30);
    db.insert(&ns(), &[raw(doc! {"_id": 0})], true)
        .expect("create");
    let r = RetryId {
        lsid: [3; 16],
        uid: [4; 32],
        txn_number: 1,
    };
    for stmt in 0..2 {
        let ran = db
            .retryable_statement(
                &r,
                stmt,
                |t| db.insert_in(t, &ns(), &[raw(doc! {"_id": 10 + stmt})]),
                |_| Some(doc! {"n": 1}),
            )
            .expect("statement");
        assert!(matches!(ran, Statement::Ran(_)));
    }
    let got = entries(&db);
    let (a, b) = (&got[got.len() - 2], &got[got.len() - 1]);
    assert_eq!((a.get_i32("stmtId"), b.get_i32("stmtId")), (Ok(0), Ok(1)));
    assert_eq!(a.get_i64("txnNumber"), Ok(1));
    assert_eq!(
        a.get_document("lsid")
            .and_then(|l| l.get_binary_generic("uid"))
            .map(|u| u.as_slice()),
        Ok(&[4u8; 32][..])
    );
    assert_eq!(
        a.get_document("prevOpTime").and_then(|p| p.get_i64("t")),
        Ok(-1),
        "the session's first entry points at the null optime"
    );
    assert_eq!(
        b.get_document("prevOpTime")
            .and_then(|p| p.get_timestamp("ts")),
        a.get_timestamp("ts")
    );
}

#[test]
fn the_oplog_is_truncated_to_its_bound_oldest_first() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bound = 64 * 1024;
    let (db, _) = open(dir.path(), bound);
    let pad = "p".repeat(500);
    for i in 0..400 {
        db.insert(&ns(), &[raw(doc! {"_id": i, "pad": &pad})], true)
            .expect("insert");
    }
    let oplog = db.oplog().expect("oplog");
    assert!(oplog.bytes() <= bound as i64, "{} bytes", oplog.bytes());
    let got = entries(&db);
    assert!(got.len() < 400 && got.len() > 50, "{} entries", got.len());
    let first = got[0]
        .get_document("o")
        .expect("o")
        .get_i32("_id")
        .expect("_id");
    let last = got.last().expect("last").get_document("o").expect("o");
    assert_eq!(last.get_i32("_id"), Ok(399));
    assert_eq!(first, 400 - got.len() as i32, "the oldest went first");
    assert_eq!(
        db.count(&ns(), &doc! {}, 0, None, None, &Variables::default())
            .expect("count"),
        400
    );
}

#[test]
fn a_tailing_source_sees_later_entries_and_a_standalone_has_none() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (db, _) = open(dir.path(), 1 << 30);
    db.insert(&ns(), &[raw(doc! {"_id": 1})], true)
        .expect("insert");
    let mut tail = source(&db, true);
    let mut read = 0;
    while tail.next_doc().expect("read").is_some() {
        read += 1;
    }
    assert_eq!(read, 2, "create and insert");
    assert!(tail.tailing());
    db.insert(&ns(), &[raw(doc! {"_id": 2})], true)
        .expect("insert");
    let next = tail.next_doc().expect("read").expect("the new entry");
    assert_eq!(next.get_document("o").expect("o").get_i32("_id"), Ok(2));
    assert!(tail.next_doc().expect("read").is_none() && tail.tailing());

    let plain = tempfile::tempdir().expect("tempdir");
    let standalone = Database::open(plain.path(), DbOptions::default()).expect("open");
    standalone
        .insert(&ns(), &[raw(doc! {"_id": 1})], true)
        .expect("insert");
    assert!(standalone.oplog().is_none());
    assert!(standalone
        .find_oplog(&FindSpec::default(), false, false)
        .expect("find")
        .is_none());
    assert!(standalone
        .list_collections("local")
        .iter()
        .all(|c| c.get_str("name") != Ok("oplog.rs")));
}

#[test]
fn a_reopened_oplog_goes_on_after_its_newest_entry() {
    let dir = tempfile::tempdir().expect("tempdir");
    let newest = {
        let (db, _) = open(dir.path(), 1 << 30);
        db.insert(&ns(), &[raw(doc! {"_id": 1})], true)
            .expect("insert");
        let n = db.oplog().expect("oplog").last_visible();
        db.close().expect("close");
        n
    };
    let db = Database::open(dir.path(), DbOptions::default()).expect("open");
    let clock = Arc::new(CountingClock::default());
    let found = db.enable_oplog(clock.clone(), 1 << 30).expect("enable");
    assert_eq!(found.map(|f| f.at), Some(newest.at));
    db.insert(&ns(), &[raw(doc! {"_id": 2})], true)
        .expect("insert");
    let got = entries(&db);
    let stamps: Vec<Bson> = got
        .iter()
        .map(|e| e.get("ts").expect("ts").clone())
        .collect();
    assert_eq!(stamps.len(), 3);
    assert!(super::pack(got[2].get_timestamp("ts").expect("ts")) > super::pack(newest.at.ts));
}

/// The `o` of each `c` entry on `app.$cmd`, in order.
fn ddl_entries(db: &Database) -> Vec<Document> {
    entries(db)
        .into_iter()
        .filter(|e| e.get_str("op") == Ok("c") && e.get_str("ns") == Ok("app.$cmd"))
        .map(|e| e.get_document("o").expect("o").clone())
        .collect()
}

#[test]
fn ddl_entries_are_written_with_their_catalog_change() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (db, _) = open(dir.path(), 1 << 30);
    let (a, b) = (Namespace::new("app", "a").expect("ns"), ns());
    let specs = [doc! {"key": {"x": 1}, "name": "x_1"}];
    db.create_indexes(&a, &specs).expect("createIndexes");
    db.create_collection(&b, doc! {}).expect("create");
    let b_uuid = db.existing(&b).expect("b").uuid;
    db.rename_collection(&a, &b, true).expect("rename");
    db.drop_indexes(&b, &Bson::String("x_1".into()))
        .expect("dropIndexes");
    db.drop_collection(&b).expect("drop");
    let got = ddl_entries(&db);
    let kinds: Vec<&str> = got
        .iter()
        .map(|o| o.keys().next().expect("a command").as_str())
        .collect();
    assert_eq!(
        kinds,
        [
            "create",
            "createIndexes",
            "create",
            "renameCollection",
            "dropIndexes",
            "drop"
        ]
    );
    assert_eq!(
        got[0],
        doc! {"create": "a", "idIndex": crate::index_spec::id_index_spec()}
    );
    assert_eq!(got[1].get_str("name"), Ok("x_1"));
    // One rename entry drops the target, naming it by UUID, as mongod writes it.
    assert_eq!(
        got[3],
        doc! {"renameCollection": "app.a", "to": "app.c", "stayTemp": false, "dropTarget": b_uuid}
    );
    // A reopened database has the same catalog and the same entries.
    db.close().expect("close");
    let (db, _) = open(dir.path(), 1 << 30);
    assert_eq!(ddl_entries(&db), got);
    assert!(db.existing(&b).is_err() && db.existing(&a).is_err());
}

#[test]
fn a_dropped_database_logs_each_collection_then_its_views_then_itself() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (db, _) = open(dir.path(), 1 << 30);
    db.create_collection(&ns(), doc! {}).expect("create");
    let view = Namespace::new("app", "v").expect("ns");
    db.create_view(&view, "c", Vec::new()).expect("view");
    db.drop_database("app").expect("dropDatabase");
    let got = entries(&db);
    let tail = ops(&got[got.len() - 3..]);
    assert_eq!(
        tail,
        [("c", "app.$cmd"), ("c", "app.$cmd"), ("c", "app.$cmd")]
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
    );
    let last: Vec<Document> = ddl_entries(&db).split_off(1);
    assert_eq!(
        last,
        [
            doc! {"drop": "c"},
            doc! {"drop": "system.views"},
            doc! {"dropDatabase": 1}
        ]
    );
    assert!(!db.is_view(&view));
}

#[test]
fn a_refused_catalog_change_writes_no_entry_and_publishes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (db, _) = open(dir.path(), 1 << 30);
    // A session transaction's pending create holds the record's key: the plain create of
    // the same name conflicts, and its engine transaction (entry included) is abandoned.
    let t = db.begin_user_txn();
    db.create_collection_in(&t, &ns(), doc! {})
        .expect("create in the transaction");
    let before = entries(&db).len();
    let refused = db
        .create_collection(&ns(), doc! {})
        .expect_err("a conflict");
    assert_eq!(refused.code, shale_doc::ErrorCode::WriteConflict);
    assert_eq!(entries(&db).len(), before);
    assert!(db.existing(&ns()).is_err());
    // The slot it reserved is finished: later entries are visible.
    db.abort_user_txn(&t);
    db.create_collection(&ns(), doc! {}).expect("create");
    assert_eq!(
        ddl_entries(&db).last(),
        Some(&doc! {"create": "c", "idIndex": crate::index_spec::id_index_spec()})
    );
}

#[test]
fn a_members_start_up_ddl_waits_for_its_oplog_and_is_logged() {
    let dir = tempfile::tempdir().expect("tempdir");
    let member = DbOptions {
        replica_set: true,
        ..DbOptions::default()
    };
    let temp = Namespace::new("app", "tmp.agg_out.left").expect("ns");
    {
        let (db, _) = open(dir.path(), 1 << 30);
        db.insert(&ns(), &[raw(doc! {"_id": 1, "a": 1})], true)
            .expect("insert");
        // As a crash mid-build and mid-$out leave them: an index published unready, a
        // temporary collection never renamed.
        let specs = [doc! {"key": {"a": 1}, "name": "a_1"}];
        assert!(matches!(
            db.publish_indexes(&ns(), &specs).expect("publish"),
            crate::ddl::Publish::Done(_)
        ));
        db.create_with_indexes(&temp, doc! {}, &[]).expect("temp");
        db.close().expect("close");
    }
    let db = Database::open(dir.path(), member).expect("reopen");
    assert!(db.existing(&temp).is_ok(), "left for enable_oplog");
    let clock = Arc::new(CountingClock::default());
    db.enable_oplog(clock, 1 << 30).expect("enable");
    assert!(db.existing(&temp).is_err());
    let names: Vec<String> = db
        .list_indexes(&ns())
        .expect("indexes")
        .iter()
        .map(|s| s.get_str("name").expect("name").to_owned())
        .collect();
    assert_eq!(names, ["_id_", "a_1"]);
    let got = ddl_entries(&db);
    let kinds: Vec<&str> = got
        .iter()
        .map(|o| o.keys().next().expect("kind").as_str())
        .collect();
    assert_eq!(kinds, ["create", "create", "drop", "createIndexes"]);
    assert_eq!(got[1].get_str("create"), Ok("tmp.agg_out.left"));
    assert_eq!(got[1].get_bool("temp"), Ok(true));
    assert_eq!(got[2], doc! {"drop": "tmp.agg_out.left"});
    assert_eq!(got[3].get_str("name"), Ok("a_1"));
}
