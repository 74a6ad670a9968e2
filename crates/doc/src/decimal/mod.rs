//! decimal128 values as mongod computes with them: BSON's BID bytes (`bson::Decimal128`)
//! read into and written back from libdecNumber's `decQuad` (the `dec` crate's `Decimal128`,
//! IEEE 754-2008 decimal128: 34 digits, exponents -6176..=6111, round half even), and the
//! conversions mongod's `Decimal128` constructors make: int32/int64 exactly (exponent 0),
//! doubles to 15 significant digits (`Decimal128(double)`, what `coerceToDecimal` gives) or to
//! 34 (`kRoundTo34Digits`, a running double total widened to decimal), and back to the
//! nearest double. The operators live in `ops.rs`, the trigonometric functions in `trig.rs`,
//! the exact comparisons across numeric types in `order.rs`. Nothing here reads documents or
//! knows an operator's name.
//!
//! The conversion is by value: a BID coefficient and exponent become the `decQuad` with the
//! same coefficient and exponent (so `1.50` stays `1.50`); NaN keeps its sign and drops its
//! payload (mongod writes no payloads); a non-canonical BID coefficient (above 10^34 - 1) is
//! zero, as the standard says.

mod ops;
mod order;
mod trig;

pub(crate) use ops::{DecOps, Rounding};
pub(crate) use order::{cmp_dec_dec, cmp_dec_f64, cmp_dec_i64};
pub(crate) use trig::{apply as trig, atan2, Trig};

use bson::Decimal128 as Bid;
use dec::{Context, Decimal128 as Dec};

/// The largest coefficient a decimal128 holds: 10^34 - 1.
const COEFFICIENT_MAX: u128 = 9_999_999_999_999_999_999_999_999_999_999_999;
/// BID's exponent bias: a stored exponent field of 0 is 10^-6176.
const EXPONENT_BIAS: i32 = 6176;
/// The largest exponent a coefficient may carry (10^6111).
const EXPONENT_MAX: i32 = 6111;

const _: () = assert!(
    COEFFICIENT_MAX < 1 << 113,
    "a canonical coefficient fits 113 bits"
);

/// What a BID decimal128 holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Parts {
    /// NaN (quiet or signalling), with its sign bit.
    Nan(bool),
    /// Infinity, negative when true.
    Infinity(bool),
    /// `(-1)^negative × coefficient × 10^exponent`.
    Finite {
        negative: bool,
        coefficient: u128,
        exponent: i32,
    },
}

/// Read the parts of BID bytes.
pub(crate) fn parts(b: &Bid) -> Parts {
    let bits = u128::from_le_bytes(b.bytes());
    let negative = bits >> 127 == 1;
    match (bits >> 122) & 0x1f {
        0x1f => return Parts::Nan(negative),
        0x1e => return Parts::Infinity(negative),
        _ => {}
    }
    let (exponent_field, coefficient) = if (bits >> 125) & 0b11 == 0b11 {
        // The large-coefficient form starts at 2^113 > 10^34 - 1: non-canonical, so zero.
        ((bits >> 111) & 0x3fff, 0)
    } else {
        ((bits >> 113) & 0x3fff, bits & ((1u128 << 113) - 1))
    };
    let coefficient = if coefficient > COEFFICIENT_MAX {
        0
    } else {
        coefficient
    };
    Parts::Finite {
        negative,
        coefficient,
        // The field has 14 bits, so this never truncates.
        exponent: exponent_field as i32 - EXPONENT_BIAS,
    }
}

/// BID bytes of `parts`; a finite value must hold a canonical coefficient and an exponent in
/// range (every value `ops` produces does).
pub(crate) fn from_parts(p: Parts) -> Bid {
    let bits = match p {
        Parts::Nan(negative) => (u128::from(negative) << 127) | (0x1f_u128 << 122),
        Parts::Infinity(negative) => (u128::from(negative) << 127) | (0x1e_u128 << 122),
        Parts::Finite {
            negative,
            coefficient,
            exponent,
        } => {
            assert!(coefficient <= COEFFICIENT_MAX, "coefficient has 34 digits");
            assert!(
                (-EXPONENT_BIAS..=EXPONENT_MAX).contains(&exponent),
                "exponent {exponent} out of decimal128's range"
            );
            let field = u128::try_from(exponent + EXPONENT_BIAS).unwrap_or(0);
            (u128::from(negative) << 127) | (field << 113) | coefficient
        }
    };
    Bid::from_bytes(bits.to_le_bytes())
}

/// A context with decimal128's precision, range and rounding (half even), no traps.
pub(crate) fn context() -> Context<Dec> {
    Context::<Dec>::default()
}

/// The `decQuad` holding the same value (and exponent) as BID bytes.
pub(crate) fn to_dec(b: &Bid) -> Dec {
    let text = match parts(b) {
        Parts::Nan(negative) => format!("{}NaN", if negative { "-" } else { "" }),
        Parts::Infinity(negative) => format!("{}Infinity", if negative { "-" } else { "" }),
        Parts::Finite {
            negative,
            coefficient,
            exponent,
        } => format!(
            "{}{coefficient}E{exponent}",
            if negative { "-" } else { "" }
        ),
    };
    // Every string above is a valid decimal128 literal with at most 34 digits and an
    // exponent in range, so the parse is exact and cannot fail; NaN is the safe fallback.
    context().parse(text.as_str()).unwrap_or(Dec::NAN)
}

/// The BID bytes of a `decQuad`.
pub(crate) fn from_dec(d: Dec) -> Bid {
    from_parts(dec_parts(d))
}

/// The parts of a `decQuad`.
pub(crate) fn dec_parts(d: Dec) -> Parts {
    // The sign bit, for zeros and NaNs too (`is_negative` is false for them).
    let negative = d.is_signed();
    if d.is_nan() {
        return Parts::Nan(negative);
    }
    if d.is_infinite() {
        return Parts::Infinity(negative);
    }
    Parts::Finite {
        negative,
        coefficient: d.coefficient().unsigned_abs(),
        exponent: d.exponent(),
    }
}

/// mongod's `Decimal128(int64)`: exact, exponent 0.
pub(crate) fn from_i64(i: i64) -> Dec {
    from_dec_parts(i < 0, u128::from(i.unsigned_abs()), 0)
}

/// An i128 (an exact integer total): exact up to 34 digits, rounded half even beyond.
pub(crate) fn from_i128(i: i128) -> Dec {
    context().from_i128(i)
}

fn from_dec_parts(negative: bool, coefficient: u128, exponent: i32) -> Dec {
    to_dec(&from_parts(Parts::Finite {
        negative,
        coefficient,
        exponent,
    }))
}

/// mongod's `Decimal128(double)` (`kRoundTo15Digits`): the double's value rounded half even
/// to 15 significant digits, all 15 kept (`0.1` gives `0.100000000000000`); zeros, infinities
/// and NaN as themselves.
pub(crate) fn from_f64_15(d: f64) -> Dec {
    from_f64_digits(d, 15)
}

/// mongod's `Decimal128(double, kRoundTo34Digits)`: the double's exact value when it has at
/// most 34 significant digits (trailing zeros dropped, never past exponent 0 for an integer),
/// else rounded half even to 34.
pub(crate) fn from_f64_34(d: f64) -> Dec {
    let Some(dec) = special_f64(d) else {
        return reduce_to_integer_or_shortest(from_f64_digits(d, 34));
    };
    dec
}

fn special_f64(d: f64) -> Option<Dec> {
    let negative = d.is_sign_negative();
    if d.is_nan() {
        return Some(to_dec(&from_parts(Parts::Nan(false))));
    }
    if d.is_infinite() {
        return Some(to_dec(&from_parts(Parts::Infinity(negative))));
    }
    (d == 0.0).then(|| from_dec_parts(negative, 0, 0))
}

fn from_f64_digits(d: f64, digits: usize) -> Dec {
    if let Some(special) = special_f64(d) {
        return special;
    }
    // Rust prints the exact binary value rounded to `digits` significant digits.
    let text = format!("{:.*e}", digits - 1, d.abs());
    let (mantissa, exponent) = text.split_once('e').unwrap_or((&text, "0"));
    let coefficient: u128 = mantissa.replace('.', "").parse().unwrap_or(0);
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let exponent = exponent - i32::try_from(digits - 1).unwrap_or(0);
    from_dec_parts(d.is_sign_negative(), coefficient, exponent)
}

/// Drop trailing zeros, but keep an integer at exponent 0 rather than a positive exponent.
fn reduce_to_integer_or_shortest(d: Dec) -> Dec {
    let Parts::Finite {
        negative,
        mut coefficient,
        mut exponent,
    } = dec_parts(d)
    else {
        return d;
    };
    while exponent < 0 && coefficient != 0 && coefficient % 10 == 0 {
        coefficient /= 10;
        exponent += 1;
    }
    from_dec_parts(negative, coefficient, exponent)
}

/// The value as an int64 when it is a whole number in int64's range (any exponent: `5.00`
/// and `5E+2` qualify).
pub(crate) fn to_i64_exact(d: Dec) -> Option<i64> {
    let Parts::Finite {
        negative,
        coefficient,
        exponent,
    } = dec_parts(d)
    else {
        return None;
    };
    let (mut c, mut e) = (coefficient, exponent);
    while e < 0 && c != 0 {
        if c % 10 != 0 {
            return None;
        }
        c /= 10;
        e += 1;
    }
    while e > 0 && c != 0 {
        c = c.checked_mul(10)?;
        e -= 1;
    }
    let c = i128::try_from(c).ok()?;
    i64::try_from(if negative { -c } else { c }).ok()
}

/// The nearest double (round half even); NaN, infinities and zeros keep their sign.
pub(crate) fn to_f64(d: Dec) -> f64 {
    crate::compare::decimal128_to_f64(&from_dec(d))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bid(bits: u128) -> Bid {
        Bid::from_bytes(bits.to_le_bytes())
    }

    fn round_trip(b: Bid) -> Bid {
        from_dec(to_dec(&b))
    }

    #[test]
    fn special_values_round_trip() {
        let nan = bid(0x7c_u128 << 120);
        let neg_nan = bid((0xfc_u128) << 120);
        let inf = bid(0x78_u128 << 120);
        let neg_inf = bid(0xf8_u128 << 120);
        let neg_zero = bid((1u128 << 127) | ((6176u128) << 113));
        assert_eq!(round_trip(nan).bytes(), nan.bytes());
        assert_eq!(round_trip(neg_nan).bytes(), neg_nan.bytes());
        assert_eq!(round_trip(inf).bytes(), inf.bytes());
        assert_eq!(round_trip(neg_inf).bytes(), neg_inf.bytes());
        assert_eq!(round_trip(neg_zero).bytes(), neg_zero.bytes());
        assert!(to_dec(&nan).is_nan());
        assert!(to_dec(&neg_zero).is_zero() && to_dec(&neg_zero).is_signed());
        // A signalling NaN reads as NaN (mongod never stores one).
        assert!(to_dec(&bid(0x7e_u128 << 120)).is_nan());
    }

    #[test]
    fn extreme_exponents_and_coefficients_round_trip() {
        for text in [
            "9.999999999999999999999999999999999E+6144",
            "-9.999999999999999999999999999999999E+6144",
            "1E-6176",
            "-1E-6176",
            "0E-6176",
            "0E+6111",
            "1.000000000000000000000000000000000",
            "1.50",
            "-0.001",
            "12345678901234567890123456789012.34",
        ] {
            let b: Bid = text.parse().expect("valid literal");
            assert_eq!(round_trip(b).bytes(), b.bytes(), "{text}");
            assert_eq!(to_dec(&b).to_string(), b.to_string(), "{text}");
        }
    }

    #[test]
    fn non_canonical_coefficients_are_zero() {
        // Large-coefficient form: exponent field 6176, coefficient 2^113 + ... > 10^34 - 1.
        let large = bid((0b11u128 << 125) | (6176u128 << 111) | 5);
        assert!(to_dec(&large).is_zero());
        let over = bid((6176u128 << 113) | (COEFFICIENT_MAX + 1));
        assert!(to_dec(&over).is_zero());
    }

    #[test]
    fn doubles_convert_as_mongod_does() {
        assert_eq!(from_f64_15(0.1).to_string(), "0.100000000000000");
        assert_eq!(from_f64_15(2.5).to_string(), "2.50000000000000");
        assert_eq!(from_f64_15(-1e300).to_string(), "-1.00000000000000E+300");
        assert_eq!(
            from_f64_34(0.1).to_string(),
            "0.1000000000000000055511151231257827"
        );
        assert_eq!(from_f64_34(2.5).to_string(), "2.5");
        assert_eq!(from_f64_34(3.0).to_string(), "3");
        assert_eq!(from_f64_34(1e20).to_string(), "100000000000000000000");
        assert!(from_f64_34(f64::NAN).is_nan());
        assert!(from_f64_34(f64::NEG_INFINITY).is_infinite());
        assert!(from_f64_34(-0.0).is_signed());
        assert_eq!(from_i64(i64::MIN).to_string(), "-9223372036854775808");
        assert_eq!(to_f64(from_f64_15(0.1)), 0.1);
        let d = |s: &str| context().parse(s).expect("literal");
        assert_eq!(to_i64_exact(d("5.00")), Some(5));
        assert_eq!(to_i64_exact(d("-5E+2")), Some(-500));
        assert_eq!(to_i64_exact(d("-0E-30")), Some(0));
        assert_eq!(to_i64_exact(d("5.5")), None);
        assert_eq!(to_i64_exact(d("9223372036854775808")), None);
        assert_eq!(to_i64_exact(d("-9223372036854775808")), Some(i64::MIN));
        assert_eq!(to_i64_exact(d("Infinity")), None);
    }
}
