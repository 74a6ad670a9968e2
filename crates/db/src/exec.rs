//! The executor: runs a plan against one consistent snapshot — a `ReadView` for queries, or a
//! transaction for the reads inside a write — and produces matching documents, then applies
//! an in-memory sort when the plan's order is not the requested one, skip, limit and the
//! projection. An index scan fetches each document from the document tree by `_id`, except
//! on a clustering index, whose entries are the documents. Documents stay raw BSON from the
//! tree to the reply; the matcher and projection read them in place.

use crate::bounds::KeyRange;
use crate::catalog::Collection;
use crate::plan::{Access, Plan};
use crate::sort::SortSpec;
use crate::{engine_error, DbResult};
use bson::RawDocumentBuf;
use shale_doc::{ErrorCode, Matcher, MongoError, Projection};
use shale_engine::{Cursor, ReadView, TreeHandle, Txn, TxnCursor};
use std::collections::{HashSet, VecDeque};
use std::sync::Arc;

/// mongod's default `internalQueryMaxBlockingSortMemoryUsageBytes`: 100 MiB.
pub const SORT_MEMORY_LIMIT: usize = 100 * 1024 * 1024;

/// The bytes of documents a blocking sort holds in memory before it spills (or fails,
/// without `allowDiskUse`): mongod's `internalQueryMaxBlockingSortMemoryUsageBytes`, a
/// process-wide server parameter as on mongod. Also each pipeline stage's memory limit here.
static SORT_MEMORY_LIMIT_BYTES: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(SORT_MEMORY_LIMIT);

/// The current `internalQueryMaxBlockingSortMemoryUsageBytes`.
pub fn sort_memory_limit() -> usize {
    SORT_MEMORY_LIMIT_BYTES.load(std::sync::atomic::Ordering::Relaxed)
}

/// Sets `internalQueryMaxBlockingSortMemoryUsageBytes` (`setParameter`).
pub fn set_sort_memory_limit(bytes: usize) {
    SORT_MEMORY_LIMIT_BYTES.store(bytes.max(1), std::sync::atomic::Ordering::Relaxed);
}

/// The snapshot a scan reads.
#[derive(Clone, Copy)]
pub enum Snap<'a> {
    View(&'a ReadView),
    Txn(&'a Txn),
}

impl Snap<'_> {
    fn get(&self, tree: &TreeHandle, key: &[u8]) -> DbResult<Option<Vec<u8>>> {
        match self {
            Snap::View(v) => v.get(tree, key),
            Snap::Txn(t) => t.get(tree, key),
        }
        .map_err(engine_error)
    }

    fn cursor(&self, tree: &TreeHandle) -> AnyCursor {
        match self {
            Snap::View(v) => AnyCursor::View(v.cursor(tree)),
            Snap::Txn(t) => AnyCursor::Txn(t.cursor(tree)),
        }
    }
}

enum AnyCursor {
    View(Cursor),
    Txn(TxnCursor),
}

macro_rules! both {
    ($c:expr, $x:ident => $e:expr) => {
        match $c {
            AnyCursor::View($x) => $e,
            AnyCursor::Txn($x) => $e,
        }
    };
}

impl AnyCursor {
    fn seek(&mut self, k: &[u8]) -> DbResult<()> {
        both!(self, c => c.seek(k)).map_err(engine_error)
    }
    fn seek_for_prev(&mut self, k: &[u8]) -> DbResult<()> {
        both!(self, c => c.seek_for_prev(k)).map_err(engine_error)
    }
    fn seek_to_last(&mut self) -> DbResult<()> {
        both!(self, c => c.seek_to_last()).map_err(engine_error)
    }
    fn step(&mut self, backward: bool) -> DbResult<()> {
        if backward {
            both!(self, c => c.prev()).map_err(engine_error)
        } else {
            both!(self, c => c.next()).map_err(engine_error)
        }
    }
    fn entry(&self) -> Option<(&[u8], &[u8])> {
        both!(self, c => c.entry())
    }
    /// The value at the cursor, owned: moved out of a snapshot cursor's batch (no copy), or
    /// copied from a transaction's cursor. The caller then moves the cursor on.
    fn take_value(&mut self) -> Option<Vec<u8>> {
        match self {
            AnyCursor::View(c) => c.take_value(),
            AnyCursor::Txn(c) => c.entry().map(|(_, v)| v.to_vec()),
        }
    }
}

/// Work counters, for `explain` and the profiler.
#[derive(Debug, Default, Clone, Copy)]
pub struct ScanStats {
    pub keys_examined: u64,
    pub docs_examined: u64,
}

/// Reads the plan's ranges in order and yields documents (unfiltered).
pub struct Scan {
    coll: Arc<Collection>,
    plan: Plan,
    /// Index of the range being read (counting from the end when backward).
    range: usize,
    cursor: Option<AnyCursor>,
    /// The cursor left its range: seek it to the next one (one cursor serves every range,
    /// so a leaf read for one range serves the next ones inside it).
    reposition: bool,
    seen: HashSet<Vec<u8>>,
    /// For an `$or` plan: the clauses' scans, run in turn.
    clauses: Vec<Scan>,
    /// For `_id` bounds that are all points (`$in` on `_id`): their keys, read one point
    /// lookup each instead of one cursor each (a cursor per range made a 20,000-id `$in`
    /// cost more than a full scan).
    points: Option<Vec<Vec<u8>>>,
    pub stats: ScanStats,
}

impl Scan {
    pub fn new(coll: Arc<Collection>, plan: Plan) -> Scan {
        let clauses = match &plan.access {
            Access::Or(plans) => plans
                .iter()
                .map(|p| Scan::new(coll.clone(), p.clone()))
                .collect(),
            _ => Vec::new(),
        };
        let points = match (&plan.access, plan.bounds.first()) {
            (Access::IdRanges { point: false }, Some((_, b))) => b.point_keys(),
            _ => None,
        };
        Scan {
            coll,
            plan,
            range: 0,
            cursor: None,
            reposition: false,
            seen: HashSet::new(),
            clauses,
            points,
            stats: ScanStats::default(),
        }
    }

    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// Index into `plan.ranges` of the range being read, if any is left.
    fn current_range(&self) -> Option<usize> {
        let n = self.plan.ranges.len();
        if self.range >= n {
            return None;
        }
        Some(match self.plan.backward {
            true => n - 1 - self.range,
            false => self.range,
        })
    }

    /// The next document the plan reaches, or `None` at the end. Each call first checks
    /// whether the operation was killed (`op_context.rs`), and adds the keys and documents
    /// it examined to the operation's work.
    pub fn next(&mut self, snap: Snap<'_>) -> DbResult<Option<RawDocumentBuf>> {
        crate::op_context::check_interrupt()?;
        let before = self.stats;
        let next = self.next_unchecked(snap);
        crate::op_context::add_work(
            self.stats.keys_examined - before.keys_examined,
            self.stats.docs_examined - before.docs_examined,
        );
        next
    }

    fn next_unchecked(&mut self, snap: Snap<'_>) -> DbResult<Option<RawDocumentBuf>> {
        if matches!(self.plan.access, Access::IdRanges { point: true }) {
            return self.next_point(snap);
        }
        if self.points.is_some() {
            return self.next_of_points(snap);
        }
        if matches!(self.plan.access, Access::Or(_)) {
            return self.next_of_clauses(snap);
        }
        loop {
            let Some(ri) = self.current_range() else {
                return Ok(None);
            };
            let range = &self.plan.ranges[ri];
            let backward = self.plan.backward;
            match &mut self.cursor {
                None => {
                    let mut c = snap.cursor(tree_of(&self.plan, &self.coll));
                    position(&mut c, range, backward)?;
                    self.cursor = Some(c);
                }
                Some(c) if self.reposition => {
                    position(c, range, backward)?;
                    self.reposition = false;
                }
                Some(c) => c.step(backward)?,
            }
            let Some(c) = &mut self.cursor else { continue };
            let id_key = match c.entry() {
                None => None,
                Some((k, _)) if backward && k < &range.start[..] => None,
                Some((k, _)) if !backward && range.end.as_ref().is_some_and(|e| k >= &e[..]) => {
                    None
                }
                Some((_, value)) => Some(match &self.plan.access {
                    Access::Index(i) if i.def.clustering && self.plan.dedupe => {
                        Some(i.def.value_id_key(value)?)
                    }
                    Access::Index(i) if !i.def.clustering => Some(value.to_vec()),
                    _ => None,
                }),
            };
            let Some(id_key) = id_key else {
                self.reposition = true;
                self.range += 1;
                continue;
            };
            self.stats.keys_examined += 1;
            if self.plan.dedupe
                && id_key
                    .as_ref()
                    .is_some_and(|k| !self.seen.insert(k.clone()))
            {
                continue;
            }
            self.stats.docs_examined += 1;
            match (&self.plan.access, id_key) {
                // An index entry names a document: read it from the document tree. One
                // deleted by the reading transaction itself is skipped.
                (Access::Index(i), Some(idk)) if !i.def.clustering => {
                    if let Some(bytes) = snap.get(&self.coll.docs, &idk)? {
                        return Ok(Some(raw(bytes)?));
                    }
                }
                // The entry is the document (the document tree, or a clustering index):
                // moved out of the cursor's batch, not copied.
                _ => {
                    let value = c.take_value().unwrap_or_default();
                    return Ok(Some(raw(value)?));
                }
            }
        }
    }
}

/// The tree a plan reads: its index's, or the document tree.
fn tree_of<'a>(plan: &'a Plan, coll: &'a Collection) -> &'a TreeHandle {
    match &plan.access {
        Access::Index(i) => &i.tree,
        _ => &coll.docs,
    }
}

impl Scan {
    /// The next document of the `$or` clauses' scans not returned before.
    fn next_of_clauses(&mut self, snap: Snap<'_>) -> DbResult<Option<RawDocumentBuf>> {
        while self.range < self.clauses.len() {
            let clause = &mut self.clauses[self.range];
            let before = clause.stats;
            // The clause's work reaches the operation through this scan's own stats.
            let next = clause.next_unchecked(snap)?;
            let after = clause.stats;
            self.stats.keys_examined += after.keys_examined - before.keys_examined;
            self.stats.docs_examined += after.docs_examined - before.docs_examined;
            match next {
                None => self.range += 1,
                Some(doc) => {
                    let idk = crate::index_keys::id_key(&crate::doc_write::id_of(&doc)?);
                    if self.seen.insert(idk) {
                        return Ok(Some(doc));
                    }
                }
            }
        }
        Ok(None)
    }

    /// One `_id`: a point read of the document tree (the range's start is the document's
    /// key), no cursor.
    /// The next document of an `_id` point list, in the scan's direction.
    fn next_of_points(&mut self, snap: Snap<'_>) -> DbResult<Option<RawDocumentBuf>> {
        let Some(keys) = &self.points else {
            return Ok(None);
        };
        while self.range < keys.len() {
            let i = if self.plan.backward {
                keys.len() - 1 - self.range
            } else {
                self.range
            };
            self.range += 1;
            self.stats.keys_examined += 1;
            if let Some(bytes) = snap.get(&self.coll.docs, &keys[i])? {
                self.stats.docs_examined += 1;
                return Ok(Some(raw(bytes)?));
            }
        }
        Ok(None)
    }

    fn next_point(&mut self, snap: Snap<'_>) -> DbResult<Option<RawDocumentBuf>> {
        let Some(ri) = self.current_range() else {
            return Ok(None);
        };
        self.range += 1;
        self.stats.keys_examined += 1;
        match snap.get(&self.coll.docs, &self.plan.ranges[ri].start)? {
            Some(bytes) => {
                self.stats.docs_examined += 1;
                Ok(Some(raw(bytes)?))
            }
            None => Ok(None),
        }
    }
}

/// Puts a fresh cursor on the first entry of `range` in the scan direction.
fn position(c: &mut AnyCursor, range: &KeyRange, backward: bool) -> DbResult<()> {
    // A forward scan reads no further ahead than its range's end.
    let bound = (!backward).then(|| range.end.clone()).flatten();
    both!(c, x => x.set_upper_bound(bound));
    if !backward {
        return c.seek(&range.start);
    }
    match &range.end {
        None => c.seek_to_last(),
        Some(end) => {
            c.seek_for_prev(end)?;
            if c.entry().is_some_and(|(k, _)| k >= &end[..]) {
                c.step(true)?;
            }
            Ok(())
        }
    }
}

/// A stored document's bytes as a raw document (checked when written: a failure here is
/// corruption). Shared with the express path (`express.rs`).
pub(crate) fn raw(bytes: Vec<u8>) -> DbResult<RawDocumentBuf> {
    RawDocumentBuf::from_bytes(bytes).map_err(|e| {
        MongoError::new(
            ErrorCode::DataCorruptionDetected,
            format!("stored document is not BSON: {e}"),
        )
    })
}

/// What a query asks beyond its plan.
#[derive(Debug, Default)]
pub struct QueryShape {
    pub matcher: Option<Matcher>,
    /// Sort still to do in memory (`None` when the plan's order is the requested one).
    pub sort: Option<SortSpec>,
    pub skip: u64,
    pub limit: Option<u64>,
    pub projection: Option<Projection>,
    /// Where the in-memory sort may spill past its limit (`spill_sort.rs`); `None`: it may
    /// not (`allowDiskUse: false`), and fails there.
    pub spill_dir: Option<std::path::PathBuf>,
}

/// A running query: scan, filter, sort, skip, limit, project.
pub struct Query {
    scan: Scan,
    shape: QueryShape,
    sorted: Option<crate::spill_sort::Sorted>,
    skipped: u64,
    returned: u64,
    pub matched: u64,
}

impl Query {
    pub fn new(scan: Scan, shape: QueryShape) -> Query {
        Query {
            scan,
            shape,
            sorted: None,
            skipped: 0,
            returned: 0,
            matched: 0,
        }
    }

    pub fn stats(&self) -> ScanStats {
        self.scan.stats
    }

    pub fn plan(&self) -> &Plan {
        self.scan.plan()
    }

    /// The next matching document in order, before skip, limit and projection, with the
    /// array position the matcher reported (for positional `$`).
    pub fn next_match(
        &mut self,
        snap: Snap<'_>,
    ) -> DbResult<Option<(RawDocumentBuf, Option<usize>)>> {
        if self.shape.sort.is_some() {
            if self.sorted.is_none() {
                self.sorted = Some(self.sort_all(snap)?);
            }
            return match self.sorted.as_mut() {
                Some(sorted) => sorted.next(),
                None => Ok(None),
            };
        }
        self.next_unsorted(snap)
    }

    fn next_unsorted(
        &mut self,
        snap: Snap<'_>,
    ) -> DbResult<Option<(RawDocumentBuf, Option<usize>)>> {
        while let Some(doc) = self.scan.next(snap)? {
            let (ok, pos) = match &self.shape.matcher {
                None => (true, None),
                Some(m) => m.matches_with_position(&doc)?,
            };
            if ok {
                self.matched += 1;
                return Ok(Some((doc, pos)));
            }
        }
        Ok(None)
    }

    fn sort_all(&mut self, snap: Snap<'_>) -> DbResult<crate::spill_sort::Sorted> {
        let Some(spec) = self.shape.sort.clone() else {
            return Ok(crate::spill_sort::Sorted::Memory(VecDeque::new()));
        };
        let keep = self.shape.limit.map(|l| (l + self.shape.skip) as usize);
        let mut sorter = crate::spill_sort::Sorter::new(spec, keep, self.shape.spill_dir.clone());
        while let Some((doc, pos)) = self.next_unsorted(snap)? {
            sorter.push(doc, pos)?;
        }
        sorter.finish()
    }

    /// The next result document: after skip and limit, projected.
    pub fn next(&mut self, snap: Snap<'_>) -> DbResult<Option<RawDocumentBuf>> {
        if self.shape.limit.is_some_and(|l| self.returned >= l) {
            return Ok(None);
        }
        loop {
            let Some((doc, pos)) = self.next_match(snap)? else {
                return Ok(None);
            };
            if self.skipped < self.shape.skip {
                self.skipped += 1;
                continue;
            }
            self.returned += 1;
            return match &self.shape.projection {
                None => Ok(Some(doc)),
                Some(p) => p.apply(&doc, pos).map(Some),
            };
        }
    }
}

/// A query that owns its snapshot: what a client cursor holds between batches. A find on a
/// view (`views.rs`) is computed whole and served from `computed`.
pub struct ViewQuery {
    view: ReadView,
    query: Option<Query>,
    computed: std::vec::IntoIter<RawDocumentBuf>,
}

impl ViewQuery {
    /// A query over `view`'s snapshot.
    pub fn new(view: ReadView, query: Query) -> ViewQuery {
        ViewQuery {
            view,
            query: Some(query),
            computed: Vec::new().into_iter(),
        }
    }

    /// A query with no documents (its collection does not exist).
    pub fn empty(view: ReadView) -> ViewQuery {
        ViewQuery::computed(view, Vec::new())
    }

    /// A query whose documents are already computed (a find on a view).
    pub fn computed(view: ReadView, docs: Vec<RawDocumentBuf>) -> ViewQuery {
        ViewQuery {
            view,
            query: None,
            computed: docs.into_iter(),
        }
    }

    /// The next document, or `None` at the end.
    pub fn next_doc(&mut self) -> DbResult<Option<RawDocumentBuf>> {
        match &mut self.query {
            Some(q) => q.next(Snap::View(&self.view)),
            None => Ok(self.computed.next()),
        }
    }

    /// The planned query, unless the documents were computed.
    pub fn query(&self) -> Option<&Query> {
        self.query.as_ref()
    }
}
