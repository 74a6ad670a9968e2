//! `nth-attribute` (seed: "Overhead of reading the Nth attribute in a document"): one
//! collection per attribute count N, documents `{_id: i, x1: 1, ..., xN: N, y: i}` (or with
//! `y` first), all cached; one client runs `find({_id: v, y: v}, {_id: 1, y: 1})` on random
//! v. Reports QPS per N and QPS(N)/QPS(1) for each variant.

use super::charts::{Chart, Plot};
use super::drive::{self, LoadSpec};
use super::rows::{ratio, Figures, Row};
use super::{line_series, Ctx, Outcome, Target, WireArgs, Workload};
use anyhow::{ensure, Context, Result};
use mongodb::bson::{doc, RawDocumentBuf};
use serde::Serialize;
use std::time::Duration;

pub struct NthAttribute;

const COUNTS: [usize; 8] = [1, 10, 100, 200, 400, 500, 750, 1000];
const VARIANTS: [&str; 2] = ["x_first", "y_first"];
const SEED: u64 = 0x6e74_6861_7474;

#[derive(Debug, Serialize)]
pub struct Params {
    quick: bool,
    cache_bytes: u64,
    docs: u64,
    attribute_counts: Vec<usize>,
    variants: Vec<&'static str>,
    clients: usize,
    seconds_per_point: f64,
}

impl Workload for NthAttribute {
    const NAME: &'static str = "nth-attribute";
    type Params = Params;

    fn params(args: &WireArgs) -> Result<Params> {
        // 1,000 attributes make an 11 KB document: `docs` of them must stay cached.
        let cache_bytes = args.cache_bytes_or(64, 2048)?;
        let docs =
            (args.data_bytes_or(if args.quick { 22 << 20 } else { 1100 << 20 })? / 11_000).max(10);
        Ok(Params {
            quick: args.quick,
            cache_bytes,
            docs,
            attribute_counts: COUNTS.to_vec(),
            variants: VARIANTS.to_vec(),
            clients: 1,
            seconds_per_point: args.seconds_or(2.0, 30.0)?,
        })
    }

    fn cache_bytes(p: &Params) -> u64 {
        p.cache_bytes
    }

    fn key_figures() -> &'static [&'static str] {
        &[
            "doc_bytes",
            "qps",
            "qps_ratio_to_n1",
            "p50_us",
            "p99_us",
            "dev_reads",
        ]
    }

    async fn run(p: &Params, t: &mut Target, _ctx: &Ctx) -> Result<Outcome> {
        let mut rows = Vec::new();
        for variant in VARIANTS {
            let mut qps1 = None;
            for &n in &COUNTS {
                let row = point(p, t, variant, n).await?;
                let qps = row.get("qps").unwrap_or(0.0);
                let q1 = *qps1.get_or_insert(qps);
                rows.push(row.fig("qps_ratio_to_n1", ratio(qps, q1)));
            }
        }
        Ok(Outcome {
            summary: summarize(&rows),
            rows,
        })
    }

    fn charts(rows: &[Row]) -> Vec<Chart> {
        let series = line_series(rows, "query", "n", "qps", |r| {
            let v = r
                .label_value("variant")
                .map(super::label_text)
                .unwrap_or_default();
            format!("{} {v}", r.target)
        });
        vec![Chart {
            file: "qps_by_n.png".into(),
            title: "find({_id, y}) QPS by attributes before y (1 client)".into(),
            x_label: "N (x attributes)".into(),
            y_label: "queries/s".into(),
            plot: Plot::Lines(series),
        }]
    }
}

/// A document with `_id`, then x1..xN and y (or y first).
fn document(keys: &[String], y_first: bool, i: u64) -> RawDocumentBuf {
    let mut d = RawDocumentBuf::new();
    d.append("_id", i as i64);
    if y_first {
        d.append("y", i as i64);
    }
    for (k, key) in keys.iter().enumerate() {
        d.append(key, (k + 1) as i32);
    }
    if !y_first {
        d.append("y", i as i64);
    }
    d
}

async fn point(p: &Params, t: &Target, variant: &'static str, n: usize) -> Result<Row> {
    let name = format!("nth_{variant}_{n}");
    let coll = t.db().collection::<RawDocumentBuf>(&name);
    coll.drop().await?;
    let keys: Vec<String> = (1..=n).map(|k| format!("x{k}")).collect();
    let y_first = variant == "y_first";
    let doc_bytes = document(&keys, y_first, 0).as_bytes().len();
    let spec = LoadSpec {
        docs: p.docs,
        batch: (4_000_000 / doc_bytes).clamp(1, 1000),
        clients: 2,
        interval: Duration::from_secs(1),
    };
    drive::load(&coll, &spec, &format!("{variant} N={n}"), move |i| {
        document(&keys, y_first, i)
    })
    .await?;

    let docs = p.docs;
    let q = t.db().collection::<mongodb::bson::Document>(&name);
    let before = t.sample().await?;
    let run = drive::timed(
        p.clients,
        Duration::from_secs_f64(p.seconds_per_point),
        u64::MAX,
        move |c, seq| {
            let q = q.clone();
            async move {
                let v = (drive::pick(SEED, c, seq) % docs) as i64;
                let found = q
                    .find_one(doc! {"_id": v, "y": v})
                    .projection(doc! {"_id": 1, "y": 1})
                    .await?
                    .context("no document matched")?;
                ensure!(
                    found.get_i64("y").ok() == Some(v),
                    "wrong document: {found}"
                );
                Ok(1)
            }
        },
    )
    .await?;
    let delta = t.sample().await?.since(&before);
    coll.drop().await?;
    eprintln!(
        "{variant} N={n}: {} queries/s",
        crate::report::num(run.ops_per_sec())
    );
    let row = Row::new("query")
        .label("variant", variant)
        .label("n", n)
        .fig("doc_bytes", doc_bytes as f64)
        .fig("queries", run.ops as f64)
        .fig("seconds", run.seconds)
        .fig("qps", run.ops_per_sec())
        .fig("p50_us", run.latency.p50_us)
        .fig("p99_us", run.latency.p99_us);
    Ok(delta.add_to(row))
}

/// The summary: QPS(1000)/QPS(1) per variant, and the same ratio from median latencies.
/// With one client, QPS is the inverse of the mean latency, which a tail of millisecond
/// stalls (1-10% of queries, moving between points from run to run) can halve; the median
/// is what the field-skipping cost moves. Two full runs of one build measured x-first QPS
/// ratios of 3.64 and 0.51, and p50 ratios of 0.84 and 0.63.
fn summarize(rows: &[Row]) -> Figures {
    let figure = |variant: &str, n: usize, name: &str| {
        rows.iter()
            .find(|r| {
                r.label_value("variant").and_then(|v| v.as_str()) == Some(variant)
                    && r.label_value("n").and_then(|v| v.as_u64()) == Some(n as u64)
            })
            .and_then(|r| r.get(name))
            .unwrap_or(f64::NAN)
    };
    let qps = |variant: &str, n: usize| figure(variant, n, "qps");
    let p50 = |variant: &str, n: usize| figure(variant, n, "p50_us");
    let mut f = Figures::default();
    for (variant, suffix) in [("x_first", ""), ("y_first", "_y_first")] {
        let qps_ratio = ratio(qps(variant, 1000), qps(variant, 1));
        f.set(&format!("qps_ratio_1000_to_1{suffix}"), qps_ratio);
        // Latency falls as QPS rises: the median's ratio is inverted to compare with QPS's.
        let p50_ratio = ratio(p50(variant, 1), p50(variant, 1000));
        f.set(&format!("p50_ratio_1000_to_1{suffix}"), p50_ratio);
    }
    f.set("qps_n1", qps("x_first", 1));
    f.set("qps_n1000", qps("x_first", 1000));
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_put_y_where_asked() {
        let keys: Vec<String> = (1..=3).map(|k| format!("x{k}")).collect();
        let last: Vec<String> = document(&keys, false, 7)
            .iter()
            .map(|e| e.expect("elem").0.to_owned())
            .collect();
        assert_eq!(last, ["_id", "x1", "x2", "x3", "y"]);
        let first = document(&keys, true, 7);
        assert_eq!(first.iter().nth(1).expect("2nd").expect("elem").0, "y");
        assert_eq!(first.get_i64("y").expect("y"), 7);
    }
}
