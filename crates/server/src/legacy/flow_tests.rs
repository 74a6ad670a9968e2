//! The legacy opcodes end to end through `handle_message`, on a real database: writes and
//! their last error, a query's batches through OP_GET_MORE with `startingFrom`, a killed
//! cursor answered with CursorNotFound, a failing query answered with QueryFailure, and
//! legacy messages refused under `--auth` as the commands they become are.

use crate::handle_message;
use crate::wire::{reply_flags, MsgHeader, OpCode, HEADER_LEN};
use crate::ConnectionCtx;
use bson::{doc, Document};
use shale_db::{Database, DbOptions};
use std::sync::Arc;

fn ctx() -> (tempfile::TempDir, ConnectionCtx) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Database::open(dir.path(), DbOptions::default()).expect("open");
    (dir, ConnectionCtx::detached(Arc::new(db)))
}

fn message(op: OpCode, payload: &[u8]) -> Vec<u8> {
    let mut m = Vec::new();
    MsgHeader {
        message_length: HEADER_LEN + payload.len(),
        request_id: 11,
        response_to: 0,
        op_code: op,
    }
    .encode(&mut m);
    m.extend_from_slice(payload);
    m
}

fn cstr(s: &str) -> Vec<u8> {
    let mut v = s.as_bytes().to_vec();
    v.push(0);
    v
}

fn bytes(d: &Document) -> Vec<u8> {
    bson::to_vec(d).expect("encode")
}

/// An OP_REPLY's flags, cursor id, startingFrom and documents.
fn open(reply: &[u8]) -> (u32, i64, i32, Vec<Document>) {
    let at = |i: usize| reply[i..i + 4].try_into().expect("4");
    assert_eq!(i32::from_le_bytes(at(12)), 1, "an OP_REPLY");
    let flags = u32::from_le_bytes(at(16));
    let cursor = i64::from_le_bytes(reply[20..28].try_into().expect("8"));
    let from = i32::from_le_bytes(at(28));
    let n = i32::from_le_bytes(at(32));
    let mut rest = &reply[36..];
    let docs: Vec<Document> = (0..n)
        .map(|_| Document::from_reader(&mut rest).expect("doc"))
        .collect();
    (flags, cursor, from, docs)
}

fn query(ns: &str, q: Document, skip: i32, to_return: i32) -> Vec<u8> {
    let mut p = 0u32.to_le_bytes().to_vec();
    p.extend(cstr(ns));
    p.extend_from_slice(&skip.to_le_bytes());
    p.extend_from_slice(&to_return.to_le_bytes());
    p.extend(bytes(&q));
    message(OpCode::Query, &p)
}

fn get_more(ns: &str, n: i32, id: i64) -> Vec<u8> {
    let mut p = 0i32.to_le_bytes().to_vec();
    p.extend(cstr(ns));
    p.extend_from_slice(&n.to_le_bytes());
    p.extend_from_slice(&id.to_le_bytes());
    message(OpCode::GetMore, &p)
}

fn run(ctx: &ConnectionCtx, m: &[u8]) -> Option<Vec<u8>> {
    handle_message(ctx, m).expect("framed")
}

fn last_error(ctx: &ConnectionCtx) -> Document {
    let reply = run(ctx, &query("t.$cmd", doc! {"getlasterror": 1}, 0, -1)).expect("reply");
    open(&reply).3.remove(0)
}

#[test]
fn writes_then_batches_through_get_more() {
    let (_dir, ctx) = ctx();
    let mut p = 0u32.to_le_bytes().to_vec();
    p.extend(cstr("t.c"));
    for i in 0..250 {
        p.extend(bytes(&doc! {"_id": i, "v": i % 10}));
    }
    assert!(run(&ctx, &message(OpCode::Insert, &p)).is_none());
    assert_eq!(last_error(&ctx).get("err"), Some(&bson::Bson::Null));
    let (flags, id, from, docs) = open(&run(&ctx, &query("t.c", doc! {}, 0, 0)).expect("r"));
    assert_eq!(
        (flags & reply_flags::QUERY_FAILURE, from, docs.len()),
        (0, 0, 101)
    );
    assert_ne!(id, 0);
    let (_, id2, from, docs) = open(&run(&ctx, &get_more("t.c", 100, id)).expect("r"));
    assert_eq!((id2, from, docs.len()), (id, 101, 100));
    let (_, id3, from, docs) = open(&run(&ctx, &get_more("t.c", 0, id)).expect("r"));
    assert_eq!((id3, from, docs.len()), (0, 201, 49));
    let (flags, _, _, docs) = open(&run(&ctx, &get_more("t.c", 0, id)).expect("r"));
    assert_eq!((flags, docs.len()), (reply_flags::CURSOR_NOT_FOUND, 0));
}

#[test]
fn update_delete_and_their_last_error() {
    let (_dir, ctx) = ctx();
    let mut p = 0u32.to_le_bytes().to_vec();
    p.extend(cstr("t.c"));
    p.extend(bytes(&doc! {"_id": 1, "a": 1}));
    p.extend(bytes(&doc! {"_id": 2, "a": 1}));
    run(&ctx, &message(OpCode::Insert, &p));
    let mut u = 0i32.to_le_bytes().to_vec();
    u.extend(cstr("t.c"));
    u.extend_from_slice(&2u32.to_le_bytes()); // MultiUpdate
    u.extend(bytes(&doc! {"a": 1}));
    u.extend(bytes(&doc! {"$set": {"b": 2}}));
    run(&ctx, &message(OpCode::Update, &u));
    let gle = last_error(&ctx);
    assert_eq!(
        (gle.get_i32("n"), gle.get_bool("updatedExisting")),
        (Ok(2), Ok(true))
    );
    let mut d = 0i32.to_le_bytes().to_vec();
    d.extend(cstr("t.c"));
    d.extend_from_slice(&1u32.to_le_bytes()); // SingleRemove
    d.extend(bytes(&doc! {"a": 1}));
    run(&ctx, &message(OpCode::Delete, &d));
    assert_eq!(last_error(&ctx).get_i32("n"), Ok(1));
    // A duplicate _id: the error is kept.
    run(&ctx, &message(OpCode::Insert, &p));
    assert_eq!(last_error(&ctx).get_i32("code"), Ok(11000));
}

#[test]
fn a_failing_query_sets_query_failure() {
    let (_dir, ctx) = ctx();
    let reply = run(&ctx, &query("t.c", doc! {"a": {"$bogus": 1}}, 0, 0)).expect("r");
    let (flags, id, _, docs) = open(&reply);
    assert_eq!((flags, id, docs.len()), (reply_flags::QUERY_FAILURE, 0, 1));
    assert!(docs[0].get_str("$err").is_ok());
    assert!(docs[0].get_i32("code").is_ok());
    // A malformed OP_QUERY too.
    let reply = run(&ctx, &message(OpCode::Query, &[1, 2, 3])).expect("r");
    assert_eq!(open(&reply).0, reply_flags::QUERY_FAILURE);
    // A legacy write message that does not decode has no reply; getLastError reports it.
    assert!(run(&ctx, &message(OpCode::Update, &[0, 0, 0])).is_none());
    assert!(last_error(&ctx).get_str("err").is_ok());
}

#[test]
fn legacy_messages_are_authorized_like_commands() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Arc::new(Database::open(dir.path(), DbOptions::default()).expect("open"));
    let config = crate::ServerConfig {
        auth: Arc::new(crate::auth::AuthConfig::new(true)),
        ..crate::ServerConfig::default()
    };
    let peer = "127.0.0.1:1".parse().expect("address");
    let ctx = ConnectionCtx::new(db, 1, peer, Arc::new(config), Arc::default());
    crate::auth::gate::lock(&ctx).log_in(crate::auth::LoggedIn {
        name: crate::auth::UserName::new("ann", "t"),
        roles: vec![doc! {"role": "read", "db": "t"}],
    });
    let (flags, ..) = open(&run(&ctx, &query("t.c", doc! {}, 0, 0)).expect("r"));
    assert_eq!(flags & reply_flags::QUERY_FAILURE, 0, "read may query t");
    let (flags, _, _, docs) = open(&run(&ctx, &query("u.c", doc! {}, 0, 0)).expect("r"));
    assert_ne!(
        flags & reply_flags::QUERY_FAILURE,
        0,
        "read@t may not query u"
    );
    assert_eq!(docs[0].get_i32("code"), Ok(13));
    let mut p = 0u32.to_le_bytes().to_vec();
    p.extend(cstr("t.c"));
    p.extend(bytes(&doc! {"_id": 1}));
    assert!(run(&ctx, &message(OpCode::Insert, &p)).is_none());
    assert_eq!(
        last_error(&ctx).get_i32("code"),
        Ok(13),
        "read may not insert"
    );
}
