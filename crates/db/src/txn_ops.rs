//! The statements a session transaction runs: insert, update, delete, findAndModify, find,
//! count, distinct and aggregate over a caller-held `UserTxn` (`user_txn.rs`). Each takes
//! the data lock once, then the transaction's slot, and runs the same code as its
//! stand-alone twin against the transaction: reads see its snapshot and its own writes,
//! writes are made once (no conflict retry, no commit).
//!
//! Differences from the stand-alone commands, as mongod has them inside a transaction:
//! a batch stops at its first error whatever `ordered` says; a write conflict (and a write
//! set past the engine's limit) fails the command instead of being a write error. The
//! caller aborts the transaction after any failed statement; a failed statement may have
//! left some of its writes in the transaction, so it must not be committed.
//!
//! Must never take the data lock twice on one thread (a waiting DDL writer would block the
//! second read), so the reads here plan with `query_for` and never call `find`.

use crate::aggregate_ops::{too_large, MAX_RESULT_BYTES};
use crate::catalog::Collection;
use crate::exec::{Query, Snap};
use crate::namespace::Namespace;
use crate::query_ops::{distinct_spec, distinct_values, FindSpec};
use crate::user_txn::{Mode, TxnState, UserTxn};
use crate::write_ops::{DeleteOp, FindAndModifyOp, FindAndModifyResult, UpdateOp, WriteResult};
use crate::{Database, DbResult};
use bson::{Bson, Document, RawDocumentBuf};
use shale_doc::Variables;
use shale_engine::Txn;
use std::sync::Arc;

impl Database {
    /// `insert` in `t` (a missing collection is created in the transaction: `txn_ddl.rs`).
    pub fn insert_in(
        &self,
        t: &UserTxn,
        ns: &Namespace,
        docs: &[RawDocumentBuf],
    ) -> DbResult<WriteResult> {
        self.refuse_view(ns)?;
        let _guard = self.data_lock();
        t.with_open(|st| {
            let coll = self.txn_collection_or_create(st, ns)?;
            self.insert_into(&coll, docs, true, &mut Mode::User(st))
        })
    }

    /// `update` in `t`.
    pub fn update_in(
        &self,
        t: &UserTxn,
        ns: &Namespace,
        ops: &[UpdateOp],
    ) -> DbResult<WriteResult> {
        self.refuse_view(ns)?;
        let _guard = self.data_lock();
        let upsert = ops.iter().any(|o| o.upsert);
        t.with_open(|st| {
            let coll = self.write_target(st, ns, upsert)?;
            self.update_into(coll.as_ref(), ops, true, &mut Mode::User(st))
        })
    }

    /// `delete` in `t`.
    pub fn delete_in(
        &self,
        t: &UserTxn,
        ns: &Namespace,
        ops: &[DeleteOp],
    ) -> DbResult<WriteResult> {
        let _guard = self.data_lock();
        t.with_open(|st| self.delete_from(ns, ops, true, &mut Mode::User(st)))
    }

    /// `find_and_modify` in `t`.
    pub fn find_and_modify_in(
        &self,
        t: &UserTxn,
        ns: &Namespace,
        op: &FindAndModifyOp,
    ) -> DbResult<FindAndModifyResult> {
        self.refuse_view(ns)?;
        let _guard = self.data_lock();
        t.with_open(|st| {
            let Some(coll) = self.write_target(st, ns, op.upsert && !op.remove)? else {
                crate::write_ops::matcher(&op.filter, &op.vars)?;
                return Ok(FindAndModifyResult::default());
            };
            self.find_and_modify_on(&coll, op, &mut Mode::User(st))
        })
    }

    /// `find` in `t`, read whole: a client cursor cannot reach the transaction in its later
    /// batches (it sits behind the slot and the data lock), so the results are collected
    /// now, up to `MAX_RESULT_BYTES`, and served from memory.
    pub fn find_in(
        &self,
        t: &UserTxn,
        ns: &Namespace,
        spec: &FindSpec,
    ) -> DbResult<Vec<RawDocumentBuf>> {
        if let Some(docs) = self.find_on_view_in(t, ns, spec)? {
            return Ok(docs);
        }
        self.read_in(t, ns, spec, |txn, q| {
            let (mut out, mut bytes) = (Vec::new(), 0usize);
            while let Some(d) = q.next(Snap::Txn(txn))? {
                bytes += d.as_bytes().len();
                if bytes > MAX_RESULT_BYTES {
                    return Err(too_large());
                }
                out.push(d);
            }
            Ok(out)
        })
    }

    /// `distinct` in `t`.
    pub fn distinct_in(
        &self,
        t: &UserTxn,
        ns: &Namespace,
        key: &str,
        filter: &Document,
        vars: &Variables,
    ) -> DbResult<Vec<Bson>> {
        let collation = self.collation_of(ns, vars);
        let spec = distinct_spec(filter, vars);
        if let Some(docs) = self.find_on_view_in(t, ns, &spec)? {
            return distinct_values(docs.into_iter().map(Ok), key, collation.as_deref());
        }
        self.read_in(t, ns, &spec, |txn, q| {
            distinct_values(
                std::iter::from_fn(|| q.next(Snap::Txn(txn)).transpose()),
                key,
                collation.as_deref(),
            )
        })
    }

    /// `aggregate` in `t` (`$lookup` reads the transaction's snapshot too).
    pub fn aggregate_in(
        &self,
        t: &UserTxn,
        ns: &Namespace,
        stages: &[Document],
        hint: Option<Bson>,
        vars: &Variables,
    ) -> DbResult<Vec<RawDocumentBuf>> {
        let _guard = self.data_lock();
        t.with_open(|st| self.aggregate_txn(st.txn(), ns, stages, hint, vars))
    }

    /// Plans `spec` and runs `f` over the query in `t`; a missing collection reads as empty
    /// (`f` sees a query over nothing only if the collection exists, else `T::default()`).
    fn read_in<T: Default>(
        &self,
        t: &UserTxn,
        ns: &Namespace,
        spec: &FindSpec,
        f: impl FnOnce(&Txn, &mut Query) -> DbResult<T>,
    ) -> DbResult<T> {
        let _guard = self.data_lock();
        t.with_open(|st| match self.query_for(ns, spec)? {
            Some(mut q) => f(st.txn(), &mut q),
            None => Ok(T::default()),
        })
    }

    /// The collection a write in the transaction targets (the caller holds the data lock):
    /// created in the transaction if `create` and missing (`txn_ddl.rs`), else `None` if
    /// missing.
    fn write_target(
        &self,
        st: &mut TxnState,
        ns: &Namespace,
        create: bool,
    ) -> DbResult<Option<Arc<Collection>>> {
        if create {
            return self.txn_collection_or_create(st, ns).map(Some);
        }
        Ok(self.txn_collection(st, ns))
    }
}
