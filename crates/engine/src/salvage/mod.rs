//! Offline check and repair of a stopped data directory (docs/operations.md): `verify` reads
//! the catalog, every block of every tree and the whole log and reports what is damaged;
//! `repair` keeps everything intact and sets the rest aside, reporting exactly what it
//! dropped. Both hold the directory lock, so neither runs beside a server; neither deletes a
//! damaged file (it is renamed `*.damaged`).
//!
//! Repair, in order:
//! 1. the log is cut at its first damaged record (`wal::salvage`): records before it are
//!    kept and replayed at the next open (R1: a commit is one group record, so no commit is
//!    kept in part);
//! 2. a damaged catalog is read with its checksum ignored; entries whose tree file is gone
//!    are dropped and tree files it no longer names are kept under `salvaged.tree-<id>`;
//! 3. each tree with a damaged header, table or block is rebuilt from what still reads
//!    (`tree::salvage`, `rebuild`);
//! 4. every tree's redo point must lie inside the log (R3): when what is left of the log
//!    ends before the newest checkpoint's redo point, the log restarts empty there, so
//!    records appended after the repair are never skipped by redo and commit timestamps stay
//!    above every version the trees hold (M1); an older redo point is moved up to it.
//!
//! Then a normal open recovers the directory. The layers above (the database's indexes and
//! counters) are checked and rebuilt by their own repair.

mod catalog_scan;
mod rebuild;
mod report;

pub use crate::tree::salvage::{LostBlock, Source};
pub use crate::wal::salvage::{LogCheck, LogDamage};
pub use report::{CatalogCheck, RepairReport, TreeCheck, VerifyReport};

use crate::block::BlockFile;
use crate::cache::Cache;
use crate::catalog::{tree_path, Catalog, TreeEntry, CATALOG_FILE};
use crate::counters::EngineStats;
use crate::inner::wal_dir;
use crate::lock::DirLock;
use crate::mvcc::{Snapshots, Ts};
use crate::tree::salvage::{extract, Extracted};
use crate::tree::{MergeFn, Tree, TreeContext};
use crate::wal::{self, Lsn};
use crate::{EnvOptions, Error, Result, TreeOptions};
use shale_io::IoStats;
use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::sync::Arc;

/// Checks the stopped data directory `dir` without changing it. `merge` is the callback its
/// trees' update messages were written for (used to count entries).
pub fn verify(dir: &Path, merge: Arc<MergeFn>) -> Result<VerifyReport> {
    existing_dir(dir)?;
    let _lock = DirLock::acquire(dir)?;
    verify_locked(dir, &merge)
}

/// Salvages what is intact in the stopped data directory `dir` (see the module docs).
pub fn repair(dir: &Path, engine: &EnvOptions, merge: Arc<MergeFn>) -> Result<RepairReport> {
    existing_dir(dir)?;
    let _lock = DirLock::acquire(dir)?;
    let before = verify_locked(dir, &merge)?;
    let mut actions = Vec::new();
    let mut log_end = before.log.end;
    if let Some(d) = &before.log.damage {
        wal::salvage::cut_at_damage(&wal_dir(dir), d)?;
        log_end = d.lsn;
        actions.push(format!(
            "log: kept {} records before LSN {}; dropped the damaged record at {} offset {} ({}), \
             {} readable records after it, {} bytes to the end of that file and {} later log files \
             (set aside as *.damaged)",
            before.log.records,
            d.lsn,
            d.file.display(),
            d.offset,
            d.reason,
            d.readable_after,
            d.bytes_after,
            d.later_files.len()
        ));
    }
    // R3: a tree's redo point must lie inside the log. When what is left of the log ends
    // before the newest checkpoint's redo point, no tree needs its records (their redo
    // points are all past them, or the records a tree needed are gone either way): the log
    // restarts empty at that redo point, so commit timestamps stay above every version in
    // the trees (M1).
    let newest_redo = before.trees.iter().filter_map(|t| t.redo_lsn).max();
    if let Some(redo) = newest_redo.filter(|&r| r > log_end.0) {
        wal::salvage::restart_at(&wal_dir(dir), Lsn(redo))?;
        actions.push(format!(
            "log: it ends at LSN {log_end}, before the newest checkpoint's redo point {redo}: \
             restarted empty at LSN {redo} (its files set aside as *.damaged)"
        ));
        log_end = Lsn(redo);
    }
    let oldest = wal::oldest_lsn(&wal_dir(dir))?.unwrap_or(log_end);
    let catalog = match &before.catalog.problem {
        None => Catalog::load(dir)?,
        Some(_) => fix_catalog(dir, &mut actions)?,
    };
    for (name, entry) in &catalog.trees {
        let check = before.trees.iter().find(|t| t.id == entry.id);
        let path = tree_path(dir, entry.id);
        if check.is_some_and(TreeCheck::is_clean) {
            align_redo(&path, oldest, &mut actions)?;
            continue;
        }
        let found = match extract(&path) {
            Ok(found) => found,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => empty_extract(),
            Err(e) => return Err(Error::os(&path, "read", e)),
        };
        // R3: the fresh checkpoint redoes from the damaged one's redo point, inside the log.
        let known = found.lsn != 0 || found.source == Source::Table;
        let lsn = if known { found.lsn } else { log_end.0 };
        let lsn = lsn.clamp(oldest.0.min(log_end.0), log_end.0);
        let options = found.options.unwrap_or(entry.options);
        let cache = options_cache(&options).min(engine.cache_bytes.max(16 << 20));
        let target = rebuild::Target {
            dir,
            id: entry.id,
            name,
            options,
            redo_lsn: lsn,
        };
        // Bytes a scan found may break an invariant the tree asserts (E1); that tree is
        // then left as it was and reported, and the rest of the repair goes on.
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
            rebuild::rebuild(&target, &found, merge.clone(), cache)
        }));
        let done = match outcome {
            Ok(done) => done?,
            Err(panic) => {
                let why = panic
                    .downcast_ref::<String>()
                    .map(String::as_str)
                    .or_else(|| panic.downcast_ref::<&str>().copied())
                    .unwrap_or("a panic");
                actions.push(format!(
                    "tree {name:?} {}: could not be rebuilt ({why}); left as it was",
                    path.display()
                ));
                continue;
            }
        };
        actions.push(report::rebuilt_line(name, &path, &found, &done));
    }
    Ok(RepairReport { before, actions })
}

/// The check itself, with the lock held.
fn verify_locked(dir: &Path, merge: &Arc<MergeFn>) -> Result<VerifyReport> {
    let catalog_path = dir.join(CATALOG_FILE);
    let (catalog, problem) = match Catalog::load(dir) {
        Ok(c) => (Some(c), None),
        Err(e @ Error::Corruption { .. }) => (None, Some(e.to_string())),
        Err(e) => return Err(e),
    };
    let files = tree_files(dir)?;
    let named: Vec<(String, u64)> = match &catalog {
        Some(c) => c.trees.iter().map(|(n, e)| (n.clone(), e.id)).collect(),
        None => files.iter().map(|id| (String::new(), *id)).collect(),
    };
    let mut trees = Vec::new();
    for (name, id) in named {
        trees.push(check_tree(dir, &name, id, merge)?);
    }
    let unnamed = match &catalog {
        Some(c) => files
            .iter()
            .filter(|id| !c.trees.values().any(|e| e.id == **id))
            .map(|id| tree_path(dir, *id))
            .collect(),
        None => Vec::new(),
    };
    let log = wal::salvage::check(&wal_dir(dir))?;
    let oldest = wal::oldest_lsn(&wal_dir(dir))?;
    let redo_outside_log = trees
        .iter()
        .filter_map(|t| {
            let redo = t.redo_lsn?;
            let what = if log.damage.is_none() && redo > log.end.0 {
                format!("the log ends at LSN {}, before", log.end)
            } else if oldest.is_some_and(|o| redo < o.0) {
                "the oldest log file starts after".to_owned()
            } else {
                return None;
            };
            Some(format!(
                "{what} the redo point LSN {redo} of {}",
                t.file.display()
            ))
        })
        .collect();
    Ok(VerifyReport {
        dir: dir.to_owned(),
        catalog: CatalogCheck {
            file: catalog_path,
            trees: catalog.as_ref().map_or(0, |c| c.trees.len()),
            problem,
        },
        trees,
        log,
        unnamed_files: unnamed,
        redo_outside_log,
    })
}

/// Reads every block of one tree, then (when they all read) walks it as a tree.
fn check_tree(dir: &Path, name: &str, id: u64, merge: &Arc<MergeFn>) -> Result<TreeCheck> {
    let path = tree_path(dir, id);
    let mut check = TreeCheck {
        name: name.to_owned(),
        id,
        file: path.clone(),
        ..TreeCheck::default()
    };
    let found = match extract(&path) {
        Ok(found) => found,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            check.problems.push("the tree file is missing".into());
            return Ok(check);
        }
        Err(e) => return Err(Error::os(&path, "read", e)),
    };
    check.source = Some(found.source);
    check.leaves = found.leaves;
    check.internals = found.internals;
    check.keys = found.keys.len() as u64;
    check.problems = found.problems;
    check.lost = found.lost;
    check.redo_lsn = (found.source == Source::Table).then_some(found.lsn);
    if check.is_clean() {
        if let Err(e) = walk_tree(&path, id, name, merge) {
            check.problems.push(format!("tree structure: {e}"));
        }
    }
    Ok(check)
}

/// Opens the file as the engine would and runs `Tree::verify` on it, in a private cache.
fn walk_tree(path: &Path, id: u64, name: &str, merge: &Arc<MergeFn>) -> Result<()> {
    let (file, cp) = BlockFile::open(path, false, Arc::new(IoStats::default()), None)?;
    let cache = Arc::new(Cache::new(64 << 20));
    let ctx = TreeContext {
        cache: cache.clone(),
        merge: merge.clone(),
        stats: Arc::new(EngineStats::default()),
        snapshots: Snapshots::new(Ts(cp.lsn.max(1))),
    };
    let tree = Arc::new(Tree::new(
        id,
        name.to_owned(),
        file,
        cp.root,
        &cp.meta,
        ctx,
    )?);
    cache.register(&tree);
    let outcome = tree.verify().map(|_| ());
    tree.release_cache();
    outcome
}

/// Moves a sound tree's redo point up to `oldest`, the start of the log, when the log was
/// restarted past it (R3): the records it still needed are gone, and the report says which.
fn align_redo(path: &Path, oldest: Lsn, actions: &mut Vec<String>) -> Result<()> {
    let (file, cp) = BlockFile::open(path, false, Arc::new(IoStats::default()), None)?;
    if cp.lsn >= oldest.0 {
        return Ok(());
    }
    file.checkpoint_begin();
    file.checkpoint_end(cp.root, oldest.0, &cp.meta)?;
    actions.push(format!(
        "tree file {}: its redo point moved from LSN {} to the log's new start {oldest}; \
         the records between them are lost to it",
        path.display(),
        cp.lsn
    ));
    Ok(())
}

/// Reads a damaged catalog leniently and reconciles it with the tree files present.
fn fix_catalog(dir: &Path, actions: &mut Vec<String>) -> Result<Catalog> {
    let path = dir.join(CATALOG_FILE);
    let bytes = std::fs::read(&path).map_err(|e| Error::os(&path, "read", e))?;
    let files = tree_files(dir)?;
    let mut catalog = match catalog_scan::read(&bytes, &files) {
        Ok((c, how)) => {
            actions.push(format!("catalog: {how}: {} trees named", c.trees.len()));
            c
        }
        Err(reason) => {
            actions.push(format!(
                "catalog: unreadable ({reason}); every tree name is lost"
            ));
            Catalog::default()
        }
    };
    catalog.trees.retain(|name, e| {
        let kept = files.contains(&e.id);
        if !kept {
            actions.push(format!(
                "catalog: dropped tree {name:?} (id {}): its file is missing",
                e.id
            ));
        }
        kept
    });
    for id in &files {
        if catalog.trees.values().any(|e| e.id == *id) {
            continue;
        }
        let name = format!("salvaged.tree-{id}");
        let options = match crate::block::salvage::lenient_meta(&tree_path(dir, *id)) {
            Ok(Some((_, meta))) => crate::tree::salvage::options_from_meta(&meta),
            _ => None,
        };
        actions.push(format!(
            "catalog: kept the tree file {} it no longer names as {name:?}",
            tree_path(dir, *id).display()
        ));
        catalog.trees.insert(
            name,
            TreeEntry {
                id: *id,
                options: options.unwrap_or_default(),
            },
        );
    }
    let top = catalog.trees.values().map(|e| e.id).max().unwrap_or(0);
    catalog.next_tree_id = catalog.next_tree_id.max(top + 1);
    let aside = dir.join(format!("{CATALOG_FILE}.damaged"));
    std::fs::rename(&path, &aside).map_err(|e| Error::os(&path, "rename", e))?;
    catalog.store(dir)?;
    actions.push(format!(
        "catalog: rewritten with {} trees; the damaged one kept as {}",
        catalog.trees.len(),
        aside.display()
    ));
    Ok(catalog)
}

/// The ids of the tree files in `dir`.
fn tree_files(dir: &Path) -> Result<Vec<u64>> {
    let entries = std::fs::read_dir(dir).map_err(|e| Error::os(dir, "read dir", e))?;
    let mut ids = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name();
        let id = name
            .to_str()
            .and_then(|n| n.strip_prefix("tree-"))
            .and_then(|n| n.strip_suffix(".shl"))
            .and_then(|n| n.parse::<u64>().ok());
        ids.extend(id);
    }
    ids.sort_unstable();
    Ok(ids)
}

fn existing_dir(dir: &Path) -> Result<()> {
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(Error::InvalidArgument(format!(
            "{} is not a directory",
            dir.display()
        ))),
        Err(e) => Err(Error::os(dir, "stat", e)),
    }
}

fn empty_extract() -> Extracted {
    Extracted {
        options: None,
        lsn: 0,
        next_msn: 1,
        source: Source::Scan,
        keys: Default::default(),
        lost: Vec::new(),
        problems: vec!["the tree file is missing".into()],
        leaves: 0,
        internals: 0,
    }
}

/// A cache for rebuilding one tree: a few dozen nodes.
fn options_cache(options: &TreeOptions) -> usize {
    (options.node_size_bytes * 64).max(16 << 20)
}
