//! Stages that reshape each document — `$project`, `$addFields`/`$set`, `$unset`,
//! `$replaceRoot`/`$replaceWith` — against the examples of their MongoDB pages and the
//! documented outputs (field order included).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

use bson::{doc, oid::ObjectId, Document};
use shale_doc::aggregate::NoCollections;
use shale_doc::Pipeline;

mod common;

use common::check_pipeline as check;

fn books() -> Vec<Document> {
    vec![
        doc! {"_id": 1, "title": "abc123", "isbn": "0001122223334", "author": {"last": "zzz", "first": "aaa"}, "copies": 5, "lastModified": "2016-07-28"},
        doc! {"_id": 2, "title": "Baked Goods", "isbn": "9999999999999", "author": {"last": "xyz", "first": "abc", "middle": ""}, "copies": 2, "lastModified": "2017-07-21"},
        doc! {"_id": 3, "title": "Ice Cream Cakes", "isbn": "8888888888888", "author": {"last": "xyz", "first": "abc", "middle": "mmm"}, "copies": 5, "lastModified": "2017-07-22"},
    ]
}

#[test]
fn project_page_examples() {
    let first = &books()[..1];
    let author = doc! {"last": "zzz", "first": "aaa"};
    let cases: Vec<(Document, Document)> = vec![
        (
            doc! {"title": 1, "author": 1},
            doc! {"_id": 1, "title": "abc123", "author": author.clone()},
        ),
        (
            doc! {"_id": 0, "title": 1, "author": 1},
            doc! {"title": "abc123", "author": author.clone()},
        ),
        (
            doc! {"lastModified": 0},
            doc! {"_id": 1, "title": "abc123", "isbn": "0001122223334", "author": author.clone(), "copies": 5},
        ),
        (
            doc! {"author.first": 0, "lastModified": 0},
            doc! {"_id": 1, "title": "abc123", "isbn": "0001122223334", "author": {"last": "zzz"}, "copies": 5},
        ),
        (
            doc! {"author": {"first": 0}, "lastModified": 0},
            doc! {"_id": 1, "title": "abc123", "isbn": "0001122223334", "author": {"last": "zzz"}, "copies": 5},
        ),
        (
            doc! {"title": 1, "lastName": "$author.last", "copiesSold": "$copies"},
            doc! {"_id": 1, "title": "abc123", "lastName": "zzz", "copiesSold": 5},
        ),
    ];
    for (spec, want) in cases {
        check(first, &[doc! {"$project": spec}], &[want]);
    }
}

#[test]
fn project_remove_conditionally() {
    let spec = doc! {
        "title": 1,
        "author.first": 1,
        "author.last": 1,
        "author.middle": {"$cond": {"if": {"$eq": ["", "$author.middle"]}, "then": "$$REMOVE", "else": "$author.middle"}},
    };
    check(
        &books(),
        &[doc! {"$project": spec}],
        &[
            doc! {"_id": 1, "title": "abc123", "author": {"last": "zzz", "first": "aaa"}},
            doc! {"_id": 2, "title": "Baked Goods", "author": {"last": "xyz", "first": "abc"}},
            doc! {"_id": 3, "title": "Ice Cream Cakes", "author": {"last": "xyz", "first": "abc", "middle": "mmm"}},
        ],
    );
}

#[test]
fn project_new_array_fields() {
    let id = ObjectId::parse_str("55ad167f320c6be244eb3b95").expect("valid id");
    let input = [doc! {"_id": id, "x": 1, "y": 1}];
    check(
        &input,
        &[doc! {"$project": {"myArray": ["$x", "$y"]}}],
        &[doc! {"_id": id, "myArray": [1, 1]}],
    );
    check(
        &input,
        &[doc! {"$project": {"myArray": ["$x", "$y", "$someField"]}}],
        &[doc! {"_id": id, "myArray": [1, 1, null]}],
    );
}

#[test]
fn add_fields_and_set_pages() {
    let vehicles = vec![
        doc! {"_id": 1, "type": "car", "specs": {"doors": 4, "wheels": 4}},
        doc! {"_id": 2, "type": "motorcycle", "specs": {"doors": 0, "wheels": 2}},
        doc! {"_id": 3, "type": "jet ski"},
    ];
    let with_fuel = vec![
        doc! {"_id": 1, "type": "car", "specs": {"doors": 4, "wheels": 4, "fuel_type": "unleaded"}},
        doc! {"_id": 2, "type": "motorcycle", "specs": {"doors": 0, "wheels": 2, "fuel_type": "unleaded"}},
        doc! {"_id": 3, "type": "jet ski", "specs": {"fuel_type": "unleaded"}},
    ];
    check(
        &vehicles,
        &[doc! {"$addFields": {"specs.fuel_type": "unleaded"}}],
        &with_fuel,
    );
    check(
        &vehicles,
        &[doc! {"$set": {"specs": {"fuel_type": "unleaded"}}}],
        &with_fuel,
    );
    check(
        &[doc! {"_id": 1, "dogs": 10, "cats": 15}],
        &[doc! {"$addFields": {"cats": 20}}],
        &[doc! {"_id": 1, "dogs": 10, "cats": 20}],
    );
    check(
        &[doc! {"_id": 1, "dogs": 10, "cats": 15}],
        &[doc! {"$set": {"cats": 20, "birds": {"$add": ["$dogs", 1]}}}],
        &[doc! {"_id": 1, "dogs": 10, "cats": 20, "birds": 11}],
    );
    let fruit = vec![
        doc! {"_id": 1, "item": "tangerine", "type": "citrus"},
        doc! {"_id": 2, "item": "lemon", "type": "citrus"},
        doc! {"_id": 3, "item": "grapefruit", "type": "citrus"},
    ];
    check(
        &fruit,
        &[doc! {"$addFields": {"_id": "$item", "item": "fruit"}}],
        &[
            doc! {"_id": "tangerine", "item": "fruit", "type": "citrus"},
            doc! {"_id": "lemon", "item": "fruit", "type": "citrus"},
            doc! {"_id": "grapefruit", "item": "fruit", "type": "citrus"},
        ],
    );
}

#[test]
fn unset_page() {
    let input = vec![
        doc! {"_id": 1, "title": "Antelope Antics", "isbn": "0001122223334", "author": {"last": "An", "first": "Auntie"}, "copies": [{"warehouse": "A", "qty": 5}, {"warehouse": "B", "qty": 15}]},
        doc! {"_id": 2, "title": "Bees Babble", "isbn": "999999999333", "author": {"last": "Bumble", "first": "Bee"}, "copies": [{"warehouse": "A", "qty": 2}, {"warehouse": "B", "qty": 5}]},
    ];
    check(
        &input,
        &[doc! {"$unset": "copies"}],
        &[
            doc! {"_id": 1, "title": "Antelope Antics", "isbn": "0001122223334", "author": {"last": "An", "first": "Auntie"}},
            doc! {"_id": 2, "title": "Bees Babble", "isbn": "999999999333", "author": {"last": "Bumble", "first": "Bee"}},
        ],
    );
    check(
        &input,
        &[doc! {"$unset": ["isbn", "copies"]}],
        &[
            doc! {"_id": 1, "title": "Antelope Antics", "author": {"last": "An", "first": "Auntie"}},
            doc! {"_id": 2, "title": "Bees Babble", "author": {"last": "Bumble", "first": "Bee"}},
        ],
    );
    check(
        &input,
        &[doc! {"$unset": ["isbn", "author.first", "copies.warehouse"]}],
        &[
            doc! {"_id": 1, "title": "Antelope Antics", "author": {"last": "An"}, "copies": [{"qty": 5}, {"qty": 15}]},
            doc! {"_id": 2, "title": "Bees Babble", "author": {"last": "Bumble"}, "copies": [{"qty": 2}, {"qty": 5}]},
        ],
    );
}

#[test]
fn replace_root_and_replace_with_pages() {
    let produce = vec![
        doc! {"_id": 1, "fruit": ["apples", "oranges"], "in_stock": {"oranges": 20, "apples": 60}, "on_order": {"oranges": 35, "apples": 75}},
        doc! {"_id": 2, "vegetables": ["beets", "yams"], "in_stock": {"beets": 130, "yams": 200}, "on_order": {"beets": 90, "yams": 145}},
    ];
    check(
        &produce,
        &[doc! {"$replaceRoot": {"newRoot": "$in_stock"}}],
        &[
            doc! {"oranges": 20, "apples": 60},
            doc! {"beets": 130, "yams": 200},
        ],
    );
    let contacts = vec![
        doc! {"_id": 1, "first_name": "Gary", "last_name": "Sheffield", "city": "New York"},
        doc! {"_id": 2, "first_name": "Nancy", "last_name": "Walker", "city": "Anywhere"},
        doc! {"_id": 3, "first_name": "Peter", "last_name": "Sumner", "city": "Testville"},
    ];
    check(
        &contacts,
        &[
            doc! {"$replaceRoot": {"newRoot": {"full_name": {"$concat": ["$first_name", " ", "$last_name"]}}}},
        ],
        &[
            doc! {"full_name": "Gary Sheffield"},
            doc! {"full_name": "Nancy Walker"},
            doc! {"full_name": "Peter Sumner"},
        ],
    );
    let students = vec![
        doc! {"_id": 1, "grades": [
            {"test": 1, "grade": 80, "mean": 75, "std": 6},
            {"test": 2, "grade": 85, "mean": 90, "std": 4},
            {"test": 3, "grade": 95, "mean": 85, "std": 6},
        ]},
        doc! {"_id": 2, "grades": [
            {"test": 1, "grade": 90, "mean": 75, "std": 6},
            {"test": 2, "grade": 87, "mean": 90, "std": 3},
            {"test": 3, "grade": 91, "mean": 85, "std": 4},
        ]},
    ];
    check(
        &students,
        &[
            doc! {"$unwind": "$grades"},
            doc! {"$match": {"grades.grade": {"$gte": 90}}},
            doc! {"$replaceWith": "$grades"},
        ],
        &[
            doc! {"test": 3, "grade": 95, "mean": 85, "std": 6},
            doc! {"test": 1, "grade": 90, "mean": 75, "std": 6},
            doc! {"test": 3, "grade": 91, "mean": 85, "std": 4},
        ],
    );
}

#[test]
fn replace_root_of_a_missing_document_fails() {
    let people = vec![
        doc! {"_id": 1, "name": "Arlene", "age": 34, "pets": {"dogs": 2, "cats": 1}},
        doc! {"_id": 3, "name": "Maria", "age": 25},
    ];
    let pipeline = Pipeline::parse(&[doc! {"$replaceRoot": {"newRoot": "$pets"}}]).expect("parses");
    let e = pipeline
        .run_documents(&people, &NoCollections)
        .expect_err("the second document has no pets");
    assert_eq!(e.code.code(), 40228);
    assert!(e.message.starts_with(
        "'newRoot' expression must evaluate to an object, but resulting value was: MISSING. \
         Type of resulting value: 'missing'."
    ));
}
