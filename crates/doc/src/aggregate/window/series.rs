//! The window functions over a window's series of values, parsed and computed as mongod
//! 7.0's are: `$covariancePop`/`$covarianceSamp` of `[x, y]` pairs (pairs not both numbers
//! skipped; null without pairs, the sample form with one), `$derivative` (rise over run
//! between the window's ends by the `sortBy` value, a date's in `unit`s; 5624900-5624903;
//! null for one document) and `$integral` (the trapezoidal rule over the window; 5423900-
//! 5423902), both `{input, unit?}` with `unit` week or shorter (5490710) and a one-field
//! `sortBy`; `$firstN`/`$lastN` (missing as null) and `$minN`/`$maxN` (nullish values
//! skipped) as `{input, n}` with a constant `n` (5787801, 5787900-5787908). A non-constant `n`
//! is refused with `NotImplemented` (238). Pure: values in, values out.

use crate::compare::number_as_f64;
use bson::raw::{RawBsonRef, RawDocument};
use bson::Bson;

use super::super::execute::{approximate_size, MemoryBudget};
use super::super::sort::SortSpec;
use super::bounds::{self, endpoints, WHOLE_PARTITION};
use super::function::{Op, WindowFunction};
use crate::collation::value::collate;
use crate::collation::Collation;
use crate::compare::compare_values;
use crate::matcher::expr::Expr;
use crate::matcher::path::bson_error;
use crate::update::render::type_name;
use crate::variables::Variables;
use crate::{ErrorCode, MongoError};

/// Which of the N functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Take {
    First,
    Last,
    Min,
    Max,
}

fn parse_error(message: impl Into<String>) -> MongoError {
    MongoError::new(ErrorCode::FailedToParse, message)
}

/// `{$derivative | $integral: {input, unit?}, window?}`.
pub(crate) fn parse_rate(
    d: &RawDocument,
    name: &str,
    sort_by: Option<&SortSpec>,
    vars: &Variables,
) -> Result<WindowFunction, MongoError> {
    match sort_by.map(SortSpec::single_key) {
        None => return Err(parse_error(format!("{name} requires a sortBy"))),
        Some(None) => {
            return Err(parse_error(format!(
                "{name} requires a non-compound sortBy"
            )))
        }
        Some(Some(_)) => {}
    }
    let (mut window, mut args) = (None, None);
    for item in d {
        let (arg, value) = item.map_err(bson_error)?;
        match arg {
            "window" => window = Some(bounds::parse(value, sort_by)?),
            a if a == name => args = Some(value),
            other => {
                return Err(parse_error(format!(
                    "{name} got unexpected argument: {other}"
                )))
            }
        }
    }
    let Some(RawBsonRef::Document(args)) = args else {
        return Err(parse_error(format!("{name} expects an object")));
    };
    let (mut input, mut unit_millis) = (None, None);
    for item in args {
        let (arg, value) = item.map_err(bson_error)?;
        match (arg, value) {
            ("input", v) => input = Some(Expr::parse_in(v, vars)?),
            ("unit", RawBsonRef::String(u)) => unit_millis = Some(unit_of(u)?),
            ("unit", v) => {
                return Err(parse_error(format!(
                    "unit' must be a string, but got {}",
                    super::super::simple::type_name(v)
                )))
            }
            (other, _) => {
                return Err(parse_error(format!(
                    "{name} got unexpected argument: {other}"
                )))
            }
        }
    }
    let input =
        input.ok_or_else(|| parse_error(format!("{name} requires an 'input' expression")))?;
    let op = if name == "$derivative" {
        let Some(_) = window else {
            return Err(parse_error("$derivative requires explicit window bounds"));
        };
        Op::Derivative { unit_millis }
    } else {
        Op::Integral { unit_millis }
    };
    Ok(WindowFunction {
        op,
        input,
        window: window.unwrap_or(WHOLE_PARTITION),
    })
}

/// A unit's length in milliseconds: week or shorter.
fn unit_of(name: &str) -> Result<i64, MongoError> {
    match name {
        "year" | "quarter" | "month" => Err(MongoError::new(
            ErrorCode::Location5490710,
            "unit must be 'week' or smaller",
        )),
        "week" => Ok(604_800_000),
        "day" => Ok(86_400_000),
        "hour" => Ok(3_600_000),
        "minute" => Ok(60_000),
        "second" => Ok(1000),
        "millisecond" => Ok(1),
        other => Err(parse_error(format!("unknown time unit value: {other}"))),
    }
}

/// `{$firstN | $lastN | $minN | $maxN: {input, n}, window?}`.
pub(crate) fn parse_n(
    d: &RawDocument,
    name: &str,
    sort_by: Option<&SortSpec>,
    vars: &Variables,
) -> Result<WindowFunction, MongoError> {
    let take = match name {
        "$firstN" => Take::First,
        "$lastN" => Take::Last,
        "$minN" => Take::Min,
        _ => Take::Max,
    };
    let (window, args) = bounds::window_and_argument(d, name, sort_by)?;
    let Some(RawBsonRef::Document(args)) = args else {
        let code = match take {
            Take::Min | Take::Max => ErrorCode::Location5787900,
            Take::First | Take::Last => ErrorCode::Location5787801,
        };
        return Err(MongoError::new(code, "specification must be an object"));
    };
    let (mut n, mut input) = (None, None);
    for item in args {
        let (arg, value) = item.map_err(bson_error)?;
        match arg {
            "n" => n = Some(value),
            "input" => input = Some(Expr::parse_in(value, vars)?),
            other => {
                return Err(MongoError::new(
                    ErrorCode::Location5787901,
                    format!("Unknown argument for 'n' operator: {other}"),
                ))
            }
        }
    }
    let n =
        n.ok_or_else(|| MongoError::new(ErrorCode::Location5787906, "Missing value for 'n'"))?;
    let input = input
        .ok_or_else(|| MongoError::new(ErrorCode::Location5787907, "Missing value for 'input'"))?;
    Ok(WindowFunction {
        op: Op::TakeN { take, n: count(n)? },
        input,
        window,
    })
}

/// `n`: a constant positive whole number.
pub(super) fn count(value: RawBsonRef<'_>) -> Result<usize, MongoError> {
    let number = match value {
        RawBsonRef::Int32(i) => f64::from(i),
        RawBsonRef::Int64(i) => i as f64,
        RawBsonRef::Double(d) => d,
        RawBsonRef::Decimal128(d) => crate::compare::decimal128_to_f64(&d),
        RawBsonRef::Document(_) | RawBsonRef::Array(_) | RawBsonRef::String(_) => {
            return Err(MongoError::new(
                ErrorCode::NotImplemented,
                "a window function's 'n' other than a constant number is not supported yet",
            ))
        }
        other => {
            return Err(MongoError::new(
                ErrorCode::Location5787902,
                format!(
                    "Value for 'n' must be of integral type, but found {}",
                    super::super::simple::render(other)
                ),
            ))
        }
    };
    if number.fract() != 0.0 || !number.is_finite() {
        return Err(MongoError::new(
            ErrorCode::Location5787903,
            format!("Value for 'n' must be of integral type, but found {number}"),
        ));
    }
    if number <= 0.0 {
        return Err(MongoError::new(
            ErrorCode::Location5787908,
            format!("'n' must be greater than 0, found {number}"),
        ));
    }
    Ok(if number >= usize::MAX as f64 {
        usize::MAX
    } else {
        number as usize
    })
}

/// Each row's value of a series function.
pub(crate) fn compute(
    f: &WindowFunction,
    inputs: &[Option<Bson>],
    sort_values: &[Option<Bson>],
    collation: Option<&Collation>,
    budget: &mut MemoryBudget,
) -> Result<Vec<Option<Bson>>, MongoError> {
    let mut out = Vec::with_capacity(inputs.len());
    for at in 0..inputs.len() {
        let window = endpoints(f.window, at, inputs.len(), sort_values)?;
        let value = match (&f.op, window) {
            (Op::Covariance { sample }, w) => {
                covariance(w.map_or(&[][..], |(lo, hi)| &inputs[lo..=hi]), *sample)
            }
            (Op::Derivative { .. }, None) | (Op::Integral { .. }, None) => Bson::Null,
            (Op::Derivative { unit_millis }, Some((lo, hi))) => derivative(
                (&sort_values[lo], &inputs[lo]),
                (&sort_values[hi], &inputs[hi]),
                *unit_millis,
            )?,
            (Op::Integral { unit_millis }, Some((lo, hi))) => {
                integral(&sort_values[lo..=hi], &inputs[lo..=hi], *unit_millis)?
            }
            (Op::TakeN { take, n }, w) => {
                let values = w.map_or(&[][..], |(lo, hi)| &inputs[lo..=hi]);
                Bson::Array(take_n(*take, *n, values, collation))
            }
            _ => Bson::Null,
        };
        budget.charge(approximate_size(&value))?;
        out.push(Some(value));
    }
    Ok(out)
}

fn covariance(values: &[Option<Bson>], sample: bool) -> Bson {
    let pairs: Vec<(f64, f64)> = values
        .iter()
        .filter_map(|v| match v {
            Some(Bson::Array(a)) if a.len() == 2 => {
                Some((number_as_f64(&a[0])?, number_as_f64(&a[1])?))
            }
            _ => None,
        })
        .collect();
    let n = pairs.len() as f64;
    if pairs.len() == 1 && !sample {
        return Bson::Double(0.0);
    }
    let divisor = if sample { n - 1.0 } else { n };
    if divisor <= 0.0 {
        return Bson::Null;
    }
    let mean_x = pairs.iter().map(|p| p.0).sum::<f64>() / n;
    let mean_y = pairs.iter().map(|p| p.1).sum::<f64>() / n;
    let c: f64 = pairs.iter().map(|(x, y)| (x - mean_x) * (y - mean_y)).sum();
    Bson::Double(c / divisor)
}

/// A sort value as a time: a date's milliseconds with a unit, a number without one.
fn time_of(
    v: &Option<Bson>,
    unit: Option<i64>,
    codes: (ErrorCode, ErrorCode, ErrorCode),
) -> Result<f64, MongoError> {
    let (date_needed, unit_needed, number_needed) = codes;
    match (v, unit) {
        (Some(Bson::DateTime(d)), Some(_)) => Ok(d.timestamp_millis() as f64),
        (_, Some(_)) => Err(MongoError::new(
            date_needed,
            "expects the sortBy field to be a Date",
        )),
        (Some(Bson::DateTime(_)), None) => Err(MongoError::new(
            unit_needed,
            "where the sortBy is a Date requires an 'unit'",
        )),
        (Some(v), None) => number_as_f64(v).ok_or_else(|| {
            MongoError::new(
                number_needed,
                "(with no 'unit') expects the sortBy field to be numeric",
            )
        }),
        (None, None) => Err(MongoError::new(
            number_needed,
            "(with no 'unit') expects the sortBy field to be numeric",
        )),
    }
}

fn derivative(
    (x1, y1): (&Option<Bson>, &Option<Bson>),
    (x2, y2): (&Option<Bson>, &Option<Bson>),
    unit: Option<i64>,
) -> Result<Bson, MongoError> {
    let codes = (
        ErrorCode::Location5624900,
        ErrorCode::Location5624901,
        ErrorCode::Location5624902,
    );
    let with = |e: MongoError| MongoError::new(e.code, format!("$derivative {}", e.message));
    let run = time_of(x2, unit, codes).map_err(with)? - time_of(x1, unit, codes).map_err(with)?;
    let rise = match (y2, y1) {
        (None | Some(Bson::Null | Bson::Undefined), _)
        | (_, None | Some(Bson::Null | Bson::Undefined)) => {
            return Err(MongoError::new(
                ErrorCode::Location5624903,
                "$derivative input must not be null or missing",
            ))
        }
        (Some(b), Some(a)) => match (number_as_f64(b), number_as_f64(a)) {
            (Some(b), Some(a)) => b - a,
            _ => {
                return Err(MongoError::new(
                    ErrorCode::Location16556,
                    format!("cant $subtract a {} from a {}", type_name(a), type_name(b)),
                ))
            }
        },
    };
    if run == 0.0 {
        return Ok(Bson::Null);
    }
    Ok(Bson::Double(rise / run * unit.map_or(1.0, |u| u as f64)))
}

fn integral(
    xs: &[Option<Bson>],
    ys: &[Option<Bson>],
    unit: Option<i64>,
) -> Result<Bson, MongoError> {
    let codes = (
        ErrorCode::Location5423901,
        ErrorCode::Location5423902,
        ErrorCode::Location5423902,
    );
    let mut points = Vec::with_capacity(xs.len());
    for (x, y) in xs.iter().zip(ys) {
        let shape_ok = y.as_ref().and_then(number_as_f64).is_some()
            && matches!(x, Some(v) if number_as_f64(v).is_some() || matches!(v, Bson::DateTime(_)));
        if !shape_ok {
            return Err(MongoError::new(
                ErrorCode::Location5423900,
                "The input value of $integral window function must be a vector of 2 value, the \
                 first value must be numeric or date type and the second must be numeric.",
            ));
        }
        let x = time_of(x, unit, codes)
            .map_err(|e| MongoError::new(e.code, format!("$integral {}", e.message)))?;
        points.push((x, y.as_ref().and_then(number_as_f64).unwrap_or(0.0)));
    }
    if points.len() < 2 {
        return Ok(match unit {
            Some(_) => Bson::Double(0.0),
            None => Bson::Int32(0),
        });
    }
    let area: f64 = points
        .windows(2)
        .map(|w| (w[0].1 + w[1].1) * (w[1].0 - w[0].0) / 2.0)
        .sum();
    Ok(Bson::Double(area / unit.map_or(1.0, |u| u as f64)))
}

fn take_n(
    take: Take,
    n: usize,
    values: &[Option<Bson>],
    collation: Option<&Collation>,
) -> Vec<Bson> {
    match take {
        Take::First => values
            .iter()
            .take(n)
            .map(|v| v.clone().unwrap_or(Bson::Null))
            .collect(),
        Take::Last => {
            let skip = values.len().saturating_sub(n);
            values[skip..]
                .iter()
                .map(|v| v.clone().unwrap_or(Bson::Null))
                .collect()
        }
        Take::Min | Take::Max => {
            let mut kept: Vec<&Bson> = values
                .iter()
                .flatten()
                .filter(|v| !matches!(v, Bson::Null | Bson::Undefined))
                .collect();
            kept.sort_by(|a, b| {
                let ord = compare_values(&collate(collation, a), &collate(collation, b));
                if take == Take::Max {
                    ord.reverse()
                } else {
                    ord
                }
            });
            kept.into_iter().take(n).cloned().collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ints(xs: &[i32]) -> Vec<Option<Bson>> {
        xs.iter().map(|x| Some(Bson::Int32(*x))).collect()
    }

    #[test]
    fn covariance_of_pairs() {
        let pair = |x: i32, y: i32| Some(Bson::Array(vec![Bson::Int32(x), Bson::Int32(y)]));
        let values = vec![
            pair(1, 2),
            pair(2, 4),
            pair(3, 6),
            Some(Bson::String("x".into())),
        ];
        // Means 2 and 4; products (-1)(-2) + 0 + (1)(2) = 4.
        assert_eq!(covariance(&values, false), Bson::Double(4.0 / 3.0));
        assert_eq!(covariance(&values, true), Bson::Double(2.0));
        assert_eq!(covariance(&values[..1], false), Bson::Double(0.0));
        assert_eq!(covariance(&values[..1], true), Bson::Null);
        assert_eq!(covariance(&[], false), Bson::Null);
    }

    #[test]
    fn derivative_and_integral_by_sort_value() {
        let t = ints(&[0, 2, 6]);
        let y = ints(&[0, 10, 30]);
        assert_eq!(
            derivative((&t[0], &y[0]), (&t[2], &y[2]), None).expect("d"),
            Bson::Double(5.0)
        );
        assert_eq!(
            derivative((&t[1], &y[1]), (&t[1], &y[1]), None).expect("d"),
            Bson::Null
        );
        let e = derivative((&t[0], &None), (&t[1], &y[1]), None).unwrap_err();
        assert_eq!(e.code.code(), 5624903);
        // Trapezoids: (0+10)*2/2 + (10+30)*4/2 = 10 + 80.
        assert_eq!(integral(&t, &y, None).expect("i"), Bson::Double(90.0));
        assert_eq!(integral(&t[..1], &y[..1], None).expect("i"), Bson::Int32(0));
        let hour = |h: i64| Some(Bson::DateTime(bson::DateTime::from_millis(h * 3_600_000)));
        let dates = vec![hour(0), hour(2)];
        assert_eq!(
            integral(&dates, &y[..2], Some(3_600_000)).expect("i"),
            Bson::Double(10.0)
        );
        assert_eq!(
            integral(&dates, &y[..2], None).unwrap_err().code.code(),
            5423902
        );
        assert_eq!(
            integral(&t[..2], &y[..2], Some(1000))
                .unwrap_err()
                .code
                .code(),
            5423901
        );
        let strings = vec![Some(Bson::String("a".into()))];
        assert_eq!(
            integral(&t[..1], &strings, None).unwrap_err().code.code(),
            5423900
        );
    }

    #[test]
    fn n_functions_keep_order_or_rank() {
        let mut v = ints(&[3, 1, 2]);
        v.insert(1, None);
        v.push(Some(Bson::Null));
        let take = |t, n| take_n(t, n, &v, None);
        assert_eq!(take(Take::First, 2), vec![Bson::Int32(3), Bson::Null]);
        assert_eq!(take(Take::Last, 2), vec![Bson::Int32(2), Bson::Null]);
        assert_eq!(take(Take::Min, 2), vec![Bson::Int32(1), Bson::Int32(2)]);
        assert_eq!(
            take(Take::Max, 5),
            vec![Bson::Int32(3), Bson::Int32(2), Bson::Int32(1)]
        );
        assert_eq!(
            count(RawBsonRef::Int32(0)).unwrap_err().code.code(),
            5787908
        );
        assert_eq!(
            count(RawBsonRef::Double(1.5)).unwrap_err().code.code(),
            5787903
        );
        assert_eq!(
            count(RawBsonRef::Boolean(true)).unwrap_err().code.code(),
            5787902
        );
        assert_eq!(
            count(RawBsonRef::String("$n")).unwrap_err().code,
            ErrorCode::NotImplemented
        );
    }
}
