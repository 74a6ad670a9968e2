//! The engine's error type. I/O failures and corruption are distinct: corruption always names
//! the file, the block (or log offset) and the reason, so an operator can act on it.

use std::path::PathBuf;

/// Result of an engine operation.
pub type Result<T> = std::result::Result<T, Error>;

/// Where in a file a corruption was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A tree node (block) by id, with the extent it was read from.
    Block {
        /// The node's id.
        node: u64,
        /// Byte offset of its extent.
        offset: u64,
        /// Length of its extent.
        len: u64,
    },
    /// One of the two file headers (0 or 1).
    Header {
        /// Which of the two.
        slot: u8,
    },
    /// The block translation table.
    TranslationTable {
        /// Byte offset of the table.
        offset: u64,
    },
    /// A write-ahead log record at a byte offset in a log file.
    LogRecord {
        /// Byte offset of the record's frame.
        offset: u64,
    },
    /// Anything else, described.
    Other(String),
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::Block { node, offset, len } => {
                write!(f, "block {node} (offset {offset}, {len} bytes)")
            }
            Location::Header { slot } => write!(f, "header slot {slot}"),
            Location::TranslationTable { offset } => {
                write!(f, "block translation table at offset {offset}")
            }
            Location::LogRecord { offset } => write!(f, "log record at offset {offset}"),
            Location::Other(s) => f.write_str(s),
        }
    }
}

/// What went wrong in the engine.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The OS (or an injected fault) failed an I/O call. After this the environment refuses
    /// further writes until it is reopened.
    #[error("I/O error: {0}")]
    Io(#[from] shale_io::Error),
    /// Bytes on disk are not what the engine wrote.
    #[error("corruption in {}: {location}: {reason}", file.display())]
    Corruption {
        /// The file the bytes came from.
        file: PathBuf,
        /// Where in the file.
        location: Location,
        /// What was wrong with them.
        reason: String,
    },
    /// An earlier I/O error left the environment unable to guarantee durability.
    #[error("environment failed earlier and must be reopened: {0}")]
    Poisoned(String),
    /// Another process holds the environment's directory.
    #[error("data directory {} is locked by another process", .0.display())]
    Locked(PathBuf),
    /// No tree of that name exists.
    #[error("no tree named {0:?}")]
    NoSuchTree(String),
    /// A tree of that name already exists.
    #[error("tree {0:?} already exists")]
    TreeExists(String),
    /// A key or value exceeds the engine's limit.
    #[error("{what} of {len} bytes exceeds the limit of {max} bytes")]
    TooLarge {
        /// Which of them (key or value).
        what: &'static str,
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The caller passed something the engine cannot accept.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The environment has been closed.
    #[error("environment is closed")]
    Closed,
    /// Another live transaction holds the key, or a commit newer than this transaction's
    /// snapshot wrote it (first writer wins). Nothing waits; abort and retry.
    #[error("write conflict on a key of tree {tree:?}: {reason}")]
    WriteConflict {
        /// The tree's name.
        tree: String,
        /// Who holds the key or when it was written.
        reason: String,
    },
    /// A transaction's write set would exceed the environment's limit
    /// (`EnvOptions::txn_limit`). The write is refused and the transaction stays open;
    /// retrying the same transaction meets the same limit.
    #[error("transaction too large: its writes would hold {bytes} bytes, the limit is {limit}")]
    TransactionTooLarge {
        /// What the write set would hold.
        bytes: usize,
        /// The limit.
        limit: usize,
    },
}

impl Error {
    /// Whether this error leaves the environment failed until reopened (an I/O failure, or
    /// one already recorded): `EnvInner::poison_on` records it.
    pub(crate) fn poisons(&self) -> bool {
        matches!(self, Error::Io(_) | Error::Poisoned(_))
    }

    /// Builds a corruption error.
    pub fn corruption(
        file: impl Into<PathBuf>,
        location: Location,
        reason: impl Into<String>,
    ) -> Self {
        Error::Corruption {
            file: file.into(),
            location,
            reason: reason.into(),
        }
    }

    /// An OS error on `path` during `op` (file-level calls outside `shale_io::DataFile`).
    pub fn os(path: impl Into<PathBuf>, op: &'static str, source: std::io::Error) -> Self {
        Error::Io(shale_io::Error::Os {
            path: path.into(),
            op,
            offset: 0,
            source,
        })
    }

    /// True for corruption (as opposed to I/O or usage) errors.
    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::Corruption { .. })
    }

    /// The device is full: this error, or the one that poisoned the environment (whose
    /// message `Poisoned` carries, with the OS's "(os error 28)").
    pub fn is_out_of_space(&self) -> bool {
        match self {
            Error::Io(e) => e.is_out_of_space(),
            Error::Poisoned(reason) => reason.contains("(os error 28)"),
            _ => false,
        }
    }
}
