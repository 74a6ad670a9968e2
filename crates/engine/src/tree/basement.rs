//! Leaf basements: the sorted entries of one leaf partition, and their raw byte format
//! (`docs/format-node.md`, "Basement").
//!
//! A basement is always held as raw entries in one byte arena plus the offset of each entry
//! in key order, searched in place by binary search:
//!
//! - read from disk, the arena is exactly the decompressed bytes (**canonical**): validated
//!   once, two allocations whatever the entry count, written back as they are;
//! - a change appends the key's new entry to the arena and points the key's offset at it
//!   (the old bytes become garbage); the arena is rewritten in key order when garbage
//!   passes a quarter of it, and before the leaf is written (`pack`).
//!
//! So a changed basement costs its bytes, 4 bytes of offset per entry and the arena's spare
//! room — not a map slot and two allocations per entry. The map form this replaced held
//! ~120 bytes of memory per entry beyond its bytes, and freed its small allocations in
//! eviction order, which left jemalloc holding up to 200 MiB of partly used pages at full
//! benchmark size (docs/engine-status.md).
//!
//! Invariants:
//! P1. every offset starts a whole entry inside the arena that was validated (read from
//!     disk) or written here from checked parts: keys strictly increase in offset order,
//!     each entry has at least one version, versions are newest first (E1) and carry a
//!     known flag. The accessors rely on P1 and index without checking again.
//! P2. `bytes` is the sum of `entry_bytes` over the entries, so splits and recuts decide
//!     the same way whatever the arena holds besides.
//! P3. `garbage` is the arena's length less its count slot and the entries the offsets
//!     reach. When `canonical`, the arena is the basement's encoding: the count slot is
//!     right, the entries follow it in key order, and there is no garbage.

use super::entry::{Applied, Entry, Version, VERSION_OVERHEAD_BYTES};
use super::node::{alloc_bytes, ENTRY_OVERHEAD_BYTES};
use super::packed::{u32_at, u64_at};
use crate::bytes::{put_bytes, Reader};
use crate::mvcc::TxnStatus;
use crate::vocab::Ts;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::ops::Range;

/// Version flags in a leaf entry.
const VERSION_VALUE: u8 = 0;
const VERSION_TOMBSTONE: u8 = 1;
/// Smallest raw entry: key length, version count, one timestamp and flag.
const MIN_ENTRY_BYTES: usize = 4 + 4 + 8 + 1;
/// Smallest raw version: timestamp and flag.
const MIN_VERSION_BYTES: usize = 8 + 1;
/// The entry count at the start of the encoding.
const COUNT_BYTES: usize = 4;

/// Bytes an entry weighs against node sizes.
pub fn entry_bytes(key: &[u8], e: &Entry) -> usize {
    ENTRY_OVERHEAD_BYTES + key.len() + e.bytes()
}

/// A leaf partition: sorted keys, each with its committed versions (`entry.rs`).
#[derive(Debug, Clone)]
pub struct Basement {
    /// The count slot, then entries (P1, P3).
    arena: Vec<u8>,
    /// Where each entry starts, in key order.
    starts: Vec<u32>,
    /// Arena bytes no offset reaches (P3).
    garbage: usize,
    /// The arena is the encoding (P3).
    canonical: bool,
    /// Sum of `entry_bytes` over the entries (P2).
    bytes: usize,
}

impl Default for Basement {
    fn default() -> Self {
        Basement {
            arena: vec![0; COUNT_BYTES],
            starts: Vec::new(),
            garbage: 0,
            canonical: true,
            bytes: 0,
        }
    }
}
/// One version, borrowed from an entry in the arena or an owned `Entry`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VersionRef<'a> {
    pub ts: Ts,
    pub value: Option<&'a [u8]>,
}

/// A key's versions, borrowed from the arena or an owned `Entry`.
#[derive(Debug, Clone, Copy)]
pub enum EntryRef<'a> {
    Owned(&'a Entry),
    /// Raw bytes from the entry's version count on (P1); they may run past the entry.
    Packed(&'a [u8]),
}

impl<'a> EntryRef<'a> {
    /// Versions newest first.
    pub fn versions(self) -> Versions<'a> {
        match self {
            EntryRef::Owned(entry) => Versions::Owned { entry, next: 0 },
            EntryRef::Packed(b) => Versions::Packed {
                bytes: b,
                pos: 4,
                left: u32_at(b, 0),
            },
        }
    }

    pub fn version_count(self) -> usize {
        match self {
            EntryRef::Owned(e) => e.version_count(),
            EntryRef::Packed(b) => u32_at(b, 0),
        }
    }

    /// The newest value (what a message applied now builds on).
    pub fn newest_value(self) -> Option<&'a [u8]> {
        self.versions().next().and_then(|v| v.value)
    }

    /// The value a reader at `snapshot` sees (`None`: absent or deleted at that snapshot),
    /// for entries without provisional versions.
    #[cfg(test)]
    pub fn value_at(self, snapshot: Ts) -> Option<&'a [u8]> {
        self.value_seen(|ts| ts <= snapshot)
    }

    /// The value of the newest version `sees` accepts (`None`: absent or deleted).
    pub fn value_seen(self, sees: impl Fn(Ts) -> bool) -> Option<&'a [u8]> {
        self.versions().find(|v| sees(v.ts)).and_then(|v| v.value)
    }

    /// An owned copy.
    #[allow(
        clippy::expect_used,
        reason = "packed entries were checked when the basement was decoded (P1)"
    )]
    pub fn to_entry(self) -> Entry {
        match self {
            EntryRef::Owned(e) => e.clone(),
            EntryRef::Packed(_) => {
                let versions = self.versions().map(|v| Version {
                    ts: v.ts,
                    value: v.value.map(<[u8]>::to_vec),
                });
                Entry::from_versions(versions).expect("packed entries were checked (P1)")
            }
        }
    }
}

/// Iterator over an entry's versions, newest first.
pub enum Versions<'a> {
    Owned {
        entry: &'a Entry,
        next: usize,
    },
    Packed {
        bytes: &'a [u8],
        pos: usize,
        left: usize,
    },
}

impl<'a> Iterator for Versions<'a> {
    type Item = VersionRef<'a>;

    fn next(&mut self) -> Option<VersionRef<'a>> {
        match self {
            Versions::Owned { entry, next } => {
                let v = entry.version(*next)?;
                *next += 1;
                Some(VersionRef {
                    ts: v.ts,
                    value: v.value.as_deref(),
                })
            }
            Versions::Packed { bytes, pos, left } => {
                if *left == 0 {
                    return None;
                }
                *left -= 1;
                let ts = Ts(u64_at(bytes, *pos));
                let value = if bytes[*pos + 8] == VERSION_VALUE {
                    let n = u32_at(bytes, *pos + 9);
                    let v = &bytes[*pos + 13..*pos + 13 + n];
                    *pos += 13 + n;
                    Some(v)
                } else {
                    *pos += MIN_VERSION_BYTES;
                    None
                };
                Some(VersionRef { ts, value })
            }
        }
    }
}

impl Basement {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn from_entries(entries: BTreeMap<Vec<u8>, Entry>) -> Self {
        let mut b = Basement::new();
        for (k, e) in &entries {
            b.push_last(k, EntryRef::Owned(e));
        }
        b.seal();
        b
    }

    /// Takes raw basement bytes (decompressed from disk) as the arena, checking everything
    /// P1 promises.
    pub fn decode(raw: Vec<u8>) -> Result<Basement, String> {
        let (starts, bytes) = check_raw(&raw)?;
        Ok(Basement {
            arena: raw,
            starts,
            garbage: 0,
            canonical: true,
            bytes,
        })
    }

    /// The raw bytes of the basement: a count, then each entry's key and its versions newest
    /// first. A canonical arena's are its bytes as they are (P3).
    pub fn encode(&self) -> Cow<'_, [u8]> {
        if self.canonical {
            Cow::Borrowed(&self.arena)
        } else {
            Cow::Owned(self.rewritten().arena)
        }
    }

    /// The raw bytes of entries `range` alone, as a basement of their own (a segment of a
    /// basement written in pieces: `segment.rs`). A canonical arena holds them back to back
    /// (P3): one copy; otherwise each entry's bytes are gathered in key order.
    pub fn encode_range(&self, range: Range<usize>) -> Cow<'_, [u8]> {
        if range == (0..self.len()) {
            return self.encode();
        }
        #[allow(
            clippy::expect_used,
            reason = "a basement's entries fit its arena, below 4 GiB"
        )]
        let count = u32::try_from(range.len()).expect("a basement's entries fit its arena");
        let mut out = Vec::with_capacity(COUNT_BYTES + self.range_bytes(range.clone()));
        out.extend_from_slice(&count.to_le_bytes());
        if self.canonical && !range.is_empty() {
            let start = self.starts[range.start] as usize;
            let end = self.entry_range(range.end - 1).end;
            out.extend_from_slice(&self.arena[start..end]);
        } else {
            for i in range {
                out.extend_from_slice(&self.arena[self.entry_range(i)]);
            }
        }
        Cow::Owned(out)
    }

    /// Raw bytes of entries `range` (their encoding less the count), about: exact for a
    /// canonical arena, a reservation otherwise.
    fn range_bytes(&self, range: Range<usize>) -> usize {
        match (self.canonical, range.is_empty()) {
            (_, true) => 0,
            (true, false) => {
                self.entry_range(range.end - 1).end - self.starts[range.start] as usize
            }
            (false, false) => self.bytes * range.len() / self.len().max(1),
        }
    }

    /// Where segments of about `target` raw bytes start: entry indexes, the first 0, a cut
    /// before an entry that would take the segment past `target` (never before the first
    /// entry of a segment).
    pub fn segment_starts(&self, target: usize) -> Vec<usize> {
        let mut out = vec![0];
        let mut size = COUNT_BYTES;
        for i in 0..self.len() {
            let len = self.entry_range(i).len();
            if size > COUNT_BYTES && size + len > target {
                out.push(i);
                size = COUNT_BYTES;
            }
            size += len;
        }
        out
    }

    /// Cuts the basement into `pieces` basements of about equal weight (P2): a cut falls
    /// before the first entry at or past each k/pieces of the total, never before a piece's
    /// first entry (even pieces, not greedy ones: a greedy cut leaves a small remainder,
    /// and since splits move basements as they are it would stay small). Each piece is canonical, its
    /// entries' raw bytes copied in key order into an arena of exactly their size: no entry
    /// is decoded, and none is allocated on its own (a sequential fill recuts the basement
    /// it appends to every few hundred puts; through owned entries that was a third of the
    /// writer's CPU).
    pub fn split_evenly(&self, pieces: usize) -> Vec<Basement> {
        let pieces = pieces.max(1);
        let total = self.bytes;
        // Pass 1: each entry's bytes, and where the pieces start, with their weights.
        let mut ranges = Vec::with_capacity(self.len());
        let mut bounds = vec![0];
        let mut weights = vec![0];
        let mut before = 0;
        for i in 0..self.len() {
            let (key, e) = self.entry(i);
            let cut = bounds.len() < pieces && before >= total * bounds.len() / pieces;
            if i > 0 && cut {
                bounds.push(i);
                weights.push(0);
            }
            let weight = entry_ref_bytes(key, e);
            before += weight;
            if let Some(w) = weights.last_mut() {
                *w += weight;
            }
            ranges.push(self.entry_range(i));
        }
        bounds.push(self.len());
        // Pass 2: copy each piece's entries.
        bounds
            .windows(2)
            .zip(weights)
            .map(|(w, bytes)| {
                let piece = &ranges[w[0]..w[1]];
                let size = piece.iter().map(Range::len).sum();
                self.copy_entries(piece.iter().cloned(), size, piece.len(), bytes)
            })
            .collect()
    }

    /// A canonical basement of the `count` entries at `ranges` of this arena, in order:
    /// `size` raw bytes weighing `bytes` (P2).
    fn copy_entries(
        &self,
        ranges: impl Iterator<Item = Range<usize>>,
        size: usize,
        count: usize,
        bytes: usize,
    ) -> Basement {
        let mut out = Basement {
            arena: Vec::with_capacity(COUNT_BYTES + size),
            starts: Vec::with_capacity(count),
            garbage: 0,
            canonical: true,
            bytes,
        };
        out.arena.extend_from_slice(&[0; COUNT_BYTES]);
        for r in ranges {
            out.starts.push(out.arena.len() as u32);
            out.arena.extend_from_slice(&self.arena[r]);
        }
        out.seal();
        out
    }

    /// Joins the raw bytes of consecutive segments into one basement, checking everything
    /// P1 promises across them (`segment::join_raw`).
    pub fn join(raws: Vec<Vec<u8>>) -> Result<Basement, String> {
        Basement::decode(super::segment::join_raw(raws)?)
    }

    /// The key of entry `i`.
    pub fn key(&self, i: usize) -> &[u8] {
        self.entry(i).0
    }

    /// Rewrites the arena in key order without garbage (a leaf about to be written that
    /// stays cached: it is written from these bytes, and holds no spare room while clean).
    /// A no-op for a canonical arena.
    pub fn pack(&mut self) {
        if !self.canonical {
            *self = self.rewritten();
            debug_assert_eq!(
                check_raw(&self.arena),
                Ok((self.starts.clone(), self.bytes)),
                "P1, P2"
            );
        }
    }

    /// A canonical copy: each entry's bytes in key order.
    fn rewritten(&self) -> Basement {
        let size = self.arena.len() - COUNT_BYTES - self.garbage;
        let ranges = (0..self.len()).map(|i| self.entry_range(i));
        self.copy_entries(ranges, size, self.len(), self.bytes)
    }

    /// Whether the arena is the encoding as it is (P3).
    #[cfg(test)]
    pub fn is_packed(&self) -> bool {
        self.canonical
    }

    pub fn get(&self, key: &[u8]) -> Option<EntryRef<'_>> {
        self.find(key).ok().map(|i| self.entry(i).1)
    }

    /// Records the version that commit `ts` (or a transaction's provisional stamp) gives
    /// `key` (`None` deletes), resolving a provisional version under it first (E2) and
    /// collecting the versions no snapshot at or after `horizon` can see (M2).
    pub fn apply(
        &mut self,
        key: &[u8],
        ts: Ts,
        value: Option<Vec<u8>>,
        horizon: Ts,
        status: &TxnStatus,
    ) -> Applied {
        let i = match self.find(key) {
            Ok(i) => i,
            Err(at) => {
                if value.is_some() || ts > horizon {
                    let v = VersionRef {
                        ts,
                        value: value.as_deref(),
                    };
                    let start = self.append(key, &[v], at == self.len());
                    self.starts.insert(at, start);
                    self.bytes += entry_ref_bytes(key, self.entry(at).1);
                }
                return Applied::default();
            }
        };
        let mut entry = self.take_entry(i);
        let mut applied = Applied::default();
        if entry.is_provisional() && entry.newest_ts() != ts {
            applied.collected += entry.resolve(status, true);
            assert!(
                !entry.is_provisional(),
                "a live transaction's provisional version met another writer's message (E2)"
            );
        }
        applied.add(entry.push(ts, value, horizon));
        let keep = !entry.is_dead(horizon);
        self.put_entry(i, key, keep.then_some(&entry));
        applied
    }

    /// Drops the provisional version of `key` that the transaction stamped `stamp` wrote,
    /// if it is there (the transaction's abort message arrived).
    pub fn abort(&mut self, key: &[u8], stamp: Ts) {
        let Ok(i) = self.find(key) else {
            return;
        };
        if self.entry(i).1.versions().next().map(|v| v.ts) != Some(stamp) {
            return;
        }
        let mut entry = self.take_entry(i);
        let keep = entry.abort(stamp);
        self.put_entry(i, key, keep.then_some(&entry));
    }

    /// Entry `i` as an owned copy, its bytes counted as garbage until `put_entry`.
    fn take_entry(&mut self, i: usize) -> Entry {
        let entry = self.entry(i).1.to_entry();
        self.bytes -= entry_bytes(self.entry(i).0, &entry);
        self.garbage += self.entry_range(i).len();
        self.canonical = false;
        entry
    }

    /// Puts entry `i` back after `take_entry`, changed, or removes it (`None`); packs the
    /// arena when garbage passes a quarter of it.
    fn put_entry(&mut self, i: usize, key: &[u8], entry: Option<&Entry>) {
        match entry {
            None => {
                self.starts.remove(i);
            }
            Some(entry) => {
                let versions: Vec<VersionRef<'_>> = EntryRef::Owned(entry).versions().collect();
                self.starts[i] = self.append(key, &versions, false);
                self.bytes += entry_bytes(key, entry);
            }
        }
        if self.garbage > GARBAGE_MIN_BYTES && self.garbage * 4 > self.arena.len() {
            self.pack();
        }
    }

    /// Collects every entry against `horizon` (before the basement is written), resolving
    /// provisional versions of ended transactions first (E2). A basement whose entries are
    /// all single committed values has nothing to collect and is left as it is.
    /// Without `status` (a checkpoint's image) provisional versions stay as they are.
    pub fn collect(&mut self, horizon: Ts, status: Option<&TxnStatus>) -> u64 {
        let collectable = |e: EntryRef<'_>| {
            e.version_count() > 1
                || e.versions()
                    .next()
                    .is_some_and(|v| v.value.is_none() || v.ts.is_provisional())
        };
        if !self.iter().any(|(_, e)| collectable(e)) {
            return 0;
        }
        let mut out = Basement::new();
        out.arena.reserve_exact(self.arena.len() - self.garbage);
        let mut collected = 0;
        for (k, e) in self.iter() {
            if !collectable(e) {
                out.push_last(k, e);
                continue;
            }
            let mut owned = e.to_entry();
            if let Some(status) = status {
                collected += owned.resolve(status, false);
            }
            collected += owned.collect(horizon);
            if !owned.is_dead(horizon) {
                out.push_last(k, EntryRef::Owned(&owned));
            }
        }
        out.seal();
        *self = out;
        collected
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn len(&self) -> usize {
        self.starts.len()
    }

    /// Memory the basement holds (what the cache charges for it): the arena's and the
    /// offsets' allocations, spare room included.
    pub fn mem_bytes(&self) -> usize {
        alloc_bytes(self.arena.capacity())
            + alloc_bytes(self.starts.capacity() * std::mem::size_of::<u32>())
    }

    pub fn iter(&self) -> Iter<'_> {
        Iter {
            basement: self,
            indexes: 0..self.len(),
        }
    }

    pub fn into_entries(self) -> BTreeMap<Vec<u8>, Entry> {
        self.iter()
            .map(|(k, e)| (k.to_vec(), e.to_entry()))
            .collect()
    }

    pub fn first_key(&self) -> Option<&[u8]> {
        self.iter().next().map(|(k, _)| k)
    }

    pub fn last_key(&self) -> Option<&[u8]> {
        self.iter().next_back().map(|(k, _)| k)
    }

    /// The entry whose key is `key`, or where it would go.
    fn find(&self, key: &[u8]) -> Result<usize, usize> {
        // Sequential inserts land past the last key: one comparison, not a search (the
        // searches were 7.5% of a sequential fill's CPU at full size).
        let n = self.starts.len();
        if let Some(&last) = self.starts.last() {
            match key_at(&self.arena, last as usize).cmp(key) {
                std::cmp::Ordering::Less => return Err(n),
                std::cmp::Ordering::Equal => return Ok(n - 1),
                std::cmp::Ordering::Greater => {}
            }
        }
        self.starts[..n.saturating_sub(1)]
            .binary_search_by(|&s| key_at(&self.arena, s as usize).cmp(key))
    }

    /// Entry `i`'s key and versions (P1). The versions' bytes run on to the arena's end:
    /// their count says where they stop, and finding the end first would parse them twice.
    fn entry(&self, i: usize) -> (&[u8], EntryRef<'_>) {
        self.entry_at(self.starts[i] as usize)
    }

    /// The entry starting at arena offset `start` (one of `starts`, P1).
    fn entry_at(&self, start: usize) -> (&[u8], EntryRef<'_>) {
        let key = key_at(&self.arena, start);
        (key, EntryRef::Packed(&self.arena[start + 4 + key.len()..]))
    }

    /// Where entry `i`'s bytes are in the arena (P1: they parse without checks).
    fn entry_range(&self, i: usize) -> Range<usize> {
        let start = self.starts[i] as usize;
        let mut end = start + 4 + u32_at(&self.arena, start);
        let count = u32_at(&self.arena, end);
        end += 4;
        for _ in 0..count {
            end += match self.arena[end + 8] {
                VERSION_VALUE => MIN_VERSION_BYTES + 4 + u32_at(&self.arena, end + 9),
                _ => MIN_VERSION_BYTES,
            };
        }
        start..end
    }

    /// Appends an entry after the last one of a basement being built in key order.
    fn push_last(&mut self, key: &[u8], e: EntryRef<'_>) {
        debug_assert!(self.last_key().is_none_or(|last| last < key), "P1");
        let versions: Vec<VersionRef<'_>> = e.versions().collect();
        let start = self.append(key, &versions, false);
        self.starts.push(start);
        self.bytes += entry_ref_bytes(key, e);
    }

    /// Marks a basement built in key order by `push_last` canonical: writes its count.
    fn seal(&mut self) {
        #[allow(
            clippy::expect_used,
            reason = "a basement's entries fit its arena, below 4 GiB"
        )]
        let count = u32::try_from(self.len()).expect("a basement's entries fit its arena");
        self.arena[..COUNT_BYTES].copy_from_slice(&count.to_le_bytes());
        self.arena.shrink_to_fit();
        self.garbage = 0;
        self.canonical = true;
    }

    /// Writes an entry at the arena's end and returns where it starts. The arena grows by an
    /// eighth at least, not by doubling: a changed basement's spare room is charged to the
    /// cache, and most take a few entries between two writes. A basement whose new key
    /// comes after all of its keys (`past_end`: sequential inserts fill it from empty) grows
    /// by half instead: growing an eighth at a time from nothing reallocates it some forty
    /// times and frees about eight times its final size on the way.
    fn append(&mut self, key: &[u8], versions: &[VersionRef<'_>], past_end: bool) -> u32 {
        let need = 8
            + key.len()
            + versions
                .iter()
                .map(|v| MIN_VERSION_BYTES + v.value.map_or(0, |x| 4 + x.len()))
                .sum::<usize>();
        if self.arena.capacity() - self.arena.len() < need {
            let step = self.arena.len() / if past_end { 2 } else { 8 };
            self.arena.reserve_exact(need.max(step));
        }
        #[allow(
            clippy::expect_used,
            reason = "a basement's arena stays below 4 GiB (node sizes are bounded)"
        )]
        let start = u32::try_from(self.arena.len()).expect("a basement's arena stays below 4 GiB");
        put_bytes(&mut self.arena, key);
        self.arena
            .extend_from_slice(&(versions.len() as u32).to_le_bytes());
        for v in versions {
            self.arena.extend_from_slice(&v.ts.0.to_le_bytes());
            match v.value {
                Some(value) => {
                    self.arena.push(VERSION_VALUE);
                    put_bytes(&mut self.arena, value);
                }
                None => self.arena.push(VERSION_TOMBSTONE),
            }
        }
        self.canonical = false;
        start
    }
}

/// Garbage below this is never worth a rewrite of the arena.
const GARBAGE_MIN_BYTES: usize = 4096;

/// The key of the entry starting at `start` of checked bytes (P1).
fn key_at(arena: &[u8], start: usize) -> &[u8] {
    &arena[start + 4..start + 4 + u32_at(arena, start)]
}

/// What an entry weighs against node sizes (`entry_bytes`), from its versions.
fn entry_ref_bytes(key: &[u8], e: EntryRef<'_>) -> usize {
    ENTRY_OVERHEAD_BYTES
        + key.len()
        + e.versions()
            .map(|v| VERSION_OVERHEAD_BYTES + v.value.map_or(0, <[u8]>::len))
            .sum::<usize>()
}

/// Equal entries and versions, whatever the arenas hold besides.
impl PartialEq for Basement {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len()
            && self
                .iter()
                .zip(other.iter())
                .all(|((k1, e1), (k2, e2))| k1 == k2 && e1.versions().eq(e2.versions()))
    }
}

impl Eq for Basement {}

/// Iterator over a basement's entries in key order.
pub struct Iter<'a> {
    basement: &'a Basement,
    indexes: Range<usize>,
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a [u8], EntryRef<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        self.indexes.next().map(|i| self.basement.entry(i))
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.indexes.next_back().map(|i| self.basement.entry(i))
    }
}

/// Checks raw basement bytes (P1) and returns each entry's offset and the basement's
/// `bytes` (P2). Never panics: every length is checked against what is left.
fn check_raw(raw: &[u8]) -> Result<(Vec<u32>, usize), String> {
    if u32::try_from(raw.len()).is_err() {
        return Err(format!("basement of {} bytes is too large", raw.len()));
    }
    let mut r = Reader::new(raw);
    let n = r.u32()? as usize;
    // A count beyond what the bytes can hold is corruption, not a reservation to attempt.
    if n > r.remaining() / MIN_ENTRY_BYTES {
        return Err(format!(
            "basement claims {n} entries in {} bytes",
            raw.len()
        ));
    }
    let mut offsets = Vec::with_capacity(n);
    let mut bytes = 0;
    let mut prev: Option<&[u8]> = None;
    for _ in 0..n {
        offsets.push(r.pos() as u32);
        let klen = r.u32()? as usize;
        let key = r.take(klen)?;
        if prev.is_some_and(|p| p >= key) {
            return Err("basement keys out of order".into());
        }
        prev = Some(key);
        bytes += ENTRY_OVERHEAD_BYTES + key.len() + check_versions(&mut r)?;
    }
    r.finish()?;
    Ok((offsets, bytes))
}

/// Checks one entry's versions (count, E1, flags); returns the bytes they weigh.
fn check_versions(r: &mut Reader<'_>) -> Result<usize, String> {
    let count = r.u32()? as usize;
    if count == 0 || count > r.remaining() / MIN_VERSION_BYTES {
        return Err(format!("leaf entry with {count} versions"));
    }
    let mut bytes = 0;
    let mut newer: Option<u64> = None;
    for _ in 0..count {
        let ts = r.u64()?;
        if newer.is_some_and(|n| n <= ts) {
            return Err("leaf entry versions are not newest first (E1)".into());
        }
        newer = Some(ts);
        bytes += VERSION_OVERHEAD_BYTES;
        match r.u8()? {
            VERSION_VALUE => {
                let len = r.u32()? as usize;
                r.skip(len)?;
                bytes += len;
            }
            VERSION_TOMBSTONE => {}
            flag => return Err(format!("unknown version flag {flag}")),
        }
    }
    Ok(bytes)
}

#[cfg(test)]
#[path = "basement_tests.rs"]
mod tests;
