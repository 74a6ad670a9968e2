//! `shale-bench`: ShaleDB's benchmark runner. Each workload is a subcommand that prints a
//! table on stdout and, with `--json FILE`, writes the same figures with the machine's facts
//! (see `report::Report`). The targets it measures are in docs/design.md §6; timed tests never
//! measure them.

mod device;
mod doc_scan;
mod engine;
mod engine_txn;
mod fio;
mod keyspace;
mod latency;
mod machine;
mod memwatch;
mod process;
mod read_probe;
mod report;
mod wire;

use clap::{Parser, Subcommand};

/// jemalloc, as in `shale serve`: the engine's peak RSS is measured with the allocator the
/// server ships with.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;
#[export_name = "_rjem_malloc_conf"]
static JEMALLOC_CONF: &[u8; 69] = shale_heap::JEMALLOC_CONF;

#[derive(Debug, Parser)]
#[command(
    name = "shale-bench",
    version,
    about = "ShaleDB benchmark runner",
    after_help = "Every workload takes --quick for tiny sizes (about a minute each) and --json FILE \
                  for its figures; `shale-bench <COMMAND> --help` lists the rest."
)]
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
    /// The walk a query makes past a stored document's fields: ns per element for a lookup
    /// of the last field and for a full walk, over documents of 10..1000 fields (no server)
    DocScan(doc_scan::DocScanArgs),
    /// Wire protocol: find({_id, y}) with N attributes before y (N = 1..1000), one client
    NthAttribute(wire::WireArgs),
    /// Wire protocol: 309-byte inserts with j:true at 1, 8, 32 clients; log bytes and fsyncs
    /// against what the OS and the device saw
    LogWriteAmp(wire::WireArgs),
    /// Wire protocol: the AOL SummaryModel load, size per document and owner sync scans
    /// (read from a clustering index on ShaleDB unless --no-clustering)
    Bakeoff(wire::BakeoffArgs),
    /// Wire protocol: IO-bound point lookups by _id by read page size and clients, against
    /// the device's random-read limit
    PkLookup(wire::PkLookupArgs),
    /// Wire protocol: inserts with 3 secondary indexes and concurrent range queries
    Iibench(wire::WireArgs),
    /// Wire protocol: cached find_one({_id}) from 1 and 40 clients, with the server's CPU
    /// per query
    PointFind(wire::WireArgs),
    /// Wire protocol: random $inc by _id over data 10x the cache, with fastUpdates off and
    /// on (TokuMX's read-free updates): updates/s, device reads and server CPU per update
    FastUpdate(wire::WireArgs),
    /// Wire protocol: 40 clients of mixed work (finds by _id and by an index, updates,
    /// inserts, short scans) for 10 minutes over data twice the cache: throughput, p50/p99
    /// and errors per minute, server RSS against cache + 64 MiB + the in-flight cap, then
    /// restart times after short-lived runs killed with SIGKILL
    Soak(wire::SoakArgs),
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Device(args) => device::run(&args),
        Command::Engine(args) => engine::run(&args),
        Command::DocScan(args) => doc_scan::run(&args),
        Command::NthAttribute(args) => wire::run::<wire::NthAttribute>(&args),
        Command::LogWriteAmp(args) => wire::run::<wire::LogWriteAmp>(&args),
        Command::Bakeoff(args) => {
            wire::run_with::<wire::Bakeoff>(&args.wire, wire::Bakeoff::params_for(&args)?)
        }
        Command::PkLookup(args) => {
            wire::run_with::<wire::PkLookup>(&args.wire, wire::PkLookup::params_for(&args)?)
        }
        Command::Iibench(args) => wire::run::<wire::Iibench>(&args),
        Command::PointFind(args) => wire::run::<wire::PointFind>(&args),
        Command::FastUpdate(args) => wire::run::<wire::FastUpdate>(&args),
        Command::Soak(args) => {
            wire::run_with::<wire::Soak>(&args.wire, wire::Soak::params_for(&args)?)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Cli;
    use clap::CommandFactory;

    /// The top-level help promises --quick and --json on every workload (issue 28); each
    /// subcommand must take both.
    #[test]
    fn every_workload_takes_quick_and_json() {
        let help = Cli::command().render_long_help().to_string();
        assert!(
            help.contains("--quick") && help.contains("--json"),
            "{help}"
        );
        let cli = Cli::command();
        for sub in cli.get_subcommands().filter(|s| s.get_name() != "help") {
            for flag in ["quick", "json"] {
                assert!(
                    sub.get_arguments().any(|a| a.get_long() == Some(flag)),
                    "shale-bench {} has no --{flag}",
                    sub.get_name()
                );
            }
        }
    }
}
