//! The operations a write collects while its engine transaction runs, to become oplog
//! entries at its commit (`log.rs`). A write path records each document change it makes
//! (`doc_write.rs` does for inserts, replacements and removals); a standalone's buffer is
//! off and records nothing (no cost but a branch). Collections of the `local` database are
//! never logged, as on mongod. An update is recorded as mongod's `$v: 2` diff when the new
//! document keeps the old one's top-level field order (changed fields `u`, new ones `i` at the
//! end, removed ones `d`, sub-documents and arrays changed in place as sub-diffs `s<field>`),
//! else, and for a replacement statement, as the new document.

use super::entry::{Op, Operation};
use crate::catalog::Collection;
use crate::pre_images::PreImage;
use bson::{RawBsonRef, RawDocument, RawDocumentBuf};

/// What one engine transaction changed, in order.
#[derive(Debug, Default)]
pub(crate) struct Pending {
    on: bool,
    pub(crate) ops: Vec<Operation>,
    /// The documents before the updates and deletes of collections that keep pre-images.
    pub(crate) pre_images: Vec<PreImage>,
}

impl Pending {
    /// A buffer that records (`on`: the database keeps an oplog) or ignores.
    pub(crate) fn new(on: bool) -> Pending {
        Pending {
            on,
            ops: Vec::new(),
            pre_images: Vec::new(),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Whether changes to `coll` are replicated: not those in `local`, nor a database's
    /// profiler output (`system.profile`), which mongod keeps per member too.
    fn logs(&self, coll: &Collection) -> bool {
        self.on && coll.ns.db != "local" && coll.ns.coll != "system.profile"
    }

    /// Keeps `old` as the pre-image of the operation about to be pushed, if `coll` asks.
    fn keep_pre_image(&mut self, coll: &Collection, old: &RawDocument) {
        if coll.keeps_pre_images() {
            self.pre_images.push(PreImage {
                op_index: self.ops.len(),
                ui: coll.uuid,
                doc: old.to_owned(),
            });
        }
    }

    fn push(&mut self, coll: &Collection, op: Op) {
        self.ops.push(Operation {
            op,
            ns: coll.ns.to_string(),
            ui: Some(coll.uuid),
        });
    }

    /// A command (`create`, `createIndexes`) on database `db` ran in the transaction.
    pub(crate) fn command(&mut self, db: &str, ui: bson::Uuid, command: RawDocumentBuf) {
        if self.on && db != "local" {
            self.ops.push(Operation {
                op: Op::Command { command },
                ns: format!("{db}.$cmd"),
                ui: Some(ui),
            });
        }
    }

    /// `doc` was inserted.
    pub(crate) fn insert(&mut self, coll: &Collection, doc: &RawDocument) {
        if self.logs(coll) {
            let key = id_key_document(doc);
            self.push(
                coll,
                Op::Insert {
                    doc: doc.to_owned(),
                    key,
                },
            );
        }
    }

    /// `old` was replaced by `new`; `whole` for a replacement statement, which mongod logs as
    /// the new document (a change stream's `replace` event) however little it changed.
    pub(crate) fn update(
        &mut self,
        coll: &Collection,
        old: &RawDocument,
        new: &RawDocument,
        whole: bool,
    ) {
        if self.logs(coll) {
            let update = match whole {
                true => new.to_owned(),
                false => diff(old, new).unwrap_or_else(|| new.to_owned()),
            };
            let key = id_key_document(new);
            self.keep_pre_image(coll, old);
            self.push(coll, Op::Update { update, key });
        }
    }

    /// An update message sent blind (a fast update): `o` is the operator document as given.
    pub(crate) fn blind_update(
        &mut self,
        coll: &Collection,
        id: &bson::Bson,
        update: RawDocumentBuf,
    ) {
        if self.logs(coll) {
            let mut key = RawDocumentBuf::new();
            if let Ok(raw) = bson::RawBson::try_from(id.clone()) {
                key.append("_id", raw);
            }
            self.push(coll, Op::Update { update, key });
        }
    }

    /// `doc` was removed.
    pub(crate) fn delete(&mut self, coll: &Collection, doc: &RawDocument) {
        if self.logs(coll) {
            let key = id_key_document(doc);
            self.keep_pre_image(coll, doc);
            self.push(coll, Op::Delete { key });
        }
    }
}

/// `{_id: <the document's _id>}`, copied raw.
fn id_key_document(doc: &RawDocument) -> RawDocumentBuf {
    let mut key = RawDocumentBuf::new();
    if let Ok(Some(id)) = doc.get("_id") {
        key.append("_id", id.to_raw_bson());
    }
    key
}

/// mongod's `{$v: 2, diff: {d, u, i, s<field>}}` for a change, or `None` when the new
/// document reorders the old one's remaining top-level fields (a replacement then says it).
pub(crate) fn diff(old: &RawDocument, new: &RawDocument) -> Option<RawDocumentBuf> {
    let d = diff_document(old, new, 0)?;
    let mut out = RawDocumentBuf::new();
    out.append("$v", 2i32);
    out.append("diff", d);
    Some(out)
}

/// Depth past which a changed sub-document is logged whole instead of diffed.
const MAX_DIFF_DEPTH: usize = 100;

/// The diff of two documents: removed fields `d`, changed ones `u`, new ones `i` (at the
/// end), then a sub-diff `s<field>` for each sub-document or array changed in place; `None`
/// when the kept fields changed order.
fn diff_document(old: &RawDocument, new: &RawDocument, depth: usize) -> Option<RawDocumentBuf> {
    let old_fields: Vec<(&str, RawBsonRef<'_>)> = old.iter().collect::<Result<_, _>>().ok()?;
    let new_fields: Vec<(&str, RawBsonRef<'_>)> = new.iter().collect::<Result<_, _>>().ok()?;
    let mut deleted = RawDocumentBuf::new();
    let mut updated = RawDocumentBuf::new();
    let mut inserted = RawDocumentBuf::new();
    let mut nested: Vec<(String, RawDocumentBuf)> = Vec::new();
    // The old fields the new document keeps must come first in the new one, in order.
    let kept: Vec<&(&str, RawBsonRef<'_>)> = old_fields
        .iter()
        .filter(|(k, _)| new_fields.iter().any(|(n, _)| n == k))
        .collect();
    for (i, (k, v)) in kept.iter().enumerate() {
        let (nk, nv) = new_fields.get(i)?;
        if nk != k {
            return None;
        }
        if same(v, nv) {
            continue;
        }
        match sub_diff(v, nv, depth + 1) {
            Some(sub) => nested.push((format!("s{k}"), sub)),
            None => updated.append(*k, nv.to_raw_bson()),
        }
    }
    for (k, _) in &old_fields {
        if !new_fields.iter().any(|(n, _)| n == k) {
            deleted.append(*k, false);
        }
    }
    for (k, v) in &new_fields[kept.len()..] {
        inserted.append(*k, v.to_raw_bson());
    }
    let mut d = RawDocumentBuf::new();
    for (name, part) in [("d", deleted), ("u", updated), ("i", inserted)] {
        if part.iter().next().is_some() {
            d.append(name, part);
        }
    }
    for (name, sub) in nested {
        d.append(name, sub);
    }
    Some(d)
}

/// A sub-diff for a value changed in place: two documents (fields diffed) or two arrays
/// (`{a: true, l: <new length if shorter>, u<i>, s<i>}`); `None` to log the new value whole.
fn sub_diff(old: &RawBsonRef<'_>, new: &RawBsonRef<'_>, depth: usize) -> Option<RawDocumentBuf> {
    if depth > MAX_DIFF_DEPTH {
        return None;
    }
    match (old, new) {
        (RawBsonRef::Document(o), RawBsonRef::Document(n)) => diff_document(o, n, depth),
        (RawBsonRef::Array(o), RawBsonRef::Array(n)) => {
            let o: Vec<RawBsonRef<'_>> = o.into_iter().collect::<Result<_, _>>().ok()?;
            let n: Vec<RawBsonRef<'_>> = n.into_iter().collect::<Result<_, _>>().ok()?;
            let mut d = RawDocumentBuf::new();
            d.append("a", true);
            if n.len() < o.len() {
                d.append("l", n.len() as i32);
            }
            for (i, nv) in n.iter().enumerate() {
                match o.get(i) {
                    Some(ov) if same(ov, nv) => {}
                    Some(ov) => match sub_diff(ov, nv, depth + 1) {
                        Some(sub) => d.append(format!("s{i}"), sub),
                        None => d.append(format!("u{i}"), nv.to_raw_bson()),
                    },
                    None => d.append(format!("u{i}"), nv.to_raw_bson()),
                }
            }
            Some(d)
        }
        _ => None,
    }
}

/// Byte equality of two values of the same type (what a diff needs: any change shows).
fn same(a: &RawBsonRef<'_>, b: &RawBsonRef<'_>) -> bool {
    a.element_type() == b.element_type() && a.to_raw_bson() == b.to_raw_bson()
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn raw(d: bson::Document) -> RawDocumentBuf {
        RawDocumentBuf::from_document(&d).expect("raw")
    }

    #[test]
    fn a_diff_names_changed_added_and_removed_fields() {
        let old = raw(doc! {"_id": 1, "a": 1, "b": 2, "c": 3});
        let new = raw(doc! {"_id": 1, "a": 5, "c": 3, "z": true});
        let d = diff(&old, &new).expect("diff").to_document().expect("doc");
        assert_eq!(
            d,
            doc! {"$v": 2, "diff": {"d": {"b": false}, "u": {"a": 5}, "i": {"z": true}}}
        );
    }

    #[test]
    fn sub_documents_and_arrays_are_diffed_in_place() {
        let old = raw(doc! {"_id": 1, "a": {"b": 1, "c": 2}, "arr": [1, {"k": 1}, 3]});
        let new = raw(doc! {"_id": 1, "a": {"b": 5, "c": 2, "n": 0}, "arr": [1, {"k": 2}]});
        let d = diff(&old, &new).expect("diff").to_document().expect("doc");
        assert_eq!(
            d,
            doc! {"$v": 2, "diff": {
                "sa": {"u": {"b": 5}, "i": {"n": 0}},
                "sarr": {"a": true, "l": 2, "s1": {"u": {"k": 2}}},
            }}
        );
    }

    #[test]
    fn a_reordering_is_a_replacement() {
        let old = raw(doc! {"_id": 1, "a": 1, "b": 2});
        let new = raw(doc! {"_id": 1, "b": 2, "a": 1});
        assert!(diff(&old, &new).is_none());
    }

    #[test]
    fn a_type_change_of_an_equal_number_is_a_change() {
        let old = raw(doc! {"_id": 1, "a": 1});
        let new = raw(doc! {"_id": 1, "a": 1i64});
        let d = diff(&old, &new).expect("diff").to_document().expect("doc");
        assert_eq!(d, doc! {"$v": 2, "diff": {"u": {"a": 1i64}}});
    }
}
