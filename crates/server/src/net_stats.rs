//! Process-wide network counters for `serverStatus` (`connections`, `network`): connections
//! open, ever accepted, refused for `maxConns` and running a command, bytes and requests, and per compressor the bytes given to and
//! produced by compression and decompression, in mongod's shape.

use crate::wire::Compressor;
use bson::{doc, Document};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

static CONNECTIONS_CURRENT: AtomicU64 = AtomicU64::new(0);
static CONNECTIONS_TOTAL: AtomicU64 = AtomicU64::new(0);
static CONNECTIONS_REJECTED: AtomicU64 = AtomicU64::new(0);
static CONNECTIONS_ACTIVE: AtomicU64 = AtomicU64::new(0);
static BYTES_IN: AtomicU64 = AtomicU64::new(0);
static BYTES_OUT: AtomicU64 = AtomicU64::new(0);
static REQUESTS: AtomicU64 = AtomicU64::new(0);

/// Per compressor (by id): compressor bytes in/out, decompressor bytes in/out.
static COMPRESSION: [[AtomicU64; 4]; 4] = [const { [const { AtomicU64::new(0) }; 4] }; 4];

pub(crate) fn connection_opened() {
    CONNECTIONS_CURRENT.fetch_add(1, Relaxed);
    CONNECTIONS_TOTAL.fetch_add(1, Relaxed);
}

pub(crate) fn connection_closed() {
    CONNECTIONS_CURRENT.fetch_sub(1, Relaxed);
}

/// A connection closed as soon as it was accepted (`maxConns`).
pub(crate) fn connection_rejected() {
    CONNECTIONS_REJECTED.fetch_add(1, Relaxed);
}

/// A connection is running a command until the guard drops (`connections.active`).
pub(crate) fn active() -> Active {
    CONNECTIONS_ACTIVE.fetch_add(1, Relaxed);
    Active(())
}

/// Counts its connection in `connections.active` while it lives.
pub(crate) struct Active(());

impl Drop for Active {
    fn drop(&mut self) {
        CONNECTIONS_ACTIVE.fetch_sub(1, Relaxed);
    }
}

/// One request of `bytes` bytes read from a client.
pub(crate) fn request(bytes: usize) {
    REQUESTS.fetch_add(1, Relaxed);
    BYTES_IN.fetch_add(bytes as u64, Relaxed);
}

pub(crate) fn reply(bytes: usize) {
    BYTES_OUT.fetch_add(bytes as u64, Relaxed);
}

pub(crate) fn compressed(c: Compressor, bytes_in: usize, bytes_out: usize) {
    let row = &COMPRESSION[c.id() as usize];
    row[0].fetch_add(bytes_in as u64, Relaxed);
    row[1].fetch_add(bytes_out as u64, Relaxed);
}

pub(crate) fn decompressed(c: Compressor, bytes_in: usize, bytes_out: usize) {
    let row = &COMPRESSION[c.id() as usize];
    row[2].fetch_add(bytes_in as u64, Relaxed);
    row[3].fetch_add(bytes_out as u64, Relaxed);
}

/// mongod's `net.maxIncomingConnections` default, for `available` when no limit is set.
const DEFAULT_MAX_CONNECTIONS: u64 = 1_000_000;

/// `serverStatus.connections`, mongod's fields: `available` is what `max_connections` leaves
/// (`current + available` is the limit); every connection has its own thread (`threaded`);
/// `active` counts those running a command (the one asking included).
pub fn connections_document(max_connections: Option<usize>) -> Document {
    let current = CONNECTIONS_CURRENT.load(Relaxed);
    let max = max_connections.map_or(DEFAULT_MAX_CONNECTIONS, |m| m as u64);
    doc! {
        "current": current as i32,
        "available": max.saturating_sub(current).min(i32::MAX as u64) as i32,
        "totalCreated": shale_doc::append_number(CONNECTIONS_TOTAL.load(Relaxed) as i64),
        "rejected": shale_doc::append_number(CONNECTIONS_REJECTED.load(Relaxed) as i64),
        "active": CONNECTIONS_ACTIVE.load(Relaxed) as i32,
        "threaded": current as i32,
    }
}

/// `serverStatus.network`.
pub fn network_document() -> Document {
    let mut compression = Document::new();
    for c in crate::wire::NEGOTIABLE_COMPRESSORS {
        let row = &COMPRESSION[c.id() as usize];
        let n = |i: usize| row[i].load(Relaxed) as i64;
        compression.insert(
            c.name(),
            doc! {
                "compressor": { "bytesIn": n(0), "bytesOut": n(1) },
                "decompressor": { "bytesIn": n(2), "bytesOut": n(3) },
            },
        );
    }
    doc! {
        "bytesIn": BYTES_IN.load(Relaxed) as i64,
        "bytesOut": BYTES_OUT.load(Relaxed) as i64,
        "numRequests": REQUESTS.load(Relaxed) as i64,
        "compression": compression,
    }
}
