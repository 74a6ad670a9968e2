//! `shale-bench`: ShaleDB's benchmark runner. Each workload is a subcommand that prints a
//! table on stdout and, with `--json FILE`, writes the same figures with the machine's facts
//! (see `report::Report`). The targets it measures are in DESIGN.md §6; timed tests never
//! measure them.

mod device;
mod engine;
mod engine_txn;
mod fio;
mod keyspace;
mod latency;
mod machine;
mod report;

use clap::{Parser, Subcommand};

/// jemalloc, as in `shale serve`: the engine's peak RSS is measured with the allocator the
/// server ships with.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;
#[export_name = "_rjem_malloc_conf"]
static JEMALLOC_CONF: &[u8; 59] = shale_engine::JEMALLOC_CONF;

#[derive(Debug, Parser)]
#[command(name = "shale-bench", version, about = "ShaleDB benchmark runner")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Measure the device under a directory: O_DIRECT random reads by block size and queue
    /// depth, sequential write bandwidth and fsync latency (the physical limits).
    Device(device::DeviceArgs),
    /// Drive shale-engine directly: random and sequential fills, random point reads with
    /// the data ten times the cache, and a full scan, with the engine's I/O counters checked
    /// against /proc.
    Engine(engine::EngineArgs),
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Device(args) => device::run(&args),
        Command::Engine(args) => engine::run(&args),
    }
}
