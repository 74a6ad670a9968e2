//! Property tests for MongoDB's value order (`compare_values`) and the key encoding
//! (`encode_value`, `encode_key`): the order is total, and `memcmp` over encodings agrees with
//! it for single values and for compound keys with mixed directions. The generator favours
//! collisions: small alphabets, the same number as int32/int64/double/decimal, values around
//! 2^53 and the int64 extremes.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

use std::cmp::Ordering;

use bson::{
    oid::ObjectId, spec::BinarySubtype, Binary, Bson, DateTime, Decimal128, Document,
    JavaScriptCodeWithScope, Regex, Timestamp,
};
use proptest::prelude::*;
use shale_doc::{compare_raw_values, compare_values, encode_key, encode_value, Direction};

/// Whether a value is or holds a decimal128: its key is its nearest double (or its int64),
/// so keys order it only weakly (`key_order_agrees`).
fn has_decimal(v: &Bson) -> bool {
    match v {
        Bson::Decimal128(_) => true,
        Bson::Array(items) => items.iter().any(has_decimal),
        Bson::Document(d) => d.values().any(has_decimal),
        _ => false,
    }
}

/// Keys agree with the value order: exactly, or, where a decimal is involved, without ever
/// contradicting it (equal values share a key; unequal ones may share one too).
fn key_order_agrees(keys: Ordering, values: Ordering, decimal: bool) -> bool {
    if decimal {
        values == Ordering::Equal && keys == Ordering::Equal
            || values != Ordering::Equal && keys != values.reverse()
    } else {
        keys == values
    }
}

fn enc(v: &Bson) -> Vec<u8> {
    let mut out = Vec::new();
    encode_value(v, &mut out);
    out
}

/// A decimal128 from sign, coefficient and unbiased exponent.
fn dec(negative: bool, coeff: u128, exp: i32) -> Bson {
    let bits = (u128::from(negative) << 127) | (((exp + 6176) as u128) << 113) | coeff;
    Bson::Decimal128(Decimal128::from_bytes(bits.to_le_bytes()))
}

/// A DBPointer, built from its BSON bytes (the bson crate has no public constructor).
fn db_pointer(ns: &str, oid_byte: u8) -> Bson {
    let mut body = vec![0x0c, b'p', 0];
    body.extend_from_slice(&(ns.len() as i32 + 1).to_le_bytes());
    body.extend_from_slice(ns.as_bytes());
    body.push(0);
    body.extend_from_slice(&[oid_byte; 12]);
    body.push(0);
    let mut bytes = ((body.len() + 4) as i32).to_le_bytes().to_vec();
    bytes.extend_from_slice(&body);
    let doc = Document::from_reader(&bytes[..]).expect("valid DBPointer document");
    doc.get("p").cloned().expect("field p")
}

/// An integer in one of the numeric types that can hold it exactly (or nearly, for double).
fn number_from(i: i64, kind: u8) -> Bson {
    match kind % 4 {
        0 if i32::try_from(i).is_ok() => Bson::Int32(i as i32),
        1 => Bson::Double(i as f64),
        2 if i.unsigned_abs() < 1 << 60 => dec(i < 0, u128::from(i.unsigned_abs()), 0),
        _ => Bson::Int64(i),
    }
}

/// Integers near the edges where doubles and 64-bit integers part ways (0, ±2^53, the
/// int64 limits), and any other.
fn interesting_i64() -> impl Strategy<Value = i64> {
    const P53: i64 = 1 << 53;
    prop_oneof![
        -3i64..=3,
        (P53 - 3)..=(P53 + 3),
        (-P53 - 3)..=(-P53 + 3),
        (i64::MAX - 3)..=i64::MAX,
        i64::MIN..=(i64::MIN + 3),
        any::<i64>(),
    ]
}

fn arb_number() -> impl Strategy<Value = Bson> {
    let interesting = interesting_i64();
    prop_oneof![
        4 => (interesting, any::<u8>()).prop_map(|(i, k)| number_from(i, k)),
        1 => prop::sample::select(vec![
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            -0.0,
            0.5,
            -0.5,
            f64::MAX,
            f64::MIN_POSITIVE,
            f64::from_bits(1),
            -f64::from_bits(1),
            9_223_372_036_854_775_808.0,
            -9_223_372_036_854_775_808.0,
            (1u64 << 53) as f64 + 2.0,
        ])
        .prop_map(Bson::Double),
        1 => any::<f64>().prop_map(Bson::Double),
        1 => (any::<bool>(), 0u128..2000, -5i32..5).prop_map(|(s, c, e)| dec(s, c, e)),
    ]
}

fn arb_string() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop::sample::select(vec!['\0', 'a', 'b', '\u{1}', 'é', '\u{ff}']),
        0..4,
    )
    .prop_map(|cs| cs.into_iter().collect())
}

fn arb_name() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["", "a", "b", "ab", "é"]).prop_map(String::from)
}

/// One strategy per kind of leaf value, each with its weight in `arb_leaf`.
fn leaf_kinds() -> Vec<(u32, BoxedStrategy<Bson>)> {
    vec![
        (1, Just(Bson::MinKey).boxed()),
        (1, Just(Bson::MaxKey).boxed()),
        (1, Just(Bson::Null).boxed()),
        (1, Just(Bson::Undefined).boxed()),
        (6, arb_number().boxed()),
        (3, arb_string().prop_map(Bson::String).boxed()),
        (1, arb_string().prop_map(Bson::Symbol).boxed()),
        (
            1,
            (0u8..3, prop::collection::vec(0u8..3, 0..3))
                .prop_map(|(t, bytes)| {
                    Bson::Binary(Binary {
                        subtype: BinarySubtype::from(t),
                        bytes,
                    })
                })
                .boxed(),
        ),
        (
            1,
            (0u8..3)
                .prop_map(|b| Bson::ObjectId(ObjectId::from_bytes([b; 12])))
                .boxed(),
        ),
        (1, any::<bool>().prop_map(Bson::Boolean).boxed()),
        (
            1,
            prop_oneof![Just(i64::MIN), Just(i64::MAX), -2i64..2]
                .prop_map(|ms| Bson::DateTime(DateTime::from_millis(ms)))
                .boxed(),
        ),
        (
            1,
            (prop_oneof![0u32..2, Just(u32::MAX)], 0u32..2)
                .prop_map(|(time, increment)| Bson::Timestamp(Timestamp { time, increment }))
                .boxed(),
        ),
        (
            1,
            (arb_name(), prop::sample::select(vec!["", "i", "im"]))
                .prop_map(|(p, o)| {
                    Bson::RegularExpression(Regex {
                        pattern: p,
                        options: o.to_string(),
                    })
                })
                .boxed(),
        ),
        (
            1,
            (prop::sample::select(vec!["a", "b", "ab"]), 0u8..2)
                .prop_map(|(ns, b)| db_pointer(ns, b))
                .boxed(),
        ),
        (1, arb_string().prop_map(Bson::JavaScriptCode).boxed()),
    ]
}

fn arb_leaf() -> impl Strategy<Value = Bson> {
    prop::strategy::Union::new_weighted(leaf_kinds())
}

/// Two leaves of the same kind, so that the order inside each type is exercised.
fn same_kind_pair() -> impl Strategy<Value = (Bson, Bson)> {
    (0..leaf_kinds().len()).prop_flat_map(|k| {
        let s = leaf_kinds().swap_remove(k).1;
        (s.clone(), s)
    })
}

/// Two numbers at most 2 apart (as integers), each in a random numeric type.
fn near_number_pair() -> impl Strategy<Value = (Bson, Bson)> {
    let base = interesting_i64();
    (base, -2i64..=2, any::<u8>(), any::<u8>())
        .prop_map(|(i, d, k1, k2)| (number_from(i, k1), number_from(i.saturating_add(d), k2)))
}

fn arb_bson() -> impl Strategy<Value = Bson> {
    arb_leaf().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Bson::Array),
            prop::collection::vec((arb_name(), inner.clone()), 0..4)
                .prop_map(|fields| { Bson::Document(fields.into_iter().collect::<Document>()) }),
            (
                arb_string(),
                prop::collection::vec((arb_name(), inner), 0..3)
            )
                .prop_map(|(code, fields)| {
                    Bson::JavaScriptCodeWithScope(JavaScriptCodeWithScope {
                        code,
                        scope: fields.into_iter().collect(),
                    })
                }),
        ]
    })
}

fn arb_direction() -> impl Strategy<Value = Direction> {
    prop_oneof![Just(Direction::Ascending), Just(Direction::Descending)]
}

fn directed(ord: Ordering, d: Direction) -> Ordering {
    match d {
        Direction::Ascending => ord,
        Direction::Descending => ord.reverse(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn order_is_reflexive_and_antisymmetric(a in arb_bson(), b in arb_bson()) {
        prop_assert_eq!(compare_values(&a, &a), Ordering::Equal);
        prop_assert_eq!(compare_values(&a, &b), compare_values(&b, &a).reverse());
    }

    #[test]
    fn order_is_transitive(a in arb_bson(), b in arb_bson(), c in arb_bson()) {
        let (ab, bc, ac) = (compare_values(&a, &b), compare_values(&b, &c), compare_values(&a, &c));
        if ab != Ordering::Greater && bc != Ordering::Greater {
            prop_assert_ne!(ac, Ordering::Greater);
        }
        if ab == Ordering::Equal && bc == Ordering::Equal {
            prop_assert_eq!(ac, Ordering::Equal);
        }
    }

    #[test]
    fn sorted_lists_are_consistent(mut values in prop::collection::vec(arb_bson(), 2..12)) {
        values.sort_by(compare_values);
        for i in 0..values.len() {
            for j in i + 1..values.len() {
                prop_assert_ne!(compare_values(&values[i], &values[j]), Ordering::Greater);
                let decimal = has_decimal(&values[i]) || has_decimal(&values[j]);
                prop_assert!(decimal || enc(&values[i]) <= enc(&values[j]));
            }
        }
    }

    #[test]
    fn encoding_order_equals_value_order(a in arb_bson(), b in arb_bson()) {
        let decimal = has_decimal(&a) || has_decimal(&b);
        prop_assert!(
            key_order_agrees(enc(&a).cmp(&enc(&b)), compare_values(&a, &b), decimal),
            "{:?} vs {:?}", a, b
        );
    }

    #[test]
    fn encoding_order_equals_value_order_within_a_type(
        (a, b) in prop_oneof![same_kind_pair(), near_number_pair()],
        prefix in arb_bson(),
        name in arb_name(),
        direction in arb_direction(),
    ) {
        let expected = compare_values(&a, &b);
        let decimal = has_decimal(&a) || has_decimal(&b);
        let agrees = |keys: Ordering, values: Ordering| key_order_agrees(keys, values, decimal);
        prop_assert!(agrees(enc(&a).cmp(&enc(&b)), expected), "{:?} vs {:?}", a, b);
        // The same pair inside containers after a shared element, and as a directed key field.
        let arr = |v: &Bson| Bson::Array(vec![prefix.clone(), v.clone()]);
        prop_assert!(agrees(enc(&arr(&a)).cmp(&enc(&arr(&b))), expected));
        let obj = |v: &Bson| {
            let mut d = Document::new();
            d.insert("p", prefix.clone());
            d.insert(name.clone(), v.clone());
            Bson::Document(d)
        };
        prop_assert_eq!(compare_values(&obj(&a), &obj(&b)), expected);
        prop_assert!(agrees(enc(&obj(&a)).cmp(&enc(&obj(&b))), expected));
        let key = |v| encode_key(&[(v, direction), (&prefix, Direction::Ascending)]);
        prop_assert!(agrees(key(&a).cmp(&key(&b)), directed(expected, direction)));
    }

    #[test]
    fn raw_order_equals_owned_order(
        (a, b) in prop_oneof![same_kind_pair(), near_number_pair(), (arb_bson(), arb_bson())]
    ) {
        let da = bson::RawDocumentBuf::from_document(&bson::doc! {"v": a.clone()}).unwrap();
        let db = bson::RawDocumentBuf::from_document(&bson::doc! {"v": b.clone()}).unwrap();
        let (ra, rb) = (da.get("v").unwrap().unwrap(), db.get("v").unwrap().unwrap());
        prop_assert_eq!(compare_raw_values(ra, rb).unwrap(), compare_values(&a, &b));
    }

    #[test]
    fn equal_integers_encode_identically(i in any::<i64>(), k1 in any::<u8>(), k2 in any::<u8>()) {
        let (a, b) = (number_from(i, k1), number_from(i, k2));
        if compare_values(&a, &b) == Ordering::Equal {
            prop_assert_eq!(enc(&a), enc(&b));
        }
        prop_assert_eq!(enc(&Bson::Int64(i)), enc(&number_from(i, 0)));
    }

    #[test]
    fn compound_key_order_is_lexicographic_with_directions(
        fields in prop::collection::vec((arb_bson(), arb_bson(), arb_direction()), 1..4)
    ) {
        let left: Vec<(&Bson, Direction)> = fields.iter().map(|(a, _, d)| (a, *d)).collect();
        let right: Vec<(&Bson, Direction)> = fields.iter().map(|(_, b, d)| (b, *d)).collect();
        let expected = fields.iter().fold(Ordering::Equal, |acc, (a, b, d)| {
            acc.then_with(|| directed(compare_values(a, b), *d))
        });
        let decimal = fields.iter().any(|(a, b, _)| has_decimal(a) || has_decimal(b));
        if !decimal {
            prop_assert_eq!(encode_key(&left).cmp(&encode_key(&right)), expected);
        }
    }
}
