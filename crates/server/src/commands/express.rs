//! Which `find` commands take the express path of a point read by `_id` (mongod 8.0's
//! `EXPRESS_IDHACK`; `shale_db`'s `express.rs` reads the document): a driver's
//! `find_one({_id: v})` — the filter one `_id` equality, the rest of the command only fields
//! that cannot change a one-document answer — skips the spec's owned copies, the planner,
//! the matcher, the read view and the cursor table, and is answered with the same reply the
//! general path gives (`firstBatch` of zero or one document, cursor id 0).
//!
//! Anything else, including every field whose value would be refused, goes the general way,
//! which gives the errors: this path never answers an error of its own beyond the read's.

use super::data::cursor_reply_raw;
use super::raw_args;
use crate::command::Command;
use crate::ConnectionCtx;
use bson::{RawBsonRef, RawDocument};
use shale_db::{Batch, Namespace};

/// The reply of an express `find`, or `None` when the command needs the general path.
pub fn find(ctx: &ConnectionCtx, db: &str, cmd: &Command<'_>) -> Option<super::RawResult> {
    if ctx.txn.is_some() {
        return None;
    }
    let (coll, id) = eligible(cmd)?;
    let ns = Namespace::new(db, coll).ok()?;
    if shale_db::oplog::is_oplog(&ns) {
        return None;
    }
    let found = match ctx.db.find_by_id_express(&ns, id) {
        Ok(found) => found?,
        Err(e) => return Some(Err(e)),
    };
    let batch = Batch {
        docs: found.into_iter().collect(),
        cursor_id: 0,
        resume_token: None,
    };
    Some(Ok(cursor_reply_raw(
        &[db, ".", coll].concat(),
        batch,
        "firstBatch",
    )))
}

/// The collection and the `_id` value of a find the express path may answer: every field
/// one it knows, with a value the general path would accept and that cannot change the
/// answer for a single document.
fn eligible<'a>(cmd: &Command<'a>) -> Option<(&'a str, RawBsonRef<'a>)> {
    let mut coll = None;
    let mut id = None;
    for (key, value) in cmd.fields() {
        match (*key, *value) {
            ("find", RawBsonRef::String(c)) => coll = Some(c),
            ("filter", RawBsonRef::Document(f)) => id = Some(only_id(f)?),
            // Counts as the planned path reads them (`raw_args::opt_count`), so the two agree
            // on what is a valid count; `batchSize: 0` opens a cursor and goes that way.
            ("limit", _) if raw_args::opt_count(cmd, "find", "limit").is_ok() => {}
            ("batchSize", _) if matches!(raw_args::opt_count(cmd, "find", "batchSize"), Ok(Some(n)) if n > 0) =>
                {}
            ("singleBatch", RawBsonRef::Boolean(_)) => {}
            ("projection" | "sort", RawBsonRef::Document(d)) if d.is_empty() => {}
            // Read and checked by dispatch, whatever the command.
            ("$db" | "lsid" | "$clusterTime" | "$readPreference" | "comment" | "maxTimeMS", _) => {}
            _ => return None,
        }
    }
    Some((coll?, id?))
}

/// The value of a filter that is exactly `{_id: <value>}`, the value not an operator
/// document (`shale_db` decides which value types it takes).
fn only_id(filter: &RawDocument) -> Option<RawBsonRef<'_>> {
    let mut fields = filter.iter();
    let (key, value) = fields.next()?.ok()?;
    if key != "_id" || fields.next().is_some() {
        return None;
    }
    Some(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, oid::ObjectId};

    fn check(body: bson::Document) -> bool {
        let raw = bson::RawDocumentBuf::from_document(&body).expect("raw");
        let cmd = Command::new(&raw, Vec::new());
        eligible(&cmd).is_some()
    }

    #[test]
    fn a_drivers_find_one_by_id_is_eligible() {
        assert!(check(doc! {
            "find": "c", "filter": {"_id": 7}, "limit": 1, "singleBatch": true,
            "$db": "d", "lsid": {"id": 1}, "$clusterTime": {}, "maxTimeMS": 10,
        }));
        assert!(check(
            doc! {"find": "c", "filter": {"_id": ObjectId::new()}, "batchSize": 2.0}
        ));
        assert!(check(
            doc! {"find": "c", "filter": {"_id": "k"}, "projection": {}, "sort": {}}
        ));
    }

    #[test]
    fn anything_that_could_change_or_refuse_the_answer_is_not() {
        for body in [
            doc! {"find": "c", "filter": {"_id": 1, "a": 1}},
            doc! {"find": "c", "filter": {"a": 1}},
            doc! {"find": "c", "filter": {}},
            doc! {"find": "c"},
            doc! {"find": 1, "filter": {"_id": 1}},
            doc! {"find": "c", "filter": {"_id": 1}, "limit": -1},
            doc! {"find": "c", "filter": {"_id": 1}, "limit": 1.5},
            doc! {"find": "c", "filter": {"_id": 1}, "batchSize": 0},
            doc! {"find": "c", "filter": {"_id": 1}, "singleBatch": 1},
            doc! {"find": "c", "filter": {"_id": 1}, "projection": {"a": 1}},
            doc! {"find": "c", "filter": {"_id": 1}, "sort": {"a": 1}},
            doc! {"find": "c", "filter": {"_id": 1}, "skip": 1},
            doc! {"find": "c", "filter": {"_id": 1}, "hint": {"_id": 1}},
            doc! {"find": "c", "filter": {"_id": 1}, "collation": {"locale": "fr"}},
            doc! {"find": "c", "filter": {"_id": 1}, "readConcern": {"level": "local"}},
            doc! {"find": "c", "filter": {"_id": 1}, "txnNumber": 1_i64},
            doc! {"find": "c", "filter": {"_id": 1}, "tailable": true},
            doc! {"find": "c", "filter": {"_id": 1}, "returnKey": true},
        ] {
            assert!(!check(body.clone()), "{body}");
        }
    }
}
