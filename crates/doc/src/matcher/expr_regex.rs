//! The regex expressions `$regexMatch`, `$regexFind` and `$regexFindAll: {input, regex,
//! options}`, as mongod 7.0's `ExpressionRegex` evaluates them: `regex` a string or a BSON
//! regex (whose own flags may not be repeated in `options`, 51107), flags `i m s x` (`u`
//! accepted, as the matcher's `$regex` does), matches as `{match, idx, captures}` with `idx`
//! counted in code points and unmatched groups as null. A null or missing input or regex gives
//! false, null or `[]`; `$regexFindAll` moves past each match, and one code point past an
//! empty one. A constant regex is compiled once, at parse time, as mongod compiles it in
//! `optimize()`, so its errors come before any document. Patterns run on `fancy-regex`, as
//! the matcher's `$regex` does (`evaluation.rs`). Codes: parse 51103 and 31022-31024, types
//! 51104-51106, 51107, null bytes 51109/51110, flags 51108, compile 51111, run 51156.

use bson::raw::{RawArrayBuf, RawBson, RawBsonRef, RawDocument, RawDocumentBuf};

use super::expr::{error, Expr, Value};
use super::expr_vars::Scope;
use super::path::bson_error;
use crate::{ErrorCode, MongoError};

/// Which of the three regex expressions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegexOp {
    /// `$regexMatch`: a boolean.
    Match,
    /// `$regexFind`: the first match, or null.
    Find,
    /// `$regexFindAll`: every match.
    FindAll,
}

impl RegexOp {
    fn name(self) -> &'static str {
        match self {
            RegexOp::Match => "$regexMatch",
            RegexOp::Find => "$regexFind",
            RegexOp::FindAll => "$regexFindAll",
        }
    }
}

/// A parsed regex expression.
#[derive(Debug, Clone)]
pub struct RegexExpr {
    op: RegexOp,
    input: Expr,
    regex: Expr,
    options: Option<Expr>,
    /// The compiled regex when `regex` and `options` are constants (`None` inside: a null
    /// pattern).
    constant: Option<Option<fancy_regex::Regex>>,
}

/// Parses one of the three from its argument document.
pub(crate) fn parse(
    name: &str,
    arg: RawBsonRef<'_>,
    scope: &mut Scope<'_>,
) -> Result<Expr, MongoError> {
    let op = match name {
        "$regexMatch" => RegexOp::Match,
        "$regexFind" => RegexOp::Find,
        _ => RegexOp::FindAll,
    };
    let RawBsonRef::Document(d) = arg else {
        return Err(error(
            ErrorCode::Location51103,
            format!(
                "{name} expects an object of named arguments but found: {}",
                Value::Ref(arg).type_name()
            ),
        ));
    };
    let (mut input, mut regex, mut options) = (None, None, None);
    for field in d {
        let (key, value) = field.map_err(bson_error)?;
        let slot = match key {
            "input" => &mut input,
            "regex" => &mut regex,
            "options" => &mut options,
            other => {
                return Err(error(
                    ErrorCode::Location31024,
                    format!("{name} found an unknown argument: {other}"),
                ))
            }
        };
        *slot = Some(Expr::parse_scoped(value, scope)?);
    }
    let input = input.ok_or_else(|| {
        error(
            ErrorCode::Location31022,
            format!("{name} requires 'input' parameter"),
        )
    })?;
    let regex = regex.ok_or_else(|| {
        error(
            ErrorCode::Location31023,
            format!("{name} requires 'regex' parameter"),
        )
    })?;
    let constant = constant_regex(op, &regex, options.as_ref())?;
    let parsed = RegexExpr {
        op,
        input,
        regex,
        options,
        constant,
    };
    Ok(Expr::Regex(Box::new(parsed)))
}

/// The compiled regex when its pattern and options are literals.
fn constant_regex(
    op: RegexOp,
    regex: &Expr,
    options: Option<&Expr>,
) -> Result<Option<Option<fancy_regex::Regex>>, MongoError> {
    let Expr::Literal(pattern) = regex else {
        return Ok(None);
    };
    let options = match options {
        None => Value::Missing,
        Some(Expr::Literal(o)) => Value::Owned(o.clone()),
        Some(_) => return Ok(None),
    };
    let pattern = Value::Owned(pattern.clone());
    compile(op, &pattern, &options).map(Some)
}

/// Checks `regex` and `options` and compiles them (`None` for a null pattern).
fn compile(
    op: RegexOp,
    pattern: &Value<'_>,
    options: &Value<'_>,
) -> Result<Option<fancy_regex::Regex>, MongoError> {
    let name = op.name();
    let (source, own_flags) = match pattern.as_raw() {
        Some(RawBsonRef::String(s)) => (Some(s), ""),
        Some(RawBsonRef::RegularExpression(re)) => (Some(re.pattern), re.options),
        _ if pattern.is_nullish() => (None, ""),
        _ => {
            return Err(error(
                ErrorCode::Location51105,
                format!("{name} needs 'regex' to be of type string or regex"),
            ))
        }
    };
    let flags = match options.as_raw() {
        Some(RawBsonRef::String(o)) if own_flags.is_empty() => o,
        Some(RawBsonRef::String(_)) => {
            return Err(error(
                ErrorCode::Location51107,
                format!(
                    "{name}: found regex option(s) specified in both 'regex' and 'option' fields"
                ),
            ))
        }
        _ if options.is_nullish() => own_flags,
        _ => {
            return Err(error(
                ErrorCode::Location51106,
                format!("{name} needs 'options' to be of type string"),
            ))
        }
    };
    check_no_nul(name, source.unwrap_or_default(), flags)?;
    // mongod reads the flags only when it compiles, so a null pattern skips them.
    let Some(source) = source else {
        return Ok(None);
    };
    let inline = inline_flags(name, flags)?;
    let full = if inline.is_empty() {
        source.to_owned()
    } else {
        format!("(?{inline}){source}")
    };
    fancy_regex::Regex::new(&full).map(Some).map_err(|e| {
        error(
            ErrorCode::Location51111,
            format!("Invalid Regex in {name}: {e}"),
        )
    })
}

fn check_no_nul(name: &str, pattern: &str, flags: &str) -> Result<(), MongoError> {
    if pattern.contains('\0') {
        return Err(error(
            ErrorCode::Location51109,
            format!("{name}: regular expression cannot contain an embedded null byte"),
        ));
    }
    if flags.contains('\0') {
        return Err(error(
            ErrorCode::Location51110,
            format!("{name}: regular expression options cannot contain an embedded null byte"),
        ));
    }
    Ok(())
}

/// MongoDB's flags as `fancy-regex` inline flags; `u` is accepted and needs none.
fn inline_flags(name: &str, flags: &str) -> Result<String, MongoError> {
    let mut out = String::new();
    for flag in flags.chars() {
        match flag {
            'i' | 'm' | 's' | 'x' => out.push(flag),
            'u' => {}
            other => {
                return Err(error(
                    ErrorCode::Location51108,
                    format!("{name} invalid flag in regex options: {other}"),
                ))
            }
        }
    }
    Ok(out)
}

impl RegexExpr {
    pub(crate) fn reads_document(&self) -> bool {
        self.input.reads_document()
            || self.regex.reads_document()
            || self.options.as_ref().is_some_and(Expr::reads_document)
    }

    pub(crate) fn eval<'a>(
        &self,
        root: &'a RawDocument,
        stack: &mut Vec<Value<'a>>,
    ) -> Result<Value<'a>, MongoError> {
        let name = self.op.name();
        let input = self.input.eval(root, stack)?;
        let pattern = self.regex.eval(root, stack)?;
        let options = match &self.options {
            Some(o) => o.eval(root, stack)?,
            None => Value::Missing,
        };
        let text = match input.as_raw() {
            Some(RawBsonRef::String(s)) => Some(s),
            _ if input.is_nullish() => None,
            _ => {
                return Err(error(
                    ErrorCode::Location51104,
                    format!("{name} needs 'input' to be of type string"),
                ))
            }
        };
        let dynamic;
        let regex = match &self.constant {
            Some(compiled) => compiled.as_ref(),
            None => {
                dynamic = compile(self.op, &pattern, &options)?;
                dynamic.as_ref()
            }
        };
        let (Some(text), Some(regex)) = (text, regex) else {
            return Ok(Value::Owned(match self.op {
                RegexOp::Match => RawBson::Boolean(false),
                RegexOp::Find => RawBson::Null,
                RegexOp::FindAll => RawBson::Array(RawArrayBuf::new()),
            }));
        };
        self.run(regex, text).map(Value::Owned)
    }

    fn run(&self, regex: &fancy_regex::Regex, text: &str) -> Result<RawBson, MongoError> {
        match self.op {
            RegexOp::Match => {
                let found = regex.is_match(text).map_err(|e| run_error(self.op, &e))?;
                Ok(RawBson::Boolean(found))
            }
            RegexOp::Find => Ok(next_match(self.op, regex, text, 0)?
                .map_or(RawBson::Null, |(doc, _, _)| RawBson::Document(doc))),
            RegexOp::FindAll => find_all(self.op, regex, text),
        }
    }
}

fn run_error(op: RegexOp, e: &fancy_regex::Error) -> MongoError {
    error(
        ErrorCode::Location51156,
        format!(
            "Error occurred while executing the regular expression in {}. Result code: {e}",
            op.name()
        ),
    )
}

/// The first match at or after byte `from`: its `{match, idx, captures}` and byte range.
fn next_match(
    op: RegexOp,
    regex: &fancy_regex::Regex,
    text: &str,
    from: usize,
) -> Result<Option<(RawDocumentBuf, usize, usize)>, MongoError> {
    let Some(caps) = regex
        .captures_from_pos(text, from)
        .map_err(|e| run_error(op, &e))?
    else {
        return Ok(None);
    };
    let Some(whole) = caps.get(0) else {
        return Ok(None);
    };
    let mut captures = RawArrayBuf::new();
    for i in 1..caps.len() {
        match caps.get(i) {
            Some(group) => captures.push(group.as_str()),
            None => captures.push(RawBson::Null),
        }
    }
    let idx = text[..whole.start()].chars().count();
    let mut doc = RawDocumentBuf::new();
    doc.append("match", whole.as_str());
    doc.append("idx", i32::try_from(idx).unwrap_or(i32::MAX));
    doc.append("captures", captures);
    Ok(Some((doc, whole.start(), whole.end())))
}

/// Every non-overlapping match, left to right; after an empty match the search moves on one
/// code point (mongod's `ExpressionRegexFindAll::evaluate`).
fn find_all(op: RegexOp, regex: &fancy_regex::Regex, text: &str) -> Result<RawBson, MongoError> {
    let mut out = RawArrayBuf::new();
    let mut from = 0;
    loop {
        let Some((doc, start, end)) = next_match(op, regex, text, from)? else {
            break;
        };
        out.push(doc);
        from = if end > start {
            end
        } else {
            start + text[start..].chars().next().map_or(1, char::len_utf8)
        };
        assert!(from > start, "each match moves the search forward");
        if from >= text.len() {
            break;
        }
    }
    Ok(RawBson::Array(out))
}

#[cfg(test)]
mod tests {
    use crate::matcher::expr::{Expr, Value};
    use bson::{doc, rawdoc, Bson, Regex};

    fn eval(spec: bson::Document, input: bson::RawDocumentBuf) -> Result<Bson, i32> {
        let raw = bson::RawDocumentBuf::from_document(&spec).expect("raw");
        let e = Expr::parse(bson::raw::RawBsonRef::Document(&raw)).map_err(|e| e.code.code())?;
        let v = e.evaluate(&input).map_err(|e| e.code.code())?;
        Ok(match v {
            Value::Missing => Bson::Undefined,
            v => Bson::try_from(v.as_raw().expect("present").to_raw_bson()).expect("converts"),
        })
    }

    #[test]
    fn match_find_and_find_all() {
        let d = rawdoc! {"s": "Banana bandana"};
        assert_eq!(
            eval(
                doc! {"$regexMatch": {"input": "$s", "regex": "ban", "options": "i"}},
                d.clone()
            ),
            Ok(Bson::Boolean(true))
        );
        assert_eq!(
            eval(
                doc! {"$regexFind": {"input": "$s", "regex": "(b)(x)?an", "options": "i"}},
                d.clone()
            ),
            Ok(Bson::Document(
                doc! {"match": "Ban", "idx": 0, "captures": ["B", null]}
            ))
        );
        let all = eval(
            doc! {"$regexFindAll": {"input": "$s", "regex": Regex {pattern: "an".into(), options: String::new()}}},
            d,
        );
        let idx: Vec<i32> = match all {
            Ok(Bson::Array(items)) => items
                .iter()
                .filter_map(|m| m.as_document().and_then(|m| m.get_i32("idx").ok()))
                .collect(),
            other => panic!("{other:?}"),
        };
        assert_eq!(idx, vec![1, 3, 8, 11]);
    }

    #[test]
    fn idx_counts_code_points_and_empty_matches_advance() {
        let d = rawdoc! {"s": "éa"};
        assert_eq!(
            eval(
                doc! {"$regexFind": {"input": "$s", "regex": "a"}},
                d.clone()
            ),
            Ok(Bson::Document(
                doc! {"match": "a", "idx": 1, "captures": []}
            ))
        );
        // mongod's jstest: an empty pattern matches before each code point.
        let all = eval(doc! {"$regexFindAll": {"input": "$s", "regex": ""}}, d);
        assert_eq!(
            all,
            Ok(Bson::Array(vec![
                Bson::Document(doc! {"match": "", "idx": 0, "captures": []}),
                Bson::Document(doc! {"match": "", "idx": 1, "captures": []}),
            ]))
        );
        let empty = eval(
            doc! {"$regexFindAll": {"input": "", "regex": ""}},
            rawdoc! {},
        );
        assert_eq!(
            empty,
            Ok(Bson::Array(vec![Bson::Document(
                doc! {"match": "", "idx": 0, "captures": []}
            )]))
        );
    }

    #[test]
    fn nullish_input_or_regex() {
        let e = |op: &str, input: Bson, regex: Bson| {
            eval(doc! {op: {"input": input, "regex": regex}}, rawdoc! {})
        };
        assert_eq!(
            e("$regexMatch", Bson::Null, "a".into()),
            Ok(Bson::Boolean(false))
        );
        assert_eq!(
            e("$regexFind", "$missing".into(), "a".into()),
            Ok(Bson::Null)
        );
        assert_eq!(
            e("$regexFindAll", "abc".into(), Bson::Null),
            Ok(Bson::Array(vec![]))
        );
    }

    #[test]
    fn errors_have_mongods_codes() {
        let code = |spec: bson::Document| eval(spec, rawdoc! {"n": 1}).unwrap_err();
        assert_eq!(code(doc! {"$regexMatch": "x"}), 51103);
        assert_eq!(code(doc! {"$regexMatch": {"regex": "a"}}), 31022);
        assert_eq!(code(doc! {"$regexMatch": {"input": "a"}}), 31023);
        assert_eq!(
            code(doc! {"$regexMatch": {"input": "a", "regex": "a", "x": 1}}),
            31024
        );
        assert_eq!(
            code(doc! {"$regexMatch": {"input": "$n", "regex": "a"}}),
            51104
        );
        assert_eq!(
            code(doc! {"$regexMatch": {"input": "a", "regex": 1}}),
            51105
        );
        assert_eq!(
            code(doc! {"$regexMatch": {"input": "a", "regex": "a", "options": 1}}),
            51106
        );
        let with_flags = Regex {
            pattern: "a".into(),
            options: "i".into(),
        };
        assert_eq!(
            code(doc! {"$regexMatch": {"input": "a", "regex": with_flags, "options": "m"}}),
            51107
        );
        assert_eq!(
            code(doc! {"$regexMatch": {"input": "a", "regex": "a", "options": "g"}}),
            51108
        );
        assert_eq!(
            code(doc! {"$regexMatch": {"input": "a", "regex": "a\0"}}),
            51109
        );
        assert_eq!(
            code(doc! {"$regexMatch": {"input": "a", "regex": "("}}),
            51111
        );
        // A regex read from the document is compiled per document, with the same checks.
        let d = rawdoc! {"r": "(", "o": "g"};
        let spec = |r: &str, o: &str| doc! {"$regexFind": {"input": "a", "regex": r, "options": o}};
        assert_eq!(eval(spec("$r", ""), d.clone()).unwrap_err(), 51111);
        assert_eq!(eval(spec("a", "$o"), d).unwrap_err(), 51108);
    }
}
