//! A change stream as a cursor's document source: a tailable forward read of the oplog
//! (`oplog/reader.rs`, visibility-gated, O5/O7) from the stream's start, each entry turned
//! into events for its scope (`event.rs`), events at or before the resume token skipped,
//! `updateLookup` read from the collection's newest commit, pre- and post-images from
//! `config.system.preimages` (`pre_images.rs`), the stages after `$changeStream`
//! run on each event, whose `_id` they must leave alone (else `ChangeStreamFatalError`).
//! Its position (`resume_token`, the batch's `postBatchResumeToken`) is the last event handed
//! out, or, once every visible entry has been read, the high-water mark after them, so it
//! moves even when nothing matched. An `invalidate` ends it. `wait` blocks on the oplog's
//! visibility point until an event is ready or the getMore's `maxAwaitTimeMS` passes.

use super::event::{changes, Change, Scope, UpdateKind};
use super::spec::{BeforeChange, ChangeStreamSpec, FullDocument};
use super::split::{split, too_large, MAX_EVENT_BYTES};
use super::token::ResumeToken;
use crate::cursors::DocSource;
use crate::oplog::apply_diff::apply_diff;
use crate::oplog::log::Oplog;
use crate::oplog::reader::OplogSource;
use crate::query_ops::FindSpec;
use crate::{Database, DbResult};
use bson::{RawBson, RawBsonRef, RawDocument, RawDocumentBuf, Timestamp};
use shale_doc::aggregate::{NoCollections, Pipeline, RunOptions};
use shale_doc::{ErrorCode, MongoError};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

/// A change stream's cursor source (see the header).
pub struct ChangeStreamSource {
    pub(super) db: Arc<Database>,
    pub(super) oplog: Arc<Oplog>,
    pub(super) entries: OplogSource,
    pub(super) scope: Scope,
    pub(super) spec: ChangeStreamSpec,
    /// The stages after `$changeStream` (none: `None`).
    pub(super) pipeline: Option<Pipeline>,
    /// `$changeStreamSplitLargeEvent` ends the pipeline (`split.rs`).
    pub(super) split: bool,
    /// Events at or before this token are not returned (a resumed stream).
    pub(super) skip_through: Option<ResumeToken>,
    /// Events made, through the pipeline, not yet handed out.
    pub(super) ready: VecDeque<(ResumeToken, RawDocumentBuf)>,
    /// Where the stream is (the `postBatchResumeToken`).
    pub(super) position: ResumeToken,
    /// An `invalidate` was made: nothing follows it.
    pub(super) invalidated: bool,
    /// An error met while waiting, returned by the next read.
    pub(super) failed: Option<MongoError>,
}

impl ChangeStreamSource {
    /// Reads entries until an event is ready or every visible entry has been read; true if
    /// one is ready.
    fn pump(&mut self) -> DbResult<bool> {
        while self.ready.is_empty() && !self.invalidated {
            let Some(entry) = self.entries.next_doc()? else {
                let hwm = ResumeToken::high_water_mark(next_ts(self.entries.scanned_to()));
                if hwm > self.position {
                    self.position = hwm;
                }
                return Ok(false);
            };
            for change in changes(&entry, &self.scope, self.spec.show_expanded_events)? {
                // Resumed from a fragment: the event is split again and the fragments up
                // to the token are dropped in `emit`.
                let resumes_inside = self
                    .skip_through
                    .is_some_and(|t| t.fragment_number().is_some() && t.whole() == change.token);
                if !resumes_inside && self.skip_through.is_some_and(|t| change.token <= t) {
                    // An invalidating event already returned: its invalidate may not be.
                    if change.invalidates {
                        let inv = change.invalidate();
                        if self.skip_through.is_some_and(|t| inv.token <= t) {
                            continue;
                        }
                        self.emit(inv)?;
                        self.invalidated = true;
                        break;
                    }
                    continue;
                }
                let invalidates = change.invalidates;
                let inv = invalidates.then(|| change.invalidate());
                self.emit(change)?;
                if let Some(inv) = inv {
                    self.emit(inv)?;
                    self.invalidated = true;
                    break;
                }
            }
        }
        Ok(!self.ready.is_empty())
    }

    /// Renders `change`, adds what the options ask, runs the later stages on it and queues
    /// what comes out.
    fn emit(&mut self, mut change: Change) -> DbResult<()> {
        let extra = self.extra_fields(&mut change)?;
        let event = change.document(&extra);
        let token_doc = change.token.document();
        let outputs: Vec<RawDocumentBuf> = match &self.pipeline {
            None => vec![event],
            Some(p) => p
                .run_from(
                    0,
                    std::iter::once(Ok(event)),
                    &NoCollections,
                    RunOptions::default(),
                )
                .collect::<Result<_, _>>()?,
        };
        for out in outputs {
            match out.get("_id") {
                Ok(Some(RawBsonRef::Document(id))) if id == &*token_doc => {}
                _ => return Err(id_modified(&token_doc, &out)),
            }
            let pieces = match out.as_bytes().len() > MAX_EVENT_BYTES {
                false => vec![(change.token, out)],
                true if self.split => split(&out, change.token, MAX_EVENT_BYTES)?,
                true => return Err(too_large(&out)),
            };
            for (token, piece) in pieces {
                if self.skip_through.is_none_or(|t| token > t) {
                    self.ready.push_back((token, piece));
                }
            }
        }
        Ok(())
    }

    /// The fields mongod's later internal stages append: a looked-up `fullDocument` for
    /// updates, `fullDocumentBeforeChange`; and a fast update's values read from the document.
    fn extra_fields(&self, change: &mut Change) -> DbResult<Vec<(&'static str, RawBson)>> {
        let mut extra = Vec::new();
        let is_update = change.operation == "update";
        if let UpdateKind::Blind(paths) = change.update_kind.clone() {
            if !paths.is_empty() {
                let current = self.look_up(change)?;
                fill_blind(change, &paths, current.as_deref())?;
            }
        }
        let wants_pre = !matches!(self.spec.before_change, BeforeChange::Off)
            || (is_update
                && matches!(
                    self.spec.full_document,
                    FullDocument::WhenAvailable | FullDocument::Required
                ));
        let pre = match (wants_pre, change.image_key) {
            (true, Some((ui, ts, index))) => self.db.pre_image(ui, ts, index)?,
            _ => None,
        };
        if matches!(change.operation, "update" | "replace" | "delete") {
            match (self.spec.before_change, &pre) {
                (BeforeChange::Off, _) => {}
                (_, Some(img)) => {
                    extra.push(("fullDocumentBeforeChange", RawBson::Document(img.clone())))
                }
                (BeforeChange::WhenAvailable, None) => {
                    extra.push(("fullDocumentBeforeChange", RawBson::Null))
                }
                (BeforeChange::Required, None) => return Err(image_missing("pre", change)),
            }
        }
        if is_update {
            match self.spec.full_document {
                FullDocument::Default => {}
                FullDocument::UpdateLookup => {
                    let found = self.look_up(change)?;
                    extra.push((
                        "fullDocument",
                        found.map_or(RawBson::Null, RawBson::Document),
                    ));
                }
                FullDocument::WhenAvailable | FullDocument::Required => {
                    // The post-image: the pre-image with the update's diff applied.
                    let post = match (&pre, &change.diff) {
                        (Some(img), Some(diff)) => apply_diff(img, diff),
                        _ => None,
                    };
                    match (post, self.spec.full_document) {
                        (Some(doc), _) => extra.push(("fullDocument", RawBson::Document(doc))),
                        (None, FullDocument::Required) => {
                            return Err(image_missing("post", change))
                        }
                        (None, _) => extra.push(("fullDocument", RawBson::Null)),
                    }
                }
            }
        }
        Ok(extra)
    }

    /// The event's document as the collection's newest commit has it (`updateLookup`).
    fn look_up(&self, change: &Change) -> DbResult<Option<RawDocumentBuf>> {
        let (Some(ns), Some(key)) = (change.namespace(), &change.document_key) else {
            return Ok(None);
        };
        let filter = bson::Document::try_from(key.as_ref())
            .map_err(|e| MongoError::new(ErrorCode::BadValue, e.to_string()))?;
        let spec = FindSpec {
            filter,
            limit: Some(1),
            ..FindSpec::default()
        };
        let mut q = self.db.find(&ns, &spec)?;
        q.next_doc()
    }
}

impl DocSource for ChangeStreamSource {
    fn next_doc(&mut self) -> DbResult<Option<RawDocumentBuf>> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        if self.ready.is_empty() {
            self.pump()?;
        }
        Ok(self.ready.pop_front().map(|(token, doc)| {
            self.position = token;
            doc
        }))
    }

    fn tailing(&self) -> bool {
        !self.invalidated || !self.ready.is_empty()
    }

    fn wait(&mut self, deadline: Instant) {
        while self.ready.is_empty() && !self.invalidated && self.failed.is_none() {
            if !self.oplog.wait_past(self.entries.scanned_to(), deadline) {
                return;
            }
            if let Err(e) = self.pump() {
                self.failed = Some(e);
            }
        }
    }

    fn resume_token(&self) -> Option<RawDocumentBuf> {
        Some(self.position.document())
    }

    fn outlives_namespace(&self) -> bool {
        true
    }
}

/// The timestamp after `ts`.
pub(super) fn next_ts(ts: Timestamp) -> Timestamp {
    match ts.increment.checked_add(1) {
        Some(increment) => Timestamp {
            time: ts.time,
            increment,
        },
        None => Timestamp {
            time: ts.time.saturating_add(1),
            increment: 0,
        },
    }
}

/// Adds a fast update's other operators' fields to `updatedFields`, with the values the
/// document has now (`None`: it is gone; the fields are left out).
fn fill_blind(
    change: &mut Change,
    paths: &[String],
    current: Option<&RawDocument>,
) -> DbResult<()> {
    let (Some(desc), Some(doc)) = (&change.update_description, current) else {
        return Ok(());
    };
    let mut updated = desc
        .get_document("updatedFields")
        .map(|d| d.to_owned())
        .unwrap_or_default();
    for p in paths {
        if let Some(v) = dotted(doc, p) {
            updated.append(p.as_str(), v.to_raw_bson());
        }
    }
    let mut out = RawDocumentBuf::new();
    out.append("updatedFields", updated);
    for (k, v) in desc.iter().flatten() {
        if k != "updatedFields" {
            out.append(k, v.to_raw_bson());
        }
    }
    change.update_description = Some(out);
    Ok(())
}

/// The value at a dotted path through sub-documents.
fn dotted<'a>(doc: &'a RawDocument, path: &str) -> Option<RawBsonRef<'a>> {
    let mut parts = path.split('.');
    let mut v = doc.get(parts.next()?).ok()??;
    for p in parts {
        let RawBsonRef::Document(d) = v else {
            return None;
        };
        v = d.get(p).ok()??;
    }
    Some(v)
}

fn image_missing(which: &str, change: &Change) -> MongoError {
    let what = if which == "pre" {
        "a pre-image for all update, delete and replace events"
    } else {
        "a post-image for all update events"
    };
    MongoError::new(
        ErrorCode::NoMatchingDocument,
        format!(
            "Change stream was configured to require {what}, but the {which}-image was not \
             found for event: {:?}",
            change.token.document().to_document().unwrap_or_default()
        ),
    )
}

fn id_modified(token: &RawDocument, out: &RawDocument) -> MongoError {
    let found = out.get("_id").ok().flatten().map_or_else(
        || "nothing".to_owned(),
        |v| format!("{:?}", v.to_raw_bson()),
    );
    MongoError::new(
        ErrorCode::ChangeStreamFatalError,
        format!(
            "Encountered an event whose _id field, which contains the resume token, was \
             modified by the pipeline. Modifying the _id field of an event makes it \
             impossible to resume the stream from that point. Only transformations that \
             retain the unmodified _id field are allowed. Expected: {:?} but found: {found}",
            bson::Document::try_from(token).unwrap_or_default()
        ),
    )
}
