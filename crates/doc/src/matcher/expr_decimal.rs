//! The arithmetic and numeric expression operators when a decimal128 argument is present, as
//! mongod 7.0 evaluates them (`expression.cpp`, `Decimal128`): a decimal anywhere makes the
//! result a decimal. `$add` keeps mongod's running totals (an int/long total widened exactly,
//! a double total to 34 digits, later doubles to 15), `$multiply` widens its partial product
//! (a double product to 15 digits), `$subtract $divide $mod $pow $log` convert both sides
//! (`coerceToDecimal`: doubles to 15 digits), `$ceil $floor $round $trunc` quantize (NaN when
//! the result needs more than 34 digits; `$round`/`$trunc` return infinities as they are),
//! `$sqrt $exp $ln $log10` are decimal functions with mongod's domain checks and codes, and
//! so are the trigonometric operators (`decimal/trig.rs`; 50989, 51044/51045).
//! `expr_arith.rs` and `expr_math.rs` route here; arguments are already evaluated and not
//! null (each caller answers null first).

use bson::raw::{RawBson, RawBsonRef};
use bson::DateTime;
use dec::Decimal128 as Dec;

use super::expr::{error, Value};
use super::expr_arith::ArithOp;
use super::expr_math::MathOp;
use super::expr_trig::{outside_domain, Domain, TrigOp};
use crate::decimal::{self, DecOps, Rounding};
use crate::{ErrorCode, MongoError};

/// Whether any argument is a decimal128.
pub(crate) fn any_decimal(values: &[Value<'_>]) -> bool {
    values
        .iter()
        .any(|v| matches!(v.as_raw(), Some(RawBsonRef::Decimal128(_))))
}

/// mongod's numeric widths, narrowest first (`Value::getWidestNumeric`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Width {
    Int,
    Long,
    Double,
    Decimal,
}

/// A numeric argument.
#[derive(Debug, Clone, Copy)]
enum N {
    Int(i32),
    Long(i64),
    Double(f64),
    Decimal(Dec),
}

impl N {
    fn of(v: &Value<'_>) -> Option<N> {
        Some(match v.as_raw()? {
            RawBsonRef::Int32(i) => N::Int(i),
            RawBsonRef::Int64(i) => N::Long(i),
            RawBsonRef::Double(d) => N::Double(d),
            RawBsonRef::Decimal128(d) => N::Decimal(decimal::to_dec(&d)),
            _ => return None,
        })
    }

    fn width(self) -> Width {
        match self {
            N::Int(_) => Width::Int,
            N::Long(_) => Width::Long,
            N::Double(_) => Width::Double,
            N::Decimal(_) => Width::Decimal,
        }
    }

    /// `coerceToDecimal`: integers exactly, doubles to 15 digits.
    fn dec(self) -> Dec {
        match self {
            N::Int(i) => decimal::from_i64(i64::from(i)),
            N::Long(i) => decimal::from_i64(i),
            N::Double(d) => decimal::from_f64_15(d),
            N::Decimal(d) => d,
        }
    }

    fn f64(self) -> f64 {
        match self {
            N::Int(i) => f64::from(i),
            N::Long(i) => i as f64,
            N::Double(d) => d,
            N::Decimal(d) => decimal::to_f64(d),
        }
    }

    /// `coerceToLong` of an int, long or (truncated) double.
    fn long(self) -> i64 {
        match self {
            N::Int(i) => i64::from(i),
            N::Long(i) => i,
            N::Double(d) => d as i64,
            N::Decimal(d) => to_long(d),
        }
    }
}

fn raw(d: Dec) -> RawBson {
    RawBson::Decimal128(decimal::from_dec(d))
}

/// mongod's `Decimal128::toLong()`: rounded half even; out of range (or NaN) is `i64::MIN`,
/// as the library's invalid result is.
fn to_long(d: Dec) -> i64 {
    let rounded = DecOps::default().quantize(d, 0, Rounding::HalfEven);
    match decimal::dec_parts(rounded) {
        decimal::Parts::Finite {
            negative,
            coefficient,
            ..
        } => i128::try_from(coefficient)
            .ok()
            .map(|c| if negative { -c } else { c })
            .and_then(|c| i64::try_from(c).ok())
            .unwrap_or(i64::MIN),
        _ => i64::MIN,
    }
}

/// An arithmetic operator over arguments of which at least one is a decimal.
pub(crate) fn arithmetic(op: ArithOp, values: &[Value<'_>]) -> Result<RawBson, MongoError> {
    match op {
        ArithOp::Add => add(values),
        ArithOp::Multiply => multiply(values),
        ArithOp::Subtract => subtract(&values[0], &values[1]),
        ArithOp::Divide => {
            let (x, y) = two(&values[0], &values[1], ErrorCode::Location16609, "$divide")?;
            if y.dec().is_zero() {
                return Err(error(ErrorCode::Location16608, "can't $divide by zero"));
            }
            Ok(raw(DecOps::default().div(x.dec(), y.dec())))
        }
        ArithOp::Mod => {
            let (x, y) = two(&values[0], &values[1], ErrorCode::Location16611, "$mod")?;
            if y.dec().is_zero() {
                return Err(error(ErrorCode::Location16610, "can't $mod by zero"));
            }
            Ok(raw(DecOps::default().rem(x.dec(), y.dec())))
        }
        ArithOp::Abs => {
            let x = N::of(&values[0]).ok_or_else(|| {
                error(
                    ErrorCode::Location28765,
                    format!(
                        "$abs only supports numeric types, not {}",
                        values[0].type_name()
                    ),
                )
            })?;
            Ok(raw(DecOps::default().abs(x.dec())))
        }
    }
}

fn two(a: &Value<'_>, b: &Value<'_>, code: ErrorCode, name: &str) -> Result<(N, N), MongoError> {
    match (N::of(a), N::of(b)) {
        (Some(x), Some(y)) => Ok((x, y)),
        _ => Err(error(
            code,
            format!(
                "{name} only supports numeric types, not {} and {}",
                a.type_name(),
                b.type_name()
            ),
        )),
    }
}

/// mongod's `AddState`, from the first argument on.
fn add(values: &[Value<'_>]) -> Result<RawBson, MongoError> {
    let mut ops = DecOps::default();
    let (mut width, mut long_total, mut double_total) = (Width::Int, 0_i64, 0.0_f64);
    let mut dec_total = decimal::from_i64(0);
    let mut date = false;
    for v in values {
        let n = match v.as_raw() {
            Some(RawBsonRef::DateTime(_)) if date => {
                return Err(error(
                    ErrorCode::Location16612,
                    "only one date allowed in an $add expression",
                ))
            }
            Some(RawBsonRef::DateTime(d)) => {
                date = true;
                N::Long(d.timestamp_millis())
            }
            _ => N::of(v).ok_or_else(|| {
                error(
                    ErrorCode::Location16554,
                    format!(
                        "$add only supports numeric or date types, not {}",
                        v.type_name()
                    ),
                )
            })?,
        };
        let old = width;
        if !matches!(v.as_raw(), Some(RawBsonRef::DateTime(_))) {
            width = width.max(n.width());
        }
        if old != width {
            match (width, old) {
                (Width::Double, _) => double_total = long_total as f64,
                (Width::Decimal, Width::Double) => dec_total = decimal::from_f64_34(double_total),
                (Width::Decimal, _) => dec_total = decimal::from_i64(long_total),
                _ => {}
            }
        }
        match width {
            Width::Int | Width::Long => match long_total.checked_add(n.long()) {
                Some(t) => long_total = t,
                None => {
                    width = Width::Double;
                    double_total = long_total as f64 + n.f64();
                }
            },
            Width::Double => double_total += n.f64(),
            Width::Decimal => dec_total = ops.add(dec_total, n.dec()),
        }
    }
    Ok(match (date, width) {
        (true, Width::Decimal) => RawBson::DateTime(DateTime::from_millis(to_long(dec_total))),
        (true, _) => RawBson::DateTime(DateTime::from_millis(long_total)),
        (false, Width::Decimal) => raw(dec_total),
        (false, Width::Double) => RawBson::Double(double_total),
        (false, Width::Long) => RawBson::Int64(long_total),
        (false, Width::Int) => {
            i32::try_from(long_total).map_or(RawBson::Int64(long_total), RawBson::Int32)
        }
    })
}

/// mongod's `$multiply`: the partial product widened to decimal at the first decimal.
fn multiply(values: &[Value<'_>]) -> Result<RawBson, MongoError> {
    let mut ops = DecOps::default();
    let (mut width, mut long_product, mut double_product) = (Width::Int, 1_i64, 1.0_f64);
    let mut dec_product = decimal::from_i64(1);
    for v in values {
        let n = N::of(v).ok_or_else(|| {
            error(
                ErrorCode::Location16555,
                format!(
                    "$multiply only supports numeric types, not {}",
                    v.type_name()
                ),
            )
        })?;
        let old = width;
        width = width.max(n.width());
        if width == Width::Decimal {
            if old != Width::Decimal {
                dec_product = if old == Width::Double {
                    decimal::from_f64_15(double_product)
                } else {
                    decimal::from_i64(long_product)
                };
            }
            dec_product = ops.mul(dec_product, n.dec());
        } else {
            double_product *= n.f64();
            match long_product.checked_mul(n.long()) {
                Some(p) => long_product = p,
                None => width = Width::Double,
            }
        }
    }
    // Only reached with a decimal argument, so the product is a decimal.
    debug_assert_eq!(width, Width::Decimal);
    Ok(raw(dec_product))
}

fn subtract(a: &Value<'_>, b: &Value<'_>) -> Result<RawBson, MongoError> {
    match (a.as_raw(), N::of(a), N::of(b)) {
        (_, Some(x), Some(y)) => Ok(raw(DecOps::default().sub(x.dec(), y.dec()))),
        (Some(RawBsonRef::DateTime(d)), None, Some(y)) => Ok(RawBson::DateTime(
            DateTime::from_millis(d.timestamp_millis().wrapping_sub(y.long())),
        )),
        _ => Err(error(
            ErrorCode::Location16556,
            format!(
                "cant $subtract a {} from a {}",
                b.type_name(),
                a.type_name()
            ),
        )),
    }
}

/// A numeric operator over arguments of which at least one is a decimal; `None` when only a
/// `$round`/`$trunc` place is a decimal (the number's own path reads it).
pub(crate) fn math<'a>(op: MathOp, values: &[Value<'_>]) -> Result<Option<Value<'a>>, MongoError> {
    let nullish = values.iter().any(Value::is_nullish);
    let out = match op {
        MathOp::Pow | MathOp::Log | MathOp::Round | MathOp::Trunc if values[0].is_nullish() => {
            RawBson::Null
        }
        MathOp::Pow | MathOp::Log if nullish => RawBson::Null,
        MathOp::Round | MathOp::Trunc
            if !matches!(values[0].as_raw(), Some(RawBsonRef::Decimal128(_))) =>
        {
            // Only the place is a decimal: the number's own path reads it (`integral64`).
            return Ok(None);
        }
        MathOp::Ceil | MathOp::Floor | MathOp::Sqrt | MathOp::Exp | MathOp::Ln | MathOp::Log10 => {
            unary(op, &values[0])?
        }
        MathOp::Round | MathOp::Trunc => round_or_trunc(op, values)?,
        MathOp::Pow => pow(&values[0], &values[1])?,
        MathOp::Log => log(&values[0], &values[1])?,
        MathOp::Trig(t) => trig(t, values)?,
    };
    Ok(Some(Value::Owned(out)))
}

fn single(name: &str, v: &Value<'_>) -> Result<Dec, MongoError> {
    N::of(v).map(N::dec).ok_or_else(|| {
        error(
            ErrorCode::Location28765,
            format!("{name} only supports numeric types, not {}", v.type_name()),
        )
    })
}

fn unary(op: MathOp, v: &Value<'_>) -> Result<RawBson, MongoError> {
    let mut ops = DecOps::default();
    let zero = decimal::from_i64(0);
    Ok(raw(match op {
        MathOp::Ceil => ops.quantize(single("$ceil", v)?, 0, Rounding::Ceiling),
        MathOp::Floor => ops.quantize(single("$floor", v)?, 0, Rounding::Floor),
        MathOp::Sqrt => {
            let x = single("$sqrt", v)?;
            if !(x.is_nan() || decimal::cmp_dec_dec(x, zero).is_ge()) {
                return Err(error(
                    ErrorCode::Location28714,
                    "$sqrt's argument must be greater than or equal to 0",
                ));
            }
            ops.sqrt(x)
        }
        MathOp::Exp => ops.exp(single("$exp", v)?),
        MathOp::Ln => ops.ln(positive(
            single("$ln", v)?,
            ErrorCode::Location28766,
            "$ln",
        )?),
        _ => ops.log10(positive(
            single("$log10", v)?,
            ErrorCode::Location28761,
            "$log10",
        )?),
    }))
}

/// `x` when positive or NaN, else mongod's domain error.
fn positive(x: Dec, code: ErrorCode, name: &str) -> Result<Dec, MongoError> {
    if x.is_nan() || decimal::cmp_dec_dec(x, decimal::from_i64(0)).is_gt() {
        return Ok(x);
    }
    Err(error(
        code,
        format!(
            "{name}'s argument must be a positive number, but is {}",
            decimal::from_dec(x)
        ),
    ))
}

fn log(arg: &Value<'_>, base: &Value<'_>) -> Result<RawBson, MongoError> {
    let not_numeric = |code, what: &str, v: &Value<'_>| {
        error(
            code,
            format!("$log's {what} must be numeric, not {}", v.type_name()),
        )
    };
    let x = N::of(arg).ok_or_else(|| not_numeric(ErrorCode::Location28756, "argument", arg))?;
    let b = N::of(base).ok_or_else(|| not_numeric(ErrorCode::Location28757, "base", base))?;
    let (x, b) = (x.dec(), b.dec());
    let x = positive(x, ErrorCode::Location28758, "$log")?;
    let one = decimal::from_i64(1);
    let valid_base = b.is_nan()
        || (decimal::cmp_dec_dec(b, decimal::from_i64(0)).is_gt()
            && decimal::cmp_dec_dec(b, one).is_ne());
    if !valid_base {
        return Err(error(
            ErrorCode::Location28759,
            format!(
                "$log's base must be a positive number not equal to 1, but is {}",
                decimal::from_dec(b)
            ),
        ));
    }
    Ok(raw(DecOps::default().log(x, b)))
}

fn pow(base: &Value<'_>, exp: &Value<'_>) -> Result<RawBson, MongoError> {
    let b = N::of(base).ok_or_else(|| {
        error(
            ErrorCode::Location28762,
            format!("$pow's base must be numeric, not {}", base.type_name()),
        )
    })?;
    let e = N::of(exp).ok_or_else(|| {
        error(
            ErrorCode::Location28763,
            format!("$pow's exponent must be numeric, not {}", exp.type_name()),
        )
    })?;
    let (b, e) = (b.dec(), e.dec());
    if b.is_zero() && e.is_negative() {
        return Err(error(
            ErrorCode::Location28764,
            "$pow cannot take a base of 0 and a negative exponent",
        ));
    }
    Ok(raw(DecOps::default().pow(b, e)))
}

/// `$round`/`$trunc` of a decimal: quantized at `10^-place`; infinities as they are.
fn round_or_trunc(op: MathOp, values: &[Value<'_>]) -> Result<RawBson, MongoError> {
    let name = if op == MathOp::Round {
        "$round"
    } else {
        "$trunc"
    };
    let Some(RawBsonRef::Decimal128(x)) = values[0].as_raw() else {
        return Ok(RawBson::Null);
    };
    let place = match values.get(1) {
        None => 0,
        Some(p) if p.is_nullish() => return Ok(RawBson::Null),
        Some(p) => super::expr_math::place(name, p)?,
    };
    let x = decimal::to_dec(&x);
    if x.is_infinite() {
        return Ok(raw(x));
    }
    let mode = if op == MathOp::Round {
        Rounding::HalfEven
    } else {
        Rounding::Down
    };
    // `place` is within [-20, 100].
    let exponent = i32::try_from(-place).unwrap_or(0);
    Ok(raw(DecOps::default().quantize(x, exponent, mode)))
}

/// A trigonometric operator of a decimal (mongod's `Decimal128` functions): a decimal,
/// mongod's domains (50989), NaN through unchanged.
fn trig(op: TrigOp, values: &[Value<'_>]) -> Result<RawBson, MongoError> {
    if values.iter().any(Value::is_nullish) {
        return Ok(RawBson::Null);
    }
    if op == TrigOp::Atan2 {
        let mut parts = [decimal::from_i64(0); 2];
        for (i, code) in [ErrorCode::Location51044, ErrorCode::Location51045]
            .into_iter()
            .enumerate()
        {
            parts[i] = N::of(&values[i]).map(N::dec).ok_or_else(|| {
                error(
                    code,
                    format!(
                        "$atan2 only supports numeric types, not {}",
                        values[i].type_name()
                    ),
                )
            })?;
        }
        return Ok(raw(decimal::atan2(parts[0], parts[1])));
    }
    let x = single(op.name(), &values[0])?;
    if x.is_nan() {
        return Ok(raw(x));
    }
    if let Some(Domain(lo, hi, inclusive)) = op.domain() {
        let (above, below) = (decimal::cmp_dec_f64(x, lo), decimal::cmp_dec_f64(x, hi));
        let inside = if inclusive {
            above.is_ge() && below.is_le()
        } else {
            above.is_gt() && below.is_lt()
        };
        if !inside {
            let shown = decimal::from_dec(x).to_string();
            return Err(outside_domain(op, &shown, Domain(lo, hi, inclusive)));
        }
    }
    decimal::trig(trig_function(op), x).map(raw).ok_or_else(|| {
        error(
            ErrorCode::NotImplemented,
            format!(
                "{} of a decimal128 beyond 1E+70 is not supported yet",
                op.name()
            ),
        )
    })
}

fn trig_function(op: TrigOp) -> decimal::Trig {
    use decimal::Trig as T;
    match op {
        TrigOp::Sin => T::Sin,
        TrigOp::Cos => T::Cos,
        TrigOp::Tan => T::Tan,
        TrigOp::Asin => T::Asin,
        TrigOp::Acos => T::Acos,
        TrigOp::Atan | TrigOp::Atan2 => T::Atan,
        TrigOp::Sinh => T::Sinh,
        TrigOp::Cosh => T::Cosh,
        TrigOp::Tanh => T::Tanh,
        TrigOp::Asinh => T::Asinh,
        TrigOp::Acosh => T::Acosh,
        TrigOp::Atanh => T::Atanh,
        TrigOp::DegreesToRadians => T::DegreesToRadians,
        TrigOp::RadiansToDegrees => T::RadiansToDegrees,
    }
}

#[cfg(test)]
#[path = "expr_decimal_tests.rs"]
mod tests;
