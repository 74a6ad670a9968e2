//! Change streams (issue 24 item 7; docs/design-oplog.md, Change streams): `$changeStream`
//! on a collection, a database or the whole deployment of a `--replSet` member, read from
//! the oplog. `spec.rs` checks the stage, `token.rs` is the resume token, `event.rs` turns
//! entries into events, `update_desc.rs` reads an update's diff, `source.rs` is the cursor.
//! This file opens a stream: where the scope may be watched, which later stages may follow,
//! where it starts (now, a resume token, an operation time) and whether the oplog still
//! holds that point (`ChangeStreamHistoryLost`, 286) and, for an event token, that event
//! (`ChangeStreamFatalError`, 280).

pub mod event;
mod source;
pub mod spec;
pub mod split;
pub mod token;
mod update_desc;

pub use event::Scope;
pub use source::ChangeStreamSource;
pub use spec::{ChangeStreamSpec, Start};
pub use token::ResumeToken;

use crate::oplog::entry::{entry_key, key_ts};
use crate::oplog::log::Oplog;
use crate::oplog::reader::{OplogRead, OplogSource};
use crate::{engine_error, Database, DbResult};
use bson::{Document, Timestamp};
use shale_doc::aggregate::Pipeline;
use shale_doc::{ErrorCode, MongoError, Variables};
use std::collections::VecDeque;
use std::sync::Arc;

/// Stages that may follow `$changeStream` (the names `Pipeline` reports: `$set` is
/// `$addFields`, `$replaceWith` is `$replaceRoot`).
const LATER_STAGES: [&str; 6] = [
    "$match",
    "$project",
    "$addFields",
    "$unset",
    "$replaceRoot",
    "$redact",
];

impl Database {
    /// Opens a change stream over `scope` with the stages `later` after `$changeStream`.
    pub fn open_change_stream(
        self: &Arc<Self>,
        scope: Scope,
        spec: ChangeStreamSpec,
        later: &[Document],
        vars: &Variables,
    ) -> DbResult<ChangeStreamSource> {
        let Some(oplog) = self.oplog_handle() else {
            return Err(MongoError::new(
                ErrorCode::Location40573,
                "The $changeStream stage is only supported on replica sets",
            ));
        };
        check_scope(&scope, &spec)?;
        let (later, split) = split::take_split_stage(later)?;
        let pipeline = later_stages(later, vars)?;
        let (from, skip_through, position) = match spec.start {
            Start::Now => {
                let from = source::next_ts(oplog.visible());
                (from, None, ResumeToken::high_water_mark(from))
            }
            Start::At(t) => (t, None, ResumeToken::high_water_mark(t)),
            Start::ResumeAfter(t) | Start::StartAfter(t) => (t.cluster_time(), Some(t), t),
        };
        if !matches!(spec.start, Start::Now) {
            check_history(&oplog, from, skip_through)?;
        }
        let entries = OplogSource::new(
            oplog.clone(),
            OplogRead {
                forward: true,
                tailable: true,
                await_data: true,
                from: Some(crate::oplog::pack(from)),
                ..OplogRead::default()
            },
        );
        Ok(ChangeStreamSource {
            db: self.clone(),
            oplog,
            entries,
            scope,
            spec,
            pipeline,
            split,
            skip_through,
            ready: VecDeque::new(),
            position,
            invalidated: false,
            failed: None,
        })
    }
}

/// mongod's `assertIsLegalSpecification` for where a stream is opened.
fn check_scope(scope: &Scope, spec: &ChangeStreamSpec) -> DbResult<()> {
    let cluster = matches!(scope, Scope::Cluster);
    if spec.all_changes_for_cluster != cluster {
        let ns = match scope {
            Scope::Collection(ns) => ns.to_string(),
            Scope::Database(db) => format!("{db}.$cmd.aggregate"),
            Scope::Cluster => "admin.$cmd.aggregate".to_owned(),
        };
        if spec.all_changes_for_cluster {
            return Err(MongoError::new(
                ErrorCode::InvalidOptions,
                format!(
                    "A $changeStream with 'allChangesForCluster:true' may only be opened on \
                     the 'admin' database, and with no collection name; found {ns}"
                ),
            ));
        }
    }
    let db = match scope {
        Scope::Collection(ns) => ns.db.as_str(),
        Scope::Database(db) => db.as_str(),
        Scope::Cluster => return Ok(()),
    };
    if matches!(db, "admin" | "local" | "config") {
        return Err(MongoError::new(
            ErrorCode::InvalidNamespace,
            format!("$changeStream may not be opened on the internal {db} database"),
        ));
    }
    if let Scope::Collection(ns) = scope {
        if ns.coll.starts_with("system.") {
            return Err(MongoError::new(
                ErrorCode::InvalidNamespace,
                format!("$changeStream may not be opened on the internal {ns} collection"),
            ));
        }
    }
    Ok(())
}

/// The stages after `$changeStream`, of the kinds mongod allows there.
fn later_stages(later: &[Document], vars: &Variables) -> DbResult<Option<Pipeline>> {
    if later.is_empty() {
        return Ok(None);
    }
    if later.iter().any(|s| s.contains_key("$changeStream")) {
        return Err(MongoError::new(
            ErrorCode::Location40602,
            "$changeStream is only valid as the first stage in a pipeline",
        ));
    }
    let pipeline = Pipeline::parse_with(later, vars)?;
    if let Some(name) = pipeline
        .stage_names()
        .into_iter()
        .find(|n| !LATER_STAGES.contains(n))
    {
        return Err(MongoError::new(
            ErrorCode::IllegalOperation,
            format!("{name} is not permitted in a $changeStream pipeline"),
        ));
    }
    Ok(Some(pipeline))
}

/// A resumed stream's start must still be in the oplog (286), and a resume token's event
/// must be there (280).
fn check_history(oplog: &Oplog, from: Timestamp, token: Option<ResumeToken>) -> DbResult<()> {
    let mut cursor = oplog.coll.docs.cursor();
    cursor.seek_to_first().map_err(engine_error)?;
    let oldest = cursor.entry().and_then(|(k, _)| key_ts(k));
    if let Some(oldest) = oldest {
        if crate::oplog::pack(oldest) > crate::oplog::pack(from) {
            return Err(MongoError::new(
                ErrorCode::ChangeStreamHistoryLost,
                "Resume of change stream was not possible, as the resume point may no longer \
                 be in the oplog.",
            ));
        }
    }
    if let Some(t) = token.filter(|t| t.is_event()) {
        let key = entry_key(t.cluster_time());
        cursor.seek(&key).map_err(engine_error)?;
        if cursor.entry().map(|(k, _)| k) != Some(&key[..]) {
            return Err(MongoError::new(
                ErrorCode::ChangeStreamFatalError,
                format!(
                    "cannot resume stream; the resume token was not found. {:?}",
                    t.document().to_document().unwrap_or_default()
                ),
            ));
        }
    }
    Ok(())
}
