//! Numeric expression operators: `$ceil $floor $round $trunc` (with a place), `$sqrt $pow
//! $exp $ln $log $log10`, and the trigonometric family (evaluated in `expr_trig`), over
//! already evaluated arguments, as mongod 7.0 computes them (`expression.cpp`):
//! - a null or missing argument gives null; a non-number is 28765 ("$op only supports numeric
//!   types, not T"), `$log` 28756/28757, `$pow` 28762/28763;
//! - `$ceil`/`$floor` keep ints and longs; `$sqrt $exp $ln $log $log10` give doubles;
//! - `$pow` keeps int (widening to long) or long when exact, else a double;
//! - `$round`/`$trunc` round a double through its 34-digit decimal value (half to even /
//!   toward zero), so `$round: [1.005, 2]` is 1.0 as on mongod; ints and longs change only for
//!   a negative place, and a result past int64 is 51080.
//!
//! With a decimal128 argument `expr_decimal.rs` computes the result, a decimal (the
//! trigonometric ones too).

use bson::raw::RawBson;

use super::expr::{error, Value};
use super::expr_arity::{cpp_double, integral64, number, Arity, Num};
use super::expr_trig::TrigOp;
use crate::{ErrorCode, MongoError};

/// A numeric expression operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MathOp {
    /// `$ceil`.
    Ceil,
    /// `$floor`.
    Floor,
    /// `$round`.
    Round,
    /// `$trunc`.
    Trunc,
    /// `$sqrt`.
    Sqrt,
    /// `$pow`.
    Pow,
    /// `$exp`.
    Exp,
    /// `$ln`.
    Ln,
    /// `$log`.
    Log,
    /// `$log10`.
    Log10,
    /// A trigonometric operator.
    Trig(TrigOp),
}

impl MathOp {
    /// The operator named `name` (with its `$`).
    pub fn from_name(name: &str) -> Option<MathOp> {
        Some(match name {
            "$ceil" => MathOp::Ceil,
            "$floor" => MathOp::Floor,
            "$round" => MathOp::Round,
            "$trunc" => MathOp::Trunc,
            "$sqrt" => MathOp::Sqrt,
            "$pow" => MathOp::Pow,
            "$exp" => MathOp::Exp,
            "$ln" => MathOp::Ln,
            "$log" => MathOp::Log,
            "$log10" => MathOp::Log10,
            other => MathOp::Trig(TrigOp::from_name(other)?),
        })
    }

    /// How many arguments it takes.
    pub fn arity(self) -> Arity {
        match self {
            MathOp::Round | MathOp::Trunc => Arity::Range(1, 2),
            MathOp::Pow | MathOp::Log => Arity::Exact(2),
            MathOp::Trig(t) => t.arity(),
            _ => Arity::Exact(1),
        }
    }

    fn name(self) -> &'static str {
        match self {
            MathOp::Ceil => "$ceil",
            MathOp::Floor => "$floor",
            MathOp::Round => "$round",
            MathOp::Trunc => "$trunc",
            MathOp::Sqrt => "$sqrt",
            MathOp::Pow => "$pow",
            MathOp::Exp => "$exp",
            MathOp::Ln => "$ln",
            MathOp::Log => "$log",
            MathOp::Log10 => "$log10",
            MathOp::Trig(t) => t.name(),
        }
    }
}

fn owned<'a>(b: RawBson) -> Value<'a> {
    Value::Owned(b)
}

/// Evaluate `op` over its evaluated arguments.
pub(crate) fn apply<'a>(op: MathOp, values: &[Value<'_>]) -> Result<Value<'a>, MongoError> {
    if super::expr_decimal::any_decimal(values) {
        if let Some(out) = super::expr_decimal::math(op, values)? {
            return Ok(out);
        }
    }
    match op {
        MathOp::Round | MathOp::Trunc => round_or_trunc(op, values),
        MathOp::Pow => pow(&values[0], &values[1]),
        MathOp::Log => log(&values[0], &values[1]),
        MathOp::Trig(t) => super::expr_trig::apply(t, values),
        _ => {
            let Some(n) = single_number(op.name(), &values[0])? else {
                return Ok(owned(RawBson::Null));
            };
            unary(op, n).map(|r| owned(r.raw()))
        }
    }
}

/// The one numeric argument of a single-argument operator: `None` when null or missing.
pub(crate) fn single_number(name: &str, v: &Value<'_>) -> Result<Option<Num>, MongoError> {
    if v.is_nullish() {
        return Ok(None);
    }
    number(v)?.map(Some).ok_or_else(|| {
        error(
            ErrorCode::Location28765,
            format!("{name} only supports numeric types, not {}", v.type_name()),
        )
    })
}

fn unary(op: MathOp, n: Num) -> Result<Num, MongoError> {
    let d = n.f64();
    Ok(match op {
        MathOp::Ceil | MathOp::Floor => match n {
            Num::Double(x) if op == MathOp::Ceil => Num::Double(x.ceil()),
            Num::Double(x) => Num::Double(x.floor()),
            other => other,
        },
        MathOp::Sqrt => {
            if d < 0.0 {
                return Err(error(
                    ErrorCode::Location28714,
                    "$sqrt's argument must be greater than or equal to 0",
                ));
            }
            Num::Double(d.sqrt())
        }
        MathOp::Exp => Num::Double(d.exp()),
        MathOp::Ln => Num::Double(positive(d, ErrorCode::Location28766, "$ln")?.ln()),
        MathOp::Log10 => Num::Double(positive(d, ErrorCode::Location28761, "$log10")?.log10()),
        _ => unreachable!("apply routes the other operators"),
    })
}

/// `d` when positive (or NaN, which mongod lets through).
fn positive(d: f64, code: ErrorCode, name: &str) -> Result<f64, MongoError> {
    if d > 0.0 || d.is_nan() {
        return Ok(d);
    }
    Err(error(
        code,
        format!(
            "{name}'s argument must be a positive number, but is {}",
            cpp_double(d)
        ),
    ))
}

fn log<'a>(arg: &Value<'_>, base: &Value<'_>) -> Result<Value<'a>, MongoError> {
    if arg.is_nullish() || base.is_nullish() {
        return Ok(owned(RawBson::Null));
    }
    let not_numeric = |code, what: &str, v: &Value<'_>| {
        error(
            code,
            format!("$log's {what} must be numeric, not {}", v.type_name()),
        )
    };
    let x = number(arg)?.ok_or_else(|| not_numeric(ErrorCode::Location28756, "argument", arg))?;
    let b = number(base)?.ok_or_else(|| not_numeric(ErrorCode::Location28757, "base", base))?;
    let (x, b) = (x.f64(), b.f64());
    let x = positive(x, ErrorCode::Location28758, "$log")?;
    if !((b > 0.0 && b != 1.0) || b.is_nan()) {
        return Err(error(
            ErrorCode::Location28759,
            format!(
                "$log's base must be a positive number not equal to 1, but is {}",
                cpp_double(b)
            ),
        ));
    }
    Ok(owned(RawBson::Double(x.ln() / b.ln())))
}

fn pow<'a>(base: &Value<'_>, exp: &Value<'_>) -> Result<Value<'a>, MongoError> {
    if base.is_nullish() || exp.is_nullish() {
        return Ok(owned(RawBson::Null));
    }
    let b = number(base)?.ok_or_else(|| {
        error(
            ErrorCode::Location28762,
            format!("$pow's base must be numeric, not {}", base.type_name()),
        )
    })?;
    let e = number(exp)?.ok_or_else(|| {
        error(
            ErrorCode::Location28763,
            format!("$pow's exponent must be numeric, not {}", exp.type_name()),
        )
    })?;
    if b.f64() == 0.0 && e.f64() < 0.0 {
        return Err(error(
            ErrorCode::Location28764,
            "$pow cannot take a base of 0 and a negative exponent",
        ));
    }
    Ok(owned(
        integer_pow(b, e).unwrap_or_else(|| RawBson::Double(b.f64().powf(e.f64()))),
    ))
}

/// `$pow` of two integers when the result is exact as an integer: a long if either is a
/// long, else an int that widens to a long.
fn integer_pow(b: Num, e: Num) -> Option<RawBson> {
    let (base, exp, long) = match (b, e) {
        (Num::Double(_), _) | (_, Num::Double(_)) => return None,
        (Num::Int(x), Num::Int(y)) => (i64::from(x), i64::from(y), false),
        (x, y) => (integer(x), integer(y), true),
    };
    let result = match base {
        0 => i64::from(exp == 0),
        1 => 1,
        -1 => {
            if exp % 2 == 0 {
                1
            } else {
                -1
            }
        }
        _ => base.checked_pow(u32::try_from(exp).ok().filter(|e| *e <= 63)?)?,
    };
    Some(if long {
        RawBson::Int64(result)
    } else {
        i32::try_from(result).map_or(RawBson::Int64(result), RawBson::Int32)
    })
}

fn integer(n: Num) -> i64 {
    match n {
        Num::Int(i) => i64::from(i),
        Num::Long(i) => i,
        Num::Double(d) => d as i64,
    }
}

fn round_or_trunc<'a>(op: MathOp, values: &[Value<'_>]) -> Result<Value<'a>, MongoError> {
    let name = op.name();
    if values[0].is_nullish() {
        return Ok(owned(RawBson::Null));
    }
    let n = number(&values[0])?.ok_or_else(|| {
        error(
            ErrorCode::Location51081,
            format!(
                "{name} only supports numeric types, not {}",
                values[0].type_name()
            ),
        )
    })?;
    let place = match values.get(1) {
        None => 0,
        Some(p) if p.is_nullish() => return Ok(owned(RawBson::Null)),
        Some(p) => place(name, p)?,
    };
    let half_even = op == MathOp::Round;
    Ok(owned(match n {
        Num::Double(d) => RawBson::Double(round_double(d, place, half_even)),
        Num::Int(_) | Num::Long(_) if place >= 0 => n.raw(),
        Num::Int(i) => round_integer(i64::from(i), place, half_even, false, name)?,
        Num::Long(i) => round_integer(i, place, half_even, true, name)?,
    }))
}

pub(super) fn place(name: &str, p: &Value<'_>) -> Result<i64, MongoError> {
    let value = integral64(p).ok_or_else(|| {
        error(
            ErrorCode::Location51082,
            format!("precision argument to  {name} must be a integral value"),
        )
    })?;
    if !(-20..=100).contains(&value) {
        return Err(error(
            ErrorCode::Location51083,
            format!("cannot apply {name} with precision value {value} value must be in [-20, 100]"),
        ));
    }
    Ok(value)
}

/// An integer rounded (half to even) or truncated to `10^-place` (`place` < 0).
fn round_integer(
    x: i64,
    place: i64,
    half_even: bool,
    long: bool,
    name: &str,
) -> Result<RawBson, MongoError> {
    let unit = 10_i128.pow(u32::try_from(-place).unwrap_or(0));
    let magnitude = i128::from(x).abs();
    let rest = magnitude % unit;
    let mut base = magnitude - rest;
    if half_even && (rest * 2 > unit || (rest * 2 == unit && (base / unit) % 2 == 1)) {
        base += unit;
    }
    let signed = if x < 0 { -base } else { base };
    let result = i64::try_from(signed).map_err(|_| {
        error(
            ErrorCode::Location51080,
            format!(
                "invalid conversion from Decimal128 result in {name} resulting from arguments: \
                 [{x}, {place}]"
            ),
        )
    })?;
    Ok(match i32::try_from(result) {
        Ok(i) if !long => RawBson::Int32(i),
        _ => RawBson::Int64(result),
    })
}

/// A double rounded or truncated at `10^-place` through its 34-significant-digit decimal
/// value, as mongod quantizes `Decimal128(double)`.
fn round_double(x: f64, place: i64, half_even: bool) -> f64 {
    if !x.is_finite() || x == 0.0 {
        return x;
    }
    let sci = format!("{:.33e}", x.abs());
    let Some((mantissa, exp)) = sci.split_once('e') else {
        return x;
    };
    let exp: i64 = exp.parse().unwrap_or(0);
    let digits: Vec<u8> = mantissa.bytes().filter(u8::is_ascii_digit).collect();
    let keep = exp + place + 1;
    let Ok(keep) = usize::try_from(keep) else {
        return 0.0_f64.copysign(x);
    };
    if keep >= digits.len() {
        return x;
    }
    let (kept, dropped) = digits.split_at(keep);
    let mut kept: Vec<u8> = kept.to_vec();
    if half_even && rounds_up(&kept, dropped) {
        increment(&mut kept);
    }
    let text = if kept.is_empty() {
        "0".to_owned()
    } else {
        String::from_utf8_lossy(&kept).into_owned()
    };
    let magnitude: f64 = format!("{text}e{}", -place).parse().unwrap_or(0.0);
    magnitude.copysign(x)
}

fn rounds_up(kept: &[u8], dropped: &[u8]) -> bool {
    let first = dropped.first().copied().unwrap_or(b'0');
    let tail_nonzero = dropped.iter().skip(1).any(|d| *d != b'0');
    match first.cmp(&b'5') {
        std::cmp::Ordering::Greater => true,
        std::cmp::Ordering::Less => false,
        std::cmp::Ordering::Equal => {
            tail_nonzero || kept.last().is_some_and(|d| (d - b'0') % 2 == 1)
        }
    }
}

/// Add one to a decimal digit string (a carry out of the top digit prepends a 1).
fn increment(digits: &mut Vec<u8>) {
    for d in digits.iter_mut().rev() {
        if *d == b'9' {
            *d = b'0';
        } else {
            *d += 1;
            return;
        }
    }
    digits.insert(0, b'1');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(b: RawBson) -> Value<'static> {
        Value::Owned(b)
    }

    fn run(op: MathOp, args: Vec<RawBson>) -> Result<RawBson, MongoError> {
        let values: Vec<Value<'_>> = args.into_iter().map(v).collect();
        apply(op, &values).map(|r| r.as_raw().map_or(RawBson::Null, |x| x.to_raw_bson()))
    }

    #[test]
    fn ceil_floor_keep_integers() {
        assert_eq!(
            run(MathOp::Ceil, vec![RawBson::Double(1.2)]).unwrap(),
            RawBson::Double(2.0)
        );
        assert_eq!(
            run(MathOp::Floor, vec![RawBson::Double(-1.2)]).unwrap(),
            RawBson::Double(-2.0)
        );
        assert_eq!(
            run(MathOp::Floor, vec![RawBson::Int32(5)]).unwrap(),
            RawBson::Int32(5)
        );
        assert_eq!(
            run(MathOp::Ceil, vec![RawBson::Null]).unwrap(),
            RawBson::Null
        );
        let e = run(MathOp::Ceil, vec![RawBson::String("a".into())]).unwrap_err();
        assert_eq!(e.code, ErrorCode::Location28765);
        assert_eq!(e.message, "$ceil only supports numeric types, not string");
    }

    #[test]
    fn round_and_trunc_follow_decimal_rounding() {
        let r = |x: f64, p: i32| run(MathOp::Round, vec![RawBson::Double(x), RawBson::Int32(p)]);
        assert_eq!(r(2.5, 0).unwrap(), RawBson::Double(2.0));
        assert_eq!(r(3.5, 0).unwrap(), RawBson::Double(4.0));
        assert_eq!(r(1.005, 2).unwrap(), RawBson::Double(1.0));
        assert_eq!(r(19.25, 1).unwrap(), RawBson::Double(19.2));
        assert_eq!(r(-5.5, 0).unwrap(), RawBson::Double(-6.0));
        assert_eq!(r(1234.5678, -2).unwrap(), RawBson::Double(1200.0));
        assert_eq!(r(0.004, 1).unwrap(), RawBson::Double(0.0));
        let t = run(
            MathOp::Trunc,
            vec![RawBson::Double(-7.89), RawBson::Int32(1)],
        )
        .unwrap();
        assert_eq!(t, RawBson::Double(-7.8));
        let t = run(
            MathOp::Trunc,
            vec![RawBson::Int32(1255), RawBson::Int32(-1)],
        )
        .unwrap();
        assert_eq!(t, RawBson::Int32(1250));
        let t = run(
            MathOp::Round,
            vec![RawBson::Int32(1255), RawBson::Int32(-1)],
        )
        .unwrap();
        assert_eq!(t, RawBson::Int32(1260));
        let t = run(MathOp::Round, vec![RawBson::Int64(25), RawBson::Int32(-1)]).unwrap();
        assert_eq!(t, RawBson::Int64(20));
        assert_eq!(
            run(MathOp::Round, vec![RawBson::Int32(7)]).unwrap(),
            RawBson::Int32(7)
        );
        let e = run(
            MathOp::Round,
            vec![RawBson::Int64(i64::MAX), RawBson::Int32(-1)],
        );
        assert_eq!(e.unwrap_err().code, ErrorCode::Location51080);
        let e = run(MathOp::Round, vec![RawBson::Int32(1), RawBson::Int32(101)]).unwrap_err();
        assert_eq!(e.code, ErrorCode::Location51083);
        let e = run(MathOp::Round, vec![RawBson::Int32(1), RawBson::Double(1.5)]).unwrap_err();
        assert_eq!(e.code, ErrorCode::Location51082);
        let e = run(MathOp::Trunc, vec![RawBson::Boolean(true)]).unwrap_err();
        assert_eq!(e.code, ErrorCode::Location51081);
        assert_eq!(
            run(MathOp::Round, vec![RawBson::Int32(1), RawBson::Null]).unwrap(),
            RawBson::Null
        );
    }

    #[test]
    fn roots_and_logs() {
        assert_eq!(
            run(MathOp::Sqrt, vec![RawBson::Int32(25)]).unwrap(),
            RawBson::Double(5.0)
        );
        let e = run(MathOp::Sqrt, vec![RawBson::Int32(-1)]).unwrap_err();
        assert_eq!(e.code, ErrorCode::Location28714);
        let e = run(MathOp::Ln, vec![RawBson::Int32(-1)]).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                ErrorCode::Location28766,
                "$ln's argument must be a positive number, but is -1"
            )
        );
        assert_eq!(
            run(MathOp::Log10, vec![RawBson::Int32(100)]).unwrap(),
            RawBson::Double(2.0)
        );
        assert_eq!(
            run(MathOp::Log, vec![RawBson::Int32(8), RawBson::Int32(2)]).unwrap(),
            RawBson::Double(3.0)
        );
        let e = run(MathOp::Log, vec![RawBson::Int32(8), RawBson::Int32(1)]).unwrap_err();
        assert_eq!(e.code, ErrorCode::Location28759);
        let e = run(
            MathOp::Log,
            vec![RawBson::String("x".into()), RawBson::Int32(1)],
        )
        .unwrap_err();
        assert_eq!(e.code, ErrorCode::Location28756);
        assert_eq!(
            run(MathOp::Exp, vec![RawBson::Int32(0)]).unwrap(),
            RawBson::Double(1.0)
        );
    }

    #[test]
    fn pow_types() {
        let p = |a: RawBson, b: RawBson| run(MathOp::Pow, vec![a, b]).unwrap();
        assert_eq!(
            p(RawBson::Int32(2), RawBson::Int32(10)),
            RawBson::Int32(1024)
        );
        assert_eq!(
            p(RawBson::Int32(2), RawBson::Int32(40)),
            RawBson::Int64(1 << 40)
        );
        assert_eq!(p(RawBson::Int64(2), RawBson::Int32(3)), RawBson::Int64(8));
        assert_eq!(
            p(RawBson::Int32(2), RawBson::Int32(-1)),
            RawBson::Double(0.5)
        );
        assert_eq!(
            p(RawBson::Int32(2), RawBson::Int32(64)),
            RawBson::Double(2f64.powi(64))
        );
        assert_eq!(
            p(RawBson::Int32(-1), RawBson::Int32(-3)),
            RawBson::Int32(-1)
        );
        assert_eq!(
            p(RawBson::Double(4.0), RawBson::Double(0.5)),
            RawBson::Double(2.0)
        );
        let e = run(MathOp::Pow, vec![RawBson::Int32(0), RawBson::Int32(-2)]).unwrap_err();
        assert_eq!(e.code, ErrorCode::Location28764);
        let e = run(MathOp::Pow, vec![RawBson::Boolean(true), RawBson::Int32(2)]).unwrap_err();
        assert_eq!(e.code, ErrorCode::Location28762);
    }
}
