//! Positional updates on MongoDB's documented examples: `$` with the index the query matched,
//! `$[]` on every element, `$[id]` with `arrayFilters`, and nested combinations.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

use bson::{doc, Document};
use shale_doc::{ApplyContext, ErrorCode, MongoError, UpdateSpec};

mod common;
use common::{bytes, ctx};

fn run(
    before: &Document,
    update: &Document,
    filters: &[Document],
    ctx: &ApplyContext,
) -> Result<(Document, bool), MongoError> {
    let spec = UpdateSpec::parse(update, Some(filters))?;
    let mut doc = before.clone();
    let outcome = spec.apply(&mut doc, ctx)?;
    Ok((doc, outcome.modified))
}

fn check(before: Document, update: Document, filters: &[Document], after: Document) {
    let (doc, modified) =
        run(&before, &update, filters, &ctx()).unwrap_or_else(|e| panic!("{update}: {e}"));
    assert_eq!(
        bytes(&doc),
        bytes(&after),
        "{update} on {before}: got {doc}"
    );
    assert_eq!(modified, before != after);
}

#[test]
fn positional_dollar_uses_the_matched_index() {
    let d = doc! {"_id": 1, "grades": [85, 80, 80]};
    let c = ctx().with_matched_index(1);
    let (got, modified) = run(&d, &doc! {"$set": {"grades.$": 82}}, &[], &c).expect("match");
    assert_eq!(got, doc! {"_id": 1, "grades": [85, 82, 80]});
    assert!(modified);
    let d = doc! {"_id": 4, "grades": [
        {"grade": 80, "mean": 75, "std": 8}, {"grade": 85, "mean": 90, "std": 5},
        {"grade": 85, "mean": 85, "std": 8}
    ]};
    let (got, _) = run(&d, &doc! {"$set": {"grades.$.std": 6}}, &[], &c).expect("match");
    let want = doc! {"_id": 4, "grades": [
        {"grade": 80, "mean": 75, "std": 8}, {"grade": 85, "mean": 90, "std": 6},
        {"grade": 85, "mean": 85, "std": 8}
    ]};
    assert_eq!(bytes(&got), bytes(&want));
}

#[test]
fn positional_dollar_without_a_match_fails() {
    let d = doc! {"_id": 1, "grades": [85]};
    let e = run(&d, &doc! {"$set": {"grades.$": 1}}, &[], &ctx()).expect_err("no match");
    assert_eq!(e.code, ErrorCode::BadValue);
    assert_eq!(
        e.message,
        "The positional operator did not find the match needed from the query."
    );
}

#[test]
fn all_elements() {
    let d = doc! {"_id": 1, "grades": [85, 82, 80]};
    check(
        d,
        doc! {"$inc": {"grades.$[]": 10}},
        &[],
        doc! {"_id": 1, "grades": [95, 92, 90]},
    );
    let d = doc! {"_id": 1, "grades": [{"grade": 80, "std": 8}, {"grade": 85, "std": 6}]};
    let after = doc! {"_id": 1, "grades": [{"grade": 80, "std": 6}, {"grade": 85, "std": 4}]};
    check(d, doc! {"$inc": {"grades.$[].std": -2}}, &[], after);
    let empty = doc! {"_id": 1, "grades": []};
    check(empty.clone(), doc! {"$set": {"grades.$[]": 1}}, &[], empty);
}

#[test]
fn filtered_elements() {
    let filters = [doc! {"element": {"$gte": 100}}];
    let update = doc! {"$set": {"grades.$[element]": 100}};
    let d2 = doc! {"_id": 2, "grades": [98, 100, 102]};
    check(
        d2,
        update.clone(),
        &filters,
        doc! {"_id": 2, "grades": [98, 100, 100]},
    );
    let d3 = doc! {"_id": 3, "grades": [95, 110, 100]};
    check(
        d3,
        update.clone(),
        &filters,
        doc! {"_id": 3, "grades": [95, 100, 100]},
    );
    let d1 = doc! {"_id": 1, "grades": [95, 92, 90]};
    check(d1.clone(), update, &filters, d1);
}

#[test]
fn filtered_document_elements() {
    let d = doc! {"_id": 3, "grades": [
        {"grade": 95, "mean": 85, "std": 6}, {"grade": 87, "mean": 90, "std": 3},
        {"grade": 80, "mean": 85, "std": 4}
    ]};
    let after = doc! {"_id": 3, "grades": [
        {"grade": 95, "mean": 100, "std": 6}, {"grade": 87, "mean": 100, "std": 3},
        {"grade": 80, "mean": 85, "std": 4}
    ]};
    let filters = [doc! {"elem.grade": {"$gte": 85}}];
    check(
        d.clone(),
        doc! {"$set": {"grades.$[elem].mean": 100}},
        &filters,
        after,
    );
    let after = doc! {"_id": 3, "grades": [
        {"grade": 95, "mean": 85, "std": 5}, {"grade": 87, "mean": 90, "std": 3},
        {"grade": 80, "mean": 85, "std": 4}
    ]};
    let filters = [doc! {"elem.grade": {"$gte": 80}, "elem.std": {"$gt": 5}}];
    check(
        d.clone(),
        doc! {"$inc": {"grades.$[elem].std": -1}},
        &filters,
        after,
    );
    let filters = [doc! {"elem.grade": {"$ne": 95}}];
    let after = doc! {"_id": 3, "grades": [
        {"grade": 95, "mean": 85, "std": 6}, {"grade": 87, "mean": 90, "std": 3, "x": 1},
        {"grade": 80, "mean": 85, "std": 4, "x": 1}
    ]};
    check(d, doc! {"$set": {"grades.$[elem].x": 1}}, &filters, after);
}

fn quizzes() -> Document {
    doc! {"_id": 1, "grades": [
        {"type": "quiz", "questions": [10, 8, 5]}, {"type": "quiz", "questions": [8, 9, 6]},
        {"type": "hw", "questions": [5, 4, 3]}, {"type": "exam", "questions": [25, 10, 23, 0]}
    ]}
}

#[test]
fn nested_filters() {
    let filters = [doc! {"t.type": "quiz"}, doc! {"score": {"$gte": 8}}];
    let update = doc! {"$inc": {"grades.$[t].questions.$[score]": 2}};
    let after = doc! {"_id": 1, "grades": [
        {"type": "quiz", "questions": [12, 10, 5]}, {"type": "quiz", "questions": [10, 11, 6]},
        {"type": "hw", "questions": [5, 4, 3]}, {"type": "exam", "questions": [25, 10, 23, 0]}
    ]};
    check(quizzes(), update, &filters, after);
}

#[test]
fn all_elements_with_nested_filter() {
    let filters = [doc! {"score": {"$gte": 8}}];
    let update = doc! {"$inc": {"grades.$[].questions.$[score]": 2}};
    let after = doc! {"_id": 1, "grades": [
        {"type": "quiz", "questions": [12, 10, 5]}, {"type": "quiz", "questions": [10, 11, 6]},
        {"type": "hw", "questions": [5, 4, 3]}, {"type": "exam", "questions": [27, 12, 25, 0]}
    ]};
    check(quizzes(), update, &filters, after);
}

#[test]
fn positional_with_array_operators() {
    let d = doc! {"_id": 1, "a": [{"tags": ["x"]}, {"tags": []}]};
    let after = doc! {"_id": 1, "a": [{"tags": ["x", "y"]}, {"tags": ["y"]}]};
    check(d, doc! {"$addToSet": {"a.$[].tags": "y"}}, &[], after);
}

#[test]
fn overlapping_positional_targets_conflict() {
    let d = doc! {"_id": 1, "a": [1, 2]};
    let update = doc! {"$set": {"a.$[]": 0, "a.1": 5}};
    let e = run(&d, &update, &[], &ctx()).expect_err("same element twice");
    assert_eq!(e.code, ErrorCode::ConflictingUpdateOperators);
    assert_eq!(e.message, "Update created a conflict at 'a.1'");
}

#[test]
fn array_updates_need_an_existing_array() {
    let update = doc! {"$set": {"a.$[].b": 1}};
    let e = run(&doc! {"_id": 1, "a": 1}, &update, &[], &ctx()).expect_err("scalar");
    assert_eq!(e.code, ErrorCode::BadValue);
    assert_eq!(
        e.message,
        "Cannot apply array updates to non-array element a: 1"
    );
    let e = run(&doc! {"_id": 1}, &update, &[], &ctx()).expect_err("missing");
    assert_eq!(
        e.message,
        "The path 'a' must exist in the document in order to apply array updates."
    );
    let e = run(&doc! {"_id": 1, "a": [0]}, &update, &[], &ctx()).expect_err("scalar element");
    assert_eq!(e.code, ErrorCode::PathNotViable);
    assert_eq!(e.message, "Cannot create field 'b' in element {0: 0}");
}

#[test]
fn filters_with_logical_operators_use_the_matcher() {
    let filters = [doc! {"$or": [{"i": 1}, {"i": {"$gte": 3}}]}];
    let d = doc! {"_id": 1, "a": [1, 2, 3, 4]};
    check(
        d,
        doc! {"$set": {"a.$[i]": 0}},
        &filters,
        doc! {"_id": 1, "a": [0, 2, 0, 0]},
    );
    let filters = [doc! {"e.tags": {"$elemMatch": {"$eq": "x"}}}];
    let d = doc! {"_id": 1, "a": [{"tags": ["x"]}, {"tags": ["y"]}]};
    let after = doc! {"_id": 1, "a": [{"tags": ["x"], "hit": true}, {"tags": ["y"]}]};
    check(d, doc! {"$set": {"a.$[e].hit": true}}, &filters, after);
}
