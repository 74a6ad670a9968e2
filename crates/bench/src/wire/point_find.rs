//! `point-find`: the CPU a server spends on one cached point query, the figure TokuMX was
//! judged by. One collection of small documents (`{_id: i, k: i, s: 100 characters}`),
//! all cached; `find_one({_id: v})` on random v from 1 and from 40 clients. Besides QPS and
//! latency each point reports `server_cpu_us_per_op`: the server process's user + system
//! CPU from `/proc/<pid>/stat` over the phase divided by the queries (loopback TCP included:
//! on one machine the kernel's work for both ends of a send lands partly on the sender), and
//! `server_user_cpu_us_per_op`, the user-mode part alone: the server's own code, which the
//! document path changes, without the kernel's socket work, which it does not.

use super::charts::{Chart, Plot};
use super::drive::{self, LoadSpec};
use super::rows::{Figures, Row};
use super::{line_series, Ctx, Outcome, Target, WireArgs, Workload};
use anyhow::{ensure, Context, Result};
use mongodb::bson::{doc, RawDocumentBuf};
use serde::Serialize;
use std::time::Duration;

pub struct PointFind;

const CLIENTS: [usize; 2] = [1, 40];
const SEED: u64 = 0x7074_6669_6e64;

#[derive(Debug, Serialize)]
pub struct Params {
    quick: bool,
    cache_bytes: u64,
    docs: u64,
    clients: Vec<usize>,
    seconds_per_point: f64,
}

impl Workload for PointFind {
    const NAME: &'static str = "point-find";
    type Params = Params;

    fn params(args: &WireArgs) -> Result<Params> {
        // 100,000 documents of ~140 bytes: 14 MB, cached in any cache size.
        let cache_bytes = args.cache_bytes_or(64, 256)?;
        let docs = args.data_bytes_or(if args.quick { 2 << 20 } else { 14 << 20 })? / 140;
        Ok(Params {
            quick: args.quick,
            cache_bytes,
            docs: docs.max(10),
            clients: CLIENTS.to_vec(),
            seconds_per_point: args.seconds_or(2.0, 20.0)?,
        })
    }

    fn cache_bytes(p: &Params) -> u64 {
        p.cache_bytes
    }

    fn key_figures() -> &'static [&'static str] {
        &[
            "qps",
            "p50_us",
            "p99_us",
            "server_cpu_us_per_op",
            "server_user_cpu_us_per_op",
            "dev_reads",
        ]
    }

    async fn run(p: &Params, t: &mut Target, _ctx: &Ctx) -> Result<Outcome> {
        let coll = t.db().collection::<RawDocumentBuf>("point_find");
        coll.drop().await?;
        let spec = LoadSpec {
            docs: p.docs,
            batch: 1000,
            clients: 2,
            interval: Duration::from_secs(1),
        };
        drive::load(&coll, &spec, "point-find", document).await?;
        // One pass warms the cache and the connection pool before anything is timed.
        point(p, t, 1, p.seconds_per_point / 4.0).await?;
        let mut rows = Vec::new();
        for &clients in &CLIENTS {
            rows.push(point(p, t, clients, p.seconds_per_point).await?);
        }
        coll.drop().await?;
        let mut summary = Figures::default();
        for r in &rows {
            let c = r
                .label_value("clients")
                .and_then(|v| v.as_u64())
                .unwrap_or(0);
            for name in [
                "qps",
                "p50_us",
                "server_cpu_us_per_op",
                "server_user_cpu_us_per_op",
            ] {
                summary.set(&format!("{name}_c{c}"), r.get(name).unwrap_or(f64::NAN));
            }
        }
        Ok(Outcome { summary, rows })
    }

    fn charts(rows: &[Row]) -> Vec<Chart> {
        let series = line_series(rows, "query", "clients", "server_cpu_us_per_op", |r| {
            r.target.clone()
        });
        vec![Chart {
            file: "cpu_per_query.png".into(),
            title: "server CPU per cached find_one({_id})".into(),
            x_label: "clients".into(),
            y_label: "µs of server CPU per query".into(),
            plot: Plot::Lines(series),
        }]
    }
}

fn document(i: u64) -> RawDocumentBuf {
    let mut d = RawDocumentBuf::new();
    d.append("_id", i as i64);
    d.append("k", i as i64);
    d.append("s", "s".repeat(100));
    d
}

async fn point(p: &Params, t: &Target, clients: usize, seconds: f64) -> Result<Row> {
    let q = t.db().collection::<mongodb::bson::Document>("point_find");
    let docs = p.docs;
    let before = t.sample().await?;
    let run = drive::timed(
        clients,
        Duration::from_secs_f64(seconds),
        u64::MAX,
        move |c, seq| {
            let q = q.clone();
            async move {
                let v = (drive::pick(SEED, c, seq) % docs) as i64;
                let found = q
                    .find_one(doc! {"_id": v})
                    .await?
                    .context("no document matched")?;
                ensure!(
                    found.get_i64("k").ok() == Some(v),
                    "wrong document: {found}"
                );
                Ok(1)
            }
        },
    )
    .await?;
    let delta = t.sample().await?.since(&before);
    let row = Row::new("query")
        .label("clients", clients)
        .fig("queries", run.ops as f64)
        .fig("seconds", run.seconds)
        .fig("qps", run.ops_per_sec())
        .fig("p50_us", run.latency.p50_us)
        .fig("p99_us", run.latency.p99_us);
    let row = delta.add_to(row);
    eprintln!(
        "{clients} clients: {} queries/s, {} us of server CPU per query ({} in user mode)",
        crate::report::num(run.ops_per_sec()),
        crate::report::num(row.get("server_cpu_us_per_op").unwrap_or(f64::NAN)),
        crate::report::num(row.get("server_user_cpu_us_per_op").unwrap_or(f64::NAN))
    );
    Ok(row)
}
