//! `fast-update`: TokuMX 2.0's read-free updates. One collection of small documents
//! (`{_id: i, n: 0, s: 200 characters}`) loaded to about ten times the server's cache, then
//! `update_one({_id: v}, {$inc: {n: 1}})` on random v from several clients, first with
//! `fastUpdates` off (each update reads its document: about one device read once the data
//! is past the cache) and then on (each update is a message: no read). Each phase reports
//! updates/s, device and engine reads per update, and the server's CPU per update; at the
//! end an aggregation sums `n` over every document and must equal the updates acknowledged,
//! so a message lost or applied twice fails the run. A peer (not ShaleDB) runs the first
//! phase only.

use super::charts::{Chart, Plot};
use super::drive::{self, LoadSpec};
use super::rows::{ratio, Figures, Row};
use super::{Ctx, Outcome, Target, WireArgs, Workload};
use anyhow::{ensure, Context, Result};
use mongodb::bson::{doc, Document, RawDocumentBuf};
use serde::Serialize;
use std::time::Duration;

pub struct FastUpdate;

const SEED: u64 = 0x6661_7374_7570;
const DOC_BYTES: u64 = 240;

#[derive(Debug, Serialize)]
pub struct Params {
    quick: bool,
    cache_bytes: u64,
    docs: u64,
    clients: usize,
    seconds_per_phase: f64,
}

impl Workload for FastUpdate {
    const NAME: &'static str = "fast-update";
    type Params = Params;

    fn params(args: &WireArgs) -> Result<Params> {
        let cache_bytes = args.cache_bytes_or(8, 128)?;
        let docs = args.data_bytes_or(cache_bytes * 10)? / DOC_BYTES;
        Ok(Params {
            quick: args.quick,
            cache_bytes,
            docs: docs.max(100),
            clients: 8,
            seconds_per_phase: args.seconds_or(5.0, 60.0)?,
        })
    }

    fn cache_bytes(p: &Params) -> u64 {
        p.cache_bytes
    }

    fn key_figures() -> &'static [&'static str] {
        &[
            "updates_per_s",
            "p50_us",
            "dev_reads_per_update",
            "server_reads_per_update",
            "server_cpu_us_per_op",
        ]
    }

    async fn run(p: &Params, t: &mut Target, _ctx: &Ctx) -> Result<Outcome> {
        let coll = t.db().collection::<RawDocumentBuf>("fast_update");
        coll.drop().await?;
        let spec = LoadSpec {
            docs: p.docs,
            batch: 1000,
            clients: 2,
            interval: Duration::from_secs(1),
        };
        drive::load(&coll, &spec, "fast-update", document).await?;
        let phases: &[bool] = if t.is_shale { &[false, true] } else { &[false] };
        let mut rows = Vec::new();
        let mut acknowledged = 0u64;
        for &fast in phases {
            if t.is_shale {
                set_fast_updates(t, fast).await?;
            }
            let row = phase(p, t, fast).await?;
            acknowledged += row.get("updates").unwrap_or(0.0) as u64;
            rows.push(row);
        }
        if t.is_shale {
            set_fast_updates(t, false).await?;
        }
        let total = sum_of_n(t).await?;
        ensure!(
            total == acknowledged,
            "the documents hold {total} increments but {acknowledged} updates were acknowledged"
        );
        coll.drop().await?;
        let mut summary = Figures::default();
        for r in &rows {
            let suffix = if r.label_value("fast_updates").and_then(|v| v.as_str()) == Some("on") {
                "on"
            } else {
                "off"
            };
            for name in [
                "updates_per_s",
                "dev_reads_per_update",
                "server_reads_per_update",
                "server_cpu_us_per_op",
            ] {
                summary.set(&format!("{name}_{suffix}"), r.get(name).unwrap_or(f64::NAN));
            }
        }
        if let (Some(on), Some(off)) = (
            summary.get("updates_per_s_on"),
            summary.get("updates_per_s_off"),
        ) {
            summary.set("speedup_on_to_off", ratio(on, off));
        }
        Ok(Outcome { summary, rows })
    }

    fn charts(rows: &[Row]) -> Vec<Chart> {
        let bars = rows
            .iter()
            .filter(|r| r.phase == "update" && r.target != "shale/peer")
            .map(|r| {
                let label = r
                    .label_value("fast_updates")
                    .map_or(String::new(), super::label_text);
                (
                    format!("{} fastUpdates {label}", r.target),
                    r.get("updates_per_s").unwrap_or(f64::NAN),
                )
            })
            .collect();
        vec![Chart {
            file: "updates_per_s.png".into(),
            title: "random $inc by _id, data 10x the cache".into(),
            x_label: "".into(),
            y_label: "updates/s".into(),
            plot: Plot::Bars(bars),
        }]
    }
}

fn document(i: u64) -> RawDocumentBuf {
    let mut d = RawDocumentBuf::new();
    d.append("_id", i as i64);
    d.append("n", 0i64);
    d.append("s", "s".repeat(200));
    d
}

async fn set_fast_updates(t: &Target, on: bool) -> Result<()> {
    t.client
        .database("admin")
        .run_command(doc! {"setParameter": 1, "fastUpdates": on})
        .await
        .context("setParameter fastUpdates")?;
    Ok(())
}

async fn phase(p: &Params, t: &Target, fast: bool) -> Result<Row> {
    let coll = t.db().collection::<Document>("fast_update");
    let docs = p.docs;
    let seed = SEED ^ u64::from(fast);
    let before = t.sample().await?;
    let run = drive::timed(
        p.clients,
        Duration::from_secs_f64(p.seconds_per_phase),
        u64::MAX,
        move |c, seq| {
            let coll = coll.clone();
            async move {
                let v = (drive::pick(seed, c, seq) % docs) as i64;
                let r = coll
                    .update_one(doc! {"_id": v}, doc! {"$inc": {"n": 1i64}})
                    .await?;
                ensure!(
                    r.matched_count == 1,
                    "update of {v} matched {}",
                    r.matched_count
                );
                Ok(1)
            }
        },
    )
    .await?;
    let delta = t.sample().await?.since(&before);
    let updates = run.ops as f64;
    let row = delta.add_to(
        Row::new("update")
            .label("fast_updates", if fast { "on" } else { "off" })
            .label("clients", p.clients)
            .fig("updates", updates)
            .fig("seconds", run.seconds)
            .fig("updates_per_s", run.ops_per_sec())
            .fig("p50_us", run.latency.p50_us)
            .fig("p99_us", run.latency.p99_us),
    );
    let get = |k: &str| row.get(k).unwrap_or(f64::NAN);
    let (dev_reads, srv_reads) = (get("dev_reads"), get("server_read_calls"));
    let row = row
        .fig("dev_reads_per_update", ratio(dev_reads, updates))
        .fig("server_reads_per_update", ratio(srv_reads, updates));
    eprintln!(
        "fastUpdates {}: {} updates/s, {} device reads and {} us of server CPU per update",
        if fast { "on" } else { "off" },
        crate::report::num(run.ops_per_sec()),
        crate::report::num(row.get("dev_reads_per_update").unwrap_or(f64::NAN)),
        crate::report::num(row.get("server_cpu_us_per_op").unwrap_or(f64::NAN)),
    );
    Ok(row)
}

/// The sum of `n` over every document (each acknowledged update added one).
async fn sum_of_n(t: &Target) -> Result<u64> {
    let coll = t.db().collection::<Document>("fast_update");
    let mut cursor = coll
        .aggregate(vec![doc! {"$group": {"_id": null, "s": {"$sum": "$n"}}}])
        .await?;
    let mut total = 0i64;
    while cursor.advance().await? {
        let d: Document = cursor.deserialize_current()?;
        total += match d.get("s") {
            Some(mongodb::bson::Bson::Int64(n)) => *n,
            Some(mongodb::bson::Bson::Int32(n)) => i64::from(*n),
            other => anyhow::bail!("$sum gave {other:?}"),
        };
    }
    u64::try_from(total).context("a negative sum")
}
