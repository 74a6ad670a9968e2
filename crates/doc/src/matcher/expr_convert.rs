//! Type conversion: `$convert: {input, to, onError, onNull}`, its shorthands `$toString
//! $toInt $toLong $toDouble $toDecimal $toBool $toDate $toObjectId` (one argument, 50723
//! otherwise), and `$isNumber`. The conversions are mongod 7.0's `ConversionTable`, pair by
//! pair: a pair it lacks fails with ConversionFailure (241) "Unsupported conversion from ...",
//! as do NaN, infinity, overflow and unparseable strings, each with mongod's message; only
//! ConversionFailure is replaced by `onError`. `to` is a type name (or "missing") or a type
//! number; a bad one fails to parse (FailedToParse, or BadValue for an unknown name) even when
//! the input is null. Text is written by `expr_format`.
//!
//! Decimal128 values are built exactly, in BSON's binary-integer-decimal layout: integers with
//! exponent 0, doubles rounded to 15 significant digits as mongod's `Decimal128(double)` does
//! (`2.5` gives `2.50000000000000`), strings read digit for digit. A string with more than 34
//! significant digits, which mongod would round, is refused (NotImplemented) rather than
//! rounded differently. Dates are read from ISO-8601 text only (mongod's parser takes more).

use bson::oid::ObjectId;
use bson::raw::{RawBson, RawBsonRef, RawDocument};
use bson::{DateTime, Decimal128};

use super::element::{type_alias, type_code};
use super::expr::{error, Expr, Value};
use super::expr_format::{days_from_civil, format_g, iso_date};
use super::expr_strings::integral_i32;
use super::expr_vars::Scope;
use super::path::bson_error;
use crate::compare::decimal128_to_f64;
use crate::{ErrorCode, MongoError};

#[path = "expr_convert_numbers.rs"]
mod numbers;
use numbers::{decimal_from_f64, decimal_from_i64, parse_decimal, parse_float, parse_integer};

/// A parsed `$convert` (or one of its shorthands).
#[derive(Debug, Clone)]
pub struct Convert {
    input: Expr,
    to: Expr,
    on_error: Option<Expr>,
    on_null: Option<Expr>,
}

const DOUBLE: i32 = 1;
const STRING: i32 = 2;
const OBJECT_ID: i32 = 7;
const BOOL: i32 = 8;
const DATE: i32 = 9;
const INT: i32 = 16;
const LONG: i32 = 18;
const DECIMAL: i32 = 19;

/// Parses `$convert`'s argument document.
pub(crate) fn parse(arg: RawBsonRef<'_>, scope: &mut Scope<'_>) -> Result<Expr, MongoError> {
    let RawBsonRef::Document(d) = arg else {
        return Err(error(
            ErrorCode::FailedToParse,
            format!(
                "$convert expects an object of named arguments but found: {}",
                Value::Ref(arg).type_name()
            ),
        ));
    };
    let (mut input, mut to, mut on_error, mut on_null) = (None, None, None, None);
    for field in d {
        let (key, value) = field.map_err(bson_error)?;
        let slot = match key {
            "input" => &mut input,
            "to" => &mut to,
            "onError" => &mut on_error,
            "onNull" => &mut on_null,
            other => {
                return Err(error(
                    ErrorCode::FailedToParse,
                    format!("$convert found an unknown argument: {other}"),
                ))
            }
        };
        *slot = Some(Expr::parse_scoped(value, scope)?);
    }
    let missing = |which| {
        error(
            ErrorCode::FailedToParse,
            format!("Missing '{which}' parameter to $convert"),
        )
    };
    let input = input.ok_or_else(|| missing("input"))?;
    let to = to.ok_or_else(|| missing("to"))?;
    Ok(Expr::Convert(Box::new(Convert {
        input,
        to,
        on_error,
        on_null,
    })))
}

/// The target type of a shorthand, `None` for another name.
pub(crate) fn alias_target(name: &str) -> Option<&'static str> {
    Some(match name {
        "$toString" => "string",
        "$toObjectId" => "objectId",
        "$toDate" => "date",
        "$toDouble" => "double",
        "$toInt" => "int",
        "$toLong" => "long",
        "$toDecimal" => "decimal",
        "$toBool" => "bool",
        _ => return None,
    })
}

/// Parses a shorthand: one operand, bare or in a one-element array.
pub(crate) fn parse_alias(
    name: &str,
    arg: RawBsonRef<'_>,
    scope: &mut Scope<'_>,
) -> Result<Expr, MongoError> {
    let target = alias_target(name).unwrap_or("missing");
    let mut operands = Vec::new();
    match arg {
        RawBsonRef::Array(items) => {
            for item in items {
                operands.push(Expr::parse_scoped(item.map_err(bson_error)?, scope)?);
            }
        }
        single => operands.push(Expr::parse_scoped(single, scope)?),
    }
    let count = operands.len();
    let (Some(input), true) = (operands.pop(), count == 1) else {
        return Err(error(
            ErrorCode::Location50723,
            format!("{name} requires a single argument, got {count}"),
        ));
    };
    let to = Expr::Literal(RawBson::String(target.to_owned()));
    Ok(Expr::Convert(Box::new(Convert {
        input,
        to,
        on_error: None,
        on_null: None,
    })))
}

/// `$isNumber`: whether the value is an int, long, double or decimal.
pub(crate) fn is_number<'a>(v: &Value<'_>) -> Value<'a> {
    let numeric = v
        .as_raw()
        .is_some_and(|r| matches!(type_code(r), 1 | 16 | 18 | 19));
    Value::Owned(RawBson::Boolean(numeric))
}

impl Convert {
    pub(crate) fn reads_document(&self) -> bool {
        self.input.reads_document()
            || self.to.reads_document()
            || self.on_error.as_ref().is_some_and(Expr::reads_document)
            || self.on_null.as_ref().is_some_and(Expr::reads_document)
    }

    /// mongod's order: `to`, then `input`; `to` is checked before a null input is answered.
    pub(crate) fn eval<'a>(
        &self,
        root: &'a RawDocument,
        stack: &mut Vec<Value<'a>>,
    ) -> Result<Value<'a>, MongoError> {
        let to = self.to.eval(root, stack)?;
        let input = self.input.eval(root, stack)?;
        let target = if to.is_nullish() {
            None
        } else {
            Some(target_type(&to)?)
        };
        let raw = match input.as_raw() {
            Some(raw) if !input.is_nullish() => raw,
            _ => {
                return match &self.on_null {
                    Some(e) => e.eval(root, stack),
                    None => Ok(Value::Owned(RawBson::Null)),
                }
            }
        };
        let Some(target) = target else {
            return Ok(Value::Owned(RawBson::Null));
        };
        match convert(raw, target) {
            Ok(v) => Ok(Value::Owned(v)),
            Err(e) if e.code == ErrorCode::ConversionFailure => match &self.on_error {
                Some(on_error) => on_error.eval(root, stack),
                None => Err(e),
            },
            Err(e) => Err(e),
        }
    }
}

/// The type code `to` names: a type name, "missing" (0), or a type number.
fn target_type(to: &Value<'_>) -> Result<i32, MongoError> {
    match to.as_raw() {
        Some(RawBsonRef::String("missing")) => Ok(0),
        Some(RawBsonRef::String(name)) => type_named(name)
            .ok_or_else(|| error(ErrorCode::BadValue, format!("Unknown type name: {name}"))),
        Some(
            RawBsonRef::Int32(_)
            | RawBsonRef::Int64(_)
            | RawBsonRef::Double(_)
            | RawBsonRef::Decimal128(_),
        ) => {
            let code = integral_i32(to).ok_or_else(|| {
                error(
                    ErrorCode::FailedToParse,
                    "In $convert, numeric 'to' argument is not an integer",
                )
            })?;
            if code == -1 || code == 127 || (0..=19).contains(&code) {
                return Ok(code);
            }
            Err(error(
                ErrorCode::FailedToParse,
                format!("In $convert, numeric value for 'to' does not correspond to a BSON type: {code}"),
            ))
        }
        _ => Err(error(
            ErrorCode::FailedToParse,
            format!(
                "$convert's 'to' argument must be a string or number, but is {}",
                to.type_name()
            ),
        )),
    }
}

fn type_named(name: &str) -> Option<i32> {
    [-1, 127]
        .into_iter()
        .chain(1..=19)
        .find(|&c| type_alias(c) == name)
}

fn type_name(code: i32) -> &'static str {
    if code == 0 {
        "missing"
    } else {
        type_alias(code)
    }
}

pub(super) fn failure(message: impl Into<String>) -> MongoError {
    error(ErrorCode::ConversionFailure, message)
}

fn unsupported(input: RawBsonRef<'_>, target: i32) -> MongoError {
    failure(format!(
        "Unsupported conversion from {} to {} in $convert with no onError value",
        type_name(type_code(input)),
        type_name(target)
    ))
}

/// Converts a non-null value to the type `target`.
fn convert(input: RawBsonRef<'_>, target: i32) -> Result<RawBson, MongoError> {
    let out = match target {
        BOOL => Some(RawBson::Boolean(to_bool(input))),
        DOUBLE => to_double(input)?.map(RawBson::Double),
        STRING => to_string(input)?.map(RawBson::String),
        OBJECT_ID => to_object_id(input)?.map(RawBson::ObjectId),
        DATE => to_date(input)?.map(|ms| RawBson::DateTime(DateTime::from_millis(ms))),
        INT => to_int(input)?.map(RawBson::Int32),
        LONG => to_long(input)?.map(RawBson::Int64),
        DECIMAL => to_decimal(input)?.map(RawBson::Decimal128),
        _ => None,
    };
    out.ok_or_else(|| unsupported(input, target))
}

/// Every value is true but zero numbers and false (mongod's `coerceToBool`).
fn to_bool(input: RawBsonRef<'_>) -> bool {
    match input {
        RawBsonRef::Boolean(b) => b,
        RawBsonRef::Int32(i) => i != 0,
        RawBsonRef::Int64(i) => i != 0,
        RawBsonRef::Double(d) => d != 0.0,
        RawBsonRef::Decimal128(d) => decimal128_to_f64(&d) != 0.0,
        _ => true,
    }
}

fn to_double(input: RawBsonRef<'_>) -> Result<Option<f64>, MongoError> {
    Ok(Some(match input {
        RawBsonRef::Double(d) => d,
        RawBsonRef::Int32(i) => f64::from(i),
        RawBsonRef::Int64(i) => i as f64,
        RawBsonRef::Boolean(b) => f64::from(u8::from(b)),
        RawBsonRef::DateTime(d) => d.timestamp_millis() as f64,
        RawBsonRef::String(s) => parse_float(s)?,
        RawBsonRef::Decimal128(d) => numbers::decimal_to_f64(&d)?,
        _ => return Ok(None),
    }))
}

fn to_string(input: RawBsonRef<'_>) -> Result<Option<String>, MongoError> {
    Ok(Some(match input {
        RawBsonRef::String(s) => s.to_owned(),
        RawBsonRef::Double(d) if d.is_nan() => "NaN".to_owned(),
        RawBsonRef::Double(d) if d.is_infinite() => {
            if d < 0.0 { "-Infinity" } else { "Infinity" }.to_owned()
        }
        RawBsonRef::Double(d) => format_g(d),
        RawBsonRef::Int32(i) => i.to_string(),
        RawBsonRef::Int64(i) => i.to_string(),
        RawBsonRef::Decimal128(d) => d.to_string(),
        RawBsonRef::Boolean(b) => b.to_string(),
        RawBsonRef::ObjectId(oid) => oid.to_hex(),
        RawBsonRef::DateTime(d) => iso_date(d.timestamp_millis())?,
        _ => return Ok(None),
    }))
}

fn to_object_id(input: RawBsonRef<'_>) -> Result<Option<ObjectId>, MongoError> {
    match input {
        RawBsonRef::ObjectId(oid) => Ok(Some(oid)),
        RawBsonRef::String(s) => numbers::parse_object_id(s).map(Some),
        _ => Ok(None),
    }
}

/// Milliseconds since the epoch.
fn to_date(input: RawBsonRef<'_>) -> Result<Option<i64>, MongoError> {
    Ok(Some(match input {
        RawBsonRef::DateTime(d) => d.timestamp_millis(),
        RawBsonRef::Int64(i) => i,
        RawBsonRef::Double(d) => numbers::double_to_long(d)?,
        RawBsonRef::Decimal128(d) => {
            numbers::decimal_to_integer(&d, i64::MIN.into(), i64::MAX.into())? as i64
        }
        RawBsonRef::ObjectId(oid) => oid.timestamp().timestamp_millis(),
        RawBsonRef::Timestamp(ts) => i64::from(ts.time) * 1000,
        RawBsonRef::String(s) => numbers::parse_date(s, days_from_civil)?,
        _ => return Ok(None),
    }))
}

fn to_int(input: RawBsonRef<'_>) -> Result<Option<i32>, MongoError> {
    Ok(Some(match input {
        RawBsonRef::Int32(i) => i,
        RawBsonRef::Boolean(b) => i32::from(b),
        RawBsonRef::Int64(i) => i32::try_from(i).map_err(|_| {
            failure("Conversion would overflow target type in $convert with no onError value: ")
        })?,
        RawBsonRef::Double(d) => numbers::double_to_int(d)?,
        RawBsonRef::Decimal128(d) => {
            numbers::decimal_to_integer(&d, i32::MIN.into(), i32::MAX.into())? as i32
        }
        RawBsonRef::String(s) => parse_integer(s, i32::MIN.into(), i32::MAX.into())? as i32,
        _ => return Ok(None),
    }))
}

fn to_long(input: RawBsonRef<'_>) -> Result<Option<i64>, MongoError> {
    Ok(Some(match input {
        RawBsonRef::Int64(i) => i,
        RawBsonRef::Int32(i) => i64::from(i),
        RawBsonRef::Boolean(b) => i64::from(b),
        RawBsonRef::DateTime(d) => d.timestamp_millis(),
        RawBsonRef::Double(d) => numbers::double_to_long(d)?,
        RawBsonRef::Decimal128(d) => {
            numbers::decimal_to_integer(&d, i64::MIN.into(), i64::MAX.into())? as i64
        }
        RawBsonRef::String(s) => parse_integer(s, i64::MIN.into(), i64::MAX.into())? as i64,
        _ => return Ok(None),
    }))
}

fn to_decimal(input: RawBsonRef<'_>) -> Result<Option<Decimal128>, MongoError> {
    Ok(Some(match input {
        RawBsonRef::Decimal128(d) => d,
        RawBsonRef::Int32(i) => decimal_from_i64(i64::from(i)),
        RawBsonRef::Int64(i) => decimal_from_i64(i),
        RawBsonRef::Boolean(b) => decimal_from_i64(i64::from(b)),
        RawBsonRef::DateTime(d) => decimal_from_i64(d.timestamp_millis()),
        RawBsonRef::Double(d) => decimal_from_f64(d),
        RawBsonRef::String(s) => parse_decimal(s)?,
        _ => return Ok(None),
    }))
}

#[cfg(test)]
#[path = "expr_convert_tests.rs"]
mod tests;
