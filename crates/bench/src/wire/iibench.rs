//! `iibench` (the insert benchmark, iibench-mongodb's shape): documents with `dateandtime,
//! cashregisterid, customerid, productid, price` and char fields, three secondary indexes,
//! inserted in batches of 1,000 while query clients run range queries on the indexes. It
//! reports the insert rate as the collection grows (past ten times the cache at full size)
//! and the rate at the end.

use super::charts::{Chart, Plot};
use super::drive::{self, Interval, LoadSpec};
use super::rows::{ratio, Figures, Row};
use super::{line_series, Ctx, Outcome, Target, WireArgs, Workload};
use anyhow::{anyhow, Result};
use mongodb::bson::{doc, DateTime, Document, RawDocumentBuf};
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub struct Iibench;

const SEED: u64 = 0x0069_6962_656e_6368;
const COLL: &str = "purchases_index";
const DOC_BYTES: u64 = 253;
const CHAR_FIELD_BYTES: usize = 64;

#[derive(Debug, Serialize)]
pub struct Params {
    quick: bool,
    cache_bytes: u64,
    data_bytes: u64,
    data_to_cache_ratio: f64,
    docs: u64,
    batch: usize,
    insert_clients: usize,
    query_clients: usize,
    query_limit: i64,
    indexes: Vec<&'static str>,
}

impl Workload for Iibench {
    const NAME: &'static str = "iibench";
    type Params = Params;

    fn params(args: &WireArgs) -> Result<Params> {
        // Full size: 12x a 32 MiB cache (384 MiB, 1.6M documents; 134 s at d5a05a9 on two
        // cores). The experiment is the insert rate as the data passes 10x the cache; a
        // larger cache only lengthens it (12x 256 MiB is 8x the documents).
        let cache_bytes = args.cache_bytes_or(16, 32)?;
        let data = args.data_bytes_or(if args.quick {
            cache_bytes * 3
        } else {
            cache_bytes * 12
        })?;
        Ok(Params {
            quick: args.quick,
            cache_bytes,
            data_bytes: data,
            data_to_cache_ratio: data as f64 / cache_bytes as f64,
            docs: (data / DOC_BYTES).max(1000),
            batch: 1000,
            insert_clients: 2,
            query_clients: if args.quick { 1 } else { 2 },
            query_limit: if args.quick { 100 } else { 1000 },
            indexes: vec![
                "{price: 1, customerid: 1}",
                "{cashregisterid: 1, price: 1, customerid: 1}",
                "{price: 1, dateandtime: 1, customerid: 1}",
            ],
        })
    }

    fn cache_bytes(p: &Params) -> u64 {
        p.cache_bytes
    }

    fn key_figures() -> &'static [&'static str] {
        &[
            "docs",
            "inserts_per_sec",
            "inserts_per_sec_at_end",
            "queries_per_sec",
            "data_to_cache",
            "os_write_bytes",
            "server_write_bytes",
            "dev_reads",
        ]
    }

    async fn run(p: &Params, t: &mut Target, _ctx: &Ctx) -> Result<Outcome> {
        let indexes = vec![
            doc! {"key": {"price": 1, "customerid": 1}, "name": "pc"},
            doc! {"key": {"cashregisterid": 1, "price": 1, "customerid": 1}, "name": "crpc"},
            doc! {"key": {"price": 1, "dateandtime": 1, "customerid": 1}, "name": "pdc"},
        ];
        let coll = t.create_indexed(COLL, doc! {}, indexes).await?;
        let spec = LoadSpec {
            docs: p.docs,
            batch: p.batch,
            clients: p.insert_clients,
            interval: Duration::from_secs(if p.quick { 1 } else { 10 }),
        };
        let stop = Arc::new(AtomicBool::new(false));
        let queries = spawn_queries(p, t.db().collection::<Document>(COLL), stop.clone());
        let before = t.sample().await?;
        let loaded = drive::load(&coll, &spec, "iibench", document).await;
        stop.store(true, Ordering::Relaxed);
        let (nq, q_secs) = join_queries(queries).await?;
        let loaded = loaded?;
        let delta = t.sample().await?.since(&before);
        let at_end = rate_at_end(&loaded.intervals, 0.9);
        let qps = ratio(nq as f64, q_secs);
        let data_to_cache = loaded.raw_bytes as f64 / p.cache_bytes as f64;
        eprintln!(
            "iibench: {} docs, {} inserts/s, {} at the end, {} queries/s",
            loaded.docs,
            crate::report::num(loaded.per_sec()),
            crate::report::num(at_end),
            crate::report::num(qps)
        );
        let mut rows = loaded.interval_rows(|r, iv| {
            let data = (iv.docs * DOC_BYTES) as f64;
            r.fig("data_to_cache", data / p.cache_bytes as f64)
        });
        let total = loaded
            .row(t.db_dir_bytes())
            .fig("data_to_cache", data_to_cache)
            .fig("inserts_per_sec_at_end", at_end)
            .fig("queries", nq as f64)
            .fig("queries_per_sec", qps);
        rows.push(delta.add_to(total));
        let mut summary = Figures::default();
        summary.set("inserts_per_sec_at_end", at_end);
        summary.set("inserts_per_sec", loaded.per_sec());
        summary.set("queries_per_sec", qps);
        summary.set("data_to_cache", data_to_cache);
        Ok(Outcome { rows, summary })
    }

    fn charts(rows: &[Row]) -> Vec<Chart> {
        vec![Chart {
            file: "iibench_inserts_over_time.png".into(),
            title: "iibench: inserts/s as the collection grows".into(),
            x_label: "data / cache".into(),
            y_label: "inserts/s".into(),
            plot: Plot::Lines(line_series(
                rows,
                "load-interval",
                "data_to_cache",
                "inserts_per_sec",
                |r| r.target.clone(),
            )),
        }]
    }
}

/// Insert rate over the documents after `fraction` of the load (the end of the curve).
fn rate_at_end(iv: &[Interval], fraction: f64) -> f64 {
    let Some(last) = iv.last() else {
        return f64::NAN;
    };
    let from = iv
        .iter()
        .rev()
        .find(|i| (i.docs as f64) <= last.docs as f64 * fraction)
        .map_or((0.0, 0), |i| (i.t_secs, i.docs));
    ratio((last.docs - from.1) as f64, last.t_secs - from.0)
}

fn char_field(r: u64) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    (0..CHAR_FIELD_BYTES)
        .map(|i| ALPHABET[(drive::mix(r ^ ((i as u64) << 50)) % 52) as usize] as char)
        .collect()
}

/// Purchase `i`: iibench's fields with uniformly random values.
fn document(i: u64) -> RawDocumentBuf {
    let r = |k: u64| drive::mix(SEED ^ (i << 8) ^ k);
    let mut d = RawDocumentBuf::new();
    d.append("_id", i as i64);
    d.append(
        "dateandtime",
        DateTime::from_millis(1_400_000_000_000 + i as i64),
    );
    d.append("cashregisterid", (r(1) % 1000) as i32);
    d.append("customerid", (r(2) % 100_000) as i32);
    d.append("productid", (r(3) % 10_000) as i32);
    d.append("price", (r(4) % 50_000) as f64 / 100.0);
    d.append("cf1", char_field(r(5)));
    d.append("cf2", char_field(r(6)));
    d
}

type QueryTask = tokio::task::JoinHandle<Result<(u64, f64)>>;

/// Query clients: each runs, in turn, a range query on one of the three indexes with a
/// limit, until `stop`.
fn spawn_queries(
    p: &Params,
    coll: mongodb::Collection<Document>,
    stop: Arc<AtomicBool>,
) -> Vec<QueryTask> {
    (0..p.query_clients)
        .map(|c| {
            let (coll, stop, limit) = (coll.clone(), stop.clone(), p.query_limit);
            tokio::spawn(async move {
                let started = Instant::now();
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let r = drive::pick(SEED ^ 7, c, n);
                    let price = (r % 50_000) as f64 / 100.0;
                    let (filter, sort) = match n % 3 {
                        0 => (
                            doc! {"price": {"$gte": price}},
                            doc! {"price": 1, "customerid": 1},
                        ),
                        1 => (
                            doc! {"cashregisterid": {"$gte": (r % 1000) as i32}},
                            doc! {"cashregisterid": 1, "price": 1, "customerid": 1},
                        ),
                        _ => (
                            doc! {"price": {"$gte": price}},
                            doc! {"price": 1, "dateandtime": 1, "customerid": 1},
                        ),
                    };
                    let mut cursor = coll.find(filter).sort(sort).limit(limit).await?;
                    while cursor.advance().await? {}
                    n += 1;
                }
                Ok((n, started.elapsed().as_secs_f64()))
            })
        })
        .collect()
}

async fn join_queries(tasks: Vec<QueryTask>) -> Result<(u64, f64)> {
    let (mut n, mut secs) = (0, 0.0f64);
    for t in tasks {
        let (q, s) = t.await.map_err(|e| anyhow!("query client failed: {e}"))??;
        n += q;
        secs = secs.max(s);
    }
    Ok((n, secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_have_the_iibench_fields() {
        let d = document(5);
        assert_eq!(d.as_bytes().len() as u64, DOC_BYTES);
        for k in [
            "dateandtime",
            "cashregisterid",
            "customerid",
            "productid",
            "price",
            "cf1",
        ] {
            assert!(d.get(k).expect("get").is_some(), "missing {k}");
        }
    }

    #[test]
    fn rate_at_end_uses_the_last_tenth() {
        let iv = |t_secs, docs| Interval {
            t_secs,
            docs,
            inserts_per_sec: 0.0,
        };
        let ivs = [iv(1.0, 500), iv(2.0, 900), iv(4.0, 1000)];
        assert_eq!(rate_at_end(&ivs, 0.9), 50.0);
        assert!(rate_at_end(&[], 0.9).is_nan());
    }
}
