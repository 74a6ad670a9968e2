//! Snapshot reads outside transactions (`readConcern: {level: "snapshot"}`, optionally
//! with `atClusterTime`, on `find`, `aggregate` and `distinct` of a `--replSet` member;
//! docs/transactions.md, Snapshot reads).
//!
//! A read without `atClusterTime` reads at the oplog's newest `ts` taken at a moment when
//! no oplog slot is open (`Oplog::at_quiet_point`), so the engine snapshot registered then
//! holds exactly the writes up to that cluster time; the server returns that time as
//! `atClusterTime`. The snapshot is kept ("pinned", with the catalog as it was) for the
//! history window (`minSnapshotHistoryWindowInSeconds`, mongod's default 300 s), so later
//! reads at that `atClusterTime` see the same state. A read at an `atClusterTime` is served
//! from the newest pin at or below it when no oplog entry lies between the two (then the
//! states are the same), or from a new pin when no entry lies between it and now; any other
//! time is `SnapshotTooOld` (239): this server keeps history only at the points its
//! snapshot reads established (mongod keeps every point of the window). A time past the
//! newest `ts` is `InvalidOptions` (72), as mongod refuses a time past its clock.
//!
//! While a [`SnapshotScope`] is alive on a thread, `Database::find` (and so `aggregate`,
//! `distinct` and `$lookup`'s scans) reads the pinned snapshot and plans against the pinned
//! catalog; a collection dropped, re-created or stripped of an index since is
//! `SnapshotUnavailable` (246), as mongod answers a snapshot older than a catalog change.
//! Never writes, and never reads the newest commit while a scope is active.

use crate::catalog::Collection;
use crate::namespace::Namespace;
use crate::oplog::entry::entry_key;
use crate::oplog::log::Oplog;
use crate::oplog::pack;
use crate::{engine_error, Database, DbResult};
use bson::Timestamp;
use shale_doc::{ErrorCode, MongoError};
use shale_engine::ReadView;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// mongod's default `minSnapshotHistoryWindowInSeconds`.
pub const DEFAULT_HISTORY_WINDOW_SECS: u64 = 300;

/// How long a read without `atClusterTime` waits for a moment with no oplog slot open.
const QUIET_WAIT: Duration = Duration::from_secs(2);

/// At most this many pins are kept; past it the oldest is dropped first.
const MAX_PINS: usize = 1024;

/// One snapshot kept for reads at its cluster time: the engine view and the catalog as of it.
#[derive(Debug)]
pub struct SnapshotRead {
    at: Timestamp,
    view: ReadView,
    catalog: BTreeMap<Namespace, Arc<Collection>>,
}

impl SnapshotRead {
    /// The cluster time this snapshot reads at (the reply's `atClusterTime`).
    pub fn at_cluster_time(&self) -> Timestamp {
        self.at
    }
}

struct Pin {
    read: Arc<SnapshotRead>,
    expires: Instant,
}

/// The pinned snapshots, by cluster time.
pub(crate) struct History {
    pins: Mutex<BTreeMap<u64, Pin>>,
    /// `minSnapshotHistoryWindowInSeconds`.
    window_secs: AtomicU64,
}

impl Default for History {
    fn default() -> History {
        History {
            pins: Mutex::new(BTreeMap::new()),
            window_secs: AtomicU64::new(DEFAULT_HISTORY_WINDOW_SECS),
        }
    }
}

impl std::fmt::Debug for History {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("History").finish_non_exhaustive()
    }
}

impl History {
    fn window(&self) -> Duration {
        Duration::from_secs(self.window_secs.load(Ordering::Relaxed))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Pin>> {
        self.pins.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The newest pin at or below `at`, refreshed for another window.
    fn at_or_below(&self, at: Timestamp) -> Option<Arc<SnapshotRead>> {
        let window = self.window();
        let mut pins = self.lock();
        let (_, pin) = pins.range_mut(..=pack(at)).next_back()?;
        pin.expires = Instant::now() + window;
        Some(pin.read.clone())
    }

    fn insert(&self, read: Arc<SnapshotRead>) -> Arc<SnapshotRead> {
        let expires = Instant::now() + self.window();
        let mut pins = self.lock();
        let pin = pins.entry(pack(read.at)).or_insert(Pin { read, expires });
        pin.expires = pin.expires.max(expires);
        let kept = pin.read.clone();
        while pins.len() > MAX_PINS {
            pins.pop_first();
        }
        kept
    }

    /// Drops the pins whose window has passed; returns how many are left.
    fn expire(&self, now: Instant) -> usize {
        let mut pins = self.lock();
        pins.retain(|_, p| p.expires > now);
        pins.len()
    }

    fn clear(&self) {
        self.lock().clear();
    }
}

thread_local! {
    static ACTIVE: RefCell<Option<Arc<SnapshotRead>>> = const { RefCell::new(None) };
}

/// While alive, the reads of this thread's operation read `read`'s snapshot. Restores what
/// was there before when dropped.
pub struct SnapshotScope {
    before: Option<Arc<SnapshotRead>>,
}

impl SnapshotScope {
    /// Makes `read` this thread's snapshot read until the scope is dropped.
    pub fn enter(read: Arc<SnapshotRead>) -> SnapshotScope {
        let before = ACTIVE.with(|a| a.borrow_mut().replace(read));
        SnapshotScope { before }
    }
}

impl Drop for SnapshotScope {
    fn drop(&mut self) {
        let before = self.before.take();
        ACTIVE.with(|a| *a.borrow_mut() = before);
    }
}

/// The snapshot this thread's operation reads at, if it is a snapshot read.
pub(crate) fn active() -> Option<Arc<SnapshotRead>> {
    ACTIVE.with(|a| a.borrow().clone())
}

impl SnapshotRead {
    /// The engine view to read through.
    pub(crate) fn view(&self) -> ReadView {
        self.view.clone()
    }

    /// The collection `ns` as of the snapshot, checked still readable: its trees and the
    /// indexes of that time must all still exist (a drop would have removed their trees).
    pub(crate) fn collection(
        &self,
        ns: &Namespace,
        now: Option<Arc<Collection>>,
    ) -> DbResult<Option<Arc<Collection>>> {
        let then = self.catalog.get(ns).cloned();
        let unchanged = match (&then, &now) {
            (None, None) => true,
            (Some(t), Some(n)) => {
                t.id == n.id
                    && t.indexes
                        .iter()
                        .all(|ti| n.indexes.iter().any(|ni| ni.id == ti.id))
            }
            _ => false,
        };
        if !unchanged {
            return Err(MongoError::new(
                ErrorCode::SnapshotUnavailable,
                format!(
                    "Unable to read from a snapshot due to pending collection catalog changes \
                     to {ns}; please retry the operation. Snapshot timestamp is {}.",
                    show(self.at)
                ),
            ));
        }
        Ok(then)
    }
}

fn show(ts: Timestamp) -> String {
    format!("Timestamp({}, {})", ts.time, ts.increment)
}

impl Database {
    /// The snapshot a `readConcern: {level: "snapshot"}` read outside a transaction reads
    /// at: the newest cluster time when `at` is `None`, else `at` (module docs). Refused on
    /// a database that keeps no oplog (a standalone has no cluster time).
    pub fn snapshot_read(&self, at: Option<Timestamp>) -> DbResult<Arc<SnapshotRead>> {
        let Some(oplog) = self.oplog() else {
            return Err(MongoError::new(
                ErrorCode::NotAReplicaSet,
                "node needs to be a replica set member to use read concern snapshot",
            ));
        };
        let Some(at) = at else {
            return self.pin_now(oplog);
        };
        let newest = oplog.visible();
        if pack(at) > pack(newest) {
            return Err(MongoError::new(
                ErrorCode::InvalidOptions,
                format!(
                    "readConcern atClusterTime value {} must not be greater than the current \
                     clusterTime {}",
                    show(at),
                    show(newest)
                ),
            ));
        }
        if let Some(pin) = self.snapshots.at_or_below(at) {
            if !entries_between(oplog, pin.at, at)? {
                return Ok(pin);
            }
        }
        let now = self.pin_now(oplog)?;
        if !entries_between(oplog, at, now.at)? {
            return Ok(now);
        }
        Err(MongoError::new(
            ErrorCode::SnapshotTooOld,
            format!(
                "Read timestamp {} is older than the oldest available timestamp.",
                show(at)
            ),
        ))
    }

    /// Drops the pinned snapshots whose window has passed (the server's reaper calls this).
    pub fn expire_snapshot_history(&self) -> usize {
        self.snapshots.expire(Instant::now())
    }

    /// Sets `minSnapshotHistoryWindowInSeconds` (pins already made keep their expiry).
    pub fn set_snapshot_history_window(&self, secs: u64) {
        self.snapshots.window_secs.store(secs, Ordering::Relaxed);
    }

    /// `minSnapshotHistoryWindowInSeconds`.
    pub fn snapshot_history_window(&self) -> u64 {
        self.snapshots.window().as_secs()
    }

    pub(crate) fn drop_snapshot_history(&self) {
        self.snapshots.clear();
    }

    /// A snapshot at the newest cluster time, pinned.
    fn pin_now(&self, oplog: &Oplog) -> DbResult<Arc<SnapshotRead>> {
        let deadline = Instant::now() + QUIET_WAIT;
        // The data lock (no DDL while the catalog is copied) is taken before the oplog's
        // slot lock, the order every logged write takes them in.
        let _guard = self.data_lock();
        let taken = oplog.at_quiet_point(deadline, |at| {
            let catalog = self
                .catalog
                .list(None)
                .into_iter()
                .map(|c| (c.ns.clone(), c))
                .collect();
            SnapshotRead {
                at,
                view: self.engine().read_view(),
                catalog,
            }
        });
        let Some(read) = taken else {
            return Err(MongoError::new(
                ErrorCode::SnapshotUnavailable,
                "Unable to read from a snapshot: writes kept the oplog busy; please retry \
                 the operation",
            ));
        };
        Ok(self.snapshots.insert(Arc::new(read)))
    }
}

/// Whether the oplog holds an entry with `from < ts <= to`.
fn entries_between(oplog: &Oplog, from: Timestamp, to: Timestamp) -> DbResult<bool> {
    if pack(to) <= pack(from) {
        return Ok(false);
    }
    let mut cursor = oplog.coll.docs.cursor();
    cursor
        .seek(&entry_key(crate::oplog::unpack(pack(from) + 1)))
        .map_err(engine_error)?;
    Ok(match cursor.entry() {
        Some((key, _)) => key <= &entry_key(to)[..],
        None => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_are_found_at_or_below_a_time_and_expire() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Database::open(dir.path(), crate::DbOptions::default()).expect("open");
        let h = History::default();
        let ts = |i| Timestamp {
            time: 10,
            increment: i,
        };
        let read = |i| {
            Arc::new(SnapshotRead {
                at: ts(i),
                view: db.engine().read_view(),
                catalog: BTreeMap::new(),
            })
        };
        h.insert(read(2));
        h.insert(read(5));
        assert!(h.at_or_below(ts(1)).is_none());
        assert_eq!(h.at_or_below(ts(4)).map(|r| r.at), Some(ts(2)));
        assert_eq!(h.at_or_below(ts(9)).map(|r| r.at), Some(ts(5)));
        assert_eq!(h.expire(Instant::now()), 2);
        assert_eq!(h.expire(Instant::now() + Duration::from_secs(301)), 0);
        drop(h);
        db.close().expect("close");
    }

    #[test]
    fn a_scope_is_seen_on_its_thread_only_while_alive() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Database::open(dir.path(), crate::DbOptions::default()).expect("open");
        let read = Arc::new(SnapshotRead {
            at: Timestamp {
                time: 1,
                increment: 1,
            },
            view: db.engine().read_view(),
            catalog: BTreeMap::new(),
        });
        assert!(active().is_none());
        {
            let _scope = SnapshotScope::enter(read.clone());
            assert!(active().is_some());
            std::thread::spawn(|| assert!(active().is_none()))
                .join()
                .expect("thread");
        }
        assert!(active().is_none());
        drop(read);
        db.close().expect("close");
    }

    #[test]
    fn a_standalone_refuses_snapshot_reads() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Database::open(dir.path(), crate::DbOptions::default()).expect("open");
        let e = db.snapshot_read(None).expect_err("no oplog");
        assert_eq!(e.code, ErrorCode::NotAReplicaSet);
        db.close().expect("close");
    }
}
