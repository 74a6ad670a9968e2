//! The server's logical sessions, keyed by `lsid`: every command that carries an `lsid`
//! marks its session used (mongod's logical session cache); a session owns the cursors
//! opened under it (tagged in the db's cursor table) and its transaction state (the active
//! transaction number and where that transaction stands). Ending a session (`endSessions`,
//! the kill commands, expiry after `localLogicalSessionTimeoutMinutes` idle) aborts its
//! transaction and closes its cursors. A session outlives the connection that used it:
//! drivers run one session's commands on any pooled connection.
//!
//! A session is its `lsid.id` together with its user (`uid`, a digest of the name of the
//! user logged in on the connection that uses it, or of the empty name without one), as
//! mongod keys its sessions: another user sending the same id has a session of its own.
//! At most `maxSessions` are held; a command that would add one more fails with
//! `TooManyLogicalSessions` (261), as on mongod.
//!
//! Locking: a session's state mutex is held for a whole transaction command, so one
//! session's statements run one at a time, as mongod's session checkout makes them; its
//! last use has its own mutex, so a plain command never waits for a transaction's; the
//! table's mutex is held only to find, touch or remove entries. The order is table → last
//! use, and session state → the database's locks; the database never takes a session's
//! mutex, and the reaper only tries it.

use shale_db::{Database, UserTxn};
use shale_doc::{ErrorCode, MongoError};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// mongod's `kUninitializedTxnNumber`: no transaction has started on the session.
pub const NO_TXN_NUMBER: i64 = -1;

/// mongod's default `localLogicalSessionTimeoutMinutes`.
pub const DEFAULT_SESSION_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// A SHA-256 digest of a user name, mongod's session `uid`.
pub type UserDigest = [u8; 32];

/// mongod's default `maxSessions`: how many sessions the table holds at most.
pub const DEFAULT_MAX_SESSIONS: usize = 1_000_000;

/// A logical session's identity: `lsid.id` and the digest of its user's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Lsid {
    /// `lsid.id`, as the client sent it.
    pub id: bson::Uuid,
    /// The digest of the name of the user who uses it.
    pub uid: UserDigest,
}

#[cfg(test)]
impl Lsid {
    /// The session `id` of no user (authentication off, or nobody logged in).
    pub fn no_auth(id: bson::Uuid) -> Lsid {
        Lsid {
            id,
            uid: no_auth_uid(),
        }
    }
}

/// The `uid` of sessions used with nobody logged in: the digest of the empty user name, as
/// mongod gives them.
pub fn no_auth_uid() -> UserDigest {
    use sha2::Digest;
    sha2::Sha256::digest(b"").into()
}

/// The `uid` of sessions that user `user` of database `db` opens (mongod's
/// `getLogicalSessionUserDigestFor`: SHA-256 of `user@db`).
pub fn user_uid(user: &str, db: &str) -> UserDigest {
    use sha2::Digest;
    sha2::Sha256::digest(format!("{user}@{db}").as_bytes()).into()
}

/// A session as mongod prints it in messages: `<id> - <uid in base64> -  - `. Cursors
/// remember their session's id only, so messages about them show the empty user's digest.
pub fn describe_lsid(id: &bson::Uuid) -> String {
    use base64::Engine;
    let uid = base64::engine::general_purpose::STANDARD.encode(no_auth_uid());
    format!("{id} - {uid} -  - ")
}

/// Every session the server has seen and not yet ended.
#[derive(Debug)]
pub struct SessionTable {
    map: Mutex<HashMap<Lsid, Arc<Session>>>,
    /// `maxSessions`.
    max: usize,
}

impl Default for SessionTable {
    fn default() -> Self {
        SessionTable::with_limit(DEFAULT_MAX_SESSIONS)
    }
}

/// One logical session.
#[derive(Debug)]
pub struct Session {
    key: Lsid,
    state: Mutex<SessionState>,
    last_use: Mutex<LastUse>,
}

/// When a session was last used: a monotonic time for expiry, a wall-clock one to report.
#[derive(Debug, Clone, Copy)]
pub struct LastUse {
    /// For expiry.
    pub at: Instant,
    /// To report.
    pub wall: bson::DateTime,
}

impl LastUse {
    fn now() -> LastUse {
        LastUse {
            at: Instant::now(),
            wall: bson::DateTime::now(),
        }
    }
}

/// A session's transaction state (mongod's `TransactionParticipant`, reduced).
#[derive(Debug)]
pub struct SessionState {
    /// The highest `txnNumber` the session has started, or `NO_TXN_NUMBER`.
    pub txn_number: i64,
    /// Where that transaction stands.
    pub phase: TxnPhase,
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
    /// Committed.
    Committed,
    /// Aborted.
    Aborted,
    /// The number belongs to a retryable write (`commands/retryable_writes.rs`).
    RetryableWrite,
}

impl Session {
    fn new(key: Lsid) -> Session {
        Session {
            key,
            state: Mutex::new(SessionState::default()),
            last_use: Mutex::new(LastUse::now()),
        }
    }

    /// Locks the session for one command (waits while another command of it runs).
    pub fn lock(&self) -> MutexGuard<'_, SessionState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The session's id (`lsid.id`).
    pub fn id(&self) -> bson::Uuid {
        self.key.id
    }

    /// The session's id and user.
    pub fn key(&self) -> Lsid {
        self.key
    }

    /// When the session was last used.
    pub fn last_use(&self) -> LastUse {
        *self.last_use.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn touch(&self) {
        *self.last_use.lock().unwrap_or_else(|p| p.into_inner()) = LastUse::now();
    }

    /// Ends the session's work: aborts its transaction and closes every cursor it opened.
    fn close(&self, db: &Database) {
        self.lock().abort(db);
        db.cursors().kill_owned(&self.key.id.bytes());
    }
}

impl Default for SessionState {
    fn default() -> Self {
        SessionState {
            txn_number: NO_TXN_NUMBER,
            phase: TxnPhase::None,
            cursors: Vec::new(),
        }
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
    /// A table that holds at most `max` sessions (`maxSessions`).
    pub fn with_limit(max: usize) -> SessionTable {
        SessionTable {
            map: Mutex::default(),
            max,
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Lsid, Arc<Session>>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The session `lsid`, created if new, marked used now; `TooManyLogicalSessions` when
    /// it is new and the table is full.
    pub fn checkout(&self, lsid: Lsid) -> Result<Arc<Session>, MongoError> {
        let mut map = self.lock();
        let full = map.len() >= self.max;
        let session = match map.entry(lsid) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(_) if full => {
                return Err(MongoError::new(
                    ErrorCode::TooManyLogicalSessions,
                    format!(
                        "Unable to add session {} into the cache because the number of active \
                         sessions is too high",
                        lsid.id
                    ),
                ))
            }
            std::collections::hash_map::Entry::Vacant(e) => e.insert(Arc::new(Session::new(lsid))),
        };
        // Touched under the table's lock, so expiry never removes a session just used.
        session.touch();
        Ok(session.clone())
    }

    /// Marks `lsid` used now (a command that carries it, `refreshSessions`).
    pub fn touch(&self, lsid: Lsid) -> Result<(), MongoError> {
        self.checkout(lsid).map(drop)
    }

    /// `endSessions` / `killSessions`: ends the sessions `ids` (unknown ids are ignored).
    pub fn end(&self, db: &Database, ids: &[Lsid]) -> usize {
        self.end_where(db, |key| ids.contains(key))
    }

    /// Ends every session whose id and user satisfy `matches`; returns how many.
    pub fn end_where(&self, db: &Database, matches: impl Fn(&Lsid) -> bool) -> usize {
        let ended: Vec<Arc<Session>> = {
            let mut map = self.lock();
            let keys: Vec<Lsid> = map.keys().filter(|k| matches(k)).copied().collect();
            keys.iter().filter_map(|k| map.remove(k)).collect()
        };
        for s in &ended {
            s.close(db);
        }
        ended.len()
    }

    /// `killAllSessions` and shutdown: ends every session.
    pub fn end_all(&self, db: &Database) -> usize {
        self.end_where(db, |_| true)
    }

    /// Ends the sessions idle for `timeout` or longer (mongod's session expiry), aborting
    /// their transactions and closing their cursors, and notes transactions the database
    /// ended on its own. A session running a transaction command is skipped.
    pub fn expire(&self, db: &Database, timeout: Duration) -> usize {
        let expired: Vec<Arc<Session>> = {
            let mut map = self.lock();
            let keys: Vec<Lsid> = map
                .iter()
                .filter(|(_, s)| s.last_use().at.elapsed() >= timeout && s.state.try_lock().is_ok())
                .map(|(k, _)| *k)
                .collect();
            keys.iter().filter_map(|k| map.remove(k)).collect()
        };
        for s in &expired {
            s.close(db);
        }
        self.note_killed_transactions(db);
        expired.len()
    }

    /// Closes the cursors of transactions the database ended (DDL, the lifetime reaper),
    /// so they do not wait for the session's next command.
    fn note_killed_transactions(&self, db: &Database) {
        let sessions: Vec<Arc<Session>> = self.lock().values().cloned().collect();
        for s in sessions {
            if let Ok(mut st) = s.state.try_lock() {
                st.open_txn(db);
            }
        }
    }

    /// Every session with its last use, in no particular order (`$listLocalSessions`).
    pub fn list(&self) -> Vec<(Lsid, LastUse)> {
        self.lock()
            .values()
            .map(|s| (s.key, s.last_use()))
            .collect()
    }

    /// Sessions holding an open transaction that no command is using now, with its
    /// `txnNumber` (`$currentOp`'s idle sessions). A session a command holds is skipped,
    /// not waited for.
    pub fn idle_transactions(&self, db: &Database) -> Vec<(Lsid, i64)> {
        let sessions: Vec<Arc<Session>> = self.lock().values().cloned().collect();
        sessions
            .iter()
            .filter_map(|s| {
                let mut state = s.state.try_lock().ok()?;
                state.open_txn(db)?;
                Some((s.key, state.txn_number))
            })
            .collect()
    }

    /// How many sessions the table holds.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// True when the table holds no session.
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
        let id = Lsid::no_auth(bson::Uuid::new());
        let t = db.begin_user_txn();
        {
            let s = table.checkout(id).expect("checkout");
            let mut st = s.lock();
            st.txn_number = 1;
            st.phase = TxnPhase::InProgress(t.clone());
        }
        assert_eq!(table.len(), 1);
        table.end(&db, &[id, Lsid::no_auth(bson::Uuid::new())]);
        assert!(table.is_empty());
        assert_eq!(t.ended(), Some(shale_db::TxnEnd::Aborted));
    }

    #[test]
    fn a_transaction_the_database_killed_reads_as_aborted() {
        let (_dir, db) = open_db();
        let table = SessionTable::default();
        let s = table
            .checkout(Lsid::no_auth(bson::Uuid::new()))
            .expect("checkout");
        let mut st = s.lock();
        st.phase = TxnPhase::InProgress(db.begin_user_txn());
        assert!(st.open_txn(&db).is_some());
        db.abort_all_user_txns("test");
        assert!(st.open_txn(&db).is_none());
        assert!(matches!(st.phase, TxnPhase::Aborted));
    }

    fn open_cursor(db: &Database, owner: bson::Uuid) -> i64 {
        let docs: Vec<bson::RawDocumentBuf> = (0..3)
            .map(|i| {
                let mut d = bson::RawDocumentBuf::new();
                d.append("_id", i);
                d
            })
            .collect();
        let source = Box::new(shale_db::VecSource(docs.into_iter()));
        db.cursors()
            .first_batch("db.c", source, Some(1), false, Some(owner.bytes()))
            .expect("batch")
            .cursor_id
    }

    #[test]
    fn an_idle_session_expires_with_its_cursors_and_transaction() {
        let (_dir, db) = open_db();
        let table = SessionTable::default();
        let (idle, busy) = (
            Lsid::no_auth(bson::Uuid::new()),
            Lsid::no_auth(bson::Uuid::new()),
        );
        let t = db.begin_user_txn();
        table.checkout(idle).expect("checkout").lock().phase = TxnPhase::InProgress(t.clone());
        let cursor = open_cursor(&db, idle.id);
        let kept = open_cursor(&db, busy.id);
        table.touch(busy).expect("touch");
        assert_eq!(table.expire(&db, Duration::from_secs(60)), 0);
        std::thread::sleep(Duration::from_millis(20));
        table.touch(busy).expect("touch");
        assert_eq!(table.expire(&db, Duration::from_millis(10)), 1);
        assert_eq!(t.ended(), Some(shale_db::TxnEnd::Aborted));
        assert_eq!(db.cursors().owner(cursor), None);
        assert_eq!(db.cursors().owner(kept), Some(Some(busy.id.bytes())));
        let listed: Vec<Lsid> = table.list().into_iter().map(|(k, _)| k).collect();
        assert_eq!(listed, vec![busy]);
    }

    #[test]
    fn a_session_running_a_transaction_command_does_not_expire() {
        let (_dir, db) = open_db();
        let table = SessionTable::default();
        let s = table
            .checkout(Lsid::no_auth(bson::Uuid::new()))
            .expect("checkout");
        let _running = s.lock();
        assert_eq!(table.expire(&db, Duration::ZERO), 0);
        assert_eq!(table.len(), 1);
    }

    #[test]
    fn ending_sessions_by_uid_matches_only_the_empty_user() {
        let (_dir, db) = open_db();
        let table = SessionTable::default();
        let id = bson::Uuid::new();
        let cursor = open_cursor(&db, id);
        table.touch(Lsid::no_auth(id)).expect("touch");
        let named = user_uid("u", "admin");
        assert_eq!(table.end_where(&db, |k| k.uid == named), 0);
        assert_eq!(table.end_where(&db, |k| k.uid == no_auth_uid()), 1);
        assert_eq!(db.cursors().owner(cursor), None);
    }

    #[test]
    fn one_id_used_by_two_users_is_two_sessions() {
        let (_dir, db) = open_db();
        let table = SessionTable::default();
        let id = bson::Uuid::new();
        let (alice, anyone) = (
            Lsid {
                id,
                uid: user_uid("alice", "admin"),
            },
            Lsid::no_auth(id),
        );
        let t = db.begin_user_txn();
        table.checkout(alice).expect("alice").lock().phase = TxnPhase::InProgress(t.clone());
        table.touch(anyone).expect("anyone");
        assert_eq!(table.len(), 2);
        table.end(&db, &[anyone]);
        assert_eq!(
            t.ended(),
            None,
            "ending the id as another user leaves alice's"
        );
        table.end(&db, &[alice]);
        assert_eq!(t.ended(), Some(shale_db::TxnEnd::Aborted));
    }

    #[test]
    fn a_full_table_refuses_a_new_session_but_serves_the_ones_it_holds() {
        let table = SessionTable::with_limit(2);
        let (a, b, c) = (
            Lsid::no_auth(bson::Uuid::new()),
            Lsid::no_auth(bson::Uuid::new()),
            Lsid::no_auth(bson::Uuid::new()),
        );
        table.touch(a).expect("a");
        table.touch(b).expect("b");
        let refused = table.touch(c).expect_err("full");
        assert_eq!(refused.code, ErrorCode::TooManyLogicalSessions);
        assert_eq!(refused.code.code(), 261);
        table.touch(a).expect("a again");
        assert_eq!(table.len(), 2);
    }
}
