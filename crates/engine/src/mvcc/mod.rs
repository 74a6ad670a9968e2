//! Multi-version concurrency control primitives: commit timestamps and the registry of open
//! snapshots (`snapshots`), and the key lock table that detects write-write conflicts
//! (`locks`). Transactions (`crate::txn`) compose them with the log and the trees; leaf
//! entries keep the versions (`crate::tree::entry`). Design: docs/transactions.md.

mod locks;
mod snapshots;
mod status;

pub use crate::vocab::{Ts, TxnId};
pub use locks::{Held, LockId, LockMode, LockTable, Refusal};
pub use snapshots::{SnapshotGuard, Snapshots};
pub use status::{stamps_in_order, Resolved, TxnStatus, OLD_TS};
