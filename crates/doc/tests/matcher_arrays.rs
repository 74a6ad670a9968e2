//! Array semantics: a field matches if any element matches or the whole array does; `$all`,
//! `$elemMatch` (both forms), `$size`, and the positional index reported for `$`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

use bson::doc;
use shale_doc::Matcher;

mod common;
use common::{raw, run_matches as run};

#[test]
fn any_element_or_whole_array() {
    run(&[
        (doc! {"tags": "red"}, doc! {"tags": ["blue", "red"]}, true),
        (
            doc! {"tags": ["red", "blue"]},
            doc! {"tags": ["red", "blue"]},
            true,
        ),
        (
            doc! {"tags": ["blue", "red"]},
            doc! {"tags": ["red", "blue"]},
            false,
        ),
        (doc! {"tags": ["red"]}, doc! {"tags": [["red"], "x"]}, true),
        (
            doc! {"dim": {"$gt": 15, "$lt": 20}},
            doc! {"dim": [22.85, 10]},
            true,
        ),
        (doc! {"dim": {"$gt": 25}}, doc! {"dim": [22.85, 10]}, false),
        (doc! {"a.b": 1}, doc! {"a": [{"b": 0}, {"b": 1}]}, true),
        (doc! {"a.b": 1}, doc! {"a": [{"b": [0, 1]}]}, true),
        (doc! {"a.b.c": 1}, doc! {"a": [{"b": [{"c": 1}]}]}, true),
        (doc! {"a": []}, doc! {"a": []}, true),
        (doc! {"a": []}, doc! {"a": [[]]}, true),
    ]);
}

#[test]
fn elem_match_differs_from_plain_ranges() {
    run(&[
        (
            doc! {"dim": {"$elemMatch": {"$gt": 15, "$lt": 20}}},
            doc! {"dim": [22.85, 10]},
            false,
        ),
        (
            doc! {"dim": {"$elemMatch": {"$gt": 15, "$lt": 20}}},
            doc! {"dim": [22, 18]},
            true,
        ),
        (
            doc! {"r": {"$elemMatch": {"p": "x", "s": {"$gte": 8}}}},
            doc! {"r": [{"p": "x", "s": 5}, {"p": "y", "s": 9}]},
            false,
        ),
        (
            doc! {"r.p": "x", "r.s": {"$gte": 8}},
            doc! {"r": [{"p": "x", "s": 5}, {"p": "y", "s": 9}]},
            true,
        ),
        (
            doc! {"r": {"$elemMatch": {"p": "x", "s": {"$gte": 8}}}},
            doc! {"r": [{"p": "x", "s": 9}]},
            true,
        ),
        (doc! {"a": {"$elemMatch": {"$eq": 1}}}, doc! {"a": 1}, false),
        (doc! {"a": {"$elemMatch": {}}}, doc! {"a": [{}]}, true),
        (doc! {"a": {"$elemMatch": {}}}, doc! {"a": [1]}, false),
        (
            doc! {"a": {"$elemMatch": {"$in": [3, 4]}}},
            doc! {"a": [1, 4]},
            true,
        ),
        (
            doc! {"a": {"$elemMatch": {"$not": {"$gt": 2}}}},
            doc! {"a": [5, 1]},
            true,
        ),
        (
            doc! {"a.b": {"$elemMatch": {"c": 1}}},
            doc! {"a": [{"b": [{"c": 1}]}]},
            true,
        ),
    ]);
}

#[test]
fn all_and_size() {
    run(&[
        (
            doc! {"t": {"$all": ["a", "b"]}},
            doc! {"t": ["b", "c", "a"]},
            true,
        ),
        (doc! {"t": {"$all": ["a", "b"]}}, doc! {"t": ["a"]}, false),
        (doc! {"t": {"$all": ["a"]}}, doc! {"t": "a"}, true),
        (
            doc! {"t": {"$all": [["a", "b"]]}},
            doc! {"t": [["a", "b"], "c"]},
            true,
        ),
        (doc! {"t": {"$all": []}}, doc! {"t": []}, false),
        (
            doc! {"q": {"$all": [{"$elemMatch": {"s": "M", "n": {"$gt": 50}}}]}},
            doc! {"q": [{"s": "M", "n": 60}]},
            true,
        ),
        (
            doc! {"q": {"$all": [{"$elemMatch": {"s": "M", "n": {"$gt": 50}}}]}},
            doc! {"q": [{"s": "M", "n": 6}, {"s": "L", "n": 60}]},
            false,
        ),
        (doc! {"a": {"$size": 0}}, doc! {"a": []}, true),
        (doc! {"a": {"$size": 2}}, doc! {"a": [1, 2]}, true),
        (doc! {"a": {"$size": 2}}, doc! {"a": [1, 2, 3]}, false),
        (doc! {"a": {"$size": 1}}, doc! {"a": "x"}, false),
        (doc! {"a": {"$size": 2.0}}, doc! {"a": [1, 2]}, true),
        (
            doc! {"a.b": {"$size": 1}},
            doc! {"a": [{"b": [1]}, {"b": 2}]},
            true,
        ),
    ]);
}

#[test]
fn positional_index_for_the_dollar_projection() {
    let cases = [
        (doc! {"g": {"$gte": 85}}, doc! {"g": [80, 85, 90]}, Some(1)),
        (doc! {"g": 90}, doc! {"g": [80, 85, 90]}, Some(2)),
        (doc! {"g.s": 9}, doc! {"g": [{"s": 1}, {"s": 9}]}, Some(1)),
        (
            doc! {"g": {"$elemMatch": {"s": 9}}},
            doc! {"g": [{"s": 1}, {"s": 9}]},
            Some(1),
        ),
        (doc! {"x": 1}, doc! {"x": 1}, None),
        (
            doc! {"$or": [{"g": 7}, {"g": 85}]},
            doc! {"g": [80, 85]},
            Some(1),
        ),
    ];
    for (filter, document, expected) in cases {
        let m = Matcher::parse(&raw(&filter)).expect("filter parses");
        let got = m
            .matches_with_position(&raw(&document))
            .expect("match runs");
        assert_eq!(got, (true, expected), "filter {filter} on {document}");
    }
}
