//! The RocksDB peer of the engine workload (cargo feature `rocksdb`, never built by CI).
//! It runs the same four phases as shale — same keys, values, order, batch size, read
//! threads and limits — against RocksDB in a sibling directory, and compares the two.
//!
//! RocksDB settings, chosen to match shale's run:
//! - one block cache of the same bytes as shale's node cache, with index and filter blocks
//!   charged to it (`cache_index_and_filter_blocks`, L0 ones pinned), so neither side has
//!   memory outside the budget; a 10-bit full bloom filter, as RocksDB is usually tuned;
//! - zstd compression on every level;
//! - `use_direct_reads` and `use_direct_io_for_flush_and_compaction`, so reads, flushes and
//!   compactions bypass the OS page cache like shale's O_DIRECT I/O (the WAL stays buffered);
//! - the WAL on, writes with `sync = false` and a background thread calling
//!   `flush_wal(true)` (which syncs the WAL) every `FSYNC_MILLIS`, the equivalent of
//!   shale's `FsyncPolicy::EveryMillis`;
//! - statistics on, for RocksDB's own bytes written (WAL + flush + compaction writes).
//!
//! A fill's `seconds` covers its writes plus a memtable flush (the counterpart of shale's
//! closing checkpoint). The runner then waits for background compactions to finish
//! (`settle_seconds`, not in `seconds`), so that the write and size figures of the phase
//! include the compaction work the fill caused.

use super::peer::{self, end_progress, PeerEnd, PeerPhase, PeerStart, Ratios};
use super::print::mib;
use super::{run_readers, Params, Phase as ShalePhase, Progress, BATCH_PUTS, FSYNC_MILLIS, SEED};
use crate::keyspace::{self, Permutation, ValuePool, KEY_BYTES};
use anyhow::{anyhow, Context, Result};
use rocksdb::{
    BlockBasedOptions, Cache, ColumnFamily, ColumnFamilyDescriptor, DBCompressionType, Options,
    ReadOptions, WriteBatch, WriteOptions, DB,
};
use serde::Serialize;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const CF_RANDOM: &str = "random";
const CF_SEQUENTIAL: &str = "sequential";
/// Statistics tickers whose sum is RocksDB's own count of bytes written to its files.
const WRITE_TICKERS: [&str; 3] = [
    "rocksdb.wal.bytes",
    "rocksdb.flush.write.bytes",
    "rocksdb.compact.write.bytes",
];
/// Blocks RocksDB had to read from its files (every block read goes through the cache).
const READ_TICKER: &str = "rocksdb.block.cache.miss";

/// The peer section of the engine report.
#[derive(Debug, Serialize)]
pub(super) struct PeerReport {
    engine: &'static str,
    dir: String,
    settings: PeerSettings,
    phases: Vec<PeerPhase>,
    ratio_vs_rocksdb: Vec<Ratios>,
}

#[derive(Debug, Serialize)]
struct PeerSettings {
    block_cache_bytes: u64,
    cache_index_and_filter_blocks: bool,
    bloom_bits_per_key: f64,
    compression: &'static str,
    use_direct_reads: bool,
    use_direct_io_for_flush_and_compaction: bool,
    wal: String,
    batch_puts: usize,
    fill_seconds_include: &'static str,
}

/// Runs the four phases against RocksDB under `dir/rocksdb` and compares with `shale`.
pub(super) fn run(params: &Params, dir: &Path, shale: &[ShalePhase]) -> Result<PeerReport> {
    let path = dir.join("rocksdb");
    eprintln!("rocksdb peer: {}", path.display());
    let cache = Cache::new_lru_cache(usize::try_from(params.cache_bytes).unwrap_or(usize::MAX))
        .map_err(|e| anyhow!("rocksdb: block cache: {e}"))?;
    let mut table = BlockBasedOptions::default();
    table.set_block_cache(&cache);
    table.set_cache_index_and_filter_blocks(true);
    table.set_pin_l0_filter_and_index_blocks_in_cache(true);
    table.set_bloom_filter(10.0, false);
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.create_missing_column_families(true);
    opts.set_compression_type(DBCompressionType::Zstd);
    opts.set_use_direct_reads(true);
    opts.set_use_direct_io_for_flush_and_compaction(true);
    opts.set_block_based_table_factory(&table);
    opts.enable_statistics();
    let cfs = [CF_RANDOM, CF_SEQUENTIAL].map(|n| ColumnFamilyDescriptor::new(n, opts.clone()));
    let db = DB::open_cf_descriptors(&opts, &path, cfs)
        .map_err(|e| anyhow!("rocksdb: opening {}: {e}", path.display()))?;
    let outcome = phases(&db, &opts, params, &path);
    drop(db);
    let phases = outcome?;
    let ratio_vs_rocksdb = peer::compare(shale, &phases);
    Ok(PeerReport {
        engine: "rocksdb (crate 0.19, linked against the system librocksdb)",
        dir: path.display().to_string(),
        settings: PeerSettings {
            block_cache_bytes: params.cache_bytes,
            cache_index_and_filter_blocks: true,
            bloom_bits_per_key: 10.0,
            compression: "zstd",
            use_direct_reads: true,
            use_direct_io_for_flush_and_compaction: true,
            wal: format!("on, sync=false, flush_wal(sync) every {FSYNC_MILLIS} ms"),
            batch_puts: BATCH_PUTS,
            fill_seconds_include: "writes + memtable flush; compaction wait is settle_seconds",
        },
        phases,
        ratio_vs_rocksdb,
    })
}

fn phases(db: &DB, opts: &Options, params: &Params, path: &Path) -> Result<Vec<PeerPhase>> {
    let random = cf(db, CF_RANDOM)?;
    let sequential = cf(db, CF_SEQUENTIAL)?;
    let pool = ValuePool::new(params.value_bytes, SEED);
    let perm = Permutation::new(params.keys, SEED);
    let ctx = Ctx {
        db,
        opts,
        params,
        path,
    };
    let mut out = Vec::new();
    let stop = AtomicBool::new(false);
    // The WAL syncer runs through both fills, like shale's log fsync timer.
    let fills = std::thread::scope(|s| {
        let syncer = s.spawn(|| -> Result<()> {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(FSYNC_MILLIS));
                db.flush_wal(true)
                    .map_err(|e| anyhow!("rocksdb: flush_wal: {e}"))?;
            }
            Ok(())
        });
        let fills = (|| -> Result<Vec<PeerPhase>> {
            Ok(vec![
                fill(&ctx, random, "fill-random", &pool, |j| perm.apply(j))?,
                fill(&ctx, sequential, "fill-sequential", &pool, |j| j)?,
            ])
        })();
        stop.store(true, Ordering::Relaxed);
        let synced = syncer
            .join()
            .unwrap_or_else(|_| Err(anyhow!("rocksdb: the WAL syncer panicked")));
        fills.and_then(|f| synced.map(|()| f))
    })?;
    out.extend(fills);
    out.push(read_random(&ctx, CF_RANDOM, &pool)?);
    out.push(scan(&ctx, random)?);
    Ok(out)
}

fn cf<'a>(db: &'a DB, name: &str) -> Result<&'a ColumnFamily> {
    db.cf_handle(name)
        .ok_or_else(|| anyhow!("rocksdb: no column family {name}"))
}

struct Ctx<'a> {
    db: &'a DB,
    opts: &'a Options,
    params: &'a Params,
    path: &'a Path,
}

/// Counters at the start of a phase: the process's and RocksDB's statistics.
struct Start {
    process: PeerStart,
    written: Option<u64>,
    reads: Option<u64>,
}

impl Start {
    fn now(ctx: &Ctx<'_>) -> Start {
        let stats = ctx.opts.get_statistics().unwrap_or_default();
        Start {
            written: bytes_written(&stats),
            reads: ticker(&stats, READ_TICKER),
            process: PeerStart::now(),
        }
    }
}

/// Builds a phase from the counters at its start and now; `seconds` is passed in because a
/// fill's time excludes its compaction wait.
fn finish(
    ctx: &Ctx<'_>,
    start: &Start,
    name: &'static str,
    ops: u64,
    logical: u64,
    seconds: f64,
) -> PeerPhase {
    let stats = ctx.opts.get_statistics().unwrap_or_default();
    let delta = |a: Option<u64>, b: Option<u64>| a.zip(b).map(|(a, b)| b.saturating_sub(a));
    PeerPhase::measure(
        &start.process,
        PeerEnd {
            name,
            ops,
            logical_bytes: logical,
            seconds,
            engine_bytes_written: delta(start.written, bytes_written(&stats)),
            engine_reads: delta(start.reads, ticker(&stats, READ_TICKER)),
            path: ctx.path,
            cache_bytes: ctx.params.cache_bytes,
        },
    )
}

fn fill(
    ctx: &Ctx<'_>,
    cf: &ColumnFamily,
    name: &'static str,
    pool: &ValuePool,
    order: impl Fn(u64) -> u64,
) -> Result<PeerPhase> {
    let label = if name == "fill-random" {
        "rocksdb fill-random"
    } else {
        "rocksdb fill-sequential"
    };
    let mut progress = Progress::new(label, ctx.params.keys);
    let start = Start::now(ctx);
    let mut write = WriteOptions::default();
    write.set_sync(false);
    let mut batch = WriteBatch::default();
    let mut logical = 0u64;
    for j in 0..ctx.params.keys {
        let i = order(j);
        let value = pool.value(i);
        batch.put_cf(cf, keyspace::key(i), value);
        logical += (KEY_BYTES + value.len()) as u64;
        if batch.len() >= BATCH_PUTS {
            ctx.db
                .write_opt(std::mem::take(&mut batch), &write)
                .map_err(|e| anyhow!("rocksdb {name}: write: {e}"))?;
            progress.update(j + 1);
        }
    }
    if !batch.is_empty() {
        ctx.db
            .write_opt(batch, &write)
            .map_err(|e| anyhow!("rocksdb {name}: write: {e}"))?;
    }
    ctx.db
        .flush_cf(cf)
        .map_err(|e| anyhow!("rocksdb {name}: flush: {e}"))?;
    let seconds = start.process.at.elapsed().as_secs_f64();
    let settle_at = Instant::now();
    wait_for_compactions(ctx.db).with_context(|| format!("rocksdb {name}: settling"))?;
    let settle_seconds = settle_at.elapsed().as_secs_f64();
    let mut phase = finish(ctx, &start, name, ctx.params.keys, logical, seconds);
    phase.settle_seconds = Some(settle_seconds);
    end_progress(progress, &phase);
    Ok(phase)
}

/// Waits until RocksDB reports no pending or running compaction and no running flush.
fn wait_for_compactions(db: &DB) -> Result<()> {
    let prop = |name: &str| -> Result<u64> {
        db.property_int_value(name)
            .map_err(|e| anyhow!("rocksdb: property {name}: {e}"))?
            .ok_or_else(|| anyhow!("rocksdb: no property {name}"))
    };
    loop {
        let busy = prop("rocksdb.compaction-pending")?
            + prop("rocksdb.num-running-compactions")?
            + prop("rocksdb.num-running-flushes")?;
        if busy == 0 {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `ColumnFamily` is not `Sync` in this crate version, so each reader looks up `cf_name`.
fn read_random(ctx: &Ctx<'_>, cf_name: &str, pool: &ValuePool) -> Result<PeerPhase> {
    const NAME: &str = "read-random";
    let params = ctx.params;
    let label = "rocksdb read-random";
    // The same file as shale's probe: the random tree's, left in place (`read_probe.rs`).
    let probe = ctx
        .path
        .parent()
        .and_then(|run| crate::read_probe::largest_file(&run.join("db")))
        .and_then(|f| crate::read_probe::probe(&f, params.read_threads));
    let mut progress = Progress::new(label, params.read_ops_limit);
    let start = Start::now(ctx);
    let tally = run_readers(params, pool, start.process.at, &mut progress, label, || {
        let cf = cf(ctx.db, cf_name)?;
        Ok(move |key: &[u8], expected: &[u8]| {
            let got = ctx
                .db
                .get_pinned_cf(cf, key)
                .map_err(|e| anyhow!("rocksdb read-random: get: {e}"))?;
            Ok(got.as_deref() == Some(expected))
        })
    })?;
    let seconds = start.process.at.elapsed().as_secs_f64();
    let mut phase = finish(ctx, &start, NAME, tally.done, tally.logical_bytes, seconds);
    phase.threads = Some(params.read_threads);
    phase.misses = Some(tally.misses);
    phase.device_probe = probe;
    phase.fraction_of_device_reads =
        probe.and_then(|p| p.fraction(phase.reads_per_op?, phase.ops_per_sec));
    end_progress(progress, &phase);
    Ok(phase)
}

fn scan(ctx: &Ctx<'_>, cf: &ColumnFamily) -> Result<PeerPhase> {
    const NAME: &str = "scan";
    let mut progress = Progress::new("rocksdb scan", ctx.params.keys);
    let start = Start::now(ctx);
    let mut it = ctx.db.raw_iterator_cf_opt(cf, ReadOptions::default());
    it.seek_to_first();
    let (mut ops, mut logical) = (0u64, 0u64);
    while let (Some(k), Some(v)) = (it.key(), it.value()) {
        ops += 1;
        logical += (k.len() + v.len()) as u64;
        it.next();
        if ops % 65_536 == 0 {
            progress.update(ops);
        }
    }
    it.status()
        .map_err(|e| anyhow!("rocksdb scan: iterator: {e}"))?;
    drop(it);
    let seconds = start.process.at.elapsed().as_secs_f64();
    let phase = finish(ctx, &start, NAME, ops, logical, seconds);
    end_progress(progress, &phase);
    if ops != ctx.params.keys {
        eprintln!(
            "warning: rocksdb scan saw {ops} entries, {} were inserted",
            ctx.params.keys
        );
    }
    Ok(phase)
}

/// The value of a statistics ticker (`NAME COUNT : N` lines of `Options::get_statistics`).
fn ticker(stats: &str, name: &str) -> Option<u64> {
    stats.lines().find_map(|line| {
        let rest = line.strip_prefix(name)?.trim_start();
        let count = rest.strip_prefix("COUNT")?.trim_start().strip_prefix(':')?;
        count.trim().parse().ok()
    })
}

fn bytes_written(stats: &str) -> Option<u64> {
    WRITE_TICKERS
        .iter()
        .map(|t| ticker(stats, t))
        .sum::<Option<u64>>()
}

/// The RocksDB table and the shale/RocksDB ratios, after shale's table.
pub(super) fn print(r: &PeerReport) {
    println!();
    println!(
        "rocksdb peer: block cache {}, zstd, direct reads + direct flush/compaction, WAL sync every {FSYNC_MILLIS} ms",
        mib(r.settings.block_cache_bytes)
    );
    peer::print("rocksdb", &r.phases, &r.ratio_vs_rocksdb);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_statistics_tickers() {
        let stats = "rocksdb.block.cache.miss COUNT : 12\n\
                     rocksdb.wal.bytes COUNT : 100\n\
                     rocksdb.flush.write.bytes COUNT : 20\n\
                     rocksdb.compact.write.bytes COUNT : 3\n\
                     rocksdb.db.get.micros P50 : 1.0 P95 : 2.0 COUNT : 7 SUM : 9\n";
        assert_eq!(ticker(stats, READ_TICKER), Some(12));
        assert_eq!(bytes_written(stats), Some(123));
        assert_eq!(ticker(stats, "rocksdb.db.get.micros"), None);
        assert_eq!(bytes_written("rocksdb.wal.bytes COUNT : 1\n"), None);
    }
}
