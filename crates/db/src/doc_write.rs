//! One document's changes inside an engine transaction: insert, replace and remove, each
//! changing the document tree, every index tree, the document count and the size counter
//! together (the transaction commits them atomically). A clustering index's entries carry the
//! document, so every change of the document rewrites them, changed key or not. Constraints are checked before the
//! first write for the document, so a failed document leaves nothing behind in the
//! transaction and the statements before it can still commit. Each change is also recorded
//! in the transaction's `Pending` oplog operations (off on a standalone).

use crate::catalog::{Collection, Index};
use crate::index_keys::{id_key, DocKeys};
use crate::oplog::pending::Pending;
use crate::{engine_error, DbResult};
use bson::{Bson, Document, RawDocument};
use shale_doc::{ErrorCode, MongoError};
use shale_engine::Txn;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Largest document MongoDB stores.
pub const MAX_DOCUMENT_BYTES: usize = 16 * 1024 * 1024;

/// Inserts `doc` (which has its `_id` first). Fails with `DuplicateKey` if the `_id` or a
/// unique index key is taken.
pub fn insert(
    txn: &mut Txn,
    log: &mut Pending,
    coll: &Collection,
    doc: &RawDocument,
) -> DbResult<()> {
    refuse_oplog(coll)?;
    check_size(doc)?;
    check_depth(doc, true)?;
    if let Some(c) = &coll.capped {
        crate::capped::check_fits(c, doc)?;
    }
    if let Some(v) = &coll.validator {
        v.check(&coll.ns, doc, None)?;
    }
    let id = id_of(doc)?;
    let idk = id_key(&id);
    if txn.get(&coll.docs, &idk).map_err(engine_error)?.is_some() {
        return Err(duplicate(
            coll,
            "_id_",
            &bson::doc! {"_id": 1},
            &bson::doc! {"_id": id},
        ));
    }
    let keys = index_keys(coll, doc)?;
    for (index, k) in coll.indexes.iter().zip(&keys) {
        if let Some(k) = k {
            check_unique(txn, coll, index, k, &idk, &[])?;
        }
    }
    txn.put(&coll.docs, &idk, doc.as_bytes())
        .map_err(engine_error)?;
    for (index, k) in coll.indexes.iter().zip(&keys) {
        if let Some(k) = k {
            let value = index.def.entry_value(&idk, doc);
            for (tuple, _) in &k.tuples {
                txn.put(&index.tree, &index.def.entry_key(tuple, &idk), value)
                    .map_err(engine_error)?;
            }
        }
    }
    if let Some(c) = &coll.capped {
        crate::capped::record_insert(txn, coll, c, &idk)?;
    }
    mark_multikey(coll, &keys);
    log.insert(coll, doc);
    txn.add_count(&coll.docs, 1);
    txn.add_count(&coll.size, doc.as_bytes().len() as i64);
    Ok(())
}

/// Replaces `old` with `new` (same `_id`): only the index entries that differ change, except
/// that a clustering index's entries are all rewritten with the new document. `whole`: the
/// statement was a replacement (its oplog entry is the new document, not a diff).
pub fn replace(
    txn: &mut Txn,
    log: &mut Pending,
    coll: &Collection,
    old: &RawDocument,
    new: &RawDocument,
    whole: bool,
) -> DbResult<()> {
    refuse_oplog(coll)?;
    check_size(new)?;
    check_depth(new, false)?;
    if let Some(v) = &coll.validator {
        v.check(&coll.ns, new, Some(old))?;
    }
    let id = id_of(new)?;
    let idk = id_key(&id);
    let old_keys = index_keys(coll, old)?;
    let new_keys = index_keys(coll, new)?;
    for ((index, o), n) in coll.indexes.iter().zip(&old_keys).zip(&new_keys) {
        if let Some(n) = n {
            let keep = o.as_ref().map_or(&[][..], |o| o.tuples.as_slice());
            check_unique(txn, coll, index, n, &idk, keep)?;
        }
    }
    txn.put(&coll.docs, &idk, new.as_bytes())
        .map_err(engine_error)?;
    for ((index, o), n) in coll.indexes.iter().zip(&old_keys).zip(&new_keys) {
        let o = o.as_ref().map_or(&[][..], |k| k.tuples.as_slice());
        let n = n.as_ref().map_or(&[][..], |k| k.tuples.as_slice());
        for (tuple, _) in o.iter().filter(|t| !contains(n, &t.0)) {
            txn.delete(&index.tree, &index.def.entry_key(tuple, &idk))
                .map_err(engine_error)?;
        }
        let value = index.def.entry_value(&idk, new);
        let rewrite_all = index.def.clustering;
        for (tuple, _) in n.iter().filter(|t| rewrite_all || !contains(o, &t.0)) {
            txn.put(&index.tree, &index.def.entry_key(tuple, &idk), value)
                .map_err(engine_error)?;
        }
    }
    mark_multikey(coll, &new_keys);
    log.update(coll, old, new, whole);
    let delta = new.as_bytes().len() as i64 - old.as_bytes().len() as i64;
    txn.add_count(&coll.size, delta);
    Ok(())
}

/// Removes `doc` and its index entries.
pub fn remove(
    txn: &mut Txn,
    log: &mut Pending,
    coll: &Collection,
    doc: &RawDocument,
) -> DbResult<()> {
    refuse_oplog(coll)?;
    let id = id_of(doc)?;
    let idk = id_key(&id);
    let keys = index_keys(coll, doc)?;
    txn.delete(&coll.docs, &idk).map_err(engine_error)?;
    for (index, k) in coll.indexes.iter().zip(&keys) {
        for (tuple, _) in k.iter().flat_map(|k| &k.tuples) {
            txn.delete(&index.tree, &index.def.entry_key(tuple, &idk))
                .map_err(engine_error)?;
        }
    }
    if coll.capped.is_some() {
        crate::capped::record_remove(txn, coll, &idk)?;
    }
    log.delete(coll, doc);
    txn.add_count(&coll.docs, -1);
    txn.add_count(&coll.size, -(doc.as_bytes().len() as i64));
    Ok(())
}

/// The oplog takes no user writes (its entries are written by `oplog/log.rs` alone): a
/// write error with mongod's `InvalidNamespace`, as on a replica-set member.
fn refuse_oplog(coll: &Collection) -> DbResult<()> {
    if crate::oplog::is_oplog(&coll.ns) {
        return Err(crate::oplog::oplog_write_refused(&coll.ns));
    }
    Ok(())
}

/// The keys `doc` gives each index (`None` where a sparse or partial index skips it).
pub fn index_keys(coll: &Collection, doc: &RawDocument) -> DbResult<Vec<Option<DocKeys>>> {
    coll.indexes.iter().map(|i| i.def.keys(doc)).collect()
}

/// The document's `_id`.
pub fn id_of(doc: &RawDocument) -> DbResult<Bson> {
    match doc.get("_id") {
        Ok(Some(v)) => Bson::try_from(v.to_raw_bson())
            .map_err(|e| MongoError::new(ErrorCode::InvalidBSON, e.to_string())),
        Ok(None) => Err(MongoError::new(
            ErrorCode::InternalError,
            "document has no _id",
        )),
        Err(e) => Err(MongoError::new(ErrorCode::InvalidBSON, e.to_string())),
    }
}

/// Refuses a document nested deeper than mongod stores (`Overflow`, worded for an insert or
/// for an update/replacement). Updates can build documents deeper than any the client sent.
fn check_depth(doc: &RawDocument, inserting: bool) -> DbResult<()> {
    match shale_doc::check_depth(doc.as_bytes(), shale_doc::MAX_STORAGE_DEPTH) {
        Ok(_) => Ok(()),
        Err(shale_doc::DepthError::TooDeep { .. }) => {
            Err(shale_doc::depth::storage_depth_error(inserting))
        }
        Err(e) => Err(e.to_wire_error()),
    }
}

fn check_size(doc: &RawDocument) -> DbResult<()> {
    let n = doc.as_bytes().len();
    if n > MAX_DOCUMENT_BYTES {
        return Err(MongoError::new(
            ErrorCode::BadValue,
            format!(
                "object to insert too large. size in bytes: {n}, max size: {MAX_DOCUMENT_BYTES}"
            ),
        ));
    }
    Ok(())
}

/// Fails if another document holds one of `keys` in a unique index. Tuples in `own` already
/// belong to this document.
fn check_unique(
    txn: &Txn,
    coll: &Collection,
    index: &Index,
    keys: &DocKeys,
    idk: &[u8],
    own: &[(Vec<u8>, Vec<Bson>)],
) -> DbResult<()> {
    if !index.def.unique {
        return Ok(());
    }
    for (tuple, values) in &keys.tuples {
        if contains(own, tuple) {
            continue;
        }
        if let Some(holder) = txn.get(&index.tree, tuple).map_err(engine_error)? {
            if index.def.value_id_key(&holder)? != idk {
                let mut key_value = Document::new();
                for ((path, _), v) in index.def.fields.iter().zip(values) {
                    key_value.insert(path.clone(), v.clone());
                }
                return Err(duplicate(
                    coll,
                    &index.def.name,
                    &index.def.key_pattern(),
                    &key_value,
                ));
            }
        }
    }
    Ok(())
}

fn contains(tuples: &[(Vec<u8>, Vec<Bson>)], tuple: &[u8]) -> bool {
    tuples
        .binary_search_by(|t| t.0.as_slice().cmp(tuple))
        .is_ok()
}

fn mark_multikey(coll: &Collection, keys: &[Option<DocKeys>]) {
    for (index, k) in coll.indexes.iter().zip(keys) {
        if k.as_ref().is_some_and(|k| k.multikey) {
            index.multikey.store(true, Ordering::Relaxed);
        }
    }
}

/// Before a commit: if a write made an index multikey and the stored catalog record does not
/// say so yet, writes the record in the same transaction and returns the indexes it marked,
/// for `multikey_committed` after the commit succeeds. (The in-memory flag is set before the
/// commit, so a planner never trusts a stale "not multikey"; the stored flag is set with the
/// first document that needs it, so a restart cannot forget it.)
pub fn persist_multikey(
    txn: &mut Txn,
    catalog: &crate::catalog::Catalog,
    coll: &Collection,
) -> DbResult<Vec<Arc<Index>>> {
    let pending: Vec<Arc<Index>> = coll
        .indexes
        .iter()
        .filter(|i| i.multikey.load(Ordering::SeqCst) && !i.multikey_durable.load(Ordering::SeqCst))
        .cloned()
        .collect();
    if !pending.is_empty() {
        txn.put(
            catalog.tree(),
            coll.ns.to_string().as_bytes(),
            &coll.record_bytes()?,
        )
        .map_err(engine_error)?;
    }
    Ok(pending)
}

/// After the commit that stored `marked` as multikey.
pub fn multikey_committed(marked: &[Arc<Index>]) {
    for i in marked {
        i.multikey_durable.store(true, Ordering::SeqCst);
    }
}

/// MongoDB's duplicate key error, with `keyPattern` and `keyValue`.
pub fn duplicate(
    coll: &Collection,
    index: &str,
    pattern: &Document,
    value: &Document,
) -> MongoError {
    let shown: Vec<String> = value.iter().map(|(k, v)| format!("{k}: {v}")).collect();
    MongoError::new(
        ErrorCode::DuplicateKey,
        format!(
            "E11000 duplicate key error collection: {} index: {index} dup key: {{ {} }}",
            coll.ns,
            shown.join(", ")
        ),
    )
    .with_info(bson::doc! { "keyPattern": pattern.clone(), "keyValue": value.clone() })
}
