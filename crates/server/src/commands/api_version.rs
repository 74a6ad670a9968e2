//! The Stable API's parameters (`apiVersion`, `apiStrict`, `apiDeprecationErrors`), checked
//! on every command as mongod 7.0 checks them before it runs one: the version must be "1",
//! `apiStrict`/`apiDeprecationErrors` need a version, and under `apiStrict: true` only the
//! commands of API version 1 run. No command here is deprecated in version 1, so
//! `apiDeprecationErrors: true` refuses nothing. Under `apiStrict: true` a version-1
//! command's top-level field that mongod 7.0's IDL marks `stability: unstable` is
//! `APIStrictError` 323 "BSON field 'find.min' is not allowed with apiStrict:true." (its
//! `idl_parser.cpp`); fields marked `internal` are not refused, as mongod's IDL generator
//! emits the check for `unstable` only.

use super::list_commands::API_V1;
use crate::command::{to_bson, Command};
use bson::RawBsonRef;
use shale_doc::{ErrorCode, MongoError};

/// Checks `cmd`'s API parameters.
pub(super) fn check(cmd: &Command<'_>) -> Result<(), MongoError> {
    let version = match cmd.get("apiVersion") {
        None => None,
        Some(RawBsonRef::String(v)) => Some(v),
        Some(other) => return Err(wrong_type("apiVersion", other, "string")),
    };
    let strict = flag(cmd, "apiStrict")?;
    let deprecation = flag(cmd, "apiDeprecationErrors")?;
    for (field, given) in [("apiStrict", strict), ("apiDeprecationErrors", deprecation)] {
        if given.is_some() && version.is_none() {
            return Err(MongoError::new(
                ErrorCode::Location4886600,
                format!("Provided {field} without passing apiVersion"),
            ));
        }
    }
    let Some(version) = version else {
        return Ok(());
    };
    if version != "1" {
        return Err(MongoError::new(
            ErrorCode::APIVersionError,
            "API version must be \"1\"",
        ));
    }
    let name = super::known_fields::canonical(cmd.name());
    if strict == Some(true) && !API_V1.contains(&name) {
        return Err(MongoError::new(
            ErrorCode::APIStrictError,
            format!("Provided apiStrict:true, but the command {name} is not in API Version 1"),
        ));
    }
    if strict == Some(true) {
        refuse_unstable_field(cmd, name)?;
    }
    Ok(())
}

/// The top-level fields mongod 7.0's IDL marks `stability: unstable` in each version-1
/// command (`find_command.idl`, `aggregate_command.idl`, `write_ops.idl`,
/// `getmore_command.idl`, `list_indexes.idl`, `list_collections.idl`,
/// `create_indexes.idl`). Fields a command does not have at all are 40415 before this.
const UNSTABLE_FIELDS: &[(&str, &[&str])] = &[
    (
        "find",
        &[
            "ntoreturn",
            "min",
            "max",
            "returnKey",
            "showRecordId",
            "$queryOptions",
            "tailable",
            "oplogReplay",
            "noCursorTimeout",
            "awaitData",
            "options",
            "term",
            "readOnce",
            "allowSpeculativeMajorityRead",
            "$_requestResumeToken",
            "$_resumeAfter",
            "runtimeConstants",
            "collectionUUID",
            "encryptionInformation",
        ],
    ),
    (
        "aggregate",
        &[
            "explain",
            "$queryOptions",
            "$_requestReshardingResumeToken",
            "runtimeConstants",
            "isMapReduceCommand",
            "collectionUUID",
            "$_passthroughToShard",
            "encryptionInformation",
            "$_externalDataSources",
            "sampleId",
            "$_requestResumeToken",
            "$_resumeAfter",
        ],
    ),
    ("insert", &["collectionUUID", "encryptionInformation"]),
    ("update", &["collectionUUID", "encryptionInformation"]),
    (
        "delete",
        &[
            "collectionUUID",
            "encryptionInformation",
            "runtimeConstants",
        ],
    ),
    ("findAndModify", &["encryptionInformation"]),
    ("getMore", &["term", "lastKnownCommittedOpTime"]),
    (
        "listIndexes",
        &["includeBuildUUIDs", "includeIndexBuildInfo"],
    ),
    ("listCollections", &["includePendingDrops"]),
    (
        "createIndexes",
        &[
            "ignoreUnknownIndexOptions",
            "returnOnStart",
            "collectionUUID",
        ],
    ),
];

/// Whether `field` of version-1 command `name` (canonical) is unstable in API version 1.
fn is_unstable(name: &str, field: &str) -> bool {
    UNSTABLE_FIELDS
        .iter()
        .find(|(n, _)| *n == name)
        .is_some_and(|(_, fields)| fields.contains(&field))
}

/// Refuses, under `apiStrict: true`, the first unstable field `cmd` carries (323).
fn refuse_unstable_field(cmd: &Command<'_>, name: &str) -> Result<(), MongoError> {
    match cmd
        .fields()
        .iter()
        .skip(1)
        .find(|(f, _)| is_unstable(name, f))
    {
        Some((f, _)) => Err(MongoError::new(
            ErrorCode::APIStrictError,
            format!("BSON field '{name}.{f}' is not allowed with apiStrict:true."),
        )),
        None => Ok(()),
    }
}

fn flag(cmd: &Command<'_>, field: &str) -> Result<Option<bool>, MongoError> {
    match cmd.get(field) {
        None => Ok(None),
        Some(RawBsonRef::Boolean(b)) => Ok(Some(b)),
        Some(other) => Err(wrong_type(field, other, "bool")),
    }
}

fn wrong_type(field: &str, v: RawBsonRef<'_>, expected: &str) -> MongoError {
    super::data::wrong_type(field, &to_bson(v), expected)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unstable_fields_are_those_of_mongods_idl() {
        assert!(is_unstable("find", "min"));
        assert!(is_unstable("find", "returnKey"));
        assert!(!is_unstable("find", "allowPartialResults"));
        assert!(!is_unstable("find", "filter"));
        assert!(is_unstable("aggregate", "explain"));
        assert!(!is_unstable("aggregate", "exchange"));
        assert!(is_unstable("listIndexes", "includeBuildUUIDs"));
        assert!(!is_unstable("ping", "min"));
    }

    #[test]
    fn every_listed_command_is_in_api_version_1_and_parsed_strictly() {
        for (name, fields) in UNSTABLE_FIELDS {
            assert!(API_V1.contains(name), "{name}");
            for field in *fields {
                assert!(
                    field.starts_with('$') || super::super::known_fields::has_field(name, field),
                    "{name}.{field} is not a field known_fields accepts"
                );
            }
        }
    }
}
