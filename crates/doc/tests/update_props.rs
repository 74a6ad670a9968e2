//! Property laws of the update operators: `$inc` by a then b equals `$inc` by a+b, `$set` then
//! `$unset` leaves no trace of the path, `$addToSet` and a repeated `$set` are idempotent (the
//! second application reports no modification), `$push` then `$pop` restores the array.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

use bson::{doc, Bson, DateTime, Document};
use proptest::prelude::*;
use shale_doc::{ApplyContext, UpdateSpec};

fn ctx() -> ApplyContext {
    ApplyContext::new(DateTime::from_millis(0))
}

fn apply(doc: &mut Document, update: Document) -> bool {
    let spec = UpdateSpec::parse(&update, None).expect("valid update");
    spec.apply(doc, &ctx()).expect("applies").modified
}

fn scalar() -> impl Strategy<Value = Bson> {
    prop_oneof![
        any::<i32>().prop_map(Bson::Int32),
        any::<i64>().prop_map(Bson::Int64),
        (-1e9f64..1e9).prop_map(Bson::Double),
        "[a-z]{0,4}".prop_map(Bson::String),
        any::<bool>().prop_map(Bson::Boolean),
        Just(Bson::Null),
    ]
}

fn path() -> impl Strategy<Value = String> {
    prop::collection::vec("[a-c]", 1..4).prop_map(|p| p.join("."))
}

/// The value at a dotted path through documents, if any.
fn get_path<'a>(doc: &'a Document, dotted: &str) -> Option<&'a Bson> {
    let mut parts = dotted.split('.');
    let mut current = doc.get(parts.next()?)?;
    for part in parts {
        current = current.as_document()?.get(part)?;
    }
    Some(current)
}

proptest! {
    #[test]
    fn inc_composes(start in -1_000_000i64..1_000_000, a in -1_000_000i64..1_000_000, b in -1_000_000i64..1_000_000) {
        let mut twice = doc! {"_id": 1, "n": start};
        apply(&mut twice, doc! {"$inc": {"n": a}});
        apply(&mut twice, doc! {"$inc": {"n": b}});
        let mut once = doc! {"_id": 1, "n": start};
        apply(&mut once, doc! {"$inc": {"n": a + b}});
        prop_assert_eq!(twice, once);
    }

    #[test]
    fn set_then_unset_removes_the_path(p in path(), v in scalar()) {
        let mut d = doc! {"_id": 1, "z": 1};
        apply(&mut d, doc! {"$set": {p.clone(): v}});
        apply(&mut d, doc! {"$unset": {p.clone(): ""}});
        prop_assert_eq!(get_path(&d, &p), None);
        prop_assert_eq!(d.get("z"), Some(&Bson::Int32(1)));
    }

    #[test]
    fn second_identical_set_is_a_no_op(p in path(), v in scalar()) {
        let mut d = doc! {"_id": 1};
        let first = apply(&mut d, doc! {"$set": {p.clone(): v.clone()}});
        prop_assert!(first);
        let snapshot = d.clone();
        let second = apply(&mut d, doc! {"$set": {p: v}});
        prop_assert!(!second);
        prop_assert_eq!(d, snapshot);
    }

    #[test]
    fn add_to_set_is_idempotent(start in prop::collection::vec(scalar(), 0..6), add in prop::collection::vec(scalar(), 0..6)) {
        let mut d = doc! {"_id": 1, "s": start};
        let update = doc! {"$addToSet": {"s": {"$each": add}}};
        apply(&mut d, update.clone());
        let snapshot = d.clone();
        let again = apply(&mut d, update);
        prop_assert!(!again);
        prop_assert_eq!(d, snapshot);
    }

    #[test]
    fn push_then_pop_restores(start in prop::collection::vec(scalar(), 0..6), v in scalar()) {
        let mut d = doc! {"_id": 1, "a": start};
        let before = d.clone();
        apply(&mut d, doc! {"$push": {"a": v}});
        apply(&mut d, doc! {"$pop": {"a": 1}});
        prop_assert_eq!(d, before);
    }
}
