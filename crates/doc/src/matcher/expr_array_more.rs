//! Array expression operators that take plain arguments: `$slice $first $last $indexOfArray
//! $range $arrayToObject`, over already evaluated arguments, as mongod 7.0 evaluates them
//! (`expression.cpp`): `$slice` 28724-28729, `$first`/`$last` with `$arrayElemAt`'s errors
//! (28689), `$indexOfArray` 40090/40096/40097 (int results, -1 when absent), `$range`
//! 34443-34449 (ints; too long a range is `ExceededMemoryLimit` as mongod's 100 MB knob),
//! `$arrayToObject` 40386-40398, 4940400/4940401 (a repeated key keeps its first place and
//! its last value). The special forms (`$zip`, `$sortArray`, `$firstN`...) are in
//! `expr_array_forms`.

use std::cmp::Ordering;

use bson::raw::{RawArrayBuf, RawBson, RawBsonRef, RawDocumentBuf};

use super::expr::{compare_values, error, Value};
use super::expr_arity::{integral32, number, show, Arity};
use super::path::bson_error;
use crate::{ErrorCode, MongoError};

/// An array expression operator with plain arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs, reason = "each variant is the operator of the same name")]
pub enum ArrayOp {
    Slice,
    First,
    Last,
    IndexOfArray,
    Range,
    ArrayToObject,
}

/// mongod's `internalQueryMaxRangeBytes` default.
const RANGE_BYTES_MAX: i64 = 100 * 1024 * 1024;

impl ArrayOp {
    /// The operator named `name`.
    pub fn from_name(name: &str) -> Option<ArrayOp> {
        Some(match name {
            "$slice" => ArrayOp::Slice,
            "$first" => ArrayOp::First,
            "$last" => ArrayOp::Last,
            "$indexOfArray" => ArrayOp::IndexOfArray,
            "$range" => ArrayOp::Range,
            "$arrayToObject" => ArrayOp::ArrayToObject,
            _ => return None,
        })
    }

    /// How many arguments it takes.
    pub fn arity(self) -> Arity {
        match self {
            ArrayOp::Slice | ArrayOp::Range => Arity::Range(2, 3),
            ArrayOp::IndexOfArray => Arity::Range(2, 4),
            ArrayOp::First | ArrayOp::Last | ArrayOp::ArrayToObject => Arity::Exact(1),
        }
    }
}

fn null<'a>() -> Value<'a> {
    Value::Owned(RawBson::Null)
}

/// The elements of an array value (`None` when it is not one).
pub(crate) fn items(v: &Value<'_>) -> Result<Option<Vec<RawBson>>, MongoError> {
    let Some(RawBsonRef::Array(a)) = v.as_raw() else {
        return Ok(None);
    };
    let mut out = Vec::new();
    for item in a {
        out.push(item.map_err(bson_error)?.to_raw_bson());
    }
    Ok(Some(out))
}

pub(crate) fn array<'a>(elements: impl IntoIterator<Item = RawBson>) -> Value<'a> {
    let mut out = RawArrayBuf::new();
    for e in elements {
        out.push(e);
    }
    Value::Owned(RawBson::Array(out))
}

/// Evaluate `op` over its evaluated arguments.
pub(crate) fn apply<'a>(op: ArrayOp, values: &[Value<'_>]) -> Result<Value<'a>, MongoError> {
    match op {
        ArrayOp::Slice => slice(values),
        ArrayOp::First => first_last("$first", &values[0], true),
        ArrayOp::Last => first_last("$last", &values[0], false),
        ArrayOp::IndexOfArray => index_of_array(values),
        ArrayOp::Range => range(values),
        ArrayOp::ArrayToObject => array_to_object(&values[0]),
    }
}

fn first_last<'a>(name: &str, v: &Value<'_>, first: bool) -> Result<Value<'a>, MongoError> {
    if v.is_nullish() {
        return Ok(null());
    }
    let elements = items(v)?.ok_or_else(|| {
        error(
            ErrorCode::Location28689,
            format!(
                "{name}'s argument must be an array, but is {}",
                v.type_name()
            ),
        )
    })?;
    let picked = if first {
        elements.into_iter().next()
    } else {
        elements.into_iter().last()
    };
    Ok(picked.map_or(Value::Missing, Value::Owned))
}

fn slice<'a>(values: &[Value<'_>]) -> Result<Value<'a>, MongoError> {
    let (arr, second) = (&values[0], &values[1]);
    if arr.is_nullish() || second.is_nullish() {
        return Ok(null());
    }
    let elements = items(arr)?.ok_or_else(|| {
        error(
            ErrorCode::Location28724,
            format!(
                "First argument to $slice must be an array, but is of type: {}",
                arr.type_name()
            ),
        )
    })?;
    let n = slice_int(
        second,
        "Second",
        ErrorCode::Location28725,
        ErrorCode::Location28726,
    )?;
    let len = i64::try_from(elements.len()).unwrap_or(i64::MAX);
    let n = i64::from(n);
    let (start, end) = match values.get(2) {
        None if n >= 0 => (0, n.min(len)),
        None => ((len + n).max(0), len),
        Some(count) => {
            let start = if n < 0 { (len + n).max(0) } else { n.min(len) };
            if count.is_nullish() {
                return Ok(null());
            }
            let c = slice_int(
                count,
                "Third",
                ErrorCode::Location28727,
                ErrorCode::Location28728,
            )?;
            if c <= 0 {
                return Err(error(
                    ErrorCode::Location28729,
                    format!("Third argument to $slice must be positive: {c}"),
                ));
            }
            (start, (start + i64::from(c)).min(len))
        }
    };
    let skip = usize::try_from(start).unwrap_or(0);
    let take = usize::try_from(end - start).unwrap_or(0);
    Ok(array(elements.into_iter().skip(skip).take(take)))
}

fn slice_int(
    v: &Value<'_>,
    which: &str,
    not_number: ErrorCode,
    not_int: ErrorCode,
) -> Result<i32, MongoError> {
    let Some(n) = number(v)? else {
        let message = if which == "Second" {
            format!(
                "Second argument to $slice must be a numeric value, but is of type: {}",
                v.type_name()
            )
        } else {
            format!(
                "Third argument to $slice must be numeric, but is of type: {}",
                v.type_name()
            )
        };
        return Err(error(not_number, message));
    };
    integral32(v).ok_or_else(|| {
        error(
            not_int,
            format!(
                "{which} argument to $slice can't be represented as a 32-bit integer: {}",
                super::expr_arity::cpp_double(n.f64())
            ),
        )
    })
}

fn index_of_array<'a>(values: &[Value<'_>]) -> Result<Value<'a>, MongoError> {
    let arr = &values[0];
    if arr.is_nullish() {
        return Ok(null());
    }
    let elements = items(arr)?.ok_or_else(|| {
        error(
            ErrorCode::Location40090,
            format!(
                "$indexOfArray requires an array as a first argument, found: {}",
                arr.type_name()
            ),
        )
    })?;
    let len = elements.len();
    let start = match values.get(2) {
        Some(v) => index_bound(v, "starting index")?,
        None => 0,
    };
    let end = match values.get(3) {
        Some(v) => index_bound(v, "ending index")?.min(len),
        None => len,
    };
    let target = &values[1];
    for (i, item) in elements.iter().enumerate().take(end).skip(start) {
        let item = Value::Ref(item.as_raw_bson_ref());
        if compare_values(&item, target)? == Ordering::Equal {
            return Ok(Value::Owned(RawBson::Int32(
                i32::try_from(i).unwrap_or(i32::MAX),
            )));
        }
    }
    Ok(Value::Owned(RawBson::Int32(-1)))
}

fn index_bound(v: &Value<'_>, what: &str) -> Result<usize, MongoError> {
    let n = integral32(v).ok_or_else(|| {
        error(
            ErrorCode::Location40096,
            format!(
                "$indexOfArrayrequires an integral {what}, found a value of type: {}, with value: {}",
                v.type_name(),
                show(v)
            ),
        )
    })?;
    usize::try_from(n).map_err(|_| {
        error(
            ErrorCode::Location40097,
            format!("$indexOfArray requires a nonnegative {what}, found: {n}"),
        )
    })
}

fn range_int(
    v: &Value<'_>,
    codes: (ErrorCode, ErrorCode),
    what: (&str, &str),
) -> Result<i64, MongoError> {
    if number(v)?.is_none() {
        return Err(error(
            codes.0,
            format!(
                "$range requires a numeric {}, found value of type:{}{}",
                what.0,
                if what.0 == "step value" { "" } else { " " },
                v.type_name()
            ),
        ));
    }
    integral32(v).map(i64::from).ok_or_else(|| {
        error(
            codes.1,
            format!(
                "$range requires {} that can be represented as a 32-bit integer, found value: {}",
                what.1,
                show(v)
            ),
        )
    })
}

fn range<'a>(values: &[Value<'_>]) -> Result<Value<'a>, MongoError> {
    let start = range_int(
        &values[0],
        (ErrorCode::Location34443, ErrorCode::Location34444),
        ("starting value", "a starting value"),
    )?;
    let end = range_int(
        &values[1],
        (ErrorCode::Location34445, ErrorCode::Location34446),
        ("ending value", "an ending value"),
    )?;
    let step = match values.get(2) {
        None => 1,
        Some(v) => range_int(
            v,
            (ErrorCode::Location34447, ErrorCode::Location34448),
            ("step value", "a step value"),
        )?,
    };
    if step == 0 {
        return Err(error(
            ErrorCode::Location34449,
            "$range requires a non-zero step value",
        ));
    }
    let steps = (end - start) / step;
    let length = if steps >= 0 { steps + 1 } else { 0 };
    // mongod's estimate: a vector header plus one Value (16 bytes) per element.
    let needed = 24 + length * 16;
    if needed >= RANGE_BYTES_MAX {
        return Err(error(
            ErrorCode::ExceededMemoryLimit,
            format!(
                "$range would use too much memory ({needed} bytes) and cannot spill to disk. \
                 Memory limit: {RANGE_BYTES_MAX} bytes"
            ),
        ));
    }
    let mut out = Vec::new();
    let mut current = start;
    while (step > 0 && current < end) || (step < 0 && current > end) {
        out.push(RawBson::Int32(i32::try_from(current).unwrap_or(i32::MAX)));
        current += step;
    }
    Ok(array(out))
}

fn array_to_object<'a>(v: &Value<'_>) -> Result<Value<'a>, MongoError> {
    if v.is_nullish() {
        return Ok(null());
    }
    let elements = items(v)?.ok_or_else(|| {
        error(
            ErrorCode::Location40386,
            format!(
                "$arrayToObject requires an array input, found: {}",
                v.type_name()
            ),
        )
    })?;
    let mut fields: Vec<(String, RawBson)> = Vec::new();
    let pairs = match elements.first() {
        None => true,
        Some(RawBson::Array(_)) => true,
        Some(RawBson::Document(_)) => false,
        Some(other) => {
            return Err(error(
                ErrorCode::Location40398,
                format!(
                    "Unrecognised input type format for $arrayToObject: {}",
                    Value::Ref(other.as_raw_bson_ref()).type_name()
                ),
            ))
        }
    };
    for element in &elements {
        let (key, value) = if pairs {
            pair_entry(element)?
        } else {
            kv_entry(element)?
        };
        match fields.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => fields.push((key, value)),
        }
    }
    let mut out = RawDocumentBuf::new();
    for (k, v) in fields {
        out.append(k, v);
    }
    Ok(Value::Owned(RawBson::Document(out)))
}

fn type_of(v: &RawBson) -> &'static str {
    Value::Ref(v.as_raw_bson_ref()).type_name()
}

fn checked_key(key: &str, code: ErrorCode) -> Result<String, MongoError> {
    if key.contains('\0') {
        return Err(error(
            code,
            "Key field cannot contain an embedded null byte",
        ));
    }
    Ok(key.to_owned())
}

fn pair_entry(element: &RawBson) -> Result<(String, RawBson), MongoError> {
    let RawBson::Array(pair) = element else {
        return Err(error(
            ErrorCode::Location40396,
            format!(
                "$arrayToObject requires a consistent input format. Elements mustall be arrays or \
                 all be objects. Array was detected, now found: {}",
                type_of(element)
            ),
        ));
    };
    let parts = items(&Value::Ref(RawBsonRef::Array(pair)))?.unwrap_or_default();
    let [key, value] = <[RawBson; 2]>::try_from(parts).map_err(|p| {
        error(
            ErrorCode::Location40397,
            format!(
                "$arrayToObject requires an array of size 2 arrays,found array of size: {}",
                p.len()
            ),
        )
    })?;
    let RawBson::String(key) = key else {
        return Err(error(
            ErrorCode::Location40395,
            format!(
                "$arrayToObject requires an array of key-value pairs, where the key must be of \
                 type string. Found key type: {}",
                type_of(&key)
            ),
        ));
    };
    Ok((checked_key(&key, ErrorCode::Location4940400)?, value))
}

fn kv_entry(element: &RawBson) -> Result<(String, RawBson), MongoError> {
    let RawBson::Document(d) = element else {
        return Err(error(
            ErrorCode::Location40391,
            format!(
                "$arrayToObject requires a consistent input format. Elements mustall be arrays or \
                 all be objects. Object was detected, now found: {}",
                type_of(element)
            ),
        ));
    };
    let mut fields = Vec::new();
    for f in d {
        let (k, v) = f.map_err(bson_error)?;
        fields.push((k.to_owned(), v.to_raw_bson()));
    }
    if fields.len() != 2 {
        return Err(error(
            ErrorCode::Location40392,
            format!(
                "$arrayToObject requires an object keys of 'k' and 'v'. Found incorrect number of \
                 keys:{}",
                fields.len()
            ),
        ));
    }
    let find = |name: &str| {
        fields
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let (Some(key), Some(value)) = (find("k"), find("v")) else {
        let shown =
            bson::Document::try_from(d.as_ref()).map_or_else(|_| String::new(), |d| d.to_string());
        return Err(error(
            ErrorCode::Location40393,
            format!(
                "$arrayToObject requires an object with keys 'k' and 'v'. Missing either or both \
                 keys from: {shown}"
            ),
        ));
    };
    let RawBson::String(key) = key else {
        return Err(error(
            ErrorCode::Location40394,
            format!(
                "$arrayToObject requires an object with keys 'k' and 'v', where the value of 'k' \
                 must be of type string. Found type: {}",
                type_of(&key)
            ),
        ));
    };
    Ok((checked_key(&key, ErrorCode::Location4940401)?, value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{rawbson, rawdoc};

    fn run(op: ArrayOp, args: Vec<RawBson>) -> Result<Option<RawBson>, MongoError> {
        let values: Vec<Value<'_>> = args.into_iter().map(Value::Owned).collect();
        apply(op, &values).map(|r| r.as_raw().map(|x| x.to_raw_bson()))
    }

    fn ok(op: ArrayOp, args: Vec<RawBson>) -> RawBson {
        run(op, args).expect("evaluates").expect("has a value")
    }

    fn code(op: ArrayOp, args: Vec<RawBson>) -> ErrorCode {
        run(op, args).expect_err("fails").code
    }

    #[test]
    fn slices() {
        let a = || rawbson!([1, 2, 3, 4, 5]);
        assert_eq!(
            ok(ArrayOp::Slice, vec![a(), RawBson::Int32(2)]),
            rawbson!([1, 2])
        );
        assert_eq!(
            ok(ArrayOp::Slice, vec![a(), RawBson::Int32(-2)]),
            rawbson!([4, 5])
        );
        assert_eq!(ok(ArrayOp::Slice, vec![a(), RawBson::Int32(-9)]), a());
        assert_eq!(
            ok(
                ArrayOp::Slice,
                vec![a(), RawBson::Int32(1), RawBson::Int32(2)]
            ),
            rawbson!([2, 3])
        );
        assert_eq!(
            ok(
                ArrayOp::Slice,
                vec![a(), RawBson::Int32(-2), RawBson::Int32(9)]
            ),
            rawbson!([4, 5])
        );
        assert_eq!(
            ok(
                ArrayOp::Slice,
                vec![a(), RawBson::Int32(9), RawBson::Int32(1)]
            ),
            rawbson!([])
        );
        assert_eq!(
            ok(ArrayOp::Slice, vec![RawBson::Null, RawBson::Int32(1)]),
            RawBson::Null
        );
        assert_eq!(
            code(ArrayOp::Slice, vec![RawBson::Int32(1), RawBson::Int32(1)]),
            ErrorCode::Location28724
        );
        assert_eq!(
            code(ArrayOp::Slice, vec![a(), RawBson::String("x".into())]),
            ErrorCode::Location28725
        );
        assert_eq!(
            code(ArrayOp::Slice, vec![a(), RawBson::Double(1.5)]),
            ErrorCode::Location28726
        );
        assert_eq!(
            code(
                ArrayOp::Slice,
                vec![a(), RawBson::Int32(0), RawBson::Int32(0)]
            ),
            ErrorCode::Location28729
        );
        assert_eq!(
            code(
                ArrayOp::Slice,
                vec![a(), RawBson::Int32(0), RawBson::Boolean(true)]
            ),
            ErrorCode::Location28727
        );
    }

    #[test]
    fn first_last_index() {
        assert_eq!(
            ok(ArrayOp::First, vec![rawbson!([7, 8])]),
            RawBson::Int32(7)
        );
        assert_eq!(ok(ArrayOp::Last, vec![rawbson!([7, 8])]), RawBson::Int32(8));
        assert_eq!(run(ArrayOp::Last, vec![rawbson!([])]).unwrap(), None);
        assert_eq!(ok(ArrayOp::First, vec![RawBson::Null]), RawBson::Null);
        let e = run(ArrayOp::First, vec![RawBson::Int32(1)]).unwrap_err();
        assert_eq!(e.message, "$first's argument must be an array, but is int");
        let a = || rawbson!(["a", "b", "a", "c"]);
        let s = |x: &str| RawBson::String(x.into());
        assert_eq!(
            ok(ArrayOp::IndexOfArray, vec![a(), s("a")]),
            RawBson::Int32(0)
        );
        assert_eq!(
            ok(ArrayOp::IndexOfArray, vec![a(), s("a"), RawBson::Int32(1)]),
            RawBson::Int32(2)
        );
        assert_eq!(
            ok(
                ArrayOp::IndexOfArray,
                vec![a(), s("c"), RawBson::Int32(0), RawBson::Int32(2)]
            ),
            RawBson::Int32(-1)
        );
        assert_eq!(
            ok(ArrayOp::IndexOfArray, vec![a(), s("a"), RawBson::Int32(10)]),
            RawBson::Int32(-1)
        );
        assert_eq!(
            ok(ArrayOp::IndexOfArray, vec![RawBson::Null, s("a")]),
            RawBson::Null
        );
        assert_eq!(
            code(ArrayOp::IndexOfArray, vec![s("x"), s("a")]),
            ErrorCode::Location40090
        );
        assert_eq!(
            code(ArrayOp::IndexOfArray, vec![a(), s("a"), RawBson::Int32(-1)]),
            ErrorCode::Location40097
        );
        assert_eq!(
            code(
                ArrayOp::IndexOfArray,
                vec![a(), s("a"), RawBson::Double(1.5)]
            ),
            ErrorCode::Location40096
        );
    }

    #[test]
    fn ranges() {
        assert_eq!(
            ok(
                ArrayOp::Range,
                vec![RawBson::Int32(0), RawBson::Int32(5), RawBson::Int32(2)]
            ),
            rawbson!([0, 2, 4])
        );
        assert_eq!(
            ok(
                ArrayOp::Range,
                vec![RawBson::Int32(5), RawBson::Int32(0), RawBson::Int32(-2)]
            ),
            rawbson!([5, 3, 1])
        );
        assert_eq!(
            ok(ArrayOp::Range, vec![RawBson::Int32(5), RawBson::Int32(0)]),
            rawbson!([])
        );
        assert_eq!(
            ok(
                ArrayOp::Range,
                vec![RawBson::Double(1.0), RawBson::Int64(3)]
            ),
            rawbson!([1, 2])
        );
        let e = run(ArrayOp::Range, vec![RawBson::Null, RawBson::Int32(1)]).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                ErrorCode::Location34443,
                "$range requires a numeric starting value, found value of type: null"
            )
        );
        assert_eq!(
            code(
                ArrayOp::Range,
                vec![RawBson::Double(0.5), RawBson::Int32(1)]
            ),
            ErrorCode::Location34444
        );
        assert_eq!(
            code(
                ArrayOp::Range,
                vec![RawBson::Int32(0), RawBson::String("a".into())]
            ),
            ErrorCode::Location34445
        );
        assert_eq!(
            code(
                ArrayOp::Range,
                vec![RawBson::Int32(0), RawBson::Int64(1 << 40)]
            ),
            ErrorCode::Location34446
        );
        assert_eq!(
            code(
                ArrayOp::Range,
                vec![RawBson::Int32(0), RawBson::Int32(1), RawBson::Null]
            ),
            ErrorCode::Location34447
        );
        assert_eq!(
            code(
                ArrayOp::Range,
                vec![RawBson::Int32(0), RawBson::Int32(1), RawBson::Double(0.5)]
            ),
            ErrorCode::Location34448
        );
        assert_eq!(
            code(
                ArrayOp::Range,
                vec![RawBson::Int32(0), RawBson::Int32(1), RawBson::Int32(0)]
            ),
            ErrorCode::Location34449
        );
        assert_eq!(
            code(
                ArrayOp::Range,
                vec![RawBson::Int32(0), RawBson::Int32(i32::MAX)]
            ),
            ErrorCode::ExceededMemoryLimit
        );
    }

    #[test]
    fn array_to_object_forms() {
        let r = ok(
            ArrayOp::ArrayToObject,
            vec![rawbson!([["a", 1], ["b", 2], ["a", 3]])],
        );
        assert_eq!(r, RawBson::Document(rawdoc! {"a": 3, "b": 2}));
        let r = ok(
            ArrayOp::ArrayToObject,
            vec![rawbson!([{"k": "x", "v": true}])],
        );
        assert_eq!(r, RawBson::Document(rawdoc! {"x": true}));
        assert_eq!(
            ok(ArrayOp::ArrayToObject, vec![rawbson!([])]),
            RawBson::Document(rawdoc! {})
        );
        assert_eq!(
            ok(ArrayOp::ArrayToObject, vec![RawBson::Null]),
            RawBson::Null
        );
        assert_eq!(
            code(ArrayOp::ArrayToObject, vec![RawBson::Int32(1)]),
            ErrorCode::Location40386
        );
        assert_eq!(
            code(ArrayOp::ArrayToObject, vec![rawbson!([1])]),
            ErrorCode::Location40398
        );
        assert_eq!(
            code(
                ArrayOp::ArrayToObject,
                vec![rawbson!([["a", 1], {"k": "b", "v": 1}])]
            ),
            ErrorCode::Location40396
        );
        assert_eq!(
            code(ArrayOp::ArrayToObject, vec![rawbson!([["a"]])]),
            ErrorCode::Location40397
        );
        assert_eq!(
            code(ArrayOp::ArrayToObject, vec![rawbson!([[1, 1]])]),
            ErrorCode::Location40395
        );
        assert_eq!(
            code(
                ArrayOp::ArrayToObject,
                vec![rawbson!([{"k": "a", "v": 1}, 1])]
            ),
            ErrorCode::Location40391
        );
        assert_eq!(
            code(ArrayOp::ArrayToObject, vec![rawbson!([{"k": "a"}])]),
            ErrorCode::Location40392
        );
        assert_eq!(
            code(ArrayOp::ArrayToObject, vec![rawbson!([{"k": "a", "x": 1}])]),
            ErrorCode::Location40393
        );
        assert_eq!(
            code(ArrayOp::ArrayToObject, vec![rawbson!([{"k": 1, "v": 1}])]),
            ErrorCode::Location40394
        );
    }
}
