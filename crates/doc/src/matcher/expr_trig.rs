//! Trigonometric expression operators: `$sin $cos $tan $asin $acos $atan $atan2 $sinh $cosh
//! $tanh $asinh $acosh $atanh $degreesToRadians $radiansToDegrees`, as mongod 7.0 computes
//! them (`expression_trigonometric.h`): one numeric argument (28765 otherwise; `$atan2` two,
//! 51044/51045), null or missing gives null, the result is a double, and an argument outside
//! the function's domain is 50989 ("cannot apply $acos to 2, value must in [-1,1]"); NaN
//! passes through unchanged.

use bson::raw::RawBson;

use super::expr::{error, Value};
use super::expr_arity::{cpp_double, number, Arity};
use super::expr_math::single_number;
use crate::{ErrorCode, MongoError};

/// A trigonometric expression operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs, reason = "each variant is the operator of the same name")]
pub enum TrigOp {
    Sin,
    Cos,
    Tan,
    Asin,
    Acos,
    Atan,
    Atan2,
    Sinh,
    Cosh,
    Tanh,
    Asinh,
    Acosh,
    Atanh,
    DegreesToRadians,
    RadiansToDegrees,
}

const NAMES: &[(&str, TrigOp)] = &[
    ("$sin", TrigOp::Sin),
    ("$cos", TrigOp::Cos),
    ("$tan", TrigOp::Tan),
    ("$asin", TrigOp::Asin),
    ("$acos", TrigOp::Acos),
    ("$atan", TrigOp::Atan),
    ("$atan2", TrigOp::Atan2),
    ("$sinh", TrigOp::Sinh),
    ("$cosh", TrigOp::Cosh),
    ("$tanh", TrigOp::Tanh),
    ("$asinh", TrigOp::Asinh),
    ("$acosh", TrigOp::Acosh),
    ("$atanh", TrigOp::Atanh),
    ("$degreesToRadians", TrigOp::DegreesToRadians),
    ("$radiansToDegrees", TrigOp::RadiansToDegrees),
];

/// A domain: lower and upper bound, and whether they are included.
pub(super) struct Domain(pub(super) f64, pub(super) f64, pub(super) bool);

impl TrigOp {
    /// The operator named `name`.
    pub fn from_name(name: &str) -> Option<TrigOp> {
        NAMES.iter().find(|(n, _)| *n == name).map(|(_, op)| *op)
    }

    /// Its name, with the `$`.
    pub fn name(self) -> &'static str {
        NAMES
            .iter()
            .find(|(_, op)| *op == self)
            .map_or("$trig", |(n, _)| n)
    }

    /// How many arguments it takes.
    pub fn arity(self) -> Arity {
        Arity::Exact(if self == TrigOp::Atan2 { 2 } else { 1 })
    }

    /// The arguments the function takes (50989 outside them); `None` for all numbers.
    pub(super) fn domain(self) -> Option<Domain> {
        let inf = f64::INFINITY;
        Some(match self {
            TrigOp::Sin | TrigOp::Cos | TrigOp::Tan => Domain(-inf, inf, false),
            TrigOp::Asin | TrigOp::Acos | TrigOp::Atanh => Domain(-1.0, 1.0, true),
            TrigOp::Acosh => Domain(1.0, inf, true),
            _ => return None,
        })
    }

    fn compute(self, x: f64) -> f64 {
        match self {
            TrigOp::Sin => x.sin(),
            TrigOp::Cos => x.cos(),
            TrigOp::Tan => x.tan(),
            TrigOp::Asin => x.asin(),
            TrigOp::Acos => x.acos(),
            TrigOp::Atan => x.atan(),
            TrigOp::Sinh => x.sinh(),
            TrigOp::Cosh => x.cosh(),
            TrigOp::Tanh => x.tanh(),
            TrigOp::Asinh => x.asinh(),
            TrigOp::Acosh => x.acosh(),
            TrigOp::Atanh => x.atanh(),
            TrigOp::DegreesToRadians => x * (std::f64::consts::PI / 180.0),
            TrigOp::RadiansToDegrees => x * (180.0 / std::f64::consts::PI),
            TrigOp::Atan2 => unreachable!("two arguments, computed in atan2"),
        }
    }
}

/// Evaluate `op` over its evaluated arguments.
pub(crate) fn apply<'a>(op: TrigOp, values: &[Value<'_>]) -> Result<Value<'a>, MongoError> {
    if op == TrigOp::Atan2 {
        return atan2(&values[0], &values[1]);
    }
    let Some(n) = single_number(op.name(), &values[0])? else {
        return Ok(Value::Owned(RawBson::Null));
    };
    let x = n.f64();
    if x.is_nan() {
        return Ok(Value::Owned(n.raw()));
    }
    if let Some(Domain(lo, hi, inclusive)) = op.domain() {
        let inside = if inclusive {
            x >= lo && x <= hi
        } else {
            x > lo && x < hi
        };
        if !inside {
            return Err(outside_domain(
                op,
                &cpp_double(x),
                Domain(lo, hi, inclusive),
            ));
        }
    }
    Ok(Value::Owned(RawBson::Double(op.compute(x))))
}

/// mongod's 50989 for an argument (`shown` as mongod prints it) outside `op`'s domain.
pub(crate) fn outside_domain(op: TrigOp, shown: &str, domain: Domain) -> MongoError {
    let Domain(lo, hi, inclusive) = domain;
    let (open, close) = if inclusive { ("[", "]") } else { ("(", ")") };
    error(
        ErrorCode::Location50989,
        format!(
            "cannot apply {} to {shown}, value must in {open}{},{}{close}",
            op.name(),
            cpp_double(lo),
            cpp_double(hi)
        ),
    )
}

fn atan2<'a>(y: &Value<'_>, x: &Value<'_>) -> Result<Value<'a>, MongoError> {
    let mut parts = [0.0; 2];
    for (i, (v, code)) in [(y, ErrorCode::Location51044), (x, ErrorCode::Location51045)]
        .into_iter()
        .enumerate()
    {
        if v.is_nullish() {
            return Ok(Value::Owned(RawBson::Null));
        }
        parts[i] = number(v)?
            .ok_or_else(|| {
                error(
                    code,
                    format!("$atan2 only supports numeric types, not {}", v.type_name()),
                )
            })?
            .f64();
    }
    Ok(Value::Owned(RawBson::Double(parts[0].atan2(parts[1]))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(op: TrigOp, args: Vec<RawBson>) -> Result<RawBson, MongoError> {
        let values: Vec<Value<'_>> = args.into_iter().map(Value::Owned).collect();
        apply(op, &values).map(|r| r.as_raw().map_or(RawBson::Null, |x| x.to_raw_bson()))
    }

    #[test]
    fn functions_give_doubles() {
        assert_eq!(
            run(TrigOp::Sin, vec![RawBson::Int32(0)]).unwrap(),
            RawBson::Double(0.0)
        );
        assert_eq!(
            run(TrigOp::Cos, vec![RawBson::Int64(0)]).unwrap(),
            RawBson::Double(1.0)
        );
        let d = run(
            TrigOp::RadiansToDegrees,
            vec![RawBson::Double(std::f64::consts::PI)],
        );
        assert_eq!(d.unwrap(), RawBson::Double(180.0));
        let a = run(TrigOp::Atan2, vec![RawBson::Int32(1), RawBson::Int32(1)]).unwrap();
        assert_eq!(a, RawBson::Double(std::f64::consts::FRAC_PI_4));
        assert_eq!(
            run(TrigOp::Tanh, vec![RawBson::Null]).unwrap(),
            RawBson::Null
        );
        assert_eq!(
            run(TrigOp::Atan2, vec![RawBson::Int32(1), RawBson::Null]).unwrap(),
            RawBson::Null
        );
        let nan = run(TrigOp::Acos, vec![RawBson::Double(f64::NAN)]).unwrap();
        assert!(matches!(nan, RawBson::Double(d) if d.is_nan()));
    }

    #[test]
    fn domains_are_checked() {
        let e = run(TrigOp::Acos, vec![RawBson::Int32(2)]).unwrap_err();
        assert_eq!(e.code, ErrorCode::Location50989);
        assert_eq!(e.message, "cannot apply $acos to 2, value must in [-1,1]");
        let e = run(TrigOp::Sin, vec![RawBson::Double(f64::INFINITY)]).unwrap_err();
        assert_eq!(
            e.message,
            "cannot apply $sin to inf, value must in (-inf,inf)"
        );
        let e = run(TrigOp::Acosh, vec![RawBson::Double(0.5)]).unwrap_err();
        assert_eq!(
            e.message,
            "cannot apply $acosh to 0.5, value must in [1,inf]"
        );
        assert!(run(TrigOp::Atanh, vec![RawBson::Int32(1)]).is_ok());
        let e = run(
            TrigOp::Atan2,
            vec![RawBson::String("a".into()), RawBson::Int32(1)],
        );
        assert_eq!(e.unwrap_err().code, ErrorCode::Location51044);
        let e = run(TrigOp::Sin, vec![RawBson::Boolean(true)]).unwrap_err();
        assert_eq!(e.message, "$sin only supports numeric types, not bool");
    }
}
