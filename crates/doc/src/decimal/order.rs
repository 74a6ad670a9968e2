//! Exact comparison of a decimal128 with a decimal128, an int64 or a double, as mongod's
//! `compareDecimals`/`compareDecimalToLong`/`compareDecimalToDouble` order them: NaN equals
//! NaN and sits below every other number, -0 equals 0, and a decimal and a double compare by
//! their exact values (`NumberDecimal("0.1")` is below the double `0.1`, whose exact value is
//! 0.1000000000000000055511151231257827...). Nothing here rounds one side to the other.

use std::cmp::Ordering;

use dec::{Context, Decimal, Decimal128 as Dec};

use super::{context, from_i64, to_f64};

/// Units (3 digits each) that hold any double's exact decimal expansion: at most 767
/// significant digits.
const EXACT_UNITS: usize = 260;

/// Significant digits asked of the formatter: more than a double's expansion ever has.
const EXACT_DIGITS: usize = 770;

const _: () = assert!(
    EXACT_UNITS * 3 >= EXACT_DIGITS,
    "the expansion fits the type"
);

/// `a` against `b`, NaN lowest and equal to itself.
pub(crate) fn cmp_dec_dec(a: Dec, b: Dec) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
        (false, false) => context().partial_cmp(a, b).unwrap_or(Ordering::Equal),
    }
}

/// `a` against an int64 (exact: every int64 is a decimal128).
pub(crate) fn cmp_dec_i64(a: Dec, i: i64) -> Ordering {
    cmp_dec_dec(a, from_i64(i))
}

/// `a` against a double, by exact values.
pub(crate) fn cmp_dec_f64(a: Dec, f: f64) -> Ordering {
    match (a.is_nan(), f.is_nan()) {
        (true, true) => return Ordering::Equal,
        (true, false) => return Ordering::Less,
        (false, true) => return Ordering::Greater,
        (false, false) => {}
    }
    // Rounding to nearest is monotone: when `a`'s nearest double differs from `f`, it lies on
    // the same side of `f` as `a` does. Infinities and overflow land here too.
    let nearest = to_f64(a);
    match nearest.partial_cmp(&f) {
        Some(Ordering::Equal) | None => {}
        Some(other) => return other,
    }
    if f.is_infinite() {
        // `a` rounds to the same infinity: it is that infinity, or finite beyond DBL_MAX.
        return if a.is_infinite() {
            Ordering::Equal
        } else if f > 0.0 {
            Ordering::Less
        } else {
            Ordering::Greater
        };
    }
    if f.fract() == 0.0 && f.abs() < 9.0e18 {
        // An integer double is an exact int64.
        return cmp_dec_i64(a, f as i64);
    }
    cmp_exact(a, f)
}

/// `a` against the exact decimal expansion of a finite double, in a precision that holds it.
fn cmp_exact(a: Dec, f: f64) -> Ordering {
    let mut cx = Context::<Decimal<EXACT_UNITS>>::default();
    let text = format!("{:.*e}", EXACT_DIGITS - 1, f);
    let Ok(exact) = cx.parse(text.as_str()) else {
        return to_f64(a).partial_cmp(&f).unwrap_or(Ordering::Equal);
    };
    let wide: Decimal<EXACT_UNITS> = Decimal::from(a);
    cx.partial_cmp(&wide, &exact).unwrap_or(Ordering::Equal)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Dec {
        context().parse(s).expect("valid literal")
    }

    #[test]
    fn decimals_order_with_nan_lowest() {
        assert_eq!(cmp_dec_dec(d("NaN"), d("-Infinity")), Ordering::Less);
        assert_eq!(cmp_dec_dec(d("NaN"), d("-NaN")), Ordering::Equal);
        assert_eq!(cmp_dec_dec(d("-0"), d("0E+5")), Ordering::Equal);
        assert_eq!(cmp_dec_dec(d("1.0"), d("1")), Ordering::Equal);
        assert_eq!(cmp_dec_dec(d("1E-6176"), d("0")), Ordering::Greater);
        assert_eq!(
            cmp_dec_i64(d("9223372036854775807.5"), i64::MAX),
            Ordering::Greater
        );
        assert_eq!(
            cmp_dec_i64(d("-9223372036854775808"), i64::MIN),
            Ordering::Equal
        );
    }

    #[test]
    fn decimals_and_doubles_compare_exactly() {
        assert_eq!(cmp_dec_f64(d("0.1"), 0.1), Ordering::Less);
        assert_eq!(
            cmp_dec_f64(d("0.1000000000000000055511151231257827"), 0.1),
            Ordering::Less
        );
        assert_eq!(
            cmp_dec_f64(d("0.1000000000000000055511151231257828"), 0.1),
            Ordering::Greater
        );
        assert_eq!(cmp_dec_f64(d("0.5"), 0.5), Ordering::Equal);
        assert_eq!(cmp_dec_f64(d("0.3"), 0.3), Ordering::Greater);
        assert_eq!(cmp_dec_f64(d("5"), 5.0), Ordering::Equal);
        assert_eq!(cmp_dec_f64(d("-0"), 0.0), Ordering::Equal);
        assert_eq!(cmp_dec_f64(d("1E+400"), f64::MAX), Ordering::Greater);
        assert_eq!(cmp_dec_f64(d("1E+400"), f64::INFINITY), Ordering::Less);
        assert_eq!(cmp_dec_f64(d("Infinity"), f64::INFINITY), Ordering::Equal);
        assert_eq!(
            cmp_dec_f64(d("-Infinity"), f64::NEG_INFINITY),
            Ordering::Equal
        );
        assert_eq!(cmp_dec_f64(d("1E-400"), 0.0), Ordering::Greater);
        assert_eq!(cmp_dec_f64(d("-1E-400"), 0.0), Ordering::Less);
        assert_eq!(cmp_dec_f64(d("4.9E-324"), 5e-324), Ordering::Less);
        assert_eq!(cmp_dec_f64(d("NaN"), f64::NAN), Ordering::Equal);
        assert_eq!(cmp_dec_f64(d("NaN"), f64::NEG_INFINITY), Ordering::Less);
        assert_eq!(cmp_dec_f64(d("-Infinity"), f64::NAN), Ordering::Greater);
        assert_eq!(cmp_dec_f64(d("1E+19"), 1e19), Ordering::Equal);
    }
}
