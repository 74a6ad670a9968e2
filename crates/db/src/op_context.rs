//! What the operation running on this thread carries into the database: the flag `killOp`
//! raises to interrupt it, and the work its scans have done (keys and documents examined,
//! for the profiler). mongod keeps both on its OperationContext; the server runs each
//! command inside an [`OpScope`] on the thread that runs it, and the executor checks the
//! flag once per document its scans reach (`exec.rs`, `Scan::next`): a find, an
//! aggregation's leading query, a getMore's batch and an update's or delete's scan all stop
//! there with mongod's `Interrupted` (11601).
//!
//! The same check enforces the operation's `maxTimeMS` (`set_deadline`): past its deadline
//! it fails with `MaxTimeMSExpired` (50). Only an operation with a deadline reads the clock.
//!
//! The flag belongs to the caller (one per connection, reused by its commands); this module
//! never allocates per operation and never blocks. A thread with no scope is never
//! interrupted and counts nothing.

use crate::DbResult;
use shale_doc::{ErrorCode, MongoError};
use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// The interrupt flag an operation's owner raises (`killOp`) and its thread checks.
#[derive(Debug, Default)]
pub struct Interrupt {
    killed: AtomicBool,
}

impl Interrupt {
    /// Asks the operation to stop at its next check.
    pub fn kill(&self) {
        self.killed.store(true, Ordering::Release);
    }

    /// Clears the flag for the next operation.
    pub fn reset(&self) {
        self.killed.store(false, Ordering::Release);
    }

    /// Whether a kill was asked for.
    pub fn is_killed(&self) -> bool {
        self.killed.load(Ordering::Acquire)
    }
}

/// Work counted for the operation on this thread.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct OpWork {
    /// Index keys read (`keysExamined`).
    pub keys_examined: u64,
    /// Documents read (`docsExamined`).
    pub docs_examined: u64,
}

thread_local! {
    static CURRENT: RefCell<Option<Arc<Interrupt>>> = const { RefCell::new(None) };
    static WORK: Cell<OpWork> = const { Cell::new(OpWork { keys_examined: 0, docs_examined: 0 }) };
    static DEADLINE: Cell<Option<Instant>> = const { Cell::new(None) };
    static DISK_USE: Cell<Option<bool>> = const { Cell::new(None) };
}

/// While alive, the operation on this thread may be interrupted through `interrupt` and
/// its scans' work is counted from zero. Restores what was there before when dropped.
pub struct OpScope {
    previous: Option<Arc<Interrupt>>,
    previous_work: OpWork,
    previous_deadline: Option<Instant>,
    previous_disk_use: Option<bool>,
}

/// Runs the rest of this thread's operation under `interrupt` (see [`OpScope`]).
pub fn op_scope(interrupt: Arc<Interrupt>) -> OpScope {
    let previous = CURRENT.with(|c| c.replace(Some(interrupt)));
    let previous_work = WORK.with(|w| w.replace(OpWork::default()));
    let previous_deadline = DEADLINE.with(|d| d.replace(None));
    let previous_disk_use = DISK_USE.with(|d| d.replace(None));
    OpScope {
        previous,
        previous_work,
        previous_deadline,
        previous_disk_use,
    }
}

impl OpScope {
    /// The operation fails with `MaxTimeMSExpired` at its first check after `deadline`
    /// (its `maxTimeMS`), until the scope ends.
    pub fn set_deadline(&self, deadline: Instant) {
        DEADLINE.with(|d| d.set(Some(deadline)));
    }

    /// The command's `allowDiskUse`: whether its blocking sorts may spill to disk
    /// (`spill_sort.rs`; unset: mongod 7.0's default, allowed), until the scope ends.
    pub fn set_allow_disk_use(&self, allowed: bool) {
        DISK_USE.with(|d| d.set(Some(allowed)));
    }

    /// The work counted since the scope began.
    pub fn work(&self) -> OpWork {
        WORK.with(Cell::get)
    }
}

impl Drop for OpScope {
    fn drop(&mut self) {
        CURRENT.with(|c| *c.borrow_mut() = self.previous.take());
        WORK.with(|w| w.set(self.previous_work));
        DEADLINE.with(|d| d.set(self.previous_deadline));
        DISK_USE.with(|d| d.set(self.previous_disk_use));
    }
}

/// `Interrupted` (11601) if the operation on this thread was killed; mongod's message.
pub fn check_interrupt() -> DbResult<()> {
    let killed = CURRENT.with(|c| c.borrow().as_ref().is_some_and(|i| i.is_killed()));
    if killed {
        return Err(interrupted());
    }
    match DEADLINE.with(Cell::get) {
        Some(deadline) if Instant::now() >= deadline => Err(MongoError::new(
            ErrorCode::MaxTimeMSExpired,
            "operation exceeded time limit",
        )),
        _ => Ok(()),
    }
}

/// mongod's error for an operation stopped by `killOp`.
pub fn interrupted() -> MongoError {
    MongoError::new(ErrorCode::Interrupted, "operation was interrupted")
}

/// Whether the operation on this thread may spill a sort to disk (`allowDiskUse`; mongod
/// 7.0's default, true, when the command did not say).
pub(crate) fn allow_disk_use() -> bool {
    DISK_USE.with(Cell::get).unwrap_or(true)
}

/// Adds a scan's work to this thread's operation.
pub(crate) fn add_work(keys_examined: u64, docs_examined: u64) {
    WORK.with(|w| {
        let mut now = w.get();
        now.keys_examined += keys_examined;
        now.docs_examined += docs_examined;
        w.set(now);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_passed_deadline_expires_the_operation_until_its_scope_ends() {
        let scope = op_scope(Arc::new(Interrupt::default()));
        assert!(check_interrupt().is_ok());
        scope.set_deadline(Instant::now() + std::time::Duration::from_secs(3600));
        assert!(check_interrupt().is_ok());
        scope.set_deadline(Instant::now());
        let e = check_interrupt().expect_err("expired");
        assert_eq!(e.code, ErrorCode::MaxTimeMSExpired);
        drop(scope);
        assert!(check_interrupt().is_ok());
    }

    #[test]
    fn a_thread_without_a_scope_is_never_interrupted() {
        assert!(check_interrupt().is_ok());
    }

    #[test]
    fn a_killed_scope_is_interrupted_until_it_ends() {
        let flag = Arc::new(Interrupt::default());
        {
            let _scope = op_scope(flag.clone());
            assert!(check_interrupt().is_ok());
            flag.kill();
            let e = check_interrupt().expect_err("killed");
            assert_eq!((e.code.code(), e.code.name()), (11601, "Interrupted"));
        }
        assert!(check_interrupt().is_ok(), "the scope's end restores none");
        flag.reset();
        let _again = op_scope(flag);
        assert!(
            check_interrupt().is_ok(),
            "a reset flag serves the next operation"
        );
    }

    #[test]
    fn work_is_counted_per_scope_and_nested_scopes_restore_it() {
        let outer = op_scope(Arc::default());
        add_work(3, 2);
        {
            let inner = op_scope(Arc::default());
            add_work(1, 1);
            assert_eq!(
                inner.work(),
                OpWork {
                    keys_examined: 1,
                    docs_examined: 1
                }
            );
        }
        assert_eq!(
            outer.work(),
            OpWork {
                keys_examined: 3,
                docs_examined: 2
            }
        );
    }
}
