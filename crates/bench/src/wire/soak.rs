//! `soak` (issue 29 items 5 and 7): the seeds' concurrency held for a long time. One
//! collection with a secondary index is loaded to about twice the server's cache, then 40
//! clients run a fixed mix (`soak_ops.rs`: finds by `_id` and by the index, updates, inserts,
//! short scans) for 10 minutes. Per window (a minute; 10 s with `--quick`) it reports
//! operations per second, p50/p99 and errors per kind, and the server's memory sampled every
//! second: `VmRSS` (max and median) and its anonymous and file-backed parts and threads from
//! `/proc/<pid>/status`, the engine's cache charge and the allocator's resident bytes from
//! `serverStatus.shale.engine`, against the promise: cache + 64 MiB + the in-flight cap
//! (`serverStatus.shale.inflightRequests.limitBytes`). Then, on a server the runner started,
//! `--kills` short-lived runs: a second of writes, SIGKILL, restart, and the time to the
//! first answered ping (`soak_recovery.rs`). A soak is a measurement, not a test: errors are
//! counted and reported, not fatal.

use super::charts::{Chart, Plot};
use super::drive::{self, LoadSpec};
use super::rows::{Figures, Row};
use super::soak_ops::{self, OpKind, OpTarget, MIX};
use super::soak_recovery;
use super::{line_series, Ctx, Outcome, Target, WireArgs, Workload};
use crate::latency::Samples;
use anyhow::{anyhow, Result};
use clap::Args;
use mongodb::bson::{doc, Bson, Document};
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub struct Soak;

const MIB: f64 = 1024.0 * 1024.0;
/// The headroom of the memory promise beyond the cache (docs/design.md: cache + 64 MiB).
const HEADROOM_BYTES: u64 = 64 << 20;
const SEED: u64 = 0x736f_616b;
/// How often the server's memory is sampled.
const MEM_PERIOD: Duration = Duration::from_secs(1);
/// Errors printed as they happen (the rest are only counted).
const ERRORS_PRINTED: u64 = 10;

/// `shale-bench soak`'s flags: the common ones, clients and kills.
#[derive(Debug, Clone, Args)]
pub struct SoakArgs {
    #[command(flatten)]
    pub wire: WireArgs,
    /// Clients running the mix [default: 40]
    #[arg(long, value_name = "N")]
    pub clients: Option<usize>,
    /// Short-lived runs killed with SIGKILL after the soak, each restart timed
    /// [default: 100; 5 with --quick; 0: none]
    #[arg(long, value_name = "N")]
    pub kills: Option<usize>,
}

#[derive(Debug, Serialize)]
pub struct Params {
    quick: bool,
    cache_bytes: u64,
    data_bytes: u64,
    docs: u64,
    clients: usize,
    seconds: f64,
    window_seconds: f64,
    /// Percent of operations per kind.
    mix: Vec<(String, u64)>,
    kills: usize,
    kill_work_seconds: f64,
}

impl Soak {
    pub fn params_for(args: &SoakArgs) -> Result<Params> {
        let mut p = Self::params(&args.wire)?;
        if let Some(c) = args.clients {
            anyhow::ensure!((1..=1000).contains(&c), "--clients must be in [1, 1000]");
            p.clients = c;
        }
        if let Some(k) = args.kills {
            p.kills = k;
        }
        Ok(p)
    }
}

impl Workload for Soak {
    const NAME: &'static str = "soak";
    type Params = Params;

    fn params(args: &WireArgs) -> Result<Params> {
        let cache_bytes = args.cache_bytes_or(32, 256)?;
        let data_bytes = args.data_bytes_or(cache_bytes * 2)?;
        let seconds = args.seconds_or(60.0, 600.0)?;
        Ok(Params {
            quick: args.quick,
            cache_bytes,
            data_bytes,
            docs: (data_bytes / soak_ops::DOC_BYTES).max(1000),
            clients: 40,
            seconds,
            window_seconds: (if args.quick { 10.0f64 } else { 60.0 }).min(seconds),
            mix: MIX.iter().map(|(k, s)| (k.name().to_owned(), *s)).collect(),
            kills: if args.quick { 5 } else { 100 },
            kill_work_seconds: 1.0,
        })
    }

    fn cache_bytes(p: &Params) -> u64 {
        p.cache_bytes
    }

    fn key_figures() -> &'static [&'static str] {
        &[
            "ops_per_sec",
            "errors",
            "find_id_p99_us",
            "find_k_p99_us",
            "update_p99_us",
            "insert_p99_us",
            "scan_p99_us",
            "rss_max_mib",
            "rss_median_mib",
            "heap_resident_max_mib",
            "promise_mib",
            "rss_over_promise_samples",
            "rss_over_cache_plus_64_samples",
            "restart_secs",
            "wal_mib_at_kill",
        ]
    }

    async fn run(p: &Params, t: &mut Target, _ctx: &Ctx) -> Result<Outcome> {
        let coll = t
            .create_indexed(
                soak_ops::COLLECTION,
                doc! {},
                vec![doc! {"key": {"k": 1}, "name": "k_1"}],
            )
            .await?;
        let spec = LoadSpec {
            docs: p.docs,
            batch: 1000,
            clients: 4,
            interval: Duration::from_secs(5),
        };
        let loaded = drive::load(&coll, &spec, "soak", soak_ops::document).await?;
        eprintln!(
            "soak: loaded {} docs ({} MiB raw) at {} inserts/s; {} clients for {} s",
            loaded.docs,
            loaded.raw_bytes >> 20,
            crate::report::num(loaded.per_sec()),
            p.clients,
            p.seconds
        );
        let mut rows = vec![loaded.row(t.db_dir_bytes())];
        let ops = OpTarget {
            docs: t.db().collection(soak_ops::COLLECTION),
            raw: coll.clone(),
            loaded: p.docs,
            next_id: Arc::new(AtomicU64::new(p.docs)),
        };
        let windows = soak(p, t, &ops).await?;
        rows.extend(windows);
        let mut summary = summarize(&rows);
        if p.kills > 0 && t.server.is_some() {
            let kills = soak_recovery::run(t, &ops, p.kills, p.kill_work_seconds).await?;
            soak_recovery::summarize(&kills, &mut summary);
            rows.extend(kills);
        }
        Ok(Outcome { rows, summary })
    }

    fn charts(rows: &[Row]) -> Vec<Chart> {
        let rss = line_series(rows, "window", "window", "rss_max_mib", |r| {
            format!("{} RSS max", r.target)
        });
        let promise = line_series(rows, "window", "window", "promise_mib", |_| {
            "promise".to_owned()
        });
        vec![Chart {
            file: "rss_by_window.png".into(),
            title: "soak: server RSS against the promise".into(),
            x_label: "window".into(),
            y_label: "MiB".into(),
            plot: Plot::Lines(rss.into_iter().chain(promise).collect()),
        }]
    }
}

/// What one client measured in each window, per kind.
#[derive(Default)]
struct ClientWindows {
    samples: Vec<[Samples; MIX.len()]>,
    errors: Vec<[u64; MIX.len()]>,
}

/// One memory sample of the server.
#[derive(Debug, Clone, Copy, Default)]
struct MemSample {
    window: usize,
    rss: u64,
    rss_anon: u64,
    rss_file: u64,
    threads: u64,
    cache_used: u64,
    cache_budget: u64,
    heap_resident: u64,
    inflight_limit: u64,
    inflight_used: u64,
}

impl MemSample {
    fn promise(&self) -> u64 {
        self.cache_budget + HEADROOM_BYTES + self.inflight_limit
    }
}

/// Runs the mix for `p.seconds` and returns one row per window.
async fn soak(p: &Params, t: &Target, ops: &OpTarget) -> Result<Vec<Row>> {
    let n_windows = (p.seconds / p.window_seconds).ceil().max(1.0) as usize;
    let started = Instant::now();
    let deadline = started + Duration::from_secs_f64(p.seconds);
    let window_seconds = p.window_seconds;
    let window_of = move |at: Instant| {
        let w = (at - started).as_secs_f64() / window_seconds;
        (w as usize).min(n_windows - 1)
    };
    let errors_seen = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for c in 0..p.clients {
        let (ops, errors_seen) = (ops.clone(), errors_seen.clone());
        tasks.push(tokio::spawn(async move {
            let mut mine = ClientWindows {
                samples: (0..n_windows).map(|_| Default::default()).collect(),
                errors: vec![[0; MIX.len()]; n_windows],
            };
            let mut seq = 0u64;
            loop {
                let at = Instant::now();
                if at >= deadline {
                    break;
                }
                let r = drive::pick(SEED, c, seq);
                seq += 1;
                let kind = OpKind::pick(r);
                let outcome = ops.run(kind, r).await;
                let w = window_of(at);
                match outcome {
                    Ok(()) => mine.samples[w][kind.index()].record(at.elapsed()),
                    Err(e) => {
                        mine.errors[w][kind.index()] += 1;
                        if errors_seen.fetch_add(1, Ordering::Relaxed) < ERRORS_PRINTED {
                            eprintln!("soak: {} failed: {e:#}", kind.name());
                        }
                    }
                }
            }
            mine
        }));
    }
    let mem = sample_memory(t, started, deadline, window_of).await;
    let mut all = ClientWindows {
        samples: (0..n_windows).map(|_| Default::default()).collect(),
        errors: vec![[0; MIX.len()]; n_windows],
    };
    for task in tasks {
        let mine = task.await.map_err(|e| anyhow!("soak client failed: {e}"))?;
        for (w, (s, e)) in mine.samples.into_iter().zip(mine.errors).enumerate() {
            for (k, s) in s.into_iter().enumerate() {
                all.samples[w][k].merge(s);
                all.errors[w][k] += e[k];
            }
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    let mut rows = Vec::new();
    for (w, (samples, errors)) in all.samples.into_iter().zip(all.errors).enumerate() {
        let secs = (elapsed - w as f64 * p.window_seconds).clamp(1e-9, p.window_seconds);
        let row = window_row(w, secs, samples, &errors);
        let in_window: Vec<MemSample> = mem.iter().copied().filter(|m| m.window == w).collect();
        let row = memory_figures(row, &in_window);
        eprintln!(
            "soak window {w}: {} ops/s, {} errors, RSS max {} MiB (promise {} MiB)",
            crate::report::num(row.get("ops_per_sec").unwrap_or(f64::NAN)),
            row.get("errors").unwrap_or(0.0),
            crate::report::num(row.get("rss_max_mib").unwrap_or(f64::NAN)),
            crate::report::num(row.get("promise_mib").unwrap_or(f64::NAN)),
        );
        rows.push(row);
    }
    Ok(rows)
}

/// A window's throughput, latencies and errors per kind.
fn window_row(
    w: usize,
    secs: f64,
    samples: [Samples; MIX.len()],
    errors: &[u64; MIX.len()],
) -> Row {
    let mut row = Row::new("window").label("window", w).fig("seconds", secs);
    let mut total = 0u64;
    for ((kind, _), s) in MIX.iter().zip(samples) {
        let sum = s.summarize();
        total += sum.count;
        let name = kind.name();
        row = row
            .fig(&format!("{name}_per_sec"), sum.count as f64 / secs)
            .fig(&format!("{name}_p50_us"), sum.p50_us)
            .fig(&format!("{name}_p99_us"), sum.p99_us)
            .fig(&format!("{name}_errors"), errors[kind.index()] as f64);
    }
    row.fig("ops", total as f64)
        .fig("ops_per_sec", total as f64 / secs)
        .fig("errors", errors.iter().sum::<u64>() as f64)
}

/// Samples the server's memory every `MEM_PERIOD` until `deadline`.
async fn sample_memory(
    t: &Target,
    started: Instant,
    deadline: Instant,
    window_of: impl Fn(Instant) -> usize,
) -> Vec<MemSample> {
    let mut out = Vec::new();
    let mut next = started;
    let admin = t.client.database("admin");
    while Instant::now() < deadline {
        next += MEM_PERIOD;
        tokio::time::sleep_until(next.min(deadline).into()).await;
        let at = Instant::now();
        let proc = t.probe.pid.and_then(crate::process::mem_of);
        let status = admin.run_command(doc! {"serverStatus": 1}).await.ok();
        let mut s = status.as_ref().map(server_memory).unwrap_or_default();
        s.window = window_of(at);
        if let Some(m) = proc {
            (s.rss, s.rss_anon, s.rss_file, s.threads) = (m.rss, m.rss_anon, m.rss_file, m.threads);
        }
        out.push(s);
    }
    out
}

/// The engine's cache and heap figures and the in-flight budget from `serverStatus`.
fn server_memory(status: &Document) -> MemSample {
    let shale = status.get_document("shale").ok();
    let engine = shale.and_then(|s| s.get_document("engine").ok());
    let get = |d: Option<&Document>, section: &str, k: &str| -> u64 {
        d.and_then(|d| d.get_document(section).ok())
            .and_then(|s| s.get(k))
            .map_or(0, int)
    };
    MemSample {
        cache_used: get(engine, "cache", "usedBytes"),
        cache_budget: get(engine, "cache", "budgetBytes"),
        heap_resident: get(engine, "heap", "residentBytes"),
        inflight_limit: get(shale, "inflightRequests", "limitBytes"),
        inflight_used: get(shale, "inflightRequests", "inUseBytes"),
        ..MemSample::default()
    }
}

fn int(v: &Bson) -> u64 {
    match v {
        Bson::Int32(n) => u64::try_from(*n).unwrap_or(0),
        Bson::Int64(n) => u64::try_from(*n).unwrap_or(0),
        Bson::Double(n) if *n >= 0.0 => *n as u64,
        _ => 0,
    }
}

/// A window's memory figures, in MiB, and the samples over the promise.
fn memory_figures(row: Row, samples: &[MemSample]) -> Row {
    let max = |f: fn(&MemSample) -> u64| samples.iter().map(f).max().unwrap_or(0) as f64 / MIB;
    let mut rss: Vec<u64> = samples.iter().map(|m| m.rss).collect();
    rss.sort_unstable();
    let median = rss.get(rss.len() / 2).copied().unwrap_or(0) as f64 / MIB;
    let over = |limit: fn(&MemSample) -> u64| {
        samples
            .iter()
            .filter(|m| m.rss > 0 && m.rss > limit(m))
            .count() as f64
    };
    row.fig("mem_samples", samples.len() as f64)
        .fig("rss_max_mib", max(|m| m.rss))
        .fig("rss_median_mib", median)
        .fig("rss_anon_max_mib", max(|m| m.rss_anon))
        .fig("rss_file_max_mib", max(|m| m.rss_file))
        .fig(
            "threads_max",
            samples.iter().map(|m| m.threads).max().unwrap_or(0) as f64,
        )
        .fig("cache_used_max_mib", max(|m| m.cache_used))
        .fig("heap_resident_max_mib", max(|m| m.heap_resident))
        .fig("inflight_used_max_mib", max(|m| m.inflight_used))
        .fig("promise_mib", max(MemSample::promise))
        .fig(
            "cache_plus_64_mib",
            max(|m| m.cache_budget + HEADROOM_BYTES),
        )
        .fig("rss_over_promise_samples", over(MemSample::promise))
        .fig(
            "rss_over_cache_plus_64_samples",
            over(|m| m.cache_budget + HEADROOM_BYTES),
        )
}

/// The whole soak's figures: throughput, errors, latency of the worst window per kind, and
/// memory over every sample.
fn summarize(rows: &[Row]) -> Figures {
    let windows: Vec<&Row> = rows.iter().filter(|r| r.phase == "window").collect();
    let sum = |k: &str| windows.iter().filter_map(|r| r.get(k)).sum::<f64>();
    let max = |k: &str| {
        windows
            .iter()
            .filter_map(|r| r.get(k))
            .fold(f64::NAN, f64::max)
    };
    let mut f = Figures::default();
    let secs = sum("seconds");
    f.set("ops_per_sec", sum("ops") / secs.max(1e-9));
    f.set("errors", sum("errors"));
    for (kind, _) in MIX {
        let n = kind.name();
        f.set(
            &format!("{n}_per_sec"),
            sum(&format!("{n}_per_sec")) / windows.len().max(1) as f64,
        );
        f.set(
            &format!("{n}_p99_us_worst_window"),
            max(&format!("{n}_p99_us")),
        );
        f.set(&format!("{n}_errors"), sum(&format!("{n}_errors")));
    }
    let per_sec: Vec<f64> = windows
        .iter()
        .filter_map(|r| r.get("ops_per_sec"))
        .collect();
    let lowest = per_sec.iter().copied().fold(f64::NAN, f64::min);
    f.set("ops_per_sec_lowest_window", lowest);
    f.set("rss_max_mib", max("rss_max_mib"));
    f.set(
        "rss_median_of_window_medians_mib",
        median(&windows, "rss_median_mib"),
    );
    f.set("heap_resident_max_mib", max("heap_resident_max_mib"));
    f.set("rss_anon_max_mib", max("rss_anon_max_mib"));
    f.set("threads_max", max("threads_max"));
    f.set("promise_mib", max("promise_mib"));
    f.set("cache_plus_64_mib", max("cache_plus_64_mib"));
    f.set("mem_samples", sum("mem_samples"));
    f.set("rss_over_promise_samples", sum("rss_over_promise_samples"));
    f.set(
        "rss_over_cache_plus_64_samples",
        sum("rss_over_cache_plus_64_samples"),
    );
    f
}

fn median(rows: &[&Row], k: &str) -> f64 {
    let mut v: Vec<f64> = rows.iter().filter_map(|r| r.get(k)).collect();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mem(rss_mib: u64) -> MemSample {
        MemSample {
            rss: rss_mib << 20,
            cache_budget: 256 << 20,
            inflight_limit: 256 << 20,
            ..MemSample::default()
        }
    }

    #[test]
    fn memory_figures_count_samples_over_each_bound() {
        let samples = [mem(300), mem(330), mem(600), mem(310)];
        let row = memory_figures(Row::new("window"), &samples);
        assert_eq!(row.get("rss_max_mib"), Some(600.0));
        assert_eq!(row.get("rss_median_mib"), Some(330.0));
        assert_eq!(row.get("promise_mib"), Some(576.0));
        assert_eq!(row.get("rss_over_promise_samples"), Some(1.0));
        assert_eq!(row.get("rss_over_cache_plus_64_samples"), Some(2.0));
    }

    #[test]
    fn window_rows_sum_the_kinds() {
        let mut samples: [Samples; MIX.len()] = Default::default();
        samples[0].record(Duration::from_micros(100));
        samples[4].record(Duration::from_micros(300));
        let row = window_row(2, 2.0, samples, &[0, 1, 0, 0, 0]);
        assert_eq!(row.get("ops_per_sec"), Some(1.0));
        assert_eq!(row.get("errors"), Some(1.0));
        assert_eq!(row.get("scan_p99_us"), Some(300.0));
        assert_eq!(row.get("find_k_errors"), Some(1.0));
    }

    #[test]
    fn server_memory_reads_the_shale_sections() {
        let status = doc! {"shale": {
            "engine": {"cache": {"usedBytes": 5i64, "budgetBytes": 7i64},
                       "heap": {"residentBytes": 9i64}},
            "inflightRequests": {"limitBytes": 11i64, "inUseBytes": 1i64},
        }};
        let m = server_memory(&status);
        assert_eq!((m.cache_used, m.cache_budget, m.heap_resident), (5, 7, 9));
        assert_eq!((m.inflight_limit, m.inflight_used), (11, 1));
        assert_eq!(m.promise(), 7 + 11 + HEADROOM_BYTES);
    }
}
