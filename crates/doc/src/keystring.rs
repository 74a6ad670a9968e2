//! Order-preserving byte encoding of index keys (format version 1, see `docs/keystring.md`):
//! `memcmp` over two encoded keys orders them exactly as `compare::compare_values` orders the
//! values, field by field, with descending fields inverted. Values that MongoDB considers equal
//! (int32 5, int64 5, double 5.0; a symbol and the same string) encode to the same bytes.
//! The encoding is one-way: keys are not decoded back to BSON.

use bson::Bson;

use crate::compare::{as_num, canonical_type_order, db_pointer_parts, Num};

/// Version of the byte layout written by this module. It is not stored in each key; whoever
/// persists keys (the index catalog) records it.
pub const KEY_FORMAT_VERSION: u8 = 1;

/// Sort direction of one field of a compound key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Smaller values first.
    Ascending,
    /// Larger values first.
    Descending,
}

/// Ends an object or array; below every type tag (tags are `canonical_type_order`, all >= 9).
const END: u8 = 0x00;

// Number classes, the first byte of a number's body.
const NUM_NAN: u8 = 0x01;
const NUM_NEGATIVE: u8 = 0x02;
const NUM_ZERO: u8 = 0x03;
const NUM_POSITIVE: u8 = 0x04;

/// Bias added to the binary exponent; infinity uses the largest exponent.
const EXP_BIAS: i32 = 0x8000;
const EXP_INFINITY: u16 = 0xffff;

/// Encode a compound key: each field's value encoded in turn, a descending field's bytes
/// inverted.
pub fn encode_key(values: &[(&Bson, Direction)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (value, direction) in values {
        let start = out.len();
        encode_value(value, &mut out);
        if *direction == Direction::Descending {
            for byte in &mut out[start..] {
                *byte = !*byte;
            }
        }
    }
    out
}

/// Append the ascending encoding of one value: its type tag, then its body. Every encoding
/// is self-delimiting (no encoding is a proper prefix of another), which is what lets
/// compound keys concatenate and descending fields invert.
pub fn encode_value(v: &Bson, out: &mut Vec<u8>) {
    encode_tagged(v, out, Keys::Index);
}

/// Append a key that is equal for two values exactly when `compare_values` finds them
/// equal: `encode_value`'s bytes, with a decimal128 that no int64 or double equals followed
/// by `0xFF` and its reduced BID bytes. For in-memory equality (`$group` keys, `$addToSet`,
/// `$in` sets, `$graphLookup`'s visited set); its byte order is not the value order, and it
/// is never stored.
pub fn encode_value_exact(v: &Bson, out: &mut Vec<u8>) {
    encode_tagged(v, out, Keys::Equality);
}

/// Which encoding: index keys (ordered, decimals through their nearest double) or equality
/// keys (decimals told apart exactly).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keys {
    Index,
    Equality,
}

fn encode_tagged(v: &Bson, out: &mut Vec<u8>, keys: Keys) {
    out.push(canonical_type_order(v));
    encode_body(v, out, keys);
}

fn encode_body(v: &Bson, out: &mut Vec<u8>, keys: Keys) {
    if let Some(n) = as_num(v) {
        encode_number(n, out);
        if let (Num::D(d), Keys::Equality) = (n, keys) {
            decimal_suffix(d, out);
        }
        return;
    }
    match v {
        Bson::MinKey | Bson::MaxKey | Bson::Null | Bson::Undefined => {}
        Bson::String(s) | Bson::Symbol(s) | Bson::JavaScriptCode(s) => {
            encode_bytes(s.as_bytes(), out)
        }
        Bson::Document(d) => {
            for (name, value) in d {
                out.push(canonical_type_order(value));
                encode_bytes(name.as_bytes(), out);
                encode_body(value, out, keys);
            }
            out.push(END);
        }
        Bson::Array(items) => {
            for value in items {
                encode_tagged(value, out, keys);
            }
            out.push(END);
        }
        Bson::Binary(b) => {
            out.extend_from_slice(&(b.bytes.len() as u32).to_be_bytes());
            out.push(u8::from(b.subtype));
            out.extend_from_slice(&b.bytes);
        }
        Bson::ObjectId(oid) => out.extend_from_slice(&oid.bytes()),
        Bson::Boolean(b) => out.push(u8::from(*b)),
        Bson::DateTime(d) => {
            let ms = d.timestamp_millis() as u64 ^ (1 << 63);
            out.extend_from_slice(&ms.to_be_bytes());
        }
        Bson::Timestamp(ts) => {
            out.extend_from_slice(&ts.time.to_be_bytes());
            out.extend_from_slice(&ts.increment.to_be_bytes());
        }
        Bson::RegularExpression(re) => {
            encode_bytes(re.pattern.as_bytes(), out);
            encode_bytes(re.options.as_bytes(), out);
        }
        Bson::DbPointer(p) => {
            let (ns, oid) = db_pointer_parts(p);
            out.extend_from_slice(&(ns.len() as u32).to_be_bytes());
            out.extend_from_slice(&ns);
            out.extend_from_slice(&oid);
        }
        Bson::JavaScriptCodeWithScope(c) => {
            encode_bytes(c.code.as_bytes(), out);
            encode_body(&Bson::Document(c.scope.clone()), out, keys);
        }
        // Numbers were handled above.
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => {}
    }
}

/// What tells a decimal apart from the int64 or double whose key it shares: nothing when one
/// of them equals it, else `0xFF` (no type tag or `END`) and its 16 reduced BID bytes, the same
/// for every equal decimal (`1.50` and `1.5`).
fn decimal_suffix(d: dec::Decimal128, out: &mut Vec<u8>) {
    use crate::decimal;
    if decimal::to_i64_exact(d).is_some()
        || decimal::cmp_dec_f64(d, decimal::to_f64(d)) == std::cmp::Ordering::Equal
    {
        return;
    }
    let reduced = decimal::context().reduce(d);
    out.push(0xff);
    out.extend_from_slice(&decimal::from_dec(reduced).bytes());
}

/// Escaped byte string: 0x00 becomes 0x00 0xFF, and 0x00 0x00 ends the string, so a proper
/// prefix sorts first and embedded NULs keep their order.
fn encode_bytes(bytes: &[u8], out: &mut Vec<u8>) {
    for &b in bytes {
        out.push(b);
        if b == 0 {
            out.push(0xff);
        }
    }
    out.extend_from_slice(&[0, 0]);
}

/// Numbers: a class byte (NaN < negative < zero < positive); a non-zero number then carries
/// its magnitude as `1.f × 2^e`: `e + 0x8000` as a big-endian u16 (0xFFFF for infinity) and the
/// bits of `f` left-aligned in a big-endian u64. Negative numbers invert those ten bytes.
/// Every int64 (at most 63 bits after the leading one) and every double (52) is exact.
///
/// A decimal128 that is a whole number within int64 encodes as that int64, so it shares its
/// key with every equal int32, int64 and double; any other decimal encodes as its nearest
/// double. Decimals and doubles that share a nearest double then share a key though their
/// exact order (`compare`) tells them apart, and a non-integral decimal beyond 2^53 may sort
/// on the far side of an int64 that no double holds. Readers that rely on key order (bounds,
/// `db/src/bounds.rs`) take in every key equal to a numeric bound's and let the matcher decide.
fn encode_number(n: Num, out: &mut Vec<u8>) {
    let (negative, exp, frac) = match n {
        Num::D(d) => {
            let as_number = crate::decimal::to_i64_exact(d)
                .map_or_else(|| Num::F(crate::decimal::to_f64(d)), Num::I);
            return encode_number(as_number, out);
        }
        Num::I(0) => return out.push(NUM_ZERO),
        Num::I(i) => {
            let mag = i.unsigned_abs();
            let lz = mag.leading_zeros();
            // Shift the leading one out; checked_shl covers mag == 1 (shift by 64).
            let frac = mag.checked_shl(lz + 1).unwrap_or(0);
            (i < 0, 63 - lz as i32 + EXP_BIAS, frac)
        }
        Num::F(f) if f.is_nan() => return out.push(NUM_NAN),
        // Float patterns compare with `==`, so this arm takes -0.0 too.
        Num::F(0.0) => return out.push(NUM_ZERO),
        Num::F(f) if f.is_infinite() => (f < 0.0, i32::from(EXP_INFINITY), 0),
        Num::F(f) => {
            let bits = f.to_bits();
            let exp_field = ((bits >> 52) & 0x7ff) as i32;
            let mant = bits & ((1 << 52) - 1);
            if exp_field == 0 {
                // Subnormal: mant × 2^-1074, normalized on its leading one.
                let lz = mant.leading_zeros();
                let frac = mant.checked_shl(lz + 1).unwrap_or(0);
                (f < 0.0, 63 - lz as i32 - 1074 + EXP_BIAS, frac)
            } else {
                (f < 0.0, exp_field - 1023 + EXP_BIAS, mant << 12)
            }
        }
    };
    let exp = exp as u16;
    if negative {
        out.push(NUM_NEGATIVE);
        out.extend_from_slice(&(!exp).to_be_bytes());
        out.extend_from_slice(&(!frac).to_be_bytes());
    } else {
        out.push(NUM_POSITIVE);
        out.extend_from_slice(&exp.to_be_bytes());
        out.extend_from_slice(&frac.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::compare_values;
    use bson::{doc, oid::ObjectId, Decimal128};
    use std::cmp::Ordering;

    fn enc(v: &Bson) -> Vec<u8> {
        let mut out = Vec::new();
        encode_value(v, &mut out);
        out
    }

    #[test]
    fn equal_numbers_encode_identically() {
        let five = enc(&Bson::Int32(5));
        assert_eq!(enc(&Bson::Int64(5)), five);
        assert_eq!(enc(&Bson::Double(5.0)), five);
        let dec5 = Decimal128::from_bytes(((6176u128 << 113) | 5).to_le_bytes());
        assert_eq!(enc(&Bson::Decimal128(dec5)), five);
        assert_eq!(enc(&Bson::Double(-0.0)), enc(&Bson::Int64(0)));
        assert_eq!(
            enc(&Bson::Int64(i64::MIN)),
            enc(&Bson::Double(i64::MIN as f64))
        );
        assert_eq!(
            enc(&Bson::Symbol("s".into())),
            enc(&Bson::String("s".into()))
        );
        assert_eq!(
            enc(&Bson::Document(doc! {"a": 1, "b": [2.0]})),
            enc(&Bson::Document(doc! {"a": 1i64, "b": [2]}))
        );
    }

    #[test]
    fn equality_keys_tell_decimals_apart_exactly() {
        let d = |s: &str| Bson::Decimal128(s.parse().expect("literal"));
        let exact = |v: &Bson| {
            let mut out = Vec::new();
            encode_value_exact(v, &mut out);
            out
        };
        // One index key for 0.1 and NumberDecimal("0.1"); two equality keys.
        assert_eq!(enc(&d("0.1")), enc(&Bson::Double(0.1)));
        assert_ne!(exact(&d("0.1")), exact(&Bson::Double(0.1)));
        assert_eq!(exact(&d("0.10")), exact(&d("0.1")));
        // Values a double or an int64 equals keep that number's key, suffix-free.
        assert_eq!(exact(&d("5.00")), exact(&Bson::Int32(5)));
        assert_eq!(exact(&d("0.5")), exact(&Bson::Double(0.5)));
        assert_eq!(exact(&d("NaN")), exact(&Bson::Double(f64::NAN)));
        assert_eq!(
            enc(&d("9007199254740993")),
            enc(&Bson::Int64(9_007_199_254_740_993))
        );
        let arr = |v: Bson| Bson::Array(vec![v, Bson::Int32(1)]);
        assert_ne!(exact(&arr(d("0.1"))), exact(&arr(Bson::Double(0.1))));
    }

    #[test]
    fn number_layout_is_as_documented() {
        assert_eq!(enc(&Bson::Double(f64::NAN)), vec![20, NUM_NAN]);
        assert_eq!(enc(&Bson::Int32(0)), vec![20, NUM_ZERO]);
        // 1 = 1.0 × 2^0.
        assert_eq!(
            enc(&Bson::Int32(1)),
            vec![20, NUM_POSITIVE, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0]
        );
        // -3 = -1.1b × 2^1, inverted.
        let mut neg3 = vec![20, NUM_NEGATIVE, !0x80, !0x01, !0x80];
        neg3.extend_from_slice(&[0xff; 7]);
        assert_eq!(enc(&Bson::Int32(-3)), neg3);
    }

    #[test]
    fn exact_beyond_2_pow_53() {
        let p53 = 1i64 << 53;
        let a = enc(&Bson::Int64(p53 + 1));
        assert!(a > enc(&Bson::Double(p53 as f64)));
        assert!(a < enc(&Bson::Double((p53 + 2) as f64)));
        assert!(enc(&Bson::Int64(i64::MAX)) < enc(&Bson::Double(i64::MAX as f64)));
        assert!(enc(&Bson::Int64(-p53 - 1)) < enc(&Bson::Double(-p53 as f64)));
        assert!(enc(&Bson::Double(f64::NAN)) < enc(&Bson::Double(f64::NEG_INFINITY)));
        assert!(enc(&Bson::Double(f64::NEG_INFINITY)) < enc(&Bson::Double(-f64::MAX)));
        assert!(enc(&Bson::Double(f64::MAX)) < enc(&Bson::Double(f64::INFINITY)));
        let tiny = f64::from_bits(1);
        assert!(enc(&Bson::Double(0.0)) < enc(&Bson::Double(tiny)));
        assert!(enc(&Bson::Double(tiny)) < enc(&Bson::Double(f64::MIN_POSITIVE)));
        assert!(enc(&Bson::Double(-tiny)) < enc(&Bson::Double(0.0)));
    }

    #[test]
    fn strings_escape_nul_and_prefix_sorts_first() {
        let s = |x: &str| enc(&Bson::String(x.into()));
        assert_eq!(s("a\0b"), vec![25, b'a', 0, 0xff, b'b', 0, 0]);
        assert!(s("a") < s("a\0"));
        assert!(s("a\0") < s("a\x01"));
        assert!(s("a") < s("ab"));
        assert!(s("ab") < s("b"));
    }

    #[test]
    fn compound_keys_with_descending_fields() {
        let (a1, a2) = (Bson::Int32(1), Bson::Int32(2));
        let (x, y) = (Bson::String("x".into()), Bson::String("xy".into()));
        use Direction::*;
        // Descending first field reverses it; ties fall to the second field.
        assert!(
            encode_key(&[(&a2, Descending), (&x, Ascending)])
                < encode_key(&[(&a1, Descending), (&x, Ascending)])
        );
        assert!(
            encode_key(&[(&a1, Descending), (&y, Descending)])
                < encode_key(&[(&a1, Descending), (&x, Descending)])
        );
        assert!(
            encode_key(&[(&a1, Ascending), (&y, Ascending)])
                < encode_key(&[(&a2, Ascending), (&x, Ascending)])
        );
        // A descending string that is a prefix of another now sorts after it.
        assert!(
            encode_key(&[(&x, Descending), (&a2, Ascending)])
                > encode_key(&[(&y, Descending), (&a1, Ascending)])
        );
    }

    #[test]
    fn encoding_order_matches_comparison_on_samples() {
        let samples = vec![
            Bson::MinKey,
            Bson::Undefined,
            Bson::Null,
            Bson::Double(f64::NAN),
            Bson::Int32(-7),
            Bson::Double(0.25),
            Bson::Int64(3),
            Bson::String(String::new()),
            Bson::String("a".into()),
            Bson::Document(doc! {}),
            Bson::Document(doc! {"a": 1}),
            Bson::Document(doc! {"a": 1, "b": 1}),
            Bson::Document(doc! {"b": 0}),
            Bson::Document(doc! {"a": "x"}),
            Bson::Array(vec![]),
            Bson::Array(vec![Bson::Null]),
            Bson::Array(vec![1.into(), 2.into()]),
            Bson::ObjectId(ObjectId::from_bytes([7; 12])),
            Bson::Boolean(false),
            Bson::Boolean(true),
            Bson::MaxKey,
        ];
        for a in &samples {
            for b in &samples {
                assert_eq!(enc(a).cmp(&enc(b)), compare_values(a, b), "{a:?} vs {b:?}");
            }
        }
        assert_eq!(compare_values(&samples[4], &samples[5]), Ordering::Less);
    }
}
