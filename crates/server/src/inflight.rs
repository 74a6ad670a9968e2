//! The process-wide budget of bytes held by requests in flight. A connection's thread takes
//! a permit for a request's bytes (its length, and for OP_COMPRESSED the size it will
//! decompress to) after reading its header and before allocating its body, adds its reply's
//! bytes to the permit once the reply is built, and gives all of it back when the reply is
//! written. While the budget is spent, a new request waits before its body is read (the
//! client's bytes stay in the socket, so TCP pushes back), so twenty clients announcing
//! 48 MB bodies hold the budget, not 960 MB. The wait is bounded: a request that cannot get
//! its bytes within the wait limit is refused (`ExceededMemoryLimit`, `message_reader.rs`).
//!
//! A thread holds at most one permit and waits only while it holds none, so waiting threads
//! never deadlock. A request larger than the whole budget runs once nothing else holds any.
//! A reply is charged after it is built, without waiting: it can take the budget past its
//! limit for as long as it is being written, which makes the next requests wait, but it
//! cannot stop its own allocation. This module never reads a socket.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// The budget when the server is not told otherwise.
pub const DEFAULT_LIMIT_BYTES: usize = 256 << 20;

/// How long a request may wait for room in the budget when the server is not told otherwise.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(30);

/// Taking and returning bytes is one atomic operation while the budget has room (every
/// request does it, from every connection's thread); the lock and condition variable are
/// for waiting only.
///
/// No lost wake-up: a waiter counts itself in `waiters` and then re-reads `used` under the
/// lock; a returner lowers `used` and then reads `waiters` (all sequentially consistent), so
/// either the waiter sees the room or the returner sees the waiter and notifies under the
/// lock, which the waiter holds until `wait` releases it.
struct Budget {
    limit: AtomicUsize,
    used: AtomicUsize,
    waiters: AtomicUsize,
    lock: Mutex<()>,
    freed: Condvar,
}

static BUDGET: Budget = Budget {
    limit: AtomicUsize::new(DEFAULT_LIMIT_BYTES),
    used: AtomicUsize::new(0),
    waiters: AtomicUsize::new(0),
    lock: Mutex::new(()),
    freed: Condvar::new(),
};

/// Sets the budget (at start).
pub fn set_limit(bytes: usize) {
    BUDGET.limit.store(bytes.max(1), Ordering::Relaxed);
}

/// The budget in force.
pub fn limit() -> usize {
    BUDGET.limit.load(Ordering::Relaxed)
}

/// Bytes held by requests in flight now.
pub fn in_use() -> usize {
    BUDGET.used.load(Ordering::SeqCst)
}

/// Bytes one request holds until dropped.
#[derive(Debug)]
pub struct Permit {
    bytes: usize,
}

impl Permit {
    /// Adds `bytes` (a reply just built) to what this request holds, without waiting.
    pub fn add(&mut self, bytes: usize) {
        BUDGET.used.fetch_add(bytes, Ordering::SeqCst);
        self.bytes += bytes;
    }

    /// Bytes this permit holds.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

/// A request that did not get room in the budget within its wait limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoRoom {
    /// How long it waited.
    pub waited: Duration,
    /// Bytes others held when it gave up.
    pub in_use: usize,
}

/// Whether `bytes` more fit when `used` are held (a request larger than the whole budget
/// fits when nothing else is held).
fn fits(used: usize, bytes: usize) -> bool {
    used == 0 || used.saturating_add(bytes) <= BUDGET.limit.load(Ordering::Relaxed)
}

/// Waits until `bytes` fit in the budget (or nothing else holds any) and takes them.
pub fn acquire(bytes: usize) -> Permit {
    match acquire_within(bytes, None) {
        Ok(p) => p,
        Err(_) => unreachable!("a wait without a limit never gives up"),
    }
}

/// Waits at most `wait` (`None`: for ever) until `bytes` fit in the budget (or nothing else
/// holds any) and takes them.
pub fn acquire_within(bytes: usize, wait: Option<Duration>) -> Result<Permit, NoRoom> {
    let start = Instant::now();
    // A wait too long to add to the clock is a wait without a limit.
    let deadline = wait.and_then(|w| start.checked_add(w));
    loop {
        let used = BUDGET.used.load(Ordering::SeqCst);
        if fits(used, bytes) {
            if BUDGET
                .used
                .compare_exchange_weak(used, used + bytes, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
            {
                return Ok(Permit { bytes });
            }
            continue;
        }
        let left = match deadline {
            None => None,
            Some(d) => match d.checked_duration_since(Instant::now()) {
                Some(left) if !left.is_zero() => Some(left),
                _ => {
                    return Err(NoRoom {
                        waited: start.elapsed(),
                        in_use: used,
                    })
                }
            },
        };
        let guard = BUDGET.lock.lock().unwrap_or_else(|p| p.into_inner());
        BUDGET.waiters.fetch_add(1, Ordering::SeqCst);
        if !fits(BUDGET.used.load(Ordering::SeqCst), bytes) {
            match left {
                None => drop(BUDGET.freed.wait(guard).unwrap_or_else(|p| p.into_inner())),
                Some(left) => drop(
                    BUDGET
                        .freed
                        .wait_timeout(guard, left)
                        .unwrap_or_else(|p| p.into_inner()),
                ),
            }
        }
        BUDGET.waiters.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        BUDGET.used.fetch_sub(self.bytes, Ordering::SeqCst);
        if BUDGET.waiters.load(Ordering::SeqCst) > 0 {
            let _guard = BUDGET.lock.lock().unwrap_or_else(|p| p.into_inner());
            BUDGET.freed.notify_all();
        }
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
        // A bounded wait gives up, and says how long it waited and what others held.
        let held = acquire(90);
        let refused = acquire_within(20, Some(Duration::from_millis(50))).expect_err("no room");
        assert!(refused.waited >= Duration::from_millis(50));
        assert_eq!(refused.in_use, base + 90);
        assert!(acquire_within(10, Some(Duration::from_millis(50))).is_ok());
        // A reply added to a permit is held until the permit goes, without waiting.
        let mut reply = acquire(5);
        reply.add(40);
        assert_eq!((reply.bytes(), in_use()), (45, base + 135));
        drop((held, reply));
        assert_eq!(in_use(), base);
        // Many threads taking and returning: never over the budget, and no waiter is left
        // behind (a lost wake-up would hang the joins).
        let threads: Vec<_> = (0..8)
            .map(|t| {
                std::thread::spawn(move || {
                    for i in 0..300 {
                        let p = acquire(30 + (t * 7 + i) % 41);
                        assert!(in_use() <= 100, "over budget: {}", in_use());
                        drop(p);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("worker");
        }
        assert_eq!(in_use(), base);
        set_limit(DEFAULT_LIMIT_BYTES);
    }
}
