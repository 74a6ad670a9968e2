//! Object and array expression operators over evaluated arguments: `$mergeObjects` (later
//! fields replace earlier ones where they first stood; null and missing inputs skipped),
//! `$objectToArray`, `$concatArrays`, `$isArray`, `$reverseArray`; null or missing inputs
//! give null where mongod gives null. mongod's runtime errors: 40400, 40390, 28664, 34435.

use bson::raw::{RawArrayBuf, RawBson, RawBsonRef, RawDocumentBuf};

use super::expr::Value;
use super::path::bson_error;
use crate::{ErrorCode, MongoError};

fn null<'a>() -> Value<'a> {
    Value::Owned(RawBson::Null)
}

/// `$mergeObjects`.
pub fn merge_objects<'a>(values: &[Value<'_>]) -> Result<Value<'a>, MongoError> {
    let mut fields: Vec<(String, RawBson)> = Vec::new();
    for v in values {
        if v.is_nullish() {
            continue;
        }
        let Some(RawBsonRef::Document(d)) = v.as_raw() else {
            return Err(MongoError::new(
                ErrorCode::Location40400,
                format!(
                    "$mergeObjects requires object inputs, but input {} is of type {}",
                    render(v),
                    v.type_name()
                ),
            ));
        };
        for field in d {
            let (k, value) = field.map_err(bson_error)?;
            match fields.iter_mut().find(|(name, _)| name == k) {
                Some(slot) => slot.1 = value.to_raw_bson(),
                None => fields.push((k.to_owned(), value.to_raw_bson())),
            }
        }
    }
    let mut out = RawDocumentBuf::new();
    for (k, v) in fields {
        out.append(k, v);
    }
    Ok(Value::Owned(RawBson::Document(out)))
}

/// `$objectToArray`: `[{k, v}, ...]` in field order.
pub fn object_to_array<'a>(v: &Value<'_>) -> Result<Value<'a>, MongoError> {
    if v.is_nullish() {
        return Ok(null());
    }
    let Some(RawBsonRef::Document(d)) = v.as_raw() else {
        return Err(MongoError::new(
            ErrorCode::Location40390,
            format!(
                "$objectToArray requires a document input, found: {}",
                v.type_name()
            ),
        ));
    };
    let mut out = RawArrayBuf::new();
    for field in d {
        let (k, value) = field.map_err(bson_error)?;
        let mut pair = RawDocumentBuf::new();
        pair.append("k", k);
        pair.append("v", value.to_raw_bson());
        out.push(RawBson::Document(pair));
    }
    Ok(Value::Owned(RawBson::Array(out)))
}

/// `$concatArrays`: null if any input is null or missing.
pub fn concat_arrays<'a>(values: &[Value<'_>]) -> Result<Value<'a>, MongoError> {
    let mut out = RawArrayBuf::new();
    for v in values {
        if v.is_nullish() {
            return Ok(null());
        }
        let Some(RawBsonRef::Array(a)) = v.as_raw() else {
            return Err(MongoError::new(
                ErrorCode::Location28664,
                format!("$concatArrays only supports arrays, not {}", v.type_name()),
            ));
        };
        for item in a {
            out.push(item.map_err(bson_error)?.to_raw_bson());
        }
    }
    Ok(Value::Owned(RawBson::Array(out)))
}

/// `$isArray`.
pub fn is_array<'a>(v: &Value<'_>) -> Value<'a> {
    Value::Owned(RawBson::Boolean(matches!(
        v.as_raw(),
        Some(RawBsonRef::Array(_))
    )))
}

/// `$reverseArray`.
pub fn reverse_array<'a>(v: &Value<'_>) -> Result<Value<'a>, MongoError> {
    if v.is_nullish() {
        return Ok(null());
    }
    let Some(RawBsonRef::Array(a)) = v.as_raw() else {
        return Err(MongoError::new(
            ErrorCode::Location34435,
            format!(
                "The argument to $reverseArray must be an array, but was of type: {}",
                v.type_name()
            ),
        ));
    };
    let items = a
        .into_iter()
        .map(|i| i.map(|i| i.to_raw_bson()).map_err(bson_error))
        .collect::<Result<Vec<_>, _>>()?;
    let mut out = RawArrayBuf::new();
    for item in items.into_iter().rev() {
        out.push(item);
    }
    Ok(Value::Owned(RawBson::Array(out)))
}

fn render(v: &Value<'_>) -> String {
    v.as_raw()
        .and_then(|r| bson::Bson::try_from(r.to_raw_bson()).ok())
        .map_or_else(|| "missing".to_owned(), |b| b.to_string())
}

#[cfg(test)]
mod tests {
    use crate::matcher::expr::{Expr, Value};
    use bson::{bson, doc, rawdoc, Bson, RawDocumentBuf};

    fn eval(spec: bson::Document) -> Result<Bson, crate::MongoError> {
        let raw = RawDocumentBuf::from_document(&spec).expect("raw");
        let e = Expr::parse(bson::raw::RawBsonRef::Document(&raw))?;
        let input =
            rawdoc! {"a": {"x": 1, "y": 2}, "b": {"y": 3, "z": 4}, "xs": [1, 2, 3], "s": "t"};
        Ok(match e.evaluate(&input)? {
            Value::Missing => Bson::Null,
            v => Bson::try_from(v.as_raw().expect("value").to_raw_bson()).expect("bson"),
        })
    }

    #[test]
    fn objects_and_arrays() {
        assert_eq!(
            eval(doc! {"$mergeObjects": ["$a", "$b", null, "$nope"]}).unwrap(),
            bson!({"x": 1, "y": 3, "z": 4})
        );
        assert_eq!(
            eval(doc! {"$objectToArray": "$a"}).unwrap(),
            bson!([{"k": "x", "v": 1}, {"k": "y", "v": 2}])
        );
        assert_eq!(
            eval(doc! {"$concatArrays": ["$xs", [4]]}).unwrap(),
            bson!([1, 2, 3, 4])
        );
        assert_eq!(
            eval(doc! {"$concatArrays": ["$xs", "$nope"]}).unwrap(),
            Bson::Null
        );
        assert_eq!(
            eval(doc! {"$isArray": ["$xs"]}).unwrap(),
            Bson::Boolean(true)
        );
        assert_eq!(eval(doc! {"$isArray": "$s"}).unwrap(), Bson::Boolean(false));
        assert_eq!(
            eval(doc! {"$reverseArray": "$xs"}).unwrap(),
            bson!([3, 2, 1])
        );
    }

    #[test]
    fn wrong_types_get_mongods_codes() {
        let code = |spec: bson::Document| eval(spec).unwrap_err().code.code();
        assert_eq!(code(doc! {"$mergeObjects": ["$a", "$xs"]}), 40400);
        assert_eq!(code(doc! {"$objectToArray": "$s"}), 40390);
        assert_eq!(code(doc! {"$concatArrays": ["$xs", "$s"]}), 28664);
        assert_eq!(code(doc! {"$reverseArray": "$s"}), 34435);
    }
}
