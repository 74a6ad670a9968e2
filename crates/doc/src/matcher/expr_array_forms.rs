//! The array expressions with their own argument documents: `$zip: {inputs, defaults,
//! useLongestLength}` (34460-34468), `$sortArray: {input, sortBy}` (2942500-2942507) and the
//! accumulators `$firstN $lastN $maxN $minN: {n, input}` as expressions (5787900-5787908,
//! 5788200), as mongod 7.0 parses and evaluates them. `$maxN`/`$minN` skip null and missing
//! elements and give theirs in descending/ascending order; `$firstN`/`$lastN` keep them.
//! Parsing is here; `expr.rs` only dispatches by name.

use std::cmp::Ordering;

use bson::raw::{RawBson, RawBsonRef, RawDocument};

use super::expr::{compare_values, descend, error, Expr, Value};
use super::expr_arity::{number, show};
use super::expr_array_more::{array, items};
use super::expr_vars::Scope;
use super::path::{bson_error, FieldPath};
use crate::{ErrorCode, MongoError};

/// Which of the `n` accumulators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs, reason = "each variant is the operator of the same name")]
pub enum NKind {
    FirstN,
    LastN,
    MaxN,
    MinN,
}

/// `$sortArray`'s `sortBy`: the whole element, or fields of document elements.
#[derive(Debug, Clone)]
pub enum SortBy {
    /// 1 or -1: compare the elements themselves.
    Whole(bool),
    /// `{path: 1 | -1, ...}`: descending flags by path.
    Fields(Vec<(FieldPath, bool)>),
}

/// A parsed array expression with its own argument document.
#[derive(Debug, Clone)]
pub enum ArrayForm {
    /// `$zip`.
    Zip {
        /// The input arrays.
        inputs: Vec<Expr>,
        /// One default per input (only with `useLongestLength`).
        defaults: Vec<Expr>,
        /// Pad to the longest input instead of cutting at the shortest.
        longest: bool,
    },
    /// `$sortArray`.
    Sort {
        /// The array.
        input: Expr,
        /// The order.
        by: SortBy,
    },
    /// `$firstN $lastN $maxN $minN`.
    TakeN {
        /// Which one.
        kind: NKind,
        /// How many.
        n: Expr,
        /// The array.
        input: Expr,
    },
}

fn fields<'a>(arg: &'a RawDocument) -> Result<Vec<(&'a str, RawBsonRef<'a>)>, MongoError> {
    arg.iter().collect::<Result<_, _>>().map_err(bson_error)
}

/// Parse `$zip`, `$sortArray`, `$firstN`... by name; `None` for another name.
pub(crate) fn parse(
    name: &str,
    arg: RawBsonRef<'_>,
    scope: &mut Scope<'_>,
) -> Option<Result<Expr, MongoError>> {
    let parsed = match name {
        "$zip" => parse_zip(arg, scope),
        "$sortArray" => parse_sort(arg, scope),
        "$firstN" => parse_n(NKind::FirstN, arg, scope),
        "$lastN" => parse_n(NKind::LastN, arg, scope),
        "$maxN" => parse_n(NKind::MaxN, arg, scope),
        "$minN" => parse_n(NKind::MinN, arg, scope),
        _ => return None,
    };
    Some(parsed.map(|form| Expr::ArrayForms(Box::new(form))))
}

fn type_of(v: RawBsonRef<'_>) -> &'static str {
    Value::Ref(v).type_name()
}

fn parse_zip(arg: RawBsonRef<'_>, scope: &mut Scope<'_>) -> Result<ArrayForm, MongoError> {
    let RawBsonRef::Document(d) = arg else {
        return Err(error(
            ErrorCode::Location34460,
            format!(
                "$zip only supports an object as an argument, found {}",
                type_of(arg)
            ),
        ));
    };
    let (mut inputs, mut defaults, mut longest) = (Vec::new(), Vec::new(), false);
    for (key, value) in fields(d)? {
        match (key, value) {
            ("inputs" | "defaults", RawBsonRef::Array(items)) => {
                let target = if key == "inputs" {
                    &mut inputs
                } else {
                    &mut defaults
                };
                for item in items {
                    target.push(Expr::parse_scoped(item.map_err(bson_error)?, scope)?);
                }
            }
            ("inputs", other) => {
                return Err(error(
                    ErrorCode::Location34461,
                    format!(
                        "inputs must be an array of expressions, found {}",
                        type_of(other)
                    ),
                ))
            }
            ("defaults", other) => {
                return Err(error(
                    ErrorCode::Location34462,
                    format!(
                        "defaults must be an array of expressions, found {}",
                        type_of(other)
                    ),
                ))
            }
            ("useLongestLength", RawBsonRef::Boolean(b)) => longest = b,
            // mongod names the type of the whole argument here.
            ("useLongestLength", _) => {
                return Err(error(
                    ErrorCode::Location34463,
                    "useLongestLength must be a bool, found object",
                ))
            }
            (other, _) => {
                return Err(error(
                    ErrorCode::Location34464,
                    format!("$zip found an unknown argument: {other}"),
                ))
            }
        }
    }
    if inputs.is_empty() {
        return Err(error(
            ErrorCode::Location34465,
            "$zip requires at least one input array",
        ));
    }
    if !longest && !defaults.is_empty() {
        return Err(error(
            ErrorCode::Location34466,
            "cannot specify defaults unless useLongestLength is true",
        ));
    }
    if !defaults.is_empty() && defaults.len() != inputs.len() {
        return Err(error(
            ErrorCode::Location34467,
            "defaults and inputs must have the same length",
        ));
    }
    Ok(ArrayForm::Zip {
        inputs,
        defaults,
        longest,
    })
}

fn parse_sort(arg: RawBsonRef<'_>, scope: &mut Scope<'_>) -> Result<ArrayForm, MongoError> {
    let RawBsonRef::Document(d) = arg else {
        return Err(error(
            ErrorCode::Location2942500,
            format!(
                "$sortArray requires an object as an argument, found: {}",
                type_of(arg)
            ),
        ));
    };
    let (mut input, mut by) = (None, None);
    for (key, value) in fields(d)? {
        match key {
            "input" => input = Some(Expr::parse_scoped(value, scope)?),
            "sortBy" => by = Some(sort_by(value)?),
            other => {
                return Err(error(
                    ErrorCode::Location2942501,
                    format!("$sortArray found an unknown argument: {other}"),
                ))
            }
        }
    }
    let input = input.ok_or_else(|| {
        error(
            ErrorCode::Location2942502,
            "$sortArray requires 'input' to be specified",
        )
    })?;
    let by = by.ok_or_else(|| {
        error(
            ErrorCode::Location2942503,
            "$sortArray requires 'sortBy' to be specified",
        )
    })?;
    Ok(ArrayForm::Sort { input, by })
}

fn direction(v: RawBsonRef<'_>) -> Option<bool> {
    let n = number(&Value::Ref(v)).ok()??.f64();
    if n == 1.0 {
        Some(false)
    } else if n == -1.0 {
        Some(true)
    } else {
        None
    }
}

fn sort_by(v: RawBsonRef<'_>) -> Result<SortBy, MongoError> {
    match v {
        RawBsonRef::Document(d) => {
            let mut keys = Vec::new();
            for (path, dir) in fields(d)? {
                let descending = direction(dir).ok_or_else(|| {
                    error(
                        ErrorCode::Location2942505,
                        "BadValue: $sort key ordering must be 1 (for ascending) or -1 (for \
                         descending)",
                    )
                })?;
                keys.push((FieldPath::parse(path), descending));
            }
            if keys.is_empty() {
                return Err(error(
                    ErrorCode::Location2942505,
                    "BadValue: $sort stage must have at least one sort key",
                ));
            }
            Ok(SortBy::Fields(keys))
        }
        other if number(&Value::Ref(other)).ok().flatten().is_some() => {
            direction(other).map(SortBy::Whole).ok_or_else(|| {
                error(
                    ErrorCode::Location2942506,
                    "The $sort element value must be either 1 or -1",
                )
            })
        }
        _ => Err(error(
            ErrorCode::Location2942507,
            "The $sort is invalid: use 1/-1 to sort the whole element, or {field:1/-1} to sort \
             embedded fields",
        )),
    }
}

fn parse_n(
    kind: NKind,
    arg: RawBsonRef<'_>,
    scope: &mut Scope<'_>,
) -> Result<ArrayForm, MongoError> {
    let RawBsonRef::Document(d) = arg else {
        let code = match kind {
            NKind::MaxN | NKind::MinN => ErrorCode::Location5787900,
            NKind::FirstN | NKind::LastN => ErrorCode::Location5787801,
        };
        let shown = bson::Bson::try_from(arg.to_raw_bson())
            .map_or_else(|_| String::new(), |b| b.to_string());
        return Err(error(
            code,
            format!("specification must be an object; found {shown}"),
        ));
    };
    let (mut n, mut input) = (None, None);
    for (key, value) in fields(d)? {
        match key {
            "n" => n = Some(Expr::parse_scoped(value, scope)?),
            "input" => input = Some(Expr::parse_scoped(value, scope)?),
            other => {
                return Err(error(
                    ErrorCode::Location5787901,
                    format!("Unknown argument for 'n' operator: {other}"),
                ))
            }
        }
    }
    let n = n.ok_or_else(|| error(ErrorCode::Location5787906, "Missing value for 'n'"))?;
    let input =
        input.ok_or_else(|| error(ErrorCode::Location5787907, "Missing value for 'input'"))?;
    Ok(ArrayForm::TakeN { kind, n, input })
}

type Stack<'a> = Vec<Value<'a>>;

impl ArrayForm {
    pub(crate) fn reads_document(&self) -> bool {
        match self {
            ArrayForm::Zip {
                inputs, defaults, ..
            } => inputs.iter().chain(defaults).any(Expr::reads_document),
            ArrayForm::Sort { input, .. } => input.reads_document(),
            ArrayForm::TakeN { n, input, .. } => n.reads_document() || input.reads_document(),
        }
    }

    pub(crate) fn eval<'a>(
        &self,
        root: &'a RawDocument,
        stack: &mut Stack<'a>,
    ) -> Result<Value<'a>, MongoError> {
        match self {
            ArrayForm::Zip {
                inputs,
                defaults,
                longest,
            } => zip(inputs, defaults, *longest, root, stack),
            ArrayForm::Sort { input, by } => sort_array(&input.eval(root, stack)?, by),
            ArrayForm::TakeN { kind, n, input } => {
                let n = count(&n.eval(root, stack)?)?;
                take_n(*kind, n, &input.eval(root, stack)?)
            }
        }
    }
}

fn zip<'a>(
    inputs: &[Expr],
    defaults: &[Expr],
    longest: bool,
    root: &'a RawDocument,
    stack: &mut Stack<'a>,
) -> Result<Value<'a>, MongoError> {
    let mut arrays = Vec::with_capacity(inputs.len());
    for input in inputs {
        let v = input.eval(root, stack)?;
        if v.is_nullish() {
            return Ok(Value::Owned(RawBson::Null));
        }
        let elements = items(&v)?.ok_or_else(|| {
            error(
                ErrorCode::Location34468,
                format!("$zip found a non-array expression in input: {}", show(&v)),
            )
        })?;
        arrays.push(elements);
    }
    let lengths = arrays.iter().map(Vec::len);
    let (min, max) = (
        lengths.clone().min().unwrap_or(0),
        lengths.max().unwrap_or(0),
    );
    let mut fill = vec![RawBson::Null; arrays.len()];
    if min != max {
        for (slot, d) in fill.iter_mut().zip(defaults) {
            *slot = d
                .eval(root, stack)?
                .as_raw()
                .map_or(RawBson::Null, |r| r.to_raw_bson());
        }
    }
    let rows = if longest { max } else { min };
    let out = (0..rows).map(|row| {
        let cells = arrays
            .iter()
            .zip(&fill)
            .map(|(a, d)| a.get(row).cloned().unwrap_or_else(|| d.clone()));
        array(cells)
            .as_raw()
            .map_or(RawBson::Null, |r| r.to_raw_bson())
    });
    Ok(array(out.collect::<Vec<_>>()))
}

/// The order of two elements under `by`.
fn order(a: &RawBson, b: &RawBson, by: &SortBy) -> Result<Ordering, MongoError> {
    let (x, y) = (
        Value::Ref(a.as_raw_bson_ref()),
        Value::Ref(b.as_raw_bson_ref()),
    );
    match by {
        SortBy::Whole(descending) => {
            let ord = compare_values(&x, &y)?;
            Ok(if *descending { ord.reverse() } else { ord })
        }
        SortBy::Fields(keys) => match (a, b) {
            (RawBson::Document(da), RawBson::Document(db)) => {
                for (path, descending) in keys {
                    let ka = descend(RawBsonRef::Document(da), path, 0)?;
                    let kb = descend(RawBsonRef::Document(db), path, 0)?;
                    let ord = compare_values(&ka, &kb)?;
                    if ord != Ordering::Equal {
                        return Ok(if *descending { ord.reverse() } else { ord });
                    }
                }
                Ok(Ordering::Equal)
            }
            _ => compare_values(&x, &y),
        },
    }
}

fn sort_array<'a>(v: &Value<'_>, by: &SortBy) -> Result<Value<'a>, MongoError> {
    if v.is_nullish() {
        return Ok(Value::Owned(RawBson::Null));
    }
    let mut elements = items(v)?.ok_or_else(|| {
        error(
            ErrorCode::Location2942504,
            format!(
                "The input argument to $sortArray must be an array, but was of type: {}",
                v.type_name()
            ),
        )
    })?;
    sort_elements(&mut elements, by)?;
    Ok(array(elements))
}

fn sort_elements(elements: &mut [RawBson], by: &SortBy) -> Result<(), MongoError> {
    let mut failure = None;
    elements.sort_by(|a, b| {
        order(a, b, by).unwrap_or_else(|e| {
            failure.get_or_insert(e);
            Ordering::Equal
        })
    });
    failure.map_or(Ok(()), Err)
}

/// `n`: a positive integral number (5787902/5787903/5787908).
fn count(v: &Value<'_>) -> Result<usize, MongoError> {
    let not_integral = || {
        error(
            ErrorCode::Location5787902,
            format!(
                "Value for 'n' must be of integral type, but found {}",
                show(v)
            ),
        )
    };
    let d = number(v)?.ok_or_else(not_integral)?.f64();
    if d.fract() != 0.0 || !d.is_finite() {
        return Err(error(
            ErrorCode::Location5787903,
            format!(
                "Value for 'n' must be of integral type, but found {}",
                show(v)
            ),
        ));
    }
    if d <= 0.0 {
        return Err(error(
            ErrorCode::Location5787908,
            format!("'n' must be greater than 0, found {}", d as i64),
        ));
    }
    Ok(if d >= usize::MAX as f64 {
        usize::MAX
    } else {
        d as usize
    })
}

fn take_n<'a>(kind: NKind, n: usize, v: &Value<'_>) -> Result<Value<'a>, MongoError> {
    let elements =
        items(v)?.ok_or_else(|| error(ErrorCode::Location5788200, "Input must be an array"))?;
    Ok(array(match kind {
        NKind::FirstN => elements.into_iter().take(n).collect::<Vec<_>>(),
        NKind::LastN => {
            let skip = elements.len().saturating_sub(n);
            elements.into_iter().skip(skip).collect()
        }
        NKind::MaxN | NKind::MinN => {
            let mut kept: Vec<RawBson> = elements
                .into_iter()
                .filter(|e| !matches!(e, RawBson::Null | RawBson::Undefined))
                .collect();
            sort_elements(&mut kept, &SortBy::Whole(kind == NKind::MaxN))?;
            kept.into_iter().take(n).collect()
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{rawbson, rawdoc};

    fn eval(spec: bson::RawDocumentBuf) -> Result<Option<RawBson>, MongoError> {
        let expr = Expr::parse(RawBsonRef::Document(&spec))?;
        let doc = rawdoc! {"a": [1, 2, 3, 5, 7, 9], "n": 4};
        let v = expr.evaluate(&doc)?;
        Ok(v.as_raw().map(|r| r.to_raw_bson()))
    }

    fn ok(spec: bson::RawDocumentBuf) -> RawBson {
        eval(spec).expect("evaluates").expect("a value")
    }

    fn code(spec: bson::RawDocumentBuf) -> ErrorCode {
        eval(spec).expect_err("fails").code
    }

    #[test]
    fn zips() {
        let r = ok(rawdoc! {"$zip": {"inputs": [[1, 2, 3], ["a", "b"]]}});
        assert_eq!(r, rawbson!([[1, "a"], [2, "b"]]));
        let r = ok(rawdoc! {"$zip": {"inputs": [[1, 2, 3], ["a"]], "useLongestLength": true}});
        assert_eq!(r, rawbson!([[1, "a"], [2, null], [3, null]]));
        let r = ok(
            rawdoc! {"$zip": {"inputs": [[1, 2], ["a"]], "useLongestLength": true, "defaults": [0, "z"]}},
        );
        assert_eq!(r, rawbson!([[1, "a"], [2, "z"]]));
        assert_eq!(
            ok(rawdoc! {"$zip": {"inputs": ["$nope", [1]]}}),
            RawBson::Null
        );
        assert_eq!(code(rawdoc! {"$zip": 1}), ErrorCode::Location34460);
        assert_eq!(
            code(rawdoc! {"$zip": {"inputs": 1}}),
            ErrorCode::Location34461
        );
        assert_eq!(
            code(rawdoc! {"$zip": {"inputs": [[1]], "defaults": 1}}),
            ErrorCode::Location34462
        );
        assert_eq!(
            code(rawdoc! {"$zip": {"inputs": [[1]], "useLongestLength": 1}}),
            ErrorCode::Location34463
        );
        assert_eq!(
            code(rawdoc! {"$zip": {"inputs": [[1]], "x": 1}}),
            ErrorCode::Location34464
        );
        assert_eq!(
            code(rawdoc! {"$zip": {"inputs": []}}),
            ErrorCode::Location34465
        );
        assert_eq!(
            code(rawdoc! {"$zip": {"inputs": [[1]], "defaults": [1]}}),
            ErrorCode::Location34466
        );
        assert_eq!(
            code(rawdoc! {"$zip": {"inputs": [[1]], "defaults": [1, 2], "useLongestLength": true}}),
            ErrorCode::Location34467
        );
        assert_eq!(
            code(rawdoc! {"$zip": {"inputs": [[1], 3]}}),
            ErrorCode::Location34468
        );
    }

    #[test]
    fn sorts_arrays() {
        assert_eq!(
            ok(rawdoc! {"$sortArray": {"input": [3, 1, 2], "sortBy": -1}}),
            rawbson!([3, 2, 1])
        );
        let r = ok(
            rawdoc! {"$sortArray": {"input": [{"x": 2, "y": 1}, {"x": 1, "y": 5}, {"x": 2, "y": 0}], "sortBy": {"x": 1, "y": -1}}},
        );
        assert_eq!(
            r,
            rawbson!([{"x": 1, "y": 5}, {"x": 2, "y": 1}, {"x": 2, "y": 0}])
        );
        assert_eq!(
            ok(rawdoc! {"$sortArray": {"input": null, "sortBy": 1}}),
            RawBson::Null
        );
        assert_eq!(code(rawdoc! {"$sortArray": 1}), ErrorCode::Location2942500);
        assert_eq!(
            code(rawdoc! {"$sortArray": {"input": [], "sortBy": 1, "x": 1}}),
            ErrorCode::Location2942501
        );
        assert_eq!(
            code(rawdoc! {"$sortArray": {"sortBy": 1}}),
            ErrorCode::Location2942502
        );
        assert_eq!(
            code(rawdoc! {"$sortArray": {"input": []}}),
            ErrorCode::Location2942503
        );
        assert_eq!(
            code(rawdoc! {"$sortArray": {"input": 1, "sortBy": 1}}),
            ErrorCode::Location2942504
        );
        assert_eq!(
            code(rawdoc! {"$sortArray": {"input": [], "sortBy": {"a": 2}}}),
            ErrorCode::Location2942505
        );
        assert_eq!(
            code(rawdoc! {"$sortArray": {"input": [], "sortBy": 2}}),
            ErrorCode::Location2942506
        );
        assert_eq!(
            code(rawdoc! {"$sortArray": {"input": [], "sortBy": "a"}}),
            ErrorCode::Location2942507
        );
    }

    #[test]
    fn n_accumulators_from_mongod_tests() {
        let args = || rawdoc! {"n": 3, "input": [5, 4, 3, 2, 1]};
        assert_eq!(ok(rawdoc! {"$minN": args()}), rawbson!([1, 2, 3]));
        assert_eq!(ok(rawdoc! {"$maxN": args()}), rawbson!([5, 4, 3]));
        assert_eq!(ok(rawdoc! {"$firstN": args()}), rawbson!([5, 4, 3]));
        assert_eq!(ok(rawdoc! {"$lastN": args()}), rawbson!([3, 2, 1]));
        let args = || rawdoc! {"n": 3, "input": [null, 2, null, 1]};
        assert_eq!(ok(rawdoc! {"$minN": args()}), rawbson!([1, 2]));
        assert_eq!(ok(rawdoc! {"$maxN": args()}), rawbson!([2, 1]));
        assert_eq!(ok(rawdoc! {"$firstN": args()}), rawbson!([null, 2, null]));
        assert_eq!(ok(rawdoc! {"$lastN": args()}), rawbson!([2, null, 1]));
        assert_eq!(
            ok(rawdoc! {"$lastN": {"n": "$n", "input": "$a"}}),
            rawbson!([3, 5, 7, 9])
        );
        assert_eq!(code(rawdoc! {"$minN": 1}), ErrorCode::Location5787900);
        assert_eq!(code(rawdoc! {"$firstN": 1}), ErrorCode::Location5787801);
        assert_eq!(
            code(rawdoc! {"$firstN": {"n": 1, "input": [], "x": 1}}),
            ErrorCode::Location5787901
        );
        assert_eq!(
            code(rawdoc! {"$firstN": {"input": []}}),
            ErrorCode::Location5787906
        );
        assert_eq!(
            code(rawdoc! {"$firstN": {"n": 1}}),
            ErrorCode::Location5787907
        );
        assert_eq!(
            code(rawdoc! {"$firstN": {"n": "a", "input": []}}),
            ErrorCode::Location5787902
        );
        assert_eq!(
            code(rawdoc! {"$firstN": {"n": 1.5, "input": []}}),
            ErrorCode::Location5787903
        );
        assert_eq!(
            code(rawdoc! {"$firstN": {"n": 0, "input": []}}),
            ErrorCode::Location5787908
        );
        assert_eq!(
            code(rawdoc! {"$firstN": {"n": 1, "input": null}}),
            ErrorCode::Location5788200
        );
    }
}
