//! The `device` workload: the physical limits of the storage under a directory, measured
//! through `shale_io::DataFile` exactly as the engine does its I/O (O_DIRECT, one synchronous
//! pread per operation, one thread per queue slot). It owns the test files, the timed
//! worker loops, and the table and JSON of random-read IOPS and latency by block size and
//! queue depth, sequential write bandwidth and fsync latency. Later workloads report their
//! figures against these.

use crate::fio;
use crate::latency::{Samples, Summary};
use crate::machine::Machine;
use crate::report::{bytes, num, Report, Table};
use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};
use serde::Serialize;
use shale_io::{AlignedBuf, Category, DataFile, IoStats, OpenMode, PAGE_SIZE};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

const KIB: usize = 1024;
const MIB: usize = 1024 * 1024;
/// Random-read block sizes.
const BLOCK_SIZES: [usize; 4] = [4 * KIB, 8 * KIB, 16 * KIB, 64 * KIB];
/// Random-read queue depths (threads, each doing synchronous preads).
const QUEUE_DEPTHS: [usize; 3] = [1, 8, 32];
/// The random-read points also run through fio when it is installed: (block, depth).
const FIO_POINTS: [(usize, usize); 2] = [(4 * KIB, 1), (4 * KIB, 32)];
const SEQ_WRITE_BLOCK: usize = MIB;
const FSYNC_BLOCK: usize = 4 * KIB;
/// Upper bound on the operations (and so latency samples, 8 bytes each) of one
/// measurement, whatever its duration: keeps every loop bounded on a very fast device.
const MAX_OPS: u64 = 1 << 24;
/// The sequential-write file is this many times the read test file; writes wrap around.
const SEQ_WRITE_FILE_FACTOR: u64 = 4;

/// `shale-bench device`: measure the device under a directory.
#[derive(Debug, Clone, Args)]
pub struct DeviceArgs {
    /// Directory on the device to measure; the test files go in a fresh subdirectory that
    /// is removed afterwards [default: a temporary directory under ./data-bench]
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Shorter run: a 128 MiB test file and 1 s per measurement
    #[arg(long)]
    pub quick: bool,
    /// Also write the results as JSON to FILE
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Seconds per measurement [default: 5, or 1 with --quick]
    #[arg(long, value_name = "SECS")]
    pub seconds: Option<f64>,
    /// Size of the random-read test file in MiB [default: 1024, or 128 with --quick]
    #[arg(long, value_name = "MIB")]
    pub file_mib: Option<u64>,
}

#[derive(Debug, Serialize)]
struct Params {
    dir: String,
    quick: bool,
    seconds: f64,
    file_bytes: u64,
    block_sizes: Vec<usize>,
    queue_depths: Vec<usize>,
    seq_write_block_bytes: usize,
    seq_write_file_bytes: u64,
    fsync_block_bytes: usize,
    fio: FioStatus,
}

#[derive(Debug, Serialize)]
struct FioStatus {
    available: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
}

#[derive(Debug, Serialize)]
#[serde(tag = "test", rename_all = "snake_case")]
enum TestResult {
    RandomRead(RandomRead),
    SeqWrite(SeqWrite),
    Fsync(Fsync),
}

#[derive(Debug, Serialize)]
struct RandomRead {
    block_bytes: usize,
    queue_depth: usize,
    iops: f64,
    mib_per_sec: f64,
    p50_us: f64,
    p99_us: f64,
    mean_us: f64,
    ops: u64,
    seconds: f64,
    /// Bytes the I/O layer's counters saw read (padding included): equals ops x block.
    counted_read_bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    fio_iops: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    fio_p50_us: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    fio_p99_us: Option<f64>,
}

#[derive(Debug, Serialize)]
struct SeqWrite {
    block_bytes: usize,
    queue_depth: usize,
    mib_per_sec: f64,
    iops: f64,
    p50_us: f64,
    p99_us: f64,
    ops: u64,
    bytes: u64,
    /// Time of the writes plus the closing fdatasync.
    seconds: f64,
}

#[derive(Debug, Serialize)]
struct Fsync {
    block_bytes: usize,
    queue_depth: usize,
    fsyncs_per_sec: f64,
    p50_us: f64,
    p99_us: f64,
    mean_us: f64,
    ops: u64,
    seconds: f64,
}

#[derive(Debug, Serialize)]
struct DeviceSummary {
    random_read_4k_qd1_iops: f64,
    random_read_4k_qd32_iops: f64,
    seq_write_mib_per_sec: f64,
    fsync_p50_us: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    fio_random_read_4k_qd1_iops: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    fio_random_read_4k_qd32_iops: Option<f64>,
}

/// The settings of one run after defaults are applied.
struct Plan {
    seconds: f64,
    file_bytes: u64,
}

impl Plan {
    fn from_args(args: &DeviceArgs) -> Result<Plan> {
        let seconds = args.seconds.unwrap_or(if args.quick { 1.0 } else { 5.0 });
        if !(seconds.is_finite() && seconds > 0.0 && seconds <= 3600.0) {
            bail!("--seconds must be in (0, 3600], got {seconds}");
        }
        let file_mib = args.file_mib.unwrap_or(if args.quick { 128 } else { 1024 });
        if !(1..=1 << 20).contains(&file_mib) {
            bail!("--file-mib must be in [1, 1048576], got {file_mib}");
        }
        Ok(Plan {
            seconds,
            file_bytes: file_mib * MIB as u64,
        })
    }

    fn duration(&self) -> Duration {
        Duration::from_secs_f64(self.seconds)
    }
}

/// Runs the device workload.
pub fn run(args: &DeviceArgs) -> Result<()> {
    let plan = Plan::from_args(args)?;
    let work = WorkDir::create(args.dir.as_deref(), "shale-bench-device-")?;
    let outcome = measure(args, &plan, work.path());
    work.remove();
    let report = outcome?;
    print_report(&report, &plan);
    if let Some(path) = &args.json {
        report.write_json(path)?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

type DeviceReport = Report<Params, TestResult, DeviceSummary>;

fn measure(args: &DeviceArgs, plan: &Plan, dir: &Path) -> Result<DeviceReport> {
    let machine = Machine::describe(dir);
    let dur = plan.duration();
    eprintln!(
        "device: {} ({} on {}), {} per measurement",
        dir.display(),
        machine.filesystem,
        machine.device,
        fmt_secs(plan.seconds)
    );
    let stats = Arc::new(IoStats::default());

    let read_path = dir.join("random-read.dat");
    let file = DataFile::open(&read_path, OpenMode::CreateNew, true, stats.clone(), None)?;
    if !file.is_direct() {
        eprintln!("warning: O_DIRECT is not available here; reads may be served by the page cache");
    }
    fill_random(&file, plan.file_bytes)?;

    let fio_bin = fio::find_on_path();
    let fio_version = fio_bin.as_deref().and_then(fio::version);
    let mut fio_note = None;
    if fio_bin.is_none() {
        fio_note = Some("fio not found on PATH (not installed): cross-check skipped".to_owned());
    }

    let mut results = Vec::new();
    for &bs in &BLOCK_SIZES {
        for &qd in &QUEUE_DEPTHS {
            let mut r = random_read(&file, &stats, plan.file_bytes, bs, qd, dur)?;
            eprintln!(
                "random read {:>6} QD{:<2}: {:>9} IOPS  p50 {} us  p99 {} us",
                bytes(bs as u64),
                qd,
                num(r.iops),
                num(r.p50_us),
                num(r.p99_us)
            );
            if let Some(bin) = fio_bin
                .as_deref()
                .filter(|_| FIO_POINTS.contains(&(bs, qd)))
            {
                match fio::random_read(
                    bin,
                    &read_path,
                    plan.file_bytes,
                    bs,
                    qd,
                    file.is_direct(),
                    dur,
                ) {
                    Ok(f) => {
                        eprintln!("  fio: {} IOPS", num(f.iops));
                        r.fio_iops = Some(f.iops);
                        r.fio_p50_us = f.p50_us;
                        r.fio_p99_us = f.p99_us;
                    }
                    Err(e) => {
                        eprintln!("  fio failed: {e:#}");
                        fio_note = Some(format!("fio failed: {e:#}"));
                    }
                }
            }
            results.push(TestResult::RandomRead(r));
        }
    }
    drop(file);
    std::fs::remove_file(&read_path)
        .with_context(|| format!("removing {}", read_path.display()))?;

    let seq_file_bytes = plan.file_bytes * SEQ_WRITE_FILE_FACTOR;
    let seq = seq_write(dir, &stats, seq_file_bytes, dur)?;
    eprintln!(
        "sequential write 1 MiB: {} MiB/s  p50 {} us  p99 {} us",
        num(seq.mib_per_sec),
        num(seq.p50_us),
        num(seq.p99_us)
    );
    let fs = fsync(dir, &stats, dur)?;
    eprintln!(
        "fsync (4 KiB append + fdatasync): {} /s  p50 {} us  p99 {} us",
        num(fs.fsyncs_per_sec),
        num(fs.p50_us),
        num(fs.p99_us)
    );

    let point = |bs: usize, qd: usize| {
        results.iter().find_map(|r| match r {
            TestResult::RandomRead(r) if r.block_bytes == bs && r.queue_depth == qd => Some(r),
            _ => None,
        })
    };
    let (qd1, qd32) = (
        point(4 * KIB, 1).ok_or_else(|| anyhow!("no 4 KiB QD1 point"))?,
        point(4 * KIB, 32).ok_or_else(|| anyhow!("no 4 KiB QD32 point"))?,
    );
    let summary = DeviceSummary {
        random_read_4k_qd1_iops: qd1.iops,
        random_read_4k_qd32_iops: qd32.iops,
        seq_write_mib_per_sec: seq.mib_per_sec,
        fsync_p50_us: fs.p50_us,
        fio_random_read_4k_qd1_iops: qd1.fio_iops,
        fio_random_read_4k_qd32_iops: qd32.fio_iops,
    };
    results.push(TestResult::SeqWrite(seq));
    results.push(TestResult::Fsync(fs));

    Ok(Report {
        workload: "device",
        params: Params {
            dir: dir.display().to_string(),
            quick: args.quick,
            seconds: plan.seconds,
            file_bytes: plan.file_bytes,
            block_sizes: BLOCK_SIZES.to_vec(),
            queue_depths: QUEUE_DEPTHS.to_vec(),
            seq_write_block_bytes: SEQ_WRITE_BLOCK,
            seq_write_file_bytes: seq_file_bytes,
            fsync_block_bytes: FSYNC_BLOCK,
            fio: FioStatus {
                available: fio_bin.is_some(),
                version: fio_version,
                note: fio_note,
            },
        },
        machine,
        results,
        summary,
    })
}

/// Random-read IOPS of the device under `parent` at every block size and queue depth of this
/// workload, `dur` per point, on a `file_mib` test file that is removed afterwards: the
/// limits the wire workloads report their query rates against. (block bytes, depth, IOPS).
pub(crate) fn random_read_limits(
    parent: &Path,
    file_mib: u64,
    dur: Duration,
) -> Result<Vec<(usize, usize, f64)>> {
    let work = WorkDir::create(Some(parent), "shale-bench-device-")?;
    let measured = (|| {
        let stats = Arc::new(IoStats::default());
        let path = work.path().join("random-read.dat");
        let file = DataFile::open(&path, OpenMode::CreateNew, true, stats.clone(), None)?;
        let file_bytes = file_mib * MIB as u64;
        fill_random(&file, file_bytes)?;
        let mut out = Vec::new();
        for &bs in &BLOCK_SIZES {
            for &qd in &QUEUE_DEPTHS {
                let r = random_read(&file, &stats, file_bytes, bs, qd, dur)?;
                out.push((bs, qd, r.iops));
            }
        }
        Ok(out)
    })();
    work.remove();
    measured
}

/// Random `bs`-byte O_DIRECT reads per second from `qd` threads over the existing file
/// `path`, for `dur`: the device's rate at this moment (`read_probe.rs`).
pub(crate) fn random_read_iops(path: &Path, bs: usize, qd: usize, dur: Duration) -> Result<f64> {
    let stats = Arc::new(IoStats::default());
    let file = DataFile::open(path, OpenMode::Existing, true, stats.clone(), None)?;
    let len = std::fs::metadata(path)?.len();
    Ok(random_read(&file, &stats, len, bs, qd, dur)?.iops)
}

/// Writes `len` bytes of fresh random (incompressible) data in 1 MiB O_DIRECT writes and
/// makes them durable.
fn fill_random(file: &DataFile, len: u64) -> Result<()> {
    let started = Instant::now();
    let mut rng = StdRng::from_entropy();
    let mut buf = AlignedBuf::zeroed(MIB);
    let mut off = 0;
    while off < len {
        let n = (len - off).min(MIB as u64) as usize;
        buf.set_len(n);
        rng.fill_bytes(&mut buf);
        file.write_at(off, &buf, Category::Meta)?;
        off += n as u64;
    }
    file.sync(Category::Meta)?;
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "wrote {} test file of random bytes in {} s",
        bytes(len),
        num(secs)
    );
    Ok(())
}

/// What [`timed`] measured: every operation's latency and the wall time of the whole run.
struct Run {
    latency: Summary,
    ops: u64,
    seconds: f64,
}

impl Run {
    fn per_sec(&self) -> f64 {
        self.ops as f64 / self.seconds
    }
}

/// Runs `workers` threads for `dur` (or until `max_ops` operations in all). Each thread
/// builds its operation with `make(worker_index)` before the common start, then calls it
/// with its operation sequence number; the operation returns the latency it measured around
/// its own I/O call.
fn timed<M, G>(workers: usize, dur: Duration, max_ops: u64, make: M) -> Result<Run>
where
    M: Fn(usize) -> Result<G> + Sync,
    G: FnMut(u64) -> Result<Duration>,
{
    let per_worker = (max_ops / workers as u64).max(1);
    let barrier = Barrier::new(workers);
    let outcomes: Vec<Result<(Samples, Instant, Instant)>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|w| {
                let (make, barrier) = (&make, &barrier);
                s.spawn(move || {
                    let op = make(w);
                    barrier.wait();
                    let mut op = op?;
                    let mut samples = Samples::with_capacity(per_worker.min(1 << 16) as usize);
                    let begin = Instant::now();
                    let deadline = begin + dur;
                    let mut seq = 0;
                    let mut now = begin;
                    while seq < per_worker && now < deadline {
                        samples.record(op(seq)?);
                        seq += 1;
                        now = Instant::now();
                    }
                    Ok((samples, begin, now))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow!("benchmark worker panicked")))
            })
            .collect()
    });
    let mut all = Samples::default();
    let (mut first, mut last): (Option<Instant>, Option<Instant>) = (None, None);
    for o in outcomes {
        let (samples, begin, end) = o?;
        all.merge(samples);
        first = Some(first.map_or(begin, |f| f.min(begin)));
        last = Some(last.map_or(end, |l| l.max(end)));
    }
    let seconds = match (first, last) {
        (Some(f), Some(l)) => (l - f).as_secs_f64().max(1e-9),
        _ => bail!("no benchmark workers ran"),
    };
    let ops = all.len() as u64;
    Ok(Run {
        latency: all.summarize(),
        ops,
        seconds,
    })
}

/// `qd` threads each reading `bs`-byte blocks at uniformly random block-aligned offsets.
fn random_read(
    file: &DataFile,
    stats: &IoStats,
    file_bytes: u64,
    bs: usize,
    qd: usize,
    dur: Duration,
) -> Result<RandomRead> {
    let blocks = file_bytes / bs as u64;
    if blocks == 0 {
        bail!(
            "test file of {} is smaller than one {} block",
            bytes(file_bytes),
            bytes(bs as u64)
        );
    }
    let before = stats.snapshot().user_read.read_bytes;
    let run = timed(qd, dur, MAX_OPS, |_| {
        let mut rng = StdRng::from_entropy();
        Ok(move |_| {
            let off = rng.gen_range(0..blocks) * bs as u64;
            let t = Instant::now();
            let got = file.read_exact_at(off, bs, Category::UserRead)?;
            let d = t.elapsed();
            std::hint::black_box(&got);
            Ok(d)
        })
    })?;
    let counted = stats.snapshot().user_read.read_bytes - before;
    let iops = run.per_sec();
    Ok(RandomRead {
        block_bytes: bs,
        queue_depth: qd,
        iops,
        mib_per_sec: iops * bs as f64 / MIB as f64,
        p50_us: run.latency.p50_us,
        p99_us: run.latency.p99_us,
        mean_us: run.latency.mean_us,
        ops: run.ops,
        seconds: run.seconds,
        counted_read_bytes: counted,
        fio_iops: None,
        fio_p50_us: None,
        fio_p99_us: None,
    })
}

/// A few random buffers whose every 4 KiB page gets a fresh stamp before each use, so no two
/// written pages are alike (nothing for a compressing or deduplicating device to gain) and
/// no random generation is timed.
struct Stamped {
    bufs: Vec<AlignedBuf>,
}

impl Stamped {
    fn new(len: usize, count: usize) -> Stamped {
        let mut rng = StdRng::from_entropy();
        let bufs = (0..count)
            .map(|_| {
                let mut b = AlignedBuf::zeroed(len);
                rng.fill_bytes(&mut b);
                b
            })
            .collect();
        Stamped { bufs }
    }

    fn next(&mut self, seq: u64) -> &AlignedBuf {
        let i = (seq % self.bufs.len() as u64) as usize;
        let buf = &mut self.bufs[i];
        for (page, chunk) in buf.chunks_mut(PAGE_SIZE).enumerate() {
            let stamp = (seq << 16) ^ page as u64;
            chunk[..8].copy_from_slice(&stamp.to_le_bytes());
        }
        &self.bufs[i]
    }
}

/// 1 MiB O_DIRECT writes at increasing offsets of a new file (wrapping at `file_bytes`),
/// then one fdatasync; bandwidth counts the sync.
fn seq_write(dir: &Path, stats: &Arc<IoStats>, file_bytes: u64, dur: Duration) -> Result<SeqWrite> {
    let path = dir.join("seq-write.dat");
    let file = DataFile::open(&path, OpenMode::CreateNew, true, stats.clone(), None)?;
    let slots = (file_bytes / SEQ_WRITE_BLOCK as u64).max(1);
    let run = timed(1, dur, MAX_OPS, |_| {
        let mut data = Stamped::new(SEQ_WRITE_BLOCK, 4);
        let file = &file;
        Ok(move |seq| {
            let off = (seq % slots) * SEQ_WRITE_BLOCK as u64;
            let buf = data.next(seq);
            let t = Instant::now();
            file.write_at(off, buf, Category::Checkpoint)?;
            Ok(t.elapsed())
        })
    })?;
    let t = Instant::now();
    file.sync(Category::Checkpoint)?;
    let seconds = run.seconds + t.elapsed().as_secs_f64();
    drop(file);
    std::fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
    let total = run.ops * SEQ_WRITE_BLOCK as u64;
    Ok(SeqWrite {
        block_bytes: SEQ_WRITE_BLOCK,
        queue_depth: 1,
        mib_per_sec: total as f64 / MIB as f64 / seconds,
        iops: run.ops as f64 / seconds,
        p50_us: run.latency.p50_us,
        p99_us: run.latency.p99_us,
        ops: run.ops,
        bytes: total,
        seconds,
    })
}

/// Appends one 4 KiB O_DIRECT page to a new file and fdatasyncs it, over and over: the cost
/// of one durable log write. The latency is that of the write and the sync together.
fn fsync(dir: &Path, stats: &Arc<IoStats>, dur: Duration) -> Result<Fsync> {
    let path = dir.join("fsync.dat");
    let file = DataFile::open(&path, OpenMode::CreateNew, true, stats.clone(), None)?;
    let run = timed(1, dur, MAX_OPS, |_| {
        let mut data = Stamped::new(FSYNC_BLOCK, 1);
        let file = &file;
        Ok(move |seq| {
            let off = seq * FSYNC_BLOCK as u64;
            let buf = data.next(seq);
            let t = Instant::now();
            file.write_at(off, buf, Category::Log)?;
            file.sync(Category::Log)?;
            Ok(t.elapsed())
        })
    })?;
    drop(file);
    std::fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
    Ok(Fsync {
        block_bytes: FSYNC_BLOCK,
        queue_depth: 1,
        fsyncs_per_sec: run.per_sec(),
        p50_us: run.latency.p50_us,
        p99_us: run.latency.p99_us,
        mean_us: run.latency.mean_us,
        ops: run.ops,
        seconds: run.seconds,
    })
}

fn print_report(r: &DeviceReport, plan: &Plan) {
    let m = &r.machine;
    println!(
        "device: {} on {} ({}), O_DIRECT {}; {} cores, {} memory",
        m.filesystem,
        m.device,
        m.mount_point,
        if m.direct_io {
            "yes"
        } else {
            "NO (buffered fallback)"
        },
        m.cores,
        bytes(m.memory_bytes)
    );
    println!(
        "test file {} of random bytes, {} per measurement",
        bytes(plan.file_bytes),
        fmt_secs(plan.seconds)
    );
    println!();
    println!("random read (one thread per queue slot, synchronous pread through DataFile)");
    let mut t = Table::new([
        "block", "QD", "IOPS", "MiB/s", "p50 us", "p99 us", "fio IOPS",
    ]);
    let mut seq_t = Table::new(["", "MiB/s", "IOPS", "p50 us", "p99 us"]);
    let mut fs_t = Table::new(["", "fsyncs/s", "p50 us", "p99 us"]);
    for res in &r.results {
        match res {
            TestResult::RandomRead(x) => t.row([
                bytes(x.block_bytes as u64),
                x.queue_depth.to_string(),
                num(x.iops),
                num(x.mib_per_sec),
                num(x.p50_us),
                num(x.p99_us),
                x.fio_iops.map_or_else(|| "-".to_owned(), num),
            ]),
            TestResult::SeqWrite(x) => seq_t.row([
                "sequential write, 1 MiB O_DIRECT".to_owned(),
                num(x.mib_per_sec),
                num(x.iops),
                num(x.p50_us),
                num(x.p99_us),
            ]),
            TestResult::Fsync(x) => fs_t.row([
                "4 KiB O_DIRECT append + fdatasync".to_owned(),
                num(x.fsyncs_per_sec),
                num(x.p50_us),
                num(x.p99_us),
            ]),
        }
    }
    print!("{}", t.render());
    println!();
    print!("{}", seq_t.render());
    println!();
    print!("{}", fs_t.render());
    println!();
    let fio = &r.params.fio;
    match (&fio.note, &fio.version) {
        (Some(note), _) => println!("{note}"),
        (None, Some(v)) => println!("fio: {v}, same file, psync engine, one job per queue slot"),
        (None, None) => println!("fio: available"),
    }
}

fn fmt_secs(s: f64) -> String {
    format!("{s} s")
}

/// The directory the test files live in: a fresh temporary directory, under `--dir` or
/// under `./data-bench`. Directories created to hold it are removed again at the end if
/// they are empty.
pub(crate) struct WorkDir {
    tmp: tempfile::TempDir,
    /// Directories we created, innermost first.
    created: Vec<PathBuf>,
}

impl WorkDir {
    pub(crate) fn create(dir: Option<&Path>, prefix: &str) -> Result<WorkDir> {
        let parent = dir.map_or_else(|| PathBuf::from("data-bench"), Path::to_owned);
        let created: Vec<PathBuf> = parent
            .ancestors()
            .take_while(|a| !a.as_os_str().is_empty() && !a.exists())
            .map(Path::to_owned)
            .collect();
        std::fs::create_dir_all(&parent)
            .with_context(|| format!("creating {}", parent.display()))?;
        let tmp = tempfile::Builder::new()
            .prefix(prefix)
            .tempdir_in(&parent)
            .with_context(|| format!("creating a temporary directory in {}", parent.display()))?;
        Ok(WorkDir { tmp, created })
    }

    pub(crate) fn path(&self) -> &Path {
        self.tmp.path()
    }

    pub(crate) fn remove(self) {
        let path = self.tmp.path().to_owned();
        if let Err(e) = self.tmp.close() {
            eprintln!("warning: could not remove {}: {e}", path.display());
        }
        for dir in &self.created {
            if std::fs::remove_dir(dir).is_err() {
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timed_stops_at_the_operation_bound() {
        let run = timed(2, Duration::from_secs(60), 10, |_| {
            Ok(|_| Ok(Duration::from_micros(3)))
        })
        .expect("run");
        assert_eq!(run.ops, 10);
        assert_eq!(run.latency.p50_us, 3.0);
    }

    #[test]
    fn timed_stops_at_the_deadline() {
        let run = timed(3, Duration::from_millis(20), u64::MAX, |_| {
            Ok(|_| {
                std::thread::sleep(Duration::from_millis(1));
                Ok(Duration::from_millis(1))
            })
        })
        .expect("run");
        assert!(run.ops >= 3);
    }

    #[test]
    fn worker_errors_are_returned() {
        let r = timed(2, Duration::from_secs(60), 100, |w| {
            Ok(move |seq| {
                if w == 1 && seq == 3 {
                    bail!("boom");
                }
                Ok(Duration::from_nanos(1))
            })
        });
        assert!(r.is_err());
    }

    #[test]
    fn stamped_pages_differ() {
        let mut s = Stamped::new(2 * PAGE_SIZE, 1);
        let a = s.next(1).to_vec();
        let b = s.next(2).to_vec();
        assert_ne!(a[..PAGE_SIZE], b[..PAGE_SIZE]);
        assert_ne!(a[..8], a[PAGE_SIZE..PAGE_SIZE + 8]);
    }

    #[test]
    fn work_dir_removes_only_what_it_created() {
        let base = tempfile::tempdir().expect("tempdir");
        let keep = base.path().join("keep");
        std::fs::create_dir(&keep).expect("mkdir");
        let w = WorkDir::create(Some(&keep.join("a/b")), "shale-bench-device-").expect("create");
        assert!(w.path().starts_with(keep.join("a/b")));
        w.remove();
        assert!(keep.exists());
        assert!(!keep.join("a").exists());
    }

    #[test]
    fn plan_defaults_and_overrides() {
        let args = |quick, seconds, file_mib| DeviceArgs {
            dir: None,
            quick,
            json: None,
            seconds,
            file_mib,
        };
        let p = Plan::from_args(&args(false, None, None)).expect("plan");
        assert_eq!((p.seconds, p.file_bytes), (5.0, 1 << 30));
        let p = Plan::from_args(&args(true, None, None)).expect("plan");
        assert_eq!((p.seconds, p.file_bytes), (1.0, 128 << 20));
        let p = Plan::from_args(&args(true, Some(0.2), Some(16))).expect("plan");
        assert_eq!((p.seconds, p.file_bytes), (0.2, 16 << 20));
        assert!(Plan::from_args(&args(true, Some(0.0), None)).is_err());
        assert!(Plan::from_args(&args(true, None, Some(0))).is_err());
    }
}
