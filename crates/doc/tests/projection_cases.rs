//! Find projections from MongoDB's documentation: inclusion, exclusion, `_id`, nested paths
//! through documents and arrays, `$slice`, `$elemMatch`, positional `$` with the matcher's
//! index, computed fields, and the errors for invalid specifications.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

use bson::{doc, Document};
use shale_doc::{Matcher, Projection};

mod common;
use common::raw;

fn project(spec: Document, document: &Document, index: Option<usize>) -> Document {
    let p = Projection::parse(&raw(&spec)).expect("projection parses");
    p.apply(&raw(document), index)
        .expect("applies")
        .to_document()
        .expect("valid output")
}

fn refused(spec: Document) -> (i32, String) {
    let e = Projection::parse(&raw(&spec)).expect_err("projection is refused");
    (e.code.code(), e.message)
}

fn inventory() -> Document {
    doc! {"_id": 1, "item": "journal", "status": "A", "size": {"h": 14, "w": 21, "uom": "cm"},
    "instock": [{"wh": "A", "qty": 5}, {"wh": "C", "qty": 15}]}
}

#[test]
fn inclusion_and_id() {
    let d = inventory();
    assert_eq!(
        project(doc! {"item": 1, "status": 1}, &d, None),
        doc! {"_id": 1, "item": "journal", "status": "A"}
    );
    assert_eq!(
        project(doc! {"status": 1, "item": 1}, &d, None),
        doc! {"_id": 1, "item": "journal", "status": "A"}
    );
    assert_eq!(
        project(doc! {"item": 1, "_id": 0}, &d, None),
        doc! {"item": "journal"}
    );
    assert_eq!(project(doc! {"_id": 1}, &d, None), doc! {"_id": 1});
    assert_eq!(project(doc! {"nope": 1}, &d, None), doc! {"_id": 1});
    assert_eq!(
        project(doc! {"item": true}, &d, None),
        doc! {"_id": 1, "item": "journal"}
    );
}

#[test]
fn exclusion() {
    let d = inventory();
    assert_eq!(
        project(doc! {"status": 0, "instock": 0, "size": 0}, &d, None),
        doc! {"_id": 1, "item": "journal"}
    );
    assert_eq!(project(doc! {"_id": 0}, &d, None).len(), 4);
    assert_eq!(project(doc! {}, &d, None), d);
    assert_eq!(
        project(doc! {"size.uom": 0}, &d, None)
            .get_document("size")
            .expect("kept"),
        &doc! {"h": 14, "w": 21}
    );
    assert_eq!(
        project(
            doc! {"item": false, "_id": false},
            &doc! {"_id": 1, "item": 2, "x": 3},
            None
        ),
        doc! {"x": 3}
    );
}

#[test]
fn nested_paths() {
    let d = inventory();
    assert_eq!(
        project(doc! {"size.uom": 1}, &d, None),
        doc! {"_id": 1, "size": {"uom": "cm"}}
    );
    assert_eq!(
        project(doc! {"size": {"uom": 1}}, &d, None),
        doc! {"_id": 1, "size": {"uom": "cm"}}
    );
    assert_eq!(
        project(doc! {"instock.qty": 1, "_id": 0}, &d, None),
        doc! {"instock": [{"qty": 5}, {"qty": 15}]}
    );
    let mixed = doc! {"a": [{"b": 1, "c": 2}, 5, [{"b": 3}], {"c": 4}]};
    assert_eq!(
        project(doc! {"a.b": 1}, &mixed, None),
        doc! {"a": [{"b": 1}, [{"b": 3}], {}]}
    );
    assert_eq!(
        project(doc! {"a.b": 0}, &mixed, None),
        doc! {"a": [{"c": 2}, 5, [{}], {"c": 4}]}
    );
    assert_eq!(project(doc! {"a.b": 1}, &doc! {"a": 5}, None), doc! {});
}

#[test]
fn slice() {
    let d = doc! {"_id": 1, "t": "x", "c": [1, 2, 3, 4, 5]};
    assert_eq!(
        project(doc! {"c": {"$slice": 2}}, &d, None),
        doc! {"_id": 1, "t": "x", "c": [1, 2]}
    );
    assert_eq!(
        project(doc! {"c": {"$slice": -2}}, &d, None),
        doc! {"_id": 1, "t": "x", "c": [4, 5]}
    );
    assert_eq!(
        project(doc! {"c": {"$slice": [1, 2]}}, &d, None)
            .get_array("c")
            .expect("c")
            .len(),
        2
    );
    assert_eq!(
        project(doc! {"c": {"$slice": [-2, 5]}}, &d, None),
        doc! {"_id": 1, "t": "x", "c": [4, 5]}
    );
    assert_eq!(
        project(doc! {"c": {"$slice": [10, 2]}}, &d, None),
        doc! {"_id": 1, "t": "x", "c": []}
    );
    assert_eq!(project(doc! {"c": {"$slice": -10}}, &d, None), d);
    assert_eq!(
        project(doc! {"c": {"$slice": 1}, "t": 1}, &d, None),
        doc! {"_id": 1, "t": "x", "c": [1]}
    );
    assert_eq!(
        project(doc! {"c": {"$slice": 1}, "t": 0}, &d, None),
        doc! {"_id": 1, "c": [1]}
    );
    assert_eq!(project(doc! {"t": {"$slice": 1}}, &d, None), d);
}

#[test]
fn elem_match_projection() {
    let d = doc! {"_id": 1, "zip": "63109", "students": [
    {"name": "john", "school": 102, "age": 10},
    {"name": "jess", "school": 102, "age": 11},
    {"name": "jeff", "school": 108, "age": 15}]};
    assert_eq!(
        project(doc! {"students": {"$elemMatch": {"school": 102}}}, &d, None),
        doc! {"_id": 1, "students": [{"name": "john", "school": 102, "age": 10}]}
    );
    assert_eq!(
        project(
            doc! {"students": {"$elemMatch": {"school": 102, "age": {"$gt": 10}}}, "zip": 1},
            &d,
            None
        ),
        doc! {"_id": 1, "zip": "63109", "students": [{"name": "jess", "school": 102, "age": 11}]}
    );
    assert_eq!(
        project(doc! {"students": {"$elemMatch": {"school": 999}}}, &d, None),
        doc! {"_id": 1}
    );
}

#[test]
fn modes_of_projections_without_plain_fields() {
    let d = doc! {"_id": 1, "a": [1, 2, 3], "b": [{"x": 1}, {"x": 2}], "c": 5};
    assert_eq!(
        project(doc! {"_id": 1, "a": {"$slice": 1}}, &d, None),
        doc! {"_id": 1, "a": [1]}
    );
    assert_eq!(
        project(doc! {"_id": 0, "a": {"$slice": 1}}, &d, None),
        doc! {"a": [1], "b": [{"x": 1}, {"x": 2}], "c": 5}
    );
    assert_eq!(
        project(doc! {"_id": 0, "b": {"$elemMatch": {"x": 2}}}, &d, None),
        doc! {"b": [{"x": 2}]}
    );
    assert_eq!(
        project(doc! {"b": {"$elemMatch": {"x": 2}}, "c": 0}, &d, None),
        doc! {"_id": 1, "a": [1, 2, 3], "b": [{"x": 2}]}
    );
    assert_eq!(
        project(doc! {"a.$.b": 1}, &d, Some(2)),
        doc! {"_id": 1, "a": [3]}
    );
}

#[test]
fn positional_uses_the_matchers_index() {
    let d = doc! {"_id": 1, "semester": 1, "grades": [70, 87, 90]};
    let filter = raw(&doc! {"semester": 1, "grades": {"$gte": 85}});
    let (matched, index) = Matcher::parse(&filter)
        .expect("parses")
        .matches_with_position(&raw(&d))
        .expect("runs");
    assert!(matched);
    assert_eq!(
        project(doc! {"grades.$": 1}, &d, index),
        doc! {"_id": 1, "grades": [87]}
    );
    let p = Projection::parse(&raw(&doc! {"grades.$": 1})).expect("parses");
    let e = p.apply(&raw(&d), None).expect_err("no index");
    assert_eq!(e.code.code(), 51246);
}

#[test]
fn computed_fields() {
    let d = doc! {"_id": 1, "a": 2, "b": {"c": 3}};
    assert_eq!(
        project(doc! {"x": "$b.c", "_id": 0}, &d, None),
        doc! {"x": 3}
    );
    assert_eq!(
        project(doc! {"a": 1, "s": {"$add": ["$a", 1]}}, &d, None),
        doc! {"_id": 1, "a": 2, "s": 3}
    );
    assert_eq!(
        project(doc! {"lit": {"$literal": 1}, "_id": 0}, &d, None),
        doc! {"lit": 1}
    );
    assert_eq!(
        project(doc! {"n.m": "$a", "_id": 0}, &d, None),
        doc! {"n": {"m": 2}}
    );
    // A computed sub-path over a scalar replaces the scalar with the computed document.
    assert_eq!(
        project(doc! {"a": {"n": "$b.c"}, "_id": 0}, &d, None),
        doc! {"a": {"n": 3}}
    );
}

#[test]
fn invalid_specifications() {
    assert_eq!(
        refused(doc! {"a": 1, "b": 0}),
        (
            31254,
            "Cannot do exclusion on field b in inclusion projection".into()
        )
    );
    assert_eq!(
        refused(doc! {"a": 0, "b": 1}),
        (
            31253,
            "Cannot do inclusion on field b in exclusion projection".into()
        )
    );
    assert_eq!(
        refused(doc! {"a": 1, "a.b": 1}),
        (31249, "Path collision at a.b remaining portion b".into())
    );
    assert_eq!(
        refused(doc! {"a.b": 1, "a": 1}),
        (31250, "Path collision at a".into())
    );
    assert_eq!(refused(doc! {"a": {"b": 1}, "a.c": 0}).0, 31254);
    assert_eq!(refused(doc! {"a.$": 1, "b.$": 1}).0, 31276);
    assert_eq!(
        refused(doc! {"a.$": 1, "b": {"$elemMatch": {"x": 1}}}).0,
        31255
    );
    assert_eq!(
        refused(doc! {"b": {"$elemMatch": {"x": 1}}, "a.$": 1}).0,
        31256
    );
    assert_eq!(refused(doc! {"a.$": {"x": 1}}).0, 31271);
    assert_eq!(refused(doc! {"a.$": "x"}).0, 31308);
    assert_eq!(refused(doc! {"a.$.b.$": 1}).0, 31287);
    assert_eq!(
        refused(doc! {"a": {"$elemMatch": 1}}),
        (
            31274,
            "elemMatch: Invalid argument, object required, but got int".into()
        )
    );
    assert_eq!(refused(doc! {"a": 0, "b": {"$add": [1, 2]}}).0, 31252);
    assert_eq!(
        refused(doc! {"a": 0, "b": "x"}),
        (
            31310,
            "Cannot use an expression b: \"x\" in an exclusion projection".into()
        )
    );
    assert_eq!(
        refused(doc! {"a": {"$foo": 1}}),
        (31325, "Unknown expression $foo".into())
    );
    assert_eq!(
        refused(doc! {"a": {"b": 1, "c": 0}}),
        (
            31254,
            "Cannot do exclusion on field c in inclusion projection".into()
        )
    );
    assert_eq!(
        refused(doc! {"a": 1, "a.b.c": 1}),
        (
            31249,
            "Path collision at a.b.c remaining portion b.c".into()
        )
    );
    assert_eq!(refused(doc! {"a.b": {"$elemMatch": {"x": 1}}}).0, 31275);
    assert_eq!(
        refused(doc! {"a": {"$slice": "x"}}),
        (
            31273,
            "$slice only supports numbers and [skip, limit] arrays".into()
        )
    );
    assert_eq!(
        refused(doc! {"a": {"$slice": [1, 0]}}),
        (31259, "$slice limit must be positive, got 0".into())
    );
    assert_eq!(refused(doc! {"a": {"$slice": [1]}}).0, 31272);
    assert_eq!(
        refused(doc! {"a": {"$slice": ["x", 1]}}),
        (
            31257,
            "$slice expects the skip argument to be a number, got string".into()
        )
    );
    assert_eq!(refused(doc! {"a": {"$slice": [1, "x"]}}).0, 31258);
    assert_eq!(refused(doc! {"a": {}}).0, 51270);
    assert_eq!(refused(doc! {"a": {"$elemMatch": {"$bad": 1}}}).0, 2);
}
