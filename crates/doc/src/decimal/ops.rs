//! mongod's `Decimal128` operations over `decQuad` values: add, subtract, multiply, divide,
//! `modulo` (fmod: truncated quotient, the dividend's sign), `toAbs` (the sign bit cleared,
//! NaN included), `quantize` under a rounding mode (`$ceil $floor $round $trunc`),
//! `squareRoot`, `exponential`, `logarithm` (natural, base 10, any base) and `power`. Each
//! result is rounded half even to 34 digits as IEEE 754-2008 decimal128 requires; the
//! transcendental ones are computed by decNumber at 34 digits, which rounds them correctly in
//! all but the rarest cases (mongod's Intel library may differ there in the last digit).
//! Argument checks (division by zero, domains) are the callers': they own mongod's codes.

use dec::{Context, Decimal, Decimal128 as Dec};

use super::{context, dec_parts, from_dec, from_parts, to_dec, Parts};

/// The working precision of decNumber's arbitrary-precision type for transcendental
/// functions: 12 units of 3 digits (36), set to decimal128's 34 in its context.
const UNITS: usize = 12;

/// How `quantize` rounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rounding {
    /// To nearest, ties to even (`$round`).
    HalfEven,
    /// Toward zero (`$trunc`).
    Down,
    /// Toward +infinity (`$ceil`).
    Ceiling,
    /// Toward -infinity (`$floor`).
    Floor,
}

impl Rounding {
    fn dec(self) -> dec::Rounding {
        match self {
            Rounding::HalfEven => dec::Rounding::HalfEven,
            Rounding::Down => dec::Rounding::Down,
            Rounding::Ceiling => dec::Rounding::Ceiling,
            Rounding::Floor => dec::Rounding::Floor,
        }
    }
}

/// The operations, with the context they round in.
pub(crate) struct DecOps {
    cx: Context<Dec>,
}

impl Default for DecOps {
    fn default() -> Self {
        DecOps { cx: context() }
    }
}

impl DecOps {
    /// `a + b`.
    pub(crate) fn add(&mut self, a: Dec, b: Dec) -> Dec {
        self.cx.add(a, b)
    }

    /// `a - b`.
    pub(crate) fn sub(&mut self, a: Dec, b: Dec) -> Dec {
        self.cx.sub(a, b)
    }

    /// `a × b`.
    pub(crate) fn mul(&mut self, a: Dec, b: Dec) -> Dec {
        self.cx.mul(a, b)
    }

    /// `a ÷ b` (the caller refuses a zero divisor where mongod does).
    pub(crate) fn div(&mut self, a: Dec, b: Dec) -> Dec {
        self.cx.div(a, b)
    }

    /// mongod's `modulo` (`bid128_fmod`): `a - b × trunc(a / b)`, the sign of `a`.
    pub(crate) fn rem(&mut self, a: Dec, b: Dec) -> Dec {
        self.cx.rem(a, b)
    }

    /// mongod's `toAbs`: the sign bit cleared, whatever the value.
    pub(crate) fn abs(&mut self, a: Dec) -> Dec {
        let cleared = match dec_parts(a) {
            Parts::Nan(_) => Parts::Nan(false),
            Parts::Infinity(_) => Parts::Infinity(false),
            Parts::Finite {
                coefficient,
                exponent,
                ..
            } => Parts::Finite {
                negative: false,
                coefficient,
                exponent,
            },
        };
        to_dec(&from_parts(cleared))
    }

    /// `a` with exponent `exponent`, rounded by `mode`; NaN when the result would need more
    /// than 34 digits (IEEE's invalid operation, as mongod's quantize gives).
    pub(crate) fn quantize(&mut self, a: Dec, exponent: i32, mode: Rounding) -> Dec {
        let reference = to_dec(&from_parts(Parts::Finite {
            negative: false,
            coefficient: 1,
            exponent,
        }));
        let saved = self.cx.rounding();
        self.cx.set_rounding(mode.dec());
        let out = self.cx.quantize(a, reference);
        self.cx.set_rounding(saved);
        out
    }

    /// mongod's `squareRoot`.
    pub(crate) fn sqrt(&mut self, a: Dec) -> Dec {
        transcendental(a, |cx, x| cx.sqrt(x))
    }

    /// mongod's `exponential`: e^a.
    pub(crate) fn exp(&mut self, a: Dec) -> Dec {
        transcendental(a, |cx, x| cx.exp(x))
    }

    /// mongod's `logarithm()`: the natural logarithm.
    pub(crate) fn ln(&mut self, a: Dec) -> Dec {
        transcendental(a, |cx, x| cx.ln(x))
    }

    /// The base-10 logarithm (mongod's `logarithm(10)` takes `bid128_log10`).
    pub(crate) fn log10(&mut self, a: Dec) -> Dec {
        transcendental(a, |cx, x| cx.log10(x))
    }

    /// mongod's `logarithm(base)`: base 10 directly, otherwise `ln(a) / ln(base)`, each
    /// rounded to 34 digits as mongod's two calls are.
    pub(crate) fn log(&mut self, a: Dec, base: Dec) -> Dec {
        let ten = super::from_i64(10);
        if self.cx.partial_cmp(base, ten) == Some(std::cmp::Ordering::Equal) {
            return self.log10(a);
        }
        let (num, den) = (self.ln(a), self.ln(base));
        self.div(num, den)
    }

    /// mongod's `power`: `a^b`.
    pub(crate) fn pow(&mut self, a: Dec, b: Dec) -> Dec {
        let y: Decimal<UNITS> = Decimal::from(b);
        transcendental(a, |cx, x| cx.pow(x, &y))
    }
}

/// Run a decNumber function in decimal128's precision, range and rounding, then round back.
fn transcendental(
    a: Dec,
    f: impl FnOnce(&mut Context<Decimal<UNITS>>, &mut Decimal<UNITS>),
) -> Dec {
    let mut cx = Context::<Decimal<UNITS>>::default();
    // 34 digits within the 36 the type holds; decimal128's exponent range; clamped like it.
    let configured = cx.set_precision(34).is_ok()
        && cx.set_max_exponent(6144).is_ok()
        && cx.set_min_exponent(-6143).is_ok();
    debug_assert!(configured, "decimal128's context fits Decimal<12>");
    cx.set_clamp(true);
    let mut x: Decimal<UNITS> = Decimal::from(a);
    f(&mut cx, &mut x);
    let out = context().from_decimal(&x);
    // Normalise through BID so every value leaves with a canonical encoding.
    to_dec(&from_dec(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Dec {
        context().parse(s).expect("valid literal")
    }

    fn s(x: Dec) -> String {
        from_dec(x).to_string()
    }

    #[test]
    fn basic_arithmetic_rounds_half_even_to_34_digits() {
        let mut o = DecOps::default();
        assert_eq!(s(o.add(d("0.1"), d("0.2"))), "0.3");
        assert_eq!(s(o.sub(d("1.50"), d("0.5"))), "1.00");
        assert_eq!(s(o.mul(d("1.5"), d("2"))), "3.0");
        assert_eq!(
            s(o.div(d("1"), d("3"))),
            "0.3333333333333333333333333333333333"
        );
        assert_eq!(
            s(o.div(d("2"), d("3"))),
            "0.6666666666666666666666666666666667"
        );
        assert_eq!(s(o.div(d("10"), d("4"))), "2.5");
        // 35 nines rounds to 1E+35 (ties and carries as the standard says).
        assert_eq!(
            s(o.add(d("9999999999999999999999999999999999"), d("0.5"))),
            "1.000000000000000000000000000000000E+34"
        );
        assert_eq!(
            s(o.add(d("1000000000000000000000000000000000"), d("0.5"))),
            "1000000000000000000000000000000000"
        );
        assert_eq!(
            s(o.add(d("1000000000000000000000000000000001"), d("0.5"))),
            "1000000000000000000000000000000002"
        );
        assert_eq!(s(o.rem(d("7"), d("-3"))), "1");
        assert_eq!(s(o.rem(d("-7.5"), d("2"))), "-1.5");
        assert_eq!(s(o.abs(d("-2.50"))), "2.50");
        assert_eq!(s(o.abs(d("-NaN"))), "NaN");
        assert_eq!(s(o.div(d("1"), d("0"))), "Infinity");
        assert_eq!(s(o.add(d("Infinity"), d("-Infinity"))), "NaN");
        assert_eq!(s(o.mul(d("-0"), d("5"))), "-0");
    }

    #[test]
    fn quantize_rounds_by_mode() {
        let mut o = DecOps::default();
        assert_eq!(s(o.quantize(d("2.5"), 0, Rounding::HalfEven)), "2");
        assert_eq!(s(o.quantize(d("3.5"), 0, Rounding::HalfEven)), "4");
        assert_eq!(s(o.quantize(d("-2.7"), 0, Rounding::Down)), "-2");
        assert_eq!(s(o.quantize(d("2.1"), 0, Rounding::Ceiling)), "3");
        assert_eq!(s(o.quantize(d("-2.1"), 0, Rounding::Floor)), "-3");
        assert_eq!(s(o.quantize(d("-0.5"), 0, Rounding::Ceiling)), "-0");
        assert_eq!(s(o.quantize(d("123"), -2, Rounding::HalfEven)), "123.00");
        assert_eq!(
            s(o.quantize(d("1234.5678"), 2, Rounding::HalfEven)),
            "1.2E+3"
        );
        // More than 34 digits: invalid, NaN.
        assert_eq!(s(o.quantize(d("1E+40"), 0, Rounding::HalfEven)), "NaN");
    }

    #[test]
    fn transcendental_functions() {
        let mut o = DecOps::default();
        assert_eq!(s(o.sqrt(d("4"))), "2");
        assert_eq!(s(o.sqrt(d("2"))), "1.414213562373095048801688724209698");
        assert_eq!(s(o.exp(d("0"))), "1");
        assert_eq!(s(o.exp(d("1"))), "2.718281828459045235360287471352662");
        assert_eq!(s(o.ln(d("1"))), "0");
        assert_eq!(s(o.log10(d("1000"))), "3");
        assert_eq!(s(o.log(d("100"), d("10"))), "2");
        // ln(8) / ln(2), each to 34 digits, as mongod divides two logarithms.
        assert_eq!(
            s(o.log(d("8"), d("2"))),
            "3.000000000000000000000000000000000"
        );
        assert_eq!(s(o.pow(d("2"), d("10"))), "1024");
        assert_eq!(s(o.pow(d("2"), d("-1"))), "0.5");
        assert_eq!(
            s(o.pow(d("2"), d("0.5"))),
            "1.414213562373095048801688724209698"
        );
        assert_eq!(s(o.pow(d("-8"), d("0.5"))), "NaN");
    }
}
