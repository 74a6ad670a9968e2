//! `$densify`'s specification, parsed as mongod 7.0's IDL and `RangeStatement::parse` parse
//! it: `field` (a string, a field path), `partitionByFields` (strings), `range: {step, unit?,
//! bounds}` with `step` a positive number (5733401; whole with a `unit`, 6586400) and
//! `bounds` `"full"`, `"partition"` (with partition fields, 5733408) or `[lo, hi]` ascending
//! (5733402, 5733403) of numbers of the step's type (5733406, 5733409, 5876900) or dates with
//! a unit (5733405, 5733410); other bounds 5733404, 5946800, 5946802. Not an object 9, wrong
//! field types 14, missing fields 40414, unknown fields 40415. The run is in `densify.rs`.

use crate::compare::{number_as_f64, raw_number_as_f64};
use std::cmp::Ordering;

use bson::raw::{RawBsonRef, RawDocument};
use bson::Bson;

use super::field_path::parse_field_path;
use super::simple::type_name;
use crate::compare::compare_values;
use crate::matcher::expr_date_zone::Unit;
use crate::matcher::path::bson_error;
use crate::{ErrorCode, MongoError};

const STAGE: &str = "$densify";

/// A parsed `$densify`.
#[derive(Debug, Clone)]
pub(crate) struct Densify {
    pub(super) field: Vec<String>,
    pub(super) partition_fields: Vec<Vec<String>>,
    pub(super) step: Bson,
    pub(super) unit: Option<Unit>,
    pub(super) bounds: Bounds,
}

/// The range's `bounds`.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Bounds {
    Full,
    Partition,
    /// `[lo, hi]` as given: two numbers of the step's type, or two dates.
    Explicit(Box<(Bson, Bson)>),
}

pub(super) fn fail(code: ErrorCode, message: impl Into<String>) -> MongoError {
    MongoError::new(code, message)
}

/// mongod's TypeMismatch for a stage field of the wrong type (also `$fill`'s).
pub(super) fn wrong_type(field: &str, value: RawBsonRef<'_>, expected: &str) -> MongoError {
    fail(
        ErrorCode::TypeMismatch,
        format!(
            "BSON field '{field}' is the wrong type '{}', expected type '{expected}'",
            type_name(value)
        ),
    )
}

fn missing(field: &str) -> MongoError {
    fail(
        ErrorCode::Location40414,
        format!("BSON field '{field}' is missing but a required field"),
    )
}

fn unknown(field: &str) -> MongoError {
    fail(
        ErrorCode::Location40415,
        format!("BSON field '{field}' is an unknown field."),
    )
}

pub(crate) fn parse(spec: RawBsonRef<'_>) -> Result<Densify, MongoError> {
    let RawBsonRef::Document(d) = spec else {
        return Err(fail(
            ErrorCode::FailedToParse,
            format!(
                "The {STAGE} stage specification must be an object, found {}",
                type_name(spec)
            ),
        ));
    };
    let (mut field, mut partitions, mut range) = (None, Vec::new(), None);
    for item in d {
        let (name, value) = item.map_err(bson_error)?;
        let path = format!("{STAGE}.{name}");
        match (name, value) {
            ("field", RawBsonRef::String(f)) => field = Some(f),
            ("field", v) => return Err(wrong_type(&path, v, "string")),
            ("partitionByFields", RawBsonRef::Array(items)) => {
                for item in items {
                    match item.map_err(bson_error)? {
                        RawBsonRef::String(p) => partitions.push(p),
                        other => return Err(wrong_type(&path, other, "string")),
                    }
                }
            }
            ("partitionByFields", v) => return Err(wrong_type(&path, v, "array")),
            ("range", RawBsonRef::Document(r)) => range = Some(r),
            ("range", v) => return Err(wrong_type(&path, v, "object")),
            _ => return Err(unknown(&path)),
        }
    }
    let field = field.ok_or_else(|| missing(&format!("{STAGE}.field")))?;
    let range = range.ok_or_else(|| missing(&format!("{STAGE}.range")))?;
    let (step, unit, bounds) = parse_range(range)?;
    let partition_fields = partitions
        .iter()
        .map(|p| parse_field_path(p))
        .collect::<Result<Vec<_>, _>>()?;
    let field = parse_field_path(field)?;
    if bounds == Bounds::Partition && partition_fields.is_empty() {
        return Err(fail(
            ErrorCode::Location5733408,
            "One cannot specify the bounds as 'partition' without specifying a non-empty array \
             of partitionByFields. You may have meant to specify 'full' bounds.",
        ));
    }
    Ok(Densify {
        field,
        partition_fields,
        step,
        unit,
        bounds,
    })
}

fn parse_range(range: &RawDocument) -> Result<(Bson, Option<Unit>, Bounds), MongoError> {
    let (mut step, mut unit, mut bounds) = (None, None, None);
    for item in range {
        let (name, value) = item.map_err(bson_error)?;
        match (name, value) {
            ("step", v) => step = Some(v),
            ("unit", RawBsonRef::String(u)) => unit = Some(u),
            ("unit", v) => return Err(wrong_type("range.unit", v, "string")),
            ("bounds", v) => bounds = Some(v),
            (other, _) => return Err(unknown(&format!("range.{other}"))),
        }
    }
    let step = step.ok_or_else(|| missing("range.step"))?;
    let bounds = bounds.ok_or_else(|| missing("range.bounds"))?;
    let step_number = raw_number_as_f64(step).filter(|s| *s > 0.0);
    let step = match (step_number, step) {
        (Some(_), RawBsonRef::Decimal128(_)) => {
            return Err(fail(
                ErrorCode::NotImplemented,
                "a decimal128 $densify step is not supported",
            ))
        }
        (Some(_), s) => super::execute::raw_to_bson(s)?,
        (None, _) => {
            return Err(fail(
                ErrorCode::Location5733401,
                "The step parameter in a range statement must be a strictly positive numeric \
                 value",
            ))
        }
    };
    let unit = match unit {
        Some(name) => {
            if step_number.is_some_and(|s| s.fract() != 0.0) {
                return Err(fail(
                    ErrorCode::Location6586400,
                    "The step parameter in a range statement must be a whole number when \
                     densifying a date range",
                ));
            }
            Some(Unit::parse(name).ok_or_else(|| {
                fail(
                    ErrorCode::FailedToParse,
                    format!("unknown time unit value: {name}"),
                )
            })?)
        }
        None => None,
    };
    Ok((step.clone(), unit, parse_bounds(bounds, &step, unit)?))
}

fn parse_bounds(
    value: RawBsonRef<'_>,
    step: &Bson,
    unit: Option<Unit>,
) -> Result<Bounds, MongoError> {
    let items: Vec<RawBsonRef<'_>> =
        match value {
            RawBsonRef::String("full") => return Ok(Bounds::Full),
            RawBsonRef::String("partition") => return Ok(Bounds::Partition),
            RawBsonRef::String(_) => {
                return Err(fail(
                    ErrorCode::Location5946802,
                    "Bounds string must either be 'full' or 'partition'",
                ))
            }
            RawBsonRef::Array(a) => a
                .into_iter()
                .collect::<Result<_, _>>()
                .map_err(bson_error)?,
            _ => return Err(fail(
                ErrorCode::Location5733404,
                "The bounds in a range statement must be the string 'full', 'partition', or an \
                 ascending array of two numbers or two dates",
            )),
        };
    let [lo, hi] = items.as_slice() else {
        return Err(fail(
            ErrorCode::Location5733403,
            "A bounding array in a range statement must have exactly two elements",
        ));
    };
    let (lo, hi) = (
        super::execute::raw_to_bson(*lo)?,
        super::execute::raw_to_bson(*hi)?,
    );
    if compare_values(&lo, &hi) == Ordering::Greater {
        return Err(fail(
            ErrorCode::Location5733402,
            "A bounding array must be an ascending array of either two dates or two numbers",
        ));
    }
    let both = "A bounding array must contain either both dates or both numeric types";
    match (&lo, &hi) {
        (l, h) if number_as_f64(l).is_some() => {
            if unit.is_some() {
                return Err(fail(
                    ErrorCode::Location5733409,
                    "Numeric bounds may not have unit parameter",
                ));
            }
            if number_as_f64(h).is_none() {
                return Err(fail(ErrorCode::Location5733406, both));
            }
            if l.element_type() != h.element_type() || l.element_type() != step.element_type() {
                return Err(fail(
                    ErrorCode::Location5876900,
                    "Upper bound, lower bound, and step must all have the same type",
                ));
            }
        }
        (Bson::DateTime(_), h) => {
            if !matches!(h, Bson::DateTime(_)) {
                return Err(fail(ErrorCode::Location5733405, both));
            }
            if unit.is_none() {
                return Err(fail(
                    ErrorCode::Location5733410,
                    "A bounding array of dates must specify a unit",
                ));
            }
        }
        _ => {
            return Err(fail(
                ErrorCode::Location5946800,
                "Explicit bounds must be numeric or dates",
            ))
        }
    }
    Ok(Bounds::Explicit(Box::new((lo, hi))))
}

#[cfg(test)]
mod tests {
    use crate::aggregate::{NoCollections, Pipeline};
    use bson::{doc, DateTime, Document};

    fn code(stage: Document) -> i32 {
        Pipeline::parse(&[doc! {"$densify": stage}])
            .and_then(|p| p.run_documents(&[], &NoCollections))
            .unwrap_err()
            .code
            .code()
    }

    #[test]
    fn spec_errors_carry_mongods_codes() {
        assert_eq!(code(doc! {"range": {"step": 1, "bounds": "full"}}), 40414);
        assert_eq!(code(doc! {"field": "x"}), 40414);
        assert_eq!(code(doc! {"field": 1, "range": {}}), 14);
        assert_eq!(
            code(doc! {"field": "x", "range": {"step": 1, "bounds": "full"}, "foo": 1}),
            40415
        );
        assert_eq!(
            code(doc! {"field": "x", "range": {"step": 0, "bounds": "full"}}),
            5733401
        );
        assert_eq!(
            code(doc! {"field": "x", "range": {"step": "a", "bounds": "full"}}),
            5733401
        );
        assert_eq!(
            code(doc! {"field": "x", "range": {"step": 1.5, "unit": "day", "bounds": "full"}}),
            6586400
        );
        assert_eq!(
            code(doc! {"field": "x", "range": {"step": 1, "bounds": [1]}}),
            5733403
        );
        assert_eq!(
            code(doc! {"field": "x", "range": {"step": 1, "bounds": [2, 1]}}),
            5733402
        );
        assert_eq!(
            code(doc! {"field": "x", "range": {"step": 1, "unit": "day", "bounds": [1, 2]}}),
            5733409
        );
        assert_eq!(
            code(doc! {"field": "x", "range": {"step": 1, "bounds": [1, 2.0]}}),
            5876900
        );
        assert_eq!(
            code(
                doc! {"field": "x", "range": {"step": 1, "bounds": [DateTime::from_millis(0), DateTime::from_millis(1)]}}
            ),
            5733410
        );
        assert_eq!(
            code(doc! {"field": "x", "range": {"step": 1, "bounds": ["a", "b"]}}),
            5946800
        );
        assert_eq!(
            code(doc! {"field": "x", "range": {"step": 1, "bounds": "most"}}),
            5946802
        );
        assert_eq!(
            code(doc! {"field": "x", "range": {"step": 1, "bounds": 1}}),
            5733404
        );
        assert_eq!(
            code(doc! {"field": "x", "range": {"step": 1, "bounds": "partition"}}),
            5733408
        );
        assert_eq!(
            Pipeline::parse(&[doc! {"$densify": 1}])
                .unwrap_err()
                .code
                .code(),
            9
        );
    }
}
