//! The soak's recovery phase (issue 29 item 7): short-lived runs, each a second of writes
//! (the soak's inserts and updates from 8 clients) ended by SIGKILL, so none lives to its
//! timed checkpoint; the server is started again on the same directory and the time to its
//! first answered `ping` (recovery included) is one row. Without a checkpoint soon after a
//! long recovery every restart would replay the whole log since the soak's last checkpoint
//! and more each time (docs/recovery.md, "Checkpoint after a long recovery").

use super::drive;
use super::rows::{Figures, Row};
use super::soak_ops::{OpKind, OpTarget, COLLECTION};
use super::Target;
use anyhow::{anyhow, Context, Result};
use std::time::{Duration, Instant};

/// Clients writing in each short-lived run.
const CLIENTS: usize = 8;
const SEED: u64 = 0x6b69_6c6c;

/// Runs `kills` short-lived runs against the server `t` started; one `kill` row each.
pub async fn run(t: &mut Target, ops: &OpTarget, kills: usize, work_secs: f64) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    let mut ops = ops.clone();
    for kill in 0..kills {
        let errors = write_for(&ops, kill, work_secs).await?;
        let server = t
            .server
            .as_mut()
            .context("kills need a server the runner started")?;
        let wal = server.log_bytes();
        let restart = server.crash_and_restart().await?;
        let uri = server.uri.clone();
        t.probe.pid = Some(server.pid);
        // The old pool's connections died with the server: a fresh client, not stale ones.
        t.client = super::connect(&uri).await?;
        let db = t.db();
        ops.docs = db.collection(COLLECTION);
        ops.raw = db.collection(COLLECTION);
        let secs = restart.as_secs_f64();
        if kill % 10 == 0 || kill + 1 == kills {
            eprintln!(
                "soak kill {kill}: {} MiB of log at the kill, listening again after {secs:.2} s",
                wal >> 20
            );
        }
        rows.push(
            Row::new("kill")
                .label("kill", kill)
                .fig("write_errors", errors as f64)
                .fig("wal_mib_at_kill", wal as f64 / (1u64 << 20) as f64)
                .fig("restart_secs", secs),
        );
    }
    Ok(rows)
}

/// Inserts and updates from `CLIENTS` clients for `secs`; returns the errors.
async fn write_for(ops: &OpTarget, kill: usize, secs: f64) -> Result<u64> {
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let mut tasks = Vec::new();
    for c in 0..CLIENTS {
        let ops = ops.clone();
        tasks.push(tokio::spawn(async move {
            let mut errors = 0u64;
            let mut seq = 0u64;
            while Instant::now() < deadline {
                let r = drive::pick(SEED ^ kill as u64, c, seq);
                seq += 1;
                let kind = if r.is_multiple_of(2) {
                    OpKind::Insert
                } else {
                    OpKind::Update
                };
                if let Err(e) = ops.run(kind, r).await {
                    if errors == 0 {
                        eprintln!("soak kill {kill}: {} failed: {e:#}", kind.name());
                    }
                    errors += 1;
                }
            }
            errors
        }));
    }
    let mut errors = 0;
    for t in tasks {
        errors += t.await.map_err(|e| anyhow!("writer failed: {e}"))?;
    }
    Ok(errors)
}

/// Restart times (max, median, first and last) and log sizes into the summary.
pub fn summarize(rows: &[Row], f: &mut Figures) {
    let mut secs: Vec<f64> = rows.iter().filter_map(|r| r.get("restart_secs")).collect();
    let wal: Vec<f64> = rows
        .iter()
        .filter_map(|r| r.get("wal_mib_at_kill"))
        .collect();
    f.set("kills", secs.len() as f64);
    f.set(
        "restart_secs_first",
        secs.first().copied().unwrap_or(f64::NAN),
    );
    f.set(
        "restart_secs_last",
        secs.last().copied().unwrap_or(f64::NAN),
    );
    f.set(
        "wal_mib_at_last_kill",
        wal.last().copied().unwrap_or(f64::NAN),
    );
    f.set(
        "wal_mib_at_kill_max",
        wal.iter().copied().fold(f64::NAN, f64::max),
    );
    f.set(
        "kill_write_errors",
        rows.iter().filter_map(|r| r.get("write_errors")).sum(),
    );
    secs.sort_by(f64::total_cmp);
    f.set("restart_secs_max", secs.last().copied().unwrap_or(f64::NAN));
    f.set(
        "restart_secs_median",
        secs.get(secs.len() / 2).copied().unwrap_or(f64::NAN),
    );
}
