//! The server's logical clock: one monotonically advancing BSON `Timestamp` (seconds and an
//! increment within the second) that stamps writes (`operationTime`, `lastWrite.opTime`) and
//! is gossiped to and from clients as `$clusterTime`. It never moves backwards, not even when
//! the wall clock does; a client's `$clusterTime` may move it forwards, but not further than
//! mongod's `maxAcceptableLogicalClockDriftSecs` past the wall clock. Owns no storage: after
//! a restart the oplog moves it past its newest entry (`Stamp::advance_to`).

use bson::Timestamp;
use shale_doc::{ErrorCode, MongoError};
use std::sync::atomic::{AtomicU64, Ordering};

/// mongod's default `maxAcceptableLogicalClockDriftSecs` (one year).
pub const MAX_DRIFT_SECS: u32 = 365 * 24 * 60 * 60;

/// A timestamp packed as `time << 32 | increment`, so that integer order is time order.
fn pack(ts: Timestamp) -> u64 {
    (u64::from(ts.time) << 32) | u64::from(ts.increment)
}

fn unpack(v: u64) -> Timestamp {
    Timestamp {
        time: (v >> 32) as u32,
        increment: v as u32,
    }
}

/// The next timestamp after `current` at wall-clock second `now_secs`: a new second starts
/// at increment 1; within the clock's second (or when the wall clock is behind it) the
/// increment goes up, carrying into the seconds when it would wrap.
pub fn next_after(current: Timestamp, now_secs: u32) -> Timestamp {
    if now_secs > current.time {
        return Timestamp {
            time: now_secs,
            increment: 1,
        };
    }
    match current.increment.checked_add(1) {
        Some(increment) => Timestamp {
            time: current.time,
            increment,
        },
        None => Timestamp {
            time: current.time + 1,
            increment: 1,
        },
    }
}

/// The wall clock in whole seconds since the epoch.
pub fn wall_secs() -> u32 {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    u32::try_from(secs).unwrap_or(u32::MAX)
}

/// The clock. Every method is lock-free; `tick` hands out each timestamp once.
#[derive(Debug, Default)]
pub struct LogicalClock {
    packed: AtomicU64,
}

impl LogicalClock {
    /// The newest timestamp handed out or learnt (zero before the first).
    pub fn now(&self) -> Timestamp {
        unpack(self.packed.load(Ordering::Acquire))
    }

    /// A new timestamp, later than every one before it.
    pub fn tick(&self) -> Timestamp {
        let now = wall_secs();
        let mut cur = self.packed.load(Ordering::Acquire);
        loop {
            let next = pack(next_after(unpack(cur), now));
            match self
                .packed
                .compare_exchange_weak(cur, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return unpack(next),
                Err(seen) => cur = seen,
            }
        }
    }

    /// `n` consecutive timestamps within one second (an oplog slot of `n` entries):
    /// returns the first; the clock stands at the last.
    pub fn tick_many(&self, n: u32) -> Timestamp {
        assert!(n > 0, "at least one timestamp");
        let now = wall_secs();
        let mut cur = self.packed.load(Ordering::Acquire);
        loop {
            let mut first = next_after(unpack(cur), now);
            if first.increment.checked_add(n - 1).is_none() {
                first = Timestamp {
                    time: first.time + 1,
                    increment: 1,
                };
            }
            let last = Timestamp {
                time: first.time,
                increment: first.increment + (n - 1),
            };
            match self.packed.compare_exchange_weak(
                cur,
                pack(last),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return first,
                Err(seen) => cur = seen,
            }
        }
    }

    /// Moves the clock forward to a client's `$clusterTime` (never back); refuses one too
    /// far ahead of the wall clock, as mongod does, so a client cannot exhaust the clock.
    pub fn advance_to(&self, ts: Timestamp) -> Result<(), MongoError> {
        let wall = wall_secs();
        if ts.time > wall.saturating_add(MAX_DRIFT_SECS) {
            return Err(MongoError::new(
                ErrorCode::ClusterTimeFailsRateLimiter,
                format!(
                    "New cluster time, {}, is too far from this node's wall clock time, {wall}.",
                    ts.time
                ),
            ));
        }
        self.packed.fetch_max(pack(ts), Ordering::AcqRel);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(time: u32, increment: u32) -> Timestamp {
        Timestamp { time, increment }
    }

    #[test]
    fn next_starts_a_new_second_or_counts_within_one() {
        assert_eq!(next_after(ts(10, 7), 11), ts(11, 1));
        assert_eq!(next_after(ts(10, 7), 10), ts(10, 8));
        // The wall clock went back: the clock does not.
        assert_eq!(next_after(ts(10, 7), 3), ts(10, 8));
        assert_eq!(next_after(ts(10, u32::MAX), 10), ts(11, 1));
    }

    #[test]
    fn ticks_only_go_up_and_gossip_never_moves_back() {
        let c = LogicalClock::default();
        let a = c.tick();
        let b = c.tick();
        assert!(pack(b) > pack(a));
        c.advance_to(ts(a.time, 0))
            .expect("an older time is accepted");
        assert_eq!(c.now(), b, "an older cluster time does not move the clock");
        let ahead = ts(b.time + 5, 3);
        c.advance_to(ahead).expect("a little ahead is fine");
        assert_eq!(c.now(), ahead);
        assert!(pack(c.tick()) > pack(ahead));
    }

    #[test]
    fn many_ticks_are_consecutive_and_later_than_all_before() {
        let c = LogicalClock::default();
        let a = c.tick();
        let first = c.tick_many(5);
        assert!(pack(first) > pack(a));
        assert_eq!(c.now(), ts(first.time, first.increment + 4));
        assert!(pack(c.tick()) > pack(c.now()) - 1);
    }

    #[test]
    fn a_cluster_time_beyond_the_drift_limit_is_refused() {
        let c = LogicalClock::default();
        let far = ts(wall_secs() + MAX_DRIFT_SECS + 10, 1);
        let e = c.advance_to(far).expect_err("too far ahead");
        assert_eq!(e.code, ErrorCode::ClusterTimeFailsRateLimiter);
        assert_eq!(c.now(), ts(0, 0));
    }
}
