//! ShaleDB's storage engine: named B-epsilon trees in one data directory, with a node cache,
//! copy-on-write block files, a write-ahead log, checkpoints and recovery.
//!
//! The engine stores bytes: it knows nothing of BSON, documents or the wire protocol. Inside
//! it, the tree knows nothing of the log or of transactions; the environment (`env`)
//! composes them. See `ARCHITECTURE.md`, `docs/format-*.md` and `docs/recovery.md`.

#![warn(missing_docs)]

mod background;
pub mod block;
mod bytes;
mod cache;
mod catalog;
mod codec;
mod codec_helper;
mod counters;
pub mod decoders;
mod env;
mod error;
mod handle;
mod heap;
mod inner;
mod lock;
pub mod mvcc;
mod options;
mod read_view;
mod recovery;
mod roles;
pub mod salvage;
mod tree;
mod tree_space;
mod txn;
mod txn_cursor;
pub mod vocab;
pub mod wal;

pub use counters::EngineCounters;
pub use env::Env;
pub use error::{Error, Location, Result};
pub use handle::{TreeHandle, WriteBatch};
pub use heap::{HeapProbe, HeapSample};
pub use inner::{add_i64_merge, EnvHooks};
pub use options::{
    default_read_page, Compression, EnvOptions, FsyncPolicy, TreeOptions, DEFAULT_HEAP_HEADROOM,
    DEFAULT_ZSTD_LEVEL, MAX_KEY_OR_VALUE_BYTES, MAX_ZSTD_LEVEL, MIN_TXN_MAX_BYTES, MIN_ZSTD_LEVEL,
    RECORDED_AS_ZERO_ZSTD_LEVEL,
};
pub use read_view::ReadView;
pub use shale_io::{Category, CategoryCounters, Fault, FaultInjector, IoCounters};
pub use tree::{CacheMix, Cursor, MergeFn, TreeShape};
pub use tree_space::TreeSpace;
pub use txn::Txn;
pub use txn_cursor::TxnCursor;
