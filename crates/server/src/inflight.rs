//! The process-wide budget of bytes held by requests in flight. A connection's thread takes
//! a permit for a request's bytes (its length, and for OP_COMPRESSED the size it will
//! decompress to) after reading its header and before allocating its body, and gives it back
//! when the reply is written. While the budget is spent, a new request waits before its body
//! is read (the client's bytes stay in the socket, so TCP pushes back), so twenty clients
//! announcing 48 MB bodies hold the budget, not 960 MB.
//!
//! A thread holds at most one permit and waits only while it holds none, so waiting threads
//! never deadlock. A request larger than the whole budget runs once nothing else holds any.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};

/// The budget when the server is not told otherwise.
pub const DEFAULT_LIMIT_BYTES: usize = 256 << 20;

struct Budget {
    limit: AtomicUsize,
    used: Mutex<usize>,
    freed: Condvar,
}

static BUDGET: Budget = Budget {
    limit: AtomicUsize::new(DEFAULT_LIMIT_BYTES),
    used: Mutex::new(0),
    freed: Condvar::new(),
};

/// Sets the budget (at start).
pub fn set_limit(bytes: usize) {
    BUDGET.limit.store(bytes.max(1), Ordering::Relaxed);
}

/// Bytes held by requests in flight now.
pub fn in_use() -> usize {
    *BUDGET.used.lock().unwrap_or_else(|p| p.into_inner())
}

/// Bytes one request holds until dropped.
#[derive(Debug)]
pub struct Permit {
    bytes: usize,
}

/// Waits until `bytes` fit in the budget (or nothing else holds any) and takes them.
pub fn acquire(bytes: usize) -> Permit {
    let limit = BUDGET.limit.load(Ordering::Relaxed);
    let mut used = BUDGET.used.lock().unwrap_or_else(|p| p.into_inner());
    while *used > 0 && *used + bytes > limit {
        used = BUDGET.freed.wait(used).unwrap_or_else(|p| p.into_inner());
    }
    *used += bytes;
    Permit { bytes }
}

impl Drop for Permit {
    fn drop(&mut self) {
        let mut used = BUDGET.used.lock().unwrap_or_else(|p| p.into_inner());
        *used -= self.bytes;
        BUDGET.freed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn a_request_waits_while_the_budget_is_spent_and_runs_when_it_frees() {
        // The budget is process-wide: this is the only test that changes it.
        set_limit(100);
        let base = in_use();
        let first = acquire(80);
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = done.clone();
        let waiter = std::thread::spawn(move || {
            let p = acquire(50);
            flag.store(true, Ordering::SeqCst);
            drop(p);
        });
        std::thread::sleep(Duration::from_millis(100));
        assert!(!done.load(Ordering::SeqCst), "50 more bytes must wait");
        // A small one still fits beside the first.
        drop(acquire(10));
        drop(first);
        waiter.join().expect("waiter");
        assert!(done.load(Ordering::SeqCst));
        // Larger than the whole budget: runs alone.
        drop(acquire(1000));
        assert_eq!(in_use(), base);
        set_limit(DEFAULT_LIMIT_BYTES);
    }
}
