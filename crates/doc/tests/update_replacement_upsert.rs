//! Replacement-style updates and upserts: the stored `_id` survives (first when the replacement
//! has none), an unchanged replacement is not a modification, and an upsert's document is the
//! filter's equalities with the update applied as an insert.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

use bson::{doc, Document};
use shale_doc::{upsert_seed, ErrorCode, UpdateSpec};

mod common;
use common::{bytes, ctx};

fn replace(before: Document, replacement: Document) -> (Document, bool) {
    let spec = UpdateSpec::parse(&replacement, None).expect("valid replacement");
    assert!(spec.is_replacement());
    let mut doc = before;
    let outcome = spec.apply(&mut doc, &ctx()).expect("replaces");
    (doc, outcome.modified)
}

#[test]
fn replacement_keeps_the_id_first() {
    let before = doc! {"_id": 1, "name": "Central Perk Cafe", "Borough": "Manhattan"};
    let (got, modified) = replace(
        before,
        doc! {"Borough": "Queens", "name": "Central Pork Cafe"},
    );
    let want = doc! {"_id": 1, "Borough": "Queens", "name": "Central Pork Cafe"};
    assert_eq!(bytes(&got), bytes(&want));
    assert!(modified);
}

#[test]
fn replacement_with_the_same_id_keeps_its_order() {
    let (got, _) = replace(doc! {"_id": 1, "a": 1}, doc! {"a": 2, "_id": 1});
    assert_eq!(bytes(&got), bytes(&doc! {"a": 2, "_id": 1}));
}

#[test]
fn identical_replacement_is_not_a_modification() {
    let (got, modified) = replace(doc! {"_id": 1, "a": 1}, doc! {"a": 1});
    assert_eq!(got, doc! {"_id": 1, "a": 1});
    assert!(!modified);
}

#[test]
fn empty_replacement_keeps_only_the_id() {
    let (got, modified) = replace(doc! {"_id": 1, "a": 1}, doc! {});
    assert_eq!(got, doc! {"_id": 1});
    assert!(modified);
}

#[test]
fn replacement_may_hold_nested_dollar_fields_but_not_top_level_ones() {
    let (got, _) = replace(doc! {"_id": 1}, doc! {"a": {"$x": 1}});
    assert_eq!(got, doc! {"_id": 1, "a": {"$x": 1}});
    let e = UpdateSpec::parse(&doc! {"a": 1, "$x": 1}, None).expect_err("top-level $");
    assert_eq!(e.code, ErrorCode::DollarPrefixedFieldName);
}

#[test]
fn upsert_seed_from_equalities() {
    let filter = doc! {"name": "x", "qty": {"$gt": 5}, "_id": 3, "a.b": {"$eq": 2}};
    let seed = upsert_seed(&filter).expect("no overlap");
    assert_eq!(
        bytes(&seed),
        bytes(&doc! {"_id": 3, "name": "x", "a": {"b": 2}})
    );
}

#[test]
fn upsert_with_operators() {
    let spec =
        UpdateSpec::parse(&doc! {"$inc": {"n": 1}, "$push": {"log": "made"}}, None).expect("valid");
    let made = spec.build_upsert(&doc! {"k": "a"}, &ctx()).expect("upsert");
    assert_eq!(
        bytes(&made),
        bytes(&doc! {"k": "a", "log": ["made"], "n": 1})
    );
}

#[test]
fn upsert_with_a_replacement_uses_only_the_filter_id() {
    let spec = UpdateSpec::parse(&doc! {"b": 2}, None).expect("valid");
    let made = spec
        .build_upsert(&doc! {"_id": 7, "a": 1}, &ctx())
        .expect("upsert");
    assert_eq!(bytes(&made), bytes(&doc! {"_id": 7, "b": 2}));
}

#[test]
fn upsert_may_not_change_the_filter_id() {
    let spec = UpdateSpec::parse(&doc! {"$set": {"_id": 2}}, None).expect("valid");
    let e = spec
        .build_upsert(&doc! {"_id": 1}, &ctx())
        .expect_err("immutable");
    assert_eq!(e.code, ErrorCode::ImmutableField);
    let made = spec
        .build_upsert(&doc! {"a": 1}, &ctx())
        .expect("no _id in the filter");
    assert_eq!(made, doc! {"a": 1, "_id": 2});
}

#[test]
fn upsert_with_positional_needs_a_match() {
    let spec = UpdateSpec::parse(&doc! {"$set": {"a.$": 1}}, None).expect("valid");
    let e = spec
        .build_upsert(&doc! {"a": 1}, &ctx())
        .expect_err("no match on insert");
    assert_eq!(e.code, ErrorCode::BadValue);
}

#[test]
fn upsert_with_all_elements_uses_the_filter_array() {
    let spec = UpdateSpec::parse(&doc! {"$set": {"myArray.$[]": 10}}, None).expect("valid");
    let made = spec
        .build_upsert(&doc! {"myArray": [5, 8]}, &ctx())
        .expect("array from filter");
    assert_eq!(bytes(&made), bytes(&doc! {"myArray": [10, 10]}));
    let e = spec
        .build_upsert(&doc! {}, &ctx())
        .expect_err("no array to update");
    assert_eq!(e.code, ErrorCode::BadValue);
    assert_eq!(
        e.message,
        "The path 'myArray' must exist in the document in order to apply array updates."
    );
}
