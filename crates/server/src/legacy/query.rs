//! OP_QUERY on a collection, as mongod 3.6 read it (`QueryRequest::fromLegacyQuery`),
//! translated into the `find` (or `explain` of a `find`) command an OP_MSG client would
//! send: a plain filter or the wrapped form (`$query`/`query`, `$orderby`/`orderby`,
//! `$hint`, `$explain`, `$comment`, `$maxTimeMS`, `$snapshot`, `$readPreference`), the
//! projection, `numberToSkip`, and `numberToReturn` (positive: the first batch's size;
//! negative or 1: a limit, one batch, cursor closed). What the find path cannot honour
//! (`$min`/`$max`, `$returnKey`, `$showDiskLoc`, `$maxScan`, tailable/awaitData/exhaust/
//! oplogReplay/noCursorTimeout cursors) is refused with a QueryFailure, never ignored.

use super::{batch_reply, failure_of, failure_reply, failure_reply_parts, reply_raw};
use crate::command::to_bson;
use crate::commands::dispatch;
use crate::commands::raw_args::owned_filter;
use crate::wire::{encode_op_reply_docs, query_flags, reply_flags, OpQuery, ReplyHead};
use crate::ConnectionCtx;
use bson::{doc, Bson, Document, RawDocument};
use shale_doc::matcher::element::bson_true_value;
use shale_doc::{ErrorCode, MongoError};

/// An OP_QUERY as a command: the database to run it in, the command, whether it explains.
#[derive(Debug, Clone, PartialEq)]
pub struct Translated {
    pub db: String,
    pub command: Document,
    pub explain: bool,
}

/// Runs the query through the find path and answers with an OP_REPLY.
pub fn run(ctx: &ConnectionCtx, request_id: i32, q: &OpQuery) -> Vec<u8> {
    super::lock(ctx).last_error = Default::default();
    let t = match translate(q) {
        Ok(t) => t,
        Err(e) => return failure_reply(request_id, &e),
    };
    tracing::debug!(
        conn = ctx.connection_id,
        ns = q.full_collection_name,
        "OP_QUERY"
    );
    let reply = reply_raw(dispatch(ctx, &t.db, &t.command));
    if let Some((message, code)) = failure_of(&reply) {
        return failure_reply_parts(request_id, &message, code);
    }
    if t.explain {
        let head = ReplyHead {
            response_flags: reply_flags::AWAIT_CAPABLE,
            cursor_id: 0,
            starting_from: 0,
        };
        return encode_op_reply_docs(
            super::next_reply_id(),
            request_id,
            head,
            &[reply.as_bytes()],
        );
    }
    batch_reply(ctx, request_id, 0, &reply, "firstBatch")
}

/// Translates an OP_QUERY on a collection into its `find` command (pure).
pub fn translate(q: &OpQuery) -> Result<Translated, MongoError> {
    let (db, coll) = super::split_namespace(&q.full_collection_name)?;
    check_flags(q.flags)?;
    let mut find = doc! { "find": coll };
    let explain = unwrap_query(&q.query, &mut find)?;
    if let Some(fields) = q.fields.as_ref().filter(|f| !f.is_empty()) {
        find.insert("projection", fields.clone());
    }
    add_skip_and_return(q.number_to_skip, q.number_to_return, &mut find)?;
    let command = if explain {
        find.remove("batchSize");
        doc! { "explain": find }
    } else {
        find
    };
    Ok(Translated {
        db: db.to_owned(),
        command,
        explain,
    })
}

/// Refuses the cursor flags the find path cannot honour (mongod 3.6 served them all).
fn check_flags(flags: u32) -> Result<(), MongoError> {
    use query_flags::*;
    let refused = [
        (
            TAILABLE_CURSOR,
            "tailable cursors need a capped collection; there are none",
        ),
        (
            AWAIT_DATA,
            "awaitData cursors need a tailable cursor; there are none",
        ),
        (
            OPLOG_REPLAY,
            "oplogReplay needs an oplog; a standalone ShaleDB has none",
        ),
        (
            EXHAUST,
            "exhaust cursors are not supported; use OP_GET_MORE",
        ),
        (
            NO_CURSOR_TIMEOUT,
            "noCursorTimeout is not supported: idle cursors close after 10 minutes",
        ),
    ];
    match refused.iter().find(|(bit, _)| flags & bit != 0) {
        // slaveOk and partial are meaningless on a standalone and accepted as mongod does.
        None => Ok(()),
        Some((_, why)) => Err(MongoError::new(ErrorCode::BadValue, *why)),
    }
}

/// Fills `find` from a plain filter or the wrapped form; true when `$explain` asks for the
/// plan instead of the documents.
/// The filter is read as sent: a name it gives twice is the `$and` of both, as `find`'s
/// (`raw_args::owned_filter`).
fn unwrap_query(query: &RawDocument, find: &mut Document) -> Result<bool, MongoError> {
    let wrapped = ["query", "$query"]
        .iter()
        .find_map(|k| query.get_document(k).ok());
    let Some(filter) = wrapped else {
        find.insert("filter", owned_filter(query)?);
        return Ok(false);
    };
    find.insert("filter", owned_filter(filter)?);
    let mut explain = false;
    for element in query {
        let (name, value) =
            element.map_err(|e| MongoError::new(ErrorCode::InvalidBSON, e.to_string()))?;
        let value = &to_bson(value);
        match name {
            "query" | "$query" | "$readPreference" | "$snapshot" => {}
            "orderby" | "$orderby" => {
                find.insert("sort", object_option(name, value)?);
            }
            "$hint" => {
                find.insert("hint", value.clone());
            }
            "$explain" => explain = bson_true_value(value),
            "$comment" => {
                find.insert("comment", value.clone());
            }
            "$maxTimeMS" => {
                find.insert("maxTimeMS", value.clone());
            }
            "$min" | "$max" | "$maxScan" => return Err(not_built(name)),
            "$returnKey" | "$showDiskLoc" if bson_true_value(value) => return Err(not_built(name)),
            "$returnKey" | "$showDiskLoc" => {}
            other if other.starts_with('$') => {
                return Err(MongoError::new(
                    ErrorCode::BadValue,
                    format!("unknown legacy query option {other}"),
                ))
            }
            // mongod ignored other fields beside a wrapped query.
            _ => {}
        }
    }
    Ok(explain)
}

fn object_option(name: &str, value: &Bson) -> Result<Document, MongoError> {
    match value {
        Bson::Document(d) => Ok(d.clone()),
        other => Err(MongoError::new(
            ErrorCode::BadValue,
            format!(
                "{name} must be an object, not {}",
                shale_doc::type_name(other)
            ),
        )),
    }
}

fn not_built(option: &str) -> MongoError {
    MongoError::new(
        ErrorCode::NotImplemented,
        format!("the legacy query option {option} is not supported by ShaleDB's find"),
    )
}

/// `numberToSkip` and `numberToReturn` as find options (mongod treats 1 as -1).
fn add_skip_and_return(skip: i32, to_return: i32, find: &mut Document) -> Result<(), MongoError> {
    if skip < 0 {
        return Err(MongoError::new(
            ErrorCode::BadValue,
            "bad skip value in query",
        ));
    }
    if skip > 0 {
        find.insert("skip", i64::from(skip));
    }
    match to_return {
        0 => {}
        1 => {
            find.insert("limit", 1i64);
            find.insert("singleBatch", true);
        }
        n if n < 0 => {
            find.insert("limit", i64::from(n).abs());
            find.insert("singleBatch", true);
        }
        n => {
            find.insert("batchSize", i64::from(n));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(q: Document, skip: i32, to_return: i32) -> OpQuery {
        OpQuery {
            flags: 0,
            full_collection_name: "db.c".into(),
            number_to_skip: skip,
            number_to_return: to_return,
            query: bson::RawDocumentBuf::from_document(&q).expect("raw"),
            fields: Some(doc! {"a": 1}),
        }
    }

    #[test]
    fn a_plain_filter_becomes_a_find() {
        let t = translate(&query(doc! {"a": {"$gt": 1}}, 5, 20)).expect("ok");
        assert_eq!(t.db, "db");
        assert_eq!(
            t.command,
            doc! {"find": "c", "filter": {"a": {"$gt": 1}}, "projection": {"a": 1},
            "skip": 5i64, "batchSize": 20i64}
        );
    }

    #[test]
    fn the_wrapped_form_and_negative_or_one_return() {
        let q = doc! {"$query": {"a": 1}, "$orderby": {"b": -1}, "$hint": "b_1",
        "$comment": "x", "$readPreference": {"mode": "primary"}};
        for n in [-1, 1] {
            let t = translate(&query(q.clone(), 0, n)).expect("ok");
            assert_eq!(
                t.command,
                doc! {"find": "c", "filter": {"a": 1}, "sort": {"b": -1}, "hint": "b_1",
                "comment": "x", "projection": {"a": 1}, "limit": 1i64, "singleBatch": true}
            );
        }
        let t = translate(&query(doc! {"query": {}, "orderby": {"a": 1}}, 0, -7)).expect("ok");
        assert_eq!(t.command.get_i64("limit").expect("limit"), 7);
    }

    #[test]
    fn a_filter_naming_a_field_twice_is_the_and_of_both() {
        let mut twice = bson::RawDocumentBuf::new();
        twice.append("a", bson::rawdoc! {"$gte": 1});
        twice.append("a", bson::rawdoc! {"$lte": 2});
        let and = doc! {"$and": [{"a": {"$gte": 1}}, {"a": {"$lte": 2}}]};
        let mut plain = query(doc! {}, 0, 0);
        plain.query = twice.clone();
        let t = translate(&plain).expect("ok");
        assert_eq!(t.command.get_document("filter"), Ok(&and));
        let mut wrapped = bson::RawDocumentBuf::new();
        wrapped.append("$query", twice);
        wrapped.append("$orderby", bson::rawdoc! {"a": 1});
        plain.query = wrapped;
        let t = translate(&plain).expect("ok");
        assert_eq!(t.command.get_document("filter"), Ok(&and));
        assert_eq!(t.command.get_document("sort"), Ok(&doc! {"a": 1}));
    }

    #[test]
    fn explain_wraps_the_find() {
        let t = translate(&query(doc! {"$query": {}, "$explain": true}, 0, 0)).expect("ok");
        assert!(t.explain);
        assert!(t.command.get_document("explain").is_ok());
    }

    #[test]
    fn what_find_cannot_honour_is_refused() {
        for q in [
            doc! {"$query": {}, "$min": {"a": 1}},
            doc! {"$query": {}, "$returnKey": true},
            doc! {"$query": {}, "$showDiskLoc": true},
            doc! {"$query": {}, "$bogus": 1},
        ] {
            assert!(translate(&query(q, 0, 0)).is_err());
        }
        assert!(translate(&query(doc! {}, -1, 0)).is_err());
        let mut tailable = query(doc! {}, 0, 0);
        tailable.flags = query_flags::TAILABLE_CURSOR;
        assert_eq!(
            translate(&tailable).expect_err("refused").code,
            ErrorCode::BadValue
        );
        let mut ok = query(doc! {}, 0, 0);
        ok.flags = query_flags::SLAVE_OK | query_flags::PARTIAL;
        assert!(translate(&ok).is_ok());
    }
}
