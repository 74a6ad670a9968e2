//! Read-free ("fast") updates, TokuMX 2.0's `fastUpdates`: which update statements may skip
//! the read, and sending them. With the switch on, a statement qualifies when it is
//! single-document and not an upsert, its filter is exactly `{_id: <value>}` (a value that
//! matches by equality only), its update qualifies for blind application (`UpdateSpec::
//! blind_paths`: operator form, no positional path, no `arrayFilters`), no path it writes is
//! `_id` or at, above or below an indexed path (key fields, partial filter fields; a
//! wildcard index covers all), the collection has no clustering index (its entries carry
//! the whole document), and it runs in its own transaction (not in a session transaction or
//! a retryable write's statement: those report exact counts and errors). Anything else takes
//! the read-modify-write path in `write_ops.rs`.
//!
//! A qualifying statement becomes one update message on the document's key
//! (`fast_merge.rs` applies it) and is reported as TokuMX reported one: matched and
//! modified (`n: 1, nModified: 1`), whether or not the document exists or changes. The
//! document count stays exact (a message never creates or removes a document); the data
//! size counter does not see the change in size (`validate` corrects it, see `stats.rs`), so
//! the first fast update of a collection in this process marks its size tree.

use crate::catalog::Collection;
use crate::fast_merge::{encode_payload, FastUpdateStats};
use crate::index_keys::id_key;
use crate::user_txn::Mode;
use crate::write_ops::UpdateOp;
use crate::{engine_error, Database, DbResult};
use bson::{Bson, Document};
use shale_doc::{ErrorCode, MongoError};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// The key of the marker entry in a collection's size tree: present once a fast update was
/// sent to the collection, so its size counter may be off (docs/format-collections.md).
pub(crate) const SIZE_MARKER_KEY: &[u8] = b"fastUpdated";

/// The database's fast-update state: the switch, the callback's counters, and which
/// collections' size trees are already marked.
#[derive(Debug, Default)]
pub(crate) struct FastUpdates {
    enabled: AtomicBool,
    pub(crate) stats: Arc<FastUpdateStats>,
    marked: Mutex<HashSet<u64>>,
}

impl FastUpdates {
    pub(crate) fn new(enabled: bool) -> FastUpdates {
        FastUpdates {
            enabled: AtomicBool::new(enabled),
            ..FastUpdates::default()
        }
    }
}

impl Database {
    /// Whether eligible updates are sent as messages (`fastUpdates`).
    pub fn fast_updates(&self) -> bool {
        self.fast.enabled.load(Ordering::Relaxed)
    }

    /// Turns fast updates on or off (`setParameter fastUpdates`); statements already
    /// running keep the path they chose.
    pub fn set_fast_updates(&self, on: bool) {
        self.fast.enabled.store(on, Ordering::Relaxed);
    }

    /// Fast-update counters: messages sent, applications that changed a document, and
    /// applications refused (the document left unchanged).
    pub fn fast_update_counts(&self) -> (u64, u64, u64) {
        let s = &self.fast.stats;
        (
            s.sent.load(Ordering::Relaxed),
            s.applied.load(Ordering::Relaxed),
            s.errors.load(Ordering::Relaxed),
        )
    }

    /// Sends `op` as an update message if it qualifies: `Some` with its counts
    /// `(n, nModified)` then, `None` when it must take the read-modify-write path.
    pub(crate) fn try_fast_update(
        &self,
        coll: &Collection,
        op: &UpdateOp,
        mode: &Mode<'_>,
    ) -> Option<DbResult<(i64, i64)>> {
        // A collection keeping pre-images needs the old document (`pre_images.rs`).
        if !self.fast_updates()
            || mode.in_session()
            || crate::oplog::is_oplog(&coll.ns)
            || coll.keeps_pre_images()
            // Queryable Encryption's payloads become indexed values and tags (`qe/update.rs`).
            || coll.options.contains_key("encryptedFields")
        {
            return None;
        }
        let (id, update) = fast_target(coll, op)?;
        // An `_id` holding a string names one key only under the simple collation.
        let collated = crate::collation_scope::statement_vars(coll, &op.vars)
            .collation()
            .is_some();
        if collated && has_string(id) {
            return None;
        }
        Some(self.send_fast_update(coll, id, update))
    }

    fn send_fast_update(
        &self,
        coll: &Collection,
        id: &Bson,
        update: &Document,
    ) -> DbResult<(i64, i64)> {
        let now_ms = bson::DateTime::now().timestamp_millis();
        let payload = encode_payload(update, now_ms)
            .map_err(|e| MongoError::new(ErrorCode::BadValue, e.to_string()))?;
        let idk = id_key(id);
        let mark = !self.marked(coll.id);
        let logged = bson::RawDocumentBuf::from_document(update)
            .map_err(|e| MongoError::new(ErrorCode::BadValue, e.to_string()))?;
        self.in_logged_txn(|txn, log| {
            txn.update(&coll.docs, &idk, &payload)
                .map_err(engine_error)?;
            log.blind_update(coll, id, logged.clone());
            if mark {
                txn.put(&coll.size, SIZE_MARKER_KEY, b"")
                    .map_err(engine_error)?;
            }
            Ok(())
        })?;
        if mark {
            self.set_marked(coll.id);
        }
        self.fast.stats.sent.fetch_add(1, Ordering::Relaxed);
        Ok((1, 1))
    }

    fn marked(&self, coll_id: u64) -> bool {
        let marked = self.fast.marked.lock().unwrap_or_else(|p| p.into_inner());
        marked.contains(&coll_id)
    }

    fn set_marked(&self, coll_id: u64) {
        let mut marked = self.fast.marked.lock().unwrap_or_else(|p| p.into_inner());
        marked.insert(coll_id);
    }
}

/// Whether `v` holds a string anywhere (a collation can make it equal to other values).
fn has_string(v: &Bson) -> bool {
    match v {
        Bson::String(_) | Bson::Symbol(_) => true,
        Bson::Document(d) => d.values().any(has_string),
        Bson::Array(a) => a.iter().any(has_string),
        _ => false,
    }
}

/// The `_id` and the operator document of a statement that qualifies (module doc).
fn fast_target<'a>(coll: &Collection, op: &'a UpdateOp) -> Option<(&'a Bson, &'a Document)> {
    if op.multi || op.upsert || op.hint.is_some() {
        return None;
    }
    let id = exact_id(&op.filter)?;
    let update = op.update.operator_document()?;
    let paths = op.update.blind_paths()?;
    // A validator must see the updated document, so such a collection's updates read it.
    if paths.is_empty()
        || coll.validator.is_some()
        || coll.capped.is_some()
        || coll.indexes.iter().any(|i| i.def.clustering)
    {
        return None;
    }
    let indexed = indexed_paths(coll);
    let clear = paths.iter().all(|p| {
        let p = comparable(p);
        p.first() != Some(&"_id") && indexed.iter().all(|i| !overlaps(&p, i))
    });
    clear.then_some((id, update))
}

/// The `_id` of a filter that is exactly `{_id: <value>}` with a value that matches only
/// documents whose `_id` equals it (so its key names the one document it can match).
fn exact_id(filter: &Document) -> Option<&Bson> {
    let mut fields = filter.iter();
    let (name, value) = fields.next()?;
    if name != "_id" || fields.next().is_some() {
        return None;
    }
    let plain = match value {
        // An operator document is a condition; a regex matches strings; an array or null
        // matches more than equal `_id`s; decimal128 keys compare via their nearest double.
        Bson::Document(d) => d.keys().all(|k| !k.starts_with('$')),
        Bson::RegularExpression(_)
        | Bson::Array(_)
        | Bson::Null
        | Bson::Undefined
        | Bson::Decimal128(_) => false,
        _ => true,
    };
    plain.then_some(value)
}

/// Every path an index of `coll` reads: key fields and partial filter fields, each as
/// comparable components; `["$**"]` for a wildcard index.
fn indexed_paths(coll: &Collection) -> Vec<Vec<&str>> {
    let mut out = Vec::new();
    for index in &coll.indexes {
        for (path, _) in &index.def.fields {
            out.push(if path.contains("$**") {
                vec!["$**"]
            } else {
                comparable(path)
            });
        }
        if let Ok(filter) = index.spec.get_document("partialFilterExpression") {
            filter_paths(filter, &mut out);
        }
    }
    out
}

/// The field paths a query filter names (through `$and`/`$or`/`$nor` and the like).
fn filter_paths<'a>(filter: &'a Document, out: &mut Vec<Vec<&'a str>>) {
    let mut pending: Vec<&'a Bson> = Vec::new();
    let visit = |d: &'a Document, pending: &mut Vec<&'a Bson>, out: &mut Vec<Vec<&'a str>>| {
        for (k, v) in d {
            if k.starts_with('$') {
                pending.push(v);
            } else {
                out.push(comparable(k));
            }
        }
    };
    visit(filter, &mut pending, out);
    while let Some(v) = pending.pop() {
        match v {
            Bson::Document(d) => visit(d, &mut pending, out),
            Bson::Array(a) => pending.extend(a.iter()),
            _ => {}
        }
    }
}

/// A dotted path's components without the numeric ones, which may be array positions: an
/// update of `a.0.b` changes index `a.b`'s keys. Dropping them only makes more paths overlap.
fn comparable(path: &str) -> Vec<&str> {
    path.split('.')
        .filter(|c| c.is_empty() || !c.bytes().all(|b| b.is_ascii_digit()))
        .collect()
}

/// Whether writing `update` can change what is read at `indexed`: one is a prefix of the
/// other (or the index is a wildcard).
fn overlaps(update: &[&str], indexed: &[&str]) -> bool {
    if indexed == ["$**"] {
        return true;
    }
    let n = update.len().min(indexed.len());
    update[..n] == indexed[..n]
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn only_plain_equality_on_id_names_one_document() {
        assert_eq!(exact_id(&doc! {"_id": 5}), Some(&Bson::Int32(5)));
        assert!(exact_id(&doc! {"_id": {"a": 1}}).is_some());
        assert!(exact_id(&doc! {"_id": {"$gt": 1}}).is_none());
        assert!(exact_id(&doc! {"_id": 5, "a": 1}).is_none());
        assert!(exact_id(&doc! {"a": 1}).is_none());
        assert!(exact_id(&doc! {"_id": [1, 2]}).is_none());
        assert!(exact_id(&doc! {"_id": Bson::Null}).is_none());
        assert!(exact_id(&doc! {}).is_none());
    }

    #[test]
    fn paths_overlap_at_above_and_below_and_through_array_positions() {
        let o = |u: &str, i: &str| overlaps(&comparable(u), &comparable(i));
        assert!(o("a", "a"));
        assert!(o("a", "a.b"));
        assert!(o("a.b.c", "a.b"));
        assert!(o("a.0.b", "a.b"));
        assert!(o("a.3", "a.b"));
        assert!(!o("a.c", "a.b"));
        assert!(!o("ab", "a"));
        assert!(overlaps(&comparable("x"), &["$**"]));
    }

    #[test]
    fn partial_filters_name_their_fields() {
        let f = doc! {"a": {"$gt": 1}, "$or": [{"b.c": 1}, {"d": {"$exists": true}}]};
        let mut out = Vec::new();
        filter_paths(&f, &mut out);
        out.sort();
        assert_eq!(out, [vec!["a"], vec!["b", "c"], vec!["d"]]);
    }
}
