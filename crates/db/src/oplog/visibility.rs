//! Oplog visibility (docs/design-oplog.md, O4/O5): an entry's `ts` is reserved before its
//! transaction commits, and transactions commit out of `ts` order, so a reader must never
//! see past a slot that is still open — or an entry could appear later *behind* a tailing
//! cursor. The tracker holds the open slots; the visibility point is just below the oldest
//! one (or the newest reserved when none is open), and it never moves backwards.
//!
//! Slots are handed out in increasing order by the caller (the replica set's clock, under
//! this tracker's lock, so reservation order is `ts` order). Pure: no storage, no clock.

use bson::Timestamp;
use std::collections::BTreeSet;

/// `ts` as one ordered integer.
fn pack(ts: Timestamp) -> u64 {
    (u64::from(ts.time) << 32) | u64::from(ts.increment)
}

fn unpack(v: u64) -> Timestamp {
    Timestamp {
        time: (v >> 32) as u32,
        increment: v as u32,
    }
}

/// The open slots and the visibility point.
#[derive(Debug, Default)]
pub struct SlotTracker {
    open: BTreeSet<u64>,
    /// The newest slot ever reserved.
    newest: u64,
    /// The newest timestamp readers may see (O4); only goes up.
    visible: u64,
}

impl SlotTracker {
    /// A tracker whose readers see everything up to `ts` (the oplog's newest entry at start).
    pub fn starting_at(ts: Timestamp) -> SlotTracker {
        SlotTracker {
            open: BTreeSet::new(),
            newest: pack(ts),
            visible: pack(ts),
        }
    }

    /// Opens slot `ts`, which must be newer than every slot before it.
    pub fn reserve(&mut self, ts: Timestamp) {
        self.reserve_range(ts, ts);
    }

    /// Opens one slot spanning `first..=last` (a transaction writing several entries): it
    /// holds the point below `first` until it finishes (by `finish(first)`).
    pub fn reserve_range(&mut self, first: Timestamp, last: Timestamp) {
        let (f, l) = (pack(first), pack(last));
        assert!(
            f > self.newest && l >= f,
            "oplog slots are reserved in increasing order"
        );
        self.newest = l;
        self.open.insert(f);
    }

    /// Closes slot `ts` (its transaction committed or aborted) and moves the point.
    pub fn finish(&mut self, ts: Timestamp) {
        let removed = self.open.remove(&pack(ts));
        assert!(
            removed,
            "an oplog slot is finished once, after it was reserved"
        );
        let point = match self.open.first() {
            Some(&oldest) => oldest - 1,
            None => self.newest,
        };
        debug_assert!(
            point >= self.visible,
            "the visibility point never moves back"
        );
        self.visible = self.visible.max(point);
    }

    /// The newest `ts` readers may see (O5: reads of the oplog stop here).
    pub fn visible(&self) -> Timestamp {
        unpack(self.visible)
    }

    /// How many slots are open.
    pub fn open_slots(&self) -> usize {
        self.open.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(i: u32) -> Timestamp {
        Timestamp {
            time: 100,
            increment: i,
        }
    }

    #[test]
    fn an_open_slot_holds_the_point_below_it() {
        let mut t = SlotTracker::starting_at(ts(0));
        t.reserve(ts(1));
        t.reserve(ts(2));
        t.finish(ts(2));
        assert_eq!(
            t.visible(),
            ts(0),
            "1 is still open: 2 must not be seen yet"
        );
        t.finish(ts(1));
        assert_eq!(t.visible(), ts(2));
        assert_eq!(t.open_slots(), 0);
    }

    /// Model test: random reserve/finish orders against a naive rule (the point is the
    /// newest slot below which every slot is finished), and the point never goes back.
    #[test]
    fn matches_a_naive_scan_for_random_orders() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for round in 0..200 {
            let mut t = SlotTracker::starting_at(ts(0));
            let mut reserved: Vec<u32> = Vec::new();
            let mut finished: Vec<u32> = Vec::new();
            let mut last_point = ts(0);
            for _ in 0..40 {
                let open: Vec<u32> = reserved
                    .iter()
                    .copied()
                    .filter(|r| !finished.contains(r))
                    .collect();
                if open.is_empty() || next() % 2 == 0 {
                    let i = reserved.len() as u32 + 1;
                    t.reserve(ts(i));
                    reserved.push(i);
                } else {
                    let pick = open[(next() % open.len() as u64) as usize];
                    t.finish(ts(pick));
                    finished.push(pick);
                }
                let naive = (0..=reserved.len() as u32)
                    .take_while(|&i| i == 0 || finished.contains(&i))
                    .last()
                    .unwrap_or(0);
                let expect = ts(naive).max(last_point);
                assert_eq!(t.visible(), expect, "round {round}");
                assert!(t.visible() >= last_point, "round {round}: went back");
                last_point = t.visible();
            }
        }
    }
}
