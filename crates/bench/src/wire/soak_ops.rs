//! The soak's mixed operations: what the documents are, which operation each turn of a
//! client runs (fixed proportions, chosen by the turn's random number), and running one
//! operation with the check that makes a wrong answer an error. It never times anything and
//! never counts anything: `soak.rs` does.
//!
//! Documents are sysbench-shaped (`{_id: i, k, c: 119 characters, pad: 59 characters, n}`,
//! 236 bytes of BSON) with `k` indexed; `k` is a function of `_id`, so a find by `k` asks
//! for a value that exists.

use super::drive;
use anyhow::{ensure, Context, Result};
use mongodb::bson::{doc, Document, RawDocumentBuf};
use mongodb::Collection;
use std::fmt::Write as _;

/// The collection the soak works in.
pub const COLLECTION: &str = "soak";

/// One kind of operation of the mix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    /// `find_one({_id: i})` of a loaded document.
    FindId,
    /// `find_one({k: v})` through the secondary index, of a value a loaded document has.
    FindK,
    /// `update_one({_id: i}, {$inc: {n: 1}})` of a loaded document.
    Update,
    /// `insert_one` of a new document (ids above the loaded ones).
    Insert,
    /// `find({_id: {$gte: i}}).limit(20)`, every document read.
    Scan,
}

/// The kinds in the order figures are reported, and their share of the operations in
/// percent: 35 finds by `_id`, 20 by the secondary index, 20 updates, 15 inserts and 10
/// short scans.
pub const MIX: [(OpKind, u64); 5] = [
    (OpKind::FindId, 35),
    (OpKind::FindK, 20),
    (OpKind::Update, 20),
    (OpKind::Insert, 15),
    (OpKind::Scan, 10),
];

/// Documents a scan reads.
pub const SCAN_LIMIT: i64 = 20;

/// BSON bytes of one document.
pub const DOC_BYTES: u64 = 236;

impl OpKind {
    pub fn name(self) -> &'static str {
        match self {
            OpKind::FindId => "find_id",
            OpKind::FindK => "find_k",
            OpKind::Update => "update",
            OpKind::Insert => "insert",
            OpKind::Scan => "scan",
        }
    }

    /// Position in `MIX` (and in every per-kind array).
    pub fn index(self) -> usize {
        MIX.iter().position(|(k, _)| *k == self).unwrap_or(0)
    }

    /// The kind a turn whose random number is `r` runs.
    pub fn pick(r: u64) -> OpKind {
        let mut at = r % 100;
        for (kind, share) in MIX {
            if at < share {
                return kind;
            }
            at -= share;
        }
        OpKind::FindId
    }
}

/// `k` of document `i` (in [1, 1,000,000,000]).
pub fn k_of(i: u64) -> i64 {
    (1 + drive::mix(i ^ 0x6b6b) % 1_000_000_000) as i64
}

/// Digit groups as sysbench writes `c` and `pad`: 11 digits each, joined by '-'.
fn digit_groups(r: u64, groups: u64) -> String {
    let mut s = String::with_capacity((groups * 12) as usize);
    for g in 0..groups {
        if g > 0 {
            s.push('-');
        }
        let v = drive::mix(r ^ (g << 56)) % 100_000_000_000;
        let _ = write!(s, "{v:011}");
    }
    s
}

/// Document `i`.
pub fn document(i: u64) -> RawDocumentBuf {
    let r = drive::mix(i ^ 0x736f_616b);
    let mut d = RawDocumentBuf::new();
    d.append("_id", i as i64);
    d.append("k", k_of(i));
    d.append("c", digit_groups(r ^ 1, 10));
    d.append("pad", digit_groups(r ^ 2, 5));
    d.append("n", 0i64);
    d
}

/// What one operation needs: the collection (typed and raw), the loaded documents and
/// where new ids come from.
#[derive(Clone)]
pub struct OpTarget {
    pub docs: Collection<Document>,
    pub raw: Collection<RawDocumentBuf>,
    /// Documents loaded before the soak (`_id` 0 .. loaded - 1).
    pub loaded: u64,
    pub next_id: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl OpTarget {
    /// Runs one operation of `kind`; `r` picks its document. An answer that is not what the
    /// data says (a missing document, an update that matched nothing) is an error.
    pub async fn run(&self, kind: OpKind, r: u64) -> Result<()> {
        let i = (r >> 8) % self.loaded.max(1);
        match kind {
            OpKind::FindId => {
                let d = self
                    .docs
                    .find_one(doc! {"_id": i as i64})
                    .await?
                    .with_context(|| format!("no document with _id {i}"))?;
                ensure!(d.get_i64("k").ok() == Some(k_of(i)), "wrong document {i}");
            }
            OpKind::FindK => {
                let k = k_of(i);
                let d = self
                    .docs
                    .find_one(doc! {"k": k})
                    .await?
                    .with_context(|| format!("no document with k {k}"))?;
                ensure!(d.get_i64("k").ok() == Some(k), "wrong document for k {k}");
            }
            OpKind::Update => {
                let res = self
                    .docs
                    .update_one(doc! {"_id": i as i64}, doc! {"$inc": {"n": 1}})
                    .await?;
                ensure!(res.matched_count == 1, "update of _id {i} matched nothing");
            }
            OpKind::Insert => {
                let id = self
                    .next_id
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                self.raw.insert_one(document(id)).await?;
            }
            OpKind::Scan => {
                let from = i.min(self.loaded.saturating_sub(SCAN_LIMIT as u64));
                let mut cursor = self
                    .raw
                    .find(doc! {"_id": {"$gte": from as i64}})
                    .sort(doc! {"_id": 1})
                    .limit(SCAN_LIMIT)
                    .await?;
                let mut read = 0i64;
                while cursor.advance().await? {
                    let id = cursor.current().get_i64("_id")?;
                    ensure!(id == from as i64 + read, "scan from {from} read _id {id}");
                    read += 1;
                }
                ensure!(
                    read == SCAN_LIMIT.min(self.loaded as i64),
                    "scan from {from} read {read} documents"
                );
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_have_their_size() {
        assert_eq!(document(123_456).as_bytes().len() as u64, DOC_BYTES);
        assert_eq!(document(0).get_i64("k").ok(), Some(k_of(0)));
    }

    #[test]
    fn the_mix_adds_up_and_picks_in_proportion() {
        assert_eq!(MIX.iter().map(|(_, s)| s).sum::<u64>(), 100);
        let mut counts = [0u64; 5];
        for seq in 0..100_000 {
            counts[OpKind::pick(drive::pick(1, 0, seq)).index()] += 1;
        }
        for ((_, share), n) in MIX.iter().zip(counts) {
            let expect = share * 1000;
            assert!(n.abs_diff(expect) < expect / 10 + 100, "{counts:?}");
        }
    }
}
