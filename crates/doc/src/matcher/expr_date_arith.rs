//! Date arithmetic as mongod 7.0 does it (`expression.cpp`, `date_time_support.cpp`):
//! - `$dateAdd`/`$dateSubtract`: units of a day or more move the wall-clock time in the zone
//!   (a month past the end of a shorter month lands on its last day), shorter units move the
//!   instant; 5166403-5166406, 5976500 (an amount past the dates' range), 6045000, and an
//!   unknown unit `FailedToParse` 9.
//! - `$dateDiff`: whole unit boundaries crossed between the two wall-clock times (weeks from
//!   `startOfWeek`, Sunday by default), corrected by the zone's offsets for hours and less;
//!   5166307/5166308, 5439013-5439016.
//! - `$dateTrunc`: bins of `binSize` units counted from 2000-01-01T00:00 in the zone (the
//!   first `startOfWeek` on or after it for weeks); 5439000-5439018.
//!
//! A null or missing argument gives null; a bad `timezone` fails with the operator's context.

use bson::raw::{RawBson, RawBsonRef, RawDocument};
use chrono::{Datelike, NaiveDate, NaiveDateTime, TimeDelta, Timelike};

use super::expr::{error, Value};
use super::expr_arity::integral64;
use super::expr_date_zone::{
    coercible, day_number, day_of_week_of, shown, to_millis, unit_of, zone_of, Local, Unit, Zone,
    SUNDAY,
};
use super::expr_dates::{DateExpr, DateKind};
use crate::{ErrorCode, MongoError};

type Stack<'a> = Vec<Value<'a>>;

fn null<'a>() -> Value<'a> {
    Value::Owned(RawBson::Null)
}

fn date<'a>(millis: i64) -> Value<'a> {
    Value::Owned(RawBson::DateTime(bson::DateTime::from_millis(millis)))
}

/// An argument that must be present (parsing checked it); null when null or missing.
fn required<'a>(
    e: &DateExpr,
    name: &str,
    root: &'a RawDocument,
    stack: &mut Stack<'a>,
) -> Result<Option<Value<'a>>, MongoError> {
    let v = e.arg(name, root, stack)?.unwrap_or(Value::Missing);
    Ok(if v.is_nullish() { None } else { Some(v) })
}

/// The `timezone` argument; errors carry the operator's context as mongod adds it.
fn zone<'a>(
    e: &DateExpr,
    root: &'a RawDocument,
    stack: &mut Stack<'a>,
    context: bool,
) -> Result<Option<Zone>, MongoError> {
    let Some(tz) = e.arg("timezone", root, stack)? else {
        return Ok(Some(Zone::Utc));
    };
    zone_of(&tz).map_err(|mut err| {
        if context {
            err.message = format!(
                "{} parameter 'timezone' value parsing failed :: caused by :: {}",
                e.name, err.message
            );
        }
        err
    })
}

/// `$dateAdd` and `$dateSubtract`.
pub(crate) fn add<'a>(
    e: &DateExpr,
    root: &'a RawDocument,
    stack: &mut Stack<'a>,
) -> Result<Value<'a>, MongoError> {
    let op = e.name;
    let Some(start) = required(e, "startDate", root, stack)? else {
        return Ok(null());
    };
    let Some(unit) = required(e, "unit", root, stack)? else {
        return Ok(null());
    };
    let Some(amount) = required(e, "amount", root, stack)? else {
        return Ok(null());
    };
    let Some(zone) = zone(e, root, stack, false)? else {
        return Ok(null());
    };
    if !coercible(&start) {
        return Err(error(
            ErrorCode::Location5166403,
            format!("{op} requires startDate to be convertible to a date"),
        ));
    }
    let Some(RawBsonRef::String(unit)) = unit.as_raw() else {
        return Err(error(
            ErrorCode::Location5166404,
            format!("{op} expects string defining the time unit"),
        ));
    };
    let unit = Unit::parse(unit).ok_or_else(|| {
        error(
            ErrorCode::FailedToParse,
            format!("unknown time unit value: {unit}"),
        )
    })?;
    let mut amount = integral64(&amount).ok_or_else(|| {
        error(
            ErrorCode::Location5166405,
            format!("{op} expects integer amount of time units"),
        )
    })?;
    if e.kind == DateKind::Subtract {
        amount = amount.checked_neg().ok_or_else(|| {
            error(
                ErrorCode::Location6045000,
                format!("invalid $dateSubtract 'amount' parameter value: {amount}"),
            )
        })?;
    }
    date_add(to_millis(&start)?, unit, amount, zone).map(date)
}

fn overflowed() -> MongoError {
    error(ErrorCode::Location5166406, "dateAdd overflowed")
}

/// Whether `amount` units roughly fit the dates' range (mongod's `isDateAddAmountValid`).
fn amount_fits(amount: i64, unit: Unit) -> bool {
    const MAX_DAYS: i64 = (u64::MAX / 86_400_000) as i64 + 1;
    const MAX_YEARS: i64 = MAX_DAYS / 365 + 1;
    let max = match unit {
        Unit::Year => MAX_YEARS,
        Unit::Quarter => MAX_YEARS * 4,
        Unit::Month => MAX_YEARS * 12,
        Unit::Week => MAX_DAYS / 7,
        Unit::Day => MAX_DAYS,
        Unit::Hour => MAX_DAYS * 24,
        Unit::Minute => MAX_DAYS * 24 * 60,
        Unit::Second | Unit::Millisecond => MAX_DAYS * 24 * 60 * 60,
    };
    -max < amount && amount < max
}

/// `amount` units after the instant `millis`, seen in `zone`.
pub(crate) fn date_add(
    millis: i64,
    unit: Unit,
    amount: i64,
    zone: Zone,
) -> Result<i64, MongoError> {
    if unit == Unit::Millisecond {
        return millis.checked_add(amount).ok_or_else(overflowed);
    }
    if !amount_fits(amount, unit) {
        return Err(error(
            ErrorCode::Location5976500,
            format!(
                "invalid dateAdd 'amount' parameter value: {amount} {}",
                unit.name()
            ),
        ));
    }
    if let Some(unit_millis) = unit.fixed_millis() {
        let shift = amount.checked_mul(unit_millis).ok_or_else(overflowed)?;
        return millis.checked_add(shift).ok_or_else(overflowed);
    }
    let local = zone.local(millis).map_err(|_| overflowed())?.time;
    let moved = match unit {
        Unit::Year => add_months(local, amount.checked_mul(12)),
        Unit::Quarter => add_months(local, amount.checked_mul(3)),
        Unit::Month => add_months(local, Some(amount)),
        Unit::Week => amount.checked_mul(7).and_then(|d| add_days(local, d)),
        _ => add_days(local, amount),
    };
    let moved = moved.ok_or_else(overflowed)?;
    Ok(zone.instant(moved))
}

fn add_days(t: NaiveDateTime, days: i64) -> Option<NaiveDateTime> {
    t.checked_add_signed(TimeDelta::try_days(days)?)
}

/// Months later, on the same day or the last day of a shorter month, at the same time.
fn add_months(t: NaiveDateTime, months: Option<i64>) -> Option<NaiveDateTime> {
    let total = i64::from(t.year()).checked_mul(12)? + i64::from(t.month0()) + months?;
    let year = i32::try_from(total.div_euclid(12)).ok()?;
    let month = u32::try_from(total.rem_euclid(12) + 1).ok()?;
    let last = last_day(year, month)?;
    NaiveDate::from_ymd_opt(year, month, t.day().min(last))?
        .and_time(t.time())
        .into()
}

fn last_day(year: i32, month: u32) -> Option<u32> {
    let next = if month == 12 {
        NaiveDate::from_ymd_opt(year.checked_add(1)?, 1, 1)?
    } else {
        NaiveDate::from_ymd_opt(year, month + 1, 1)?
    };
    next.pred_opt().map(|d| d.day())
}

/// `startOfWeek` when the unit is `week` (Sunday otherwise); `Ok(None)` when null.
fn start_of_week<'a>(
    e: &DateExpr,
    unit: &Value<'_>,
    root: &'a RawDocument,
    stack: &mut Stack<'a>,
) -> Result<Option<Option<Value<'static>>>, MongoError> {
    let is_week = matches!(unit.as_raw(), Some(RawBsonRef::String("week")));
    if !is_week || !e.has("startOfWeek") {
        return Ok(Some(None));
    }
    let v = e.arg("startOfWeek", root, stack)?.unwrap_or(Value::Missing);
    Ok(if v.is_nullish() {
        None
    } else {
        Some(Some(v.into_owned()))
    })
}

/// `$dateDiff`.
pub(crate) fn diff<'a>(
    e: &DateExpr,
    root: &'a RawDocument,
    stack: &mut Stack<'a>,
) -> Result<Value<'a>, MongoError> {
    let Some(start) = required(e, "startDate", root, stack)? else {
        return Ok(null());
    };
    let Some(end) = required(e, "endDate", root, stack)? else {
        return Ok(null());
    };
    let Some(unit) = required(e, "unit", root, stack)? else {
        return Ok(null());
    };
    let Some(week_start) = start_of_week(e, &unit, root, stack)? else {
        return Ok(null());
    };
    let Some(zone) = zone(e, root, stack, true)? else {
        return Ok(null());
    };
    let as_date = |v: &Value<'_>, name: &str| {
        if coercible(v) {
            to_millis(v)
        } else {
            Err(error(
                ErrorCode::Location5166307,
                format!(
                    "$dateDiff requires '{name}' to be a date, but got {}",
                    v.type_name()
                ),
            ))
        }
    };
    let (start, end) = (as_date(&start, "startDate")?, as_date(&end, "endDate")?);
    let unit = unit_of(&unit, "$dateDiff")?;
    let week_start = match week_start {
        Some(v) => day_of_week_of(&v, "$dateDiff")?,
        None => SUNDAY,
    };
    let n = date_diff(start, end, unit, zone, week_start)?;
    Ok(Value::Owned(RawBson::Int64(n)))
}

fn date_diff(
    start: i64,
    end: i64,
    unit: Unit,
    zone: Zone,
    week_start: u32,
) -> Result<i64, MongoError> {
    if unit == Unit::Millisecond {
        return end
            .checked_sub(start)
            .ok_or_else(|| error(ErrorCode::Location5166308, "dateDiff overflowed"));
    }
    let (s, t) = (zone.local(start)?, zone.local(end)?);
    let correction = i64::from(s.offset_secs - t.offset_secs);
    let days = day_number(t.time.date()) - day_number(s.time.date());
    let hours = i64::from(t.time.hour()) - i64::from(s.time.hour()) + days * 24;
    let minutes = i64::from(t.time.minute()) - i64::from(s.time.minute()) + hours * 60;
    Ok(match unit {
        Unit::Year => i64::from(t.time.year() - s.time.year()),
        Unit::Quarter => quarters(&s.time.date(), &t.time.date()),
        Unit::Month => months(&s.time.date(), &t.time.date()),
        Unit::Week => weeks(&s.time.date(), &t.time.date(), week_start),
        Unit::Day => days,
        Unit::Hour => hours + correction / 3600,
        Unit::Minute => minutes + correction / 60,
        _ => i64::from(t.time.second()) - i64::from(s.time.second()) + minutes * 60 + correction,
    })
}

fn months(s: &NaiveDate, t: &NaiveDate) -> i64 {
    i64::from(t.month()) - i64::from(s.month()) + i64::from(t.year() - s.year()) * 12
}

fn quarters(s: &NaiveDate, t: &NaiveDate) -> i64 {
    let q = |d: &NaiveDate| i64::from(d.month0() / 3);
    q(t) - q(s) + i64::from(t.year() - s.year()) * 4
}

/// Days into the week that starts on `week_start` (ISO day number), 0-6.
fn day_in_week(d: &NaiveDate, week_start: u32) -> i64 {
    i64::from((d.weekday().number_from_monday() + 7 - week_start) % 7)
}

fn weeks(s: &NaiveDate, t: &NaiveDate, week_start: u32) -> i64 {
    let days = day_number(*t) - day_number(*s);
    (days + day_in_week(s, week_start) - day_in_week(t, week_start)) / 7
}

/// `$dateTrunc`.
pub(crate) fn trunc<'a>(
    e: &DateExpr,
    root: &'a RawDocument,
    stack: &mut Stack<'a>,
) -> Result<Value<'a>, MongoError> {
    let Some(when) = required(e, "date", root, stack)? else {
        return Ok(null());
    };
    let Some(unit) = required(e, "unit", root, stack)? else {
        return Ok(null());
    };
    let bin = match e.has("binSize") {
        false => None,
        true => match required(e, "binSize", root, stack)? {
            None => return Ok(null()),
            some => some,
        },
    };
    let Some(week_start) = start_of_week(e, &unit, root, stack)? else {
        return Ok(null());
    };
    let Some(zone) = zone(e, root, stack, true)? else {
        return Ok(null());
    };
    if !coercible(&when) {
        return Err(error(
            ErrorCode::Location5439012,
            format!(
                "$dateTrunc requires 'date' to be a date, but got {}",
                when.type_name()
            ),
        ));
    }
    let unit = unit_of(&unit, "$dateTrunc")?;
    let bin = match bin {
        None => 1,
        Some(v) => bin_size(&v)?,
    };
    let week_start = match week_start {
        Some(v) => day_of_week_of(&v, "$dateTrunc")?,
        None => SUNDAY,
    };
    truncate(to_millis(&when)?, unit, bin, zone, week_start).map(date)
}

fn bin_size(v: &Value<'_>) -> Result<i64, MongoError> {
    let n = integral64(v).ok_or_else(|| {
        error(
            ErrorCode::Location5439017,
            format!(
                "$dateTrunc requires 'binSize' to be a 64-bit integer, but got value '{}' of type {}",
                shown(v).trim_matches('"'),
                v.type_name()
            ),
        )
    })?;
    if n <= 0 {
        return Err(error(
            ErrorCode::Location5439018,
            format!("$dateTrunc requires 'binSize' to be greater than 0, but got value {n}"),
        ));
    }
    Ok(n)
}

/// 2000-01-01T00:00:00Z.
const REFERENCE_MILLIS: i64 = 946_684_800_000;

fn trunc_overflow(code: ErrorCode) -> MongoError {
    error(code, "dateTrunc overflowed")
}

fn truncate(
    millis: i64,
    unit: Unit,
    bin: i64,
    zone: Zone,
    week_start: u32,
) -> Result<i64, MongoError> {
    let (reference, reference_day) = reference_point(zone, unit, week_start)?;
    if let Some(unit_millis) = unit.fixed_millis() {
        let bin_millis = bin
            .checked_mul(unit_millis)
            .ok_or_else(|| trunc_overflow(ErrorCode::Location5439002))?;
        let shifted = millis
            .checked_sub(reference)
            .ok_or_else(|| trunc_overflow(ErrorCode::Location5439000))?;
        return millis
            .checked_sub(shifted.rem_euclid(bin_millis))
            .ok_or_else(|| trunc_overflow(ErrorCode::Location5439001));
    }
    if bin > 100_000_000_000 {
        return Err(error(
            ErrorCode::Location5439006,
            "dateTrunc unsupported binSize value",
        ));
    }
    let local: Local = zone.local(millis)?;
    let day = local.time.date();
    let distance = match unit {
        Unit::Day => day_number(day) - day_number(reference_day),
        Unit::Week => weeks(&reference_day, &day, week_start),
        Unit::Month => months(&reference_day, &day),
        Unit::Quarter => quarters(&reference_day, &day),
        _ => i64::from(day.year() - reference_day.year()),
    };
    let lower = distance
        .checked_sub(distance.rem_euclid(bin))
        .ok_or_else(|| trunc_overflow(ErrorCode::Location5439004))?;
    date_add(reference, unit, lower, zone)
}

/// Local midnight of 2000-01-01 in `zone` (for weeks, of the first `week_start` on or after
/// it), as an instant and as a local date.
fn reference_point(
    zone: Zone,
    unit: Unit,
    week_start: u32,
) -> Result<(i64, NaiveDate), MongoError> {
    let start = NaiveDate::from_ymd_opt(2000, 1, 1)
        .ok_or_else(|| trunc_overflow(ErrorCode::Location5439000))?;
    let utc = start.and_hms_opt(0, 0, 0).unwrap_or_default();
    let mut millis = REFERENCE_MILLIS - i64::from(zone.offset_at(&utc)) * 1000;
    let mut day = start;
    if unit == Unit::Week {
        // 2000-01-01 was a Saturday (ISO day 6).
        let into_week = (6 + 7 - week_start) % 7;
        let adjust = (7 - into_week) % 7;
        millis += i64::from(adjust) * 86_400_000;
        day = start + TimeDelta::days(i64::from(adjust));
    }
    Ok((millis, day))
}

#[cfg(test)]
mod tests {
    use super::super::expr::Expr;
    use super::*;
    use bson::{rawdoc, DateTime, RawDocumentBuf};

    fn ms(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> i64 {
        NaiveDate::from_ymd_opt(y, mo, d)
            .unwrap()
            .and_hms_opt(h, mi, s)
            .unwrap()
            .and_utc()
            .timestamp_millis()
    }

    fn eval(spec: RawDocumentBuf) -> Result<RawBson, MongoError> {
        let expr = Expr::parse(RawBsonRef::Document(&spec))?;
        let doc = rawdoc! {"n": null};
        let v = expr.evaluate(&doc)?;
        Ok(v.as_raw().map_or(RawBson::Null, |r| r.to_raw_bson()))
    }

    fn at(m: i64) -> DateTime {
        DateTime::from_millis(m)
    }

    fn date_of(spec: RawDocumentBuf) -> i64 {
        match eval(spec).expect("evaluates") {
            RawBson::DateTime(d) => d.timestamp_millis(),
            other => panic!("not a date: {other:?}"),
        }
    }

    fn code(spec: RawDocumentBuf) -> ErrorCode {
        eval(spec).expect_err("fails").code
    }

    #[test]
    fn adds_in_calendar_units() {
        let start = at(ms(2020, 10, 31, 12, 0, 0));
        let add = |unit: &str, amount: i64| {
            date_of(rawdoc! {"$dateAdd": {"startDate": start, "unit": unit, "amount": amount}})
        };
        assert_eq!(add("month", 1), ms(2020, 11, 30, 12, 0, 0));
        assert_eq!(add("quarter", 1), ms(2021, 1, 31, 12, 0, 0));
        assert_eq!(add("year", -1), ms(2019, 10, 31, 12, 0, 0));
        assert_eq!(add("week", 2), ms(2020, 11, 14, 12, 0, 0));
        assert_eq!(add("hour", 36), ms(2020, 11, 2, 0, 0, 0));
        assert_eq!(add("millisecond", 5), ms(2020, 10, 31, 12, 0, 0) + 5);
        let sub =
            date_of(rawdoc! {"$dateSubtract": {"startDate": start, "unit": "day", "amount": 31}});
        assert_eq!(sub, ms(2020, 9, 30, 12, 0, 0));
    }

    #[test]
    fn adds_across_dst_in_a_zone() {
        // 2020-11-01 is the end of DST in New York: a day keeps the wall-clock time, an
        // hour moves the instant (mongod's own example).
        let start = at(ms(2020, 11, 1, 5, 50, 2));
        let add = |unit: &str| {
            date_of(
                rawdoc! {"$dateAdd": {"startDate": start, "unit": unit, "amount": 1, "timezone": "America/New_York"}},
            )
        };
        assert_eq!(add("hour"), ms(2020, 11, 1, 6, 50, 2));
        assert_eq!(add("day"), ms(2020, 11, 2, 6, 50, 2));
    }

    #[test]
    fn add_nulls_and_errors() {
        let d = at(0);
        assert_eq!(
            eval(rawdoc! {"$dateAdd": {"startDate": "$n", "unit": "day", "amount": 1}}).unwrap(),
            RawBson::Null
        );
        assert_eq!(
            eval(rawdoc! {"$dateAdd": {"startDate": d, "unit": null, "amount": 1}}).unwrap(),
            RawBson::Null
        );
        assert_eq!(
            eval(
                rawdoc! {"$dateAdd": {"startDate": d, "unit": "day", "amount": 1, "timezone": null}}
            )
            .unwrap(),
            RawBson::Null
        );
        assert_eq!(code(rawdoc! {"$dateAdd": 1}), ErrorCode::Location5166400);
        assert_eq!(
            code(rawdoc! {"$dateAdd": {"startDate": d, "unit": "day", "amount": 1, "x": 1}}),
            ErrorCode::Location5166401
        );
        assert_eq!(
            code(rawdoc! {"$dateAdd": {"startDate": d, "unit": "day"}}),
            ErrorCode::Location5166402
        );
        assert_eq!(
            code(rawdoc! {"$dateAdd": {"startDate": "x", "unit": "day", "amount": 1}}),
            ErrorCode::Location5166403
        );
        assert_eq!(
            code(rawdoc! {"$dateAdd": {"startDate": d, "unit": 1, "amount": 1}}),
            ErrorCode::Location5166404
        );
        let e =
            eval(rawdoc! {"$dateAdd": {"startDate": d, "unit": "days", "amount": 1}}).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (ErrorCode::FailedToParse, "unknown time unit value: days")
        );
        assert_eq!(
            code(rawdoc! {"$dateAdd": {"startDate": d, "unit": "day", "amount": 1.5}}),
            ErrorCode::Location5166405
        );
        assert_eq!(
            code(
                rawdoc! {"$dateAdd": {"startDate": d, "unit": "year", "amount": 1_000_000_000_000_i64}}
            ),
            ErrorCode::Location5976500
        );
        assert_eq!(
            code(rawdoc! {"$dateSubtract": {"startDate": d, "unit": "day", "amount": i64::MIN}}),
            ErrorCode::Location6045000
        );
        assert_eq!(
            code(
                rawdoc! {"$dateAdd": {"startDate": at(i64::MAX - 10), "unit": "millisecond", "amount": 100}}
            ),
            ErrorCode::Location5166406
        );
    }

    #[test]
    fn diffs() {
        let diff = |a: i64, b: i64, unit: &str| {
            eval(rawdoc! {"$dateDiff": {"startDate": at(a), "endDate": at(b), "unit": unit}})
                .unwrap()
        };
        let (a, b) = (ms(2020, 12, 31, 23, 59, 59), ms(2021, 1, 1, 0, 0, 1));
        assert_eq!(diff(a, b, "year"), RawBson::Int64(1));
        assert_eq!(diff(a, b, "quarter"), RawBson::Int64(1));
        assert_eq!(diff(a, b, "month"), RawBson::Int64(1));
        assert_eq!(diff(a, b, "day"), RawBson::Int64(1));
        assert_eq!(diff(a, b, "hour"), RawBson::Int64(1));
        assert_eq!(diff(a, b, "second"), RawBson::Int64(2));
        assert_eq!(diff(a, b, "millisecond"), RawBson::Int64(2000));
        assert_eq!(diff(b, a, "minute"), RawBson::Int64(-1));
        // 2021-01-02 is a Saturday, 2021-01-03 a Sunday: one week boundary by default.
        let (sat, sun) = (ms(2021, 1, 2, 0, 0, 0), ms(2021, 1, 3, 0, 0, 0));
        assert_eq!(diff(sat, sun, "week"), RawBson::Int64(1));
        let monday = rawdoc! {"$dateDiff": {"startDate": at(sat), "endDate": at(sun), "unit": "week", "startOfWeek": "monday"}};
        assert_eq!(eval(monday).unwrap(), RawBson::Int64(0));
        // Across the New York DST change the offsets correct the hours.
        let ny = rawdoc! {"$dateDiff": {"startDate": at(ms(2020, 11, 1, 4, 0, 0)), "endDate": at(ms(2020, 11, 1, 7, 0, 0)), "unit": "hour", "timezone": "America/New_York"}};
        assert_eq!(eval(ny).unwrap(), RawBson::Int64(3));
    }

    #[test]
    fn diff_nulls_and_errors() {
        let d = at(0);
        assert_eq!(
            eval(rawdoc! {"$dateDiff": {"startDate": d, "endDate": "$n", "unit": "day"}}).unwrap(),
            RawBson::Null
        );
        assert_eq!(eval(rawdoc! {"$dateDiff": {"startDate": d, "endDate": d, "unit": "week", "startOfWeek": null}}).unwrap(), RawBson::Null);
        // startOfWeek is only read for weeks.
        assert_eq!(eval(rawdoc! {"$dateDiff": {"startDate": d, "endDate": d, "unit": "day", "startOfWeek": 1}}).unwrap(), RawBson::Int64(0));
        assert_eq!(code(rawdoc! {"$dateDiff": 1}), ErrorCode::Location5166301);
        assert_eq!(
            code(rawdoc! {"$dateDiff": {"startDate": d, "endDate": d, "unit": "day", "x": 1}}),
            ErrorCode::Location5166302
        );
        assert_eq!(
            code(rawdoc! {"$dateDiff": {"endDate": d, "unit": "day"}}),
            ErrorCode::Location5166303
        );
        assert_eq!(
            code(rawdoc! {"$dateDiff": {"startDate": d, "unit": "day"}}),
            ErrorCode::Location5166304
        );
        assert_eq!(
            code(rawdoc! {"$dateDiff": {"startDate": d, "endDate": d}}),
            ErrorCode::Location5166305
        );
        assert_eq!(
            code(rawdoc! {"$dateDiff": {"startDate": 1, "endDate": d, "unit": "day"}}),
            ErrorCode::Location5166307
        );
        assert_eq!(
            code(rawdoc! {"$dateDiff": {"startDate": d, "endDate": d, "unit": 1}}),
            ErrorCode::Location5439013
        );
        assert_eq!(
            code(rawdoc! {"$dateDiff": {"startDate": d, "endDate": d, "unit": "eon"}}),
            ErrorCode::Location5439014
        );
        assert_eq!(
            code(
                rawdoc! {"$dateDiff": {"startDate": d, "endDate": d, "unit": "week", "startOfWeek": 1}}
            ),
            ErrorCode::Location5439015
        );
        assert_eq!(
            code(
                rawdoc! {"$dateDiff": {"startDate": at(i64::MIN), "endDate": at(i64::MAX), "unit": "millisecond"}}
            ),
            ErrorCode::Location5166308
        );
        let e = eval(rawdoc! {"$dateDiff": {"startDate": d, "endDate": d, "unit": "day", "timezone": "Nowhere"}}).unwrap_err();
        assert_eq!(e.code, ErrorCode::Location40485);
        assert_eq!(e.message, "$dateDiff parameter 'timezone' value parsing failed :: caused by :: unrecognized time zone identifier: \"Nowhere\"");
    }

    #[test]
    fn truncates() {
        let t = ms(2021, 3, 17, 14, 37, 21) + 123;
        let tr = |unit: &str, bin: i64| {
            date_of(rawdoc! {"$dateTrunc": {"date": at(t), "unit": unit, "binSize": bin}})
        };
        assert_eq!(tr("second", 1), ms(2021, 3, 17, 14, 37, 21));
        assert_eq!(tr("minute", 15), ms(2021, 3, 17, 14, 30, 0));
        assert_eq!(tr("hour", 6), ms(2021, 3, 17, 12, 0, 0));
        assert_eq!(tr("day", 1), ms(2021, 3, 17, 0, 0, 0));
        assert_eq!(tr("week", 1), ms(2021, 3, 14, 0, 0, 0));
        assert_eq!(tr("month", 1), ms(2021, 3, 1, 0, 0, 0));
        assert_eq!(tr("month", 5), ms(2020, 11, 1, 0, 0, 0));
        assert_eq!(tr("quarter", 1), ms(2021, 1, 1, 0, 0, 0));
        assert_eq!(tr("year", 1), ms(2021, 1, 1, 0, 0, 0));
        let monday = date_of(
            rawdoc! {"$dateTrunc": {"date": at(t), "unit": "week", "startOfWeek": "Monday"}},
        );
        assert_eq!(monday, ms(2021, 3, 15, 0, 0, 0));
        let ny = date_of(
            rawdoc! {"$dateTrunc": {"date": at(t), "unit": "day", "timezone": "America/New_York"}},
        );
        assert_eq!(ny, ms(2021, 3, 17, 4, 0, 0));
        let ny_hour =
            date_of(rawdoc! {"$dateTrunc": {"date": at(t), "unit": "hour", "timezone": "+05:30"}});
        assert_eq!(ny_hour, ms(2021, 3, 17, 14, 30, 0));
    }

    #[test]
    fn trunc_nulls_and_errors() {
        let d = at(0);
        assert_eq!(
            eval(rawdoc! {"$dateTrunc": {"date": "$n", "unit": "day"}}).unwrap(),
            RawBson::Null
        );
        assert_eq!(
            eval(rawdoc! {"$dateTrunc": {"date": d, "unit": "day", "binSize": null}}).unwrap(),
            RawBson::Null
        );
        assert_eq!(code(rawdoc! {"$dateTrunc": 1}), ErrorCode::Location5439007);
        assert_eq!(
            code(rawdoc! {"$dateTrunc": {"date": d, "unit": "day", "x": 1}}),
            ErrorCode::Location5439008
        );
        assert_eq!(
            code(rawdoc! {"$dateTrunc": {"unit": "day"}}),
            ErrorCode::Location5439009
        );
        assert_eq!(
            code(rawdoc! {"$dateTrunc": {"date": d}}),
            ErrorCode::Location5439010
        );
        assert_eq!(
            code(rawdoc! {"$dateTrunc": {"date": 1, "unit": "day"}}),
            ErrorCode::Location5439012
        );
        assert_eq!(
            code(rawdoc! {"$dateTrunc": {"date": d, "unit": "day", "binSize": 1.5}}),
            ErrorCode::Location5439017
        );
        assert_eq!(
            code(rawdoc! {"$dateTrunc": {"date": d, "unit": "day", "binSize": 0}}),
            ErrorCode::Location5439018
        );
        assert_eq!(
            code(
                rawdoc! {"$dateTrunc": {"date": d, "unit": "day", "binSize": 200_000_000_000_i64}}
            ),
            ErrorCode::Location5439006
        );
        assert_eq!(
            code(rawdoc! {"$dateTrunc": {"date": d, "unit": "hour", "binSize": i64::MAX}}),
            ErrorCode::Location5439002
        );
        assert_eq!(
            code(rawdoc! {"$dateTrunc": {"date": d, "unit": "week", "startOfWeek": "x"}}),
            ErrorCode::Location5439016
        );
    }
}
