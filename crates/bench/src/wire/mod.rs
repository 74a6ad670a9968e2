//! The wire-protocol workloads (issue 6): each drives a MongoDB-compatible server through
//! the official Rust driver from many client tasks. This module owns what they share: the
//! command-line options, the targets (a `shale serve` the runner starts, or `--uri`, and an
//! optional `--peer-uri` run in the same invocation), the OS counters sampled around every
//! phase, and the output (table, JSON, `--report` markdown and charts), with shale/peer
//! ratios for every figure. The workloads themselves (one file each) only say what to load,
//! what to time and which figures to keep.

mod bakeoff;
mod charts;
mod diskstats;
mod drive;
mod fast_update;
mod iibench;
mod layout;
mod log_write_amp;
mod nth_attribute;
mod pk_lookup;
mod point_find;
mod probe;
mod report_md;
mod rows;
mod server;
mod soak;
mod soak_ops;
mod soak_recovery;

use crate::machine::Machine;
use crate::report::{num, Table};
use anyhow::{bail, Context, Result};
use clap::Args;
use mongodb::bson::{doc, Document, RawDocumentBuf};
use mongodb::options::ClientOptions;
use mongodb::{Client, Collection};
use probe::{Probe, Sample};
use rows::{ratio_figures, ratio_rows, Figures, Row};
use serde::Serialize;
use serde_json::{json, Map, Value};
use server::{ClosedSize, ShaleServer};
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use bakeoff::{Bakeoff, BakeoffArgs};
pub use fast_update::FastUpdate;
pub use iibench::Iibench;
pub use log_write_amp::LogWriteAmp;
pub use nth_attribute::NthAttribute;
pub use pk_lookup::{PkLookup, PkLookupArgs};
pub use point_find::PointFind;
pub use soak::{Soak, SoakArgs};

const MIB: u64 = 1024 * 1024;
/// The database every workload works in; dropped before a run.
const DB: &str = "shale_bench";

/// Options every wire workload takes.
#[derive(Debug, Clone, Args)]
pub struct WireArgs {
    /// Tiny sizes: about a minute per workload
    #[arg(long)]
    pub quick: bool,
    /// Also write every figure as JSON to FILE
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write a markdown report and PNG charts into DIR
    #[arg(long, value_name = "DIR")]
    pub report: Option<PathBuf>,
    /// Drive this running server instead of starting `shale serve`
    #[arg(long, value_name = "URI")]
    pub uri: Option<String>,
    /// Pid of the --uri server, for /proc/<pid>/io
    #[arg(long, value_name = "PID", requires = "uri")]
    pub pid: Option<u32>,
    /// Run the same workload against this second server too and print shale/peer ratios
    #[arg(long, value_name = "URI")]
    pub peer_uri: Option<String>,
    /// Pid of the peer server, for /proc/<pid>/io
    #[arg(long, value_name = "PID", requires = "peer_uri")]
    pub peer_pid: Option<u32>,
    /// The shale binary to start [default: $SHALE_BIN, or `shale` next to shale-bench]
    #[arg(long, value_name = "FILE")]
    pub shale_bin: Option<PathBuf>,
    /// Parent of the started server's data directory [default: ./data-bench]
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Server cache in MiB [default: the workload's]
    #[arg(long, value_name = "MIB")]
    pub cache_mib: Option<u64>,
    /// Data to load in MiB, where the workload loads by size [default: the workload's]
    #[arg(long, value_name = "MIB")]
    pub data_mib: Option<f64>,
    /// Seconds per timed point [default: the workload's]
    #[arg(long, value_name = "SECS")]
    pub seconds: Option<f64>,
}

impl WireArgs {
    fn seconds_or(&self, quick: f64, full: f64) -> Result<f64> {
        let s = self
            .seconds
            .unwrap_or(if self.quick { quick } else { full });
        if !(s.is_finite() && s > 0.0 && s <= 86_400.0) {
            bail!("--seconds must be in (0, 86400], got {s}");
        }
        Ok(s)
    }

    fn cache_bytes_or(&self, quick_mib: u64, full_mib: u64) -> Result<u64> {
        let mib = self
            .cache_mib
            .unwrap_or(if self.quick { quick_mib } else { full_mib });
        if !(1..=1 << 20).contains(&mib) {
            bail!("--cache-mib must be in [1, 1048576], got {mib}");
        }
        Ok(mib * MIB)
    }

    fn data_bytes_or(&self, default_bytes: u64) -> Result<u64> {
        match self.data_mib {
            None => Ok(default_bytes),
            Some(m) if m > 0.0 && m <= (1u64 << 24) as f64 => Ok((m * MIB as f64) as u64),
            Some(m) => bail!("--data-mib must be in (0, 16777216], got {m}"),
        }
    }
}

/// What a workload run on one target produced.
#[derive(Debug, Default)]
pub struct Outcome {
    pub rows: Vec<Row>,
    pub summary: Figures,
}

/// One wire workload.
pub trait Workload {
    const NAME: &'static str;
    /// Whether the run needs the device's random-read limits (measured first).
    const NEEDS_DEVICE: bool = false;
    type Params: Serialize;
    fn params(args: &WireArgs) -> Result<Self::Params>;
    fn cache_bytes(p: &Self::Params) -> u64;
    /// Figures shown in the terminal table (every figure goes to the JSON).
    fn key_figures() -> &'static [&'static str];
    async fn run(p: &Self::Params, t: &mut Target, ctx: &Ctx) -> Result<Outcome>;
    /// Charts for `--report`.
    fn charts(rows: &[Row]) -> Vec<charts::Chart>;
}

/// What every run of a workload shares.
pub struct Ctx {
    /// Random-read IOPS of the data directory's device: (block bytes, queue depth, IOPS).
    pub device_iops: Vec<(usize, usize, f64)>,
}

/// One server the workload runs against.
pub struct Target {
    pub client: Client,
    pub probe: Probe,
    pub server: Option<ShaleServer>,
    /// The server reports `serverStatus.shale.engine` (and takes `storageEngine.shale`).
    pub is_shale: bool,
    pub version: String,
}

impl Target {
    pub async fn sample(&self) -> Result<Sample> {
        self.probe.sample(&self.client).await
    }

    pub fn db(&self) -> mongodb::Database {
        self.client.database(DB)
    }

    /// Creates collection `name` (`options` go beside `create`: `storageEngine`, say) with
    /// `indexes` (`{key, name}` documents), and returns it for raw inserts.
    pub async fn create_indexed(
        &self,
        name: &str,
        options: Document,
        indexes: Vec<Document>,
    ) -> Result<Collection<RawDocumentBuf>> {
        let db = self.db();
        let mut create = doc! {"create": name};
        create.extend(options);
        db.run_command(create)
            .await
            .with_context(|| format!("creating {name}"))?;
        db.run_command(doc! {"createIndexes": name, "indexes": indexes})
            .await
            .with_context(|| format!("indexing {name}"))?;
        Ok(db.collection(name))
    }

    /// Stops a server the runner started and returns what its data directory holds after
    /// the clean close; `None` for a server it did not start.
    pub async fn stop_server(&mut self) -> Result<Option<ClosedSize>> {
        match self.server.take() {
            Some(s) => Ok(Some(s.stop().await?)),
            None => Ok(None),
        }
    }

    pub fn db_dir_bytes(&self) -> Option<u64> {
        self.server
            .as_ref()
            .map(|s| shale_io::dir_disk_bytes(s.db_dir()))
    }
}

/// Connects a driver client with a pool large enough for every workload's clients.
async fn connect(uri: &str) -> Result<Client> {
    let mut opts = ClientOptions::parse(uri)
        .await
        .with_context(|| format!("parsing {uri}"))?;
    opts.max_pool_size = Some(128);
    opts.app_name = Some("shale-bench".to_owned());
    opts.server_selection_timeout = Some(Duration::from_secs(10));
    Ok(Client::with_options(opts)?)
}

async fn open_target(
    uri: &str,
    pid: Option<u32>,
    server: Option<ShaleServer>,
    disk: Option<String>,
) -> Result<Target> {
    let client = connect(uri).await?;
    let admin = client.database("admin");
    let info = admin
        .run_command(doc! {"buildInfo": 1})
        .await
        .with_context(|| format!("buildInfo on {uri}"))?;
    let status = admin.run_command(doc! {"serverStatus": 1}).await?;
    let is_shale = probe::EngineIo::from_server_status(&status).is_some();
    client
        .database(DB)
        .drop()
        .await
        .with_context(|| format!("dropping database {DB} on {uri}"))?;
    Ok(Target {
        client,
        probe: Probe {
            pid: server.as_ref().map(|s| s.pid).or(pid),
            disk,
        },
        server,
        is_shale,
        version: info.get_str("version").unwrap_or("unknown").to_owned(),
    })
}

/// Runs workload `W` as the command line says, on its own tokio runtime.
pub fn run<W: Workload>(args: &WireArgs) -> Result<()> {
    run_with::<W>(args, W::params(args)?)
}

/// Runs workload `W` with parameters its own flags set beyond the common ones.
pub fn run_with<W: Workload>(args: &WireArgs, params: W::Params) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(run_async::<W>(args, params))
}

async fn run_async<W: Workload>(args: &WireArgs, params: W::Params) -> Result<()> {
    let parent = args
        .dir
        .clone()
        .unwrap_or_else(|| PathBuf::from("data-bench"));
    let created_parent = !parent.exists();
    std::fs::create_dir_all(&parent).with_context(|| format!("creating {}", parent.display()))?;
    let outcome = run_targets::<W>(args, &params, &parent).await;
    if created_parent {
        // Only if empty: each server's own directory inside it is already gone.
        let _ = std::fs::remove_dir(&parent);
    }
    outcome
}

/// Runs the workload against each target in turn, then prints and writes the results.
async fn run_targets<W: Workload>(
    args: &WireArgs,
    params: &W::Params,
    parent: &Path,
) -> Result<()> {
    let cache_bytes = W::cache_bytes(params);
    let machine = Machine::describe(parent);
    let disk = Some(machine.partition.clone().unwrap_or(machine.device.clone()));
    let mut ctx = Ctx {
        device_iops: Vec::new(),
    };
    if W::NEEDS_DEVICE {
        ctx.device_iops = measure_device(parent, args.quick, args.seconds).await?;
    }

    let mut targets = Vec::new();
    targets.push(match &args.uri {
        Some(uri) => ("shale", uri.clone(), args.pid, false),
        None => ("shale", String::new(), None, true),
    });
    if let Some(uri) = &args.peer_uri {
        targets.push(("peer", uri.clone(), args.peer_pid, false));
    }

    let mut runs: Vec<(Outcome, Value)> = Vec::new();
    for (name, uri, pid, start) in targets {
        let server = if start {
            let bin = server::find_binary(args.shale_bin.as_deref())?;
            eprintln!(
                "{}: starting {} with a {} MiB cache",
                W::NAME,
                bin.display(),
                cache_bytes / MIB
            );
            Some(ShaleServer::start(&bin, Some(parent), cache_bytes).await?)
        } else {
            None
        };
        let uri = server.as_ref().map_or(uri, |s| s.uri.clone());
        let mut target = open_target(&uri, pid, server, disk.clone()).await?;
        eprintln!(
            "{}: running against {name} ({uri}, version {}{})",
            W::NAME,
            target.version,
            if target.is_shale { ", ShaleDB" } else { "" }
        );
        let outcome = W::run(params, &mut target, &ctx).await;
        let stopped = target.stop_server().await;
        let mut outcome = outcome.with_context(|| format!("{} against {name}", W::NAME))?;
        stopped?;
        for r in &mut outcome.rows {
            r.target = name.to_owned();
        }
        let info = json!({"target": name, "uri": uri, "version": target.version,
                          "started_by_runner": start, "shale": target.is_shale});
        runs.push((outcome, info));
    }

    let report = assemble::<W>(params, &machine, &runs)?;
    print_tables::<W>(&report.rows);
    print_summary(&runs);
    if let Some(path) = &args.json {
        crate::report::write_json(&report.json, path)?;
        eprintln!("wrote {}", path.display());
    }
    if let Some(dir) = &args.report {
        report_md::write(
            dir,
            W::NAME,
            &report.json,
            &report.rows,
            &W::charts(&report.rows),
        )?;
        eprintln!("wrote {}", dir.join("report.md").display());
    }
    Ok(())
}

/// Measures the device's random-read IOPS at the page sizes and depths the workloads use,
/// briefly, with the `device` workload's own loop.
/// A `--seconds` below the quick default shrinks the test file too (tests).
async fn measure_device(
    parent: &Path,
    quick: bool,
    seconds: Option<f64>,
) -> Result<Vec<(usize, usize, f64)>> {
    let parent = parent.to_owned();
    let (mut file_mib, mut secs) = if quick { (128, 0.5) } else { (1024, 3.0) };
    if let Some(s) = seconds.filter(|&s| s < secs) {
        (file_mib, secs) = (32, s);
    }
    eprintln!("measuring the device's random-read limit ({file_mib} MiB file, {secs} s a point)");
    tokio::task::spawn_blocking(move || {
        crate::device::random_read_limits(&parent, file_mib, Duration::from_secs_f64(secs))
    })
    .await?
}

struct Assembled {
    json: Value,
    rows: Vec<Row>,
}

fn assemble<W: Workload>(
    params: &W::Params,
    machine: &Machine,
    runs: &[(Outcome, Value)],
) -> Result<Assembled> {
    let mut rows: Vec<Row> = runs.iter().flat_map(|(o, _)| o.rows.clone()).collect();
    let mut summary: Map<String, Value> = runs[0].0.summary.to_json();
    if let Some((peer, _)) = runs.get(1) {
        rows.extend(ratio_rows(&runs[0].0.rows, &peer.rows));
        summary.insert("peer".into(), Value::Object(peer.summary.to_json()));
        let ratios = ratio_figures(&runs[0].0.summary, &peer.summary);
        summary.insert("ratio_to_peer".into(), Value::Object(ratios.to_json()));
    }
    let json = json!({
        "workload": W::NAME,
        "params": serde_json::to_value(params)?,
        "machine": serde_json::to_value(machine)?,
        "servers": runs.iter().map(|(_, i)| i.clone()).collect::<Vec<_>>(),
        "results": serde_json::to_value(&rows)?,
        "summary": summary,
    });
    Ok(Assembled { json, rows })
}

/// One table per phase: target, labels, and the workload's key figures that the phase has.
fn print_tables<W: Workload>(rows: &[Row]) {
    for (phase, of) in rows::by_phase(rows) {
        if of.len() > 64 {
            println!("{phase}: {} rows (in the JSON)", of.len());
            continue;
        }
        let labels: Vec<String> = of[0].labels.iter().map(|(k, _)| k.clone()).collect();
        let figs: Vec<&str> = W::key_figures()
            .iter()
            .copied()
            .filter(|f| of.iter().any(|r| r.get(f).is_some()))
            .collect();
        let mut t = Table::new(
            std::iter::once("target".to_owned())
                .chain(labels.iter().cloned())
                .chain(figs.iter().map(|f| (*f).to_owned())),
        );
        for r in of {
            let mut cells = vec![r.target.clone()];
            for l in &labels {
                cells.push(r.label_value(l).map_or(String::new(), label_text));
            }
            for f in &figs {
                cells.push(r.get(f).map_or("-".to_owned(), num));
            }
            t.row(cells);
        }
        println!("{phase}");
        print!("{}", t.render());
        println!();
    }
}

pub(crate) fn label_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn print_summary(runs: &[(Outcome, Value)]) {
    let mut t = Table::new(["summary", "shale", "peer", "shale/peer"]);
    let shale = &runs[0].0.summary;
    let peer = runs.get(1).map(|(o, _)| &o.summary);
    for (k, v) in &shale.0 {
        let p = peer.and_then(|p| p.get(k));
        t.row([
            k.clone(),
            num(*v),
            p.map_or("-".to_owned(), num),
            p.map_or("-".to_owned(), |p| num(rows::ratio(*v, p))),
        ]);
    }
    print!("{}", t.render());
}

/// Lines for a chart: for each row of `phase` (ratio rows left out), the point
/// (label `x` as a number, figure `y`), grouped into series named by `name`.
pub(crate) fn line_series(
    rows: &[Row],
    phase: &str,
    x: &str,
    y: &str,
    name: impl Fn(&Row) -> String,
) -> Vec<charts::Series> {
    let mut out: Vec<charts::Series> = Vec::new();
    for r in rows
        .iter()
        .filter(|r| r.phase == phase && r.target != "shale/peer")
    {
        let xv = r
            .label_value(x)
            .and_then(Value::as_f64)
            .or_else(|| r.get(x));
        let (Some(xv), Some(yv)) = (xv, r.get(y)) else {
            continue;
        };
        let n = name(r);
        match out.iter_mut().find(|s| s.name == n) {
            Some(s) => s.points.push((xv, yv)),
            None => out.push(charts::Series {
                name: n,
                points: vec![(xv, yv)],
            }),
        }
    }
    out
}
