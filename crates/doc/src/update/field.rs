//! The field update operators: `$set`, `$unset`, `$inc`, `$mul`, `$min`, `$max`, `$rename`,
//! `$setOnInsert` and `$currentDate` — their argument checks (at parse time) and what each does
//! to the value at one concrete path (at apply time). Arithmetic follows the server's `SafeNum`:
//! int32 results that overflow widen to int64, int64 overflow is an error, doubles stay
//! doubles, and a decimal128 on either side makes a decimal128 (the other side converted
//! exactly, or to 15 digits from a double, as `SafeNum::getDecimal`). This file never walks
//! paths itself; `path.rs` does.

use std::cmp::Ordering;

use bson::{Bson, Document};

use super::path::{self, Lookup};
use super::{render, Change, Site};
use crate::compare::compare_values;
use crate::decimal::{self, DecOps};
use crate::{ErrorCode, MongoError};

/// What `$currentDate` stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DateKind {
    Date,
    Timestamp,
}

/// One field operator with its parsed argument.
#[derive(Debug, Clone, PartialEq)]
pub enum FieldOp {
    Set(Bson),
    Unset,
    Inc(Bson),
    Mul(Bson),
    Min(Bson),
    Max(Bson),
    SetOnInsert(Bson),
    CurrentDate(DateKind),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Arith {
    Add,
    Multiply,
}

impl Arith {
    fn operator(self) -> &'static str {
        match self {
            Arith::Add => "$inc",
            Arith::Multiply => "$mul",
        }
    }
}

impl FieldOp {
    /// Parse the argument of `op` for the field `field`; `None` when `op` is no field operator.
    pub fn parse(op: &str, field: &str, arg: &Bson) -> Option<Result<FieldOp, MongoError>> {
        Some(match op {
            "$set" => Ok(FieldOp::Set(arg.clone())),
            "$setOnInsert" => Ok(FieldOp::SetOnInsert(arg.clone())),
            "$unset" => Ok(FieldOp::Unset),
            "$min" => Ok(FieldOp::Min(arg.clone())),
            "$max" => Ok(FieldOp::Max(arg.clone())),
            "$inc" => numeric_arg(Arith::Add, field, arg).map(FieldOp::Inc),
            "$mul" => numeric_arg(Arith::Multiply, field, arg).map(FieldOp::Mul),
            "$currentDate" => parse_current_date(arg).map(FieldOp::CurrentDate),
            _ => return None,
        })
    }

    /// Whether the operator creates the path when it is missing.
    pub fn creates_path(&self) -> bool {
        !matches!(self, FieldOp::Unset)
    }

    /// The change at one concrete path, given the value there (`None` when missing).
    pub fn compute(&self, current: Option<&Bson>, site: &Site<'_>) -> Result<Change, MongoError> {
        match self {
            FieldOp::Set(v) | FieldOp::SetOnInsert(v) => Ok(Change::Write(v.clone())),
            FieldOp::Unset => Ok(if current.is_some() {
                Change::Remove
            } else {
                Change::Keep
            }),
            FieldOp::Inc(v) => arithmetic(Arith::Add, v, current, site),
            FieldOp::Mul(v) => arithmetic(Arith::Multiply, v, current, site),
            FieldOp::Min(v) => Ok(extreme(v, current, Ordering::Less)),
            FieldOp::Max(v) => Ok(extreme(v, current, Ordering::Greater)),
            FieldOp::CurrentDate(DateKind::Date) => {
                Ok(Change::Rewrite(Bson::DateTime(site.ctx.now)))
            }
            FieldOp::CurrentDate(DateKind::Timestamp) => {
                Ok(Change::Rewrite(Bson::Timestamp(site.ctx.now_timestamp)))
            }
        }
    }
}

fn numeric_arg(op: Arith, field: &str, arg: &Bson) -> Result<Bson, MongoError> {
    match arg {
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => Ok(arg.clone()),
        _ => {
            let verb = match op {
                Arith::Add => "increment",
                Arith::Multiply => "multiply",
            };
            Err(MongoError::new(
                ErrorCode::TypeMismatch,
                format!(
                    "Cannot {verb} with non-numeric argument: {{{}}}",
                    render::element(field, arg)
                ),
            ))
        }
    }
}

fn parse_current_date(arg: &Bson) -> Result<DateKind, MongoError> {
    match arg {
        Bson::Boolean(_) => Ok(DateKind::Date),
        Bson::Document(options) => parse_current_date_options(options),
        other => Err(MongoError::new(
            ErrorCode::BadValue,
            format!(
                "{} is not valid type for $currentDate. Please use a boolean ('true') or a $type \
                 expression ({{$type: 'timestamp/date'}}).",
                render::type_name(other)
            ),
        )),
    }
}

fn parse_current_date_options(options: &Document) -> Result<DateKind, MongoError> {
    let mut kind = None;
    for (name, value) in options {
        if name != "$type" {
            return Err(MongoError::new(
                ErrorCode::BadValue,
                format!("Unrecognized $currentDate option: {name}"),
            ));
        }
        kind = match value.as_str() {
            Some("date") => Some(DateKind::Date),
            Some("timestamp") => Some(DateKind::Timestamp),
            _ => kind,
        };
    }
    kind.ok_or_else(|| {
        MongoError::new(
            ErrorCode::BadValue,
            "The '$type' string field is required to be 'date' or 'timestamp': \
             {$currentDate: {field : {$type: 'date'}}}",
        )
    })
}

fn extreme(v: &Bson, current: Option<&Bson>, wanted: Ordering) -> Change {
    match current {
        Some(cur) if compare_values(v, cur) != wanted => Change::Keep,
        _ => Change::Write(v.clone()),
    }
}

fn arithmetic(
    op: Arith,
    arg: &Bson,
    current: Option<&Bson>,
    site: &Site<'_>,
) -> Result<Change, MongoError> {
    let Some(cur) = current else {
        return Ok(Change::Write(match op {
            Arith::Add => arg.clone(),
            Arith::Multiply => zero_like(arg),
        }));
    };
    match cur {
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => {}
        other => return Err(non_numeric(op, other, site)),
    }
    match combine(op, cur, arg) {
        Some(result) => Ok(Change::Write(result)),
        None => Err(MongoError::new(
            ErrorCode::BadValue,
            format!(
                "Failed to apply {} operations to current value ({}) for document {{{}}}",
                op.operator(),
                render::debug_number(cur),
                render::id_element(site.doc_id)
            ),
        )),
    }
}

fn non_numeric(op: Arith, value: &Bson, site: &Site<'_>) -> MongoError {
    MongoError::new(
        ErrorCode::TypeMismatch,
        format!(
            "Cannot apply {} to a value of non-numeric type. {{{}}} has the field '{}' of \
             non-numeric type {}",
            op.operator(),
            render::id_element(site.doc_id),
            site.field_name(),
            render::type_name(value)
        ),
    )
}

/// `$mul` on a missing field stores zero in the wider of the argument's type and int32; for
/// a decimal, mongod's `SafeNum(0) * arg` (`0 × 2.50` is `0.00`).
fn zero_like(arg: &Bson) -> Bson {
    match arg {
        Bson::Int64(_) => Bson::Int64(0),
        Bson::Double(_) => Bson::Double(0.0),
        Bson::Decimal128(_) => {
            decimal_op(Arith::Multiply, &Bson::Int32(0), arg).unwrap_or(Bson::Int32(0))
        }
        _ => Bson::Int32(0),
    }
}

/// `cur op arg` in decimal128 when either side is one (never fails: overflow is infinity).
fn decimal_op(op: Arith, cur: &Bson, arg: &Bson) -> Option<Bson> {
    let as_dec = |v: &Bson| {
        Some(match v {
            Bson::Int32(i) => decimal::from_i64(i64::from(*i)),
            Bson::Int64(i) => decimal::from_i64(*i),
            Bson::Double(d) => decimal::from_f64_15(*d),
            Bson::Decimal128(d) => decimal::to_dec(d),
            _ => return None,
        })
    };
    let (a, b) = (as_dec(cur)?, as_dec(arg)?);
    let mut ops = DecOps::default();
    let out = match op {
        Arith::Add => ops.add(a, b),
        Arith::Multiply => ops.mul(a, b),
    };
    Some(Bson::Decimal128(decimal::from_dec(out)))
}

/// `cur op arg` with the server's numeric type rules; `None` on int64 overflow.
fn combine(op: Arith, cur: &Bson, arg: &Bson) -> Option<Bson> {
    match (cur, arg) {
        (Bson::Decimal128(_), _) | (_, Bson::Decimal128(_)) => decimal_op(op, cur, arg),
        (Bson::Int32(a), Bson::Int32(b)) => {
            let r = match op {
                Arith::Add => a.checked_add(*b),
                Arith::Multiply => a.checked_mul(*b),
            };
            match r {
                Some(v) => Some(Bson::Int32(v)),
                None => long_op(op, i64::from(*a), i64::from(*b)),
            }
        }
        (Bson::Double(_), _) | (_, Bson::Double(_)) => {
            let (a, b) = (as_f64(cur)?, as_f64(arg)?);
            Some(Bson::Double(match op {
                Arith::Add => a + b,
                Arith::Multiply => a * b,
            }))
        }
        _ => long_op(op, as_i64(cur)?, as_i64(arg)?),
    }
}

fn long_op(op: Arith, a: i64, b: i64) -> Option<Bson> {
    match op {
        Arith::Add => a.checked_add(b),
        Arith::Multiply => a.checked_mul(b),
    }
    .map(Bson::Int64)
}

fn as_i64(v: &Bson) -> Option<i64> {
    match v {
        Bson::Int32(i) => Some(i64::from(*i)),
        Bson::Int64(i) => Some(*i),
        _ => None,
    }
}

fn as_f64(v: &Bson) -> Option<f64> {
    match v {
        Bson::Int32(i) => Some(f64::from(*i)),
        Bson::Int64(i) => Some(*i as f64),
        Bson::Double(d) => Some(*d),
        _ => None,
    }
}

/// `$rename` from one concrete path to another: the value moves (set at the destination, then
/// removed at the source). A missing source is a no-op. Returns whether the document changed.
pub fn apply_rename(
    doc: &mut Document,
    from: &[String],
    to: &[String],
    site: &Site<'_>,
) -> Result<bool, MongoError> {
    let value = match path::lookup(doc, from) {
        Lookup::Found(v) => v.clone(),
        Lookup::Missing | Lookup::Blocked { .. } => return Ok(false),
    };
    if let Some(array) = path::array_ancestor(doc, from) {
        return Err(rename_through_array("source", from, &array, site));
    }
    if let Some(array) = path::array_ancestor(doc, to) {
        return Err(rename_through_array("destination", to, &array, site));
    }
    if site.id_is_immutable && from[0] == "_id" {
        return Err(MongoError::new(
            ErrorCode::ImmutableField,
            format!(
                "Unsetting the path '{}' using $rename would modify the immutable field '_id'",
                path::dotted(from)
            ),
        ));
    }
    let destination_same =
        matches!(path::lookup(doc, to), Lookup::Found(v) if super::same_value(v, &value));
    if site.id_is_immutable && to[0] == "_id" && !destination_same {
        return Err(super::immutable_id(to));
    }
    path::write(doc, to, value)?;
    path::remove(doc, from);
    Ok(true)
}

fn rename_through_array(role: &str, parts: &[String], array: &str, site: &Site<'_>) -> MongoError {
    MongoError::new(
        ErrorCode::BadValue,
        format!(
            "The {role} field cannot be an array element, '{}' in doc with {} has an array field \
             called '{array}'",
            path::dotted(parts),
            render::id_element(site.doc_id)
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int32_overflow_widens_and_int64_overflow_fails() {
        let r = combine(Arith::Add, &Bson::Int32(i32::MAX), &Bson::Int32(1));
        assert_eq!(r, Some(Bson::Int64(i64::from(i32::MAX) + 1)));
        assert_eq!(
            combine(Arith::Add, &Bson::Int64(i64::MAX), &Bson::Int32(1)),
            None
        );
        let r = combine(Arith::Multiply, &Bson::Int32(3), &Bson::Double(0.5));
        assert_eq!(r, Some(Bson::Double(1.5)));
    }

    #[test]
    fn argument_checks() {
        let e = FieldOp::parse("$inc", "a", &Bson::String("x".into()))
            .expect("field operator")
            .expect_err("non-numeric");
        assert_eq!(e.code, ErrorCode::TypeMismatch);
        assert_eq!(
            e.message,
            "Cannot increment with non-numeric argument: {a: \"x\"}"
        );
        let e = FieldOp::parse("$currentDate", "a", &Bson::Int32(1))
            .expect("field operator")
            .expect_err("bad type");
        assert_eq!(e.code, ErrorCode::BadValue);
        assert!(FieldOp::parse("$push", "a", &Bson::Null).is_none());
    }

    #[test]
    fn decimals_make_decimals() {
        let d = |s: &str| Bson::Decimal128(s.parse().expect("literal"));
        let shown = |b: Option<Bson>| b.map(|b| b.to_string());
        let r = combine(Arith::Add, &d("1.10"), &Bson::Int32(2));
        assert_eq!(shown(r), shown(Some(d("3.10"))));
        // A double on the other side converts to 15 digits, as SafeNum does.
        let r = combine(Arith::Add, &Bson::Double(0.1), &d("0"));
        assert_eq!(shown(r), shown(Some(d("0.100000000000000"))));
        let r = combine(Arith::Multiply, &Bson::Int64(i64::MAX), &d("10"));
        assert_eq!(shown(r), shown(Some(d("92233720368547758070"))));
        let r = combine(Arith::Multiply, &d("1.5"), &Bson::Double(2.0));
        assert_eq!(shown(r), shown(Some(d("3.000000000000000"))));
        let r = combine(
            Arith::Add,
            &d("9.999999999999999999999999999999999E+6144"),
            &d("1E+6144"),
        );
        assert_eq!(shown(r), shown(Some(d("Infinity"))));
        assert_eq!(zero_like(&d("2.50")).to_string(), d("0.00").to_string());
        assert!(FieldOp::parse("$inc", "a", &d("1"))
            .expect("field operator")
            .is_ok());
    }

    #[test]
    fn mul_on_missing_stores_typed_zero() {
        assert_eq!(zero_like(&Bson::Double(2.0)), Bson::Double(0.0));
        assert_eq!(zero_like(&Bson::Int64(2)), Bson::Int64(0));
        assert_eq!(zero_like(&Bson::Int32(2)), Bson::Int32(0));
    }
}
