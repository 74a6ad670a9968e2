//! The B-tree peer of the engine workload (cargo feature `sqlite`, issue 22 item 4): the
//! same four phases as shale — same keys, values, order, batch size, read threads and
//! limits — against SQLite (compiled from source by rusqlite's `bundled`) in a sibling
//! directory, compared with shale as the RocksDB peer is.
//!
//! SQLite settings, chosen to match shale's run:
//! - one table per fill, `(k BLOB PRIMARY KEY, v BLOB) WITHOUT ROWID`, so the rows live in
//!   the primary key's B-tree as shale's entries live in its tree; pages of `PAGE_BYTES`;
//! - WAL mode with `synchronous=NORMAL`: commits append to the WAL without an fsync and the
//!   WAL is synced at each checkpoint (every 1000 pages, SQLite's default). This is the
//!   closest SQLite has to shale's fsync every 100 ms: both may lose the last moments of
//!   commits in a crash, neither corrupts;
//! - each batch of `BATCH_PUTS` puts is one transaction of `INSERT OR REPLACE`s;
//! - `PRAGMA cache_size` of the same bytes as shale's cache (the negative, KiB form, which
//!   SQLite converts to pages counting each page's header). The fills use one connection
//!   with the whole budget. read-random's readers each open their own connection with
//!   `query_only` and an equal share of the budget, since SQLite connections do not share a
//!   page cache (shared-cache mode is discouraged and serializes readers on table locks):
//!   so the total stays within shale's budget, at the price of each reader caching the upper
//!   levels of the tree for itself (a few MiB here). The fill connection is closed first;
//!   the scan opens one connection with the whole budget;
//! - memory mapping off (SQLite's default), so every page read is a `read(2)`.
//!
//! SQLite has no direct I/O, so the OS page cache would hold the file and serve SQLite's
//! cache misses from memory beyond the budget. Through every phase a thread therefore
//! drops the database and WAL files from the page cache with `posix_fadvise(DONTNEED)`
//! every `DROP_MILLIS` (which also starts write-back of their dirty pages), and once more,
//! after an fsync, before each phase: misses then reach the device as shale's do. The
//! printed report says so; `bytes_per_read` under the page size shows what the page cache
//! still served between drops.
//!
//! A fill's `seconds` covers its writes plus a `wal_checkpoint(TRUNCATE)`, the counterpart
//! of shale's closing checkpoint.

use super::peer::{self, end_progress, PeerEnd, PeerPhase, PeerStart, Ratios};
use super::print::mib;
use super::{run_readers, Params, Phase as ShalePhase, Progress, BATCH_PUTS, SEED};
use crate::keyspace::{self, Permutation, ValuePool, KEY_BYTES};
use anyhow::{anyhow, bail, Context, Result};
use rusqlite::{ffi, Connection, OptionalExtension};
use serde::Serialize;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// SQLite's page size here (its default).
const PAGE_BYTES: u64 = 4096;
/// How often the database's files are dropped from the OS page cache during a phase.
const DROP_MILLIS: u64 = 100;
const TABLE_RANDOM: &str = "random";
const TABLE_SEQUENTIAL: &str = "sequential";

/// The B-tree peer section of the engine report (`btree_peer`), shaped like `peer`.
#[derive(Debug, Serialize)]
pub(super) struct BtreePeerReport {
    engine: String,
    dir: String,
    settings: Settings,
    phases: Vec<PeerPhase>,
    ratio_vs_sqlite: Vec<Ratios>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
struct Settings {
    page_bytes: u64,
    table: &'static str,
    journal_mode: &'static str,
    synchronous: &'static str,
    wal_autocheckpoint_pages: u32,
    /// `PRAGMA cache_size` of the fill and scan connections (negative: KiB).
    cache_size_pragma: i64,
    cache_bytes: u64,
    reader_connections: usize,
    /// `PRAGMA cache_size` of each read-random connection: the budget split evenly.
    reader_cache_size_pragma: i64,
    mmap_size: u64,
    batch_puts: usize,
    insert: &'static str,
    os_page_cache: String,
    fill_seconds_include: &'static str,
}

impl Settings {
    fn new(params: &Params) -> Settings {
        Settings {
            page_bytes: PAGE_BYTES,
            table: "(k BLOB PRIMARY KEY, v BLOB) WITHOUT ROWID, one per fill",
            journal_mode: "wal",
            synchronous: "normal (WAL synced at checkpoints; shale syncs its log every 100 ms)",
            wal_autocheckpoint_pages: 1000,
            cache_size_pragma: cache_size_pragma(params.cache_bytes),
            cache_bytes: params.cache_bytes,
            reader_connections: params.read_threads,
            reader_cache_size_pragma: cache_size_pragma(
                params.cache_bytes / params.read_threads.max(1) as u64,
            ),
            mmap_size: 0,
            batch_puts: BATCH_PUTS,
            insert: "INSERT OR REPLACE, one transaction per batch",
            os_page_cache: format!(
                "database and WAL dropped with posix_fadvise(DONTNEED) every {DROP_MILLIS} ms \
                 and, after an fsync, before each phase"
            ),
            fill_seconds_include: "writes + wal_checkpoint(TRUNCATE)",
        }
    }
}

/// `PRAGMA cache_size` for a budget of `bytes`: negative KiB, at least one KiB.
fn cache_size_pragma(bytes: u64) -> i64 {
    -i64::try_from((bytes / 1024).max(1)).unwrap_or(i64::MAX)
}

/// Runs the four phases against SQLite under `dir/sqlite` and compares with `shale`.
pub(super) fn run(params: &Params, dir: &Path, shale: &[ShalePhase]) -> Result<BtreePeerReport> {
    let path = dir.join("sqlite");
    std::fs::create_dir_all(&path).with_context(|| format!("creating {}", path.display()))?;
    eprintln!("sqlite peer: {}", path.display());
    let settings = Settings::new(params);
    let db = Db {
        file: path.join("db.sqlite"),
        dir: path.clone(),
        params,
        settings: &settings,
    };
    let phases = phases(&db)?;
    let ratio_vs_sqlite = peer::compare(shale, &phases);
    Ok(BtreePeerReport {
        engine: format!(
            "sqlite {} (rusqlite 0.43, bundled: compiled from source)",
            rusqlite::version()
        ),
        dir: path.display().to_string(),
        settings,
        phases,
        ratio_vs_sqlite,
    })
}

/// Where the database is and how to open it.
struct Db<'a> {
    file: PathBuf,
    dir: PathBuf,
    params: &'a Params,
    settings: &'a Settings,
}

impl Db<'_> {
    /// A connection with the run's pragmas and a page cache of `cache_size` (the pragma).
    fn open(&self, cache_size: i64) -> Result<Connection> {
        let conn = Connection::open(&self.file)
            .with_context(|| format!("sqlite: opening {}", self.file.display()))?;
        conn.pragma_update(None, "page_size", i64::try_from(self.settings.page_bytes)?)?;
        let mode: String =
            conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            bail!("sqlite: journal_mode is {mode}, not wal");
        }
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.pragma_update(None, "cache_size", cache_size)?;
        conn.pragma_update(None, "mmap_size", i64::try_from(self.settings.mmap_size)?)?;
        conn.pragma_update(
            None,
            "wal_autocheckpoint",
            self.settings.wal_autocheckpoint_pages,
        )?;
        Ok(conn)
    }

    /// The database file and its WAL, whose pages the dropper evicts.
    fn files(&self) -> [PathBuf; 2] {
        let mut wal = self.file.clone().into_os_string();
        wal.push("-wal");
        [self.file.clone(), wal.into()]
    }

    /// Syncs the files and drops them from the OS page cache (files that do not exist, such
    /// as a WAL after the last connection closed, are skipped).
    fn drop_os_cache(&self, sync: bool) -> Result<()> {
        for f in self.files() {
            let Ok(file) = std::fs::File::open(&f) else {
                continue;
            };
            if sync {
                file.sync_all()
                    .with_context(|| format!("sqlite: fsync {}", f.display()))?;
            }
            // SAFETY: posix_fadvise only reads its arguments; the descriptor is open.
            let rc =
                unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
            if rc != 0 {
                bail!("sqlite: posix_fadvise({}): error {rc}", f.display());
            }
        }
        Ok(())
    }

    /// Runs `phase` with the files dropped from the page cache before it and every
    /// `DROP_MILLIS` during it.
    fn without_os_cache<T>(&self, phase: impl FnOnce() -> Result<T>) -> Result<T> {
        self.drop_os_cache(true)?;
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            let dropper = s.spawn(|| -> Result<()> {
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(DROP_MILLIS));
                    self.drop_os_cache(false)?;
                }
                Ok(())
            });
            let out = phase();
            stop.store(true, Ordering::Relaxed);
            let dropped = dropper
                .join()
                .unwrap_or_else(|_| Err(anyhow!("sqlite: the page cache dropper panicked")));
            out.and_then(|o| dropped.map(|()| o))
        })
    }

    fn end(&self, start: &PeerStart, name: &'static str, ops: u64, logical: u64) -> PeerEnd<'_> {
        PeerEnd {
            name,
            ops,
            logical_bytes: logical,
            seconds: start.at.elapsed().as_secs_f64(),
            engine_bytes_written: None,
            engine_reads: None,
            path: &self.dir,
            cache_bytes: self.params.cache_bytes,
        }
    }
}

fn phases(db: &Db<'_>) -> Result<Vec<PeerPhase>> {
    let pool = ValuePool::new(db.params.value_bytes, SEED);
    let perm = Permutation::new(db.params.keys, SEED);
    let mut out = Vec::new();
    {
        let conn = db.open(db.settings.cache_size_pragma)?;
        for table in [TABLE_RANDOM, TABLE_SEQUENTIAL] {
            conn.execute_batch(&format!(
                "CREATE TABLE {table} (k BLOB PRIMARY KEY, v BLOB) WITHOUT ROWID"
            ))?;
        }
        let random = |j: u64| perm.apply(j);
        out.push(db.without_os_cache(|| fill(db, &conn, TABLE_RANDOM, &pool, random))?);
        out.push(db.without_os_cache(|| fill(db, &conn, TABLE_SEQUENTIAL, &pool, |j| j))?);
    }
    out.push(db.without_os_cache(|| read_random(db, &pool))?);
    out.push(db.without_os_cache(|| scan(db))?);
    Ok(out)
}

/// A page cache counter of a connection (`SQLITE_DBSTATUS_CACHE_MISS` and the like).
fn db_status(conn: &Connection, op: i32) -> Option<u64> {
    let (mut current, mut high) = (0, 0);
    // SAFETY: the handle is open for the connection's lifetime; the call only writes the
    // two integers it is given.
    let rc = unsafe { ffi::sqlite3_db_status(conn.handle(), op, &mut current, &mut high, 0) };
    (rc == ffi::SQLITE_OK).then(|| u64::try_from(current).unwrap_or(0))
}

fn cache_misses(conn: &Connection) -> Option<u64> {
    db_status(conn, ffi::SQLITE_DBSTATUS_CACHE_MISS)
}

fn fill(
    db: &Db<'_>,
    conn: &Connection,
    table: &'static str,
    pool: &ValuePool,
    order: impl Fn(u64) -> u64,
) -> Result<PeerPhase> {
    let (name, label) = if table == TABLE_RANDOM {
        ("fill-random", "sqlite fill-random")
    } else {
        ("fill-sequential", "sqlite fill-sequential")
    };
    let keys = db.params.keys;
    let mut progress = Progress::new(label, keys);
    let misses_before = cache_misses(conn);
    let start = PeerStart::now();
    let mut insert = conn.prepare(&format!(
        "INSERT OR REPLACE INTO {table} (k, v) VALUES (?1, ?2)"
    ))?;
    let mut logical = 0u64;
    for first in (0..keys).step_by(BATCH_PUTS) {
        conn.execute_batch("BEGIN")?;
        for j in first..(first + BATCH_PUTS as u64).min(keys) {
            let i = order(j);
            let value = pool.value(i);
            insert
                .execute((&keyspace::key(i)[..], value))
                .with_context(|| format!("sqlite {name}: insert"))?;
            logical += (KEY_BYTES + value.len()) as u64;
        }
        conn.execute_batch("COMMIT")
            .with_context(|| format!("sqlite {name}: commit"))?;
        progress.update((first + BATCH_PUTS as u64).min(keys));
    }
    drop(insert);
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
        r.get::<_, i64>(0)
    })
    .with_context(|| format!("sqlite {name}: checkpoint"))?;
    let mut end = db.end(&start, name, keys, logical);
    end.engine_reads = misses_before
        .zip(cache_misses(conn))
        .map(|(a, b)| b.saturating_sub(a));
    let phase = PeerPhase::measure(&start, end);
    end_progress(progress, &phase);
    Ok(phase)
}

/// One reader's connection; its cache misses are added to `misses` when it is dropped.
struct Reader<'a> {
    conn: Connection,
    misses: &'a AtomicU64,
}

impl Reader<'_> {
    fn get(&self, key: &[u8], expected: &[u8]) -> Result<bool> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT v FROM random WHERE k = ?1")?;
        let same = stmt
            .query_row([key], |r| Ok(r.get_ref(0)?.as_blob()? == expected))
            .optional()
            .context("sqlite read-random: get")?;
        Ok(same == Some(true))
    }
}

impl Drop for Reader<'_> {
    fn drop(&mut self) {
        let misses = cache_misses(&self.conn).unwrap_or(0);
        self.misses.fetch_add(misses, Ordering::Relaxed);
    }
}

fn read_random(db: &Db<'_>, pool: &ValuePool) -> Result<PeerPhase> {
    const NAME: &str = "read-random";
    let params = db.params;
    let label = "sqlite read-random";
    let mut progress = Progress::new(label, params.read_ops_limit);
    let misses = AtomicU64::new(0);
    let start = PeerStart::now();
    let tally = run_readers(params, pool, start.at, &mut progress, label, || {
        let conn = db.open(db.settings.reader_cache_size_pragma)?;
        conn.pragma_update(None, "query_only", true)?;
        let reader = Reader {
            conn,
            misses: &misses,
        };
        Ok(move |key: &[u8], expected: &[u8]| reader.get(key, expected))
    })?;
    let mut end = db.end(&start, NAME, tally.done, tally.logical_bytes);
    end.engine_reads = Some(misses.load(Ordering::Relaxed));
    let mut phase = PeerPhase::measure(&start, end);
    phase.threads = Some(params.read_threads);
    phase.misses = Some(tally.misses);
    end_progress(progress, &phase);
    Ok(phase)
}

fn scan(db: &Db<'_>) -> Result<PeerPhase> {
    const NAME: &str = "scan";
    let keys = db.params.keys;
    let mut progress = Progress::new("sqlite scan", keys);
    let conn = db.open(db.settings.cache_size_pragma)?;
    conn.pragma_update(None, "query_only", true)?;
    let start = PeerStart::now();
    let (mut ops, mut logical) = (0u64, 0u64);
    {
        let mut stmt = conn.prepare("SELECT k, v FROM random ORDER BY k")?;
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next().context("sqlite scan: next")? {
            let k = row.get_ref(0)?.as_blob()?.len();
            let v = row.get_ref(1)?.as_blob()?.len();
            ops += 1;
            logical += (k + v) as u64;
            if ops % 65_536 == 0 {
                progress.update(ops);
            }
        }
    }
    let mut end = db.end(&start, NAME, ops, logical);
    end.engine_reads = cache_misses(&conn);
    let phase = PeerPhase::measure(&start, end);
    end_progress(progress, &phase);
    if ops != keys {
        eprintln!("warning: sqlite scan saw {ops} entries, {keys} were inserted");
    }
    Ok(phase)
}

/// The SQLite table and the shale/SQLite ratios, after shale's (and RocksDB's) tables.
pub(super) fn print(r: &BtreePeerReport) {
    let s = &r.settings;
    println!();
    println!(
        "sqlite (b-tree) peer: {}; WAL, synchronous=NORMAL, {} B pages, cache_size {} ({}) for \
         the fills and the scan, {} reader connections of {} each; the OS page cache is \
         dropped (posix_fadvise DONTNEED) before each phase and every {DROP_MILLIS} ms",
        r.engine,
        s.page_bytes,
        s.cache_size_pragma,
        mib(s.cache_bytes),
        s.reader_connections,
        s.reader_cache_size_pragma,
    );
    peer::print("sqlite", &r.phases, &r.ratio_vs_sqlite);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{EngineArgs, Params};

    fn args(data_mib: u64, threads: usize) -> EngineArgs {
        EngineArgs {
            quick: true,
            json: None,
            dir: None,
            cache_mib: Some(1),
            data_mib: Some(data_mib),
            value_bytes: 100,
            threads: Some(threads),
            read_seconds: Some(5.0),
            txn_seconds: None,
            no_heap_governor: false,
            basement_kib: None,
            node_kib: None,
            compression: None,
        }
    }

    #[test]
    fn cache_pragmas_hold_the_budget() {
        assert_eq!(cache_size_pragma(40 << 20), -40_960);
        assert_eq!(cache_size_pragma(100), -1);
        let params = Params::from_args(&args(1, 3)).expect("params");
        let s = Settings::new(&params);
        assert_eq!(s.cache_size_pragma, -1024);
        assert_eq!(s.reader_connections, 3);
        // Three readers of 341 KiB stay within the 1 MiB budget.
        assert_eq!(s.reader_cache_size_pragma, -341);
        assert!(-s.reader_cache_size_pragma * 3 <= -s.cache_size_pragma);
        assert_eq!(s.page_bytes, 4096);
    }

    #[test]
    fn a_tiny_run_reads_back_every_key() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut params = Params::from_args(&args(1, 2)).expect("params");
        params.keys = 5000;
        params.read_ops_limit = 2000;
        let report = run(&params, dir.path(), &[]).expect("sqlite peer");
        let names: Vec<_> = report.phases.iter().map(|p| p.name).collect();
        assert_eq!(
            names,
            ["fill-random", "fill-sequential", "read-random", "scan"]
        );
        let [random, sequential, read, scan] = &report.phases[..] else {
            unreachable!()
        };
        assert_eq!(random.ops, 5000);
        assert_eq!(random.logical_bytes, 5000 * 116);
        assert_eq!(sequential.ops, 5000);
        assert_eq!(read.ops, 2000);
        assert_eq!(read.misses, Some(0));
        assert_eq!(read.threads, Some(2));
        assert_eq!(scan.ops, 5000);
        assert_eq!(scan.logical_bytes, 5000 * 116);
        assert!(scan.db_bytes_on_disk > 0);
        assert!(report.ratio_vs_sqlite.is_empty());
        // The WAL is checkpointed away at the end of each fill.
        let wal = dir.path().join("sqlite/db.sqlite-wal");
        assert!(std::fs::metadata(&wal).map_or(0, |m| m.len()) == 0);
    }
}
