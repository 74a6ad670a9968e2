//! The small stages: `$match` (the query matcher, `$where` refused by it), `$limit`, `$skip`,
//! `$count` and the parse of `$sortByCount`, with MongoDB 7.0's codes (15959, 5107201, 15958,
//! 5107200, 40156-40160, 40147-40149). `$skip` passes errors through instead of skipping them;
//! `$count` counts without holding documents.

use bson::raw::{RawBsonRef, RawDocumentBuf};
use bson::Bson;

use super::execute::{blocking, raw_to_bson, DocStream};
use super::{group, sort, Stage};
use crate::compare::decimal128_to_f64;
use crate::matcher::element::{type_alias, type_code};
use crate::matcher::expr::Expr;
use crate::matcher::Matcher;
use crate::variables::Variables;
use crate::{ErrorCode, MongoError};

fn error(code: ErrorCode, message: impl Into<String>) -> MongoError {
    MongoError::new(code, message)
}

/// A stage argument shown the way the shell prints it in MongoDB's messages.
pub(crate) fn render(value: RawBsonRef<'_>) -> String {
    match raw_to_bson(value) {
        Ok(Bson::String(s)) => format!("\"{s}\""),
        Ok(Bson::Double(d)) if d.fract() == 0.0 && d.is_finite() => format!("{d:.1}"),
        Ok(other) => other.to_string(),
        Err(_) => "<malformed>".to_owned(),
    }
}

/// The type name MongoDB uses in messages (`"string"`, `"double"`, ...).
pub(crate) fn type_name(value: RawBsonRef<'_>) -> &'static str {
    type_alias(type_code(value))
}

pub(crate) fn parse_match(spec: RawBsonRef<'_>, vars: &Variables) -> Result<Stage, MongoError> {
    let RawBsonRef::Document(filter) = spec else {
        return Err(error(
            ErrorCode::Location15959,
            "the match filter must be an expression in an object",
        ));
    };
    let matcher = Matcher::parse_with(filter, vars)?;
    Ok(Stage::Match {
        filter: filter.to_raw_document_buf(),
        matcher: Box::new(matcher),
    })
}

/// MongoDB's `parseIntegerElementToNonNegativeLong` for `$limit`/`$skip`.
fn non_negative_integer(
    stage: &str,
    spec: RawBsonRef<'_>,
    code: ErrorCode,
) -> Result<u64, MongoError> {
    let shown = render(spec);
    let fail = |what: &str| {
        error(
            code,
            format!("invalid argument to {stage} stage: {what}: {stage}: {shown}"),
        )
    };
    let value = match spec {
        RawBsonRef::Int32(i) => i64::from(i),
        RawBsonRef::Int64(i) => i,
        RawBsonRef::Double(d) => integral(d).ok_or_else(|| fail("Expected an integer"))?,
        RawBsonRef::Decimal128(d) => {
            integral(decimal128_to_f64(&d)).ok_or_else(|| fail("Expected an integer"))?
        }
        _ => return Err(fail("Expected a number in")),
    };
    u64::try_from(value).map_err(|_| fail("Expected a non-negative number in"))
}

/// A double that holds an integer representable as a 64-bit integer.
fn integral(d: f64) -> Option<i64> {
    let in_range = d >= i64::MIN as f64 && d < i64::MAX as f64;
    (d.fract() == 0.0 && in_range).then_some(d as i64)
}

pub(crate) fn parse_limit(spec: RawBsonRef<'_>) -> Result<u64, MongoError> {
    let n = non_negative_integer("$limit", spec, ErrorCode::Location5107201)?;
    if n == 0 {
        return Err(error(
            ErrorCode::Location15958,
            "the limit must be positive",
        ));
    }
    Ok(n)
}

pub(crate) fn parse_skip(spec: RawBsonRef<'_>) -> Result<u64, MongoError> {
    non_negative_integer("$skip", spec, ErrorCode::Location5107200)
}

pub(crate) fn parse_count(spec: RawBsonRef<'_>) -> Result<String, MongoError> {
    let RawBsonRef::String(field) = spec else {
        return Err(error(
            ErrorCode::Location40156,
            "the count field must be a non-empty string",
        ));
    };
    let checks = [
        (
            field.is_empty(),
            ErrorCode::Location40157,
            "the count field must be a non-empty string",
        ),
        (
            field.starts_with('$'),
            ErrorCode::Location40158,
            "the count field cannot be a $-prefixed path",
        ),
        (
            field.contains('.'),
            ErrorCode::Location40160,
            "the count field cannot contain '.'",
        ),
    ];
    for (failed, code, message) in checks {
        if failed {
            return Err(error(code, message));
        }
    }
    Ok(field.to_owned())
}

/// `$sortByCount: <expr>` = `$group: {_id: <expr>, count: {$sum: 1}}` then `$sort: {count: -1}`.
pub(crate) fn parse_sort_by_count(
    spec: RawBsonRef<'_>,
    vars: &Variables,
) -> Result<Stage, MongoError> {
    const NEEDS: &str =
        "the sortByCount field must be defined as a $-prefixed path or an expression inside an object";
    match spec {
        RawBsonRef::Document(d) => {
            let first = d
                .iter()
                .next()
                .transpose()
                .map_err(crate::matcher::path::bson_error)?;
            if !first.is_some_and(|(k, _)| k.starts_with('$')) {
                return Err(error(ErrorCode::Location40147, NEEDS));
            }
        }
        RawBsonRef::String(s) if !s.starts_with('$') => {
            return Err(error(ErrorCode::Location40148, NEEDS))
        }
        RawBsonRef::String(_) => {}
        _ => {
            return Err(error(
                ErrorCode::Location40149,
                "the sortByCount field must be specified as a string or as an object",
            ))
        }
    }
    let id = Expr::parse_in(spec, vars)?;
    Ok(Stage::SortByCount {
        group: group::GroupSpec::counting(id, "count", vars),
        sort: sort::SortSpec::descending("count"),
    })
}

/// `$skip`: drop the first `n` documents; errors are never skipped.
pub(crate) fn skip(input: DocStream<'_>, n: u64) -> DocStream<'_> {
    let mut remaining = n;
    Box::new(input.filter(move |d| {
        if remaining == 0 || d.is_err() {
            return true;
        }
        remaining -= 1;
        false
    }))
}

/// `$count: field`: one document `{field: n}` (int32, int64 past 2^31), none for no input.
pub(crate) fn count<'a>(input: DocStream<'a>, field: &'a str) -> DocStream<'a> {
    blocking(input, move |input| {
        let mut n: u64 = 0;
        for d in input {
            d?;
            n += 1;
        }
        if n == 0 {
            return Ok(Vec::new());
        }
        let mut out = RawDocumentBuf::new();
        match i32::try_from(n) {
            Ok(small) => out.append(field, small),
            Err(_) => out.append(field, i64::try_from(n).unwrap_or(i64::MAX)),
        }
        Ok(vec![out])
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn spec(v: Bson) -> RawDocumentBuf {
        RawDocumentBuf::from_document(&doc! {"s": v}).expect("encodes")
    }

    fn limit(v: Bson) -> Result<u64, MongoError> {
        let d = spec(v);
        parse_limit(d.get("s").expect("valid").expect("present"))
    }

    fn skip_of(v: Bson) -> Result<u64, MongoError> {
        let d = spec(v);
        parse_skip(d.get("s").expect("valid").expect("present"))
    }

    #[test]
    fn limit_and_skip_arguments() {
        assert_eq!(limit(Bson::Int32(5)).expect("valid"), 5);
        assert_eq!(limit(Bson::Double(2.0)).expect("valid"), 2);
        assert_eq!(skip_of(Bson::Int64(0)).expect("valid"), 0);
        let e = limit(Bson::Int32(0)).unwrap_err();
        assert_eq!(
            (e.code.code(), e.message.as_str()),
            (15958, "the limit must be positive")
        );
        let e = skip_of(Bson::Double(1.5)).unwrap_err();
        assert_eq!(
            (e.code.code(), e.message.as_str()),
            (
                5107200,
                "invalid argument to $skip stage: Expected an integer: $skip: 1.5"
            )
        );
        let e = skip_of(Bson::Int32(-1)).unwrap_err();
        assert_eq!(
            e.message,
            "invalid argument to $skip stage: Expected a non-negative number in: $skip: -1"
        );
        let e = limit(Bson::String("x".into())).unwrap_err();
        assert_eq!(
            (e.code.code(), e.message.as_str()),
            (
                5107201,
                "invalid argument to $limit stage: Expected a number in: $limit: \"x\""
            )
        );
        let e = limit(Bson::Double(-2.0)).unwrap_err();
        assert_eq!(
            e.message,
            "invalid argument to $limit stage: Expected a non-negative number in: $limit: -2.0"
        );
    }

    #[test]
    fn count_field_rules() {
        let code = |v: Bson| {
            let d = spec(v);
            parse_count(d.get("s").expect("valid").expect("present"))
                .unwrap_err()
                .code
                .code()
        };
        assert_eq!(code(Bson::Int32(1)), 40156);
        assert_eq!(code(Bson::String(String::new())), 40157);
        assert_eq!(code(Bson::String("$n".into())), 40158);
        assert_eq!(code(Bson::String("a.b".into())), 40160);
    }
}
