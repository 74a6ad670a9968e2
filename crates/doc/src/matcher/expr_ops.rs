//! String and array expression operators: `$concat $toLower $toUpper $strLenCP` and `$size
//! $arrayElemAt $in`, over already evaluated arguments, with MongoDB's runtime errors.

use std::cmp::Ordering;

use bson::raw::{RawBson, RawBsonRef};

use super::expr::{compare_values, Value};
use super::path::bson_error;
use crate::{ErrorCode, MongoError};

fn string<'a>(s: String) -> Value<'a> {
    Value::Owned(RawBson::String(s))
}

/// `$concat`: strings only; any null or missing argument gives null.
pub fn concat<'a>(values: &[Value<'_>]) -> Result<Value<'a>, MongoError> {
    let mut out = String::new();
    for v in values {
        match v.as_raw() {
            Some(RawBsonRef::String(s)) => out.push_str(s),
            _ if v.is_nullish() => return Ok(Value::Owned(RawBson::Null)),
            _ => {
                return Err(MongoError::new(
                    ErrorCode::Location16702,
                    format!("$concat only supports strings, not {}", v.type_name()),
                ))
            }
        }
    }
    Ok(string(out))
}

/// `$toLower`/`$toUpper`: ASCII case mapping, as MongoDB does.
pub fn change_case<'a>(v: &Value<'_>, upper: bool) -> Result<Value<'a>, MongoError> {
    // mongod's `coerceToString` (doubles as %g, dates with milliseconds, decimals, code).
    let s = super::expr_format::coerce_to_string(v)?;
    Ok(string(if upper {
        s.to_ascii_uppercase()
    } else {
        s.to_ascii_lowercase()
    }))
}

/// `$strLenCP`: the number of Unicode code points.
pub fn str_len_cp<'a>(v: &Value<'_>) -> Result<Value<'a>, MongoError> {
    match v.as_raw() {
        Some(RawBsonRef::String(s)) => {
            let count = i32::try_from(s.chars().count()).unwrap_or(i32::MAX);
            Ok(Value::Owned(RawBson::Int32(count)))
        }
        _ => Err(MongoError::new(
            ErrorCode::Location34471,
            format!(
                "$strLenCP requires a string argument, found: {}",
                v.type_name()
            ),
        )),
    }
}

/// `$size`: the number of elements of an array.
pub fn size<'a>(v: &Value<'_>) -> Result<Value<'a>, MongoError> {
    let Some(RawBsonRef::Array(items)) = v.as_raw() else {
        return Err(MongoError::new(
            ErrorCode::Location17124,
            format!(
                "The argument to $size must be an array. Type of argument was: {}",
                v.type_name()
            ),
        ));
    };
    let mut count = 0_i32;
    for item in items {
        item.map_err(bson_error)?;
        count = count.saturating_add(1);
    }
    Ok(Value::Owned(RawBson::Int32(count)))
}

/// `$arrayElemAt: [array, index]`; a negative index counts from the end; out of range is
/// missing; a null or missing argument gives null.
pub fn array_elem_at<'a>(array: &Value<'_>, index: &Value<'_>) -> Result<Value<'a>, MongoError> {
    if array.is_nullish() || index.is_nullish() {
        return Ok(Value::Owned(RawBson::Null));
    }
    let Some(RawBsonRef::Array(items)) = array.as_raw() else {
        return Err(MongoError::new(
            ErrorCode::Location28689,
            format!(
                "$arrayElemAt's first argument must be an array, but is {}",
                array.type_name()
            ),
        ));
    };
    let position = element_index(index)?;
    let elements: Vec<RawBsonRef<'_>> = items
        .into_iter()
        .collect::<Result<_, _>>()
        .map_err(bson_error)?;
    let len = i64::try_from(elements.len()).unwrap_or(i64::MAX);
    let absolute = if position < 0 {
        len + position
    } else {
        position
    };
    Ok(usize::try_from(absolute)
        .ok()
        .and_then(|i| elements.get(i))
        .map_or(Value::Missing, |v| Value::Owned(v.to_raw_bson())))
}

fn element_index(index: &Value<'_>) -> Result<i64, MongoError> {
    let as_f64 = match index.as_raw() {
        Some(RawBsonRef::Int32(i)) => return Ok(i64::from(i)),
        Some(RawBsonRef::Int64(i)) if i32::try_from(i).is_ok() => return Ok(i),
        Some(RawBsonRef::Int64(i)) => i as f64,
        Some(RawBsonRef::Double(d)) => d,
        Some(RawBsonRef::Decimal128(d)) => {
            let d = crate::decimal::to_dec(&d);
            match crate::decimal::to_i64_exact(d).filter(|i| i32::try_from(*i).is_ok()) {
                Some(i) => return Ok(i),
                None => crate::decimal::to_f64(d),
            }
        }
        _ => {
            return Err(MongoError::new(
                ErrorCode::Location28690,
                format!(
                    "$arrayElemAt's second argument must be a numeric value, but is {}",
                    index.type_name()
                ),
            ))
        }
    };
    if as_f64.fract() != 0.0 || as_f64.abs() > f64::from(i32::MAX) {
        return Err(MongoError::new(
            ErrorCode::Location28691,
            format!("$arrayElemAt's second argument must be representable as a 32-bit integer: {as_f64}"),
        ));
    }
    Ok(as_f64 as i64)
}

/// `$in: [value, array]`: whether some element equals the value.
pub fn in_array<'a>(needle: &Value<'_>, haystack: &Value<'_>) -> Result<Value<'a>, MongoError> {
    let Some(RawBsonRef::Array(items)) = haystack.as_raw() else {
        return Err(MongoError::new(
            ErrorCode::Location40081,
            format!(
                "$in requires an array as a second argument, found: {}",
                haystack.type_name()
            ),
        ));
    };
    for item in items {
        let item = Value::Ref(item.map_err(bson_error)?);
        if compare_values(needle, &item)? == Ordering::Equal {
            return Ok(Value::Owned(RawBson::Boolean(true)));
        }
    }
    Ok(Value::Owned(RawBson::Boolean(false)))
}
