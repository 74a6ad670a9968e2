//! Write commands on documents: insert, update (with upsert), delete and findAndModify.
//! The documents they store are made in `doc_prepare.rs`; this file finds, writes and
//! retries.
//! Each runs in engine transactions — an insert batch commits in chunks, each update or
//! delete statement in its own — and retries on `WriteConflict` as mongod does for writes
//! outside a multi-document transaction. Reads inside a write see the transaction's snapshot
//! plus its own writes; a multi-document update scans a cursor made before its first write,
//! so a document moved ahead by its own update is not visited twice.

use crate::catalog::Collection;
use crate::collation_scope::{plan_under, statement_vars};
use crate::doc_prepare::{to_raw, updated_document, upsert_document};
use crate::doc_write::{self, id_of};
use crate::exec::{Query, QueryShape, Scan, Snap};
use crate::namespace::Namespace;
use crate::oplog::log::Shape;
use crate::oplog::pending::Pending;
use crate::qe::update::process_update;
use crate::qe::QeTarget;
use crate::sort::SortSpec;
use crate::user_txn::Mode;
use crate::{engine_error, Database, DbResult};
use bson::{Bson, Document, RawDocument, RawDocumentBuf};
use shale_doc::{ErrorCode, Matcher, MongoError, Projection, UpdateSpec, Variables};
use shale_engine::Txn;
use std::sync::Arc;

/// Documents per insert transaction, and bytes.
const INSERT_CHUNK_DOCS: usize = 1000;
const INSERT_CHUNK_BYTES: usize = 8 << 20;
/// Attempts before a write conflict is returned to the client.
const MAX_CONFLICT_RETRIES: u32 = 10_000;

/// The outcome of a write command: counts and per-statement errors (by statement index).
#[derive(Debug, Default)]
pub struct WriteResult {
    /// Documents inserted, matched or deleted.
    pub n: i64,
    /// Documents an update changed.
    pub n_modified: i64,
    /// Upserted `_id`s by statement index.
    pub upserted: Vec<(usize, Bson)>,
    /// Errors by statement index.
    pub errors: Vec<(usize, MongoError)>,
}

/// Where an insert transaction stopped, how many it inserted, the documents it refused.
type ChunkOutcome = (usize, i64, Vec<(usize, MongoError)>);

/// One update statement. `vars` are what its filter's `$expr` reads (the command's `let`
/// variables, `$$NOW`, which is also the time `$currentDate` writes); its update was parsed
/// with the same.
#[derive(Debug)]
pub struct UpdateOp {
    /// The documents to update.
    pub filter: Document,
    /// The update.
    pub update: UpdateSpec,
    /// Every matching document, not only the first.
    pub multi: bool,
    /// Insert a document when none matches.
    pub upsert: bool,
    /// The index hint.
    pub hint: Option<Bson>,
    /// The variables its expressions read.
    pub vars: Variables,
}

/// One delete statement (`limit` 1 deletes at most one document); `vars` as for an update.
#[derive(Debug)]
pub struct DeleteOp {
    /// The documents to delete.
    pub filter: Document,
    /// At most one document.
    pub limit_one: bool,
    /// The index hint.
    pub hint: Option<Bson>,
    /// The variables its expressions read.
    pub vars: Variables,
}

/// A findAndModify request.
#[derive(Debug, Default)]
pub struct FindAndModifyOp {
    /// The document to find.
    pub filter: Document,
    /// Which of several matches comes first.
    pub sort: Option<Document>,
    /// Delete it.
    pub remove: bool,
    /// Or update it.
    pub update: Option<UpdateSpec>,
    /// Return the document after the update, not before.
    pub return_new: bool,
    /// The projection of the returned document.
    pub fields: Option<Document>,
    /// Insert a document when none matches.
    pub upsert: bool,
    /// The index hint.
    pub hint: Option<Bson>,
    /// What the query's `$expr` and the projection read; the update was parsed with the same.
    pub vars: Variables,
}

/// What findAndModify did.
#[derive(Debug, Default)]
pub struct FindAndModifyResult {
    /// The document returned, if any.
    pub value: Option<RawDocumentBuf>,
    /// Documents found (0 or 1).
    pub n: i64,
    /// True when an existing document was updated.
    pub updated_existing: bool,
    /// The upserted `_id`, if any.
    pub upserted: Option<Bson>,
}

impl Database {
    /// Runs `f` in a fresh transaction until it commits without a write conflict.
    pub(crate) fn in_txn<T>(&self, mut f: impl FnMut(&mut Txn) -> DbResult<T>) -> DbResult<T> {
        let mut attempt = 0u32;
        loop {
            let mut txn = self.engine().begin();
            let result = f(&mut txn).and_then(|v| txn.commit().map_err(engine_error).map(|_| v));
            match result {
                Err(e) if e.code == ErrorCode::WriteConflict && attempt < MAX_CONFLICT_RETRIES => {
                    attempt += 1;
                    backoff(attempt);
                }
                other => return other,
            }
        }
    }

    /// `in_txn` for writes that are logged: each attempt gets a fresh `Pending` buffer, and
    /// its operations become oplog entries in the same engine transaction at commit (O2).
    pub(crate) fn in_logged_txn<T>(
        &self,
        mut f: impl FnMut(&mut Txn, &mut Pending) -> DbResult<T>,
    ) -> DbResult<T> {
        let mut attempt = 0u32;
        loop {
            let mut txn = self.engine().begin();
            let mut log = self.pending();
            let result = match f(&mut txn, &mut log) {
                Ok(v) => self.commit_logged(txn, &log, Shape::Each(None)).map(|_| v),
                Err(e) => Err(e),
            };
            match result {
                Err(e) if e.code == ErrorCode::WriteConflict && attempt < MAX_CONFLICT_RETRIES => {
                    attempt += 1;
                    backoff(attempt);
                }
                other => return other,
            }
        }
    }

    /// `in_logged_txn` for writes to `coll`: before each commit the catalog record is
    /// rewritten in the same transaction if a write made an index multikey, and marked
    /// durable after.
    pub(crate) fn in_write_txn<T>(
        &self,
        coll: &Collection,
        mut f: impl FnMut(&mut Txn, &mut Pending) -> DbResult<T>,
    ) -> DbResult<T> {
        let (value, marked) = self.in_logged_txn(|txn, log| {
            let value = f(txn, log)?;
            let marked = doc_write::persist_multikey(txn, &self.catalog, coll)?;
            Ok((value, marked))
        })?;
        doc_write::multikey_committed(&marked);
        Ok(value)
    }

    /// Runs a write to `coll`: in its own retried transaction (`in_write_txn`), or once in
    /// the session transaction, which persists multikey flags at its commit.
    pub(crate) fn run_write<T>(
        &self,
        mode: &mut Mode<'_>,
        coll: &Arc<Collection>,
        f: impl FnMut(&mut Txn, &mut Pending) -> DbResult<T>,
    ) -> DbResult<T> {
        match mode {
            Mode::Own => match &coll.capped {
                None => self.in_write_txn(coll, f),
                Some(capped) => self.capped_write(coll, capped, f),
            },
            Mode::User(st) => {
                crate::capped::refuse_in_transaction(coll)?;
                st.touch_written(coll);
                let mut f = f;
                let (txn, log) = st.parts();
                f(txn, log)
            }
        }
    }

    /// A write to a capped collection: under its writer lock (so commits keep sequence
    /// order), trimmed to its bounds in the same transaction when it inserted, and its
    /// tailing readers woken after (`capped.rs`).
    fn capped_write<T>(
        &self,
        coll: &Collection,
        capped: &crate::capped::Capped,
        mut f: impl FnMut(&mut Txn, &mut Pending) -> DbResult<T>,
    ) -> DbResult<T> {
        let _writer = capped.lock_writer();
        let result = self.in_write_txn(coll, |txn, log| {
            let start = capped.sequence();
            let value = f(txn, log)?;
            if capped.sequence() != start {
                crate::capped::trim(txn, coll, capped)?;
            }
            Ok(value)
        });
        capped.published();
        result
    }

    /// `run_write` for writes that cannot make an index multikey (deletes).
    pub(crate) fn run_txn<T>(
        &self,
        mode: &mut Mode<'_>,
        f: impl FnMut(&mut Txn, &mut Pending) -> DbResult<T>,
    ) -> DbResult<T> {
        match mode {
            Mode::Own => self.in_logged_txn(f),
            Mode::User(st) => {
                let mut f = f;
                let (txn, log) = st.parts();
                f(txn, log)
            }
        }
    }

    /// Inserts `docs` (already prepared: `_id` first). Ordered inserts stop at the first error.
    pub fn insert(
        &self,
        ns: &Namespace,
        docs: &[RawDocumentBuf],
        ordered: bool,
    ) -> DbResult<WriteResult> {
        let (coll, _guard) = self.collection_or_create(ns)?;
        self.insert_into(&coll, docs, ordered, &mut Mode::Own)
    }

    /// `insert` once the collection is in hand (and the data lock held).
    pub(crate) fn insert_into(
        &self,
        coll: &Arc<Collection>,
        docs: &[RawDocumentBuf],
        ordered: bool,
        mode: &mut Mode<'_>,
    ) -> DbResult<WriteResult> {
        if let Some(target) = self.qe_target(coll)? {
            return self.insert_encrypted(coll, &target, docs, ordered, mode);
        }
        let mut result = WriteResult::default();
        let mut next = 0;
        while next < docs.len() {
            let (end, inserted, errors) = match self.insert_chunk(coll, docs, next, ordered, mode) {
                Err(e) if e.code == ErrorCode::OutOfDiskSpace && !mode.in_session() => {
                    // The chunk's commit failed and nothing of it is read (M3 in
                    // docs/recovery.md). mongod retries a failed batch one document at a time
                    // and makes each failure a write error (`handleError`): with the device
                    // full each fails, so the chunk's documents are write errors — an
                    // ordered insert stops at its first.
                    let end = chunk_end(docs, next);
                    let failed = if ordered { next + 1 } else { end };
                    (end, 0, (next..failed).map(|i| (i, e.clone())).collect())
                }
                other => other?,
            };
            result.n += inserted;
            let stop = ordered && !errors.is_empty();
            result.errors.extend(errors);
            if stop {
                break;
            }
            next = end;
        }
        Ok(result)
    }

    /// One transaction's worth of an insert: returns where it stopped, how many it inserted
    /// and the errors of the documents it refused.
    fn insert_chunk(
        &self,
        coll: &Arc<Collection>,
        docs: &[RawDocumentBuf],
        start: usize,
        ordered: bool,
        mode: &mut Mode<'_>,
    ) -> DbResult<ChunkOutcome> {
        let in_session = mode.in_session();
        self.run_write(mode, coll, |txn, log| {
            let (mut i, mut bytes, mut n, mut errors) = (start, 0usize, 0i64, Vec::new());
            while in_chunk(docs, start, i, bytes) {
                match doc_write::insert(txn, log, coll, &docs[i]) {
                    Ok(()) => n += 1,
                    Err(e)
                        if e.code == ErrorCode::WriteConflict || fails_command(&e, in_session) =>
                    {
                        return Err(e)
                    }
                    Err(e) => {
                        errors.push((i, e));
                        if ordered {
                            i += 1;
                            break;
                        }
                    }
                }
                bytes += docs[i].as_bytes().len();
                i += 1;
            }
            Ok((i, n, errors))
        })
    }

    /// Runs update statements in order; ordered updates stop at the first error.
    pub fn update(&self, ns: &Namespace, ops: &[UpdateOp], ordered: bool) -> DbResult<WriteResult> {
        self.refuse_view(ns)?;
        let (coll, _guard) = if ops.iter().any(|o| o.upsert) {
            let (c, g) = self.collection_or_create(ns)?;
            (Some(c), g)
        } else {
            let g = self.data_lock();
            (self.catalog.get(ns), g)
        };
        self.update_into(coll.as_ref(), ops, ordered, &mut Mode::Own)
    }

    /// `update` once the collection (if any) is in hand and the data lock held.
    pub(crate) fn update_into(
        &self,
        coll: Option<&Arc<Collection>>,
        ops: &[UpdateOp],
        ordered: bool,
        mode: &mut Mode<'_>,
    ) -> DbResult<WriteResult> {
        let mut result = WriteResult::default();
        for (i, op) in ops.iter().enumerate() {
            let Some(coll) = coll else {
                if let Err(e) = matcher(&op.filter, &op.vars) {
                    result.errors.push((i, e));
                    if ordered {
                        break;
                    }
                }
                continue;
            };
            let outcome = match self.try_fast_update(coll, op, mode) {
                Some(fast) => fast.map(|(n, modified)| (n, modified, None)),
                None => self.update_one_statement(coll, op, mode),
            };
            match outcome {
                Ok((matched, modified, upserted)) => {
                    result.n += matched + i64::from(upserted.is_some());
                    result.n_modified += modified;
                    if let Some(id) = upserted {
                        result.upserted.push((i, id));
                    }
                }
                Err(e) if fails_command(&e, mode.in_session()) => return Err(e),
                Err(e) => {
                    result.errors.push((i, e));
                    if ordered {
                        break;
                    }
                }
            }
        }
        Ok(result)
    }

    fn update_one_statement(
        &self,
        coll: &Arc<Collection>,
        op: &UpdateOp,
        mode: &mut Mode<'_>,
    ) -> DbResult<(i64, i64, Option<Bson>)> {
        let vars = statement_vars(coll, &op.vars);
        let matcher = matcher(&op.filter, &vars)?;
        let sort = SortSpec::parse(&Document::new())?;
        let qe = self.qe_target(coll)?;
        self.run_write(mode, coll, |txn, log| {
            let p = plan_under(coll, &op.filter, &sort, op.hint.as_ref(), &vars)?;
            let shape = QueryShape {
                matcher: Some(matcher.clone()),
                ..QueryShape::default()
            };
            let mut query = Query::new(Scan::new(coll.clone(), p), shape);
            let (mut matched, mut modified) = (0i64, 0i64);
            let now = op.vars.now();
            while let Some((doc, pos)) = query.next_match(Snap::Txn(txn))? {
                matched += 1;
                if apply_update(txn, log, coll, qe.as_ref(), &op.update, &doc, pos, now)?.is_some()
                {
                    modified += 1;
                }
                if !op.multi {
                    break;
                }
            }
            let mut upserted = None;
            if matched == 0 && op.upsert {
                let mut doc = upsert_document(&op.update, &op.filter, now)?;
                if let Some(t) = &qe {
                    doc = process_update(txn, log, t, None, &doc, true)?;
                }
                upserted = Some(id_of(&doc)?);
                doc_write::insert(txn, log, coll, &doc)?;
            }
            Ok((matched, modified, upserted))
        })
    }

    /// Runs delete statements in order; ordered deletes stop at the first error.
    pub fn delete(&self, ns: &Namespace, ops: &[DeleteOp], ordered: bool) -> DbResult<WriteResult> {
        let _guard = self.data_lock();
        self.delete_from(ns, ops, ordered, &mut Mode::Own)
    }

    /// `delete` with the data lock held.
    pub(crate) fn delete_from(
        &self,
        ns: &Namespace,
        ops: &[DeleteOp],
        ordered: bool,
        mode: &mut Mode<'_>,
    ) -> DbResult<WriteResult> {
        self.refuse_view(ns)?;
        let in_session = mode.in_session();
        let Some(coll) = self.visible_collection(ns) else {
            // Still validate the filters, as mongod does.
            return each_statement(ops, ordered, in_session, |op| {
                matcher(&op.filter, &op.vars).map(|_| (0, 0))
            });
        };
        each_statement(ops, ordered, in_session, |op| {
            self.delete_statement(&coll, op, mode).map(|n| (n, 0))
        })
    }

    fn delete_statement(
        &self,
        coll: &Arc<Collection>,
        op: &DeleteOp,
        mode: &mut Mode<'_>,
    ) -> DbResult<i64> {
        let vars = statement_vars(coll, &op.vars);
        let matcher = matcher(&op.filter, &vars)?;
        let sort = SortSpec::parse(&Document::new())?;
        if mode.in_session() {
            crate::capped::refuse_in_transaction(coll)?;
        }
        self.run_txn(mode, |txn, log| {
            let p = plan_under(coll, &op.filter, &sort, op.hint.as_ref(), &vars)?;
            let shape = QueryShape {
                matcher: Some(matcher.clone()),
                ..QueryShape::default()
            };
            let mut query = Query::new(Scan::new(coll.clone(), p), shape);
            let mut n = 0;
            while let Some((doc, _)) = query.next_match(Snap::Txn(txn))? {
                doc_write::remove(txn, log, coll, &doc)?;
                n += 1;
                if op.limit_one {
                    break;
                }
            }
            Ok(n)
        })
    }

    /// findAndModify: finds the first document by `sort`, then removes or updates it (or
    /// upserts), returning the document before or after.
    pub fn find_and_modify(
        &self,
        ns: &Namespace,
        op: &FindAndModifyOp,
    ) -> DbResult<FindAndModifyResult> {
        self.refuse_view(ns)?;
        let (coll, _guard) = if op.upsert && !op.remove {
            self.collection_or_create(ns)?
        } else {
            let g = self.data_lock();
            match self.catalog.get(ns) {
                Some(c) => (c, g),
                None => {
                    matcher(&op.filter, &op.vars)?;
                    return Ok(FindAndModifyResult::default());
                }
            }
        };
        self.find_and_modify_on(&coll, op, &mut Mode::Own)
    }

    /// `find_and_modify` once the collection is in hand and the data lock held.
    pub(crate) fn find_and_modify_on(
        &self,
        coll: &Arc<Collection>,
        op: &FindAndModifyOp,
        mode: &mut Mode<'_>,
    ) -> DbResult<FindAndModifyResult> {
        let coll = coll.clone();
        let vars = statement_vars(&coll, &op.vars);
        let matcher = matcher(&op.filter, &vars)?;
        let sort = SortSpec::parse(op.sort.as_ref().unwrap_or(&Document::new()))?
            .collated(vars.collation());
        let projection = match &op.fields {
            Some(f) if !f.is_empty() => Some(Projection::parse_with(&to_raw(f)?, &vars)?),
            _ => None,
        };
        let qe = self.qe_target(&coll)?;
        let mut out = self.run_write(mode, &coll, |txn, log| {
            let p = plan_under(&coll, &op.filter, &sort, op.hint.as_ref(), &vars)?;
            let in_memory = (!p.sort_covered).then(|| sort.clone());
            let shape = QueryShape {
                matcher: Some(matcher.clone()),
                sort: in_memory,
                limit: Some(1),
                ..QueryShape::default()
            };
            let mut query = Query::new(Scan::new(coll.clone(), p), shape);
            let found = query.next_match(Snap::Txn(txn))?;
            let now = op.vars.now();
            let mut out = FindAndModifyResult::default();
            match (found, &op.update) {
                (Some((doc, _)), _) if op.remove => {
                    doc_write::remove(txn, log, &coll, &doc)?;
                    out.n = 1;
                    out.value = Some(doc);
                }
                (Some((doc, pos)), Some(update)) => {
                    let new = apply_update(txn, log, &coll, qe.as_ref(), update, &doc, pos, now)?;
                    out.n = 1;
                    out.updated_existing = true;
                    out.value = Some(if op.return_new {
                        new.unwrap_or(doc)
                    } else {
                        doc
                    });
                }
                (None, Some(update)) if op.upsert => {
                    let mut doc = upsert_document(update, &op.filter, now)?;
                    if let Some(t) = &qe {
                        doc = process_update(txn, log, t, None, &doc, true)?;
                    }
                    out.upserted = Some(id_of(&doc)?);
                    doc_write::insert(txn, log, &coll, &doc)?;
                    out.n = 1;
                    out.value = op.return_new.then_some(doc);
                }
                _ => {}
            }
            Ok(out)
        })?;
        if let (Some(p), Some(v)) = (&projection, &out.value) {
            out.value = Some(p.apply(v, None)?);
        }
        Ok(out)
    }
}

/// Applies `update` to `doc`; writes and returns the new document if it changed.
#[allow(
    clippy::too_many_arguments,
    reason = "the statement's parts, named at its two callers"
)]
fn apply_update(
    txn: &mut Txn,
    log: &mut Pending,
    coll: &Collection,
    qe: Option<&QeTarget>,
    update: &UpdateSpec,
    doc: &RawDocument,
    pos: Option<usize>,
    now: bson::DateTime,
) -> DbResult<Option<RawDocumentBuf>> {
    let Some(mut new) = updated_document(update, doc, pos, now)? else {
        return Ok(None);
    };
    if let Some(t) = qe {
        new = process_update(txn, log, t, Some(doc), &new, update.is_replacement())?;
    }
    doc_write::replace(txn, log, coll, doc, &new, update.is_replacement())?;
    Ok(Some(new))
}

/// Whether document `i` of an insert joins the transaction that started at `start`, with
/// `bytes` of documents in it already.
fn in_chunk(docs: &[RawDocumentBuf], start: usize, i: usize, bytes: usize) -> bool {
    i < docs.len() && i - start < INSERT_CHUNK_DOCS && bytes < INSERT_CHUNK_BYTES
}

/// Where the insert transaction that starts at `start` ends (`insert_chunk`'s bounds).
fn chunk_end(docs: &[RawDocumentBuf], start: usize) -> usize {
    let (mut i, mut bytes) = (start, 0);
    while in_chunk(docs, start, i, bytes) {
        bytes += docs[i].as_bytes().len();
        i += 1;
    }
    i
}

/// Runs `run` on each statement in order, adding up its (n, nModified): a statement's
/// error is its write error (an ordered batch stops there), except one that fails the
/// command (`fails_command`).
pub(crate) fn each_statement<O>(
    ops: &[O],
    ordered: bool,
    in_session: bool,
    mut run: impl FnMut(&O) -> DbResult<(i64, i64)>,
) -> DbResult<WriteResult> {
    let mut result = WriteResult::default();
    for (i, op) in ops.iter().enumerate() {
        match run(op) {
            Ok((n, modified)) => {
                result.n += n;
                result.n_modified += modified;
            }
            Err(e) if fails_command(&e, in_session) => return Err(e),
            Err(e) => {
                result.errors.push((i, e));
                if ordered {
                    break;
                }
            }
        }
    }
    Ok(result)
}

/// Whether `e` fails the whole write command inside a session transaction instead of being
/// one statement's write error: a write conflict (the driver retries the whole transaction
/// on it, which it does only for a command error with its label) and a write set over the
/// engine's limit. Outside one, a conflict is retried by `in_txn` and only one that outlasts
/// the retries is reported, as a write error.
pub(crate) fn fails_command(e: &MongoError, in_session: bool) -> bool {
    in_session
        && matches!(
            e.code,
            ErrorCode::WriteConflict | ErrorCode::TransactionTooLargeForCache
        )
}

/// The parsed `filter`, whose `$expr` reads `vars`.
pub(crate) fn matcher(filter: &Document, vars: &Variables) -> DbResult<Matcher> {
    Matcher::parse_with(&to_raw(filter)?, vars)
}

fn backoff(attempt: u32) {
    if attempt < 4 {
        std::thread::yield_now();
    } else {
        let micros = 50u64 << attempt.min(10);
        std::thread::sleep(std::time::Duration::from_micros(micros.min(20_000)));
    }
}
