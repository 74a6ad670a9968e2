//! Dates to and from strings, as mongod 7.0 does them (`expression.cpp`,
//! `date_time_support.cpp`): `$dateToString` (`%Y %m %d %H %M %S %L %j %w %u %U %V %G %b %B
//! %z %Z %%`; default `%Y-%m-%dT%H:%M:%S.%LZ`; an unmatched `%` 18535, an unknown specifier
//! 18536, a year outside 0-9999 18537; `onNull`) and `$dateFromString` (`format` with the
//! parsing specifiers, 40684; `timezone`; `onNull`; every parse failure is
//! `ConversionFailure` 241, which `onError` replaces).
//!
//! Without a `format`, `$dateFromString` reads ISO 8601 dates and times
//! (`YYYY-MM-DD[(T| )HH:MM[:SS[.fff]]][Z|UTC|GMT|±hh[:mm]]`, `/` also separating the date);
//! mongod's timelib reads many more free-form layouts, which fail here with 241.

use bson::raw::{RawBson, RawBsonRef, RawDocument};
use chrono::{Datelike, NaiveDate, NaiveDateTime, Timelike, Weekday};

use super::expr::{error, Value};
use super::expr_date_parts::week;
use super::expr_date_zone::{shown, to_millis, zone_of, Local, Zone};
use super::expr_dates::DateExpr;
use crate::{ErrorCode, MongoError};

type Stack<'a> = Vec<Value<'a>>;

const ISO_FORMAT: &str = "%Y-%m-%dT%H:%M:%S.%LZ";
const TO_STRING_SPECIFIERS: &str = "bBdGHjLmMSwuUVYzZ";
const FROM_STRING_SPECIFIERS: &str = "bBdGHjLmMSuVYzZ";
const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

fn null<'a>() -> Value<'a> {
    Value::Owned(RawBson::Null)
}

/// 18535/18536: every `%` is followed by an allowed specifier or another `%`.
fn validate_format(format: &str, allowed: &str) -> Result<(), MongoError> {
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            continue;
        }
        match chars.next() {
            None => {
                return Err(error(
                    ErrorCode::Location18535,
                    "Unmatched '%' at end of format string",
                ))
            }
            Some(s) if s == '%' || allowed.contains(s) => {}
            Some(s) => {
                return Err(error(
                    ErrorCode::Location18536,
                    format!("Invalid format character '%{s}' in format string"),
                ))
            }
        }
    }
    Ok(())
}

/// The `format` argument: `Ok(None)` when not given, `Some(None)` when null.
fn format_arg<'a>(
    e: &DateExpr,
    root: &'a RawDocument,
    stack: &mut Stack<'a>,
    code: ErrorCode,
    allowed: &str,
) -> Result<Option<Option<String>>, MongoError> {
    let Some(v) = e.arg("format", root, stack)? else {
        return Ok(None);
    };
    if v.is_nullish() {
        return Ok(Some(None));
    }
    let Some(RawBsonRef::String(s)) = v.as_raw() else {
        return Err(error(
            code,
            format!(
                "{} requires that 'format' be a string, found: {} with value {}",
                e.name,
                v.type_name(),
                shown(&v)
            ),
        ));
    };
    validate_format(s, allowed)?;
    Ok(Some(Some(s.to_owned())))
}

fn zone_arg<'a>(
    e: &DateExpr,
    root: &'a RawDocument,
    stack: &mut Stack<'a>,
) -> Result<Option<Zone>, MongoError> {
    match e.arg("timezone", root, stack)? {
        None => Ok(Some(Zone::Utc)),
        Some(tz) => zone_of(&tz),
    }
}

/// `$dateToString`.
pub(crate) fn to_string<'a>(
    e: &DateExpr,
    root: &'a RawDocument,
    stack: &mut Stack<'a>,
) -> Result<Value<'a>, MongoError> {
    let date = e.arg("date", root, stack)?.unwrap_or(Value::Missing);
    let format = format_arg(
        e,
        root,
        stack,
        ErrorCode::Location18533,
        TO_STRING_SPECIFIERS,
    )?;
    let zone = zone_arg(e, root, stack)?;
    if date.is_nullish() {
        return Ok(e.arg("onNull", root, stack)?.unwrap_or_else(null));
    }
    let Some(zone) = zone else { return Ok(null()) };
    let format = match format {
        None => ISO_FORMAT.to_owned(),
        Some(None) => return Ok(null()),
        Some(Some(f)) => f,
    };
    let local = zone.local(to_millis(&date)?)?;
    format_date(&format, &local).map(|s| Value::Owned(RawBson::String(s)))
}

fn four_digit_year(year: i32) -> Result<String, MongoError> {
    if !(0..=9999).contains(&year) {
        return Err(error(
            ErrorCode::Location18537,
            format!("$dateToString is only defined on year 0-9999, tried to use year {year}"),
        ));
    }
    Ok(format!("{year:04}"))
}

/// A local time written out with a (validated) format.
pub(crate) fn format_date(format: &str, local: &Local) -> Result<String, MongoError> {
    let t = &local.time;
    let mut out = String::new();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let Some(spec) = chars.next() else { break };
        let piece = match spec {
            'Y' => four_digit_year(t.year())?,
            'G' => four_digit_year(t.iso_week().year())?,
            'm' => format!("{:02}", t.month()),
            'd' => format!("{:02}", t.day()),
            'H' => format!("{:02}", t.hour()),
            'M' => format!("{:02}", t.minute()),
            'S' => format!("{:02}", t.second()),
            'L' => format!("{:03}", local.millisecond()),
            'j' => format!("{:03}", t.ordinal()),
            'w' => t.weekday().number_from_sunday().to_string(),
            'u' => t.weekday().number_from_monday().to_string(),
            'U' => format!("{:02}", week(t)),
            'V' => format!("{:02}", t.iso_week().week()),
            'b' => MONTHS[t.month0() as usize][..3].to_owned(),
            'B' => MONTHS[t.month0() as usize].to_owned(),
            'z' => offset_text(local.offset_secs),
            'Z' => (local.offset_secs / 60).to_string(),
            other => other.to_string(),
        };
        out.push_str(&piece);
    }
    Ok(out)
}

fn offset_text(secs: i32) -> String {
    let sign = if secs < 0 { '-' } else { '+' };
    let minutes = secs.abs() / 60;
    format!("{sign}{:02}{:02}", minutes / 60, minutes % 60)
}

/// `$dateFromString`.
pub(crate) fn from_string<'a>(
    e: &DateExpr,
    root: &'a RawDocument,
    stack: &mut Stack<'a>,
) -> Result<Value<'a>, MongoError> {
    let input = e.arg("dateString", root, stack)?.unwrap_or(Value::Missing);
    let format = format_arg(
        e,
        root,
        stack,
        ErrorCode::Location40684,
        FROM_STRING_SPECIFIERS,
    )?;
    let zone = zone_arg(e, root, stack)?;
    if input.is_nullish() {
        return Ok(e.arg("onNull", root, stack)?.unwrap_or_else(null));
    }
    match parse_input(&input, zone, format) {
        Err(err) if err.code == ErrorCode::ConversionFailure && e.has("onError") => {
            Ok(e.arg("onError", root, stack)?.unwrap_or(Value::Missing))
        }
        other => other,
    }
}

fn failure(message: impl Into<String>) -> MongoError {
    error(ErrorCode::ConversionFailure, message)
}

fn parse_input<'a>(
    input: &Value<'_>,
    zone: Option<Zone>,
    format: Option<Option<String>>,
) -> Result<Value<'a>, MongoError> {
    let Some(RawBsonRef::String(s)) = input.as_raw() else {
        return Err(failure(format!(
            "$dateFromString requires that 'dateString' be a string, found: {} with value {}",
            input.type_name(),
            shown(input)
        )));
    };
    let Some(zone) = zone else { return Ok(null()) };
    let parsed = match format {
        Some(None) => return Ok(null()),
        Some(Some(f)) => parse_with_format(s, &f)?,
        None => parse_free(s)?,
    };
    let millis = parsed.instant(s, zone)?;
    Ok(Value::Owned(RawBson::DateTime(
        bson::DateTime::from_millis(millis),
    )))
}

/// Zone information a date string carried.
#[derive(Debug, Clone, PartialEq)]
enum StringZone {
    None,
    /// `±hh:mm` and the like: seconds east of UTC.
    Offset(i32),
    /// `Z`, `UTC`, `GMT`.
    Abbreviation(String),
}

/// What a date string said.
#[derive(Debug, Default)]
struct Fields {
    year: Option<i64>,
    month: Option<i64>,
    day: Option<i64>,
    day_of_year: Option<i64>,
    iso_year: Option<i64>,
    iso_week: Option<i64>,
    iso_day: Option<i64>,
    hour: Option<i64>,
    minute: Option<i64>,
    second: Option<i64>,
    millis: Option<i64>,
    zone: Option<StringZone>,
}

impl Fields {
    fn date(&self, s: &str) -> Result<NaiveDate, MongoError> {
        let invalid = || {
            failure(format!(
                "Error parsing date string '{s}'; The parsed date was invalid"
            ))
        };
        let int = |v: i64| i32::try_from(v).ok();
        if let (Some(y), Some(w)) = (self.iso_year, self.iso_week) {
            let day = Weekday::try_from(u8::try_from(self.iso_day.unwrap_or(1) - 1).unwrap_or(9))
                .map_err(|_| invalid())?;
            return NaiveDate::from_isoywd_opt(
                int(y).ok_or_else(invalid)?,
                u32::try_from(w).map_err(|_| invalid())?,
                day,
            )
            .ok_or_else(invalid);
        }
        if let (Some(y), Some(j)) = (self.year, self.day_of_year) {
            return NaiveDate::from_yo_opt(
                int(y).ok_or_else(invalid)?,
                u32::try_from(j).map_err(|_| invalid())?,
            )
            .ok_or_else(invalid);
        }
        let (Some(y), Some(m), Some(d)) = (self.year, self.month, self.day) else {
            return Err(failure(format!(
                "an incomplete date/time string has been found, with elements missing: \"{s}\""
            )));
        };
        let u = |v: i64| u32::try_from(v).ok();
        NaiveDate::from_ymd_opt(
            int(y).ok_or_else(invalid)?,
            u(m).ok_or_else(invalid)?,
            u(d).ok_or_else(invalid)?,
        )
        .ok_or_else(invalid)
    }

    fn local(&self, s: &str) -> Result<NaiveDateTime, MongoError> {
        let part = |v: Option<i64>| u32::try_from(v.unwrap_or(0)).ok();
        let invalid = || {
            failure(format!(
                "Error parsing date string '{s}'; The parsed time was invalid"
            ))
        };
        let (h, m, sec, ms) = (
            part(self.hour),
            part(self.minute),
            part(self.second),
            part(self.millis),
        );
        let (Some(h), Some(m), Some(sec), Some(ms)) = (h, m, sec, ms) else {
            return Err(invalid());
        };
        self.date(s)?
            .and_hms_milli_opt(h, m, sec, ms)
            .ok_or_else(invalid)
    }

    /// The instant, in `zone` unless the string named its own (which a zone argument other
    /// than UTC may not contradict).
    fn instant(&self, s: &str, zone: Zone) -> Result<i64, MongoError> {
        let local = self.local(s)?;
        let wall = local.and_utc().timestamp_millis();
        match self.zone.clone().unwrap_or(StringZone::None) {
            StringZone::None => Ok(zone.instant(local)),
            _ if !zone.is_utc() => Err(self.zone_conflict()),
            StringZone::Offset(secs) => Ok(wall - i64::from(secs) * 1000),
            StringZone::Abbreviation(_) => Ok(wall),
        }
    }

    fn zone_conflict(&self) -> MongoError {
        match &self.zone {
            Some(StringZone::Abbreviation(abbr)) => failure(format!(
                "you cannot pass in a date/time string with time zone information ('{abbr}') \
                 together with a timezone argument"
            )),
            _ => failure(
                "you cannot pass in a date/time string with GMT offset together with a timezone \
                 argument",
            ),
        }
    }
}

/// A reader over a date string.
struct Cursor<'s> {
    text: &'s str,
    at: usize,
}

impl<'s> Cursor<'s> {
    fn rest(&self) -> &'s str {
        &self.text[self.at..]
    }

    fn fail(&self, what: &str) -> MongoError {
        let c = self
            .rest()
            .chars()
            .next()
            .map_or(String::new(), String::from);
        failure(format!(
            "Error parsing date string '{}'; {}: {what} '{c}'",
            self.text, self.at
        ))
    }

    /// Between one and `max` digits.
    fn number(&mut self, max: usize, what: &str) -> Result<i64, MongoError> {
        let digits: String = self
            .rest()
            .chars()
            .take(max)
            .take_while(char::is_ascii_digit)
            .collect();
        if digits.is_empty() {
            return Err(self.fail(what));
        }
        self.at += digits.len();
        digits.parse().map_err(|_| self.fail(what))
    }

    fn eat(&mut self, c: char) -> bool {
        if self.rest().starts_with(c) {
            self.at += c.len_utf8();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: char) -> Result<(), MongoError> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(self.fail("Unexpected data found."))
        }
    }

    /// `Z`, `UTC`, `GMT` (optionally followed by an offset) or `±hh[[:]mm]`.
    fn zone(&mut self) -> Result<Option<StringZone>, MongoError> {
        for abbr in ["Z", "z", "UTC", "GMT"] {
            if self.rest().starts_with(abbr) {
                self.at += abbr.len();
                if abbr.len() == 3 && self.rest().starts_with(['+', '-']) {
                    return self.offset().map(|o| Some(StringZone::Offset(o)));
                }
                return Ok(Some(StringZone::Abbreviation(abbr.to_uppercase())));
            }
        }
        if self.rest().starts_with(['+', '-']) {
            return self.offset().map(|o| Some(StringZone::Offset(o)));
        }
        Ok(None)
    }

    fn offset(&mut self) -> Result<i32, MongoError> {
        let sign = if self.eat('-') {
            -1
        } else {
            self.expect('+').map(|()| 1)?
        };
        let hours = self.number(2, "The timezone could not be found in the database")?;
        self.eat(':');
        let minutes = if self.rest().starts_with(|c: char| c.is_ascii_digit()) {
            self.number(2, "The timezone could not be found in the database")?
        } else {
            0
        };
        Ok(sign * i32::try_from(hours * 3600 + minutes * 60).unwrap_or(0))
    }
}

/// An ISO 8601 date string.
fn parse_free(s: &str) -> Result<Fields, MongoError> {
    let mut c = Cursor {
        text: s.trim_end(),
        at: 0,
    };
    let mut f = Fields {
        year: Some(c.number(4, "Unexpected character")?),
        ..Fields::default()
    };
    let separator = if c.eat('/') {
        '/'
    } else {
        c.expect('-').map(|()| '-')?
    };
    f.month = Some(c.number(2, "Unexpected character")?);
    c.expect(separator)?;
    f.day = Some(c.number(2, "Unexpected character")?);
    if c.eat('T') || c.eat('t') || c.eat(' ') {
        f.hour = Some(c.number(2, "Unexpected character")?);
        c.expect(':')?;
        f.minute = Some(c.number(2, "Unexpected character")?);
        if c.eat(':') {
            f.second = Some(c.number(2, "Unexpected character")?);
            if c.eat('.') {
                f.millis = Some(fraction_millis(&mut c)?);
            }
        }
        c.eat(' ');
        f.zone = c.zone()?;
    }
    if !c.rest().is_empty() {
        return Err(c.fail("Trailing data"));
    }
    Ok(f)
}

/// Fractional seconds, as milliseconds (digits past the third are read and dropped).
fn fraction_millis(c: &mut Cursor<'_>) -> Result<i64, MongoError> {
    let digits: String = c.rest().chars().take_while(char::is_ascii_digit).collect();
    if digits.is_empty() {
        return Err(c.fail("Unexpected character"));
    }
    c.at += digits.len();
    let padded = format!("{digits:0<3}");
    padded[..3]
        .parse()
        .map_err(|_| c.fail("Unexpected character"))
}

/// A date string read with a format of parsing specifiers.
fn parse_with_format(s: &str, format: &str) -> Result<Fields, MongoError> {
    let mut c = Cursor { text: s, at: 0 };
    let mut f = Fields::default();
    let mut spec = format.chars();
    while let Some(ch) = spec.next() {
        if ch != '%' {
            c.expect(ch)?;
            continue;
        }
        let Some(sp) = spec.next() else { break };
        read_specifier(&mut c, &mut f, sp)?;
    }
    if !c.rest().is_empty() {
        return Err(c.fail("Trailing data"));
    }
    Ok(f)
}

fn read_specifier(c: &mut Cursor<'_>, f: &mut Fields, sp: char) -> Result<(), MongoError> {
    let (slot, max, what) = match sp {
        'Y' => (&mut f.year, 4, "A four digit year could not be found"),
        'G' => (
            &mut f.iso_year,
            4,
            "A four digit ISO year could not be found",
        ),
        'm' => (&mut f.month, 2, "A two digit month could not be found"),
        'd' => (&mut f.day, 2, "A two digit day could not be found"),
        'H' => (&mut f.hour, 2, "A two digit hour could not be found"),
        'M' => (&mut f.minute, 2, "A two digit minute could not be found"),
        'S' => (&mut f.second, 2, "A two digit second could not be found"),
        'L' => (
            &mut f.millis,
            3,
            "A three digit millisecond could not be found",
        ),
        'j' => (
            &mut f.day_of_year,
            3,
            "A three digit day-of-year could not be found",
        ),
        'V' => (
            &mut f.iso_week,
            2,
            "A two digit ISO week could not be found",
        ),
        'u' => (
            &mut f.iso_day,
            1,
            "A single digit day of week could not be found",
        ),
        'z' => {
            f.zone = Some(
                c.zone()?
                    .ok_or_else(|| c.fail("The timezone could not be found in the database"))?,
            );
            return Ok(());
        }
        'Z' => {
            let sign = if c.eat('-') {
                -1
            } else {
                c.eat('+');
                1
            };
            let minutes = c.number(4, "The timezone could not be found in the database")?;
            f.zone = Some(StringZone::Offset(
                i32::try_from(sign * minutes * 60).unwrap_or(0),
            ));
            return Ok(());
        }
        'b' | 'B' => {
            f.month = Some(month_name(c, sp == 'b')?);
            return Ok(());
        }
        _ => return c.expect('%'),
    };
    *slot = Some(c.number(max, what)?);
    Ok(())
}

fn month_name(c: &mut Cursor<'_>, short: bool) -> Result<i64, MongoError> {
    for (i, name) in MONTHS.iter().enumerate() {
        let name = if short { &name[..3] } else { name };
        let rest = c.rest();
        if rest.len() >= name.len() && rest[..name.len()].eq_ignore_ascii_case(name) {
            c.at += name.len();
            return Ok(i as i64 + 1);
        }
    }
    Err(c.fail("A textual month could not be found"))
}

#[cfg(test)]
mod tests {
    use super::super::expr::Expr;
    use super::*;
    use bson::{rawdoc, DateTime, RawDocumentBuf};

    /// 2017-07-04T14:56:42.911Z.
    const MILLIS: i64 = 1_499_180_202_911;

    fn eval(spec: RawDocumentBuf) -> Result<Option<RawBson>, MongoError> {
        let expr = Expr::parse(RawBsonRef::Document(&spec))?;
        let doc = rawdoc! {"d": DateTime::from_millis(MILLIS), "n": null};
        let v = expr.evaluate(&doc)?;
        Ok(v.as_raw().map(|r| r.to_raw_bson()))
    }

    fn string(spec: RawDocumentBuf) -> String {
        match eval(spec).expect("evaluates") {
            Some(RawBson::String(s)) => s,
            other => panic!("not a string: {other:?}"),
        }
    }

    fn date(spec: RawDocumentBuf) -> i64 {
        match eval(spec).expect("evaluates") {
            Some(RawBson::DateTime(d)) => d.timestamp_millis(),
            other => panic!("not a date: {other:?}"),
        }
    }

    fn code(spec: RawDocumentBuf) -> ErrorCode {
        eval(spec).expect_err("fails").code
    }

    #[test]
    fn to_string_formats() {
        assert_eq!(
            string(rawdoc! {"$dateToString": {"date": "$d"}}),
            "2017-07-04T14:56:42.911Z"
        );
        let f = "%Y-%m-%d %H:%M:%S %z (%Z minutes)";
        let tz =
            |z: &str| string(rawdoc! {"$dateToString": {"date": "$d", "format": f, "timezone": z}});
        assert_eq!(tz("UTC"), "2017-07-04 14:56:42 +0000 (0 minutes)");
        assert_eq!(
            tz("Europe/London"),
            "2017-07-04 15:56:42 +0100 (60 minutes)"
        );
        assert_eq!(
            tz("America/New_York"),
            "2017-07-04 10:56:42 -0400 (-240 minutes)"
        );
        assert_eq!(tz("+05:30"), "2017-07-04 20:26:42 +0530 (330 minutes)");
        let all = "%%|%j|%w|%u|%U|%V|%G|%L|%b|%B";
        assert_eq!(
            string(rawdoc! {"$dateToString": {"date": "$d", "format": all}}),
            "%|185|3|2|27|27|2017|911|Jul|July"
        );
        let old = rawdoc! {"$dateToString": {"date": DateTime::from_millis(-62_198_755_200_000_i64 - 86_400_000 * 366), "format": "%Y"}};
        assert_eq!(code(old), ErrorCode::Location18537);
    }

    #[test]
    fn to_string_nulls_and_errors() {
        assert_eq!(
            eval(rawdoc! {"$dateToString": {"date": "$n"}}).unwrap(),
            Some(RawBson::Null)
        );
        assert_eq!(
            eval(rawdoc! {"$dateToString": {"date": "$n", "onNull": "none"}}).unwrap(),
            Some(RawBson::String("none".into()))
        );
        assert_eq!(
            eval(rawdoc! {"$dateToString": {"date": "$n", "onNull": "$missing"}}).unwrap(),
            None
        );
        assert_eq!(
            eval(rawdoc! {"$dateToString": {"date": "$d", "format": null}}).unwrap(),
            Some(RawBson::Null)
        );
        assert_eq!(
            eval(rawdoc! {"$dateToString": {"date": "$d", "timezone": null}}).unwrap(),
            Some(RawBson::Null)
        );
        assert_eq!(
            code(rawdoc! {"$dateToString": {"date": "$n", "format": "%Y%"}}),
            ErrorCode::Location18535
        );
        assert_eq!(
            code(rawdoc! {"$dateToString": {"date": "$d", "format": "%x"}}),
            ErrorCode::Location18536
        );
        assert_eq!(
            code(rawdoc! {"$dateToString": {"date": "$d", "format": 5}}),
            ErrorCode::Location18533
        );
        assert_eq!(
            code(rawdoc! {"$dateToString": {"date": "$n", "timezone": "Nowhere"}}),
            ErrorCode::Location40485
        );
        assert_eq!(
            code(rawdoc! {"$dateToString": {"date": 5}}),
            ErrorCode::Location16006
        );
        assert_eq!(code(rawdoc! {"$dateToString": 1}), ErrorCode::Location18629);
        assert_eq!(
            code(rawdoc! {"$dateToString": {"date": 1, "x": 1}}),
            ErrorCode::Location18534
        );
        assert_eq!(
            code(rawdoc! {"$dateToString": {"format": "%Y"}}),
            ErrorCode::Location18628
        );
    }

    #[test]
    fn from_string_iso() {
        let p = |s: &str| date(rawdoc! {"$dateFromString": {"dateString": s}});
        assert_eq!(p("2017-07-04T14:56:42.911Z"), MILLIS);
        assert_eq!(p("2017-07-04T14:56:42.911"), MILLIS);
        assert_eq!(p("2017-07-04 15:56:42.911+01:00"), MILLIS);
        assert_eq!(p("2017-07-04T10:56:42.911-0400"), MILLIS);
        assert_eq!(p("2017-07-04"), 1_499_126_400_000);
        assert_eq!(p("2017/07/04"), 1_499_126_400_000);
        let ny = date(
            rawdoc! {"$dateFromString": {"dateString": "2017-07-04T10:56:42.911", "timezone": "America/New_York"}},
        );
        assert_eq!(ny, MILLIS);
        let winter = date(
            rawdoc! {"$dateFromString": {"dateString": "2017-01-04T07:00:00", "timezone": "America/New_York"}},
        );
        assert_eq!(winter, 1_483_531_200_000);
    }

    #[test]
    fn from_string_formats() {
        let p =
            |s: &str, f: &str| date(rawdoc! {"$dateFromString": {"dateString": s, "format": f}});
        assert_eq!(p("04/07/2017 14:56:42.911", "%d/%m/%Y %H:%M:%S.%L"), MILLIS);
        assert_eq!(p("2017-185 14:56:42.911", "%Y-%j %H:%M:%S.%L"), MILLIS);
        assert_eq!(p("2017 27 2", "%G %V %u"), 1_499_126_400_000);
        assert_eq!(p("Jul 4 2017", "%b %d %Y"), 1_499_126_400_000);
        assert_eq!(
            p("2017-07-04T15:56:42.911+0100", "%Y-%m-%dT%H:%M:%S.%L%z"),
            MILLIS
        );
        assert_eq!(
            p("2017-07-04 15:56:42.911 60", "%Y-%m-%d %H:%M:%S.%L %Z"),
            MILLIS
        );
    }

    #[test]
    fn from_string_errors_and_fallbacks() {
        let fails = |spec: RawDocumentBuf| code(spec);
        assert_eq!(
            fails(rawdoc! {"$dateFromString": {"dateString": "not a date"}}),
            ErrorCode::ConversionFailure
        );
        assert_eq!(
            fails(rawdoc! {"$dateFromString": {"dateString": 5}}),
            ErrorCode::ConversionFailure
        );
        assert_eq!(
            fails(rawdoc! {"$dateFromString": {"dateString": "2017-02-30"}}),
            ErrorCode::ConversionFailure
        );
        assert_eq!(
            fails(rawdoc! {"$dateFromString": {"dateString": "2017", "format": "%Y"}}),
            ErrorCode::ConversionFailure
        );
        assert_eq!(
            fails(
                rawdoc! {"$dateFromString": {"dateString": "2017-07-04T10:00:00Z", "timezone": "Europe/London"}}
            ),
            ErrorCode::ConversionFailure
        );
        let e = eval(rawdoc! {"$dateFromString": {"dateString": "2017-07-04T10:00:00+01:00", "timezone": "Europe/London"}}).unwrap_err();
        assert_eq!(e.message, "you cannot pass in a date/time string with GMT offset together with a timezone argument");
        let r =
            eval(rawdoc! {"$dateFromString": {"dateString": "garbage", "onError": "bad"}}).unwrap();
        assert_eq!(r, Some(RawBson::String("bad".into())));
        let r = eval(rawdoc! {"$dateFromString": {"dateString": 5, "onError": "bad"}}).unwrap();
        assert_eq!(r, Some(RawBson::String("bad".into())));
        let r = eval(
            rawdoc! {"$dateFromString": {"dateString": "$n", "onNull": "none", "onError": "bad"}},
        )
        .unwrap();
        assert_eq!(r, Some(RawBson::String("none".into())));
        assert_eq!(
            eval(rawdoc! {"$dateFromString": {"dateString": "$n"}}).unwrap(),
            Some(RawBson::Null)
        );
        assert_eq!(
            eval(rawdoc! {"$dateFromString": {"dateString": "2017-07-04", "format": null}})
                .unwrap(),
            Some(RawBson::Null)
        );
        assert_eq!(
            eval(rawdoc! {"$dateFromString": {"dateString": "2017-07-04", "timezone": null}})
                .unwrap(),
            Some(RawBson::Null)
        );
        // The zone and the format are checked outside `onError`.
        assert_eq!(
            fails(
                rawdoc! {"$dateFromString": {"dateString": "x", "timezone": "Nowhere", "onError": 1}}
            ),
            ErrorCode::Location40485
        );
        assert_eq!(
            fails(rawdoc! {"$dateFromString": {"dateString": "x", "format": "%w", "onError": 1}}),
            ErrorCode::Location18536
        );
        assert_eq!(
            fails(rawdoc! {"$dateFromString": {"dateString": "x", "format": 1}}),
            ErrorCode::Location40684
        );
        assert_eq!(
            fails(rawdoc! {"$dateFromString": 1}),
            ErrorCode::Location40540
        );
        assert_eq!(
            fails(rawdoc! {"$dateFromString": {"dateString": "x", "y": 1}}),
            ErrorCode::Location40541
        );
        assert_eq!(
            fails(rawdoc! {"$dateFromString": {}}),
            ErrorCode::Location40542
        );
    }
}
