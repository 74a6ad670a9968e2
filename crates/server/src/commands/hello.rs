//! `hello` and its legacy spelling `isMaster`/`ismaster`: the handshake every driver sends
//! first. A standalone says it is a writable primary, with no `topologyVersion`; a
//! `--replSet` member answers with its set's fields from `crate::repl` (and waits as an
//! awaitable hello asks: drivers stream hellos once they see `topologyVersion`). `helloOk`
//! only when the client asked for it. A `compression` array negotiates wire
//! compression for the connection (mongod's rules: the client's order, unknown names
//! skipped, no field in the reply when nothing is shared, the last agreement repeated when
//! a later hello has no `compression` field). `saslSupportedMechs` and
//! `speculativeAuthenticate` are answered by `sasl.rs`.

use super::CommandResult;
use crate::wire::{negotiate, MAX_BSON_OBJECT_BYTES, MAX_MESSAGE_BYTES};
use crate::ConnectionCtx;
use bson::{doc, Bson, Document};
use shale_doc::{ErrorCode, MongoError};

/// Largest number of statements in one write command.
pub const MAX_WRITE_BATCH_SIZE: i32 = 100_000;
/// Wire version of MongoDB 7.0.
pub const MAX_WIRE_VERSION: i32 = 21;

pub fn hello(ctx: &ConnectionCtx, _db: &str, body: &Document) -> CommandResult {
    let mut reply = member_fields(ctx, body, false);
    reply.extend(common_fields(ctx, body)?);
    Ok(reply)
}

pub fn is_master(ctx: &ConnectionCtx, _db: &str, body: &Document) -> CommandResult {
    let mut reply = member_fields(ctx, body, true);
    reply.extend(common_fields(ctx, body)?);
    Ok(reply)
}

/// A standalone's `isWritablePrimary`/`ismaster: true`, or a replica-set member's fields
/// (`crate::repl`), after waiting as an awaitable hello asks.
fn member_fields(ctx: &ConnectionCtx, body: &Document, is_master: bool) -> Document {
    let repl = &ctx.server.repl;
    repl.await_hello(body);
    match repl.hello_fields(is_master) {
        Some(fields) => fields,
        None if is_master => doc! { "ismaster": true },
        None => doc! { "isWritablePrimary": true },
    }
}

/// Negotiates compression for this connection and returns the names to report, if any.
fn compression(ctx: &ConnectionCtx, body: &Document) -> Result<Vec<&'static str>, MongoError> {
    let mut agreed = ctx.compressors.lock().unwrap_or_else(|p| p.into_inner());
    match body.get("compression") {
        None => {}
        Some(Bson::Array(offered)) => {
            let mut names = Vec::with_capacity(offered.len());
            for v in offered {
                match v {
                    Bson::String(s) => names.push(s.as_str()),
                    other => {
                        return Err(MongoError::new(
                            ErrorCode::TypeMismatch,
                            format!(
                                "compression: expected a string, found {:?}",
                                other.element_type()
                            ),
                        ))
                    }
                }
            }
            *agreed = negotiate(names);
        }
        Some(other) => {
            return Err(MongoError::new(
                ErrorCode::TypeMismatch,
                format!(
                    "BSON field 'compression' is the wrong type '{:?}', expected type 'array'",
                    other.element_type()
                ),
            ))
        }
    }
    Ok(agreed.iter().map(|c| c.name()).collect())
}

/// Remembers the client's `client.application.name` (drivers send it in their handshake).
fn remember_app_name(ctx: &ConnectionCtx, body: &Document) {
    let name = body
        .get_document("client")
        .and_then(|c| c.get_document("application"))
        .and_then(|a| a.get_str("name"));
    if let Ok(name) = name {
        *ctx.app_name.lock().unwrap_or_else(|p| p.into_inner()) = Some(name.to_owned());
    }
}

fn common_fields(ctx: &ConnectionCtx, body: &Document) -> CommandResult {
    remember_app_name(ctx, body);
    let compressors = compression(ctx, body)?;
    let mut d = doc! {
        "maxBsonObjectSize": MAX_BSON_OBJECT_BYTES as i32,
        "maxMessageSizeBytes": MAX_MESSAGE_BYTES as i32,
        "maxWriteBatchSize": MAX_WRITE_BATCH_SIZE,
        "localTime": bson::DateTime::now(),
        "logicalSessionTimeoutMinutes": ctx.server.session_timeout_minutes(),
        "connectionId": shale_doc::append_number(ctx.connection_id as i64),
        "minWireVersion": 0,
        "maxWireVersion": MAX_WIRE_VERSION,
        "readOnly": false,
    };
    if !compressors.is_empty() {
        d.insert("compression", compressors);
    }
    if body.get_bool("helloOk").unwrap_or(false) {
        d.insert("helloOk", true);
    }
    d.extend(super::sasl::hello_fields(ctx, body));
    Ok(d)
}
