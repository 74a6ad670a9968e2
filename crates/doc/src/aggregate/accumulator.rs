//! `$group` accumulators: `$sum $avg $min $max $first $last $push $addToSet $count
//! $stdDevPop $stdDevSamp $mergeObjects`, parsed
//! from `{<op>: <expression>}` (unary: an array argument is 40237; `$count` takes `{}`, 14) and
//! folded one value at a time, with MongoDB 7.0's rules:
//! - `$sum`/`$avg` ignore non-numbers; `$sum` keeps the widest input type (int32 → int64 →
//!   double on overflow → decimal128), sums integers exactly, doubles with compensation and
//!   decimals in decimal128; a decimal input makes the result a decimal, mongod's
//!   `nonDecimalTotal.getDecimal() + decimalTotal` (the double total to 34 digits); `$avg` is a
//!   double, or a decimal (the decimal total divided by the count) when a decimal came in,
//!   null without numbers.
//! - `$min`/`$max` ignore missing, null and undefined and compare by MongoDB's order.
//! - `$first`/`$last` keep a missing value as null; `$push`/`$addToSet` skip missing values;
//!   `$addToSet` keeps the first of equal values (by MongoDB's equality) in arrival order.
//! - `$stdDevPop`/`$stdDevSamp` fold the numbers (Welford's running mean and squared
//!   deviations; other values ignored, decimals read as their nearest double, as mongod's
//!   `coerceToDouble`) into a double, null without numbers (or, for the sample form, with one).
//! - `$mergeObjects` merges documents in arrival order (a later field replaces an earlier one
//!   where it first stood), skips null and missing, and fails 40400 on anything else.

use std::collections::HashSet;

use bson::raw::RawBsonRef;
use bson::Bson;

use super::execute::approximate_size;
use crate::collation::value::collate;
use crate::collation::Collation;
use crate::compare::compare_values;
use crate::decimal::{self, DecOps};
use crate::keystring::encode_value_exact;
use crate::matcher::expr::Expr;
use crate::matcher::path::bson_error;
use crate::variables::Variables;
use crate::{ErrorCode, MongoError};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AccOp {
    Sum,
    Avg,
    Min,
    Max,
    First,
    Last,
    Push,
    AddToSet,
    StdDevPop,
    StdDevSamp,
    MergeObjects,
}

/// One output field of `$group`: an operator and the expression it folds.
#[derive(Debug, Clone)]
pub(crate) struct Accumulator {
    pub op: AccOp,
    pub arg: Expr,
}

/// Accumulators MongoDB 7.0 has that `$group` does not run yet.
const NOT_YET: &[&str] = &[
    "$accumulator",
    "$bottom",
    "$bottomN",
    "$firstN",
    "$lastN",
    "$maxN",
    "$median",
    "$minN",
    "$percentile",
    "$top",
    "$topN",
];

fn error(code: ErrorCode, message: impl Into<String>) -> MongoError {
    MongoError::new(code, message)
}

/// Parse the value of one `$group` output field.
pub(crate) fn parse(
    field: &str,
    spec: RawBsonRef<'_>,
    vars: &Variables,
) -> Result<Accumulator, MongoError> {
    let RawBsonRef::Document(d) = spec else {
        return Err(error(
            ErrorCode::Location40234,
            format!("The field '{field}' must be an accumulator object"),
        ));
    };
    let mut fields = d.iter();
    let (name, arg) = match (fields.next(), fields.next()) {
        (Some(first), None) => first.map_err(bson_error)?,
        _ => {
            return Err(error(
                ErrorCode::Location40238,
                format!("The field '{field}' must specify one accumulator"),
            ))
        }
    };
    let op = match name {
        "$sum" => AccOp::Sum,
        "$avg" => AccOp::Avg,
        "$min" => AccOp::Min,
        "$max" => AccOp::Max,
        "$first" => AccOp::First,
        "$last" => AccOp::Last,
        "$push" => AccOp::Push,
        "$addToSet" => AccOp::AddToSet,
        "$stdDevPop" => AccOp::StdDevPop,
        "$stdDevSamp" => AccOp::StdDevSamp,
        "$mergeObjects" => AccOp::MergeObjects,
        "$count" => return parse_count(arg),
        other if NOT_YET.contains(&other) => {
            return Err(error(
                ErrorCode::NotImplemented,
                format!("The {other} accumulator is not supported yet"),
            ))
        }
        other => {
            return Err(error(
                ErrorCode::Location15952,
                format!("unknown group operator '{other}'"),
            ))
        }
    };
    if matches!(arg, RawBsonRef::Array(_)) {
        return Err(error(
            ErrorCode::Location40237,
            format!("The {name} accumulator is a unary operator"),
        ));
    }
    Ok(Accumulator {
        op,
        arg: Expr::parse_in(arg, vars)?,
    })
}

/// `$count: {}` is `$sum: 1`.
fn parse_count(arg: RawBsonRef<'_>) -> Result<Accumulator, MongoError> {
    let empty = match arg {
        RawBsonRef::Document(d) => d.iter().next().is_none(),
        _ => false,
    };
    if !empty {
        return Err(error(
            ErrorCode::TypeMismatch,
            "$count takes no arguments, i.e. $count:{}",
        ));
    }
    Ok(Accumulator::sum_of_one())
}

impl Accumulator {
    pub(crate) fn sum_of_one() -> Accumulator {
        Accumulator {
            op: AccOp::Sum,
            arg: Expr::Literal(bson::RawBson::Int32(1)),
        }
    }
}

/// The widest numeric type a `$sum` has seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Width {
    Int,
    Long,
    Double,
    Decimal,
}

/// An exact integer total plus a compensated (Neumaier) double total.
#[derive(Debug, Clone)]
pub(crate) struct Sum {
    integers: i128,
    doubles: f64,
    compensation: f64,
    width: Width,
    count: u64,
    /// The decimal inputs' own total (mongod's `decimalTotal`), from the first decimal on.
    decimal: Option<dec::Decimal128>,
}

impl Sum {
    fn new() -> Sum {
        Sum {
            integers: 0,
            doubles: 0.0,
            compensation: 0.0,
            width: Width::Int,
            count: 0,
            decimal: None,
        }
    }

    fn add(&mut self, value: Option<&Bson>) -> Result<(), MongoError> {
        match value {
            Some(Bson::Int32(i)) => self.integers += i128::from(*i),
            Some(Bson::Int64(i)) => {
                self.integers += i128::from(*i);
                self.width = self.width.max(Width::Long);
            }
            Some(Bson::Double(d)) => {
                self.add_double(*d);
                self.width = Width::Double;
            }
            Some(Bson::Decimal128(d)) => {
                let before = self.decimal.unwrap_or_else(|| decimal::from_i64(0));
                let d = decimal::to_dec(d);
                self.decimal = Some(DecOps::default().add(before, d));
                self.width = Width::Decimal;
            }
            _ => return Ok(()),
        }
        self.count += 1;
        Ok(())
    }

    fn add_double(&mut self, x: f64) {
        let total = self.doubles + x;
        if total.is_finite() {
            self.compensation += if self.doubles.abs() >= x.abs() {
                (self.doubles - total) + x
            } else {
                (x - total) + self.doubles
            };
        }
        self.doubles = total;
    }

    fn as_f64(&self) -> f64 {
        let mut copy = self.clone();
        copy.add_double(self.integers as f64);
        if copy.doubles.is_finite() {
            copy.doubles + copy.compensation
        } else {
            copy.doubles
        }
    }

    #[allow(
        clippy::expect_used,
        reason = "each match arm's guard checked that the conversion succeeds"
    )]
    fn total(&self) -> Bson {
        match self.width {
            Width::Int if i32::try_from(self.integers).is_ok() => {
                Bson::Int32(i32::try_from(self.integers).expect("checked range"))
            }
            Width::Int | Width::Long if i64::try_from(self.integers).is_ok() => {
                Bson::Int64(i64::try_from(self.integers).expect("checked range"))
            }
            Width::Decimal => Bson::Decimal128(decimal::from_dec(self.decimal_total())),
            _ => Bson::Double(self.as_f64()),
        }
    }

    /// mongod's `nonDecimalTotal.getDecimal().add(decimalTotal)`: integers exactly when no
    /// double came in, else the compensated double total to 34 digits.
    fn decimal_total(&self) -> dec::Decimal128 {
        let mut ops = DecOps::default();
        let non_decimal = if self.doubles == 0.0 && self.compensation == 0.0 {
            decimal::from_i128(self.integers)
        } else {
            decimal::from_f64_34(self.as_f64())
        };
        ops.add(
            non_decimal,
            self.decimal.unwrap_or_else(|| decimal::from_i64(0)),
        )
    }

    /// `$avg` of a sum with a decimal input: the decimal total over the count.
    fn decimal_average(&self) -> Bson {
        let count = i64::try_from(self.count).unwrap_or(i64::MAX);
        let average = DecOps::default().div(self.decimal_total(), decimal::from_i64(count));
        Bson::Decimal128(decimal::from_dec(average))
    }
}

/// The running state of one accumulator in one group.
#[derive(Debug, Clone)]
pub(crate) enum State {
    Sum(Sum),
    Avg(Sum),
    Min(Option<Bson>),
    Max(Option<Bson>),
    First(Option<Bson>),
    Last(Option<Bson>),
    Push(Vec<Bson>),
    AddToSet(Vec<Bson>, HashSet<Vec<u8>>),
    /// Count, mean, sum of squared deviations; true for the sample form.
    StdDev(u64, f64, f64, bool),
    MergeObjects(bson::Document),
}

impl State {
    pub(crate) fn new(op: AccOp) -> State {
        match op {
            AccOp::Sum => State::Sum(Sum::new()),
            AccOp::Avg => State::Avg(Sum::new()),
            AccOp::Min => State::Min(None),
            AccOp::Max => State::Max(None),
            AccOp::First => State::First(None),
            AccOp::Last => State::Last(None),
            AccOp::Push => State::Push(Vec::new()),
            AccOp::AddToSet => State::AddToSet(Vec::new(), HashSet::new()),
            AccOp::StdDevPop => State::StdDev(0, 0.0, 0.0, false),
            AccOp::StdDevSamp => State::StdDev(0, 0.0, 0.0, true),
            AccOp::MergeObjects => State::MergeObjects(bson::Document::new()),
        }
    }

    /// Fold one evaluated argument (`None` = missing). Returns the bytes newly held.
    #[cfg(test)]
    pub(crate) fn add(&mut self, value: Option<Bson>) -> Result<usize, MongoError> {
        self.add_collated(value, None)
    }

    /// `add` under the command's collation: `$min`/`$max` compare and `$addToSet`
    /// deduplicates strings by it (the first value of a set of equal ones is kept).
    pub(crate) fn add_collated(
        &mut self,
        value: Option<Bson>,
        c: Option<&Collation>,
    ) -> Result<usize, MongoError> {
        let nullish = matches!(value, None | Some(Bson::Null) | Some(Bson::Undefined));
        match self {
            State::Sum(sum) | State::Avg(sum) => sum.add(value.as_ref()).map(|()| 0),
            State::Min(_) | State::Max(_) if nullish => Ok(0),
            State::Min(best) => Ok(keep_if(best, value, std::cmp::Ordering::Less, c)),
            State::Max(best) => Ok(keep_if(best, value, std::cmp::Ordering::Greater, c)),
            State::First(first) => Ok(match first {
                Some(_) => 0,
                None => {
                    let v = value.unwrap_or(Bson::Null);
                    let size = approximate_size(&v);
                    *first = Some(v);
                    size
                }
            }),
            State::Last(last) => {
                let v = value.unwrap_or(Bson::Null);
                let size = approximate_size(&v);
                *last = Some(v);
                Ok(size)
            }
            State::Push(items) => Ok(match value {
                Some(v) => {
                    let size = approximate_size(&v);
                    items.push(v);
                    size
                }
                None => 0,
            }),
            State::StdDev(n, mean, m2, _) => {
                let x = match value {
                    Some(Bson::Int32(i)) => f64::from(i),
                    Some(Bson::Int64(i)) => i as f64,
                    Some(Bson::Double(d)) => d,
                    Some(Bson::Decimal128(d)) => decimal::to_f64(decimal::to_dec(&d)),
                    _ => return Ok(0),
                };
                *n += 1;
                let delta = x - *mean;
                *mean += delta / *n as f64;
                *m2 += delta * (x - *mean);
                Ok(0)
            }
            State::MergeObjects(_) if nullish => Ok(0),
            State::MergeObjects(merged) => match value {
                Some(Bson::Document(d)) => {
                    let size = approximate_size(&Bson::Document(d.clone()));
                    for (k, v) in d {
                        merged.insert(k, v);
                    }
                    Ok(size)
                }
                Some(other) => Err(error(
                    ErrorCode::Location40400,
                    format!(
                        "$mergeObjects requires object inputs, but input {other} is of type {}",
                        crate::update::render::type_name(&other)
                    ),
                )),
                None => Ok(0),
            },
            State::AddToSet(items, seen) => Ok(match value {
                Some(v) => {
                    let mut key = Vec::new();
                    encode_value_exact(&collate(c, &v), &mut key);
                    if seen.insert(key) {
                        let size = approximate_size(&v);
                        items.push(v);
                        size
                    } else {
                        0
                    }
                }
                None => 0,
            }),
        }
    }

    /// The accumulated value; null where nothing was accumulated (`$avg`, `$min`, ...).
    pub(crate) fn finish(self) -> Bson {
        match self {
            State::Sum(sum) => sum.total(),
            State::Avg(sum) if sum.count == 0 => Bson::Null,
            State::Avg(sum) if sum.width == Width::Decimal => sum.decimal_average(),
            State::Avg(sum) => Bson::Double(sum.as_f64() / sum.count as f64),
            State::Min(v) | State::Max(v) | State::First(v) | State::Last(v) => {
                v.unwrap_or(Bson::Null)
            }
            State::Push(items) | State::AddToSet(items, _) => Bson::Array(items),
            State::StdDev(n, _, m2, sample) => {
                let divisor = if sample { n.saturating_sub(1) } else { n };
                if divisor == 0 {
                    Bson::Null
                } else {
                    Bson::Double((m2 / divisor as f64).sqrt())
                }
            }
            State::MergeObjects(d) => Bson::Document(d),
        }
    }
}

/// Replace `best` with `value` when `value` orders `wanted` against it (or nothing is kept).
fn keep_if(
    best: &mut Option<Bson>,
    value: Option<Bson>,
    wanted: std::cmp::Ordering,
    c: Option<&Collation>,
) -> usize {
    let Some(value) = value else { return 0 };
    let replace = match best {
        None => true,
        Some(current) => compare_values(&collate(c, &value), &collate(c, current)) == wanted,
    };
    if !replace {
        return 0;
    }
    let size = approximate_size(&value);
    *best = Some(value);
    size
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fold(op: AccOp, values: Vec<Option<Bson>>) -> Bson {
        let mut state = State::new(op);
        for v in values {
            state.add(v).expect("folds");
        }
        state.finish()
    }

    #[test]
    fn standard_deviations_and_merged_objects() {
        let nums = || {
            vec![
                Some(Bson::Int32(2)),
                Some(Bson::Int32(4)),
                Some(Bson::Int64(4)),
                Some(Bson::Int32(4)),
                Some(Bson::Int32(5)),
                Some(Bson::Int32(5)),
                Some(Bson::Double(7.0)),
                Some(Bson::Int32(9)),
                Some(Bson::String("x".into())),
                None,
            ]
        };
        assert_eq!(fold(AccOp::StdDevPop, nums()), Bson::Double(2.0));
        let Bson::Double(samp) = fold(AccOp::StdDevSamp, nums()) else {
            panic!("a double")
        };
        assert!((samp - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
        assert_eq!(fold(AccOp::StdDevPop, vec![]), Bson::Null);
        assert_eq!(
            fold(AccOp::StdDevSamp, vec![Some(Bson::Int32(1))]),
            Bson::Null
        );
        let merged = fold(
            AccOp::MergeObjects,
            vec![
                Some(Bson::Document(bson::doc! {"a": 1, "b": 1})),
                Some(Bson::Null),
                None,
                Some(Bson::Document(bson::doc! {"c": 3, "a": 2})),
            ],
        );
        assert_eq!(merged, Bson::Document(bson::doc! {"a": 2, "b": 1, "c": 3}));
        let mut state = State::new(AccOp::MergeObjects);
        assert_eq!(
            state.add(Some(Bson::Int32(1))).unwrap_err().code.code(),
            40400
        );
    }

    #[test]
    fn decimal_inputs_make_decimal_sums_and_averages() {
        let d = |s: &str| Some(Bson::Decimal128(s.parse().expect("literal")));
        let shown = |b: Bson| match b {
            Bson::Decimal128(x) => format!("dec {x}"),
            other => format!("{other:?}"),
        };
        let i = |n| Some(Bson::Int32(n));
        assert_eq!(
            shown(fold(AccOp::Sum, vec![d("1.10"), d("2.205")])),
            "dec 3.305"
        );
        assert_eq!(
            shown(fold(AccOp::Sum, vec![i(1), d("2.5"), None])),
            "dec 3.5"
        );
        assert_eq!(
            shown(fold(
                AccOp::Sum,
                vec![Some(Bson::Double(0.5)), i(1), d("2.5")]
            )),
            "dec 4.0"
        );
        assert_eq!(
            shown(fold(
                AccOp::Sum,
                vec![Some(Bson::Int64(i64::MAX)), i(1), d("0")]
            )),
            "dec 9223372036854775808"
        );
        assert_eq!(shown(fold(AccOp::Avg, vec![i(1), i(2), d("3")])), "dec 2");
        assert_eq!(shown(fold(AccOp::Avg, vec![d("1"), d("2")])), "dec 1.5");
        assert_eq!(shown(fold(AccOp::Avg, vec![d("1"), d("2"), i(0)])), "dec 1");
        // $stdDev* read decimals as doubles and answer a double, as mongod.
        assert_eq!(
            fold(AccOp::StdDevPop, vec![d("1"), d("3")]),
            Bson::Double(1.0)
        );
    }

    #[test]
    fn sum_widens_and_ignores_non_numbers() {
        let int = |i: i32| Some(Bson::Int32(i));
        assert_eq!(fold(AccOp::Sum, vec![int(1), int(2)]), Bson::Int32(3));
        assert_eq!(fold(AccOp::Sum, vec![]), Bson::Int32(0));
        assert_eq!(
            fold(AccOp::Sum, vec![int(i32::MAX), int(1)]),
            Bson::Int64(i64::from(i32::MAX) + 1)
        );
        assert_eq!(
            fold(AccOp::Sum, vec![Some(Bson::Int64(i64::MAX)), int(1)]),
            Bson::Double(i64::MAX as f64 + 1.0)
        );
        assert_eq!(
            fold(
                AccOp::Sum,
                vec![
                    int(1),
                    Some(Bson::Double(0.5)),
                    Some(Bson::String("x".into())),
                    None
                ]
            ),
            Bson::Double(1.5)
        );
        assert_eq!(
            fold(AccOp::Sum, vec![Some(Bson::Double(0.1)); 10]),
            Bson::Double(1.0)
        );
    }

    #[test]
    fn avg_min_max_first_last() {
        let int = |i: i32| Some(Bson::Int32(i));
        assert_eq!(
            fold(AccOp::Avg, vec![int(1), int(2), None]),
            Bson::Double(1.5)
        );
        assert_eq!(fold(AccOp::Avg, vec![None]), Bson::Null);
        assert_eq!(
            fold(
                AccOp::Min,
                vec![
                    Some(Bson::Null),
                    int(3),
                    Some(Bson::String("a".into())),
                    int(2)
                ]
            ),
            Bson::Int32(2)
        );
        assert_eq!(
            fold(AccOp::Max, vec![int(3), Some(Bson::String("a".into()))]),
            Bson::String("a".into())
        );
        assert_eq!(fold(AccOp::Max, vec![None, Some(Bson::Null)]), Bson::Null);
        assert_eq!(fold(AccOp::First, vec![None, int(1)]), Bson::Null);
        assert_eq!(fold(AccOp::Last, vec![int(1), int(2)]), Bson::Int32(2));
    }

    #[test]
    fn push_and_add_to_set() {
        let v = vec![
            Some(Bson::Int32(1)),
            None,
            Some(Bson::Double(1.0)),
            Some(Bson::Int32(2)),
        ];
        assert_eq!(
            fold(AccOp::Push, v.clone()),
            Bson::Array(vec![Bson::Int32(1), Bson::Double(1.0), Bson::Int32(2)])
        );
        assert_eq!(
            fold(AccOp::AddToSet, v),
            Bson::Array(vec![Bson::Int32(1), Bson::Int32(2)])
        );
    }
}
