//! `--report DIR`: a markdown report of one run (`report.md`: servers, machine, parameters,
//! the summary with shale/peer ratios, a table per phase) and its PNG charts. It writes what
//! the run produced and measures nothing.

use super::charts::{self, Chart};
use super::label_text;
use super::rows::{by_phase, Row};
use crate::report::num;
use anyhow::{Context, Result};
use serde_json::Value;
use std::fmt::Write as _;
use std::path::Path;

/// Writes `dir/report.md` and the charts into `dir` (created if missing).
pub fn write(
    dir: &Path,
    workload: &str,
    json: &Value,
    rows: &[Row],
    charts: &[Chart],
) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut md = String::new();
    let _ = writeln!(md, "# shale-bench {workload}\n");
    let args: Vec<String> = std::env::args().collect();
    let _ = writeln!(md, "Command: `{}`\n", args.join(" "));
    if let Some(servers) = json["servers"].as_array() {
        for s in servers {
            let _ = writeln!(
                md,
                "- {}: `{}`, version {}{}",
                label_text(&s["target"]),
                label_text(&s["uri"]),
                label_text(&s["version"]),
                if s["started_by_runner"] == true {
                    " (started by the runner)"
                } else {
                    ""
                }
            );
        }
    }
    let m = &json["machine"];
    let _ = writeln!(
        md,
        "- machine: {} cores, {} bytes of memory, {} on {} ({}), kernel {}\n",
        m["cores"],
        m["memory_bytes"],
        label_text(&m["filesystem"]),
        label_text(&m["device"]),
        label_text(&m["cpu_model"]),
        label_text(&m["kernel"])
    );
    let _ = writeln!(md, "## Summary\n");
    summary_table(&mut md, &json["summary"]);
    for c in charts {
        match charts::render(dir, c) {
            Ok(()) => {
                let _ = writeln!(md, "\n![{}]({})", c.title, c.file);
            }
            Err(e) => {
                let _ = writeln!(md, "\n(chart {} not drawn: {e:#})", c.file);
            }
        }
    }
    let _ = writeln!(md, "\n## Results\n");
    phase_tables(&mut md, rows);
    let _ = writeln!(md, "\n## Parameters\n\n```json\n{:#}\n```", json["params"]);
    let path = dir.join("report.md");
    std::fs::write(&path, md).with_context(|| format!("writing {}", path.display()))
}

fn summary_table(md: &mut String, summary: &Value) {
    let Some(s) = summary.as_object() else {
        return;
    };
    let peer = s.get("peer").and_then(Value::as_object);
    let ratio = s.get("ratio_to_peer").and_then(Value::as_object);
    let _ = writeln!(
        md,
        "| figure | shale | peer | shale/peer |\n|---|---|---|---|"
    );
    for (k, v) in s {
        if k == "peer" || k == "ratio_to_peer" {
            continue;
        }
        let cell = |m: Option<&serde_json::Map<String, Value>>| {
            m.and_then(|m| m.get(k)).map_or("-".to_owned(), fmt)
        };
        let _ = writeln!(
            md,
            "| {k} | {} | {} | {} |",
            fmt(v),
            cell(peer),
            cell(ratio)
        );
    }
}

fn fmt(v: &Value) -> String {
    v.as_f64().map_or_else(|| label_text(v), num)
}

fn phase_tables(md: &mut String, rows: &[Row]) {
    for (phase, of) in by_phase(rows) {
        let labels: Vec<String> = of[0].labels.iter().map(|(k, _)| k.clone()).collect();
        let mut figs: Vec<String> = Vec::new();
        for r in &of {
            for (k, _) in &r.figures.0 {
                if !figs.contains(k) {
                    figs.push(k.clone());
                }
            }
        }
        figs.truncate(12);
        let _ = writeln!(md, "### {phase}\n");
        let head: Vec<String> = std::iter::once("target".to_owned())
            .chain(labels.iter().cloned())
            .chain(figs.iter().cloned())
            .collect();
        let _ = writeln!(md, "| {} |", head.join(" | "));
        let _ = writeln!(md, "|{}", "---|".repeat(head.len()));
        for r in of {
            let mut cells = vec![r.target.clone()];
            cells.extend(
                labels
                    .iter()
                    .map(|l| r.label_value(l).map_or(String::new(), label_text)),
            );
            cells.extend(figs.iter().map(|f| r.get(f).map_or("-".to_owned(), num)));
            let _ = writeln!(md, "| {} |", cells.join(" | "));
        }
        let _ = writeln!(md);
    }
}
