//! Oplog entries as change events, mongod's way: which entries a stream's scope sees, and
//! the event each one makes (`insert`, `update` with its `updateDescription`, `replace`,
//! `delete`, `drop`, `rename`, `dropDatabase`, and the `invalidate` that ends a collection
//! stream at its collection's drop or rename, and a database stream at its database's drop).
//! A transaction's `applyOps` entry is unwound into its operations in order, each an event
//! at the entry's `ts` with its index in the token and the session's `txnNumber`/`lsid`.
//! With `showExpandedEvents` the events also carry `collectionUUID` and, for DDL,
//! `operationDescription`, and DDL beyond drops and renames is reported (`create`,
//! `createIndexes`, `dropIndexes`, `modify`). Field order follows mongod 7.0's event
//! transformation. Pure: reads nothing but the entry.

use super::token::ResumeToken;
use super::update_desc::update_description;
use crate::namespace::Namespace;
use bson::{RawBson, RawBsonRef, RawDocument, RawDocumentBuf, Timestamp};
use shale_doc::{ErrorCode, MongoError};

/// What a change stream watches.
#[derive(Debug, Clone, PartialEq)]
pub enum Scope {
    /// One collection (`aggregate: <coll>`).
    Collection(Namespace),
    /// Every collection of a database (`aggregate: 1` on it).
    Database(String),
    /// Every database but `admin`, `config` and `local` (`allChangesForCluster` on admin).
    Cluster,
}

/// Databases a whole-deployment stream never reports.
const INTERNAL_DBS: [&str; 3] = ["admin", "config", "local"];

impl Scope {
    /// Whether a change to collection `coll` of `db` is seen.
    fn sees(&self, db: &str, coll: &str) -> bool {
        match self {
            Scope::Collection(ns) => ns.db == db && ns.coll == coll,
            Scope::Database(d) => d == db && !coll.starts_with("system."),
            Scope::Cluster => !INTERNAL_DBS.contains(&db) && !coll.starts_with("system."),
        }
    }

    fn sees_db(&self, db: &str) -> bool {
        match self {
            Scope::Collection(ns) => ns.db == db,
            Scope::Database(d) => d == db,
            Scope::Cluster => !INTERNAL_DBS.contains(&db),
        }
    }
}

/// How an update entry became an event.
#[derive(Debug, Clone, PartialEq)]
pub enum UpdateKind {
    /// Not an update.
    None,
    /// A `$v: 2` diff: the description is complete.
    Diff,
    /// A fast update's operator document (`fastUpdates`): its `$set`/`$unset` are described,
    /// the other operators' paths need the document's values, read by the caller.
    Blind(Vec<String>),
}

/// One change event before rendering.
#[derive(Debug, Clone)]
pub struct Change {
    /// The event's resume token (`_id`).
    pub token: ResumeToken,
    /// `operationType` (`insert`, `update`, `drop`, ...).
    pub operation: &'static str,
    /// `wallTime`.
    pub wall: RawBson,
    /// `(db, coll)`; `coll` empty for `dropDatabase`; `None` for `invalidate`.
    pub ns: Option<(String, String)>,
    /// A rename's target `(db, coll)`.
    pub to: Option<(String, String)>,
    /// `fullDocument`, when the event carries one.
    pub full_document: Option<RawDocumentBuf>,
    /// `documentKey` (`{_id}`).
    pub document_key: Option<RawDocumentBuf>,
    /// An update's `updateDescription`.
    pub update_description: Option<RawDocumentBuf>,
    /// How the update entry became this event.
    pub update_kind: UpdateKind,
    /// `(txnNumber, lsid)` of a transaction's event.
    pub txn: Option<(i64, RawDocumentBuf)>,
    /// The collection's UUID (`showExpandedEvents` only).
    pub collection_uuid: Option<RawBson>,
    /// A DDL event's details (`showExpandedEvents` only).
    pub operation_description: Option<RawDocumentBuf>,
    /// The stream ends after this event (an `invalidate` follows it).
    pub invalidates: bool,
    /// Where an update's, replacement's or delete's pre-image is kept, if its collection
    /// keeps them: the collection's UUID, the entry's `ts` and the `applyOps` index.
    pub image_key: Option<(bson::Uuid, Timestamp, u32)>,
    /// An update's `$v: 2` diff (`o.diff`), from which its post-image is made.
    pub diff: Option<RawDocumentBuf>,
}

impl Change {
    /// An event of `operation` with nothing but its token and time; callers fill in the rest.
    fn bare(token: ResumeToken, operation: &'static str, wall: RawBson) -> Change {
        Change {
            token,
            operation,
            wall,
            ns: None,
            to: None,
            full_document: None,
            document_key: None,
            update_description: None,
            update_kind: UpdateKind::None,
            txn: None,
            collection_uuid: None,
            operation_description: None,
            invalidates: false,
            image_key: None,
            diff: None,
        }
    }

    /// The `invalidate` event that follows `self`.
    pub fn invalidate(&self) -> Change {
        Change::bare(self.token.invalidating(), "invalidate", self.wall.clone())
    }

    /// The namespace the event is about, for a look-up (`updateLookup`).
    pub fn namespace(&self) -> Option<Namespace> {
        let (db, coll) = self.ns.as_ref()?;
        Some(Namespace {
            db: db.clone(),
            coll: coll.clone(),
        })
    }

    /// The event document in mongod's field order; `extra` fields (a looked-up
    /// `fullDocument`, `fullDocumentBeforeChange`) go last, as mongod's later stages add them.
    pub fn document(&self, extra: &[(&str, RawBson)]) -> RawDocumentBuf {
        let mut d = RawDocumentBuf::new();
        if let Some((db, coll)) = &self.to {
            d.append("to", ns_document(db, coll));
        }
        if let Some((n, lsid)) = &self.txn {
            d.append("txnNumber", *n);
            d.append("lsid", lsid.clone());
        }
        d.append("_id", self.token.document());
        d.append("operationType", self.operation);
        d.append("clusterTime", self.token.cluster_time());
        if let Some(u) = &self.collection_uuid {
            d.append("collectionUUID", u.clone());
        }
        d.append("wallTime", self.wall.clone());
        if let Some(f) = &self.full_document {
            d.append("fullDocument", f.clone());
        }
        if let Some((db, coll)) = &self.ns {
            d.append("ns", ns_document(db, coll));
        }
        if let Some(k) = &self.document_key {
            d.append("documentKey", k.clone());
        }
        if let Some(o) = &self.operation_description {
            d.append("operationDescription", o.clone());
        }
        if let Some(u) = &self.update_description {
            d.append("updateDescription", u.clone());
        }
        for (k, v) in extra {
            d.append(*k, v.clone());
        }
        d
    }
}

fn ns_document(db: &str, coll: &str) -> RawDocumentBuf {
    let mut n = RawDocumentBuf::new();
    n.append("db", db);
    if !coll.is_empty() {
        n.append("coll", coll);
    }
    n
}

/// The fields of an entry an event is made of (the entry's own, or the outer `applyOps`
/// entry's for its operations).
struct Outer<'a> {
    ts: Timestamp,
    wall: RawBson,
    txn: Option<(i64, RawDocumentBuf)>,
    scope: &'a Scope,
    expanded: bool,
}

/// The events `entry` makes for a stream over `scope`, in order; `expanded`:
/// `showExpandedEvents`.
pub fn changes(
    entry: &RawDocument,
    scope: &Scope,
    expanded: bool,
) -> Result<Vec<Change>, MongoError> {
    let ts = match entry.get("ts") {
        Ok(Some(RawBsonRef::Timestamp(t))) => t,
        _ => return Err(malformed("has no ts")),
    };
    let wall = entry
        .get("wall")
        .ok()
        .flatten()
        .map_or(RawBson::Null, |w| w.to_raw_bson());
    let mut out = Vec::new();
    if is_apply_ops(entry) {
        let txn = match (entry.get_i64("txnNumber"), entry.get_document("lsid")) {
            (Ok(n), Ok(lsid)) => Some((n, lsid.to_owned())),
            _ => None,
        };
        let outer = Outer {
            ts,
            wall,
            txn,
            scope,
            expanded,
        };
        let ops = entry
            .get_document("o")
            .and_then(|o| o.get_array("applyOps"))
            .map_err(|_| malformed("has a malformed applyOps"))?;
        for (i, op) in ops.into_iter().enumerate() {
            let Some(RawBsonRef::Document(op)) = op.ok() else {
                return Err(malformed("has a malformed applyOps element"));
            };
            one(op, &outer, i as u32, &mut out)?;
        }
    } else {
        let outer = Outer {
            ts,
            wall,
            txn: None,
            scope,
            expanded,
        };
        one(entry, &outer, 0, &mut out)?;
    }
    Ok(out)
}

fn is_apply_ops(entry: &RawDocument) -> bool {
    entry.get_str("op") == Ok("c")
        && entry
            .get_document("o")
            .is_ok_and(|o| o.get("applyOps").ok().flatten().is_some())
}

/// The event (if any) of one operation: an entry, or an element of `applyOps`.
fn one(
    op: &RawDocument,
    outer: &Outer<'_>,
    index: u32,
    out: &mut Vec<Change>,
) -> Result<(), MongoError> {
    let code = op.get_str("op").map_err(|_| malformed("has no op"))?;
    let ns = op.get_str("ns").unwrap_or("");
    let token = ResumeToken::event(outer.ts, index);
    let uuid = match outer.expanded {
        true => op.get("ui").ok().flatten().map(|u| u.to_raw_bson()),
        false => None,
    };
    let blank = |operation: &'static str| Change {
        txn: outer.txn.clone(),
        collection_uuid: uuid.clone(),
        ..Change::bare(token, operation, outer.wall.clone())
    };
    match code {
        "i" | "u" | "d" => {
            let Some((db, coll)) = ns.split_once('.') else {
                return Err(malformed("has a malformed ns"));
            };
            if coll == "system.views" {
                if outer.expanded && !matches!(outer.scope, Scope::Collection(_)) {
                    view_event(op, code, db, outer.scope, &blank, out)?;
                }
                return Ok(());
            }
            if !outer.scope.sees(db, coll) {
                return Ok(());
            }
            let o = op.get_document("o").map_err(|_| malformed("has no o"))?;
            let mut c = match code {
                "i" => {
                    let mut c = blank("insert");
                    c.full_document = Some(o.to_owned());
                    c.document_key = Some(key_of(op, o)?);
                    c
                }
                "d" => {
                    let mut c = blank("delete");
                    c.document_key = Some(o.to_owned());
                    c
                }
                _ => update(op, o, &blank, outer.expanded)?,
            };
            if code != "i" {
                if let Ok(Some(RawBsonRef::Binary(b))) = op.get("ui") {
                    if let Ok(bytes) = <[u8; 16]>::try_from(b.bytes) {
                        c.image_key = Some((bson::Uuid::from_bytes(bytes), outer.ts, index));
                    }
                }
            }
            c.ns = Some((db.to_owned(), coll.to_owned()));
            out.push(c);
        }
        "c" => command(op, ns, outer, &blank, out)?,
        _ => {}
    }
    Ok(())
}

fn update(
    op: &RawDocument,
    o: &RawDocument,
    blank: &dyn Fn(&'static str) -> Change,
    expanded: bool,
) -> Result<Change, MongoError> {
    let key = op
        .get_document("o2")
        .map_err(|_| malformed("is an update without o2"))?
        .to_owned();
    let version = o.get("$v").ok().flatten();
    let mut c;
    if let Some(RawBsonRef::Int32(2) | RawBsonRef::Int64(2)) = version {
        let diff = o
            .get_document("diff")
            .map_err(|_| malformed("is a $v: 2 update without a diff"))?;
        c = blank("update");
        c.update_description = Some(update_description(diff, expanded)?);
        c.update_kind = UpdateKind::Diff;
        c.diff = Some(diff.to_owned());
    } else if o
        .iter()
        .next()
        .is_some_and(|e| e.is_ok_and(|(k, _)| k.starts_with('$')))
    {
        c = blank("update");
        let (description, others) = blind_description(o)?;
        c.update_description = Some(description);
        c.update_kind = UpdateKind::Blind(others);
    } else {
        c = blank("replace");
        c.full_document = Some(o.to_owned());
    }
    c.document_key = Some(key);
    Ok(c)
}

/// A fast update's operators: `$set` values and `$unset` paths are described; the paths of
/// the other operators (`$inc`, ...) are returned for the caller to read.
fn blind_description(o: &RawDocument) -> Result<(RawDocumentBuf, Vec<String>), MongoError> {
    let mut updated = RawDocumentBuf::new();
    let mut removed = bson::RawArrayBuf::new();
    let mut others = Vec::new();
    for e in o {
        let (operator, fields) = e.map_err(|_| malformed("is not BSON"))?;
        let RawBsonRef::Document(fields) = fields else {
            continue;
        };
        for f in fields {
            let (path, v) = f.map_err(|_| malformed("is not BSON"))?;
            match operator {
                "$set" => updated.append(path, v.to_raw_bson()),
                "$unset" => removed.push(path),
                _ => others.push(path.to_owned()),
            }
        }
    }
    let mut d = RawDocumentBuf::new();
    d.append("updatedFields", updated);
    d.append("removedFields", removed);
    d.append("truncatedArrays", bson::RawArrayBuf::new());
    Ok((d, others))
}

fn command(
    op: &RawDocument,
    ns: &str,
    outer: &Outer<'_>,
    blank: &dyn Fn(&'static str) -> Change,
    out: &mut Vec<Change>,
) -> Result<(), MongoError> {
    let o = op.get_document("o").map_err(|_| malformed("has no o"))?;
    let db = ns.strip_suffix(".$cmd").unwrap_or(ns);
    let scope = outer.scope;
    if let Ok(coll) = o.get_str("drop") {
        if scope.sees(db, coll) {
            let mut c = blank("drop");
            c.ns = Some((db.to_owned(), coll.to_owned()));
            c.invalidates = matches!(scope, Scope::Collection(_));
            out.push(c);
        }
    } else if let Ok(from) = o.get_str("renameCollection") {
        let to = o
            .get_str("to")
            .map_err(|_| malformed("is a rename without to"))?;
        let split = |full: &str| -> Result<(String, String), MongoError> {
            full.split_once('.')
                .map(|(d, c)| (d.to_owned(), c.to_owned()))
                .ok_or_else(|| malformed("names a malformed namespace"))
        };
        let (from, to) = (split(from)?, split(to)?);
        if scope.sees(&from.0, &from.1) || scope.sees(&to.0, &to.1) {
            let mut c = blank("rename");
            c.invalidates = matches!(scope, Scope::Collection(_));
            if outer.expanded {
                let mut desc = RawDocumentBuf::new();
                for (k, v) in o.iter().flatten() {
                    match k {
                        "renameCollection" | "stayTemp" => {}
                        "to" => desc.append("to", ns_document(&to.0, &to.1)),
                        _ => desc.append(k, v.to_raw_bson()),
                    }
                }
                c.operation_description = Some(desc);
            }
            c.ns = Some(from);
            c.to = Some(to);
            out.push(c);
        }
    } else if o.get("dropDatabase").ok().flatten().is_some() {
        if scope.sees_db(db) && !matches!(scope, Scope::Collection(_)) {
            let mut c = blank("dropDatabase");
            c.ns = Some((db.to_owned(), String::new()));
            c.invalidates = matches!(scope, Scope::Database(_));
            out.push(c);
        }
    } else if o.get("applyOps").ok().flatten().is_some() {
        // A nested applyOps (not written here) would need its own index space.
        return Err(malformed("nests applyOps"));
    } else if outer.expanded {
        if let Some(c) = expanded_ddl(o, db, scope, blank)? {
            out.push(c);
        }
    }
    Ok(())
}

/// `create`, `createIndexes`, `dropIndexes` and `collMod` (`modify`): reported with
/// `showExpandedEvents` only, with what they did as `operationDescription`.
fn expanded_ddl(
    o: &RawDocument,
    db: &str,
    scope: &Scope,
    blank: &dyn Fn(&'static str) -> Change,
) -> Result<Option<Change>, MongoError> {
    let Some((first, _)) = o.iter().next().and_then(|e| e.ok()) else {
        return Ok(None);
    };
    let operation = match first {
        "create" => "create",
        "createIndexes" => "createIndexes",
        "dropIndexes" => "dropIndexes",
        "collMod" => "modify",
        _ => return Ok(None),
    };
    let coll = o
        .get_str(first)
        .map_err(|_| malformed("names no collection"))?;
    if !scope.sees(db, coll) {
        return Ok(None);
    }
    let rest = |skip: &[&str], from: &RawDocument| {
        let mut d = RawDocumentBuf::new();
        for (k, v) in from.iter().flatten() {
            if !skip.contains(&k) {
                d.append(k, v.to_raw_bson());
            }
        }
        d
    };
    let desc = match operation {
        "createIndexes" => indexes(rest(&["createIndexes"], o)),
        "dropIndexes" => match o.get_document("o2") {
            Ok(spec) => indexes(rest(&["dropIndexes"], spec)),
            Err(_) => indexes(rest(&["dropIndexes"], o)),
        },
        _ => rest(&[first], o),
    };
    let mut c = blank(operation);
    c.ns = Some((db.to_owned(), coll.to_owned()));
    c.operation_description = Some(desc);
    Ok(Some(c))
}

/// A view's definition written to `<db>.system.views` (`showExpandedEvents`, database and
/// deployment streams): an insert is its `create`, a delete its `drop`, an update `modify`,
/// as mongod reports them; `o._id` names the view.
fn view_event(
    op: &RawDocument,
    code: &str,
    db: &str,
    scope: &Scope,
    blank: &dyn Fn(&'static str) -> Change,
    out: &mut Vec<Change>,
) -> Result<(), MongoError> {
    let o = op.get_document("o").map_err(|_| malformed("has no o"))?;
    let id = match code {
        "u" => op.get_document("o2").and_then(|k| k.get_str("_id")),
        _ => o.get_str("_id"),
    }
    .map_err(|_| malformed("names no view"))?;
    let Some((view_db, view)) = id.split_once('.') else {
        return Err(malformed("names a malformed view"));
    };
    if view_db != db || !scope.sees(db, view) {
        return Ok(());
    }
    let mut c = blank(match code {
        "i" => "create",
        "d" => "drop",
        _ => "modify",
    });
    c.collection_uuid = None;
    c.ns = Some((db.to_owned(), view.to_owned()));
    if code != "d" {
        let mut desc = RawDocumentBuf::new();
        for (k, v) in o.iter().flatten() {
            if k != "_id" {
                desc.append(k, v.to_raw_bson());
            }
        }
        c.operation_description = Some(desc);
    }
    out.push(c);
    Ok(())
}

/// `{indexes: [spec]}`.
fn indexes(spec: RawDocumentBuf) -> RawDocumentBuf {
    let mut a = bson::RawArrayBuf::new();
    a.push(spec);
    let mut d = RawDocumentBuf::new();
    d.append("indexes", a);
    d
}

/// An insert's document key: the entry's `o2`, else `{_id}` of the document.
fn key_of(op: &RawDocument, o: &RawDocument) -> Result<RawDocumentBuf, MongoError> {
    if let Ok(k) = op.get_document("o2") {
        return Ok(k.to_owned());
    }
    let mut k = RawDocumentBuf::new();
    if let Ok(Some(id)) = o.get("_id") {
        k.append("_id", id.to_raw_bson());
    }
    Ok(k)
}

fn malformed(why: &str) -> MongoError {
    MongoError::new(
        ErrorCode::DataCorruptionDetected,
        format!("local.oplog.rs: an entry {why}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, Document};

    fn raw(d: Document) -> RawDocumentBuf {
        RawDocumentBuf::from_document(&d).expect("raw")
    }

    fn ts(increment: u32) -> Timestamp {
        Timestamp {
            time: 100,
            increment,
        }
    }

    fn coll(db: &str, c: &str) -> Scope {
        Scope::Collection(Namespace {
            db: db.into(),
            coll: c.into(),
        })
    }

    fn changes_of(entry: &RawDocument, scope: &Scope) -> Result<Vec<Change>, MongoError> {
        changes(entry, scope, false)
    }

    fn kinds(entry: Document, scope: &Scope) -> Vec<(&'static str, bool)> {
        changes_of(&raw(entry), scope)
            .expect("events")
            .iter()
            .map(|c| (c.operation, c.invalidates))
            .collect()
    }

    #[test]
    fn crud_entries_in_and_out_of_scope() {
        let ins = doc! {"op": "i", "ns": "app.c", "o": {"_id": 1, "a": 1}, "o2": {"_id": 1},
        "ts": ts(1), "wall": bson::DateTime::from_millis(5)};
        let c = changes_of(&raw(ins.clone()), &coll("app", "c")).expect("events");
        let d = c[0].document(&[]).to_document().expect("doc");
        assert_eq!(d.get_str("operationType"), Ok("insert"));
        assert_eq!(d.get_document("fullDocument"), Ok(&doc! {"_id": 1, "a": 1}));
        assert_eq!(d.get_document("ns"), Ok(&doc! {"db": "app", "coll": "c"}));
        assert_eq!(d.get_timestamp("clusterTime"), Ok(ts(1)));
        assert!(kinds(ins.clone(), &coll("app", "other")).is_empty());
        assert_eq!(kinds(ins.clone(), &Scope::Database("app".into())).len(), 1);
        assert_eq!(kinds(ins, &Scope::Cluster).len(), 1);
        let internal = doc! {"op": "i", "ns": "admin.c", "o": {"_id": 1}, "ts": ts(2)};
        assert!(kinds(internal, &Scope::Cluster).is_empty());
        let system = doc! {"op": "i", "ns": "app.system.js", "o": {"_id": 1}, "ts": ts(2)};
        assert!(kinds(system, &Scope::Database("app".into())).is_empty());
    }

    #[test]
    fn updates_are_diffs_or_replacements() {
        let upd = doc! {"op": "u", "ns": "app.c", "o": {"$v": 2, "diff": {"u": {"a": 2}}},
        "o2": {"_id": 1}, "ts": ts(1)};
        let c = &changes_of(&raw(upd), &coll("app", "c")).expect("events")[0];
        assert_eq!(c.operation, "update");
        let rep = doc! {"op": "u", "ns": "app.c", "o": {"_id": 1, "b": 1}, "o2": {"_id": 1},
        "ts": ts(2)};
        let c = &changes_of(&raw(rep), &coll("app", "c")).expect("events")[0];
        assert_eq!(c.operation, "replace");
        assert_eq!(c.full_document, Some(raw(doc! {"_id": 1, "b": 1})));
        let blind = doc! {"op": "u", "ns": "app.c", "o": {"$inc": {"n": 1}, "$set": {"s": 1}},
        "o2": {"_id": 1}, "ts": ts(3)};
        let c = &changes_of(&raw(blind), &coll("app", "c")).expect("events")[0];
        assert_eq!(c.update_kind, UpdateKind::Blind(vec!["n".into()]));
    }

    #[test]
    fn ddl_events_and_who_they_invalidate() {
        let drop = doc! {"op": "c", "ns": "app.$cmd", "o": {"drop": "c"}, "ts": ts(1)};
        assert_eq!(kinds(drop.clone(), &coll("app", "c")), [("drop", true)]);
        assert_eq!(
            kinds(drop.clone(), &Scope::Database("app".into())),
            [("drop", false)]
        );
        assert!(kinds(drop, &coll("app", "d")).is_empty());
        let rename = doc! {"op": "c", "ns": "app.$cmd",
        "o": {"renameCollection": "app.a", "to": "app.b", "stayTemp": false}, "ts": ts(2)};
        assert_eq!(kinds(rename.clone(), &coll("app", "a")), [("rename", true)]);
        assert_eq!(kinds(rename.clone(), &coll("app", "b")), [("rename", true)]);
        let c = &changes_of(&raw(rename), &Scope::Cluster).expect("events")[0];
        let d = c.document(&[]).to_document().expect("doc");
        assert_eq!(d.get_document("to"), Ok(&doc! {"db": "app", "coll": "b"}));
        let dropdb = doc! {"op": "c", "ns": "app.$cmd", "o": {"dropDatabase": 1}, "ts": ts(3)};
        assert_eq!(
            kinds(dropdb.clone(), &Scope::Database("app".into())),
            [("dropDatabase", true)]
        );
        assert_eq!(
            kinds(dropdb.clone(), &Scope::Cluster),
            [("dropDatabase", false)]
        );
        assert!(kinds(dropdb, &coll("app", "c")).is_empty());
        let create = doc! {"op": "c", "ns": "app.$cmd", "o": {"create": "c"}, "ts": ts(4)};
        assert!(kinds(create, &Scope::Cluster).is_empty());
        let inv = changes_of(
            &raw(doc! {"op": "c", "ns": "app.$cmd", "o": {"drop": "c"}, "ts": ts(5)}),
            &coll("app", "c"),
        )
        .expect("events")[0]
            .invalidate();
        let d = inv.document(&[]).to_document().expect("doc");
        assert_eq!(
            d.keys().collect::<Vec<_>>(),
            ["_id", "operationType", "clusterTime", "wallTime"]
        );
        assert!(inv.token.from_invalidate());
    }

    #[test]
    fn expanded_events_report_ddl_with_its_description() {
        let ui = bson::Binary {
            subtype: bson::spec::BinarySubtype::Uuid,
            bytes: vec![7; 16],
        };
        let index = doc! {"op": "c", "ns": "app.$cmd", "ui": ui.clone(),
        "o": {"createIndexes": "c", "v": 2, "key": {"x": 1}, "name": "x_1"}, "ts": ts(1)};
        assert!(kinds(index.clone(), &coll("app", "c")).is_empty());
        let c = &changes(&raw(index), &coll("app", "c"), true).expect("events")[0];
        let d = c.document(&[]).to_document().expect("doc");
        assert_eq!(d.get_str("operationType"), Ok("createIndexes"));
        assert_eq!(
            d.get_document("operationDescription"),
            Ok(&doc! {"indexes": [{"v": 2, "key": {"x": 1}, "name": "x_1"}]})
        );
        assert!(d.contains_key("collectionUUID"));
        let keys: Vec<&str> = d.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "_id",
                "operationType",
                "clusterTime",
                "collectionUUID",
                "wallTime",
                "ns",
                "operationDescription"
            ]
        );
        let modify = doc! {"op": "c", "ns": "app.$cmd", "o": {"collMod": "c"}, "ts": ts(2)};
        let c = &changes(&raw(modify), &Scope::Database("app".into()), true).expect("events");
        assert_eq!(c[0].operation, "modify");
        let create = doc! {"op": "c", "ns": "app.$cmd", "o": {"create": "n"}, "ts": ts(3)};
        assert!(changes(&raw(create), &coll("app", "c"), true)
            .expect("events")
            .is_empty());
    }

    #[test]
    fn a_transaction_is_unwound_in_order_with_its_session() {
        let entry = doc! {
            "lsid": {"id": 1}, "txnNumber": 4i64, "op": "c", "ns": "admin.$cmd",
            "o": {"applyOps": [
                {"op": "i", "ns": "app.c", "o": {"_id": 1}, "o2": {"_id": 1}},
                {"op": "i", "ns": "app.other", "o": {"_id": 2}, "o2": {"_id": 2}},
                {"op": "d", "ns": "app.c", "o": {"_id": 1}},
            ]},
            "ts": ts(7),
        };
        let c = changes_of(&raw(entry), &coll("app", "c")).expect("events");
        assert_eq!(c.len(), 2);
        assert!(c[0].token < c[1].token);
        assert_eq!(c[0].token.cluster_time(), c[1].token.cluster_time());
        let d = c[1].document(&[]).to_document().expect("doc");
        assert_eq!(d.get_i64("txnNumber"), Ok(4));
        assert_eq!(d.get_document("lsid"), Ok(&doc! {"id": 1}));
        assert_eq!(d.get_str("operationType"), Ok("delete"));
    }
}
