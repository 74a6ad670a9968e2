//! How a catalog change commits: on a `--replSet` member, in one engine transaction with the
//! oplog entries that record it (the DDL's `c` entries on `<db>.$cmd`, a view's insert or
//! delete on `<db>.system.views`), so a crash keeps both or neither (O2 for DDL,
//! docs/design-oplog.md); on a standalone, for the `local` database, or for a change no
//! entry records (an index published unready, a failed build's removal), alone in one
//! engine write as before.
//!
//! Every DDL path hands its catalog change (`catalog.rs`, `CatalogChange`) to the commit
//! `Database::ddl_commit` makes from its entries; nothing else commits catalog records
//! outside a session transaction (`txn_ddl.rs`, `user_txn.rs`, whose records commit with the
//! transaction's own `applyOps` entry). Never decides what a DDL does, only how its change
//! and its entries become durable together.

use crate::catalog::CatalogChange;
use crate::oplog::entry::{Op, Operation};
use crate::oplog::log::{Shape, OPLOG_DB};
use crate::views::View;
use crate::{Database, DbResult};
use bson::{doc, Document, RawDocumentBuf};
use shale_doc::{ErrorCode, MongoError};

/// The `c` entry of a DDL command on `<db>.$cmd` (`create`, `drop`, `renameCollection`,
/// `collMod`, `createIndexes`, `dropIndexes`, `dropDatabase`), about collection `ui`.
pub(crate) fn ddl_op(db: &str, ui: Option<bson::Uuid>, command: Document) -> DbResult<Operation> {
    Ok(Operation {
        op: Op::Command {
            command: to_raw(&command)?,
        },
        ns: format!("{db}.$cmd"),
        ui,
    })
}

/// A `create` entry's command as mongod writes it: `{create: <coll>, ...extra, ...options,
/// idIndex}` (mongod's `makeCreateCollCmdObj`; `extra` is `$out`'s `temp: true`).
pub(crate) fn create_command(coll: &str, extra: Document, options: &Document) -> Document {
    let mut command = doc! {"create": coll};
    command.extend(extra);
    command.extend(options.clone());
    command.insert("idIndex", crate::index_spec::id_index_spec());
    command
}

/// A view's definition change as mongod logs it: an insert into (or a delete from)
/// `<db>.system.views` of `{_id: "<db>.<view>", viewOn, pipeline}`.
pub(crate) fn view_op(view: &View, created: bool) -> DbResult<Operation> {
    let key = to_raw(&doc! {"_id": view.ns.to_string()})?;
    let op = match created {
        true => Op::Insert {
            doc: to_raw(&doc! {
                "_id": view.ns.to_string(),
                "viewOn": &view.view_on,
                "pipeline": view.pipeline.clone(),
            })?,
            key,
        },
        false => Op::Delete { key },
    };
    Ok(Operation {
        op,
        ns: format!("{}.system.views", view.ns.db),
        ui: None,
    })
}

fn to_raw(d: &Document) -> DbResult<RawDocumentBuf> {
    RawDocumentBuf::from_document(d)
        .map_err(|e| MongoError::new(ErrorCode::InternalError, e.to_string()))
}

/// Whether `op` is about the `local` database, which the oplog does not record.
fn in_local(op: &Operation) -> bool {
    op.ns.split_once('.').map(|(db, _)| db) == Some(OPLOG_DB)
}

impl Database {
    /// The commit of a catalog change that `ops` record (none: an unrecorded change). The
    /// caller holds the DDL lock.
    pub(crate) fn ddl_commit(
        &self,
        ops: Vec<Operation>,
    ) -> impl Fn(CatalogChange<'_>) -> DbResult<()> + '_ {
        move |change| self.commit_catalog(change, &ops)
    }

    /// Commits `change` with the entries for `ops` in one engine transaction on a member,
    /// else alone; then keeps the oplog under its bound.
    fn commit_catalog(&self, change: CatalogChange<'_>, ops: &[Operation]) -> DbResult<()> {
        let recorded: Vec<Operation> = ops.iter().filter(|o| !in_local(o)).cloned().collect();
        let Some(oplog) = self.oplog() else {
            return change.write(self.engine());
        };
        if recorded.is_empty() {
            return change.write(self.engine());
        }
        let mut txn = self.engine().begin();
        if let Err(e) = change.put_into(&mut txn) {
            txn.abort();
            return Err(e);
        }
        oplog.commit(txn, &recorded, &[], Shape::Each(None), None)?;
        if oplog.over_bound() {
            self.truncate_oplog(oplog);
        }
        Ok(())
    }
}
