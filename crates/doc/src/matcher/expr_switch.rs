//! `$switch: {branches: [{case, then}, ...], default}`: the `then` of the first branch whose
//! `case` is truthy, else `default`, else error 40066. Parse errors are mongod's
//! (`ExpressionSwitch::parse`): not an object 40060, `branches` not an array 40061, a branch
//! not an object 40062, an unknown branch field 40063, no `case` 40064, no `then` 40065, an
//! unknown field 40067, no branch 40068. `$bucket` (aggregate/bucket.rs) is built on it, as
//! mongod builds it.

use bson::raw::RawBsonRef;

use super::expr::{error, truthy, Expr, Value};
use super::expr_vars::Scope;
use super::path::bson_error;
use crate::{ErrorCode, MongoError};
use bson::RawDocument;

fn type_name(v: RawBsonRef<'_>) -> &'static str {
    Value::Ref(v).type_name()
}

/// Parses `$switch`'s argument.
pub(super) fn parse(arg: RawBsonRef<'_>, scope: &mut Scope<'_>) -> Result<Expr, MongoError> {
    let RawBsonRef::Document(d) = arg else {
        return Err(error(
            ErrorCode::Location40060,
            format!(
                "$switch requires an object as an argument, found: {}",
                type_name(arg)
            ),
        ));
    };
    let mut branches = Vec::new();
    let mut default = None;
    for field in d {
        let (key, value) = field.map_err(bson_error)?;
        match key {
            "branches" => {
                let RawBsonRef::Array(items) = value else {
                    return Err(error(
                        ErrorCode::Location40061,
                        format!(
                            "$switch expected an array for 'branches', found: {}",
                            type_name(value)
                        ),
                    ));
                };
                for item in items {
                    branches.push(parse_branch(item.map_err(bson_error)?, scope)?);
                }
            }
            "default" => default = Some(Box::new(Expr::parse_scoped(value, scope)?)),
            other => {
                return Err(error(
                    ErrorCode::Location40067,
                    format!("$switch found an unknown argument: {other}"),
                ))
            }
        }
    }
    if branches.is_empty() {
        return Err(error(
            ErrorCode::Location40068,
            "$switch requires at least one branch.",
        ));
    }
    Ok(Expr::Switch { branches, default })
}

fn parse_branch(item: RawBsonRef<'_>, scope: &mut Scope<'_>) -> Result<(Expr, Expr), MongoError> {
    let RawBsonRef::Document(b) = item else {
        return Err(error(
            ErrorCode::Location40062,
            format!(
                "$switch expected each branch to be an object, found: {}",
                type_name(item)
            ),
        ));
    };
    let (mut case, mut then) = (None, None);
    for field in b {
        let (key, value) = field.map_err(bson_error)?;
        match key {
            "case" => case = Some(Expr::parse_scoped(value, scope)?),
            "then" => then = Some(Expr::parse_scoped(value, scope)?),
            other => {
                return Err(error(
                    ErrorCode::Location40063,
                    format!("$switch found an unknown argument to a branch: {other}"),
                ))
            }
        }
    }
    let case = case.ok_or_else(|| {
        error(
            ErrorCode::Location40064,
            "$switch requires each branch have a 'case' expression",
        )
    })?;
    let then = then.ok_or_else(|| {
        error(
            ErrorCode::Location40065,
            "$switch requires each branch have a 'then' expression.",
        )
    })?;
    Ok((case, then))
}

/// Evaluates a parsed `$switch`.
pub(super) fn eval<'a>(
    branches: &[(Expr, Expr)],
    default: Option<&Expr>,
    root: &'a RawDocument,
    stack: &mut Vec<Value<'a>>,
) -> Result<Value<'a>, MongoError> {
    for (case, then) in branches {
        if truthy(&case.eval(root, stack)?) {
            return then.eval(root, stack);
        }
    }
    match default {
        Some(d) => d.eval(root, stack),
        None => Err(error(
            ErrorCode::Location40066,
            "$switch could not find a matching branch for an input, and no default was \
             specified.",
        )),
    }
}

#[cfg(test)]
mod tests {
    use crate::matcher::expr::{Expr, Value};
    use bson::{doc, rawdoc, RawBson};

    fn eval(
        spec: bson::Document,
        input: bson::RawDocumentBuf,
    ) -> Result<RawBson, crate::MongoError> {
        let raw = bson::RawDocumentBuf::from_document(&spec).expect("raw");
        let e = Expr::parse(bson::raw::RawBsonRef::Document(&raw))?;
        Ok(match e.evaluate(&input)? {
            Value::Owned(v) => v,
            Value::Ref(r) => r.to_raw_bson(),
            Value::Missing => RawBson::Null,
        })
    }

    #[test]
    fn the_first_true_case_wins_then_the_default() {
        let spec = doc! {"$switch": {"branches": [
            {"case": {"$lt": ["$x", 0]}, "then": "neg"},
            {"case": {"$lt": ["$x", 10]}, "then": "small"},
        ], "default": "big"}};
        assert_eq!(
            eval(spec.clone(), rawdoc! {"x": -1}).unwrap(),
            RawBson::String("neg".into())
        );
        assert_eq!(
            eval(spec.clone(), rawdoc! {"x": 5}).unwrap(),
            RawBson::String("small".into())
        );
        assert_eq!(
            eval(spec, rawdoc! {"x": 50}).unwrap(),
            RawBson::String("big".into())
        );
        let no_default = doc! {"$switch": {"branches": [{"case": false, "then": 1}]}};
        assert_eq!(eval(no_default, rawdoc! {}).unwrap_err().code.code(), 40066);
    }

    #[test]
    fn bad_specs_get_mongods_codes() {
        let code = |spec: bson::Document| eval(spec, rawdoc! {}).unwrap_err().code.code();
        assert_eq!(code(doc! {"$switch": 1}), 40060);
        assert_eq!(code(doc! {"$switch": {"branches": 1}}), 40061);
        assert_eq!(code(doc! {"$switch": {"branches": [1]}}), 40062);
        assert_eq!(
            code(doc! {"$switch": {"branches": [{"case": 1, "then": 1, "x": 1}]}}),
            40063
        );
        assert_eq!(code(doc! {"$switch": {"branches": [{"then": 1}]}}), 40064);
        assert_eq!(code(doc! {"$switch": {"branches": [{"case": 1}]}}), 40065);
        assert_eq!(code(doc! {"$switch": {"branches": [], "x": 1}}), 40067);
        assert_eq!(code(doc! {"$switch": {"branches": []}}), 40068);
    }
}
