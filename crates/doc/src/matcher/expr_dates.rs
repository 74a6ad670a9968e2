//! The date expression operators' parsing and dispatch: `$year $month $dayOfMonth $hour
//! $minute $second $millisecond $dayOfWeek $dayOfYear $week $isoWeek $isoWeekYear
//! $isoDayOfWeek` (a date, `[date]`, or `{date, timezone}`: 40535/40536/40539),
//! `$dateToParts`, `$dateFromParts`, `$dateToString`, `$dateFromString`, `$dateAdd`,
//! `$dateSubtract`, `$dateDiff` and `$dateTrunc` (their argument documents with mongod 7.0's
//! codes for a non-object, an unknown argument and a missing one). Evaluation lives in
//! `expr_date_parts` (parts), `expr_date_format` (strings) and `expr_date_arith`
//! (arithmetic); zones and units in `expr_date_zone`.

use bson::raw::{RawBsonRef, RawDocument};

use super::expr::{error, Expr, Value};
use super::expr_vars::Scope;
use super::path::bson_error;
use crate::{ErrorCode, MongoError};

/// A part of a date (`$year`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs, reason = "each variant is the operator of the same name")]
pub enum Part {
    Year,
    Month,
    DayOfMonth,
    Hour,
    Minute,
    Second,
    Millisecond,
    DayOfWeek,
    DayOfYear,
    Week,
    IsoWeek,
    IsoWeekYear,
    IsoDayOfWeek,
}

const PARTS: &[(&str, Part)] = &[
    ("$year", Part::Year),
    ("$month", Part::Month),
    ("$dayOfMonth", Part::DayOfMonth),
    ("$hour", Part::Hour),
    ("$minute", Part::Minute),
    ("$second", Part::Second),
    ("$millisecond", Part::Millisecond),
    ("$dayOfWeek", Part::DayOfWeek),
    ("$dayOfYear", Part::DayOfYear),
    ("$week", Part::Week),
    ("$isoWeek", Part::IsoWeek),
    ("$isoWeekYear", Part::IsoWeekYear),
    ("$isoDayOfWeek", Part::IsoDayOfWeek),
];

/// Which date operator takes an argument document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs, reason = "each variant is the operator of the same name")]
pub enum DateKind {
    Part(Part),
    ToParts,
    FromParts,
    ToString,
    FromString,
    Add,
    Subtract,
    Diff,
    Trunc,
}

/// Every date operator name (for `is_expression_name`).
pub(crate) fn is_date_operator(name: &str) -> bool {
    PARTS.iter().any(|(n, _)| *n == name) || spec(name).is_some()
}

/// A parsed date expression: its operator and its arguments by name.
#[derive(Debug, Clone)]
pub struct DateExpr {
    /// The operator.
    pub kind: DateKind,
    /// The operator's name, with its `$`.
    pub name: &'static str,
    args: Vec<(&'static str, Expr)>,
}

type Stack<'a> = Vec<Value<'a>>;

impl DateExpr {
    /// Whether the argument `name` was given.
    pub(crate) fn has(&self, name: &str) -> bool {
        self.args.iter().any(|(n, _)| *n == name)
    }

    /// The argument `name` evaluated; `None` when it was not given.
    pub(crate) fn arg<'a>(
        &self,
        name: &str,
        root: &'a RawDocument,
        stack: &mut Stack<'a>,
    ) -> Result<Option<Value<'a>>, MongoError> {
        match self.args.iter().find(|(n, _)| *n == name) {
            None => Ok(None),
            Some((_, e)) => e.eval(root, stack).map(Some),
        }
    }

    pub(crate) fn reads_document(&self) -> bool {
        self.args.iter().any(|(_, e)| e.reads_document())
    }

    pub(crate) fn eval<'a>(
        &self,
        root: &'a RawDocument,
        stack: &mut Stack<'a>,
    ) -> Result<Value<'a>, MongoError> {
        match self.kind {
            DateKind::Part(p) => super::expr_date_parts::part(self, p, root, stack),
            DateKind::ToParts => super::expr_date_parts::to_parts(self, root, stack),
            DateKind::FromParts => super::expr_date_parts::from_parts(self, root, stack),
            DateKind::ToString => super::expr_date_format::to_string(self, root, stack),
            DateKind::FromString => super::expr_date_format::from_string(self, root, stack),
            DateKind::Add | DateKind::Subtract => super::expr_date_arith::add(self, root, stack),
            DateKind::Diff => super::expr_date_arith::diff(self, root, stack),
            DateKind::Trunc => super::expr_date_arith::trunc(self, root, stack),
        }
    }
}

/// How one operator's argument document is checked.
struct Spec {
    name: &'static str,
    kind: DateKind,
    known: &'static [&'static str],
    /// Code and message for a non-object (`{op}` and `{type}` filled in).
    not_object: (ErrorCode, &'static str),
    /// Code and message for an unknown argument (`{op}` and `{field}`).
    unknown: (ErrorCode, &'static str),
    /// Required arguments, each with its code and message.
    required: &'static [(&'static str, ErrorCode, &'static str)],
}

const ADD_KNOWN: &[&str] = &["startDate", "unit", "amount", "timezone"];
const ADD_UNKNOWN: &str = "Unrecognized argument to {op}: {field}. Expected arguments are \
                           startDate, unit, amount, and optionally timezone.";
const ADD_REQUIRED: &[(&str, ErrorCode, &str)] = &[
    (
        "startDate",
        ErrorCode::Location5166402,
        "{op} requires startDate, unit, and amount to be present",
    ),
    (
        "unit",
        ErrorCode::Location5166402,
        "{op} requires startDate, unit, and amount to be present",
    ),
    (
        "amount",
        ErrorCode::Location5166402,
        "{op} requires startDate, unit, and amount to be present",
    ),
];

const SPECS: &[Spec] = &[
    Spec {
        name: "$dateToParts",
        kind: DateKind::ToParts,
        known: &["date", "timezone", "iso8601"],
        not_object: (
            ErrorCode::Location40524,
            "$dateToParts only supports an object as its argument",
        ),
        unknown: (
            ErrorCode::Location40520,
            "Unrecognized argument to $dateToParts: {field}",
        ),
        required: &[(
            "date",
            ErrorCode::Location40522,
            "Missing 'date' parameter to $dateToParts",
        )],
    },
    Spec {
        name: "$dateFromParts",
        kind: DateKind::FromParts,
        known: &[
            "year",
            "month",
            "day",
            "hour",
            "minute",
            "second",
            "millisecond",
            "isoWeekYear",
            "isoWeek",
            "isoDayOfWeek",
            "timezone",
        ],
        not_object: (
            ErrorCode::Location40519,
            "$dateFromParts only supports an object as its argument",
        ),
        unknown: (
            ErrorCode::Location40518,
            "Unrecognized argument to $dateFromParts: {field}",
        ),
        required: &[],
    },
    Spec {
        name: "$dateToString",
        kind: DateKind::ToString,
        known: &["format", "date", "timezone", "onNull"],
        not_object: (
            ErrorCode::Location18629,
            "$dateToString only supports an object as its argument",
        ),
        unknown: (
            ErrorCode::Location18534,
            "Unrecognized argument to $dateToString: {field}",
        ),
        required: &[(
            "date",
            ErrorCode::Location18628,
            "Missing 'date' parameter to $dateToString",
        )],
    },
    Spec {
        name: "$dateFromString",
        kind: DateKind::FromString,
        known: &["format", "dateString", "timezone", "onNull", "onError"],
        not_object: (
            ErrorCode::Location40540,
            "$dateFromString only supports an object as an argument, found: {type}",
        ),
        unknown: (
            ErrorCode::Location40541,
            "Unrecognized argument to $dateFromString: {field}",
        ),
        required: &[(
            "dateString",
            ErrorCode::Location40542,
            "Missing 'dateString' parameter to $dateFromString",
        )],
    },
    Spec {
        name: "$dateAdd",
        kind: DateKind::Add,
        known: ADD_KNOWN,
        not_object: (
            ErrorCode::Location5166400,
            "{op} expects an object as its argument",
        ),
        unknown: (ErrorCode::Location5166401, ADD_UNKNOWN),
        required: ADD_REQUIRED,
    },
    Spec {
        name: "$dateSubtract",
        kind: DateKind::Subtract,
        known: ADD_KNOWN,
        not_object: (
            ErrorCode::Location5166400,
            "{op} expects an object as its argument",
        ),
        unknown: (ErrorCode::Location5166401, ADD_UNKNOWN),
        required: ADD_REQUIRED,
    },
    Spec {
        name: "$dateDiff",
        kind: DateKind::Diff,
        known: &["startDate", "endDate", "unit", "timezone", "startOfWeek"],
        not_object: (
            ErrorCode::Location5166301,
            "$dateDiff only supports an object as its argument",
        ),
        unknown: (
            ErrorCode::Location5166302,
            "Unrecognized argument to $dateDiff: {field}",
        ),
        required: &[
            (
                "startDate",
                ErrorCode::Location5166303,
                "Missing 'startDate' parameter to $dateDiff",
            ),
            (
                "endDate",
                ErrorCode::Location5166304,
                "Missing 'endDate' parameter to $dateDiff",
            ),
            (
                "unit",
                ErrorCode::Location5166305,
                "Missing 'unit' parameter to $dateDiff",
            ),
        ],
    },
    Spec {
        name: "$dateTrunc",
        kind: DateKind::Trunc,
        known: &["date", "unit", "binSize", "timezone", "startOfWeek"],
        not_object: (
            ErrorCode::Location5439007,
            "$dateTrunc only supports an object as its argument",
        ),
        unknown: (
            ErrorCode::Location5439008,
            "Unrecognized argument to $dateTrunc: {field}. Expected arguments are date, unit, \
             and optionally, binSize, timezone, startOfWeek",
        ),
        required: &[
            (
                "date",
                ErrorCode::Location5439009,
                "Missing 'date' parameter to $dateTrunc",
            ),
            (
                "unit",
                ErrorCode::Location5439010,
                "Missing 'unit' parameter to $dateTrunc",
            ),
        ],
    },
];

fn spec(name: &str) -> Option<&'static Spec> {
    SPECS.iter().find(|s| s.name == name)
}

fn fill(template: &str, op: &str, field: &str, type_name: &str) -> String {
    template
        .replace("{op}", op)
        .replace("{field}", field)
        .replace("{type}", type_name)
}

/// Parse a date operator by name; `None` for another name.
pub(crate) fn parse(
    name: &str,
    arg: RawBsonRef<'_>,
    scope: &mut Scope<'_>,
) -> Option<Result<Expr, MongoError>> {
    if let Some((op, part)) = PARTS.iter().find(|(n, _)| *n == name) {
        return Some(parse_part(op, *part, arg, scope));
    }
    let spec = spec(name)?;
    Some(parse_object(spec, arg, scope))
}

fn wrap(kind: DateKind, name: &'static str, args: Vec<(&'static str, Expr)>) -> Expr {
    Expr::Dates(Box::new(DateExpr { kind, name, args }))
}

fn parse_object(
    spec: &Spec,
    arg: RawBsonRef<'_>,
    scope: &mut Scope<'_>,
) -> Result<Expr, MongoError> {
    let RawBsonRef::Document(d) = arg else {
        let (code, template) = spec.not_object;
        return Err(error(
            code,
            fill(template, spec.name, "", Value::Ref(arg).type_name()),
        ));
    };
    let mut args: Vec<(&'static str, Expr)> = Vec::new();
    for field in d {
        let (key, value) = field.map_err(bson_error)?;
        let Some(known) = spec.known.iter().find(|k| **k == key) else {
            let (code, template) = spec.unknown;
            return Err(error(code, fill(template, spec.name, key, "")));
        };
        let parsed = Expr::parse_scoped(value, scope)?;
        match args.iter_mut().find(|(n, _)| n == known) {
            Some(slot) => slot.1 = parsed,
            None => args.push((known, parsed)),
        }
    }
    for (name, code, message) in spec.required {
        if !args.iter().any(|(n, _)| n == name) {
            return Err(error(*code, fill(message, spec.name, "", "")));
        }
    }
    if spec.kind == DateKind::FromParts {
        check_from_parts(&args)?;
    }
    Ok(wrap(spec.kind, spec.name, args))
}

/// `$dateFromParts` takes natural or ISO parts, never both (40516, 40489, 40525).
fn check_from_parts(args: &[(&str, Expr)]) -> Result<(), MongoError> {
    let has = |n: &str| args.iter().any(|(k, _)| *k == n);
    let iso = has("isoWeekYear") || has("isoWeek") || has("isoDayOfWeek");
    if !has("year") && !has("isoWeekYear") {
        return Err(error(
            ErrorCode::Location40516,
            "$dateFromParts requires either 'year' or 'isoWeekYear' to be present",
        ));
    }
    if has("year") && iso {
        return Err(error(
            ErrorCode::Location40489,
            "$dateFromParts does not allow mixing natural dates with ISO dates",
        ));
    }
    if has("isoWeekYear") && (has("year") || has("month") || has("day")) {
        return Err(error(
            ErrorCode::Location40525,
            "$dateFromParts does not allow mixing ISO dates with natural dates",
        ));
    }
    Ok(())
}

/// `{$year: <date>}`, `{$year: [<date>]}` or `{$year: {date, timezone}}`.
fn parse_part(
    op: &'static str,
    part: Part,
    arg: RawBsonRef<'_>,
    scope: &mut Scope<'_>,
) -> Result<Expr, MongoError> {
    let kind = DateKind::Part(part);
    match arg {
        RawBsonRef::Document(d) if !first_is_operator(d)? => {
            let mut args: Vec<(&'static str, Expr)> = Vec::new();
            for field in d {
                let (key, value) = field.map_err(bson_error)?;
                let name = match key {
                    "date" => "date",
                    "timezone" => "timezone",
                    other => {
                        return Err(error(
                            ErrorCode::Location40535,
                            format!("unrecognized option to {op}: \"{other}\""),
                        ))
                    }
                };
                args.retain(|(n, _)| *n != name);
                args.push((name, Expr::parse_scoped(value, scope)?));
            }
            if !args.iter().any(|(n, _)| *n == "date") {
                let shown =
                    bson::Document::try_from(d).map_or_else(|_| String::new(), |d| d.to_string());
                return Err(error(
                    ErrorCode::Location40539,
                    format!("missing 'date' argument to {op}, provided: {op}: {shown}"),
                ));
            }
            Ok(wrap(kind, op, args))
        }
        RawBsonRef::Array(items) => {
            let items: Vec<RawBsonRef<'_>> = items
                .into_iter()
                .collect::<Result<_, _>>()
                .map_err(bson_error)?;
            let [only] = items[..] else {
                return Err(error(
                    ErrorCode::Location40536,
                    format!(
                        "{op} accepts exactly one argument if given an array, but was given {}",
                        items.len()
                    ),
                ));
            };
            Ok(wrap(
                kind,
                op,
                vec![("date", Expr::parse_scoped(only, scope)?)],
            ))
        }
        other => Ok(wrap(
            kind,
            op,
            vec![("date", Expr::parse_scoped(other, scope)?)],
        )),
    }
}

fn first_is_operator(d: &RawDocument) -> Result<bool, MongoError> {
    Ok(match d.iter().next() {
        Some(field) => field.map_err(bson_error)?.0.starts_with('$'),
        None => false,
    })
}
