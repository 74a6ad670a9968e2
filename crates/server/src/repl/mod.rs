//! Replica-set mode (`shale serve --replSet NAME`): this member's state and everything the
//! rest of the server asks of it, through one narrow interface (`Repl`). The server calls
//! `start` once the listeners are bound, `hello_fields` for the handshake, `check_command`
//! before a command runs, `finish_reply` after (cluster time, operation time, write-concern
//! errors), and the replSet* commands (`commands/repl_set.rs`) call `initiate`, `reconfig`,
//! `config_document` and `status_document`. A standalone server's `Repl` answers every one
//! of these as a standalone.
//!
//! One member only: `replSetInitiate` makes this server the primary of a one-member set (its
//! config in `local.system.replset`, its term in `local.replset.election`, so a restart comes
//! back as the same set's primary, in a new term as after an election). The oplog
//! (`shale_db::oplog`) is enabled in `start`: it stamps its entries from this member's
//! clock and term (`Stamp`), and `lastWrite` and a write's `operationTime` come from its
//! entries. A later consensus crate plugs in here too: it will own `MemberState` transitions.
//!
//! Never touches the wire codec or storage directly: documents in and out, the database
//! through `store.rs`.

pub mod clock;
pub mod concern;
pub mod config;
mod status;
mod store;

use crate::commands::Reply;
use bson::{doc, oid::ObjectId, Bson, Document, RawDocument, Timestamp};
use clock::LogicalClock;
use config::{ReplSetConfig, SelfHost};
use shale_db::oplog::log::{Oplog, OplogClock};
use shale_db::Database;
use shale_doc::{ErrorCode, MongoError};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, OnceLock};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The longest an awaitable `hello` waits, whatever `maxAwaitTimeMS` asks.
const AWAIT_MAX: Duration = Duration::from_secs(60);

/// This member's state (mongod's `MemberState`, the subset one member can be in).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    /// Started with `--replSet`, no config yet (mongod's STARTUP).
    Uninitiated,
    /// The set's primary.
    Primary,
    /// A stored config that does not name this server (mongod's REMOVED).
    Removed,
}

/// An optime: a timestamp from the clock and the term it was made in, with its wall time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OpTime {
    /// The timestamp.
    pub ts: Timestamp,
    /// The term it was made in.
    pub term: i64,
    /// Its wall time.
    pub wall: bson::DateTime,
}

impl OpTime {
    /// `{ts, t}` as mongod writes optimes.
    pub fn document(&self) -> Document {
        doc! {"ts": self.ts, "t": self.term}
    }
}

#[derive(Debug)]
struct Inner {
    me: Option<SelfHost>,
    config: Option<ReplSetConfig>,
    state: MemberState,
    term: i64,
    /// `topologyVersion.counter`: bumped on every change a client must see.
    counter: i64,
    elected: Option<OpTime>,
    last_write: Option<OpTime>,
    shutting_down: bool,
}

/// What stamps oplog entries: the logical clock and the current term (lent to the database's
/// oplog as its `OplogClock`).
#[derive(Debug, Default)]
pub struct Stamp {
    /// The logical clock.
    pub clock: LogicalClock,
    term: AtomicI64,
}

impl OplogClock for Stamp {
    fn reserve(&self, n: u32) -> (Timestamp, i64) {
        (self.clock.tick_many(n), self.term.load(Ordering::Acquire))
    }

    fn advance_to(&self, ts: Timestamp) {
        // The oplog's own newest entry: never refused for drift.
        let _ = self.clock.advance_to(ts);
    }
}

/// The replication side of the server (see the module header).
#[derive(Debug)]
pub struct Repl {
    set_name: Option<String>,
    process_id: ObjectId,
    started: Instant,
    stamp: Arc<Stamp>,
    /// `--oplogSize` in bytes.
    oplog_bytes: u64,
    /// The database's oplog, once `start` enabled it (`lastWrite` reads its newest entry).
    oplog: OnceLock<Arc<Oplog>>,
    inner: Mutex<Inner>,
    /// Wakes awaitable `hello`s on a topology change or at shutdown.
    changed: Condvar,
}

impl Default for Repl {
    fn default() -> Repl {
        Repl::new(None)
    }
}

impl Repl {
    /// A standalone server's (`None`) or a `--replSet` member's replication state.
    pub fn new(set_name: Option<String>) -> Repl {
        Repl {
            set_name,
            process_id: ObjectId::new(),
            started: Instant::now(),
            stamp: Arc::new(Stamp::default()),
            oplog_bytes: shale_db::oplog::DEFAULT_OPLOG_BYTES,
            oplog: OnceLock::new(),
            inner: Mutex::new(Inner {
                me: None,
                config: None,
                state: MemberState::Uninitiated,
                term: 0,
                counter: 0,
                elected: None,
                last_write: None,
                shutting_down: false,
            }),
            changed: Condvar::new(),
        }
    }

    /// The same, with the oplog bounded at `bytes` (`--oplogSize`).
    pub fn with_oplog_bytes(mut self, bytes: u64) -> Repl {
        self.oplog_bytes = bytes;
        self
    }

    /// The newest write: the oplog's newest visible entry once there is one, else the
    /// election's optime.
    fn last_write(&self, g: &Inner) -> Option<OpTime> {
        match self.oplog.get().map(|o| o.last_visible()) {
            Some(e) if e.at.ts.time > 0 => Some(OpTime {
                ts: e.at.ts,
                term: e.at.term,
                wall: e.wall,
            }),
            _ => g.last_write,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The `--replSet` name; `None` on a standalone.
    pub fn set_name(&self) -> Option<&str> {
        self.set_name.as_deref()
    }

    /// True when started with `--replSet`.
    pub fn is_replica_set(&self) -> bool {
        self.set_name.is_some()
    }

    /// The member's state now.
    pub fn state(&self) -> MemberState {
        self.lock().state
    }

    /// Called once the listeners are bound: learns how this server is reached and reads
    /// the stored config; a member named in it becomes primary in a new term.
    pub fn start(&self, db: &Database, me: SelfHost) -> Result<(), MongoError> {
        let mut g = self.lock();
        g.me = Some(me.clone());
        if self.set_name.is_none() {
            return Ok(());
        }
        g.term = store::load_term(db)?;
        self.stamp.term.store(g.term, Ordering::Release);
        db.enable_oplog(self.stamp.clone(), self.oplog_bytes)?;
        if let Some(o) = db.oplog_handle() {
            let _ = self.oplog.set(o);
        }
        let Some(stored) = store::load_config(db)? else {
            return Ok(());
        };
        if Some(stored.set_name()) != self.set_name.as_deref() {
            tracing::warn!(
                stored = stored.set_name(),
                "the stored replica set config names another set than --replSet; this member \
                 stays out of it (REMOVED) until replSetReconfig with force"
            );
        }
        let member = stored.self_member(&me).is_some()
            && Some(stored.set_name()) == self.set_name.as_deref();
        g.config = Some(stored);
        if member {
            self.become_primary(&mut g, db)?;
        } else {
            g.state = MemberState::Removed;
            g.counter += 1;
        }
        Ok(())
    }

    /// Wins the (one-member) election: a new term, stored before the member acts as primary,
    /// and the config rewritten at that term, as mongod does after an election.
    fn become_primary(&self, g: &mut Inner, db: &Database) -> Result<(), MongoError> {
        let term = g.term + 1;
        store::save_term(db, term)?;
        g.term = term;
        self.stamp.term.store(term, Ordering::Release);
        if let Some(c) = &g.config {
            let id = c.replica_set_id().unwrap_or_else(ObjectId::new);
            let c = c.with(c.version(), term, id);
            store::save_config(db, &c)?;
            g.config = Some(c);
        }
        // mongod's first entry of a new term: a no-op, whose optime is the election's.
        db.log_noop("new primary")?;
        let op = match shale_db::oplog::log::take_last_op() {
            Some(at) => OpTime {
                ts: at.ts,
                term: at.term,
                wall: bson::DateTime::now(),
            },
            None => OpTime {
                ts: self.stamp.clock.tick(),
                term,
                wall: bson::DateTime::now(),
            },
        };
        g.elected = Some(op);
        g.last_write = Some(op);
        g.state = MemberState::Primary;
        g.counter += 1;
        self.changed.notify_all();
        Ok(())
    }

    /// Wakes every awaitable `hello` so connection threads can finish.
    pub fn shutdown(&self) {
        self.lock().shutting_down = true;
        self.changed.notify_all();
    }

    /// `replSetInitiate`: `given` is the config sent, `None` (or empty) to make one.
    pub fn initiate(&self, db: &Database, given: Option<&Document>) -> Result<(), MongoError> {
        let Some(set_name) = self.set_name.as_deref() else {
            return Err(no_replication());
        };
        let mut g = self.lock();
        if g.config.is_some() {
            return Err(MongoError::new(
                ErrorCode::AlreadyInitialized,
                "already initialized",
            ));
        }
        let me = g.me.clone().ok_or_else(not_started)?;
        let config = match given {
            Some(d) if !d.is_empty() => ReplSetConfig::parse(d, set_name, &me, g.term)?,
            _ => ReplSetConfig::generated(set_name, &me.me, g.term),
        };
        let config = config.with(config.version(), g.term, ObjectId::new());
        store::save_config(db, &config)?;
        g.config = Some(config);
        tracing::info!(set = set_name, "replica set initiated");
        self.become_primary(&mut g, db)
    }

    /// `replSetReconfig`: a new one-member config at a higher version (any version with
    /// `force`, which also lets a REMOVED member name itself again).
    pub fn reconfig(&self, db: &Database, given: &Document, force: bool) -> Result<(), MongoError> {
        let Some(set_name) = self.set_name.as_deref() else {
            return Err(no_replication());
        };
        let mut g = self.lock();
        let Some(current) = g.config.clone() else {
            return Err(not_initialized());
        };
        if g.state != MemberState::Primary && !force {
            return Err(MongoError::new(
                ErrorCode::NotWritablePrimary,
                "replSetReconfig should only be run on a writable PRIMARY. Current state \
                 REMOVED;",
            ));
        }
        let me = g.me.clone().ok_or_else(not_started)?;
        let new = ReplSetConfig::parse(given, set_name, &me, g.term)?;
        if let (Some(Bson::ObjectId(id)), Some(cur)) = (
            given
                .get_document("settings")
                .ok()
                .and_then(|s| s.get("replicaSetId")),
            current.replica_set_id(),
        ) {
            if *id != cur {
                return Err(MongoError::new(
                    ErrorCode::NewReplicaSetConfigurationIncompatible,
                    format!(
                        "New and old configurations differ in replica set ID; old was {cur}, \
                         and new is {id}"
                    ),
                ));
            }
        }
        let version = if force {
            new.version().max(current.version() + 1)
        } else if new.version() <= current.version() {
            return Err(MongoError::new(
                ErrorCode::NewReplicaSetConfigurationIncompatible,
                format!(
                    "New replica set config version {} must be greater than current version {}",
                    new.version(),
                    current.version()
                ),
            ));
        } else {
            new.version()
        };
        let id = current.replica_set_id().unwrap_or_else(ObjectId::new);
        let new = new.with(version, g.term, id);
        store::save_config(db, &new)?;
        g.config = Some(new);
        g.counter += 1;
        if g.state == MemberState::Removed {
            self.become_primary(&mut g, db)?;
        }
        self.changed.notify_all();
        Ok(())
    }

    /// `replSetGetConfig`'s `config`.
    pub fn config_document(&self) -> Result<Document, MongoError> {
        if self.set_name.is_none() {
            return Err(no_replication());
        }
        match &self.lock().config {
            Some(c) => Ok(c.document().clone()),
            None => Err(not_initialized()),
        }
    }

    /// Refuses what a replica-set member refuses before a command runs: a read concern the
    /// command cannot honour, and a write on a member that is not primary (writes to
    /// `local` always run, as on mongod).
    pub fn check_command(
        &self,
        db: &str,
        name: &str,
        body: &RawDocument,
    ) -> Result<(), MongoError> {
        if self.set_name.is_none() {
            return Ok(());
        }
        if let Some(e) = concern::read_concern_error(name, body) {
            return Err(e);
        }
        if db == "local" || !concern::is_write(name, body) {
            return Ok(());
        }
        match self.lock().state {
            MemberState::Primary => Ok(()),
            _ => Err(MongoError::new(
                ErrorCode::NotWritablePrimary,
                "not primary",
            )),
        }
    }

    /// Moves the clock to a client's `$clusterTime` (gossip), checked against the drift
    /// limit. A standalone or an uninitiated member ignores it, as mongod does.
    pub fn receive_cluster_time(&self, body: &RawDocument) -> Result<(), MongoError> {
        if self.set_name.is_none() || self.lock().config.is_none() {
            return Ok(());
        }
        match body
            .get_document("$clusterTime")
            .ok()
            .and_then(|c| c.get_timestamp("clusterTime").ok())
        {
            Some(ts) => self.stamp.clock.advance_to(ts),
            None => Ok(()),
        }
    }

    /// Adds what a replica set's replies carry: `topologyVersion` on not-primary errors, a
    /// write's `writeConcernError` if one member cannot satisfy its concern, `$clusterTime`
    /// (signed with a zero key, as mongod without keys does) and `operationTime` (a write's
    /// own timestamp, else the last write's).
    pub fn finish_reply(&self, name: &str, body: &RawDocument, reply: &mut Reply) {
        if self.set_name.is_none() {
            return;
        }
        let g = self.lock();
        if let Reply::Doc(d) = reply {
            add_topology_version(d, self.topology_version(g.counter));
        }
        let Some(last) = g.last_write else {
            return;
        };
        let ok = match reply {
            Reply::Doc(d) => d.get("ok").and_then(config_number_f64) == Some(1.0),
            Reply::Raw(r) => r.get_f64("ok").ok() == Some(1.0),
        };
        // A write's own newest entry (mongod's client last op), else the newest write.
        let written = shale_db::oplog::log::take_last_op();
        let op_time = match written {
            Some(at) if ok && concern::is_write(name, body) => at.ts,
            _ => self.last_write(&g).map_or(last.ts, |w| w.ts),
        };
        drop(g);
        let cluster_time = doc! {
            "clusterTime": self.stamp.clock.now(),
            "signature": {
                "hash": bson::Binary {
                    subtype: bson::spec::BinarySubtype::Generic,
                    bytes: vec![0; 20],
                },
                "keyId": 0i64,
            },
        };
        match reply {
            Reply::Doc(d) => {
                if ok && concern::is_write(name, body) && !d.contains_key("writeConcernError") {
                    if let Some(wce) = concern::write_concern_error(body, 1) {
                        d.insert("writeConcernError", wce);
                    }
                }
                d.insert("$clusterTime", cluster_time);
                d.insert("operationTime", op_time);
            }
            Reply::Raw(r) => {
                if let Ok(ct) = bson::RawDocumentBuf::from_document(&cluster_time) {
                    r.append("$clusterTime", ct);
                }
                r.append("operationTime", op_time);
            }
        }
    }

    /// Waits, for an awaitable `hello` (one carrying this process's `topologyVersion` and
    /// `maxAwaitTimeMS`), until the topology changes, the wait is over or the server stops.
    /// Any other `hello` returns at once.
    pub fn await_hello(&self, body: &Document) {
        let Ok(tv) = body.get_document("topologyVersion") else {
            return;
        };
        let Some(ms) = body.get("maxAwaitTimeMS").and_then(config::number) else {
            return;
        };
        if self.set_name.is_none() || tv.get_object_id("processId").ok() != Some(self.process_id) {
            return;
        }
        let seen = tv.get("counter").and_then(config::number);
        let wait = Duration::from_millis(u64::try_from(ms).unwrap_or(0)).min(AWAIT_MAX);
        let deadline = Instant::now() + wait;
        let mut g = self.lock();
        while Some(g.counter) == seen && !g.shutting_down {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            g = self
                .changed
                .wait_timeout(g, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    fn topology_version(&self, counter: i64) -> Document {
        doc! {"processId": self.process_id, "counter": counter}
    }
}

/// A not-primary or shutting-down error names the topology it was seen in (mongod's
/// `NotPrimaryError` and `ShutdownError` categories): a driver that already knows that
/// topology treats the error as stale instead of marking the server unknown (SDAM).
fn add_topology_version(reply: &mut Document, topology_version: Document) {
    const STATE_CODES: &[i32] = &[91, 189, 10107, 11600, 11602, 13435, 13436];
    let code = reply.get_i32("code").ok();
    if code.is_some_and(|c| STATE_CODES.contains(&c)) && !reply.contains_key("topologyVersion") {
        reply.insert("topologyVersion", topology_version);
    }
}

fn config_number_f64(v: &Bson) -> Option<f64> {
    match v {
        Bson::Double(d) => Some(*d),
        Bson::Int32(n) => Some(f64::from(*n)),
        Bson::Int64(n) => Some(*n as f64),
        _ => None,
    }
}

/// mongod's answer on a server started without `--replSet`.
pub fn no_replication() -> MongoError {
    MongoError::new(
        ErrorCode::NoReplicationEnabled,
        "This node was not started with replication enabled.",
    )
}

fn not_initialized() -> MongoError {
    MongoError::new(
        ErrorCode::NotYetInitialized,
        "no replset config has been received",
    )
}

fn not_started() -> MongoError {
    MongoError::new(
        ErrorCode::NotYetInitialized,
        "the server is still starting (its address is not known yet)",
    )
}
