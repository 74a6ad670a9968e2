//! A query's blocking sort past the in-memory limit (mongod's external sort, which
//! `allowDiskUse` allows and mongod 7.0 allows by default): rows are held until they pass
//! `internalQueryMaxBlockingSortMemoryUsageBytes` (100 MiB), then sorted and written as one run to an unnamed temporary file
//! in the data directory (`O_TMPFILE`: nothing is left behind by a crash), and the runs are
//! merged lazily when the sorted rows are read, so memory stays about one run plus one row
//! per run. Without disk use a sort past the limit fails with
//! `QueryExceededMemoryLimitNoDiskUseAllowed` (292), as mongod's does.
//!
//! A run is a sequence of rows, each `[u32 LE array position + 1, 0 for none][BSON document]`;
//! keys are computed again from the documents when merged. Ties keep input order: an earlier
//! run wins, as its rows came first. The files are scratch space, not engine I/O: they are
//! not in the engine's counters (the kernel's write counters see them).

use crate::exec::sort_memory_limit;
use crate::sort::SortSpec;
use crate::DbResult;
use bson::{Bson, RawDocumentBuf};
use shale_doc::{ErrorCode, MongoError};
use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::PathBuf;

/// One sorted row: its key, the document and the matcher's array position.
type Row = (Vec<Bson>, RawDocumentBuf, Option<usize>);

/// Sorts rows pushed one at a time; spills to `spill_dir` if given.
pub(crate) struct Sorter {
    spec: SortSpec,
    keep: Option<usize>,
    rows: Vec<Row>,
    bytes: usize,
    limit: usize,
    spill_dir: Option<PathBuf>,
    runs: Vec<BufReader<File>>,
}

impl Sorter {
    /// A sorter by `spec` keeping at most `keep` rows (a limit); `spill_dir`: where runs go
    /// when disk use is allowed.
    pub(crate) fn new(spec: SortSpec, keep: Option<usize>, spill_dir: Option<PathBuf>) -> Sorter {
        Sorter::with_limit(spec, keep, spill_dir, sort_memory_limit())
    }

    pub(crate) fn with_limit(
        spec: SortSpec,
        keep: Option<usize>,
        spill_dir: Option<PathBuf>,
        limit: usize,
    ) -> Sorter {
        Sorter {
            spec,
            keep,
            rows: Vec::new(),
            bytes: 0,
            limit,
            spill_dir,
            runs: Vec::new(),
        }
    }

    /// Adds one row.
    pub(crate) fn push(&mut self, doc: RawDocumentBuf, pos: Option<usize>) -> DbResult<()> {
        self.bytes += doc.as_bytes().len();
        let key = self.spec.key(&doc)?;
        self.rows.push((key, doc, pos));
        if let Some(k) = self.keep {
            if self.rows.len() >= 2 * k.max(64) {
                self.sort_rows();
                self.rows.truncate(k);
                self.bytes = self.rows.iter().map(|r| r.1.as_bytes().len()).sum();
            }
        }
        if self.bytes > self.limit {
            self.spill()?;
        }
        Ok(())
    }

    fn sort_rows(&mut self) {
        let spec = &self.spec;
        self.rows.sort_by(|a, b| spec.compare(&a.0, &b.0));
    }

    /// Writes the rows held as one sorted run, or fails when disk use is not allowed.
    fn spill(&mut self) -> DbResult<()> {
        let Some(dir) = self.spill_dir.clone() else {
            return Err(MongoError::new(
                ErrorCode::QueryExceededMemoryLimitNoDiskUseAllowed,
                format!(
                    "Sort exceeded memory limit of {} bytes, but did not opt in to external \
                     sorting.",
                    self.limit
                ),
            ));
        };
        self.sort_rows();
        if let Some(k) = self.keep {
            self.rows.truncate(k);
        }
        let file = tempfile::tempfile_in(&dir).map_err(spill_error)?;
        let mut out = BufWriter::new(file);
        for (_, doc, pos) in self.rows.drain(..) {
            let pos = pos.map_or(0u32, |p| u32::try_from(p + 1).unwrap_or(u32::MAX));
            out.write_all(&pos.to_le_bytes()).map_err(spill_error)?;
            out.write_all(doc.as_bytes()).map_err(spill_error)?;
        }
        let mut file = out.into_inner().map_err(|e| spill_error(e.into_error()))?;
        file.seek(SeekFrom::Start(0)).map_err(spill_error)?;
        self.runs.push(BufReader::new(file));
        self.bytes = 0;
        Ok(())
    }

    /// The rows in order.
    pub(crate) fn finish(mut self) -> DbResult<Sorted> {
        self.sort_rows();
        if let Some(k) = self.keep {
            self.rows.truncate(k);
        }
        if self.runs.is_empty() {
            let rows = self.rows.into_iter().map(|(_, d, p)| (d, p)).collect();
            return Ok(Sorted::Memory(rows));
        }
        let mut heads = Vec::with_capacity(self.runs.len() + 1);
        let mut sources = Vec::with_capacity(self.runs.len() + 1);
        for mut run in self.runs {
            heads.push(read_row(&mut run, &self.spec)?);
            sources.push(Source::Run(run));
        }
        let mut memory: VecDeque<Row> = self.rows.into();
        heads.push(memory.pop_front());
        sources.push(Source::Memory(memory));
        Ok(Sorted::Merge(Merge {
            spec: self.spec,
            heads,
            sources,
        }))
    }
}

fn spill_error(e: std::io::Error) -> MongoError {
    MongoError::new(
        ErrorCode::InternalError,
        format!("external sort: writing or reading a temporary run failed: {e}"),
    )
}

/// A run's next row (`None` at its end).
fn read_row(run: &mut BufReader<File>, spec: &SortSpec) -> DbResult<Option<Row>> {
    let mut pos = [0u8; 4];
    match run.read_exact(&mut pos) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(spill_error(e)),
    }
    let mut len = [0u8; 4];
    run.read_exact(&mut len).map_err(spill_error)?;
    let n = u32::from_le_bytes(len) as usize;
    if n < 5 {
        return Err(spill_error(std::io::Error::other(
            "a run's document is too short",
        )));
    }
    let mut bytes = vec![0u8; n];
    bytes[..4].copy_from_slice(&len);
    run.read_exact(&mut bytes[4..]).map_err(spill_error)?;
    let doc = RawDocumentBuf::from_bytes(bytes)
        .map_err(|e| spill_error(std::io::Error::other(e.to_string())))?;
    let pos = u32::from_le_bytes(pos);
    let pos = (pos > 0).then(|| pos as usize - 1);
    Ok(Some((spec.key(&doc)?, doc, pos)))
}

enum Source {
    Run(BufReader<File>),
    Memory(VecDeque<Row>),
}

/// The runs and the rows still in memory, merged.
pub(crate) struct Merge {
    spec: SortSpec,
    heads: Vec<Option<Row>>,
    sources: Vec<Source>,
}

/// Sorted rows: all in memory, or merged from runs as they are read.
pub(crate) enum Sorted {
    Memory(VecDeque<(RawDocumentBuf, Option<usize>)>),
    Merge(Merge),
}

impl Sorted {
    /// The next row in order.
    pub(crate) fn next(&mut self) -> DbResult<Option<(RawDocumentBuf, Option<usize>)>> {
        match self {
            Sorted::Memory(rows) => Ok(rows.pop_front()),
            Sorted::Merge(m) => m.next(),
        }
    }
}

impl Merge {
    fn next(&mut self) -> DbResult<Option<(RawDocumentBuf, Option<usize>)>> {
        // Few runs (one per 100 MiB sorted): a linear pick is cheaper than a heap's upkeep.
        let mut best: Option<usize> = None;
        for (i, head) in self.heads.iter().enumerate() {
            let Some((key, _, _)) = head else { continue };
            let better = match best.and_then(|b| self.heads[b].as_ref()) {
                None => true,
                Some((best_key, _, _)) => {
                    self.spec.compare(key, best_key) == std::cmp::Ordering::Less
                }
            };
            if better {
                best = Some(i);
            }
        }
        let Some(i) = best else { return Ok(None) };
        let next = match &mut self.sources[i] {
            Source::Run(run) => read_row(run, &self.spec)?,
            Source::Memory(rows) => rows.pop_front(),
        };
        let row = std::mem::replace(&mut self.heads[i], next);
        Ok(row.map(|(_, d, p)| (d, p)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn docs(n: i32) -> Vec<RawDocumentBuf> {
        (0..n)
            .map(|i| {
                let d = doc! {"k": (i * 7919) % 1000, "i": i, "pad": "x".repeat(50)};
                RawDocumentBuf::from_document(&d).expect("raw")
            })
            .collect()
    }

    fn drain(mut s: Sorted) -> Vec<(i32, i32)> {
        let mut out = Vec::new();
        while let Some((d, _)) = s.next().expect("next") {
            out.push((d.get_i32("k").expect("k"), d.get_i32("i").expect("i")));
        }
        out
    }

    #[test]
    fn spilled_runs_merge_to_a_stable_sort() {
        let dir = tempfile::tempdir().expect("dir");
        let spec = SortSpec::parse(&doc! {"k": 1}).expect("spec");
        let mut s = Sorter::with_limit(spec, None, Some(dir.path().to_path_buf()), 4096);
        let input = docs(2000);
        for d in &input {
            s.push(d.clone(), None).expect("push");
        }
        assert!(s.runs.len() > 10, "{} runs", s.runs.len());
        let got = drain(s.finish().expect("finish"));
        let mut want: Vec<(i32, i32)> = input
            .iter()
            .map(|d| (d.get_i32("k").expect("k"), d.get_i32("i").expect("i")))
            .collect();
        want.sort_by_key(|(k, _)| *k);
        assert_eq!(got, want);
        assert_eq!(std::fs::read_dir(dir.path()).expect("dir").count(), 0);
    }

    #[test]
    fn without_disk_use_the_limit_is_292() {
        let spec = SortSpec::parse(&doc! {"k": -1}).expect("spec");
        let mut s = Sorter::with_limit(spec, None, None, 4096);
        let e = docs(200)
            .into_iter()
            .try_for_each(|d| s.push(d, None))
            .expect_err("over the limit");
        assert_eq!(e.code.code(), 292);
    }

    #[test]
    fn a_limit_keeps_the_top_rows_across_runs() {
        let dir = tempfile::tempdir().expect("dir");
        let spec = SortSpec::parse(&doc! {"k": -1}).expect("spec");
        let mut s = Sorter::with_limit(spec, Some(300), Some(dir.path().to_path_buf()), 4096);
        let input = docs(3000);
        for d in &input {
            s.push(d.clone(), Some(3)).expect("push");
        }
        let mut got = drain(s.finish().expect("finish"));
        got.truncate(300);
        let mut want: Vec<(i32, i32)> = input
            .iter()
            .map(|d| (d.get_i32("k").expect("k"), d.get_i32("i").expect("i")))
            .collect();
        want.sort_by_key(|b| std::cmp::Reverse(b.0));
        want.truncate(300);
        assert_eq!(got, want);
    }
}
