//! What a replica set changes about a command's concerns and which commands count as writes:
//! `writeConcern` a one-member set cannot satisfy becomes a `writeConcernError` on a reply
//! that succeeded (the write stays applied, as on mongod, whose check comes after the write):
//! a numeric `w` above the number of data-bearing members is `UnsatisfiableWriteConcern`
//! (100), a tag mode the config does not define `UnknownReplWriteConcern` (79); `w: 0`, `w: 1`
//! and `w: "majority"` are met by the write's own commit (one member is the majority, and a
//! commit is durable per the fsync policy before it is acknowledged). Read concerns this
//! member cannot honour are refused (`read_concern_error`; snapshot reads outside a
//! transaction are `commands/snapshot_read.rs`'s). Pure.

use super::config::number;
use bson::{doc, Bson, Document, RawBsonRef, RawDocument};
use shale_doc::{ErrorCode, MongoError};

/// The commands that write (mongod refuses them with `NotWritablePrimary` on a member that is
/// not primary, and gives them an `operationTime` of their own).
const WRITE_COMMANDS: &[&str] = &[
    "insert",
    "update",
    "delete",
    "findAndModify",
    "findandmodify",
    "create",
    "drop",
    "dropDatabase",
    "renameCollection",
    "createIndexes",
    "dropIndexes",
    "deleteIndexes",
    "commitTransaction",
    "createUser",
    "updateUser",
    "dropUser",
    "dropAllUsersFromDatabase",
    "grantRolesToUser",
    "revokeRolesFromUser",
    "createRole",
    "updateRole",
    "dropRole",
    "dropAllRolesFromDatabase",
    "grantPrivilegesToRole",
    "revokePrivilegesFromRole",
    "grantRolesToRole",
    "revokeRolesFromRole",
    "compactStructuredEncryptionData",
    "cleanupStructuredEncryptionData",
];

/// Whether command `name` with `body` writes: a write command, or an aggregation whose
/// pipeline ends in `$out` or `$merge`.
pub fn is_write(name: &str, body: &RawDocument) -> bool {
    WRITE_COMMANDS.contains(&name) || write_stage(name, body).is_some()
}

/// `$out` or `$merge` when `body` is an aggregation ending in one.
fn write_stage<'a>(name: &str, body: &'a RawDocument) -> Option<&'a str> {
    if name != "aggregate" {
        return None;
    }
    let pipeline = body.get_array("pipeline").ok()?;
    let last = pipeline.into_iter().filter_map(Result::ok).last();
    let Some(RawBsonRef::Document(stage)) = last else {
        return None;
    };
    let first = stage
        .into_iter()
        .next()
        .and_then(Result::ok)
        .map(|(k, _)| k);
    first.filter(|k| matches!(*k, "$out" | "$merge"))
}

/// A read concern this member refuses before the command runs (transaction statements,
/// which carry `autocommit`, are checked by the transaction runner instead; snapshot reads
/// outside a transaction by `snapshot_read`): `linearizable` on a command that writes:
/// `InvalidOptions`, as mongod (`$out`/`$merge` with its own message).
pub fn read_concern_error(name: &str, body: &RawDocument) -> Option<MongoError> {
    if body.get("autocommit").ok().flatten().is_some() {
        return None;
    }
    let rc = body.get_document("readConcern").ok()?;
    let level = rc.get_str("level").ok();
    if level != Some("linearizable") || !is_write(name, body) {
        return None;
    }
    let message = match write_stage(name, body) {
        Some(stage) => format!("{stage} cannot be used with a 'linearizable' read concern level"),
        None => format!(
            "Command {name} does not support {{ readConcern: {{ level: \"linearizable\" }} }}"
        ),
    };
    Some(MongoError::new(ErrorCode::InvalidOptions, message))
}

/// The `writeConcernError` a one-member set answers `body`'s `writeConcern` with, if any.
pub fn write_concern_error(body: &RawDocument, data_members: i64) -> Option<Document> {
    let wc = body.get_document("writeConcern").ok()?;
    let w: Bson = wc.get("w").ok()??.to_raw_bson().try_into().ok()?;
    let wtimeout = wc
        .get("wtimeout")
        .ok()
        .flatten()
        .and_then(|v| Bson::try_from(v.to_raw_bson()).ok())
        .and_then(|v| number(&v))
        .unwrap_or(0);
    let (code, name, message) = match &w {
        Bson::String(mode) if mode == "majority" => return None,
        Bson::String(mode) => (
            79,
            "UnknownReplWriteConcern",
            format!("No write concern mode named '{mode}' found in replica set configuration"),
        ),
        other => match number(other) {
            Some(n) if n > data_members => (
                100,
                "UnsatisfiableWriteConcern",
                "Not enough data-bearing nodes".to_owned(),
            ),
            _ => return None,
        },
    };
    Some(doc! {
        "code": code,
        "codeName": name,
        "errmsg": message,
        "errInfo": {"writeConcern": {
            "w": w,
            "wtimeout": wtimeout as i32,
            "provenance": "clientSupplied",
        }},
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::RawDocumentBuf;

    fn raw(d: Document) -> RawDocumentBuf {
        RawDocumentBuf::from_document(&d).expect("encodes")
    }

    #[test]
    fn majority_one_and_zero_are_met_by_one_member() {
        for w in [
            Bson::String("majority".into()),
            Bson::Int32(1),
            Bson::Int64(0),
        ] {
            let body = doc! {"insert": "c", "writeConcern": {"w": w}};
            assert_eq!(write_concern_error(&raw(body), 1), None);
        }
        assert_eq!(write_concern_error(&raw(doc! {"insert": "c"}), 1), None);
    }

    #[test]
    fn more_members_than_there_are_or_an_unknown_mode_is_an_error() {
        let body = doc! {"insert": "c", "writeConcern": {"w": 2, "wtimeout": 5}};
        let e = write_concern_error(&raw(body), 1).expect("w: 2 on one member");
        assert_eq!(e.get_i32("code"), Ok(100));
        assert_eq!(e.get_str("codeName"), Ok("UnsatisfiableWriteConcern"));
        let info = e
            .get_document("errInfo")
            .and_then(|i| i.get_document("writeConcern"));
        assert_eq!(info.and_then(|w| w.get_i32("wtimeout")), Ok(5));
        let body = doc! {"insert": "c", "writeConcern": {"w": "dc1"}};
        let e = write_concern_error(&raw(body), 1).expect("unknown tag mode");
        assert_eq!(e.get_i32("code"), Ok(79));
    }

    #[test]
    fn a_writing_aggregation_refuses_linearizable_reads() {
        let out = doc! {"pipeline": [{"$out": "x"}], "readConcern": {"level": "linearizable"}};
        let e = read_concern_error("aggregate", &raw(out)).expect("refused");
        assert_eq!(e.code, ErrorCode::InvalidOptions);
        let read = doc! {"pipeline": [], "readConcern": {"level": "linearizable"}};
        assert!(read_concern_error("aggregate", &raw(read)).is_none());
        let majority = doc! {"pipeline": [{"$merge": "x"}], "readConcern": {"level": "majority"}};
        assert!(read_concern_error("aggregate", &raw(majority)).is_none());
        let insert = doc! {"insert": "c", "readConcern": {"level": "linearizable"}};
        assert!(read_concern_error("insert", &raw(insert)).is_some());
    }

    #[test]
    fn snapshot_reads_are_left_to_the_snapshot_read_path() {
        let find = doc! {"find": "c", "readConcern": {"level": "snapshot"}};
        assert!(read_concern_error("find", &raw(find)).is_none());
        let majority = doc! {"find": "c", "readConcern": {"level": "majority", "afterClusterTime": bson::Timestamp {time: 1, increment: 1}}};
        assert!(read_concern_error("find", &raw(majority)).is_none());
    }

    #[test]
    fn writes_are_known_by_name_or_by_their_last_stage() {
        assert!(is_write("insert", &raw(doc! {})));
        assert!(!is_write("find", &raw(doc! {})));
        let out = doc! {"pipeline": [{"$match": {}}, {"$out": "x"}]};
        assert!(is_write("aggregate", &raw(out)));
        let plain = doc! {"pipeline": [{"$match": {}}]};
        assert!(!is_write("aggregate", &raw(plain)));
    }
}
