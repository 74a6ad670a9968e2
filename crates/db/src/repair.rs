//! Offline check and repair of a stopped database directory (`shale verify`, `shale serve
//! --repair`; docs/operations.md). The engine salvages its files first (log cut at the first
//! damaged record, catalog and damaged trees rebuilt from what reads:
//! `shale_engine::salvage`); then the database is opened normally and, for every
//! collection, its secondary indexes are emptied and rebuilt from the documents, its
//! document count and data size are recounted, and `validate` is run. Nothing here runs
//! beside a server: the engine's directory lock is held throughout.

use crate::catalog::Collection;
use crate::fast_update::FastUpdates;
use crate::{engine_error, fast_merge, Database, DbOptions, DbResult};
use shale_doc::{ErrorCode, MongoError};
use shale_engine::salvage::{self, RepairReport, VerifyReport};
use shale_engine::WriteBatch;
use std::path::Path;

/// Index entries deleted per batch while an index is emptied.
const CLEAR_CHUNK: usize = 1000;

/// What `repair` did, engine and database layers.
#[derive(Debug, Clone)]
pub struct RepairSummary {
    /// The engine's salvage: the state before and every file-level change.
    pub engine: RepairReport,
    /// One line per collection: indexes rebuilt, counters corrected, validate's verdict.
    pub collections: Vec<String>,
    /// True when every collection validates afterwards.
    pub valid: bool,
}

impl std::fmt::Display for RepairSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "{}", self.engine)?;
        for line in &self.collections {
            writeln!(f, "{line}")?;
        }
        write!(
            f,
            "verdict: {}",
            if self.valid {
                "repaired; every collection validates"
            } else {
                "repaired, but some collections do not validate (see above)"
            }
        )
    }
}

/// Checks the stopped directory `dir` (every tree, the catalog, the log) without changing it.
pub fn verify(dir: impl AsRef<Path>) -> DbResult<VerifyReport> {
    let merge = fast_merge::merge_callback(FastUpdates::new(false).stats.clone());
    salvage::verify(dir.as_ref(), merge).map_err(engine_error)
}

/// Salvages what is intact in the stopped directory `dir`, rebuilds every secondary index
/// from the documents and corrects the counters; see the module docs.
pub fn repair(dir: impl AsRef<Path>, options: DbOptions) -> DbResult<RepairSummary> {
    let dir = dir.as_ref();
    let merge = fast_merge::merge_callback(FastUpdates::new(false).stats.clone());
    let engine = salvage::repair(dir, &options.engine, merge).map_err(engine_error)?;
    let db = Database::open(dir, options)?;
    let mut collections = Vec::new();
    let mut valid = true;
    for coll in db.catalog.list(None) {
        let (line, ok) = db.repair_collection(&coll)?;
        collections.push(line);
        valid &= ok;
    }
    db.engine().checkpoint().map_err(engine_error)?;
    db.close()?;
    Ok(RepairSummary {
        engine,
        collections,
        valid,
    })
}

impl Database {
    /// Rebuilds `coll`'s indexes, recounts it and validates it; returns the report line and
    /// whether it validates.
    fn repair_collection(&self, coll: &Collection) -> DbResult<(String, bool)> {
        let mut line = format!("collection {}:", coll.ns);
        for index in &coll.indexes {
            let cleared = self.clear_tree(&index.tree)?;
            let built = self.build_index(coll, index);
            let entries = index.tree.count().max(0);
            match built {
                Ok(()) => line.push_str(&format!(
                    " index {} rebuilt from the documents ({cleared} old entries replaced);",
                    index.def.name
                )),
                Err(e) => line.push_str(&format!(
                    " index {} could not be rebuilt ({}: {}; {entries} entries);",
                    index.def.name,
                    e.code.name(),
                    e.message
                )),
            }
        }
        let (docs, bytes) = self.recount(coll)?;
        let stored = (coll.docs.count(), coll.size.count());
        if stored != (docs, bytes) {
            self.in_txn(|txn| {
                txn.add_count(&coll.docs, docs - txn.count(&coll.docs));
                txn.add_count(&coll.size, bytes - txn.count(&coll.size));
                Ok(())
            })?;
            line.push_str(&format!(
                " counters corrected to {docs} documents, {bytes} bytes (were {}, {});",
                stored.0, stored.1
            ));
        }
        let report = self.validate(&coll.ns)?;
        let ok = report.get_bool("valid").unwrap_or(false);
        if ok {
            line.push_str(&format!(" {docs} documents, validate: valid"));
        } else {
            let errors = report.get_array("errors").map(|a| a.len()).unwrap_or(0);
            line.push_str(&format!(
                " {docs} documents, validate: NOT valid ({errors} errors)"
            ));
        }
        Ok((line, ok))
    }

    /// Deletes every entry of `tree`; returns how many there were.
    fn clear_tree(&self, tree: &shale_engine::TreeHandle) -> DbResult<u64> {
        let mut removed = 0u64;
        loop {
            let view = self.engine().read_view();
            let mut cursor = view.cursor(tree);
            cursor.seek_to_first().map_err(engine_error)?;
            let mut batch = WriteBatch::new();
            while let Some((key, _)) = cursor.entry() {
                batch.delete(tree, key);
                if batch.len() == CLEAR_CHUNK {
                    break;
                }
                cursor.next().map_err(engine_error)?;
            }
            if batch.is_empty() {
                return Ok(removed);
            }
            removed += batch.len() as u64;
            self.engine().write(batch).map_err(engine_error)?;
        }
    }

    /// The documents of `coll` and their BSON bytes, by a full scan.
    fn recount(&self, coll: &Collection) -> DbResult<(i64, i64)> {
        let view = self.engine().read_view();
        let mut cursor = view.cursor(&coll.docs);
        cursor.seek_to_first().map_err(engine_error)?;
        let (mut docs, mut bytes) = (0i64, 0i64);
        while let Some((_, value)) = cursor.entry() {
            docs += 1;
            bytes += i64::try_from(value.len()).map_err(|_| {
                MongoError::new(
                    ErrorCode::InternalError,
                    "document size overflows".to_owned(),
                )
            })?;
            cursor.next().map_err(engine_error)?;
        }
        Ok((docs, bytes))
    }
}
