//! Aggregation under a command's collation (`{locale: "en", strength: 2}`: case ignored):
//! `$match`, `$sort`, `$group` keys, `$addToSet`, `$min`/`$max`, `$sortByCount` and the
//! comparison expressions compare strings by it; the values that come out are the
//! documents' own strings, never collation keys.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

use std::sync::Arc;

use bson::{doc, Bson, Document};
use shale_doc::aggregate::{NoCollections, Pipeline};
use shale_doc::{Collation, Variables};

fn run(input: &[Document], pipeline: &[Document]) -> Vec<Document> {
    let c = Collation::parse(
        &Bson::Document(doc! {"locale": "en", "strength": 2}),
        "aggregate",
    )
    .expect("valid")
    .map(Arc::new);
    let vars = Variables::new().with_collation(c);
    let parsed = Pipeline::parse_with(pipeline, &vars).expect("parses");
    parsed.run_documents(input, &NoCollections).expect("runs")
}

fn words() -> Vec<Document> {
    vec![
        doc! {"_id": 1, "w": "apple"},
        doc! {"_id": 2, "w": "Banana"},
        doc! {"_id": 3, "w": "APPLE"},
        doc! {"_id": 4, "w": "cherry"},
        doc! {"_id": 5, "w": "banana"},
    ]
}

#[test]
fn match_and_sort_follow_the_collation() {
    let got = run(
        &words(),
        &[
            doc! {"$match": {"w": "BANANA"}},
            doc! {"$project": {"_id": 1}},
        ],
    );
    assert_eq!(got, vec![doc! {"_id": 2}, doc! {"_id": 5}]);
    let got = run(
        &words(),
        &[
            doc! {"$sort": {"w": 1, "_id": 1}},
            doc! {"$project": {"_id": 1}},
        ],
    );
    let ids: Vec<i32> = got.iter().map(|d| d.get_i32("_id").unwrap()).collect();
    assert_eq!(ids, vec![1, 3, 2, 5, 4]);
}

#[test]
fn group_keys_equal_under_the_collation_are_one_group() {
    let got = run(
        &words(),
        &[doc! {"$group": {"_id": "$w", "n": {"$sum": 1}, "ids": {"$push": "$_id"}}}],
    );
    assert_eq!(
        got,
        vec![
            doc! {"_id": "apple", "n": 2, "ids": [1, 3]},
            doc! {"_id": "Banana", "n": 2, "ids": [2, 5]},
            doc! {"_id": "cherry", "n": 1, "ids": [4]},
        ]
    );
    let got = run(&words(), &[doc! {"$sortByCount": "$w"}, doc! {"$limit": 1}]);
    assert_eq!(got[0].get_i32("count").unwrap(), 2);
}

#[test]
fn accumulators_compare_by_the_collation() {
    let got = run(
        &words(),
        &[doc! {"$group": {
            "_id": null,
            "set": {"$addToSet": "$w"},
            "min": {"$min": "$w"},
            "max": {"$max": "$w"},
        }}],
    );
    assert_eq!(
        got,
        vec![
            doc! {"_id": null, "set": ["apple", "Banana", "cherry"], "min": "apple", "max": "cherry"}
        ]
    );
}

#[test]
fn comparison_expressions_compare_by_the_collation() {
    let got = run(
        &[doc! {"a": "Hello", "b": "hello", "c": "world"}],
        &[doc! {"$project": {
            "_id": 0,
            "eq": {"$eq": ["$a", "$b"]},
            "cmp": {"$cmp": ["$a", "$c"]},
            "in": {"$in": ["HELLO", ["$b"]]},
            "upper": {"$toUpper": "$a"},
        }}],
    );
    assert_eq!(
        got,
        vec![doc! {"eq": true, "cmp": -1, "in": true, "upper": "HELLO"}]
    );
}
