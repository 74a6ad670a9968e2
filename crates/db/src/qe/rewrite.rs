//! Equality queries on encrypted fields, as mongod 7.0 rewrites them (`fle_server_rewrite`):
//! a filter condition holding an `FLE2FindEqualityPayloadV2` (`{f: <payload>}`,
//! `{f: {$eq: <payload>}}`, `{f: {$in: [<payload>, ...]}}`, also inside `$and`/`$or`/`$nor`)
//! becomes `{__safeContent__: {$in: [tags]}}`, one tag per insert the ESC counts for the
//! value under each contention factor up to the payload's `cm`. Counting reads the ESC on
//! a snapshot of its own.

use super::esc::{self, EscReader};
use super::insert::TxnEsc;
use super::payload::{blob, FindPayload};
use super::tokens::{self, Token};
use super::SAFE_CONTENT;
use crate::{Database, DbResult, Namespace};
use bson::spec::BinarySubtype;
use bson::{Binary, Bson, Document};

/// The payload a filter value holds, if it is one (`<payload>` or `{$eq: <payload>}`).
fn find_payload_bytes(v: &Bson) -> Option<&[u8]> {
    match v {
        Bson::Binary(b) if is_find_payload(b) => Some(&b.bytes),
        Bson::Document(d) if d.len() == 1 => match d.get("$eq") {
            Some(Bson::Binary(b)) if is_find_payload(b) => Some(&b.bytes),
            _ => None,
        },
        _ => None,
    }
}

fn is_find_payload(b: &Binary) -> bool {
    b.subtype == BinarySubtype::Encrypted && b.bytes.first() == Some(&blob::FIND_EQUALITY_V2)
}

/// `{$in: [<payload>, ...]}` with only payloads in it.
fn find_payload_list(v: &Bson) -> Option<Vec<&[u8]>> {
    let Bson::Document(d) = v else { return None };
    let Some(Bson::Array(a)) = d.get("$in") else {
        return None;
    };
    if d.len() != 1 || a.is_empty() {
        return None;
    }
    a.iter()
        .map(|e| match e {
            Bson::Binary(b) if is_find_payload(b) => Some(b.bytes.as_slice()),
            _ => None,
        })
        .collect()
}

/// True when any value under `v` is a find-equality payload.
pub fn holds_find_payload(v: &Bson) -> bool {
    match v {
        Bson::Binary(b) => is_find_payload(b),
        Bson::Document(d) => d.values().any(holds_find_payload),
        Bson::Array(a) => a.iter().any(holds_find_payload),
        _ => false,
    }
}

/// Every tag the ESC counts for the value a find payload names.
fn tags_of(reader: &mut dyn EscReader, bytes: &[u8]) -> DbResult<Vec<Token>> {
    let p = FindPayload::parse(bytes)?;
    let mut tags = Vec::new();
    for cf in 0..=(p.max_contention as u64) {
        let edc = tokens::edc_twice_derived(&tokens::with_contention(&p.edc, cf));
        let esc_cf = tokens::with_contention(&p.esc, cf);
        let count = esc::current_count(
            reader,
            &tokens::esc_tag(&esc_cf),
            &tokens::esc_value(&esc_cf),
        )?;
        tags.extend((1..=count).map(|i| tokens::safe_content_tag(&edc, i)));
    }
    Ok(tags)
}

fn safe_content_in(tags: &[Token]) -> Document {
    let tags: Vec<Bson> = tags.iter().map(esc::id_value).collect();
    bson::doc! {SAFE_CONTENT: {"$in": tags}}
}

/// `filter` with its payload conditions rewritten.
fn rewrite(reader: &mut dyn EscReader, filter: &Document, depth: usize) -> DbResult<Document> {
    let mut out = Document::new();
    let mut conditions = Vec::new();
    for (k, v) in filter {
        match (k.as_str(), v) {
            ("$and" | "$or" | "$nor", Bson::Array(a)) if depth < 100 => {
                let mut items = Vec::with_capacity(a.len());
                for e in a {
                    items.push(match e {
                        Bson::Document(d) => Bson::Document(rewrite(reader, d, depth + 1)?),
                        other => other.clone(),
                    });
                }
                out.insert(k, items);
            }
            _ => {
                if let Some(bytes) = find_payload_bytes(v) {
                    conditions.push(safe_content_in(&tags_of(reader, bytes)?));
                } else if let Some(list) = find_payload_list(v) {
                    let mut tags = Vec::new();
                    for bytes in list {
                        tags.extend(tags_of(reader, bytes)?);
                    }
                    conditions.push(safe_content_in(&tags));
                } else {
                    out.insert(k, v.clone());
                }
            }
        }
    }
    if conditions.len() == 1 && !out.contains_key(SAFE_CONTENT) {
        out.extend(conditions.remove(0));
    } else if !conditions.is_empty() {
        let mut all = match out.remove("$and") {
            Some(Bson::Array(a)) => a,
            Some(other) => vec![other],
            None => Vec::new(),
        };
        all.extend(conditions.into_iter().map(Bson::Document));
        out.insert("$and", all);
    }
    Ok(out)
}

impl Database {
    /// `filter` for a read of `ns` with every find-equality payload on it rewritten into
    /// the `__safeContent__` tags it stands for; `None` when there is nothing to rewrite
    /// (no payload, or `ns` is not an encrypted collection).
    pub fn qe_rewrite_filter(
        &self,
        ns: &Namespace,
        filter: &Document,
    ) -> DbResult<Option<Document>> {
        if !filter.values().any(holds_find_payload) {
            return Ok(None);
        }
        let _guard = self.data_lock();
        let Some(coll) = self.catalog.get(ns) else {
            return Ok(None);
        };
        let Some(target) = self.qe_target(&coll)? else {
            return Ok(None);
        };
        let txn = self.engine().begin();
        let mut reader = TxnEsc {
            txn: &txn,
            coll: &target.esc,
        };
        let rewritten = rewrite(&mut reader, filter, 0)?;
        txn.abort();
        Ok(Some(rewritten))
    }
}

#[cfg(test)]
#[path = "rewrite_tests.rs"]
mod tests;
