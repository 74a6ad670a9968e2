//! `pk-lookup` (seed: "TokuMX, MongoDB and InnoDB: IO-bound point queries, readPageSize and
//! read_ahead_kb"): sysbench-shaped documents (`_id` int, `k` int with an index, `c` 119
//! characters, `pad` 59 characters), at least ten times the server's cache, in one
//! collection per read page size (4, 8, 16, 64 KiB, set at `create` through
//! `storageEngine.shale.readPageSizeBytes`); read-only point lookups by `_id` from 8, 16, 32
//! and 40 clients. Reports QPS, device reads per query and bytes per read (from
//! `/proc/diskstats`), the server's own reads, and QPS as a fraction of the device's
//! random-read IOPS at that block size and queue depth (measured first, in-process).

use super::charts::{Chart, Plot};
use super::drive::{self, LoadSpec};
use super::layout::LayoutArgs;
use super::rows::{ratio, Figures, Row};
use super::{line_series, Ctx, Outcome, Target, WireArgs, Workload};
use anyhow::{Context, Result};
use clap::Args;
use mongodb::bson::{doc, Document, RawDocumentBuf};
use serde::Serialize;
use std::fmt::Write as _;
use std::time::Duration;

pub struct PkLookup;

/// `shale-bench pk-lookup`'s flags: the common ones, the layout and the read page sizes.
#[derive(Debug, Clone, Args)]
pub struct PkLookupArgs {
    #[command(flatten)]
    pub wire: WireArgs,
    #[command(flatten)]
    pub layout: LayoutArgs,
    /// Read page sizes (basements) to measure, one collection each [default: 4096,8192,16384,65536]
    #[arg(long, value_name = "BYTES,...", value_delimiter = ',')]
    pub read_page_sizes: Option<Vec<usize>>,
}

impl PkLookup {
    /// The parameters from the workload's own flags.
    pub fn params_for(args: &PkLookupArgs) -> Result<Params> {
        let mut p = Self::params(&args.wire)?;
        if let Some(sizes) = &args.read_page_sizes {
            anyhow::ensure!(
                !sizes.is_empty(),
                "--read-page-sizes needs at least one size"
            );
            p.read_page_sizes = sizes.clone();
        }
        p.layout = args.layout.options(None);
        p.layout_label = args.layout.label(None);
        Ok(p)
    }
}

const PAGE_SIZES: [usize; 4] = [4096, 8192, 16384, 65536];
const CLIENTS: [usize; 4] = [8, 16, 32, 40];
const SEED: u64 = 0x7379_7362_656e_6368;
/// BSON bytes of one document (`_id` int64, `k` int32, `c`, `pad`).
const DOC_BYTES: u64 = 221;

#[derive(Debug, Serialize)]
pub struct Params {
    quick: bool,
    cache_bytes: u64,
    data_bytes_per_collection: u64,
    data_to_cache_ratio: f64,
    docs_per_collection: u64,
    read_page_sizes: Vec<usize>,
    clients: Vec<usize>,
    seconds_per_point: f64,
    warmup_seconds: f64,
    load_clients: usize,
    load_batch: usize,
    /// Layout options of every collection and index on ShaleDB besides the read page size
    /// (`layout.rs`).
    layout: Document,
    layout_label: String,
}

impl Workload for PkLookup {
    const NAME: &'static str = "pk-lookup";
    const NEEDS_DEVICE: bool = true;
    type Params = Params;

    fn params(args: &WireArgs) -> Result<Params> {
        // Full size: 10x a 64 MiB cache per collection (4 collections of 640 MiB, 3M
        // documents each; 12 minutes at d5a05a9 on two cores). What is measured — reads
        // per query and bytes per read with the data 10x the cache — depends on the ratio,
        // not on the absolute size; 10x 256 MiB is 4x the documents to load.
        let cache_bytes = args.cache_bytes_or(8, 64)?;
        let data = args.data_bytes_or(cache_bytes * 10)?;
        let seconds = args.seconds_or(2.0, 30.0)?;
        Ok(Params {
            quick: args.quick,
            cache_bytes,
            data_bytes_per_collection: data,
            data_to_cache_ratio: data as f64 / cache_bytes as f64,
            docs_per_collection: (data / DOC_BYTES).max(100),
            read_page_sizes: PAGE_SIZES.to_vec(),
            clients: CLIENTS.to_vec(),
            seconds_per_point: seconds,
            warmup_seconds: seconds / 2.0,
            load_clients: 4,
            load_batch: 1000,
            layout: Document::new(),
            layout_label: "defaults".into(),
        })
    }

    fn cache_bytes(p: &Params) -> u64 {
        p.cache_bytes
    }

    fn key_figures() -> &'static [&'static str] {
        &[
            "qps",
            "p99_us",
            "reads_per_query",
            "bytes_per_read",
            "server_reads_per_query",
            "server_bytes_per_read",
            "device_iops",
            "fraction_of_device_iops",
        ]
    }

    async fn run(p: &Params, t: &mut Target, ctx: &Ctx) -> Result<Outcome> {
        let mut rows = Vec::new();
        for &page in &p.read_page_sizes {
            let name = format!("sbtest_{}k", page / 1024);
            let mut options = doc! {};
            let mut index = doc! {"key": {"k": 1}, "name": "k_1"};
            if t.is_shale {
                options.insert(
                    "storageEngine",
                    doc! {"shale": {"readPageSizeBytes": page as i64}},
                );
                options.extend(p.layout.clone());
                index.extend(p.layout.clone());
            }
            let coll = t
                .create_indexed(&name, options, vec![index])
                .await
                .with_context(|| format!("with a {page}-byte read page"))?;
            let docs = p.docs_per_collection;
            let spec = LoadSpec {
                docs,
                batch: p.load_batch,
                clients: p.load_clients,
                interval: Duration::from_secs(5),
            };
            let loaded = drive::load(&coll, &spec, &name, move |i| document(i, docs)).await?;
            eprintln!(
                "{name}: loaded {} docs, {} MiB raw, {} inserts/s",
                loaded.docs,
                loaded.raw_bytes >> 20,
                crate::report::num(loaded.per_sec())
            );
            let q = t.db().collection::<Document>(&name);
            warm(p, &q, docs).await?;
            let docs_tree_ratio = docs_tree_ratio(t, &name).await;
            for &clients in &CLIENTS {
                let row = lookups(p, t, &q, page, clients, docs).await?;
                let row =
                    with_device(row, ctx, page, clients).fig("docs_tree_ratio", docs_tree_ratio);
                eprintln!(
                    "{name} {clients} clients: {} q/s, {} reads/q",
                    crate::report::num(row.get("qps").unwrap_or(0.0)),
                    crate::report::num(row.get("reads_per_query").unwrap_or(f64::NAN))
                );
                rows.push(row);
            }
            coll.drop().await?;
        }
        Ok(Outcome {
            summary: summarize(&rows),
            rows,
        })
    }

    fn charts(rows: &[Row]) -> Vec<Chart> {
        let series = line_series(rows, "lookup", "clients", "qps", |r| {
            let page = r
                .label_value("page_size")
                .and_then(|v| v.as_u64())
                .unwrap_or(0);
            format!("{} {} KiB", r.target, page / 1024)
        });
        vec![Chart {
            file: "qps_by_clients_and_page_size.png".into(),
            title: "point lookups by _id: QPS by clients and read page size".into(),
            x_label: "clients".into(),
            y_label: "queries/s".into(),
            plot: Plot::Lines(series),
        }]
    }
}

/// Digits groups as sysbench writes `c` (10 groups) and `pad` (5 groups): 11 digits each,
/// joined by '-'.
fn digit_groups(r: u64, groups: u64) -> String {
    let mut s = String::with_capacity((groups * 12) as usize);
    for g in 0..groups {
        if g > 0 {
            s.push('-');
        }
        let v = drive::mix(r ^ (g << 56)) % 100_000_000_000;
        let _ = write!(s, "{v:011}");
    }
    s
}

/// sysbench row `i` of a table of `rows`: `{_id: i, k: random in [1, rows], c, pad}`.
fn document(i: u64, rows: u64) -> RawDocumentBuf {
    let r = drive::mix(SEED ^ i);
    let mut d = RawDocumentBuf::new();
    d.append("_id", i as i64);
    d.append("k", (1 + r % rows) as i32);
    d.append("c", digit_groups(r ^ 1, 10));
    d.append("pad", digit_groups(r ^ 2, 5));
    d
}

async fn warm(p: &Params, q: &mongodb::Collection<Document>, docs: u64) -> Result<()> {
    let q = q.clone();
    drive::timed(
        CLIENTS[CLIENTS.len() - 1],
        Duration::from_secs_f64(p.warmup_seconds),
        u64::MAX,
        move |c, seq| lookup(q.clone(), drive::pick(SEED ^ 3, c, seq) % docs),
    )
    .await?;
    Ok(())
}

async fn lookup(q: mongodb::Collection<Document>, id: u64) -> Result<u64> {
    q.find_one(doc! {"_id": id as i64})
        .await?
        .with_context(|| format!("no document with _id {id}"))?;
    Ok(1)
}

async fn lookups(
    p: &Params,
    t: &Target,
    q: &mongodb::Collection<Document>,
    page: usize,
    clients: usize,
    docs: u64,
) -> Result<Row> {
    let before = t.sample().await?;
    let q = q.clone();
    let run = drive::timed(
        clients,
        Duration::from_secs_f64(p.seconds_per_point),
        u64::MAX,
        move |c, seq| lookup(q.clone(), drive::pick(SEED ^ clients as u64, c, seq) % docs),
    )
    .await?;
    let delta = t.sample().await?.since(&before);
    let row = delta.add_to(
        Row::new("lookup")
            .label("page_size", page)
            .label("clients", clients)
            .fig("queries", run.ops as f64)
            .fig("seconds", run.seconds)
            .fig("qps", run.ops_per_sec())
            .fig("p50_us", run.latency.p50_us)
            .fig("p99_us", run.latency.p99_us),
    );
    let queries = run.ops as f64;
    let get = |k: &str| row.get(k).unwrap_or(f64::NAN);
    let (dev_reads, dev_bytes) = (get("dev_reads"), get("dev_read_bytes"));
    let (srv_reads, srv_bytes) = (get("server_read_calls"), get("server_read_bytes"));
    Ok(row
        .fig("reads_per_query", ratio(dev_reads, queries))
        .fig("bytes_per_read", ratio(dev_bytes, dev_reads))
        .fig("server_reads_per_query", ratio(srv_reads, queries))
        .fig("server_bytes_per_read", ratio(srv_bytes, srv_reads)))
}

/// Adds the device's random-read IOPS at this block size and queue depth and the fractions
/// of it the queries and the device reads used.
fn with_device(row: Row, ctx: &Ctx, page: usize, depth: usize) -> Row {
    let iops = device_iops(&ctx.device_iops, page, depth);
    let qps = row.get("qps").unwrap_or(f64::NAN);
    let reads_per_sec = ratio(
        row.get("dev_reads").unwrap_or(f64::NAN),
        row.get("seconds").unwrap_or(f64::NAN),
    );
    row.fig("device_iops", iops)
        .fig("fraction_of_device_iops", ratio(qps, iops))
        .fig("device_reads_fraction_of_iops", ratio(reads_per_sec, iops))
}

/// IOPS at `depth` for block size `bs`, interpolated linearly between the measured depths
/// (and the deepest one beyond them). NaN when the size was not measured.
fn device_iops(points: &[(usize, usize, f64)], bs: usize, depth: usize) -> f64 {
    let mut at: Vec<(usize, f64)> = points
        .iter()
        .filter(|p| p.0 == bs)
        .map(|p| (p.1, p.2))
        .collect();
    at.sort_by_key(|p| p.0);
    let Some(&(max_d, max_iops)) = at.last() else {
        return f64::NAN;
    };
    if depth >= max_d {
        return max_iops;
    }
    for w in at.windows(2) {
        let ((d0, i0), (d1, i1)) = (w[0], w[1]);
        if (d0..=d1).contains(&depth) {
            return i0 + (i1 - i0) * (depth - d0) as f64 / (d1 - d0) as f64;
        }
    }
    at[0].1
}

/// At the page size with the highest QPS at 40 clients.
/// `collStats.shale.trees._id_.compressionRatio` of collection `name` on ShaleDB: raw over
/// stored bytes of the document tree's nodes as last written (at 10x the cache, nearly all of
/// them); NaN elsewhere.
async fn docs_tree_ratio(t: &Target, name: &str) -> f64 {
    let Ok(stats) = t.db().run_command(doc! {"collStats": name}).await else {
        return f64::NAN;
    };
    stats
        .get_document("shale")
        .and_then(|s| s.get_document("trees"))
        .and_then(|t| t.get_document("_id_"))
        .and_then(|t| t.get_f64("compressionRatio"))
        .unwrap_or(f64::NAN)
}

fn summarize(rows: &[Row]) -> Figures {
    let best = rows
        .iter()
        .filter(|r| r.label_value("clients").and_then(|v| v.as_u64()) == Some(40))
        .max_by(|a, b| {
            let q = |r: &Row| r.get("qps").unwrap_or(0.0);
            q(a).total_cmp(&q(b))
        });
    let mut f = Figures::default();
    let get = |k: &str| best.and_then(|r| r.get(k)).unwrap_or(f64::NAN);
    for k in [
        "reads_per_query",
        "bytes_per_read",
        "fraction_of_device_iops",
        "server_reads_per_query",
        "server_bytes_per_read",
        "docs_tree_ratio",
    ] {
        f.set(k, get(k));
    }
    f.set("qps_at_40", get("qps"));
    f.set(
        "best_page_size",
        best.and_then(|r| r.label_value("page_size").and_then(|v| v.as_f64()))
            .unwrap_or(f64::NAN),
    );
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sysbench_documents_have_their_sizes() {
        let d = document(123_456, 1_000_000);
        assert_eq!(d.get_str("c").expect("c").len(), 119);
        assert_eq!(d.get_str("pad").expect("pad").len(), 59);
        assert_eq!(d.as_bytes().len() as u64, DOC_BYTES);
    }

    #[test]
    fn device_iops_interpolates_by_depth() {
        let pts = [
            (4096, 1, 100.0),
            (4096, 8, 800.0),
            (4096, 32, 1600.0),
            (8192, 1, 50.0),
        ];
        assert_eq!(device_iops(&pts, 4096, 8), 800.0);
        assert_eq!(device_iops(&pts, 4096, 20), 1200.0);
        assert_eq!(device_iops(&pts, 4096, 40), 1600.0);
        assert_eq!(device_iops(&pts, 8192, 16), 50.0);
        assert!(device_iops(&pts, 65536, 8).is_nan());
    }
}
