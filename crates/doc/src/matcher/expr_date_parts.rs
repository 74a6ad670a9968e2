//! Dates taken apart and put together, as mongod 7.0 does (`expression.cpp`,
//! `date_time_support.cpp`): `$year $month $dayOfMonth $hour $minute $second $millisecond
//! $dayOfWeek` (Sunday 1) `$dayOfYear $week` (weeks start on Sunday, 0-53) `$isoWeek
//! $isoWeekYear` (a long) `$isoDayOfWeek` (Monday 1), in UTC or the given zone (40533 for a
//! non-string zone); `$dateToParts` (`iso8601`, 40521) and `$dateFromParts` (integral parts,
//! 40515; month, day, hour, minute, isoWeek, isoDayOfWeek in [-32768, 32767], 31034; years
//! 1-9999, 40523/31095; out-of-range parts carry into the next unit as timelib does). A null
//! or missing argument gives null.

use bson::raw::{RawBson, RawBsonRef, RawDocument, RawDocumentBuf};
use chrono::{Datelike, NaiveDate, NaiveDateTime, TimeDelta, Timelike, Weekday};

use super::expr::{error, Value};
use super::expr_arity::integral64;
use super::expr_date_zone::{shown, to_millis, zone_of, Local, Zone};
use super::expr_dates::{DateExpr, Part};
use crate::{ErrorCode, MongoError};

type Stack<'a> = Vec<Value<'a>>;

fn null<'a>() -> Value<'a> {
    Value::Owned(RawBson::Null)
}

/// The zone of a date part operator's `timezone` (UTC when absent; `None` when null).
fn part_zone<'a>(
    e: &DateExpr,
    root: &'a RawDocument,
    stack: &mut Stack<'a>,
) -> Result<Option<Zone>, MongoError> {
    let Some(tz) = e.arg("timezone", root, stack)? else {
        return Ok(Some(Zone::Utc));
    };
    if tz.is_nullish() {
        return Ok(None);
    }
    match tz.as_raw() {
        Some(RawBsonRef::String(s)) => Zone::parse(s).map(Some),
        _ => Err(error(
            ErrorCode::Location40533,
            format!(
                "{} requires a string for the timezone argument, but was given a {} ({})",
                e.name,
                tz.type_name(),
                shown(&tz)
            ),
        )),
    }
}

/// `$year`, `$month`, ... of one date.
pub(crate) fn part<'a>(
    e: &DateExpr,
    part: Part,
    root: &'a RawDocument,
    stack: &mut Stack<'a>,
) -> Result<Value<'a>, MongoError> {
    let date = e.arg("date", root, stack)?.unwrap_or(Value::Missing);
    if date.is_nullish() {
        return Ok(null());
    }
    let millis = to_millis(&date)?;
    let Some(zone) = part_zone(e, root, stack)? else {
        return Ok(null());
    };
    let local = zone.local(millis)?;
    Ok(match part {
        Part::IsoWeekYear => Value::Owned(RawBson::Int64(i64::from(local.time.iso_week().year()))),
        other => Value::Owned(RawBson::Int32(part_of(other, &local))),
    })
}

fn part_of(part: Part, local: &Local) -> i32 {
    let t = &local.time;
    let u = |x: u32| i32::try_from(x).unwrap_or(0);
    match part {
        Part::Year => t.year(),
        Part::Month => u(t.month()),
        Part::DayOfMonth => u(t.day()),
        Part::Hour => u(t.hour()),
        Part::Minute => u(t.minute()),
        Part::Second => u(t.second()),
        Part::Millisecond => local.millisecond(),
        Part::DayOfWeek => u(t.weekday().number_from_sunday()),
        Part::DayOfYear => u(t.ordinal()),
        Part::Week => week(t),
        Part::IsoWeek => u(t.iso_week().week()),
        Part::IsoWeekYear => t.iso_week().year(),
        Part::IsoDayOfWeek => u(t.weekday().number_from_monday()),
    }
}

/// mongod's `$week` (`%U`): weeks begin on Sunday; days before the first Sunday are week 0.
pub(crate) fn week(t: &NaiveDateTime) -> i32 {
    let day_of_year = i32::try_from(t.ordinal()).unwrap_or(1);
    let day_of_week = i32::try_from(t.weekday().number_from_sunday()).unwrap_or(1);
    (day_of_year - day_of_week + 7) / 7
}

/// `$dateToParts`.
pub(crate) fn to_parts<'a>(
    e: &DateExpr,
    root: &'a RawDocument,
    stack: &mut Stack<'a>,
) -> Result<Value<'a>, MongoError> {
    let date = e.arg("date", root, stack)?.unwrap_or(Value::Missing);
    let zone = match e.arg("timezone", root, stack)? {
        None => Some(Zone::Utc),
        Some(tz) => zone_of(&tz)?,
    };
    let Some(zone) = zone else { return Ok(null()) };
    let iso = match e.arg("iso8601", root, stack)? {
        None => false,
        Some(v) if v.is_nullish() => return Ok(null()),
        Some(v) => match v.as_raw() {
            Some(RawBsonRef::Boolean(b)) => b,
            _ => {
                return Err(error(
                    ErrorCode::Location40521,
                    format!("iso8601 must evaluate to a bool, found {}", v.type_name()),
                ))
            }
        },
    };
    if date.is_nullish() {
        return Ok(null());
    }
    let local = zone.local(to_millis(&date)?)?;
    let t = &local.time;
    let mut out = RawDocumentBuf::new();
    let fields: [(&str, i32); 3] = if iso {
        [
            ("isoWeekYear", t.iso_week().year()),
            ("isoWeek", part_of(Part::IsoWeek, &local)),
            ("isoDayOfWeek", part_of(Part::IsoDayOfWeek, &local)),
        ]
    } else {
        [
            ("year", t.year()),
            ("month", part_of(Part::Month, &local)),
            ("day", part_of(Part::DayOfMonth, &local)),
        ]
    };
    for (name, value) in fields {
        out.append(name, value);
    }
    out.append("hour", part_of(Part::Hour, &local));
    out.append("minute", part_of(Part::Minute, &local));
    out.append("second", part_of(Part::Second, &local));
    out.append("millisecond", local.millisecond());
    Ok(Value::Owned(RawBson::Document(out)))
}

const PART_MIN: i64 = -32768;
const PART_MAX: i64 = 32767;

/// One part of `$dateFromParts`: `Ok(None)` when null or missing (the result is null).
fn number_part<'a>(
    e: &DateExpr,
    name: &str,
    default: i64,
    bounded: bool,
    root: &'a RawDocument,
    stack: &mut Stack<'a>,
) -> Result<Option<i64>, MongoError> {
    let Some(v) = e.arg(name, root, stack)? else {
        return Ok(Some(default));
    };
    if v.is_nullish() {
        return Ok(None);
    }
    let n = integral64(&v).ok_or_else(|| {
        error(
            ErrorCode::Location40515,
            format!(
                "'{name}' must evaluate to an integer, found {} with value {}",
                v.type_name(),
                shown(&v)
            ),
        )
    })?;
    if bounded && !(PART_MIN..=PART_MAX).contains(&n) {
        return Err(error(
            ErrorCode::Location31034,
            format!(
                "'{name}' must evaluate to a value in the range [{PART_MIN}, {PART_MAX}]; value \
                 {n} is not in range"
            ),
        ));
    }
    Ok(Some(n))
}

/// `$dateFromParts`.
pub(crate) fn from_parts<'a>(
    e: &DateExpr,
    root: &'a RawDocument,
    stack: &mut Stack<'a>,
) -> Result<Value<'a>, MongoError> {
    let mut time = [0_i64; 4];
    for (slot, (name, bounded)) in time.iter_mut().zip([
        ("hour", true),
        ("minute", true),
        ("second", false),
        ("millisecond", false),
    ]) {
        match number_part(e, name, 0, bounded, root, stack)? {
            Some(n) => *slot = n,
            None => return Ok(null()),
        }
    }
    let zone = match e.arg("timezone", root, stack)? {
        None => Some(Zone::Utc),
        Some(tz) => zone_of(&tz)?,
    };
    let Some(zone) = zone else { return Ok(null()) };
    let iso = !e.has("year");
    let names = if iso {
        ["isoWeekYear", "isoWeek", "isoDayOfWeek"]
    } else {
        ["year", "month", "day"]
    };
    let mut date = [0_i64; 3];
    for (i, name) in names.iter().enumerate() {
        let default = if i == 0 { 1970 } else { 1 };
        match number_part(e, name, default, i > 0, root, stack)? {
            Some(n) => date[i] = n,
            None => return Ok(null()),
        }
    }
    if !(1..=9999).contains(&date[0]) {
        let (code, field) = if iso {
            (ErrorCode::Location31095, "isoWeekYear")
        } else {
            (ErrorCode::Location40523, "year")
        };
        return Err(error(
            code,
            format!(
                "'{field}' must evaluate to an integer in the range 1 to 9999, found {}",
                date[0]
            ),
        ));
    }
    let day = if iso {
        iso_day(date)
    } else {
        natural_day(date)
    };
    let local = day.and_then(|d| add_time(d, time)).ok_or_else(|| {
        error(
            ErrorCode::BadValue,
            "$dateFromParts: the date is outside the supported range",
        )
    })?;
    let millis = zone.instant(local);
    Ok(Value::Owned(RawBson::DateTime(
        bson::DateTime::from_millis(millis),
    )))
}

/// Year, month (any, carried into years) and day (any, carried into months) at midnight.
fn natural_day([year, month, day]: [i64; 3]) -> Option<NaiveDateTime> {
    let months = year.checked_mul(12)?.checked_add(month - 1)?;
    let y = i32::try_from(months.div_euclid(12)).ok()?;
    let m = u32::try_from(months.rem_euclid(12) + 1).ok()?;
    let first = NaiveDate::from_ymd_opt(y, m, 1)?.and_hms_opt(0, 0, 0)?;
    first.checked_add_signed(TimeDelta::try_days(day - 1)?)
}

/// ISO week-numbering year, week and day of week at midnight.
fn iso_day([year, week, day]: [i64; 3]) -> Option<NaiveDateTime> {
    let monday = NaiveDate::from_isoywd_opt(i32::try_from(year).ok()?, 1, Weekday::Mon)?;
    let days = (week - 1) * 7 + (day - 1);
    monday
        .and_hms_opt(0, 0, 0)?
        .checked_add_signed(TimeDelta::try_days(days)?)
}

fn add_time(day: NaiveDateTime, [h, m, s, ms]: [i64; 4]) -> Option<NaiveDateTime> {
    day.checked_add_signed(TimeDelta::try_hours(h)?)?
        .checked_add_signed(TimeDelta::try_minutes(m)?)?
        .checked_add_signed(TimeDelta::try_seconds(s)?)?
        .checked_add_signed(TimeDelta::try_milliseconds(ms)?)
}

#[cfg(test)]
mod tests {
    use super::super::expr::Expr;
    use super::*;
    use bson::{rawdoc, DateTime};

    /// 2017-06-19T15:13:25.713Z, a Monday (mongod's jstests' date).
    const MILLIS: i64 = 1_497_885_205_713;

    fn eval(spec: RawDocumentBuf) -> Result<RawBson, MongoError> {
        let expr = Expr::parse(RawBsonRef::Document(&spec))?;
        let doc = rawdoc! {"d": DateTime::from_millis(MILLIS), "n": null, "s": "x"};
        let v = expr.evaluate(&doc)?;
        Ok(v.as_raw().map_or(RawBson::Null, |r| r.to_raw_bson()))
    }

    fn code(spec: RawDocumentBuf) -> ErrorCode {
        eval(spec).expect_err("fails").code
    }

    #[test]
    fn parts_in_utc() {
        let cases: [(&str, RawBson); 13] = [
            ("$year", RawBson::Int32(2017)),
            ("$month", RawBson::Int32(6)),
            ("$dayOfMonth", RawBson::Int32(19)),
            ("$hour", RawBson::Int32(15)),
            ("$minute", RawBson::Int32(13)),
            ("$second", RawBson::Int32(25)),
            ("$millisecond", RawBson::Int32(713)),
            ("$dayOfWeek", RawBson::Int32(2)),
            ("$dayOfYear", RawBson::Int32(170)),
            ("$week", RawBson::Int32(25)),
            ("$isoWeek", RawBson::Int32(25)),
            ("$isoWeekYear", RawBson::Int64(2017)),
            ("$isoDayOfWeek", RawBson::Int32(1)),
        ];
        for (op, want) in cases {
            let mut spec = RawDocumentBuf::new();
            spec.append(op, "$d");
            assert_eq!(eval(spec).unwrap(), want, "{op}");
        }
    }

    #[test]
    fn forms_zones_and_nulls() {
        assert_eq!(eval(rawdoc! {"$hour": ["$d"]}).unwrap(), RawBson::Int32(15));
        let tz = |z: &str| eval(rawdoc! {"$hour": {"date": "$d", "timezone": z}}).unwrap();
        assert_eq!(tz("America/New_York"), RawBson::Int32(11));
        assert_eq!(tz("+05:30"), RawBson::Int32(20));
        assert_eq!(tz("Asia/Kolkata"), RawBson::Int32(20));
        let winter = rawdoc! {"$hour": {"date": DateTime::from_millis(1_483_531_200_000), "timezone": "America/New_York"}};
        assert_eq!(eval(winter).unwrap(), RawBson::Int32(7));
        assert_eq!(eval(rawdoc! {"$year": "$n"}).unwrap(), RawBson::Null);
        assert_eq!(eval(rawdoc! {"$year": "$missing"}).unwrap(), RawBson::Null);
        assert_eq!(
            eval(rawdoc! {"$year": {"date": "$d", "timezone": null}}).unwrap(),
            RawBson::Null
        );
        assert_eq!(
            eval(rawdoc! {"$year": {"$add": ["$d", 1]}}).unwrap(),
            RawBson::Int32(2017)
        );
        let ts = rawdoc! {"$year": bson::Timestamp { time: 1_497_885_205, increment: 1 }};
        assert_eq!(eval(ts).unwrap(), RawBson::Int32(2017));
        assert_eq!(code(rawdoc! {"$year": "$s"}), ErrorCode::Location16006);
        assert_eq!(
            code(rawdoc! {"$year": {"date": "$d", "timezone": 5}}),
            ErrorCode::Location40533
        );
        assert_eq!(
            code(rawdoc! {"$year": {"date": "$d", "timezone": "Nowhere"}}),
            ErrorCode::Location40485
        );
        assert_eq!(
            code(rawdoc! {"$year": {"date": "$d", "tz": "UTC"}}),
            ErrorCode::Location40535
        );
        assert_eq!(
            code(rawdoc! {"$year": {"timezone": "UTC"}}),
            ErrorCode::Location40539
        );
        assert_eq!(
            code(rawdoc! {"$year": ["$d", "$d"]}),
            ErrorCode::Location40536
        );
    }

    #[test]
    fn week_numbers_at_year_edges() {
        // 2016-01-01 was a Friday: week 0, ISO week 53 of 2015.
        let d = rawdoc! {"$week": DateTime::from_millis(1_451_606_400_000)};
        assert_eq!(eval(d).unwrap(), RawBson::Int32(0));
        let d = rawdoc! {"$isoWeekYear": DateTime::from_millis(1_451_606_400_000)};
        assert_eq!(eval(d).unwrap(), RawBson::Int64(2015));
    }

    #[test]
    fn to_parts() {
        let r = eval(rawdoc! {"$dateToParts": {"date": "$d", "timezone": "America/New_York"}});
        let want = rawdoc! {"year": 2017, "month": 6, "day": 19, "hour": 11, "minute": 13, "second": 25, "millisecond": 713};
        assert_eq!(r.unwrap(), RawBson::Document(want));
        let r = eval(rawdoc! {"$dateToParts": {"date": "$d", "iso8601": true}});
        let want = rawdoc! {"isoWeekYear": 2017, "isoWeek": 25, "isoDayOfWeek": 1, "hour": 15, "minute": 13, "second": 25, "millisecond": 713};
        assert_eq!(r.unwrap(), RawBson::Document(want));
        assert_eq!(
            eval(rawdoc! {"$dateToParts": {"date": "$n"}}).unwrap(),
            RawBson::Null
        );
        assert_eq!(
            eval(rawdoc! {"$dateToParts": {"date": "$d", "iso8601": null}}).unwrap(),
            RawBson::Null
        );
        assert_eq!(
            code(rawdoc! {"$dateToParts": {"date": "$d", "iso8601": 1}}),
            ErrorCode::Location40521
        );
        assert_eq!(
            code(rawdoc! {"$dateToParts": {"date": "$d", "timezone": 1}}),
            ErrorCode::Location40517
        );
        assert_eq!(code(rawdoc! {"$dateToParts": 1}), ErrorCode::Location40524);
        assert_eq!(
            code(rawdoc! {"$dateToParts": {"date": 1, "x": 1}}),
            ErrorCode::Location40520
        );
        assert_eq!(code(rawdoc! {"$dateToParts": {}}), ErrorCode::Location40522);
    }

    #[test]
    fn from_parts() {
        let date = |m: i64| RawBson::DateTime(DateTime::from_millis(m));
        let r = eval(
            rawdoc! {"$dateFromParts": {"year": 2017, "month": 6, "day": 19, "hour": 15, "minute": 13, "second": 25, "millisecond": 713}},
        );
        assert_eq!(r.unwrap(), date(MILLIS));
        let r = eval(
            rawdoc! {"$dateFromParts": {"year": 2017, "month": 6, "day": 19, "hour": 11, "minute": 13, "second": 25, "millisecond": 713, "timezone": "America/New_York"}},
        );
        assert_eq!(r.unwrap(), date(MILLIS));
        let r = eval(
            rawdoc! {"$dateFromParts": {"isoWeekYear": 2017, "isoWeek": 25, "isoDayOfWeek": 1, "hour": 15, "minute": 13, "second": 25, "millisecond": 713}},
        );
        assert_eq!(r.unwrap(), date(MILLIS));
        // Carries: month 14 of 2016 is February 2017; day 0 is the last of the month before.
        let r = eval(rawdoc! {"$dateFromParts": {"year": 2016, "month": 14, "day": 0}});
        assert_eq!(r.unwrap(), date(1_485_820_800_000));
        let r = eval(rawdoc! {"$dateFromParts": {"year": 2017, "millisecond": -1}});
        assert_eq!(r.unwrap(), date(1_483_228_799_999));
        assert_eq!(
            eval(rawdoc! {"$dateFromParts": {"year": "$n"}}).unwrap(),
            RawBson::Null
        );
        assert_eq!(
            eval(rawdoc! {"$dateFromParts": {"year": 2017, "timezone": null}}).unwrap(),
            RawBson::Null
        );
        assert_eq!(
            code(rawdoc! {"$dateFromParts": 1}),
            ErrorCode::Location40519
        );
        assert_eq!(
            code(rawdoc! {"$dateFromParts": {"year": 1, "x": 1}}),
            ErrorCode::Location40518
        );
        assert_eq!(
            code(rawdoc! {"$dateFromParts": {"month": 1}}),
            ErrorCode::Location40516
        );
        assert_eq!(
            code(rawdoc! {"$dateFromParts": {"year": 2017, "isoWeek": 1}}),
            ErrorCode::Location40489
        );
        assert_eq!(
            code(rawdoc! {"$dateFromParts": {"isoWeekYear": 2017, "month": 1}}),
            ErrorCode::Location40525
        );
        assert_eq!(
            code(rawdoc! {"$dateFromParts": {"year": 2017, "month": 1.5}}),
            ErrorCode::Location40515
        );
        assert_eq!(
            code(rawdoc! {"$dateFromParts": {"year": 2017, "hour": 40000}}),
            ErrorCode::Location31034
        );
        assert_eq!(
            code(rawdoc! {"$dateFromParts": {"year": 0}}),
            ErrorCode::Location40523
        );
        assert_eq!(
            code(rawdoc! {"$dateFromParts": {"isoWeekYear": 10000}}),
            ErrorCode::Location31095
        );
        let e = eval(rawdoc! {"$dateFromParts": {"year": "a"}}).unwrap_err();
        assert_eq!(
            e.message,
            "'year' must evaluate to an integer, found string with value \"a\""
        );
    }
}
