//! One client connection, served by its own thread (mongod's thread-per-connection model):
//! read a message, run it, write the reply, until the client hangs up or sends something we
//! cannot frame. The command runs on the thread that read it, so a request costs no hand-off
//! between threads (profiling showed the old hop through tokio's blocking pool, and back, as
//! the largest cost of a cached point query), and a command that waits for an fsync or a
//! device read blocks only its own client, so any number of clients can wait in one group
//! commit. A malformed body gets an error reply and the connection goes on; an unframeable
//! message (length outside [16, 48,000,000]) closes it. A compressed request gets a reply
//! compressed the same way, except for the handshake and authentication commands. Reading
//! a message under the stall deadline and the in-flight budget is `message_reader.rs`'s;
//! this file answers what it reads, a refused request included (`ExceededMemoryLimit`).

use crate::command::Command;
use crate::commands::{error_reply, Reply as ReplyBody};
use crate::message_reader::{read_message, ClientReader, Incoming, ReadError, ReadLimits};
use crate::outgoing::Outgoing;
use crate::transport::Transport;
use crate::wire::{
    decode_op_compressed, encode_op_compressed, encode_op_reply_raw, op_msg_reply_head,
    original_op_code, MsgHeader, OpCode, OpMsg, OpQuery, WireError, HEADER_LEN,
    MAX_BSON_INTERNAL_BYTES, MSG_FLAG_MORE_TO_COME,
};
use crate::{inflight, legacy, net_stats, ConnectionCtx};
use bson::{Document, RawBsonRef};
use shale_doc::{ErrorCode, MongoError};
use std::net::TcpStream;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicI32, Ordering};

static NEXT_REQUEST_ID: AtomicI32 = AtomicI32::new(1);

/// Commands whose replies are never compressed, nor should their requests be (the wire
/// compression spec's list: the handshake and authentication).
const UNCOMPRESSIBLE_COMMANDS: &[&str] = &[
    "hello",
    "isMaster",
    "ismaster",
    "saslStart",
    "saslContinue",
    "getnonce",
    "authenticate",
    "createUser",
    "updateUser",
    "copydbSaslStart",
    "copydbgetnonce",
    "copydb",
];

/// Serves `stream` (blocking) until the client disconnects or the server shuts the socket.
pub fn serve_connection(stream: &TcpStream, ctx: ConnectionCtx) {
    let _ = stream.set_nodelay(true);
    let tls = ctx.server.tls.as_ref();
    let transport = match Transport::establish(stream, tls, ctx.server.incomplete_message_timeout) {
        Ok(t) => t,
        Err(e) => {
            tracing::info!(conn = ctx.connection_id, peer = %ctx.peer, error = %e,
                "closing connection: not established");
            return;
        }
    };
    if transport.is_tls() {
        let subject = transport
            .peer_certificate()
            .and_then(|c| crate::auth::x509::subject_name(&c));
        tracing::info!(
            conn = ctx.connection_id,
            client_subject = subject.as_deref().unwrap_or(""),
            "TLS handshake done"
        );
        crate::auth::gate::lock(&ctx).client_subject = subject;
    }
    net_stats::connection_opened();
    // Reads go through a buffer, so a small request's header and body take one `recv`.
    let mut reader = ClientReader::new(&transport);
    let limits = ReadLimits {
        stall: ctx.server.incomplete_message_timeout,
        budget_wait: Some(ctx.server.inflight_wait()),
    };
    let mut writer = &transport;
    loop {
        let (reply, _permit) = match read_message(&mut reader, limits) {
            Ok(Some(Incoming::Message {
                header,
                whole,
                mut permit,
            })) => {
                net_stats::request(whole.len());
                let active = net_stats::active();
                let reply = run_guarded(&ctx, header, &whole);
                drop(active);
                drop(whole);
                if let Some(r) = &reply {
                    // The reply is held until it is written: others wait for it too.
                    permit.add(r.len());
                }
                (reply, Some(permit))
            }
            Ok(Some(Incoming::Refused {
                header,
                head,
                bytes,
                no_room,
            })) => {
                net_stats::request(header.message_length);
                tracing::warn!(conn = ctx.connection_id, peer = %ctx.peer, bytes,
                    waited_ms = no_room.waited.as_millis() as u64, in_use = no_room.in_use,
                    "request refused: no room in the in-flight memory budget");
                (refusal_reply(header, &head, bytes, no_room), None)
            }
            Ok(None) => break,
            Err(ReadError::Stalled(t)) => {
                tracing::warn!(conn = ctx.connection_id, peer = %ctx.peer, seconds = t.as_secs_f64(),
                    "closing connection: the rest of a message did not arrive in time");
                break;
            }
            Err(e) if e.is_disconnect() => {
                tracing::debug!(conn = ctx.connection_id, peer = %ctx.peer, error = %e,
                    "client disconnected");
                break;
            }
            Err(e @ ReadError::Io(_)) => {
                tracing::warn!(conn = ctx.connection_id, peer = %ctx.peer, error = %e,
                    "closing connection: reading from the socket failed");
                break;
            }
            Err(e) => {
                tracing::warn!(conn = ctx.connection_id, peer = %ctx.peer, error = %e,
                    "closing connection: message cannot be framed");
                break;
            }
        };
        if ctx.close_requested.load(Ordering::Relaxed) {
            tracing::info!(
                conn = ctx.connection_id,
                "closing connection: failCommand closeConnection"
            );
            break;
        }
        let Some(reply) = reply else {
            continue;
        };
        net_stats::reply(reply.len());
        if let Err(e) = reply.write_to(&mut writer) {
            tracing::debug!(conn = ctx.connection_id, error = %e, "write failed");
            break;
        }
    }
    // Closing the connection aborts its TokuMX-style transaction (sessions outlive it).
    crate::commands::connection_txn::end_connection(&ctx);
    net_stats::connection_closed();
    tracing::info!(conn = ctx.connection_id, peer = %ctx.peer, "connection ended");
}

/// The answer to a request refused for the in-flight budget, in its opcode's reply format
/// (for OP_COMPRESSED, the opcode it wraps; uncompressed), or `None` for the opcodes that
/// get no reply (an OP_MSG with `moreToCome`, legacy writes and OP_KILL_CURSORS).
fn refusal_reply(
    header: MsgHeader,
    head: &[u8],
    bytes: usize,
    no_room: inflight::NoRoom,
) -> Option<Outgoing> {
    let e = MongoError::new(
        ErrorCode::ExceededMemoryLimit,
        format!(
            "request of {bytes} bytes refused: requests in flight held {} of the server's \
             {}-byte budget (--maxInflightRequestMiB) for {} ms; retry later",
            no_room.in_use,
            inflight::limit(),
            no_room.waited.as_millis()
        ),
    );
    let op = match header.op_code {
        OpCode::Compressed => original_op_code(head).unwrap_or(OpCode::Msg),
        op => op,
    };
    let flags = head
        .get(HEADER_LEN..HEADER_LEN + 4)
        .and_then(|f| f.try_into().ok())
        .map_or(0, u32::from_le_bytes);
    match op {
        OpCode::Query | OpCode::GetMore => Some(Outgoing::whole(legacy::failure_reply(
            header.request_id,
            &e,
        ))),
        OpCode::KillCursors | OpCode::Insert | OpCode::Update | OpCode::Delete => None,
        OpCode::Msg if header.op_code == OpCode::Msg && flags & MSG_FLAG_MORE_TO_COME != 0 => None,
        _ => Some(encode_reply(
            OpCode::Msg,
            header.request_id,
            error_reply(&e).into(),
        )),
    }
}

/// Runs one message. A handler that panics costs its request an `InternalError` reply, not
/// the connection or the server.
fn run_guarded(ctx: &ConnectionCtx, header: MsgHeader, message: &[u8]) -> Option<Outgoing> {
    match catch_unwind(AssertUnwindSafe(|| handle(ctx, header, message))) {
        Ok(reply) => reply,
        Err(_) => {
            tracing::error!(conn = ctx.connection_id, "command failed with a panic");
            let reply = error_reply(&MongoError::new(
                ErrorCode::InternalError,
                "the command failed with an internal error; see the server log",
            ));
            match header.op_code {
                OpCode::Query | OpCode::GetMore => {
                    let e = MongoError::new(ErrorCode::InternalError, "internal error");
                    Some(Outgoing::whole(legacy::failure_reply(
                        header.request_id,
                        &e,
                    )))
                }
                OpCode::KillCursors | OpCode::Insert | OpCode::Update | OpCode::Delete => None,
                _ => Some(encode_reply(OpCode::Msg, header.request_id, reply.into())),
            }
        }
    }
}

/// Runs one whole message (header included) as a connection would, compression and all, and
/// returns the encoded reply (`None` when none is due). `Err` when the message cannot be
/// framed: a connection would close. For fuzzing and embedding; no network involved.
pub fn handle_message(ctx: &ConnectionCtx, whole: &[u8]) -> Result<Option<Vec<u8>>, WireError> {
    let head: &[u8; HEADER_LEN] = whole
        .get(..HEADER_LEN)
        .and_then(|h| h.try_into().ok())
        .ok_or(WireError::Truncated("message header"))?;
    let header = MsgHeader::decode(head)?;
    if header.message_length != whole.len() {
        return Err(WireError::Invalid(format!(
            "message length {} but {} bytes given",
            header.message_length,
            whole.len()
        )));
    }
    Ok(handle(ctx, header, whole).map(Outgoing::into_vec))
}

/// Decodes and runs one message; returns the encoded reply, or `None` when none is due.
#[allow(
    clippy::expect_used,
    reason = "decode_op_compressed rebuilds a whole, in-bounds header at the message's start"
)]
fn handle(ctx: &ConnectionCtx, header: MsgHeader, whole: &[u8]) -> Option<Outgoing> {
    if header.op_code != OpCode::Compressed {
        return handle_plain(ctx, header, whole).map(|r| r.bytes);
    }
    match decode_op_compressed(whole) {
        Ok(d) => {
            net_stats::decompressed(d.compressor, whole.len(), d.message.len());
            let inner_head: &[u8; HEADER_LEN] = d.message[..HEADER_LEN]
                .try_into()
                .expect("a decompressed message starts with a rebuilt header");
            let inner = MsgHeader::decode(inner_head).expect("the rebuilt header is in bounds");
            let reply = handle_plain(ctx, inner, &d.message)?;
            Some(if reply.compressible {
                let plain = reply.bytes.into_vec();
                let packed = encode_op_compressed(&plain, d.compressor);
                net_stats::compressed(d.compressor, plain.len(), packed.len());
                Outgoing::whole(packed)
            } else {
                reply.bytes
            })
        }
        Err(e) => {
            tracing::warn!(conn = ctx.connection_id, error = %e, "bad OP_COMPRESSED");
            // Answer in the reply format of the opcode it claims to wrap, uncompressed.
            match original_op_code(whole) {
                Some(OpCode::Query | OpCode::GetMore) => Some(Outgoing::whole(
                    legacy::failure_reply(header.request_id, &legacy::wire_error(&e)),
                )),
                _ => Some(encode_reply(
                    OpCode::Msg,
                    header.request_id,
                    wire_error_reply(&e).into(),
                )),
            }
        }
    }
}

/// An encoded reply and whether it may go back compressed.
struct Reply {
    bytes: Outgoing,
    compressible: bool,
}

/// Decodes and runs an OP_MSG or OP_QUERY (anything else gets an error reply).
fn handle_plain(ctx: &ConnectionCtx, header: MsgHeader, whole: &[u8]) -> Option<Reply> {
    let (reply, command, reply_op) = match header.op_code {
        OpCode::Msg => match OpMsg::decode(whole) {
            Ok(msg) => {
                let more_to_come = msg.flags & MSG_FLAG_MORE_TO_COME != 0;
                let command = crate::command::first_key(msg.body).map(str::to_owned);
                let reply = run_msg(ctx, msg);
                if more_to_come {
                    return None;
                }
                (reply, command, OpCode::Msg)
            }
            Err(e) => (wire_error_reply(&e).into(), None, OpCode::Msg),
        },
        OpCode::Query => match OpQuery::decode(whole) {
            Ok(q) => {
                let Some(db) = q.command_db() else {
                    return Some(legacy_reply(legacy::run_query(ctx, header.request_id, &q)));
                };
                // The command's bytes as sent, as an OP_MSG body reaches dispatch: every
                // handler reads a repeated name the same way whichever opcode carried it.
                let cmd = Command::new(q.command(), Vec::new());
                let name = crate::command::first_key(q.command()).map(str::to_owned);
                tracing::debug!(conn = ctx.connection_id, db, command = name, "command");
                let reply = crate::commands::dispatch_command(ctx, db, &cmd, None);
                (reply, name, OpCode::Query)
            }
            Err(e) => {
                let failure = legacy::failure_reply(header.request_id, &legacy::wire_error(&e));
                return Some(legacy_reply(failure));
            }
        },
        OpCode::GetMore
        | OpCode::KillCursors
        | OpCode::Insert
        | OpCode::Update
        | OpCode::Delete => return legacy::run_other(ctx, header, whole).map(legacy_reply),
        other => {
            tracing::warn!(conn = ctx.connection_id, op = ?other, "unsupported opcode");
            let e = WireError::UnsupportedOpCode(other.as_i32());
            (wire_error_reply(&e).into(), None, OpCode::Msg)
        }
    };
    let compressible = command.is_none_or(|c| !UNCOMPRESSIBLE_COMMANDS.contains(&c.as_str()));
    Some(Reply {
        bytes: encode_reply(reply_op, header.request_id, reply),
        compressible,
    })
}

/// A legacy opcode's encoded reply (always compressible: no handshake goes this way).
fn legacy_reply(bytes: Vec<u8>) -> Reply {
    Reply {
        bytes: Outgoing::whole(bytes),
        compressible: true,
    }
}

/// Runs an OP_MSG on its raw body: an `insert` whose documents came as a document
/// sequence takes them as they came; any other command reads its sequences through
/// `Command`.
fn run_msg(ctx: &ConnectionCtx, msg: OpMsg<'_>) -> ReplyBody {
    let Some(RawBsonRef::String(db)) = crate::command::get(msg.body, "$db") else {
        return ReplyBody::Doc(error_reply(&MongoError::new(
            ErrorCode::FailedToParse,
            "OP_MSG body has no string field '$db'",
        )));
    };
    let raw_insert = crate::command::first_key(msg.body) == Some("insert")
        && matches!(msg.sequences.as_slice(), [(id, _)] if id == "documents");
    let mut cmd = Command::new(msg.body, msg.sequences);
    let docs = if raw_insert {
        cmd.take_sequence("documents")
    } else {
        None
    };
    tracing::debug!(
        conn = ctx.connection_id,
        db,
        command = cmd.name(),
        docs = docs.as_ref().map(Vec::len),
        "command"
    );
    crate::commands::dispatch_command(ctx, db, &cmd, docs)
}

/// The error reply for a message that could not be decoded, with mongod's code for it.
fn wire_error_reply(e: &WireError) -> Document {
    error_reply(&legacy::wire_error(e))
}

/// Encodes `reply` as the reply to a request of opcode `request_op` (OP_REPLY for OP_QUERY,
/// OP_MSG otherwise). A reply document over the BSON limit becomes a `BSONObjectTooLarge`
/// error instead, so an oversized result never leaves as an unreadable message.
fn encode_reply(request_op: OpCode, response_to: i32, reply: ReplyBody) -> Outgoing {
    let reply_id = NEXT_REQUEST_ID.fetch_add(1, Ordering::Relaxed);
    let mut body = reply.into_bytes();
    if body.len() > MAX_BSON_INTERNAL_BYTES {
        tracing::warn!(
            bytes = body.len(),
            "reply too large; sending an error instead"
        );
        let e = MongoError::new(
            ErrorCode::BSONObjectTooLarge,
            format!(
                "reply of {} bytes exceeds the {MAX_BSON_INTERNAL_BYTES}-byte BSON limit",
                body.len()
            ),
        );
        body = ReplyBody::Doc(error_reply(&e)).into_bytes();
    }
    match request_op {
        OpCode::Query => Outgoing::whole(encode_op_reply_raw(reply_id, response_to, &body)),
        _ => Outgoing::split(op_msg_reply_head(reply_id, response_to, body.len()), body),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{encode_op_msg, Compressor, MsgHeader};
    use bson::doc;
    use shale_db::{Database, DbOptions};
    use std::sync::Arc;

    fn ctx() -> (tempfile::TempDir, ConnectionCtx) {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Database::open(dir.path(), DbOptions::default()).expect("open");
        (dir, ConnectionCtx::detached(Arc::new(db)))
    }

    fn run(ctx: &ConnectionCtx, message: &[u8]) -> Option<Vec<u8>> {
        let head: [u8; HEADER_LEN] = message[..HEADER_LEN].try_into().expect("header");
        handle(ctx, MsgHeader::decode(&head).expect("header"), message).map(Outgoing::into_vec)
    }

    /// The reply's opcode, compressor (if compressed) and body document.
    fn open_reply(reply: &[u8]) -> (OpCode, Option<Compressor>, Document) {
        let head: [u8; HEADER_LEN] = reply[..HEADER_LEN].try_into().expect("header");
        let header = MsgHeader::decode(&head).expect("reply header");
        assert_eq!(header.message_length, reply.len());
        let (compressor, plain) = match header.op_code {
            OpCode::Compressed => {
                let d = decode_op_compressed(reply).expect("decompress reply");
                (Some(d.compressor), d.message)
            }
            _ => (None, reply.to_vec()),
        };
        let op = OpCode::from_i32(i32::from_le_bytes(plain[12..16].try_into().expect("4")));
        let body = match op {
            OpCode::Msg => {
                let msg = OpMsg::decode(&plain).expect("reply OP_MSG");
                Document::try_from(msg.body).expect("reply body decodes")
            }
            OpCode::Reply => Document::from_reader(&plain[HEADER_LEN + 20..]).expect("doc"),
            other => panic!("unexpected reply opcode {other:?}"),
        };
        (op, compressor, body)
    }

    fn msg(body: Document) -> Vec<u8> {
        encode_op_msg(5, 0, &body)
    }

    #[test]
    fn handle_message_frames_then_answers() {
        let (_dir, ctx) = ctx();
        let ping = msg(doc! {"ping": 1, "$db": "admin"});
        let (_, _, body) =
            open_reply(&handle_message(&ctx, &ping).expect("framed").expect("reply"));
        assert_eq!(body.get_f64("ok"), Ok(1.0));
        assert!(handle_message(&ctx, &ping[..10]).is_err());
        assert!(handle_message(&ctx, &ping[..ping.len() - 1]).is_err());
        // A framed message with a garbage body gets an error reply, not a panic.
        let mut junk = ping.clone();
        for b in &mut junk[HEADER_LEN + 5..] {
            *b = 0xAB;
        }
        let (_, _, body) =
            open_reply(&handle_message(&ctx, &junk).expect("framed").expect("reply"));
        assert_eq!(body.get_f64("ok"), Ok(0.0));
    }

    #[test]
    fn a_compressed_request_gets_a_reply_compressed_the_same_way() {
        let (_dir, ctx) = ctx();
        for c in [
            Compressor::Snappy,
            Compressor::Zlib,
            Compressor::Zstd,
            Compressor::Noop,
        ] {
            let request = encode_op_compressed(&msg(doc! {"ping": 1, "$db": "admin"}), c);
            let (op, used, body) = open_reply(&run(&ctx, &request).expect("reply"));
            assert_eq!((op, used), (OpCode::Msg, Some(c)));
            assert_eq!(body.get_f64("ok"), Ok(1.0));
        }
    }

    #[test]
    fn handshake_replies_are_never_compressed_and_negotiate() {
        let (_dir, ctx) = ctx();
        let hello = doc! {"hello": 1, "compression": ["zlib", "lz4", "zstd"], "$db": "admin"};
        let request = encode_op_compressed(&msg(hello), Compressor::Zstd);
        let (_, used, body) = open_reply(&run(&ctx, &request).expect("reply"));
        assert_eq!(used, None);
        let agreed: Vec<&str> = body
            .get_array("compression")
            .expect("compression")
            .iter()
            .filter_map(|b| b.as_str())
            .collect();
        assert_eq!(agreed, ["zlib", "zstd"]);
        // A later hello without the field repeats the agreement; an empty offer clears it.
        let (_, _, again) = open_reply(&run(&ctx, &msg(doc! {"hello": 1, "$db": "a"})).expect("r"));
        assert_eq!(again.get_array("compression").map(Vec::len), Ok(2));
        let clear = doc! {"isMaster": 1, "compression": [], "$db": "a"};
        let (_, _, cleared) = open_reply(&run(&ctx, &msg(clear)).expect("reply"));
        assert!(!cleared.contains_key("compression"));
    }

    #[test]
    fn a_bad_compressed_message_gets_an_error_and_the_connection_goes_on() {
        let (_dir, ctx) = ctx();
        let mut request =
            encode_op_compressed(&msg(doc! {"ping": 1, "$db": "a"}), Compressor::Zlib);
        let n = request.len();
        request[n - 3] ^= 0xff; // corrupt the stream (its checksum)
        let (op, used, body) = open_reply(&run(&ctx, &request).expect("reply"));
        assert_eq!((op, used), (OpCode::Msg, None));
        assert_eq!(body.get_i32("code"), Ok(ErrorCode::ProtocolError.code()));
        let (_, _, ok) = open_reply(&run(&ctx, &msg(doc! {"ping": 1, "$db": "a"})).expect("r"));
        assert_eq!(ok.get_f64("ok"), Ok(1.0));
    }

    #[test]
    fn decode_errors_carry_mongods_codes() {
        let (_dir, ctx) = ctx();
        // A body over 16 MiB + 16 KiB: BSONObjectTooLarge.
        let big = doc! {"ping": 1, "$db": "a", "p": "x".repeat(MAX_BSON_INTERNAL_BYTES)};
        let (_, _, body) = open_reply(&run(&ctx, &msg(big)).expect("reply"));
        assert_eq!(
            body.get_i32("code"),
            Ok(ErrorCode::BSONObjectTooLarge.code())
        );
        // A well-framed body with an unknown element type: InvalidBSON.
        let mut bad = msg(doc! {"ping": 1, "$db": "a"});
        bad[HEADER_LEN + 5 + 4] = 0x7f; // the first element's type byte
        let (_, _, body) = open_reply(&run(&ctx, &bad).expect("reply"));
        assert_eq!(body.get_i32("code"), Ok(ErrorCode::InvalidBSON.code()));
        // Nested past mongod's 200 levels: Overflow, and the connection goes on.
        let mut deep = doc! {"a": 1};
        for _ in 0..200 {
            deep = doc! {"a": deep};
        }
        let (_, _, body) = open_reply(&run(&ctx, &msg(doc! {"ping": 1, "x": deep})).expect("r"));
        assert_eq!(body.get_i32("code"), Ok(ErrorCode::Overflow.code()));
        // An opcode we do not serve: ProtocolError in an OP_MSG.
        let mut other = msg(doc! {"ping": 1});
        other[12..16].copy_from_slice(&2010i32.to_le_bytes()); // OP_COMMAND
        let (op, _, body) = open_reply(&run(&ctx, &other).expect("reply"));
        assert_eq!(op, OpCode::Msg);
        assert_eq!(body.get_i32("code"), Ok(ErrorCode::ProtocolError.code()));
    }

    #[test]
    fn more_to_come_gets_no_reply() {
        let (_dir, ctx) = ctx();
        let mut m = msg(doc! {"ping": 1, "$db": "a"});
        m[HEADER_LEN..HEADER_LEN + 4].copy_from_slice(&MSG_FLAG_MORE_TO_COME.to_le_bytes());
        assert!(run(&ctx, &m).is_none());
    }

    #[test]
    fn a_compressed_op_query_gets_a_compressed_op_reply() {
        let (_dir, ctx) = ctx();
        let mut payload = 0u32.to_le_bytes().to_vec();
        payload.extend_from_slice(b"admin.$cmd\0");
        payload.extend_from_slice(&0i32.to_le_bytes());
        payload.extend_from_slice(&(-1i32).to_le_bytes());
        doc! {"ping": 1}.to_writer(&mut payload).expect("encode");
        let mut m = Vec::new();
        MsgHeader {
            message_length: HEADER_LEN + payload.len(),
            request_id: 3,
            response_to: 0,
            op_code: OpCode::Query,
        }
        .encode(&mut m);
        m.extend_from_slice(&payload);
        let request = encode_op_compressed(&m, Compressor::Snappy);
        let (op, used, body) = open_reply(&run(&ctx, &request).expect("reply"));
        assert_eq!((op, used), (OpCode::Reply, Some(Compressor::Snappy)));
        assert_eq!(body.get_f64("ok"), Ok(1.0));
    }
}
