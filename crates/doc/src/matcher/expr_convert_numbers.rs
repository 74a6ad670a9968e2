//! The number, ObjectId and date arithmetic under `$convert` (`expr_convert.rs`): strings read
//! as mongod's `NumberParser` reads them (whole string, base 10 for integers, "0x" refused,
//! reasons "No digits", "Did not consume whole string.", "Overflow"), doubles and decimals
//! narrowed with mongod's NaN, infinity and overflow messages, decimal128 values built
//! exactly in BSON's binary-integer-decimal layout, and ISO-8601 dates. Every failure a
//! `$convert` may replace by `onError` is ConversionFailure; nothing here rounds a decimal
//! differently from mongod: what it cannot reproduce it refuses (NotImplemented).

use bson::oid::ObjectId;
use bson::Decimal128;

use super::failure;
use crate::matcher::expr::error;
use crate::matcher::expr_format::format_g;
use crate::{ErrorCode, MongoError};

const SUFFIX: &str = "in $convert with no onError value";

fn parse_failure(s: &str, reason: &str) -> MongoError {
    failure(format!("Failed to parse number '{s}' {SUFFIX}: {reason}"))
}

fn overflow(shown: &str) -> MongoError {
    failure(format!(
        "Conversion would overflow target type {SUFFIX}: {shown}"
    ))
}

fn check_not_hex(s: &str) -> Result<(), MongoError> {
    if s.starts_with("0x") {
        return Err(failure(format!("Illegal hexadecimal input {SUFFIX}: {s}")));
    }
    Ok(())
}

/// A base-10 integer in `[min, max]`, with an optional sign and nothing else.
pub(super) fn parse_integer(s: &str, min: i128, max: i128) -> Result<i128, MongoError> {
    check_not_hex(s)?;
    if s.is_empty() {
        return Err(parse_failure(s, "No digits"));
    }
    let (negative, magnitude) = match s.as_bytes()[0] {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let digits = magnitude.bytes().take_while(u8::is_ascii_digit).count();
    if digits != magnitude.len() {
        return Err(parse_failure(s, "Did not consume whole string."));
    }
    if digits == 0 {
        return Err(parse_failure(s, "Did not consume any digits"));
    }
    let mut value: i128 = 0;
    for b in magnitude.bytes() {
        value = value * 10 + i128::from(b - b'0');
        if value > max.max(-min) {
            return Err(parse_failure(s, "Overflow"));
        }
    }
    let value = if negative { -value } else { value };
    if value < min || value > max {
        return Err(parse_failure(s, "Overflow"));
    }
    Ok(value)
}

/// A double: decimal or exponent notation, `inf`/`infinity`/`nan`.
pub(super) fn parse_float(s: &str) -> Result<f64, MongoError> {
    check_not_hex(s)?;
    if s.is_empty() {
        return Err(parse_failure(s, "No digits"));
    }
    let d: f64 = s
        .parse()
        .map_err(|_| parse_failure(s, "Did not consume whole string."))?;
    let said_infinite = s.to_ascii_lowercase().contains("inf");
    if d.is_infinite() && !said_infinite {
        return Err(parse_failure(s, "Out of range"));
    }
    Ok(d)
}

/// Whether `s` is a number as text: `[+-]` then `inf`, `infinity`, `nan`, or digits with at
/// most one point and an optional exponent.
fn is_number_text(s: &str) -> bool {
    let unsigned = s.strip_prefix(['+', '-']).unwrap_or(s);
    if ["inf", "infinity", "nan"].contains(&unsigned.to_ascii_lowercase().as_str()) {
        return true;
    }
    let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
        Some(i) => (&unsigned[..i], Some(&unsigned[i + 1..])),
        None => (unsigned, None),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = |t: &str| t.bytes().all(|b| b.is_ascii_digit());
    let mantissa_ok = digits(whole) && digits(fraction) && whole.len() + fraction.len() > 0;
    let exponent_ok = exponent.is_none_or(|e| {
        let e = e.strip_prefix(['+', '-']).unwrap_or(e);
        !e.is_empty() && digits(e)
    });
    mantissa_ok && exponent_ok
}

/// A decimal128 read digit for digit; more significant digits than it holds are rounded half
/// even to 34, as mongod's `Decimal128(string)` rounds; an exponent past its range is refused.
pub(super) fn parse_decimal(s: &str) -> Result<Decimal128, MongoError> {
    check_not_hex(s)?;
    if s.is_empty() {
        return Err(parse_failure(s, "No digits"));
    }
    if !is_number_text(s) {
        return Err(parse_failure(s, "Did not consume whole string."));
    }
    s.parse::<Decimal128>().or_else(|e| {
        let rounded = crate::decimal::context()
            .parse(s)
            .ok()
            .filter(|d| d.is_finite());
        rounded.map(crate::decimal::from_dec).ok_or_else(|| {
            error(
                ErrorCode::NotImplemented,
                format!("ShaleDB cannot convert '{s}' to decimal as mongod does ({e})"),
            )
        })
    })
}

/// BID layout: sign bit, 14-bit biased exponent, 113-bit coefficient (below 10^34).
fn decimal_bits(negative: bool, coefficient: u128, exponent: i32) -> Decimal128 {
    assert!(
        coefficient < 10u128.pow(34),
        "a decimal128 coefficient has 34 digits"
    );
    let biased = u128::try_from(exponent + 6176).unwrap_or(0);
    let bits = (u128::from(negative) << 127) | (biased << 113) | coefficient;
    Decimal128::from_bytes(bits.to_le_bytes())
}

pub(super) fn decimal_from_i64(i: i64) -> Decimal128 {
    decimal_bits(i < 0, u128::from(i.unsigned_abs()), 0)
}

/// mongod's `Decimal128(double)`: the double's value rounded to 15 significant digits, all 15
/// kept (`0.1` gives `0.100000000000000`); zero, infinities and NaN as themselves.
pub(super) fn decimal_from_f64(d: f64) -> Decimal128 {
    let negative = d.is_sign_negative();
    if d.is_nan() {
        return Decimal128::from_bytes((0x1f_u128 << 122).to_le_bytes());
    }
    if d.is_infinite() {
        let bits = (u128::from(negative) << 127) | (0x1e_u128 << 122);
        return Decimal128::from_bytes(bits.to_le_bytes());
    }
    if d == 0.0 {
        return decimal_bits(negative, 0, 0);
    }
    let text = format!("{:.14e}", d.abs());
    let (mantissa, exponent) = text.split_once('e').unwrap_or((&text, "0"));
    let coefficient: u128 = mantissa.replace('.', "").parse().unwrap_or(0);
    let exponent: i32 = exponent.parse().unwrap_or(0);
    decimal_bits(negative, coefficient, exponent - 14)
}

/// A decimal's parts: `None` for NaN, `Some(None)` for ±infinity.
fn decimal_parts(d: &Decimal128) -> (bool, Option<Option<(u128, i32)>>) {
    let bits = u128::from_le_bytes(d.bytes());
    let negative = bits >> 127 == 1;
    match (bits >> 122) & 0x1f {
        0x1f => return (negative, None),
        0x1e => return (negative, Some(None)),
        _ => {}
    }
    let (exponent, coefficient) = if (bits >> 125) & 0b11 == 0b11 {
        ((bits >> 111) & 0x3fff, 0) // non-canonical: zero
    } else {
        ((bits >> 113) & 0x3fff, bits & ((1u128 << 113) - 1))
    };
    let coefficient = if coefficient >= 10u128.pow(34) {
        0
    } else {
        coefficient
    };
    (negative, Some(Some((coefficient, exponent as i32 - 6176))))
}

/// A decimal truncated toward zero into `[min, max]`.
pub(super) fn decimal_to_integer(d: &Decimal128, min: i128, max: i128) -> Result<i128, MongoError> {
    let (negative, parts) = decimal_parts(d);
    let Some(parts) = parts else {
        return Err(failure(format!(
            "Attempt to convert NaN value to integer type {SUFFIX}"
        )));
    };
    let Some((coefficient, exponent)) = parts else {
        return Err(failure(format!(
            "Attempt to convert infinity value to integer type {SUFFIX}"
        )));
    };
    let magnitude = if exponent >= 0 {
        u32::try_from(exponent)
            .ok()
            .and_then(|e| 10u128.checked_pow(e))
            .and_then(|scale| coefficient.checked_mul(scale))
            .filter(|_| coefficient != 0)
            .or((coefficient == 0).then_some(0))
    } else {
        let scale = u32::try_from(-exponent)
            .ok()
            .and_then(|e| 10u128.checked_pow(e));
        Some(scale.map_or(0, |s| coefficient / s))
    };
    let value = magnitude
        .and_then(|m| i128::try_from(m).ok())
        .map(|m| if negative { -m } else { m })
        .filter(|v| (min..=max).contains(v));
    value.ok_or_else(|| overflow(&d.to_string()))
}

/// A decimal as the nearest double; overflow and underflow fail, as mongod's flags do.
pub(super) fn decimal_to_f64(d: &Decimal128) -> Result<f64, MongoError> {
    let out = crate::compare::decimal128_to_f64(d);
    let (_, parts) = decimal_parts(d);
    let finite_nonzero = matches!(parts, Some(Some((c, _))) if c != 0);
    if finite_nonzero && (out.is_infinite() || out == 0.0 || out.is_subnormal()) {
        return Err(overflow(&d.to_string()));
    }
    Ok(out)
}

fn check_finite(d: f64) -> Result<(), MongoError> {
    if d.is_nan() {
        return Err(failure(format!(
            "Attempt to convert NaN value to integer type {SUFFIX}"
        )));
    }
    if d.is_infinite() {
        return Err(failure(format!(
            "Attempt to convert infinity value to integer type {SUFFIX}"
        )));
    }
    Ok(())
}

pub(super) fn double_to_int(d: f64) -> Result<i32, MongoError> {
    check_finite(d)?;
    if d < f64::from(i32::MIN) || d > f64::from(i32::MAX) {
        return Err(overflow(&format_g(d)));
    }
    Ok(d as i32)
}

pub(super) fn double_to_long(d: f64) -> Result<i64, MongoError> {
    check_finite(d)?;
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if !(-TWO_63..TWO_63).contains(&d) {
        return Err(overflow(&format_g(d)));
    }
    Ok(d as i64)
}

/// 24 hexadecimal digits.
pub(super) fn parse_object_id(s: &str) -> Result<ObjectId, MongoError> {
    let reason = if s.len() != 24 {
        format!(
            "Invalid string length for parsing to OID, expected 24 but found {}",
            s.len()
        )
    } else {
        match ObjectId::parse_str(s) {
            Ok(oid) => return Ok(oid),
            Err(_) => "Invalid character found in hex string".to_owned(),
        }
    };
    Err(failure(format!(
        "Failed to parse objectId '{s}' {SUFFIX}: {reason}"
    )))
}

/// An ISO-8601 date, `YYYY-MM-DD` with an optional time (`T` or space, `HH:MM[:SS[.fff]]`)
/// and zone (`Z` or `±HH[:]MM`), in milliseconds since the epoch; UTC when no zone is given.
pub(super) fn parse_date(s: &str, days: fn(i64, u32, u32) -> i64) -> Result<i64, MongoError> {
    parse_iso(s, days).ok_or_else(|| {
        failure(format!(
            "Error parsing date string '{s}'; ShaleDB reads ISO-8601 dates \
             (YYYY-MM-DD[THH:MM[:SS[.fff]]][Z|+HH:MM])"
        ))
    })
}

fn number(s: &str, len: usize) -> Option<u32> {
    (s.len() == len && s.bytes().all(|b| b.is_ascii_digit()))
        .then(|| s.parse().ok())
        .flatten()
}

fn parse_iso(s: &str, days: fn(i64, u32, u32) -> i64) -> Option<i64> {
    let (date, rest) = (s.get(..10)?, s.get(10..)?);
    let (year, month, day) = (
        number(date.get(..4)?, 4)?,
        number(date.get(5..7)?, 2)?,
        number(date.get(8..)?, 2)?,
    );
    let bytes = date.as_bytes();
    if bytes[4] != b'-'
        || bytes[7] != b'-'
        || !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
    {
        return None;
    }
    let mut millis = days(i64::from(year), month, day) * 86_400_000;
    if rest.is_empty() {
        return Some(millis);
    }
    let rest = rest.strip_prefix(['T', ' '])?;
    let zone_at = rest.find(['Z', '+', '-']).unwrap_or(rest.len());
    let (time, zone) = rest.split_at(zone_at);
    millis += parse_time(time)?;
    millis -= parse_zone(zone)?;
    Some(millis)
}

fn parse_time(time: &str) -> Option<i64> {
    let (clock, fraction) = time.split_once('.').unwrap_or((time, ""));
    let mut parts = clock.split(':');
    let hour = number(parts.next()?, 2)?;
    let minute = number(parts.next()?, 2)?;
    let second = parts.next().map_or(Some(0), |p| number(p, 2))?;
    if parts.next().is_some() || hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let milli = if fraction.is_empty() {
        0
    } else {
        let digits: String = fraction.chars().chain("00".chars()).take(3).collect();
        number(&digits, 3).filter(|_| fraction.bytes().all(|b| b.is_ascii_digit()))?
    };
    Some(
        ((i64::from(hour) * 60 + i64::from(minute)) * 60 + i64::from(second)) * 1000
            + i64::from(milli),
    )
}

fn parse_zone(zone: &str) -> Option<i64> {
    if zone.is_empty() || zone == "Z" {
        return Some(0);
    }
    let sign = if zone.starts_with('-') { -1 } else { 1 };
    let digits: String = zone[1..].chars().filter(|c| *c != ':').collect();
    let hours = number(digits.get(..2)?, 2)?;
    let minutes = number(digits.get(2..)?, 2)?;
    Some(sign * (i64::from(hours) * 60 + i64::from(minutes)) * 60_000)
}
