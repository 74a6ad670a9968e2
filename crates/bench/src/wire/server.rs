//! A `shale serve` process the runner starts for one workload: the binary is found
//! (`--shale-bin`, `SHALE_BIN`, or `shale` next to the runner's own binary), started on a
//! free loopback port with a fresh data directory and the cache size the workload asks for,
//! waited for until it answers `ping`, and stopped with SIGTERM (a clean close: checkpoint,
//! log trimmed) when the workload is done. It never talks to a server it did not start.

use crate::device::WorkDir;
use anyhow::{anyhow, bail, Context, Result};
use mongodb::bson::doc;
use mongodb::options::ClientOptions;
use mongodb::Client;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a started server may take to answer its first ping.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a clean shutdown may take (it writes a checkpoint) before SIGKILL.
const STOP_TIMEOUT: Duration = Duration::from_secs(300);

/// The `shale` binary to start: `explicit` (`--shale-bin`), then `$SHALE_BIN`, then `shale`
/// in the directory of the running `shale-bench` (target/release/shale next to
/// target/release/shale-bench).
pub fn find_binary(explicit: Option<&Path>) -> Result<PathBuf> {
    if let Some(p) = explicit {
        return Ok(p.to_owned());
    }
    if let Some(p) = std::env::var_os("SHALE_BIN") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().context("locating shale-bench's own binary")?;
    let beside = exe
        .parent()
        .ok_or_else(|| anyhow!("{} has no parent directory", exe.display()))?
        .join("shale");
    if beside.exists() {
        return Ok(beside);
    }
    bail!(
        "no shale binary: {} does not exist; build it (cargo build --release -p shale-cli), \
         or pass --shale-bin or SHALE_BIN",
        beside.display()
    )
}

/// The engine's write-ahead log directory inside the data directory.
const LOG_DIR: &str = "wal";

/// What a closed server's data directory holds.
#[derive(Debug, Clone, Copy)]
pub struct ClosedSize {
    pub total_bytes: u64,
    /// Of which the write-ahead log: after a clean close the current log file stays until
    /// it is full and a later checkpoint passes it, so on a small database it can be most of
    /// the directory.
    pub log_bytes: u64,
}

/// A running `shale serve` started by the runner.
pub struct ShaleServer {
    child: Child,
    pub pid: u32,
    pub uri: String,
    /// Holds the data directory (`db/`) and the server's log (`shale.log`).
    work: Option<WorkDir>,
    db_dir: PathBuf,
    log_path: PathBuf,
    args: ServeArgs,
}

/// What a server is started with, kept to start it again (`crash_and_restart`).
#[derive(Debug, Clone)]
struct ServeArgs {
    bin: PathBuf,
    port: u16,
    cache_bytes: u64,
}

/// Starts `shale serve` on `db_dir`, logging (appending) to `log_path`.
fn spawn(args: &ServeArgs, db_dir: &Path, log_path: &Path) -> Result<Child> {
    let cache_gb = args.cache_bytes as f64 / (1u64 << 30) as f64;
    Command::new(&args.bin)
        .arg("serve")
        .arg("--dbpath")
        .arg(db_dir)
        .args(["--bind_ip", "127.0.0.1", "--port", &args.port.to_string()])
        .args(["--cacheSizeGB", &format!("{cache_gb}")])
        .arg("--quiet")
        .arg("--logpath")
        .arg(log_path)
        .arg("--logappend")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {} serve", args.bin.display()))
}

impl ShaleServer {
    /// Starts `bin serve` with a fresh data directory under `parent` (default ./data-bench)
    /// and a cache of `cache_bytes`, and waits until it answers `ping`.
    pub async fn start(bin: &Path, parent: Option<&Path>, cache_bytes: u64) -> Result<ShaleServer> {
        let work = WorkDir::create(parent, "shale-bench-wire-")?;
        let db_dir = work.path().join("db");
        std::fs::create_dir(&db_dir).with_context(|| format!("creating {}", db_dir.display()))?;
        let log_path = work.path().join("shale.log");
        let port = free_port()?;
        let args = ServeArgs {
            bin: bin.to_owned(),
            port,
            cache_bytes,
        };
        let child = spawn(&args, &db_dir, &log_path)?;
        let pid = child.id();
        let mut server = ShaleServer {
            child,
            pid,
            uri: format!("mongodb://127.0.0.1:{port}/?directConnection=true"),
            work: Some(work),
            db_dir,
            log_path,
            args,
        };
        if let Err(e) = server.wait_ready().await {
            let log = server.log_tail();
            server.kill();
            return Err(e.context(format!("shale serve did not start; its log:\n{log}")));
        }
        Ok(server)
    }

    /// Kills the server with SIGKILL (no checkpoint, no clean close: a crash), starts it
    /// again on the same data directory and port, and returns how long it took from the
    /// start to the first answered `ping` (recovery included).
    pub async fn crash_and_restart(&mut self) -> Result<Duration> {
        let _ = self.child.kill();
        self.child.wait().context("reaping the killed server")?;
        let started = Instant::now();
        self.child = spawn(&self.args, &self.db_dir, &self.log_path)?;
        self.pid = self.child.id();
        if let Err(e) = self.wait_ready().await {
            let log = self.log_tail();
            return Err(e.context(format!("shale serve did not restart; its log:\n{log}")));
        }
        Ok(started.elapsed())
    }

    async fn wait_ready(&mut self) -> Result<()> {
        let started = Instant::now();
        let mut opts = ClientOptions::parse(&self.uri).await?;
        opts.server_selection_timeout = Some(Duration::from_millis(500));
        let client = Client::with_options(opts)?;
        loop {
            if let Some(status) = self.child.try_wait()? {
                bail!("shale serve exited with {status}");
            }
            let ping = client.database("admin").run_command(doc! {"ping": 1}).await;
            if ping.is_ok() {
                return Ok(());
            }
            if started.elapsed() > START_TIMEOUT {
                bail!("no answer to ping within {} s", START_TIMEOUT.as_secs());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub fn db_dir(&self) -> &Path {
        &self.db_dir
    }

    /// Bytes the write-ahead log holds on disk now.
    pub fn log_bytes(&self) -> u64 {
        shale_io::dir_disk_bytes(&self.db_dir.join(LOG_DIR))
    }

    /// Sends SIGTERM and waits for the clean shutdown; SIGKILL after `STOP_TIMEOUT`.
    /// Returns the bytes the data directory holds after the close.
    pub async fn stop(mut self) -> Result<ClosedSize> {
        // SAFETY: kill(2) on the pid of a child we spawned and have not reaped.
        unsafe {
            libc::kill(self.pid as libc::pid_t, libc::SIGTERM);
        }
        let started = Instant::now();
        let status = loop {
            if let Some(s) = self.child.try_wait()? {
                break s;
            }
            if started.elapsed() > STOP_TIMEOUT {
                self.kill();
                bail!(
                    "shale serve did not stop within {} s",
                    STOP_TIMEOUT.as_secs()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        if !status.success() {
            let log = self.log_tail();
            bail!("shale serve exited with {status}; its log:\n{log}");
        }
        let size = ClosedSize {
            total_bytes: shale_io::dir_disk_bytes(&self.db_dir),
            log_bytes: shale_io::dir_disk_bytes(&self.db_dir.join(LOG_DIR)),
        };
        if let Some(w) = self.work.take() {
            w.remove();
        }
        Ok(size)
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(w) = self.work.take() {
            w.remove();
        }
    }

    /// The last lines of the server's log, for error messages.
    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log_path).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

impl Drop for ShaleServer {
    fn drop(&mut self) {
        if self.work.is_some() {
            self.kill();
        }
    }
}

/// A loopback port nobody listens on right now (the OS picks it; it is released before the
/// server binds it, a race the startup check would report).
fn free_port() -> Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").context("finding a free port")?;
    Ok(l.local_addr()?.port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_binary_wins() {
        let p = find_binary(Some(Path::new("/x/shale"))).expect("explicit");
        assert_eq!(p, Path::new("/x/shale"));
    }
}
