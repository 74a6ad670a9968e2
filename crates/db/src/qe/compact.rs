//! `compactStructuredEncryptionData` and `cleanupStructuredEncryptionData` on an encrypted
//! collection (mongod 7.0's `fle2_compact`, `fle2_cleanup`). Compaction reads the ECOC's
//! entries for the fields it has tokens for, decrypts each to its value's ESC token and,
//! per distinct value, writes an anchor recording the value's insert count; then it deletes
//! the ESC's non-anchors that existed when it started and the ECOC entries it read.
//! Cleanup does the same, but folds each value into its null anchor (`(apos, cpos)`) and
//! deletes the value's anchors. Deviation: mongod renames the ECOC aside
//! (`<ecoc>.compact`) and drops it after; here the entries read are deleted instead (the
//! same end state, with no DDL, which would abort every live session transaction here).

use super::esc::{self, EscReader};
use super::insert::TxnEsc;
use super::tokens::{self, Token};
use super::QeTarget;
use crate::catalog::Collection;
use crate::{doc_write, engine_error, Database, DbResult, Namespace};
use bson::{Bson, RawBsonRef, RawDocument, RawDocumentBuf};
use shale_doc::{ErrorCode, MongoError};
use std::collections::BTreeSet;

/// What a compaction or cleanup read and changed, in mongod's reply shape.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CompactStats {
    /// ECOC documents read.
    pub ecoc_read: i64,
    /// ECOC documents deleted.
    pub ecoc_deleted: i64,
    /// ESC documents read.
    pub esc_read: i64,
    /// ESC documents inserted (anchors).
    pub esc_inserted: i64,
    /// ESC documents updated (null anchors).
    pub esc_updated: i64,
    /// ESC documents deleted.
    pub esc_deleted: i64,
}

impl CompactStats {
    /// `{ecoc: {read, deleted}, esc: {read, inserted, updated, deleted}}`.
    pub fn to_document(&self) -> bson::Document {
        bson::doc! {
            "ecoc": {"read": self.ecoc_read, "deleted": self.ecoc_deleted},
            "esc": {
                "read": self.esc_read,
                "inserted": self.esc_inserted,
                "updated": self.esc_updated,
                "deleted": self.esc_deleted,
            },
        }
    }
}

/// An ESC reader that counts its reads.
struct Counting<'a> {
    inner: TxnEsc<'a>,
    reads: i64,
}

impl EscReader for Counting<'_> {
    fn get(&mut self, id: &Token) -> DbResult<Option<RawDocumentBuf>> {
        self.reads += 1;
        self.inner.get(id)
    }
    fn count(&mut self) -> u64 {
        self.inner.count()
    }
}

fn stored(doc: &[u8], coll: &Collection) -> DbResult<RawDocumentBuf> {
    RawDocumentBuf::from_bytes(doc.to_vec()).map_err(|_| {
        MongoError::new(
            ErrorCode::DataCorruptionDetected,
            format!("{}: a stored document is not BSON", coll.ns),
        )
    })
}

/// Every document of `coll` as of `txn`'s snapshot.
fn all_documents(txn: &shale_engine::Txn, coll: &Collection) -> DbResult<Vec<RawDocumentBuf>> {
    let mut out = Vec::new();
    let mut cursor = txn.cursor(&coll.docs);
    cursor.seek_to_first().map_err(engine_error)?;
    while let Some((_, v)) = cursor.entry() {
        out.push(stored(v, coll)?);
        cursor.next().map_err(engine_error)?;
    }
    Ok(out)
}

fn to_bson(v: RawBsonRef<'_>) -> Bson {
    Bson::try_from(v.to_raw_bson()).unwrap_or(Bson::Null)
}

fn bytes_of<'a>(doc: &'a RawDocument, key: &str) -> Option<&'a [u8]> {
    match doc.get(key) {
        Ok(Some(RawBsonRef::Binary(b))) => Some(b.bytes),
        _ => None,
    }
}

/// Which of cleanup's or compaction's steps to run per value.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Compact,
    Cleanup,
}

impl Database {
    /// `compactStructuredEncryptionData`: `tokens` pairs each encrypted field's path with
    /// its ECOC token.
    pub fn qe_compact(
        &self,
        ns: &Namespace,
        tokens: &[(String, Vec<u8>)],
    ) -> DbResult<CompactStats> {
        self.qe_compact_or_cleanup(ns, tokens, Mode::Compact)
    }

    /// `cleanupStructuredEncryptionData`, with the same tokens.
    pub fn qe_cleanup(
        &self,
        ns: &Namespace,
        tokens: &[(String, Vec<u8>)],
    ) -> DbResult<CompactStats> {
        self.qe_compact_or_cleanup(ns, tokens, Mode::Cleanup)
    }

    fn qe_compact_or_cleanup(
        &self,
        ns: &Namespace,
        tokens: &[(String, Vec<u8>)],
        mode: Mode,
    ) -> DbResult<CompactStats> {
        let _guard = self.data_lock();
        let coll = self.existing(ns)?;
        let target = self.qe_target(&coll)?.ok_or_else(|| {
            MongoError::new(
                ErrorCode::Location6346807,
                "Target namespace is not an encrypted collection",
            )
        })?;
        let mut ecoc_tokens = Vec::new();
        for f in &target.config.fields {
            let token = tokens
                .iter()
                .find(|(p, _)| *p == f.path)
                .and_then(|(_, t)| tokens::token_of(t))
                .ok_or_else(|| {
                    MongoError::new(
                        ErrorCode::Location6346806,
                        format!(
                            "Compaction tokens object is missing compaction token for the encrypted path '{}'",
                            f.path
                        ),
                    )
                })?;
            ecoc_tokens.push((f.path.clone(), token));
        }
        let mut stats = CompactStats::default();
        let (ecoc_ids, values, non_anchors) =
            self.qe_read_state(&target, &ecoc_tokens, &mut stats)?;
        for esc_token in &values {
            self.in_write_txn(&target.esc, |txn, log| {
                let mut reader = Counting {
                    inner: TxnEsc {
                        txn,
                        coll: &target.esc,
                    },
                    reads: 0,
                };
                let change = value_change(&mut reader, esc_token, mode);
                stats.esc_read += reader.reads;
                let (insert, remove) = change?;
                for doc in insert {
                    let replaced = txn
                        .get(
                            &target.esc.docs,
                            &crate::index_keys::id_key(doc.get("_id").unwrap_or(&Bson::Null)),
                        )
                        .map_err(engine_error)?;
                    let raw = RawDocumentBuf::from_document(&doc)
                        .map_err(|e| MongoError::new(ErrorCode::InternalError, e.to_string()))?;
                    match replaced {
                        Some(old) => {
                            let old = stored(&old, &target.esc)?;
                            doc_write::replace(txn, log, &target.esc, &old, &raw, true)?;
                            stats.esc_updated += 1;
                        }
                        None => {
                            doc_write::insert(txn, log, &target.esc, &raw)?;
                            stats.esc_inserted += 1;
                        }
                    }
                }
                for id in remove {
                    stats.esc_deleted += delete_by_id(txn, log, &target.esc, &esc::id_value(&id))?;
                }
                Ok(())
            })?;
        }
        self.in_write_txn(&target.esc, |txn, log| {
            for id in &non_anchors {
                stats.esc_deleted += delete_by_id(txn, log, &target.esc, id)?;
            }
            for id in &ecoc_ids {
                stats.ecoc_deleted += delete_by_id(txn, log, &target.ecoc, id)?;
            }
            Ok(())
        })?;
        Ok(stats)
    }

    /// The ECOC entries of the fields with tokens (their ids, and the distinct ESC tokens
    /// they decrypt to) and the ESC's non-anchors, on one snapshot.
    #[allow(
        clippy::type_complexity,
        reason = "three lists read together, named at the one caller"
    )]
    fn qe_read_state(
        &self,
        target: &QeTarget,
        ecoc_tokens: &[(String, Token)],
        stats: &mut CompactStats,
    ) -> DbResult<(Vec<Bson>, BTreeSet<Token>, Vec<Bson>)> {
        let txn = self.engine().begin();
        let mut ids = Vec::new();
        let mut values = BTreeSet::new();
        for doc in all_documents(&txn, &target.ecoc)? {
            let field = doc.get_str("fieldName").ok();
            let Some((_, token)) = ecoc_tokens.iter().find(|(p, _)| Some(p.as_str()) == field)
            else {
                continue;
            };
            stats.ecoc_read += 1;
            let esc_token = bytes_of(&doc, "value")
                .and_then(|v| tokens::decrypt_ctr(token, v))
                .and_then(|plain| tokens::token_of(&plain))
                .ok_or_else(|| {
                    MongoError::new(
                        ErrorCode::BadValue,
                        "ECOC document's value does not decrypt with its compaction token",
                    )
                })?;
            values.insert(esc_token);
            if let Ok(Some(id)) = doc.get("_id") {
                ids.push(to_bson(id));
            }
        }
        let mut non_anchors = Vec::new();
        for doc in all_documents(&txn, &target.esc)? {
            if matches!(doc.get("value"), Ok(None)) {
                if let Ok(Some(id)) = doc.get("_id") {
                    non_anchors.push(to_bson(id));
                }
            }
        }
        txn.abort();
        Ok((ids, values, non_anchors))
    }
}

/// Removes the document with `_id` `id` from `coll`, if there; 1 when it was.
fn delete_by_id(
    txn: &mut shale_engine::Txn,
    log: &mut crate::oplog::pending::Pending,
    coll: &Collection,
    id: &Bson,
) -> DbResult<i64> {
    let key = crate::index_keys::id_key(id);
    match txn.get(&coll.docs, &key).map_err(engine_error)? {
        None => Ok(0),
        Some(bytes) => {
            let doc = stored(&bytes, coll)?;
            doc_write::remove(txn, log, coll, &doc)?;
            Ok(1)
        }
    }
}

/// What one value's compaction (a new anchor) or cleanup (its null anchor, its anchors
/// removed) writes: documents to insert or replace, ids to delete.
fn value_change(
    reader: &mut dyn EscReader,
    esc_token: &Token,
    mode: Mode,
) -> DbResult<(Vec<bson::Document>, Vec<Token>)> {
    let tag = tokens::esc_tag(esc_token);
    let value = tokens::esc_value(esc_token);
    let positions = esc::emu_binary(reader, &tag, &value)?;
    let latest_apos = match positions.apos {
        Some(a) => a,
        None => match reader.get(&esc::anchor_id(&tag, 0))? {
            Some(doc) => esc::anchor_pair(&value, &doc)?.0,
            None => 0,
        },
    };
    match mode {
        Mode::Compact => match positions.cpos {
            None => Ok((Vec::new(), Vec::new())),
            Some(cpos) => Ok((
                vec![esc::anchor_document(
                    &tag,
                    &value,
                    latest_apos + 1,
                    (0, cpos),
                )],
                Vec::new(),
            )),
        },
        Mode::Cleanup => {
            let cpos = esc::current_count(reader, &tag, &value)?;
            let null = esc::anchor_document(&tag, &value, 0, (latest_apos, cpos));
            let anchors = (1..=latest_apos).map(|a| esc::anchor_id(&tag, a)).collect();
            Ok((vec![null], anchors))
        }
    }
}
