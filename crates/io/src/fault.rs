//! Fault injection for tests: fail the n-th write or fsync, or tear the n-th write (only a
//! prefix reaches the file, then the call fails, as a power cut mid-write would leave it).
//! Bit flips need no injector: tests flip bits in the files themselves and reopen.
//! A test can also hold the next fsync until it says so (`hold_next_sync`), to act while a
//! write is on its way to the disk, and then let that fsync succeed or fail.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};

/// One planned fault. Counts start at 1: `after: 1` hits the next matching call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The `after`-th write fails with nothing written.
    FailWrite {
        /// Which write, counting from 1.
        after: u64,
    },
    /// The `after`-th fsync fails.
    FailSync {
        /// Which fsync, counting from 1.
        after: u64,
    },
    /// The `after`-th write stores only its first `keep_bytes` bytes, then fails.
    TornWrite {
        /// Which write, counting from 1.
        after: u64,
        /// How many of its bytes reach the file.
        keep_bytes: usize,
    },
    /// The `after`-th write stores only its first `keep_bytes` bytes, then fails with
    /// ENOSPC (os error 28), as on a device that filled up mid-write. Unlike the others it
    /// does not stick: later calls proceed, as after the space is freed again.
    NoSpace {
        /// Which write, counting from 1.
        after: u64,
        /// How many of its bytes reach the file.
        keep_bytes: usize,
    },
}

/// What the file layer should do with one write call.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum WriteVerdict {
    Proceed,
    Fail,
    Tear(usize),
    /// Store this prefix, then fail with ENOSPC; later calls are not failed.
    NoSpace(usize),
}

/// What the file layer should do with one fsync call.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum SyncVerdict {
    Proceed,
    Fail,
    /// Fail with ENOSPC (as `fdatasync` does when delayed allocation finds no room); later
    /// calls are not failed.
    NoSpace,
}

/// The fsync a test holds (`FaultInjector::hold_next_sync`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum SyncHold {
    #[default]
    Idle,
    /// The next fsync is held; once released it fails with ENOSPC if `fail`.
    Armed { fail: bool },
    /// An fsync is waiting for `release_held_sync`.
    Holding { fail: bool },
    /// Released; the held call goes on.
    Released { fail: bool },
}

/// A shared fault plan. Once a fault fires, every later write and fsync fails too, as a
/// device that died would: the engine must stay failed until it is reopened.
#[derive(Debug, Default)]
pub struct FaultInjector {
    plan: Mutex<Option<Fault>>,
    writes: AtomicU64,
    syncs: AtomicU64,
    tripped: std::sync::atomic::AtomicBool,
    hold: Mutex<SyncHold>,
    hold_changed: Condvar,
}

#[allow(
    clippy::expect_used,
    reason = "a lock here is poisoned only by a test's assert failing while it is held; failing again is right"
)]
impl FaultInjector {
    /// An injector with `fault` planned from the start.
    pub fn new(fault: Fault) -> Self {
        FaultInjector {
            plan: Mutex::new(Some(fault)),
            ..Default::default()
        }
    }

    /// Plans the next write (of any file) to fail, counting from now.
    pub fn fail_next_write(&self) {
        let after = self.writes.load(Ordering::SeqCst) + 1;
        *self.plan.lock().expect("fault plan lock") = Some(Fault::FailWrite { after });
    }

    /// Plans the next write (of any file) to store `keep_bytes` and fail with ENOSPC,
    /// counting from now (`Fault::NoSpace`).
    pub fn no_space_on_next_write(&self, keep_bytes: usize) {
        let after = self.writes.load(Ordering::SeqCst) + 1;
        *self.plan.lock().expect("fault plan lock") = Some(Fault::NoSpace { after, keep_bytes });
    }

    /// Holds the next fsync (of any file) inside the call, before it reaches the disk, until
    /// `release_held_sync`; it then fails with ENOSPC if `then_fail` (not sticky, as
    /// `Fault::NoSpace`), else goes on.
    pub fn hold_next_sync(&self, then_fail: bool) {
        let mut hold = self.hold.lock().expect("sync hold lock");
        assert_eq!(*hold, SyncHold::Idle, "one held fsync at a time");
        *hold = SyncHold::Armed { fail: then_fail };
    }

    /// Blocks until the fsync armed by `hold_next_sync` is being held.
    pub fn wait_until_sync_held(&self) {
        let mut hold = self.hold.lock().expect("sync hold lock");
        while !matches!(*hold, SyncHold::Holding { .. }) {
            hold = self.hold_changed.wait(hold).expect("sync hold lock");
        }
    }

    /// Lets the held fsync go on (and fail, if it was armed to).
    pub fn release_held_sync(&self) {
        let mut hold = self.hold.lock().expect("sync hold lock");
        let SyncHold::Holding { fail } = *hold else {
            panic!("no fsync is held: {:?}", *hold);
        };
        *hold = SyncHold::Released { fail };
        self.hold_changed.notify_all();
    }

    /// True once the planned fault has fired.
    pub fn tripped(&self) -> bool {
        self.tripped.load(Ordering::SeqCst)
    }

    pub(crate) fn on_write(&self) -> WriteVerdict {
        if self.tripped() {
            return WriteVerdict::Fail;
        }
        let n = self.writes.fetch_add(1, Ordering::SeqCst) + 1;
        let plan = *self.plan.lock().expect("fault plan lock");
        let verdict = match plan {
            Some(Fault::FailWrite { after }) if after == n => WriteVerdict::Fail,
            Some(Fault::TornWrite { after, keep_bytes }) if after == n => {
                WriteVerdict::Tear(keep_bytes)
            }
            Some(Fault::NoSpace { after, keep_bytes }) if after == n => {
                return WriteVerdict::NoSpace(keep_bytes);
            }
            _ => WriteVerdict::Proceed,
        };
        if verdict != WriteVerdict::Proceed {
            self.tripped.store(true, Ordering::SeqCst);
        }
        verdict
    }

    pub(crate) fn on_sync(&self) -> SyncVerdict {
        if self.tripped() {
            return SyncVerdict::Fail;
        }
        if let Some(fail) = self.wait_if_held() {
            if fail {
                return SyncVerdict::NoSpace;
            }
        }
        let n = self.syncs.fetch_add(1, Ordering::SeqCst) + 1;
        let plan = *self.plan.lock().expect("fault plan lock");
        let fail = matches!(plan, Some(Fault::FailSync { after }) if after == n);
        if fail {
            self.tripped.store(true, Ordering::SeqCst);
            return SyncVerdict::Fail;
        }
        SyncVerdict::Proceed
    }

    /// If the next fsync was armed to be held, holds this one until released; returns
    /// whether it must then fail.
    fn wait_if_held(&self) -> Option<bool> {
        let mut hold = self.hold.lock().expect("sync hold lock");
        let SyncHold::Armed { fail } = *hold else {
            return None;
        };
        *hold = SyncHold::Holding { fail };
        self.hold_changed.notify_all();
        while matches!(*hold, SyncHold::Holding { .. }) {
            hold = self.hold_changed.wait(hold).expect("sync hold lock");
        }
        *hold = SyncHold::Idle;
        Some(fail)
    }
}
