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

use super::entry::{entry_key, key_ts};
use super::log::Oplog;
use super::pack;
use crate::cursors::DocSource;
use crate::{engine_error, DbResult};
use bson::{RawDocument, RawDocumentBuf, Timestamp};
use shale_doc::{ErrorCode, Matcher, MongoError, Projection};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

const ZERO: Timestamp = Timestamp {
    time: 0,
    increment: 0,
};

/// Entries one refill reads at most.
const REFILL_ENTRIES: usize = 256;

/// Where the next refill starts.
#[derive(Debug, Clone, Copy)]
enum Position {
    /// Not read yet: from the first entry (forwards) or the newest visible (backwards),
    /// or from `ts` on (a filter's `ts` lower bound).
    Start(Option<Timestamp>),
    /// After (forwards) or before (backwards) the entry under this key.
    After([u8; 8]),
}

/// What a read of the oplog asks.
#[derive(Default)]
pub struct OplogRead {
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
    /// Entries at or after this `ts` only (a filter's `ts: {$gte|$gt|$eq: T}`; the matcher
    /// still applies the exact condition).
    pub from: Option<Timestamp>,
    /// Entries to skip.
    pub skip: u64,
    /// Entries to return at most.
    pub limit: Option<u64>,
}

/// A cursor's source over the oplog (see the header).
pub struct OplogSource {
    oplog: Arc<Oplog>,
    read: OplogRead,
    pos: Position,
    buf: VecDeque<RawDocumentBuf>,
    skipped: u64,
    returned: u64,
    /// Nothing more will ever come (a non-tailable read ran dry, or the limit was met).
    finished: bool,
    /// The visibility point of the last refill that read every visible entry: everything
    /// up to it has been read (a change stream's high-water mark).
    dry_at: Timestamp,
}

impl OplogSource {
    pub(crate) fn new(oplog: Arc<Oplog>, read: OplogRead) -> OplogSource {
        let pos = Position::Start(if read.forward { read.from } else { None });
        OplogSource {
            oplog,
            read,
            pos,
            buf: VecDeque::new(),
            skipped: 0,
            returned: 0,
            finished: false,
            dry_at: ZERO,
        }
    }

    fn limit_met(&self) -> bool {
        self.read.limit.is_some_and(|l| self.returned >= l)
    }

    /// Reads the next run of visible entries into the buffer.
    fn refill(&mut self) -> DbResult<()> {
        let visible_ts = self.oplog.visible();
        let visible = entry_key(visible_ts);
        let mut cursor = self.oplog.coll.docs.cursor();
        let forward = self.read.forward;
        match self.pos {
            Position::Start(Some(ts)) => cursor.seek(&entry_key(ts)).map_err(engine_error)?,
            Position::Start(None) if forward => cursor.seek_to_first().map_err(engine_error)?,
            Position::Start(None) => cursor.seek_for_prev(&visible).map_err(engine_error)?,
            Position::After(key) => {
                cursor.seek(&key).map_err(engine_error)?;
                if cursor.entry().map(|(k, _)| k) != Some(&key[..]) {
                    self.finished = true;
                    return Err(position_lost(&key));
                }
                if forward {
                    cursor.next().map_err(engine_error)?;
                } else {
                    cursor.prev().map_err(engine_error)?;
                }
            }
        }
        let mut read = 0;
        let mut dry = true;
        while let Some((k, v)) = cursor.entry() {
            if forward && k > &visible[..] {
                break;
            }
            if read >= REFILL_ENTRIES {
                dry = false;
                break;
            }
            read += 1;
            let key: [u8; 8] = k.try_into().map_err(|_| corrupt_key())?;
            self.pos = Position::After(key);
            let doc = RawDocument::from_bytes(v).map_err(|_| corrupt_key())?;
            if let Some(m) = &self.read.matcher {
                if !m.matches(doc)? {
                    self.step(&mut cursor, forward)?;
                    continue;
                }
            }
            if self.skipped < self.read.skip {
                self.skipped += 1;
            } else {
                let out = match &self.read.projection {
                    Some(p) => p.apply(doc, None)?,
                    None => doc.to_owned(),
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
        if dry && forward && pack(visible_ts) > pack(self.dry_at) {
            self.dry_at = visible_ts;
        }
        Ok(())
    }

    /// The newest `ts` up to which every visible entry has been read: the later of the
    /// last entry read and the visibility point of the last refill that ran dry.
    pub(crate) fn scanned_to(&self) -> Timestamp {
        let read = self.read_up_to();
        if pack(self.dry_at) > pack(read) {
            self.dry_at
        } else {
            read
        }
    }

    fn step(&self, cursor: &mut shale_engine::Cursor, forward: bool) -> DbResult<()> {
        if forward {
            cursor.next().map_err(engine_error)
        } else {
            cursor.prev().map_err(engine_error)
        }
    }

    /// The `ts` this source has read up to (for waiting).
    fn read_up_to(&self) -> Timestamp {
        match self.pos {
            Position::After(k) => key_ts(&k).unwrap_or(ZERO),
            Position::Start(Some(ts)) => match ts.increment {
                0 => Timestamp {
                    time: ts.time.saturating_sub(1),
                    increment: if ts.time == 0 { 0 } else { u32::MAX },
                },
                i => Timestamp {
                    time: ts.time,
                    increment: i - 1,
                },
            },
            Position::Start(None) => ZERO,
        }
    }
}

impl DocSource for OplogSource {
    fn next_doc(&mut self) -> DbResult<Option<RawDocumentBuf>> {
        loop {
            if let Some(d) = self.buf.pop_front() {
                return Ok(Some(d));
            }
            if self.finished || self.limit_met() {
                self.finished = true;
                return Ok(None);
            }
            let before = pack(self.read_up_to());
            self.refill()?;
            if self.buf.is_empty() && pack(self.read_up_to()) == before {
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
            self.oplog.wait_past(self.read_up_to(), deadline);
        }
    }
}

fn position_lost(key: &[u8; 8]) -> MongoError {
    MongoError::new(
        ErrorCode::CappedPositionLost,
        format!(
            "CollectionScan died due to position in capped collection being deleted. Last \
             seen record id: RecordId({})",
            u64::from_be_bytes(*key)
        ),
    )
}

fn corrupt_key() -> MongoError {
    MongoError::new(
        ErrorCode::DataCorruptionDetected,
        "local.oplog.rs: an entry with a malformed key or value",
    )
}
