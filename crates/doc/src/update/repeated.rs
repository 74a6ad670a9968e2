//! Update documents that give a name twice, as the wire can carry them and a `Document`
//! cannot (decoding one keeps only the last value of a repeated name, which silently dropped
//! half of `{$set: {a: 1}, $set: {b: 2}}`). Read from the raw bytes as sent: an operator named
//! twice is one operator with both operators' fields, as mongod applies both; a field named
//! twice among one operator's fields (after that merge) is the conflict mongod reports for
//! it, `ConflictingUpdateOperators` (40). Replacement documents are kept raw, as sent
//! (`replacement.rs`); pipelines are arrays, whose names do not repeat.

use bson::{Bson, Document, RawBsonRef, RawDocument};

use crate::{ErrorCode, MongoError};

/// Past this many fields, repeats are found with a set instead of by pairs.
const PAIRWISE_FIELDS: usize = 8;

/// The operator document `update` as sent, when names repeat in it: `Ok(None)` when nothing
/// repeats or `update` is not an operator document (the caller's decoded form is then
/// exact), `Ok(Some(merged))` when an operator is named twice, and the conflict when a field
/// is named twice within one operator. Malformed parts read as `Ok(None)`: the update's parse
/// reports them.
pub fn operators_as_sent(update: &RawDocument) -> Result<Option<Document>, MongoError> {
    // One pass, allocating nothing unless a name repeats: this runs on every update.
    let mut repeated_operator = false;
    for (i, element) in update.into_iter().enumerate() {
        let Ok((name, RawBsonRef::Document(fields))) = element else {
            return Ok(None);
        };
        if !name.starts_with('$') {
            return Ok(None);
        }
        repeated_operator |= names_before(update, i).any(|n| n == name);
        if let Some(path) = first_repeat(fields) {
            return Err(conflict(path));
        }
    }
    if !repeated_operator {
        return Ok(None);
    }
    let names: Vec<&str> = update.into_iter().flatten().map(|(n, _)| n).collect();
    merge(update, &names).map(Some)
}

/// The names of `doc`'s first `n` elements.
fn names_before(doc: &RawDocument, n: usize) -> impl Iterator<Item = &str> {
    doc.into_iter().take(n).flatten().map(|(k, _)| k)
}

/// The first name `fields` gives a second time: pairwise for a few fields (no allocation),
/// with a set past `PAIRWISE_FIELDS`. Also how a filter finds a repeated name
/// (`matcher::as_sent`).
pub(crate) fn first_repeat(fields: &RawDocument) -> Option<&str> {
    let count = fields.into_iter().take(PAIRWISE_FIELDS + 1).count();
    if count <= PAIRWISE_FIELDS {
        return fields
            .into_iter()
            .flatten()
            .enumerate()
            .find(|(i, (k, _))| names_before(fields, *i).any(|n| n == *k))
            .map(|(_, (k, _))| k);
    }
    let mut seen = std::collections::HashSet::new();
    fields
        .into_iter()
        .flatten()
        .map(|(k, _)| k)
        .find(|k| !seen.insert(*k))
}

/// One document per operator, in the order operators first appear, each with the fields of
/// every occurrence of it in order.
fn merge(update: &RawDocument, names: &[&str]) -> Result<Document, MongoError> {
    let mut merged = Document::new();
    for (i, name) in names.iter().enumerate() {
        if names[..i].contains(name) {
            continue;
        }
        let occurrences: Vec<&RawDocument> = update
            .into_iter()
            .flatten()
            .filter_map(|(n, v)| match v {
                RawBsonRef::Document(d) if n == *name => Some(d),
                _ => None,
            })
            .collect();
        let all: Vec<&str> = occurrences.iter().flat_map(|d| field_names(d)).collect();
        refuse_repeated_fields(&all)?;
        let mut fields = Document::new();
        for (key, value) in occurrences.iter().flat_map(|d| d.into_iter().flatten()) {
            fields.insert(key, owned(value));
        }
        merged.insert(*name, fields);
    }
    Ok(merged)
}

fn field_names(fields: &RawDocument) -> Vec<&str> {
    fields.into_iter().flatten().map(|(k, _)| k).collect()
}

/// The names of a merged operator's fields, refused if one repeats.
fn refuse_repeated_fields(names: &[&str]) -> Result<(), MongoError> {
    let mut seen = std::collections::HashSet::with_capacity(names.len());
    match names.iter().find(|n| !seen.insert(**n)) {
        Some(path) => Err(conflict(path)),
        None => Ok(()),
    }
}

/// mongod's conflict for a path set twice: "Updating the path 'a' would create a conflict at
/// 'a'".
fn conflict(path: &str) -> MongoError {
    MongoError::new(
        ErrorCode::ConflictingUpdateOperators,
        format!("Updating the path '{path}' would create a conflict at '{path}'"),
    )
}

fn owned(value: RawBsonRef<'_>) -> Bson {
    Bson::try_from(value.to_raw_bson()).unwrap_or(Bson::Null)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, RawDocumentBuf};

    /// A document of `(name, value)` elements in order, names repeating as given.
    fn raw(elements: &[(&str, Bson)]) -> RawDocumentBuf {
        let mut d = RawDocumentBuf::new();
        for (k, v) in elements {
            let v = bson::RawBson::try_from(v.clone()).expect("raw value");
            d.append(*k, v);
        }
        d
    }

    #[test]
    fn an_operator_named_twice_is_one_operator_with_both_fields() {
        let u = raw(&[
            ("$set", Bson::Document(doc! {"a": 1})),
            ("$inc", Bson::Document(doc! {"n": 1})),
            ("$set", Bson::Document(doc! {"b": 2, "c.d": 3})),
        ]);
        let merged = operators_as_sent(&u).expect("no conflict");
        assert_eq!(
            merged,
            Some(doc! {"$set": {"a": 1, "b": 2, "c.d": 3}, "$inc": {"n": 1}})
        );
    }

    #[test]
    fn a_field_named_twice_is_mongods_conflict() {
        let within = raw(&[("$set", Bson::Document(doc! {"x": 0}))]);
        let mut fields = RawDocumentBuf::new();
        fields.append("a", 1);
        fields.append("a", 2);
        let mut twice = RawDocumentBuf::new();
        twice.append("$set", fields);
        let across = raw(&[
            ("$set", Bson::Document(doc! {"a.b": 1})),
            ("$set", Bson::Document(doc! {"a.b": 2})),
        ]);
        assert_eq!(operators_as_sent(&within).expect("fine"), None);
        for (u, path) in [(&twice, "a"), (&across, "a.b")] {
            let e = operators_as_sent(u).expect_err("conflict");
            assert_eq!(e.code, ErrorCode::ConflictingUpdateOperators);
            assert_eq!(
                e.message,
                format!("Updating the path '{path}' would create a conflict at '{path}'")
            );
        }
    }

    #[test]
    fn many_fields_are_checked_with_a_set() {
        let mut fields = RawDocumentBuf::new();
        for i in 0..20 {
            fields.append(format!("f{i}"), i);
        }
        fields.append("f7", 0);
        let mut u = RawDocumentBuf::new();
        u.append("$set", fields);
        let e = operators_as_sent(&u).expect_err("conflict");
        assert!(e.message.contains("'f7'"), "{}", e.message);
    }

    #[test]
    fn replacements_pipelines_and_plain_operators_are_left_alone() {
        let replacement = raw(&[("a", Bson::Int32(1)), ("a", Bson::Int32(2))]);
        let plain = raw(&[
            ("$set", Bson::Document(doc! {"a": 1, "b": 2})),
            ("$unset", Bson::Document(doc! {"c": ""})),
        ]);
        let not_a_document = raw(&[("$set", Bson::Int32(1)), ("$set", Bson::Int32(2))]);
        for u in [&replacement, &plain, &not_a_document] {
            assert_eq!(operators_as_sent(u).expect("left alone"), None);
        }
    }
}
