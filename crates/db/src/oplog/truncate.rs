//! Keeping the oplog under `--oplogSize` (O6): when a logged commit leaves the oplog past
//! its bound, that committing thread deletes the oldest entries, in transactions of about
//! 1 MiB each, oldest key first, until it is under the bound again. It never deletes past
//! the visibility point (with one member the majority point is the visibility point, so
//! nothing a reader may still need to catch up on goes before it becomes visible). One
//! thread truncates at a time; others skip. A tailing cursor whose position was deleted
//! finds out at its next batch (`reader.rs`: `CappedPositionLost`).

use super::entry::{entry_key, key_ts};
use super::log::Oplog;
use super::pack;
use crate::{engine_error, Database, DbResult};
use std::sync::atomic::Ordering;

/// Bytes of entries one truncation transaction deletes at most.
const BATCH_BYTES: i64 = 1 << 20;

impl Database {
    /// Deletes the oldest entries until the oplog is under its bound (see the header).
    pub(crate) fn truncate_oplog(&self, oplog: &Oplog) {
        if oplog.truncating.swap(true, Ordering::AcqRel) {
            return;
        }
        while oplog.over_bound() {
            match self.truncate_batch(oplog) {
                Ok(0) => break,
                Ok(_) if !oplog.over_bound() => {
                    // The pre-images of the entries gone go too (`pre_images.rs`).
                    if let Some(oldest) = self.oldest_oplog_ts(oplog) {
                        self.purge_pre_images(oldest);
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "oplog truncation failed; retried at the next write");
                    break;
                }
            }
        }
        oplog.truncating.store(false, Ordering::Release);
    }

    /// The `ts` of the oplog's oldest entry.
    fn oldest_oplog_ts(&self, oplog: &Oplog) -> Option<bson::Timestamp> {
        let mut cursor = oplog.coll.docs.cursor();
        cursor.seek(&[]).ok()?;
        cursor.entry().and_then(|(k, _)| key_ts(k))
    }

    /// One transaction of deletes from the front; returns how many entries it deleted.
    fn truncate_batch(&self, oplog: &Oplog) -> DbResult<usize> {
        let excess = oplog.bytes() - oplog.max_bytes as i64;
        let budget = excess.clamp(1, BATCH_BYTES);
        let limit = entry_key(oplog.visible());
        let tree = &oplog.coll.docs;
        let mut txn = self.engine().begin();
        let mut doomed = Vec::new();
        let mut bytes = 0i64;
        {
            let mut cursor = txn.cursor(tree);
            cursor.seek(&[]).map_err(engine_error)?;
            while let Some((k, v)) = cursor.entry() {
                if k > &limit[..] || bytes >= budget {
                    break;
                }
                bytes += v.len() as i64;
                doomed.push(k.to_vec());
                cursor.next().map_err(engine_error)?;
            }
        }
        for k in &doomed {
            txn.delete(tree, k).map_err(engine_error)?;
        }
        txn.add_count(tree, -(doomed.len() as i64));
        txn.add_count(&oplog.coll.size, -bytes);
        txn.commit().map_err(engine_error)?;
        if let Some(last) = doomed.last().and_then(|k| key_ts(k)) {
            tracing::debug!(
                entries = doomed.len(),
                bytes,
                through = pack(last),
                "oplog truncated"
            );
        }
        Ok(doomed.len())
    }
}
