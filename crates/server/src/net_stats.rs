//! Process-wide network counters for `serverStatus` (`connections`, `network`): connections
//! open and ever accepted, bytes and requests, and per compressor the bytes given to and
//! produced by compression and decompression, in mongod's shape.

use crate::wire::Compressor;
use bson::{doc, Document};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

static CONNECTIONS_CURRENT: AtomicU64 = AtomicU64::new(0);
static CONNECTIONS_TOTAL: AtomicU64 = AtomicU64::new(0);
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

/// `serverStatus.connections`.
pub fn connections_document() -> Document {
    doc! {
        "current": CONNECTIONS_CURRENT.load(Relaxed) as i64,
        "totalCreated": CONNECTIONS_TOTAL.load(Relaxed) as i64,
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
