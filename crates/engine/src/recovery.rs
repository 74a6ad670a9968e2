//! Opening an environment and recovering it after a crash.
//!
//! Recovery = each tree's last durable checkpoint + redo of the log after it:
//! 1. take the directory lock; load the catalog; delete tree files the catalog does not name
//!    (a create that crashed before its catalog update) (R7);
//! 2. open every tree's block file at its durable checkpoint (its header names the root, the
//!    tree's next MSN and the redo LSN, R3);
//! 3. replay the log from the smallest redo LSN: records are grouped by transaction and a
//!    group is applied only when its commit record is read (R1: a torn tail loses only
//!    unacknowledged commits; groups without a commit are dropped) and only to trees whose
//!    redo LSN is at or below the group's records (R2: changes before the checkpoint's
//!    redo point are already in its nodes);
//! 4. open the log for appending at the end of the valid records, cutting any torn tail.
//!
//! The redone changes stay in memory and in the log until the next checkpoint.

use crate::block::BlockFile;
use crate::cache::Cache;
use crate::catalog::{tree_path, Catalog};
use crate::counters::EngineStats;
use crate::inner::{wal_dir, wal_options, EnvHooks, EnvInner};
use crate::lock::DirLock;
use crate::mvcc::{LockTable, Snapshots, Ts};
use crate::roles::{Lifecycle, TxnRegistry};
use crate::tree::{OpRef, Tree};
use crate::vocab::Op;
use crate::wal::{self, Change, LogRecord, Lsn, TxnId, Wal};
use crate::{EnvOptions, Error, Result};
use parking_lot::{Mutex, RwLock};
use shale_io::IoStats;
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

/// Opens `dir`, recovering trees from their checkpoints and the log.
pub(crate) fn open_and_recover(
    dir: &Path,
    options: EnvOptions,
    hooks: EnvHooks,
) -> Result<EnvInner> {
    std::fs::create_dir_all(dir).map_err(|source| Error::os(dir.to_owned(), "mkdir", source))?;
    let lock = Arc::new(DirLock::acquire(dir)?);
    let counters = (
        Arc::new(IoStats::default()),
        Arc::new(EngineStats::default()),
    );
    recover(dir, options, hooks, lock, counters)
}

/// Recovers the directory of `failed`, an environment that failed (`Env::reopen`), into a
/// new one as a restart would, in this process: the same procedure (steps 1-4 above, R1-R8
/// and M1 in docs/recovery.md) on the same files, under the lock `failed` holds. The
/// counters carry on. What `failed` applied but never made durable is not in its files (the
/// log was cut back to its durable end, W11; tree writes after the last checkpoint are free
/// space, B9), so it is not recovered.
pub(crate) fn reopen(failed: &EnvInner, hooks: EnvHooks) -> Result<EnvInner> {
    let counters = (failed.io_stats.clone(), failed.stats.clone());
    recover(
        &failed.dir,
        failed.options.clone(),
        hooks,
        failed.dir_lock.clone(),
        counters,
    )
}

fn recover(
    dir: &Path,
    options: EnvOptions,
    hooks: EnvHooks,
    lock: Arc<DirLock>,
    (io_stats, stats): (Arc<IoStats>, Arc<EngineStats>),
) -> Result<EnvInner> {
    let catalog = Catalog::load(dir)?;
    remove_orphans(dir, &catalog)?;
    let cache = Arc::new(Cache::new(options.cache_bytes));
    // Redo publishes each replayed commit; nothing reads until recovery ends (M1).
    let snapshots = Snapshots::new(Ts(0));
    let ctx = crate::tree::TreeContext {
        cache: cache.clone(),
        merge: hooks.merge.clone(),
        stats: stats.clone(),
        snapshots: snapshots.clone(),
    };
    let mut trees = HashMap::new();
    let mut redo_from: HashMap<u64, u64> = HashMap::new();
    for (name, entry) in &catalog.trees {
        let path = tree_path(dir, entry.id);
        let (file, cp) = BlockFile::open(
            &path,
            options.direct_io,
            io_stats.clone(),
            hooks.faults.clone(),
        )?;
        redo_from.insert(entry.id, cp.lsn);
        let tree = Arc::new(Tree::new(
            entry.id,
            name.clone(),
            file,
            cp.root,
            &cp.meta,
            ctx.clone(),
        )?);
        cache.register(&tree);
        trees.insert(name.clone(), tree);
    }
    let by_id: HashMap<u64, Arc<Tree>> = trees.values().map(|t| (t.id(), t.clone())).collect();
    // With no tree, nothing needs redo: read the log only to find its end (R3).
    let oldest = wal::oldest_lsn(&wal_dir(dir))?.map_or(0, |l| l.0);
    let start = redo_from.values().copied().min().unwrap_or(oldest);
    let (end, max_txn) = redo(dir, Lsn(start), &io_stats, &by_id, &redo_from, &snapshots)?;
    if snapshots.visible() < Ts(end.0) {
        snapshots.publish(Ts(end.0));
    }
    let wal = Wal::open(
        &wal_dir(dir),
        end,
        wal_options(&options),
        io_stats.clone(),
        hooks.faults.clone(),
    )?;
    // M3: commits that are fsynced become visible once durable.
    let fsynced = options.fsync == crate::FsyncPolicy::EveryCommit;
    snapshots.track_durable(wal.durable_watch(), fsynced);
    Ok(EnvInner {
        dir: dir.to_owned(),
        options,
        io_stats,
        faults: hooks.faults,
        cache,
        stats,
        merge: hooks.merge,
        catalog: Mutex::new(catalog),
        trees: RwLock::new(trees),
        wal,
        apply_lock: Mutex::new(()),
        checkpoint_lock: Mutex::new(()),
        last_redo_lsn: AtomicU64::new(start),
        txns: TxnRegistry::new(max_txn + 1),
        snapshots,
        locks: LockTable::default(),
        life: Lifecycle::default(),
        dir_lock: lock,
        successor: std::sync::OnceLock::new(),
    })
}

/// Changes of version-1 transactions whose commit record has not been read yet, each with
/// the LSN of its record.
type OpenTxns = HashMap<TxnId, Vec<(Lsn, Change)>>;

/// Replays the log; returns the end of the valid log and the largest transaction id seen.
fn redo(
    dir: &Path,
    from: Lsn,
    io_stats: &Arc<IoStats>,
    trees: &HashMap<u64, Arc<Tree>>,
    redo_from: &HashMap<u64, u64>,
    snapshots: &Snapshots,
) -> Result<(Lsn, u64)> {
    let mut open: OpenTxns = HashMap::new();
    let mut max_txn = 0u64;
    let mut applied = 0u64;
    let mut aborted = 0u64;
    let end = wal::replay(&wal_dir(dir), from, io_stats.clone(), |lsn, record| {
        // M1: a commit's timestamp is the log position just past its commit record (or its
        // group record), as `Wal::append` returned it when the commit was first made.
        let commit_ts = Ts(lsn.advance(wal::frame_len(record.encoded_len()) as u64).0);
        let record = match into_change(record) {
            Ok((txn, change)) => {
                max_txn = max_txn.max(txn.0);
                open.entry(txn).or_default().push((lsn, change));
                return Ok(());
            }
            Err(other) => other,
        };
        match record {
            LogRecord::Commit { txn } => {
                let changes = open.remove(&txn).unwrap_or_default();
                applied += redo_commit(trees, redo_from, changes, commit_ts)?;
                snapshots.publish(commit_ts);
            }
            LogRecord::Group { txn, changes } => {
                max_txn = max_txn.max(txn.0);
                let changes = changes.into_iter().map(|c| (lsn, c)).collect();
                applied += redo_commit(trees, redo_from, changes, commit_ts)?;
                snapshots.publish(commit_ts);
            }
            LogRecord::Abort { txn } => {
                open.remove(&txn);
            }
            LogRecord::Live { next_txn, txns } => {
                // T3: ids continue above every id a checkpoint's trees may hold.
                max_txn = max_txn.max(next_txn.saturating_sub(1));
                aborted += abort_live(trees, redo_from, lsn, txns)?;
            }
            _ => {}
        }
        Ok(())
    })?;
    for t in trees.values() {
        while t.flush_once()? {}
    }
    tracing::info!(
        applied,
        aborted,
        dropped_txns = open.len(),
        end = end.0,
        "recovery replayed the log"
    );
    Ok((end, max_txn))
}

/// Aborts the provisional writes that transactions live at a checkpoint's redo point left in
/// its trees (R8): a transaction that committed later is redone whole from its group record
/// after this, one that did not never happened. Only trees whose redo point is at or before
/// the record take the aborts (a later checkpoint's image has its own record); an abort
/// that finds no provisional version of its transaction changes nothing.
fn abort_live(
    trees: &HashMap<u64, Arc<Tree>>,
    redo_from: &HashMap<u64, u64>,
    lsn: Lsn,
    txns: Vec<wal::LiveTxn>,
) -> Result<u64> {
    let mut aborted = 0;
    for live in txns {
        let stamp = Ts::provisional(live.txn.0);
        for (tree, key) in live.keys {
            if let Some(t) = redo_target(trees, redo_from, tree, lsn) {
                redo_one(t, &key, stamp, OpRef::Abort)?;
                aborted += 1;
            }
        }
    }
    Ok(aborted)
}

/// Redoes one commit's changes at timestamp `ts` on the trees whose checkpoint does not
/// already hold them (a change logged before a tree's redo point is in its checkpoint);
/// returns how many key changes it applied.
fn redo_commit(
    trees: &HashMap<u64, Arc<Tree>>,
    redo_from: &HashMap<u64, u64>,
    changes: Vec<(Lsn, Change)>,
    ts: Ts,
) -> Result<u64> {
    let mut applied = 0;
    for (lsn, change) in changes {
        let Some(t) = redo_target(trees, redo_from, change.tree(), lsn) else {
            continue;
        };
        let (key, op) = match change {
            Change::Count { delta, .. } => {
                t.add_count(delta);
                continue;
            }
            Change::Op { key, op, .. } => (key, op),
        };
        redo_one(t, &key, ts, op.as_op_ref())?;
        applied += 1;
    }
    Ok(applied)
}

/// The tree a record at `lsn` for tree id `tree` is redone on: one the catalog names (R7)
/// whose checkpoint does not already hold the record (R2, R3).
fn redo_target<'a>(
    trees: &'a HashMap<u64, Arc<Tree>>,
    redo_from: &HashMap<u64, u64>,
    tree: u64,
    lsn: Lsn,
) -> Option<&'a Arc<Tree>> {
    let redo = *redo_from.get(&tree)?;
    trees.get(&tree).filter(|_| lsn.0 >= redo)
}

/// Injects one redone message; no flusher runs yet, so the root is kept within its size as
/// recovery goes.
fn redo_one(t: &Tree, key: &[u8], stamp: Ts, op: OpRef<'_>) -> Result<()> {
    t.apply(key, stamp, op)?;
    while t.needs_flush() {
        t.flush_once()?;
    }
    Ok(())
}

/// A version-1 record that a transaction's commit redoes, as (transaction, change); any
/// other record back.
fn into_change(record: LogRecord) -> std::result::Result<(TxnId, Change), LogRecord> {
    match record {
        LogRecord::Put {
            txn,
            tree,
            key,
            value,
        } => Ok((
            txn,
            Change::Op {
                tree,
                key,
                op: Op::Put(value),
            },
        )),
        LogRecord::Delete { txn, tree, key } => Ok((
            txn,
            Change::Op {
                tree,
                key,
                op: Op::Delete,
            },
        )),
        LogRecord::Update {
            txn,
            tree,
            key,
            payload,
        } => Ok((
            txn,
            Change::Op {
                tree,
                key,
                op: Op::Update(payload),
            },
        )),
        LogRecord::Count { txn, tree, delta } => Ok((txn, Change::Count { tree, delta })),
        other => Err(other),
    }
}

/// Deletes tree files that the catalog does not name (R7).
fn remove_orphans(dir: &Path, catalog: &Catalog) -> Result<()> {
    let known: std::collections::HashSet<_> = catalog
        .trees
        .values()
        .map(|e| tree_path(dir, e.id))
        .collect();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(());
    };
    for e in entries.flatten() {
        let path = e.path();
        let is_tree = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("tree-") && n.ends_with(".shl"));
        if is_tree && !known.contains(&path) {
            tracing::warn!(file = %path.display(), "removing a tree file the catalog does not name");
            std::fs::remove_file(&path)
                .map_err(|source| Error::os(path.clone(), "unlink", source))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::wal::{LogRecord, TxnId};
    use crate::{Env, EnvOptions};

    /// Logs of format version 1 hold a commit as records ending in a `Commit` record (every
    /// commit is one `Group` record since version 2): they still replay, and a group whose
    /// commit never made it to the log is dropped.
    #[test]
    fn version_1_record_groups_still_replay() {
        let dir = tempfile::tempdir().expect("tempdir");
        let env = Env::open(dir.path(), EnvOptions::default()).expect("open");
        let t = env.create_tree("t", None).expect("create");
        let tree = t.tree.id();
        let put = |txn: u64, key: &[u8]| LogRecord::Put {
            txn: TxnId(txn),
            tree,
            key: key.to_vec(),
            value: b"v1".to_vec(),
        };
        let committed = [
            put(1 << 40, b"a"),
            put(1 << 40, b"b"),
            LogRecord::Count {
                txn: TxnId(1 << 40),
                tree,
                delta: 2,
            },
            LogRecord::Commit {
                txn: TxnId(1 << 40),
            },
        ];
        let wal = env.wal_for_tests();
        wal.append(&committed).expect("append");
        let end = wal.append(&[put(2 << 40, b"c")]).expect("append");
        wal.sync_to(end).expect("sync");
        drop(t);
        drop(env); // as after a crash: no checkpoint
        let env = Env::open(dir.path(), EnvOptions::default()).expect("reopen");
        let t = env.open_tree("t").expect("open tree");
        assert_eq!(t.get(b"a").expect("get").as_deref(), Some(&b"v1"[..]));
        assert_eq!(t.get(b"b").expect("get").as_deref(), Some(&b"v1"[..]));
        assert_eq!(t.get(b"c").expect("get"), None, "an uncommitted group");
        assert_eq!(t.count(), 2);
        t.verify().expect("verify");
        drop(t);
        env.close().expect("close");
    }
}
