//! The oplog as it is written: `local.oplog.rs`'s tree (keyed by `ts`, O1), the clock the
//! replica set lends it, the slots of transactions about to commit (O4), and the commit
//! step every logged write ends with: reserve `ts` for each entry, put the entries in the
//! caller's engine `Txn`, commit, finish the slot (O2, O3). Also the newest visible optime
//! (`hello`'s `lastWrite`) and the wait a tailing reader blocks in until the point moves.
//! Never decides what an entry says (the write paths do, through `Pending`) and never reads
//! the wall clock for `ts` (the `OplogClock` does).

use super::entry::{entry_document, entry_key, transaction_entry, OpTime, Operation, SessionInfo};
use super::pack;
use super::visibility::SlotTracker;
use crate::catalog::Collection;
use crate::pre_images::PreImage;
use crate::{engine_error, DbResult};
use bson::Timestamp;
use shale_doc::{ErrorCode, MongoError};
use shale_engine::Txn;
use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The oplog's namespace.
pub const OPLOG_DB: &str = "local";
/// The oplog's collection, in `OPLOG_DB`.
pub const OPLOG_COLL: &str = "oplog.rs";

/// Where `ts` and the term come from (the replica set's logical clock, `server/repl`).
pub trait OplogClock: Send + Sync + std::fmt::Debug {
    /// `n` consecutive timestamps (`first`, then increments `+1` .. `+n-1` in the same
    /// second), later than every timestamp handed out before; and the current term.
    fn reserve(&self, n: u32) -> (Timestamp, i64);

    /// Moves the clock to at least `ts` (the oplog's newest entry at start).
    fn advance_to(&self, ts: Timestamp);
}

/// A step run in a logged transaction after its entries are written and before it commits,
/// with the newest entry's optime.
pub(crate) type BeforeCommit<'a> = &'a dyn Fn(&mut Txn, OpTime) -> DbResult<()>;

/// How a transaction's operations become entries.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Shape<'a> {
    /// One entry per operation (plain and retryable writes; `SessionInfo::stmt_id` is the
    /// statement's, `prev` the session's previous entry, chained through these entries).
    Each(Option<&'a SessionInfo>),
    /// One `applyOps` entry on `admin.$cmd` (a multi-document transaction, O3).
    ApplyOps(Option<&'a SessionInfo>),
}

/// The newest entry readers may see: its optime and wall time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LastEntry {
    /// Its optime.
    pub at: OpTime,
    /// Its wall time.
    pub wall: bson::DateTime,
}

struct Slots {
    tracker: SlotTracker,
    /// Finished slots not yet visible (an older one is still open): their last optime.
    hidden: BTreeMap<u64, LastEntry>,
    newest_visible: LastEntry,
}

/// The open oplog of a `--replSet` member.
pub struct Oplog {
    clock: Arc<dyn OplogClock>,
    pub(crate) coll: Arc<Collection>,
    slots: Mutex<Slots>,
    moved: Condvar,
    /// `--oplogSize` in bytes (O6).
    pub(crate) max_bytes: u64,
    pub(crate) truncating: AtomicBool,
    /// `config.system.preimages`, once a collection keeps pre-images (`pre_images.rs`).
    pub(crate) pre_images: std::sync::OnceLock<crate::pre_images::PreImageStore>,
}

impl std::fmt::Debug for Oplog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Oplog")
            .field("max_bytes", &self.max_bytes)
            .finish_non_exhaustive()
    }
}

thread_local! {
    /// The optime of the newest entry this thread's last logged commit wrote (mongod's
    /// client "last op": a write's `operationTime`).
    static LAST_OP: Cell<Option<OpTime>> = const { Cell::new(None) };
}

/// Takes the optime of the newest entry this thread wrote since the last call.
pub fn take_last_op() -> Option<OpTime> {
    LAST_OP.with(|c| c.take())
}

/// The `i`th timestamp of a reservation starting at `first` (same second, O1 order).
fn nth(first: Timestamp, i: u32) -> Timestamp {
    Timestamp {
        time: first.time,
        increment: first.increment + i,
    }
}

/// A reserved slot: finished (committed or not) when dropped, which moves the point.
struct SlotGuard<'a> {
    log: &'a Oplog,
    first: Timestamp,
    last: LastEntry,
    committed: bool,
}

impl Drop for SlotGuard<'_> {
    fn drop(&mut self) {
        let mut s = self.log.lock();
        s.tracker.finish(self.first);
        if self.committed {
            s.hidden.insert(pack(self.last.at.ts), self.last);
        }
        let visible = pack(s.tracker.visible());
        while let Some(entry) = s.hidden.first_entry() {
            if *entry.key() > visible {
                break;
            }
            let e = entry.remove();
            if pack(e.at.ts) > pack(s.newest_visible.at.ts) {
                s.newest_visible = e;
            }
        }
        drop(s);
        self.log.moved.notify_all();
    }
}

impl Oplog {
    /// The oplog over `coll`, whose newest entry is `newest` (O8: the clock was advanced
    /// past it by the caller).
    pub(crate) fn new(
        clock: Arc<dyn OplogClock>,
        coll: Arc<Collection>,
        newest: LastEntry,
        max_bytes: u64,
    ) -> Oplog {
        Oplog {
            clock,
            coll,
            slots: Mutex::new(Slots {
                tracker: SlotTracker::starting_at(newest.at.ts),
                hidden: BTreeMap::new(),
                newest_visible: newest,
            }),
            moved: Condvar::new(),
            max_bytes,
            truncating: AtomicBool::new(false),
            pre_images: std::sync::OnceLock::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Slots> {
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The newest `ts` readers may see (O5).
    pub fn visible(&self) -> Timestamp {
        self.lock().tracker.visible()
    }

    /// The newest visible entry (`hello.lastWrite`, `replSetGetStatus.optimes`).
    pub fn last_visible(&self) -> LastEntry {
        self.lock().newest_visible
    }

    /// Waits until the visibility point passes `after` or `deadline` comes; true if it did.
    pub fn wait_past(&self, after: Timestamp, deadline: Instant) -> bool {
        let mut s = self.lock();
        loop {
            if pack(s.tracker.visible()) > pack(after) {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            s = self
                .moved
                .wait_timeout(s, left.min(Duration::from_secs(1)))
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// Runs `f` with the newest reserved `ts` at a moment when no slot is open, holding the
    /// slots' lock so none opens meanwhile: every entry up to that `ts` has committed (or
    /// aborted) in the engine, and nothing after it has, so an engine snapshot taken in `f`
    /// is exactly the state at that cluster time (snapshot reads, `snapshot_read.rs`).
    /// `None` if slots stayed open until `deadline`. A caller that needs the database's
    /// data lock takes it first (logged writes hold it when they reserve a slot).
    pub(crate) fn at_quiet_point<R>(
        &self,
        deadline: Instant,
        f: impl FnOnce(Timestamp) -> R,
    ) -> Option<R> {
        let mut s = self.lock();
        while s.tracker.open_slots() > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            s = self
                .moved
                .wait_timeout(s, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        Some(f(s.tracker.visible()))
    }

    fn reserve(&self, n: u32, wall: bson::DateTime) -> SlotGuard<'_> {
        assert!(n > 0, "a slot holds at least one entry");
        let mut s = self.lock();
        let (first, term) = self.clock.reserve(n);
        let last = nth(first, n - 1);
        s.tracker.reserve_range(first, last);
        SlotGuard {
            log: self,
            first,
            last: LastEntry {
                at: OpTime { ts: last, term },
                wall,
            },
            committed: false,
        }
    }

    /// Writes the entries for `ops` and the `pre_images` of some of them into `txn` and
    /// commits it (O2: the entries and the changes are one engine commit). Returns the
    /// newest entry's optime.
    /// `before_commit` runs in `txn` once the entries are in, with the newest one's optime
    /// (a retryable write records it as the session's last entry).
    pub(crate) fn commit(
        &self,
        mut txn: Txn,
        ops: &[Operation],
        pre_images: &[PreImage],
        shape: Shape<'_>,
        before_commit: Option<BeforeCommit<'_>>,
    ) -> DbResult<()> {
        let n = match shape {
            Shape::Each(_) => ops.len() as u32,
            Shape::ApplyOps(_) => 1,
        };
        let wall = bson::DateTime::now();
        let mut slot = self.reserve(n, wall);
        let term = slot.last.at.term;
        let at = |i: u32| OpTime {
            ts: nth(slot.first, i),
            term,
        };
        let mut bytes = 0i64;
        let mut put = |txn: &mut Txn, ts: Timestamp, entry: &[u8]| -> DbResult<()> {
            bytes += entry.len() as i64;
            txn.put(&self.coll.docs, &entry_key(ts), entry)
                .map_err(engine_error)
        };
        let written = match shape {
            Shape::Each(session) => {
                let mut session = session.cloned();
                let mut result = Ok(());
                for (i, op) in ops.iter().enumerate() {
                    let at = at(i as u32);
                    let e = entry_document(op, at, wall, session.as_ref());
                    result = put(&mut txn, at.ts, e.as_bytes());
                    if result.is_err() {
                        break;
                    }
                    if let Some(s) = &mut session {
                        s.prev = at;
                    }
                }
                result
            }
            Shape::ApplyOps(session) => {
                let e = transaction_entry(ops, at(0), wall, session);
                refuse_past_the_document_limit(e.as_bytes().len())
                    .and_then(|()| put(&mut txn, at(0).ts, e.as_bytes()))
            }
        };
        let written =
            written.and_then(|_| self.put_pre_images(&mut txn, pre_images, shape, &at, wall));
        let written = written.and_then(|_| match before_commit {
            Some(f) => f(&mut txn, slot.last.at),
            None => Ok(()),
        });
        if let Err(e) = written {
            txn.abort();
            return Err(e);
        }
        txn.add_count(&self.coll.docs, i64::from(n));
        txn.add_count(&self.coll.size, bytes);
        txn.commit().map_err(engine_error)?;
        slot.committed = true;
        let last = slot.last.at;
        drop(slot);
        LAST_OP.with(|c| c.set(Some(last)));
        Ok(())
    }

    /// Puts each pre-image under its operation's `ts` and `applyOpsIndex`.
    fn put_pre_images(
        &self,
        txn: &mut Txn,
        pre_images: &[PreImage],
        shape: Shape<'_>,
        at: &dyn Fn(u32) -> OpTime,
        wall: bson::DateTime,
    ) -> DbResult<()> {
        let Some(store) = self.pre_images.get() else {
            return Ok(());
        };
        for image in pre_images {
            let i = image.op_index as u32;
            let (ts, index) = match shape {
                Shape::Each(_) => (at(i).ts, 0),
                Shape::ApplyOps(_) => (at(0).ts, i),
            };
            store.put(txn, image, ts, index, wall)?;
        }
        Ok(())
    }

    /// Bytes of entries held (the size counter).
    pub(crate) fn bytes(&self) -> i64 {
        self.coll.size.count()
    }

    /// Whether the oplog is past its bound (O6).
    pub(crate) fn over_bound(&self) -> bool {
        self.bytes() > self.max_bytes as i64
    }
}

/// A transaction is one `applyOps` entry (no `partialTxn` chain), so one whose entry would
/// pass a document's 16 MiB cannot commit on a member: `TransactionTooLarge`, as mongod 4.0
/// answers, before anything is written.
fn refuse_past_the_document_limit(bytes: usize) -> DbResult<()> {
    const LIMIT: usize = crate::doc_write::MAX_DOCUMENT_BYTES;
    if bytes <= LIMIT {
        return Ok(());
    }
    Err(MongoError::new(
        ErrorCode::TransactionTooLarge,
        format!(
            "Total size of all transaction operations must be less than {LIMIT}. Actual size \
             is {bytes}"
        ),
    ))
}
