//! Retryable writes through the database layer (`Database::retryable_statement`): a
//! statement runs once and its retry answers from the record; the record and the write are
//! one commit, so a crash (a drop without close: nothing checkpointed, the log replayed)
//! keeps both or neither; a failed statement leaves no record; an older transaction number
//! is TransactionTooOld; a newer one forgets the older write's statements; two runs of one
//! statement at once write it once.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

use bson::{doc, Document, RawDocumentBuf};
use shale_db::{Database, FindSpec, Namespace, RetryId, Statement, WriteResult};
use shale_doc::{ErrorCode, MongoError};
use shale_engine::FsyncPolicy;
use std::sync::Arc;

mod common;

fn open(dir: &std::path::Path) -> Database {
    // Every commit durable before it returns, so a crash loses nothing acknowledged.
    let options = common::tiny_db(4 << 20, FsyncPolicy::EveryCommit);
    Database::open(dir, options).expect("open")
}

fn ns() -> Namespace {
    Namespace::new("test", "retry").expect("ns")
}

fn raw(d: Document) -> RawDocumentBuf {
    RawDocumentBuf::from_document(&d).expect("encodes")
}

fn count(db: &Database) -> usize {
    let mut q = db.find(&ns(), &FindSpec::default()).expect("find");
    let mut n = 0;
    while q.next_doc().expect("next").is_some() {
        n += 1;
    }
    n
}

fn id(txn_number: i64) -> RetryId {
    RetryId {
        lsid: [7; 16],
        uid: [0; 32],
        txn_number,
    }
}

/// The result kept for a statement that succeeded.
fn keep(w: &WriteResult) -> Option<Document> {
    w.errors.is_empty().then(|| doc! {"n": w.n})
}

/// Inserts `{_id}` as statement `stmt` of write `r`.
fn insert(
    db: &Database,
    r: &RetryId,
    stmt: i32,
    id: i32,
) -> Result<Statement<WriteResult>, MongoError> {
    let d = raw(doc! {"_id": id});
    db.retryable_statement(
        r,
        stmt,
        |t| db.insert_in(t, &ns(), std::slice::from_ref(&d)),
        keep,
    )
}

#[test]
fn a_statement_runs_once_and_its_retry_answers_from_the_record() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(dir.path());
    assert!(matches!(insert(&db, &id(1), 0, 1), Ok(Statement::Ran(w)) if w.n == 1));
    assert!(
        matches!(insert(&db, &id(1), 0, 1), Ok(Statement::Recorded(d)) if d == doc! {"n": 1i64})
    );
    assert!(matches!(insert(&db, &id(1), 1, 2), Ok(Statement::Ran(_))));
    assert_eq!(count(&db), 2);
    db.close().expect("close");
}

#[test]
fn the_record_survives_a_clean_restart_and_a_crash() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(dir.path());
    insert(&db, &id(3), 0, 1).expect("insert");
    db.close().expect("close");
    let db = open(dir.path());
    assert!(matches!(
        insert(&db, &id(3), 0, 1),
        Ok(Statement::Recorded(_))
    ));
    insert(&db, &id(3), 1, 2).expect("second statement");
    // A crash: the environment is dropped unclosed, so reopening replays the log.
    drop(db);
    let db = open(dir.path());
    assert!(matches!(
        insert(&db, &id(3), 1, 2),
        Ok(Statement::Recorded(_))
    ));
    assert_eq!(count(&db), 2);
    db.close().expect("close");
}

#[test]
fn a_failed_statement_leaves_neither_its_writes_nor_a_record() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(dir.path());
    // The statement writes, then fails: its transaction is rolled back whole.
    let failing = db.retryable_statement(
        &id(1),
        0,
        |t| {
            db.insert_in(t, &ns(), &[raw(doc! {"_id": 1})])?;
            Err::<WriteResult, _>(MongoError::new(ErrorCode::BadValue, "after the write"))
        },
        keep,
    );
    assert!(matches!(failing, Err(e) if e.code == ErrorCode::BadValue));
    // A write error (duplicate key) is not recorded either.
    db.insert(&ns(), &[raw(doc! {"_id": 2})], true)
        .expect("seed");
    assert!(matches!(insert(&db, &id(1), 1, 2), Ok(Statement::Ran(w)) if w.errors.len() == 1));
    drop(db);
    let db = open(dir.path());
    assert_eq!(count(&db), 1);
    // Both statements run again when retried.
    assert!(matches!(insert(&db, &id(1), 0, 1), Ok(Statement::Ran(w)) if w.n == 1));
    assert!(matches!(insert(&db, &id(1), 1, 2), Ok(Statement::Ran(w)) if w.errors.len() == 1));
    db.close().expect("close");
}

#[test]
fn numbers_move_forward_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = open(dir.path());
    insert(&db, &id(5), 0, 1).expect("insert");
    let old = insert(&db, &id(4), 0, 9).expect_err("older");
    assert_eq!(old.code, ErrorCode::TransactionTooOld);
    assert_eq!(
        db.check_retry_number(&id(4)).map_err(|e| e.code),
        Err(ErrorCode::TransactionTooOld)
    );
    // A newer number forgets the older write's statements: statement 0 runs again.
    assert!(matches!(insert(&db, &id(6), 0, 2), Ok(Statement::Ran(_))));
    assert!(matches!(
        insert(&db, &id(6), 0, 2),
        Ok(Statement::Recorded(_))
    ));
    assert_eq!(count(&db), 2);
    db.close().expect("close");
}

#[test]
fn two_runs_of_one_statement_at_once_write_it_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Arc::new(open(dir.path()));
    // An update, so a second run would change the document again.
    db.insert(&ns(), &[raw(doc! {"_id": 1, "x": 0})], true)
        .expect("seed");
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let db = db.clone();
            std::thread::spawn(move || {
                let op = shale_db::UpdateOp {
                    filter: doc! {"_id": 1},
                    update: shale_doc::UpdateSpec::parse_value(
                        &bson::Bson::Document(doc! {"$inc": {"x": 1}}),
                        None,
                    )
                    .expect("update"),
                    multi: false,
                    upsert: false,
                    hint: None,
                    vars: Default::default(),
                };
                db.retryable_statement(
                    &id(1),
                    0,
                    |t| db.update_in(t, &ns(), std::slice::from_ref(&op)),
                    keep,
                )
                .expect("statement")
            })
        })
        .collect();
    let outcomes: Vec<_> = threads
        .into_iter()
        .map(|t| t.join().expect("thread"))
        .collect();
    let ran = outcomes
        .iter()
        .filter(|o| matches!(o, Statement::Ran(_)))
        .count();
    assert_eq!(ran, 1, "{outcomes:?}");
    let mut q = db.find(&ns(), &FindSpec::default()).expect("find");
    let d = q.next_doc().expect("next").expect("one document");
    assert_eq!(d.get_i32("x"), Ok(1));
    drop(q);
    Arc::try_unwrap(db)
        .expect("last handle")
        .close()
        .expect("close");
}
