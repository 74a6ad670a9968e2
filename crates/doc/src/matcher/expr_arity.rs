//! Argument counts of the expression operators added with the date, math, set and array
//! families, and the numeric readings they share: mongod's fixed arity (16020), ranged arity
//! (28667) and variadic operators; numbers as int/long/double, their 32- and 64-bit integral
//! readings (`Value::integral()`/`integral64Bit()`), and doubles printed as a C++ stream
//! prints them in messages. Never evaluates anything itself.

use bson::raw::{RawBson, RawBsonRef};

use super::expr::{error, Value};
use crate::{ErrorCode, MongoError};

/// How many arguments an operator takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arity {
    /// Exactly this many (16020 otherwise).
    Exact(usize),
    /// From the first to the second, inclusive (28667 otherwise).
    Range(usize, usize),
    /// Any number.
    Any,
}

/// Refuse `count` arguments to `name` unless `arity` allows them, with mongod's messages.
pub(crate) fn check(name: &str, count: usize, arity: Arity) -> Result<(), MongoError> {
    match arity {
        Arity::Exact(n) if n != count => Err(error(
            ErrorCode::Location16020,
            format!("Expression {name} takes exactly {n} arguments. {count} were passed in."),
        )),
        Arity::Range(lo, hi) if count < lo || count > hi => Err(error(
            ErrorCode::Location28667,
            format!(
                "Expression {name} takes at least {lo} arguments, and at most {hi}, but {count} \
                 were passed in."
            ),
        )),
        _ => Ok(()),
    }
}

/// A number as mongod's non-decimal arithmetic sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Num {
    /// int32.
    Int(i32),
    /// int64.
    Long(i64),
    /// double.
    Double(f64),
}

impl Num {
    /// The number as a double.
    pub fn f64(self) -> f64 {
        match self {
            Num::Int(i) => f64::from(i),
            Num::Long(i) => i as f64,
            Num::Double(d) => d,
        }
    }

    /// The number as BSON.
    pub fn raw(self) -> RawBson {
        match self {
            Num::Int(i) => RawBson::Int32(i),
            Num::Long(i) => RawBson::Int64(i),
            Num::Double(d) => RawBson::Double(d),
        }
    }
}

/// The number in `v`: `Ok(None)` for a value that is not a number. A decimal128 reads as its
/// nearest double: the operators that compute with numbers route decimals to
/// `expr_decimal.rs` before they get here, so what is left only checks that an argument is
/// numeric (indexes and counts, whose integral readings below take decimals exactly) or
/// prints it in a message.
pub(crate) fn number(v: &Value<'_>) -> Result<Option<Num>, MongoError> {
    Ok(match v.as_raw() {
        Some(RawBsonRef::Int32(i)) => Some(Num::Int(i)),
        Some(RawBsonRef::Int64(i)) => Some(Num::Long(i)),
        Some(RawBsonRef::Double(d)) => Some(Num::Double(d)),
        Some(RawBsonRef::Decimal128(d)) => Some(Num::Double(crate::decimal::to_f64(
            crate::decimal::to_dec(&d),
        ))),
        _ => None,
    })
}

/// mongod's `Value::integral()`: a number whose value is an int32.
pub(crate) fn integral32(v: &Value<'_>) -> Option<i32> {
    if let Some(RawBsonRef::Decimal128(d)) = v.as_raw() {
        return decimal_integral(&d).and_then(|i| i32::try_from(i).ok());
    }
    match number(v).ok()?? {
        Num::Int(i) => Some(i),
        Num::Long(i) => i32::try_from(i).ok(),
        Num::Double(d)
            if d.fract() == 0.0 && d >= f64::from(i32::MIN) && d <= f64::from(i32::MAX) =>
        {
            Some(d as i32)
        }
        Num::Double(_) => None,
    }
}

/// 2^63 as a double (exact).
const TWO_63: f64 = 9_223_372_036_854_775_808.0;

/// mongod's `Value::integral64Bit()`: a number whose value is an int64.
pub(crate) fn integral64(v: &Value<'_>) -> Option<i64> {
    if let Some(RawBsonRef::Decimal128(d)) = v.as_raw() {
        return decimal_integral(&d);
    }
    match number(v).ok()?? {
        Num::Int(i) => Some(i64::from(i)),
        Num::Long(i) => Some(i),
        // 2^63 is the first double past i64::MAX.
        Num::Double(d) if d.fract() == 0.0 && (-TWO_63..TWO_63).contains(&d) => Some(d as i64),
        Num::Double(_) => None,
    }
}

/// A decimal's value when it is a whole number that fits an int64 (mongod's `toLongExact`
/// without the inexact or invalid flag).
fn decimal_integral(d: &bson::Decimal128) -> Option<i64> {
    crate::decimal::to_i64_exact(crate::decimal::to_dec(d))
}

/// A value as mongod's `Value::toString()` shows it in messages (numbers and strings plainly,
/// other values in extended JSON).
pub(crate) fn show(v: &Value<'_>) -> String {
    match v.as_raw() {
        None => "MISSING".to_owned(),
        Some(RawBsonRef::Int32(i)) => i.to_string(),
        Some(RawBsonRef::Int64(i)) => i.to_string(),
        Some(RawBsonRef::Double(d)) => cpp_double(d),
        Some(RawBsonRef::String(s)) => format!("\"{s}\""),
        Some(RawBsonRef::Null) => "null".to_owned(),
        Some(other) => bson::Bson::try_from(other.to_raw_bson())
            .map_or_else(|_| "<malformed>".to_owned(), |b| b.to_string()),
    }
}

/// A double as a C++ output stream prints it (`%g`, six significant digits).
pub(crate) fn cpp_double(d: f64) -> String {
    if d.is_nan() {
        return "nan".to_owned();
    }
    if d.is_infinite() {
        return if d < 0.0 { "-inf" } else { "inf" }.to_owned();
    }
    if d == 0.0 {
        return if d.is_sign_negative() { "-0" } else { "0" }.to_owned();
    }
    let sci = format!("{d:.5e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        return format!("{}e{sign}{:02}", trim_zeros(mantissa), exp.abs());
    }
    let decimals = usize::try_from(5 - exp).unwrap_or(0);
    trim_zeros(&format!("{d:.decimals$}")).to_owned()
}

fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arity_messages() {
        let e = check("$pow", 1, Arity::Exact(2)).unwrap_err();
        assert_eq!(e.code, ErrorCode::Location16020);
        let e = check("$round", 3, Arity::Range(1, 2)).unwrap_err();
        assert_eq!(
            e.message,
            "Expression $round takes at least 1 arguments, and at most 2, but 3 were passed in."
        );
        assert!(check("$sum", 0, Arity::Any).is_ok());
    }

    #[test]
    fn doubles_print_as_cpp_streams_do() {
        assert_eq!(cpp_double(-1.0), "-1");
        assert_eq!(cpp_double(2.5), "2.5");
        assert_eq!(cpp_double(-1_234_567.0), "-1.23457e+06");
        assert_eq!(cpp_double(0.0001), "0.0001");
        assert_eq!(cpp_double(0.00001), "1e-05");
        assert_eq!(cpp_double(f64::INFINITY), "inf");
    }

    #[test]
    fn integral_readings() {
        let v = |b| Value::Owned(b);
        assert_eq!(integral32(&v(RawBson::Double(3.0))), Some(3));
        assert_eq!(integral32(&v(RawBson::Double(3.5))), None);
        assert_eq!(integral32(&v(RawBson::Int64(1 << 40))), None);
        assert_eq!(integral64(&v(RawBson::Int64(1 << 40))), Some(1 << 40));
        assert_eq!(integral64(&v(RawBson::String("1".into()))), None);
    }
}
