//! `$group` and its accumulators against the examples of MongoDB's `$group`, `$sum`, `$avg`,
//! `$min`, `$max`, `$first`, `$last`, `$push`, `$addToSet`, `$count` and `$match` pages, with
//! their documented outputs (decimal128 prices written as doubles: decimal arithmetic is not
//! supported yet). Groups come out in first-seen order; the tests state that order.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

use bson::{doc, DateTime, Document};

mod common;

use common::check_pipeline as check;

fn date(iso: &str) -> DateTime {
    DateTime::parse_rfc3339_str(iso).expect("valid date")
}

/// The `sales` collection of the `$group` page (prices as doubles).
fn sales() -> Vec<Document> {
    vec![
        doc! {"_id": 1, "item": "abc", "price": 10.0, "quantity": 2, "date": date("2014-03-01T08:00:00Z")},
        doc! {"_id": 2, "item": "jkl", "price": 20.0, "quantity": 1, "date": date("2014-03-01T09:00:00Z")},
        doc! {"_id": 3, "item": "xyz", "price": 5.0, "quantity": 10, "date": date("2014-03-15T09:00:00Z")},
        doc! {"_id": 4, "item": "xyz", "price": 5.0, "quantity": 20, "date": date("2014-04-04T11:21:39.736Z")},
        doc! {"_id": 5, "item": "abc", "price": 10.0, "quantity": 10, "date": date("2014-04-04T21:23:13.331Z")},
        doc! {"_id": 6, "item": "def", "price": 7.5, "quantity": 5, "date": date("2015-06-04T05:08:13Z")},
        doc! {"_id": 7, "item": "def", "price": 7.5, "quantity": 10, "date": date("2015-09-10T08:43:00Z")},
        doc! {"_id": 8, "item": "abc", "price": 10.0, "quantity": 5, "date": date("2016-02-06T20:20:13Z")},
    ]
}

#[test]
fn group_page_examples() {
    let cases: Vec<(Vec<Document>, Vec<Document>)> = vec![
        (
            vec![doc! {"$group": {"_id": null, "count": {"$count": {}}}}],
            vec![doc! {"_id": null, "count": 8}],
        ),
        (
            vec![doc! {"$group": {"_id": "$item"}}],
            vec![
                doc! {"_id": "abc"},
                doc! {"_id": "jkl"},
                doc! {"_id": "xyz"},
                doc! {"_id": "def"},
            ],
        ),
        (
            vec![
                doc! {"$group": {"_id": "$item", "totalSaleAmount": {"$sum": {"$multiply": ["$price", "$quantity"]}}}},
                doc! {"$match": {"totalSaleAmount": {"$gte": 100}}},
            ],
            vec![
                doc! {"_id": "abc", "totalSaleAmount": 170.0},
                doc! {"_id": "xyz", "totalSaleAmount": 150.0},
                doc! {"_id": "def", "totalSaleAmount": 112.5},
            ],
        ),
        (
            vec![doc! {"$group": {
                "_id": null,
                "totalSaleAmount": {"$sum": {"$multiply": ["$price", "$quantity"]}},
                "averageQuantity": {"$avg": "$quantity"},
                "count": {"$sum": 1},
            }}],
            vec![
                doc! {"_id": null, "totalSaleAmount": 452.5, "averageQuantity": 7.875, "count": 8},
            ],
        ),
    ];
    for (pipeline, want) in cases {
        check(&sales(), &pipeline, &want);
    }
}

#[test]
fn pivot_with_push_and_root() {
    let books = vec![
        doc! {"_id": 8751, "title": "The Banquet", "author": "Dante", "copies": 2},
        doc! {"_id": 8752, "title": "Divine Comedy", "author": "Dante", "copies": 1},
        doc! {"_id": 8645, "title": "Eclogues", "author": "Dante", "copies": 2},
        doc! {"_id": 7000, "title": "The Odyssey", "author": "Homer", "copies": 10},
        doc! {"_id": 7020, "title": "Iliad", "author": "Homer", "copies": 10},
    ];
    check(
        &books,
        &[doc! {"$group": {"_id": "$author", "books": {"$push": "$title"}}}],
        &[
            doc! {"_id": "Dante", "books": ["The Banquet", "Divine Comedy", "Eclogues"]},
            doc! {"_id": "Homer", "books": ["The Odyssey", "Iliad"]},
        ],
    );
    check(
        &books[3..],
        &[doc! {"$group": {"_id": "$author", "books": {"$push": "$$ROOT"}}}],
        &[doc! {"_id": "Homer", "books": [
            {"_id": 7000, "title": "The Odyssey", "author": "Homer", "copies": 10},
            {"_id": 7020, "title": "Iliad", "author": "Homer", "copies": 10},
        ]}],
    );
}

/// The collection of the `$first`/`$last`/`$min`/`$max`/`$avg` accumulator pages.
fn accumulator_sales() -> Vec<Document> {
    vec![
        doc! {"_id": 1, "item": "abc", "price": 10, "quantity": 2, "date": date("2014-01-01T08:00:00Z")},
        doc! {"_id": 2, "item": "jkl", "price": 20, "quantity": 1, "date": date("2014-02-03T09:00:00Z")},
        doc! {"_id": 3, "item": "xyz", "price": 5, "quantity": 5, "date": date("2014-02-03T09:05:00Z")},
        doc! {"_id": 4, "item": "abc", "price": 10, "quantity": 10, "date": date("2014-02-15T08:00:00Z")},
        doc! {"_id": 5, "item": "xyz", "price": 5, "quantity": 10, "date": date("2014-02-15T09:05:00Z")},
        doc! {"_id": 6, "item": "xyz", "price": 5, "quantity": 5, "date": date("2014-02-15T12:05:10Z")},
        doc! {"_id": 7, "item": "xyz", "price": 5, "quantity": 10, "date": date("2014-02-15T14:12:12Z")},
    ]
}

#[test]
fn first_last_min_max_avg_pages() {
    let sort = doc! {"$sort": {"item": 1, "date": 1}};
    let cases: Vec<(Vec<Document>, Vec<Document>)> = vec![
        (
            vec![
                sort.clone(),
                doc! {"$group": {"_id": "$item", "firstSale": {"$first": "$date"}}},
            ],
            vec![
                doc! {"_id": "abc", "firstSale": date("2014-01-01T08:00:00Z")},
                doc! {"_id": "jkl", "firstSale": date("2014-02-03T09:00:00Z")},
                doc! {"_id": "xyz", "firstSale": date("2014-02-03T09:05:00Z")},
            ],
        ),
        (
            vec![
                sort,
                doc! {"$group": {"_id": "$item", "lastSalesDate": {"$last": "$date"}}},
            ],
            vec![
                doc! {"_id": "abc", "lastSalesDate": date("2014-02-15T08:00:00Z")},
                doc! {"_id": "jkl", "lastSalesDate": date("2014-02-03T09:00:00Z")},
                doc! {"_id": "xyz", "lastSalesDate": date("2014-02-15T14:12:12Z")},
            ],
        ),
        (
            vec![doc! {"$group": {
                "_id": "$item",
                "maxTotalAmount": {"$max": {"$multiply": ["$price", "$quantity"]}},
                "maxQuantity": {"$max": "$quantity"},
            }}],
            vec![
                doc! {"_id": "abc", "maxTotalAmount": 100, "maxQuantity": 10},
                doc! {"_id": "jkl", "maxTotalAmount": 20, "maxQuantity": 1},
                doc! {"_id": "xyz", "maxTotalAmount": 50, "maxQuantity": 10},
            ],
        ),
        (
            vec![doc! {"$group": {"_id": "$item", "minQuantity": {"$min": "$quantity"}}}],
            vec![
                doc! {"_id": "abc", "minQuantity": 2},
                doc! {"_id": "jkl", "minQuantity": 1},
                doc! {"_id": "xyz", "minQuantity": 5},
            ],
        ),
        (
            vec![doc! {"$group": {
                "_id": "$item",
                "avgAmount": {"$avg": {"$multiply": ["$price", "$quantity"]}},
                "avgQuantity": {"$avg": "$quantity"},
            }}],
            vec![
                doc! {"_id": "abc", "avgAmount": 60.0, "avgQuantity": 6.0},
                doc! {"_id": "jkl", "avgAmount": 20.0, "avgQuantity": 1.0},
                doc! {"_id": "xyz", "avgAmount": 37.5, "avgQuantity": 7.5},
            ],
        ),
        (
            vec![doc! {"$group": {
                "_id": {"item": "$item", "price": "$price"},
                "itemsSold": {"$push": {"quantity": "$quantity", "missing": "$nope"}},
                "quantities": {"$addToSet": "$quantity"},
                "total": {"$sum": "$quantity"},
            }}],
            vec![
                doc! {"_id": {"item": "abc", "price": 10}, "itemsSold": [{"quantity": 2}, {"quantity": 10}], "quantities": [2, 10], "total": 12},
                doc! {"_id": {"item": "jkl", "price": 20}, "itemsSold": [{"quantity": 1}], "quantities": [1], "total": 1},
                doc! {"_id": {"item": "xyz", "price": 5}, "itemsSold": [{"quantity": 5}, {"quantity": 10}, {"quantity": 5}, {"quantity": 10}], "quantities": [5, 10], "total": 30},
            ],
        ),
    ];
    for (pipeline, want) in cases {
        check(&accumulator_sales(), &pipeline, &want);
    }
}

#[test]
fn missing_values_in_accumulators() {
    let input = vec![
        doc! {"k": 1, "v": null},
        doc! {"k": 1},
        doc! {"k": 1, "v": "s"},
    ];
    check(
        &input,
        &[doc! {"$group": {
            "_id": "$k",
            "first": {"$first": "$w"},
            "last": {"$last": "$v"},
            "min": {"$min": "$v"},
            "max": {"$max": "$w"},
            "avg": {"$avg": "$v"},
            "sum": {"$sum": "$v"},
            "push": {"$push": "$v"},
            "set": {"$addToSet": "$v"},
        }}],
        &[
            doc! {"_id": 1, "first": null, "last": "s", "min": "s", "max": null, "avg": null, "sum": 0, "push": [null, "s"], "set": [null, "s"]},
        ],
    );
}

#[test]
fn match_page_examples() {
    let articles = vec![
        doc! {"_id": 1, "author": "dave", "score": 80, "views": 100},
        doc! {"_id": 2, "author": "dave", "score": 85, "views": 521},
        doc! {"_id": 3, "author": "ahn", "score": 60, "views": 1000},
        doc! {"_id": 4, "author": "li", "score": 55, "views": 5000},
        doc! {"_id": 5, "author": "annT", "score": 60, "views": 50},
        doc! {"_id": 6, "author": "li", "score": 94, "views": 999},
        doc! {"_id": 7, "author": "ty", "score": 95, "views": 1000},
    ];
    check(
        &articles,
        &[doc! {"$match": {"author": "dave"}}],
        &[articles[0].clone(), articles[1].clone()],
    );
    check(
        &articles,
        &[
            doc! {"$match": {"$or": [{"score": {"$gt": 70, "$lt": 90}}, {"views": {"$gte": 1000}}]}},
            doc! {"$group": {"_id": null, "count": {"$sum": 1}}},
        ],
        &[doc! {"_id": null, "count": 5}],
    );
    check(
        &articles,
        &[doc! {"$match": {"$expr": {"$gt": ["$views", {"$multiply": ["$score", 10]}]}}}],
        &[
            articles[2].clone(),
            articles[3].clone(),
            articles[5].clone(),
            articles[6].clone(),
        ],
    );
}
