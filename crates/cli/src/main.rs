//! The `shale` binary. `shale serve` opens the data directory on the built-in engine and
//! serves the MongoDB wire protocol, with mongod's flag names, configuration-file keys and
//! defaults (`settings`) and structured logs (`logging`). SIGINT or SIGTERM stops accepting
//! connections and closes the database cleanly before exiting. `shale verify` and
//! `shale repair` (also `shale serve --repair`) check and salvage a stopped data directory
//! (`offline`); a failure to start is one log line and exit status 1 (`startup`).

mod log_format;
mod logging;
mod offline;
mod set_parameter;
mod settings;
mod startup;

#[cfg(test)]
mod help_tests;

use anyhow::Context;
use clap::{ArgAction, Args, Parser, Subcommand};
use settings::{Flags, Settings};
use shale_db::{Database, DbOptions};
use shale_server::auth::scram::Mechanism;
use shale_server::auth::AuthConfig;
use shale_server::ram_log::STARTUP_WARNING_TARGET;
use shale_server::ServerConfig;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;
use tokio::net::TcpListener;

/// jemalloc: glibc malloc's per-thread arenas fragment under the engine's mix of small entries
/// and multi-megabyte node images (the quick engine benchmark's peak RSS fell from 150-250 MiB
/// to ~100-115 MiB with it;
/// docs/bench/history/2026-11-22-engine-quick-partial-internal-nodes-and-jemalloc.md).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;
#[export_name = "_rjem_malloc_conf"]
static JEMALLOC_CONF: &[u8; 85] = shale_heap::SERVER_JEMALLOC_CONF;

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
    Serve(Box<ServeArgs>),
    /// Check a stopped data directory offline (every tree, the catalog, the log) and print
    /// a report; exit status 0 clean, 2 damaged, 1 could not check.
    Verify(OfflineArgs),
    /// Salvage what is intact in a stopped data directory and report what was dropped
    /// (the same as `shale serve --repair`).
    Repair(OfflineArgs),
}

/// The data directory of an offline command.
#[derive(Args)]
struct OfflineArgs {
    /// Data directory of a stopped server.
    #[arg(long = "dbpath", default_value = settings::DEFAULT_DBPATH)]
    dbpath: PathBuf,
}

/// mongod's flags; each overrides the configuration file's key named in its help.
#[derive(Args)]
struct ServeArgs {
    /// YAML configuration file with mongod's keys (storage.dbPath, net.port, net.bindIp,
    /// storage.wiredTiger.engineConfig.cacheSizeGB or storage.shale.cacheSizeGB,
    /// systemLog.path, systemLog.verbosity, systemLog.quiet, security.authorization,
    /// net.tls.mode, net.tls.certificateKeyFile, net.tls.CAFile,
    /// net.tls.allowConnectionsWithoutCertificates, replication.replSetName).
    #[arg(short = 'f', long = "config", value_name = "FILE")]
    config: Option<PathBuf>,
    /// Data directory, created if missing [storage.dbPath] [default: ./data].
    #[arg(long = "dbpath")]
    dbpath: Option<PathBuf>,
    /// TCP port to listen on; 0 picks a free one and logs it [net.port] [default: 27017].
    #[arg(long)]
    port: Option<u16>,
    /// Comma-separated addresses or host names to listen on [net.bindIp]
    /// [default: 127.0.0.1].
    #[arg(long = "bind_ip")]
    bind_ip: Option<String>,
    /// Listen on every IPv4 address [net.bindIpAll].
    #[arg(long = "bind_ip_all")]
    bind_ip_all: bool,
    /// Engine cache budget in GiB, fractions allowed; the process keeps its heap under the
    /// cache + 64 MiB [storage.shale.cacheSizeGB] [default: 0.25, i.e. 256 MiB].
    #[arg(long = "cacheSizeGB", alias = "wiredTigerCacheSizeGB")]
    cache_size_gb: Option<f64>,
    /// Most client connections open at once; more are closed as soon as they are accepted;
    /// capped at 80% of the open-file limit [net.maxIncomingConnections] [default: 1000000].
    #[arg(long = "maxConns")]
    max_conns: Option<u64>,
    /// Seconds the rest of a message may take once its first byte has arrived; a client
    /// stalled mid-message longer is disconnected (0: wait forever).
    #[arg(long = "incompleteMessageTimeoutSecs", default_value_t = 60)]
    incomplete_message_timeout_secs: u64,
    /// MiB that requests in flight may hold together (their bytes, what OP_COMPRESSED
    /// decompresses to, and their replies until written); a request past it waits before
    /// its body is read.
    #[arg(long = "maxInflightRequestMiB", default_value_t = 256)]
    max_inflight_request_mib: u64,
    /// Seconds a request may wait for room under --maxInflightRequestMiB; past it the request
    /// is refused with ExceededMemoryLimit (146) and the connection goes on (0: refuse at
    /// once).
    #[arg(long = "maxInflightRequestWaitSecs", default_value_t = 30)]
    max_inflight_request_wait_secs: u64,
    /// Seconds a multi-document transaction may stay open before the server aborts it
    /// (mongod's transactionLifetimeLimitSeconds parameter; also
    /// --setParameter transactionLifetimeLimitSeconds=N, which wins).
    #[arg(long = "transactionLifetimeLimitSeconds",
          default_value_t = DEFAULT_TRANSACTION_LIFETIME_SECS,
          value_parser = clap::value_parser!(u64).range(1..))]
    transaction_lifetime_limit_secs: u64,
    /// Minutes a logical session may stay idle before the server ends it, aborting its
    /// transaction and closing its cursors (mongod's localLogicalSessionTimeoutMinutes
    /// parameter; also --setParameter localLogicalSessionTimeoutMinutes=N, which wins).
    #[arg(long = "localLogicalSessionTimeoutMinutes",
          default_value_t = DEFAULT_SESSION_TIMEOUT_MINUTES,
          value_parser = clap::value_parser!(u64).range(1..))]
    session_timeout_minutes: u64,
    /// A server parameter, name=value (repeatable): enableTestCommands (serves
    /// configureFailPoint; default false), fastUpdates (TokuMX's read-free updates; default
    /// false), transactionLifetimeLimitSeconds, localLogicalSessionTimeoutMinutes (defaults as
    /// their flags), scramIterationCount (default 10000), scramSHA256IterationCount (default
    /// 15000), ttlMonitorEnabled (default true), ttlMonitorSleepSecs (default 60),
    /// maxSessions (sessions held at once; default 1000000).
    #[arg(long = "setParameter", value_name = "NAME=VALUE")]
    set_parameter: Vec<String>,
    /// Log format: "text" or "json" [systemLog.logFormat] [default: text].
    #[arg(long = "logFormat")]
    log_format: Option<String>,
    /// Write the log to this file instead of stderr [systemLog.path].
    #[arg(long = "logpath")]
    log_path: Option<PathBuf>,
    /// Append to the log file instead of truncating it [systemLog.logAppend].
    #[arg(long = "logappend")]
    log_append: bool,
    /// More verbose logs: -v debug, -vv trace [systemLog.verbosity].
    #[arg(short = 'v', long = "verbose", action = ArgAction::Count)]
    verbose: u8,
    /// Quieter logs: no per-connection or per-command lines [systemLog.quiet].
    #[arg(long)]
    quiet: bool,
    /// Access control: every command but the handshake and authentication needs an
    /// authenticated user (SCRAM-SHA-256 or SCRAM-SHA-1) [security.authorization].
    #[arg(long)]
    auth: bool,
    /// TLS for client connections: disabled, allowTLS or preferTLS (TLS and plain text
    /// both accepted), requireTLS [net.tls.mode] [default: disabled].
    #[arg(long = "tlsMode", value_name = "MODE")]
    tls_mode: Option<String>,
    /// The server's certificate chain and private key in one PEM file
    /// [net.tls.certificateKeyFile].
    #[arg(long = "tlsCertificateKeyFile", value_name = "FILE")]
    tls_certificate_key_file: Option<PathBuf>,
    /// CA certificates (PEM) that client certificates must chain to; clients must present
    /// one unless --tlsAllowConnectionsWithoutCertificates [net.tls.CAFile].
    #[arg(long = "tlsCAFile", value_name = "FILE")]
    tls_ca_file: Option<PathBuf>,
    /// With --tlsCAFile, let clients connect without a certificate
    /// [net.tls.allowConnectionsWithoutCertificates].
    #[arg(long = "tlsAllowConnectionsWithoutCertificates")]
    tls_allow_connections_without_certificates: bool,
    /// Run as a member of the replica set NAME (one member: this server). Until
    /// replSetInitiate it accepts no writes; then it is the set's primary, and after a
    /// restart it comes back as that set's primary [replication.replSetName]
    /// [default: none, a standalone server].
    #[arg(long = "replSet", value_name = "NAME")]
    repl_set: Option<String>,
    /// The oplog's size bound in MiB on a --replSet member: the oldest entries are deleted
    /// past it (mongod's default is 5% of the disk; ShaleDB's a fixed 1024)
    /// [replication.oplogSizeMB] [default: 1024].
    #[arg(long = "oplogSize", value_name = "MB", value_parser = clap::value_parser!(u64).range(1..=1_048_576))]
    oplog_size_mb: Option<u64>,
    /// Salvage what is intact in the data directory (log records up to the first damaged
    /// one, every readable block of a damaged tree, indexes rebuilt from the documents),
    /// report what was dropped, and exit (mongod's --repair).
    #[arg(long)]
    repair: bool,
}

impl ServeArgs {
    fn flags(&self) -> Flags {
        Flags {
            config: self.config.clone(),
            dbpath: self.dbpath.clone(),
            port: self.port,
            bind_ip: self.bind_ip.clone(),
            bind_ip_all: self.bind_ip_all,
            cache_size_gb: self.cache_size_gb,
            max_conns: self.max_conns,
            log_format: self.log_format.clone(),
            log_path: self.log_path.clone(),
            log_append: self.log_append,
            verbosity: self.verbose,
            quiet: self.quiet,
            auth: self.auth,
            tls_mode: self.tls_mode.clone(),
            tls_certificate_key_file: self.tls_certificate_key_file.clone(),
            tls_ca_file: self.tls_ca_file.clone(),
            tls_allow_connections_without_certificates: self
                .tls_allow_connections_without_certificates,
            repl_set: self.repl_set.clone(),
            oplog_size_mb: self.oplog_size_mb,
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let (doing, outcome) = match cli.command {
        Command::Serve(args) => ("cannot start", serve(*args)),
        Command::Verify(args) => ("verify failed", offline::verify(&args.dbpath)),
        Command::Repair(args) => ("repair failed", repair_command(&args.dbpath)),
    };
    outcome.unwrap_or_else(|e| {
        startup::report(doing, &e);
        ExitCode::FAILURE
    })
}

/// `shale repair`: the summary on stdout.
fn repair_command(dbpath: &std::path::Path) -> anyhow::Result<ExitCode> {
    let summary = offline::repair(dbpath, DbOptions::default())?;
    println!("{summary}");
    Ok(offline::repair_status(&summary))
}

fn serve(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    let parameters = set_parameter::parse(&args.set_parameter)?;
    let mut settings = settings::resolve(&args.flags())?;
    if !parameters.parsed.is_empty() {
        settings
            .parsed
            .insert("setParameter", parameters.parsed.clone());
    }
    logging::init(&settings)?;
    log_startup(&settings);
    let mut options = DbOptions::default();
    // The heap governor keeps the process's resident set under the cache + 64 MiB (engine
    // `heap.rs`), requests in flight aside: the promise bounds them by their own cap.
    options.engine.heap = Some(Arc::new(shale_heap::JemallocProbe::excusing(
        shale_server::inflight::in_use,
    )));
    options.fast_updates = parameters.fast_updates.unwrap_or(false);
    options.replica_set = settings.repl_set.is_some();
    if let Some(gb) = settings.cache_size_gb {
        options.engine.cache_bytes = (gb * (1u64 << 30) as f64) as usize;
    }
    let tls = shale_server::tls::load(&settings.tls).map_err(|e| {
        startup::StartupError::new(
            format!("TLS: {e}"),
            "fix the --tls* options or net.tls.* keys",
        )
    })?;
    startup::check_dbpath(&settings.dbpath)?;
    if args.repair {
        let summary = offline::repair(&settings.dbpath, options)?;
        for line in summary.to_string().lines() {
            tracing::info!(target: "shale::repair", "{line}");
        }
        return Ok(offline::repair_status(&summary));
    }
    let db = Database::open(&settings.dbpath, options)
        .map_err(|e| startup::open_failure(&settings.dbpath, &e))?;
    let db = Arc::new(db);
    let config = ServerConfig {
        argv: std::env::args().collect(),
        parsed: settings.parsed.clone(),
        log_verbosity: settings.verbosity,
        quiet: settings.quiet,
        max_connections: Some(max_connections(settings.max_conns)),
        incomplete_message_timeout: (args.incomplete_message_timeout_secs > 0)
            .then(|| std::time::Duration::from_secs(args.incomplete_message_timeout_secs)),
        max_inflight_bytes: Some(
            usize::try_from(args.max_inflight_request_mib.max(1) << 20).unwrap_or(usize::MAX),
        ),
        inflight_wait: Some(std::time::Duration::from_secs(
            args.max_inflight_request_wait_secs,
        )),
        transaction_lifetime_limit: Some(std::time::Duration::from_secs(
            parameters
                .transaction_lifetime_limit_secs
                .unwrap_or(args.transaction_lifetime_limit_secs),
        )),
        session_timeout: Some(std::time::Duration::from_secs(
            parameters
                .session_timeout_minutes
                .unwrap_or(args.session_timeout_minutes)
                .saturating_mul(60),
        )),
        enable_test_commands: parameters.enable_test_commands.unwrap_or(false),
        max_sessions: parameters
            .max_sessions
            .map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
        auth: Arc::new(auth_config(settings.auth, &parameters)?),
        tls,
        repl: Arc::new(
            shale_server::repl::Repl::new(settings.repl_set.clone()).with_oplog_bytes(
                settings
                    .oplog_size_mb
                    .map_or(shale_db::oplog::DEFAULT_OPLOG_BYTES, |mb| mb << 20),
            ),
        ),
        ttl_monitor_sleep: parameters
            .ttl_monitor_sleep_secs
            .map(std::time::Duration::from_secs),
        ttl_monitor_disabled: Arc::new(std::sync::atomic::AtomicBool::new(
            !parameters.ttl_monitor_enabled.unwrap_or(true),
        )),
        ..ServerConfig::default()
    };
    // 8 MiB stacks (reserved, not resident): request parsing is depth-bounded (200 levels,
    // docs/limits.md), and the margin keeps an unoptimised build's larger frames safe too.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .thread_stack_size(8 << 20)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async {
        let listeners = bind_all(&settings).await?;
        let addresses: Vec<String> = listeners
            .iter()
            .filter_map(|l| l.local_addr().ok())
            .map(|a| a.to_string())
            .collect();
        tracing::info!(
            addresses = ?addresses,
            port = listeners[0].local_addr()?.port(),
            dbpath = %settings.dbpath.display(),
            cache_bytes = db.engine().options().cache_bytes,
            "waiting for connections"
        );
        let signal = shale_server::serve(listeners, db.clone(), config, shutdown_signal()).await;
        tracing::info!("shutting down");
        signal.map_err(anyhow::Error::from)
    })?;
    runtime.shutdown_timeout(std::time::Duration::from_secs(5));
    close_database(db);
    tracing::info!(
        uptime_secs = started.elapsed().as_secs_f64(),
        "shutdown complete"
    );
    Ok(ExitCode::SUCCESS)
}

/// Access control and the SCRAM iteration counts given at startup.
fn auth_config(
    enabled: bool,
    parameters: &set_parameter::StartupParameters,
) -> anyhow::Result<AuthConfig> {
    let auth = AuthConfig::new(enabled);
    let counts = [
        (Mechanism::Sha1, parameters.scram_sha1_iterations),
        (Mechanism::Sha256, parameters.scram_sha256_iterations),
    ];
    for (mech, count) in counts {
        if let Some(count) = count {
            auth.set_iterations(mech, count)
                .map_err(anyhow::Error::msg)?;
        }
    }
    Ok(auth)
}

/// mongod's default connection limit.
const DEFAULT_MAX_CONNS: u64 = 1_000_000;
/// mongod's default transactionLifetimeLimitSeconds.
const DEFAULT_TRANSACTION_LIFETIME_SECS: u64 = 60;
/// mongod's default localLogicalSessionTimeoutMinutes.
const DEFAULT_SESSION_TIMEOUT_MINUTES: u64 = 30;

/// The connection limit in force: the one given (or mongod's default), capped, as mongod
/// caps it, at 80% of the open-file limit, so the data files, the log and the listeners
/// keep descriptors when clients take all they may.
fn max_connections(given: Option<u64>) -> usize {
    let wanted = given.unwrap_or(DEFAULT_MAX_CONNS);
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes the struct it is given.
    let files = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0 {
        limit.rlim_cur
    } else {
        u64::MAX
    };
    let cap = (files / 10 * 8).max(1);
    if wanted > cap {
        tracing::info!(
            requested = wanted,
            open_file_limit = files,
            "using {cap} as the connection limit (80% of the open-file limit)"
        );
    }
    usize::try_from(wanted.min(cap)).unwrap_or(usize::MAX)
}

/// Checkpoints and closes the database, so the next start has no log to replay. Connection
/// tasks still finishing a command hold the database for a moment after the runtime stops
/// taking work; wait for them briefly, and if one never lets go, leave the data as a crash
/// would (everything acknowledged is in the log) rather than hang.
fn close_database(mut db: Arc<Database>) {
    let deadline = Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match Arc::try_unwrap(db) {
            Ok(db) => {
                match db.close() {
                    Ok(()) => tracing::info!("database closed after a final checkpoint"),
                    Err(e) => {
                        tracing::error!(error = %e, "closing the database failed; the log will be replayed at the next start")
                    }
                }
                return;
            }
            Err(shared) if Instant::now() < deadline => {
                db = shared;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(_) => {
                tracing::warn!("a connection still holds the database; exiting without a final checkpoint (the log will be replayed)");
                return;
            }
        }
    }
}

/// The first log lines: what is starting with which options, and mongod's startup warnings.
fn log_startup(settings: &Settings) {
    let options = bson::Bson::Document(settings.parsed.clone())
        .into_relaxed_extjson()
        .to_string();
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        compatible_version = shale_server::commands::COMPATIBLE_VERSION,
        pid = std::process::id(),
        options = %options,
        "ShaleDB starting"
    );
    for key in &settings.ignored_keys {
        tracing::warn!(key = %key, "configuration file key not supported; ignored");
    }
    if !settings.auth {
        tracing::warn!(
            target: STARTUP_WARNING_TARGET,
            "Access control is not enabled for the database. Read and write access to data and \
             configuration is unrestricted"
        );
    }
    let localhost_only = settings
        .bind_ips
        .iter()
        .all(|h| h == "localhost" || h.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback()));
    if localhost_only {
        tracing::warn!(
            target: STARTUP_WARNING_TARGET,
            "This server is bound to localhost. Remote systems will be unable to connect to this \
             server. Start the server with --bind_ip <address> to specify which IP addresses it \
             should serve responses from, or with --bind_ip_all to bind to all interfaces"
        );
    }
}

/// Binds every `bindIp` entry. With port 0, the first listener's port is used for the rest.
async fn bind_all(settings: &Settings) -> anyhow::Result<Vec<TcpListener>> {
    let mut listeners: Vec<TcpListener> = Vec::new();
    let mut bound: Vec<SocketAddr> = Vec::new();
    for host in &settings.bind_ips {
        let port = match listeners.first() {
            Some(l) if settings.port == 0 => l.local_addr()?.port(),
            _ => settings.port,
        };
        let addr = resolve(host, port).await?;
        if bound.contains(&addr) {
            continue;
        }
        let listener = shale_server::bind(addr)
            .await
            .map_err(|e| startup::StartupError {
                what: format!("cannot listen on {addr}: {e}"),
                next_step: "another process may be using the port: stop it, or choose another \
                        --port (net.port) or --bind_ip"
                    .to_owned(),
            })?;
        bound.push(addr);
        listeners.push(listener);
    }
    anyhow::ensure!(!listeners.is_empty(), "no address to listen on");
    Ok(listeners)
}

/// An address literal, `localhost` (127.0.0.1, as mongod binds it), or a host name's first
/// address.
async fn resolve(host: &str, port: u16) -> anyhow::Result<SocketAddr> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, port));
    }
    if host == "localhost" {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    tokio::net::lookup_host((host, port))
        .await
        .with_context(|| format!("resolving bind address {host:?}"))?
        .next()
        .with_context(|| format!("bind address {host:?} has no address"))
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    #[allow(
        clippy::expect_used,
        reason = "main builds the runtime with enable_all, so the signal driver is there; a failure to install the handler at start is fatal anyway"
    )]
    let mut term = signal(SignalKind::terminate()).expect("installing the SIGTERM handler");
    let name = tokio::select! {
        _ = tokio::signal::ctrl_c() => "SIGINT",
        _ = term.recv() => "SIGTERM",
    };
    tracing::info!(signal = name, "signal received");
}
