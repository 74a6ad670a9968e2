//! Command dispatch: finds the handler for a command document's first key and turns its
//! result into a reply document (`ok: 1` or `ok: 0` with `errmsg`, `code`, `codeName`).
//! One file per command family; handlers never see the wire format.

mod diagnostics;
mod hello;
pub mod server_status;

use crate::ConnectionCtx;
use bson::{doc, Document};
use shale_doc::{ErrorCode, MongoError};

/// A command's outcome: the reply fields without `ok`, or an error.
pub type CommandResult = Result<Document, MongoError>;

type Handler = fn(&ConnectionCtx, &str, &Document) -> CommandResult;

/// Every command the server knows, by the names clients send (aliases included).
const COMMANDS: &[(&str, Handler)] = &[
    ("hello", hello::hello),
    ("isMaster", hello::is_master),
    ("ismaster", hello::is_master),
    ("ping", diagnostics::ping),
    ("buildInfo", diagnostics::build_info),
    ("buildinfo", diagnostics::build_info),
    ("serverStatus", server_status::server_status),
];

/// Runs the command in `body` against database `db` and returns the reply document.
pub fn dispatch(ctx: &ConnectionCtx, db: &str, body: &Document) -> Document {
    let Some(name) = body.keys().next() else {
        return error_reply(&MongoError::new(
            ErrorCode::FailedToParse,
            "empty command document",
        ));
    };
    let result = match COMMANDS.iter().find(|(n, _)| *n == name) {
        Some((_, handler)) => handler(ctx, db, body),
        None => Err(MongoError::new(
            ErrorCode::CommandNotFound,
            format!("no such command: '{name}'"),
        )),
    };
    match result {
        Ok(mut reply) => {
            reply.insert("ok", 1.0);
            reply
        }
        Err(e) => error_reply(&e),
    }
}

/// The reply document for a failed command.
pub fn error_reply(e: &MongoError) -> Document {
    doc! {
        "ok": 0.0,
        "errmsg": e.message.clone(),
        "code": e.code.code(),
        "codeName": e.code.name(),
    }
}

/// Names of all commands, for `listCommands` and tests.
pub fn command_names() -> impl Iterator<Item = &'static str> {
    COMMANDS.iter().map(|(n, _)| *n)
}
