//! The array expressions that bind a variable per element: `$map: {input, as, in}`,
//! `$filter: {input, as, cond, limit}` and `$reduce: {input, initialValue, in}` (`$$value`,
//! `$$this`). Their variables take the next slots of the evaluation stack, as `$let`'s do
//! (`expr_vars.rs`): parsing gives the body a scope with them, evaluation pushes each
//! element's values and truncates after. A null or missing `input` gives null; anything else
//! that is not an array is an error. Codes are mongod's (`expression.cpp`): `$map`
//! 16878-16883, `$filter` 28646-28651 and 327391/327392 (`limit`), `$reduce` 40075-40080.

use bson::raw::{RawArrayBuf, RawBson, RawBsonRef, RawDocument};

use super::expr::{error, truthy, Expr, Value};
use super::expr_vars::Scope;
use super::path::bson_error;
use crate::variables::check_user_write_name;
use crate::{ErrorCode, MongoError};

/// A parsed `$map`, `$filter` or `$reduce`.
#[derive(Debug, Clone)]
pub enum ArrayExpr {
    /// `$map`.
    Map {
        /// The array.
        input: Expr,
        /// `in`: each element's new value (`$$this`).
        body: Expr,
    },
    /// `$filter`.
    Filter {
        /// The array.
        input: Expr,
        /// The condition an element must meet (`$$this`).
        cond: Expr,
        /// At most this many elements kept.
        limit: Option<Expr>,
    },
    /// `$$value` takes the first slot, `$$this` the second.
    Reduce {
        /// The array.
        input: Expr,
        /// The starting `$$value`.
        initial: Expr,
        /// The next `$$value` from `$$value` and `$$this`.
        body: Expr,
    },
}

impl ArrayExpr {
    pub(crate) fn reads_document(&self) -> bool {
        match self {
            ArrayExpr::Map { input, body } => input.reads_document() || body.reads_document(),
            ArrayExpr::Filter { input, cond, limit } => {
                input.reads_document()
                    || cond.reads_document()
                    || limit.as_ref().is_some_and(Expr::reads_document)
            }
            ArrayExpr::Reduce {
                input,
                initial,
                body,
            } => input.reads_document() || initial.reads_document() || body.reads_document(),
        }
    }
}

/// The arguments of one operator by name; an unknown one is refused with `unknown`.
fn arguments<'a>(
    arg: RawBsonRef<'a>,
    known: &[&str],
    not_object: (ErrorCode, &str),
    unknown: ErrorCode,
    op: &str,
) -> Result<Vec<(&'a str, RawBsonRef<'a>)>, MongoError> {
    let RawBsonRef::Document(d) = arg else {
        return Err(error(not_object.0, not_object.1.to_owned()));
    };
    let mut out = Vec::new();
    for field in d {
        let (key, value) = field.map_err(bson_error)?;
        if !known.contains(&key) {
            let message = match op {
                "$reduce" => format!("$reduce found an unknown argument: {key}"),
                _ => format!("Unrecognized parameter to {op}: {key}"),
            };
            return Err(error(unknown, message));
        }
        out.push((key, value));
    }
    Ok(out)
}

fn find<'a>(args: &[(&str, RawBsonRef<'a>)], key: &str) -> Option<RawBsonRef<'a>> {
    args.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
}

/// The variable name in `as` (default `this`).
fn variable_name<'a>(args: &[(&str, RawBsonRef<'a>)]) -> Result<&'a str, MongoError> {
    let name = match find(args, "as") {
        None => "this",
        Some(RawBsonRef::String(s)) => s,
        // mongod reads a non-string `as` as an empty name, which the name check refuses.
        Some(_) => "",
    };
    check_user_write_name(name)?;
    Ok(name)
}

pub(super) fn parse_map(arg: RawBsonRef<'_>, scope: &mut Scope<'_>) -> Result<Expr, MongoError> {
    let args = arguments(
        arg,
        &["input", "as", "in"],
        (
            ErrorCode::Location16878,
            "$map only supports an object as its argument",
        ),
        ErrorCode::Location16879,
        "$map",
    )?;
    let input = find(&args, "input").ok_or_else(|| {
        error(
            ErrorCode::Location16880,
            "Missing 'input' parameter to $map",
        )
    })?;
    let body = find(&args, "in")
        .ok_or_else(|| error(ErrorCode::Location16882, "Missing 'in' parameter to $map"))?;
    let name = variable_name(&args)?;
    let input = Expr::parse_scoped(input, scope)?;
    let body = scope.with_locals(&[name], |s| Expr::parse_scoped(body, s))?;
    Ok(Expr::Arrays(Box::new(ArrayExpr::Map { input, body })))
}

pub(super) fn parse_filter(arg: RawBsonRef<'_>, scope: &mut Scope<'_>) -> Result<Expr, MongoError> {
    let args = arguments(
        arg,
        &["input", "as", "cond", "limit"],
        (
            ErrorCode::Location28646,
            "$filter only supports an object as its argument",
        ),
        ErrorCode::Location28647,
        "$filter",
    )?;
    let input = find(&args, "input").ok_or_else(|| {
        error(
            ErrorCode::Location28648,
            "Missing 'input' parameter to $filter",
        )
    })?;
    let cond = find(&args, "cond").ok_or_else(|| {
        error(
            ErrorCode::Location28650,
            "Missing 'cond' parameter to $filter",
        )
    })?;
    let name = variable_name(&args)?;
    let input = Expr::parse_scoped(input, scope)?;
    let limit = find(&args, "limit")
        .map(|l| Expr::parse_scoped(l, scope))
        .transpose()?;
    let cond = scope.with_locals(&[name], |s| Expr::parse_scoped(cond, s))?;
    Ok(Expr::Arrays(Box::new(ArrayExpr::Filter {
        input,
        cond,
        limit,
    })))
}

pub(super) fn parse_reduce(arg: RawBsonRef<'_>, scope: &mut Scope<'_>) -> Result<Expr, MongoError> {
    let not_object = match arg {
        RawBsonRef::Document(_) => String::new(),
        other => format!(
            "$reduce requires an object as an argument, found: {}",
            Value::Ref(other).type_name()
        ),
    };
    let args = arguments(
        arg,
        &["input", "initialValue", "in"],
        (ErrorCode::Location40075, &not_object),
        ErrorCode::Location40076,
        "$reduce",
    )?;
    let need = |key: &str, code: ErrorCode| {
        find(&args, key)
            .ok_or_else(|| error(code, format!("$reduce requires '{key}' to be specified")))
    };
    let input = Expr::parse_scoped(need("input", ErrorCode::Location40077)?, scope)?;
    let initial = Expr::parse_scoped(need("initialValue", ErrorCode::Location40078)?, scope)?;
    let body = need("in", ErrorCode::Location40079)?;
    let body = scope.with_locals(&["value", "this"], |s| Expr::parse_scoped(body, s))?;
    Ok(Expr::Arrays(Box::new(ArrayExpr::Reduce {
        input,
        initial,
        body,
    })))
}

/// The elements of an evaluated `input`, or `None` for null/missing; `not_array` names the
/// error for anything else.
fn elements<'a>(
    input: &Value<'a>,
    not_array: impl FnOnce(&str) -> MongoError,
) -> Result<Option<Vec<Value<'a>>>, MongoError> {
    if input.is_nullish() {
        return Ok(None);
    }
    match input {
        Value::Ref(RawBsonRef::Array(a)) => Ok(Some(
            a.into_iter()
                .map(|v| v.map(Value::Ref).map_err(bson_error))
                .collect::<Result<_, _>>()?,
        )),
        Value::Owned(RawBson::Array(a)) => Ok(Some(
            a.into_iter()
                .map(|v| v.map(|v| Value::Owned(v.to_raw_bson())).map_err(bson_error))
                .collect::<Result<_, _>>()?,
        )),
        other => Err(not_array(other.type_name())),
    }
}

/// Evaluates with `values` pushed as the next slots.
fn with_bound<'a>(
    body: &Expr,
    values: Vec<Value<'a>>,
    root: &'a RawDocument,
    stack: &mut Vec<Value<'a>>,
) -> Result<Value<'a>, MongoError> {
    let depth = stack.len();
    stack.extend(values);
    let out = body.eval(root, stack).map(Value::into_owned);
    stack.truncate(depth);
    out
}

fn push(out: &mut RawArrayBuf, v: &Value<'_>) {
    match v.as_raw() {
        Some(v) => out.push(v.to_raw_bson()),
        None => out.push(RawBson::Null),
    }
}

impl ArrayExpr {
    pub(crate) fn eval<'a>(
        &self,
        root: &'a RawDocument,
        stack: &mut Vec<Value<'a>>,
    ) -> Result<Value<'a>, MongoError> {
        match self {
            ArrayExpr::Map { input, body } => {
                let input = input.eval(root, stack)?;
                let Some(items) = elements(&input, |t| {
                    error(
                        ErrorCode::Location16883,
                        format!("input to $map must be an array not {t}"),
                    )
                })?
                else {
                    return Ok(Value::Owned(RawBson::Null));
                };
                let mut out = RawArrayBuf::new();
                for item in items {
                    push(&mut out, &with_bound(body, vec![item], root, stack)?);
                }
                Ok(Value::Owned(RawBson::Array(out)))
            }
            ArrayExpr::Filter { input, cond, limit } => {
                let input = input.eval(root, stack)?;
                let Some(items) = elements(&input, |t| {
                    error(
                        ErrorCode::Location28651,
                        format!("input to $filter must be an array not {t}"),
                    )
                })?
                else {
                    return Ok(Value::Owned(RawBson::Null));
                };
                let limit = match limit {
                    Some(l) => filter_limit(l.eval(root, stack)?)?,
                    None => None,
                };
                let mut out = RawArrayBuf::new();
                let mut kept = 0usize;
                for item in items {
                    if limit.is_some_and(|l| kept >= l) {
                        break;
                    }
                    if truthy(&with_bound(cond, vec![item.clone()], root, stack)?) {
                        push(&mut out, &item);
                        kept += 1;
                    }
                }
                Ok(Value::Owned(RawBson::Array(out)))
            }
            ArrayExpr::Reduce {
                input,
                initial,
                body,
            } => {
                let input = input.eval(root, stack)?;
                let Some(items) = elements(&input, |t| {
                    error(
                        ErrorCode::Location40080,
                        format!("$reduce requires that 'input' be an array, found: {t}"),
                    )
                })?
                else {
                    return Ok(Value::Owned(RawBson::Null));
                };
                let mut acc = initial.eval(root, stack)?.into_owned();
                for item in items {
                    acc = with_bound(body, vec![acc, item], root, stack)?;
                }
                Ok(acc)
            }
        }
    }
}

/// `$filter`'s `limit`: null means none; otherwise a positive whole number that fits 32 bits.
fn filter_limit(v: Value<'_>) -> Result<Option<usize>, MongoError> {
    if v.is_nullish() {
        return Ok(None);
    }
    let n = match v.as_raw() {
        Some(RawBsonRef::Int32(n)) => Some(i64::from(n)),
        Some(RawBsonRef::Int64(n)) if i32::try_from(n).is_ok() => Some(n),
        Some(RawBsonRef::Double(d)) if d.fract() == 0.0 && d.abs() <= f64::from(i32::MAX) => {
            Some(d as i64)
        }
        _ => None,
    };
    let Some(n) = n else {
        return Err(error(
            ErrorCode::Location327391,
            "$filter: limit must be represented as a 32-bit integral value",
        ));
    };
    if n < 1 {
        return Err(error(
            ErrorCode::Location327392,
            "$filter: limit must be greater than 0",
        ));
    }
    Ok(Some(n as usize))
}

#[cfg(test)]
mod tests {
    use crate::matcher::expr::{Expr, Value};
    use bson::{bson, doc, rawdoc, Bson, RawDocumentBuf};

    fn eval(spec: bson::Document, input: RawDocumentBuf) -> Result<Bson, crate::MongoError> {
        let raw = RawDocumentBuf::from_document(&spec).expect("raw");
        let e = Expr::parse(bson::raw::RawBsonRef::Document(&raw))?;
        let v = e.evaluate(&input)?;
        Ok(match v {
            Value::Missing => Bson::Null,
            other => Bson::try_from(other.as_raw().expect("value").to_raw_bson()).expect("bson"),
        })
    }

    #[test]
    fn map_filter_and_reduce_bind_their_variables() {
        let d = rawdoc! {"xs": [1, 2, 3, 4], "k": 10};
        let map = doc! {"$map": {"input": "$xs", "as": "x", "in": {"$add": ["$$x", "$k"]}}};
        assert_eq!(eval(map, d.clone()).unwrap(), bson!([11, 12, 13, 14]));
        let this = doc! {"$map": {"input": "$xs", "in": {"$multiply": ["$$this", 2]}}};
        assert_eq!(eval(this, d.clone()).unwrap(), bson!([2, 4, 6, 8]));
        let filter = doc! {"$filter": {"input": "$xs", "cond": {"$gt": ["$$this", 2]}}};
        assert_eq!(eval(filter, d.clone()).unwrap(), bson!([3, 4]));
        let limited =
            doc! {"$filter": {"input": "$xs", "as": "n", "cond": {"$gt": ["$$n", 1]}, "limit": 2}};
        assert_eq!(eval(limited, d.clone()).unwrap(), bson!([2, 3]));
        let sum = doc! {"$reduce": {"input": "$xs", "initialValue": 0, "in": {"$add": ["$$value", "$$this"]}}};
        assert_eq!(eval(sum, d.clone()).unwrap(), bson!(10));
        // Nested: a $map inside a $let sees both variables.
        let nested = doc! {"$let": {"vars": {"m": 100}, "in": {"$map": {"input": "$xs", "in": {"$add": ["$$this", "$$m"]}}}}};
        assert_eq!(
            eval(nested, d.clone()).unwrap(),
            bson!([101, 102, 103, 104])
        );
        let missing = doc! {"$map": {"input": "$nope", "in": 1}};
        assert_eq!(eval(missing, d).unwrap(), Bson::Null);
    }

    #[test]
    fn bad_arguments_get_mongods_codes() {
        let code = |spec: bson::Document| eval(spec, rawdoc! {"s": "x"}).unwrap_err().code.code();
        assert_eq!(code(doc! {"$map": 1}), 16878);
        assert_eq!(code(doc! {"$map": {"input": [], "in": 1, "z": 1}}), 16879);
        assert_eq!(code(doc! {"$map": {"in": 1}}), 16880);
        assert_eq!(code(doc! {"$map": {"input": []}}), 16882);
        assert_eq!(code(doc! {"$map": {"input": "$s", "in": 1}}), 16883);
        assert_eq!(code(doc! {"$filter": 1}), 28646);
        assert_eq!(
            code(doc! {"$filter": {"input": [], "cond": 1, "z": 1}}),
            28647
        );
        assert_eq!(code(doc! {"$filter": {"cond": 1}}), 28648);
        assert_eq!(code(doc! {"$filter": {"input": []}}), 28650);
        assert_eq!(code(doc! {"$filter": {"input": "$s", "cond": 1}}), 28651);
        assert_eq!(
            code(doc! {"$filter": {"input": [1], "cond": 1, "limit": 0}}),
            327392
        );
        assert_eq!(
            code(doc! {"$filter": {"input": [1], "cond": 1, "limit": 1.5}}),
            327391
        );
        assert_eq!(code(doc! {"$reduce": 1}), 40075);
        assert_eq!(
            code(doc! {"$reduce": {"input": [], "initialValue": 0, "in": 1, "z": 1}}),
            40076
        );
        assert_eq!(code(doc! {"$reduce": {"initialValue": 0, "in": 1}}), 40077);
        assert_eq!(code(doc! {"$reduce": {"input": [], "in": 1}}), 40078);
        assert_eq!(
            code(doc! {"$reduce": {"input": [], "initialValue": 0}}),
            40079
        );
        assert_eq!(
            code(doc! {"$reduce": {"input": "$s", "initialValue": 0, "in": 1}}),
            40080
        );
    }
}
