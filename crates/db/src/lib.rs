//! The embeddable database: a data directory opened on the engine, with the catalog of
//! databases, collections and indexes, the planner and executor, client cursors, and the
//! write paths that change a document and its index entries in one engine transaction. It
//! knows no wire protocol; the server is one of its callers.
//!
//! Concurrency: writes and queries hold the data lock shared for one operation (one batch of
//! a cursor); DDL holds it exclusively, so trees never change under an operation. Inside,
//! engine transactions give snapshot isolation and first-writer-wins conflicts, retried here.
//! A session transaction (`user_txn.rs`) spans operations without holding the lock between
//! them; DDL that would change trees under it aborts it first.

#![warn(missing_docs)]

mod aggregate_ops;
mod aggregate_write;
mod bounds;
pub mod capped;
mod capped_read;
mod catalog;
pub mod change_stream;
pub mod clustered;
mod collation_scope;
mod cursors;
mod ddl;
mod ddl_log;
mod doc_prepare;
mod doc_write;
mod exec;
mod express;
mod fast_merge;
mod fast_update;
mod index_build;
mod index_keys;
mod index_spec;
mod namespace;
mod op_context;
pub mod oplog;
mod plan;
pub mod pre_images;
pub mod qe;
mod query_ops;
pub mod repair;
mod retryable;
mod revive;
pub mod snapshot_read;
mod sort;
mod spill_sort;
mod stats;
pub mod timeseries;
mod tree_layout;
mod ttl;
mod txn_ddl;
mod txn_ops;
mod user_txn;
mod validation;
mod views;
mod write_ops;

pub use capped_read::CappedLog;
pub use cursors::{
    Batch, CursorOwner, CursorTable, DocSource, VecSource, DEFAULT_FIRST_BATCH, MAX_BATCH_BYTES,
};
pub use ddl::CreateIndexesResult;
pub use doc_prepare::prepare_for_insert;
pub use doc_write::MAX_DOCUMENT_BYTES;
pub use exec::{set_sort_memory_limit, sort_memory_limit, ViewQuery};
pub use index_spec::default_name as default_index_name;
pub use index_spec::without_unknown_options as index_spec_without_unknown_options;
pub use namespace::{validate_collection_name, validate_db_name, Namespace};
pub use op_context::{check_interrupt, interrupted, op_scope, Interrupt, OpScope, OpWork};
pub use query_ops::FindSpec;
pub use retryable::{RetryId, Statement, RETRY_TREE};
pub use stats::ValidateOptions;
pub use ttl::TtlPass;
pub use user_txn::{no_such_transaction, TxnEnd, UserTxn};
pub use validation::{bypass_document_validation, BypassGuard, Validator};
pub use views::{View, MAX_VIEW_DEPTH};
pub use write_ops::{DeleteOp, FindAndModifyOp, FindAndModifyResult, UpdateOp, WriteResult};

use catalog::Catalog;
use shale_doc::{ErrorCode, MongoError};
use shale_engine::{Env, EnvHooks, EnvOptions};
use std::path::Path;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Results of database operations.
pub type DbResult<T> = Result<T, MongoError>;

/// Options for opening a database directory.
#[derive(Debug, Clone, Default)]
pub struct DbOptions {
    /// The engine's options.
    pub engine: EnvOptions,
    /// Send eligible updates as read-free messages (`fastUpdates`, `fast_update.rs`).
    pub fast_updates: bool,
    /// A `--replSet` member, which will call `enable_oplog`: the DDL that opening runs on
    /// its own (resuming interrupted index builds, dropping `$out`'s temporary collections)
    /// waits for it, so that DDL's oplog entries are written (`ddl_log.rs`).
    pub replica_set: bool,
}

/// An open database directory.
#[derive(Debug)]
pub struct Database {
    env: Env,
    catalog: Catalog,
    cursors: CursorTable,
    /// Shared by data operations, exclusive for DDL.
    ddl: RwLock<()>,
    /// Open session transactions (`user_txn.rs`).
    user_txns: user_txn::UserTxns,
    /// What retryable writes ran (`retryable.rs`).
    retry_tree: retryable::RetryTree,
    /// The `fastUpdates` switch and counters (`fast_update.rs`).
    fast: fast_update::FastUpdates,
    /// The oplog, once `enable_oplog` ran (a `--replSet` member; `oplog/`).
    oplog: std::sync::OnceLock<Arc<oplog::log::Oplog>>,
    /// Snapshots kept for snapshot reads at their cluster time (`snapshot_read.rs`).
    snapshots: snapshot_read::History,
    /// Reopening the engine after a full device (`revive.rs`).
    revival: revive::Revival,
    /// Whether `open` left its own DDL to `enable_oplog` (`DbOptions::replica_set`).
    startup_ddl_deferred: bool,
    /// Time series collections' open buckets (`timeseries/insert.rs`).
    ts_open: timeseries::OpenBuckets,
}

impl Database {
    /// Opens (creating if needed) the database stored in `dir`.
    pub fn open(dir: impl AsRef<Path>, options: DbOptions) -> Result<Database, MongoError> {
        let fast = fast_update::FastUpdates::new(options.fast_updates);
        // Recovery replays update messages through this same callback (docs/recovery.md).
        let hooks = EnvHooks {
            merge: fast_merge::merge_callback(fast.stats.clone()),
            faults: None,
        };
        let mut engine = options.engine;
        // Documents and index entries are written in whole basements: zstd finds what
        // documents repeat (field names, common values) across a 16 KiB basement, and 4 KiB
        // read pages lost most of it (a disk-full test's documents took ~3x the bytes); read
        // pages stay the engine's choice for its own records until measured on documents
        // (docs/bench/history/
        // 2026-11-26-engine-mid-size-read-pages-4k-segments-of-16k-basements.md).
        engine.tree_defaults.read_page_bytes = 0;
        let env = Env::open_with(dir, engine, hooks).map_err(engine_error)?;
        let catalog = Catalog::open(&env)?;
        let retry_tree = retryable::open_tree(&env)?;
        let db = Database {
            env,
            catalog,
            cursors: CursorTable::default(),
            ddl: RwLock::new(()),
            user_txns: user_txn::UserTxns::default(),
            retry_tree,
            fast,
            oplog: std::sync::OnceLock::new(),
            snapshots: snapshot_read::History::default(),
            revival: revive::Revival::default(),
            startup_ddl_deferred: options.replica_set,
            ts_open: timeseries::OpenBuckets::default(),
        };
        if !db.startup_ddl_deferred {
            db.startup_ddl()?;
        }
        Ok(db)
    }

    /// The DDL a database runs on its own when it opens: dropping the temporary collections
    /// of `$out`s a crash interrupted, then running interrupted index builds again (B5). On a
    /// member, once its oplog is enabled, so each is logged as mongod logs them.
    pub(crate) fn startup_ddl(&self) -> DbResult<()> {
        self.drop_temporary_out_collections()?;
        self.resume_builds()
    }

    /// The engine environment underneath (for counters and diagnostics).
    pub fn engine(&self) -> &Env {
        &self.env
    }

    /// Client cursors.
    pub fn cursors(&self) -> &CursorTable {
        &self.cursors
    }

    /// Checkpoints and closes the engine.
    pub fn close(self) -> Result<(), MongoError> {
        // An engine transaction must not outlive the environment it writes to.
        self.abort_all_user_txns("the database is closing");
        self.cursors.kill_namespace("");
        self.drop_snapshot_history();
        drop(self.catalog);
        self.env.close().map_err(engine_error)
    }

    pub(crate) fn data_lock(&self) -> RwLockReadGuard<'_, ()> {
        self.revive_if_failed();
        self.ddl.read().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn ddl_lock(&self) -> RwLockWriteGuard<'_, ()> {
        self.revive_if_failed();
        self.ddl.write().unwrap_or_else(|p| p.into_inner())
    }
}

/// The engine's counters as a document (`serverStatus.shale.engine`): I/O by category (bytes
/// include alignment padding), cache, and tree work.
pub fn engine_counters_document(c: &shale_engine::EngineCounters) -> bson::Document {
    let mut io = bson::Document::new();
    for cat in shale_engine::Category::ALL {
        let k = c.io.get(cat);
        io.insert(
            cat.name(),
            bson::doc! {
                "readCalls": k.read_calls as i64,
                "readBytes": k.read_bytes as i64,
                "writeCalls": k.write_calls as i64,
                "writeBytes": k.write_bytes as i64,
                "fsyncs": k.fsyncs as i64,
            },
        );
    }
    let t = c.io.total();
    bson::doc! {
        "io": io,
        "ioTotal": { "readCalls": t.read_calls as i64, "readBytes": t.read_bytes as i64,
                     "writeCalls": t.write_calls as i64, "writeBytes": t.write_bytes as i64, "fsyncs": t.fsyncs as i64 },
        "cache": { "budgetBytes": c.cache_budget_bytes as i64, "usedBytes": c.cache_used_bytes as i64,
                   "peakBytes": c.cache_peak_bytes as i64, "hits": c.cache_hits as i64, "misses": c.cache_misses as i64,
                   "evictions": c.cache_evictions as i64, "partialEvictions": c.cache_partial_evictions as i64,
                   "shrinkBytes": c.cache_shrink_bytes as i64 },
        "heap": { "residentBytes": c.heap_resident_bytes as i64, "releases": c.heap_releases as i64,
                  "releasedBytes": c.heap_released_bytes as i64 },
        "tree": { "flushes": c.flushes as i64, "messagesFlushed": c.messages_flushed as i64,
                  "messagesInjected": c.messages_injected as i64,
                  "abortMessages": c.abort_messages as i64,
                  "messagesPromoted": c.messages_promoted as i64,
                  "leafSplits": c.leaf_splits as i64, "internalSplits": c.internal_splits as i64,
                  "leafMerges": c.leaf_merges as i64, "internalMerges": c.internal_merges as i64,
                  "nodesWritten": c.nodes_written as i64, "nodesRead": c.nodes_read as i64,
                  "basementsRead": c.basements_read as i64,
                  "buffersRead": c.buffers_read as i64, "headersRead": c.headers_read as i64 },
        "checkpoints": c.checkpoints as i64,
        "commits": c.commits as i64,
        "backpressureWaits": c.backpressure_waits as i64,
        "writerFlushUnits": c.writer_flush_units as i64,
        "transactions": { "active": c.active_txns as i64, "committed": c.txn_commits as i64,
                          "aborted": c.txn_aborts as i64, "writeConflicts": c.write_conflicts as i64,
                          "openSnapshots": c.open_snapshots as i64,
                          "oldestSnapshotAgeMillis": c.oldest_snapshot_age_ms as i64,
                          "versionsRetained": c.versions_retained as i64,
                          "versionsRetainedTotal": c.versions_retained_total as i64,
                          "versionsCollected": c.versions_collected as i64,
                          "lockEntries": c.lock_entries as i64,
                          "statusEntries": c.txn_status_entries as i64 },
    }
}

/// Maps an engine error to the error a MongoDB client sees.
pub fn engine_error(e: shale_engine::Error) -> MongoError {
    let code = if e.is_corruption() {
        ErrorCode::DataCorruptionDetected
    } else if matches!(e, shale_engine::Error::Locked(_)) {
        ErrorCode::DBPathInUse
    } else if matches!(e, shale_engine::Error::WriteConflict { .. }) {
        ErrorCode::WriteConflict
    } else if matches!(e, shale_engine::Error::TransactionTooLarge { .. }) {
        ErrorCode::TransactionTooLargeForCache
    } else if e.is_out_of_space() {
        ErrorCode::OutOfDiskSpace
    } else {
        ErrorCode::InternalError
    };
    MongoError::new(code, e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_device_is_out_of_disk_space_then_and_after() {
        let full = shale_io::Error::Os {
            path: "/d/wal/log".into(),
            op: "pwrite",
            offset: 4096,
            source: std::io::Error::from_raw_os_error(28),
        };
        let first = shale_engine::Error::Io(full);
        let reason = first.to_string();
        let e = engine_error(first);
        assert_eq!((e.code.code(), e.code.name()), (14031, "OutOfDiskSpace"));
        let later = engine_error(shale_engine::Error::Poisoned(reason));
        assert_eq!(later.code.code(), 14031, "later writes say why too");
        let other = shale_engine::Error::Poisoned("pwrite: Input/output error (os error 5)".into());
        assert_eq!(engine_error(other).code.code(), 1);
    }

    #[test]
    fn a_write_conflict_is_mongodbs_write_conflict() {
        let e = engine_error(shale_engine::Error::WriteConflict {
            tree: "t".into(),
            reason: "held".into(),
        });
        assert_eq!((e.code.code(), e.code.name()), (112, "WriteConflict"));
    }

    #[test]
    fn a_write_set_over_the_limit_is_mongodbs_transaction_too_large_for_cache() {
        let e = engine_error(shale_engine::Error::TransactionTooLarge {
            bytes: 2 << 20,
            limit: 1 << 20,
        });
        assert_eq!(
            (e.code.code(), e.code.name()),
            (388, "TransactionTooLargeForCache")
        );
    }

    #[test]
    fn a_directory_is_owned_by_one_database() {
        let dir = tempfile::tempdir().expect("tempdir");
        let _db = Database::open(dir.path(), DbOptions::default()).expect("open");
        let second = Database::open(dir.path(), DbOptions::default());
        assert!(second.is_err());
    }
}
