//! `$unwind` against the examples of its MongoDB page (string form, `includeArrayIndex`,
//! `preserveNullAndEmptyArrays`, grouping by unwound values; prices as int32/doubles instead
//! of decimal128) and the rules the page states for non-array values and nested paths.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

use bson::{doc, Document};

mod common;

use common::check_pipeline as check;

fn inventory() -> Vec<Document> {
    vec![
        doc! {"_id": 1, "item": "ABC", "price": 80, "sizes": ["S", "M", "L"]},
        doc! {"_id": 2, "item": "EFG", "price": 120, "sizes": []},
        doc! {"_id": 3, "item": "IJK", "price": 160, "sizes": "M"},
        doc! {"_id": 4, "item": "LMN", "price": 10},
        doc! {"_id": 5, "item": "XYZ", "price": 5.75, "sizes": null},
    ]
}

#[test]
fn unwind_an_array() {
    check(
        &[doc! {"_id": 1, "item": "ABC1", "sizes": ["S", "M", "L"]}],
        &[doc! {"$unwind": "$sizes"}],
        &[
            doc! {"_id": 1, "item": "ABC1", "sizes": "S"},
            doc! {"_id": 1, "item": "ABC1", "sizes": "M"},
            doc! {"_id": 1, "item": "ABC1", "sizes": "L"},
        ],
    );
    check(
        &inventory(),
        &[doc! {"$unwind": "$sizes"}],
        &[
            doc! {"_id": 1, "item": "ABC", "price": 80, "sizes": "S"},
            doc! {"_id": 1, "item": "ABC", "price": 80, "sizes": "M"},
            doc! {"_id": 1, "item": "ABC", "price": 80, "sizes": "L"},
            doc! {"_id": 3, "item": "IJK", "price": 160, "sizes": "M"},
        ],
    );
}

#[test]
fn include_array_index() {
    check(
        &inventory(),
        &[doc! {"$unwind": {"path": "$sizes", "includeArrayIndex": "arrayIndex"}}],
        &[
            doc! {"_id": 1, "item": "ABC", "price": 80, "sizes": "S", "arrayIndex": 0_i64},
            doc! {"_id": 1, "item": "ABC", "price": 80, "sizes": "M", "arrayIndex": 1_i64},
            doc! {"_id": 1, "item": "ABC", "price": 80, "sizes": "L", "arrayIndex": 2_i64},
            doc! {"_id": 3, "item": "IJK", "price": 160, "sizes": "M", "arrayIndex": null},
        ],
    );
}

#[test]
fn preserve_null_and_empty_arrays() {
    check(
        &inventory(),
        &[doc! {"$unwind": {"path": "$sizes", "preserveNullAndEmptyArrays": true}}],
        &[
            doc! {"_id": 1, "item": "ABC", "price": 80, "sizes": "S"},
            doc! {"_id": 1, "item": "ABC", "price": 80, "sizes": "M"},
            doc! {"_id": 1, "item": "ABC", "price": 80, "sizes": "L"},
            doc! {"_id": 2, "item": "EFG", "price": 120},
            doc! {"_id": 3, "item": "IJK", "price": 160, "sizes": "M"},
            doc! {"_id": 4, "item": "LMN", "price": 10},
            doc! {"_id": 5, "item": "XYZ", "price": 5.75, "sizes": null},
        ],
    );
    check(
        &inventory()[1..],
        &[
            doc! {"$unwind": {"path": "$sizes", "preserveNullAndEmptyArrays": true, "includeArrayIndex": "i"}},
        ],
        &[
            doc! {"_id": 2, "item": "EFG", "price": 120, "i": null},
            doc! {"_id": 3, "item": "IJK", "price": 160, "sizes": "M", "i": null},
            doc! {"_id": 4, "item": "LMN", "price": 10, "i": null},
            doc! {"_id": 5, "item": "XYZ", "price": 5.75, "sizes": null, "i": null},
        ],
    );
}

#[test]
fn group_by_unwound_values() {
    check(
        &inventory(),
        &[
            doc! {"$unwind": {"path": "$sizes", "preserveNullAndEmptyArrays": true}},
            doc! {"$group": {"_id": "$sizes", "averagePrice": {"$avg": "$price"}}},
            doc! {"$sort": {"averagePrice": -1, "_id": 1}},
        ],
        &[
            doc! {"_id": "M", "averagePrice": 120.0},
            doc! {"_id": "L", "averagePrice": 80.0},
            doc! {"_id": "S", "averagePrice": 80.0},
            doc! {"_id": null, "averagePrice": 45.25},
        ],
    );
}

#[test]
fn unwind_embedded_arrays() {
    let sales = vec![
        doc! {"_id": "1", "items": [
            {"name": "pens", "tags": ["writing", "office", "school", "stationary"], "price": 12, "quantity": 5},
            {"name": "envelopes", "tags": ["stationary", "office"], "price": 19.95, "quantity": 8},
        ]},
        doc! {"_id": "2", "items": [
            {"name": "laptop", "tags": ["office", "electronics"], "price": 800, "quantity": 1},
            {"name": "notepad", "tags": ["stationary", "school"], "price": 14.95, "quantity": 3},
        ]},
    ];
    check(
        &sales,
        &[
            doc! {"$unwind": "$items"},
            doc! {"$unwind": "$items.tags"},
            doc! {"$group": {"_id": "$items.tags", "count": {"$sum": 1}}},
            doc! {"$sort": {"count": -1, "_id": 1}},
        ],
        &[
            doc! {"_id": "office", "count": 3},
            doc! {"_id": "stationary", "count": 3},
            doc! {"_id": "school", "count": 2},
            doc! {"_id": "electronics", "count": 1},
            doc! {"_id": "writing", "count": 1},
        ],
    );
    check(
        &[doc! {"a": {"b": [1, 2]}, "z": 0}, doc! {"a": [{"b": [3]}]}],
        &[doc! {"$unwind": {"path": "$a.b", "includeArrayIndex": "at.i"}}],
        &[
            doc! {"a": {"b": 1}, "z": 0, "at": {"i": 0_i64}},
            doc! {"a": {"b": 2}, "z": 0, "at": {"i": 1_i64}},
        ],
    );
}
