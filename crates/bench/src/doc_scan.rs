//! `shale-bench doc-scan`: the CPU a query pays per field it walks past in a stored document,
//! the cost behind nth-attribute's QPS(1000)/QPS(1) (issue 23 item 2): `raw_scan::lookup` of
//! the last field and a full element walk (what an inclusion projection does) over documents
//! of N int32 fields, in nanoseconds per element. No server, no I/O: the walk alone, so two
//! builds compare without the VM's wake-up noise that dominates a wire run.

use crate::machine::Machine;
use crate::report::{num, Report, Table};
use anyhow::Result;
use bson::RawDocumentBuf;
use clap::Args;
use serde::Serialize;
use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[derive(Debug, Args)]
pub struct DocScanArgs {
    /// Shorter run: 0.2 s per measurement instead of 1 s
    #[arg(long)]
    pub quick: bool,
    /// Also write the results as JSON to FILE
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

const FIELD_COUNTS: [usize; 4] = [10, 100, 500, 1000];

#[derive(Debug, Serialize)]
struct Params {
    quick: bool,
    seconds_per_point: f64,
    field_counts: Vec<usize>,
}

#[derive(Debug, Serialize)]
struct Row {
    fields: usize,
    doc_bytes: usize,
    lookup_last_ns_per_element: f64,
    walk_ns_per_element: f64,
}

#[derive(Debug, Serialize)]
struct Summary {
    lookup_ns_per_element_at_1000: f64,
    walk_ns_per_element_at_1000: f64,
}

/// `{_id, x1: 1, ..., xN: N, y}`: nth-attribute's x-first document.
fn document(n: usize) -> RawDocumentBuf {
    let mut d = RawDocumentBuf::new();
    d.append("_id", 1i64);
    for k in 1..=n {
        d.append(format!("x{k}"), k as i32);
    }
    d.append("y", 1i64);
    d
}

/// Nanoseconds per call of `f`, run repeatedly for `seconds`.
fn per_call(seconds: f64, mut f: impl FnMut()) -> f64 {
    let budget = Duration::from_secs_f64(seconds);
    let start = Instant::now();
    let mut calls = 0u64;
    while start.elapsed() < budget {
        for _ in 0..64 {
            f();
        }
        calls += 64;
    }
    start.elapsed().as_nanos() as f64 / calls as f64
}

pub fn run(args: &DocScanArgs) -> Result<()> {
    let seconds = if args.quick { 0.2 } else { 1.0 };
    let mut rows = Vec::new();
    for n in FIELD_COUNTS {
        let doc = document(n);
        let elements = (n + 2) as f64;
        let lookup = per_call(seconds, || {
            let found = shale_doc::raw_scan::lookup(black_box(&doc), black_box("y"));
            assert!(matches!(found, Ok(Some(_))), "y is there");
        }) / elements;
        let walk = per_call(seconds, || {
            let mut seen = 0usize;
            let mut walk = shale_doc::raw_scan::elements(black_box(&doc));
            while let Ok(Some(e)) = walk.next_element() {
                seen += usize::from(!e.key.is_empty());
            }
            assert_eq!(seen, n + 2);
        }) / elements;
        rows.push(Row {
            fields: n,
            doc_bytes: doc.as_bytes().len(),
            lookup_last_ns_per_element: lookup,
            walk_ns_per_element: walk,
        });
    }
    let mut table = Table::new([
        "fields",
        "doc bytes",
        "lookup ns/element",
        "walk ns/element",
    ]);
    for r in &rows {
        table.row([
            r.fields.to_string(),
            r.doc_bytes.to_string(),
            num(r.lookup_last_ns_per_element),
            num(r.walk_ns_per_element),
        ]);
    }
    println!("{}", table.render());
    let at_1000 = rows.iter().find(|r| r.fields == 1000);
    let summary = Summary {
        lookup_ns_per_element_at_1000: at_1000.map_or(f64::NAN, |r| r.lookup_last_ns_per_element),
        walk_ns_per_element_at_1000: at_1000.map_or(f64::NAN, |r| r.walk_ns_per_element),
    };
    if let Some(path) = &args.json {
        Report {
            workload: "doc-scan",
            params: Params {
                quick: args.quick,
                seconds_per_point: seconds,
                field_counts: FIELD_COUNTS.to_vec(),
            },
            machine: Machine::describe(&std::env::temp_dir()),
            results: rows,
            summary,
        }
        .write_json(path)?;
        println!("wrote {}", path.display());
    }
    Ok(())
}
