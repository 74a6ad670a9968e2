//! The test commands (served only with `enableTestCommands`; without it they do not exist,
//! CommandNotFound as in mongod): `configureFailPoint`. And what a `failCommand` hit does to
//! a command, at mongod's two places: before the command runs (after its session fields
//! are checked) it may block for `blockTimeMS`, close the connection without a reply, or fail
//! with `errorCode`; after a command that succeeded it may add `writeConcernError`. The
//! fail point's state and matching are `fail_point.rs`'s.

use super::{require_admin, CommandResult, Reply};
use crate::fail_point::{flag, integer, Check, Target, FAIL_COMMAND};
use crate::ConnectionCtx;
use bson::{doc, Bson, Document};
use shale_doc::error_code::code_name;
use shale_doc::{ErrorCode, MongoError};
use std::sync::atomic::Ordering;
use std::time::Duration;

/// The message of every error `failCommand` injects (mongod's).
const FAILPOINT_MESSAGE: &str = "Failing command via 'failCommand' failpoint";

/// The commands that exist only with test commands enabled.
pub(crate) const TEST_COMMANDS: &[(&str, super::Handler)] =
    &[("configureFailPoint", configure_fail_point)];

/// `{configureFailPoint: <name>, mode, data}`: admin only; replies with `count`, the times
/// the fail point fired before.
pub fn configure_fail_point(ctx: &ConnectionCtx, db: &str, body: &Document) -> CommandResult {
    require_admin(db, "configureFailPoint")?;
    let name = match body.get("configureFailPoint") {
        Some(Bson::String(s)) => s.as_str(),
        _ => {
            return Err(MongoError::new(
                ErrorCode::TypeMismatch,
                "configureFailPoint must be a string naming the fail point",
            ))
        }
    };
    let count = ctx.server.fail_points.configure(name, body)?;
    if name == FAIL_COMMAND {
        tracing::warn!(fail_point = name, mode = ?body.get("mode"), data = ?body.get("data"), "set failpoint");
    }
    // mongod's appendNumber: an int when it fits.
    let count = i32::try_from(count).map_or(Bson::Int64(count), Bson::Int32);
    Ok(doc! {"count": count})
}

/// The labels an error gets when the fail point does not say (`errorLabels`).
pub(crate) type DefaultLabels<'a> = &'a dyn Fn(i32) -> Vec<&'static str>;

/// Checks `failCommand` before `command` runs; `Some(reply)` when it fails the command (the
/// connection may also have been marked to close). A block only delays the command.
pub(crate) fn before(
    ctx: &ConnectionCtx,
    command: &str,
    labels: DefaultLabels<'_>,
) -> Option<Reply> {
    let data = fire(ctx, command, Check::Before)?;
    if flag(&data, "blockConnection") {
        match integer(&data, "blockTimeMS") {
            Some(ms) if ms >= 0 => {
                std::thread::sleep(Duration::from_millis(u64::try_from(ms).unwrap_or(0)))
            }
            Some(_) => return Some(invalid("'blockTimeMS' must be non-negative")),
            None => {
                return Some(invalid(
                    "must specify 'blockTimeMS' when 'blockConnection' is true",
                ))
            }
        }
    }
    if flag(&data, "closeConnection") {
        ctx.close_requested.store(true, Ordering::Relaxed);
        return Some(failed(&data, ErrorCode::Location50985.code(), labels));
    }
    let code = integer(&data, "errorCode")?;
    let code = i32::try_from(code).unwrap_or(ErrorCode::BadValue.code());
    Some(failed(&data, code, labels))
}

/// The `failCommand` data that fires for `command` at `check` on this connection, if test
/// commands are on and the fail point matches (its command list and the client's appName).
fn fire(ctx: &ConnectionCtx, command: &str, check: Check) -> Option<Document> {
    if !ctx.server.enable_test_commands {
        return None;
    }
    let app = ctx
        .app_name
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    let target = Target {
        command,
        app_name: app.as_deref(),
    };
    ctx.server.fail_points.fire(check, target)
}

/// Checks `failCommand` after `command` ran: an ok reply gets the fail point's
/// `writeConcernError` (and its `errorLabels`, if any).
pub(crate) fn after(ctx: &ConnectionCtx, command: &str, reply: Reply) -> Reply {
    if !ctx.server.enable_test_commands || !reply_ok(&reply) {
        return reply;
    }
    let Some(data) = fire(ctx, command, Check::After) else {
        return reply;
    };
    let mut body = match reply {
        Reply::Doc(d) => d,
        Reply::Raw(r) => match r.to_document() {
            Ok(d) => d,
            Err(_) => return Reply::Raw(r),
        },
    };
    if let Some(wce) = data.get("writeConcernError") {
        body.insert("writeConcernError", wce.clone());
    }
    if let Ok(labels) = data.get_array("errorLabels") {
        if !labels.is_empty() {
            body.insert("errorLabels", labels.clone());
        }
    }
    Reply::Doc(body)
}

fn reply_ok(reply: &Reply) -> bool {
    let ok = match reply {
        Reply::Doc(d) => d.get("ok").cloned(),
        Reply::Raw(r) => r
            .get("ok")
            .ok()
            .flatten()
            .and_then(|v| v.to_raw_bson().try_into().ok()),
    };
    matches!(ok, Some(Bson::Double(x)) if x != 0.0)
        || matches!(ok, Some(Bson::Int32(x)) if x != 0)
        || matches!(ok, Some(Bson::Boolean(true)))
}

/// The error reply for an injected code (any number: mongod accepts codes it has no name
/// for and names them `Location<N>`), with the fail point's labels or the default ones.
fn failed(data: &Document, code: i32, labels: DefaultLabels<'_>) -> Reply {
    let mut reply = doc! {
        "ok": 0.0,
        "errmsg": FAILPOINT_MESSAGE,
        "code": code,
        "codeName": code_name(code),
    };
    let labels: Vec<Bson> = match data.get_array("errorLabels") {
        Ok(given) => given.clone(),
        Err(_) => labels(code).into_iter().map(Bson::from).collect(),
    };
    if !labels.is_empty() {
        reply.insert("errorLabels", labels);
    }
    Reply::Doc(reply)
}

fn invalid(message: &str) -> Reply {
    Reply::Doc(super::error_reply(&MongoError::new(
        ErrorCode::InvalidOptions,
        message,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ServerConfig;
    use shale_db::{Database, DbOptions};
    use std::sync::Arc;

    fn ctx(test_commands: bool) -> (tempfile::TempDir, ConnectionCtx) {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Database::open(dir.path(), DbOptions::default()).expect("open");
        let mut ctx = ConnectionCtx::detached(Arc::new(db));
        ctx.server = Arc::new(ServerConfig {
            enable_test_commands: test_commands,
            ..ServerConfig::default()
        });
        (dir, ctx)
    }

    fn no_labels(_: i32) -> Vec<&'static str> {
        Vec::new()
    }

    #[test]
    fn an_injected_error_has_the_code_its_name_and_the_given_labels() {
        let (_dir, ctx) = ctx(true);
        let body = doc! {"configureFailPoint": "failCommand", "mode": {"times": 1},
        "data": {"failCommands": ["insert"], "errorCode": 10107, "errorLabels": ["X"]}};
        assert_eq!(
            configure_fail_point(&ctx, "admin", &body),
            Ok(doc! {"count": 0})
        );
        let Some(Reply::Doc(d)) = before(&ctx, "insert", &no_labels) else {
            panic!("fired");
        };
        assert_eq!(d.get_i32("code"), Ok(10107));
        assert_eq!(d.get_str("codeName"), Ok("NotWritablePrimary"));
        assert_eq!(d.get_array("errorLabels").map(Vec::len), Ok(1));
        assert!(before(&ctx, "insert", &no_labels).is_none(), "times: 1");
    }

    #[test]
    fn close_connection_marks_the_connection() {
        let (_dir, ctx) = ctx(true);
        let body = doc! {"configureFailPoint": "failCommand", "mode": "alwaysOn",
        "data": {"failCommands": ["ping"], "closeConnection": true}};
        configure_fail_point(&ctx, "admin", &body).expect("configure");
        assert!(before(&ctx, "ping", &no_labels).is_some());
        assert!(ctx.close_requested.load(Ordering::Relaxed));
    }

    #[test]
    fn without_test_commands_nothing_fires() {
        let (_dir, ctx) = ctx(false);
        let body = doc! {"configureFailPoint": "failCommand", "mode": "alwaysOn",
        "data": {"failCommands": ["ping"], "errorCode": 2}};
        ctx.server
            .fail_points
            .configure("failCommand", &body)
            .expect("configure");
        assert!(before(&ctx, "ping", &no_labels).is_none());
    }
}
