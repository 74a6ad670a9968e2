//! Filters MongoDB refuses at parse time, each with its exact code and message.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

use bson::{doc, Bson, Document, RawDocumentBuf, Regex};
use shale_doc::{ErrorCode, Matcher};

fn refused(filter: Document) -> (i32, String, String) {
    let raw = RawDocumentBuf::from_document(&filter).expect("test document encodes");
    let e = Matcher::parse(&raw).expect_err(&format!("{filter} is refused"));
    (e.code.code(), e.code.name().to_owned(), e.message)
}

fn expect(filter: Document, code: i32, message: &str) {
    let (got_code, name, got_message) = refused(filter.clone());
    assert_eq!(
        (got_code, got_message.as_str()),
        (code, message),
        "filter {filter}"
    );
    if code == 2 {
        assert_eq!(name, "BadValue");
    }
}

#[test]
fn unknown_operators() {
    expect(doc! {"a": {"$foo": 1}}, 2, "unknown operator: $foo");
    expect(doc! {"a": {"$gt": 1, "b": 2}}, 2, "unknown operator: b");
    let (code, _, message) = refused(doc! {"$foo": 1});
    assert_eq!(code, 2);
    assert!(message.starts_with("unknown top level operator: $foo."));
}

#[test]
fn logical_arguments() {
    expect(
        doc! {"$and": []},
        2,
        "$and/$or/$nor must be a nonempty array",
    );
    expect(doc! {"$or": {"a": 1}}, 2, "$or must be an array");
    expect(
        doc! {"$nor": [1]},
        2,
        "$or/$and/$nor entries need to be full objects",
    );
    expect(
        doc! {"a": {"$not": 5}},
        2,
        "$not needs a regex or a document",
    );
    expect(doc! {"a": {"$not": {}}}, 2, "$not cannot be empty");
    expect(
        doc! {"$or": [{"a": {"$bad": 1}}]},
        2,
        "unknown operator: $bad",
    );
}

#[test]
fn comparison_arguments() {
    expect(doc! {"a": {"$in": 1}}, 2, "$in needs an array");
    expect(doc! {"a": {"$nin": "x"}}, 2, "$nin needs an array");
    expect(
        doc! {"a": {"$in": [{"$gt": 1}]}},
        2,
        "cannot nest $ under $in",
    );
    let re = Bson::RegularExpression(Regex {
        pattern: "x".into(),
        options: String::new(),
    });
    expect(
        doc! {"a": {"$gt": re.clone()}},
        2,
        "Can't have RegEx as arg to predicate over field 'a'.",
    );
    expect(
        doc! {"a": {"$ne": re}},
        2,
        "Can't have regex as arg to $ne.",
    );
}

#[test]
fn element_and_array_arguments() {
    expect(
        doc! {"a": {"$type": "foo"}},
        2,
        "Unknown type name alias: foo",
    );
    expect(
        doc! {"a": {"$type": 42}},
        2,
        "Invalid numerical type code: 42",
    );
    expect(
        doc! {"a": {"$type": true}},
        14,
        "type must be represented as a number or a string",
    );
    expect(doc! {"a": {"$size": "1"}}, 2, "$size needs a number");
    expect(doc! {"a": {"$size": -1}}, 2, "$size may not be negative");
    expect(
        doc! {"a": {"$size": 1.5}},
        2,
        "$size must be a whole number",
    );
    expect(doc! {"a": {"$all": 1}}, 2, "$all needs an array");
    expect(
        doc! {"a": {"$all": [{"$gt": 1}]}},
        2,
        "no $ expressions in $all",
    );
    expect(
        doc! {"a": {"$all": [{"$elemMatch": {"b": 1}}, 5]}},
        2,
        "$all/$elemMatch has to be consistent",
    );
    expect(
        doc! {"a": {"$elemMatch": 1}},
        2,
        "$elemMatch needs an Object",
    );
}

#[test]
fn evaluation_arguments() {
    expect(
        doc! {"a": {"$mod": 1}},
        2,
        "malformed mod, needs to be an array",
    );
    expect(
        doc! {"a": {"$mod": [1]}},
        2,
        "malformed mod, not enough elements",
    );
    expect(
        doc! {"a": {"$mod": [1, 2, 3]}},
        2,
        "malformed mod, too many elements",
    );
    expect(
        doc! {"a": {"$mod": ["x", 2]}},
        2,
        "malformed mod, divisor not a number",
    );
    expect(
        doc! {"a": {"$mod": [2, "x"]}},
        2,
        "malformed mod, remainder not a number",
    );
    expect(doc! {"a": {"$mod": [0, 1]}}, 2, "divisor cannot be 0");
    expect(doc! {"a": {"$regex": 5}}, 2, "$regex has to be a string");
    expect(doc! {"a": {"$options": "i"}}, 2, "$options needs a $regex");
    expect(
        doc! {"a": {"$regex": "a", "$options": 5}},
        2,
        "$options has to be a string",
    );
    let (code, name, _) = refused(doc! {"a": {"$regex": "(unclosed"}});
    assert_eq!((code, name.as_str()), (51091, "Location51091"));
    expect(
        doc! {"a": {"$regex": "a", "$options": "q"}},
        51108,
        "invalid flag in regex options: q",
    );
    let re = Bson::RegularExpression(Regex {
        pattern: "a".into(),
        options: "i".into(),
    });
    expect(
        doc! {"a": {"$options": "m", "$regex": re}},
        51074,
        "options set in both $regex and $options",
    );
}

#[test]
fn contexts() {
    expect(
        doc! {"$where": "this.a == 1"},
        2,
        "$where is not allowed in this context",
    );
    expect(
        doc! {"a": {"$elemMatch": {"$expr": {"$eq": [1, 1]}}}},
        2,
        "$expr can only be applied to the top-level document",
    );
    expect(
        doc! {"$text": {"$search": "x"}},
        2,
        "$text is not supported yet",
    );
    expect(
        doc! {"a": {"$bitsAllSet": 1}},
        2,
        "$bitsAllSet is not supported yet",
    );
    expect(
        doc! {"$expr": {"$foo": 1}},
        168,
        "Unrecognized expression '$foo'",
    );
    expect(
        doc! {"$expr": {"$eq": [1]}},
        16020,
        "Expression $eq takes exactly 2 arguments. 1 were passed in.",
    );
    let (code, _, _) = refused(doc! {"$expr": {"$eq": [1, 1], "$ne": [1, 2]}});
    assert_eq!(code, 15983);
    assert_eq!(ErrorCode::Location15983.name(), "Location15983");
}
