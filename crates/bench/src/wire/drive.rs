//! The client side of the wire workloads: many tokio tasks at once, each with its own turn
//! of a shared counter. `load` inserts documents in batches from several clients with a
//! progress bar and records the insert rate per interval (and turns that into the `load` and
//! `load-interval` rows every loading workload reports); `timed` runs an operation from
//! several clients for a duration (or an operation count) and keeps every latency. Neither
//! knows what the documents or operations are.

use super::rows::Row;
use crate::latency::{Samples, Summary};
use anyhow::{anyhow, Result};
use indicatif::{ProgressBar, ProgressStyle};
use mongodb::bson::RawDocumentBuf;
use mongodb::Collection;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A cheap, well-mixed 64-bit hash (splitmix64): the random choices of client `c`'s `i`-th
/// operation are `mix(seed ^ c << 40 ^ i)`, the same in every run and for every target.
pub fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// The random number of client `client`'s operation `seq` in stream `seed`.
pub fn pick(seed: u64, client: usize, seq: u64) -> u64 {
    mix(seed ^ ((client as u64) << 40) ^ seq)
}

/// How often the rate sampler checks whether the load is over.
const SAMPLER_POLL: Duration = Duration::from_millis(50);

/// How a load runs.
#[derive(Debug, Clone)]
pub struct LoadSpec {
    pub docs: u64,
    pub batch: usize,
    pub clients: usize,
    /// How often the insert rate is sampled.
    pub interval: Duration,
}

/// The insert rate over one interval of a load.
#[derive(Debug, Clone, Copy)]
pub struct Interval {
    /// Seconds since the load started, at the interval's end.
    pub t_secs: f64,
    /// Documents inserted by then.
    pub docs: u64,
    pub inserts_per_sec: f64,
}

#[derive(Debug, Clone)]
pub struct Loaded {
    pub docs: u64,
    /// Sum of the inserted documents' BSON sizes.
    pub raw_bytes: u64,
    pub seconds: f64,
    pub intervals: Vec<Interval>,
}

impl Loaded {
    pub fn per_sec(&self) -> f64 {
        self.docs as f64 / self.seconds.max(1e-9)
    }

    /// One `load-interval` row per sampled interval (label `i`; time, documents so far and
    /// insert rate), passed through `more` for the workload's own figures.
    pub fn interval_rows(&self, more: impl Fn(Row, &Interval) -> Row) -> Vec<Row> {
        let row = |(i, iv): (usize, &Interval)| {
            let r = Row::new("load-interval")
                .label("i", i)
                .fig("t_secs", iv.t_secs)
                .fig("docs", iv.docs as f64)
                .fig("inserts_per_sec", iv.inserts_per_sec);
            more(r, iv)
        };
        self.intervals.iter().enumerate().map(row).collect()
    }

    /// The `load` row's figures every load has; `bytes_on_disk` is the data directory's size
    /// (NaN for a server the runner did not start). The workload adds its own after them.
    pub fn row(&self, bytes_on_disk: Option<u64>) -> Row {
        Row::new("load")
            .fig("docs", self.docs as f64)
            .fig("seconds", self.seconds)
            .fig("inserts_per_sec", self.per_sec())
            .fig("raw_bytes", self.raw_bytes as f64)
            .fig(
                "bytes_on_disk",
                bytes_on_disk.map_or(f64::NAN, |b| b as f64),
            )
    }
}

/// Inserts documents `make(0) .. make(spec.docs - 1)` into `coll` with `insert_many` batches
/// (unordered) from `spec.clients` tasks.
pub async fn load<F>(
    coll: &Collection<RawDocumentBuf>,
    spec: &LoadSpec,
    what: &str,
    make: F,
) -> Result<Loaded>
where
    F: Fn(u64) -> RawDocumentBuf + Send + Sync + 'static,
{
    let make = Arc::new(make);
    let next = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicU64::new(0));
    let raw = Arc::new(AtomicU64::new(0));
    let bar = progress(spec.docs, what);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..spec.clients.max(1) {
        let (coll, make, next, done, raw, bar) = (
            coll.clone(),
            make.clone(),
            next.clone(),
            done.clone(),
            raw.clone(),
            bar.clone(),
        );
        let (batch, total) = (spec.batch as u64, spec.docs);
        tasks.push(tokio::spawn(async move {
            loop {
                let first = next.fetch_add(batch, Ordering::Relaxed);
                if first >= total {
                    return Ok::<(), anyhow::Error>(());
                }
                let end = (first + batch).min(total);
                let docs: Vec<RawDocumentBuf> = (first..end).map(|i| make(i)).collect();
                let bytes: u64 = docs.iter().map(|d| d.as_bytes().len() as u64).sum();
                coll.insert_many(&docs).ordered(false).await?;
                raw.fetch_add(bytes, Ordering::Relaxed);
                done.fetch_add(end - first, Ordering::Relaxed);
                bar.inc(end - first);
            }
        }));
    }
    let finished = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (done, finished) = (done.clone(), finished.clone());
        let interval = spec.interval;
        tokio::spawn(async move {
            let mut out = Vec::new();
            let mut last = (0.0, 0u64);
            let mut tick = started;
            loop {
                tick += interval;
                while Instant::now() < tick {
                    if finished.load(Ordering::Relaxed) {
                        return out;
                    }
                    tokio::time::sleep(SAMPLER_POLL.min(interval)).await;
                }
                let t = started.elapsed().as_secs_f64();
                let n = done.load(Ordering::Relaxed);
                out.push(Interval {
                    t_secs: t,
                    docs: n,
                    inserts_per_sec: (n - last.1) as f64 / (t - last.0).max(1e-9),
                });
                last = (t, n);
                if out.len() >= 100_000 {
                    return out;
                }
            }
        })
    };
    let mut first_error = None;
    for t in tasks {
        let r = t.await.map_err(|e| anyhow!("load task failed: {e}"))?;
        if let (Err(e), None) = (r, &first_error) {
            first_error = Some(e);
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    finished.store(true, Ordering::Relaxed);
    let mut intervals = sampler.await.unwrap_or_default();
    bar.finish_and_clear();
    if let Some(e) = first_error {
        return Err(e.context(format!("loading {what}")));
    }
    let docs = done.load(Ordering::Relaxed);
    let last = intervals.last().map_or((0.0, 0), |i| (i.t_secs, i.docs));
    if docs > last.1 {
        intervals.push(Interval {
            t_secs: seconds,
            docs,
            inserts_per_sec: (docs - last.1) as f64 / (seconds - last.0).max(1e-9),
        });
    }
    Ok(Loaded {
        docs,
        raw_bytes: raw.load(Ordering::Relaxed),
        seconds,
        intervals,
    })
}

fn progress(len: u64, what: &str) -> ProgressBar {
    let bar = ProgressBar::new(len);
    let style =
        ProgressStyle::with_template("{msg:>24} [{bar:40}] {pos}/{len} docs, {per_sec}, eta {eta}")
            .map(|s| s.progress_chars("=> "))
            .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar.set_message(what.to_owned());
    bar
}

/// What `timed` measured.
#[derive(Debug, Clone)]
pub struct Timed {
    pub ops: u64,
    /// Sum of what the operations returned (documents scanned, for example).
    pub units: u64,
    pub seconds: f64,
    pub latency: Summary,
}

impl Timed {
    pub fn ops_per_sec(&self) -> f64 {
        self.ops as f64 / self.seconds.max(1e-9)
    }

    pub fn units_per_sec(&self) -> f64 {
        self.units as f64 / self.seconds.max(1e-9)
    }
}

/// Runs `op(client, seq)` from `clients` tasks until `dur` has passed or `max_ops`
/// operations have started. Each operation returns a count of units (documents read).
pub async fn timed<F, Fut>(clients: usize, dur: Duration, max_ops: u64, op: F) -> Result<Timed>
where
    F: Fn(usize, u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<u64>> + Send + 'static,
{
    let op = Arc::new(op);
    let started = Instant::now();
    let deadline = started + dur;
    let issued = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for c in 0..clients.max(1) {
        let (op, issued) = (op.clone(), issued.clone());
        tasks.push(tokio::spawn(async move {
            let mut samples = Samples::with_capacity(4096);
            let mut units = 0u64;
            let mut seq = 0u64;
            while Instant::now() < deadline && issued.fetch_add(1, Ordering::Relaxed) < max_ops {
                let t = Instant::now();
                units += op(c, seq).await?;
                samples.record(t.elapsed());
                seq += 1;
            }
            Ok::<_, anyhow::Error>((samples, units))
        }));
    }
    let mut all = Samples::default();
    let mut units = 0;
    for t in tasks {
        let (s, u) = t.await.map_err(|e| anyhow!("client task failed: {e}"))??;
        all.merge(s);
        units += u;
    }
    let seconds = started.elapsed().as_secs_f64();
    let ops = all.len() as u64;
    Ok(Timed {
        ops,
        units,
        seconds,
        latency: all.summarize(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_differ_by_client_and_sequence() {
        assert_ne!(pick(1, 0, 0), pick(1, 1, 0));
        assert_ne!(pick(1, 0, 0), pick(1, 0, 1));
        assert_eq!(pick(7, 3, 9), pick(7, 3, 9));
    }

    #[test]
    fn loaded_rows_carry_the_load_figures() {
        let iv = |t_secs, docs, inserts_per_sec| Interval {
            t_secs,
            docs,
            inserts_per_sec,
        };
        let loaded = Loaded {
            docs: 10,
            raw_bytes: 1000,
            seconds: 2.0,
            intervals: vec![iv(1.0, 4, 4.0), iv(2.0, 10, 6.0)],
        };
        let rows = loaded.interval_rows(|r, iv| r.fig("twice", 2.0 * iv.docs as f64));
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[1].phase, "load-interval");
        assert_eq!(rows[1].label_value("i"), Some(&serde_json::json!(1)));
        assert_eq!(rows[1].get("inserts_per_sec"), Some(6.0));
        assert_eq!(rows[1].get("twice"), Some(20.0));
        let row = loaded.row(None);
        assert_eq!(row.phase, "load");
        assert_eq!(row.get("inserts_per_sec"), Some(5.0));
        assert_eq!(row.get("raw_bytes"), Some(1000.0));
        assert!(row.get("bytes_on_disk").is_some_and(f64::is_nan));
        assert_eq!(loaded.row(Some(4096)).get("bytes_on_disk"), Some(4096.0));
    }

    #[tokio::test]
    async fn timed_stops_at_the_operation_bound() {
        let t = timed(4, Duration::from_secs(60), 10, |_, _| async { Ok(2) })
            .await
            .expect("timed");
        assert_eq!(t.ops, 10);
        assert_eq!(t.units, 20);
    }

    #[tokio::test]
    async fn timed_returns_errors() {
        let t = timed(2, Duration::from_secs(60), 10, |c, s| async move {
            anyhow::ensure!(!(c == 0 && s == 2), "boom");
            Ok(1)
        })
        .await;
        assert!(t.is_err());
    }
}
