//! BSON values under a collation: every string and symbol, at any depth inside documents
//! and arrays, replaced by its collation key (field names are not: mongod compares them
//! binary under every collation). Two values compare under the collation exactly as their
//! collated forms compare under the simple order, which is how the matcher, sort,
//! `distinct` and `$group` apply a collation without comparators of their own.
//!
//! A collated value is only ever compared or hashed, never returned to a client.

use bson::raw::{RawBson, RawBsonRef};
use bson::{Bson, Document};

use super::Collation;

/// `v` with its strings replaced by their collation keys (`c = None`: unchanged).
pub fn collate(c: Option<&Collation>, v: &Bson) -> Bson {
    match c {
        None => v.clone(),
        Some(c) => collate_owned(c, v),
    }
}

fn collate_owned(c: &Collation, v: &Bson) -> Bson {
    match v {
        Bson::String(s) => Bson::String(c.key(s)),
        Bson::Symbol(s) => Bson::Symbol(c.key(s)),
        Bson::Document(d) => Bson::Document(collate_document(c, d)),
        Bson::Array(items) => Bson::Array(items.iter().map(|x| collate_owned(c, x)).collect()),
        other => other.clone(),
    }
}

/// A document with its values collated (its field names kept).
pub fn collate_document(c: &Collation, d: &Document) -> Document {
    d.iter()
        .map(|(k, v)| (k.clone(), collate_owned(c, v)))
        .collect()
}

/// Whether collating `v` can change it (it holds a string or symbol somewhere).
pub fn has_strings(v: RawBsonRef<'_>) -> bool {
    match v {
        RawBsonRef::String(_) | RawBsonRef::Symbol(_) => true,
        RawBsonRef::Document(d) => d.iter().any(|e| e.is_ok_and(|(_, x)| has_strings(x))),
        RawBsonRef::Array(a) => a.into_iter().any(|e| e.is_ok_and(has_strings)),
        _ => false,
    }
}

/// A raw value collated. Values without strings are copied as they are; a malformed
/// nested value is left as it is (the comparison that follows reports it).
pub fn collate_raw(c: &Collation, v: RawBsonRef<'_>) -> RawBson {
    match v {
        RawBsonRef::String(s) => RawBson::String(c.key(s)),
        RawBsonRef::Symbol(s) => RawBson::Symbol(c.key(s)),
        RawBsonRef::Document(_) | RawBsonRef::Array(_) if has_strings(v) => {
            let owned = Bson::try_from(v.to_raw_bson()).ok();
            owned
                .and_then(|b| RawBson::try_from(collate_owned(c, &b)).ok())
                .unwrap_or_else(|| v.to_raw_bson())
        }
        other => other.to_raw_bson(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare_raw::compare_raw_values;
    use bson::{doc, RawDocumentBuf};
    use std::cmp::Ordering;

    fn strength2() -> Collation {
        Collation::parse(
            &Bson::Document(doc! {"locale": "en", "strength": 2}),
            "find",
        )
        .unwrap()
        .unwrap()
    }

    #[test]
    fn nested_strings_are_collated_and_field_names_are_not() {
        let c = strength2();
        let a = collate(Some(&c), &Bson::Document(doc! {"Name": ["PING", 1]}));
        let b = collate(Some(&c), &Bson::Document(doc! {"Name": ["ping", 1]}));
        assert_eq!(a, b);
        let other = collate(Some(&c), &Bson::Document(doc! {"name": ["ping", 1]}));
        assert_ne!(a, other);
        assert_eq!(
            collate(None, &Bson::String("A".into())),
            Bson::String("A".into())
        );
    }

    #[test]
    fn raw_values_collate_like_owned_ones() {
        let c = strength2();
        let d =
            RawDocumentBuf::from_document(&doc! {"x": {"a": "PING"}, "y": {"a": "ping"}, "n": 5})
                .unwrap();
        let x = collate_raw(&c, d.get("x").unwrap().unwrap());
        let y = collate_raw(&c, d.get("y").unwrap().unwrap());
        assert_eq!(
            compare_raw_values(x.as_raw_bson_ref(), y.as_raw_bson_ref()).unwrap(),
            Ordering::Equal
        );
        assert!(!has_strings(d.get("n").unwrap().unwrap()));
        assert_eq!(
            collate_raw(&c, d.get("n").unwrap().unwrap()),
            RawBson::Int32(5)
        );
    }
}
