//! Client cursors: queries that outlive one command. A cursor owns its snapshot, so every
//! batch of one query reads the same consistent state; it is found by id and namespace,
//! batches are cut by document count and bytes, and a cursor idle longer than the timeout
//! (mongod's `cursorTimeoutMillis`, 10 minutes) is closed, releasing its snapshot. A cursor
//! may carry its owner, an opaque 16-byte id the caller chose (the server's logical session
//! id): the caller checks it on each getMore and closes an owner's cursors when it ends.

use crate::exec::ViewQuery;
use crate::DbResult;
use bson::RawDocumentBuf;
use shale_doc::{ErrorCode, MongoError};
use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Bytes of documents one batch carries at most (MongoDB leaves room under 16 MiB replies).
pub const MAX_BATCH_BYTES: usize = 16 * 1024 * 1024 - 16 * 1024;
/// Documents in a first batch when the client did not say (MongoDB's 101).
pub const DEFAULT_FIRST_BATCH: usize = 101;
/// Idle time after which a cursor is closed.
pub const CURSOR_TIMEOUT: Duration = Duration::from_secs(600);

/// Something that yields documents one at a time (a find, or an aggregation's output).
pub trait DocSource: Send {
    /// The next document, or `None` when the source is dry.
    fn next_doc(&mut self) -> DbResult<Option<RawDocumentBuf>>;

    /// A tailable source (the oplog's): running dry leaves the cursor open, since more may
    /// come. False once nothing more can (its limit met).
    fn tailing(&self) -> bool {
        false
    }

    /// For `awaitData`: blocks until more may be readable or `deadline` passes.
    fn wait(&mut self, _deadline: Instant) {}

    /// A change stream's position after the documents it has handed out (its
    /// `postBatchResumeToken`); `None` for every other source.
    fn resume_token(&self) -> Option<RawDocumentBuf> {
        None
    }

    /// True for a source that outlives a drop or rename of its namespace (a change stream,
    /// which reports it): `kill_namespace` leaves its cursor open.
    fn outlives_namespace(&self) -> bool {
        false
    }
}

impl DocSource for ViewQuery {
    fn next_doc(&mut self) -> DbResult<Option<RawDocumentBuf>> {
        ViewQuery::next_doc(self)
    }
}

/// Documents already made, served in order (results computed whole).
pub struct VecSource(pub std::vec::IntoIter<RawDocumentBuf>);

impl DocSource for VecSource {
    fn next_doc(&mut self) -> DbResult<Option<RawDocumentBuf>> {
        Ok(self.0.next())
    }
}

/// Who opened a cursor: an opaque id of the caller's choosing (a logical session id).
pub type CursorOwner = [u8; 16];

struct Entry {
    ns: String,
    owner: Option<CursorOwner>,
    source: Box<dyn DocSource>,
    /// A document read but not sent because the batch was full.
    held: Option<RawDocumentBuf>,
    last_used: Instant,
    /// `noCursorTimeout`: never closed for idling (only by killCursors, its session's end,
    /// or exhaustion).
    no_timeout: bool,
}

/// One batch of a cursor: documents, and the cursor id to ask for more (0 when exhausted).
#[derive(Debug, Default)]
pub struct Batch {
    /// The batch's documents.
    pub docs: Vec<RawDocumentBuf>,
    /// The cursor to ask for more, 0 when exhausted.
    pub cursor_id: i64,
    /// A change stream's `postBatchResumeToken`.
    pub resume_token: Option<RawDocumentBuf>,
}

/// Every open cursor of the server.
pub struct CursorTable {
    next_id: AtomicI64,
    /// Cursors closed for idling past the timeout (`serverStatus.metrics.cursor.timedOut`).
    timed_out: AtomicU64,
    open: Mutex<HashMap<i64, Entry>>,
}

impl Default for CursorTable {
    fn default() -> Self {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as i64);
        CursorTable {
            next_id: AtomicI64::new((seed & 0x0000_ffff_ffff_ffff).max(1) << 8),
            timed_out: AtomicU64::new(0),
            open: Mutex::new(HashMap::new()),
        }
    }
}

impl std::fmt::Debug for CursorTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CursorTable")
            .field("open", &self.len())
            .finish()
    }
}

impl CursorTable {
    /// The first batch of `source`; registers a cursor, owned by `owner`, if documents
    /// remain.
    pub fn first_batch(
        &self,
        ns: &str,
        source: Box<dyn DocSource>,
        batch_size: Option<usize>,
        single_batch: bool,
        owner: Option<CursorOwner>,
    ) -> DbResult<Batch> {
        let mut entry = Entry {
            ns: ns.to_owned(),
            owner,
            source,
            held: None,
            last_used: Instant::now(),
            no_timeout: false,
        };
        let limit = batch_size.unwrap_or(DEFAULT_FIRST_BATCH);
        let (docs, done) = fill(&mut entry, limit)?;
        let resume_token = batch_resume_token(&entry, &docs);
        if done || single_batch {
            return Ok(Batch {
                docs,
                cursor_id: 0,
                resume_token,
            });
        }
        self.reap();
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.lock().insert(id, entry);
        Ok(Batch {
            docs,
            cursor_id: id,
            resume_token,
        })
    }

    /// The next batch of cursor `id`, which must belong to `ns`.
    pub fn get_more(&self, id: i64, ns: &str, batch_size: Option<usize>) -> DbResult<Batch> {
        self.get_more_waiting(id, ns, batch_size, None)
    }

    /// `get_more`; a tailable cursor with nothing to return waits up to `await_data`
    /// (`awaitData` with `maxTimeMS`) for more before answering an empty batch.
    pub fn get_more_waiting(
        &self,
        id: i64,
        ns: &str,
        batch_size: Option<usize>,
        await_data: Option<Duration>,
    ) -> DbResult<Batch> {
        let mut entry = {
            let mut open = self.lock();
            match open.get(&id) {
                None => return Err(MongoError::new(ErrorCode::CursorNotFound, format!("cursor id {id} not found"))),
                Some(e) if e.ns != ns => {
                    return Err(MongoError::new(
                        ErrorCode::Unauthorized,
                        format!("Requested getMore on namespace '{ns}', but cursor belongs to a different namespace {}", e.ns),
                    ))
                }
                Some(_) => {}
            }
            open.remove(&id).ok_or_else(|| {
                MongoError::new(
                    ErrorCode::CursorNotFound,
                    format!("cursor id {id} not found"),
                )
            })?
        };
        let limit = batch_size.filter(|n| *n > 0).unwrap_or(usize::MAX);
        let (mut docs, mut done) = fill(&mut entry, limit)?;
        if let Some(wait) = await_data.filter(|_| docs.is_empty() && !done) {
            entry.source.wait(Instant::now() + wait);
            (docs, done) = fill(&mut entry, limit)?;
        }
        let resume_token = batch_resume_token(&entry, &docs);
        if done {
            return Ok(Batch {
                docs,
                cursor_id: 0,
                resume_token,
            });
        }
        entry.last_used = Instant::now();
        self.lock().insert(id, entry);
        Ok(Batch {
            docs,
            cursor_id: id,
            resume_token,
        })
    }

    /// The owner of open cursor `id`: `None` when there is no such cursor, `Some(None)` for
    /// a cursor opened without one.
    pub fn owner(&self, id: i64) -> Option<Option<CursorOwner>> {
        self.lock().get(&id).map(|e| e.owner)
    }

    /// Whether open cursor `id` is a change stream's (its source has a resume token).
    pub fn is_change_stream(&self, id: i64) -> bool {
        self.lock()
            .get(&id)
            .is_some_and(|e| e.source.resume_token().is_some())
    }

    /// The namespace of open cursor `id` (legacy OP_KILL_CURSORS names ids only).
    pub fn namespace_of(&self, id: i64) -> Option<String> {
        self.lock().get(&id).map(|e| e.ns.clone())
    }

    /// Closes every cursor `owner` opened; returns how many.
    pub fn kill_owned(&self, owner: &CursorOwner) -> usize {
        let mut open = self.lock();
        let before = open.len();
        open.retain(|_, e| e.owner.as_ref() != Some(owner));
        before - open.len()
    }

    /// Closes the given cursors of `ns`; returns (killed, not found).
    pub fn kill(&self, ns: &str, ids: &[i64]) -> (Vec<i64>, Vec<i64>) {
        let mut open = self.lock();
        let (mut killed, mut missing) = (Vec::new(), Vec::new());
        for id in ids {
            if open.get(id).is_some_and(|e| e.ns == ns) {
                open.remove(id);
                killed.push(*id);
            } else {
                missing.push(*id);
            }
        }
        (killed, missing)
    }

    /// Closes every cursor on `ns` (its collection was dropped or renamed), or on every
    /// collection of a database when `ns` is `db.` with an empty collection part.
    pub fn kill_namespace(&self, ns: &str) {
        self.lock().retain(|_, e| {
            if e.source.outlives_namespace() {
                true
            } else if ns.ends_with('.') {
                !e.ns.starts_with(ns)
            } else {
                e.ns != ns
            }
        });
    }

    /// Kills every cursor (the storage engine is being reopened: `revive.rs`); returns how
    /// many there were.
    pub(crate) fn kill_all(&self) -> usize {
        let mut cursors = self.lock();
        let n = cursors.len();
        cursors.clear();
        n
    }

    /// Open cursors.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Exempts cursor `id` from the idle timeout (find's `noCursorTimeout`); false when no
    /// such cursor is open.
    pub fn set_no_timeout(&self, id: i64) -> bool {
        match self.lock().get_mut(&id) {
            Some(e) => {
                e.no_timeout = true;
                true
            }
            None => false,
        }
    }

    /// True when no cursor is open.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Cursors closed so far for idling past the timeout.
    pub fn timed_out(&self) -> u64 {
        self.timed_out.load(Ordering::Relaxed)
    }

    fn reap(&self) {
        let now = Instant::now();
        let mut open = self.lock();
        let before = open.len();
        open.retain(|_, e| e.no_timeout || now.duration_since(e.last_used) < CURSOR_TIMEOUT);
        let closed = (before - open.len()) as u64;
        self.timed_out.fetch_add(closed, Ordering::Relaxed);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<i64, Entry>> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A change stream's `postBatchResumeToken` after a batch: the source's position, unless a
/// document it handed out is held for the next batch; then the last sent event's `_id` (its
/// resume token, which the source checked the pipeline left unchanged).
fn batch_resume_token(entry: &Entry, docs: &[RawDocumentBuf]) -> Option<RawDocumentBuf> {
    let token = entry.source.resume_token()?;
    if entry.held.is_none() {
        return Some(token);
    }
    match docs.last().map(|d| d.get_document("_id")) {
        Some(Ok(id)) => Some(id.to_owned()),
        _ => Some(token),
    }
}

/// Reads up to `limit` documents and `MAX_BATCH_BYTES`; true when the source is exhausted.
fn fill(entry: &mut Entry, limit: usize) -> DbResult<(Vec<RawDocumentBuf>, bool)> {
    let mut docs = Vec::new();
    let mut bytes = 0usize;
    while docs.len() < limit {
        let next = match entry.held.take() {
            Some(d) => Some(d),
            None => entry.source.next_doc()?,
        };
        let Some(d) = next else {
            return Ok((docs, !entry.source.tailing()));
        };
        let n = d.as_bytes().len();
        if !docs.is_empty() && bytes + n > MAX_BATCH_BYTES {
            entry.held = Some(d);
            return Ok((docs, false));
        }
        bytes += n;
        docs.push(d);
    }
    // Full by count: look one ahead so an exhausted cursor is closed now, not on a getMore.
    match entry.source.next_doc()? {
        None => Ok((docs, !entry.source.tailing())),
        Some(d) => {
            entry.held = Some(d);
            Ok((docs, false))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn docs(n: i32) -> Box<dyn DocSource> {
        let v: Vec<RawDocumentBuf> = (0..n)
            .map(|i| {
                let mut d = RawDocumentBuf::new();
                d.append("_id", i);
                d
            })
            .collect();
        Box::new(VecSource(v.into_iter()))
    }

    #[test]
    fn a_no_timeout_cursor_outlives_the_idle_timeout() {
        let table = CursorTable::default();
        let first = || {
            table
                .first_batch("db.c", docs(5), Some(1), false, None)
                .expect("batch")
                .cursor_id
        };
        let (kept, idle) = (first(), first());
        assert!(table.set_no_timeout(kept));
        assert!(!table.set_no_timeout(-7));
        let long_ago = Instant::now()
            .checked_sub(CURSOR_TIMEOUT + Duration::from_secs(1))
            .expect("the clock is past the timeout");
        for e in table.lock().values_mut() {
            e.last_used = long_ago;
        }
        table.reap();
        assert_eq!(table.owner(kept), Some(None));
        assert_eq!(table.owner(idle), None);
        assert_eq!(table.timed_out(), 1);
        let batch = table.get_more(kept, "db.c", Some(10)).expect("getMore");
        assert_eq!(batch.docs.len(), 4);
    }

    #[test]
    fn an_owners_cursors_are_found_and_closed_together() {
        let table = CursorTable::default();
        let (a, b) = ([1u8; 16], [2u8; 16]);
        let first = |owner| {
            table
                .first_batch("db.c", docs(5), Some(1), false, owner)
                .expect("batch")
                .cursor_id
        };
        let (a1, a2, b1, none) = (first(Some(a)), first(Some(a)), first(Some(b)), first(None));
        assert_eq!(table.owner(a1), Some(Some(a)));
        assert_eq!(table.owner(none), Some(None));
        assert_eq!(table.owner(-7), None);
        assert_eq!(table.kill_owned(&a), 2);
        assert_eq!((table.owner(a1), table.owner(a2)), (None, None));
        assert_eq!(table.owner(b1), Some(Some(b)));
        assert_eq!(table.len(), 2);
    }
}
