//! `$exists`, `$type`, `$regex`, `$mod`, `$not`, `$and/$or/$nor` and `$comment` cases from
//! MongoDB's documented behaviour.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

use bson::{doc, Binary, Bson, Regex};

mod common;
use common::run_matches as run;

fn re(pattern: &str, options: &str) -> Bson {
    Bson::RegularExpression(Regex {
        pattern: pattern.into(),
        options: options.into(),
    })
}

#[test]
fn exists() {
    run(&[
        (doc! {"a": {"$exists": true}}, doc! {"a": null}, true),
        (doc! {"a": {"$exists": true}}, doc! {}, false),
        (doc! {"a": {"$exists": false}}, doc! {}, true),
        (doc! {"a": {"$exists": 0}}, doc! {"a": 1}, false),
        (
            doc! {"a.b": {"$exists": true}},
            doc! {"a": [{"b": 1}]},
            true,
        ),
        (doc! {"a.b": {"$exists": false}}, doc! {"a": [1, 2]}, true),
        (doc! {"a.1": {"$exists": true}}, doc! {"a": [1, 2]}, true),
        (doc! {"a.2": {"$exists": true}}, doc! {"a": [1, 2]}, false),
    ]);
}

#[test]
fn type_operator() {
    run(&[
        (doc! {"a": {"$type": "double"}}, doc! {"a": 1.5}, true),
        (doc! {"a": {"$type": 1}}, doc! {"a": 1}, false),
        (doc! {"a": {"$type": "int"}}, doc! {"a": 1}, true),
        (doc! {"a": {"$type": "long"}}, doc! {"a": 1_i64}, true),
        (doc! {"a": {"$type": "number"}}, doc! {"a": 2.5}, true),
        (doc! {"a": {"$type": "number"}}, doc! {"a": "2"}, false),
        (doc! {"a": {"$type": "object"}}, doc! {"a": {}}, true),
        (doc! {"a": {"$type": "array"}}, doc! {"a": [1]}, true),
        (doc! {"a": {"$type": "array"}}, doc! {"a": 1}, false),
        (doc! {"a": {"$type": "int"}}, doc! {"a": ["x", 3]}, true),
        (
            doc! {"a": {"$type": "binData"}},
            doc! {"a": Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: vec![1] }},
            true,
        ),
        (doc! {"a": {"$type": "bool"}}, doc! {"a": false}, true),
        (doc! {"a": {"$type": "null"}}, doc! {"a": null}, true),
        (
            doc! {"a": {"$type": "regex"}},
            doc! {"a": re("x", "")},
            true,
        ),
        (
            doc! {"a": {"$type": "maxKey"}},
            doc! {"a": Bson::MaxKey},
            true,
        ),
        (
            doc! {"a": {"$type": ["string", "int"]}},
            doc! {"a": "s"},
            true,
        ),
        (doc! {"a": {"$type": 2.0}}, doc! {"a": "s"}, true),
    ]);
}

#[test]
fn regex() {
    run(&[
        (doc! {"s": re("^acme", "i")}, doc! {"s": "ACME corp"}, true),
        (
            doc! {"s": {"$regex": "corp$"}},
            doc! {"s": "ACME corp"},
            true,
        ),
        (
            doc! {"s": {"$regex": "^c", "$options": "m"}},
            doc! {"s": "a\ncorp"},
            true,
        ),
        (doc! {"s": {"$regex": "^c"}}, doc! {"s": "a\ncorp"}, false),
        (doc! {"s": {"$regex": "a.c"}}, doc! {"s": "a\nc"}, false),
        (
            doc! {"s": {"$regex": "a.c", "$options": "s"}},
            doc! {"s": "a\nc"},
            true,
        ),
        (
            doc! {"s": {"$regex": " a  c # comment", "$options": "x"}},
            doc! {"s": "ac"},
            true,
        ),
        (doc! {"s": {"$regex": "(?<=a)b"}}, doc! {"s": "ab"}, true),
        (doc! {"s": {"$regex": "(a)\\1"}}, doc! {"s": "aa"}, true),
        (
            doc! {"s": {"$in": [re("^x", ""), re("^y", "")]}},
            doc! {"s": "yes"},
            true,
        ),
        (
            doc! {"s": {"$nin": [re("^x", "")]}},
            doc! {"s": "xx"},
            false,
        ),
        (
            doc! {"s": {"$all": [re("a", ""), re("b", "")]}},
            doc! {"s": ["a", "b"]},
            true,
        ),
        (doc! {"s": {"$not": re("^x", "")}}, doc! {"s": "xx"}, false),
        (
            doc! {"s": {"$not": {"$regex": "^x"}}},
            doc! {"s": "yy"},
            true,
        ),
        (
            doc! {"s": re("x", "")},
            doc! {"s": Bson::Symbol("axe".into())},
            true,
        ),
        (doc! {"s": re("1", "")}, doc! {"s": 1}, false),
        (doc! {"s": re("x", "")}, doc! {"s": re("x", "")}, true),
        (doc! {"s": re("x", "")}, doc! {"s": re("x", "i")}, false),
    ]);
}

#[test]
fn modulo() {
    run(&[
        (doc! {"q": {"$mod": [4, 0]}}, doc! {"q": 12}, true),
        (doc! {"q": {"$mod": [4, 0]}}, doc! {"q": 13}, false),
        (doc! {"q": {"$mod": [4.5, 0]}}, doc! {"q": 8}, true),
        (doc! {"q": {"$mod": [4, 0]}}, doc! {"q": 8.9}, true),
        (doc! {"q": {"$mod": [-4, 0]}}, doc! {"q": 8}, true),
        (doc! {"q": {"$mod": [3, -1]}}, doc! {"q": -4}, true),
        (doc! {"q": {"$mod": [4, 0]}}, doc! {"q": f64::NAN}, false),
        (doc! {"q": {"$mod": [4, 0]}}, doc! {"q": [1, 4]}, true),
        (doc! {"q": {"$mod": [4, 0]}}, doc! {}, false),
    ]);
}

#[test]
fn logical() {
    run(&[
        (
            doc! {"$and": [{"a": {"$ne": 1.99}}, {"a": {"$exists": true}}]},
            doc! {"a": 2},
            true,
        ),
        (
            doc! {"$and": [{"a": {"$ne": 1.99}}, {"a": {"$exists": true}}]},
            doc! {},
            false,
        ),
        (
            doc! {"$or": [{"q": {"$lt": 20}}, {"p": 10}]},
            doc! {"q": 30, "p": 10},
            true,
        ),
        (
            doc! {"$or": [{"q": {"$lt": 20}}, {"p": 10}]},
            doc! {"q": 30, "p": 11},
            false,
        ),
        (
            doc! {"$nor": [{"p": 1.99}, {"s": true}]},
            doc! {"p": 2},
            true,
        ),
        (
            doc! {"$nor": [{"p": 1.99}, {"s": true}]},
            doc! {"s": true},
            false,
        ),
        (doc! {"p": {"$not": {"$gt": 1.99}}}, doc! {"p": 1.5}, true),
        (doc! {"p": {"$not": {"$gt": 1.99}}}, doc! {}, true),
        (
            doc! {"p": {"$not": {"$gt": 1.99, "$lt": 5}}},
            doc! {"p": 6},
            true,
        ),
        (
            doc! {"p": {"$not": {"$gt": 1.99, "$lt": 5}}},
            doc! {"p": 3},
            false,
        ),
        (doc! {"$comment": "ignored", "a": 1}, doc! {"a": 1}, true),
        (doc! {"$alwaysFalse": 1}, doc! {}, false),
        (doc! {"$alwaysTrue": 1}, doc! {}, true),
        (
            doc! {"$and": [{"$or": [{"a": 1}, {"b": 1}]}, {"$or": [{"c": 1}, {"d": 1}]}]},
            doc! {"b": 1, "c": 1},
            true,
        ),
    ]);
}
