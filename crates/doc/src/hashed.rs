//! Hashed index keys (MongoDB 2.4's `{field: "hashed"}`): the key of a value is mongod's
//! `BSONElementHasher::hash64` with seed 0, so keys (and `convertShardKeyToHashed`-style
//! values) match mongod's bit for bit. The hash is the first 8 bytes, little-endian, of the
//! MD5 of: the seed (int32 LE), then the value's canonical type (int32 LE: MinKey -1,
//! undefined 0, null 5, numbers 10, strings 15, objects 20, arrays 25, binary 30, ObjectId
//! 35, booleans 40, dates 45, timestamps 47, regexes 50, DBPointer 55, code 60, code with
//! scope 65, MaxKey 127), then for a number its value as an int64 (`safeNumberLongForHash`:
//! truncated toward zero, NaN 0, clamped to the int64 range), for an object or array each
//! element hashed the same way with its field name (and NUL) after its type, ending with
//! the end-of-object element (type 0, no name, no value), and for any other value its BSON value
//! bytes. Checked against mongod's own vector: `{check: 42}` → -944302157085130861.
//!
//! A hashed key is an equality-only key: shale-db's planner turns points into their hashes
//! (`plan.rs`) and never uses a hashed field for ranges or sort order; documents are always
//! matched against the filter after the index (collisions).

use bson::spec::BinarySubtype;
use bson::Bson;
use md5::{Digest, Md5};

/// mongod's canonical type numbers (`canonicalizeBSONType`).
fn canonical_type(v: &Bson) -> i32 {
    i32::from(crate::canonical_type_order(v)) - 10
}

/// `BSONElementHasher::hash64(value, 0)`.
pub fn hash64(v: &Bson) -> i64 {
    let mut h = Md5::new();
    h.update(0i32.to_le_bytes());
    hash_value(&mut h, v);
    let d = h.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&d[..8]);
    i64::from_le_bytes(first)
}

fn hash_value(h: &mut Md5, v: &Bson) {
    h.update(canonical_type(v).to_le_bytes());
    hash_body(h, v);
}

/// What follows a value's canonical type (and, inside an object, its name).
fn hash_body(h: &mut Md5, v: &Bson) {
    match v {
        Bson::Int32(n) => h.update(i64::from(*n).to_le_bytes()),
        Bson::Int64(n) => h.update(n.to_le_bytes()),
        Bson::Double(d) => h.update(long_for_hash(*d).to_le_bytes()),
        Bson::Decimal128(d) => {
            let f = d.to_string().parse::<f64>().unwrap_or(f64::NAN);
            h.update(long_for_hash(f).to_le_bytes())
        }
        Bson::Document(d) => hash_fields(h, d.iter().map(|(k, v)| (k.as_str(), v))),
        Bson::Array(a) => {
            let names: Vec<String> = (0..a.len()).map(|i| i.to_string()).collect();
            hash_fields(h, names.iter().map(String::as_str).zip(a.iter()))
        }
        Bson::JavaScriptCodeWithScope(c) => {
            h.update(bson_string(&c.code));
            hash_fields(h, c.scope.iter().map(|(k, v)| (k.as_str(), v)))
        }
        other => h.update(value_bytes(other)),
    }
}

/// Each element with its name, then the end-of-object element (type 0, no name, no value).
fn hash_fields<'a>(h: &mut Md5, fields: impl Iterator<Item = (&'a str, &'a Bson)>) {
    for (name, v) in fields {
        h.update(canonical_type(v).to_le_bytes());
        h.update(name.as_bytes());
        h.update([0u8]);
        hash_body(h, v);
    }
    h.update(0i32.to_le_bytes());
}

/// mongod's `safeNumberLongForHash`: truncation toward zero, NaN 0, clamped to the int64
/// range — exactly Rust's saturating `as` cast.
fn long_for_hash(d: f64) -> i64 {
    d as i64
}

fn bson_string(s: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len() + 5);
    out.extend_from_slice(&((s.len() + 1) as i32).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
    out.push(0);
    out
}

/// A scalar's BSON value bytes (what follows its type byte and name in an element).
fn value_bytes(v: &Bson) -> Vec<u8> {
    match v {
        Bson::String(s) | Bson::Symbol(s) | Bson::JavaScriptCode(s) => bson_string(s),
        Bson::Boolean(b) => vec![u8::from(*b)],
        Bson::DateTime(t) => t.timestamp_millis().to_le_bytes().to_vec(),
        Bson::ObjectId(o) => o.bytes().to_vec(),
        Bson::Timestamp(t) => {
            let mut out = t.increment.to_le_bytes().to_vec();
            out.extend_from_slice(&t.time.to_le_bytes());
            out
        }
        Bson::Binary(b) => {
            let mut out = (b.bytes.len() as i32).to_le_bytes().to_vec();
            out.push(u8::from(b.subtype));
            if b.subtype == BinarySubtype::BinaryOld {
                out.extend_from_slice(&((b.bytes.len() as i32).saturating_sub(4)).to_le_bytes());
            }
            out.extend_from_slice(&b.bytes);
            out
        }
        Bson::RegularExpression(r) => {
            let mut out = r.pattern.as_bytes().to_vec();
            out.push(0);
            out.extend_from_slice(r.options.as_bytes());
            out.push(0);
            out
        }
        Bson::DbPointer(_) => bson::to_vec(&bson::doc! {"": v.clone()})
            .map(|b| b[7..b.len() - 1].to_vec())
            .unwrap_or_default(),
        Bson::Decimal128(d) => d.bytes().to_vec(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn oid(hex: &str) -> Bson {
        Bson::ObjectId(bson::oid::ObjectId::parse_str(hex).expect("oid"))
    }

    /// mongod's `hasher_test.cpp` vectors.
    #[test]
    fn mongods_vectors() {
        use bson::{Binary, DateTime, Regex};
        let cases: Vec<(Bson, i64)> = vec![
            (Bson::Int32(42), -944_302_157_085_130_861),
            (Bson::Int32(0), 4_854_801_880_128_277_513),
            (Bson::Double(0.456), 4_854_801_880_128_277_513),
            (Bson::Double(f64::NAN), 4_854_801_880_128_277_513),
            (Bson::Double(1.987), 5_902_408_780_260_971_510),
            (Bson::Int64(-1), 1_140_205_862_565_771_219),
            (Bson::Double(-1.789), 1_140_205_862_565_771_219),
            (Bson::Int32(i32::MIN), 6_165_898_260_261_354_870),
            (Bson::Int32(i32::MAX), 1_143_184_177_162_245_883),
            (Bson::Double(f64::MAX), 921_523_596_458_303_250),
            (Bson::Int64(i64::MAX), 921_523_596_458_303_250),
            (Bson::Double(-f64::MAX), 4_532_067_210_535_695_462),
            (Bson::MinKey, 7_961_148_599_568_647_290),
            (Bson::MaxKey, 5_504_842_513_779_440_750),
            (Bson::Undefined, 40_158_834_000_849_533),
            (Bson::String("abc".into()), 8_478_485_326_885_698_097),
            (Bson::Symbol("abc".into()), 8_478_485_326_885_698_097),
            (Bson::String(String::new()), 2_049_396_243_249_673_340),
            (
                Bson::Document(doc! {"a": "abc", "b": 123i64}),
                4_771_603_801_758_380_216,
            ),
            (Bson::Document(doc! {}), 7_980_500_913_326_740_417),
            (
                Bson::Array(vec!["bar".into(), "baz".into(), "qux".into()]),
                -2_938_911_267_422_831_539,
            ),
            (Bson::Array(vec![]), 8_849_948_234_993_459_283),
            (
                Bson::Binary(Binary {
                    subtype: BinarySubtype::Generic,
                    bytes: vec![0, 1, 2, 3, 4, 6],
                }),
                7_252_465_090_394_235_301,
            ),
            (
                Bson::Binary(Binary {
                    subtype: BinarySubtype::Uuid,
                    bytes: (0..16).collect(),
                }),
                6_084_661_258_071_355_978,
            ),
            (oid("010203040506070809101112"), -5_588_663_249_627_035_708),
            (oid("000000000000000000000000"), -4_293_118_519_463_489_418),
            (Bson::Boolean(true), 6_405_873_908_747_105_701),
            (Bson::Boolean(false), 6_289_544_573_401_934_092),
            (
                Bson::DateTime(DateTime::from_millis(0x5566_7788_1122_3344)),
                4_476_222_765_095_560_467,
            ),
            (
                Bson::DateTime(DateTime::from_millis(0)),
                -1_178_696_894_582_842_035,
            ),
            (
                Bson::RegularExpression(Regex {
                    pattern: "mongodb".into(),
                    options: String::new(),
                }),
                -7_275_792_090_268_217_043,
            ),
            (
                Bson::RegularExpression(Regex {
                    pattern: ".*".into(),
                    options: "i".into(),
                }),
                7_095_855_029_187_981_886,
            ),
            (
                Bson::JavaScriptCode("func f() { return 1; }".into()),
                6_861_638_109_178_014_270,
            ),
        ];
        for (v, want) in cases {
            assert_eq!(hash64(&v), want, "{v:?}");
        }
    }
}
