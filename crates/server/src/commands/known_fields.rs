//! The fields each command mongod 7.0 parses strictly (its IDL's `strict: true`) may carry:
//! any other top-level field is `Location40415` "BSON field 'find.orderd' is an unknown
//! field.", as on mongod, so a misspelt option fails instead of running with the default.
//! Generic arguments (`GENERIC_ARGUMENTS`, the rest of mongod's `generic_argument.idl`) and
//! every `$`-prefixed field pass. Lists follow mongod 7.0's IDL files (`find_command.idl`,
//! `aggregate_command.idl`, `write_ops.idl`, `count_command.idl`, `distinct_command.idl`,
//! `drop.idl`, `create_indexes.idl`, `list_collections.idl`, `list_indexes.idl`, ...);
//! fields mongod keeps for its own internal clients are listed too, so that what mongod
//! accepts is accepted (each handler still refuses what it does not build).
//! `create` and `collMod` check their fields in their handlers.

use super::GENERIC_ARGUMENTS;
use crate::command::Command;
use shale_doc::{ErrorCode, MongoError};

/// Generic arguments of mongod 7.0 beyond those the dispatcher reads itself.
const MORE_GENERIC: &[&str] = &[
    "startTransaction",
    "stmtId",
    "clientOperationKey",
    "txnRetryCounter",
    "mayBypassWriteBlocking",
    "allowImplicitCollectionCreation",
    "shardVersion",
    "databaseVersion",
];

/// The fields `insert`, `update` and `delete` share (mongod's `WriteCommandRequestBase`).
const WRITE_COMMAND_FIELDS: &[&str] = &[
    "ordered",
    "bypassDocumentValidation",
    "stmtIds",
    "collectionUUID",
    "encryptionInformation",
    "isTimeseriesNamespace",
];

/// Each strictly parsed command's own fields (its name excluded; the write commands' shared
/// ones are `WRITE_COMMAND_FIELDS`).
const OWN_FIELDS: &[(&str, &[&str])] = &[
    (
        "find",
        &[
            "filter",
            "projection",
            "sort",
            "hint",
            "collation",
            "skip",
            "limit",
            "batchSize",
            "ntoreturn",
            "singleBatch",
            "allowDiskUse",
            "min",
            "max",
            "returnKey",
            "showRecordId",
            "tailable",
            "oplogReplay",
            "noCursorTimeout",
            "awaitData",
            "allowPartialResults",
            "let",
            "options",
            "term",
            "readOnce",
            "allowSpeculativeMajorityRead",
            "runtimeConstants",
            "collectionUUID",
            "encryptionInformation",
        ],
    ),
    (
        "aggregate",
        &[
            "pipeline",
            "explain",
            "allowDiskUse",
            "cursor",
            "bypassDocumentValidation",
            "collation",
            "hint",
            "let",
            "needsMerge",
            "fromMongos",
            "exchange",
            "runtimeConstants",
            "isMapReduceCommand",
            "collectionUUID",
            "encryptionInformation",
            "sampleId",
        ],
    ),
    ("insert", &["documents"]),
    ("update", &["updates", "let", "runtimeConstants"]),
    ("delete", &["deletes", "let", "runtimeConstants"]),
    (
        "findAndModify",
        &[
            "query",
            "fields",
            "sort",
            "remove",
            "update",
            "new",
            "upsert",
            "bypassDocumentValidation",
            "collation",
            "arrayFilters",
            "hint",
            "let",
            "runtimeConstants",
            "encryptionInformation",
            "isTimeseriesNamespace",
        ],
    ),
    (
        "count",
        &[
            "query",
            "limit",
            "skip",
            "hint",
            "collation",
            "fields",
            "encryptionInformation",
            "mirrored",
            "sampleId",
        ],
    ),
    (
        "distinct",
        &["key", "query", "collation", "mirrored", "sampleId"],
    ),
    (
        "getMore",
        &[
            "collection",
            "batchSize",
            "term",
            "lastKnownCommittedOpTime",
        ],
    ),
    ("killCursors", &["cursors"]),
    ("explain", &["verbosity"]),
    ("drop", &["collectionUUID"]),
    (
        "dropIndexes",
        &["index", "collectionUUID", "isTimeseriesNamespace"],
    ),
    ("dropDatabase", &[]),
    (
        "renameCollection",
        &["to", "dropTarget", "stayTemp", "collectionUUID"],
    ),
    (
        "createIndexes",
        &[
            "indexes",
            "v",
            "ignoreUnknownIndexOptions",
            "commitQuorum",
            "returnOnStart",
            "isTimeseriesNamespace",
            "collectionUUID",
        ],
    ),
    (
        "listCollections",
        &[
            "filter",
            "nameOnly",
            "authorizedCollections",
            "cursor",
            "includePendingDrops",
        ],
    ),
    (
        "listIndexes",
        &[
            "cursor",
            "includeBuildUUIDs",
            "includeIndexBuildInfo",
            "isTimeseriesNamespace",
        ],
    ),
];

/// A command's canonical name: aliases name their fields, and mongod's messages name them,
/// by it.
pub(super) fn canonical(name: &str) -> &str {
    match name {
        "findandmodify" => "findAndModify",
        "deleteIndexes" => "dropIndexes",
        other => other,
    }
}

/// Whether strictly parsed command `name` has field `field` of its own (the write
/// commands' shared fields included); false for a command not parsed strictly.
pub(super) fn has_field(name: &str, field: &str) -> bool {
    let name = canonical(name);
    OWN_FIELDS
        .iter()
        .find(|(n, _)| *n == name)
        .is_some_and(|(_, own)| own.contains(&field))
        || (matches!(name, "insert" | "update" | "delete") && WRITE_COMMAND_FIELDS.contains(&field))
}

/// Refuses a top-level field that strictly parsed command `cmd` does not have (40415).
pub(super) fn refuse_unknown_field(cmd: &Command<'_>) -> Result<(), MongoError> {
    let name = cmd.name();
    if !OWN_FIELDS.iter().any(|(n, _)| *n == canonical(name)) {
        return Ok(());
    }
    let known = |f: &str| {
        f.starts_with('$')
            || has_field(name, f)
            || GENERIC_ARGUMENTS.contains(&f)
            || MORE_GENERIC.contains(&f)
    };
    match cmd.fields().iter().skip(1).find(|(f, _)| !known(f)) {
        Some((f, _)) => Err(MongoError::new(
            ErrorCode::Location40415,
            format!("BSON field '{}.{f}' is an unknown field.", canonical(name)),
        )),
        None => Ok(()),
    }
}
