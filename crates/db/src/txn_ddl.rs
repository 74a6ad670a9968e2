//! DDL inside a session transaction, as mongod 4.4+ allows it: `create` of a new
//! collection, a write that creates its collection implicitly, and `createIndexes` on a
//! collection the same transaction created (or on a missing one, which it then creates).
//!
//! Such a collection is *pending*: its trees exist, its catalog record is put in the
//! transaction's engine `Txn` (so the record's key lock makes a concurrent creator of the
//! same name conflict, first writer wins, and the record commits atomically with the
//! documents), and it is published in the catalog only after the commit. Until then only
//! the transaction sees it: its statements find it through `TxnState::created` (writes) or
//! the thread's [`PendingScope`] (reads planned by `query_for`, deletes). An abort, a kill
//! or the reaper drops its trees; trees of one a crash left unrecorded are dropped at the
//! next open (`catalog.rs`, `drop_unnamed_trees`). The oplog gets mongod's `create` and
//! `createIndexes` operations inside the transaction's `applyOps`, before its writes.
//!
//! `createIndexes` on an existing collection, or on a pending one the transaction already
//! wrote documents to, is `OperationNotSupportedInTransaction` (263), as on mongod.

use crate::catalog::{Collection, Index};
use crate::ddl::{existing, Existing};
use crate::index_spec::parse_spec;
use crate::namespace::Namespace;
use crate::user_txn::{TxnState, UserTxn};
use crate::{engine_error, CreateIndexesResult, Database, DbResult};
use bson::{doc, Document, RawDocumentBuf};
use shale_doc::{ErrorCode, MongoError};
use std::cell::RefCell;
use std::sync::Arc;

thread_local! {
    static PENDING: RefCell<Vec<Arc<Collection>>> = const { RefCell::new(Vec::new()) };
}

/// While alive, reads on this thread resolve the names of `created` to those collections
/// (the transaction's pending ones). Restores what was there before when dropped.
pub(crate) struct PendingScope {
    before: Option<Vec<Arc<Collection>>>,
}

impl PendingScope {
    pub(crate) fn enter(created: &[Arc<Collection>]) -> PendingScope {
        if created.is_empty() && PENDING.with(|p| p.borrow().is_empty()) {
            return PendingScope { before: None };
        }
        let before = PENDING.with(|p| std::mem::replace(&mut *p.borrow_mut(), created.to_vec()));
        PendingScope {
            before: Some(before),
        }
    }
}

impl Drop for PendingScope {
    fn drop(&mut self) {
        if let Some(before) = self.before.take() {
            PENDING.with(|p| *p.borrow_mut() = before);
        }
    }
}

/// The pending collection `ns` of the transaction running on this thread, if any.
pub(crate) fn pending(ns: &Namespace) -> Option<Arc<Collection>> {
    PENDING.with(|p| p.borrow().iter().find(|c| &c.ns == ns).cloned())
}

fn to_raw(d: &Document) -> DbResult<RawDocumentBuf> {
    RawDocumentBuf::from_document(d)
        .map_err(|e| MongoError::new(ErrorCode::InternalError, e.to_string()))
}

fn not_in_txn(message: String) -> MongoError {
    MongoError::new(ErrorCode::OperationNotSupportedInTransaction, message)
}

impl Database {
    /// The collection `ns` as this thread's operation sees it: the pending one of the
    /// transaction it runs in (its `PendingScope`), else the catalog's.
    pub(crate) fn visible_collection(&self, ns: &Namespace) -> Option<Arc<Collection>> {
        pending(ns).or_else(|| self.catalog.get(ns))
    }

    /// The collection `ns` as the transaction sees it: its own pending one, else the
    /// catalog's.
    pub(crate) fn txn_collection(&self, st: &TxnState, ns: &Namespace) -> Option<Arc<Collection>> {
        st.created(ns).or_else(|| self.catalog.get(ns))
    }

    /// The collection a write in the transaction targets, created pending if missing. The
    /// caller holds the data lock.
    pub(crate) fn txn_collection_or_create(
        &self,
        st: &mut TxnState,
        ns: &Namespace,
    ) -> DbResult<Arc<Collection>> {
        match self.txn_collection(st, ns) {
            Some(c) => Ok(c),
            None => self.create_pending(st, ns, Document::new()),
        }
    }

    /// `create` in session transaction `t`: a pending collection (module docs).
    pub fn create_collection_in(
        &self,
        t: &UserTxn,
        ns: &Namespace,
        options: Document,
    ) -> DbResult<()> {
        self.refuse_view(ns)?;
        if options.contains_key(crate::pre_images::OPTION) {
            // Its store is made under the DDL lock, which a transaction cannot take.
            return Err(not_in_txn(format!(
                "Cannot create collection {ns} with {} in a multi-document transaction.",
                crate::pre_images::OPTION
            )));
        }
        let _guard = self.data_lock();
        t.with_open(|st| {
            if self.txn_collection(st, ns).is_some() {
                return Err(MongoError::new(
                    ErrorCode::NamespaceExists,
                    format!("Collection {ns} already exists."),
                ));
            }
            self.create_pending(st, ns, options).map(|_| ())
        })
    }

    /// `createIndexes` in session transaction `t`: on a missing collection (created
    /// pending) or on an empty pending one; the indexes are ready at once (nothing to fill).
    pub fn create_indexes_in(
        &self,
        t: &UserTxn,
        ns: &Namespace,
        specs: &[Document],
    ) -> DbResult<CreateIndexesResult> {
        self.refuse_view(ns)?;
        let parsed = specs.iter().map(parse_spec).collect::<DbResult<Vec<_>>>()?;
        let _guard = self.data_lock();
        t.with_open(|st| {
            let created_collection = self.txn_collection(st, ns).is_none();
            let mut coll = match st.created(ns) {
                Some(c) => c,
                None if created_collection => self.create_pending(st, ns, Document::new())?,
                None => {
                    return Err(not_in_txn(format!(
                        "Cannot create new indexes on existing collection {ns} in a \
                         multi-document transaction."
                    )))
                }
            };
            if st.txn().count(&coll.docs) > 0 {
                return Err(not_in_txn(format!(
                    "Cannot create new indexes on non-empty collection {ns} in a \
                     multi-document transaction."
                )));
            }
            let before = coll.indexes.len() + 1;
            let mut added = 0;
            for (stored, def) in parsed {
                if def.name == "_id_" {
                    continue;
                }
                match existing(&coll, &stored)? {
                    Existing::Ready | Existing::Building => continue,
                    Existing::No => {}
                }
                let (id, tree) = self.catalog.create_index_tree(
                    self.engine(),
                    &coll,
                    &stored,
                    def.clustering,
                )?;
                let mut command = doc! {"createIndexes": &ns.coll};
                command.extend(stored.clone());
                let index = Arc::new(Index::new_empty(id, stored, def, tree, true));
                let mut indexes = coll.indexes.clone();
                indexes.push(index);
                coll = st.replace_created(coll.with_indexes(indexes));
                st.log_mut().command(&ns.db, coll.uuid, to_raw(&command)?);
                added += 1;
            }
            self.record_pending(st, &coll)?;
            Ok(CreateIndexesResult {
                before,
                after: before + added,
                created_collection,
                note: (added == 0).then_some("all indexes already exist"),
            })
        })
    }

    /// Makes a pending collection `ns` in `st`, its record put in the transaction.
    fn create_pending(
        &self,
        st: &mut TxnState,
        ns: &Namespace,
        options: Document,
    ) -> DbResult<Arc<Collection>> {
        crate::namespace::validate_db_name(&ns.db)?;
        self.refuse_unpublished(st, ns)?;
        let command = crate::ddl_log::create_command(&ns.coll, doc! {}, &options);
        let coll = self.catalog.prepare(self.engine(), ns, options)?;
        let coll = st.add_created(coll);
        if let Err(e) = self.record_pending(st, &coll) {
            // Not recorded: its trees go now, and the transaction fails with the conflict.
            st.forget_created(&coll);
            let _ = crate::catalog::drop_trees(self.engine(), &coll);
            return Err(e);
        }
        st.log_mut().command(&ns.db, coll.uuid, to_raw(&command)?);
        Ok(coll)
    }

    /// Refuses to create `ns` when the catalog tree, as the transaction reads it, already
    /// records it although the in-memory catalog does not: another transaction created it
    /// and has committed, but publishes it only once its commit's log fsync returns
    /// (`commit_unpublished`). Putting a second record over the first would commit without
    /// a conflict (the first is below this snapshot) and point the name at this
    /// transaction's trees, orphaning every document the first wrote there, lost at the
    /// next restart. `WriteConflict`, labelled transient: a retry finds it published.
    /// (A record committed after this snapshot fails the record's key lock instead.)
    fn refuse_unpublished(&self, st: &TxnState, ns: &Namespace) -> DbResult<()> {
        let recorded = st
            .txn()
            .get(self.catalog.tree(), ns.to_string().as_bytes())
            .map_err(engine_error)?;
        match recorded {
            None => Ok(()),
            Some(_) => Err(MongoError::new(
                ErrorCode::WriteConflict,
                format!(
                    "Collection {ns} was created by a concurrent transaction; please retry \
                     the operation"
                ),
            )),
        }
    }

    /// Puts `coll`'s catalog record in the transaction (taking the name's key lock).
    pub(crate) fn record_pending(&self, st: &mut TxnState, coll: &Collection) -> DbResult<()> {
        let bytes = coll.record_bytes()?;
        st.txn_mut()
            .put(self.catalog.tree(), coll.ns.to_string().as_bytes(), &bytes)
            .map_err(engine_error)
    }

    /// After the commit that recorded them: the pending collections join the catalog.
    pub(crate) fn publish_created(&self, created: Vec<Arc<Collection>>) {
        for c in created {
            if !self.catalog.publish(c.clone()) {
                // The record's key lock kept every other creator out; say so if not.
                tracing::error!(ns = %c.ns, "a transaction's new collection was already in the catalog");
            }
        }
    }

    /// After the abort of the transaction that made them: their trees go.
    pub(crate) fn drop_created(&self, created: Vec<Arc<Collection>>) {
        for c in created {
            if let Err(e) = crate::catalog::drop_trees(self.engine(), &c) {
                tracing::warn!(ns = %c.ns, error = %e.message, "dropping an aborted transaction's new collection");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::catalog::doc_tree_name;
    use crate::{Database, DbOptions, Namespace};
    use bson::{doc, RawDocumentBuf};

    fn ns(coll: &str) -> Namespace {
        Namespace::new("app", coll).expect("ns")
    }

    fn raw(d: bson::Document) -> RawDocumentBuf {
        RawDocumentBuf::from_document(&d).expect("raw")
    }

    #[test]
    fn a_pending_collection_is_published_at_commit_and_dropped_at_abort() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Database::open(dir.path(), DbOptions::default()).expect("open");
        let t = db.begin_user_txn();
        db.create_collection_in(&t, &ns("kept"), doc! {})
            .expect("create");
        db.insert_in(&t, &ns("kept"), &[raw(doc! {"_id": 1})])
            .expect("insert");
        assert!(
            db.catalog.get(&ns("kept")).is_none(),
            "not before the commit"
        );
        db.commit_user_txn(&t).expect("commit");
        let kept = db.catalog.get(&ns("kept")).expect("published");
        assert_eq!(kept.docs.count(), 1);

        let t = db.begin_user_txn();
        db.insert_in(&t, &ns("gone"), &[raw(doc! {"_id": 1})])
            .expect("implicit create");
        let trees_before = db.engine().list_trees().len();
        db.abort_user_txn(&t);
        assert!(db.catalog.get(&ns("gone")).is_none());
        assert_eq!(
            db.engine().list_trees().len(),
            trees_before - 2,
            "docs and size trees"
        );
        assert!(db.engine().list_trees().contains(&doc_tree_name(kept.id)));
        db.close().expect("close");
    }

    /// Two transactions create the same collection implicitly; the first has committed but
    /// not yet published its collection (its commit's log fsync has not returned) when the
    /// second asks for it. The second must conflict, whether its snapshot is older than the
    /// first's commit or newer: before the fix, a newer one put its own record over the
    /// first's and every document the first wrote was gone after a reopen, though its
    /// commit was acknowledged (test_txn_crash_loop.py's "acknowledged transactions lost").
    #[test]
    fn a_collection_committed_but_not_yet_published_is_not_created_twice() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Database::open(dir.path(), DbOptions::default()).expect("open");
        let first = db.begin_user_txn();
        let older = db.begin_user_txn();
        db.insert_in(&first, &ns("race"), &[raw(doc! {"_id": "first"})])
            .expect("implicit create");
        let committed = {
            let _guard = db.data_lock();
            db.commit_unpublished(&first).expect("engine commit")
        };
        assert!(db.catalog.get(&ns("race")).is_none(), "not yet published");
        let newer = db.begin_user_txn();
        for (name, t) in [("older", &older), ("newer", &newer)] {
            let e = db
                .insert_in(t, &ns("race"), &[raw(doc! {"_id": name})])
                .expect_err(name);
            assert_eq!(e.code.code(), 112, "{name}: {}", e.message);
            db.abort_user_txn(t);
        }
        db.publish_commit(committed);
        let after = db.begin_user_txn();
        db.insert_in(&after, &ns("race"), &[raw(doc! {"_id": "after"})])
            .expect("published: an ordinary insert");
        db.commit_user_txn(&after).expect("commit");
        db.close().expect("close");

        let db = Database::open(dir.path(), DbOptions::default()).expect("reopen");
        let race = db.catalog.get(&ns("race")).expect("recorded");
        assert_eq!(
            race.docs.count(),
            2,
            "the first transaction's document and the last's"
        );
        db.close().expect("close");
    }

    #[test]
    fn indexes_only_on_an_empty_collection_of_the_same_transaction() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Database::open(dir.path(), DbOptions::default()).expect("open");
        db.insert(&ns("old"), &[raw(doc! {"_id": 1})], true)
            .expect("insert");
        let spec = [doc! {"key": {"a": 1}, "name": "a_1"}];
        let t = db.begin_user_txn();
        let e = db
            .create_indexes_in(&t, &ns("old"), &spec)
            .expect_err("existing");
        assert_eq!(e.code.code(), 263);
        let r = db.create_indexes_in(&t, &ns("new"), &spec).expect("new");
        assert!(r.created_collection);
        assert_eq!((r.before, r.after), (1, 2));
        db.commit_user_txn(&t).expect("commit");
        let new = db.catalog.get(&ns("new")).expect("published");
        assert!(new.index("a_1").is_some_and(|i| i.is_ready()));
        db.close().expect("close");
    }
}
