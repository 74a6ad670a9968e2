//! The documents writes store, made from what clients send: an inserted document gets its
//! `_id` (first, of an allowed type) and its top-level zero timestamps filled; an update or
//! replacement makes a new document that keeps its `_id`; an upsert seeds one from its
//! filter. Pure: nothing here reads or writes a collection (`write_ops.rs` does).

use crate::DbResult;
use bson::{oid::ObjectId, Document, RawDocument, RawDocumentBuf};
use shale_doc::{
    compare_values, ApplyContext, ErrorCode, MongoError, RawApply, StoredDocument, UpdateSpec,
};

/// Gives `doc` an `_id` (a new ObjectId) if it has none, puts `_id` first and fills
/// top-level zero timestamps; a document that needs none of that is returned as it is.
pub fn prepare_for_insert(doc: RawDocumentBuf) -> DbResult<RawDocumentBuf> {
    let id = doc
        .get("_id")
        .map_err(|e| MongoError::new(ErrorCode::InvalidBSON, e.to_string()))?;
    if let Some(id) = id {
        match id.element_type() {
            bson::spec::ElementType::Array => {
                return Err(MongoError::new(
                    ErrorCode::InvalidIdField,
                    "The '_id' value cannot be of type array",
                ))
            }
            bson::spec::ElementType::RegularExpression => {
                return Err(MongoError::new(
                    ErrorCode::InvalidIdField,
                    "The '_id' value cannot be of type regex",
                ))
            }
            bson::spec::ElementType::Undefined => {
                return Err(MongoError::new(
                    ErrorCode::InvalidIdField,
                    "The '_id' value cannot be of type undefined",
                ))
            }
            bson::spec::ElementType::EmbeddedDocument => check_id_document(id)?,
            _ => {}
        }
        let id_first = doc
            .iter()
            .next()
            .and_then(Result::ok)
            .is_some_and(|(k, _)| k == "_id");
        let (ids, zero_timestamp) = scan_top_level(&doc)?;
        if ids > 1 {
            // Documents that come raw (an insert's document sequence) keep duplicate names
            // as sent; mongod allows that for any field but `_id`.
            return Err(MongoError::new(
                ErrorCode::BadValue,
                "can't have multiple _id fields in one document",
            ));
        }
        if id_first && !zero_timestamp {
            return Ok(doc);
        }
    }
    let mut out = RawDocumentBuf::new();
    match id {
        Some(v) => out.append("_id", v.to_raw_bson()),
        None => out.append("_id", ObjectId::new()),
    }
    for item in &doc {
        let (k, v) = item.map_err(|e| MongoError::new(ErrorCode::InvalidBSON, e.to_string()))?;
        match v {
            _ if k == "_id" => {}
            // A top-level zero timestamp is replaced by the current time, as mongod does.
            bson::RawBsonRef::Timestamp(t) if t.time == 0 && t.increment == 0 => {
                out.append(k, now_timestamp())
            }
            v => out.append(k, v.to_raw_bson()),
        }
    }
    Ok(out)
}

/// `_id` documents may not hold `$`-prefixed fields (they could not be queried).
fn check_id_document(id: bson::RawBsonRef<'_>) -> DbResult<()> {
    if let bson::RawBsonRef::Document(d) = id {
        for item in d {
            let (k, _) =
                item.map_err(|e| MongoError::new(ErrorCode::InvalidBSON, e.to_string()))?;
            if k.starts_with('$') {
                return Err(MongoError::new(
                    ErrorCode::DollarPrefixedFieldName,
                    format!("_id fields may not contain '$'-prefixed fields: {k} is not valid for storage."),
                ));
            }
        }
    }
    Ok(())
}

/// How many top-level `_id` fields `doc` has, and whether a top-level timestamp is zero.
fn scan_top_level(doc: &RawDocument) -> DbResult<(usize, bool)> {
    let (mut ids, mut zero) = (0, false);
    let mut walk = shale_doc::raw_scan::elements(doc);
    while let Some(element) = walk.next_element()? {
        ids += usize::from(element.key == b"_id");
        if element.kind == 0x11 {
            zero |= matches!(element.value(doc)?,
                bson::RawBsonRef::Timestamp(t) if t.time == 0 && t.increment == 0);
        }
    }
    Ok((ids, zero))
}

/// A fresh timestamp: the current second, and an increment unique within this process
/// (shared with `$$CLUSTER_TIME`).
fn now_timestamp() -> bson::Timestamp {
    shale_doc::variables::next_timestamp()
}

/// `doc` after `update` (`pos`: the matched array position for `$`), ready to store; `None`
/// when the update changes nothing. An `_id` may not change; a replacement without one
/// keeps the old.
pub(crate) fn updated_document(
    update: &UpdateSpec,
    doc: &RawDocument,
    pos: Option<usize>,
    now: bson::DateTime,
) -> DbResult<Option<RawDocumentBuf>> {
    let mut ctx = ApplyContext::new(now);
    if let Some(p) = pos {
        ctx = ctx.with_matched_index(p);
    }
    // Top-level field operators and replacements change the raw bytes in one pass (a
    // replacement's repeated names kept as sent); the rest decode.
    match update.apply_raw(doc, &ctx)? {
        Some(RawApply::Unchanged) => return Ok(None),
        Some(RawApply::Changed(d)) => return prepare_for_insert(d).map(Some),
        None => {}
    }
    // A name the document repeats is set aside and written back after (mongod's updates
    // reach its first occurrence and leave the others).
    let mut stored = StoredDocument::decode(doc)
        .map_err(|e| MongoError::new(ErrorCode::DataCorruptionDetected, e.to_string()))?;
    let d = &mut stored.doc;
    let old_id = d.get("_id").cloned();
    if !update.apply(d, &ctx)?.modified {
        return Ok(None);
    }
    let same_id = match (&old_id, d.get("_id")) {
        (Some(a), Some(b)) => {
            compare_values(a, b) == std::cmp::Ordering::Equal
                && a.element_type() == b.element_type()
        }
        (Some(a), None) => {
            // A pipeline that drops `_id` keeps the old one.
            let mut with_id = Document::new();
            with_id.insert("_id", a.clone());
            with_id.extend(std::mem::take(d));
            *d = with_id;
            true
        }
        _ => false,
    };
    if !same_id {
        return Err(MongoError::new(
            ErrorCode::ImmutableField,
            "Performing an update on the path '_id' would modify the immutable field '_id'",
        ));
    }
    prepare_for_insert(stored.encode(doc, update)?).map(Some)
}

/// The document an upsert inserts: the update applied to the filter's equality fields (a
/// replacement as sent, after the filter's `_id`).
pub(crate) fn upsert_document(
    update: &UpdateSpec,
    filter: &Document,
    now: bson::DateTime,
) -> DbResult<RawDocumentBuf> {
    prepare_for_insert(update.build_upsert_raw(filter, &ApplyContext::new(now))?)
}

/// `d` as raw BSON.
pub(crate) fn to_raw(d: &Document) -> DbResult<RawDocumentBuf> {
    RawDocumentBuf::from_document(d)
        .map_err(|e| MongoError::new(ErrorCode::BadValue, e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, Bson};

    fn raw(d: Document) -> RawDocumentBuf {
        to_raw(&d).expect("raw")
    }

    fn now() -> bson::DateTime {
        bson::DateTime::from_millis(1_000)
    }

    #[test]
    fn an_insert_gets_its_id_first_and_zero_timestamps_filled() {
        let ready = raw(doc! {"_id": 1, "a": 2});
        assert_eq!(prepare_for_insert(ready.clone()).expect("ok"), ready);
        let moved = prepare_for_insert(raw(doc! {"a": 2, "_id": 1})).expect("ok");
        assert_eq!(moved.iter().next().expect("first").expect("ok").0, "_id");
        let generated = prepare_for_insert(raw(doc! {"a": 2})).expect("ok");
        assert!(matches!(
            generated.get("_id").expect("ok"),
            Some(bson::RawBsonRef::ObjectId(_))
        ));
        let zero = bson::Timestamp {
            time: 0,
            increment: 0,
        };
        let filled = prepare_for_insert(raw(doc! {"_id": 1, "ts": zero})).expect("ok");
        assert!(matches!(
            filled.get("ts").expect("ok"),
            Some(bson::RawBsonRef::Timestamp(t)) if t.time != 0 || t.increment != 0
        ));
    }

    #[test]
    fn ids_of_forbidden_types_are_refused() {
        for id in [
            Bson::Array(vec![]),
            Bson::RegularExpression(bson::Regex {
                pattern: "a".into(),
                options: String::new(),
            }),
            Bson::Undefined,
        ] {
            let e = prepare_for_insert(raw(doc! {"_id": id.clone()})).expect_err("refused");
            assert_eq!(e.code, ErrorCode::InvalidIdField, "{id:?}");
        }
        let e = prepare_for_insert(raw(doc! {"_id": {"$x": 1}})).expect_err("refused");
        assert_eq!(e.code, ErrorCode::DollarPrefixedFieldName);
    }

    #[test]
    fn an_update_keeps_the_id_and_may_not_change_it() {
        let old = raw(doc! {"_id": 1, "a": 1});
        let set = UpdateSpec::parse(&doc! {"$set": {"a": 2}}, None).expect("parse");
        let new = updated_document(&set, &old, None, now()).expect("ok");
        assert_eq!(new, Some(raw(doc! {"_id": 1, "a": 2})));
        let same = UpdateSpec::parse(&doc! {"$set": {"a": 1}}, None).expect("parse");
        assert_eq!(
            updated_document(&same, &old, None, now()).expect("ok"),
            None
        );
        let replace = UpdateSpec::parse(&doc! {"b": 3}, None).expect("parse");
        let new = updated_document(&replace, &old, None, now()).expect("ok");
        assert_eq!(new, Some(raw(doc! {"_id": 1, "b": 3})));
        let moved = UpdateSpec::parse(&doc! {"$set": {"_id": 2}}, None).expect("parse");
        let e = updated_document(&moved, &old, None, now()).expect_err("refused");
        assert_eq!(e.code, ErrorCode::ImmutableField);
    }

    #[test]
    fn a_replacement_is_stored_as_sent() {
        let mut sent = RawDocumentBuf::new();
        sent.append("a", 1);
        sent.append(
            "zero",
            bson::Timestamp {
                time: 0,
                increment: 0,
            },
        );
        sent.append("a", 2);
        let vars = shale_doc::Variables::new();
        let replace = UpdateSpec::parse_as_sent(bson::RawBsonRef::Document(&sent), None, &vars)
            .expect("parse");
        let names = |d: &RawDocument| -> Vec<String> {
            d.iter().map(|e| e.expect("element").0.to_owned()).collect()
        };
        let old = raw(doc! {"_id": 1, "x": 0});
        let new = updated_document(&replace, &old, None, now())
            .expect("ok")
            .expect("a change");
        assert_eq!(names(&new), ["_id", "a", "zero", "a"]);
        assert_eq!(new.get_i32("a"), Ok(1));
        assert!(matches!(new.get("zero"), Ok(Some(bson::RawBsonRef::Timestamp(t))) if t.time != 0));
        let upserted = upsert_document(&replace, &doc! {"_id": 5, "b": 1}, now()).expect("ok");
        assert_eq!(names(&upserted), ["_id", "a", "zero", "a"]);
        assert_eq!(upserted.get_i32("_id"), Ok(5));

        let mut two_ids = RawDocumentBuf::new();
        two_ids.append("_id", 1);
        two_ids.append("_id", 1);
        let refused = UpdateSpec::parse_as_sent(bson::RawBsonRef::Document(&two_ids), None, &vars)
            .expect("parse");
        for e in [
            updated_document(&refused, &old, None, now()).expect_err("two ids"),
            upsert_document(&refused, &doc! {}, now()).expect_err("two ids"),
        ] {
            assert_eq!(e.code, ErrorCode::BadValue);
        }
    }

    #[test]
    fn an_upsert_seeds_from_the_filter() {
        let set = UpdateSpec::parse(&doc! {"$set": {"b": 2}}, None).expect("parse");
        let doc = upsert_document(&set, &doc! {"_id": 7, "a": 1}, now()).expect("ok");
        assert_eq!(doc, raw(doc! {"_id": 7, "a": 1, "b": 2}));
    }
}
