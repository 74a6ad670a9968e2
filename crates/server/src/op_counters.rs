//! Process-wide operation counters for `serverStatus`, counted as mongod counts them:
//! `opcounters` (each inserted document, each update and delete statement, each `find`, each
//! `getMore`, every other command), `metrics.document` (documents inserted, updated,
//! deleted and returned, from the commands' replies) and `asserts.user` (commands that
//! failed). Legacy opcodes run as commands, so they are counted the same way. Relaxed
//! atomics only: counting never blocks a command.

use crate::command::Command;
use crate::commands::Reply;
use bson::{doc, Bson, Document, RawBsonRef, RawDocument};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

static INSERT: AtomicU64 = AtomicU64::new(0);
static QUERY: AtomicU64 = AtomicU64::new(0);
static UPDATE: AtomicU64 = AtomicU64::new(0);
static DELETE: AtomicU64 = AtomicU64::new(0);
static GETMORE: AtomicU64 = AtomicU64::new(0);
static COMMAND: AtomicU64 = AtomicU64::new(0);

static INSERTED: AtomicU64 = AtomicU64::new(0);
static UPDATED: AtomicU64 = AtomicU64::new(0);
static DELETED: AtomicU64 = AtomicU64::new(0);
static RETURNED: AtomicU64 = AtomicU64::new(0);

static USER_ASSERTS: AtomicU64 = AtomicU64::new(0);

/// Counts one command: `raw_documents` is the number of documents an OP_MSG insert sent as
/// a document sequence and the dispatcher took out of the command.
pub fn record(cmd: &Command<'_>, raw_documents: Option<usize>, reply: &Reply) {
    let statements = |field: &str| match (cmd.get(field), cmd.sequence(field)) {
        (Some(RawBsonRef::Array(a)), _) => a.into_iter().count() as u64,
        (_, Some(docs)) => docs.len() as u64,
        _ => 0,
    };
    match cmd.name() {
        "insert" => {
            let n = raw_documents.map_or_else(|| statements("documents"), |n| n as u64);
            INSERT.fetch_add(n, Relaxed);
        }
        "update" => add(&UPDATE, statements("updates")),
        "delete" => add(&DELETE, statements("deletes")),
        "find" => add(&QUERY, 1),
        "getMore" => add(&GETMORE, 1),
        _ => add(&COMMAND, 1),
    }
    let raw = match reply {
        Reply::Raw(r) => Some(r.as_ref()),
        Reply::Doc(_) => None,
    };
    if !succeeded(reply) {
        add(&USER_ASSERTS, 1);
        return;
    }
    match (cmd.name(), raw) {
        ("find", Some(r)) => add(&RETURNED, batch_len(r, "firstBatch")),
        ("getMore", Some(r)) => add(&RETURNED, batch_len(r, "nextBatch")),
        ("insert", None) => add(&INSERTED, reply_number(reply, "n")),
        ("update", None) => add(&UPDATED, reply_number(reply, "nModified")),
        ("delete", None) => add(&DELETED, reply_number(reply, "n")),
        _ => {}
    }
}

fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Relaxed);
}

fn succeeded(reply: &Reply) -> bool {
    match reply {
        Reply::Doc(d) => match d.get("ok") {
            Some(Bson::Double(v)) => *v == 1.0,
            Some(Bson::Int32(v)) => *v == 1,
            _ => false,
        },
        Reply::Raw(r) => match r.get("ok") {
            Ok(Some(RawBsonRef::Double(v))) => v == 1.0,
            Ok(Some(RawBsonRef::Int32(v))) => v == 1,
            _ => false,
        },
    }
}

fn reply_number(reply: &Reply, field: &str) -> u64 {
    let Reply::Doc(d) = reply else { return 0 };
    match d.get(field) {
        Some(Bson::Int32(n)) => u64::try_from(*n).unwrap_or(0),
        Some(Bson::Int64(n)) => u64::try_from(*n).unwrap_or(0),
        _ => 0,
    }
}

/// Documents in a cursor reply's batch, counted without decoding them.
fn batch_len(reply: &RawDocument, field: &str) -> u64 {
    reply
        .get_document("cursor")
        .and_then(|c| c.get_array(field))
        .map_or(0, |a| a.into_iter().count() as u64)
}

fn n(counter: &AtomicU64) -> i64 {
    counter.load(Relaxed) as i64
}

/// `serverStatus.opcounters`.
pub fn opcounters_document() -> Document {
    doc! {
        "insert": n(&INSERT), "query": n(&QUERY), "update": n(&UPDATE),
        "delete": n(&DELETE), "getmore": n(&GETMORE), "command": n(&COMMAND),
    }
}

/// `serverStatus.opcountersRepl`: a standalone applies no replicated operations.
pub fn opcounters_repl_document() -> Document {
    doc! { "insert": 0i64, "query": 0i64, "update": 0i64, "delete": 0i64, "getmore": 0i64,
    "command": 0i64 }
}

/// `serverStatus.metrics.document`.
pub fn document_metrics() -> Document {
    doc! {
        "deleted": n(&DELETED), "inserted": n(&INSERTED), "returned": n(&RETURNED),
        "updated": n(&UPDATED),
    }
}

/// `serverStatus.asserts`: `user` counts failed commands; the server raises no other kind.
pub fn asserts_document() -> Document {
    // mongod's assertion counters are ints.
    let user = shale_doc::append_number(USER_ASSERTS.load(Relaxed) as i64);
    doc! { "regular": 0i32, "warning": 0i32, "msg": 0i32, "user": user, "tripwire": 0i32,
    "rollovers": 0i32 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inserts_count_documents_and_finds_what_they_returned() {
        let before = opcounters_document();
        let raw = crate::command::raw_of(&doc! {"insert": "c", "documents": [{}, {}, {}]});
        let raw = raw.expect("raw");
        let body = Command::new(&raw, Vec::new());
        record(&body, None, &Reply::Doc(doc! {"n": 3, "ok": 1.0}));
        record(&body, Some(2), &Reply::Doc(doc! {"ok": 0.0}));
        let after = opcounters_document();
        let gained = after.get_i64("insert").expect("n") - before.get_i64("insert").expect("n");
        assert!(gained >= 5, "other tests count too, never less");
        let raw = bson::rawdoc! {"cursor": {"firstBatch": [{}, {}], "id": 0i64}, "ok": 1.0};
        let returned = document_metrics().get_i64("returned").expect("n");
        let find_body = crate::command::raw_of(&doc! {"find": "c"}).expect("raw");
        let find = Command::new(&find_body, Vec::new());
        record(&find, None, &Reply::Raw(raw));
        assert!(document_metrics().get_i64("returned").expect("n") >= returned + 2);
    }
}
