//! Set expression operators: `$setUnion $setIntersection $setDifference $setEquals
//! $setIsSubset $anyElementTrue $allElementsTrue`, over already evaluated arguments, as
//! mongod 7.0 evaluates them (`expression.cpp`). Arrays are read as sets under MongoDB's
//! equality (1 and 1.0 are one element); `$setUnion`/`$setIntersection` give their elements
//! in MongoDB's sort order (mongod builds them in an ordered set), `$setDifference` in the
//! first array's order. Null or missing gives null for `$setUnion $setIntersection
//! $setDifference`; the others refuse it as a non-array (17040-17049).

use std::cmp::Ordering;

use bson::raw::{RawArrayBuf, RawBson, RawBsonRef};

use super::expr::{compare_values, error, truthy, Value};
use super::expr_arity::Arity;
use super::path::bson_error;
use crate::{ErrorCode, MongoError};

/// A set expression operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs, reason = "each variant is the operator of the same name")]
pub enum SetOp {
    Union,
    Intersection,
    Difference,
    Equals,
    IsSubset,
    AnyElementTrue,
    AllElementsTrue,
}

impl SetOp {
    /// The operator named `name`.
    pub fn from_name(name: &str) -> Option<SetOp> {
        Some(match name {
            "$setUnion" => SetOp::Union,
            "$setIntersection" => SetOp::Intersection,
            "$setDifference" => SetOp::Difference,
            "$setEquals" => SetOp::Equals,
            "$setIsSubset" => SetOp::IsSubset,
            "$anyElementTrue" => SetOp::AnyElementTrue,
            "$allElementsTrue" => SetOp::AllElementsTrue,
            _ => return None,
        })
    }

    /// How many arguments it takes (`$setEquals` needs two or more, 17045).
    pub fn arity(self) -> Arity {
        match self {
            SetOp::Union | SetOp::Intersection | SetOp::Equals => Arity::Any,
            SetOp::Difference | SetOp::IsSubset => Arity::Exact(2),
            SetOp::AnyElementTrue | SetOp::AllElementsTrue => Arity::Exact(1),
        }
    }
}

/// `$setEquals`' own count check (mongod's `validateArguments`).
pub(crate) fn check_count(op: SetOp, count: usize) -> Result<(), MongoError> {
    if op == SetOp::Equals && count < 2 {
        return Err(error(
            ErrorCode::Location17045,
            format!("$setEquals needs at least two arguments had: {count}"),
        ));
    }
    Ok(())
}

type Elements<'v> = Vec<Value<'v>>;

/// The elements of an array value, or `None` when it is not an array.
fn elements<'v>(v: &'v Value<'_>) -> Result<Option<Elements<'v>>, MongoError> {
    let Some(RawBsonRef::Array(items)) = v.as_raw() else {
        return Ok(None);
    };
    let mut out = Vec::new();
    for item in items {
        out.push(Value::Ref(item.map_err(bson_error)?));
    }
    Ok(Some(out))
}

/// Sorted by MongoDB's order with equal values kept once (the first seen).
fn sorted_set<'v>(mut items: Elements<'v>) -> Result<Elements<'v>, MongoError> {
    let mut failure = None;
    items.sort_by(|a, b| {
        compare_values(a, b).unwrap_or_else(|e| {
            failure.get_or_insert(e);
            Ordering::Equal
        })
    });
    if let Some(e) = failure {
        return Err(e);
    }
    let mut out: Elements<'v> = Vec::with_capacity(items.len());
    for item in items {
        let repeated = match out.last() {
            Some(last) => compare_values(last, &item)? == Ordering::Equal,
            None => false,
        };
        if !repeated {
            out.push(item);
        }
    }
    Ok(out)
}

fn contains(set: &[Value<'_>], v: &Value<'_>) -> Result<bool, MongoError> {
    for item in set {
        if compare_values(item, v)? == Ordering::Equal {
            return Ok(true);
        }
    }
    Ok(false)
}

fn array_of(items: &[Value<'_>]) -> Value<'static> {
    let mut out = RawArrayBuf::new();
    for item in items {
        if let Some(raw) = item.as_raw() {
            out.push(raw.to_raw_bson());
        }
    }
    Value::Owned(RawBson::Array(out))
}

fn boolean(b: bool) -> Value<'static> {
    Value::Owned(RawBson::Boolean(b))
}

/// Evaluate `op` over its evaluated arguments.
pub(crate) fn apply<'a>(op: SetOp, values: &[Value<'_>]) -> Result<Value<'a>, MongoError> {
    match op {
        SetOp::Union => union(values),
        SetOp::Intersection => intersection(values),
        SetOp::Difference => difference(&values[0], &values[1]),
        SetOp::Equals => equals(values),
        SetOp::IsSubset => is_subset(&values[0], &values[1]),
        SetOp::AnyElementTrue | SetOp::AllElementsTrue => any_all(op, &values[0]),
    }
}

fn union<'a>(values: &[Value<'_>]) -> Result<Value<'a>, MongoError> {
    let mut all = Vec::new();
    for v in values {
        if v.is_nullish() {
            return Ok(Value::Owned(RawBson::Null));
        }
        let items = elements(v)?.ok_or_else(|| {
            error(
                ErrorCode::Location17043,
                format!(
                    "All operands of $setUnion must be arrays. One argument is of type: {}",
                    v.type_name()
                ),
            )
        })?;
        all.extend(items);
    }
    Ok(array_of(&sorted_set(all)?))
}

fn intersection<'a>(values: &[Value<'_>]) -> Result<Value<'a>, MongoError> {
    let mut current: Option<Elements<'_>> = None;
    for v in values {
        if v.is_nullish() {
            return Ok(Value::Owned(RawBson::Null));
        }
        let items = elements(v)?.ok_or_else(|| {
            error(
                ErrorCode::Location17047,
                format!(
                    "All operands of $setIntersection must be arrays. One argument is of type: {}",
                    v.type_name()
                ),
            )
        })?;
        current = Some(match current {
            None => sorted_set(items)?,
            Some(kept) => {
                let mut next = Vec::new();
                for item in kept {
                    if contains(&items, &item)? {
                        next.push(item);
                    }
                }
                next
            }
        });
    }
    Ok(array_of(&current.unwrap_or_default()))
}

fn two_arrays<'v>(
    a: &'v Value<'_>,
    b: &'v Value<'_>,
    name: &str,
    codes: (ErrorCode, ErrorCode),
) -> Result<(Elements<'v>, Elements<'v>), MongoError> {
    let refuse = |code, which: &str, v: &Value<'_>| {
        error(
            code,
            format!(
                "both operands of {name} must be arrays. {which} argument is of type: {}",
                v.type_name()
            ),
        )
    };
    let first = elements(a)?.ok_or_else(|| refuse(codes.0, "First", a))?;
    let second = elements(b)?.ok_or_else(|| refuse(codes.1, "Second", b))?;
    Ok((first, second))
}

fn difference<'a>(a: &Value<'_>, b: &Value<'_>) -> Result<Value<'a>, MongoError> {
    if a.is_nullish() || b.is_nullish() {
        return Ok(Value::Owned(RawBson::Null));
    }
    let codes = (ErrorCode::Location17048, ErrorCode::Location17049);
    let (first, mut seen) = two_arrays(a, b, "$setDifference", codes)?;
    let mut out = Vec::new();
    for item in first {
        if !contains(&seen, &item)? {
            seen.push(item.clone());
            out.push(item);
        }
    }
    Ok(array_of(&out))
}

fn equals<'a>(values: &[Value<'_>]) -> Result<Value<'a>, MongoError> {
    let mut sets = Vec::with_capacity(values.len());
    for (i, v) in values.iter().enumerate() {
        let items = elements(v)?.ok_or_else(|| {
            error(
                ErrorCode::Location17044,
                format!(
                    "All operands of $setEquals must be arrays. {}-th argument is of type: {}",
                    i + 1,
                    v.type_name()
                ),
            )
        })?;
        sets.push(sorted_set(items)?);
    }
    let Some((first, rest)) = sets.split_first() else {
        return Ok(boolean(true));
    };
    for other in rest {
        if other.len() != first.len() {
            return Ok(boolean(false));
        }
        for (x, y) in first.iter().zip(other) {
            if compare_values(x, y)? != Ordering::Equal {
                return Ok(boolean(false));
            }
        }
    }
    Ok(boolean(true))
}

fn is_subset<'a>(a: &Value<'_>, b: &Value<'_>) -> Result<Value<'a>, MongoError> {
    let codes = (ErrorCode::Location17046, ErrorCode::Location17042);
    let (first, second) = two_arrays(a, b, "$setIsSubset", codes)?;
    for item in &first {
        if !contains(&second, item)? {
            return Ok(boolean(false));
        }
    }
    Ok(boolean(true))
}

fn any_all<'a>(op: SetOp, v: &Value<'_>) -> Result<Value<'a>, MongoError> {
    let (name, code) = match op {
        SetOp::AnyElementTrue => ("$anyElementTrue", ErrorCode::Location17041),
        _ => ("$allElementsTrue", ErrorCode::Location17040),
    };
    let items = elements(v)?.ok_or_else(|| {
        error(
            code,
            format!(
                "{name}'s argument must be an array, but is {}",
                v.type_name()
            ),
        )
    })?;
    let any = op == SetOp::AnyElementTrue;
    Ok(boolean(if any {
        items.iter().any(truthy)
    } else {
        items.iter().all(truthy)
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::rawbson;

    fn run(op: SetOp, args: Vec<RawBson>) -> Result<RawBson, MongoError> {
        let values: Vec<Value<'_>> = args.into_iter().map(Value::Owned).collect();
        apply(op, &values).map(|r| r.as_raw().map_or(RawBson::Null, |x| x.to_raw_bson()))
    }

    #[test]
    fn union_intersection_difference() {
        let u = run(
            SetOp::Union,
            vec![rawbson!([3, 1, "a"]), rawbson!([1.0, 2, 3])],
        )
        .unwrap();
        assert_eq!(u, rawbson!([1, 2, 3, "a"]));
        let i = run(
            SetOp::Intersection,
            vec![rawbson!([3, 1, 2, 2]), rawbson!([2, 3, 4])],
        )
        .unwrap();
        assert_eq!(i, rawbson!([2, 3]));
        assert_eq!(run(SetOp::Intersection, vec![]).unwrap(), rawbson!([]));
        let d = run(
            SetOp::Difference,
            vec![rawbson!([3, 1, 3, 2]), rawbson!([2])],
        )
        .unwrap();
        assert_eq!(d, rawbson!([3, 1]));
        assert_eq!(
            run(SetOp::Union, vec![rawbson!([1]), RawBson::Null]).unwrap(),
            RawBson::Null
        );
        assert_eq!(
            run(SetOp::Difference, vec![RawBson::Null, rawbson!([1])]).unwrap(),
            RawBson::Null
        );
        let e = run(SetOp::Union, vec![rawbson!([1]), RawBson::Int32(1)]).unwrap_err();
        assert_eq!(
            e.message,
            "All operands of $setUnion must be arrays. One argument is of type: int"
        );
        let e = run(SetOp::Difference, vec![rawbson!([1]), RawBson::Int32(1)]).unwrap_err();
        assert_eq!(e.code, ErrorCode::Location17049);
        let e = run(SetOp::Intersection, vec![RawBson::String("x".into())]).unwrap_err();
        assert_eq!(e.code, ErrorCode::Location17047);
    }

    #[test]
    fn equals_subset_any_all() {
        let t = RawBson::Boolean(true);
        let f = RawBson::Boolean(false);
        assert_eq!(
            run(SetOp::Equals, vec![rawbson!([1, 2, 2]), rawbson!([2, 1])]).unwrap(),
            t
        );
        assert_eq!(
            run(
                SetOp::Equals,
                vec![rawbson!([1]), rawbson!([1]), rawbson!([2])]
            )
            .unwrap(),
            f
        );
        let e = run(SetOp::Equals, vec![rawbson!([1]), RawBson::Null]).unwrap_err();
        assert_eq!(
            e.message,
            "All operands of $setEquals must be arrays. 2-th argument is of type: null"
        );
        assert_eq!(
            check_count(SetOp::Equals, 1).unwrap_err().code,
            ErrorCode::Location17045
        );
        assert_eq!(
            run(SetOp::IsSubset, vec![rawbson!([1, 1]), rawbson!([1, 2])]).unwrap(),
            t
        );
        assert_eq!(
            run(SetOp::IsSubset, vec![rawbson!([3]), rawbson!([1, 2])]).unwrap(),
            f
        );
        let e = run(SetOp::IsSubset, vec![RawBson::Null, rawbson!([1])]).unwrap_err();
        assert_eq!(e.code, ErrorCode::Location17046);
        assert_eq!(
            run(SetOp::AnyElementTrue, vec![rawbson!([0, null, 2])]).unwrap(),
            t
        );
        assert_eq!(
            run(SetOp::AllElementsTrue, vec![rawbson!([1, [], false])]).unwrap(),
            f
        );
        assert_eq!(run(SetOp::AllElementsTrue, vec![rawbson!([])]).unwrap(), t);
        let e = run(SetOp::AnyElementTrue, vec![RawBson::Null]).unwrap_err();
        assert_eq!(
            e.message,
            "$anyElementTrue's argument must be an array, but is null"
        );
    }
}
