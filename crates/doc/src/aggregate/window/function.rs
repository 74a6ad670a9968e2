//! One output field of `$setWindowFields`: `{<$function>: <args>, window?: {...}}` parsed as
//! mongod 7.0's window function parsers read it. The accumulator functions (`$sum $avg $min
//! $max $count $push $addToSet $stdDevPop $stdDevSamp`) and `$first`/`$last` take an
//! expression and an optional `window`; the rank functions (`$rank $denseRank
//! $documentNumber`) take `{}` and a one-field `sortBy` (5371601-5371603); `$shift` takes
//! `{output, by, default?}` and a `sortBy`; `$locf` and `$linearFill` take an expression and
//! no `window` (`$linearFill` a one-field `sortBy`, 605001); `$expMovingAvg` takes `{input, N |
//! alpha}` and a `sortBy`; `$covariancePop`/`$covarianceSamp` take `[x, y]` and a `window`;
//! `$derivative`, `$integral` and the N functions are parsed in `series.rs`, `$top` and
//! `$bottom(N)` in `top_bottom.rs`. `$median` and `$percentile` are refused with `NotImplemented` (238). Malformed specs are `FailedToParse` (9), as on mongod. It never
//! evaluates.

use crate::compare::raw_number_as_f64;
use bson::raw::RawBsonRef;
use bson::{Bson, RawBson};

use super::super::accumulator::AccOp;
use super::super::execute::raw_to_bson;
use super::super::sort::SortSpec;
use super::bounds::{self, Window, TO_CURRENT, WHOLE_PARTITION};
use crate::matcher::expr::Expr;
use crate::matcher::path::bson_error;
use crate::variables::Variables;
use crate::{ErrorCode, MongoError};

/// What a window function computes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Op {
    /// A `$group` accumulator folded over the window (`$count` is `$sum` of 1).
    Fold(AccOp),
    First,
    Last,
    /// The input at this many documents from the current one, else the default.
    Shift {
        by: i64,
        default: Bson,
    },
    Rank,
    DenseRank,
    DocumentNumber,
    /// The last non-null input up to the current document.
    Locf,
    /// Nulls filled on the line between their non-null neighbours by sort value.
    LinearFill,
    /// An exponential moving average with this weight of the current value.
    ExpMovingAvg {
        alpha: f64,
    },
    /// The covariance of `[x, y]` pairs (`series.rs`).
    Covariance {
        sample: bool,
    },
    /// Rise over run between the window's ends, per `unit` when the sort value is a date.
    Derivative {
        unit_millis: Option<i64>,
    },
    /// The area under the window's points by the trapezoidal rule, per `unit`.
    Integral {
        unit_millis: Option<i64>,
    },
    /// `$firstN`, `$lastN`, `$minN`, `$maxN`.
    TakeN {
        take: super::series::Take,
        n: usize,
    },
    /// `$top`/`$bottom` (no `n`: one value) and `$topN`/`$bottomN` by their own `sortBy`.
    TopBottom {
        bottom: bool,
        n: Option<usize>,
        sort: Box<SortSpec>,
    },
}

/// A parsed window function: what it computes, over which expression and window.
#[derive(Debug, Clone)]
pub(crate) struct WindowFunction {
    pub op: Op,
    pub input: Expr,
    pub window: Window,
}

/// Window functions mongod 7.0 has that this stage does not compute yet.
const NOT_YET: &[&str] = &["$median", "$percentile"];

fn parse_error(message: impl Into<String>) -> MongoError {
    MongoError::new(ErrorCode::FailedToParse, message)
}

/// Parse `<field>: {...}` of `output`.
pub(crate) fn parse(
    field: &str,
    spec: RawBsonRef<'_>,
    sort_by: Option<&SortSpec>,
    vars: &Variables,
) -> Result<WindowFunction, MongoError> {
    let RawBsonRef::Document(d) = spec else {
        return Err(parse_error(format!(
            "The field '{field}' must be an object"
        )));
    };
    let mut first_name = None;
    for item in d {
        let (name, _) = item.map_err(bson_error)?;
        first_name.get_or_insert(name);
        if !name.starts_with('$') {
            continue;
        }
        return match name {
            "$sum" | "$avg" | "$min" | "$max" | "$push" | "$addToSet" | "$stdDevPop"
            | "$stdDevSamp" | "$count" | "$first" | "$last" | "$covariancePop"
            | "$covarianceSamp" => parse_with_window(d, sort_by, vars),
            "$rank" | "$denseRank" | "$documentNumber" => parse_rank(d, name, sort_by),
            "$shift" => parse_shift(d, sort_by, vars),
            "$locf" | "$linearFill" => parse_fill(d, name, sort_by, vars),
            "$expMovingAvg" => parse_exp_moving_avg(d, sort_by, vars),
            "$derivative" | "$integral" => super::series::parse_rate(d, name, sort_by, vars),
            "$firstN" | "$lastN" | "$minN" | "$maxN" => {
                super::series::parse_n(d, name, sort_by, vars)
            }
            "$top" | "$bottom" | "$topN" | "$bottomN" => {
                super::top_bottom::parse(d, name, sort_by, vars)
            }
            other if NOT_YET.contains(&other) => Err(MongoError::new(
                ErrorCode::NotImplemented,
                format!("The {other} window function is not supported yet"),
            )),
            other => Err(parse_error(format!(
                "Unrecognized window function, {other}"
            ))),
        };
    }
    Err(parse_error(match first_name {
        Some(name) if !name.is_empty() => format!("Expected a $-prefixed window function, {name}"),
        _ => "Expected a $-prefixed window function".to_owned(),
    }))
}

fn is_function(name: &str) -> bool {
    name.starts_with('$')
}

/// `{$fn: <expr>, window?: {...}}` for the accumulators and `$first`/`$last`.
fn parse_with_window(
    d: &bson::RawDocument,
    sort_by: Option<&SortSpec>,
    vars: &Variables,
) -> Result<WindowFunction, MongoError> {
    let (mut op, mut input, mut window) = (None, None, WHOLE_PARTITION);
    for item in d {
        let (name, value) = item.map_err(bson_error)?;
        if name == "window" {
            window = bounds::parse(value, sort_by)?;
        } else if is_function(name) {
            if op.is_some() {
                return Err(parse_error(
                    "Cannot specify two functions in window function spec",
                ));
            }
            let (parsed, expr) = function_and_input(name, value, vars)?;
            op = Some(parsed);
            input = Some(expr);
        } else {
            return Err(parse_error(format!(
                "Window function found an unknown argument: {name}"
            )));
        }
    }
    match (op, input) {
        (Some(op), Some(input)) => Ok(WindowFunction { op, input, window }),
        _ => Err(parse_error(
            "Must specify a window function in output field",
        )),
    }
}

fn function_and_input(
    name: &str,
    value: RawBsonRef<'_>,
    vars: &Variables,
) -> Result<(Op, Expr), MongoError> {
    let op = match name {
        "$sum" => Op::Fold(AccOp::Sum),
        "$avg" => Op::Fold(AccOp::Avg),
        "$min" => Op::Fold(AccOp::Min),
        "$max" => Op::Fold(AccOp::Max),
        "$push" => Op::Fold(AccOp::Push),
        "$addToSet" => Op::Fold(AccOp::AddToSet),
        "$stdDevPop" => Op::Fold(AccOp::StdDevPop),
        "$stdDevSamp" => Op::Fold(AccOp::StdDevSamp),
        "$first" => Op::First,
        "$last" => Op::Last,
        "$covariancePop" => Op::Covariance { sample: false },
        "$covarianceSamp" => Op::Covariance { sample: true },
        "$count" => {
            let empty = matches!(value, RawBsonRef::Document(d) if d.iter().next().is_none());
            if !empty {
                return Err(parse_error("$count only accepts an empty object as input"));
            }
            return Ok((Op::Fold(AccOp::Sum), Expr::Literal(RawBson::Int32(1))));
        }
        other => {
            return Err(parse_error(format!(
                "Window function found an unknown argument: {other}"
            )))
        }
    };
    Ok((op, Expr::parse_in(value, vars)?))
}

/// `{$rank: {}}`: alone, with `{}`, under a one-field `sortBy` whose value it ranks.
fn parse_rank(
    d: &bson::RawDocument,
    name: &str,
    sort_by: Option<&SortSpec>,
) -> Result<WindowFunction, MongoError> {
    let mut items = d.iter();
    let (first, more) = (items.next(), items.next());
    let Some(first) = first else {
        return Err(parse_error(
            "Must specify a window function in output field",
        ));
    };
    if more.is_some() {
        return Err(MongoError::new(
            ErrorCode::Location5371601,
            "Rank style window functions take no other arguments",
        ));
    }
    let (_, value) = first.map_err(bson_error)?;
    if !matches!(value, RawBsonRef::Document(d) if d.iter().next().is_none()) {
        return Err(MongoError::new(
            ErrorCode::Location5371603,
            format!("{name} must be specified with '{{}}' as the value"),
        ));
    }
    if sort_by.and_then(SortSpec::single_key).is_none() {
        return Err(MongoError::new(
            ErrorCode::Location5371602,
            format!(
                "{name} must be specified with a top level sortBy expression with exactly one \
                 element"
            ),
        ));
    }
    let op = match name {
        "$rank" => Op::Rank,
        "$denseRank" => Op::DenseRank,
        _ => Op::DocumentNumber,
    };
    Ok(WindowFunction {
        op,
        input: Expr::Literal(RawBson::Null),
        window: TO_CURRENT,
    })
}

/// `{$shift: {output, by, default?}}`, with a `sortBy` and no `window`.
fn parse_shift(
    d: &bson::RawDocument,
    sort_by: Option<&SortSpec>,
    vars: &Variables,
) -> Result<WindowFunction, MongoError> {
    let mut shift = None;
    for item in d {
        let (name, value) = item.map_err(bson_error)?;
        match name {
            "window" => return Err(parse_error("$shift does not accept a 'window' field")),
            "$shift" => {
                let RawBsonRef::Document(args) = value else {
                    return Err(parse_error("Argument to $shift must be an object"));
                };
                shift = Some(parse_shift_args(args, vars)?);
            }
            other if is_function(other) => {
                return Err(parse_error(
                    "Cannot specify multiple functions in window function spec",
                ))
            }
            other => {
                return Err(parse_error(format!(
                    "Window function found an unknown argument: {other}"
                )))
            }
        }
    }
    if sort_by.is_none() {
        return Err(parse_error("'$shift' requires a sortBy"));
    }
    shift.ok_or_else(|| parse_error("Must specify a window function in output field"))
}

fn parse_shift_args(
    args: &bson::RawDocument,
    vars: &Variables,
) -> Result<WindowFunction, MongoError> {
    let (mut output, mut by, mut default) = (None, None, Bson::Null);
    for item in args {
        let (name, value) = item.map_err(bson_error)?;
        match name {
            "output" => output = Some(Expr::parse_in(value, vars)?),
            "by" => {
                let n = match value {
                    RawBsonRef::Int32(i) => Some(i64::from(i)),
                    RawBsonRef::Int64(i) => i32::try_from(i).ok().map(i64::from),
                    RawBsonRef::Double(d) if d.fract() == 0.0 && d.abs() <= f64::from(i32::MAX) => {
                        Some(d as i64)
                    }
                    _ => None,
                };
                by = Some(n.ok_or_else(|| {
                    parse_error(format!(
                        "'$shift:by' field must be an integer, but found  by: {}",
                        super::super::simple::render(value)
                    ))
                })?);
            }
            "default" => match Expr::parse_in(value, vars)? {
                Expr::Literal(v) => default = raw_to_bson(v.as_raw_bson_ref())?,
                _ => {
                    return Err(parse_error(
                        "'$shift:default' expression must yield a constant value.",
                    ))
                }
            },
            _ => return Err(parse_error("Unknown argument in $shift")),
        }
    }
    let output = output.ok_or_else(|| parse_error("$shift requires an 'output' expression."))?;
    let by = by.ok_or_else(|| parse_error("$shift requires 'by' as an integer value."))?;
    Ok(WindowFunction {
        op: Op::Shift { by, default },
        input: output,
        window: WHOLE_PARTITION,
    })
}

/// `{$locf: <expr>}` and `{$linearFill: <expr>}`: no `window`.
fn parse_fill(
    d: &bson::RawDocument,
    name: &str,
    sort_by: Option<&SortSpec>,
    vars: &Variables,
) -> Result<WindowFunction, MongoError> {
    let (mut input, mut has_window) = (None, false);
    for item in d {
        let (arg, value) = item.map_err(bson_error)?;
        if arg == "window" {
            has_window = true;
        } else if is_function(arg) {
            if input.is_some() {
                return Err(parse_error(
                    "Cannot specify two functions in window function spec",
                ));
            }
            input = Some(Expr::parse_in(value, vars)?);
        } else {
            return Err(parse_error(format!(
                "Window function found an unknown argument: {arg}"
            )));
        }
    }
    if has_window {
        return Err(parse_error(format!(
            "'window' field is not allowed in {name}"
        )));
    }
    let input =
        input.ok_or_else(|| parse_error("Must specify a window function in output field"))?;
    if name == "$linearFill" {
        if sort_by.and_then(SortSpec::single_key).is_none() {
            return Err(MongoError::new(
                ErrorCode::Location605001,
                "$linearFill must be specified with a top level sortBy expression with exactly \
                 one element",
            ));
        }
        return Ok(WindowFunction {
            op: Op::LinearFill,
            input,
            window: WHOLE_PARTITION,
        });
    }
    Ok(WindowFunction {
        op: Op::Locf,
        input,
        window: TO_CURRENT,
    })
}

/// `{$expMovingAvg: {input, N | alpha}}`, with a `sortBy` and no `window`.
fn parse_exp_moving_avg(
    d: &bson::RawDocument,
    sort_by: Option<&SortSpec>,
    vars: &Variables,
) -> Result<WindowFunction, MongoError> {
    let shape = "$expMovingAvg sub object must have exactly two fields: An 'input' field, and \
                 either an 'N' field or an 'alpha' field";
    let mut items = d.iter();
    let args = match (items.next(), items.next()) {
        (Some(Ok(("$expMovingAvg", RawBsonRef::Document(args)))), None) => args,
        _ => {
            return Err(parse_error(
                "$expMovingAvg must have exactly one argument that is an object",
            ))
        }
    };
    let (mut input, mut alpha, mut fields) = (None, None, 0);
    for item in args {
        let (name, value) = item.map_err(bson_error)?;
        fields += 1;
        match name {
            "input" => input = Some(Expr::parse_in(value, vars)?),
            "N" => alpha = Some(alpha_of_n(value)?),
            "alpha" => alpha = Some(alpha_of(value)?),
            _ => {}
        }
    }
    let Some(input) = input.filter(|_| fields == 2) else {
        return Err(parse_error(shape));
    };
    if sort_by.is_none() {
        return Err(parse_error("$expMovingAvg requires an explicit 'sortBy'"));
    }
    let alpha = alpha
        .ok_or_else(|| parse_error(format!("Got unrecognized field in $expMovingAvg{shape}")))?;
    Ok(WindowFunction {
        op: Op::ExpMovingAvg { alpha },
        input,
        window: TO_CURRENT,
    })
}

/// `N`: a positive whole number; the weight is `2 / (N + 1)`.
fn alpha_of_n(value: RawBsonRef<'_>) -> Result<f64, MongoError> {
    let Some(n) = raw_number_as_f64(value) else {
        return Err(parse_error(format!(
            "'N' field must be an integer, but found type {}",
            super::super::simple::type_name(value)
        )));
    };
    if n.fract() != 0.0 {
        return Err(parse_error(format!(
            "'N' field must be an integer, but found  N: {n}. To use a non-integer, use the \
             'alpha' argument instead"
        )));
    }
    if n <= 0.0 {
        return Err(parse_error(format!(
            "'N' must be greater than zero. Got {n}"
        )));
    }
    Ok(2.0 / (n + 1.0))
}

fn alpha_of(value: RawBsonRef<'_>) -> Result<f64, MongoError> {
    let alpha = raw_number_as_f64(value).ok_or_else(|| parse_error("'alpha' must be a number"))?;
    if alpha <= 0.0 || alpha >= 1.0 {
        return Err(parse_error(format!(
            "'alpha' must be between 0 and 1 (exclusive), found alpha: {alpha}"
        )));
    }
    Ok(alpha)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, Document, RawDocumentBuf};

    fn by(spec: Document) -> SortSpec {
        let raw = RawDocumentBuf::from_document(&spec).expect("raw");
        super::super::super::sort::parse(RawBsonRef::Document(&raw), &Variables::new())
            .expect("sort")
    }

    fn parsed(spec: Document, sort: Option<&SortSpec>) -> Result<WindowFunction, MongoError> {
        let raw = RawDocumentBuf::from_document(&spec).expect("raw");
        parse("f", RawBsonRef::Document(&raw), sort, &Variables::new())
    }

    fn code(spec: Document, sort: Option<&SortSpec>) -> i32 {
        parsed(spec, sort).unwrap_err().code.code()
    }

    #[test]
    fn parses_each_family() {
        let s = by(doc! {"t": 1});
        let f = parsed(
            doc! {"$sum": "$x", "window": {"documents": [-1, 0]}},
            Some(&s),
        )
        .expect("sum");
        assert_eq!(f.op, Op::Fold(AccOp::Sum));
        assert_eq!(
            f.window,
            Window::Documents(bounds::Bound::At(-1), bounds::Bound::At(0))
        );
        assert_eq!(
            parsed(doc! {"$count": {}}, None).expect("count").op,
            Op::Fold(AccOp::Sum)
        );
        assert_eq!(
            parsed(doc! {"$rank": {}}, Some(&s)).expect("rank").op,
            Op::Rank
        );
        let shift = parsed(
            doc! {"$shift": {"output": "$x", "by": -1, "default": 0}},
            Some(&s),
        )
        .expect("shift");
        assert_eq!(
            shift.op,
            Op::Shift {
                by: -1,
                default: Bson::Int32(0)
            }
        );
        let ema = parsed(doc! {"$expMovingAvg": {"input": "$x", "N": 3}}, Some(&s)).expect("N");
        assert_eq!(ema.op, Op::ExpMovingAvg { alpha: 0.5 });
        assert_eq!(
            parsed(doc! {"$locf": "$x"}, None).expect("locf").op,
            Op::Locf
        );
    }

    #[test]
    fn refuses_malformed_specs_with_mongods_codes() {
        let s = by(doc! {"t": 1});
        let two = by(doc! {"t": 1, "u": 1});
        assert_eq!(code(doc! {"$summ": "$x"}, None), 9);
        assert_eq!(code(doc! {"x": 1}, None), 9);
        assert_eq!(code(doc! {"$sum": "$x", "$avg": "$x"}, None), 9);
        assert_eq!(code(doc! {"$sum": "$x", "other": 1}, None), 9);
        assert_eq!(code(doc! {"$count": 1}, None), 9);
        assert_eq!(code(doc! {"$rank": {}}, None), 5371602);
        assert_eq!(code(doc! {"$rank": {}}, Some(&two)), 5371602);
        assert_eq!(code(doc! {"$rank": 1}, Some(&s)), 5371603);
        assert_eq!(code(doc! {"$rank": {}, "window": {}}, Some(&s)), 5371601);
        assert_eq!(code(doc! {"$shift": {"output": "$x", "by": 1}}, None), 9);
        assert_eq!(
            code(doc! {"$shift": {"output": "$x", "by": 1.5}}, Some(&s)),
            9
        );
        assert_eq!(code(doc! {"$shift": {"by": 1}}, Some(&s)), 9);
        assert_eq!(
            code(
                doc! {"$shift": {"output": "$x", "by": 1, "default": "$y"}},
                Some(&s)
            ),
            9
        );
        assert_eq!(code(doc! {"$locf": "$x", "window": {}}, None), 9);
        assert_eq!(code(doc! {"$linearFill": "$x"}, None), 605001);
        assert_eq!(
            code(
                doc! {"$expMovingAvg": {"input": "$x", "alpha": 1}},
                Some(&s)
            ),
            9
        );
        assert_eq!(
            code(doc! {"$expMovingAvg": {"input": "$x", "N": 2}}, None),
            9
        );
        assert_eq!(code(doc! {"$derivative": {"input": "$x"}}, Some(&s)), 9);
        assert_eq!(
            code(doc! {"$derivative": {"input": "$x"}, "window": {}}, None),
            9
        );
        assert_eq!(
            code(
                doc! {"$integral": {"input": "$x", "unit": "month"}},
                Some(&s)
            ),
            5490710
        );
        assert_eq!(code(doc! {"$minN": 1}, None), 5787900);
        assert_eq!(code(doc! {"$firstN": {"input": "$x"}}, None), 5787906);
        assert_eq!(code(doc! {"$lastN": {"n": 1}}, None), 5787907);
        assert_eq!(
            code(doc! {"$maxN": {"n": 1, "input": "$x", "k": 1}}, None),
            5787901
        );
        assert_eq!(code(doc! {"$topN": {"n": 1}}, Some(&s)), 5788004);
        assert_eq!(code(doc! {"$top": {"output": "$x"}}, Some(&s)), 5788005);
        assert_eq!(
            code(
                doc! {"$top": {"n": 1, "output": "$x", "sortBy": {"x": 1}}},
                None
            ),
            5788002
        );
        assert_eq!(
            code(
                doc! {"$bottomN": {"output": "$x", "sortBy": {"x": 1}}},
                None
            ),
            5788003
        );
        assert_eq!(code(doc! {"$bottom": 1}, None), 5788001);
        assert_eq!(
            code(
                doc! {"$median": {"input": "$x", "method": "approximate"}},
                None
            ),
            238
        );
        let raw = RawDocumentBuf::from_document(&doc! {"f": 1}).expect("raw");
        let e = parse(
            "f",
            raw.get("f").expect("ok").expect("f"),
            None,
            &Variables::new(),
        );
        assert_eq!(e.unwrap_err().code.code(), 9);
    }
}
