//! Leaf basements: the sorted entries of one leaf partition, and their raw byte format
//! (`docs/format-node.md`, "Basement"). A basement is held in one of two forms:
//!
//! - **packed**: the raw bytes exactly as decompressed from disk plus the offset of each
//!   entry, searched in place by binary search. Loading one validates the bytes once and
//!   allocates twice (bytes and offsets), whatever the entry count; it costs 4 bytes of memory
//!   per entry beyond the bytes themselves, and writing it back is a copy.
//! - **map**: owned entries in a `BTreeMap`, which takes messages cheaply. The first change
//!   to a packed basement unpacks it; encoding a map walks it.
//!
//! A point read of a packed basement decodes nothing but the one entry it finds. Before
//! this form every basement read was decoded into a map (one allocation per key and value
//! and ~120 bytes of map per entry), which was a quarter of the CPU of uncached point
//! reads and half the memory of a cached basement.
//!
//! Invariants:
//! P1. a packed basement's bytes were validated when it was packed: every offset starts a
//!     whole entry inside the bytes, keys strictly increase, each entry has at least one
//!     version, versions are newest first (E1) and carry a known flag. The accessors rely
//!     on P1 and index without checking again.
//! P2. `bytes` is the sum of `entry_bytes` over the entries in either form, so splits and
//!     recuts decide the same way whatever the form.

use super::entry::{Applied, Entry, Version, VERSION_OVERHEAD_BYTES};
use super::node::{ENTRY_MEM_BYTES, ENTRY_OVERHEAD_BYTES};
use super::packed::{u32_at, u64_at, Layout, Packed};
use crate::bytes::{put_bytes, Reader};
use crate::mvcc::Ts;
use std::borrow::Cow;
use std::collections::{btree_map, BTreeMap};
use std::ops::Range;

/// Version flags in a leaf entry.
const VERSION_VALUE: u8 = 0;
const VERSION_TOMBSTONE: u8 = 1;
/// Smallest raw entry: key length, version count, one timestamp and flag.
const MIN_ENTRY_BYTES: usize = 4 + 4 + 8 + 1;
/// Smallest raw version: timestamp and flag.
const MIN_VERSION_BYTES: usize = 8 + 1;

/// Bytes an entry weighs against node sizes.
pub fn entry_bytes(key: &[u8], e: &Entry) -> usize {
    ENTRY_OVERHEAD_BYTES + key.len() + e.bytes()
}

/// A leaf partition: sorted keys, each with its committed versions (`entry.rs`).
#[derive(Debug, Clone, Default)]
pub struct Basement {
    form: Form,
    /// Sum of `entry_bytes` over the entries (P2).
    bytes: usize,
    /// Sum of `Entry::older_mem_bytes` over a map's entries (0 when packed): memory of the
    /// lists of older versions, charged beyond `bytes`.
    older_mem: usize,
}

#[derive(Debug, Clone)]
enum Form {
    Map(BTreeMap<Vec<u8>, Entry>),
    Packed(Packed<Entries>),
}

impl Default for Form {
    fn default() -> Self {
        Form::Map(BTreeMap::new())
    }
}

/// A basement's entries in the packed form (P1): each starts with its key's length.
#[derive(Debug, Clone)]
struct Entries;

impl Layout for Entries {
    const NAME: &'static str = "PackedBasement";

    fn key(item: &[u8]) -> &[u8] {
        &item[4..4 + u32_at(item, 0)]
    }
}

/// Entry `i` of a packed basement: its key, and its versions from the version count on.
fn packed_entry(p: &Packed<Entries>, i: usize) -> (&[u8], EntryRef<'_>) {
    let key = p.key(i);
    let versions = p.start(i) + 4 + key.len();
    (key, EntryRef::Packed(&p.raw()[versions..p.end(i)]))
}

/// One version, borrowed from either form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VersionRef<'a> {
    pub ts: Ts,
    pub value: Option<&'a [u8]>,
}

/// A key's versions, borrowed from either form.
#[derive(Debug, Clone, Copy)]
pub enum EntryRef<'a> {
    Owned(&'a Entry),
    /// The entry's raw bytes from its version count on (P1).
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

    /// The value a reader at `snapshot` sees (`None`: absent or deleted at that snapshot).
    pub fn value_at(self, snapshot: Ts) -> Option<&'a [u8]> {
        self.versions()
            .find(|v| v.ts <= snapshot)
            .and_then(|v| v.value)
    }

    /// An owned copy.
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
        let bytes = entries.iter().map(|(k, e)| entry_bytes(k, e)).sum();
        Basement {
            older_mem: older_mem(&entries),
            form: Form::Map(entries),
            bytes,
        }
    }

    /// Packs raw basement bytes (decompressed from disk), checking everything P1 promises.
    pub fn decode(raw: Vec<u8>) -> Result<Basement, String> {
        let (offsets, bytes) = check_raw(&raw)?;
        Ok(Basement {
            form: Form::Packed(Packed::new(raw, offsets)),
            bytes,
            older_mem: 0,
        })
    }

    /// The raw bytes of the basement: a count, then each entry's key and its versions newest
    /// first. A packed basement's are its bytes as they are.
    pub fn encode(&self) -> Cow<'_, [u8]> {
        match &self.form {
            Form::Packed(p) => Cow::Borrowed(p.raw()),
            Form::Map(_) => Cow::Owned(self.encode_map(|_| {})),
        }
    }

    /// Turns a map into the packed form (a leaf about to be written that stays cached and
    /// clean), encoding it once: the basement is written from these bytes. A no-op for a
    /// packed basement.
    pub fn pack(&mut self) {
        if let Form::Map(_) = &self.form {
            let mut offsets = Vec::with_capacity(self.len());
            let raw = self.encode_map(|at| offsets.push(at));
            // P1 holds by construction: a map's entries are sorted and each keeps E1.
            debug_assert_eq!(check_raw(&raw), Ok((offsets.clone(), self.bytes)));
            self.form = Form::Packed(Packed::new(raw, offsets));
            self.older_mem = 0;
        }
    }

    /// Encodes the entries, telling `entry_at` where each starts.
    fn encode_map(&self, mut entry_at: impl FnMut(u32)) -> Vec<u8> {
        let mut out = Vec::with_capacity(4 + self.bytes);
        out.extend_from_slice(&(self.len() as u32).to_le_bytes());
        for (k, e) in self.iter() {
            entry_at(out.len() as u32);
            put_bytes(&mut out, k);
            out.extend_from_slice(&(e.version_count() as u32).to_le_bytes());
            for v in e.versions() {
                out.extend_from_slice(&v.ts.0.to_le_bytes());
                match v.value {
                    Some(value) => {
                        out.push(VERSION_VALUE);
                        put_bytes(&mut out, value);
                    }
                    None => out.push(VERSION_TOMBSTONE),
                }
            }
        }
        out
    }

    pub fn is_packed(&self) -> bool {
        matches!(self.form, Form::Packed(_))
    }

    pub fn get(&self, key: &[u8]) -> Option<EntryRef<'_>> {
        match &self.form {
            Form::Map(m) => m.get(key).map(EntryRef::Owned),
            Form::Packed(p) => p.find(key).map(|i| packed_entry(p, i).1),
        }
    }

    /// The map form, unpacking a packed basement first.
    fn map_mut(&mut self) -> &mut BTreeMap<Vec<u8>, Entry> {
        if let Form::Packed(p) = &self.form {
            let map = p
                .indexes()
                .map(|i| {
                    let (k, e) = packed_entry(p, i);
                    (k.to_vec(), e.to_entry())
                })
                .collect();
            self.older_mem = older_mem(&map);
            self.form = Form::Map(map);
        }
        match &mut self.form {
            Form::Map(m) => m,
            Form::Packed(_) => unreachable!("unpacked just above"),
        }
    }

    /// Records the version that commit `ts` gives `key` (`None` deletes), collecting the
    /// versions no snapshot at or after `horizon` can see (M2).
    pub fn apply(&mut self, key: &[u8], ts: Ts, value: Option<Vec<u8>>, horizon: Ts) -> Applied {
        self.map_mut(); // unpacking sets `older_mem`: read the sums after it
        let (mut bytes, mut mem) = (self.bytes, self.older_mem);
        let entries = self.map_mut();
        let Some(entry) = entries.get_mut(key) else {
            if value.is_some() || ts > horizon {
                let e = Entry::new(ts, value);
                bytes += entry_bytes(key, &e);
                entries.insert(key.to_vec(), e);
            }
            self.bytes = bytes;
            return Applied::default();
        };
        let before = (entry_bytes(key, entry), entry.older_mem_bytes());
        let applied = entry.push(ts, value, horizon);
        let dead = entry.is_dead(horizon);
        let after = (entry_bytes(key, entry), entry.older_mem_bytes());
        bytes = bytes + after.0 - before.0;
        mem = mem + after.1 - before.1;
        if dead {
            bytes -= after.0;
            mem -= after.1;
            entries.remove(key);
        }
        self.bytes = bytes;
        self.older_mem = mem;
        applied
    }

    /// Collects every entry against `horizon` (before the basement is written). A packed
    /// basement whose entries are all single values has nothing to collect and stays packed.
    pub fn collect(&mut self, horizon: Ts) -> u64 {
        let collectable =
            |(_, e): (&[u8], EntryRef<'_>)| e.version_count() > 1 || e.newest_value().is_none();
        if self.is_packed() && !self.iter().any(collectable) {
            return 0;
        }
        let (mut collected, mut bytes, mut mem) = (0, 0, 0);
        self.map_mut().retain(|k, e| {
            collected += e.collect(horizon);
            let keep = !e.is_dead(horizon);
            if keep {
                bytes += entry_bytes(k, e);
                mem += e.older_mem_bytes();
            }
            keep
        });
        self.bytes = bytes;
        self.older_mem = mem;
        collected
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn len(&self) -> usize {
        match &self.form {
            Form::Map(m) => m.len(),
            Form::Packed(p) => p.len(),
        }
    }

    /// Memory the basement holds (what the cache charges for it).
    pub fn mem_bytes(&self) -> usize {
        match &self.form {
            Form::Map(_) => self.bytes + self.len() * ENTRY_MEM_BYTES + self.older_mem,
            Form::Packed(p) => p.mem_bytes(),
        }
    }

    pub fn iter(&self) -> Iter<'_> {
        Iter(match &self.form {
            Form::Map(m) => IterForm::Map(m.iter()),
            Form::Packed(p) => IterForm::Packed(p, p.indexes()),
        })
    }

    pub fn into_entries(self) -> BTreeMap<Vec<u8>, Entry> {
        match self.form {
            Form::Map(m) => m,
            Form::Packed(_) => self
                .iter()
                .map(|(k, e)| (k.to_vec(), e.to_entry()))
                .collect(),
        }
    }

    pub fn first_key(&self) -> Option<&[u8]> {
        self.iter().next().map(|(k, _)| k)
    }

    pub fn last_key(&self) -> Option<&[u8]> {
        self.iter().next_back().map(|(k, _)| k)
    }
}

/// Equal entries and versions, whatever the forms.
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
pub struct Iter<'a>(IterForm<'a>);

enum IterForm<'a> {
    Map(btree_map::Iter<'a, Vec<u8>, Entry>),
    Packed(&'a Packed<Entries>, Range<usize>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a [u8], EntryRef<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.0 {
            IterForm::Map(it) => it.next().map(|(k, e)| (k.as_slice(), EntryRef::Owned(e))),
            IterForm::Packed(p, indexes) => indexes.next().map(|i| packed_entry(p, i)),
        }
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        match &mut self.0 {
            IterForm::Map(it) => it
                .next_back()
                .map(|(k, e)| (k.as_slice(), EntryRef::Owned(e))),
            IterForm::Packed(p, indexes) => indexes.next_back().map(|i| packed_entry(p, i)),
        }
    }
}

/// Memory of the lists of older versions in `entries`.
fn older_mem(entries: &BTreeMap<Vec<u8>, Entry>) -> usize {
    entries.values().map(Entry::older_mem_bytes).sum()
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
mod tests {
    use super::*;

    fn sample() -> Basement {
        let mut b = Basement::new();
        for i in 0..50u32 {
            let key = format!("k{i:03}").into_bytes();
            b.apply(&key, Ts(10), Some(vec![i as u8; i as usize]), Ts(0));
        }
        b.apply(b"k007", Ts(20), None, Ts(0));
        b.apply(b"k008", Ts(20), Some(b"new".to_vec()), Ts(0));
        b
    }

    #[test]
    fn packed_and_map_forms_agree_on_every_read() {
        let map = sample();
        let packed = Basement::decode(map.encode().into_owned()).expect("well formed");
        assert!(packed.is_packed() && !map.is_packed());
        assert_eq!(packed, map);
        assert_eq!(packed.bytes(), map.bytes(), "P2");
        assert_eq!(packed.len(), map.len());
        assert_eq!(packed.first_key(), map.first_key());
        assert_eq!(packed.last_key(), map.last_key());
        assert!(packed
            .iter()
            .rev()
            .map(|e| e.0)
            .eq(map.iter().rev().map(|e| e.0)));
        for i in 0..60u32 {
            let key = format!("k{i:03}").into_bytes();
            for snap in [Ts(5), Ts(10), Ts(20)] {
                let a = packed.get(&key).and_then(|e| e.value_at(snap));
                let b = map.get(&key).and_then(|e| e.value_at(snap));
                assert_eq!(a, b, "key {i} at {snap:?}");
            }
        }
        assert_eq!(
            packed.get(b"k008").and_then(|e| e.newest_value()),
            Some(&b"new"[..])
        );
        assert_eq!(packed.get(b"k007").map(|e| e.version_count()), Some(2));
        assert_eq!(packed.encode(), map.encode());
    }

    /// `older_mem` is what the map's entries hold, whatever path changed them.
    fn older_mem_agrees(b: &Basement) {
        let expect = match &b.form {
            Form::Map(m) => older_mem(m),
            Form::Packed(_) => 0,
        };
        assert_eq!(b.older_mem, expect);
    }

    #[test]
    fn memory_of_older_versions_is_charged_through_unpacking_and_collection() {
        // k007 and k008 hold two versions each: unpacking gives them lists of older ones.
        // The first change to a packed basement unpacks it, and hits a key with versions.
        let mut b = Basement::decode(sample().encode().into_owned()).expect("well formed");
        b.apply(b"k008", Ts(30), Some(b"x".to_vec()), Ts(0));
        older_mem_agrees(&b);
        assert!(b.older_mem > 0);
        let packed_mem = Basement::decode(sample().encode().into_owned())
            .expect("ok")
            .mem_bytes();
        assert!(b.mem_bytes() > packed_mem);
        b.apply(b"k009", Ts(40), Some(b"y".to_vec()), Ts(0));
        older_mem_agrees(&b);
        // Everything visible to all: every older list goes, and its memory with it.
        b.apply(b"k007", Ts(50), None, Ts(100));
        older_mem_agrees(&b);
        b.collect(Ts(100));
        older_mem_agrees(&b);
        assert_eq!(b.older_mem, 0);
        b.pack();
        older_mem_agrees(&b);
    }

    #[test]
    fn a_change_unpacks_and_packing_again_round_trips() {
        let mut b = Basement::decode(sample().encode().into_owned()).expect("well formed");
        b.apply(b"k100", Ts(30), Some(b"x".to_vec()), Ts(0));
        assert!(!b.is_packed());
        assert_eq!(b.len(), 51);
        let before = b.clone();
        b.pack();
        assert!(b.is_packed());
        assert_eq!(b, before);
        assert_eq!(b.bytes(), before.bytes());
    }

    #[test]
    fn collecting_a_packed_basement_unpacks_only_when_something_can_go() {
        let mut single = Basement::new();
        single.apply(b"a", Ts(1), Some(b"v".to_vec()), Ts(0));
        let mut single = Basement::decode(single.encode().into_owned()).expect("ok");
        assert_eq!(single.collect(Ts(100)), 0);
        assert!(single.is_packed());

        let mut many = Basement::decode(sample().encode().into_owned()).expect("ok");
        assert_eq!(
            many.collect(Ts(100)),
            2,
            "k007 and k008 lose their old versions"
        );
        assert!(many.get(b"k007").is_none(), "a tombstone all can see goes");
        assert_eq!(many.len(), 49);
    }

    #[test]
    fn malformed_bytes_are_errors_never_panics() {
        let good = sample().encode().into_owned();
        for cut in 0..good.len() {
            assert!(
                Basement::decode(good[..cut].to_vec()).is_err(),
                "cut at {cut}"
            );
        }
        let mut out_of_order = Basement::new();
        out_of_order.apply(b"b", Ts(1), Some(vec![]), Ts(0));
        let mut raw = out_of_order.encode().into_owned();
        raw[0] = 2;
        raw.extend_from_within(4..);
        assert!(Basement::decode(raw).unwrap_err().contains("out of order"));
        let mut flag = good.clone();
        // The first entry is key "k000" (4 + 4 bytes), a count and a timestamp: its flag.
        flag[4 + 8 + 4 + 8] = 9;
        assert!(Basement::decode(flag).unwrap_err().contains("flag"));
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..2_000 {
            let mut raw = good.clone();
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let at = (state as usize) % raw.len();
            raw[at] ^= 1 << (state >> 61);
            if let Ok(b) = Basement::decode(raw) {
                // Whatever passes the checks must be readable without a panic.
                for (k, e) in b.iter() {
                    let _ = (k.len(), e.value_at(Ts(u64::MAX)), e.to_entry());
                }
            }
        }
    }
}
