//! How mongod writes values as text, for the string and conversion expressions: doubles as C's
//! `printf("%g")` (six significant digits, what mongod's `StringBuilder` uses), dates as
//! ISO-8601 with milliseconds (`%Y-%m-%dT%H:%M:%S.%LZ`, years 0-9999 only, 18537 beyond), a
//! value coerced to a string (`Value::coerceToString`: null and missing give "", 16007 for
//! types with no text) and a value as error messages quote it (`Value::toString`: strings in
//! double quotes). It never parses text; `expr_convert` does.

use bson::raw::{RawArray, RawBsonRef, RawDocument};

use super::expr::{error, Value};
use crate::{ErrorCode, MongoError};

/// `d` as C's `%g`: six significant digits, trailing zeros dropped, exponent form (`1e+06`)
/// when the decimal exponent is below -4 or at least 6.
pub(crate) fn format_g(d: f64) -> String {
    if d.is_nan() {
        return if d.is_sign_negative() { "-nan" } else { "nan" }.to_owned();
    }
    if d.is_infinite() {
        return if d < 0.0 { "-inf" } else { "inf" }.to_owned();
    }
    if d == 0.0 {
        return if d.is_sign_negative() { "-0" } else { "0" }.to_owned();
    }
    let scientific = format!("{d:.5e}");
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    if !(-4..6).contains(&exponent) {
        let sign = if exponent < 0 { '-' } else { '+' };
        return format!(
            "{}e{sign}{:02}",
            trim_fraction(mantissa),
            exponent.unsigned_abs()
        );
    }
    let decimals = usize::try_from(5 - exponent).unwrap_or(0);
    trim_fraction(&format!("{d:.decimals$}")).to_owned()
}

/// `1.500` → `1.5`, `2.000` → `2`; integers unchanged.
fn trim_fraction(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// Days since 1970-01-01 as (year, month, day) in the proleptic Gregorian calendar.
pub(crate) fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (the inverse of `civil_from_days`).
pub(crate) fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = i64::from((month + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// A date as mongod's ISO format (`2020-01-02T03:04:05.006Z`); 18537 outside years 0-9999.
pub(crate) fn iso_date(millis: i64) -> Result<String, MongoError> {
    let days = millis.div_euclid(86_400_000);
    let ms = millis.rem_euclid(86_400_000);
    let (year, month, day) = civil_from_days(days);
    if !(0..=9999).contains(&year) {
        return Err(error(
            ErrorCode::Location18537,
            format!(
                "Could not convert date to string: date component was outside the supported \
                 range of 0-9999: {year}"
            ),
        ));
    }
    let (h, m, s, milli) = (ms / 3_600_000, ms / 60_000 % 60, ms / 1000 % 60, ms % 1000);
    Ok(format!(
        "{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{milli:03}Z"
    ))
}

/// mongod's `coerceToString`: numbers as text, strings, symbols and code as they are, dates in
/// ISO format, null/undefined/missing as ""; anything else is 16007.
pub(crate) fn coerce_to_string(v: &Value<'_>) -> Result<String, MongoError> {
    Ok(match v.as_raw() {
        None | Some(RawBsonRef::Null) | Some(RawBsonRef::Undefined) => String::new(),
        Some(RawBsonRef::String(s)) | Some(RawBsonRef::Symbol(s)) => s.to_owned(),
        Some(RawBsonRef::JavaScriptCode(s)) => s.to_owned(),
        Some(RawBsonRef::Int32(i)) => i.to_string(),
        Some(RawBsonRef::Int64(i)) => i.to_string(),
        Some(RawBsonRef::Double(d)) => format_g(d),
        Some(RawBsonRef::Decimal128(d)) => d.to_string(),
        Some(RawBsonRef::DateTime(d)) => iso_date(d.timestamp_millis())?,
        Some(RawBsonRef::Timestamp(_)) => {
            // mongod writes `Timestamp::toStringPretty()` (a local-time rendering); refused
            // rather than written differently.
            return Err(error(
                ErrorCode::NotImplemented,
                "ShaleDB does not coerce a timestamp to a string",
            ));
        }
        Some(_) => {
            return Err(error(
                ErrorCode::Location16007,
                format!("can't convert from BSON type {} to String", v.type_name()),
            ))
        }
    })
}

/// A value as mongod's `Value::toString` writes it in error messages.
pub(crate) fn display(v: &Value<'_>) -> String {
    match v.as_raw() {
        None => "MISSING".to_owned(),
        Some(raw) => display_raw(raw),
    }
}

fn display_raw(raw: RawBsonRef<'_>) -> String {
    match raw {
        RawBsonRef::String(s) => format!("\"{s}\""),
        RawBsonRef::Int32(i) => i.to_string(),
        RawBsonRef::Int64(i) => i.to_string(),
        RawBsonRef::Double(d) => format_g(d),
        RawBsonRef::Decimal128(d) => d.to_string(),
        RawBsonRef::Boolean(b) => b.to_string(),
        RawBsonRef::Null => "null".to_owned(),
        RawBsonRef::Undefined => "undefined".to_owned(),
        RawBsonRef::Document(d) => display_fields(d),
        RawBsonRef::Array(a) => display_items(a),
        other => {
            bson::Bson::try_from(other.to_raw_bson()).map_or_else(|_| "?".into(), |b| b.to_string())
        }
    }
}

fn display_fields(d: &RawDocument) -> String {
    let mut parts = Vec::new();
    for item in d.iter() {
        let Ok((key, value)) = item else {
            parts.push("<malformed>".to_owned());
            break;
        };
        parts.push(format!("{key}: {}", display_raw(value)));
    }
    format!("{{{}}}", parts.join(", "))
}

fn display_items(a: &RawArray) -> String {
    let mut parts = Vec::new();
    for item in a {
        let Ok(value) = item else {
            parts.push("<malformed>".to_owned());
            break;
        };
        parts.push(display_raw(value));
    }
    format!("[{}]", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_print_as_printf_g() {
        let cases = [
            (1.5, "1.5"),
            (2.0, "2"),
            (0.1, "0.1"),
            (1.234_567_89, "1.23457"),
            (123_456.0, "123456"),
            (1_234_567.0, "1.23457e+06"),
            (1e20, "1e+20"),
            (0.0001, "0.0001"),
            (0.000_012_5, "1.25e-05"),
            (-3.25, "-3.25"),
            (-0.0, "-0"),
            (999_999.5, "1e+06"),
        ];
        for (d, want) in cases {
            assert_eq!(format_g(d), want, "{d}");
        }
    }

    #[test]
    fn dates_print_in_iso_format_within_years_0_to_9999() {
        assert_eq!(iso_date(0).unwrap(), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            iso_date(1_577_934_245_006).unwrap(),
            "2020-01-02T03:04:05.006Z"
        );
        assert_eq!(iso_date(-1).unwrap(), "1969-12-31T23:59:59.999Z");
        assert_eq!(iso_date(i64::MAX).unwrap_err().code.code(), 18537);
        for days in [-800_000, -1, 0, 59, 60, 11_016, 2_932_896] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
    }

    #[test]
    fn values_in_messages_quote_strings() {
        let doc = bson::rawdoc! {"a": 1, "b": "x", "c": [1.5, null]};
        assert_eq!(
            display(&Value::Ref(RawBsonRef::Document(&doc))),
            "{a: 1, b: \"x\", c: [1.5, null]}"
        );
        assert_eq!(display(&Value::Missing), "MISSING");
    }
}
