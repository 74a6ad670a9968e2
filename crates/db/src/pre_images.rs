//! Change streams' pre- and post-images (mongod 6.0+): the collection option
//! `changeStreamPreAndPostImages: {enabled: <bool>}` (on `create` and `collMod`), the
//! pre-images an update, replacement or delete of such a collection records, and reading
//! them back for `fullDocumentBeforeChange` and, with the update's diff applied
//! (`oplog/apply_diff.rs`), for `fullDocument: whenAvailable|required`.
//!
//! As on mongod, pre-images live in `config.system.preimages`, one document per changed
//! document: `{_id: {nsUUID, ts, applyOpsIndex}, operationTime, preImage}`, where `ts` is
//! the oplog entry's and `applyOpsIndex` the operation's place in a transaction's `applyOps`
//! (0 otherwise). The write path collects them with its oplog operations (`Pending`) and
//! the oplog's commit writes them in the same engine transaction as the entries (O2), so an
//! event has its pre-image exactly when its entry exists. The collection is made the first
//! time a collection enables the option (a `--replSet` member only records them). They are
//! deleted with the oplog: after a truncation, the pre-images older than the oplog's oldest
//! entry go, at most once every `PURGE_INTERVAL` (mongod also expires them by
//! `expireAfterSeconds`; not here). A fast update of such a collection takes the ordinary
//! path, which has the old document.

use crate::catalog::Collection;
use crate::index_keys::id_key;
use crate::namespace::Namespace;
use crate::{engine_error, Database, DbResult};
use bson::{doc, Bson, Document, RawBsonRef, RawDocumentBuf, Timestamp, Uuid};
use shale_doc::{ErrorCode, MongoError};
use shale_engine::{TreeHandle, Txn};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The option's name (a collection option and a `collMod` field).
pub const OPTION: &str = "changeStreamPreAndPostImages";

/// `config.system.preimages`.
pub fn pre_images_namespace() -> Namespace {
    Namespace {
        db: "config".to_owned(),
        coll: "system.preimages".to_owned(),
    }
}

/// How often pre-images older than the oplog are looked for, at most.
const PURGE_INTERVAL: Duration = Duration::from_secs(5);

/// `changeStreamPreAndPostImages`'s value checked as mongod checks it: `{enabled: <bool>}`.
/// Returns `enabled`.
pub fn parse_option(command: &str, v: &Bson) -> DbResult<bool> {
    let Bson::Document(d) = v else {
        return Err(MongoError::new(
            ErrorCode::TypeMismatch,
            format!(
                "BSON field '{command}.{OPTION}' is the wrong type '{}', expected type 'object'",
                shale_doc::type_name(v)
            ),
        ));
    };
    let mut enabled = None;
    for (k, v) in d {
        match (k.as_str(), v) {
            ("enabled", Bson::Boolean(b)) => enabled = Some(*b),
            ("enabled", other) => {
                return Err(MongoError::new(
                    ErrorCode::TypeMismatch,
                    format!(
                        "BSON field '{OPTION}.enabled' is the wrong type '{}', expected type \
                         'bool'",
                        shale_doc::type_name(other)
                    ),
                ))
            }
            (k, _) => {
                return Err(MongoError::new(
                    ErrorCode::Location40415,
                    format!("BSON field '{OPTION}.{k}' is an unknown field."),
                ))
            }
        }
    }
    enabled.ok_or_else(|| {
        MongoError::new(
            ErrorCode::Location40414,
            format!("BSON field '{OPTION}.enabled' is missing but a required field"),
        )
    })
}

/// Refuses the option where mongod does: collections of `local`, `admin` and `config`.
pub fn check_namespace(ns: &Namespace) -> DbResult<()> {
    if matches!(ns.db.as_str(), "local" | "admin" | "config") {
        return Err(MongoError::new(
            ErrorCode::InvalidOptions,
            format!("changeStreamPreAndPostImages is not supported for collection {ns}"),
        ));
    }
    Ok(())
}

impl Collection {
    /// Whether its changes record pre-images.
    pub fn keeps_pre_images(&self) -> bool {
        self.options
            .get_document(OPTION)
            .is_ok_and(|d| d.get_bool("enabled") == Ok(true))
    }
}

/// One document's image before an operation, waiting for its oplog `ts`.
#[derive(Debug)]
pub(crate) struct PreImage {
    /// The operation's index among the transaction's oplog operations.
    pub op_index: usize,
    pub ui: Uuid,
    pub doc: RawDocumentBuf,
}

/// The trees of `config.system.preimages`, which the oplog's commit writes.
pub(crate) struct PreImageStore {
    docs: TreeHandle,
    size: TreeHandle,
    last_purge_secs: AtomicU64,
}

impl std::fmt::Debug for PreImageStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreImageStore").finish_non_exhaustive()
    }
}

fn image_id(ui: Uuid, ts: Timestamp, index: u32) -> Bson {
    Bson::Document(doc! {"nsUUID": ui, "ts": ts, "applyOpsIndex": i64::from(index)})
}

impl PreImageStore {
    pub(crate) fn new(coll: &Collection) -> PreImageStore {
        PreImageStore {
            docs: coll.docs.clone(),
            size: coll.size.clone(),
            last_purge_secs: AtomicU64::new(0),
        }
    }

    /// Puts the pre-image of operation `index` of the entry at `ts` in `txn`.
    pub(crate) fn put(
        &self,
        txn: &mut Txn,
        image: &PreImage,
        ts: Timestamp,
        index: u32,
        wall: bson::DateTime,
    ) -> DbResult<()> {
        let mut d = RawDocumentBuf::new();
        let id = image_id(image.ui, ts, index);
        let raw_id = bson::RawBson::try_from(id.clone())
            .map_err(|e| MongoError::new(ErrorCode::InternalError, e.to_string()))?;
        d.append("_id", raw_id);
        d.append("operationTime", wall);
        d.append("preImage", image.doc.clone());
        txn.put(&self.docs, &id_key(&id), d.as_bytes())
            .map_err(engine_error)?;
        txn.add_count(&self.docs, 1);
        txn.add_count(&self.size, d.as_bytes().len() as i64);
        Ok(())
    }

    /// Whether a purge is due (and claims it).
    fn purge_due(&self) -> bool {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let last = self.last_purge_secs.load(Ordering::Relaxed);
        now >= last + PURGE_INTERVAL.as_secs()
            && self
                .last_purge_secs
                .compare_exchange(last, now, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
    }
}

impl Database {
    /// Makes `config.system.preimages` if missing and lends its trees to the oplog. The
    /// caller holds the DDL lock. Nothing on a standalone (it records no pre-images).
    pub(crate) fn ensure_pre_images(&self) -> DbResult<()> {
        let Some(oplog) = self.oplog_handle() else {
            return Ok(());
        };
        let ns = pre_images_namespace();
        let coll = match self.catalog.get(&ns) {
            Some(c) => c,
            None => self.create_logged(&ns, Document::new())?,
        };
        let _ = oplog.pre_images.set(PreImageStore::new(&coll));
        Ok(())
    }

    /// Refuses to drop `config.system.preimages` while the oplog writes it.
    pub(crate) fn refuse_pre_images_drop(&self, ns: &Namespace) -> DbResult<()> {
        let in_use = self.oplog().is_some_and(|o| o.pre_images.get().is_some());
        if in_use && *ns == pre_images_namespace() {
            return Err(MongoError::new(
                ErrorCode::IllegalOperation,
                format!("cannot drop {ns}: it holds the change streams' pre-images"),
            ));
        }
        Ok(())
    }

    /// The pre-image of operation `index` of the oplog entry at `ts` of collection `ui`.
    pub fn pre_image(
        &self,
        ui: Uuid,
        ts: Timestamp,
        index: u32,
    ) -> DbResult<Option<RawDocumentBuf>> {
        let Some(store) = self.oplog().and_then(|o| o.pre_images.get()) else {
            return Ok(None);
        };
        let found = store
            .docs
            .get(&id_key(&image_id(ui, ts, index)))
            .map_err(engine_error)?;
        let Some(bytes) = found else {
            return Ok(None);
        };
        let d = bson::RawDocument::from_bytes(&bytes).map_err(|_| corrupt())?;
        match d.get("preImage") {
            Ok(Some(RawBsonRef::Document(img))) => Ok(Some(img.to_owned())),
            _ => Err(corrupt()),
        }
    }

    /// Deletes the pre-images older than `oldest` (the oplog's oldest entry), when a purge
    /// is due; called after an oplog truncation.
    pub(crate) fn purge_pre_images(&self, oldest: Timestamp) {
        let Some(store) = self.oplog().and_then(|o| o.pre_images.get()) else {
            return;
        };
        if !store.purge_due() {
            return;
        }
        if let Err(e) = purge(self, store, oldest) {
            tracing::warn!(error = %e.message, "pre-image purge failed; retried later");
        }
    }
}

/// One transaction deleting every pre-image older than `oldest`.
fn purge(db: &Database, store: &PreImageStore, oldest: Timestamp) -> DbResult<()> {
    let mut txn = db.engine().begin();
    let mut doomed = Vec::new();
    {
        let mut cursor = txn.cursor(&store.docs);
        cursor.seek(&[]).map_err(engine_error)?;
        while let Some((k, v)) = cursor.entry() {
            let d = bson::RawDocument::from_bytes(v).map_err(|_| corrupt())?;
            let ts = d
                .get_document("_id")
                .and_then(|id| id.get_timestamp("ts"))
                .map_err(|_| corrupt())?;
            if crate::oplog::pack(ts) < crate::oplog::pack(oldest) {
                doomed.push((k.to_vec(), v.len() as i64));
            }
            cursor.next().map_err(engine_error)?;
        }
    }
    if doomed.is_empty() {
        txn.abort();
        return Ok(());
    }
    let mut bytes = 0;
    for (k, len) in &doomed {
        txn.delete(&store.docs, k).map_err(engine_error)?;
        bytes += len;
    }
    txn.add_count(&store.docs, -(doomed.len() as i64));
    txn.add_count(&store.size, -bytes);
    txn.commit().map_err(engine_error)
}

fn corrupt() -> MongoError {
    MongoError::new(
        ErrorCode::DataCorruptionDetected,
        "config.system.preimages: a malformed pre-image",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_option_is_an_object_with_a_boolean_enabled() {
        assert_eq!(
            parse_option("create", &Bson::Document(doc! {"enabled": true})),
            Ok(true)
        );
        assert_eq!(
            parse_option("collMod", &Bson::Document(doc! {"enabled": false})),
            Ok(false)
        );
        let code = |v: Bson| parse_option("create", &v).expect_err("refused").code;
        assert_eq!(code(Bson::Boolean(true)), ErrorCode::TypeMismatch);
        assert_eq!(
            code(Bson::Document(doc! {"enabled": 1})),
            ErrorCode::TypeMismatch
        );
        assert_eq!(code(Bson::Document(doc! {})), ErrorCode::Location40414);
        assert_eq!(
            code(Bson::Document(doc! {"enabled": true, "x": 1})),
            ErrorCode::Location40415
        );
    }

    #[test]
    fn internal_databases_are_refused() {
        for db in ["local", "admin", "config"] {
            let ns = Namespace::new(db, "c").expect("ns");
            assert!(check_namespace(&ns).is_err());
        }
        assert!(check_namespace(&Namespace::new("app", "c").expect("ns")).is_ok());
    }
}
