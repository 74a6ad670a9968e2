//! MongoDB's total order over BSON values: the cross-type order (`canonical_type_order`), the
//! order inside each type (`compare_values`), and the numeric helpers that both this module and
//! the key encoding (`keystring`) share, so that index keys and in-memory sorts agree.
//!
//! Facts followed (MongoDB server semantics, simple binary collation):
//! - Type order: MinKey < Undefined < Null < numbers < Symbol = String < Object < Array <
//!   BinData < ObjectId < Boolean < Date < Timestamp < Regex < DBPointer < JavaScript <
//!   JavaScript with scope < MaxKey. Undefined sorts just below null as its own bracket (the
//!   server's canonical type 0 versus null's 5); they are not equal.
//! - Numbers compare by value across int32, int64, double and decimal128; NaN equals NaN and
//!   is below every other number; -0.0 equals 0.0.
//! - Strings and symbols compare by their UTF-8 bytes, a proper prefix first.
//! - Objects compare element by element: type bracket of the values, then field name bytes,
//!   then the values; a proper prefix first. Arrays compare element by element likewise.
//! - BinData: length, then subtype, then bytes. Timestamp: time, then increment (unsigned).
//!   Regex: pattern, then flags. DBPointer: namespace length, namespace, then ObjectId.
//!   JavaScript with scope: code, then scope object.
//!
//! Every numeric comparison is exact, decimal128 included (`decimal/order.rs`, mongod's
//! `compareDecimalToDouble` and friends): `NumberDecimal("0.1") < 0.1`, whose exact value is
//! 0.1000000000000000055511...; `NumberDecimal("5.0")` equals int32 5. Index keys still encode
//! a decimal through its nearest double (`keystring`, docs/keystring.md), so the planner widens
//! numeric bounds to take in every key a decimal could share.

use std::cmp::Ordering;

use bson::{Bson, DbPointer, Decimal128, Document};

use crate::decimal;

/// Type bracket of a value: MongoDB's canonical type number plus 10, so every bracket is a
/// positive byte (the key encoding uses it directly as the type tag).
pub fn canonical_type_order(v: &Bson) -> u8 {
    match v {
        Bson::MinKey => 9,
        Bson::Undefined => 10,
        Bson::Null => 15,
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => 20,
        Bson::String(_) | Bson::Symbol(_) => 25,
        Bson::Document(_) => 30,
        Bson::Array(_) => 35,
        Bson::Binary(_) => 40,
        Bson::ObjectId(_) => 45,
        Bson::Boolean(_) => 50,
        Bson::DateTime(_) => 55,
        Bson::Timestamp(_) => 57,
        Bson::RegularExpression(_) => 60,
        Bson::DbPointer(_) => 65,
        Bson::JavaScriptCode(_) => 70,
        Bson::JavaScriptCodeWithScope(_) => 75,
        Bson::MaxKey => 137,
    }
}

/// A number reduced to the three representations compared exactly: every int32/int64 as `I`,
/// every double as `F`, every decimal128 as `D`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Num {
    I(i64),
    F(f64),
    D(dec::Decimal128),
}

/// The numeric value of a number, or `None` for a non-number.
pub(crate) fn as_num(v: &Bson) -> Option<Num> {
    match v {
        Bson::Int32(i) => Some(Num::I(i64::from(*i))),
        Bson::Int64(i) => Some(Num::I(*i)),
        Bson::Double(d) => Some(Num::F(*d)),
        Bson::Decimal128(d) => Some(Num::D(crate::decimal::to_dec(d))),
        _ => None,
    }
}

/// Nearest `f64` to an IEEE 754-2008 decimal128 in binary integer decimal (BID) encoding, as
/// BSON stores it. NaN (quiet or signalling) gives NaN, ±Infinity gives ±infinity, and a
/// non-canonical coefficient (above 10^34 - 1) counts as zero, as the standard says.
pub fn decimal128_to_f64(d: &Decimal128) -> f64 {
    let bits = u128::from_le_bytes(d.bytes());
    let negative = bits >> 127 == 1;
    let sign = if negative { -1.0 } else { 1.0 };
    let comb = (bits >> 122) & 0x1f; // top five bits after the sign
    if comb == 0x1f {
        return f64::NAN;
    }
    if comb == 0x1e {
        return sign * f64::INFINITY;
    }
    let (exp_bits, coeff) = if (bits >> 125) & 0b11 == 0b11 {
        // Large-coefficient form: always above 10^34 - 1, so non-canonical, hence zero.
        ((bits >> 111) & 0x3fff, 0u128)
    } else {
        ((bits >> 113) & 0x3fff, bits & ((1u128 << 113) - 1))
    };
    let coeff = if coeff > 9_999_999_999_999_999_999_999_999_999_999_999 {
        0
    } else {
        coeff
    };
    if coeff == 0 {
        return sign * 0.0;
    }
    let exponent = exp_bits as i64 - 6176;
    // Rust's float parsing rounds correctly to nearest, including overflow and underflow.
    let magnitude: f64 = format!("{coeff}e{exponent}").parse().unwrap_or(f64::NAN);
    sign * magnitude
}

/// A number's value as a double (a decimal128 through its nearest double); `None` for any
/// other type. The window stages, `$densify` and `$fill` compute in doubles with it.
pub fn raw_number_as_f64(v: bson::RawBsonRef<'_>) -> Option<f64> {
    match v {
        bson::RawBsonRef::Int32(i) => Some(f64::from(i)),
        bson::RawBsonRef::Int64(i) => Some(i as f64),
        bson::RawBsonRef::Double(d) => Some(d),
        bson::RawBsonRef::Decimal128(d) => Some(decimal128_to_f64(&d)),
        _ => None,
    }
}

/// `raw_number_as_f64` of an owned value.
pub fn number_as_f64(v: &bson::Bson) -> Option<f64> {
    match v {
        bson::Bson::Int32(i) => Some(f64::from(*i)),
        bson::Bson::Int64(i) => Some(*i as f64),
        bson::Bson::Double(d) => Some(*d),
        bson::Bson::Decimal128(d) => Some(decimal128_to_f64(d)),
        _ => None,
    }
}

/// MongoDB's double order: NaN equals NaN and is below everything; -0.0 equals 0.0.
pub(crate) fn compare_f64(a: f64, b: f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
        (false, false) => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
    }
}

/// Exact comparison of an int64 with a double (no rounding of either side).
pub(crate) fn compare_i64_f64(i: i64, f: f64) -> Ordering {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if f.is_nan() {
        return Ordering::Greater;
    }
    if f >= TWO_63 {
        return Ordering::Less;
    }
    if f < -TWO_63 {
        return Ordering::Greater;
    }
    // |f| < 2^63 or f == -2^63: its integer part is an exact i64, its fraction exact too.
    let whole = f.trunc();
    match i.cmp(&(whole as i64)) {
        Ordering::Equal => compare_f64(0.0, f - whole),
        other => other,
    }
}

pub(crate) fn compare_num(a: Num, b: Num) -> Ordering {
    match (a, b) {
        (Num::I(x), Num::I(y)) => x.cmp(&y),
        (Num::F(x), Num::F(y)) => compare_f64(x, y),
        (Num::I(x), Num::F(y)) => compare_i64_f64(x, y),
        (Num::F(x), Num::I(y)) => compare_i64_f64(y, x).reverse(),
        (Num::D(x), Num::D(y)) => decimal::cmp_dec_dec(x, y),
        (Num::D(x), Num::I(y)) => decimal::cmp_dec_i64(x, y),
        (Num::I(x), Num::D(y)) => decimal::cmp_dec_i64(y, x).reverse(),
        (Num::D(x), Num::F(y)) => decimal::cmp_dec_f64(x, y),
        (Num::F(x), Num::D(y)) => decimal::cmp_dec_f64(y, x).reverse(),
    }
}

/// Namespace and ObjectId bytes of a DBPointer. The bson crate keeps them private, so they are
/// read back from the value's own BSON serialization.
#[allow(
    clippy::expect_used,
    reason = "serialising a document built in memory into a Vec cannot fail"
)]
pub(crate) fn db_pointer_parts(p: &DbPointer) -> (Vec<u8>, [u8; 12]) {
    let mut doc = Document::new();
    doc.insert("", Bson::DbPointer(p.clone()));
    let mut bytes = Vec::new();
    doc.to_writer(&mut bytes)
        .expect("serializing a DBPointer into memory cannot fail");
    // document length (4), element type (1), empty name + NUL (1), string length (4).
    let strsize = i32::from_le_bytes([bytes[6], bytes[7], bytes[8], bytes[9]]) as usize;
    let ns = bytes[10..10 + strsize - 1].to_vec();
    let mut oid = [0u8; 12];
    oid.copy_from_slice(&bytes[10 + strsize..10 + strsize + 12]);
    (ns, oid)
}

/// Compare two documents as MongoDB does (field names considered).
pub fn compare_documents(a: &Document, b: &Document) -> Ordering {
    let mut left = a.iter();
    let mut right = b.iter();
    loop {
        match (left.next(), right.next()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some((ka, va)), Some((kb, vb))) => {
                let ord = canonical_type_order(va)
                    .cmp(&canonical_type_order(vb))
                    .then_with(|| ka.as_bytes().cmp(kb.as_bytes()))
                    .then_with(|| compare_values(va, vb));
                if ord != Ordering::Equal {
                    return ord;
                }
            }
        }
    }
}

fn compare_arrays(a: &[Bson], b: &[Bson]) -> Ordering {
    for (x, y) in a.iter().zip(b.iter()) {
        let ord = compare_values(x, y);
        if ord != Ordering::Equal {
            return ord;
        }
    }
    a.len().cmp(&b.len())
}

fn string_bytes(v: &Bson) -> &[u8] {
    match v {
        Bson::String(s) | Bson::Symbol(s) => s.as_bytes(),
        _ => &[],
    }
}

/// MongoDB's total order over BSON values (simple collation).
pub fn compare_values(a: &Bson, b: &Bson) -> Ordering {
    let (ta, tb) = (canonical_type_order(a), canonical_type_order(b));
    if ta != tb {
        return ta.cmp(&tb);
    }
    if let (Some(x), Some(y)) = (as_num(a), as_num(b)) {
        return compare_num(x, y);
    }
    match (a, b) {
        (Bson::String(_) | Bson::Symbol(_), _) => string_bytes(a).cmp(string_bytes(b)),
        (Bson::Document(x), Bson::Document(y)) => compare_documents(x, y),
        (Bson::Array(x), Bson::Array(y)) => compare_arrays(x, y),
        (Bson::Binary(x), Bson::Binary(y)) => x
            .bytes
            .len()
            .cmp(&y.bytes.len())
            .then_with(|| u8::from(x.subtype).cmp(&u8::from(y.subtype)))
            .then_with(|| x.bytes.cmp(&y.bytes)),
        (Bson::ObjectId(x), Bson::ObjectId(y)) => x.bytes().cmp(&y.bytes()),
        (Bson::Boolean(x), Bson::Boolean(y)) => x.cmp(y),
        (Bson::DateTime(x), Bson::DateTime(y)) => x.timestamp_millis().cmp(&y.timestamp_millis()),
        (Bson::Timestamp(x), Bson::Timestamp(y)) => {
            (x.time, x.increment).cmp(&(y.time, y.increment))
        }
        (Bson::RegularExpression(x), Bson::RegularExpression(y)) => x
            .pattern
            .as_bytes()
            .cmp(y.pattern.as_bytes())
            .then_with(|| x.options.as_bytes().cmp(y.options.as_bytes())),
        (Bson::DbPointer(x), Bson::DbPointer(y)) => {
            let (nx, ox) = db_pointer_parts(x);
            let (ny, oy) = db_pointer_parts(y);
            nx.len()
                .cmp(&ny.len())
                .then_with(|| nx.cmp(&ny))
                .then_with(|| ox.cmp(&oy))
        }
        (Bson::JavaScriptCode(x), Bson::JavaScriptCode(y)) => x.as_bytes().cmp(y.as_bytes()),
        (Bson::JavaScriptCodeWithScope(x), Bson::JavaScriptCodeWithScope(y)) => x
            .code
            .as_bytes()
            .cmp(y.code.as_bytes())
            .then_with(|| compare_documents(&x.scope, &y.scope)),
        // MinKey, MaxKey, Null, Undefined: one value per bracket.
        _ => Ordering::Equal,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, oid::ObjectId, spec::BinarySubtype, Binary, DateTime, Regex, Timestamp};
    use Ordering::*;

    /// A decimal128 from sign, coefficient and unbiased exponent (small-coefficient form).
    pub(crate) fn dec(negative: bool, coeff: u128, exp: i32) -> Bson {
        let bits = (u128::from(negative) << 127) | (((exp + 6176) as u128) << 113) | coeff;
        Bson::Decimal128(Decimal128::from_bytes(bits.to_le_bytes()))
    }

    fn bin(subtype: u8, bytes: &[u8]) -> Bson {
        Bson::Binary(Binary {
            subtype: BinarySubtype::from(subtype),
            bytes: bytes.to_vec(),
        })
    }

    fn assert_ascending(values: &[Bson]) {
        for (i, a) in values.iter().enumerate() {
            for (j, b) in values.iter().enumerate() {
                assert_eq!(compare_values(a, b), i.cmp(&j), "{a:?} vs {b:?}");
            }
        }
    }

    #[test]
    fn cross_type_order_matches_mongodb() {
        assert_ascending(&[
            Bson::MinKey,
            Bson::Undefined,
            Bson::Null,
            Bson::Int32(1),
            Bson::String("a".into()),
            Bson::Document(doc! {}),
            Bson::Array(vec![]),
            bin(0, b""),
            Bson::ObjectId(ObjectId::from_bytes([0; 12])),
            Bson::Boolean(false),
            Bson::Boolean(true),
            Bson::DateTime(DateTime::from_millis(i64::MIN)),
            Bson::Timestamp(Timestamp {
                time: 0,
                increment: 0,
            }),
            Bson::RegularExpression(Regex {
                pattern: String::new(),
                options: String::new(),
            }),
            Bson::JavaScriptCode(String::new()),
            Bson::MaxKey,
        ]);
    }

    #[test]
    fn numbers_compare_by_value_across_types() {
        let one = [
            Bson::Int32(1),
            Bson::Int64(1),
            Bson::Double(1.0),
            dec(false, 1, 0),
        ];
        for a in &one {
            for b in &one {
                assert_eq!(compare_values(a, b), Equal);
            }
        }
        assert_eq!(compare_values(&dec(false, 10, -1), &Bson::Int32(1)), Equal);
        assert_eq!(compare_values(&Bson::Double(-0.0), &Bson::Int32(0)), Equal);
        assert_eq!(compare_values(&dec(true, 0, 0), &Bson::Double(0.0)), Equal);
        assert_ascending(&[
            Bson::Double(f64::NAN),
            Bson::Double(f64::NEG_INFINITY),
            Bson::Int64(i64::MIN),
            Bson::Double(-1.5),
            Bson::Int32(-1),
            Bson::Double(0.5),
            dec(false, 15, -1),
            Bson::Int64(2),
            Bson::Int64(i64::MAX),
            Bson::Double(9_223_372_036_854_775_808.0),
            Bson::Double(f64::INFINITY),
        ]);
    }

    #[test]
    fn int64_against_double_is_exact_beyond_2_pow_53() {
        let p53 = 1i64 << 53;
        assert_eq!(
            compare_values(&Bson::Int64(p53 + 1), &Bson::Double(p53 as f64)),
            Greater
        );
        assert_eq!(
            compare_values(&Bson::Int64(p53), &Bson::Double(p53 as f64)),
            Equal
        );
        assert_eq!(
            compare_values(&Bson::Double(i64::MAX as f64), &Bson::Int64(i64::MAX)),
            Greater
        );
        assert_eq!(
            compare_values(&Bson::Double(i64::MIN as f64), &Bson::Int64(i64::MIN)),
            Equal
        );
    }

    #[test]
    fn decimal_special_values() {
        let nan = Bson::Decimal128(Decimal128::from_bytes((0x7cu128 << 120).to_le_bytes()));
        let inf = Bson::Decimal128(Decimal128::from_bytes((0x78u128 << 120).to_le_bytes()));
        let neg_inf = Bson::Decimal128(Decimal128::from_bytes((0xf8u128 << 120).to_le_bytes()));
        assert_eq!(compare_values(&nan, &Bson::Double(f64::NAN)), Equal);
        assert_eq!(compare_values(&inf, &Bson::Double(f64::INFINITY)), Equal);
        assert_eq!(
            compare_values(&neg_inf, &Bson::Double(f64::NEG_INFINITY)),
            Equal
        );
        assert_eq!(
            compare_values(&dec(true, 25, -1), &Bson::Double(-2.5)),
            Equal
        );
        // 1E+400 is beyond f64: above every finite double, below infinity.
        assert_eq!(
            compare_values(&dec(false, 1, 400), &Bson::Double(f64::MAX)),
            Greater
        );
        assert_eq!(
            compare_values(&dec(false, 1, 400), &Bson::Double(f64::INFINITY)),
            Less
        );
        // Exact, as mongod: -1E-400 is below 0 though its nearest double is -0.0.
        assert_eq!(compare_values(&dec(true, 1, -400), &Bson::Int32(0)), Less);
        assert_eq!(
            compare_values(&dec(true, 1, -400), &Bson::Double(0.0)),
            Less
        );
        // 0.1 as a decimal is below the double 0.1 (0.1000000000000000055511...).
        assert_eq!(compare_values(&dec(false, 1, -1), &Bson::Double(0.1)), Less);
        assert_eq!(compare_values(&dec(false, 50, -1), &Bson::Int64(5)), Equal);
        assert_eq!(compare_values(&nan, &dec(true, 1, 6000)), Less);
    }

    #[test]
    fn strings_are_binary_and_symbols_equal_strings() {
        let s = |x: &str| Bson::String(x.into());
        assert_eq!(compare_values(&s("ab"), &s("a")), Greater);
        assert_eq!(compare_values(&s("B"), &s("a")), Less);
        assert_eq!(compare_values(&s("a"), &s("a\0")), Less);
        assert_eq!(compare_values(&Bson::Symbol("x".into()), &s("x")), Equal);
    }

    #[test]
    fn documents_compare_by_type_then_name_then_value() {
        let d = |x: Document| Bson::Document(x);
        assert_eq!(
            compare_values(&d(doc! {"a": 1}), &d(doc! {"a": 1, "b": 1})),
            Less
        );
        assert_eq!(compare_values(&d(doc! {"a": 1}), &d(doc! {"b": 0})), Less);
        assert_eq!(compare_values(&d(doc! {"b": 1}), &d(doc! {"a": "x"})), Less);
        assert_eq!(
            compare_values(&d(doc! {"a": 2}), &d(doc! {"a": 1.5})),
            Greater
        );
        assert_eq!(
            compare_values(&d(doc! {"a": 1}), &d(doc! {"a": 1.0})),
            Equal
        );
        assert_eq!(
            compare_values(&d(doc! {"a": {"b": 1}}), &d(doc! {"a": {"b": 2}})),
            Less
        );
    }

    #[test]
    fn arrays_compare_element_wise_shorter_first() {
        let a = |x: Vec<Bson>| Bson::Array(x);
        assert_eq!(
            compare_values(&a(vec![1.into()]), &a(vec![1.into(), 0.into()])),
            Less
        );
        assert_eq!(
            compare_values(&a(vec![2.into()]), &a(vec![1.into(), 5.into()])),
            Greater
        );
        assert_eq!(
            compare_values(&a(vec![Bson::Null]), &a(vec![0.into()])),
            Less
        );
        assert_eq!(
            compare_values(&a(vec![]), &Bson::Document(doc! {"z": 1})),
            Greater
        );
    }

    #[test]
    fn other_types_follow_their_field_order() {
        assert_eq!(compare_values(&bin(5, b"a"), &bin(0, b"ab")), Less);
        assert_eq!(compare_values(&bin(5, b"a"), &bin(0, b"b")), Greater);
        assert_eq!(compare_values(&bin(0, b"a"), &bin(0, b"b")), Less);
        let ts = |time, increment| Bson::Timestamp(Timestamp { time, increment });
        assert_eq!(compare_values(&ts(1, 9), &ts(2, 0)), Less);
        assert_eq!(compare_values(&ts(u32::MAX, 0), &ts(1, 0)), Greater);
        let re = |p: &str, o: &str| {
            Bson::RegularExpression(Regex {
                pattern: p.into(),
                options: o.into(),
            })
        };
        assert_eq!(compare_values(&re("a", "z"), &re("b", "")), Less);
        assert_eq!(compare_values(&re("a", "i"), &re("a", "m")), Less);
        let date = |ms| Bson::DateTime(DateTime::from_millis(ms));
        assert_eq!(compare_values(&date(-1), &date(0)), Less);
        assert_eq!(
            compare_values(&db_pointer("zz", [0; 12]), &db_pointer("aaa", [0; 12])),
            Less
        );
        assert_eq!(
            compare_values(&db_pointer("ab", [9; 12]), &db_pointer("ac", [0; 12])),
            Less
        );
        assert_eq!(
            compare_values(&db_pointer("ab", [1; 12]), &db_pointer("ab", [0; 12])),
            Greater
        );
        assert_eq!(
            compare_values(&db_pointer("ab", [1; 12]), &db_pointer("ab", [1; 12])),
            Equal
        );
    }

    /// A DBPointer, built from its BSON bytes (the bson crate has no public constructor).
    pub(crate) fn db_pointer(ns: &str, oid: [u8; 12]) -> Bson {
        let mut body = vec![0x0c, b'p', 0];
        body.extend_from_slice(&(ns.len() as i32 + 1).to_le_bytes());
        body.extend_from_slice(ns.as_bytes());
        body.push(0);
        body.extend_from_slice(&oid);
        body.push(0);
        let mut bytes = ((body.len() + 4) as i32).to_le_bytes().to_vec();
        bytes.extend_from_slice(&body);
        let doc = Document::from_reader(&bytes[..]).expect("valid DBPointer document");
        doc.get("p").cloned().expect("field p")
    }
}
