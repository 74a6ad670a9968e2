//! The values one window function gives the documents of one sorted partition, as mongod
//! 7.0's window function executors give them: accumulators folded over each document's
//! window (an expanding window extends the previous fold instead of starting again; an
//! empty window gives the accumulator's value over nothing: 0, null or `[]`), `$first` /
//! `$last` the input at the window's ends (null for an empty window; a missing input leaves
//! the field unset), `$shift` the input `by` documents away or its default, the ranks from
//! the one `sortBy` value (nullish values tie), `$locf` the last non-null input,
//! `$linearFill` the line between the non-null neighbours (TypeMismatch 14, 6050106 for a
//! repeated sort value), `$expMovingAvg` its running average; the series functions and
//! `$top`/`$bottom` are handed to `series.rs` and `top_bottom.rs`. Decimal128 inputs to the
//! functions computed in doubles are refused (238). It never sorts or partitions.

use crate::compare::number_as_f64;
use std::cmp::Ordering;

use bson::raw::RawDocumentBuf;
use bson::Bson;

use super::super::accumulator::State;
use super::super::execute::{approximate_size, value_to_bson, MemoryBudget};
use super::bounds::endpoints;
use super::function::{Op, WindowFunction};
use crate::collation::Collation;
use crate::compare::compare_values;
use crate::update::render::type_name;
use crate::{ErrorCode, MongoError};

/// One document of a sorted partition with the values the stage sorted and ranks it by.
pub(crate) struct Row {
    pub doc: RawDocumentBuf,
    /// The `sortBy` key (collated), empty without a `sortBy`.
    pub sort_key: Vec<bson::Bson>,
    /// The one `sortBy` field's value as an expression reads it (`None` when missing), for
    /// range windows and `$linearFill`.
    pub sort_value: Option<Bson>,
}

/// Each row's output (`None`: leave the field unset), in row order.
pub(crate) fn compute(
    f: &WindowFunction,
    rows: &[Row],
    collation: Option<&Collation>,
    budget: &mut MemoryBudget,
) -> Result<Vec<Option<Bson>>, MongoError> {
    match &f.op {
        Op::Rank => Ok(ranks(rows, false)),
        Op::DenseRank => Ok(ranks(rows, true)),
        Op::DocumentNumber => Ok((1..=rows.len()).map(|n| Some(int_or_long(n))).collect()),
        op => {
            let inputs = rows
                .iter()
                .map(|r| value_to_bson(&f.input.evaluate(&r.doc)?))
                .collect::<Result<Vec<_>, _>>()?;
            let charged: usize = inputs.iter().flatten().map(approximate_size).sum();
            budget.charge(charged)?;
            let sort_values: Vec<Option<Bson>> =
                rows.iter().map(|r| r.sort_value.clone()).collect();
            if arithmetic(op) {
                refuse_decimals(&inputs)?;
                refuse_decimals(&sort_values)?;
            }
            // Functions whose values can each hold a window's worth charge them as they are
            // made; the others' values are charged once made (no more than the input).
            let charged_as_made = match op {
                Op::Fold(_) => return fold(f, &inputs, &sort_values, collation, budget),
                Op::Covariance { .. }
                | Op::Derivative { .. }
                | Op::Integral { .. }
                | Op::TakeN { .. } => {
                    return super::series::compute(f, &inputs, &sort_values, collation, budget)
                }
                Op::TopBottom { .. } => {
                    return super::top_bottom::compute(f, rows, &inputs, &sort_values, budget)
                }
                Op::First | Op::Last => ends(f, &inputs, &sort_values)?,
                Op::Shift { by, default } => shift(&inputs, *by, default),
                Op::Locf => locf(&inputs),
                Op::LinearFill => linear_fill(&inputs, &sort_values)?,
                Op::ExpMovingAvg { alpha } => exp_moving_avg(&inputs, *alpha),
                Op::Rank | Op::DenseRank | Op::DocumentNumber => Vec::new(),
            };
            budget.charge(charged_as_made.iter().flatten().map(approximate_size).sum())?;
            Ok(charged_as_made)
        }
    }
}

/// The functions computed here in doubles, where mongod computes decimal128 inputs exactly.
fn arithmetic(op: &Op) -> bool {
    matches!(
        op,
        Op::LinearFill
            | Op::ExpMovingAvg { .. }
            | Op::Covariance { .. }
            | Op::Derivative { .. }
            | Op::Integral { .. }
    )
}

/// A decimal128 input (or one inside a `[x, y]` pair) is refused rather than rounded.
fn refuse_decimals(values: &[Option<Bson>]) -> Result<(), MongoError> {
    let decimal = |v: &Bson| match v {
        Bson::Decimal128(_) => true,
        Bson::Array(items) => items.iter().any(|i| matches!(i, Bson::Decimal128(_))),
        _ => false,
    };
    if values.iter().flatten().any(decimal) {
        return Err(MongoError::new(
            ErrorCode::NotImplemented,
            "decimal128 values in $linearFill, $expMovingAvg, $covariancePop/Samp, $derivative \
             and $integral are not supported yet",
        ));
    }
    Ok(())
}

fn int_or_long(n: usize) -> Bson {
    match i32::try_from(n) {
        Ok(i) => Bson::Int32(i),
        Err(_) => Bson::Int64(i64::try_from(n).unwrap_or(i64::MAX)),
    }
}

/// The accumulator over each window; a window sharing the previous one's start and reaching
/// at least as far extends the previous fold.
fn fold(
    f: &WindowFunction,
    inputs: &[Option<Bson>],
    sort_values: &[Option<Bson>],
    collation: Option<&Collation>,
    budget: &mut MemoryBudget,
) -> Result<Vec<Option<Bson>>, MongoError> {
    let Op::Fold(acc) = f.op else {
        return Ok(Vec::new());
    };
    let mut out = Vec::with_capacity(inputs.len());
    let mut running: Option<(usize, usize, State)> = None;
    for at in 0..inputs.len() {
        let Some((lo, hi)) = endpoints(f.window, at, inputs.len(), sort_values)? else {
            out.push(Some(State::new(acc).finish()));
            continue;
        };
        let (from, mut state) = match running.take() {
            Some((start, end, state)) if start == lo && end <= hi => (end + 1, state),
            _ => (lo, State::new(acc)),
        };
        for value in &inputs[from..=hi] {
            state.add_collated(value.clone(), collation)?;
        }
        let value = state.clone().finish();
        budget.charge(approximate_size(&value))?;
        out.push(Some(value));
        running = Some((lo, hi, state));
    }
    Ok(out)
}

fn ends(
    f: &WindowFunction,
    inputs: &[Option<Bson>],
    sort_values: &[Option<Bson>],
) -> Result<Vec<Option<Bson>>, MongoError> {
    (0..inputs.len())
        .map(|at| {
            Ok(match endpoints(f.window, at, inputs.len(), sort_values)? {
                None => Some(Bson::Null),
                Some((lo, hi)) => {
                    let end = if f.op == Op::First { lo } else { hi };
                    inputs[end].clone()
                }
            })
        })
        .collect()
}

fn shift(inputs: &[Option<Bson>], by: i64, default: &Bson) -> Vec<Option<Bson>> {
    (0..inputs.len())
        .map(|at| {
            let target = i64::try_from(at).ok().and_then(|a| a.checked_add(by));
            match target.and_then(|t| usize::try_from(t).ok()) {
                Some(t) if t < inputs.len() => inputs[t].clone(),
                _ => Some(default.clone()),
            }
        })
        .collect()
}

fn is_nullish(v: &Option<Bson>) -> bool {
    matches!(v, None | Some(Bson::Null) | Some(Bson::Undefined))
}

/// `$rank` (ties share the first position), `$denseRank` (ties share one number).
fn ranks(rows: &[Row], dense: bool) -> Vec<Option<Bson>> {
    let mut out = Vec::with_capacity(rows.len());
    let mut rank = 0usize;
    for (i, row) in rows.iter().enumerate() {
        let same = i > 0 && same_rank_value(&rows[i - 1].sort_key, &row.sort_key);
        if !same {
            rank = if dense { rank + 1 } else { i + 1 };
        }
        out.push(Some(int_or_long(rank)));
    }
    out
}

fn same_rank_value(a: &[Bson], b: &[Bson]) -> bool {
    match (a.first(), b.first()) {
        (Some(x), Some(y)) => {
            let nullish = |v: &Bson| matches!(v, Bson::Null | Bson::Undefined);
            (nullish(x) && nullish(y)) || compare_values(x, y) == Ordering::Equal
        }
        _ => true,
    }
}

fn locf(inputs: &[Option<Bson>]) -> Vec<Option<Bson>> {
    let mut last = Bson::Null;
    inputs
        .iter()
        .map(|v| {
            if !is_nullish(v) {
                last = v.clone().unwrap_or(Bson::Null);
            }
            Some(last.clone())
        })
        .collect()
}

fn type_of(v: &Option<Bson>) -> &'static str {
    v.as_ref().map_or("missing", type_name)
}

/// The sort value as a number on the line: a number, or a date's milliseconds.
fn line_x(v: &Option<Bson>) -> Option<f64> {
    match v {
        Some(Bson::DateTime(d)) => Some(d.timestamp_millis() as f64),
        Some(other) => number_as_f64(other),
        None => None,
    }
}

/// Checks each row as mongod's `$linearFill` does, then fills the nulls that have a non-null
/// neighbour on both sides.
fn linear_fill(
    inputs: &[Option<Bson>],
    sort_values: &[Option<Bson>],
) -> Result<Vec<Option<Bson>>, MongoError> {
    let mismatch = |message: String| MongoError::new(ErrorCode::TypeMismatch, message);
    let mut previous: Option<&Option<Bson>> = None;
    for (input, sort) in inputs.iter().zip(sort_values) {
        if !is_nullish(input) && input.as_ref().and_then(number_as_f64).is_none() {
            return Err(mismatch(format!(
                "Value to be filled must be numeric or nullish, but found {}",
                type_of(input)
            )));
        }
        let is_date = matches!(sort, Some(Bson::DateTime(_)));
        if !is_date && sort.as_ref().and_then(number_as_f64).is_none() {
            return Err(mismatch(format!(
                "Value of the sortBy field must be numeric or a date, but found {}",
                type_of(sort)
            )));
        }
        if let Some(prev) = previous {
            let prev_key = prev.clone().unwrap_or(Bson::Null);
            let key = sort.clone().unwrap_or(Bson::Null);
            if compare_values(&prev_key, &key) == Ordering::Equal {
                return Err(MongoError::new(
                    ErrorCode::Location6050106,
                    "There can be no repeated values in the sort field",
                ));
            }
            if matches!(prev, Some(Bson::DateTime(_))) != is_date {
                return Err(mismatch(format!(
                    "Conflicting sort value types, previously received type {}, but found {}",
                    type_of(prev),
                    type_of(sort)
                )));
            }
        }
        previous = Some(sort);
    }
    let known: Vec<usize> = (0..inputs.len())
        .filter(|i| !is_nullish(&inputs[*i]))
        .collect();
    let mut out = Vec::with_capacity(inputs.len());
    for (i, input) in inputs.iter().enumerate() {
        if !is_nullish(input) {
            out.push(input.clone());
            continue;
        }
        let before = known.iter().rev().find(|k| **k < i);
        let after = known.iter().find(|k| **k > i);
        let filled = match (before, after) {
            (Some(&a), Some(&b)) => interpolate(
                (
                    line_x(&sort_values[a]),
                    inputs[a].as_ref().and_then(number_as_f64),
                ),
                (
                    line_x(&sort_values[b]),
                    inputs[b].as_ref().and_then(number_as_f64),
                ),
                line_x(&sort_values[i]),
            ),
            _ => Bson::Null,
        };
        out.push(Some(filled));
    }
    Ok(out)
}

/// `y1 + (x - x1) * ((y2 - y1) / (x2 - x1))`.
fn interpolate(
    (x1, y1): (Option<f64>, Option<f64>),
    (x2, y2): (Option<f64>, Option<f64>),
    x: Option<f64>,
) -> Bson {
    match (x1, y1, x2, y2, x) {
        (Some(x1), Some(y1), Some(x2), Some(y2), Some(x)) => {
            Bson::Double(y1 + (x - x1) * ((y2 - y1) / (x2 - x1)))
        }
        _ => Bson::Null,
    }
}

/// Numbers only (others leave the average as it was); null until the first number.
fn exp_moving_avg(inputs: &[Option<Bson>], alpha: f64) -> Vec<Option<Bson>> {
    let mut current: Option<f64> = None;
    inputs
        .iter()
        .map(|v| {
            if let Some(x) = v.as_ref().and_then(number_as_f64) {
                current = Some(match current {
                    None => x,
                    Some(prev) => x * alpha + prev * (1.0 - alpha),
                });
            }
            Some(current.map_or(Bson::Null, Bson::Double))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::bounds::{Bound, Window, WHOLE_PARTITION};
    use super::*;
    use crate::aggregate::accumulator::AccOp;
    use crate::aggregate::RunOptions;
    use crate::matcher::expr::Expr;
    use bson::{doc, RawBsonRef};

    fn rows(xs: &[Option<Bson>]) -> Vec<Row> {
        xs.iter()
            .enumerate()
            .map(|(i, x)| {
                let mut d = doc! {"t": i as i32};
                if let Some(x) = x {
                    d.insert("x", x.clone());
                }
                Row {
                    doc: RawDocumentBuf::from_document(&d).expect("raw"),
                    sort_key: vec![Bson::Int32(i as i32)],
                    sort_value: Some(Bson::Int32(i as i32)),
                }
            })
            .collect()
    }

    fn run(op: Op, window: Window, xs: &[Option<Bson>]) -> Vec<Option<Bson>> {
        let f = WindowFunction {
            op,
            input: Expr::parse_in(RawBsonRef::String("$x"), &crate::Variables::new())
                .expect("path"),
            window,
        };
        let mut budget = MemoryBudget::new("$setWindowFields", RunOptions::default());
        compute(&f, &rows(xs), None, &mut budget).expect("computes")
    }

    fn ints(xs: &[i32]) -> Vec<Option<Bson>> {
        xs.iter().map(|x| Some(Bson::Int32(*x))).collect()
    }

    #[test]
    fn sliding_and_expanding_sums_averages_and_extremes() {
        let xs = ints(&[1, 2, 3, 4]);
        let sliding = Window::Documents(Bound::At(-1), Bound::At(1));
        assert_eq!(run(Op::Fold(AccOp::Sum), sliding, &xs), ints(&[3, 6, 9, 7]));
        let running = Window::Documents(Bound::Unbounded, Bound::Current);
        assert_eq!(
            run(Op::Fold(AccOp::Sum), running, &xs),
            ints(&[1, 3, 6, 10])
        );
        let avg = run(Op::Fold(AccOp::Avg), running, &xs);
        assert_eq!(avg[3], Some(Bson::Double(2.5)));
        assert_eq!(
            run(Op::Fold(AccOp::Max), WHOLE_PARTITION, &xs),
            ints(&[4, 4, 4, 4])
        );
        let before = Window::Documents(Bound::At(-2), Bound::At(-1));
        let sums = run(Op::Fold(AccOp::Sum), before, &xs);
        assert_eq!(sums, ints(&[0, 1, 3, 5]));
        let avgs = run(Op::Fold(AccOp::Avg), before, &xs);
        assert_eq!(avgs[0], Some(Bson::Null));
        let pushed = run(Op::Fold(AccOp::Push), before, &xs);
        assert_eq!(pushed[0], Some(Bson::Array(vec![])));
        assert_eq!(
            pushed[3],
            Some(Bson::Array(vec![Bson::Int32(2), Bson::Int32(3)]))
        );
    }

    #[test]
    fn folds_match_a_fresh_fold_of_every_window() {
        let mut seed = 11u64;
        let mut next = move |n: u64| {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (seed >> 33) % n
        };
        let bound = |k: u64| match k {
            0 => Bound::Unbounded,
            1 => Bound::Current,
            k => Bound::At(k as i64 - 5),
        };
        let ops = [
            AccOp::Sum,
            AccOp::Avg,
            AccOp::Min,
            AccOp::Max,
            AccOp::Push,
            AccOp::AddToSet,
            AccOp::StdDevSamp,
        ];
        for _ in 0..100 {
            let xs: Vec<Option<Bson>> = (0..next(9))
                .map(|_| match next(5) {
                    0 => None,
                    1 => Some(Bson::Double(next(7) as f64 / 2.0)),
                    2 => Some(Bson::String(format!("s{}", next(3)))),
                    _ => Some(Bson::Int32(next(6) as i32)),
                })
                .collect();
            let (mut lower, mut upper) = (bound(next(10)), bound(next(10)));
            if super::super::bounds::check_forward_for_tests(lower, upper).is_err() {
                std::mem::swap(&mut lower, &mut upper);
            }
            let window = Window::Documents(lower, upper);
            if super::super::bounds::check_forward_for_tests(lower, upper).is_err() {
                continue;
            }
            for op in ops {
                let got = run(Op::Fold(op), window, &xs);
                for (at, value) in got.iter().enumerate() {
                    let mut state = State::new(op);
                    if let Some((lo, hi)) = endpoints(window, at, xs.len(), &[]).expect("documents")
                    {
                        for x in &xs[lo..=hi] {
                            state.add(x.clone()).expect("folds");
                        }
                    }
                    assert_eq!(
                        value,
                        &Some(state.finish()),
                        "{op:?} {window:?} at {at} of {xs:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn ends_shift_locf_and_moving_average() {
        let xs = vec![
            None,
            Some(Bson::Int32(2)),
            Some(Bson::Null),
            Some(Bson::Int32(4)),
        ];
        let w = Window::Documents(Bound::At(-1), Bound::Current);
        assert_eq!(
            run(Op::First, w, &xs),
            vec![None, None, Some(Bson::Int32(2)), Some(Bson::Null)]
        );
        let empty = Window::Documents(Bound::At(5), Bound::At(6));
        assert_eq!(run(Op::Last, empty, &xs)[0], Some(Bson::Null));
        let shifted = run(
            Op::Shift {
                by: 1,
                default: Bson::Int32(-1),
            },
            WHOLE_PARTITION,
            &xs,
        );
        assert_eq!(
            shifted,
            vec![
                Some(Bson::Int32(2)),
                Some(Bson::Null),
                Some(Bson::Int32(4)),
                Some(Bson::Int32(-1))
            ]
        );
        assert_eq!(
            run(Op::Locf, WHOLE_PARTITION, &xs),
            vec![
                Some(Bson::Null),
                Some(Bson::Int32(2)),
                Some(Bson::Int32(2)),
                Some(Bson::Int32(4))
            ]
        );
        let ema = run(
            Op::ExpMovingAvg { alpha: 0.5 },
            WHOLE_PARTITION,
            &ints(&[2, 4, 8]),
        );
        assert_eq!(
            ema,
            vec![
                Some(Bson::Double(2.0)),
                Some(Bson::Double(3.0)),
                Some(Bson::Double(5.5))
            ]
        );
    }

    #[test]
    fn linear_fill_interpolates_between_known_points() {
        let xs = vec![
            None,
            Some(Bson::Int32(10)),
            None,
            None,
            Some(Bson::Int32(40)),
            None,
        ];
        assert_eq!(
            run(Op::LinearFill, WHOLE_PARTITION, &xs),
            vec![
                Some(Bson::Null),
                Some(Bson::Int32(10)),
                Some(Bson::Double(20.0)),
                Some(Bson::Double(30.0)),
                Some(Bson::Int32(40)),
                Some(Bson::Null)
            ]
        );
        let mut r = rows(&[Some(Bson::Int32(1)), None]);
        r[1].sort_value = r[0].sort_value.clone();
        let f = WindowFunction {
            op: Op::LinearFill,
            input: Expr::parse_in(RawBsonRef::String("$x"), &crate::Variables::new()).expect("x"),
            window: WHOLE_PARTITION,
        };
        let mut budget = MemoryBudget::new("$setWindowFields", RunOptions::default());
        let e = compute(&f, &r, None, &mut budget).unwrap_err();
        assert_eq!(e.code.code(), 6050106);
        let strings = rows(&[Some(Bson::String("a".into()))]);
        let e = compute(&f, &strings, None, &mut budget).unwrap_err();
        assert_eq!(e.code, ErrorCode::TypeMismatch);
    }

    #[test]
    fn decimal_inputs_to_the_double_arithmetic_are_refused() {
        let d = Some(Bson::Decimal128(bson::Decimal128::from_bytes([0; 16])));
        let f = WindowFunction {
            op: Op::ExpMovingAvg { alpha: 0.5 },
            input: Expr::parse_in(RawBsonRef::String("$x"), &crate::Variables::new()).expect("x"),
            window: WHOLE_PARTITION,
        };
        let mut budget = MemoryBudget::new("$setWindowFields", RunOptions::default());
        let e = compute(&f, &rows(std::slice::from_ref(&d)), None, &mut budget).unwrap_err();
        assert_eq!(e.code, ErrorCode::NotImplemented);
        assert_eq!(
            run(Op::Locf, WHOLE_PARTITION, std::slice::from_ref(&d)),
            vec![d]
        );
    }

    #[test]
    fn ranks_share_ties() {
        let mut r = rows(&ints(&[0, 0, 0, 0]));
        let keys = [1, 1, 2, 3];
        for (row, k) in r.iter_mut().zip(keys) {
            row.sort_key = vec![Bson::Int32(k)];
        }
        assert_eq!(ranks(&r, false), ints(&[1, 1, 3, 4]));
        assert_eq!(ranks(&r, true), ints(&[1, 1, 2, 3]));
        r[0].sort_key = vec![Bson::Null];
        r[1].sort_key = vec![Bson::Undefined];
        assert_eq!(ranks(&r, true), ints(&[1, 1, 2, 3]));
    }
}
