//! Update errors with MongoDB 7.0's codes, codeNames and messages: parse-time refusals
//! (unknown or empty modifiers, bad arguments, conflicting paths, `$rename` rules, array filter
//! rules, `$`-prefixed replacement fields) and apply-time ones (types, immutable `_id`, paths).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

use bson::{doc, Bson, DateTime, Document};
use shale_doc::{ApplyContext, ErrorCode, MongoError, UpdateSpec};

fn parse_err(update: Document) -> MongoError {
    UpdateSpec::parse(&update, None).expect_err("the update must be refused")
}

fn parse_err_with(update: Document, filters: &[Document]) -> MongoError {
    UpdateSpec::parse(&update, Some(filters)).expect_err("the update must be refused")
}

fn apply_err(before: Document, update: Document) -> MongoError {
    let spec = UpdateSpec::parse(&update, None).expect("valid update");
    let mut doc = before;
    let ctx = ApplyContext::new(DateTime::from_millis(0));
    spec.apply(&mut doc, &ctx)
        .expect_err("the update must fail")
}

fn assert_error(e: &MongoError, code: ErrorCode, number: i32, name: &str, message: &str) {
    assert_eq!(e.code, code, "{e}");
    assert_eq!(e.code.code(), number, "{e}");
    assert_eq!(e.code.name(), name, "{e}");
    assert_eq!(e.message, message);
}

#[test]
fn unknown_and_malformed_modifiers() {
    let e = parse_err(doc! {"$foo": {"a": 1}});
    let msg = "Unknown modifier: $foo. Expected a valid update modifier or pipeline-style update \
               specified as an array";
    assert_error(&e, ErrorCode::FailedToParse, 9, "FailedToParse", msg);
    let e = parse_err(doc! {"$set": {"a": 1}, "b": 2});
    assert!(e.message.starts_with("Unknown modifier: b."), "{e}");
    // An empty operand is a no-op since MongoDB 5.0.
    let mut d = doc! {"a": 1};
    let spec = UpdateSpec::parse(&doc! {"$set": {}, "$unset": {}}, None).expect("no-op");
    let now = ApplyContext::new(bson::DateTime::from_millis(0));
    assert!(!spec.apply(&mut d, &now).expect("applies").modified);
    assert_eq!(d, doc! {"a": 1});
    let e = parse_err(doc! {"$inc": "x"});
    assert!(e
        .message
        .starts_with("Modifiers operate on fields but we found type string"));
}

#[test]
fn argument_types() {
    let e = parse_err(doc! {"$inc": {"a": "x"}});
    let msg = "Cannot increment with non-numeric argument: {a: \"x\"}";
    assert_error(&e, ErrorCode::TypeMismatch, 14, "TypeMismatch", msg);
    let e = parse_err(doc! {"$mul": {"a": true}});
    assert_eq!(
        e.message,
        "Cannot multiply with non-numeric argument: {a: true}"
    );
    let e = parse_err(doc! {"$pullAll": {"a": 1}});
    assert_error(
        &e,
        ErrorCode::BadValue,
        2,
        "BadValue",
        "$pullAll requires an array argument but was given a int",
    );
    let e = parse_err(doc! {"$pop": {"a": 2}});
    assert_error(
        &e,
        ErrorCode::FailedToParse,
        9,
        "FailedToParse",
        "$pop expects 1 or -1, found: 2",
    );
    let e = parse_err(doc! {"$addToSet": {"a": {"$each": 1}}});
    let msg = "The argument to $each in $addToSet must be an array but it was of type int";
    assert_error(&e, ErrorCode::TypeMismatch, 14, "TypeMismatch", msg);
    let e = parse_err(doc! {"$push": {"a": {"$each": [1], "$slice": "x"}}});
    assert_eq!(
        e.message,
        "The value for $slice must be an integer value but was given type: string"
    );
    let e = parse_err(doc! {"$currentDate": {"a": {"$type": "x"}}});
    assert_eq!(e.code, ErrorCode::BadValue);
}

#[test]
fn conflicting_paths() {
    let e = parse_err(doc! {"$set": {"a": 1}, "$unset": {"a": 1}});
    let msg = "Updating the path 'a' would create a conflict at 'a'";
    assert_error(
        &e,
        ErrorCode::ConflictingUpdateOperators,
        40,
        "ConflictingUpdateOperators",
        msg,
    );
    let e = parse_err(doc! {"$set": {"a.b.c": 1}, "$inc": {"a.b": 1}});
    assert_eq!(
        e.message,
        "Updating the path 'a.b' would create a conflict at 'a.b'"
    );
    let e = parse_err(doc! {"$rename": {"a": "b"}, "$set": {"b.c": 1}});
    assert_eq!(
        e.message,
        "Updating the path 'b.c' would create a conflict at 'b'"
    );
}

#[test]
fn rename_rules() {
    let bad = |update: Document, msg: &str| {
        assert_error(&parse_err(update), ErrorCode::BadValue, 2, "BadValue", msg)
    };
    bad(
        doc! {"$rename": {"a": 1}},
        "The 'to' field for $rename must be a string: a: 1",
    );
    bad(
        doc! {"$rename": {"a": "a"}},
        "The source and target field for $rename must differ: a: \"a\"",
    );
    bad(
        doc! {"$rename": {"a": "a.b"}},
        "The source and target field for $rename must not be on the same path: a: \"a.b\"",
    );
    bad(
        doc! {"$rename": {"a.$": "b"}},
        "The source field for $rename may not be dynamic: a.$",
    );
    bad(
        doc! {"$rename": {"a": "b.$[]"}},
        "The destination field for $rename may not be dynamic: b.$[]",
    );
    let e = apply_err(
        doc! {"_id": 1, "a": [{"b": 1}]},
        doc! {"$rename": {"a.0.b": "c"}},
    );
    assert_eq!(
        e.message,
        "The source field cannot be an array element, 'a.0.b' in doc with _id: 1 has an array \
         field called 'a'"
    );
}

#[test]
fn path_syntax() {
    let e = parse_err(doc! {"$set": {"a..b": 1}});
    let msg = "The update path 'a..b' contains an empty field name, which is not allowed.";
    assert_error(&e, ErrorCode::EmptyFieldName, 56, "EmptyFieldName", msg);
    let e = parse_err(doc! {"$set": {"a.$.b.$": 1}});
    assert_eq!(
        e.message,
        "Too many positional (i.e. '$') elements found in path 'a.$.b.$'"
    );
    let e = parse_err(doc! {"$set": {"$": 1}});
    assert_eq!(e.code, ErrorCode::BadValue);
}

#[test]
fn array_filter_rules() {
    let e = parse_err(doc! {"$set": {"a.$[i]": 1}});
    let msg = "No array filter found for identifier 'i' in path 'a.$[i]'";
    assert_error(&e, ErrorCode::BadValue, 2, "BadValue", msg);
    let e = parse_err_with(
        doc! {"$set": {"a.$[i]": 5.0}},
        &[doc! {"i": 0}, doc! {"j": 0}],
    );
    let msg =
        "The array filter for identifier 'j' was not used in the update { $set: { a.$[i]: 5.0 } }";
    assert_error(&e, ErrorCode::FailedToParse, 9, "FailedToParse", msg);
    let e = parse_err_with(
        doc! {"$set": {"a.$[i]": 1}},
        &[doc! {"i": 0}, doc! {"i": 1}],
    );
    assert_eq!(
        e.message,
        "Found multiple array filters with the same top-level field name i"
    );
    let e = parse_err_with(doc! {"$set": {"a.$[I]": 1}}, &[doc! {"I": 0}]);
    let msg = "Error parsing array filter :: caused by :: The top-level field name must be an \
               alphanumeric string beginning with a lowercase letter, found 'I'";
    assert_error(&e, ErrorCode::BadValue, 2, "BadValue", msg);
    let e = parse_err_with(doc! {"$set": {"a.$[i]": 1}}, &[doc! {}]);
    let msg = "Cannot use an expression without a top-level field name in arrayFilters";
    assert_error(&e, ErrorCode::FailedToParse, 9, "FailedToParse", msg);
    let e = parse_err_with(
        doc! {"$set": {"a.$[i]": 1}},
        &[doc! {"$or": [{"i": 1}, {"j": 2}]}],
    );
    let msg = "Error parsing array filter :: caused by :: Expected a single top-level field name, \
               found 'i' and 'j'";
    assert_error(&e, ErrorCode::FailedToParse, 9, "FailedToParse", msg);
}

#[test]
fn apply_time_types() {
    let e = apply_err(doc! {"_id": 1, "a": "x"}, doc! {"$inc": {"a": 1}});
    let msg = "Cannot apply $inc to a value of non-numeric type. {_id: 1} has the field 'a' of \
               non-numeric type string";
    assert_error(&e, ErrorCode::TypeMismatch, 14, "TypeMismatch", msg);
    let e = apply_err(doc! {"_id": 1, "a": 1}, doc! {"$push": {"a": 1}});
    let msg = "The field 'a' must be an array but is of type int in document {_id: 1}";
    assert_error(&e, ErrorCode::BadValue, 2, "BadValue", msg);
    let e = apply_err(doc! {"_id": 1, "a": 1}, doc! {"$addToSet": {"a": 1}});
    let msg = "Cannot apply $addToSet to non-array field. Field named 'a' has non-array type int";
    assert_eq!(e.message, msg);
    let e = apply_err(doc! {"_id": 1, "a": 1}, doc! {"$pop": {"a": 1}});
    assert_error(
        &e,
        ErrorCode::TypeMismatch,
        14,
        "TypeMismatch",
        "Path 'a' contains an element of non-array type 'int'",
    );
    let e = apply_err(doc! {"_id": 1, "a": 1}, doc! {"$pull": {"a": 1}});
    assert_eq!(e.message, "Cannot apply $pull to a non-array value");
    let e = apply_err(doc! {"_id": 1, "a": i64::MAX}, doc! {"$inc": {"a": 1}});
    let msg = "Failed to apply $inc operations to current value ((NumberLong)9223372036854775807) \
               for document {_id: 1}";
    assert_error(&e, ErrorCode::BadValue, 2, "BadValue", msg);
}

#[test]
fn paths_through_scalars() {
    let e = apply_err(doc! {"_id": 1, "a": 1}, doc! {"$set": {"a.b": 1}});
    assert_error(
        &e,
        ErrorCode::PathNotViable,
        28,
        "PathNotViable",
        "Cannot create field 'b' in element {a: 1}",
    );
    let e = apply_err(doc! {"_id": 1, "a": [{"x": 1}]}, doc! {"$set": {"a.x": 1}});
    assert_eq!(
        e.message,
        "Cannot create field 'x' in element {a: [ { x: 1 } ]}"
    );
    let e = apply_err(doc! {"_id": 1, "a": 1}, doc! {"$pop": {"a.b": 1}});
    assert_eq!(e.code, ErrorCode::PathNotViable);
}

#[test]
fn immutable_id() {
    let e = apply_err(doc! {"_id": 1}, doc! {"$set": {"_id": 2}});
    let msg = "Performing an update on the path '_id' would modify the immutable field '_id'";
    assert_error(&e, ErrorCode::ImmutableField, 66, "ImmutableField", msg);
    let e = apply_err(doc! {"_id": {"a": 1}}, doc! {"$inc": {"_id.a": 1}});
    assert_eq!(e.code, ErrorCode::ImmutableField);
    let e = apply_err(doc! {"_id": 1}, doc! {"$unset": {"_id": 1}});
    assert_eq!(e.code, ErrorCode::ImmutableField);
    let e = apply_err(doc! {"_id": 1, "a": 2}, doc! {"$rename": {"a": "_id"}});
    assert_eq!(e.code, ErrorCode::ImmutableField);
    let e = apply_err(
        doc! {"_id": 1},
        Document::from_iter([("_id".to_string(), Bson::Int32(2))]),
    );
    let msg = "After applying the update, the (immutable) field '_id' was found to have been altered to _id: 2";
    assert_error(&e, ErrorCode::ImmutableField, 66, "ImmutableField", msg);
}

#[test]
fn replacement_and_pipeline_refusals() {
    let e = parse_err(doc! {"a": 1, "$set": {"b": 1}});
    let msg = "The dollar ($) prefixed field '$set' in '$set' is not allowed in the context of an \
               update's replacement document. Consider using an aggregation pipeline with $replaceWith.";
    assert_error(
        &e,
        ErrorCode::DollarPrefixedFieldName,
        52,
        "DollarPrefixedFieldName",
        msg,
    );
    let pipeline = Bson::Array(vec![Bson::Document(doc! {"$set": {"a": 1}})]);
    // Update pipelines take only the reshaping stages, and no arrayFilters.
    assert!(UpdateSpec::parse_value(&pipeline, None).is_ok());
    let group = Bson::Array(vec![Bson::Document(doc! {"$group": {"_id": 1}})]);
    let e = UpdateSpec::parse_value(&group, None).expect_err("$group");
    assert_eq!(e.code.code(), 72);
    let e = UpdateSpec::parse_value(&pipeline, Some(&[doc! {"x": 1}])).expect_err("filters");
    assert_eq!(e.code.code(), 9);
    let e = parse_err(doc! {"$bit": {"a": {"and": 1}}});
    assert_eq!(e.code, ErrorCode::NotImplemented);
}
