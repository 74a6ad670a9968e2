//! Session transactions: a `UserTxn` is one engine `Txn` that lives across commands (a
//! client session's multi-document transaction), with how it begins, commits and aborts, how
//! DDL ends the live ones before changing trees under them, and how old ones are reaped.
//! The statements that run inside one are in `txn_ops.rs`.
//!
//! Locking (docs/plan-wire-transactions.md §0.3, §1.4):
//! - A transaction's slot is locked only while the caller holds the data lock (shared) or
//!   the DDL lock (exclusive), so the engine transaction never writes, commits or aborts
//!   while DDL drops or replaces a tree (`Env::drop_tree` does not look for live
//!   transactions). The order is always data lock → slot, or DDL lock → slot.
//! - The registry of open transactions is never held while a slot is locked by its holder
//!   of the registry; ending a transaction locks the registry after its slot.
//! - Nothing here holds the data lock across commands; the transaction's snapshot does the
//!   work a held lock would, and DDL that could break it aborts it instead.
//! - An open transaction is held by the registry until it ends, so a handle the caller
//!   forgets is still aborted under the lock, by the reaper or at close, never by a drop.

use crate::catalog::Collection;
use crate::doc_write;
use crate::oplog::entry::{lsid_document, OpTime, SessionInfo};
use crate::oplog::log::Shape;
use crate::oplog::pending::Pending;
use crate::{Database, DbResult};
use shale_doc::{ErrorCode, MongoError};
use shale_engine::Txn;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// A multi-statement transaction that lives across commands. Cloning gives another handle
/// on the same transaction; the server keeps one in its session table.
#[derive(Clone)]
pub struct UserTxn(Arc<Shared>);

struct Shared {
    id: u64,
    started: Instant,
    /// LOCK ORDER: only locked under the data lock (shared) or the DDL lock.
    slot: Mutex<Slot>,
}

enum Slot {
    Open(Box<TxnState>),
    Ended(TxnEnd),
}

/// How a session transaction ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnEnd {
    /// Committed by its session (commitTransaction).
    Committed,
    /// Aborted by its session (abortTransaction, a failed statement, a failed commit).
    Aborted,
    /// Aborted by the server: DDL, the lifetime limit, shutdown. Says why.
    Killed(&'static str),
}

/// An open session transaction: the engine transaction and the collections it wrote.
pub(crate) struct TxnState {
    txn: Txn,
    /// Collections written, deduplicated by id, for `persist_multikey` at commit.
    written: Vec<Arc<Collection>>,
    /// Its document changes, for the oplog at commit (off on a standalone).
    log: Pending,
    /// What its entries become: one `applyOps` (a transaction) or one entry per change
    /// (a retryable write's statement), and the session fields they carry.
    kind: Kind,
    /// Collections it created, published at commit, dropped at abort (`txn_ddl.rs`).
    created: Vec<Arc<Collection>>,
}

/// How a session transaction's changes are logged (`oplog/log.rs`, O3).
#[derive(Debug, Clone)]
pub(crate) enum Kind {
    /// A multi-document transaction: one `applyOps` entry, with its session if it has one.
    Transaction(Option<SessionInfo>),
    /// A retryable write's statement (session `lsid.id`): an entry per change, with
    /// `stmtId` and `prevOpTime`.
    Statement([u8; 16], SessionInfo),
}

impl TxnState {
    /// The engine transaction and the oplog buffer, borrowed together.
    pub(crate) fn parts(&mut self) -> (&mut Txn, &mut Pending) {
        (&mut self.txn, &mut self.log)
    }

    /// Makes this transaction a retryable write's statement (its entries carry `session`).
    pub(crate) fn log_as_statement(&mut self, lsid: [u8; 16], session: SessionInfo) {
        self.kind = Kind::Statement(lsid, session);
    }

    pub(crate) fn txn_mut(&mut self) -> &mut Txn {
        &mut self.txn
    }

    pub(crate) fn txn(&self) -> &Txn {
        &self.txn
    }

    pub(crate) fn log_mut(&mut self) -> &mut Pending {
        &mut self.log
    }

    /// Its pending collection `ns` (`txn_ddl.rs`).
    pub(crate) fn created(&self, ns: &crate::namespace::Namespace) -> Option<Arc<Collection>> {
        self.created.iter().find(|c| &c.ns == ns).cloned()
    }

    /// Adds a pending collection.
    pub(crate) fn add_created(&mut self, coll: Collection) -> Arc<Collection> {
        let coll = Arc::new(coll);
        self.created.push(coll.clone());
        coll
    }

    /// Replaces the pending collection of `coll`'s name (new indexes).
    pub(crate) fn replace_created(&mut self, coll: Collection) -> Arc<Collection> {
        let coll = Arc::new(coll);
        self.created.retain(|c| c.ns != coll.ns);
        self.created.push(coll.clone());
        coll
    }

    /// Forgets a pending collection that was never recorded.
    pub(crate) fn forget_created(&mut self, coll: &Collection) {
        self.created.retain(|c| c.id != coll.id);
    }

    /// Remembers that the transaction writes to `coll`.
    pub(crate) fn touch_written(&mut self, coll: &Arc<Collection>) {
        if !self.written.iter().any(|c| c.id == coll.id) {
            self.written.push(coll.clone());
        }
    }
}

/// Which transaction a write runs in: its own (retried on conflicts, committed at once) or a
/// session's (run once, committed by `commit_user_txn`).
pub(crate) enum Mode<'a> {
    Own,
    User(&'a mut TxnState),
}

impl Mode<'_> {
    pub(crate) fn in_session(&self) -> bool {
        matches!(self, Mode::User(_))
    }
}

/// A committed transaction's effects on the in-memory catalog, not yet published
/// (`Database::publish_commit`).
#[derive(Default)]
pub(crate) struct Committed {
    created: Vec<Arc<Collection>>,
    marked: Vec<Arc<crate::catalog::Index>>,
}

/// The open session transactions, by id.
#[derive(Default)]
pub(crate) struct UserTxns {
    next_id: AtomicU64,
    open: Mutex<HashMap<u64, UserTxn>>,
}

impl UserTxns {
    fn lock(&self) -> MutexGuard<'_, HashMap<u64, UserTxn>> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn snapshot(&self) -> Vec<UserTxn> {
        self.lock().values().cloned().collect()
    }

    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }
}

impl std::fmt::Debug for UserTxns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "UserTxns({} open)", self.len())
    }
}

impl std::fmt::Debug for UserTxn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "UserTxn({}, {:?})", self.0.id, self.ended())
    }
}

// A session transaction moves between connection threads (drivers do not pin a transaction
// to one connection on a standalone), so its engine transaction must be Send.
const _: () = {
    const fn send_and_sync<T: Send + Sync>() {}
    send_and_sync::<Txn>();
    send_and_sync::<UserTxn>();
};

impl UserTxn {
    /// A number unique among this database's session transactions (for logs).
    pub fn id(&self) -> u64 {
        self.0.id
    }

    /// Time since it began.
    pub fn age(&self) -> Duration {
        self.0.started.elapsed()
    }

    /// How it ended, or `None` while it is open (or busy running a statement).
    pub fn ended(&self) -> Option<TxnEnd> {
        match self.0.slot.try_lock() {
            Ok(slot) => match &*slot {
                Slot::Open(_) => None,
                Slot::Ended(end) => Some(*end),
            },
            Err(_) => None,
        }
    }

    fn slot(&self) -> MutexGuard<'_, Slot> {
        self.0.slot.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` on the open transaction; the caller holds the data lock. An ended
    /// transaction is NoSuchTransaction.
    pub(crate) fn with_open<T>(&self, f: impl FnOnce(&mut TxnState) -> DbResult<T>) -> DbResult<T> {
        match &mut *self.slot() {
            Slot::Open(st) => {
                // Its reads see the collections it created (`txn_ddl.rs`).
                let _scope = crate::txn_ddl::PendingScope::enter(&st.created);
                f(st)
            }
            Slot::Ended(end) => Err(no_such_transaction(*end)),
        }
    }
}

/// Why the reaper aborts a transaction.
const LIFETIME_EXCEEDED: &str = "transactionLifetimeLimitSeconds exceeded";

/// Aborts the engine transaction in `slot` if it is open and records `end`, then drops the
/// collections it created; an ended slot is left as it is. True if it was open.
fn end_slot(db: &Database, slot: &mut Slot, end: TxnEnd) -> bool {
    if !matches!(slot, Slot::Open(_)) {
        return false;
    }
    if let Slot::Open(st) = std::mem::replace(slot, Slot::Ended(end)) {
        let TxnState { txn, created, .. } = *st;
        txn.abort();
        db.drop_created(created);
    }
    true
}

/// The error for a statement or commit on a transaction that has ended.
pub fn no_such_transaction(end: TxnEnd) -> MongoError {
    let message = match end {
        TxnEnd::Committed => "Transaction has been committed.".to_owned(),
        TxnEnd::Aborted => "Transaction has been aborted.".to_owned(),
        TxnEnd::Killed(why) => format!("Transaction has been aborted: {why}."),
    };
    MongoError::new(ErrorCode::NoSuchTransaction, message)
}

impl Database {
    /// Begins a session transaction on the newest committed snapshot.
    pub fn begin_user_txn(&self) -> UserTxn {
        self.begin_logged_txn(Kind::Transaction(None))
    }

    /// Begins the transaction `txn_number` of session `lsid` (`lsid.id`) of the user whose
    /// digest is `uid`: its oplog entry carries them.
    pub fn begin_session_txn(&self, lsid: [u8; 16], uid: [u8; 32], txn_number: i64) -> UserTxn {
        self.begin_logged_txn(Kind::Transaction(Some(SessionInfo {
            lsid: lsid_document(lsid, uid),
            txn_number,
            stmt_id: None,
            prev: OpTime::NULL,
        })))
    }

    fn begin_logged_txn(&self, kind: Kind) -> UserTxn {
        let _guard = self.data_lock();
        let id = self.user_txns.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let t = UserTxn(Arc::new(Shared {
            id,
            started: Instant::now(),
            slot: Mutex::new(Slot::Open(Box::new(TxnState {
                txn: self.engine().begin(),
                written: Vec::new(),
                log: self.pending(),
                kind,
                created: Vec::new(),
            }))),
        }));
        self.user_txns.lock().insert(id, t.clone());
        t
    }

    /// Commits: persists the multikey flags its writes set, then commits the engine
    /// transaction, then publishes the collections it created. Any failure aborts it.
    /// Committing a committed transaction again is Ok.
    pub fn commit_user_txn(&self, t: &UserTxn) -> DbResult<()> {
        let _guard = self.data_lock();
        let committed = self.commit_unpublished(t)?;
        self.publish_commit(committed);
        Ok(())
    }

    /// The engine commit of `commit_user_txn`, without the publication of what it
    /// created: until `publish_commit`, the collections it recorded are in the catalog
    /// tree (as of its commit timestamp) but not in the in-memory catalog, a window as long
    /// as the commit's log fsync. The caller holds the data lock.
    pub(crate) fn commit_unpublished(&self, t: &UserTxn) -> DbResult<Committed> {
        let mut slot = t.slot();
        let st = match std::mem::replace(&mut *slot, Slot::Ended(TxnEnd::Aborted)) {
            Slot::Open(st) => st,
            Slot::Ended(TxnEnd::Committed) => {
                *slot = Slot::Ended(TxnEnd::Committed);
                return Ok(Committed::default());
            }
            Slot::Ended(end) => {
                *slot = Slot::Ended(end);
                return Err(no_such_transaction(end));
            }
        };
        let result = self.commit_state(*st);
        if result.is_ok() {
            *slot = Slot::Ended(TxnEnd::Committed);
        }
        drop(slot);
        self.user_txns.lock().remove(&t.0.id);
        result
    }

    /// Makes a commit's new collections and multikey flags visible to other operations.
    pub(crate) fn publish_commit(&self, committed: Committed) {
        self.publish_created(committed.created);
        doc_write::multikey_committed(&committed.marked);
    }

    fn commit_state(&self, st: TxnState) -> DbResult<Committed> {
        let TxnState {
            mut txn,
            written,
            log,
            kind,
            created,
        } = st;
        let mut marked = Vec::new();
        let mut persisted = Ok(());
        for c in &written {
            match doc_write::persist_multikey(&mut txn, &self.catalog, c) {
                Ok(m) => marked.extend(m),
                Err(e) => {
                    persisted = Err(e);
                    break;
                }
            }
        }
        // A created collection's record as it ends (indexes, multikey flags), after any
        // older copy `persist_multikey` wrote.
        for c in &created {
            if persisted.is_ok() {
                persisted = c.record_bytes().and_then(|bytes| {
                    txn.put(self.catalog.tree(), c.ns.to_string().as_bytes(), &bytes)
                        .map_err(crate::engine_error)
                });
            }
        }
        if let Err(e) = persisted {
            txn.abort();
            self.drop_created(created);
            return Err(e);
        }
        let committed = match &kind {
            Kind::Transaction(s) => self.commit_logged(txn, &log, Shape::ApplyOps(s.as_ref())),
            Kind::Statement(lsid, s) => {
                let record =
                    |txn: &mut Txn, last| self.record_last_op(txn, lsid, s.txn_number, last);
                self.commit_logged_with(txn, &log, Shape::Each(Some(s)), Some(&record))
            }
        };
        if let Err(e) = committed {
            self.drop_created(created);
            return Err(e);
        }
        Ok(Committed { created, marked })
    }

    /// Aborts the transaction if it is open (an ended one is left as it is).
    pub fn abort_user_txn(&self, t: &UserTxn) {
        let _guard = self.data_lock();
        self.end_open(t, TxnEnd::Aborted);
    }

    /// Aborts `t` if open, under a lock the caller holds, and forgets it. True if it was open.
    fn end_open(&self, t: &UserTxn, end: TxnEnd) -> bool {
        let was_open = end_slot(self, &mut t.slot(), end);
        self.user_txns.lock().remove(&t.0.id);
        was_open
    }

    /// Aborts every open session transaction; the caller holds the DDL lock (DDL that
    /// replaces or removes an existing collection calls this before it changes anything).
    pub(crate) fn kill_user_txns(&self, why: &'static str) -> usize {
        let killed = self
            .user_txns
            .snapshot()
            .iter()
            .filter(|t| self.end_open(t, TxnEnd::Killed(why)))
            .count();
        if killed > 0 {
            tracing::info!(killed, why, "session transactions aborted");
        }
        killed
    }

    /// Aborts every open session transaction (killAllSessions, shutdown).
    pub fn abort_all_user_txns(&self, why: &'static str) -> usize {
        let _guard = self.data_lock();
        self.kill_user_txns(why)
    }

    /// Aborts the open session transactions older than `limit` (mongod's
    /// `transactionLifetimeLimitSeconds`), releasing their snapshots and locks. One that is
    /// running a statement is left for the next call. Returns how many it aborted.
    pub fn reap_user_txns(&self, limit: Duration) -> usize {
        if self.user_txns.len() == 0 {
            // The usual case: the periodic reaper takes no lock.
            return 0;
        }
        let _guard = self.data_lock();
        let mut reaped = 0;
        for t in self.user_txns.snapshot() {
            if t.age() <= limit {
                continue;
            }
            let Ok(mut slot) = t.0.slot.try_lock() else {
                continue;
            };
            if end_slot(self, &mut slot, TxnEnd::Killed(LIFETIME_EXCEEDED)) {
                reaped += 1;
            }
            drop(slot);
            self.user_txns.lock().remove(&t.0.id);
        }
        if reaped > 0 {
            tracing::info!(
                reaped,
                limit_secs = limit.as_secs(),
                "session transactions past their lifetime aborted"
            );
        }
        reaped
    }

    /// How many session transactions are open.
    pub fn open_user_txns(&self) -> usize {
        self.user_txns.len()
    }
}
