//! Comparison and equality cases from MongoDB's documented behaviour: implicit equality,
//! `$eq $ne $gt $gte $lt $lte $in $nin`, type bracketing, null versus missing, nested paths
//! and whole-document equality.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

use bson::{doc, Bson};

mod common;
use common::run_matches as run;

#[test]
fn implicit_and_explicit_equality() {
    run(&[
        (doc! {"a": 1}, doc! {"a": 1}, true),
        (doc! {"a": 1}, doc! {"a": 1.0}, true),
        (doc! {"a": 1}, doc! {"a": 1_i64}, true),
        (doc! {"a": 1}, doc! {"a": "1"}, false),
        (doc! {"a": {"$eq": 1}}, doc! {"a": 2}, false),
        (doc! {"a": "x"}, doc! {"a": "x"}, true),
        (doc! {"a": true}, doc! {"a": 1}, false),
        (doc! {"a.b": 2}, doc! {"a": {"b": 2}}, true),
        (doc! {"a.b.c": 2}, doc! {"a": {"b": {"c": 2}}}, true),
        (doc! {"a.b": 2}, doc! {"a": {"c": 2}}, false),
        (
            doc! {"a": {"b": 1, "c": 2}},
            doc! {"a": {"b": 1, "c": 2}},
            true,
        ),
        (
            doc! {"a": {"b": 1, "c": 2}},
            doc! {"a": {"c": 2, "b": 1}},
            false,
        ),
        (doc! {"a": {"b": 1}}, doc! {"a": {"b": 1, "c": 2}}, false),
        (doc! {"a": {"$eq": {"b": 1}}}, doc! {"a": {"b": 1}}, true),
        (doc! {"_id": 5}, doc! {"_id": 5, "x": 1}, true),
    ]);
}

#[test]
fn null_matches_null_and_missing_but_not_undefined() {
    run(&[
        (doc! {"a": null}, doc! {"a": null}, true),
        (doc! {"a": null}, doc! {}, true),
        (doc! {"a": null}, doc! {"a": Bson::Undefined}, false),
        (doc! {"a": null}, doc! {"a": 0}, false),
        (doc! {"a": {"$ne": null}}, doc! {}, false),
        (doc! {"a": {"$ne": null}}, doc! {"a": 1}, true),
        (doc! {"a.b": null}, doc! {"a": 5}, true),
        (doc! {"a.b": null}, doc! {"a": [{"b": 5}]}, false),
        (doc! {"a.b": null}, doc! {"a": [{}]}, true),
        (doc! {"a.b": null}, doc! {"a": []}, false),
        (doc! {"a.b": null}, doc! {"a": [{}, {"b": 5}]}, true),
        (doc! {"a.b": null}, doc! {"a": [5, {"b": 5}]}, false),
        (doc! {"a": {"$in": [null]}}, doc! {}, true),
        (doc! {"a": {"$gte": null}}, doc! {}, true),
        (doc! {"a": {"$lt": null}}, doc! {}, false),
    ]);
}

#[test]
fn ordered_comparisons_bracket_by_type() {
    run(&[
        (doc! {"a": {"$gt": 5}}, doc! {"a": 6}, true),
        (doc! {"a": {"$gt": 5}}, doc! {"a": 5}, false),
        (doc! {"a": {"$gte": 5}}, doc! {"a": 5.0}, true),
        (doc! {"a": {"$lt": 5}}, doc! {"a": 4.5}, true),
        (doc! {"a": {"$lte": 5}}, doc! {"a": 6_i64}, false),
        (doc! {"a": {"$gt": 5}}, doc! {"a": "z"}, false),
        (doc! {"a": {"$lt": "b"}}, doc! {"a": "a"}, true),
        (doc! {"a": {"$lt": "b"}}, doc! {"a": 1}, false),
        (doc! {"a": {"$gt": 5}}, doc! {}, false),
        (doc! {"a": {"$gt": 5}}, doc! {"a": null}, false),
        (doc! {"a": {"$gt": 1, "$lt": 3}}, doc! {"a": 2}, true),
        (doc! {"a": {"$gt": 1, "$lt": 3}}, doc! {"a": 3}, false),
        (doc! {"a": {"$gt": Bson::MinKey}}, doc! {"a": "s"}, true),
        (
            doc! {"a": {"$lt": Bson::MaxKey}},
            doc! {"a": {"x": 1}},
            true,
        ),
        (doc! {"a": {"$gt": {"b": 1}}}, doc! {"a": {"b": 2}}, true),
        (doc! {"a": {"$gt": [1]}}, doc! {"a": [2]}, true),
        (doc! {"a": {"$lt": f64::NAN}}, doc! {"a": 1}, false),
        (doc! {"a": {"$gte": f64::NAN}}, doc! {"a": f64::NAN}, true),
        (doc! {"a": {"$lt": 5}}, doc! {"a": f64::NAN}, false),
        (doc! {"a": {"$gt": true}}, doc! {"a": 1}, false),
    ]);
}

#[test]
fn in_and_nin() {
    run(&[
        (doc! {"a": {"$in": [1, 2]}}, doc! {"a": 2}, true),
        (doc! {"a": {"$in": [1, 2]}}, doc! {"a": 3}, false),
        (doc! {"a": {"$in": []}}, doc! {"a": 3}, false),
        (doc! {"a": {"$in": [1, 2]}}, doc! {"a": [5, 2]}, true),
        (doc! {"a": {"$in": [[1, 2]]}}, doc! {"a": [1, 2]}, true),
        (doc! {"a": {"$nin": [1, 2]}}, doc! {"a": 3}, true),
        (doc! {"a": {"$nin": [1, 2]}}, doc! {}, true),
        (doc! {"a": {"$nin": [1, 2]}}, doc! {"a": [3, 1]}, false),
        (doc! {"a": {"$nin": [null]}}, doc! {}, false),
        (doc! {"a": {"$ne": 1}}, doc! {"a": [1, 2]}, false),
        (doc! {"a": {"$ne": 1}}, doc! {"a": [2, 3]}, true),
        (doc! {"a": {"$ne": [1, 2]}}, doc! {"a": [1, 2]}, false),
    ]);
}

#[test]
fn numeric_path_components() {
    run(&[
        (doc! {"a.0": 5}, doc! {"a": [5, 6]}, true),
        (doc! {"a.1": 5}, doc! {"a": [5, 6]}, false),
        (doc! {"a.1.b": 2}, doc! {"a": [{"b": 1}, {"b": 2}]}, true),
        (doc! {"a.0.b": 2}, doc! {"a": [{"b": 1}, {"b": 2}]}, false),
        (doc! {"a.0": 5}, doc! {"a": {"0": 5}}, true),
        (doc! {"a.b": 1}, doc! {"a": [[{"b": 1}]]}, false),
    ]);
}
