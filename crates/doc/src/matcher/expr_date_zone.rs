//! What the date expressions share: time zones as mongod reads them (`"UTC"`, Olson names
//! from the IANA database through chrono-tz, and `±hh`, `±hhmm`, `±hh:mm` offsets; anything
//! else 40485, a non-string 40517), instants seen as local wall-clock times in a zone and
//! back, mongod's date coercion (a date, a timestamp or an ObjectId; else 16006), time units
//! (`FailedToParse` 9, or 5439013/5439014 where the operator checks them) and days of the
//! week (5439015/5439016). No operator is evaluated here.

use bson::raw::RawBsonRef;
use chrono::{
    DateTime, Datelike, LocalResult, NaiveDate, NaiveDateTime, Offset, TimeDelta, TimeZone,
    Timelike,
};
use chrono_tz::Tz;

use super::expr::{error, Value};
use super::expr_arity::show;
use crate::{ErrorCode, MongoError};

/// A time zone.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Zone {
    /// UTC (`"UTC"` or a zero offset): mongod's UTC zone.
    Utc,
    /// A fixed offset east of UTC, in seconds.
    Fixed(i32),
    /// An Olson zone with its rules.
    Named(Tz),
}

/// An instant seen in a zone: its wall-clock time (milliseconds included) and the zone's
/// offset east of UTC then, in seconds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Local {
    pub time: NaiveDateTime,
    pub offset_secs: i32,
}

impl Local {
    pub fn millisecond(&self) -> i32 {
        i32::try_from(self.time.nanosecond() / 1_000_000).unwrap_or(0)
    }
}

fn out_of_range() -> MongoError {
    error(
        ErrorCode::BadValue,
        "date is outside the supported range of years",
    )
}

impl Zone {
    /// The zone named `id`, as mongod's time zone database reads it (40485 otherwise).
    pub fn parse(id: &str) -> Result<Zone, MongoError> {
        if id == "UTC" {
            return Ok(Zone::Utc);
        }
        if let Ok(tz) = id.parse::<Tz>() {
            return Ok(Zone::Named(tz));
        }
        match utc_offset(id) {
            Some(0) => Ok(Zone::Utc),
            Some(secs) => Ok(Zone::Fixed(secs)),
            None => Err(error(
                ErrorCode::Location40485,
                format!("unrecognized time zone identifier: \"{id}\""),
            )),
        }
    }

    pub fn is_utc(self) -> bool {
        self == Zone::Utc
    }

    /// The offset east of UTC, in seconds, at the UTC time `utc`.
    pub fn offset_at(self, utc: &NaiveDateTime) -> i32 {
        match self {
            Zone::Utc => 0,
            Zone::Fixed(secs) => secs,
            Zone::Named(tz) => tz.offset_from_utc_datetime(utc).fix().local_minus_utc(),
        }
    }

    /// The instant `millis` (since the epoch) as a wall-clock time in this zone.
    pub fn local(self, millis: i64) -> Result<Local, MongoError> {
        let utc = DateTime::from_timestamp_millis(millis)
            .ok_or_else(out_of_range)?
            .naive_utc();
        let offset_secs = self.offset_at(&utc);
        let time = utc
            .checked_add_signed(TimeDelta::seconds(i64::from(offset_secs)))
            .ok_or_else(out_of_range)?;
        Ok(Local { time, offset_secs })
    }

    /// The instant (milliseconds since the epoch) of a wall-clock time in this zone. A time
    /// a transition skips is read with the offset before it; one it repeats, as the first.
    pub fn instant(self, local: NaiveDateTime) -> i64 {
        let offset = match self {
            Zone::Utc => 0,
            Zone::Fixed(secs) => secs,
            Zone::Named(tz) => match tz.from_local_datetime(&local) {
                LocalResult::Single(dt) | LocalResult::Ambiguous(dt, _) => {
                    dt.offset().fix().local_minus_utc()
                }
                LocalResult::None => self.offset_at(&local),
            },
        };
        local.and_utc().timestamp_millis() - i64::from(offset) * 1000
    }
}

/// `±hh`, `±hhmm` or `±hh:mm` as seconds east of UTC.
fn utc_offset(spec: &str) -> Option<i32> {
    let sign = match spec.as_bytes().first()? {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let rest = &spec[1..];
    let digits = |s: &str| -> Option<i32> {
        if s.len() == 2 && s.bytes().all(|b| b.is_ascii_digit()) {
            s.parse().ok()
        } else {
            None
        }
    };
    let (hours, minutes) = match rest.len() {
        2 => (digits(rest)?, 0),
        4 => (digits(&rest[..2])?, digits(&rest[2..])?),
        5 if rest.as_bytes()[2] == b':' => (digits(&rest[..2])?, digits(&rest[3..])?),
        _ => return None,
    };
    Some(sign * (hours * 3600 + minutes * 60))
}

/// The zone a `timezone` argument names: `None` when it is null or missing, 40517 when it is
/// not a string.
pub(crate) fn zone_of(v: &Value<'_>) -> Result<Option<Zone>, MongoError> {
    if v.is_nullish() {
        return Ok(None);
    }
    match v.as_raw() {
        Some(RawBsonRef::String(s)) => Zone::parse(s).map(Some),
        _ => Err(error(
            ErrorCode::Location40517,
            format!(
                "timezone must evaluate to a string, found {}",
                v.type_name()
            ),
        )),
    }
}

/// Whether mongod's `coerceToDate` takes the value: a date, a timestamp or an ObjectId.
pub(crate) fn coercible(v: &Value<'_>) -> bool {
    matches!(
        v.as_raw(),
        Some(RawBsonRef::DateTime(_) | RawBsonRef::Timestamp(_) | RawBsonRef::ObjectId(_))
    )
}

/// mongod's `coerceToDate`: milliseconds since the epoch (16006 for other types).
pub(crate) fn to_millis(v: &Value<'_>) -> Result<i64, MongoError> {
    match v.as_raw() {
        Some(RawBsonRef::DateTime(d)) => Ok(d.timestamp_millis()),
        Some(RawBsonRef::Timestamp(t)) => Ok(i64::from(t.time) * 1000),
        Some(RawBsonRef::ObjectId(o)) => Ok(o.timestamp().timestamp_millis()),
        _ => Err(error(
            ErrorCode::Location16006,
            format!("can't convert from BSON type {} to Date", v.type_name()),
        )),
    }
}

/// A unit of time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unit {
    Year,
    Quarter,
    Month,
    Week,
    Day,
    Hour,
    Minute,
    Second,
    Millisecond,
}

impl Unit {
    pub fn parse(name: &str) -> Option<Unit> {
        Some(match name {
            "year" => Unit::Year,
            "quarter" => Unit::Quarter,
            "month" => Unit::Month,
            "week" => Unit::Week,
            "day" => Unit::Day,
            "hour" => Unit::Hour,
            "minute" => Unit::Minute,
            "second" => Unit::Second,
            "millisecond" => Unit::Millisecond,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Unit::Year => "year",
            Unit::Quarter => "quarter",
            Unit::Month => "month",
            Unit::Week => "week",
            Unit::Day => "day",
            Unit::Hour => "hour",
            Unit::Minute => "minute",
            Unit::Second => "second",
            Unit::Millisecond => "millisecond",
        }
    }

    /// Milliseconds in one unit, for the units of fixed length.
    pub fn fixed_millis(self) -> Option<i64> {
        Some(match self {
            Unit::Millisecond => 1,
            Unit::Second => 1000,
            Unit::Minute => 60_000,
            Unit::Hour => 3_600_000,
            _ => return None,
        })
    }
}

/// `unit` of `$dateDiff`/`$dateTrunc`: 5439013 (not a string), 5439014 (unknown).
pub(crate) fn unit_of(v: &Value<'_>, op: &str) -> Result<Unit, MongoError> {
    let Some(RawBsonRef::String(s)) = v.as_raw() else {
        return Err(error(
            ErrorCode::Location5439013,
            format!(
                "{op} requires 'unit' to be a string, but got {}",
                v.type_name()
            ),
        ));
    };
    Unit::parse(s).ok_or_else(|| {
        error(
            ErrorCode::Location5439014,
            format!("{op} parameter 'unit' value cannot be recognized as a time unit: {s}"),
        )
    })
}

/// `startOfWeek`: ISO day number (Monday 1 .. Sunday 7); 5439015/5439016.
pub(crate) fn day_of_week_of(v: &Value<'_>, op: &str) -> Result<u32, MongoError> {
    let Some(RawBsonRef::String(s)) = v.as_raw() else {
        return Err(error(
            ErrorCode::Location5439015,
            format!(
                "{op} requires 'startOfWeek' to be a string, but got {}",
                v.type_name()
            ),
        ));
    };
    const DAYS: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];
    const FULL: [&str; 7] = [
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
    ];
    let lower = s.to_lowercase();
    let found = DAYS
        .iter()
        .position(|d| *d == lower)
        .or_else(|| FULL.iter().position(|d| *d == lower));
    found.map(|i| i as u32 + 1).ok_or_else(|| {
        error(
            ErrorCode::Location5439016,
            format!(
                "{op} parameter 'startOfWeek' value cannot be recognized as a day of a week: {s}"
            ),
        )
    })
}

/// The Sunday a week starts on by default.
pub(crate) const SUNDAY: u32 = 7;

/// Days from 0001-01-01 (day 1) to `date`, for differences in days.
pub(crate) fn day_number(date: NaiveDate) -> i64 {
    i64::from(date.num_days_from_ce())
}

/// A message showing a value, for the date operators' errors.
pub(crate) fn shown(v: &Value<'_>) -> String {
    show(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zones_parse_as_mongod_reads_them() {
        assert_eq!(Zone::parse("UTC").unwrap(), Zone::Utc);
        assert_eq!(Zone::parse("+00:00").unwrap(), Zone::Utc);
        assert_eq!(Zone::parse("+05:30").unwrap(), Zone::Fixed(19800));
        assert_eq!(Zone::parse("-0430").unwrap(), Zone::Fixed(-16200));
        assert_eq!(Zone::parse("+03").unwrap(), Zone::Fixed(10800));
        assert!(matches!(
            Zone::parse("Europe/London").unwrap(),
            Zone::Named(_)
        ));
        let e = Zone::parse("Mars/Olympus").unwrap_err();
        assert_eq!(e.code, ErrorCode::Location40485);
        assert_eq!(
            e.message,
            "unrecognized time zone identifier: \"Mars/Olympus\""
        );
        assert!(Zone::parse("+5").is_err());
        assert!(Zone::parse("europe/london").is_err());
    }

    #[test]
    fn dst_zone_offsets_and_round_trip() {
        let ny = Zone::parse("America/New_York").unwrap();
        // 2017-07-04T12:00:00Z is 08:00 EDT; 2017-01-04T12:00:00Z is 07:00 EST.
        let summer = ny.local(1_499_169_600_000).unwrap();
        assert_eq!((summer.time.hour(), summer.offset_secs), (8, -4 * 3600));
        let winter = ny.local(1_483_531_200_000).unwrap();
        assert_eq!((winter.time.hour(), winter.offset_secs), (7, -5 * 3600));
        assert_eq!(ny.instant(summer.time), 1_499_169_600_000);
        // 2017-03-12 02:30 does not exist in New York: read with EST, 07:30Z.
        let gap = NaiveDate::from_ymd_opt(2017, 3, 12)
            .unwrap()
            .and_hms_opt(2, 30, 0)
            .unwrap();
        assert_eq!(ny.instant(gap), 1_489_303_800_000);
    }

    #[test]
    fn units_and_days() {
        assert_eq!(Unit::parse("quarter"), Some(Unit::Quarter));
        assert_eq!(Unit::parse("years"), None);
        let v = Value::Owned(bson::raw::RawBson::String("MON".into()));
        assert_eq!(day_of_week_of(&v, "$dateDiff").unwrap(), 1);
        let v = Value::Owned(bson::raw::RawBson::String("funday".into()));
        assert_eq!(
            day_of_week_of(&v, "$dateDiff").unwrap_err().code,
            ErrorCode::Location5439016
        );
    }
}
