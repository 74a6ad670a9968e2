//! ShaleDB's MongoDB wire-protocol server: accepts TCP connections, decodes messages
//! (`wire`), runs commands (`commands`) against the embeddable database, and replies. It
//! owns no storage: everything persistent goes through `shale_db`.

#![warn(missing_docs)]

pub mod auth;
pub mod command;
pub mod commands;
mod connection;
pub mod fail_point;
pub mod inflight;
pub mod legacy;
mod message_reader;
pub mod net_stats;
pub mod op_counters;
pub mod op_registry;
mod outgoing;
pub mod ram_log;
pub mod repl;
pub mod session_table;
pub mod tls;
pub mod top;
mod transport;
pub mod ttl_monitor;
pub mod wire;

pub use connection::handle_message;

use bson::Document;
use session_table::SessionTable;
use shale_db::Database;
use std::collections::HashMap;
use std::future::Future;
use std::mem::ManuallyDrop;
use std::net::{Ipv4Addr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
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
    /// `net.maxIncomingConnections` (`--maxConns`): connections past it are closed as soon
    /// as they are accepted, as mongod does. `None`: no limit but the process's.
    pub max_connections: Option<usize>,
    /// How long the rest of a message may take once its first byte has arrived; a client
    /// that stalls mid-message longer is disconnected. Idle connections (between messages)
    /// never time out. `None`: wait forever.
    pub incomplete_message_timeout: Option<std::time::Duration>,
    /// Bytes requests in flight may hold together (`inflight`); `None`: its default.
    pub max_inflight_bytes: Option<usize>,
    /// How long a request may wait for room in that budget before it is refused with
    /// `ExceededMemoryLimit`; `None`: `inflight::DEFAULT_WAIT`.
    pub inflight_wait: Option<Duration>,
    /// mongod's `transactionLifetimeLimitSeconds`: a session transaction older than this is
    /// aborted by the reaper. `None`: mongod's default, 60 s.
    pub transaction_lifetime_limit: Option<Duration>,
    /// mongod's `localLogicalSessionTimeoutMinutes`: a session idle this long is ended (its
    /// transaction aborted, its cursors closed). `None`: mongod's default, 30 minutes.
    pub session_timeout: Option<Duration>,
    /// mongod's `maxSessions` (startup only): how many sessions the server holds at once.
    /// `None`: mongod's default, 1,000,000.
    pub max_sessions: Option<usize>,
    /// mongod's `enableTestCommands` (startup only): serves `configureFailPoint`.
    pub enable_test_commands: bool,
    /// The fail points `configureFailPoint` sets (`fail_point.rs`).
    pub fail_points: Arc<fail_point::FailPoints>,
    /// `transactionLifetimeLimitSeconds` as the `setParameter` command last set it (0: not
    /// set at run time; the startup value holds).
    pub lifetime_limit_secs_set: Arc<AtomicU64>,
    /// Authentication: `--auth`, SCRAM iteration counts, the users generation.
    pub auth: Arc<auth::AuthConfig>,
    /// TLS for client connections (`net.tls.*`); `None`: disabled, every connection plain.
    pub tls: Option<tls::Tls>,
    /// Replication: a standalone's by default, a `--replSet` member's when named.
    pub repl: Arc<repl::Repl>,
    /// mongod's `ttlMonitorSleepSecs` (startup only): how often TTL indexes expire
    /// documents. `None`: mongod's default, 60 s.
    pub ttl_monitor_sleep: Option<Duration>,
    /// mongod's `ttlMonitorEnabled` turned off (at startup or by `setParameter`).
    pub ttl_monitor_disabled: Arc<AtomicBool>,
    /// The operations in flight, one slot per connection (`currentOp`, `killOp`).
    pub ops: Arc<op_registry::OpRegistry>,
    /// `fsync`'s write lock (`commands/fsync.rs`).
    pub fsync_lock: Arc<commands::fsync::FsyncLock>,
    /// The database profiler's settings (`commands/profile.rs`).
    pub profiler: Arc<commands::profile::Profiler>,
}

/// mongod's default `transactionLifetimeLimitSeconds`.
pub const DEFAULT_TRANSACTION_LIFETIME_LIMIT: Duration = Duration::from_secs(60);

impl ServerConfig {
    /// The transaction lifetime limit in force.
    pub fn transaction_lifetime_limit(&self) -> Duration {
        match self.lifetime_limit_secs_set.load(Ordering::Relaxed) {
            0 => self
                .transaction_lifetime_limit
                .unwrap_or(DEFAULT_TRANSACTION_LIFETIME_LIMIT),
            secs => Duration::from_secs(secs),
        }
    }

    /// How long a request may wait for room in the in-flight budget.
    pub fn inflight_wait(&self) -> Duration {
        self.inflight_wait.unwrap_or(inflight::DEFAULT_WAIT)
    }

    /// The idle time after which a session ends.
    pub fn session_timeout(&self) -> Duration {
        self.session_timeout
            .unwrap_or(session_table::DEFAULT_SESSION_TIMEOUT)
    }

    /// How often the TTL monitor runs.
    pub fn ttl_monitor_sleep(&self) -> Duration {
        self.ttl_monitor_sleep
            .unwrap_or(ttl_monitor::DEFAULT_SLEEP)
            .max(Duration::from_secs(1))
    }

    /// `maxSessions` in effect.
    pub fn max_sessions(&self) -> usize {
        self.max_sessions
            .unwrap_or(session_table::DEFAULT_MAX_SESSIONS)
    }

    /// `localLogicalSessionTimeoutMinutes` as reported (`hello`, `startSession`,
    /// `getParameter`): whole minutes, at least 1.
    pub fn session_timeout_minutes(&self) -> i32 {
        i32::try_from((self.session_timeout().as_secs() / 60).max(1)).unwrap_or(i32::MAX)
    }
}

/// What every command handler may use: the database and who is asking.
#[derive(Debug, Clone)]
pub struct ConnectionCtx {
    /// The database.
    pub db: Arc<Database>,
    /// The connection's id (its number in logs and `currentOp`).
    pub connection_id: u64,
    /// The client's address as this server sees it (`whatsmyuri`).
    pub peer: SocketAddr,
    /// The server's end of the connection: the address the client connected to
    /// (`authenticationRestrictions`' `serverAddress`). `None` when unknown.
    pub local: Option<SocketAddr>,
    /// How the server was started.
    pub server: Arc<ServerConfig>,
    /// The compressors this client agreed to in its last handshake, in its order (a
    /// `hello` without `compression` reports them again, as mongod does).
    pub compressors: Arc<Mutex<Vec<Compressor>>>,
    /// The server's sessions that carry transactions (shared by every connection).
    pub sessions: Arc<SessionTable>,
    /// The session transaction a command runs in: set only on the context the transaction
    /// runner makes for one statement (`commands/transactions.rs`).
    pub txn: Option<shale_db::UserTxn>,
    /// The command's logical session (`lsid.id` and the connection's user): set only on the
    /// context dispatch makes for one command that carries one. Cursors it opens belong to
    /// that session.
    pub lsid: Option<session_table::Lsid>,
    /// The connection's TokuMX-style transaction (`beginTransaction`), shared by the
    /// command contexts cloned from the connection's (`commands/connection_txn.rs`).
    pub conn_txn: Arc<Mutex<session_table::SessionState>>,
    /// The connection's `client.application.name` from its handshake (`failCommand`'s
    /// `appName` matches it).
    pub app_name: Arc<Mutex<Option<String>>>,
    /// Set when the connection must close without answering (`failCommand`'s
    /// `closeConnection`); the connection loop reads it after every message.
    pub close_requested: Arc<AtomicBool>,
    /// The retryable write a command runs as: set only on the context the retryable-write
    /// runner makes for one command (`commands/retryable_writes.rs`).
    pub retry: Option<Arc<commands::retryable_writes::Retrying>>,
    /// Who is logged in on this connection, and its SASL conversation.
    pub auth: Arc<Mutex<auth::AuthSession>>,
    /// The legacy opcodes' per-connection state: last error, cursor positions.
    pub legacy: Arc<Mutex<legacy::LegacyState>>,
    /// The connection's slot in the registry of operations in flight (`op_registry.rs`).
    pub op: Arc<op_registry::OpSlot>,
}

impl ConnectionCtx {
    /// A context for connection `connection_id` from `peer`.
    pub fn new(
        db: Arc<Database>,
        connection_id: u64,
        peer: SocketAddr,
        server: Arc<ServerConfig>,
        sessions: Arc<SessionTable>,
    ) -> Self {
        let owner = op_registry::SlotOwner::default();
        let op = server
            .ops
            .register(connection_id, peer.to_string(), owner.clone());
        ConnectionCtx {
            db,
            connection_id,
            peer,
            local: None,
            server,
            compressors: Arc::default(),
            sessions,
            txn: None,
            lsid: None,
            conn_txn: Arc::default(),
            app_name: owner.app_name,
            close_requested: Arc::default(),
            retry: None,
            auth: owner.auth,
            legacy: Arc::default(),
            op,
        }
    }

    /// The owner of the cursors this command opens: its session, if it has one.
    pub fn cursor_owner(&self) -> Option<shale_db::CursorOwner> {
        self.lsid.map(|l| l.id.bytes())
    }

    /// The session `id` as this connection's user has it: mongod keys sessions by id and the
    /// digest of the name of the user logged in. The command's own session, found by
    /// dispatch, is reused (no second lock and digest).
    pub fn session_key(&self, id: bson::Uuid) -> session_table::Lsid {
        if let Some(own) = self.lsid.filter(|l| l.id == id) {
            return own;
        }
        session_table::Lsid {
            id,
            uid: self.session_uid(),
        }
    }

    /// The digest of the name of the user logged in on this connection (the empty name when
    /// nobody is): the `uid` of the sessions it uses.
    pub fn session_uid(&self) -> session_table::UserDigest {
        let auth = auth::gate::lock(self);
        auth.users
            .first()
            .map_or_else(session_table::no_auth_uid, |u| {
                session_table::user_uid(&u.name.user, &u.name.db)
            })
    }

    /// A context with no real client behind it (tests, embedding): connection 0 from
    /// 127.0.0.1:0 on a server with a default configuration and its own session table.
    pub fn detached(db: Arc<Database>) -> Self {
        let peer = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        ConnectionCtx::new(db, 0, peer, Arc::default(), Arc::default())
    }
}

/// Stack reserved for each connection's thread (resident only as deep as it is used).
/// Request parsing is depth-bounded (docs/limits.md); the margin keeps an unoptimised
/// build's larger frames safe too.
pub const CONNECTION_STACK_BYTES: usize = 8 << 20;

/// The sockets of open connections (by raw descriptor), so shutdown can shut them and so
/// wake their threads, and so the accept loop can count them.
///
/// Invariant: a descriptor is in the table only while its socket is open. A connection's
/// thread removes its entry (under the lock) before it drops the socket, and `shut_all`
/// holds the lock while it uses the descriptors, so it never touches a closed or reused one.
#[derive(Default)]
struct OpenConnections(Mutex<HashMap<u64, RawFd>>);

impl OpenConnections {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, RawFd>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn len(&self) -> usize {
        self.lock().len()
    }

    /// Shuts every open socket down: each connection's thread finishes the command it is
    /// running, if any, then reads the end of the stream and exits.
    fn shut_all(&self) {
        for &fd in self.lock().values() {
            // SAFETY: the descriptor is open (the table's invariant, lock held), and
            // `ManuallyDrop` keeps this borrowed view from closing it.
            let socket = ManuallyDrop::new(unsafe { std::net::TcpStream::from_raw_fd(fd) });
            let _ = socket.shutdown(std::net::Shutdown::Both);
        }
    }
}

/// Serves clients on every listener until `shutdown` completes, then stops accepting, shuts
/// the open connections' sockets and returns (their threads end once their current command
/// does; the caller waits for them by waiting for the last handle on the database).
pub async fn serve(
    listeners: Vec<TcpListener>,
    db: Arc<Database>,
    config: ServerConfig,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    assert!(!listeners.is_empty(), "serve needs at least one listener");
    commands::server_status::mark_started();
    if let Some(bytes) = config.max_inflight_bytes {
        inflight::set_limit(bytes);
    }
    let config = Arc::new(config);
    start_replication(&listeners, &db, &config)?;
    let next_id = Arc::new(AtomicU64::new(1));
    let open = Arc::new(OpenConnections::default());
    let sessions = Arc::new(SessionTable::with_limit(config.max_sessions()));
    let mut acceptors = tokio::task::JoinSet::new();
    for listener in listeners {
        acceptors.spawn(accept_loop(
            listener,
            Shared {
                db: db.clone(),
                config: config.clone(),
                sessions: sessions.clone(),
            },
            next_id.clone(),
            open.clone(),
        ));
    }
    acceptors.spawn(reap_transactions(
        db.clone(),
        sessions.clone(),
        config.clone(),
    ));
    acceptors.spawn(ttl_monitor::run(db.clone(), config.clone()));
    shutdown.await;
    config.repl.shutdown();
    acceptors.shutdown().await;
    open.shut_all();
    // Connections still finishing a command may end a transaction themselves; what is
    // left open is aborted by `Database::close`.
    sessions.end_all(&db);
    Ok(())
}

/// Tells replication how this server is reached (the bound addresses and the first one's
/// port) and lets it read its stored config: a member of an initiated set starts as primary.
fn start_replication(
    listeners: &[TcpListener],
    db: &Database,
    config: &ServerConfig,
) -> std::io::Result<()> {
    let bound: Vec<SocketAddr> = listeners
        .iter()
        .map(TcpListener::local_addr)
        .collect::<std::io::Result<_>>()?;
    let me =
        repl::config::SelfHost::new(bound.iter().map(SocketAddr::ip).collect(), bound[0].port());
    config
        .repl
        .start(db, me)
        .map_err(|e| std::io::Error::other(format!("replication: {}", e.message)))
}

/// What every connection shares: the database, the configuration, the session table.
struct Shared {
    db: Arc<Database>,
    config: Arc<ServerConfig>,
    sessions: Arc<SessionTable>,
}

/// Aborts session transactions past the lifetime limit (releasing their snapshots and key
/// locks) and ends sessions idle past the session timeout, until the server stops. The
/// limit is read at every tick (`setParameter` changes it). Runs the work on the blocking
/// pool: aborting takes the data lock, which DDL can hold for an index build.
async fn reap_transactions(
    db: Arc<Database>,
    sessions: Arc<SessionTable>,
    config: Arc<ServerConfig>,
) {
    let session_timeout = config.session_timeout();
    loop {
        let limit = config.transaction_lifetime_limit();
        let period = (limit / 2).clamp(Duration::from_millis(50), Duration::from_secs(1));
        tokio::time::sleep(period).await;
        let (db, sessions) = (db.clone(), sessions.clone());
        let reaped = tokio::task::spawn_blocking(move || {
            let reaped = db.reap_user_txns(limit);
            db.expire_snapshot_history();
            let expired = sessions.expire(&db, session_timeout);
            if expired > 0 {
                tracing::info!(sessions = expired, "ended idle logical sessions");
            }
            reaped
        })
        .await;
        if let Err(e) = reaped {
            tracing::warn!(error = %e, "the transaction reaper failed");
        }
    }
}

/// Accepts connections on one listener forever, each served by its own thread.
async fn accept_loop(
    listener: TcpListener,
    shared: Shared,
    next_id: Arc<AtomicU64>,
    open: Arc<OpenConnections>,
) {
    let Shared {
        db,
        config,
        sessions,
    } = shared;
    let mut failing = FailureEpisode::new(
        "accept failed; backing off until it succeeds",
        "accepting connections again",
    );
    let mut no_threads = FailureEpisode::new(
        "cannot start a thread for a connection; closing such connections and backing off",
        "starting connection threads again",
    );
    let mut refusals = Refusals::default();
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(a) => {
                failing.recovered();
                a
            }
            Err(e) => {
                // Usually EMFILE: back off, and log once per episode, not once per try.
                let pause = failing.failed(&e);
                tokio::time::sleep(pause).await;
                continue;
            }
        };
        if let Some(max) = config.max_connections {
            let now = open.len();
            if now >= max {
                refusals.refused(now, max);
                net_stats::connection_rejected();
                drop(stream);
                continue;
            }
        }
        let id = next_id.fetch_add(1, Ordering::Relaxed);
        let mut ctx = ConnectionCtx::new(db.clone(), id, peer, config.clone(), sessions.clone());
        ctx.local = stream.local_addr().ok();
        tracing::info!(conn = id, %peer, "connection accepted");
        match start_connection_thread(stream, ctx, &open) {
            Ok(()) => no_threads.recovered(),
            Err(e) => {
                // Out of threads or memory: the socket is closed; log once per episode.
                let pause = no_threads.failed(&e);
                tokio::time::sleep(pause).await;
            }
        }
    }
}

/// An episode of failures of one kind (`accept` when file descriptors or memory run out,
/// starting a connection's thread): logged when it starts and when it ends, never in
/// between, with a back-off from 10 ms to 1 s between tries.
struct FailureEpisode {
    /// The line that starts an episode.
    started: &'static str,
    /// The line that ends one.
    ended: &'static str,
    since: Option<Instant>,
    count: u64,
    pause: Duration,
}

impl FailureEpisode {
    const FIRST_PAUSE: Duration = Duration::from_millis(10);
    const LONGEST_PAUSE: Duration = Duration::from_secs(1);

    fn new(started: &'static str, ended: &'static str) -> Self {
        FailureEpisode {
            started,
            ended,
            since: None,
            count: 0,
            pause: Self::FIRST_PAUSE,
        }
    }

    /// Counts a failure (logging it if it starts an episode) and says how long to pause.
    fn failed(&mut self, e: &std::io::Error) -> Duration {
        self.count += 1;
        if self.since.is_none() {
            self.since = Some(Instant::now());
            self.pause = Self::FIRST_PAUSE;
            tracing::warn!(error = %e, "{} (further failures are not logged)", self.started);
        } else {
            self.pause = (self.pause * 2).min(Self::LONGEST_PAUSE);
        }
        self.pause
    }

    /// Ends the episode, if one is going on, with a line saying how long it lasted.
    fn recovered(&mut self) {
        if let Some(since) = self.since.take() {
            tracing::info!(
                failures = self.count,
                seconds = since.elapsed().as_secs_f64(),
                "{}",
                self.ended
            );
            self.count = 0;
        }
    }
}

/// Connections refused for `maxConns`: the first of each second is logged with how many
/// were refused since the last line.
#[derive(Default)]
struct Refusals {
    last_log: Option<Instant>,
    unlogged: u64,
}

impl Refusals {
    fn refused(&mut self, open: usize, max: usize) {
        self.unlogged += 1;
        if self
            .last_log
            .is_some_and(|t| t.elapsed() < Duration::from_secs(1))
        {
            return;
        }
        tracing::info!(
            open,
            max_conns = max,
            refused = self.unlogged,
            "connection refused because there are too many open connections"
        );
        self.last_log = Some(Instant::now());
        self.unlogged = 0;
    }
}

/// Moves an accepted socket to blocking mode and starts its connection thread.
fn start_connection_thread(
    stream: tokio::net::TcpStream,
    ctx: ConnectionCtx,
    open: &Arc<OpenConnections>,
) -> std::io::Result<()> {
    let stream = stream.into_std()?;
    stream.set_nonblocking(false)?;
    let id = ctx.connection_id;
    // The table stays locked until the thread has started or failed to: a failed spawn drops
    // (closes) the socket inside `spawn`, and its entry must be gone before anyone can look.
    let mut table = open.lock();
    table.insert(id, stream.as_raw_fd());
    let registry = open.clone();
    let started = std::thread::Builder::new()
        .name(format!("conn{id}"))
        .stack_size(CONNECTION_STACK_BYTES)
        .spawn(move || {
            connection::serve_connection(&stream, ctx);
            // Out of the table before the socket closes (the table's invariant).
            registry.lock().remove(&id);
            drop(stream);
        });
    if let Err(e) = started {
        table.remove(&id);
        return Err(e);
    }
    Ok(())
}

/// Binds `addr` (port 0 picks a free port).
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_episode_backs_off_to_a_second_and_starts_again_after_recovering() {
        let mut episode = FailureEpisode::new("failing", "working");
        let e = std::io::Error::from_raw_os_error(24); // EMFILE
        let pauses: Vec<u64> = (0..9)
            .map(|_| episode.failed(&e).as_millis() as u64)
            .collect();
        assert_eq!(pauses, [10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
        assert_eq!(episode.count, 9);
        episode.recovered();
        assert!(episode.since.is_none() && episode.count == 0);
        // Recovering twice logs nothing more; a new episode starts from the first pause.
        episode.recovered();
        assert_eq!(episode.failed(&e), FailureEpisode::FIRST_PAUSE);
        assert!(episode.since.is_some());
    }
}
