//! The `shale` binary. `shale serve` opens the data directory on the built-in engine and
//! serves the MongoDB wire protocol, with mongod's flag names and defaults. SIGINT or SIGTERM
//! stops accepting connections and closes the database cleanly before exiting.

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use shale_db::{Database, DbOptions};
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;

/// jemalloc: glibc malloc's per-thread arenas fragment under the engine's mix of small entries
/// and multi-megabyte node images (the quick engine benchmark's peak RSS fell from 150-250 MiB
/// to ~100-115 MiB with it; docs/benchmarks.md).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;
#[export_name = "_rjem_malloc_conf"]
static JEMALLOC_CONF: &[u8; 59] = shale_engine::JEMALLOC_CONF;

#[derive(Parser)]
#[command(
    name = "shale",
    version,
    about = "ShaleDB: a MongoDB-compatible document database on a fractal-tree engine"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the server.
    Serve(ServeArgs),
}

#[derive(Args)]
struct ServeArgs {
    /// Data directory (created if missing).
    #[arg(long = "dbpath", default_value = "./data")]
    dbpath: PathBuf,
    /// TCP port to listen on (0 picks a free one and logs it).
    #[arg(long, default_value_t = 27017)]
    port: u16,
    /// Address to listen on.
    #[arg(long = "bind_ip", default_value = "127.0.0.1")]
    bind_ip: IpAddr,
    /// Engine cache budget in GiB (fractions allowed).
    #[arg(long = "cacheSizeGB")]
    cache_size_gb: Option<f64>,
    /// Log format: "text" or "json".
    #[arg(long = "logFormat", default_value = "text")]
    log_format: String,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => serve(args),
    }
}

fn serve(args: ServeArgs) -> anyhow::Result<()> {
    init_logging(&args.log_format);
    let mut options = DbOptions::default();
    if let Some(gb) = args.cache_size_gb {
        anyhow::ensure!(gb > 0.0, "--cacheSizeGB must be positive");
        options.engine.cache_bytes = (gb * (1u64 << 30) as f64) as usize;
    }
    let db = Database::open(&args.dbpath, options)
        .with_context(|| format!("opening data directory {}", args.dbpath.display()))?;
    let db = Arc::new(db);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async {
        let addr = SocketAddr::new(args.bind_ip, args.port);
        let listener = shale_server::bind(addr)
            .await
            .with_context(|| format!("listening on {addr}"))?;
        let local = listener.local_addr()?;
        tracing::info!(address = %local, dbpath = %args.dbpath.display(), "waiting for connections");
        shale_server::serve(listener, db.clone(), shutdown_signal()).await?;
        tracing::info!("shutting down");
        anyhow::Ok(())
    })?;
    runtime.shutdown_timeout(std::time::Duration::from_secs(5));
    drop(db);
    tracing::info!("shutdown complete");
    Ok(())
}

fn init_logging(format: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("SHALE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if format == "json" {
        builder.json().init();
    } else {
        builder.init();
    }
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("installing the SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
