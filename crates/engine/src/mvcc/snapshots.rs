//! Commit timestamps and the registry of open snapshots.
//!
//! A commit's timestamp (`Ts`) is the log position just past its commit record, so it grows
//! with the log and across restarts (the log is never rewound below a durable checkpoint,
//! M1 in docs/recovery.md). Every version in a leaf entry and every buffered message carries
//! the timestamp of the commit that wrote it; a reader at snapshot `S` sees exactly the
//! commits with `ts <= S`.
//!
//! The registry owns two numbers: `visible`, the newest commit every tree has fully applied
//! (a new snapshot reads as of it), and the set of registered snapshots. The *horizon* is the
//! oldest registered snapshot, or `visible` when none is registered: versions older than the
//! newest one at or below the horizon can be seen by nobody and are collected (M2).
//!
//! It must never: hand out a snapshot below a horizon that collection already used (a new
//! snapshot reads `visible`, which only grows, and the horizon never exceeds `visible`).
//!
//! A commit is applied and published before its log record is durable (group commit waits
//! after). When commits are fsynced (`FsyncPolicy::EveryCommit`) a published commit is not
//! yet visible: new snapshots and point reads read at most the log's durable position (M3),
//! so no reader sees a commit whose fsync may still fail, and the writer, which returns only
//! once its record is durable, reads its own write. Under `EveryMillis` commits are
//! acknowledged before they are durable and are visible when published; if the log then
//! fails, the environment is poisoned and `freeze` caps new snapshots at the durable
//! position, so commits the failure lost are not read after it (issue 29). The horizon never
//! passes the durable position either (`track_durable`), so everything a capped snapshot
//! needs is still there: collection only drops versions shadowed at or below it.

use super::status::TxnStatus;
use crate::vocab::Ts;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Open snapshots and the newest fully applied commit.
#[derive(Debug)]
pub struct Snapshots {
    visible: AtomicU64,
    /// New snapshots read at most this (`freeze`); `u64::MAX` until then.
    cap: AtomicU64,
    /// The log's durable position once the log is open (`track_durable`).
    durable: std::sync::OnceLock<Arc<AtomicU64>>,
    /// Whether `visible` is capped at `durable` (M3: commits are fsynced).
    visible_once_durable: std::sync::atomic::AtomicBool,
    /// Registered snapshot timestamp → (how many holders, when the oldest holder registered).
    open: Mutex<BTreeMap<Ts, (usize, Instant)>>,
    /// Which transactions' provisional versions readers see (`status.rs`).
    status: TxnStatus,
}

impl Snapshots {
    /// A registry whose newest visible commit is `visible`.
    pub fn new(visible: Ts) -> Arc<Snapshots> {
        Arc::new(Snapshots {
            visible: AtomicU64::new(visible.0),
            cap: AtomicU64::new(u64::MAX),
            durable: std::sync::OnceLock::new(),
            visible_once_durable: std::sync::atomic::AtomicBool::new(false),
            open: Mutex::new(BTreeMap::new()),
            status: TxnStatus::default(),
        })
    }

    /// The transaction status table: what a provisional stamp stands for.
    pub fn status(&self) -> &TxnStatus {
        &self.status
    }

    /// The newest commit that every tree has fully applied and, when commits are fsynced
    /// (M3) or after `freeze`, whose log record is durable. Every reader's timestamp comes
    /// from here: snapshots (`register`) and point reads (`Tree::get`).
    pub fn visible(&self) -> Ts {
        let mut visible = self.visible.load(Ordering::Acquire);
        // M3: not past the durable log when commits are fsynced. Both numbers only grow, so
        // neither does their minimum (M2 relies on that).
        if self.visible_once_durable.load(Ordering::Relaxed) {
            if let Some(d) = self.durable.get() {
                visible = visible.min(d.load(Ordering::Acquire));
            }
        }
        Ts(visible.min(self.cap.load(Ordering::Acquire)))
    }

    /// From now on the horizon stays at or below the log's durable position, read from
    /// `durable` (the log's counter), and, if `visible_once_durable` (commits are fsynced,
    /// M3), so does what readers see. Called once, when the log opens after recovery.
    pub fn track_durable(&self, durable: Arc<AtomicU64>, visible_once_durable: bool) {
        let _ = self.durable.set(durable);
        self.visible_once_durable
            .store(visible_once_durable, Ordering::Relaxed);
    }

    /// The environment failed: new snapshots read nothing past the durable log, so commits
    /// whose records never became durable (never acknowledged) are not read.
    pub fn freeze(&self) {
        if let Some(d) = self.durable.get() {
            self.cap
                .fetch_min(d.load(Ordering::Acquire), Ordering::AcqRel);
        }
    }

    /// Publishes `ts` as applied everywhere. Commits are applied one at a time under the
    /// environment's apply lock, so `ts` only grows.
    pub fn publish(&self, ts: Ts) {
        let prev = self.visible.swap(ts.0, Ordering::AcqRel);
        assert!(
            prev <= ts.0,
            "commit timestamps go backwards: {prev} then {}",
            ts.0
        );
    }

    /// Registers a snapshot at the newest visible commit; the guard unregisters it.
    pub fn register(self: &Arc<Self>) -> SnapshotGuard {
        let mut open = self.open.lock();
        // Read under the registry lock: a horizon computed before this point was at most
        // `visible`, so nothing this snapshot needs has been collected (M2).
        let ts = self.visible();
        open.entry(ts).or_insert((0, Instant::now())).0 += 1;
        SnapshotGuard {
            registry: self.clone(),
            ts,
        }
    }

    /// The oldest timestamp any reader may still ask for (M2).
    pub fn horizon(&self) -> Ts {
        let horizon = self.lock_horizon();
        // Never past the cap either: the log may still grow durable after a freeze (a node
        // write failed, not the log), and a capped snapshot needs what lies below the cap.
        let cap = Ts(self.cap.load(Ordering::Acquire));
        match self.durable.get() {
            Some(d) => horizon.min(Ts(d.load(Ordering::Acquire))).min(cap),
            None => horizon.min(cap),
        }
    }

    /// The oldest snapshot a key-lock request may still carry (L2): the oldest registered
    /// snapshot, or what a new one reads. Unlike `horizon` it is not held at the durable log:
    /// that cap keeps the versions a snapshot taken after a `freeze` may read, but such a
    /// snapshot belongs to a poisoned environment, whose commits are refused under the apply
    /// lock, so a conflict it misses can never commit. Lock entries of commits at or below it
    /// can go at once; held at the durable log they piled up for a whole fsync interval.
    pub fn lock_horizon(&self) -> Ts {
        let open = self.open.lock();
        match open.keys().next() {
            Some(&oldest) => oldest,
            None => self.visible(),
        }
    }

    /// Registered snapshots (each holder counted).
    pub fn open_count(&self) -> u64 {
        self.open.lock().values().map(|(n, _)| *n as u64).sum()
    }

    /// Milliseconds since the oldest registered snapshot was taken (0 with none).
    pub fn oldest_age_ms(&self) -> u64 {
        let open = self.open.lock();
        open.values()
            .map(|(_, since)| since.elapsed().as_millis() as u64)
            .max()
            .unwrap_or(0)
    }

    fn release(&self, ts: Ts) {
        let mut open = self.open.lock();
        #[allow(
            clippy::expect_used,
            reason = "a snapshot is released once, by the guard its registration returned"
        )]
        let slot = open.get_mut(&ts).expect("released snapshot was registered");
        slot.0 -= 1;
        if slot.0 == 0 {
            open.remove(&ts);
        }
    }
}

/// A registered snapshot; versions it can see are kept until it is dropped.
#[derive(Debug)]
pub struct SnapshotGuard {
    registry: Arc<Snapshots>,
    ts: Ts,
}

impl SnapshotGuard {
    /// The commit timestamp the snapshot reads as of.
    pub fn ts(&self) -> Ts {
        self.ts
    }
}

impl Drop for SnapshotGuard {
    fn drop(&mut self) {
        self.registry.release(self.ts);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn horizon_is_the_oldest_registered_snapshot_else_visible() {
        let s = Snapshots::new(Ts(10));
        assert_eq!(s.horizon(), Ts(10));
        let a = s.register();
        s.publish(Ts(20));
        let b = s.register();
        assert_eq!((a.ts(), b.ts()), (Ts(10), Ts(20)));
        assert_eq!(s.horizon(), Ts(10));
        drop(a);
        assert_eq!(s.horizon(), Ts(20));
        s.publish(Ts(30));
        assert_eq!(s.horizon(), Ts(20));
        drop(b);
        assert_eq!(s.horizon(), Ts(30));
        assert_eq!(s.open_count(), 0);
    }

    #[test]
    fn commits_are_visible_once_durable_when_they_are_fsynced() {
        let s = Snapshots::new(Ts(10));
        let durable = Arc::new(AtomicU64::new(10));
        s.track_durable(durable.clone(), true);
        s.publish(Ts(20));
        assert_eq!(s.visible(), Ts(10), "published, not yet durable (M3)");
        assert_eq!(s.register().ts(), Ts(10));
        durable.store(20, Ordering::Release);
        assert_eq!(s.visible(), Ts(20));
        s.publish(Ts(30));
        s.freeze();
        durable.store(30, Ordering::Release);
        assert_eq!(
            s.visible(),
            Ts(20),
            "after a failure, the durable point then"
        );
    }

    #[test]
    fn without_fsynced_commits_a_published_commit_is_visible() {
        let s = Snapshots::new(Ts(10));
        s.track_durable(Arc::new(AtomicU64::new(10)), false);
        s.publish(Ts(20));
        assert_eq!(s.visible(), Ts(20));
        assert_eq!(s.horizon(), Ts(10), "the horizon stays at the durable log");
    }

    #[test]
    #[should_panic(expected = "backwards")]
    fn timestamps_never_go_backwards() {
        let s = Snapshots::new(Ts(10));
        s.publish(Ts(9));
    }
}
