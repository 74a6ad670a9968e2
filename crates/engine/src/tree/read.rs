//! Reads under the shared lock, as of a snapshot: point lookups (descend, gather the key's
//! buffered messages, apply those the snapshot sees to the version of the leaf entry it sees)
//! and leaf-range scans for cursors (a whole leaf's entries merged with every buffered message
//! for its key range). Nothing here changes the tree.
//!
//! A leaf entry's versions are all older than any message buffered above it for the same key
//! (messages move down in MSN order), so the snapshot's value is: the entry's newest version
//! the snapshot sees, then the buffered messages it sees in MSN order. What a snapshot sees
//! is decided by `TxnStatus::sees` (a commit at or below it, or a provisional write of a
//! transaction that committed at or below it), less whatever an aborted transaction wrote:
//! its abort messages lie above everything it wrote (they came later), so a reader going
//! down collects their stamps and skips that transaction's messages and version below. For
//! the same reason a lookup stops descending at the first buffer holding a put or delete
//! the snapshot sees: nothing below can change the answer, so a key whose newest write is
//! still buffered costs that buffer's read, not the leaf's too.

use super::basement::EntryRef;
use super::buffer::MsgRef;
use super::msg::OpRef;
use super::msg::{self, MsgBuffer};
use super::node::{Leaf, LeafReach, NodeBody, Reach};
use super::pivots::Pivots;
use super::{Load, Stall, Step, Tree, TreeState};
use crate::block::NodeId;
use crate::mvcc::TxnStatus;
use crate::vocab::Ts;
use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::atomic::Ordering;

/// Which leaf a scan wants.
#[derive(Debug, Clone)]
pub(crate) enum Target {
    /// The leaf whose range contains the key.
    Containing(Vec<u8>),
    /// The leaf holding the largest keys below the key.
    Before(Vec<u8>),
    First,
    Last,
}

impl Target {
    /// The slot (child or basement) between `pivots` that this target leads to.
    fn pick(&self, pivots: &Pivots) -> usize {
        match self {
            Target::Containing(k) => pivots.count_le(k),
            Target::Before(k) => pivots.count_lt(k),
            Target::First => 0,
            Target::Last => pivots.len(),
        }
    }
}

/// Narrows the range `[lo, hi)` to the slots `slots` (children or basements, at least one)
/// between `pivots` (an unbounded side stays as the levels above left it).
fn narrow<'a>(
    lo: &mut Option<&'a Vec<u8>>,
    hi: &mut Option<&'a Vec<u8>>,
    pivots: &'a [Vec<u8>],
    slots: Range<usize>,
) {
    if slots.start > 0 {
        *lo = Some(&pivots[slots.start - 1]);
    }
    if slots.end - 1 < pivots.len() {
        *hi = Some(&pivots[slots.end - 1]);
    }
}

/// The entries of one basement's key range `[lo, hi)` as of the scan.
#[derive(Debug, Clone, Default)]
pub(crate) struct LeafBatch {
    pub entries: Vec<(Vec<u8>, Vec<u8>)>,
    pub lo: Option<Vec<u8>>,
    pub hi: Option<Vec<u8>>,
}

/// Where a point lookup stalled on a leaf's basement with no message for its key above it,
/// and the node table's epoch then (`Tree::lookup_resuming`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Resume {
    epoch: u64,
    leaf: NodeId,
}

/// The version of `key` in leaf `id` that `view` sees, or a stall on the basement (or the
/// segment of it) that holds the key.
fn leaf_value(l: &Leaf, id: NodeId, key: &[u8], view: &View<'_>) -> Step<Option<Vec<u8>>> {
    let b = l.basement_index(key);
    // A basement written in segments is read one segment at a time.
    let basement = match l.reach(b, key) {
        LeafReach::Loaded(basement) => basement,
        LeafReach::Read(s) => return Err(Stall::Load(Load::Segment(id, b, s))),
        LeafReach::Whole => return Err(Stall::Load(Load::Partition(id, b))),
    };
    Ok(basement
        .get(key)
        .and_then(|e| e.value_seen(|ts| view.sees_stamp(ts)))
        .map(<[u8]>::to_vec))
}

impl Tree {
    /// Point lookup as of `snapshot` (tests drive single attempts through it).
    #[cfg(test)]
    pub(crate) fn lookup(&self, st: &TreeState, key: &[u8], snapshot: Ts) -> Step<Option<Vec<u8>>> {
        self.lookup_resuming(st, key, snapshot, &mut None)
    }

    /// Point lookup as of `snapshot` that may resume at a leaf: a lookup that stalled on a
    /// leaf's basement with no message for its key above it leaves a `Resume` in `resume`,
    /// and its retry, if the node table's epoch has not moved since (`TreeState::epoch`:
    /// nothing but pieces installed under the shared lock changed), reads the leaf directly
    /// instead of descending again (the two descents of a missed get were ~10% of its CPU in
    /// the full-size profile of docs/bench/history/
    /// 2026-11-28-engine-read-random-profile-cache-mix-buffer-segments-of-the-read-page.md;
    /// with both read cuts of that file, one run measured 2.6% less CPU per get).
    pub(crate) fn lookup_resuming(
        &self,
        st: &TreeState,
        key: &[u8],
        snapshot: Ts,
        resume: &mut Option<Resume>,
    ) -> Step<Option<Vec<u8>>> {
        if let Some(r) = resume.take().filter(|r| r.epoch == st.epoch) {
            if let Some(node) = st.node(r.leaf) {
                if let NodeBody::Leaf(l) = &node.body {
                    node.touch();
                    let view = View::new(self.snapshots.status(), snapshot);
                    let base = leaf_value(l, r.leaf, key, &view)?;
                    self.cache.hits.fetch_add(1, Ordering::Relaxed);
                    return Ok(fold_messages(&*self.merge, key, base, Vec::new()));
                }
            }
        }
        let mut pending: Vec<MsgRef<'_>> = Vec::new();
        let mut view = View::new(self.snapshots.status(), snapshot);
        // Whether any buffer on the path holds a message for the key (visible or not, an
        // abort included): only a lookup that met none may resume at its leaf.
        let mut met_messages = false;
        let mut id = st.root;
        let base = loop {
            let node = st.node(id).ok_or(Stall::Load(Load::Header(id)))?;
            node.touch();
            match &node.body {
                NodeBody::Internal(n) => {
                    let c = n.child_index(key);
                    let buffer = match &n.buffers[c] {
                        Some(buffer) => Some(buffer),
                        None if n.filter_rules_out(c, key) => None,
                        // A buffer written in segments is read one segment at a time.
                        None => match n.reach(c, key) {
                            Reach::Loaded(b) => Some(b),
                            Reach::RuledOut => None,
                            Reach::Read(s) => return Err(Stall::Load(Load::Segment(id, c, s))),
                            Reach::Whole => return Err(Stall::Load(Load::Partition(id, c))),
                        },
                    };
                    if let Some(buffer) = buffer {
                        // Aborts first: one may follow what it aborts in this buffer.
                        let msgs = buffer.get(key);
                        met_messages |= msgs.clone().next().is_some();
                        view.note_aborts(msgs.clone());
                        pending.extend(msgs.filter(|m| view.sees(m)))
                    }
                    // A put or delete the snapshot sees decides the value: what lies below
                    // is older (read module doc), so the leaf is not read.
                    if pending.iter().any(|m| !matches!(m.op, OpRef::Update(_))) {
                        break None;
                    }
                    id = n.children[c];
                }
                NodeBody::Leaf(l) => match leaf_value(l, id, key, &view) {
                    Err(stall) => {
                        if !met_messages {
                            *resume = Some(Resume {
                                epoch: st.epoch,
                                leaf: id,
                            });
                        }
                        return Err(stall);
                    }
                    Ok(base) => break base,
                },
            }
        };
        self.cache.hits.fetch_add(1, Ordering::Relaxed);
        Ok(fold_messages(&*self.merge, key, base, pending))
    }

    /// The merged contents of one basement's range as of `snapshot` (the basement of the
    /// leaf `target` leads to), with the range's bounds. `upper`, the scan's upper bound if
    /// it has one, keeps the batch and the read-ahead from going past the basement holding
    /// the last keys below it (a hint: keys at or past it may still be in the batch).
    pub(crate) fn scan_leaf(
        &self,
        st: &TreeState,
        target: &Target,
        snapshot: Ts,
        upper: Option<&[u8]>,
    ) -> Step<LeafBatch> {
        let mut buffers: Vec<&MsgBuffer> = Vec::new();
        let (mut lo, mut hi): (Option<&Vec<u8>>, Option<&Vec<u8>>) = (None, None);
        let mut id = st.root;
        // A bounded scan reads the headers on its path, then the partitions it needs; an
        // unbounded one (a whole-tree scan) reads each node whole, in one read.
        let miss = |id| match upper {
            Some(_) => Stall::Load(Load::Header(id)),
            None => Stall::Load(Load::Node(id)),
        };
        let leaf = loop {
            let node = st.node(id).ok_or_else(|| miss(id))?;
            node.touch();
            match &node.body {
                NodeBody::Internal(n) => {
                    let c = target.pick(&n.pivots);
                    narrow(&mut lo, &mut hi, &n.pivots, c..c + 1);
                    let buffer = n.buffers[c]
                        .as_ref()
                        .ok_or(Stall::Load(Load::Partition(id, c)))?;
                    buffers.push(buffer);
                    id = n.children[c];
                }
                NodeBody::Leaf(l) => break l,
            }
        };
        // A run of loaded basements, not the whole leaf: a short range scan reads (and
        // copies) one read unit, as a point lookup does, and a long one takes up to
        // `SCAN_BATCH_BYTES` per descent; the cursor moves to the next run by key.
        let span = scan_span(leaf, id, target, upper)?;
        narrow(&mut lo, &mut hi, &leaf.pivots, span.clone());
        let basements = leaf.basements[span].iter().flatten();
        let mut msgs: BTreeMap<&[u8], Vec<MsgRef<'_>>> = BTreeMap::new();
        for buf in buffers {
            for (k, list) in buf.range(lo.map(Vec::as_slice), hi.map(Vec::as_slice)) {
                msgs.entry(k).or_default().extend(list);
            }
        }
        // A key with no message above it is read with one plain view; a key with messages
        // with the aborts among its own (they lie above what they abort, so one view per
        // key sees them all before its versions).
        let plain = View::new(self.snapshots.status(), snapshot);
        let alone = |e: EntryRef<'_>| e.value_seen(|ts| plain.sees_stamp(ts)).map(<[u8]>::to_vec);
        let entries = basements.flat_map(|b| b.iter());
        let entries = if msgs.is_empty() {
            // Nothing buffered above this range (the common case after flushes): the
            // entries are the batch as they come, with no merge.
            entries
                .filter_map(|(k, e)| alone(e).map(|v| (k.to_vec(), v)))
                .collect()
        } else {
            let with_msgs = |k: &[u8], e: Option<EntryRef<'_>>, list: &[MsgRef<'_>]| {
                let mut view = View::new(self.snapshots.status(), snapshot);
                view.note_aborts(list.iter().copied());
                let cur = e
                    .and_then(|e| e.value_seen(|ts| view.sees_stamp(ts)))
                    .map(<[u8]>::to_vec);
                let seen: Vec<MsgRef<'_>> = list.iter().copied().filter(|m| view.sees(m)).collect();
                if seen.is_empty() {
                    cur
                } else {
                    fold_messages(&*self.merge, k, cur, seen)
                }
            };
            // Both sides are in key order: one pass merges them.
            merge_in_order(entries, &msgs, alone, with_msgs)
        };
        self.cache.hits.fetch_add(1, Ordering::Relaxed);
        Ok(LeafBatch {
            entries,
            lo: lo.cloned(),
            hi: hi.cloned(),
        })
    }
}

/// Raw entry bytes a scan takes per descent when the basements after the one it needs are
/// loaded (`scan_span`).
const SCAN_BATCH_BYTES: usize = 64 << 10;

/// The basements one scan step covers: the one `target` picks, then, reading forward, the
/// loaded basements after it while the span stays within `SCAN_BATCH_BYTES` and below the
/// scan's `upper` bound (backward, the loaded ones before it). A forward step that needs an
/// unloaded basement loads it and the ones after it in one read (`Load::Run`), as far as
/// the bound.
fn scan_span(
    leaf: &Leaf,
    id: NodeId,
    target: &Target,
    upper: Option<&[u8]>,
) -> Result<Range<usize>, Stall> {
    let b = target.pick(&leaf.pivots);
    let backward = matches!(target, Target::Before(_) | Target::Last);
    // The last basement holding keys below the bound (basement j holds [p[j-1], p[j])).
    let last = upper.map_or(usize::MAX, |u| leaf.pivots.count_lt(u).max(b));
    let Some(first) = leaf.basements[b].as_ref() else {
        let load = if backward {
            Load::Partition(id, b)
        } else {
            Load::Run(id, b, last)
        };
        return Err(Stall::Load(load));
    };
    let mut bytes = first.bytes();
    let (mut start, mut end) = (b, b + 1);
    let loaded = |i: usize| leaf.basements[i].as_ref().map(|x| x.bytes());
    if backward {
        while let Some(n) = start.checked_sub(1).and_then(loaded) {
            if bytes + n > SCAN_BATCH_BYTES {
                break;
            }
            bytes += n;
            start -= 1;
        }
    } else {
        while let Some(n) = (end < leaf.basements.len() && end <= last)
            .then(|| loaded(end))
            .flatten()
        {
            if bytes + n > SCAN_BATCH_BYTES {
                break;
            }
            bytes += n;
            end += 1;
        }
    }
    Ok(start..end)
}

/// A basement run's entries (in key order) with the messages buffered above it for keys of
/// its range (`msgs`, in key order), in one pass: a key with messages is read by
/// `with_msgs(key, its entry, its messages)`, one without by `alone(its entry)`; each gives
/// what the reader sees of the key (`None`: nothing).
fn merge_in_order<'a, E: Copy>(
    entries: impl Iterator<Item = (&'a [u8], E)>,
    msgs: &BTreeMap<&'a [u8], Vec<MsgRef<'a>>>,
    alone: impl Fn(E) -> Option<Vec<u8>>,
    with_msgs: impl Fn(&[u8], Option<E>, &[MsgRef<'a>]) -> Option<Vec<u8>>,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    use std::cmp::Ordering::{Equal, Greater, Less};
    let mut out = Vec::with_capacity(entries.size_hint().0 + msgs.len());
    let (mut entries, mut pending) = (entries.peekable(), msgs.iter().peekable());
    loop {
        let order = match (entries.peek(), pending.peek()) {
            (None, None) => break,
            (Some(_), None) => Less,
            (None, Some(_)) => Greater,
            (Some((k, _)), Some((m, _))) => (*k).cmp(**m),
        };
        let (key, value) = match order {
            Less => match entries.next() {
                Some((k, e)) => (k, alone(e)),
                None => break,
            },
            Equal => match (entries.next(), pending.next()) {
                (Some((k, e)), Some((_, list))) => (k, with_msgs(k, Some(e), list)),
                _ => break,
            },
            Greater => match pending.next() {
                Some((m, list)) => (*m, with_msgs(m, None, list)),
                None => break,
            },
        };
        if let Some(v) = value {
            out.push((key.to_vec(), v));
        }
    }
    out
}

/// What one reader at `snapshot` sees of one key: commits at or below the snapshot and
/// provisional writes of transactions committed at or below it (`TxnStatus::sees`), less
/// what the transactions whose abort messages it has met wrote.
struct View<'a> {
    status: &'a TxnStatus,
    snapshot: Ts,
    /// Stamps of the aborted transactions met so far (few: usually none).
    aborted: Vec<Ts>,
}

impl<'a> View<'a> {
    fn new(status: &'a TxnStatus, snapshot: Ts) -> Self {
        View {
            status,
            snapshot,
            aborted: Vec::new(),
        }
    }

    /// Notes the abort messages among `msgs`.
    fn note_aborts<'m>(&mut self, msgs: impl Iterator<Item = MsgRef<'m>>) {
        let aborts = msgs.filter(|m| matches!(m.op, OpRef::Abort));
        self.aborted.extend(aborts.map(|m| m.ts));
    }

    /// Whether a version or message stamped `ts` is seen.
    fn sees_stamp(&self, ts: Ts) -> bool {
        !self.aborted.contains(&ts) && self.status.sees(ts, self.snapshot)
    }

    /// Whether message `m` is applied: seen, and not an abort.
    fn sees(&self, m: &MsgRef<'_>) -> bool {
        !matches!(m.op, OpRef::Abort) && self.sees_stamp(m.ts)
    }
}

/// Applies the messages a snapshot sees, in MSN order, to the value below them.
fn fold_messages(
    merge: &msg::MergeFn,
    key: &[u8],
    base: Option<Vec<u8>>,
    mut pending: Vec<MsgRef<'_>>,
) -> Option<Vec<u8>> {
    pending.sort_by_key(|m| m.msn);
    pending
        .into_iter()
        .fold(base, |cur, m| msg::apply(merge, key, cur, m.op))
}
