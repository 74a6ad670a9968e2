//! The oplog (issue 24 item 5; docs/design-oplog.md): what an entry of `local.oplog.rs`
//! holds (`entry.rs`), which entries readers may see (`visibility.rs`, O4), what a write
//! collects while it runs (`pending.rs`), the commit that writes the entries in the same
//! engine transaction as the changes (`log.rs`, O2/O3), keeping it under its size
//! (`truncate.rs`, O6), and reading it, tailing included (`reader.rs`, O5/O7).
//!
//! A database keeps an oplog only once `enable_oplog` was called (a `--replSet` member);
//! on a standalone every write path's `Pending` is off and commits as before.

pub mod apply_diff;
pub mod entry;
pub mod log;
pub(crate) mod pending;
pub mod reader;
mod truncate;
pub mod visibility;

#[cfg(test)]
mod tests;

use crate::catalog::Collection;
use crate::namespace::Namespace;
use crate::query_ops::FindSpec;
use crate::{engine_error, Database, DbResult};
use bson::{doc, Bson, Timestamp};
use entry::{key_ts, OpTime};
use log::{LastEntry, Oplog, OplogClock, Shape, OPLOG_COLL, OPLOG_DB};
use pending::Pending;
use reader::{OplogRead, OplogSource};
use shale_doc::{ErrorCode, MongoError};
use shale_doc::{Matcher, Projection};
use shale_engine::Txn;
use std::sync::Arc;

/// mongod's default oplog size when `--oplogSize` is not given is 5% of the disk; ours is a
/// fixed 1 GiB (docs/design-oplog.md, Size bound).
pub const DEFAULT_OPLOG_BYTES: u64 = 1 << 30;

/// `local.oplog.rs`.
pub fn oplog_namespace() -> Namespace {
    Namespace {
        db: OPLOG_DB.to_owned(),
        coll: OPLOG_COLL.to_owned(),
    }
}

/// Whether `ns` is the oplog.
pub fn is_oplog(ns: &Namespace) -> bool {
    ns.db == OPLOG_DB && ns.coll == OPLOG_COLL
}

/// mongod's refusal of a user write to the oplog of a replica-set member.
pub fn oplog_write_refused(ns: &Namespace) -> MongoError {
    MongoError::new(
        ErrorCode::InvalidNamespace,
        format!("cannot write to '{ns}'"),
    )
}

impl Database {
    /// Starts keeping the oplog: opens `local.oplog.rs` (created capped at `max_bytes` if
    /// missing), moves `clock` past its newest entry (O8: `ts` never repeats across a
    /// restart) and returns that entry (`None` in a new oplog). Called once, before the
    /// first logged write; a second call is refused.
    pub fn enable_oplog(
        &self,
        clock: Arc<dyn OplogClock>,
        max_bytes: u64,
    ) -> DbResult<Option<LastEntry>> {
        let coll = self.oplog_collection(max_bytes)?;
        let newest = newest_entry(&coll)?;
        if let Some(n) = &newest {
            clock.advance_to(n.at.ts);
        }
        let start = newest.unwrap_or(LastEntry {
            at: OpTime::NULL,
            wall: bson::DateTime::from_millis(0),
        });
        let log = Arc::new(Oplog::new(clock, coll, start, max_bytes));
        self.oplog.set(log).map_err(|_| {
            MongoError::new(ErrorCode::InternalError, "the oplog is already enabled")
        })?;
        if self
            .catalog
            .get(&crate::pre_images::pre_images_namespace())
            .is_some()
        {
            let _ddl = self.ddl_lock();
            self.ensure_pre_images()?;
        }
        if self.startup_ddl_deferred {
            self.startup_ddl()?;
        }
        Ok(newest)
    }

    /// The oplog, on a `--replSet` member.
    pub fn oplog(&self) -> Option<&Oplog> {
        self.oplog.get().map(|o| &**o)
    }

    /// The oplog, shared (for a reader that outlives a borrow: the replica set's state).
    pub fn oplog_handle(&self) -> Option<Arc<Oplog>> {
        self.oplog.get().cloned()
    }

    /// A read of the oplog in `$natural` order (`reader.rs`), or `None` when this database
    /// keeps no oplog or the find asks another order (the caller's ordinary find serves
    /// it then, unclipped). A tailable read must go forwards.
    pub fn find_oplog(
        &self,
        spec: &FindSpec,
        tailable: bool,
        await_data: bool,
    ) -> DbResult<Option<OplogSource>> {
        let Some(oplog) = self.oplog.get() else {
            return Ok(None);
        };
        let Some(forward) = natural_direction(spec, Some("ts")) else {
            if tailable {
                return Err(tailable_backwards());
            }
            return Ok(None);
        };
        if tailable && !forward {
            return Err(tailable_backwards());
        }
        let (matcher, projection) = natural_filter(spec)?;
        let read = OplogRead {
            matcher,
            projection,
            forward,
            tailable,
            await_data,
            from: ts_lower_bound(&spec.filter).map(pack),
            skip: spec.skip,
            limit: spec.limit,
        };
        Ok(Some(OplogSource::new(oplog.clone(), read)))
    }

    fn oplog_collection(&self, max_bytes: u64) -> DbResult<Arc<Collection>> {
        let ns = oplog_namespace();
        let _ddl = self.ddl_lock();
        let options = doc! {"capped": true, "size": max_bytes as i64};
        if let Some(c) = self.catalog.get(&ns) {
            if c.options.get_i64("size") == Ok(max_bytes as i64) {
                return Ok(c);
            }
            // A start with another --oplogSize: the bound in effect is the one listed (the
            // `local` database's DDL is not logged).
            let mut resized = c.with_indexes(c.indexes.clone());
            resized.options = options;
            return Ok(self
                .catalog
                .commit(resized, &self.ddl_commit(Vec::new()))?
                .0);
        }
        // The `local` database's DDL is not logged.
        self.catalog
            .create(self.engine(), &ns, options, &self.ddl_commit(Vec::new()))
    }

    /// A buffer for a write's oplog operations: recording on a member, off on a standalone.
    pub(crate) fn pending(&self) -> Pending {
        Pending::new(self.oplog.get().is_some())
    }

    /// Commits `txn` with the entries for `log`'s operations (none on a standalone, or when
    /// the write changed nothing), then keeps the oplog under its bound.
    pub(crate) fn commit_logged(&self, txn: Txn, log: &Pending, shape: Shape<'_>) -> DbResult<()> {
        self.commit_logged_with(txn, log, shape, None)
    }

    /// `commit_logged` with a step run in the transaction after the entries are written.
    pub(crate) fn commit_logged_with(
        &self,
        txn: Txn,
        log: &Pending,
        shape: Shape<'_>,
        before_commit: Option<log::BeforeCommit<'_>>,
    ) -> DbResult<()> {
        match self.oplog.get() {
            Some(oplog) if !log.is_empty() => {
                oplog.commit(txn, &log.ops, &log.pre_images, shape, before_commit)?;
                if oplog.over_bound() {
                    self.truncate_oplog(oplog);
                }
                Ok(())
            }
            _ => txn.commit().map_err(engine_error),
        }
    }

    /// Writes a no-op entry (`op: "n"`, `o: {msg}`): "new primary" after an election,
    /// "initiating set" at `replSetInitiate`. Does nothing on a standalone.
    pub fn log_noop(&self, msg: &str) -> DbResult<()> {
        let Some(oplog) = self.oplog.get() else {
            return Ok(());
        };
        let op = entry::Operation {
            op: entry::Op::Noop {
                msg: msg.to_owned(),
            },
            ns: String::new(),
            ui: None,
        };
        oplog.commit(self.engine().begin(), &[op], &[], Shape::Each(None), None)
    }
}

/// The refusal of a tailable find that does not read forwards in `$natural` order.
pub(crate) fn tailable_backwards() -> MongoError {
    MongoError::new(
        ErrorCode::BadValue,
        "cannot use tailable option with a sort other than {$natural: 1}",
    )
}

/// A natural-order read's filter and projection, parsed (the oplog's and a capped
/// collection's reads apply them to each entry they pass).
pub(crate) fn natural_filter(spec: &FindSpec) -> DbResult<(Option<Matcher>, Option<Projection>)> {
    let raw = crate::doc_prepare::to_raw(&spec.filter)?;
    let matcher = (!spec.filter.is_empty())
        .then(|| Matcher::parse_with(&raw, &spec.vars))
        .transpose()?;
    let projection = match &spec.projection {
        Some(p) if !p.is_empty() => Some(Projection::parse_with(
            &crate::doc_prepare::to_raw(p)?,
            &spec.vars,
        )?),
        _ => None,
    };
    Ok((matcher, projection))
}

/// The direction of a find that reads in `$natural` order: no sort, `{$natural: ±1}` (as
/// sort or hint) or `{<key>: ±1}` (the oplog's key is `ts`); `None` for any other order.
pub(crate) fn natural_direction(spec: &FindSpec, key: Option<&str>) -> Option<bool> {
    let dir = |v: &Bson| match v {
        Bson::Int32(n) => Some(*n >= 0),
        Bson::Int64(n) => Some(*n >= 0),
        Bson::Double(n) => Some(*n >= 0.0),
        _ => None,
    };
    let hinted = match &spec.hint {
        Some(Bson::Document(h)) => match h.get("$natural") {
            Some(v) => Some(dir(v)?),
            None => return None,
        },
        Some(_) => return None,
        None => None,
    };
    let sorted = match &spec.sort {
        Some(s) if s.len() == 1 => {
            let (k, v) = s.iter().next()?;
            if k != "$natural" && Some(k.as_str()) != key {
                return None;
            }
            Some(dir(v)?)
        }
        Some(s) if !s.is_empty() => return None,
        _ => None,
    };
    Some(sorted.or(hinted).unwrap_or(true))
}

/// The least `ts` a filter admits, when it says so at the top level (`ts: T`,
/// `ts: {$gte: T}`, `ts: {$gt: T}`): a forward read seeks there.
fn ts_lower_bound(filter: &bson::Document) -> Option<Timestamp> {
    match filter.get("ts")? {
        Bson::Timestamp(t) => Some(*t),
        Bson::Document(d) => ["$gte", "$gt", "$eq"]
            .iter()
            .filter_map(|op| match d.get(*op) {
                Some(Bson::Timestamp(t)) => Some(*t),
                _ => None,
            })
            .max_by_key(|t| pack(*t)),
        _ => None,
    }
}

/// The newest entry of the oplog tree (its `ts`, `t` and `wall`).
fn newest_entry(coll: &Collection) -> DbResult<Option<LastEntry>> {
    let mut cursor = coll.docs.cursor();
    cursor.seek_to_last().map_err(engine_error)?;
    let Some((key, value)) = cursor.entry() else {
        return Ok(None);
    };
    let corrupt = |what: &str| {
        MongoError::new(
            ErrorCode::DataCorruptionDetected,
            format!("local.oplog.rs: the newest entry {what}"),
        )
    };
    let ts = key_ts(key).ok_or_else(|| corrupt("has a malformed key"))?;
    let d = bson::RawDocument::from_bytes(value).map_err(|_| corrupt("is not BSON"))?;
    let term = d.get_i64("t").unwrap_or(-1);
    let wall = d
        .get_datetime("wall")
        .unwrap_or(bson::DateTime::from_millis(0));
    Ok(Some(LastEntry {
        at: OpTime { ts, term },
        wall,
    }))
}

/// `ts` as one ordered integer (the tracker's and the key's order).
pub(crate) fn pack(ts: Timestamp) -> u64 {
    (u64::from(ts.time) << 32) | u64::from(ts.increment)
}

/// The `ts` of a packed integer (`pack`'s inverse).
pub(crate) fn unpack(v: u64) -> Timestamp {
    Timestamp {
        time: (v >> 32) as u32,
        increment: v as u32,
    }
}
