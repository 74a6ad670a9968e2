//! Leaf entries: the committed versions of one key, newest first, each stamped with the
//! timestamp of the commit that wrote it (a tombstone is a version without a value). A reader
//! at snapshot `S` sees the newest version with `ts <= S`. Versions nobody can see any more
//! are collected against the horizon (M2 in docs/recovery.md): when a message is applied and
//! before a leaf is written.
//!
//! A transaction's writes reach the trees as it makes them, stamped provisional
//! (`mvcc::status`): an entry's newest version may be one, above the committed ones. It is
//! resolved — given its commit timestamp, or dropped by its transaction's abort message —
//! when another message for the key is applied and before the leaf is written (E2).

use crate::mvcc::{Resolved, TxnStatus, OLD_TS};
use crate::vocab::Ts;

/// Bytes a version costs against node sizes besides its value (timestamp, flag, length).
pub const VERSION_OVERHEAD_BYTES: usize = 8 + 1 + 4;

/// One committed version: a value, or `None` for a delete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    pub ts: Ts,
    pub value: Option<Vec<u8>>,
}

impl Version {
    fn bytes(&self) -> usize {
        VERSION_OVERHEAD_BYTES + self.value.as_ref().map_or(0, Vec::len)
    }
}

/// A key's versions. `older` is newest first and every timestamp there is below `newest.ts`
/// (E1); most entries have no older version and so no second allocation.
///
/// E2. Only the newest version can be provisional: a message from any other writer finds
/// the key's provisional version's transaction ended (it held the key's lock until then),
/// and resolves it first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    newest: Version,
    older: Vec<Version>,
}

/// What applying one version did, for the MVCC counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Applied {
    /// The previous newest version was kept as an older one.
    pub retained: u64,
    /// Older versions dropped because no snapshot can see them.
    pub collected: u64,
}

impl Applied {
    pub fn add(&mut self, other: Applied) {
        self.retained += other.retained;
        self.collected += other.collected;
    }
}

impl Entry {
    #[cfg(test)]
    pub fn new(ts: Ts, value: Option<Vec<u8>>) -> Entry {
        Entry {
            newest: Version { ts, value },
            older: Vec::new(),
        }
    }

    /// Builds an entry from versions newest first (unpacking a basement); checks E1.
    ///
    /// A single version allocates nothing beyond its value: collecting every version into
    /// one `Vec` and taking the newest out left each entry an empty `older` list with room
    /// for four (128 bytes the cache did not charge, more than the entry itself).
    pub fn from_versions(versions: impl IntoIterator<Item = Version>) -> Result<Entry, String> {
        let mut versions = versions.into_iter();
        let newest = versions
            .next()
            .ok_or_else(|| "leaf entry without a version".to_string())?;
        let mut older: Vec<Version> = versions.collect();
        older.shrink_to_fit();
        let mut ts = std::iter::once(newest.ts).chain(older.iter().map(|v| v.ts));
        let mut newer = ts.next();
        for t in ts {
            if newer.is_some_and(|n| n <= t) {
                return Err("leaf entry versions are not newest first (E1)".into());
            }
            newer = Some(t);
        }
        Ok(Entry { newest, older })
    }

    /// Versions newest first.
    pub fn versions(&self) -> impl Iterator<Item = &Version> {
        std::iter::once(&self.newest).chain(self.older.iter())
    }

    /// Version `i`, newest first.
    pub fn version(&self, i: usize) -> Option<&Version> {
        match i {
            0 => Some(&self.newest),
            _ => self.older.get(i - 1),
        }
    }

    pub fn version_count(&self) -> usize {
        1 + self.older.len()
    }

    /// Bytes of the versions against node sizes (key and entry overhead not included).
    pub fn bytes(&self) -> usize {
        self.versions().map(Version::bytes).sum()
    }

    /// Adds the version written by commit `ts` (not older than the newest, E1). A second
    /// change by the same commit replaces its first. Then collects against `horizon`.
    pub fn push(&mut self, ts: Ts, value: Option<Vec<u8>>, horizon: Ts) -> Applied {
        assert!(
            ts >= self.newest.ts,
            "versions must arrive in commit order (E1): {ts:?} after {:?}",
            self.newest.ts
        );
        let mut applied = Applied::default();
        let new = Version { ts, value };
        if ts == self.newest.ts {
            self.newest = new;
        } else {
            let old = std::mem::replace(&mut self.newest, new);
            // Room for one, then doubling: `Vec` would reserve four at once, and most
            // entries keep one older version only until the commit is visible to all.
            if self.older.len() == self.older.capacity() {
                self.older.reserve_exact(self.older.len().max(1));
            }
            self.older.insert(0, old);
            applied.retained = 1;
        }
        applied.collected = self.collect(horizon);
        applied
    }

    /// Gives a provisional newest version of a committed transaction its commit's timestamp
    /// (E2). With `old_too`, one whose transaction left the table (`Resolved::Old`) becomes
    /// `OLD_TS` and the versions under it, which nobody can see, go — only when a message of
    /// another writer is being applied: then any abort of that transaction has arrived
    /// before it (T2), so it committed. Before a leaf is written it may still have an abort
    /// buffered above, so it stays. Returns how many versions went. A live one stays.
    pub fn resolve(&mut self, status: &TxnStatus, old_too: bool) -> u64 {
        if !self.newest.ts.is_provisional() {
            return 0;
        }
        match status.resolve(self.newest.ts) {
            Resolved::Live => 0,
            Resolved::Committed(ts) => {
                assert!(
                    self.older.first().is_none_or(|v| v.ts < ts),
                    "a provisional version commits above the versions under it (E1)"
                );
                self.newest.ts = ts;
                0
            }
            Resolved::Old if !old_too => 0,
            Resolved::Old => {
                self.newest.ts = OLD_TS;
                std::mem::take(&mut self.older).len() as u64
            }
        }
    }

    /// Drops the newest version if transaction stamp `stamp` wrote it (its abort message
    /// arrived); false if the entry is left without a version.
    pub fn abort(&mut self, stamp: Ts) -> bool {
        if self.newest.ts != stamp {
            return true;
        }
        if self.older.is_empty() {
            return false;
        }
        self.newest = self.older.remove(0);
        if self.older.is_empty() {
            self.older = Vec::new();
        }
        true
    }

    /// Drops every version older than the newest one at or below `horizon` (M2); returns how
    /// many.
    pub fn collect(&mut self, horizon: Ts) -> u64 {
        let keep = if self.newest.ts <= horizon {
            0
        } else {
            // Keep the versions above the horizon and the first one at or below it.
            match self.older.iter().position(|v| v.ts <= horizon) {
                Some(i) => i + 1,
                None => self.older.len(),
            }
        };
        let dropped = self.older.len() - keep;
        self.older.truncate(keep);
        if self.older.is_empty() {
            // Give the room back: an entry back to one version holds no list.
            self.older = Vec::new();
        }
        dropped as u64
    }

    /// The newest version's stamp.
    pub fn newest_ts(&self) -> Ts {
        self.newest.ts
    }

    /// Whether the newest version is provisional.
    pub fn is_provisional(&self) -> bool {
        self.newest.ts.is_provisional()
    }

    /// A delete that every snapshot sees, with nothing older: the entry can go.
    pub fn is_dead(&self, horizon: Ts) -> bool {
        self.newest.value.is_none() && self.older.is_empty() && self.newest.ts <= horizon
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::basement::EntryRef;

    fn v(s: &str) -> Option<&[u8]> {
        Some(s.as_bytes())
    }

    fn owned(s: &str) -> Option<Vec<u8>> {
        Some(s.as_bytes().to_vec())
    }

    /// What a reader at `snapshot` sees (reads go through `basement::EntryRef`).
    fn at(e: &Entry, snapshot: u64) -> Option<&[u8]> {
        EntryRef::Owned(e).value_at(Ts(snapshot))
    }

    #[test]
    fn readers_see_the_newest_version_at_or_below_their_snapshot() {
        let mut e = Entry::new(Ts(10), owned("a"));
        e.push(Ts(20), owned("b"), Ts(5));
        e.push(Ts(30), None, Ts(5));
        assert_eq!(at(&e, 9), None);
        assert_eq!(at(&e, 10), v("a"));
        assert_eq!(at(&e, 25), v("b"));
        assert_eq!(at(&e, 30), None);
        assert_eq!(e.version_count(), 3);
    }

    #[test]
    fn collection_keeps_what_the_horizon_can_see() {
        let mut e = Entry::new(Ts(10), owned("a"));
        e.push(Ts(20), owned("b"), Ts(10));
        e.push(Ts(30), owned("c"), Ts(10));
        assert_eq!(e.version_count(), 3, "horizon 10 still sees version 10");
        assert_eq!(e.collect(Ts(25)), 1);
        assert_eq!(at(&e, 25), v("b"));
        assert_eq!(e.collect(Ts(30)), 1);
        assert_eq!(e.version_count(), 1);
        let applied = e.push(Ts(40), None, Ts(40));
        assert_eq!(
            applied,
            Applied {
                retained: 1,
                collected: 1
            }
        );
        assert!(e.is_dead(Ts(40)));
    }

    #[test]
    fn one_commit_changing_a_key_twice_keeps_one_version() {
        let mut e = Entry::new(Ts(10), owned("a"));
        let applied = e.push(Ts(10), owned("b"), Ts(0));
        assert_eq!(applied, Applied::default());
        assert_eq!(e.version_count(), 1);
        assert_eq!(EntryRef::Owned(&e).newest_value(), v("b"));
    }

    #[test]
    fn a_provisional_version_resolves_to_its_commit_or_goes_with_its_abort() {
        let status = TxnStatus::default();
        let p = Ts::provisional(3);
        let mut e = Entry::new(Ts(10), owned("a"));
        e.push(p, owned("b"), Ts(0));
        status.begin(3);
        assert_eq!(e.resolve(&status, true), 0);
        assert!(e.is_provisional(), "a live one stays");
        let mut aborted = e.clone();
        assert!(aborted.abort(p));
        assert_eq!((aborted.version_count(), at(&aborted, 100)), (1, v("a")));
        assert!(
            aborted.abort(p),
            "an abort finding no version of its own changes nothing"
        );
        assert_eq!(aborted.version_count(), 1);
        let mut old = e.clone();
        status.commit(3, Ts(20));
        e.resolve(&status, false);
        assert_eq!(e.newest_ts(), Ts(20));
        assert_eq!((at(&e, 19), at(&e, 20)), (v("a"), v("b")));
        status.prune(|| Ts(20));
        assert_eq!(old.resolve(&status, false), 0);
        assert!(
            old.is_provisional(),
            "before a write an abort may lie above it"
        );
        assert_eq!(old.resolve(&status, true), 1, "the version under it goes");
        assert_eq!((old.newest_ts(), old.version_count()), (OLD_TS, 1));
        let mut only = Entry::new(p, owned("x"));
        assert!(
            !only.abort(p),
            "aborting the only version empties the entry"
        );
    }

    #[test]
    fn decoding_refuses_versions_out_of_order() {
        let ver = |ts, s: &str| Version {
            ts: Ts(ts),
            value: owned(s),
        };
        assert!(Entry::from_versions(vec![ver(5, "x"), ver(7, "y")]).is_err());
        assert!(Entry::from_versions(vec![]).is_err());
        let e = Entry::from_versions(vec![ver(7, "y"), ver(5, "x")]).expect("ordered");
        assert_eq!(at(&e, 6), v("x"));
    }
}
