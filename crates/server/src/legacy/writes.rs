//! OP_INSERT, OP_UPDATE and OP_DELETE: fire-and-forget writes, run as the `insert`,
//! `update` and `delete` commands (so `_id` rules, unique indexes and access control are the
//! OP_MSG path's) with their flags as the commands' options: ContinueOnError as
//! `ordered: false`, Upsert and MultiUpdate as `upsert`/`multi`, SingleRemove as `limit: 1`.
//! Their documents stay as sent on the way (raw, never decoded): OP_INSERT's go to the insert
//! as an OP_MSG document sequence's would, OP_UPDATE's update is read as the `update`
//! command reads one (a replacement stored as sent, operators given twice applied).
//! Nothing is answered; the outcome is kept as the connection's last error.

use super::last_error::{LastError, WriteKind};
use super::{reply_doc, split_namespace};
use crate::command::Command;
use crate::commands::dispatch_command;
use crate::wire::{
    OpDelete, OpInsert, OpUpdate, DELETE_SINGLE_REMOVE, INSERT_CONTINUE_ON_ERROR, UPDATE_MULTI,
    UPDATE_UPSERT,
};
use crate::ConnectionCtx;
use bson::{RawArrayBuf, RawDocumentBuf};

pub fn insert(ctx: &ConnectionCtx, m: OpInsert) {
    let ordered = m.flags & INSERT_CONTINUE_ON_ERROR == 0;
    let documents = m.documents;
    run(ctx, &m.full_collection_name, WriteKind::Insert, |coll| {
        let mut body = RawDocumentBuf::new();
        body.append("insert", coll);
        body.append("ordered", ordered);
        (body, Some(documents))
    });
}

pub fn update(ctx: &ConnectionCtx, m: OpUpdate) {
    let mut statement = RawDocumentBuf::new();
    statement.append("q", m.selector);
    statement.append("u", m.update);
    statement.append("upsert", m.flags & UPDATE_UPSERT != 0);
    statement.append("multi", m.flags & UPDATE_MULTI != 0);
    run(ctx, &m.full_collection_name, WriteKind::Update, |coll| {
        (one_statement("update", coll, "updates", statement), None)
    });
}

pub fn delete(ctx: &ConnectionCtx, m: OpDelete) {
    let limit = i32::from(m.flags & DELETE_SINGLE_REMOVE != 0);
    let mut statement = RawDocumentBuf::new();
    statement.append("q", m.selector);
    statement.append("limit", limit);
    run(ctx, &m.full_collection_name, WriteKind::Delete, |coll| {
        (one_statement("delete", coll, "deletes", statement), None)
    });
}

/// `{<command>: coll, <field>: [statement]}`.
fn one_statement(
    command: &str,
    coll: &str,
    field: &str,
    statement: RawDocumentBuf,
) -> RawDocumentBuf {
    let mut statements = RawArrayBuf::new();
    statements.push(statement);
    let mut body = RawDocumentBuf::new();
    body.append(command, coll);
    body.append(field, statements);
    body
}

/// Runs the write command `build` makes for the collection (its body, and an insert's
/// documents as a document sequence), and keeps its outcome.
fn run(
    ctx: &ConnectionCtx,
    full_name: &str,
    kind: WriteKind,
    build: impl FnOnce(&str) -> (RawDocumentBuf, Option<Vec<RawDocumentBuf>>),
) {
    let outcome = match split_namespace(full_name) {
        Ok((db, coll)) => {
            tracing::debug!(
                conn = ctx.connection_id,
                ns = full_name,
                ?kind,
                "legacy write"
            );
            let (body, documents) = build(coll);
            let cmd = Command::new(&body, Vec::new());
            LastError::from_reply(kind, &reply_doc(dispatch_command(ctx, db, &cmd, documents)))
        }
        Err(e) => LastError::failed(&e),
    };
    super::lock(ctx).last_error = outcome;
}
