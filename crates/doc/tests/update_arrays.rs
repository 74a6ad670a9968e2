//! Array update operators on MongoDB's documented examples: `$push` with its modifiers,
//! `$addToSet`, `$pop`, `$pull` with values and conditions, `$pullAll`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

use bson::doc;
use shale_doc::{ErrorCode, UpdateSpec};

mod common;
use common::check_update as check;

#[test]
fn push_one_and_each() {
    let d = doc! {"_id": 1, "scores": [44, 78, 38, 80]};
    let after = doc! {"_id": 1, "scores": [44, 78, 38, 80, 89]};
    assert!(check(d.clone(), doc! {"$push": {"scores": 89}}, after));
    let after = doc! {"_id": 1, "scores": [44, 78, 38, 80, 90, 92, 85]};
    assert!(check(
        d,
        doc! {"$push": {"scores": {"$each": [90, 92, 85]}}},
        after
    ));
    let after = doc! {"_id": 1, "new": [[1, 2]]};
    assert!(check(
        doc! {"_id": 1},
        doc! {"$push": {"new": [1, 2]}},
        after
    ));
}

#[test]
fn push_each_sort_slice() {
    let before = doc! {"_id": 5, "quizzes": [
        {"wk": 1, "score": 10}, {"wk": 2, "score": 8}, {"wk": 3, "score": 5}, {"wk": 4, "score": 6}
    ]};
    let update = doc! {"$push": {"quizzes": {
        "$each": [{"wk": 5, "score": 8}, {"wk": 6, "score": 7}, {"wk": 7, "score": 6}],
        "$sort": {"score": -1}, "$slice": 3
    }}};
    let after = doc! {"_id": 5, "quizzes": [
        {"wk": 1, "score": 10}, {"wk": 2, "score": 8}, {"wk": 5, "score": 8}
    ]};
    assert!(check(before, update, after));
}

#[test]
fn push_position() {
    let d = doc! {"_id": 1, "scores": [100]};
    let d2 = doc! {"_id": 1, "scores": [50, 60, 70, 100]};
    assert!(check(
        d,
        doc! {"$push": {"scores": {"$each": [50, 60, 70], "$position": 0}}},
        d2.clone()
    ));
    let d3 = doc! {"_id": 1, "scores": [50, 60, 20, 30, 70, 100]};
    assert!(check(
        d2,
        doc! {"$push": {"scores": {"$each": [20, 30], "$position": 2}}},
        d3.clone()
    ));
    let d4 = doc! {"_id": 1, "scores": [50, 60, 20, 30, 90, 80, 70, 100]};
    assert!(check(
        d3,
        doc! {"$push": {"scores": {"$each": [90, 80], "$position": -2}}},
        d4
    ));
}

#[test]
fn push_slice() {
    let update = doc! {"$push": {"scores": {"$each": [80, 78, 86], "$slice": -5}}};
    let after = doc! {"_id": 1, "scores": [50, 60, 80, 78, 86]};
    assert!(check(
        doc! {"_id": 1, "scores": [40, 50, 60]},
        update,
        after
    ));
    let update = doc! {"$push": {"scores": {"$each": [100, 20], "$slice": 3}}};
    let after = doc! {"_id": 2, "scores": [89, 90, 100]};
    assert!(check(doc! {"_id": 2, "scores": [89, 90]}, update, after));
    let update = doc! {"$push": {"scores": {"$each": [], "$slice": -3}}};
    let after = doc! {"_id": 3, "scores": [70, 100, 20]};
    assert!(check(
        doc! {"_id": 3, "scores": [89, 70, 100, 20]},
        update,
        after
    ));
}

#[test]
fn push_sort() {
    let before = doc! {"_id": 1, "quizzes": [{"id": 1, "score": 6}, {"id": 2, "score": 9}]};
    let update = doc! {"$push": {"quizzes": {
        "$each": [{"id": 3, "score": 8}, {"id": 4, "score": 7}, {"id": 5, "score": 6}],
        "$sort": {"score": 1}
    }}};
    let after = doc! {"_id": 1, "quizzes": [
        {"id": 1, "score": 6}, {"id": 5, "score": 6}, {"id": 4, "score": 7},
        {"id": 3, "score": 8}, {"id": 2, "score": 9}
    ]};
    assert!(check(before, update, after));
    let update = doc! {"$push": {"tests": {"$each": [40, 60], "$sort": 1}}};
    let after = doc! {"_id": 2, "tests": [40, 50, 60, 70, 89, 89]};
    assert!(check(
        doc! {"_id": 2, "tests": [89, 70, 89, 50]},
        update,
        after
    ));
    let update = doc! {"$push": {"tests": {"$each": [], "$sort": -1}}};
    let after = doc! {"_id": 3, "tests": [100, 89, 70, 20]};
    assert!(check(
        doc! {"_id": 3, "tests": [89, 70, 100, 20]},
        update,
        after
    ));
}

#[test]
fn push_with_sort_counts_as_modified_like_the_server() {
    let sorted = doc! {"_id": 1, "a": [1, 2, 3]};
    let update = doc! {"$push": {"a": {"$each": [], "$sort": 1}}};
    assert!(check(sorted.clone(), update, sorted.clone()));
    let update = doc! {"$push": {"a": {"$each": [], "$slice": 5}}};
    assert!(!check(sorted.clone(), update, sorted));
}

#[test]
fn add_to_set() {
    let d = doc! {"_id": 1, "letters": ["a", "b"]};
    let after = doc! {"_id": 1, "letters": ["a", "b", ["c", "d"]]};
    assert!(check(d, doc! {"$addToSet": {"letters": ["c", "d"]}}, after));
    let inv = doc! {"_id": 1, "item": "polarizing_filter", "tags": ["electronics", "camera"]};
    let after = doc! {"_id": 1, "item": "polarizing_filter", "tags": ["electronics", "camera", "accessories"]};
    assert!(check(
        inv.clone(),
        doc! {"$addToSet": {"tags": "accessories"}},
        after.clone()
    ));
    assert!(!check(
        inv.clone(),
        doc! {"$addToSet": {"tags": "camera"}},
        inv.clone()
    ));
    let update = doc! {"$addToSet": {"tags": {"$each": ["camera", "electronics", "accessories"]}}};
    assert!(check(inv, update, after));
    let after = doc! {"_id": 1, "n": [1, "x"]};
    assert!(check(
        doc! {"_id": 1},
        doc! {"$addToSet": {"n": {"$each": [1, 1.0, "x"]}}},
        after
    ));
}

#[test]
fn pop() {
    let d = doc! {"_id": 1, "scores": [8, 9, 10]};
    assert!(check(
        d.clone(),
        doc! {"$pop": {"scores": -1}},
        doc! {"_id": 1, "scores": [9, 10]}
    ));
    assert!(check(
        d,
        doc! {"$pop": {"scores": 1}},
        doc! {"_id": 1, "scores": [8, 9]}
    ));
    let empty = doc! {"_id": 1, "scores": []};
    assert!(!check(empty.clone(), doc! {"$pop": {"scores": 1}}, empty));
    assert!(!check(
        doc! {"_id": 1},
        doc! {"$pop": {"x.y": 1}},
        doc! {"_id": 1}
    ));
}

#[test]
fn pull_values_and_conditions() {
    let stores = doc! {"_id": 1,
    "fruits": ["apples", "pears", "oranges", "grapes", "bananas"],
    "vegetables": ["carrots", "celery", "squash", "carrots"]};
    let update =
        doc! {"$pull": {"fruits": {"$in": ["apples", "oranges"]}, "vegetables": "carrots"}};
    let after = doc! {"_id": 1, "fruits": ["pears", "grapes", "bananas"], "vegetables": ["celery", "squash"]};
    assert!(check(stores, update, after));
    let votes = doc! {"_id": 1, "votes": [3, 5, 6, 7, 7, 8]};
    let after = doc! {"_id": 1, "votes": [3, 5]};
    assert!(check(votes, doc! {"$pull": {"votes": {"$gte": 6}}}, after));
}

#[test]
fn pull_documents_by_query() {
    let update = doc! {"$pull": {"results": {"score": 8, "item": "B"}}};
    let s1 =
        doc! {"_id": 1, "results": [{"item": "A", "score": 5}, {"item": "B", "score": 8, "c": 1}]};
    let after = doc! {"_id": 1, "results": [{"item": "A", "score": 5}]};
    assert!(check(s1, update.clone(), after));
    let s2 = doc! {"_id": 2, "results": [{"item": "C", "score": 8}, {"item": "B", "score": 4}]};
    assert!(!check(s2.clone(), update, s2));
    let mixed = doc! {"_id": 3, "a": [1, {"x": 1}, {"y": 2}]};
    let after = doc! {"_id": 3, "a": [1, {"y": 2}]};
    assert!(check(
        mixed,
        doc! {"$pull": {"a": {"x": {"$gte": 1}}}},
        after
    ));
}

#[test]
fn pull_all() {
    let d = doc! {"_id": 1, "scores": [0, 2, 5, 5, 1, 0]};
    assert!(check(
        d,
        doc! {"$pullAll": {"scores": [0, 5]}},
        doc! {"_id": 1, "scores": [2, 1]}
    ));
    let d = doc! {"_id": 1, "a": [[1], {"b": 1}, 1.0]};
    let after = doc! {"_id": 1, "a": []};
    assert!(check(
        d,
        doc! {"$pullAll": {"a": [[1], {"b": 1}, 1]}},
        after
    ));
}

#[test]
fn pull_with_elem_match_uses_the_matcher() {
    let s1 = doc! {"_id": 1, "results": [
        {"item": "A", "score": 5, "answers": [{"q": 1, "a": 4}, {"q": 2, "a": 6}]},
        {"item": "B", "score": 8, "answers": [{"q": 1, "a": 8}, {"q": 2, "a": 9}]}
    ]};
    let s2 = doc! {"_id": 2, "results": [
        {"item": "C", "score": 8, "answers": [{"q": 1, "a": 8}, {"q": 2, "a": 7}]},
        {"item": "B", "score": 4, "answers": [{"q": 1, "a": 0}, {"q": 2, "a": 8}]}
    ]};
    let update =
        doc! {"$pull": {"results": {"answers": {"$elemMatch": {"q": 2, "a": {"$gte": 8}}}}}};
    let after1 = doc! {"_id": 1, "results": [
        {"item": "A", "score": 5, "answers": [{"q": 1, "a": 4}, {"q": 2, "a": 6}]}
    ]};
    let after2 = doc! {"_id": 2, "results": [
        {"item": "C", "score": 8, "answers": [{"q": 1, "a": 8}, {"q": 2, "a": 7}]}
    ]};
    assert!(check(s1, update.clone(), after1));
    assert!(check(s2, update, after2));
}

#[test]
fn pull_with_regex_and_logical_conditions() {
    let re = bson::Regex {
        pattern: "^x".into(),
        options: String::new(),
    };
    let d = doc! {"_id": 1, "a": ["xa", "b", "xc", 1]};
    let after = doc! {"_id": 1, "a": ["b", 1]};
    assert!(check(d, doc! {"$pull": {"a": re}}, after));
    let d = doc! {"_id": 1, "a": [{"k": 1}, {"k": 2}, {"j": 3}]};
    let after = doc! {"_id": 1, "a": [{"k": 2}]};
    let update = doc! {"$pull": {"a": {"$or": [{"k": 1}, {"j": {"$exists": true}}]}}};
    assert!(check(d, update, after));
    let d = doc! {"_id": 1, "a": [1, "s", null]};
    let after = doc! {"_id": 1, "a": [1]};
    assert!(check(
        d,
        doc! {"$pull": {"a": {"$not": {"$type": "number"}}}},
        after
    ));
}

#[test]
fn malformed_pull_conditions_report_the_matcher_error() {
    let e = UpdateSpec::parse(&doc! {"$pull": {"a": {"$bogus": 1}}}, None).expect_err("bad op");
    assert_eq!(e.code, ErrorCode::BadValue);
    assert_eq!(e.message, "unknown operator: $bogus");
}
