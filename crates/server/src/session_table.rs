//! The server's logical sessions that carry transactions, keyed by `lsid`: each session's
//! active transaction number and where its transaction stands. Only commands with
//! `txnNumber` and `autocommit: false` create entries (drivers put an implicit `lsid` on
//! every command, and those need no state). A session outlives the connection that used
//! it: drivers run one transaction's statements on any pooled connection.
//!
//! Locking: a session's mutex is held for a whole transaction command, so one session's
//! statements run one at a time, as mongod's session checkout makes them; the table's
//! mutex is held only to find or remove an entry. The order is session → the database's
//! locks; the database never takes a session's mutex, and the reaper only tries it.

use shale_db::{Database, UserTxn};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// mongod's `kUninitializedTxnNumber`: no transaction has started on the session.
pub const NO_TXN_NUMBER: i64 = -1;

/// How long a session with no open transaction is kept after its last use (mongod's
/// `localLogicalSessionTimeoutMinutes`, 30).
const SESSION_IDLE_LIMIT: Duration = Duration::from_secs(30 * 60);

/// All sessions that have run a transaction.
#[derive(Debug, Default)]
pub struct SessionTable {
    map: Mutex<HashMap<bson::Uuid, Arc<Session>>>,
}

/// One logical session.
#[derive(Debug)]
pub struct Session {
    state: Mutex<SessionState>,
}

/// A session's transaction state (mongod's `TransactionParticipant`, reduced).
#[derive(Debug)]
pub struct SessionState {
    /// The highest `txnNumber` the session has started, or `NO_TXN_NUMBER`.
    pub txn_number: i64,
    pub phase: TxnPhase,
    pub last_use: Instant,
    /// Client cursors the transaction opened (namespace, id): closed when it ends, as
    /// mongod closes them, since they hold its uncommitted reads.
    pub cursors: Vec<(String, i64)>,
}

/// Where the session's transaction numbered `txn_number` stands.
#[derive(Debug)]
pub enum TxnPhase {
    /// None has started.
    None,
    /// Open in the database (which may have killed it since: DDL, the lifetime limit).
    InProgress(UserTxn),
    Committed,
    Aborted,
}

impl Session {
    /// Locks the session for one command (waits while another command of it runs).
    pub fn lock(&self) -> MutexGuard<'_, SessionState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl SessionState {
    /// The open transaction, if any, after noting one the database ended on its own
    /// (killed by DDL, the reaper or shutdown) as aborted.
    pub fn open_txn(&mut self, db: &Database) -> Option<UserTxn> {
        if let TxnPhase::InProgress(t) = &self.phase {
            if t.ended().is_none() {
                return Some(t.clone());
            }
            self.finish(db, TxnPhase::Aborted);
        }
        None
    }

    /// Aborts the open transaction, if any.
    pub fn abort(&mut self, db: &Database) {
        if let TxnPhase::InProgress(t) = &self.phase {
            db.abort_user_txn(t);
            self.finish(db, TxnPhase::Aborted);
        }
    }

    /// Records how the transaction ended and closes the cursors it opened.
    pub fn finish(&mut self, db: &Database, phase: TxnPhase) {
        debug_assert!(!matches!(phase, TxnPhase::InProgress(_)));
        self.phase = phase;
        for (ns, id) in self.cursors.drain(..) {
            db.cursors().kill(&ns, &[id]);
        }
    }
}

impl SessionTable {
    fn lock(&self) -> MutexGuard<'_, HashMap<bson::Uuid, Arc<Session>>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The session `lsid`, created if new.
    pub fn checkout(&self, lsid: bson::Uuid) -> Arc<Session> {
        self.lock()
            .entry(lsid)
            .or_insert_with(|| {
                Arc::new(Session {
                    state: Mutex::new(SessionState {
                        txn_number: NO_TXN_NUMBER,
                        phase: TxnPhase::None,
                        last_use: Instant::now(),
                        cursors: Vec::new(),
                    }),
                })
            })
            .clone()
    }

    /// `endSessions` / `killSessions`: forgets the sessions and aborts their transactions.
    pub fn end(&self, db: &Database, ids: &[bson::Uuid]) {
        let ended: Vec<Arc<Session>> = {
            let mut map = self.lock();
            ids.iter().filter_map(|id| map.remove(id)).collect()
        };
        for s in ended {
            s.lock().abort(db);
        }
    }

    /// `killAllSessions`: forgets every session and aborts its transaction.
    pub fn end_all(&self, db: &Database) {
        let all: Vec<Arc<Session>> = self.lock().drain().map(|(_, s)| s).collect();
        for s in all {
            s.lock().abort(db);
        }
    }

    /// Forgets sessions idle past `SESSION_IDLE_LIMIT` with no open transaction (their
    /// transactions are reaped by the database's lifetime limit long before), closing the
    /// cursors of a transaction the database ended. A session running a command is skipped.
    pub fn forget_idle(&self, db: &Database) -> usize {
        let mut map = self.lock();
        let before = map.len();
        map.retain(|_, s| match s.state.try_lock() {
            Ok(mut st) => {
                let open = st.open_txn(db).is_some();
                open || st.last_use.elapsed() < SESSION_IDLE_LIMIT
            }
            Err(_) => true,
        });
        before - map.len()
    }

    /// How many sessions the table holds.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open_db() -> (tempfile::TempDir, Database) {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Database::open(dir.path(), shale_db::DbOptions::default()).expect("open");
        (dir, db)
    }

    #[test]
    fn ending_a_session_aborts_its_transaction() {
        let (_dir, db) = open_db();
        let table = SessionTable::default();
        let id = bson::Uuid::new();
        let t = db.begin_user_txn();
        {
            let s = table.checkout(id);
            let mut st = s.lock();
            st.txn_number = 1;
            st.phase = TxnPhase::InProgress(t.clone());
        }
        assert_eq!(table.len(), 1);
        table.end(&db, &[id, bson::Uuid::new()]);
        assert!(table.is_empty());
        assert_eq!(t.ended(), Some(shale_db::TxnEnd::Aborted));
    }

    #[test]
    fn a_transaction_the_database_killed_reads_as_aborted() {
        let (_dir, db) = open_db();
        let table = SessionTable::default();
        let s = table.checkout(bson::Uuid::new());
        let mut st = s.lock();
        st.phase = TxnPhase::InProgress(db.begin_user_txn());
        assert!(st.open_txn(&db).is_some());
        db.abort_all_user_txns("test");
        assert!(st.open_txn(&db).is_none());
        assert!(matches!(st.phase, TxnPhase::Aborted));
    }
}
