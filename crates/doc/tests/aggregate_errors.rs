//! Pipeline errors with MongoDB 7.0's codes and messages: malformed pipelines and stage
//! documents, each stage's parse errors, errors raised while running, and the raw-array entry
//! point's element check.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

use bson::{doc, Bson, Document, RawDocumentBuf};
use shale_doc::aggregate::NoCollections;
use shale_doc::{MongoError, Pipeline};

fn parse_error(pipeline: Vec<Document>) -> MongoError {
    match Pipeline::parse(&pipeline) {
        Ok(_) => panic!("{pipeline:?} should not parse"),
        Err(e) => e,
    }
}

/// (pipeline, code, message) — the message is checked when given.
fn check_parse(cases: Vec<(Vec<Document>, i32, Option<&str>)>) {
    for (pipeline, code, message) in cases {
        let shown = format!("{pipeline:?}");
        let e = parse_error(pipeline);
        assert_eq!(e.code.code(), code, "{shown}: {e}");
        if let Some(m) = message {
            assert_eq!(e.message, m, "{shown}");
        }
    }
}

#[test]
fn pipeline_and_stage_shape() {
    check_parse(vec![
        (
            vec![doc! {}],
            40323,
            Some("A pipeline stage specification object must contain exactly one field."),
        ),
        (vec![doc! {"$match": {}, "$limit": 1}], 40323, None),
        (
            vec![doc! {"$foo": 1}],
            40324,
            Some("Unrecognized pipeline stage name: '$foo'"),
        ),
        (
            vec![doc! {"match": {}}],
            40324,
            Some("Unrecognized pipeline stage name: 'match'"),
        ),
        (vec![doc! {"$out": "c"}, doc! {"$limit": 1}], 40601, None),
        (vec![doc! {"$geoNear": {}}], 238, None),
        (vec![doc! {"$densify": {}}], 40414, None),
        (vec![doc! {"$fill": {}}], 40414, None),
        (vec![doc! {"$setWindowFields": {}}], 40414, None),
        (vec![doc! {"$bucketAuto": {}}], 40246, None),
        (vec![doc! {"$bucket": {}}], 40198, None),
        (vec![doc! {"$limit": 1}, doc! {"$nope": 1}], 40324, None),
    ]);
    let array = RawDocumentBuf::from_document(&doc! {"p": [{"$limit": 1}, 5]}).expect("encodes");
    let Some(bson::RawBsonRef::Array(stages)) = array.get("p").expect("valid") else {
        panic!("array")
    };
    let e = Pipeline::parse_raw(stages).unwrap_err();
    assert_eq!(
        (e.code.code(), e.message.as_str()),
        (14, "Each element of the 'pipeline' array must be an object")
    );
}

#[test]
fn stage_parse_errors() {
    let one = |stage: &str, spec: Bson| {
        let mut d = Document::new();
        d.insert(stage, spec);
        vec![d]
    };
    check_parse(vec![
        (one("$match", Bson::Int32(1)), 15959, Some("the match filter must be an expression in an object")),
        (one("$match", bson::bson!({"$where": "true"})), 2, Some("$where is not allowed in this context")),
        (one("$match", bson::bson!({"a": {"$bad": 1}})), 2, Some("unknown operator: $bad")),
        (one("$project", bson::bson!({})), 51272, None),
        (one("$project", bson::bson!({"a": 1, "b": 0})), 31254, Some("Invalid $project :: caused by :: Cannot do exclusion on field b in inclusion projection")),
        (one("$project", bson::bson!({"a": {"$nope": 1}})), 31325, None),
        (one("$addFields", Bson::String("x".into())), 40272, Some("$addFields specification stage must be an object, got string")),
        (one("$set", Bson::Int32(1)), 40272, Some("$set specification stage must be an object, got int")),
        (one("$set", bson::bson!({"a": {"$add": [1, 2, {"$nope": 1}]}})), 168, None),
        (one("$unset", Bson::Int32(1)), 31002, None),
        (one("$replaceRoot", bson::bson!({})), 40231, None),
        (one("$group", bson::bson!({})), 15955, Some("a group specification must include an _id")),
        (one("$group", bson::bson!({"_id": null, "n": {"$foo": 1}})), 15952, Some("unknown group operator '$foo'")),
        (one("$group", bson::bson!({"_id": null, "n": {"$sum": [1]}})), 40237, Some("The $sum accumulator is a unary operator")),
        (one("$group", bson::bson!({"_id": {"$nope": 1}})), 168, None),
        (one("$sort", Bson::Int32(1)), 15973, None),
        (one("$sort", bson::bson!({})), 15976, None),
        (one("$sort", bson::bson!({"a": 0})), 15975, None),
        (one("$sort", bson::bson!({"a.": 1})), 40353, None),
        (one("$limit", Bson::Int32(0)), 15958, None),
        (one("$limit", Bson::Int32(-1)), 5107201, None),
        (one("$skip", Bson::String("x".into())), 5107200, None),
        (one("$unwind", Bson::String("a".into())), 28818, Some("path option to $unwind stage should be prefixed with a '$': a")),
        (one("$count", Bson::String("a.b".into())), 40160, None),
        (one("$sortByCount", Bson::Int32(1)), 40149, None),
        (one("$sortByCount", Bson::String("a".into())), 40148, None),
        (one("$sortByCount", bson::bson!({"a": 1})), 40147, None),
        (one("$facet", bson::bson!({"f": [{"$facet": {"g": [{"$limit": 1}]}}]})), 40600, Some("$facet is not allowed to be used within a $facet stage")),
    ]);
}

#[test]
fn lookup_parse_errors() {
    let lookup = |spec: Document| vec![doc! {"$lookup": spec}];
    check_parse(vec![
        (vec![doc! {"$lookup": "x"}], 9, Some("the $lookup stage specification must be an object, but found string")),
        (lookup(doc! {"from": "c", "localField": "a", "foreignField": "b"}), 9, Some("must specify 'as' field for a $lookup")),
        (lookup(doc! {"from": "c", "as": "o"}), 9, Some("$lookup requires either 'pipeline' or both 'localField' and 'foreignField' to be specified")),
        (lookup(doc! {"from": "c", "localField": "a", "as": "o"}), 9, Some("$lookup requires both or neither of 'localField' and 'foreignField' to be specified")),
        (lookup(doc! {"from": "c", "localField": "a", "foreignField": "b", "let": {"x": 1}, "as": "o"}), 9, Some("$lookup with a 'let' argument must also specify 'pipeline'")),
        (lookup(doc! {"from": "c", "localField": "a", "foreignField": "b", "as": "o", "bad": 1}), 9, Some("unknown argument to $lookup: bad")),
        (lookup(doc! {"from": 1, "localField": "a", "foreignField": "b", "as": "o"}), 9, Some("$lookup argument 'from: 1' must be a string, is type int")),
        (lookup(doc! {"from": "c", "pipeline": {}, "as": "o"}), 9, None),
        (lookup(doc! {"localField": "a", "foreignField": "b", "as": "o"}), 9, Some("must specify 'pipeline' when 'from' is empty")),
        (lookup(doc! {"from": "c", "let": {"Bad": 1}, "pipeline": [], "as": "o"}), 16867, None),
        (lookup(doc! {"from": "c", "pipeline": [{"$match": {"$expr": "$$nope"}}], "as": "o"}), 17276, None),
        (lookup(doc! {"from": "c", "let": {"v": 1}, "pipeline": [{"$nope": 1}], "as": "o"}), 40324, None),
        (lookup(doc! {"from": "c", "pipeline": [{"$limit": 1}], "as": "$o"}), 16410, None),
    ]);
}

fn run_error(input: Vec<Document>, pipeline: Vec<Document>) -> MongoError {
    let parsed = Pipeline::parse(&pipeline).expect("parses");
    match parsed.run_documents(&input, &NoCollections) {
        Ok(out) => panic!("{pipeline:?} should fail, gave {out:?}"),
        Err(e) => e,
    }
}

#[test]
fn errors_while_running() {
    let e = run_error(
        vec![doc! {"a": 1}],
        vec![doc! {"$project": {"q": {"$divide": ["$a", 0]}}}],
    );
    assert_eq!(
        (e.code.code(), e.message.as_str()),
        (16608, "can't $divide by zero")
    );
    let e = run_error(
        vec![doc! {"a": "x"}],
        vec![doc! {"$group": {"_id": {"$size": "$a"}}}],
    );
    assert_eq!(e.code.code(), 17124);
    let e = run_error(
        vec![doc! {"a": [1], "b": [2]}],
        vec![doc! {"$sort": {"a": 1, "b": 1}}],
    );
    assert_eq!(
        (e.code.code(), e.message.as_str()),
        (2, "cannot sort with keys that are parallel arrays")
    );
    let e = run_error(vec![doc! {"r": 5}], vec![doc! {"$replaceWith": "$r"}]);
    assert_eq!(e.code.code(), 40228);
    assert!(
        e.message
            .contains("resulting value was: 5. Type of resulting value: 'int'"),
        "{}",
        e.message
    );
    // A failing document stops the run even behind stages that would have dropped it later.
    let e = run_error(
        vec![doc! {"a": 1}, doc! {"a": 0}],
        vec![
            doc! {"$addFields": {"q": {"$divide": [1, "$a"]}}},
            doc! {"$limit": 5},
        ],
    );
    assert_eq!(e.code.code(), 16608);
}
