//! How results leave the runner: the JSON envelope every workload writes
//! (`workload`, `params`, `machine`, `results`, `summary`), and plain-text tables with
//! right-aligned columns for stdout.

use crate::machine::Machine;
use anyhow::{Context, Result};
use serde::Serialize;
use std::path::Path;

/// The JSON document of one workload run.
#[derive(Debug, Serialize)]
pub struct Report<P, R, S> {
    pub workload: &'static str,
    pub params: P,
    pub machine: Machine,
    pub results: Vec<R>,
    pub summary: S,
}

impl<P: Serialize, R: Serialize, S: Serialize> Report<P, R, S> {
    /// Writes the report, pretty-printed, to `path`.
    pub fn write_json(&self, path: &Path) -> Result<()> {
        write_json(self, path)
    }
}

/// Writes any report-shaped value, pretty-printed, to `path`.
pub fn write_json<T: Serialize>(value: &T, path: &Path) -> Result<()> {
    let mut text = serde_json::to_string_pretty(value).context("serializing report")?;
    text.push('\n');
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// A text table: a header row and data rows, columns right-aligned to their widest cell.
#[derive(Debug, Default)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new<I: IntoIterator<Item = S>, S: Into<String>>(header: I) -> Self {
        Table {
            header: header.into_iter().map(Into::into).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row<I: IntoIterator<Item = S>, S: Into<String>>(&mut self, cells: I) {
        self.rows.push(cells.into_iter().map(Into::into).collect());
    }

    /// The table as lines of text, with a dashed rule under the header.
    pub fn render(&self) -> String {
        let cols = self
            .rows
            .iter()
            .map(Vec::len)
            .chain([self.header.len()])
            .max()
            .unwrap_or(0);
        let mut width = vec![0; cols];
        for r in std::iter::once(&self.header).chain(&self.rows) {
            for (i, c) in r.iter().enumerate() {
                width[i] = width[i].max(c.chars().count());
            }
        }
        let line = |r: &[String]| {
            let cells: Vec<String> = (0..cols)
                .map(|i| {
                    let c = r.get(i).map_or("", String::as_str);
                    format!("{c:>w$}", w = width[i])
                })
                .collect();
            cells.join("  ").trim_end().to_owned()
        };
        let mut out = line(&self.header);
        out.push('\n');
        let rule: Vec<String> = width.iter().map(|&w| "-".repeat(w)).collect();
        out.push_str(&rule.join("  "));
        out.push('\n');
        for r in &self.rows {
            out.push_str(&line(r));
            out.push('\n');
        }
        out
    }
}

/// A number with a precision that suits its size: `12345`, `123.4`, `1.23`.
pub fn num(v: f64) -> String {
    if !v.is_finite() {
        "-".to_owned()
    } else if v.abs() >= 1000.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// A byte count as KiB/MiB/GiB when it is a whole multiple, one decimal of GiB when it is
/// at least 1 GiB, else bytes.
pub fn bytes(n: u64) -> String {
    const K: u64 = 1024;
    match n {
        n if n >= K * K * K && n % (K * K * K) == 0 => format!("{} GiB", n / (K * K * K)),
        n if n >= K * K * K => format!("{:.1} GiB", n as f64 / (K * K * K) as f64),
        n if n >= K * K && n % (K * K) == 0 => format!("{} MiB", n / (K * K)),
        n if n >= K && n % K == 0 => format!("{} KiB", n / K),
        n => format!("{n} B"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_aligns_right() {
        let mut t = Table::new(["size", "iops"]);
        t.row(["4 KiB", "12345"]);
        t.row(["64 KiB", "7"]);
        assert_eq!(
            t.render(),
            "  size   iops\n------  -----\n 4 KiB  12345\n64 KiB      7\n"
        );
    }

    #[test]
    fn number_and_byte_formats() {
        assert_eq!(num(12345.6), "12346");
        assert_eq!(num(123.45), "123.5");
        assert_eq!(num(1.234), "1.23");
        assert_eq!(bytes(4096), "4 KiB");
        assert_eq!(bytes(1 << 20), "1 MiB");
        assert_eq!(bytes(1 << 30), "1 GiB");
        assert_eq!(bytes(1000), "1000 B");
        assert_eq!(bytes(25_276_502_016), "23.5 GiB");
    }
}
