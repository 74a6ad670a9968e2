//! OP_INSERT, OP_UPDATE and OP_DELETE: fire-and-forget writes, run as the `insert`,
//! `update` and `delete` commands (so `_id` rules, unique indexes and access control are the
//! OP_MSG path's) with their flags as the commands' options: ContinueOnError as
//! `ordered: false`, Upsert and MultiUpdate as `upsert`/`multi`, SingleRemove as `limit: 1`.
//! Nothing is answered; the outcome is kept as the connection's last error.

use super::last_error::{LastError, WriteKind};
use super::{reply_doc, split_namespace};
use crate::commands::dispatch;
use crate::wire::{
    OpDelete, OpInsert, OpUpdate, DELETE_SINGLE_REMOVE, INSERT_CONTINUE_ON_ERROR, UPDATE_MULTI,
    UPDATE_UPSERT,
};
use crate::ConnectionCtx;
use bson::{doc, Bson, Document};

pub fn insert(ctx: &ConnectionCtx, m: &OpInsert) {
    let documents: Vec<Bson> = m.documents.iter().cloned().map(Bson::Document).collect();
    let ordered = m.flags & INSERT_CONTINUE_ON_ERROR == 0;
    run(ctx, &m.full_collection_name, WriteKind::Insert, |coll| {
        doc! { "insert": coll, "documents": documents, "ordered": ordered }
    });
}

pub fn update(ctx: &ConnectionCtx, m: &OpUpdate) {
    let statement = doc! {
        "q": m.selector.clone(),
        "u": m.update.clone(),
        "upsert": m.flags & UPDATE_UPSERT != 0,
        "multi": m.flags & UPDATE_MULTI != 0,
    };
    run(ctx, &m.full_collection_name, WriteKind::Update, |coll| {
        doc! { "update": coll, "updates": [statement] }
    });
}

pub fn delete(ctx: &ConnectionCtx, m: &OpDelete) {
    let limit = i32::from(m.flags & DELETE_SINGLE_REMOVE != 0);
    let statement = doc! { "q": m.selector.clone(), "limit": limit };
    run(ctx, &m.full_collection_name, WriteKind::Delete, |coll| {
        doc! { "delete": coll, "deletes": [statement] }
    });
}

/// Runs the write command `build` makes for the collection, and keeps its outcome.
fn run(
    ctx: &ConnectionCtx,
    full_name: &str,
    kind: WriteKind,
    build: impl FnOnce(&str) -> Document,
) {
    let outcome = match split_namespace(full_name) {
        Ok((db, coll)) => {
            tracing::debug!(
                conn = ctx.connection_id,
                ns = full_name,
                ?kind,
                "legacy write"
            );
            LastError::from_reply(kind, &reply_doc(dispatch(ctx, db, &build(coll))))
        }
        Err(e) => LastError::failed(&e),
    };
    super::lock(ctx).last_error = outcome;
}
