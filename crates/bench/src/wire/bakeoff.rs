//! `bakeoff` (seed: "TokuMX vs MongoDB bake off based on a primary AOL use case"): the
//! SummaryModel shape — mail summaries of 6,075 owners, about 1.3 KB of BSON each, `_id` =
//! owner + lid, an index on `{owner: 1, lid: 1}` — loaded as fast as batched inserts from
//! several clients allow to a multiple of the server's cache, then a "sync scan": clients
//! repeatedly read every document of a random owner in `owner, lid` order. Reports inserts/s
//! over time, bytes on disk, stored bytes per document, the compression ratio against raw
//! BSON, and scanned documents/s.
//!
//! On ShaleDB the index is clustering (TokuMX's `clustering: true`, as AOL ran it: the scan
//! reads documents from the index entries, no `_id` lookup each); `--no-clustering` makes it
//! a plain index to compare. A peer that is not ShaleDB gets the plain index (mongod refuses
//! the option).

use super::charts::{Chart, Plot};
use super::drive::{self, LoadSpec};
use super::layout::LayoutArgs;
use super::rows::{ratio, Figures, Row};
use super::server::ClosedSize;
use super::{line_series, Ctx, Outcome, Target, WireArgs, Workload};
use anyhow::Result;
use clap::Args;
use mongodb::bson::{doc, Bson, DateTime, Document, RawArrayBuf, RawDocumentBuf};
use serde::Serialize;
use std::time::Duration;

pub struct Bakeoff;

/// `shale-bench bakeoff`'s flags: the common ones and the index kind.
#[derive(Debug, Clone, Args)]
pub struct BakeoffArgs {
    #[command(flatten)]
    pub wire: WireArgs,
    /// Make the {owner: 1, lid: 1} index a plain one (each scanned document is then an
    /// index entry plus an _id lookup) instead of the default clustering index, whose
    /// entries carry the documents
    #[arg(long)]
    pub no_clustering: bool,
    #[command(flatten)]
    pub layout: LayoutArgs,
    /// Basement size in bytes (TokuMX's readPageSize) [server default: 16 KiB]
    #[arg(long, value_name = "BYTES")]
    pub read_page_size: Option<i64>,
}

impl Bakeoff {
    /// The parameters from the workload's own flags.
    pub fn params_for(args: &BakeoffArgs) -> Result<Params> {
        let mut p = Self::params(&args.wire)?;
        p.clustering = !args.no_clustering;
        p.layout = args.layout.options(args.read_page_size);
        p.layout_label = args.layout.label(args.read_page_size);
        Ok(p)
    }
}

const OWNERS: u64 = 6075;
const SEED: u64 = 0x0061_6f6c_6261_6b65;
const COLL: &str = "SummaryModel";

#[derive(Debug, Serialize)]
pub struct Params {
    quick: bool,
    cache_bytes: u64,
    data_bytes: u64,
    docs: u64,
    owners: u64,
    avg_doc_bytes_estimate: u64,
    load_clients: usize,
    load_batch: usize,
    scan_clients: usize,
    scan_seconds: f64,
    index: &'static str,
    /// The index is clustering on ShaleDB (never on a peer).
    clustering: bool,
    /// Layout options of the collection and the index on ShaleDB (`layout.rs`).
    layout: Document,
    layout_label: String,
}

impl Workload for Bakeoff {
    const NAME: &'static str = "bakeoff";
    type Params = Params;

    fn params(args: &WireArgs) -> Result<Params> {
        let cache_bytes = args.cache_bytes_or(32, 1024)?;
        let data_bytes = args.data_bytes_or(cache_bytes * 3 / 2)?;
        let avg = (0..200)
            .map(|i| document(i).as_bytes().len() as u64)
            .sum::<u64>()
            / 200;
        Ok(Params {
            quick: args.quick,
            cache_bytes,
            data_bytes,
            docs: data_bytes.div_ceil(avg).max(100),
            owners: OWNERS,
            avg_doc_bytes_estimate: avg,
            load_clients: if args.quick { 4 } else { 8 },
            load_batch: 100,
            scan_clients: if args.quick { 4 } else { 8 },
            scan_seconds: args.seconds_or(5.0, 60.0)?,
            index: "{owner: 1, lid: 1}",
            clustering: true,
            layout: Document::new(),
            layout_label: "defaults".into(),
        })
    }

    fn cache_bytes(p: &Params) -> u64 {
        p.cache_bytes
    }

    fn key_figures() -> &'static [&'static str] {
        &[
            "docs",
            "inserts_per_sec",
            "docs_per_sec",
            "docs_per_scan",
            "raw_bson_bytes_per_doc",
            "bytes_on_disk",
            "stored_bytes_per_doc",
            "compression_ratio",
            "os_write_bytes",
            "server_write_bytes",
            "dev_reads",
        ]
    }

    async fn run(p: &Params, t: &mut Target, _ctx: &Ctx) -> Result<Outcome> {
        let mut index = doc! {"key": {"owner": 1, "lid": 1}, "name": "owner_lid"};
        let clustering = p.clustering && t.is_shale;
        if clustering {
            index.insert("clustering", true);
        }
        let layout = if t.is_shale {
            p.layout.clone()
        } else {
            Document::new()
        };
        index.extend(layout.clone());
        let coll = t.create_indexed(COLL, layout, vec![index]).await?;
        let spec = LoadSpec {
            docs: p.docs,
            batch: p.load_batch,
            clients: p.load_clients,
            interval: Duration::from_secs(if p.quick { 1 } else { 10 }),
        };
        let before = t.sample().await?;
        let loaded = drive::load(&coll, &spec, "SummaryModel", document).await?;
        let delta = t.sample().await?.since(&before);
        eprintln!(
            "loaded {} docs in {} s: {} inserts/s",
            loaded.docs,
            crate::report::num(loaded.seconds),
            crate::report::num(loaded.per_sec())
        );
        let mut rows = loaded.interval_rows(|r, _| r);
        rows.push(delta.add_to(loaded.row(t.db_dir_bytes())));

        let scan = scan(p, t)
            .await?
            .fig("clustering_index", f64::from(u8::from(clustering)));
        let scan_rate = scan.get("docs_per_sec").unwrap_or(f64::NAN);
        rows.push(scan);

        let stats = t.db().run_command(doc! {"collStats": COLL}).await?;
        let closed = t.stop_server().await?;
        let size = sizes(&stats, loaded.raw_bytes, loaded.docs, closed);
        let mut summary = Figures::default();
        for k in [
            "raw_bson_bytes_per_doc",
            "stored_bytes_per_doc",
            "compression_ratio",
            "compression_ratio_with_log",
            "docs_tree_ratio",
            "index_tree_ratio",
        ] {
            summary.set(k, size.get(k).unwrap_or(f64::NAN));
        }
        summary.set("inserts_per_sec", loaded.per_sec());
        summary.set("scan_docs_per_sec", scan_rate);
        summary.set("clustering_index", f64::from(u8::from(clustering)));
        rows.push(size);
        Ok(Outcome { rows, summary })
    }

    fn charts(rows: &[Row]) -> Vec<Chart> {
        let mut bars = Vec::new();
        for r in rows
            .iter()
            .filter(|r| r.phase == "size" && r.target != "shale/peer")
        {
            if bars.is_empty() {
                bars.push((
                    "raw BSON".to_owned(),
                    r.get("raw_bson_bytes_per_doc").unwrap_or(0.0),
                ));
            }
            bars.push((
                format!("{} stored", r.target),
                r.get("stored_bytes_per_doc").unwrap_or(0.0),
            ));
        }
        vec![
            Chart {
                file: "inserts_over_time.png".into(),
                title: "SummaryModel load: inserts/s over time".into(),
                x_label: "seconds".into(),
                y_label: "inserts/s".into(),
                plot: Plot::Lines(line_series(
                    rows,
                    "load-interval",
                    "t_secs",
                    "inserts_per_sec",
                    |r| r.target.clone(),
                )),
            },
            Chart {
                file: "size_per_doc.png".into(),
                title: "bytes per document: raw BSON and stored".into(),
                x_label: String::new(),
                y_label: "bytes per document".into(),
                plot: Plot::Bars(bars),
            },
        ]
    }
}

/// The sync scan: every document of a random owner, in `owner, lid` order.
async fn scan(p: &Params, t: &Target) -> Result<Row> {
    let coll = t.db().collection::<Document>(COLL);
    let before = t.sample().await?;
    let run = drive::timed(
        p.scan_clients,
        Duration::from_secs_f64(p.scan_seconds),
        u64::MAX,
        move |c, seq| {
            let coll = coll.clone();
            async move {
                let owner = owner_name(drive::pick(SEED ^ 1, c, seq) % OWNERS);
                let mut cursor = coll
                    .find(doc! {"owner": owner})
                    .sort(doc! {"owner": 1, "lid": 1})
                    .batch_size(1000)
                    .await?;
                let mut n = 0;
                while cursor.advance().await? {
                    n += 1;
                }
                Ok(n)
            }
        },
    )
    .await?;
    let delta = t.sample().await?.since(&before);
    eprintln!(
        "sync scan: {} docs/s ({} scans)",
        crate::report::num(run.units_per_sec()),
        run.ops
    );
    Ok(delta.add_to(
        Row::new("scan")
            .fig("scans", run.ops as f64)
            .fig("docs", run.units as f64)
            .fig("seconds", run.seconds)
            .fig("docs_per_sec", run.units_per_sec())
            .fig("scans_per_sec", run.ops_per_sec())
            .fig("docs_per_scan", ratio(run.units as f64, run.ops as f64))
            .fig("p50_us", run.latency.p50_us)
            .fig("p99_us", run.latency.p99_us),
    ))
}

/// Size figures: the data directory after a clean close, without the write-ahead log, when
/// the runner started the server (the log is reported beside it: at quick sizes the one
/// log file still on disk outweighs the trees); else collStats' storageSize +
/// totalIndexSize.
fn sizes(stats: &Document, raw_bytes: u64, docs: u64, closed: Option<ClosedSize>) -> Row {
    let n = |k: &str| match stats.get(k) {
        Some(Bson::Int32(v)) => *v as f64,
        Some(Bson::Int64(v)) => *v as f64,
        Some(Bson::Double(v)) => *v,
        _ => f64::NAN,
    };
    let coll_stored = n("storageSize") + n("totalIndexSize");
    let stored = closed.map_or(coll_stored, |c| {
        c.total_bytes.saturating_sub(c.log_bytes) as f64
    });
    let with_log = closed.map_or(f64::NAN, |c| c.total_bytes as f64);
    let raw_per_doc = ratio(raw_bytes as f64, docs as f64);
    let stored_per_doc = ratio(stored, docs as f64);
    Row::new("size")
        .fig("docs", docs as f64)
        .fig("raw_bytes", raw_bytes as f64)
        .fig("raw_bson_bytes_per_doc", raw_per_doc)
        .fig("coll_stats_size", n("size"))
        .fig("coll_stats_storage_size", n("storageSize"))
        .fig("coll_stats_index_size", n("totalIndexSize"))
        .fig("bytes_on_disk", stored)
        .fig(
            "log_bytes_on_disk",
            closed.map_or(f64::NAN, |c| c.log_bytes as f64),
        )
        .fig("bytes_on_disk_with_log", with_log)
        .fig("stored_bytes_per_doc", stored_per_doc)
        .fig(
            "stored_bytes_per_doc_with_log",
            ratio(with_log, docs as f64),
        )
        .fig("compression_ratio", ratio(raw_per_doc, stored_per_doc))
        .fig(
            "compression_ratio_with_log",
            ratio(raw_bytes as f64, with_log),
        )
        .fig("docs_tree_ratio", tree_ratio(stats, "_id_"))
        .fig("index_tree_ratio", tree_ratio(stats, "owner_lid"))
}

/// `collStats.shale.trees.<name>.compressionRatio` (ShaleDB only): raw over stored bytes of
/// the tree's nodes as last written before the close, NaN elsewhere.
fn tree_ratio(stats: &Document, name: &str) -> f64 {
    stats
        .get_document("shale")
        .and_then(|s| s.get_document("trees"))
        .and_then(|t| t.get_document(name))
        .and_then(|t| t.get_f64("compressionRatio"))
        .unwrap_or(f64::NAN)
}

fn owner_name(o: u64) -> String {
    format!("owner{o:05}@aol.com")
}

const WORDS: [&str; 96] = [
    "the",
    "meeting",
    "project",
    "update",
    "please",
    "review",
    "attached",
    "report",
    "for",
    "your",
    "team",
    "schedule",
    "next",
    "week",
    "about",
    "order",
    "shipping",
    "confirmation",
    "invoice",
    "account",
    "password",
    "reset",
    "newsletter",
    "sale",
    "offer",
    "today",
    "only",
    "free",
    "delivery",
    "photos",
    "from",
    "family",
    "dinner",
    "weekend",
    "plans",
    "travel",
    "itinerary",
    "flight",
    "hotel",
    "booking",
    "reminder",
    "appointment",
    "doctor",
    "school",
    "event",
    "tickets",
    "concert",
    "birthday",
    "party",
    "invitation",
    "re",
    "fwd",
    "question",
    "answer",
    "thanks",
    "hello",
    "regards",
    "best",
    "call",
    "me",
    "when",
    "you",
    "can",
    "and",
    "with",
    "this",
    "that",
    "have",
    "will",
    "our",
    "new",
    "service",
    "support",
    "request",
    "status",
    "payment",
    "received",
    "statement",
    "available",
    "online",
    "security",
    "alert",
    "sign",
    "in",
    "activity",
    "recent",
    "changes",
    "policy",
    "terms",
    "price",
    "list",
    "daily",
    "digest",
    "news",
    "local",
    "weather",
];
const FIRST: [&str; 16] = [
    "James", "Mary", "John", "Linda", "Robert", "Susan", "Michael", "Karen", "David", "Lisa",
    "William", "Nancy", "Richard", "Betty", "Thomas", "Sandra",
];
const LAST: [&str; 16] = [
    "Smith", "Johnson", "Brown", "Jones", "Miller", "Davis", "Wilson", "Moore", "Taylor",
    "Anderson", "Thomas", "Jackson", "White", "Harris", "Martin", "Thompson",
];
const FOLDERS: [&str; 6] = ["Inbox", "Sent", "Spam", "Archive", "Saved", "Drafts"];

/// The words of a sentence of `len` words, chosen by `r`'s successive hashes.
fn words(r: u64, len: u64) -> String {
    let mut s = String::new();
    for k in 0..len {
        if k > 0 {
            s.push(' ');
        }
        s.push_str(WORDS[(drive::mix(r ^ (k << 52)) % WORDS.len() as u64) as usize]);
    }
    s
}

fn person(r: u64) -> RawDocumentBuf {
    let (f, l) = (FIRST[(r % 16) as usize], LAST[((r >> 8) % 16) as usize]);
    let mut d = RawDocumentBuf::new();
    d.append("name", format!("{f} {l}"));
    d.append(
        "email",
        format!(
            "{}.{}{}@example.com",
            f.to_lowercase(),
            l.to_lowercase(),
            (r >> 16) % 1000
        ),
    );
    d
}

/// Document `i` of the load: a mail summary of a pseudo-random owner; `lid` is `i`, so an
/// owner's documents arrive interleaved with everyone else's, in ascending `lid` order.
pub fn document(i: u64) -> RawDocumentBuf {
    let r = |k: u64| drive::mix(SEED ^ (i << 8) ^ k);
    let owner = owner_name(r(0) % OWNERS);
    let sent_ms = 1_380_000_000_000 + (i as i64) * 1000 + (r(1) % 1000) as i64;
    let mut d = RawDocumentBuf::new();
    d.append("_id", format!("{owner}{i:012}"));
    d.append("owner", owner.as_str());
    d.append("lid", i as i64);
    d.append("folder", FOLDERS[(r(2) % 6) as usize]);
    d.append("subject", words(r(3), 4 + r(4) % 9));
    d.append("from", person(r(5)));
    let mut to = RawArrayBuf::new();
    for k in 0..1 + r(6) % 3 {
        to.push(person(r(7 + k)));
    }
    d.append("to", to);
    d.append("date", DateTime::from_millis(sent_ms));
    d.append("received", DateTime::from_millis(sent_ms + 2000));
    d.append("size", (2_000 + r(11) % 80_000) as i32);
    let mut flags = RawDocumentBuf::new();
    flags.append("seen", r(12) % 3 != 0);
    flags.append("flagged", r(12) % 17 == 0);
    flags.append("answered", r(12) % 5 == 0);
    flags.append("attachments", (r(13) % 4) as i32);
    d.append("flags", flags);
    d.append("snippet", words(r(14), 60 + r(15) % 60));
    d.append(
        "messageId",
        format!("<{:016x}.{:08x}@mx.aol.com>", r(16), r(17) as u32),
    );
    d.append("threadId", (r(18) % 1_000_000_000) as i64);
    let mut headers = RawDocumentBuf::new();
    headers.append("contentType", "multipart/alternative");
    headers.append("mailer", "AOL Webmail 38124-STANDARD");
    headers.append(
        "originatingIp",
        format!("10.{}.{}.{}", r(19) % 256, r(20) % 256, r(21) % 256),
    );
    headers.append("spamScore", (r(22) % 1000) as f64 / 100.0);
    d.append("headers", headers);
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_are_about_1_3_kb() {
        let avg = (0..500)
            .map(|i| document(i).as_bytes().len())
            .sum::<usize>()
            / 500;
        assert!((1100..1500).contains(&avg), "average {avg} bytes");
        let d = document(42);
        let owner = d.get_str("owner").expect("owner");
        assert_eq!(
            d.get_str("_id").expect("_id"),
            format!("{owner}000000000042")
        );
    }

    #[test]
    fn sizes_prefer_the_closed_directory() {
        let stats = doc! {"storageSize": 100_i64, "totalIndexSize": 50_i32, "size": 1000.0};
        let closed = ClosedSize {
            total_bytes: 1250,
            log_bytes: 1000,
        };
        let r = sizes(&stats, 1000, 10, Some(closed));
        assert_eq!(r.get("stored_bytes_per_doc"), Some(25.0));
        assert_eq!(r.get("compression_ratio"), Some(4.0));
        let r = sizes(&stats, 1000, 10, None);
        assert_eq!(r.get("stored_bytes_per_doc"), Some(15.0));
    }
}
