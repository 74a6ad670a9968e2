//! Reading `local.oplog.rs` in `$natural` (= `ts`) order, forwards or backwards, clipped
//! at the visibility point (O5), as a cursor's document source. A tailable source (O7)
//! remembers the key of the last entry it read instead of a snapshot: each refill opens a
//! cursor on the newest commit, seeks to that key and goes on from it, so it returns every
//! visible entry after its position exactly once, in `ts` order, and never one whose
//! transaction has not committed (entries behind an open slot wait until the slot closes).
//! Its position deleted by truncation (O6) is `CappedPositionLost` (136), as on mongod.
//! `awaitData`: `wait` blocks until the visibility point passes the position.
//!
//! Change streams (`change_stream/`) sit on this: a tailable forward source from a resume
//! `ts`, whose entries they turn into events; `scanned_to` is their high-water mark.
//!
//! The source is generic over a `NaturalLog`, so capped collections (`capped.rs`) read and
//! tail with the same code: a log is a run of keys `prefix` + 8-byte big-endian position
//! in one tree, a visibility point, a wait for it to move, and what an entry's value
//! stands for (the oplog's values are its entries; a capped collection's name a document).

use super::log::Oplog;
use super::{pack, unpack};
use crate::cursors::DocSource;
use crate::{engine_error, DbResult};
use bson::{RawDocument, RawDocumentBuf, Timestamp};
use shale_doc::{ErrorCode, Matcher, MongoError, Projection};
use shale_engine::TreeHandle;
use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

/// A log read in natural order: the oplog, or a capped collection's insertion order.
pub trait NaturalLog: Send + Sync {
    /// The tree holding the log's entries.
    fn tree(&self) -> &TreeHandle;
    /// What every entry key starts with, before its 8-byte position.
    fn prefix(&self) -> &[u8];
    /// The newest position readers may see.
    fn visible(&self) -> u64;
    /// Blocks until the visibility point passes `after` or `deadline` comes.
    fn wait_past(&self, after: u64, deadline: Instant);
    /// The document an entry's value stands for; `None` if it is gone.
    fn document<'v>(&self, value: &'v [u8]) -> DbResult<Option<Cow<'v, RawDocument>>>;
    /// The log's name, for errors.
    fn name(&self) -> String;
}

impl NaturalLog for Arc<Oplog> {
    fn tree(&self) -> &TreeHandle {
        &self.coll.docs
    }
    fn prefix(&self) -> &[u8] {
        &[]
    }
    fn visible(&self) -> u64 {
        pack(Oplog::visible(self))
    }
    fn wait_past(&self, after: u64, deadline: Instant) {
        Oplog::wait_past(self, unpack(after), deadline);
    }
    fn document<'v>(&self, value: &'v [u8]) -> DbResult<Option<Cow<'v, RawDocument>>> {
        let doc = RawDocument::from_bytes(value).map_err(|_| corrupt_key("local.oplog.rs"))?;
        Ok(Some(Cow::Borrowed(doc)))
    }
    fn name(&self) -> String {
        "local.oplog.rs".to_owned()
    }
}

/// Entries one refill reads at most.
const REFILL_ENTRIES: usize = 256;

/// Where the next refill starts.
#[derive(Debug, Clone, Copy)]
enum Position {
    /// Not read yet: from the first entry (forwards) or the newest visible (backwards),
    /// or from this position on (a filter's `ts` lower bound).
    Start(Option<u64>),
    /// After (forwards) or before (backwards) the entry at this position.
    After(u64),
}

/// What a read of the oplog asks.
pub type OplogRead = NaturalRead;

/// A cursor's source over the oplog (see the header).
pub type OplogSource = NaturalSource<Arc<Oplog>>;

/// What a read of a natural log asks.
#[derive(Default)]
pub struct NaturalRead {
    /// The filter, if any.
    pub matcher: Option<Matcher>,
    /// The projection, if any.
    pub projection: Option<Projection>,
    /// In `ts` order (`$natural: 1`); else newest first.
    pub forward: bool,
    /// A tailable cursor: it stays open when it runs dry.
    pub tailable: bool,
    /// A tailable read's `getMore` waits for entries (`awaitData`).
    pub await_data: bool,
    /// Entries at or after this position only (the oplog: a filter's `ts: {$gte|$gt|$eq:
    /// T}`, packed; the matcher still applies the exact condition).
    pub from: Option<u64>,
    /// Entries to skip.
    pub skip: u64,
    /// Entries to return at most.
    pub limit: Option<u64>,
}

/// A cursor's source over a natural log (see the header).
pub struct NaturalSource<L: NaturalLog> {
    log: L,
    read: NaturalRead,
    pos: Position,
    buf: VecDeque<RawDocumentBuf>,
    skipped: u64,
    returned: u64,
    /// Nothing more will ever come (a non-tailable read ran dry, or the limit was met).
    finished: bool,
    /// The visibility point of the last refill that read every visible entry: everything
    /// up to it has been read (a change stream's high-water mark).
    dry_at: u64,
}

impl OplogSource {
    /// The newest `ts` up to which every visible entry has been read: the later of the
    /// last entry read and the visibility point of the last refill that ran dry.
    pub(crate) fn scanned_to(&self) -> Timestamp {
        unpack(self.read_up_to().max(self.dry_at))
    }
}

impl<L: NaturalLog> NaturalSource<L> {
    pub(crate) fn new(log: L, read: NaturalRead) -> NaturalSource<L> {
        let pos = Position::Start(if read.forward { read.from } else { None });
        NaturalSource {
            log,
            read,
            pos,
            buf: VecDeque::new(),
            skipped: 0,
            returned: 0,
            finished: false,
            dry_at: 0,
        }
    }

    fn key(&self, pos: u64) -> Vec<u8> {
        let mut k = self.log.prefix().to_vec();
        k.extend_from_slice(&pos.to_be_bytes());
        k
    }

    fn limit_met(&self) -> bool {
        self.read.limit.is_some_and(|l| self.returned >= l)
    }

    /// Reads the next run of visible entries into the buffer.
    fn refill(&mut self) -> DbResult<()> {
        let visible_pos = self.log.visible();
        let visible = self.key(visible_pos);
        let prefix = self.log.prefix().to_vec();
        let mut cursor = self.log.tree().cursor();
        let forward = self.read.forward;
        match self.pos {
            Position::Start(Some(p)) => cursor.seek(&self.key(p)).map_err(engine_error)?,
            Position::Start(None) if forward => cursor.seek(&prefix).map_err(engine_error)?,
            Position::Start(None) => cursor.seek_for_prev(&visible).map_err(engine_error)?,
            Position::After(p) => {
                let key = self.key(p);
                cursor.seek(&key).map_err(engine_error)?;
                if cursor.entry().map(|(k, _)| k) != Some(&key[..]) {
                    self.finished = true;
                    return Err(position_lost(p));
                }
                self.step(&mut cursor, forward)?;
            }
        }
        let mut read = 0;
        let mut dry = true;
        while let Some((k, v)) = cursor.entry() {
            if (forward && k > &visible[..]) || !k.starts_with(&prefix) {
                break;
            }
            if read >= REFILL_ENTRIES {
                dry = false;
                break;
            }
            read += 1;
            let pos: [u8; 8] = k[prefix.len()..]
                .try_into()
                .map_err(|_| corrupt_key(&self.log.name()))?;
            self.pos = Position::After(u64::from_be_bytes(pos));
            let Some(doc) = self.log.document(v)? else {
                self.step(&mut cursor, forward)?;
                continue;
            };
            if let Some(m) = &self.read.matcher {
                if !m.matches(&doc)? {
                    self.step(&mut cursor, forward)?;
                    continue;
                }
            }
            if self.skipped < self.read.skip {
                self.skipped += 1;
            } else {
                let out = match &self.read.projection {
                    Some(p) => p.apply(&doc, None)?,
                    None => doc.into_owned(),
                };
                self.buf.push_back(out);
                self.returned += 1;
                if self.limit_met() {
                    dry = false;
                    break;
                }
            }
            self.step(&mut cursor, forward)?;
        }
        if dry && forward && visible_pos > self.dry_at {
            self.dry_at = visible_pos;
        }
        Ok(())
    }

    fn step(&self, cursor: &mut shale_engine::Cursor, forward: bool) -> DbResult<()> {
        if forward {
            cursor.next().map_err(engine_error)
        } else {
            cursor.prev().map_err(engine_error)
        }
    }

    /// The position this source has read up to (for waiting).
    fn read_up_to(&self) -> u64 {
        match self.pos {
            Position::After(p) => p,
            Position::Start(Some(p)) => p.saturating_sub(1),
            Position::Start(None) => 0,
        }
    }
}

impl<L: NaturalLog> DocSource for NaturalSource<L> {
    fn next_doc(&mut self) -> DbResult<Option<RawDocumentBuf>> {
        loop {
            if let Some(d) = self.buf.pop_front() {
                return Ok(Some(d));
            }
            if self.finished || self.limit_met() {
                self.finished = true;
                return Ok(None);
            }
            let before = self.read_up_to();
            self.refill()?;
            if self.buf.is_empty() && self.read_up_to() == before {
                // Nothing new is visible: a plain read is over, a tailable one waits.
                if !self.read.tailable {
                    self.finished = true;
                }
                return Ok(None);
            }
        }
    }

    fn tailing(&self) -> bool {
        self.read.tailable && !self.finished && !self.limit_met()
    }

    fn wait(&mut self, deadline: Instant) {
        if self.read.await_data {
            self.log.wait_past(self.read_up_to(), deadline);
        }
    }
}

fn position_lost(pos: u64) -> MongoError {
    MongoError::new(
        ErrorCode::CappedPositionLost,
        format!(
            "CollectionScan died due to position in capped collection being deleted. Last \
             seen record id: RecordId({pos})"
        ),
    )
}

fn corrupt_key(name: &str) -> MongoError {
    MongoError::new(
        ErrorCode::DataCorruptionDetected,
        format!("{name}: an entry with a malformed key or value"),
    )
}
