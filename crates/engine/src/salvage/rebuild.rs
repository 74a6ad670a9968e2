//! Writing a salvaged tree into a fresh block file: the extracted changes are applied to a
//! new, empty tree through the tree's own write path (inject, flush, evict, checkpoint), in
//! the order `tree::salvage` gives them (E1, Q1), and the result is checkpointed with the
//! damaged file's redo LSN, so recovery then replays exactly the log records the damaged
//! checkpoint lacked (R2, R3). The fresh file replaces the damaged one by rename; the
//! damaged file stays beside it as `tree-<id>.shl.damaged` (R7 never removes that name).

use crate::block::{BlockFile, NodeId};
use crate::cache::Cache;
use crate::catalog::tree_path;
use crate::counters::EngineStats;
use crate::mvcc::{Snapshots, Ts};
use crate::tree::salvage::Extracted;
use crate::tree::{encode_meta, MergeFn, OpRef, Tree, TreeContext};
use crate::{Error, Result, TreeOptions};
use shale_io::IoStats;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What rebuilding one tree wrote.
#[derive(Debug, Clone, Default)]
pub struct Rebuilt {
    /// Keys written into the fresh tree.
    pub keys: u64,
    /// Keys that end deleted (nothing to write).
    pub deleted: u64,
    /// Changes not applied: an op code this version does not know.
    pub skipped: u64,
    /// Where the damaged file was kept.
    pub damaged_copy: PathBuf,
}

/// The tree a rebuild replaces.
pub(crate) struct Target<'a> {
    pub dir: &'a Path,
    pub id: u64,
    pub name: &'a str,
    pub options: TreeOptions,
    /// The redo point the fresh checkpoint records.
    pub redo_lsn: u64,
}

/// Replaces the target tree's file with a fresh one holding what `found` salvaged, built in
/// a private cache of `cache_bytes`.
pub(crate) fn rebuild(
    target: &Target<'_>,
    found: &Extracted,
    merge: Arc<MergeFn>,
    cache_bytes: usize,
) -> Result<Rebuilt> {
    let Target {
        dir,
        id,
        name,
        options,
        redo_lsn,
    } = *target;
    let options = &options;
    let path = tree_path(dir, id);
    let fresh = suffixed(&path, ".salvage");
    if fresh.exists() {
        std::fs::remove_file(&fresh).map_err(|e| Error::os(&fresh, "unlink", e))?;
    }
    let (live, deleted) = live_keys(found);
    let meta = encode_meta(options, found.next_msn.max(1), live);
    let stats = Arc::new(IoStats::default());
    let file = BlockFile::create(&fresh, &meta, false, stats, None)?;
    let newest = found
        .keys
        .values()
        .flatten()
        .map(|c| c.ts)
        .filter(|ts| !ts.is_provisional())
        .max()
        .unwrap_or(Ts(0));
    let cache = Arc::new(Cache::new(cache_bytes));
    let ctx = TreeContext {
        cache: cache.clone(),
        merge,
        stats: Arc::new(EngineStats::default()),
        snapshots: Snapshots::new(newest),
    };
    let tree = Arc::new(Tree::new(id, name.to_owned(), file, NodeId(0), &meta, ctx)?);
    cache.register(&tree);
    let mut out = Rebuilt {
        deleted,
        ..Rebuilt::default()
    };
    for (key, changes) in &found.keys {
        for change in changes {
            let Some(op) = change.op() else {
                out.skipped += 1;
                continue;
            };
            if matches!(op, OpRef::Abort) && !change.ts.is_provisional() {
                out.skipped += 1;
                continue;
            }
            tree.apply(key, change.ts, op)?;
            while tree.needs_flush() {
                tree.flush_once()?;
            }
        }
        tree.evict_if_needed()?;
    }
    out.keys = live as u64;
    tree.drain()?;
    let mark = tree.checkpoint_mark();
    tree.checkpoint_finish(&mark, redo_lsn)?;
    tree.release_cache();
    drop(tree);
    out.damaged_copy = suffixed(&path, ".damaged");
    if path.exists() {
        std::fs::rename(&path, &out.damaged_copy).map_err(|e| Error::os(&path, "rename", e))?;
    }
    std::fs::rename(&fresh, &path).map_err(|e| Error::os(&fresh, "rename", e))?;
    shale_io::sync_dir(dir)?;
    Ok(out)
}

/// Keys whose last change leaves a value, and keys whose last change deletes: the entry
/// count the fresh checkpoint records (callers that keep their own counts correct them).
fn live_keys(found: &Extracted) -> (i64, u64) {
    let mut live = 0i64;
    let mut deleted = 0u64;
    for changes in found.keys.values() {
        let last = changes
            .iter()
            .rev()
            .find(|c| !matches!(c.op(), Some(OpRef::Abort) | None));
        match last.and_then(|c| c.op()) {
            Some(OpRef::Delete) | None => deleted += 1,
            Some(_) => live += 1,
        }
    }
    (live, deleted)
}

fn suffixed(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}
