//! The Stable API's parameters (`apiVersion`, `apiStrict`, `apiDeprecationErrors`), checked
//! on every command as mongod 7.0 checks them before it runs one: the version must be "1",
//! `apiStrict`/`apiDeprecationErrors` need a version, and under `apiStrict: true` only the
//! commands of API version 1 run. No command here is deprecated in version 1, so
//! `apiDeprecationErrors: true` refuses nothing. Not checked: the fields mongod marks
//! unstable inside version-1 commands (find's `min`, `returnKey`, …), which `apiStrict`
//! refuses there and which ShaleDB refuses in any case where they are not built.

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
    Ok(())
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
