//! An update (or findAndModify, or upsert) on an encrypted collection, as mongod 7.0's
//! `processUpdate`/`processFindAndModify` leave the document: the updated document's insert
//! payloads become indexed values with their ESC and ECOC documents (`insert::transform`),
//! their tags join `__safeContent__`, and the tags of values the update replaced or removed
//! leave it. The user may not change `__safeContent__` (mongod's 6666200). Runs in the
//! update's own transaction.

use super::esc;
use super::insert::{transform, Found};
use super::payload::blob;
use super::tokens::Token;
use super::{QeTarget, SAFE_CONTENT};
use crate::oplog::pending::Pending;
use crate::DbResult;
use bson::spec::BinarySubtype;
use bson::{Bson, Document, RawDocument, RawDocumentBuf};
use shale_doc::{ErrorCode, MongoError};
use shale_engine::Txn;
use std::collections::HashSet;

fn owned(doc: &RawDocument) -> DbResult<Document> {
    Document::try_from(doc).map_err(|e| MongoError::new(ErrorCode::BadValue, e.to_string()))
}

/// The tag inside an indexed-equality value: the metadata block's middle 32 bytes.
fn tag_of(value: &[u8]) -> Option<Token> {
    let n = value.len();
    (n >= 18 + 96)
        .then(|| value[n - 64..n - 32].try_into().ok())
        .flatten()
}

/// The tags of every indexed-equality value in `doc`.
fn indexed_tags(doc: &Document, out: &mut HashSet<Token>, depth: usize) {
    for v in doc.values() {
        match v {
            Bson::Binary(b)
                if b.subtype == BinarySubtype::Encrypted
                    && b.bytes.first() == Some(&blob::EQUALITY_INDEXED_VALUE_V2) =>
            {
                out.extend(tag_of(&b.bytes));
            }
            Bson::Document(d) if depth < 180 => indexed_tags(d, out, depth + 1),
            Bson::Array(a) if depth < 180 => {
                for e in a {
                    if let Bson::Document(d) = e {
                        indexed_tags(d, out, depth + 1);
                    }
                }
            }
            _ => {}
        }
    }
}

/// The document an update stores: `new` (what the user's update made of `old`, `None` for
/// an upsert) with its payloads processed and `__safeContent__` brought up to date.
pub(crate) fn process_update(
    txn: &mut Txn,
    log: &mut Pending,
    target: &QeTarget,
    old: Option<&RawDocument>,
    new: &RawDocument,
    replacement: bool,
) -> DbResult<RawDocumentBuf> {
    let mut doc = owned(new)?;
    let before = match old {
        Some(o) => owned(o)?.remove(SAFE_CONTENT),
        None => None,
    };
    let sent = doc.remove(SAFE_CONTENT);
    let changed = if replacement || old.is_none() {
        sent.is_some()
    } else {
        sent != before
    };
    if changed {
        return Err(MongoError::new(
            ErrorCode::Location6666200,
            format!("Cannot modify {SAFE_CONTENT} field in document."),
        ));
    }
    let mut found = Found {
        tags: Vec::new(),
        keep_indexed: old.is_some(),
    };
    transform(txn, log, target, &mut doc, "", &mut found, 0)?;
    let mut present = HashSet::new();
    indexed_tags(&doc, &mut present, 0);
    let mut tags: Vec<Bson> = match &before {
        Some(Bson::Array(a)) => a
            .iter()
            .filter(|t| match t {
                Bson::Binary(b) => b
                    .bytes
                    .as_slice()
                    .try_into()
                    .is_ok_and(|t: Token| present.contains(&t)),
                _ => false,
            })
            .cloned()
            .collect(),
        _ => Vec::new(),
    };
    tags.extend(found.tags.iter().map(esc::id_value));
    if before.is_some() || !tags.is_empty() {
        doc.insert(SAFE_CONTENT, tags);
    }
    RawDocumentBuf::from_document(&doc)
        .map_err(|e| MongoError::new(ErrorCode::BadValue, e.to_string()))
}
