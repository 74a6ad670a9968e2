//! What `verify` found and what `repair` did, as values and as the report an operator reads:
//! one line per file (OK, or each problem with its block, offset and reason), then a
//! verdict that says what to do next.

use super::rebuild::Rebuilt;
use crate::tree::salvage::{Extracted, LostBlock, Source};
use crate::wal::salvage::LogCheck;
use std::fmt;
use std::path::{Path, PathBuf};

/// The catalog file's state.
#[derive(Debug, Clone)]
pub struct CatalogCheck {
    /// The catalog file.
    pub file: PathBuf,
    /// Trees it names.
    pub trees: usize,
    /// Why it did not read whole, if it did not.
    pub problem: Option<String>,
}

/// One tree file's state.
#[derive(Debug, Clone, Default)]
pub struct TreeCheck {
    /// The catalog's name for it (empty when the catalog is unreadable).
    pub name: String,
    /// The tree's id.
    pub id: u64,
    /// The tree file.
    pub file: PathBuf,
    /// How its contents were read (`None`: the file is missing).
    pub source: Option<Source>,
    /// Leaves read.
    pub leaves: u64,
    /// Internal nodes read.
    pub internals: u64,
    /// Distinct keys found (deleted ones included).
    pub keys: u64,
    /// Blocks that did not read.
    pub lost: Vec<LostBlock>,
    /// Header, table and structure problems.
    pub problems: Vec<String>,
    /// The redo LSN of the checkpoint read (none when no checkpoint was found).
    pub redo_lsn: Option<u64>,
}

impl TreeCheck {
    /// True when it read through its table with nothing lost and no problem.
    pub fn is_clean(&self) -> bool {
        self.source == Some(Source::Table) && self.lost.is_empty() && self.problems.is_empty()
    }
}

/// Everything `verify` found.
#[derive(Debug, Clone)]
pub struct VerifyReport {
    /// The data directory checked.
    pub dir: PathBuf,
    /// The catalog's state.
    pub catalog: CatalogCheck,
    /// Each tree file's state.
    pub trees: Vec<TreeCheck>,
    /// The log's state.
    pub log: LogCheck,
    /// Tree files the catalog does not name (a create interrupted by a crash; the next
    /// open removes them, R7).
    pub unnamed_files: Vec<PathBuf>,
    /// Trees whose redo point lies outside the log (R3): the log was cut short before it,
    /// or its older files are missing.
    pub redo_outside_log: Vec<String>,
}

impl VerifyReport {
    /// True when nothing is damaged.
    pub fn is_clean(&self) -> bool {
        self.catalog.problem.is_none()
            && self.trees.iter().all(TreeCheck::is_clean)
            && self.log.damage.is_none()
            && self.redo_outside_log.is_empty()
    }
}

/// What `repair` found and did.
#[derive(Debug, Clone)]
pub struct RepairReport {
    /// The state before the repair.
    pub before: VerifyReport,
    /// One line per change made: what was kept and exactly what was dropped.
    pub actions: Vec<String>,
}

impl fmt::Display for VerifyReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.catalog.problem {
            None => writeln!(
                f,
                "catalog  {}: OK ({} trees)",
                self.catalog.file.display(),
                self.catalog.trees
            )?,
            Some(p) => writeln!(f, "catalog  {}: DAMAGED: {p}", self.catalog.file.display())?,
        }
        for t in &self.trees {
            write_tree(f, t)?;
        }
        for p in &self.unnamed_files {
            writeln!(
                f,
                "tree     {}: not named by the catalog (removed at the next start)",
                p.display()
            )?;
        }
        let log = self.dir.join("wal");
        match &self.log.damage {
            None => writeln!(
                f,
                "log      {}: OK ({} files, {} records, ends at LSN {})",
                log.display(),
                self.log.files,
                self.log.records,
                self.log.end
            )?,
            Some(d) => writeln!(
                f,
                "log      {}: DAMAGED at offset {} (LSN {}): {}; {} records before it read, \
                 {} readable records after it, {} later files",
                d.file.display(),
                d.offset,
                d.lsn,
                d.reason,
                self.log.records,
                d.readable_after,
                d.later_files.len()
            )?,
        }
        for line in &self.redo_outside_log {
            writeln!(f, "log      DAMAGED: {line}")?;
        }
        if self.is_clean() {
            write!(f, "verdict: clean")
        } else {
            write!(
                f,
                "verdict: DAMAGED; `shale serve --repair --dbpath {}` salvages what is intact \
                 (damaged files are kept as *.damaged)",
                self.dir.display()
            )
        }
    }
}

fn write_tree(f: &mut fmt::Formatter<'_>, t: &TreeCheck) -> fmt::Result {
    let name = if t.name.is_empty() {
        "(name unknown)"
    } else {
        &t.name
    };
    let shape = format!(
        "{} leaves, {} internal nodes, {} keys",
        t.leaves, t.internals, t.keys
    );
    if t.is_clean() {
        return writeln!(f, "tree     {name} {}: OK ({shape})", t.file.display());
    }
    let how = match t.source {
        Some(Source::Table) => "read through its translation table",
        Some(Source::Scan) => "no usable checkpoint: read by scanning its pages",
        None => "missing",
    };
    writeln!(
        f,
        "tree     {name} {}: DAMAGED ({how}; {shape} readable)",
        t.file.display()
    )?;
    for p in &t.problems {
        writeln!(f, "           {p}")?;
    }
    for line in lost_lines(&t.lost) {
        writeln!(f, "           {line}")?;
    }
    Ok(())
}

/// The report lines of lost blocks: a run of neighbouring partitions of one block lost for
/// the same reason (a block cut short loses its tail) is one line with their key range.
pub(crate) fn lost_lines(lost: &[LostBlock]) -> Vec<String> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < lost.len() {
        let mut j = i + 1;
        while j < lost.len() && continues(&lost[j - 1], &lost[j]) {
            j += 1;
        }
        if j - i == 1 {
            out.push(lost_line(&lost[i]));
        } else {
            let (first, last) = (&lost[i], &lost[j - 1]);
            let merged = LostBlock {
                reason: reason_tail(&first.reason).to_owned(),
                high: last.high.clone(),
                ..first.clone()
            };
            let parts = format!(
                "partitions {}-{}",
                first.partition.unwrap_or(0),
                last.partition.unwrap_or(0)
            );
            out.push(describe(&merged, Some(parts)));
        }
        i = j;
    }
    out
}

/// Whether `next` is the partition after `prev` in the same block, lost for the same reason.
fn continues(prev: &LostBlock, next: &LostBlock) -> bool {
    let (Some(a), Some(b)) = (prev.partition, next.partition) else {
        return false;
    };
    prev.node == next.node
        && prev.offset == next.offset
        && a + 1 == b
        && prev.messages == next.messages
        && prev.range_known
        && next.range_known
        && prev.high == next.low
        && reason_tail(&prev.reason) == reason_tail(&next.reason)
}

/// A partition's reason without its "basement N: " prefix.
fn reason_tail(reason: &str) -> &str {
    reason.split_once(": ").map_or(reason, |(_, tail)| tail)
}

/// One lost block: where, why, and which keys it held.
fn lost_line(l: &LostBlock) -> String {
    describe(l, l.partition.map(|p| format!("partition {p}")))
}

/// A lost block or run of partitions (`parts` names them) as a report line.
fn describe(l: &LostBlock, parts: Option<String>) -> String {
    let node = l
        .node
        .map_or("a block".to_owned(), |n| format!("block {n}"));
    let node = match parts {
        Some(p) => format!("{node} {p}"),
        None => node,
    };
    let range = if l.range_known {
        format!(
            "keys {} .. {}",
            show_key(l.low.as_deref(), "start"),
            show_key(l.high.as_deref(), "end")
        )
    } else {
        "key range unknown (its parent is lost too)".to_owned()
    };
    let effect = match (l.messages, l.partition) {
        (false, _) => "",
        (true, Some(_)) => {
            " (the changes buffered for those keys are lost: they keep older values)"
        }
        (true, None) => {
            " (its entries if it was a leaf; if it was an internal node, the changes buffered \
             for those keys, which then keep older values)"
        }
    };
    format!(
        "{node} (offset {}, {} bytes): {}; {range}{effect}",
        l.offset, l.len, l.reason
    )
}

fn show_key(key: Option<&[u8]>, open: &str) -> String {
    match key {
        None => format!("<{open}>"),
        Some(k) => {
            let hex: String = k.iter().take(32).map(|b| format!("{b:02x}")).collect();
            if k.len() > 32 {
                format!("0x{hex}…")
            } else {
                format!("0x{hex}")
            }
        }
    }
}

/// The report line of one rebuilt tree.
pub(crate) fn rebuilt_line(name: &str, path: &Path, found: &Extracted, done: &Rebuilt) -> String {
    let how = match found.source {
        Source::Table => "its checkpoint's readable blocks",
        Source::Scan => {
            "a scan of its pages (no usable checkpoint; a key deleted long ago may reappear)"
        }
    };
    let mut line = format!(
        "tree {name:?} {}: rebuilt from {how}: {} keys kept ({} leaves, {} internal nodes read), \
         {} keys end deleted, {} blocks dropped; the damaged file kept as {}",
        path.display(),
        done.keys,
        found.leaves,
        found.internals,
        done.deleted,
        found.lost.len(),
        done.damaged_copy.display()
    );
    for l in lost_lines(&found.lost) {
        line.push_str("\n    dropped ");
        line.push_str(&l);
    }
    if done.skipped > 0 {
        line.push_str(&format!(
            "\n    {} changes of an unknown kind skipped",
            done.skipped
        ));
    }
    line
}

impl fmt::Display for RepairReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.actions.is_empty() {
            return write!(f, "nothing to repair: the engine's files are intact");
        }
        for (i, a) in self.actions.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{a}")?;
        }
        Ok(())
    }
}
