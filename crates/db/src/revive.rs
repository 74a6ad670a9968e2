//! Writing again after the engine failed on a full device (issue 29 item 4;
//! docs/operations.md, Disk full).
//!
//! When a write fails because the data directory's device is full, the engine refuses every
//! later write with `OutOfDiskSpace` (14031) while reads go on as of the durable log (M2 in
//! docs/recovery.md). Once space has been freed, the next operation reopens the engine in
//! place (`Env::reopen`: recovery's procedure on the same files, the log cut back to its
//! durable end first, W11), so writes go on without a restart and the failed write is never
//! read. The database's part is to reopen only when that is safe and worth it:
//! - with no operation in flight: it takes the DDL lock, without waiting;
//! - with nothing left that reads the failed environment: every client cursor is killed
//!   (`CursorNotFound` on its next `getMore`) and every session transaction aborted;
//! - only after a full device and once the file system has room again, looked at once per
//!   `LOOK_MS` (a `statvfs`), so a device still full costs no recovery per operation; after
//!   a reopen that failed, not again for `BACKOFF_MS`.
//!
//! It must never wait for the DDL lock (the calling thread may hold the data lock already;
//! the next operation tries again), nor reopen after another failure: an I/O error other
//! than ENOSPC or a background thread's panic needs the operator (a restart, or
//! `shale verify`).

use crate::catalog::Index;
use crate::namespace::Namespace;
use crate::Database;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// How often a failed database looks at the file system's room (one `statvfs`).
const LOOK_MS: u64 = 100;
/// How long it waits after a reopen that failed (recovery itself failed) before the next.
const BACKOFF_MS: u64 = 5_000;
/// The room the file system must have before a reopen is tried: what recovery and the
/// first writes after it need, with margin.
const FREE_BYTES_MIN: u64 = 8 << 20;

/// An index whose build failed with the engine and could not be removed then (B6): its
/// collection's namespace and id, and the index.
type FailedBuild = (Namespace, u64, Arc<Index>);

/// When the next attempt may be made, in milliseconds since `epoch`, and what the next
/// reopen must finish.
pub(crate) struct Revival {
    epoch: Instant,
    next_ms: AtomicU64,
    failed_builds: Mutex<Vec<FailedBuild>>,
}

impl Default for Revival {
    fn default() -> Self {
        Revival {
            epoch: Instant::now(),
            next_ms: AtomicU64::new(0),
            failed_builds: Mutex::new(Vec::new()),
        }
    }
}

impl std::fmt::Debug for Revival {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Revival")
            .field("next_ms", &self.next_ms)
            .field(
                "failed_builds",
                &self.failed_builds.lock().map_or(0, |f| f.len()),
            )
            .finish()
    }
}

impl Revival {
    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// Claims the attempt due now, if one is due and no other thread claimed it; the next
    /// is due `LOOK_MS` later.
    fn claim(&self) -> bool {
        let now = self.now_ms();
        let next = self.next_ms.load(Ordering::Relaxed);
        now >= next
            && self
                .next_ms
                .compare_exchange(next, now + LOOK_MS, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
    }

    /// `index` of collection `coll_id` at `ns` failed its build with the engine: the next
    /// reopen removes it (B6 in index_build.rs).
    pub(crate) fn remove_after_reopen(&self, ns: &Namespace, coll_id: u64, index: &Arc<Index>) {
        let mut failed = self.failed_builds.lock().unwrap_or_else(|p| p.into_inner());
        failed.push((ns.clone(), coll_id, index.clone()));
    }

    /// A reopen failed: the next attempt waits `BACKOFF_MS`.
    fn back_off(&self) {
        self.next_ms
            .store(self.now_ms() + BACKOFF_MS, Ordering::Release);
    }
}

impl Database {
    /// Before an operation takes the data or DDL lock: reopens the engine if it failed on a
    /// full device that has room again. Two atomic loads while the engine is healthy.
    pub(crate) fn revive_if_failed(&self) {
        if self.env.has_failed() {
            self.try_revive();
        }
    }

    #[cold]
    fn try_revive(&self) {
        if !self.revival.claim() {
            return;
        }
        let Some(reason) = self.env.failure() else {
            return;
        };
        if !shale_engine::Error::Poisoned(reason.clone()).is_out_of_space() {
            return;
        }
        let room = shale_io::fs_space(self.env.dir()).map_or(0, |s| s.available_bytes);
        if room < FREE_BYTES_MIN {
            return;
        }
        let Ok(_ddl) = self.ddl.try_write() else {
            return;
        };
        let cursors = self.cursors.kill_all();
        let txns = self.kill_user_txns("the storage engine was reopened after a full device");
        match self.env.reopen() {
            Ok(()) => {
                tracing::warn!(
                    failure = %reason,
                    free_bytes = room,
                    cursors_killed = cursors,
                    transactions_aborted = txns,
                    "space was freed: the storage engine was reopened in place and takes writes again"
                );
                self.remove_failed_builds();
            }
            Err(e) => {
                self.revival.back_off();
                tracing::warn!(
                    error = %e,
                    "the storage engine could not be reopened yet; writes stay refused"
                )
            }
        }
    }
}

impl Database {
    /// B6: removes the indexes whose builds failed with the engine, now that it writes
    /// again (the caller holds the DDL lock, as a build's own removal does). One that
    /// cannot be removed yet waits for the next reopen.
    fn remove_failed_builds(&self) {
        let failed = {
            let mut list = self
                .revival
                .failed_builds
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            std::mem::take(&mut *list)
        };
        for (ns, coll_id, index) in failed {
            let Ok(coll) = self.live_collection(&ns, coll_id, &index) else {
                continue; // dropped since, with its collection or by `dropIndexes`
            };
            match self.remove_index(&coll, &index) {
                Ok(()) => tracing::warn!(%ns, index = %index.def.name,
                    "the index whose build failed on the full device was removed"),
                Err(e) => {
                    tracing::warn!(%ns, index = %index.def.name, error = %e,
                        "the index whose build failed could not be removed yet");
                    self.revival.remove_after_reopen(&ns, coll_id, &index);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_attempt_per_interval_and_a_longer_wait_after_a_failed_one() {
        let r = Revival::default();
        assert!(r.claim(), "the first attempt is due at once");
        assert!(!r.claim(), "the next one waits for the interval");
        r.back_off();
        let next = r.next_ms.load(Ordering::Relaxed);
        assert!(next >= r.now_ms() + BACKOFF_MS - LOOK_MS);
    }
}
