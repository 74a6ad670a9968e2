//! Field update operators on MongoDB's documented examples: before, update, exact after
//! (field order and BSON types included), and whether the document counts as modified.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

use bson::{doc, Bson, DateTime, Document, Timestamp};
use shale_doc::{ApplyContext, UpdateSpec};

mod common;
use common::bytes;

const NOW_MS: i64 = 1_700_000_000_123;

fn ctx() -> ApplyContext {
    ApplyContext::new(DateTime::from_millis(NOW_MS))
}

/// Apply `update` to `before` at `NOW_MS` and compare with `after` byte for byte; return
/// `modified`.
fn check(before: Document, update: Document, after: Document) -> bool {
    common::check_update_in(&ctx(), before, update, after)
}

fn product() -> Document {
    doc! {
        "_id": 100, "quantity": 250, "instock": true, "reorder": false,
        "details": {"model": "14QQ", "make": "Clothes Corp"},
        "tags": ["apparel", "clothing"],
        "ratings": [{"by": "Customer007", "rating": 4}]
    }
}

#[test]
fn set_top_level_fields() {
    let after = doc! {
        "_id": 100, "quantity": 500, "instock": true, "reorder": false,
        "details": {"model": "2600", "make": "Fashionaires"},
        "tags": ["coats", "outerwear", "clothing"],
        "ratings": [{"by": "Customer007", "rating": 4}]
    };
    let update = doc! {"$set": {
        "quantity": 500,
        "details": {"model": "2600", "make": "Fashionaires"},
        "tags": ["coats", "outerwear", "clothing"]
    }};
    assert!(check(product(), update, after));
}

#[test]
fn set_embedded_and_array_elements() {
    let mut after = product();
    after.insert("details", doc! {"model": "14QQ", "make": "Kustom Kidz"});
    assert!(check(
        product(),
        doc! {"$set": {"details.make": "Kustom Kidz"}},
        after
    ));
    let mut after = product();
    after.insert("tags", bson::bson!(["apparel", "rain gear"]));
    after.insert("ratings", bson::bson!([{"by": "Customer007", "rating": 2}]));
    let update = doc! {"$set": {"tags.1": "rain gear", "ratings.0.rating": 2}};
    assert!(check(product(), update, after));
}

#[test]
fn set_creates_in_path_order_and_pads_arrays() {
    let update = doc! {"$set": {"b": 1, "a.x": 1, "arr.2": "z"}};
    let after = doc! {"_id": 1, "arr": ["q", null, "z"], "a": {"x": 1}, "b": 1};
    assert!(check(doc! {"_id": 1, "arr": ["q"]}, update, after));
}

#[test]
fn set_same_value_is_not_a_modification() {
    assert!(!check(
        product(),
        doc! {"$set": {"quantity": 250}},
        product()
    ));
    assert!(!check(
        product(),
        doc! {"$set": {"details.make": "Clothes Corp"}},
        product()
    ));
}

#[test]
fn unset_fields() {
    let after = doc! {
        "_id": 100, "reorder": false,
        "details": {"model": "14QQ", "make": "Clothes Corp"},
        "tags": ["apparel", "clothing"],
        "ratings": [{"by": "Customer007", "rating": 4}]
    };
    assert!(check(
        product(),
        doc! {"$unset": {"quantity": "", "instock": ""}},
        after
    ));
    assert!(!check(
        product(),
        doc! {"$unset": {"nothere": 1, "quantity.x": 1}},
        product()
    ));
    let d = doc! {"_id": 1, "a": [1, 2]};
    assert!(check(
        d,
        doc! {"$unset": {"a.0": 1}},
        doc! {"_id": 1, "a": [null, 2]}
    ));
}

#[test]
fn inc_fields() {
    let before =
        doc! {"_id": 1, "sku": "abc123", "quantity": 10, "metrics": {"orders": 2, "ratings": 3.5}};
    let after =
        doc! {"_id": 1, "sku": "abc123", "quantity": 8, "metrics": {"orders": 3, "ratings": 3.5}};
    assert!(check(
        before,
        doc! {"$inc": {"quantity": -2, "metrics.orders": 1}},
        after
    ));
    assert!(check(
        doc! {"_id": 1},
        doc! {"$inc": {"n": 5_i64}},
        doc! {"_id": 1, "n": 5_i64}
    ));
    assert!(!check(
        doc! {"_id": 1, "n": 5},
        doc! {"$inc": {"n": 0}},
        doc! {"_id": 1, "n": 5}
    ));
}

#[test]
fn inc_widens_int32_and_mixes_with_doubles() {
    let update = doc! {"$inc": {"a": 1, "b": 0.5}};
    let after = doc! {"_id": 1, "a": i64::from(i32::MAX) + 1, "b": 2.5};
    assert!(check(doc! {"_id": 1, "a": i32::MAX, "b": 2}, update, after));
}

#[test]
fn mul_fields() {
    let update = doc! {"$mul": {"price": 1.25, "qty": 2}};
    let after = doc! {"_id": 1, "item": "Hats", "price": 12.5, "qty": 50};
    assert!(check(
        doc! {"_id": 1, "item": "Hats", "price": 10.0, "qty": 25},
        update,
        after
    ));
    let after = doc! {"_id": 2, "item": "Unknown", "price": 0_i64};
    assert!(check(
        doc! {"_id": 2, "item": "Unknown"},
        doc! {"$mul": {"price": 100_i64}},
        after
    ));
    let after = doc! {"_id": 3, "price": 50_i64};
    assert!(check(
        doc! {"_id": 3, "price": 10_i64},
        doc! {"$mul": {"price": 5}},
        after
    ));
}

#[test]
fn min_and_max() {
    let scores = doc! {"_id": 1, "highScore": 800, "lowScore": 200};
    let after = doc! {"_id": 1, "highScore": 800, "lowScore": 150};
    assert!(check(
        scores.clone(),
        doc! {"$min": {"lowScore": 150}},
        after
    ));
    assert!(!check(
        scores.clone(),
        doc! {"$min": {"lowScore": 250}},
        scores.clone()
    ));
    let after = doc! {"_id": 1, "highScore": 950, "lowScore": 200};
    assert!(check(
        scores.clone(),
        doc! {"$max": {"highScore": 950}},
        after
    ));
    assert!(!check(
        scores.clone(),
        doc! {"$max": {"highScore": 700}},
        scores
    ));
    // Across types MongoDB's order decides: every string sorts above every number.
    let after = doc! {"_id": 1, "v": "x"};
    assert!(check(
        doc! {"_id": 1, "v": 5},
        doc! {"$max": {"v": "x"}},
        after
    ));
    let d1 = DateTime::from_millis(1000);
    let d0 = DateTime::from_millis(10);
    let after = doc! {"_id": 1, "at": d0};
    assert!(check(
        doc! {"_id": 1, "at": d1},
        doc! {"$min": {"at": d0}},
        after
    ));
}

#[test]
fn rename_fields() {
    let before = doc! {
        "_id": 1, "alias": ["The American Cincinnatus", "The American Fabius"],
        "mobile": "555-555-5555", "nmae": {"first": "george", "last": "washington"}
    };
    let after = doc! {
        "_id": 1, "alias": ["The American Cincinnatus", "The American Fabius"],
        "mobile": "555-555-5555", "name": {"first": "george", "last": "washington"}
    };
    assert!(check(
        before,
        doc! {"$rename": {"nmae": "name"}},
        after.clone()
    ));
    let renamed = doc! {
        "_id": 1, "alias": ["The American Cincinnatus", "The American Fabius"],
        "mobile": "555-555-5555", "name": {"last": "washington", "fname": "george"}
    };
    assert!(check(
        after.clone(),
        doc! {"$rename": {"name.first": "name.fname"}},
        renamed
    ));
    assert!(!check(
        after.clone(),
        doc! {"$rename": {"wife": "spouse"}},
        after
    ));
}

#[test]
fn rename_overwrites_the_destination() {
    let after = doc! {"_id": 1, "b": 1};
    assert!(check(
        doc! {"_id": 1, "a": 1, "b": 2},
        doc! {"$rename": {"a": "b"}},
        after
    ));
}

#[test]
fn set_on_insert_only_on_insert() {
    let d = doc! {"_id": 1, "item": "apple"};
    let update = doc! {"$set": {"item": "apple"}, "$setOnInsert": {"defaultQty": 100}};
    assert!(!check(d.clone(), update.clone(), d));
    let spec = UpdateSpec::parse(&update, None).expect("valid");
    let inserted = spec.build_upsert(&doc! {"_id": 1}, &ctx()).expect("upsert");
    let want = doc! {"_id": 1, "defaultQty": 100, "item": "apple"};
    assert_eq!(bytes(&inserted), bytes(&want));
}

#[test]
fn current_date() {
    let before = doc! {"_id": 1, "status": "a", "lastModified": DateTime::from_millis(0)};
    let update = doc! {
        "$currentDate": {"lastModified": true, "cancellation.date": {"$type": "timestamp"}},
        "$set": {"cancellation.reason": "user request", "status": "D"}
    };
    let ts = Timestamp {
        time: (NOW_MS / 1000) as u32,
        increment: 1,
    };
    let after = doc! {
        "_id": 1, "status": "D", "lastModified": DateTime::from_millis(NOW_MS),
        "cancellation": {"date": Bson::Timestamp(ts), "reason": "user request"}
    };
    assert!(check(before, update, after));
}

#[test]
fn current_date_always_counts_as_modified() {
    let now = DateTime::from_millis(NOW_MS);
    let d = doc! {"_id": 1, "at": now};
    assert!(check(d.clone(), doc! {"$currentDate": {"at": true}}, d));
}

#[test]
fn several_operators_together() {
    let update = doc! {
        "$set": {"a.b": 1}, "$inc": {"n": 1}, "$unset": {"gone": 1},
        "$min": {"low": 1}, "$max": {"high": 9}
    };
    let before = doc! {"_id": 1, "gone": true, "n": 1, "low": 5, "high": 5};
    let after = doc! {"_id": 1, "n": 2, "low": 1, "high": 9, "a": {"b": 1}};
    assert!(check(before, update, after));
}
