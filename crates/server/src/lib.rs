//! ShaleDB's MongoDB wire-protocol server: accepts TCP connections, decodes messages
//! (`wire`), runs commands (`commands`) against the embeddable database, and replies. It
//! owns no storage: everything persistent goes through `shale_db`.

pub mod commands;
mod connection;
pub mod net_stats;
pub mod ram_log;
pub mod wire;

pub use connection::handle_message;

use bson::Document;
use shale_db::Database;
use std::future::Future;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::net::TcpListener;
use wire::Compressor;

/// How the server was started, for the commands that report it (`getCmdLineOpts`,
/// `getParameter`). The binary fills it in; the server never reads the command line itself.
#[derive(Debug, Clone, Default)]
pub struct ServerConfig {
    /// The process's arguments as given, program name first (`getCmdLineOpts.argv`).
    pub argv: Vec<String>,
    /// The options in effect from the configuration file and the command line, nested the
    /// way mongod's YAML nests them (`getCmdLineOpts.parsed`).
    pub parsed: Document,
    /// `systemLog.verbosity` (0 is informational; `getParameter.logLevel`).
    pub log_verbosity: i32,
    /// `systemLog.quiet` (`getParameter.quiet`).
    pub quiet: bool,
}

/// What every command handler may use: the database and who is asking.
#[derive(Debug, Clone)]
pub struct ConnectionCtx {
    pub db: Arc<Database>,
    pub connection_id: u64,
    /// The client's address as this server sees it (`whatsmyuri`).
    pub peer: SocketAddr,
    /// How the server was started.
    pub server: Arc<ServerConfig>,
    /// The compressors this client agreed to in its last handshake, in its order (a
    /// `hello` without `compression` reports them again, as mongod does).
    pub compressors: Arc<Mutex<Vec<Compressor>>>,
}

impl ConnectionCtx {
    pub fn new(
        db: Arc<Database>,
        connection_id: u64,
        peer: SocketAddr,
        server: Arc<ServerConfig>,
    ) -> Self {
        ConnectionCtx {
            db,
            connection_id,
            peer,
            server,
            compressors: Arc::default(),
        }
    }

    /// A context with no real client behind it (tests, embedding): connection 0 from
    /// 127.0.0.1:0 on a server with a default configuration.
    pub fn detached(db: Arc<Database>) -> Self {
        let peer = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        ConnectionCtx::new(db, 0, peer, Arc::default())
    }
}

/// Serves clients on every listener until `shutdown` completes, then stops accepting and
/// returns. Connections already open are dropped with the runtime.
pub async fn serve(
    listeners: Vec<TcpListener>,
    db: Arc<Database>,
    config: ServerConfig,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    assert!(!listeners.is_empty(), "serve needs at least one listener");
    commands::server_status::mark_started();
    let config = Arc::new(config);
    let next_id = Arc::new(AtomicU64::new(1));
    let mut acceptors = tokio::task::JoinSet::new();
    for listener in listeners {
        acceptors.spawn(accept_loop(
            listener,
            db.clone(),
            config.clone(),
            next_id.clone(),
        ));
    }
    shutdown.await;
    acceptors.shutdown().await;
    Ok(())
}

/// Accepts connections on one listener forever, each served by its own task.
async fn accept_loop(
    listener: TcpListener,
    db: Arc<Database>,
    config: Arc<ServerConfig>,
    next_id: Arc<AtomicU64>,
) {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(a) => a,
            Err(e) => {
                // Usually EMFILE: back off instead of spinning on the error.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                continue;
            }
        };
        let id = next_id.fetch_add(1, Ordering::Relaxed);
        let ctx = ConnectionCtx::new(db.clone(), id, peer, config.clone());
        tracing::info!(conn = id, %peer, "connection accepted");
        tokio::spawn(connection::serve_connection(stream, ctx));
    }
}

/// Binds `addr` (port 0 picks a free port).
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}
