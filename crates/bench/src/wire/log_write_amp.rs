//! `log-write-amp` (seed: "Write amplification from log writes"): 309-byte documents
//! inserted one at a time with `{j: true}` from 1, 8 and 32 clients. For each client count it
//! reports the server's log bytes written and fsyncs (its own counters), the bytes the OS
//! saw the process write and the device's writes and flushes, bytes per fsync, fsyncs per
//! commit, and the OS-to-server write ratio — the padding and rounding a log append costs.

use super::charts::{Chart, Plot};
use super::drive;
use super::rows::{ratio, Figures, Row};
use super::{line_series, Ctx, Outcome, Target, WireArgs, Workload};
use anyhow::Result;
use mongodb::bson::RawDocumentBuf;
use mongodb::options::{Acknowledgment, WriteConcern};
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub struct LogWriteAmp;

const CLIENTS: [usize; 3] = [1, 8, 32];
const DOC_BYTES: usize = 309;

#[derive(Debug, Serialize)]
pub struct Params {
    quick: bool,
    cache_bytes: u64,
    doc_bytes: usize,
    clients: Vec<usize>,
    seconds_per_point: f64,
    write_concern: &'static str,
}

impl Workload for LogWriteAmp {
    const NAME: &'static str = "log-write-amp";
    type Params = Params;

    fn params(args: &WireArgs) -> Result<Params> {
        Ok(Params {
            quick: args.quick,
            cache_bytes: args.cache_bytes_or(64, 1024)?,
            doc_bytes: DOC_BYTES,
            clients: CLIENTS.to_vec(),
            seconds_per_point: args.seconds_or(4.0, 60.0)?,
            write_concern: "{w: 1, j: true}",
        })
    }

    fn cache_bytes(p: &Params) -> u64 {
        p.cache_bytes
    }

    fn key_figures() -> &'static [&'static str] {
        &[
            "inserts_per_sec",
            "server_log_write_bytes",
            "os_write_bytes",
            "dev_write_bytes",
            "server_log_fsyncs",
            "dev_flushes",
            "bytes_per_fsync",
            "fsyncs_per_commit",
            "log_bytes_per_insert",
            "os_to_server_write_ratio",
            "p50_us",
        ]
    }

    async fn run(p: &Params, t: &mut Target, _ctx: &Ctx) -> Result<Outcome> {
        let coll = t.db().collection::<RawDocumentBuf>("logamp");
        coll.drop().await?;
        t.db().create_collection("logamp").await?;
        let next_id = Arc::new(AtomicU64::new(0));
        let mut rows = Vec::new();
        for &clients in &CLIENTS {
            let before = t.sample().await?;
            let (coll2, ids) = (coll.clone(), next_id.clone());
            // What `write_concern` records: acknowledged by one node, journaled.
            let wc = WriteConcern::builder()
                .w(Acknowledgment::Nodes(1))
                .journal(true)
                .build();
            let run = drive::timed(
                clients,
                Duration::from_secs_f64(p.seconds_per_point),
                u64::MAX,
                move |_, _| {
                    let (coll, wc) = (coll2.clone(), wc.clone());
                    let id = ids.fetch_add(1, Ordering::Relaxed);
                    async move {
                        coll.insert_one(document(id)).write_concern(wc).await?;
                        Ok(1)
                    }
                },
            )
            .await?;
            let delta = t.sample().await?.since(&before);
            let row = Row::new("insert")
                .label("clients", clients)
                .fig("inserts", run.ops as f64)
                .fig("seconds", run.seconds)
                .fig("inserts_per_sec", run.ops_per_sec())
                .fig("logical_bytes", (run.ops * DOC_BYTES as u64) as f64)
                .fig("p50_us", run.latency.p50_us)
                .fig("p99_us", run.latency.p99_us);
            let mut row = delta.add_to(row);
            derive(&mut row, run.ops);
            eprintln!(
                "{clients} clients: {} inserts/s, {} fsyncs/commit",
                crate::report::num(run.ops_per_sec()),
                crate::report::num(row.get("fsyncs_per_commit").unwrap_or(f64::NAN))
            );
            rows.push(row);
        }
        Ok(Outcome {
            summary: summarize(&rows),
            rows,
        })
    }

    fn charts(rows: &[Row]) -> Vec<Chart> {
        vec![
            Chart {
                file: "fsyncs_per_commit.png".into(),
                title: "fsyncs per j:true insert by clients".into(),
                x_label: "clients".into(),
                y_label: "fsyncs per commit".into(),
                plot: Plot::Lines(line_series(
                    rows,
                    "insert",
                    "clients",
                    "fsyncs_per_commit",
                    |r| r.target.clone(),
                )),
            },
            Chart {
                file: "bytes_per_fsync.png".into(),
                title: "log bytes per fsync by clients".into(),
                x_label: "clients".into(),
                y_label: "bytes".into(),
                plot: Plot::Lines(line_series(
                    rows,
                    "insert",
                    "clients",
                    "bytes_per_fsync",
                    |r| r.target.clone(),
                )),
            },
        ]
    }
}

/// BSON bytes of `{_id: <int64>, c: ""}`: the length, `_id` (type, name, 8 bytes), `c`
/// (type, name, string length, its terminator) and the document's terminator.
const EMPTY_DOC_BYTES: usize = 4 + (1 + 4 + 8) + (1 + 2 + 4 + 1) + 1;

/// A document of exactly `DOC_BYTES` bytes of BSON: `{_id: id, c: "..."}`.
pub fn document(id: u64) -> RawDocumentBuf {
    let mut d = RawDocumentBuf::new();
    d.append("_id", id as i64);
    d.append("c", filler(id, DOC_BYTES - EMPTY_DOC_BYTES));
    d
}

fn filler(id: u64, len: usize) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    (0..len)
        .map(|i| ALPHABET[(drive::mix(id ^ ((i as u64) << 48)) % 36) as usize] as char)
        .collect()
}

/// Figures computed from the counters: fsyncs are the server's log fsyncs when it reports
/// them, else the device's flushes (log bytes likewise fall back to the process's written
/// bytes); the device-to-server ratio compares the device's written bytes with the server's
/// own count of all its writes.
fn derive(row: &mut Row, commits: u64) {
    let fsyncs = row
        .get("server_log_fsyncs")
        .or_else(|| row.get("dev_flushes"))
        .unwrap_or(f64::NAN);
    let log_bytes = row
        .get("server_log_write_bytes")
        .or_else(|| row.get("os_write_bytes"))
        .unwrap_or(f64::NAN);
    row.figures.set("fsyncs", fsyncs);
    row.figures.set("bytes_per_fsync", ratio(log_bytes, fsyncs));
    row.figures
        .set("fsyncs_per_commit", ratio(fsyncs, commits as f64));
    if let (Some(dev), Some(server)) = (row.get("dev_write_bytes"), row.get("server_write_bytes")) {
        row.figures
            .set("dev_to_server_write_ratio", ratio(dev, server));
    }
}

fn summarize(rows: &[Row]) -> Figures {
    let sum = |k: &str| rows.iter().filter_map(|r| r.get(k)).sum::<f64>();
    let at32 = rows
        .iter()
        .find(|r| r.label_value("clients").and_then(|v| v.as_u64()) == Some(32));
    let at32 = |k: &str| at32.and_then(|r| r.get(k)).unwrap_or(f64::NAN);
    let mut f = Figures::default();
    f.set(
        "os_to_server_write_ratio",
        ratio(sum("os_write_bytes"), sum("server_write_bytes")),
    );
    f.set("fsyncs_per_commit_at_32", at32("fsyncs_per_commit"));
    f.set("bytes_per_fsync_at_32", at32("bytes_per_fsync"));
    f.set("inserts_per_sec_at_32", at32("inserts_per_sec"));
    f.set(
        "dev_to_server_write_ratio",
        ratio(sum("dev_write_bytes"), sum("server_write_bytes")),
    );
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_are_309_bytes() {
        let mut empty = RawDocumentBuf::new();
        empty.append("_id", 0_i64);
        empty.append("c", "");
        assert_eq!(empty.as_bytes().len(), EMPTY_DOC_BYTES);
        for id in [0, 1, 1 << 40] {
            assert_eq!(document(id).as_bytes().len(), DOC_BYTES);
        }
    }

    #[test]
    fn derived_figures_prefer_server_counters() {
        let mut r = Row::new("insert")
            .fig("server_log_fsyncs", 10.0)
            .fig("server_log_write_bytes", 40960.0)
            .fig("dev_flushes", 99.0);
        derive(&mut r, 100);
        assert_eq!(r.get("bytes_per_fsync"), Some(4096.0));
        assert_eq!(r.get("fsyncs_per_commit"), Some(0.1));
    }
}
