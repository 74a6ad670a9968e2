//! An insert into an encrypted collection, as mongod 7.0's `processInsert` does it, inside
//! the insert's own engine transaction: each `FLE2InsertUpdatePayloadV2` in the document is
//! counted against the ESC (`esc::current_count` + 1), its ESC non-anchor and its ECOC
//! document are inserted, the payload is replaced by the indexed-equality encrypted value
//! and its tag appended to `__safeContent__`. Unindexed encrypted values stay as sent. A
//! document that names `__safeContent__` itself is refused, as mongod refuses it.

use super::esc::{self, EscReader};
use super::payload::{blob, InsertPayload};
use super::tokens::{self, Token};
use super::{QeTarget, SAFE_CONTENT};
use crate::catalog::Collection;
use crate::index_keys::id_key;
use crate::oplog::pending::Pending;
use crate::{doc_write, engine_error, DbResult};
use bson::spec::BinarySubtype;
use bson::{Binary, Bson, Document, RawDocument, RawDocumentBuf};
use shale_doc::{ErrorCode, MongoError};
use shale_engine::Txn;

/// The ESC read through a write's transaction.
pub(crate) struct TxnEsc<'a> {
    pub(crate) txn: &'a Txn,
    pub(crate) coll: &'a Collection,
}

impl EscReader for TxnEsc<'_> {
    fn get(&mut self, id: &Token) -> DbResult<Option<RawDocumentBuf>> {
        let key = id_key(&esc::id_value(id));
        match self.txn.get(&self.coll.docs, &key).map_err(engine_error)? {
            None => Ok(None),
            Some(bytes) => RawDocumentBuf::from_bytes(bytes)
                .map(Some)
                .map_err(|e| MongoError::new(ErrorCode::InternalError, e.to_string())),
        }
    }

    fn count(&mut self) -> u64 {
        u64::try_from(self.txn.count(&self.coll.docs)).unwrap_or(0)
    }
}

/// True when `bytes` is a subtype-6 binary's payload this module acts on.
fn is_insert_payload(b: &Binary) -> bool {
    b.subtype == BinarySubtype::Encrypted && b.bytes.first() == Some(&blob::INSERT_UPDATE_V2)
}

/// True when the document holds anything `process` would change or refuse.
pub(crate) fn needs_processing(doc: &RawDocument) -> bool {
    doc.iter().flatten().any(|(k, v)| {
        k == SAFE_CONTENT
            || match v {
                bson::RawBsonRef::Binary(b) => b.subtype == BinarySubtype::Encrypted,
                bson::RawBsonRef::Document(d) => needs_processing(d),
                bson::RawBsonRef::Array(a) => a.into_iter().flatten().any(|e| match e {
                    bson::RawBsonRef::Binary(b) => b.subtype == BinarySubtype::Encrypted,
                    bson::RawBsonRef::Document(d) => needs_processing(d),
                    _ => false,
                }),
                _ => false,
            }
    })
}

/// The document to store in `doc`'s place, its state documents inserted through `txn`.
pub(crate) fn process(
    txn: &mut Txn,
    log: &mut Pending,
    target: &QeTarget,
    doc: &RawDocument,
) -> DbResult<RawDocumentBuf> {
    let mut owned =
        Document::try_from(doc).map_err(|e| MongoError::new(ErrorCode::BadValue, e.to_string()))?;
    if owned.contains_key(SAFE_CONTENT) {
        return Err(MongoError::new(
            ErrorCode::BadValue,
            format!("Cannot insert a document with field name {SAFE_CONTENT}"),
        ));
    }
    let mut found = Found::default();
    transform(txn, log, target, &mut owned, "", &mut found, 0)?;
    if !found.tags.is_empty() {
        let tags: Vec<Bson> = found.tags.iter().map(esc::id_value).collect();
        owned.insert(SAFE_CONTENT, tags);
    }
    RawDocumentBuf::from_document(&owned)
        .map_err(|e| MongoError::new(ErrorCode::BadValue, e.to_string()))
}

/// What a walk over a document found: the tags of the payloads it replaced; and whether
/// the indexed values an update carries over from the stored document may stay.
#[derive(Default)]
pub(crate) struct Found {
    pub(crate) tags: Vec<Token>,
    pub(crate) keep_indexed: bool,
}

/// Replaces every insert payload under `doc` (at `prefix`), depth first in field order as
/// mongod's `transformBSON` walks.
pub(crate) fn transform(
    txn: &mut Txn,
    log: &mut Pending,
    target: &QeTarget,
    doc: &mut Document,
    prefix: &str,
    found: &mut Found,
    depth: usize,
) -> DbResult<()> {
    if depth > 180 {
        return Err(MongoError::new(
            ErrorCode::Location6373503,
            "Object too deep to be encrypted. Exceeded stack depth.",
        ));
    }
    for (k, v) in doc.iter_mut() {
        let path = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match v {
            Bson::Document(d) => transform(txn, log, target, d, &path, found, depth + 1)?,
            Bson::Array(a) => {
                for e in a.iter_mut() {
                    if let Bson::Document(d) = e {
                        transform(txn, log, target, d, &path, found, depth + 1)?;
                    } else if let Bson::Binary(b) = e {
                        check_stored_as_sent(b, &path, target, found.keep_indexed)?;
                    }
                }
            }
            Bson::Binary(b)
                if is_insert_payload(b)
                    && target
                        .config
                        .field(&path)
                        .is_some_and(|f| f.equality.is_some()) =>
            {
                let (stored, tag) = insert_one(txn, log, target, &path, &b.bytes)?;
                b.bytes = stored;
                found.tags.push(tag);
            }
            Bson::Binary(b) => check_stored_as_sent(b, &path, target, found.keep_indexed)?,
            _ => {}
        }
    }
    Ok(())
}

/// A subtype-6 value the insert stores as it is: it must fit the field's configuration as
/// mongod's `validateDocument` checks it (an unindexed field holds an unindexed value, an
/// equality field nothing but what an insert payload becomes).
fn check_stored_as_sent(
    b: &Binary,
    path: &str,
    target: &QeTarget,
    keep_indexed: bool,
) -> DbResult<()> {
    if b.subtype != BinarySubtype::Encrypted {
        return Ok(());
    }
    let indexed = b.bytes.first() == Some(&blob::EQUALITY_INDEXED_VALUE_V2);
    match target.config.field(path) {
        Some(f) if f.equality.is_some() && indexed && keep_indexed => Ok(()),
        None => Err(MongoError::new(
            ErrorCode::Location6371508,
            format!("Field '{path}' is encrypted by not marked as an encryptedField"),
        )),
        Some(f) if f.equality.is_some() => Err(MongoError::new(
            ErrorCode::Location7293205,
            format!("Field '{path}' is marked as equality but not indexed"),
        )),
        Some(_) if b.bytes.first() != Some(&blob::UNINDEXED_VALUE_V2) => Err(MongoError::new(
            ErrorCode::Location7293207,
            format!("Field '{path}' must be marked unindexed"),
        )),
        Some(_) => Ok(()),
    }
}

/// One payload: its count, its ESC and ECOC documents, its stored value and tag.
fn insert_one(
    txn: &mut Txn,
    log: &mut Pending,
    target: &QeTarget,
    path: &str,
    bytes: &[u8],
) -> DbResult<(Vec<u8>, Token)> {
    let payload = InsertPayload::parse(bytes)?;
    if payload.has_edges {
        return Err(MongoError::new(
            ErrorCode::CommandNotSupported,
            "Queryable Encryption range payloads are not supported by shale",
        ));
    }
    if !super::payload::equality_type_supported(payload.bson_type) {
        return Err(MongoError::new(
            ErrorCode::Location6373504,
            format!(
                "Type '{}' is not a valid type for Queryable Encryption Equality",
                payload.bson_type
            ),
        ));
    }
    let tag_token = tokens::esc_tag(&payload.esc);
    let value_token = tokens::esc_value(&payload.esc);
    let count = {
        let mut reader = TxnEsc {
            txn,
            coll: &target.esc,
        };
        esc::current_count(&mut reader, &tag_token, &value_token)? + 1
    };
    let esc_doc = RawDocumentBuf::from_document(&esc::non_anchor_document(&tag_token, count))
        .map_err(|e| MongoError::new(ErrorCode::InternalError, e.to_string()))?;
    doc_write::insert(txn, log, &target.esc, &esc_doc)?;
    let ecoc_doc = bson::doc! {
        "_id": bson::oid::ObjectId::new(),
        "fieldName": path,
        "value": Bson::Binary(Binary {
            subtype: BinarySubtype::Generic,
            bytes: payload.encrypted_tokens.clone(),
        }),
    };
    let ecoc_doc = RawDocumentBuf::from_document(&ecoc_doc)
        .map_err(|e| MongoError::new(ErrorCode::InternalError, e.to_string()))?;
    doc_write::insert(txn, log, &target.ecoc, &ecoc_doc)?;
    let tag = tokens::safe_content_tag(&tokens::edc_twice_derived(&payload.edc), count);
    Ok((payload.indexed_equality_value(&tag, count)?, tag))
}

impl crate::Database {
    /// An insert into an encrypted collection: each document in a transaction of its own
    /// (mongod runs each in an internal transaction), so a document that fails leaves
    /// neither its state documents nor anything else behind; ordered inserts stop at the
    /// first failure.
    pub(crate) fn insert_encrypted(
        &self,
        coll: &std::sync::Arc<Collection>,
        target: &QeTarget,
        docs: &[RawDocumentBuf],
        ordered: bool,
        mode: &mut crate::user_txn::Mode<'_>,
    ) -> DbResult<crate::WriteResult> {
        let in_session = mode.in_session();
        let mut result = crate::WriteResult::default();
        for (i, doc) in docs.iter().enumerate() {
            let outcome = self.run_write(mode, coll, |txn, log| {
                if needs_processing(doc) {
                    let stored = process(txn, log, target, doc)?;
                    doc_write::insert(txn, log, coll, &stored)
                } else {
                    doc_write::insert(txn, log, coll, doc)
                }
            });
            match outcome {
                Ok(()) => result.n += 1,
                Err(e)
                    if e.code == ErrorCode::WriteConflict
                        || crate::write_ops::fails_command(&e, in_session) =>
                {
                    return Err(e)
                }
                Err(e) => {
                    result.errors.push((i, e));
                    if ordered {
                        break;
                    }
                }
            }
        }
        Ok(result)
    }
}
