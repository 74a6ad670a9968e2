//! Arithmetic expression operators: `$add $subtract $multiply $divide $mod $abs`.
//!
//! MongoDB's numeric widening: int32 results that overflow become int64, int64 results that
//! overflow become double, any double makes the result double; `$divide` always gives a
//! double. A null or missing argument gives null. `$add` takes at most one date and gives a
//! date; `$subtract` of two dates gives milliseconds (int64), of a date and a number a date.
//! With a decimal128 argument the result is a decimal, computed in `expr_decimal.rs`.

use bson::raw::{RawBson, RawBsonRef};
use bson::DateTime;

use super::expr::Value;
use crate::{ErrorCode, MongoError};

/// An arithmetic expression operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArithOp {
    /// `$add`.
    Add,
    /// `$subtract`.
    Subtract,
    /// `$multiply`.
    Multiply,
    /// `$divide`.
    Divide,
    /// `$mod`.
    Mod,
    /// `$abs`.
    Abs,
}

#[derive(Debug, Clone, Copy)]
enum Number {
    Int(i32),
    Long(i64),
    Double(f64),
}

impl Number {
    fn f64(self) -> f64 {
        match self {
            Number::Int(i) => f64::from(i),
            Number::Long(i) => i as f64,
            Number::Double(d) => d,
        }
    }

    fn i64(self) -> Option<i64> {
        match self {
            Number::Int(i) => Some(i64::from(i)),
            Number::Long(i) => Some(i),
            Number::Double(_) => None,
        }
    }

    fn raw(self) -> RawBson {
        match self {
            Number::Int(i) => RawBson::Int32(i),
            Number::Long(i) => RawBson::Int64(i),
            Number::Double(d) => RawBson::Double(d),
        }
    }

    fn is_zero(self) -> bool {
        self.f64() == 0.0
    }
}

/// Combine two numbers with `int`, `long` and `double` versions of an operation.
fn widen(
    a: Number,
    b: Number,
    int: fn(i32, i32) -> Option<i32>,
    long: fn(i64, i64) -> Option<i64>,
    double: fn(f64, f64) -> f64,
) -> Number {
    if let (Number::Int(x), Number::Int(y)) = (a, b) {
        if let Some(r) = int(x, y) {
            return Number::Int(r);
        }
    }
    if let (Some(x), Some(y)) = (a.i64(), b.i64()) {
        if let Some(r) = long(x, y) {
            return Number::Long(r);
        }
    }
    Number::Double(double(a.f64(), b.f64()))
}

fn type_name(v: &Value<'_>) -> &'static str {
    v.type_name()
}

fn number(v: RawBsonRef<'_>) -> Option<Number> {
    match v {
        RawBsonRef::Int32(i) => Some(Number::Int(i)),
        RawBsonRef::Int64(i) => Some(Number::Long(i)),
        RawBsonRef::Double(d) => Some(Number::Double(d)),
        _ => None,
    }
}

/// Evaluate an arithmetic operator over already evaluated arguments.
pub fn arithmetic(op: ArithOp, values: &[Value<'_>]) -> Result<RawBson, MongoError> {
    if values.iter().any(Value::is_nullish) {
        return Ok(RawBson::Null);
    }
    if super::expr_decimal::any_decimal(values) {
        return super::expr_decimal::arithmetic(op, values);
    }
    match op {
        ArithOp::Add => add(values),
        ArithOp::Multiply => multiply(values),
        ArithOp::Subtract => subtract(&values[0], &values[1]),
        ArithOp::Divide => divide(&values[0], &values[1]),
        ArithOp::Mod => modulo(&values[0], &values[1]),
        ArithOp::Abs => abs(&values[0]),
    }
}

fn add(values: &[Value<'_>]) -> Result<RawBson, MongoError> {
    let mut total = Number::Int(0);
    let mut date: Option<DateTime> = None;
    for v in values {
        match v.as_raw() {
            Some(RawBsonRef::DateTime(d)) if date.is_none() => date = Some(d),
            Some(RawBsonRef::DateTime(_)) => {
                return Err(MongoError::new(
                    ErrorCode::Location16612,
                    "only one date allowed in an $add expression",
                ))
            }
            Some(raw) => {
                let n = number(raw).ok_or_else(|| {
                    MongoError::new(
                        ErrorCode::Location16554,
                        format!(
                            "$add only supports numeric or date types, not {}",
                            type_name(v)
                        ),
                    )
                })?;
                total = widen(total, n, i32::checked_add, i64::checked_add, |x, y| x + y);
            }
            None => unreachable!("nullish arguments returned null above"),
        }
    }
    Ok(match date {
        Some(d) => RawBson::DateTime(shift_date(d, total)),
        None => total.raw(),
    })
}

fn shift_date(d: DateTime, by: Number) -> DateTime {
    let millis = match by {
        Number::Double(x) => x.round() as i64,
        other => other.i64().unwrap_or(0),
    };
    DateTime::from_millis(d.timestamp_millis().wrapping_add(millis))
}

fn multiply(values: &[Value<'_>]) -> Result<RawBson, MongoError> {
    let mut product = Number::Int(1);
    for v in values {
        let n = v.as_raw().and_then(number).ok_or_else(|| {
            MongoError::new(
                ErrorCode::Location16555,
                format!(
                    "$multiply only supports numeric types, not {}",
                    type_name(v)
                ),
            )
        })?;
        product = widen(product, n, i32::checked_mul, i64::checked_mul, |x, y| x * y);
    }
    Ok(product.raw())
}

fn subtract(a: &Value<'_>, b: &Value<'_>) -> Result<RawBson, MongoError> {
    let (x, y) = (a.as_raw(), b.as_raw());
    match (x, y) {
        (Some(RawBsonRef::DateTime(d)), Some(RawBsonRef::DateTime(e))) => Ok(RawBson::Int64(
            d.timestamp_millis().wrapping_sub(e.timestamp_millis()),
        )),
        (Some(RawBsonRef::DateTime(d)), Some(other)) if number(other).is_some() => {
            #[allow(
                clippy::expect_used,
                reason = "the match guard checked that the value is numeric"
            )]
            let n = number(other).expect("checked numeric");
            let negated = widen(
                Number::Int(0),
                n,
                i32::checked_sub,
                i64::checked_sub,
                |p, q| p - q,
            );
            Ok(RawBson::DateTime(shift_date(d, negated)))
        }
        (Some(p), Some(q)) => match (number(p), number(q)) {
            (Some(m), Some(n)) => {
                Ok(widen(m, n, i32::checked_sub, i64::checked_sub, |s, t| s - t).raw())
            }
            _ => Err(MongoError::new(
                ErrorCode::Location16556,
                format!("cant $subtract a {} from a {}", type_name(b), type_name(a)),
            )),
        },
        _ => unreachable!("nullish arguments returned null above"),
    }
}

fn two_numbers(
    a: &Value<'_>,
    b: &Value<'_>,
    code: ErrorCode,
    name: &str,
) -> Result<(Number, Number), MongoError> {
    match (a.as_raw().and_then(number), b.as_raw().and_then(number)) {
        (Some(x), Some(y)) => Ok((x, y)),
        _ => Err(MongoError::new(
            code,
            format!(
                "{name} only supports numeric types, not {} and {}",
                type_name(a),
                type_name(b)
            ),
        )),
    }
}

fn divide(a: &Value<'_>, b: &Value<'_>) -> Result<RawBson, MongoError> {
    let (x, y) = two_numbers(a, b, ErrorCode::Location16609, "$divide")?;
    if y.is_zero() {
        return Err(MongoError::new(
            ErrorCode::Location16608,
            "can't $divide by zero",
        ));
    }
    Ok(RawBson::Double(x.f64() / y.f64()))
}

fn modulo(a: &Value<'_>, b: &Value<'_>) -> Result<RawBson, MongoError> {
    let (x, y) = two_numbers(a, b, ErrorCode::Location16611, "$mod")?;
    if y.is_zero() {
        return Err(MongoError::new(
            ErrorCode::Location16610,
            "can't $mod by zero",
        ));
    }
    Ok(widen(x, y, i32::checked_rem, i64::checked_rem, |p, q| p % q).raw())
}

fn abs(a: &Value<'_>) -> Result<RawBson, MongoError> {
    let n = a.as_raw().and_then(number).ok_or_else(|| {
        MongoError::new(
            ErrorCode::Location28765,
            format!("$abs only supports numeric types, not {}", type_name(a)),
        )
    })?;
    Ok(match n {
        Number::Int(i) => i
            .checked_abs()
            .map_or(RawBson::Int64(i64::from(i).abs()), RawBson::Int32),
        Number::Long(i) => i
            .checked_abs()
            .map_or(RawBson::Double((i as f64).abs()), RawBson::Int64),
        Number::Double(d) => RawBson::Double(d.abs()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(b: RawBson) -> Value<'static> {
        Value::Owned(b)
    }

    #[test]
    fn widening_on_overflow() {
        let r = arithmetic(
            ArithOp::Add,
            &[v(RawBson::Int32(i32::MAX)), v(RawBson::Int32(1))],
        );
        assert_eq!(r.expect("adds"), RawBson::Int64(i64::from(i32::MAX) + 1));
        let r = arithmetic(
            ArithOp::Multiply,
            &[v(RawBson::Int64(i64::MAX)), v(RawBson::Int32(2))],
        );
        assert_eq!(
            r.expect("multiplies"),
            RawBson::Double(i64::MAX as f64 * 2.0)
        );
        let r = arithmetic(
            ArithOp::Add,
            &[v(RawBson::Int32(1)), v(RawBson::Double(0.5))],
        );
        assert_eq!(r.expect("adds"), RawBson::Double(1.5));
    }

    #[test]
    fn null_and_errors() {
        let r = arithmetic(ArithOp::Add, &[v(RawBson::Int32(1)), Value::Missing]);
        assert_eq!(r.expect("adds"), RawBson::Null);
        let e = arithmetic(
            ArithOp::Divide,
            &[v(RawBson::Int32(1)), v(RawBson::Int32(0))],
        );
        assert_eq!(e.unwrap_err().code, ErrorCode::Location16608);
        let e = arithmetic(ArithOp::Add, &[v(RawBson::String("x".into()))]);
        assert_eq!(
            e.unwrap_err().message,
            "$add only supports numeric or date types, not string"
        );
    }

    #[test]
    fn dates() {
        let d = DateTime::from_millis(1000);
        let r = arithmetic(
            ArithOp::Add,
            &[v(RawBson::DateTime(d)), v(RawBson::Int32(5))],
        );
        assert_eq!(
            r.expect("adds"),
            RawBson::DateTime(DateTime::from_millis(1005))
        );
        let r = arithmetic(
            ArithOp::Subtract,
            &[v(RawBson::DateTime(d)), v(RawBson::DateTime(d))],
        );
        assert_eq!(r.expect("subtracts"), RawBson::Int64(0));
        let r = arithmetic(ArithOp::Mod, &[v(RawBson::Int32(7)), v(RawBson::Int32(-3))]);
        assert_eq!(r.expect("mods"), RawBson::Int32(1));
    }
}
