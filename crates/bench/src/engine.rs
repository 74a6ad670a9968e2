//! The `engine` workload: shale-engine driven directly, with no document or server layer.
//! Four phases run on one environment: `fill-random` (keys in a pseudo-random order into
//! one tree), `fill-sequential` (ascending keys into a second tree), `read-random` (point
//! gets of existing keys of the first tree, from `--threads` threads, with the data ten
//! times the cache by default) and `scan` (one full cursor pass over the first tree).
//! A fifth phase, `txn` (`engine_txn.rs`), measures two-tree transactions from 1, 2, 4 and 8
//! threads on its own environment with the "every commit" fsync policy.
//! Each phase reports its rate with the engine's own I/O counters next to the kernel's
//! `/proc/self/io` figures, the bytes on disk and the process's peak RSS, which is what the
//! docs/design.md §6 targets (reads per point query, bytes per read, counter accuracy) need.

use crate::device::WorkDir;
use crate::keyspace::{self, Permutation, ValuePool, KEY_BYTES};
use crate::machine::Machine;
use crate::memwatch::{MemPeaks, MemWatch};
use crate::process;
use crate::read_probe::{self, DeviceProbe};
use crate::report::{num, write_json, Table};
use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use shale_engine::{
    CategoryCounters, Compression, EngineCounters, Env, EnvOptions, FsyncPolicy, IoCounters,
    TreeHandle, TreeOptions, WriteBatch, MAX_KEY_OR_VALUE_BYTES,
};
use shale_io::proc_io::{self, ProcIo};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

#[path = "engine_cache_mix.rs"]
mod cache_mix;
#[cfg(any(feature = "rocksdb", feature = "sqlite"))]
#[path = "peer.rs"]
mod peer;
#[cfg(feature = "rocksdb")]
#[path = "peer_rocksdb.rs"]
mod peer_rocksdb;
#[cfg(feature = "sqlite")]
#[path = "peer_sqlite.rs"]
mod peer_sqlite;
#[path = "engine_print.rs"]
mod print;
#[path = "engine_summary.rs"]
mod summary;

use cache_mix::CacheMixBytes;
use print::print_report;
use summary::{summarize, Summary};

const MIB: u64 = 1024 * 1024;
/// Puts per `WriteBatch` in the fill phases.
const BATCH_PUTS: usize = 100;
/// Log fsync interval of the fills (a crash may lose the last 100 ms).
const FSYNC_MILLIS: u64 = 100;
/// Seed of the insertion order, the read keys and the value bytes.
const SEED: u64 = 0x5348_414C_4542_454E;

/// `shale-bench engine`: fills, point reads and a scan through shale-engine.
#[derive(Debug, Clone, Args)]
pub struct EngineArgs {
    /// Smaller run: 200 MiB of data, a 20 MiB cache and 1 reader thread
    #[arg(long)]
    pub quick: bool,
    /// Also write the results as JSON to FILE
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Directory to hold the database; it goes in a fresh subdirectory that is removed
    /// afterwards [default: a temporary directory under ./data-bench]
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Node cache budget in MiB [default: 400, or 20 with --quick]
    #[arg(long, value_name = "N")]
    pub cache_mib: Option<u64>,
    /// Logical data (key + value bytes) per fill in MiB [default: 4096, or 200 with --quick]
    #[arg(long, value_name = "N")]
    pub data_mib: Option<u64>,
    /// Bytes of every value
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub value_bytes: usize,
    /// Reader threads of the read-random phase [default: 8, or 1 with --quick]
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Longest the read-random phase may run, in seconds [default: 120, or 20 with --quick]
    #[arg(long, value_name = "SECS")]
    pub read_seconds: Option<f64>,
    /// Seconds of the txn phase per thread count [default: 10, or 2 with --quick]
    #[arg(long, value_name = "SECS")]
    pub txn_seconds: Option<f64>,
    /// Run without the engine's heap governor (which holds resident memory under the
    /// cache + 64 MiB, as `shale serve` does), for A/B runs
    #[arg(long)]
    pub no_heap_governor: bool,
    /// Target uncompressed size of a leaf basement (the unit of a point read), in KiB
    /// [default: the engine's]
    #[arg(long, value_name = "KIB")]
    pub basement_kib: Option<usize>,
    /// Target uncompressed node size, in KiB [default: the engine's; either is cut to fit 16
    /// nodes in the cache]
    #[arg(long, value_name = "KIB")]
    pub node_kib: Option<usize>,
    /// Partition codec: zstd, lz4 or none [default: the engine's]
    #[arg(long, value_name = "CODEC")]
    pub compression: Option<String>,
}

/// The settings of one run after defaults are applied.
#[derive(Debug, Clone, Serialize)]
struct Params {
    dir: String,
    quick: bool,
    data_bytes: u64,
    cache_bytes: u64,
    data_to_cache_ratio: f64,
    keys: u64,
    key_bytes: usize,
    value_bytes: usize,
    batch_puts: usize,
    fsync: String,
    checkpoint_interval_secs: Option<f64>,
    direct_io: bool,
    node_size_bytes: usize,
    basement_size_bytes: usize,
    read_page_bytes: usize,
    fanout: usize,
    compression: String,
    read_threads: usize,
    read_ops_limit: u64,
    read_seconds_limit: f64,
    /// Seconds of the txn phase per thread count.
    txn_seconds: f64,
    /// Whether the engine's heap governor ran (`EnvOptions::heap`).
    heap_governor: bool,
    /// The layout the fields above report, as the engine takes it.
    #[serde(skip)]
    tree: TreeOptions,
}

impl Params {
    fn from_args(args: &EngineArgs) -> Result<Params> {
        let cache_mib = args.cache_mib.unwrap_or(if args.quick { 20 } else { 400 });
        let data_mib = args.data_mib.unwrap_or(if args.quick { 200 } else { 4096 });
        let threads = args.threads.unwrap_or(if args.quick { 1 } else { 8 });
        if !(1..=1 << 20).contains(&cache_mib) {
            bail!("--cache-mib must be in [1, 1048576], got {cache_mib}");
        }
        if !(1..=1 << 24).contains(&data_mib) {
            bail!("--data-mib must be in [1, 16777216], got {data_mib}");
        }
        if !(1..=MAX_KEY_OR_VALUE_BYTES).contains(&args.value_bytes) {
            bail!(
                "--value-bytes must be in [1, {MAX_KEY_OR_VALUE_BYTES}], got {}",
                args.value_bytes
            );
        }
        if !(1..=1024).contains(&threads) {
            bail!("--threads must be in [1, 1024], got {threads}");
        }
        if args
            .txn_seconds
            .is_some_and(|s| !(0.01..=3600.0).contains(&s))
        {
            bail!("--txn-seconds must be in [0.01, 3600]");
        }
        let data_bytes = data_mib * MIB;
        let keys = (data_bytes / (KEY_BYTES + args.value_bytes) as u64).max(1);
        let cache_bytes = cache_mib * MIB;
        let env = EnvOptions::default();
        // What the environment will use: it fits the default layout to its cache.
        let tree = tree_options(args)?.fitted_to_cache(usize::try_from(cache_mib * MIB)?);
        Ok(Params {
            dir: String::new(),
            quick: args.quick,
            data_bytes,
            cache_bytes,
            data_to_cache_ratio: data_bytes as f64 / cache_bytes as f64,
            keys,
            key_bytes: KEY_BYTES,
            value_bytes: args.value_bytes,
            batch_puts: BATCH_PUTS,
            fsync: format!("every_millis({FSYNC_MILLIS})"),
            checkpoint_interval_secs: env.checkpoint_interval.map(|d| d.as_secs_f64()),
            direct_io: env.direct_io,
            node_size_bytes: tree.node_size_bytes,
            basement_size_bytes: tree.basement_size_bytes,
            read_page_bytes: tree.read_page_bytes,
            fanout: tree.fanout,
            compression: format!("{:?}", tree.compression).to_lowercase(),
            read_threads: threads,
            read_ops_limit: keys.min(if args.quick { 200_000 } else { 2_000_000 }),
            read_seconds_limit: args
                .read_seconds
                .unwrap_or(if args.quick { 20.0 } else { 120.0 }),
            txn_seconds: args
                .txn_seconds
                .unwrap_or(if args.quick { 2.0 } else { 10.0 }),
            heap_governor: !args.no_heap_governor,
            tree,
        })
    }

    fn env_options(&self) -> EnvOptions {
        EnvOptions {
            cache_bytes: usize::try_from(self.cache_bytes).unwrap_or(usize::MAX),
            tree_defaults: self.tree,
            fsync: FsyncPolicy::EveryMillis(FSYNC_MILLIS),
            direct_io: self.direct_io,
            // jemalloc's pages alone: this bound is over the pre-open baseline (the runner's
            // binary and threads are in it), and the figures stay comparable with earlier runs.
            heap: self
                .heap_governor
                .then(|| std::sync::Arc::new(shale_heap::JemallocProbe::heap_only()) as _),
            ..EnvOptions::default()
        }
    }
}

/// The tree layout of a run: the engine's defaults, less what the flags override.
fn tree_options(args: &EngineArgs) -> Result<TreeOptions> {
    let mut tree = TreeOptions::default();
    if let Some(kib) = args.node_kib {
        if !(4..=65_536).contains(&kib) {
            bail!("--node-kib must be in [4, 65536], got {kib}");
        }
        tree.node_size_bytes = kib << 10;
    }
    if let Some(kib) = args.basement_kib {
        if kib == 0 || kib << 10 > tree.node_size_bytes {
            bail!("--basement-kib must be in [1, the node size], got {kib}");
        }
        tree.basement_size_bytes = kib << 10;
        tree.read_page_bytes = shale_engine::default_read_page(kib << 10);
    }
    tree.compression = match args.compression.as_deref() {
        None => tree.compression,
        Some("zstd") => Compression::Zstd,
        Some("lz4") => Compression::Lz4,
        Some("none") => Compression::None,
        Some(other) => bail!("--compression must be zstd, lz4 or none, got {other:?}"),
    };
    Ok(tree)
}

/// The figures of one phase. Byte and read counts are deltas over the phase except
/// `db_bytes_on_disk` (at its end) and `rss_peak_bytes` (process-wide, monotone).
#[derive(Debug, Clone, Default, Serialize)]
struct Phase {
    name: &'static str,
    ops: u64,
    seconds: f64,
    ops_per_sec: f64,
    /// User + system CPU seconds of the whole process over the phase (every thread:
    /// callers, flushers, the log writer); null where `getrusage` fails.
    cpu_seconds: Option<f64>,
    /// `cpu_seconds` per operation in microseconds: steadier than `ops_per_sec` when the
    /// device's speed varies between runs.
    cpu_us_per_op: Option<f64>,
    /// The user-mode part of `cpu_us_per_op` (the engine's own work without the kernel's
    /// I/O path, whose cost per read moves with the machine's load).
    user_cpu_us_per_op: Option<f64>,
    /// Key + value bytes of the operations.
    logical_bytes: u64,
    /// Sum of `write_bytes` over every I/O category of the engine's counters.
    engine_bytes_written: u64,
    /// `write_bytes` of `/proc/self/io`; null where the kernel does not provide it.
    os_write_bytes: Option<u64>,
    write_ratio_engine_to_os: Option<f64>,
    /// `user_read.read_calls` of the engine's counters.
    engine_reads: u64,
    reads_per_op: f64,
    /// read-random: the device's 4 KiB random-read rate just before the phase
    /// (`read_probe.rs`), and this phase's device reads per second as a fraction of it.
    #[serde(skip_serializing_if = "Option::is_none")]
    device_probe: Option<DeviceProbe>,
    #[serde(skip_serializing_if = "Option::is_none")]
    fraction_of_device_reads: Option<f64>,
    /// read-random: what the tree's cached nodes held at the phase's end, by kind
    /// (`TreeHandle::cache_mix`): how much of the budget was leaf entries a get can hit.
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_mix: Option<CacheMixBytes>,
    /// `user_read.read_bytes / user_read.read_calls`; null without reads.
    bytes_per_read: Option<f64>,
    db_bytes_on_disk: u64,
    /// `VmHWM` of `/proc/self/status`.
    rss_peak_bytes: Option<u64>,
    /// `rss_peak_bytes` less the process's resident set before the environment was opened
    /// (the binary, the allocator, the workload's own data): what the engine added, to
    /// hold against the cache + 64 MiB bound.
    rss_peak_over_baseline_bytes: Option<u64>,
    /// The cache budget.
    cache_bytes: u64,
    /// Sum of `read_bytes` over every category of the engine's counters.
    engine_bytes_read: u64,
    /// `read_bytes` of `/proc/self/io` (zero when reads hit the page cache).
    os_read_bytes: Option<u64>,
    os_cancelled_write_bytes: Option<u64>,
    /// Bytes of the phase's tree file.
    tree_file_bytes: u64,
    /// The engine's I/O counter deltas by category.
    engine_io: IoByCategory,
    cache_hits: u64,
    cache_misses: u64,
    cache_evictions: u64,
    cache_peak_bytes: u64,
    /// What the cache charges for its nodes at the phase's end.
    cache_used_bytes: u64,
    /// jemalloc's `stats.allocated` and `stats.resident` at the phase's end: what the
    /// process really holds, to compare with `cache_used_bytes` and `rss_peak_bytes`.
    allocated_bytes: Option<u64>,
    resident_bytes: Option<u64>,
    /// Memory peaks sampled over the phase (`memwatch.rs`).
    memory: MemPeaks,
    /// How far the heap governor had lowered the cache's working limit at the phase's end.
    cache_shrink_bytes: u64,
    /// Times the governor had jemalloc return freed pages in the phase, and their bytes.
    heap_releases: u64,
    heap_released_bytes: u64,
    flushes: u64,
    /// Flush units writers ran while waiting out backpressure (`Tree::help_flush`).
    writer_flush_units: u64,
    /// Messages applied straight to the leaf they append to (`tree/promote.rs`).
    messages_promoted: u64,
    leaf_splits: u64,
    nodes_read: u64,
    basements_read: u64,
    /// Device bytes of the basement reads (page-aligned extents).
    basement_read_bytes: u64,
    /// `basement_read_bytes / basements_read`; null without basement reads.
    bytes_per_basement_read: Option<f64>,
    buffers_read: u64,
    buffer_read_bytes: u64,
    headers_read: u64,
    /// Seconds of the closing checkpoint, included in `seconds` (fills only).
    #[serde(skip_serializing_if = "Option::is_none")]
    checkpoint_seconds: Option<f64>,
    /// The filled tree after its closing checkpoint (fills only): the bytes its live node
    /// images take, and the bytes on its free list (freed, not yet reused; on disk unless
    /// punched out), from `TreeHandle::space`.
    #[serde(skip_serializing_if = "Option::is_none")]
    tree_stored_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tree_free_bytes: Option<u64>,
    /// Reader threads (read-random only).
    #[serde(skip_serializing_if = "Option::is_none")]
    threads: Option<usize>,
    /// Gets that found no value or a wrong one (read-random only; must be 0).
    #[serde(skip_serializing_if = "Option::is_none")]
    misses: Option<u64>,
}

/// `IoCounters` in JSON form.
#[derive(Debug, Clone, Default, Serialize)]
struct IoByCategory {
    log: CategoryIo,
    checkpoint: CategoryIo,
    eviction: CategoryIo,
    user_read: CategoryIo,
    meta: CategoryIo,
}

#[derive(Debug, Clone, Default, Serialize)]
struct CategoryIo {
    read_calls: u64,
    read_bytes: u64,
    write_calls: u64,
    write_bytes: u64,
    fsyncs: u64,
}

impl From<&IoCounters> for IoByCategory {
    fn from(io: &IoCounters) -> Self {
        let c = |c: CategoryCounters| CategoryIo {
            read_calls: c.read_calls,
            read_bytes: c.read_bytes,
            write_calls: c.write_calls,
            write_bytes: c.write_bytes,
            fsyncs: c.fsyncs,
        };
        IoByCategory {
            log: c(io.log),
            checkpoint: c(io.checkpoint),
            eviction: c(io.eviction),
            user_read: c(io.user_read),
            meta: c(io.meta),
        }
    }
}

#[derive(Debug, Serialize)]
struct EngineReport {
    workload: &'static str,
    params: Params,
    machine: Machine,
    phases: Vec<Phase>,
    /// The txn phase: one entry per thread count.
    txn: Vec<crate::engine_txn::TxnRun>,
    summary: Summary,
    /// The same phases against RocksDB (feature `rocksdb`).
    #[cfg(feature = "rocksdb")]
    peer: peer_rocksdb::PeerReport,
    /// The same phases against SQLite, the B-tree peer (feature `sqlite`).
    #[cfg(feature = "sqlite")]
    btree_peer: peer_sqlite::BtreePeerReport,
}

/// Runs the engine workload.
pub fn run(args: &EngineArgs) -> Result<()> {
    let mut params = Params::from_args(args)?;
    let work = WorkDir::create(args.dir.as_deref(), "shale-bench-engine-")?;
    params.dir = work.path().display().to_string();
    let outcome = measure(params, work.path());
    work.remove();
    let report = outcome?;
    print_report(&report);
    if let Some(path) = &args.json {
        write_json(&report, path)?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

fn measure(params: Params, dir: &Path) -> Result<EngineReport> {
    let machine = Machine::describe(dir);
    eprintln!(
        "engine: {} ({} on {}), {} keys x {} B values, cache {} MiB, data/cache {}",
        dir.display(),
        machine.filesystem,
        machine.device,
        params.keys,
        params.value_bytes,
        params.cache_bytes / MIB,
        num(params.data_to_cache_ratio)
    );
    if !machine.direct_io {
        eprintln!("warning: O_DIRECT is not available here; reads may hit the page cache");
    }
    let db = dir.join("db");
    let rss_baseline = process::rss_now_bytes();
    let env = Env::open(&db, params.env_options()).context("opening the environment")?;
    let pool = ValuePool::new(params.value_bytes, SEED);
    let random = env.create_tree("random", None)?;
    let sequential = env.create_tree("sequential", None)?;
    let perm = Permutation::new(params.keys, SEED);

    let mut phases = std::thread::scope(|s| -> Result<Vec<Phase>> {
        let watch = MemWatch::start(s, || env.counters().cache_used_bytes);
        let mut phases = Vec::new();
        let mut done = |mut p: Phase| {
            p.memory = watch.take();
            phases.push(p);
        };
        done(fill(&env, &random, "fill-random", &params, &pool, |j| {
            perm.apply(j)
        })?);
        done(fill(
            &env,
            &sequential,
            "fill-sequential",
            &params,
            &pool,
            |j| j,
        )?);
        env.checkpoint().context("checkpoint before reads")?;
        watch.take();
        // The probes of every engine's read phase read the random tree's file (`read_probe`).
        let probe_file = crate::read_probe::largest_file(&db);
        done(read_random(
            &env,
            &random,
            &params,
            &pool,
            probe_file.as_deref(),
        )?);
        done(scan(&env, &random, &params)?);
        Ok(phases)
    })?;
    for p in &mut phases {
        p.rss_peak_over_baseline_bytes = p
            .rss_peak_bytes
            .zip(rss_baseline)
            .map(|(peak, base)| peak.saturating_sub(base));
    }
    // After the timed phases: the tree must verify, and its shape gives the compressed
    // basement size that read-random's bytes per read are held against.
    let shape = random.verify().context("verifying the random tree")?;
    drop((random, sequential));
    env.close().context("closing the environment")?;
    let txn_seconds = params.txn_seconds;
    let cache = usize::try_from(params.cache_bytes).unwrap_or(usize::MAX);
    let txn = crate::engine_txn::run(&dir.join("txn"), cache, params.direct_io, txn_seconds)?;
    #[cfg(feature = "rocksdb")]
    let peer = peer_rocksdb::run(&params, dir, &phases)?;
    #[cfg(feature = "sqlite")]
    let btree_peer = peer_sqlite::run(&params, dir, &phases)?;

    let summary = summarize(&phases, &txn, &params, &shape, machine.direct_io);
    Ok(EngineReport {
        workload: "engine",
        params,
        machine,
        phases,
        txn,
        summary,
        #[cfg(feature = "rocksdb")]
        peer,
        #[cfg(feature = "sqlite")]
        btree_peer,
    })
}

/// Counters at the start of a phase.
struct Start {
    at: Instant,
    cpu: Option<f64>,
    user_cpu: Option<f64>,
    engine: EngineCounters,
    os: Option<ProcIo>,
}

impl Start {
    fn now(env: &Env) -> Start {
        Start {
            os: proc_io::read_self(),
            engine: env.counters(),
            cpu: process::cpu_seconds(),
            user_cpu: process::user_cpu_seconds(),
            at: Instant::now(),
        }
    }
}

/// The figures common to every phase, from the counters at its start and now.
struct PhaseEnd<'a> {
    name: &'static str,
    ops: u64,
    logical_bytes: u64,
    tree: &'a TreeHandle,
    cache_bytes: u64,
}

fn finish(env: &Env, start: &Start, end: PhaseEnd<'_>) -> Phase {
    let seconds = start.at.elapsed().as_secs_f64();
    let cpu_seconds = start.cpu.zip(process::cpu_seconds()).map(|(a, b)| b - a);
    let user_cpu_seconds = start
        .user_cpu
        .zip(process::user_cpu_seconds())
        .map(|(a, b)| b - a);
    let per_op = |c: Option<f64>| c.filter(|_| end.ops > 0).map(|c| c * 1e6 / end.ops as f64);
    let now = env.counters();
    let os_now = proc_io::read_self();
    let io = io_delta(&now.io, &start.engine.io);
    let os = start.os.zip(os_now).map(|(a, b)| b.since(&a));
    let engine_bytes_written = categories(&io).iter().map(|c| c.write_bytes).sum();
    let engine_bytes_read = categories(&io).iter().map(|c| c.read_bytes).sum();
    let os_write_bytes = os.map(|o| o.write_bytes);
    let reads = io.user_read.read_calls;
    let d = |f: fn(&EngineCounters) -> u64| f(&now).saturating_sub(f(&start.engine));
    let (basements_read, basement_read_bytes) =
        (d(|c| c.basements_read), d(|c| c.basement_read_bytes));
    let rss_peak = process::rss_peak_bytes();
    let heap = shale_heap::stats();
    Phase {
        name: end.name,
        ops: end.ops,
        seconds,
        ops_per_sec: end.ops as f64 / seconds.max(1e-9),
        cpu_seconds,
        cpu_us_per_op: per_op(cpu_seconds),
        user_cpu_us_per_op: per_op(user_cpu_seconds),
        logical_bytes: end.logical_bytes,
        engine_bytes_written,
        os_write_bytes,
        write_ratio_engine_to_os: os_write_bytes
            .filter(|&o| o > 0)
            .map(|o| engine_bytes_written as f64 / o as f64),
        engine_reads: reads,
        reads_per_op: if end.ops == 0 {
            0.0
        } else {
            reads as f64 / end.ops as f64
        },
        device_probe: None,
        fraction_of_device_reads: None,
        cache_mix: None,
        bytes_per_read: (reads > 0).then(|| io.user_read.read_bytes as f64 / reads as f64),
        db_bytes_on_disk: env.disk_bytes(),
        rss_peak_bytes: rss_peak,
        rss_peak_over_baseline_bytes: None, // set by `measure`, which knows the baseline
        cache_bytes: end.cache_bytes,
        engine_bytes_read,
        os_read_bytes: os.map(|o| o.read_bytes),
        os_cancelled_write_bytes: os.map(|o| o.cancelled_write_bytes),
        tree_file_bytes: end.tree.file_bytes(),
        engine_io: IoByCategory::from(&io),
        cache_hits: d(|c| c.cache_hits),
        cache_misses: d(|c| c.cache_misses),
        cache_evictions: d(|c| c.cache_evictions),
        cache_peak_bytes: now.cache_peak_bytes,
        cache_used_bytes: now.cache_used_bytes,
        allocated_bytes: heap.map(|h| h.allocated),
        resident_bytes: heap.map(|h| h.resident),
        memory: MemPeaks::default(), // set by `measure`, which runs the sampler
        cache_shrink_bytes: now.cache_shrink_bytes,
        heap_releases: d(|c| c.heap_releases),
        heap_released_bytes: d(|c| c.heap_released_bytes),
        flushes: d(|c| c.flushes),
        writer_flush_units: d(|c| c.writer_flush_units),
        messages_promoted: d(|c| c.messages_promoted),
        leaf_splits: d(|c| c.leaf_splits),
        nodes_read: d(|c| c.nodes_read),
        basements_read,
        basement_read_bytes,
        bytes_per_basement_read: (basements_read > 0)
            .then(|| basement_read_bytes as f64 / basements_read as f64),
        buffers_read: d(|c| c.buffers_read),
        buffer_read_bytes: d(|c| c.buffer_read_bytes),
        headers_read: d(|c| c.headers_read),
        checkpoint_seconds: None,
        tree_stored_bytes: None,
        tree_free_bytes: None,
        threads: None,
        misses: None,
    }
}

fn categories(io: &IoCounters) -> [CategoryCounters; 5] {
    [io.log, io.checkpoint, io.eviction, io.user_read, io.meta]
}

fn io_delta(now: &IoCounters, then: &IoCounters) -> IoCounters {
    let c = |a: CategoryCounters, b: CategoryCounters| CategoryCounters {
        read_calls: a.read_calls.saturating_sub(b.read_calls),
        read_bytes: a.read_bytes.saturating_sub(b.read_bytes),
        write_calls: a.write_calls.saturating_sub(b.write_calls),
        write_bytes: a.write_bytes.saturating_sub(b.write_bytes),
        fsyncs: a.fsyncs.saturating_sub(b.fsyncs),
    };
    IoCounters {
        log: c(now.log, then.log),
        checkpoint: c(now.checkpoint, then.checkpoint),
        eviction: c(now.eviction, then.eviction),
        user_read: c(now.user_read, then.user_read),
        meta: c(now.meta, then.meta),
    }
}

/// Inserts key numbers `order(0..keys)` in batches, then checkpoints; `seconds` covers both.
fn fill(
    env: &Env,
    tree: &TreeHandle,
    name: &'static str,
    params: &Params,
    pool: &ValuePool,
    order: impl Fn(u64) -> u64,
) -> Result<Phase> {
    let mut progress = Progress::new(name, params.keys);
    let start = Start::now(env);
    let mut batch = WriteBatch::new();
    let mut logical = 0u64;
    for j in 0..params.keys {
        let i = order(j);
        let value = pool.value(i);
        batch.put(tree, &keyspace::key(i), value);
        logical += (KEY_BYTES + value.len()) as u64;
        if batch.len() >= BATCH_PUTS {
            env.write(std::mem::take(&mut batch))
                .with_context(|| format!("{name}: write"))?;
            progress.update(j + 1);
        }
    }
    if !batch.is_empty() {
        env.write(batch).with_context(|| format!("{name}: write"))?;
    }
    let checkpoint_at = Instant::now();
    env.checkpoint()
        .with_context(|| format!("{name}: checkpoint"))?;
    let checkpoint_seconds = checkpoint_at.elapsed().as_secs_f64();
    let mut phase = finish(
        env,
        &start,
        PhaseEnd {
            name,
            ops: params.keys,
            logical_bytes: logical,
            tree,
            cache_bytes: params.cache_bytes,
        },
    );
    phase.checkpoint_seconds = Some(checkpoint_seconds);
    // After `finish`, so its header reads are not counted in the phase.
    let space = tree
        .space()
        .with_context(|| format!("{name}: tree space"))?;
    phase.tree_stored_bytes = Some(space.stored_bytes);
    phase.tree_free_bytes = Some(space.free_bytes);
    progress.done(&phase);
    eprintln!(
        "{name}: the tree's node images {} MiB, its free list {} MiB, its file {} MiB, the directory on disk {} MiB",
        space.stored_bytes >> 20,
        space.free_bytes >> 20,
        space.file_bytes >> 20,
        phase.db_bytes_on_disk >> 20
    );
    Ok(phase)
}

/// Point gets of uniformly random existing keys from `read_threads` threads sharing the
/// environment, until `read_ops_limit` gets or `read_seconds_limit` seconds.
fn read_random(
    env: &Env,
    tree: &TreeHandle,
    params: &Params,
    pool: &ValuePool,
    probe_file: Option<&Path>,
) -> Result<Phase> {
    const NAME: &str = "read-random";
    let probe = probe_file.and_then(|f| read_probe::probe(f, params.read_threads));
    let mut progress = Progress::new(NAME, params.read_ops_limit);
    let start = Start::now(env);
    let tally = run_readers(params, pool, start.at, &mut progress, NAME, || {
        let tree = tree.clone();
        Ok(move |key: &[u8], expected: &[u8]| {
            let got = tree.get(key).context("read-random: get")?;
            Ok(got.as_deref() == Some(expected))
        })
    })?;
    let mut phase = finish(
        env,
        &start,
        PhaseEnd {
            name: NAME,
            ops: tally.done,
            logical_bytes: tally.logical_bytes,
            tree,
            cache_bytes: params.cache_bytes,
        },
    );
    phase.threads = Some(params.read_threads);
    phase.misses = Some(tally.misses);
    phase.device_probe = probe;
    phase.fraction_of_device_reads =
        probe.and_then(|p| p.fraction(phase.reads_per_op, phase.ops_per_sec));
    phase.cache_mix = Some(CacheMixBytes::from(tree.cache_mix()));
    progress.done(&phase);
    Ok(phase)
}

/// What the read-random workers did.
struct ReadTally {
    done: u64,
    misses: u64,
    logical_bytes: u64,
}

/// The read-random loop shared by every engine measured: `read_threads` threads, each with
/// its own seeded generator and its own get function from `make_get`, claim gets until
/// `read_ops_limit` or the phase's time limit, and check every value against the pool.
/// `get(key, expected)` says whether the stored value is the expected one.
fn run_readers<G>(
    params: &Params,
    pool: &ValuePool,
    started: Instant,
    progress: &mut Progress,
    label: &str,
    make_get: impl Fn() -> Result<G> + Sync,
) -> Result<ReadTally>
where
    G: FnMut(&[u8], &[u8]) -> Result<bool>,
{
    let claimed = AtomicU64::new(0);
    let done = AtomicU64::new(0);
    let misses = AtomicU64::new(0);
    let logical = AtomicU64::new(0);
    let running = AtomicUsize::new(params.read_threads);
    let deadline = started + Duration::from_secs_f64(params.read_seconds_limit);
    let results: Vec<Result<()>> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..params.read_threads)
            .map(|t| {
                let (claimed, done, misses, logical, running, make_get) =
                    (&claimed, &done, &misses, &logical, &running, &make_get);
                s.spawn(move || -> Result<()> {
                    let mut rng = StdRng::seed_from_u64(SEED ^ (t as u64 + 1));
                    let outcome = (|| {
                        let mut get = make_get()?;
                        while claimed.fetch_add(1, Ordering::Relaxed) < params.read_ops_limit
                            && Instant::now() < deadline
                        {
                            let i = rng.gen_range(0..params.keys);
                            let expected = pool.value(i);
                            if !get(&keyspace::key(i), expected)? {
                                misses.fetch_add(1, Ordering::Relaxed);
                            }
                            logical
                                .fetch_add((KEY_BYTES + expected.len()) as u64, Ordering::Relaxed);
                            done.fetch_add(1, Ordering::Relaxed);
                        }
                        Ok(())
                    })();
                    running.fetch_sub(1, Ordering::SeqCst);
                    outcome
                })
            })
            .collect();
        while running.load(Ordering::SeqCst) > 0 {
            std::thread::sleep(Duration::from_millis(50));
            progress.update(done.load(Ordering::Relaxed));
        }
        workers
            .into_iter()
            .map(|w| {
                w.join()
                    .unwrap_or_else(|_| Err(anyhow!("{label}: a reader panicked")))
            })
            .collect()
    });
    results.into_iter().collect::<Result<Vec<()>>>()?;
    Ok(ReadTally {
        done: done.load(Ordering::Relaxed),
        misses: misses.load(Ordering::Relaxed),
        logical_bytes: logical.load(Ordering::Relaxed),
    })
}

/// One forward cursor pass over the whole tree.
fn scan(env: &Env, tree: &TreeHandle, params: &Params) -> Result<Phase> {
    const NAME: &str = "scan";
    let mut progress = Progress::new(NAME, params.keys);
    let start = Start::now(env);
    let mut cursor = tree.cursor();
    cursor.seek_to_first().context("scan: seek")?;
    let (mut ops, mut logical) = (0u64, 0u64);
    while cursor.valid() {
        ops += 1;
        logical += (cursor.key().len() + cursor.value().len()) as u64;
        cursor.next().context("scan: next")?;
        if ops % 65_536 == 0 {
            progress.update(ops);
        }
    }
    let phase = finish(
        env,
        &start,
        PhaseEnd {
            name: NAME,
            ops,
            logical_bytes: logical,
            tree,
            cache_bytes: params.cache_bytes,
        },
    );
    progress.done(&phase);
    if ops != params.keys {
        eprintln!(
            "warning: scan saw {ops} entries, {} were inserted",
            params.keys
        );
    }
    Ok(phase)
}

/// A one-line progress display on stderr, redrawn at most twice a second.
struct Progress {
    name: &'static str,
    total: u64,
    started: Instant,
    last: Instant,
}

impl Progress {
    fn new(name: &'static str, total: u64) -> Progress {
        eprint!("{name}: starting");
        let _ = std::io::stderr().flush();
        let now = Instant::now();
        Progress {
            name,
            total,
            started: now,
            last: now,
        }
    }

    fn update(&mut self, done: u64) {
        if self.last.elapsed() < Duration::from_millis(500) {
            return;
        }
        self.last = Instant::now();
        let secs = self.started.elapsed().as_secs_f64();
        eprint!(
            "\r{}: {done}/{} ({:.0}%), {} ops/s   ",
            self.name,
            self.total,
            done as f64 * 100.0 / self.total.max(1) as f64,
            num(done as f64 / secs.max(1e-9))
        );
        let _ = std::io::stderr().flush();
    }

    fn done(self, phase: &Phase) {
        eprintln!(
            "\r{}: {} ops in {} s, {} ops/s          ",
            self.name,
            phase.ops,
            num(phase.seconds),
            num(phase.ops_per_sec)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readers_can_share_the_environment() {
        fn shareable<T: Send + Sync>() {}
        shareable::<Env>();
        shareable::<TreeHandle>();
    }

    #[test]
    fn quick_defaults() {
        let args = EngineArgs {
            quick: true,
            json: None,
            dir: None,
            cache_mib: None,
            data_mib: None,
            value_bytes: 100,
            threads: None,
            read_seconds: None,
            txn_seconds: None,
            no_heap_governor: false,
            basement_kib: None,
            node_kib: None,
            compression: None,
        };
        let p = Params::from_args(&args).expect("params");
        assert_eq!(p.cache_bytes, 20 * MIB);
        assert_eq!(p.data_bytes, 200 * MIB);
        assert_eq!(p.read_threads, 1);
        assert_eq!(p.keys, 200 * MIB / 116);
        let bad = |f: fn(&mut EngineArgs)| {
            let mut a = args.clone();
            f(&mut a);
            Params::from_args(&a).is_err()
        };
        assert!(bad(|a| a.compression = Some("snappy".into())));
        assert!(bad(|a| a.basement_kib = Some(0)));
        assert!(bad(|a| a.node_kib = Some(1)));
        let mut small = args.clone();
        small.basement_kib = Some(16);
        small.compression = Some("lz4".into());
        let p = Params::from_args(&small).expect("params");
        assert_eq!(p.basement_size_bytes, 16 << 10);
        assert_eq!(p.compression, "lz4");
    }

    /// A phase with the figures the peer comparisons read and zero elsewhere (1000 ops and
    /// 1000 logical bytes).
    pub(super) fn phase(
        name: &'static str,
        ops_per_sec: f64,
        cpu_us_per_op: f64,
        os_write_bytes: u64,
        db_bytes_on_disk: u64,
    ) -> Phase {
        Phase {
            name,
            ops: 1000,
            seconds: 1000.0 / ops_per_sec,
            ops_per_sec,
            cpu_seconds: Some(cpu_us_per_op * 1000.0 / 1e6),
            cpu_us_per_op: Some(cpu_us_per_op),
            user_cpu_us_per_op: Some(cpu_us_per_op / 2.0),
            logical_bytes: 1000,
            os_write_bytes: Some(os_write_bytes),
            db_bytes_on_disk,
            ..Phase::default()
        }
    }

    #[test]
    fn counter_disagreement_is_flagged() {
        let mut p = phase("fill-random", 1.0, 1.0, 101 * MIB, 0);
        p.engine_bytes_written = 100 * MIB;
        use super::summary::phase_warnings;
        assert!(phase_warnings(&p, true).is_empty());
        p.os_write_bytes = Some(110 * MIB);
        assert_eq!(phase_warnings(&p, true).len(), 1);
    }
}
