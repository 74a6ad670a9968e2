//! How update errors show values: MongoDB's `BSONElement::toString` form (`a: 1`,
//! `{ b: "x" }`, `[ 1, 2.0 ]`), its `typeName`s (`int`, `string`, `object`) and the
//! `(NumberLong)5` debug form of numbers. Messages built from these match the server's text.
//! This file only formats; it must never decide anything about an update.

use bson::{Bson, Document};

/// MongoDB's `typeName` for a value's BSON type.
pub fn type_name(value: &Bson) -> &'static str {
    match value {
        Bson::Double(_) => "double",
        Bson::String(_) => "string",
        Bson::Document(_) => "object",
        Bson::Array(_) => "array",
        Bson::Binary(_) => "binData",
        Bson::Undefined => "undefined",
        Bson::ObjectId(_) => "objectId",
        Bson::Boolean(_) => "bool",
        Bson::DateTime(_) => "date",
        Bson::Null => "null",
        Bson::RegularExpression(_) => "regex",
        Bson::DbPointer(_) => "dbPointer",
        Bson::JavaScriptCode(_) => "javascript",
        Bson::Symbol(_) => "symbol",
        Bson::JavaScriptCodeWithScope(_) => "javascriptWithScope",
        Bson::Int32(_) => "int",
        Bson::Timestamp(_) => "timestamp",
        Bson::Int64(_) => "long",
        Bson::Decimal128(_) => "decimal",
        Bson::MinKey => "minKey",
        Bson::MaxKey => "maxKey",
    }
}

/// A value as MongoDB prints it inside messages.
pub fn value(v: &Bson) -> String {
    match v {
        Bson::Double(d) => double(*d),
        Bson::String(s) => format!("\"{s}\""),
        Bson::Document(d) => document(d),
        Bson::Array(items) => array(items),
        Bson::Int32(i) => i.to_string(),
        Bson::Int64(i) => i.to_string(),
        Bson::Boolean(b) => b.to_string(),
        Bson::Null => "null".to_string(),
        Bson::Undefined => "undefined".to_string(),
        Bson::ObjectId(oid) => format!("ObjectId('{oid}')"),
        Bson::DateTime(dt) => format!("new Date({})", dt.timestamp_millis()),
        Bson::Timestamp(ts) => format!("Timestamp({}, {})", ts.time, ts.increment),
        Bson::MinKey => "MinKey".to_string(),
        Bson::MaxKey => "MaxKey".to_string(),
        other => other.to_string(),
    }
}

/// An element (`name: value`) as MongoDB prints it.
pub fn element(name: &str, v: &Bson) -> String {
    format!("{name}: {}", value(v))
}

/// A document as MongoDB prints it: `{ a: 1, b: "x" }`, or `{}` when empty.
pub fn document(doc: &Document) -> String {
    if doc.is_empty() {
        return "{}".to_string();
    }
    let fields: Vec<String> = doc.iter().map(|(k, v)| element(k, v)).collect();
    format!("{{ {} }}", fields.join(", "))
}

fn array(items: &[Bson]) -> String {
    if items.is_empty() {
        return "[]".to_string();
    }
    let parts: Vec<String> = items.iter().map(value).collect();
    format!("[ {} ]", parts.join(", "))
}

/// Doubles keep a fractional part (`5.0`), as the server's formatter does.
fn double(d: f64) -> String {
    if d.is_finite() && d.fract() == 0.0 && d.abs() < 1e16 {
        format!("{d:.1}")
    } else if d.is_nan() {
        "nan.0".to_string()
    } else if d.is_infinite() {
        if d > 0.0 { "inf.0" } else { "-inf.0" }.to_string()
    } else {
        d.to_string()
    }
}

/// A number in the `SafeNum::debugString` form used by arithmetic overflow messages.
pub fn debug_number(v: &Bson) -> String {
    match v {
        Bson::Int32(i) => format!("(NumberInt){i}"),
        Bson::Int64(i) => format!("(NumberLong){i}"),
        Bson::Double(d) => format!("(NumberDouble){d}"),
        other => format!("({}){}", type_name(other), value(other)),
    }
}

/// The document's `_id` element as the server prints it in messages (`_id: 1`), or the
/// server's placeholder when the document has none.
pub fn id_element(doc_id: Option<&Bson>) -> String {
    match doc_id {
        Some(id) => element("_id", id),
        None => "no id".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{bson, doc};

    #[test]
    fn values_print_like_mongodb() {
        assert_eq!(value(&Bson::Double(5.0)), "5.0");
        assert_eq!(value(&Bson::Double(2.5)), "2.5");
        assert_eq!(value(&Bson::String("x".into())), "\"x\"");
        assert_eq!(value(&bson!([1, "a"])), "[ 1, \"a\" ]");
        assert_eq!(
            document(&doc! {"$set": {"a.$[i]": 5.0}}),
            "{ $set: { a.$[i]: 5.0 } }"
        );
        assert_eq!(document(&doc! {}), "{}");
        assert_eq!(element("a", &bson!({})), "a: {}");
    }

    #[test]
    fn type_names_follow_the_server() {
        assert_eq!(type_name(&Bson::Int32(1)), "int");
        assert_eq!(type_name(&Bson::Int64(1)), "long");
        assert_eq!(type_name(&bson!({})), "object");
        assert_eq!(debug_number(&Bson::Int64(7)), "(NumberLong)7");
    }
}
