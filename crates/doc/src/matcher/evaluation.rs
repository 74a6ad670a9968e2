//! Evaluation operators: `$regex` (with `$options` i m s x, `/re/` BSON regex values as
//! implicit equality and inside `$in`/`$all`/`$not`), `$mod` with MongoDB's argument errors,
//! and `$expr` (delegating to the aggregation expression evaluator in `expr`).
//!
//! Regexes run on the `fancy-regex` crate (backtracking, with lookaround and backreferences,
//! close to MongoDB's PCRE); patterns are compiled once, at parse time.

use bson::raw::{RawBsonRef, RawDocument, RawRegexRef};

use super::expr::{truthy, Expr};
use super::{bad_value, leaf, path::bson_error, Level, Node, Pred};
use crate::variables::Variables;
use crate::{ErrorCode, MongoError};

/// A compiled regex predicate: matches strings and symbols by pattern, and BSON regex values
/// with the same pattern and options.
#[derive(Debug, Clone)]
pub struct RegexPred {
    pattern: String,
    options: String,
    compiled: fancy_regex::Regex,
}

impl RegexPred {
    /// Compiles `pattern` with MongoDB's regex `options` (`i`, `m`, `s`, `x`).
    pub fn new(pattern: &str, options: &str) -> Result<RegexPred, MongoError> {
        if pattern.contains('\0') {
            return Err(MongoError::new(
                ErrorCode::Location51109,
                "Regular expression cannot contain an embedded null byte",
            ));
        }
        let mut flags = String::new();
        for flag in options.chars() {
            match flag {
                'i' | 'm' | 's' | 'x' => flags.push(flag),
                'u' => {}
                other => {
                    return Err(MongoError::new(
                        ErrorCode::Location51108,
                        format!("invalid flag in regex options: {other}"),
                    ))
                }
            }
        }
        let source = if flags.is_empty() {
            pattern.to_owned()
        } else {
            format!("(?{flags}){pattern}")
        };
        let compiled = fancy_regex::Regex::new(&source).map_err(|e| {
            MongoError::new(
                ErrorCode::Location51091,
                format!("Regular expression is invalid: {e}"),
            )
        })?;
        Ok(RegexPred {
            pattern: pattern.to_owned(),
            options: options.to_owned(),
            compiled,
        })
    }

    /// The predicate of a BSON regular expression value.
    pub fn from_bson(re: RawRegexRef<'_>) -> Result<RegexPred, MongoError> {
        RegexPred::new(re.pattern, re.options)
    }

    /// Test one candidate (`None` = missing).
    pub fn test(&self, value: Option<RawBsonRef<'_>>) -> Result<bool, MongoError> {
        match value {
            Some(RawBsonRef::String(s)) | Some(RawBsonRef::Symbol(s)) => {
                self.compiled.is_match(s).map_err(|e| {
                    bad_value(format!(
                        "regular expression could not run to completion: {e}"
                    ))
                })
            }
            Some(RawBsonRef::RegularExpression(re)) => {
                Ok(re.pattern == self.pattern && re.options == self.options)
            }
            _ => Ok(false),
        }
    }
}

/// `{field: {$regex: ..., $options: ...}}`: both read from the operator document `context`.
pub(crate) fn parse_regex_document(field: &str, context: &RawDocument) -> Result<Node, MongoError> {
    let mut pattern = "";
    let mut options = "";
    for item in context.iter() {
        match item.map_err(bson_error)? {
            ("$regex", RawBsonRef::String(p)) => pattern = p,
            ("$regex", RawBsonRef::RegularExpression(re)) => {
                pattern = re.pattern;
                if !re.options.is_empty() {
                    if !options.is_empty() {
                        return Err(both_options(ErrorCode::Location51074));
                    }
                    options = re.options;
                }
            }
            ("$regex", _) => return Err(bad_value("$regex has to be a string")),
            ("$options", RawBsonRef::String(o)) => {
                if !options.is_empty() {
                    return Err(both_options(ErrorCode::Location51075));
                }
                options = o;
            }
            ("$options", _) => return Err(bad_value("$options has to be a string")),
            _ => {}
        }
    }
    Ok(leaf(field, Pred::Regex(RegexPred::new(pattern, options)?)))
}

fn both_options(code: ErrorCode) -> MongoError {
    MongoError::new(code, "options set in both $regex and $options")
}

/// `$options` is only valid beside a `$regex`.
pub(crate) fn check_options_has_regex(context: &RawDocument) -> Result<(), MongoError> {
    for item in context.iter_elements() {
        if item.map_err(bson_error)?.key() == "$regex" {
            return Ok(());
        }
    }
    Err(bad_value("$options needs a $regex"))
}

/// `$mod: [divisor, remainder]`, both truncated to 64-bit integers.
#[derive(Debug, Clone, Copy)]
pub struct ModPred {
    divisor: i64,
    remainder: i64,
}

impl ModPred {
    /// True when `value` is a number whose remainder by the divisor is the remainder.
    pub fn test(&self, value: Option<RawBsonRef<'_>>) -> bool {
        let truncated = match value {
            Some(RawBsonRef::Int32(i)) => i64::from(i),
            Some(RawBsonRef::Int64(i)) => i,
            Some(RawBsonRef::Double(d)) if d.is_finite() => d.trunc() as i64,
            Some(RawBsonRef::Decimal128(d)) => {
                let d = crate::compare::decimal128_to_f64(&d);
                if !d.is_finite() {
                    return false;
                }
                d.trunc() as i64
            }
            _ => return false,
        };
        truncated.wrapping_rem(self.divisor) == self.remainder
    }
}

/// `{field: {$mod: arg}}`.
pub(crate) fn parse_mod(field: &str, arg: RawBsonRef<'_>) -> Result<Node, MongoError> {
    let RawBsonRef::Array(items) = arg else {
        return Err(bad_value("malformed mod, needs to be an array"));
    };
    let mut items = items.into_iter();
    let mut next = || items.next().transpose().map_err(bson_error);
    let divisor = next()?.ok_or_else(|| bad_value("malformed mod, not enough elements"))?;
    let divisor = mod_argument(divisor, "divisor")?;
    let remainder = next()?.ok_or_else(|| bad_value("malformed mod, not enough elements"))?;
    let remainder = mod_argument(remainder, "remainder")?;
    if next()?.is_some() {
        return Err(bad_value("malformed mod, too many elements"));
    }
    if divisor == 0 {
        return Err(bad_value("divisor cannot be 0"));
    }
    Ok(leaf(field, Pred::Mod(ModPred { divisor, remainder })))
}

fn mod_argument(value: RawBsonRef<'_>, role: &str) -> Result<i64, MongoError> {
    let as_f64 = match value {
        RawBsonRef::Int32(i) => return Ok(i64::from(i)),
        RawBsonRef::Int64(i) => return Ok(i),
        RawBsonRef::Double(d) => d,
        RawBsonRef::Decimal128(d) => crate::compare::decimal128_to_f64(&d),
        _ => return Err(bad_value(format!("malformed mod, {role} not a number"))),
    };
    if !as_f64.is_finite() {
        return Err(bad_value(format!(
            "malformed mod, {role} value is invalid :: caused by :: Unable to coerce NaN/Inf to \
             integral type"
        )));
    }
    // 2^63 itself is out of range; -2^63 is in.
    if !(-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&as_f64) {
        return Err(bad_value(format!(
            "malformed mod, {role} value is invalid :: caused by :: Out of bounds coercing to \
             integral value"
        )));
    }
    Ok(as_f64.trunc() as i64)
}

/// `$expr: <expression>`; only at the top of a query (not inside `$elemMatch`).
pub(crate) fn parse_expr(
    value: RawBsonRef<'_>,
    level: Level,
    vars: &Variables,
) -> Result<Node, MongoError> {
    if level == Level::SubDocument {
        return Err(bad_value(
            "$expr can only be applied to the top-level document",
        ));
    }
    Ok(Node::Expr(Expr::parse_in(value, vars)?))
}

pub(crate) fn eval_expr(e: &Expr, doc: &RawDocument) -> Result<bool, MongoError> {
    Ok(truthy(&e.evaluate(doc)?))
}

#[cfg(test)]
mod tests {
    use crate::error_code::ErrorCode;
    use crate::matcher::test_support::{check, raw};
    use crate::matcher::Matcher;
    use bson::{doc, Regex};

    fn re(pattern: &str, options: &str) -> Regex {
        Regex {
            pattern: pattern.into(),
            options: options.into(),
        }
    }

    #[test]
    fn regex_forms_and_options() {
        assert!(check(doc! {"a": re("^ab", "")}, doc! {"a": "abc"}));
        assert!(check(
            doc! {"a": {"$regex": "^AB", "$options": "i"}},
            doc! {"a": "abc"}
        ));
        assert!(check(
            doc! {"a": {"$regex": re("^b", "m")}},
            doc! {"a": "a\nb"}
        ));
        assert!(check(
            doc! {"a": {"$regex": "a.b", "$options": "s"}},
            doc! {"a": "a\nb"}
        ));
        assert!(check(
            doc! {"a": {"$regex": "a b # c", "$options": "x"}},
            doc! {"a": "ab"}
        ));
        assert!(check(
            doc! {"a": {"$in": [re("^z", ""), 3]}},
            doc! {"a": "zed"}
        ));
        assert!(check(doc! {"a": re("x", "")}, doc! {"a": ["y", "xx"]}));
        assert!(!check(doc! {"a": re("1", "")}, doc! {"a": 1}));
    }

    #[test]
    fn regex_values_compare_by_pattern_and_options() {
        assert!(check(
            doc! {"a": {"$eq": re("x", "i")}},
            doc! {"a": re("x", "i")}
        ));
        assert!(!check(doc! {"a": {"$eq": re("x", "i")}}, doc! {"a": "x"}));
    }

    #[test]
    fn regex_errors() {
        let e = Matcher::parse(&raw(doc! {"a": {"$regex": "("}})).unwrap_err();
        assert_eq!(e.code, ErrorCode::Location51091);
        let e = Matcher::parse(&raw(doc! {"a": {"$regex": "a", "$options": "z"}})).unwrap_err();
        assert_eq!(e.code, ErrorCode::Location51108);
        let e = Matcher::parse(&raw(doc! {"a": {"$options": "i"}})).unwrap_err();
        assert_eq!(e.message, "$options needs a $regex");
        let e = Matcher::parse(&raw(doc! {"a": {"$regex": 1}})).unwrap_err();
        assert_eq!(e.message, "$regex has to be a string");
    }

    #[test]
    fn modulo() {
        assert!(check(doc! {"a": {"$mod": [4, 1]}}, doc! {"a": 5}));
        assert!(check(doc! {"a": {"$mod": [4, 1]}}, doc! {"a": 5.9}));
        assert!(check(doc! {"a": {"$mod": [4, -1]}}, doc! {"a": -5}));
        assert!(!check(doc! {"a": {"$mod": [4, 1]}}, doc! {"a": "5"}));
        assert!(check(doc! {"a": {"$mod": [2.5, 0]}}, doc! {"a": 4}));
    }
}
