//! `hello` and its legacy spelling `isMaster`/`ismaster`: the handshake every driver sends
//! first. We are a standalone server: no `topologyVersion` until streaming hello exists, and
//! `helloOk` only when the client asked for it.

use super::CommandResult;
use crate::wire::{MAX_BSON_OBJECT_BYTES, MAX_MESSAGE_BYTES};
use crate::ConnectionCtx;
use bson::{doc, Document};

/// Largest number of statements in one write command.
pub const MAX_WRITE_BATCH_SIZE: i32 = 100_000;
/// Wire version of MongoDB 7.0.
pub const MAX_WIRE_VERSION: i32 = 21;

pub fn hello(ctx: &ConnectionCtx, _db: &str, body: &Document) -> CommandResult {
    let mut reply = doc! { "isWritablePrimary": true };
    reply.extend(common_fields(ctx, body));
    Ok(reply)
}

pub fn is_master(ctx: &ConnectionCtx, _db: &str, body: &Document) -> CommandResult {
    let mut reply = doc! { "ismaster": true };
    reply.extend(common_fields(ctx, body));
    Ok(reply)
}

fn common_fields(ctx: &ConnectionCtx, body: &Document) -> Document {
    let mut d = doc! {
        "maxBsonObjectSize": MAX_BSON_OBJECT_BYTES as i32,
        "maxMessageSizeBytes": MAX_MESSAGE_BYTES as i32,
        "maxWriteBatchSize": MAX_WRITE_BATCH_SIZE,
        "localTime": bson::DateTime::now(),
        "logicalSessionTimeoutMinutes": 30,
        "connectionId": ctx.connection_id as i64,
        "minWireVersion": 0,
        "maxWireVersion": MAX_WIRE_VERSION,
        "readOnly": false,
    };
    if body.get_bool("helloOk").unwrap_or(false) {
        d.insert("helloOk", true);
    }
    d
}
