//! OP_GET_MORE and OP_KILL_CURSORS, run as the `getMore` and `killCursors` commands on the
//! shared cursor table. A getMore on a cursor that is not open is answered with the
//! CursorNotFound flag and no documents, as mongod 3.6 answered it; any other failure with
//! the QueryFailure flag. OP_KILL_CURSORS has no reply.

use super::{batch_reply, failure_of, failure_reply, failure_reply_parts, reply_raw};
use crate::commands::dispatch;
use crate::wire::{encode_op_reply_docs, reply_flags, OpGetMore, OpKillCursors, ReplyHead};
use crate::ConnectionCtx;
use bson::{doc, Bson};
use shale_doc::ErrorCode;
use std::collections::BTreeMap;

/// Answers an OP_GET_MORE with the cursor's next batch.
pub fn get_more(ctx: &ConnectionCtx, request_id: i32, g: &OpGetMore) -> Vec<u8> {
    let (db, coll) = match super::split_namespace(&g.full_collection_name) {
        Ok(ns) => ns,
        Err(e) => return failure_reply(request_id, &e),
    };
    let mut command = doc! { "getMore": g.cursor_id, "collection": coll };
    // numberToReturn sizes the batch; 0 lets the server choose, as for getMore.
    let batch = i64::from(g.number_to_return).abs();
    if batch > 0 {
        command.insert("batchSize", batch);
    }
    let reply = reply_raw(dispatch(ctx, db, &command));
    match failure_of(&reply) {
        None => batch_reply(ctx, request_id, g.cursor_id, &reply, "nextBatch"),
        Some((_, code)) if code == ErrorCode::CursorNotFound.code() => {
            super::lock(ctx).advance(g.cursor_id, 0, 0);
            cursor_not_found(request_id)
        }
        Some((message, code)) => failure_reply_parts(request_id, &message, code),
    }
}

fn cursor_not_found(request_id: i32) -> Vec<u8> {
    let head = ReplyHead {
        response_flags: reply_flags::CURSOR_NOT_FOUND,
        cursor_id: 0,
        starting_from: 0,
    };
    encode_op_reply_docs::<&[u8]>(super::next_reply_id(), request_id, head, &[])
}

/// Closes the named cursors, each through `killCursors` on its own namespace (so access
/// control applies); ids of cursors not open are skipped, as mongod skipped them.
pub fn kill(ctx: &ConnectionCtx, k: &OpKillCursors) {
    let mut by_ns: BTreeMap<String, Vec<Bson>> = BTreeMap::new();
    for id in &k.cursor_ids {
        if let Some(ns) = ctx.db.cursors().namespace_of(*id) {
            by_ns.entry(ns).or_default().push(Bson::Int64(*id));
        }
    }
    for (ns, ids) in by_ns {
        let Ok((db, coll)) = super::split_namespace(&ns) else {
            continue;
        };
        let reply = reply_raw(dispatch(
            ctx,
            db,
            &doc! { "killCursors": coll, "cursors": ids },
        ));
        if let Some((message, code)) = failure_of(&reply) {
            tracing::debug!(
                conn = ctx.connection_id,
                ns,
                code,
                message,
                "OP_KILL_CURSORS"
            );
        }
    }
    let mut state = super::lock(ctx);
    for id in &k.cursor_ids {
        state.advance(*id, 0, 0);
    }
}
