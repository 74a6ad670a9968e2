//! The trigonometric and hyperbolic functions of a decimal128 (mongod's `Decimal128::sin`,
//! `acos`, `atan2`, `sinh`, ... from Intel's library), computed here in 120-digit decNumber
//! arithmetic by series, argument reduction and `exp`/`ln`/`sqrt`, then rounded half even to
//! 34 digits; and `$degreesToRadians`/`$radiansToDegrees`, a multiplication by mongod's
//! 34-digit constants π/180 and 180/π. Domains are the caller's (mongod's codes); a sine,
//! cosine or tangent of an argument past 1E+70 is `None`: reducing it needs more digits of π
//! than this computes.

use std::cmp::Ordering;
use std::sync::OnceLock;

use dec::{Context, Decimal, Decimal128 as Dec};

use super::{context, from_dec, to_dec};

/// 40 units of 3 digits: the working precision.
type W = Decimal<40>;

/// Digits the series run to (below the type's 120, so a reduction keeps a margin).
const WORK_DIGITS: i32 = 110;

/// The largest adjusted exponent a sine, cosine or tangent argument may have.
const REDUCIBLE_EXPONENT_MAX: i32 = 70;

/// A function computed here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs, reason = "each variant is the function of the same name")]
pub(crate) enum Trig {
    Sin,
    Cos,
    Tan,
    Asin,
    Acos,
    Atan,
    Sinh,
    Cosh,
    Tanh,
    Asinh,
    Acosh,
    Atanh,
    DegreesToRadians,
    RadiansToDegrees,
}

fn cx() -> Context<W> {
    let mut cx = Context::<W>::default();
    // decNumber's exp and ln require exponents within ±999999.
    let ok = cx.set_max_exponent(999_999).is_ok() && cx.set_min_exponent(-999_999).is_ok();
    debug_assert!(ok, "the limits are valid");
    cx
}

fn w(i: i32) -> W {
    W::from(i)
}

/// The order of two wide values (NaN never reaches here).
fn cmp(a: &W, b: &W) -> Ordering {
    cx().partial_cmp(a, b).unwrap_or(Ordering::Equal)
}

/// `10^-digits` relative to `scale`'s magnitude: the size below which a series term no
/// longer changes the sum.
fn negligible(term: &W, scale: &W) -> bool {
    if term.is_zero() {
        return true;
    }
    let adjusted = |d: &W| d.exponent() + i32::try_from(d.digits()).unwrap_or(0);
    let reference = if scale.is_zero() { 0 } else { adjusted(scale) };
    adjusted(term) < reference - WORK_DIGITS - 2
}

/// Σ over k of `x^(first + 2k) / d_k` with `term_{k+1} = term_k × x² × sign / divisor(k)`.
fn series(x: W, first: W, sign: i32, divisor: impl Fn(i32) -> W) -> W {
    let x2 = x * x;
    let mut term = first;
    let mut sum = first;
    for k in 0..2000 {
        term = term * x2 * w(sign) / divisor(k);
        if negligible(&term, &sum) {
            break;
        }
        sum += term;
    }
    sum
}

fn pi() -> W {
    static PI: OnceLock<W> = OnceLock::new();
    *PI.get_or_init(|| {
        // Machin: π = 16 atan(1/5) - 4 atan(1/239).
        w(16) * atan_small(w(1) / w(5)) - w(4) * atan_small(w(1) / w(239))
    })
}

/// atan by its Taylor series, for |x| well below 1.
fn atan_small(x: W) -> W {
    let x2 = x * x;
    let mut power = x;
    let mut sum = x;
    for k in 1..4000 {
        power = power * x2 * w(-1);
        let term = power / w(2 * k + 1);
        if negligible(&term, &sum) {
            break;
        }
        sum += term;
    }
    sum
}

fn atan(x: W) -> W {
    if x.is_infinite() {
        let half = pi() / w(2);
        return if x.is_negative() { -half } else { half };
    }
    if cmp(&abs(x), &w(1)) == Ordering::Greater {
        let half = pi() / w(2);
        let inner = atan(w(1) / x);
        return if x.is_negative() {
            -half - inner
        } else {
            half - inner
        };
    }
    // Three halvings, atan(x) = 2 atan(x / (1 + sqrt(1 + x²))), bring |x| below 0.1.
    let mut y = x;
    for _ in 0..3 {
        y = y / (w(1) + sqrt(w(1) + y * y));
    }
    w(8) * atan_small(y)
}

fn abs(x: W) -> W {
    if x.is_negative() {
        -x
    } else {
        x
    }
}

fn sqrt(x: W) -> W {
    let mut y = x;
    cx().sqrt(&mut y);
    y
}

fn exp(x: W) -> W {
    let mut y = x;
    cx().exp(&mut y);
    y
}

fn ln(x: W) -> W {
    let mut y = x;
    cx().ln(&mut y);
    y
}

/// sin and cos of `x` reduced into [-π, π].
fn sin_cos(x: W) -> (W, W) {
    let two_pi = w(2) * pi();
    let mut k = x / two_pi;
    cx().round(&mut k);
    let r = x - k * two_pi;
    let sin = series(r, r, -1, |k| w((2 * k + 2) * (2 * k + 3)));
    let cos = series(r, w(1), -1, |k| w((2 * k + 1) * (2 * k + 2)));
    (sin, cos)
}

/// sinh by its series near zero, by `exp` elsewhere.
fn sinh(x: W) -> W {
    if cmp(&abs(x), &(w(1) / w(10))) == Ordering::Less {
        return series(x, x, 1, |k| w((2 * k + 2) * (2 * k + 3)));
    }
    let e = exp(x);
    (e - w(1) / e) / w(2)
}

/// atanh by its series near zero, by `ln` elsewhere.
fn atanh(x: W) -> W {
    if cmp(&abs(x), &(w(1) / w(10))) == Ordering::Less {
        let x2 = x * x;
        let mut power = x;
        let mut sum = x;
        for k in 1..4000 {
            power *= x2;
            let term = power / w(2 * k + 1);
            if negligible(&term, &sum) {
                break;
            }
            sum += term;
        }
        return sum;
    }
    ln((w(1) + x) / (w(1) - x)) / w(2)
}

fn wide(f: Trig, x: W) -> Option<W> {
    let adjusted = x.exponent() + i32::try_from(x.digits()).unwrap_or(0);
    let periodic = matches!(f, Trig::Sin | Trig::Cos | Trig::Tan);
    if periodic && x.is_finite() && !x.is_zero() && adjusted > REDUCIBLE_EXPONENT_MAX {
        return None;
    }
    let one = w(1);
    Some(match f {
        Trig::Sin => sin_cos(x).0,
        Trig::Cos => sin_cos(x).1,
        Trig::Tan => {
            let (s, c) = sin_cos(x);
            s / c
        }
        Trig::Atan => atan(x),
        Trig::Asin if cmp(&abs(x), &one) == Ordering::Equal => pi() / w(2) * x,
        Trig::Asin => atan(x / sqrt(one - x * x)),
        Trig::Acos if cmp(&abs(x), &one) == Ordering::Equal => (pi() / w(2)) * (one - x),
        Trig::Acos => pi() / w(2) - atan(x / sqrt(one - x * x)),
        Trig::Sinh => sinh(x),
        Trig::Cosh => {
            let e = exp(x);
            (e + one / e) / w(2)
        }
        Trig::Tanh if cmp(&abs(x), &w(200)) == Ordering::Greater => {
            if x.is_negative() {
                -one
            } else {
                one
            }
        }
        Trig::Tanh => sinh(x) / ((exp(x) + one / exp(x)) / w(2)),
        Trig::Asinh if cmp(&abs(x), &one) == Ordering::Less => atanh(x / sqrt(one + x * x)),
        Trig::Asinh => {
            let magnitude = ln(abs(x) + sqrt(x * x + one));
            if x.is_negative() {
                -magnitude
            } else {
                magnitude
            }
        }
        Trig::Acosh => ln(x + sqrt(x * x - one)),
        Trig::Atanh if cmp(&abs(x), &one) == Ordering::Equal => {
            if x.is_negative() {
                W::infinity() * w(-1)
            } else {
                W::infinity()
            }
        }
        Trig::Atanh => atanh(x),
        Trig::DegreesToRadians | Trig::RadiansToDegrees => return None,
    })
}

/// A decimal128's wide copy, the function, and the result rounded to 34 digits; `None` past
/// the reducible range. NaN passes through.
pub(crate) fn apply(f: Trig, x: Dec) -> Option<Dec> {
    if x.is_nan() {
        return Some(x);
    }
    match f {
        Trig::DegreesToRadians => return Some(context().mul(x, constant(false))),
        Trig::RadiansToDegrees => return Some(context().mul(x, constant(true))),
        _ => {}
    }
    let out = wide(f, W::from(x))?;
    Some(to_dec(&from_dec(context().from_decimal(&out))))
}

/// mongod's `atan2(y, x)`: the angle of the point (x, y), in (-π, π].
pub(crate) fn atan2(y: Dec, x: Dec) -> Dec {
    if y.is_nan() || x.is_nan() {
        return Dec::NAN;
    }
    let (yw, xw) = (W::from(y), W::from(x));
    let pi = pi();
    let out = if x.is_zero() {
        match cmp(&yw, &w(0)) {
            Ordering::Greater => pi / w(2),
            Ordering::Less => -(pi / w(2)),
            Ordering::Equal => yw,
        }
    } else {
        let base = atan(yw / xw);
        match (xw.is_negative(), y.is_negative()) {
            (false, _) => base,
            (true, false) => base + pi,
            (true, true) => base - pi,
        }
    };
    to_dec(&from_dec(context().from_decimal(&out)))
}

/// π/180 (`false`) or 180/π (`true`) to 34 digits, mongod's `kPiOver180`/`k180OverPi`.
fn constant(inverse: bool) -> Dec {
    let value = if inverse {
        w(180) / pi()
    } else {
        pi() / w(180)
    };
    context().from_decimal(&value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Dec {
        context().parse(s).expect("literal")
    }

    fn run(f: Trig, s: &str) -> String {
        from_dec(apply(f, d(s)).expect("in range")).to_string()
    }

    #[test]
    fn constants_are_mongods() {
        assert_eq!(
            from_dec(constant(false)).to_string(),
            "0.01745329251994329576923690768488613"
        );
        assert_eq!(
            from_dec(constant(true)).to_string(),
            "57.29577951308232087679815481410517"
        );
        assert_eq!(
            run(Trig::RadiansToDegrees, "1"),
            "57.29577951308232087679815481410517"
        );
    }

    /// Expected values: mpmath at 80 digits, rounded half even to 34.
    #[test]
    fn functions_round_to_34_digits() {
        assert_eq!(run(Trig::Sin, "0"), "0");
        assert_eq!(run(Trig::Sin, "1"), "0.8414709848078965066525023216302990");
        assert_eq!(run(Trig::Cos, "1"), "0.5403023058681397174009366074429766");
        assert_eq!(run(Trig::Tan, "1"), "1.557407724654902230506974807458360");
        assert_eq!(run(Trig::Atan, "1"), "0.7853981633974483096156608458198757");
        assert_eq!(run(Trig::Asin, "1"), "1.570796326794896619231321691639751");
        assert_eq!(run(Trig::Acos, "-1"), "3.141592653589793238462643383279503");
        assert_eq!(
            run(Trig::Asin, "0.5"),
            "0.5235987755982988730771072305465838"
        );
        assert_eq!(run(Trig::Sinh, "1"), "1.175201193643801456882381850595601");
        assert_eq!(run(Trig::Cosh, "1"), "1.543080634815243778477905620757062");
        assert_eq!(run(Trig::Tanh, "1"), "0.7615941559557648881194582826047936");
        assert_eq!(
            run(Trig::Asinh, "1"),
            "0.8813735870195430252326093249797923"
        );
        assert_eq!(run(Trig::Acosh, "2"), "1.316957896924816708625046347307968");
        assert_eq!(
            run(Trig::Atanh, "0.5"),
            "0.5493061443340548456976226184612629"
        );
        // Inexact, so all 34 digits are kept.
        assert_eq!(
            run(Trig::Sin, "1E-40"),
            "1.000000000000000000000000000000000E-40"
        );
        assert_eq!(run(Trig::Sin, "NaN"), "NaN");
        assert!(apply(Trig::Sin, d("1E+80")).is_none());
        let a = from_dec(atan2(d("1"), d("-1"))).to_string();
        assert_eq!(a, "2.356194490192344928846982537459627");
    }
}
