//! Element operators: `$exists` and `$type` (type codes, string aliases, `"number"`, or an
//! array of them), plus the constant filters `$alwaysTrue`/`$alwaysFalse`.
//!
//! `$type` looks at each element of an array and at the array itself, so `{$type: "array"}`
//! matches arrays (MongoDB 3.6+). `$exists` only asks whether the path reaches a value.

use bson::raw::RawBsonRef;
use bson::spec::ElementType;

use super::{bad_value, leaf, Node, Pred};
use crate::{ErrorCode, MongoError};

/// BSON type codes, with MinKey as -1 and MaxKey as 127, and their `$type` aliases.
const TYPE_ALIASES: &[(&str, i32)] = &[
    ("double", 1),
    ("string", 2),
    ("object", 3),
    ("array", 4),
    ("binData", 5),
    ("undefined", 6),
    ("objectId", 7),
    ("bool", 8),
    ("date", 9),
    ("null", 10),
    ("regex", 11),
    ("dbPointer", 12),
    ("javascript", 13),
    ("symbol", 14),
    ("javascriptWithScope", 15),
    ("int", 16),
    ("timestamp", 17),
    ("long", 18),
    ("decimal", 19),
    ("minKey", -1),
    ("maxKey", 127),
];

/// The alias MongoDB reports for a BSON type code (`$type` in aggregation uses it too).
pub fn type_alias(code: i32) -> &'static str {
    TYPE_ALIASES
        .iter()
        .find(|(_, c)| *c == code)
        .map(|(name, _)| *name)
        .unwrap_or("unknown")
}

/// The type code of a BSON type's name (`"double"` … `"maxKey"`, mongod's `typeFromName`),
/// with the name as this table spells it; `None` for anything else (`"number"` included).
pub fn type_of_name(name: &str) -> Option<(&'static str, i32)> {
    TYPE_ALIASES.iter().find(|(n, _)| *n == name).copied()
}

/// The BSON type code of a raw value.
pub fn type_code(value: RawBsonRef<'_>) -> i32 {
    match value.element_type() {
        ElementType::MinKey => -1,
        ElementType::MaxKey => 127,
        other => other as i32,
    }
}

/// The set of types a `$type` accepts.
#[derive(Debug, Clone, Default)]
pub struct TypeSet {
    codes: Vec<i32>,
    any_number: bool,
}

impl TypeSet {
    /// True when `value`'s BSON type is in the set.
    pub fn contains(&self, value: RawBsonRef<'_>) -> bool {
        let code = type_code(value);
        (self.any_number && matches!(code, 1 | 16 | 18 | 19)) || self.codes.contains(&code)
    }

    fn add(&mut self, spec: RawBsonRef<'_>) -> Result<(), MongoError> {
        match spec {
            RawBsonRef::String("number") => self.any_number = true,
            RawBsonRef::String(alias) => match TYPE_ALIASES.iter().find(|(n, _)| *n == alias) {
                Some((_, code)) => self.codes.push(*code),
                None => return Err(bad_value(format!("Unknown type name alias: {alias}"))),
            },
            RawBsonRef::Int32(_)
            | RawBsonRef::Int64(_)
            | RawBsonRef::Double(_)
            | RawBsonRef::Decimal128(_) => self.codes.push(numeric_type_code(spec)?),
            _ => {
                return Err(MongoError::new(
                    ErrorCode::TypeMismatch,
                    "type must be represented as a number or a string",
                ))
            }
        }
        Ok(())
    }
}

fn numeric_type_code(spec: RawBsonRef<'_>) -> Result<i32, MongoError> {
    let as_f64 = match spec {
        RawBsonRef::Int32(i) => f64::from(i),
        RawBsonRef::Int64(i) => i as f64,
        RawBsonRef::Double(d) => d,
        RawBsonRef::Decimal128(d) => crate::compare::decimal128_to_f64(&d),
        _ => f64::NAN,
    };
    let valid = as_f64.fract() == 0.0
        && TYPE_ALIASES
            .iter()
            .any(|(_, code)| f64::from(*code) == as_f64);
    if !valid {
        return Err(bad_value(format!("Invalid numerical type code: {as_f64}")));
    }
    Ok(as_f64 as i32)
}

/// `{field: {$type: spec}}`.
pub(crate) fn parse_type(field: &str, arg: RawBsonRef<'_>) -> Result<Node, MongoError> {
    let mut types = TypeSet::default();
    match arg {
        RawBsonRef::Array(items) => {
            for item in items {
                types.add(item.map_err(super::path::bson_error)?)?;
            }
            if types.codes.is_empty() && !types.any_number {
                return Err(MongoError::new(
                    ErrorCode::FailedToParse,
                    format!("{field} must match at least one type"),
                ));
            }
        }
        single => types.add(single)?,
    }
    Ok(leaf(field, Pred::Type(types)))
}

/// MongoDB's truthiness of a BSON argument (`BSONElement::trueValue`).
pub fn true_value(value: RawBsonRef<'_>) -> bool {
    match value {
        RawBsonRef::Boolean(b) => b,
        RawBsonRef::Int32(i) => i != 0,
        RawBsonRef::Int64(i) => i != 0,
        RawBsonRef::Double(d) => d != 0.0,
        RawBsonRef::Decimal128(d) => crate::compare::decimal128_to_f64(&d) != 0.0,
        RawBsonRef::Null | RawBsonRef::Undefined => false,
        _ => true,
    }
}

/// `true_value` of an owned value: how a command's boolean-ish option reads (mongod's
/// `BSONElement::trueValue`).
pub fn bson_true_value(value: &bson::Bson) -> bool {
    match value {
        bson::Bson::Boolean(b) => *b,
        bson::Bson::Int32(i) => *i != 0,
        bson::Bson::Int64(i) => *i != 0,
        bson::Bson::Double(d) => *d != 0.0,
        bson::Bson::Decimal128(d) => crate::compare::decimal128_to_f64(d) != 0.0,
        bson::Bson::Null | bson::Bson::Undefined => false,
        _ => true,
    }
}

/// `{field: {$exists: arg}}`: a truthy argument asks for presence, a falsy one for absence.
pub(crate) fn parse_exists(field: &str, arg: RawBsonRef<'_>) -> Node {
    let exists = leaf(field, Pred::Exists);
    if true_value(arg) {
        exists
    } else {
        Node::Not(Box::new(exists))
    }
}

/// `$alwaysTrue: 1` / `$alwaysFalse: 1`.
pub(crate) fn parse_always(name: &str, arg: RawBsonRef<'_>) -> Result<Node, MongoError> {
    let is_one = match arg {
        RawBsonRef::Int32(i) => i == 1,
        RawBsonRef::Int64(i) => i == 1,
        RawBsonRef::Double(d) => d == 1.0,
        _ => false,
    };
    if !is_one {
        return Err(MongoError::new(
            ErrorCode::FailedToParse,
            format!("${name} must be an integer value of 1"),
        ));
    }
    Ok(Node::Always(name == "alwaysTrue"))
}

#[cfg(test)]
mod tests {
    use crate::error_code::ErrorCode;
    use crate::matcher::test_support::{check, raw};
    use crate::matcher::Matcher;
    use bson::doc;

    #[test]
    fn owned_and_raw_values_are_true_alike() {
        use bson::Bson;
        let values = [
            Bson::Boolean(false),
            Bson::Boolean(true),
            Bson::Int32(0),
            Bson::Int64(2),
            Bson::Double(0.0),
            Bson::Null,
            Bson::String(String::new()),
            Bson::Document(doc! {}),
        ];
        for v in values {
            let wrapped = bson::rawdoc! {"v": bson::RawBson::try_from(v.clone()).expect("raw")};
            let raw_value = wrapped.get("v").expect("get").expect("v");
            assert_eq!(
                super::bson_true_value(&v),
                super::true_value(raw_value),
                "{v:?}"
            );
        }
    }

    #[test]
    fn exists_true_and_false() {
        assert!(check(doc! {"a": {"$exists": true}}, doc! {"a": null}));
        assert!(!check(doc! {"a": {"$exists": 1}}, doc! {"b": 1}));
        assert!(check(doc! {"a": {"$exists": false}}, doc! {"b": 1}));
        assert!(check(
            doc! {"a.b": {"$exists": true}},
            doc! {"a": [{"c": 1}, {"b": 2}]}
        ));
    }

    #[test]
    fn type_by_code_alias_number_and_array() {
        assert!(check(doc! {"a": {"$type": 2}}, doc! {"a": "x"}));
        assert!(check(doc! {"a": {"$type": "number"}}, doc! {"a": 1_i64}));
        assert!(check(doc! {"a": {"$type": "array"}}, doc! {"a": []}));
        assert!(check(doc! {"a": {"$type": "string"}}, doc! {"a": [1, "x"]}));
        assert!(check(
            doc! {"a": {"$type": ["bool", "null"]}},
            doc! {"a": null}
        ));
        assert!(!check(doc! {"a": {"$type": "null"}}, doc! {}));
        assert!(check(
            doc! {"a": {"$type": -1}},
            doc! {"a": bson::Bson::MinKey}
        ));
    }

    #[test]
    fn type_errors() {
        let e = Matcher::parse(&raw(doc! {"a": {"$type": "nope"}})).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (ErrorCode::BadValue, "Unknown type name alias: nope")
        );
        let e = Matcher::parse(&raw(doc! {"a": {"$type": 100}})).unwrap_err();
        assert_eq!(e.message, "Invalid numerical type code: 100");
        let e = Matcher::parse(&raw(doc! {"a": {"$type": {}}})).unwrap_err();
        assert_eq!(e.code, ErrorCode::TypeMismatch);
    }
}
