//! The string expressions mongod 7.0 has beyond `$concat $toLower $toUpper $strLenCP`
//! (`expr_ops`): positional `$substr`/`$substrBytes`, `$substrCP`, `$strLenBytes`, `$split`,
//! `$indexOfBytes`, `$indexOfCP`, `$strcasecmp`, and the named-argument forms `$trim $ltrim
//! $rtrim {input, chars}` and `$replaceOne $replaceAll {input, find, replacement}`.
//!
//! Each follows `ExpressionX::evaluate` in mongod's `expression.cpp`: which arguments are
//! coerced to strings (null and missing give ""), which give null when nullish, and the codes
//! for wrong types (`$substrBytes` 16034/16035/50752/28656/28657, `$substrCP` 34450-34455,
//! `$strLenBytes` 34473, `$split` 40085-40087, `$indexOf*` 40091-40097, `$trim` 50694-50700,
//! `$replace*` 51744-51751). Strings are valid UTF-8 here (the BSON reader checked), so
//! mongod's invalid-UTF-8 codes cannot arise. Nothing here evaluates sub-expressions except
//! the named forms' `eval`.

use std::cmp::Ordering;

use bson::raw::{RawArrayBuf, RawBson, RawBsonRef, RawDocument};

use super::expr::{error, Expr, Value};
use super::expr_format::{coerce_to_string, display};
use super::expr_vars::Scope;
use super::path::bson_error;
use crate::{ErrorCode, MongoError};

/// A positional string operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StrOp {
    /// `$substrBytes` (and its old name `$substr`).
    SubstrBytes,
    /// `$substrCP`.
    SubstrCP,
    /// `$strLenBytes`.
    StrLenBytes,
    /// `$split`.
    Split,
    /// `$indexOfBytes`.
    IndexOfBytes,
    /// `$indexOfCP`.
    IndexOfCP,
    /// `$strcasecmp`.
    Strcasecmp,
}

impl StrOp {
    /// The operator of this name.
    pub(crate) fn from_name(name: &str) -> Option<StrOp> {
        Some(match name {
            "$substr" | "$substrBytes" => StrOp::SubstrBytes,
            "$substrCP" => StrOp::SubstrCP,
            "$strLenBytes" => StrOp::StrLenBytes,
            "$split" => StrOp::Split,
            "$indexOfBytes" => StrOp::IndexOfBytes,
            "$indexOfCP" => StrOp::IndexOfCP,
            "$strcasecmp" => StrOp::Strcasecmp,
            _ => return None,
        })
    }

    /// The name mongod reports (`$substr` reports `$substrBytes`, as it parses into one).
    fn name(self) -> &'static str {
        match self {
            StrOp::SubstrBytes => "$substrBytes",
            StrOp::SubstrCP => "$substrCP",
            StrOp::StrLenBytes => "$strLenBytes",
            StrOp::Split => "$split",
            StrOp::IndexOfBytes => "$indexOfBytes",
            StrOp::IndexOfCP => "$indexOfCP",
            StrOp::Strcasecmp => "$strcasecmp",
        }
    }

    /// Checks the argument count: 16020 for fixed arity, 28667 for `$indexOf*`'s two to four.
    pub(crate) fn check_arity(self, count: usize) -> Result<(), MongoError> {
        let name = self.name();
        let exact = match self {
            StrOp::SubstrBytes | StrOp::SubstrCP => 3,
            StrOp::StrLenBytes => 1,
            StrOp::Split | StrOp::Strcasecmp => 2,
            StrOp::IndexOfBytes | StrOp::IndexOfCP => {
                if (2..=4).contains(&count) {
                    return Ok(());
                }
                return Err(error(
                    ErrorCode::Location28667,
                    format!(
                        "Expression {name} takes at least 2 arguments, and at most 4. {count} \
                         were passed in."
                    ),
                ));
            }
        };
        if count == exact {
            return Ok(());
        }
        Err(error(
            ErrorCode::Location16020,
            format!("Expression {name} takes exactly {exact} arguments. {count} were passed in."),
        ))
    }

    /// Applies the operator to its evaluated arguments (as many as `check_arity` allowed).
    pub(crate) fn apply<'a>(self, args: &[Value<'_>]) -> Result<Value<'a>, MongoError> {
        match self {
            StrOp::SubstrBytes => substr_bytes(&args[0], &args[1], &args[2]),
            StrOp::SubstrCP => substr_cp(&args[0], &args[1], &args[2]),
            StrOp::StrLenBytes => str_len_bytes(&args[0]),
            StrOp::Split => split(&args[0], &args[1]),
            StrOp::IndexOfBytes | StrOp::IndexOfCP => index_of(self, args),
            StrOp::Strcasecmp => strcasecmp(&args[0], &args[1]),
        }
    }
}

fn string<'a>(s: String) -> Value<'a> {
    Value::Owned(RawBson::String(s))
}

fn int<'a>(i: usize) -> Value<'a> {
    Value::Owned(RawBson::Int32(i32::try_from(i).unwrap_or(i32::MAX)))
}

fn null<'a>() -> Value<'a> {
    Value::Owned(RawBson::Null)
}

/// A number truncated to a 64-bit integer (`coerceToLong`), `None` for a non-number.
fn coerce_to_long(v: &Value<'_>) -> Option<i64> {
    match v.as_raw()? {
        RawBsonRef::Int32(i) => Some(i64::from(i)),
        RawBsonRef::Int64(i) => Some(i),
        RawBsonRef::Double(d) => Some(d as i64),
        RawBsonRef::Decimal128(d) => Some(crate::compare::decimal128_to_f64(&d) as i64),
        _ => None,
    }
}

/// mongod's `Value::integral()`: a number with an exact 32-bit integer value.
pub(crate) fn integral_i32(v: &Value<'_>) -> Option<i32> {
    let d = match v.as_raw()? {
        RawBsonRef::Int32(i) => return Some(i),
        RawBsonRef::Int64(i) => return i32::try_from(i).ok(),
        RawBsonRef::Double(d) => d,
        RawBsonRef::Decimal128(d) => crate::compare::decimal128_to_f64(&d),
        _ => return None,
    };
    let fits = d.fract() == 0.0 && d >= f64::from(i32::MIN) && d <= f64::from(i32::MAX);
    fits.then_some(d as i32)
}

fn is_number(v: &Value<'_>) -> bool {
    coerce_to_long(v).is_some()
}

fn substr_bytes<'a>(
    input: &Value<'_>,
    start: &Value<'_>,
    length: &Value<'_>,
) -> Result<Value<'a>, MongoError> {
    let s = coerce_to_string(input)?;
    let type_error = |code, what: &str, v: &Value<'_>| {
        error(
            code,
            format!(
                "$substrBytes:  {what} must be a numeric type (is BSON type {})",
                v.type_name()
            ),
        )
    };
    let lower = coerce_to_long(start)
        .ok_or_else(|| type_error(ErrorCode::Location16034, "starting index", start))?;
    let signed_length = coerce_to_long(length)
        .ok_or_else(|| type_error(ErrorCode::Location16035, "length", length))?;
    let Ok(lower) = usize::try_from(lower) else {
        return Err(error(
            ErrorCode::Location50752,
            format!("$substrBytes:  starting index must be non-negative (got: {lower})"),
        ));
    };
    let len = usize::try_from(signed_length).unwrap_or(s.len());
    let bytes = s.as_bytes();
    if lower < bytes.len() && !s.is_char_boundary(lower) {
        return Err(error(
            ErrorCode::Location28656,
            "$substrBytes:  Invalid range, starting index is a UTF-8 continuation byte.",
        ));
    }
    let end = lower.saturating_add(len);
    if end < bytes.len() && !s.is_char_boundary(end) {
        return Err(error(
            ErrorCode::Location28657,
            "$substrBytes:  Invalid range, ending index is in the middle of a UTF-8 character.",
        ));
    }
    Ok(string(
        s.get(lower.min(s.len())..end.min(s.len()))
            .unwrap_or_default()
            .to_owned(),
    ))
}

fn substr_cp<'a>(
    input: &Value<'_>,
    start: &Value<'_>,
    length: &Value<'_>,
) -> Result<Value<'a>, MongoError> {
    let s = coerce_to_string(input)?;
    let start = cp_argument(
        start,
        "starting index",
        [ErrorCode::Location34450, ErrorCode::Location34451],
    )?;
    let length = cp_argument(
        length,
        "length",
        [ErrorCode::Location34452, ErrorCode::Location34453],
    )?;
    let Ok(length) = usize::try_from(length) else {
        return Err(error(
            ErrorCode::Location34454,
            "$substrCP: length must be a nonnegative integer.",
        ));
    };
    let Ok(start) = usize::try_from(start) else {
        return Err(error(
            ErrorCode::Location34455,
            "$substrCP: the starting index must be nonnegative integer.",
        ));
    };
    Ok(string(s.chars().skip(start).take(length).collect()))
}

/// A `$substrCP` index or length: numeric (first code), with a 32-bit integral value (second).
fn cp_argument(v: &Value<'_>, what: &str, codes: [ErrorCode; 2]) -> Result<i32, MongoError> {
    if !is_number(v) {
        return Err(error(
            codes[0],
            format!(
                "$substrCP: {what} must be a numeric type (is BSON type {})",
                v.type_name()
            ),
        ));
    }
    integral_i32(v).ok_or_else(|| {
        error(
            codes[1],
            format!(
                "$substrCP: {what} cannot be represented as a 32-bit integral value: {}",
                display(v)
            ),
        )
    })
}

fn str_len_bytes<'a>(v: &Value<'_>) -> Result<Value<'a>, MongoError> {
    match v.as_raw() {
        Some(RawBsonRef::String(s)) => Ok(int(s.len())),
        _ => Err(error(
            ErrorCode::Location34473,
            format!(
                "$strLenBytes requires a string argument, found: {}",
                v.type_name()
            ),
        )),
    }
}

fn split<'a>(input: &Value<'_>, separator: &Value<'_>) -> Result<Value<'a>, MongoError> {
    if input.is_nullish() || separator.is_nullish() {
        return Ok(null());
    }
    let which = [
        (input, "first", ErrorCode::Location40085),
        (separator, "second", ErrorCode::Location40086),
    ];
    let mut strings = Vec::with_capacity(2);
    for (v, position, code) in which {
        match v.as_raw() {
            Some(RawBsonRef::String(s)) => strings.push(s),
            _ => {
                return Err(error(
                    code,
                    format!(
                        "$split requires an expression that evaluates to a string as a \
                         {position} argument, found: {}",
                        v.type_name()
                    ),
                ))
            }
        }
    }
    if strings[1].is_empty() {
        return Err(error(
            ErrorCode::Location40087,
            "$split requires a non-empty separator",
        ));
    }
    let mut out = RawArrayBuf::new();
    for part in strings[0].split(strings[1]) {
        out.push(part);
    }
    Ok(Value::Owned(RawBson::Array(out)))
}

fn strcasecmp<'a>(a: &Value<'_>, b: &Value<'_>) -> Result<Value<'a>, MongoError> {
    let a = coerce_to_string(a)?.to_ascii_uppercase();
    let b = coerce_to_string(b)?.to_ascii_uppercase();
    let result = match a.as_bytes().cmp(b.as_bytes()) {
        Ordering::Less => -1,
        Ordering::Equal => 0,
        Ordering::Greater => 1,
    };
    Ok(Value::Owned(RawBson::Int32(result)))
}

/// `$indexOfBytes`/`$indexOfCP: [string, token, start?, end?]`.
fn index_of<'a>(op: StrOp, args: &[Value<'_>]) -> Result<Value<'a>, MongoError> {
    if args[0].is_nullish() {
        return Ok(null());
    }
    let name = op.name();
    let codes = match op {
        StrOp::IndexOfBytes => [ErrorCode::Location40091, ErrorCode::Location40092],
        _ => [ErrorCode::Location40093, ErrorCode::Location40094],
    };
    let input = string_argument(&args[0], name, "first", codes[0])?;
    let token = string_argument(&args[1], name, "second", codes[1])?;
    let start = match args.get(2) {
        Some(v) => bound(v, name, "starting index")?,
        None => 0,
    };
    let end = args
        .get(3)
        .map(|v| bound(v, name, "ending index"))
        .transpose()?;
    let found = if op == StrOp::IndexOfBytes {
        index_of_bytes(input, token, start, end)
    } else {
        index_of_cp(input, token, start, end)
    };
    Ok(Value::Owned(RawBson::Int32(
        found.map_or(-1, |i| i32::try_from(i).unwrap_or(i32::MAX)),
    )))
}

fn string_argument<'v>(
    v: &'v Value<'_>,
    name: &str,
    position: &str,
    code: ErrorCode,
) -> Result<&'v str, MongoError> {
    match v.as_raw() {
        Some(RawBsonRef::String(s)) => Ok(s),
        _ => Err(error(
            code,
            format!(
                "{name} requires a string as the {position} argument, found: {}",
                v.type_name()
            ),
        )),
    }
}

/// A start or end index: integral (40096, mongod's message lacks a space) and nonnegative.
fn bound(v: &Value<'_>, name: &str, what: &str) -> Result<usize, MongoError> {
    let Some(i) = integral_i32(v) else {
        return Err(error(
            ErrorCode::Location40096,
            format!(
                "{name}requires an integral {what}, found a value of type: {}, with value: {}",
                v.type_name(),
                display(v)
            ),
        ));
    };
    usize::try_from(i).map_err(|_| {
        error(
            ErrorCode::Location40097,
            format!(
                "{name} requires a nonnegative {what}, found: {}",
                display(v)
            ),
        )
    })
}

fn index_of_bytes(input: &str, token: &str, start: usize, end: Option<usize>) -> Option<usize> {
    let hay = input.as_bytes();
    let end = end.map_or(hay.len(), |e| e.min(hay.len()));
    if start > hay.len() || end < start {
        return None;
    }
    let needle = token.as_bytes();
    (start..=end.saturating_sub(needle.len()))
        .find(|&i| i + needle.len() <= end && &hay[i..i + needle.len()] == needle)
}

fn index_of_cp(input: &str, token: &str, start: usize, end: Option<usize>) -> Option<usize> {
    let offsets: Vec<usize> = input.char_indices().map(|(i, _)| i).collect();
    let end = end.map_or(offsets.len(), |e| e.min(offsets.len()));
    if end < start {
        return None;
    }
    if input.is_empty() && token.is_empty() {
        return Some(0);
    }
    (start..end).find(|&cp| input.as_bytes()[offsets[cp]..].starts_with(token.as_bytes()))
}

/// A named-argument string expression.
#[derive(Debug, Clone)]
pub enum NamedString {
    /// `$trim` (both ends), `$ltrim` (`left`), `$rtrim` (`right`).
    Trim {
        /// The operator's name, for messages.
        name: &'static str,
        /// Trim the start.
        left: bool,
        /// Trim the end.
        right: bool,
        /// The string.
        input: Expr,
        /// The code points to trim (whitespace when absent).
        chars: Option<Expr>,
    },
    /// `$replaceOne` (`all` false) and `$replaceAll`.
    Replace {
        /// Every occurrence, not only the first.
        all: bool,
        /// The string.
        input: Expr,
        /// What to find.
        find: Expr,
        /// What to put in its place.
        replacement: Expr,
    },
}

/// mongod's default `$trim` characters: NUL, ASCII whitespace and the Unicode spaces.
const WHITESPACE: &[char] = &[
    '\0', ' ', '\t', '\n', '\u{0B}', '\u{0C}', '\r', '\u{A0}', '\u{1680}', '\u{2000}', '\u{2001}',
    '\u{2002}', '\u{2003}', '\u{2004}', '\u{2005}', '\u{2006}', '\u{2007}', '\u{2008}', '\u{2009}',
    '\u{200A}',
];

/// The named arguments of `op`; an unknown one is refused with `unknown`.
fn named_arguments<'a>(
    arg: RawBsonRef<'a>,
    known: &[&str],
    op: &str,
    codes: [ErrorCode; 2],
) -> Result<Vec<(&'a str, RawBsonRef<'a>)>, MongoError> {
    let RawBsonRef::Document(d) = arg else {
        let message = match op {
            "$replaceOne" | "$replaceAll" => {
                format!(
                    "{op} requires an object as an argument, found: {}",
                    Value::Ref(arg).type_name()
                )
            }
            _ => format!(
                "{op} only supports an object as an argument, found {}",
                Value::Ref(arg).type_name()
            ),
        };
        return Err(error(codes[0], message));
    };
    let mut out = Vec::new();
    for field in d {
        let (key, value) = field.map_err(bson_error)?;
        if !known.contains(&key) {
            return Err(error(
                codes[1],
                format!("{op} found an unknown argument: {key}"),
            ));
        }
        out.push((key, value));
    }
    Ok(out)
}

fn take(
    args: &[(&str, RawBsonRef<'_>)],
    key: &str,
    scope: &mut Scope<'_>,
) -> Result<Option<Expr>, MongoError> {
    // The last occurrence wins, as mongod's loop assigns each in turn.
    match args.iter().rev().find(|(k, _)| *k == key) {
        Some((_, v)) => Ok(Some(Expr::parse_scoped(*v, scope)?)),
        None => Ok(None),
    }
}

/// Parses `$trim`, `$ltrim` or `$rtrim`.
pub(crate) fn parse_trim(
    name: &str,
    arg: RawBsonRef<'_>,
    scope: &mut Scope<'_>,
) -> Result<Expr, MongoError> {
    let (name, left, right) = match name {
        "$ltrim" => ("$ltrim", true, false),
        "$rtrim" => ("$rtrim", false, true),
        _ => ("$trim", true, true),
    };
    let codes = [ErrorCode::Location50696, ErrorCode::Location50694];
    let args = named_arguments(arg, &["input", "chars"], name, codes)?;
    let input = take(&args, "input", scope)?.ok_or_else(|| {
        error(
            ErrorCode::Location50695,
            format!("{name} requires an 'input' field"),
        )
    })?;
    let chars = take(&args, "chars", scope)?;
    let trim = NamedString::Trim {
        name,
        left,
        right,
        input,
        chars,
    };
    Ok(Expr::Strings(Box::new(trim)))
}

/// Parses `$replaceOne` or `$replaceAll`.
pub(crate) fn parse_replace(
    name: &str,
    arg: RawBsonRef<'_>,
    scope: &mut Scope<'_>,
) -> Result<Expr, MongoError> {
    let codes = [ErrorCode::Location51751, ErrorCode::Location51750];
    let args = named_arguments(arg, &["input", "find", "replacement"], name, codes)?;
    let required = |key: &str, code, found: Option<Expr>| {
        found.ok_or_else(|| error(code, format!("{name} requires '{key}' to be specified")))
    };
    let input = required(
        "input",
        ErrorCode::Location51749,
        take(&args, "input", scope)?,
    )?;
    let find = required(
        "find",
        ErrorCode::Location51748,
        take(&args, "find", scope)?,
    )?;
    let replacement = required(
        "replacement",
        ErrorCode::Location51747,
        take(&args, "replacement", scope)?,
    )?;
    let all = name == "$replaceAll";
    Ok(Expr::Strings(Box::new(NamedString::Replace {
        all,
        input,
        find,
        replacement,
    })))
}

impl NamedString {
    pub(crate) fn reads_document(&self) -> bool {
        match self {
            NamedString::Trim { input, chars, .. } => {
                input.reads_document() || chars.as_ref().is_some_and(Expr::reads_document)
            }
            NamedString::Replace {
                input,
                find,
                replacement,
                ..
            } => input.reads_document() || find.reads_document() || replacement.reads_document(),
        }
    }

    pub(crate) fn eval<'a>(
        &self,
        root: &'a RawDocument,
        stack: &mut Vec<Value<'a>>,
    ) -> Result<Value<'a>, MongoError> {
        match self {
            NamedString::Trim {
                name,
                left,
                right,
                input,
                chars,
            } => {
                let input = input.eval(root, stack)?;
                // mongod evaluates `chars` only once the input is known to be a string.
                let chars = match chars {
                    Some(c) if matches!(input.as_raw(), Some(RawBsonRef::String(_))) => {
                        Some(c.eval(root, stack)?)
                    }
                    _ => None,
                };
                trim(name, *left, *right, &input, chars.as_ref())
            }
            NamedString::Replace {
                all,
                input,
                find,
                replacement,
            } => {
                let values = [
                    input.eval(root, stack)?,
                    find.eval(root, stack)?,
                    replacement.eval(root, stack)?,
                ];
                replace(*all, &values)
            }
        }
    }
}

fn trim<'a>(
    name: &str,
    left: bool,
    right: bool,
    input: &Value<'_>,
    chars: Option<&Value<'_>>,
) -> Result<Value<'a>, MongoError> {
    if input.is_nullish() {
        return Ok(null());
    }
    let wrong = |code, what: &str, v: &Value<'_>| {
        error(
            code,
            format!(
                "{name} requires {what} to be a string, got {} (of type {}) instead.",
                display(v),
                v.type_name()
            ),
        )
    };
    let Some(RawBsonRef::String(s)) = input.as_raw() else {
        return Err(wrong(ErrorCode::Location50699, "its input", input));
    };
    let set: Vec<char> = match chars {
        None => WHITESPACE.to_vec(),
        Some(c) if c.is_nullish() => return Ok(null()),
        Some(c) => match c.as_raw() {
            Some(RawBsonRef::String(cs)) => cs.chars().collect(),
            _ => return Err(wrong(ErrorCode::Location50700, "'chars'", c)),
        },
    };
    let mut out = s;
    if left {
        out = out.trim_start_matches(set.as_slice());
    }
    if right {
        out = out.trim_end_matches(set.as_slice());
    }
    Ok(string(out.to_owned()))
}

fn replace<'a>(all: bool, values: &[Value<'_>; 3]) -> Result<Value<'a>, MongoError> {
    let name = if all { "$replaceAll" } else { "$replaceOne" };
    let fields = [
        ("input", ErrorCode::Location51746),
        ("find", ErrorCode::Location51745),
        ("replacement", ErrorCode::Location51744),
    ];
    let mut strings = Vec::with_capacity(3);
    for (v, (field, code)) in values.iter().zip(fields) {
        match v.as_raw() {
            Some(RawBsonRef::String(s)) => strings.push(s),
            _ if v.is_nullish() => {}
            _ => {
                return Err(error(
                    code,
                    format!(
                        "{name} requires that '{field}' be a string, found: {}",
                        display(v)
                    ),
                ))
            }
        }
    }
    let [input, find, replacement] = strings.as_slice() else {
        return Ok(null());
    };
    Ok(string(if all {
        replace_all(input, find, replacement)
    } else {
        input.replacen(find, replacement, 1)
    }))
}

/// Every occurrence replaced; an empty `find` matches between every two code points (mongod
/// inserts between bytes, which would split multi-byte characters).
fn replace_all(input: &str, find: &str, replacement: &str) -> String {
    if !find.is_empty() {
        return input.replace(find, replacement);
    }
    let mut out = String::with_capacity(input.len() * (replacement.len() + 1));
    for c in input.chars() {
        out.push_str(replacement);
        out.push(c);
    }
    out.push_str(replacement);
    out
}

#[cfg(test)]
#[path = "expr_strings_tests.rs"]
mod tests;
