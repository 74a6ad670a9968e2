//! The registry of operations in flight, for `currentOp`/`$currentOp` and `killOp`: one slot
//! per connection (a connection runs one command at a time, on its own thread), holding the
//! command it is running — its opid, database, a copy of its body and when it began — and
//! the interrupt flag its thread checks (`shale_db::Interrupt`, through `shale_db::op_scope`).
//!
//! Cost on the command path: one uncontended lock of the connection's own slot at the start
//! and end of each command, and a copy of the command's body into a buffer the slot reuses
//! (no allocation once it has grown; a body over 64 KiB is copied into a buffer given back
//! when its command ends, so an idle connection holds no large buffer). Readers (`currentOp`) and `killOp` lock each slot in
//! turn, never two at once. This module builds no reply documents; `commands/current_op.rs`
//! does.

use crate::auth::{AuthSession, UserName};
use crate::command::Command;
use shale_db::{Interrupt, OpScope};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Instant;

/// A slot keeps its command buffer between commands up to this size; a larger one (an
/// insert with its documents in the body) is given back after its command.
const RETAINED_COMMAND_BYTES_MAX: usize = 64 << 10;

/// Every connection's slot, and the opid counter.
#[derive(Debug, Default)]
pub struct OpRegistry {
    next_opid: AtomicU32,
    slots: Mutex<Vec<Weak<OpSlot>>>,
}

/// One connection's operation in flight, if any.
#[derive(Debug)]
pub struct OpSlot {
    /// The connection's id.
    pub connection_id: u64,
    /// The client's address (`host:port`).
    pub client: String,
    /// The connection's state `currentOp` shows beside the operation (shared with its
    /// `ConnectionCtx`).
    pub owner: SlotOwner,
    interrupt: Arc<Interrupt>,
    running: Mutex<Running>,
}

/// Who is on a connection: its handshake's application name and its logged-in users.
#[derive(Debug, Clone, Default)]
pub struct SlotOwner {
    /// The application name the handshake gave, if any.
    pub app_name: Arc<Mutex<Option<String>>>,
    /// The connection's logged-in users.
    pub auth: Arc<Mutex<AuthSession>>,
}

/// What a slot holds; `active` is false between commands (the buffers are kept for reuse).
#[derive(Debug, Default)]
struct Running {
    active: bool,
    opid: u32,
    db: String,
    command: Vec<u8>,
    started: Option<Instant>,
}

/// A copy of one connection's state, as `currentOp` reports it.
#[derive(Debug, Clone)]
pub struct OpView {
    /// The connection's id.
    pub connection_id: u64,
    /// The client's address (`host:port`).
    pub client: String,
    /// The application name the handshake gave, if any.
    pub app_name: Option<String>,
    /// The users logged in on the connection.
    pub users: Vec<UserName>,
    /// The operation running, if any.
    pub active: Option<ActiveOp>,
}

/// An operation in flight.
#[derive(Debug, Clone)]
pub struct ActiveOp {
    /// Its operation id (`opid`).
    pub opid: u32,
    /// The database it runs on.
    pub db: String,
    /// The command's body as it came (a valid BSON document: it was one when copied).
    pub command: Vec<u8>,
    /// How long it has run.
    pub running_micros: u64,
    /// True once `killOp` asked it to stop.
    pub killed: bool,
}

impl OpRegistry {
    /// A slot for a new connection, registered until the last handle on it drops.
    pub fn register(&self, connection_id: u64, client: String, owner: SlotOwner) -> Arc<OpSlot> {
        let slot = Arc::new(OpSlot {
            connection_id,
            client,
            owner,
            interrupt: Arc::default(),
            running: Mutex::default(),
        });
        let mut slots = lock(&self.slots);
        slots.retain(|s| s.strong_count() > 0);
        slots.push(Arc::downgrade(&slot));
        slot
    }

    /// Every live connection's state, by connection id.
    pub fn snapshot(&self) -> Vec<OpView> {
        let mut views: Vec<OpView> = self.live().iter().map(|s| s.view()).collect();
        views.sort_by_key(|v| v.connection_id);
        views
    }

    /// Raises the interrupt flag of the operation `opid`, if it is still running. Whether it
    /// was found (mongod answers the same either way).
    pub fn kill(&self, opid: u32) -> bool {
        self.live().iter().any(|s| s.kill_if(opid))
    }

    fn live(&self) -> Vec<Arc<OpSlot>> {
        lock(&self.slots).iter().filter_map(Weak::upgrade).collect()
    }

    fn next_opid(&self) -> u32 {
        // Opids are positive 32-bit integers, as mongod's; the counter wraps past i32::MAX.
        let n = self.next_opid.fetch_add(1, Ordering::Relaxed);
        (n % (i32::MAX as u32)) + 1
    }
}

impl OpSlot {
    /// Marks `cmd` on database `db` as this connection's operation until the guard drops,
    /// with a fresh opid and a cleared interrupt flag, and runs the thread's database work
    /// under that flag.
    pub fn begin(
        self: &Arc<OpSlot>,
        registry: &OpRegistry,
        db: &str,
        cmd: &Command<'_>,
    ) -> OpGuard {
        let opid = registry.next_opid();
        // One clock read per command: the slot's start (for `currentOp`), the guard's (for
        // `maxTimeMS` and the command's elapsed time) and the caller's are the same instant.
        let started = Instant::now();
        {
            let mut r = lock(&self.running);
            r.active = true;
            r.opid = opid;
            r.db.clear();
            r.db.push_str(db);
            r.command.clear();
            r.command.extend_from_slice(cmd.raw().as_bytes());
            r.started = Some(started);
            // Under the slot's lock: a kill aimed at the previous opid cannot land now.
            self.interrupt.reset();
        }
        OpGuard {
            slot: self.clone(),
            scope: Some(shale_db::op_scope(self.interrupt.clone())),
            started,
        }
    }

    fn view(&self) -> OpView {
        let active = self.active();
        // The owner's locks are taken after the slot's is released: never two at once.
        let app_name = lock(&self.owner.app_name).clone();
        let users = lock(&self.owner.auth)
            .users
            .iter()
            .map(|u| u.name.clone())
            .collect();
        OpView {
            connection_id: self.connection_id,
            client: self.client.clone(),
            app_name,
            users,
            active,
        }
    }

    fn active(&self) -> Option<ActiveOp> {
        let r = lock(&self.running);
        r.active.then(|| ActiveOp {
            opid: r.opid,
            db: r.db.clone(),
            command: r.command.clone(),
            running_micros: r.started.map_or(0, |s| {
                s.elapsed().as_micros().try_into().unwrap_or(u64::MAX)
            }),
            killed: self.interrupt.is_killed(),
        })
    }

    fn kill_if(&self, opid: u32) -> bool {
        let r = lock(&self.running);
        if r.active && r.opid == opid {
            self.interrupt.kill();
            return true;
        }
        false
    }
}

/// The operation's registration: clears the slot when dropped.
pub struct OpGuard {
    slot: Arc<OpSlot>,
    scope: Option<OpScope>,
    started: Instant,
}

impl OpGuard {
    /// The keys and documents the operation's scans examined so far.
    pub fn work(&self) -> shale_db::OpWork {
        self.scope.as_ref().map(OpScope::work).unwrap_or_default()
    }

    /// Fails the operation's database work with `MaxTimeMSExpired` once `limit` has passed
    /// since it began (its `maxTimeMS`).
    pub fn set_max_time(&self, limit: std::time::Duration) {
        if let Some(scope) = &self.scope {
            scope.set_deadline(self.started + limit);
        }
    }

    /// The command's `allowDiskUse` (its sorts may spill to disk past their memory limit).
    pub fn set_allow_disk_use(&self, allowed: bool) {
        if let Some(scope) = &self.scope {
            scope.set_allow_disk_use(allowed);
        }
    }

    /// How long the operation has run.
    pub fn elapsed(&self) -> std::time::Duration {
        self.started.elapsed()
    }
}

impl Drop for OpGuard {
    fn drop(&mut self) {
        drop(self.scope.take());
        let mut r = lock(&self.slot.running);
        r.active = false;
        if r.command.capacity() > RETAINED_COMMAND_BYTES_MAX {
            r.command = Vec::new();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::rawdoc;

    #[test]
    fn a_running_command_is_listed_and_killed_by_its_opid_only() {
        let registry = OpRegistry::default();
        let slot = registry.register(7, "127.0.0.1:5000".into(), SlotOwner::default());
        let idle = registry.register(8, "127.0.0.1:5001".into(), SlotOwner::default());
        let body = rawdoc! {"find": "c", "filter": {"a": 1}, "$db": "test"};
        let cmd = Command::new(&body, Vec::new());
        let guard = slot.begin(&registry, "test", &cmd);
        let views = registry.snapshot();
        assert_eq!(views.len(), 2);
        let op = views[0].active.clone().expect("conn 7 runs a command");
        assert_eq!(op.db, "test");
        assert_eq!(op.command, body.as_bytes());
        assert!(views[1].active.is_none(), "conn 8 is idle");
        assert!(!registry.kill(op.opid + 1000), "no such opid");
        assert!(shale_db::check_interrupt().is_ok());
        assert!(registry.kill(op.opid));
        let e = shale_db::check_interrupt().expect_err("killed");
        assert_eq!(e.code.code(), 11601);
        drop(guard);
        assert!(
            shale_db::check_interrupt().is_ok(),
            "the flag ends with the command"
        );
        assert!(registry.snapshot()[0].active.is_none());
        assert!(!registry.kill(op.opid), "a finished op cannot be killed");
        drop(idle);
        assert_eq!(registry.snapshot().len(), 1, "a closed connection leaves");
    }

    #[test]
    fn the_next_command_starts_unkilled_with_a_new_opid() {
        let registry = OpRegistry::default();
        let slot = registry.register(1, "c".into(), SlotOwner::default());
        let body = rawdoc! {"ping": 1};
        let cmd = Command::new(&body, Vec::new());
        let first = slot.begin(&registry, "admin", &cmd);
        let opid = registry.snapshot()[0].active.clone().expect("active").opid;
        registry.kill(opid);
        drop(first);
        let _second = slot.begin(&registry, "admin", &cmd);
        let now = registry.snapshot()[0].active.clone().expect("active");
        assert_ne!(now.opid, opid);
        assert!(!now.killed);
        assert!(shale_db::check_interrupt().is_ok());
    }
}
