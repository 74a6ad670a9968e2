//! Fault injection for tests: fail the n-th write or fsync, or tear the n-th write (only a
//! prefix reaches the file, then the call fails, as a power cut mid-write would leave it).
//! Bit flips need no injector: tests flip bits in the files themselves and reopen.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// One planned fault. Counts start at 1: `after: 1` hits the next matching call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The `after`-th write fails with nothing written.
    FailWrite { after: u64 },
    /// The `after`-th fsync fails.
    FailSync { after: u64 },
    /// The `after`-th write stores only its first `keep_bytes` bytes, then fails.
    TornWrite { after: u64, keep_bytes: usize },
    /// The `after`-th write stores only its first `keep_bytes` bytes, then fails with
    /// ENOSPC (os error 28), as on a device that filled up mid-write. Unlike the others it
    /// does not stick: later calls proceed, as after the space is freed again.
    NoSpace { after: u64, keep_bytes: usize },
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

/// A shared fault plan. Once a fault fires, every later write and fsync fails too, as a
/// device that died would: the engine must stay failed until it is reopened.
#[derive(Debug, Default)]
pub struct FaultInjector {
    plan: Mutex<Option<Fault>>,
    writes: AtomicU64,
    syncs: AtomicU64,
    tripped: std::sync::atomic::AtomicBool,
}

impl FaultInjector {
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

    pub(crate) fn on_sync(&self) -> bool {
        if self.tripped() {
            return false;
        }
        let n = self.syncs.fetch_add(1, Ordering::SeqCst) + 1;
        let plan = *self.plan.lock().expect("fault plan lock");
        let fail = matches!(plan, Some(Fault::FailSync { after }) if after == n);
        if fail {
            self.tripped.store(true, Ordering::SeqCst);
        }
        !fail
    }
}
