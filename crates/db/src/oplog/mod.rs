//! The oplog (issue 24 item 5; docs/design-oplog.md): what an entry of `local.oplog.rs`
//! holds (`entry.rs`) and which entries readers may see (`visibility.rs`, invariant O4).
//! Not wired into the write paths yet: these are the pure parts the design builds on.

pub mod entry;
pub mod visibility;
