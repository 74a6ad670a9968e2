//! ShaleDB's MongoDB wire-protocol server: accepts TCP connections, decodes messages
//! (`wire`), runs commands (`commands`) against the embeddable database, and replies. It
//! owns no storage: everything persistent goes through `shale_db`.

pub mod commands;
mod connection;
pub mod wire;

use shale_db::Database;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::net::TcpListener;

/// What every command handler may use: the database and who is asking.
#[derive(Debug, Clone)]
pub struct ConnectionCtx {
    pub db: Arc<Database>,
    pub connection_id: u64,
}

/// Serves clients on `listener` until `shutdown` completes, then stops accepting and returns.
/// Connections already open are dropped with the runtime.
pub async fn serve(
    listener: TcpListener,
    db: Arc<Database>,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    commands::server_status::mark_started();
    let next_id = AtomicU64::new(1);
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => return Ok(()),
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed");
                        continue;
                    }
                };
                let ctx = ConnectionCtx {
                    db: db.clone(),
                    connection_id: next_id.fetch_add(1, Ordering::Relaxed),
                };
                tracing::info!(conn = ctx.connection_id, %peer, "connection accepted");
                tokio::spawn(connection::serve_connection(stream, ctx));
            }
        }
    }
}

/// Binds `addr` (port 0 picks a free port).
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}
