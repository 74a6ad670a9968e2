//! Snapshot reads outside transactions (`readConcern: {level: "snapshot"}`, with or
//! without `atClusterTime`; docs/transactions.md, Snapshot reads): which commands may ask
//! for one (`find`, `aggregate` without a write stage or `$changeStream`, `distinct`, as
//! mongod 5.0+), the scope the command runs in (`shale_db::snapshot_read`) and the
//! `atClusterTime` its reply carries (in `cursor` for `find`/`aggregate`, at the top level
//! for `distinct`, where drivers read it). A standalone refuses them with mongod's
//! `NotAReplicaSet` (123). Statements of a transaction never come here.

use super::Reply;
use crate::ConnectionCtx;
use bson::{RawBsonRef, RawDocument, RawDocumentBuf, Timestamp};
use shale_db::snapshot_read::SnapshotScope;
use shale_doc::{ErrorCode, MongoError};

/// What a command's `readConcern` asks of a snapshot read: `None` when it is not one,
/// `Some(None)` for the newest cluster time, `Some(Some(t))` for `atClusterTime: t`.
pub(crate) fn requested(
    name: &str,
    body: &RawDocument,
) -> Result<Option<Option<Timestamp>>, MongoError> {
    if body.get("autocommit").ok().flatten().is_some() {
        return Ok(None);
    }
    let Ok(rc) = body.get_document("readConcern") else {
        return Ok(None);
    };
    let snapshot = rc.get_str("level").ok() == Some("snapshot");
    let at = match rc.get("atClusterTime").ok().flatten() {
        None => None,
        Some(RawBsonRef::Timestamp(t)) => Some(t),
        Some(_) => {
            return Err(invalid(
                "readConcern atClusterTime must be a timestamp".to_owned(),
            ))
        }
    };
    if !snapshot {
        return match at {
            Some(_) => Err(invalid(
                "readConcern level must be 'snapshot' when atClusterTime is given".to_owned(),
            )),
            None => Ok(None),
        };
    }
    if at.is_some() && rc.get("afterClusterTime").ok().flatten().is_some() {
        return Err(invalid(
            "Can not specify both afterClusterTime and atClusterTime".to_owned(),
        ));
    }
    if !supports_snapshot(name, body) {
        return Err(invalid(format!(
            "Command {name} does not support readConcern level 'snapshot' outside a \
             multi-document transaction"
        )));
    }
    Ok(Some(at))
}

/// `find`, `distinct`, and `aggregate` unless it writes or opens a change stream.
fn supports_snapshot(name: &str, body: &RawDocument) -> bool {
    match name {
        "find" | "distinct" => true,
        "aggregate" => {
            let Ok(pipeline) = body.get_array("pipeline") else {
                return true;
            };
            !pipeline.into_iter().filter_map(Result::ok).any(|stage| {
                let RawBsonRef::Document(d) = stage else {
                    return false;
                };
                let first = d.into_iter().next().and_then(Result::ok).map(|(k, _)| k);
                matches!(first, Some("$out" | "$merge" | "$changeStream"))
            })
        }
        _ => false,
    }
}

fn invalid(message: String) -> MongoError {
    MongoError::new(ErrorCode::InvalidOptions, message)
}

/// Runs `run` reading the snapshot `at` asks for and adds its `atClusterTime` to the reply.
pub(crate) fn run(
    ctx: &ConnectionCtx,
    name: &str,
    at: Option<Timestamp>,
    run: impl FnOnce() -> Reply,
) -> Result<Reply, MongoError> {
    let read = ctx.db.snapshot_read(at)?;
    let at = read.at_cluster_time();
    let reply = {
        let _scope = SnapshotScope::enter(read);
        run()
    };
    Ok(with_cluster_time(reply, name, at))
}

/// `reply` with `atClusterTime` where drivers read it, when it succeeded.
fn with_cluster_time(reply: Reply, name: &str, at: Timestamp) -> Reply {
    let mut doc = match reply {
        Reply::Doc(d) => d,
        Reply::Raw(r) => match r.to_document() {
            Ok(d) => d,
            Err(_) => return Reply::Raw(r),
        },
    };
    let ok = matches!(doc.get("ok"), Some(v) if v.as_f64() == Some(1.0) || v.as_i32() == Some(1));
    if ok {
        match doc.get_document_mut("cursor") {
            Ok(cursor) if name != "distinct" => {
                cursor.insert("atClusterTime", at);
            }
            _ => {
                doc.insert("atClusterTime", at);
            }
        }
    }
    match RawDocumentBuf::from_document(&doc) {
        Ok(raw) => Reply::Raw(raw),
        Err(_) => Reply::Doc(doc),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn raw(d: bson::Document) -> RawDocumentBuf {
        RawDocumentBuf::from_document(&d).expect("encodes")
    }

    #[test]
    fn only_snapshot_reads_of_the_three_read_commands_are_taken() {
        let t = Timestamp {
            time: 5,
            increment: 1,
        };
        let find = doc! {"find": "c", "readConcern": {"level": "snapshot"}};
        assert_eq!(requested("find", &raw(find)), Ok(Some(None)));
        let at = doc! {"distinct": "c", "readConcern": {"level": "snapshot", "atClusterTime": t}};
        assert_eq!(requested("distinct", &raw(at)), Ok(Some(Some(t))));
        let local = doc! {"find": "c", "readConcern": {"level": "local"}};
        assert_eq!(requested("find", &raw(local)), Ok(None));
        let in_txn = doc! {"find": "c", "autocommit": false, "readConcern": {"level": "snapshot"}};
        assert_eq!(requested("find", &raw(in_txn)), Ok(None));
    }

    #[test]
    fn what_cannot_be_a_snapshot_read_is_invalid_options() {
        let t = Timestamp {
            time: 5,
            increment: 1,
        };
        let cases = [
            (
                "count",
                doc! {"count": "c", "readConcern": {"level": "snapshot"}},
            ),
            (
                "find",
                doc! {"find": "c", "readConcern": {"atClusterTime": t}},
            ),
            (
                "find",
                doc! {"find": "c", "readConcern": {"level": "snapshot", "atClusterTime": t, "afterClusterTime": t}},
            ),
            (
                "aggregate",
                doc! {"aggregate": "c", "pipeline": [{"$out": "x"}], "readConcern": {"level": "snapshot"}},
            ),
            (
                "aggregate",
                doc! {"aggregate": "c", "pipeline": [{"$changeStream": {}}], "readConcern": {"level": "snapshot"}},
            ),
        ];
        for (name, body) in cases {
            let e = requested(name, &raw(body.clone())).expect_err("refused");
            assert_eq!(e.code, ErrorCode::InvalidOptions, "{body}");
        }
    }

    #[test]
    fn the_cluster_time_goes_in_the_cursor_or_at_the_top() {
        let t = Timestamp {
            time: 5,
            increment: 1,
        };
        let find = Reply::Doc(doc! {"cursor": {"firstBatch": [], "id": 0i64}, "ok": 1.0});
        let Reply::Raw(r) = with_cluster_time(find, "find", t) else {
            panic!("raw")
        };
        let cursor = r.get_document("cursor").expect("cursor");
        assert_eq!(cursor.get_timestamp("atClusterTime"), Ok(t));
        let distinct = Reply::Doc(doc! {"values": [], "ok": 1.0});
        let Reply::Raw(r) = with_cluster_time(distinct, "distinct", t) else {
            panic!("raw")
        };
        assert_eq!(r.get_timestamp("atClusterTime"), Ok(t));
    }
}
