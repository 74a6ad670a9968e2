//! One client connection: read a message, decode it, dispatch the command, write the reply,
//! until the client hangs up or sends something we cannot frame. A malformed body gets an
//! error reply and the connection goes on; an unframeable message closes it.

use crate::commands::{dispatch, error_reply};
use crate::wire::{
    encode_op_msg, encode_op_reply, MsgHeader, OpCode, OpMsg, OpQuery, WireError, HEADER_LEN,
    MSG_FLAG_MORE_TO_COME,
};
use crate::ConnectionCtx;
use bson::Document;
use shale_doc::{ErrorCode, MongoError};
use std::sync::atomic::{AtomicI32, Ordering};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

static NEXT_REQUEST_ID: AtomicI32 = AtomicI32::new(1);

/// Serves `stream` until the client disconnects.
pub async fn serve_connection(mut stream: TcpStream, ctx: ConnectionCtx) {
    let _ = stream.set_nodelay(true);
    loop {
        let message = match read_message(&mut stream).await {
            Ok(Some(m)) => m,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(conn = ctx.connection_id, error = %e, "closing connection");
                return;
            }
        };
        let Some(reply) = handle(&ctx, &message) else {
            continue;
        };
        if let Err(e) = stream.write_all(&reply).await {
            tracing::debug!(conn = ctx.connection_id, error = %e, "write failed");
            return;
        }
    }
}

/// Reads one whole message. `Ok(None)` on a clean end of stream.
async fn read_message(
    stream: &mut TcpStream,
) -> Result<Option<Vec<u8>>, Box<dyn std::error::Error>> {
    let mut head = [0u8; HEADER_LEN];
    match stream.read_exact(&mut head).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    let header = MsgHeader::decode(&head)?;
    let mut whole = vec![0u8; header.message_length];
    whole[..HEADER_LEN].copy_from_slice(&head);
    stream.read_exact(&mut whole[HEADER_LEN..]).await?;
    Ok(Some(whole))
}

/// Decodes and runs one message; returns the encoded reply, or `None` when none is due.
fn handle(ctx: &ConnectionCtx, whole: &[u8]) -> Option<Vec<u8>> {
    let mut head = [0u8; HEADER_LEN];
    head.copy_from_slice(&whole[..HEADER_LEN]);
    let header = MsgHeader::decode(&head).ok()?;
    let reply_id = NEXT_REQUEST_ID.fetch_add(1, Ordering::Relaxed);
    match header.op_code {
        OpCode::Msg => {
            let (reply, more_to_come) = match OpMsg::decode(whole) {
                Ok(msg) => (
                    run_command(ctx, &msg.body),
                    msg.flags & MSG_FLAG_MORE_TO_COME != 0,
                ),
                Err(e) => (protocol_error(&e), false),
            };
            (!more_to_come).then(|| encode_op_msg(reply_id, header.request_id, &reply))
        }
        OpCode::Query => {
            let reply = match OpQuery::decode(whole) {
                Ok(q) => match q.command_db() {
                    Some(db) => run_command_in(ctx, db, &q.command()),
                    None => error_reply(&MongoError::new(
                        ErrorCode::ProtocolError,
                        "OP_QUERY is only supported for commands on <db>.$cmd; use OP_MSG",
                    )),
                },
                Err(e) => protocol_error(&e),
            };
            Some(encode_op_reply(reply_id, header.request_id, &reply))
        }
        other => {
            tracing::warn!(conn = ctx.connection_id, op = ?other, "unsupported opcode");
            let e = WireError::UnsupportedOpCode(other.as_i32());
            Some(encode_op_msg(
                reply_id,
                header.request_id,
                &protocol_error(&e),
            ))
        }
    }
}

fn run_command(ctx: &ConnectionCtx, body: &Document) -> Document {
    match body.get_str("$db") {
        Ok(db) => run_command_in(ctx, db, body),
        Err(_) => error_reply(&MongoError::new(
            ErrorCode::FailedToParse,
            "OP_MSG body has no string field '$db'",
        )),
    }
}

fn run_command_in(ctx: &ConnectionCtx, db: &str, body: &Document) -> Document {
    let name = body.keys().next().map(String::as_str).unwrap_or("");
    tracing::debug!(conn = ctx.connection_id, db, command = name, "command");
    dispatch(ctx, db, body)
}

fn protocol_error(e: &WireError) -> Document {
    error_reply(&MongoError::new(ErrorCode::ProtocolError, e.to_string()))
}
