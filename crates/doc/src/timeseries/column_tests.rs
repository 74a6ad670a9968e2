//! Tests of the BSONColumn decoder: columns mongod wrote (from its jstests, decoded by hand
//! against the format in `column.rs`), columns built the way mongod's `bsoncolumn_test.cpp`
//! builds its expected binaries (literal, control byte, blocks, EOO), malformed columns, and a
//! round trip through a small encoder kept here (tests only; it picks simpler blocks than
//! mongod's writer, which any reader must accept as well).

use super::*;
use bson::oid::ObjectId;
use bson::spec::BinarySubtype;
use bson::{Binary, Bson, DateTime, Decimal128, Document, Timestamp};
use proptest::prelude::*;

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

fn values(bytes: &[u8]) -> Vec<Option<Bson>> {
    decode(bytes, 100_000)
        .expect("decodes")
        .into_iter()
        .map(|v| v.map(|r| Bson::try_from(r).expect("bson")))
        .collect()
}

fn refused(bytes: &[u8]) -> ColumnError {
    decode(bytes, 100_000).expect_err("refused")
}

/// A literal as mongod writes it: type byte, empty field name, value.
fn lit(v: &Bson) -> Vec<u8> {
    let doc = bson::to_vec(&bson::doc! {"": v.clone()}).expect("bson");
    doc[4..doc.len() - 1].to_vec()
}

/// One word of base selector `s` holding `slots` (`None`: a skip), as mongod lays it out.
fn word(s: u64, slots: &[Option<u64>]) -> u64 {
    let (bits, first) = match s {
        1..=6 => (s, 4),
        7 => (7, 8),
        8 => (8, 8),
        9 => (10, 4),
        10 => (12, 4),
        11 => (15, 4),
        12 => (20, 4),
        13 => (30, 4),
        _ => (60, 4),
    };
    let mask = (1u64 << bits) - 1;
    slots.iter().enumerate().fold(s, |w, (i, v)| {
        w | (v.unwrap_or(mask) << (first + bits * i as u64))
    })
}

/// A run: control byte with the scale nibble, then the words.
fn run(nibble: u8, words: &[u64]) -> Vec<u8> {
    let mut out = vec![nibble << 4 | (words.len() as u8 - 1)];
    for w in words {
        out.extend_from_slice(&w.to_le_bytes());
    }
    out
}

fn zz(d: i64) -> u64 {
    ((d << 1) ^ (d >> 63)) as u64
}

fn at(ms: i64) -> Bson {
    Bson::DateTime(DateTime::from_millis(ms))
}

fn oid(s: &str) -> Bson {
    Bson::ObjectId(ObjectId::parse_str(s).expect("oid"))
}

#[test]
fn mongods_columns_decode() {
    // jstests/noPassthrough/timeseries/timeseries_insert_decompression_failure.js: a bucket of
    // two measurements. Time: a date literal, then one delta of delta 0.
    let t = hex("0900188608148d010000800e0000000000000000");
    assert_eq!(
        values(&t),
        vec![Some(at(1_705_438_119_448)), Some(at(1_705_438_119_448))]
    );
    // Its `a`: double 0.0, then +1 at scale ×1.
    let a = hex("01000000000000000000902e0000000000000000");
    assert_eq!(
        values(&a),
        vec![Some(Bson::Double(0.0)), Some(Bson::Double(1.0))]
    );
    // Its `_id`: an objectId, then delta of delta +1 (the counter's last byte).
    let id = hex("070065a6eba7e6d2e848e08c3750802e0000000000000000");
    assert_eq!(
        values(&id),
        vec![
            Some(oid("65a6eba7e6d2e848e08c3750")),
            Some(oid("65a6eba7e6d2e848e08c3751"))
        ]
    );
    // jstests/noPassthrough/validate/validate_bson_conformance (a valid column): 2.0, then
    // four blocks: RLE of 8 × 120, 30 two-bit zeros, 8 seven-bit zeros (selector 7, slots
    // from bit 8), one 60-bit zero: 1,000 values.
    let full = hex(
        "01000000000000000040937f00000000000000020000000000000007000000000000000e0000000000000000",
    );
    assert_eq!(values(&full), vec![Some(Bson::Double(2.0)); 1000]);
    // A string literal (jstests' preUpgrade bucket).
    let s = hex("02000b000000707265557067726164650000");
    assert_eq!(values(&s), vec![Some(Bson::String("preUpgrade".into()))]);
    // jstests/libs (all BSON types): a date, 120 skips, then 879 repeats (60 + RLE 720 + 60
    // + 30 + 8 + 1).
    let skips = hex(concat!(
        "09008a5bff178c01000087f1fffffffffffffff1ffffffffffffff01000000000000005f",
        "000000000000000100000000000000020000000000000007000000000000000e0000000000000000"
    ));
    let got = values(&skips);
    assert_eq!(got.len(), 1000);
    assert_eq!(got[0], Some(at(1_701_209_660_298)));
    assert!(got[1..121].iter().all(Option::is_none));
    assert!(got[121..].iter().all(|v| v == &Some(at(1_701_209_660_298))));
}

#[test]
fn a_corrupted_mongod_column_is_refused() {
    // The same jstest corrupts `a` by changing one base64 character: the literal becomes a
    // tiny subnormal double, which the run at scale ×1 cannot hold (mongod: 6067607).
    let bad = hex("01000000000000000100902e0000000000000000");
    let e = refused(&bad);
    assert_eq!(e.offset, 10);
    assert!(e.reason.contains("cannot be held at scale 0"), "{e}");
    assert!(e
        .to_string()
        .starts_with("invalid BSONColumn at byte 10: double"));
}

#[test]
fn int_deltas_with_skips_and_every_base_selector() {
    let mut col = lit(&Bson::Int64(100));
    // Selector 1: sixty 1-bit slots, which can only hold 0 (1 is a skip); then selectors
    // 2..=14, each word a skip and then +1s.
    col.extend(run(8, &[word(1, &[Some(0); 60])]));
    let mut expected = vec![Some(Bson::Int64(100)); 61];
    let mut v = 100i64;
    for s in 2..=14u64 {
        let n = [0, 60, 30, 20, 15, 12, 10, 8, 7, 6, 5, 4, 3, 2, 1][s as usize];
        let mut slots = vec![Some(zz(1)); n];
        slots[0] = None;
        col.extend(run(8, &[word(s, &slots)]));
        expected.push(None);
        for _ in 1..n {
            v += 1;
            expected.push(Some(Bson::Int64(v)));
        }
    }
    col.push(0);
    assert_eq!(values(&col), expected);
}

#[test]
fn int32_bool_and_skips_before_any_literal() {
    // A column may start with skips; a zero delta before any literal is a skip too.
    let mut col = run(8, &[word(14, &[None]), word(14, &[Some(0)])]);
    col.extend(lit(&Bson::Int32(-5)));
    col.extend(run(8, &[word(12, &[Some(zz(7)), Some(zz(-10)), Some(0)])]));
    col.extend(lit(&Bson::Boolean(false)));
    col.extend(run(8, &[word(13, &[Some(zz(1)), Some(zz(-1))])]));
    col.push(0);
    assert_eq!(
        values(&col),
        vec![
            None,
            None,
            Some(Bson::Int32(-5)),
            Some(Bson::Int32(2)),
            Some(Bson::Int32(-8)),
            Some(Bson::Int32(-8)),
            Some(Bson::Boolean(false)),
            Some(Bson::Boolean(true)),
            Some(Bson::Boolean(false)),
        ]
    );
}

#[test]
fn doubles_at_every_scale() {
    // Each run re-scales the previous value: 1.5 → ×10 15 (+1 → 1.6), ×100 160 (+1 → 1.61),
    // ×10⁴ 16100 (+1 → 1.6101), ×10⁸ (+1 → 1.61010001), ×1 refused for 1.61010001 below, so the
    // last run uses no scale: the bits as an integer (+1 ulp).
    let mut col = lit(&Bson::Double(1.5));
    col.extend(run(0x9, &[word(14, &[Some(zz(2))])])); // ×1: 1.5 is not whole
    assert!(decode(&[col.clone(), vec![0]].concat(), 10).is_err());
    let mut col = lit(&Bson::Double(1.5));
    col.extend(run(0xA, &[word(14, &[Some(zz(1))])]));
    col.extend(run(0xB, &[word(14, &[Some(zz(1))])]));
    col.extend(run(0xC, &[word(14, &[Some(zz(1))])]));
    col.extend(run(0xD, &[word(14, &[Some(zz(1))])]));
    col.extend(run(0x8, &[word(14, &[Some(zz(1))])]));
    col.extend(lit(&Bson::Double(3.0)));
    col.extend(run(0x9, &[word(14, &[Some(zz(-4))])]));
    col.push(0);
    let after = f64::from_bits(1.610_100_01f64.to_bits() + 1);
    assert_eq!(
        values(&col),
        [1.5, 1.6, 1.61, 1.6101, 1.610_100_01, after, 3.0, -1.0]
            .map(|d| Some(Bson::Double(d)))
            .to_vec()
    );
}

#[test]
fn extended_selectors_in_a_column() {
    // Int64 deltas with trailing zeros: selector 7 extension 1 (2 bits + 4-bit zero count),
    // selector 8 extension 1 (4 bits + nibble count), extension 8 (4 bits + 5-bit count).
    let mut col = lit(&Bson::Int64(0));
    let s7 = 7 | (1 << 4) | (((zz(3) >> 1 << 4) | 1) << 8); // zz(3) = 6 = 3 << 1: v 3, z 1
    let s8 = 8 | (1 << 4) | (((1 << 4) | 3) << 8); // 1 << 12 = zz(2048)
    let s8l = 8 | (8 << 4) | (((1 << 5) | 4) << 8); // 1 << 16 = zz(32768)
    col.extend(run(8, &[s7, s8, s8l]));
    col.push(0);
    let got = values(&col);
    assert_eq!(got[1], Some(Bson::Int64(3)));
    assert_eq!(got[10], Some(Bson::Int64(3 + 2048)));
    assert_eq!(got[17], Some(Bson::Int64(3 + 2048 + 32768)));
    assert_eq!(got.len(), 1 + 9 + 7 + 6);
}

#[test]
fn dates_timestamps_and_object_ids_take_deltas_of_deltas() {
    let mut col = lit(&at(1000));
    col.extend(run(8, &[word(12, &[Some(zz(10)), Some(0), Some(zz(-5))])]));
    col.extend(run(8, &[15])); // RLE: 120 × the run's last slot, delta of delta −5
    col.push(0);
    let got = values(&col);
    assert_eq!(
        &got[..4],
        &[
            Some(at(1000)),
            Some(at(1010)),
            Some(at(1020)),
            Some(at(1025))
        ]
    );
    assert_eq!(got.len(), 124);
    // After the RLE the delta has gone from 5 down by 5 each time: 0, −5, …
    assert_eq!(got[4], Some(at(1025)));
    assert_eq!(got[5], Some(at(1020)));

    let ts = Bson::Timestamp(Timestamp {
        time: 7,
        increment: 1,
    });
    let mut col = lit(&ts);
    col.extend(run(8, &[word(13, &[Some(zz(1)), Some(0)])]));
    col.push(0);
    let got = values(&col);
    let inc = |i| {
        Some(Bson::Timestamp(Timestamp {
            time: 7,
            increment: i,
        }))
    };
    assert_eq!(got, vec![Some(ts.clone()), inc(2), inc(3)]);

    // ObjectIds: counter +1 twice, then the timestamp's low byte +1 (encoded bit 8).
    let mut col = lit(&oid("64dd4ae9a2c44e75d1151285"));
    col.extend(run(8, &[word(12, &[Some(zz(1)), Some(0), Some(zz(255))])]));
    col.push(0);
    assert_eq!(
        values(&col),
        vec![
            Some(oid("64dd4ae9a2c44e75d1151285")),
            Some(oid("64dd4ae9a2c44e75d1151286")),
            Some(oid("64dd4ae9a2c44e75d1151287")),
            Some(oid("64dd4aeaa2c44e75d1151287")),
        ]
    );
}

/// A string's 128-bit integer as mongod makes it (bytes reversed, little-endian).
fn string_int(s: &str) -> i128 {
    let mut b = [0u8; 16];
    for (i, c) in s.bytes().rev().enumerate() {
        b[i] = c;
    }
    i128::from_le_bytes(b)
}

fn zz128(d: i128) -> u64 {
    u64::try_from((d << 1) ^ (d >> 127)).expect("small delta")
}

#[test]
fn strings_bindata_and_decimals_take_128_bit_deltas() {
    let mut col = lit(&Bson::String("abc".into()));
    let d1 = string_int("abd") - string_int("abc");
    let d2 = string_int("") - string_int("abd");
    let d3 = string_int("zzzzzzz") - string_int("");
    col.extend(run(
        8,
        &[word(14, &[Some(zz128(d1))]), word(14, &[Some(0)])],
    ));
    col.extend(run(8, &[word(14, &[None])]));
    assert!(zz128(d2) < (1 << 60) - 1 && zz128(d3) < (1 << 60) - 1);
    col.extend(run(
        8,
        &[word(14, &[Some(zz128(d2))]), word(14, &[Some(zz128(d3))])],
    ));
    col.push(0);
    let s = |v: &str| Some(Bson::String(v.into()));
    assert_eq!(
        values(&col),
        vec![s("abc"), s("abd"), s("abd"), None, s(""), s("zzzzzzz")]
    );

    let bin = |b: &[u8]| {
        Bson::Binary(Binary {
            subtype: BinarySubtype::Generic,
            bytes: b.to_vec(),
        })
    };
    let mut col = lit(&bin(&[1, 2, 3]));
    col.extend(run(8, &[word(14, &[Some(zz128(1 << 16))])]));
    col.push(0);
    assert_eq!(
        values(&col),
        vec![Some(bin(&[1, 2, 3])), Some(bin(&[1, 2, 4]))]
    );

    let one = Decimal128::from_bytes(1i128.to_le_bytes());
    let three = Decimal128::from_bytes(3i128.to_le_bytes());
    let mut col = lit(&Bson::Decimal128(one));
    col.extend(run(8, &[word(14, &[Some(zz128(2))])]));
    col.push(0);
    assert_eq!(
        values(&col),
        vec![Some(Bson::Decimal128(one)), Some(Bson::Decimal128(three))]
    );
}

#[test]
fn other_types_only_repeat() {
    let mut col = lit(&Bson::Null);
    col.extend(run(8, &[word(13, &[Some(0), None])]));
    col.push(0);
    assert_eq!(values(&col), vec![Some(Bson::Null), Some(Bson::Null), None]);
    let mut col = lit(&Bson::Document(bson::doc! {"a": 1}));
    col.extend(run(8, &[word(14, &[Some(2)])]));
    col.push(0);
    assert!(refused(&col).reason.contains("non-zero delta"));
    // MinKey and MaxKey literals (control bytes 0xFF and 0x7F).
    assert_eq!(
        values(&[0xFF, 0, 0x7F, 0, 0]),
        vec![Some(Bson::MinKey), Some(Bson::MaxKey)]
    );
}

fn doc(d: Document) -> Option<Bson> {
    Some(Bson::Document(d))
}

/// bsoncolumn_test.cpp's `Interleaved`: {x:1,y:2}, {x:1,y:3}, {x:1,y:3}, skip, {y:4},
/// {x:1,y:3}, the reference being the first; each stream one block, x's first.
fn interleaved(start: u8) -> Vec<u8> {
    let mut col = vec![start];
    col.extend(bson::to_vec(&bson::doc! {"x": 1, "y": 2}).expect("bson"));
    col.extend(run(
        8,
        &[word(9, &[Some(0), Some(0), Some(0), None, None, Some(0)])],
    ));
    let y = [
        Some(0),
        Some(zz(1)),
        Some(0),
        None,
        Some(zz(1)),
        Some(zz(-1)),
    ];
    col.extend(run(8, &[word(9, &y)]));
    col.extend([0, 0]);
    col
}

#[test]
fn interleaved_objects() {
    let expected = vec![
        doc(bson::doc! {"x": 1, "y": 2}),
        doc(bson::doc! {"x": 1, "y": 3}),
        doc(bson::doc! {"x": 1, "y": 3}),
        None,
        doc(bson::doc! {"y": 4}),
        doc(bson::doc! {"x": 1, "y": 3}),
    ];
    assert_eq!(values(&interleaved(0xF0)), expected);
    assert_eq!(values(&interleaved(0xF1)), expected);
    // After the mode ends, regular decoding repeats the last object on a zero delta.
    let mut col = interleaved(0xF0);
    col.pop();
    col.extend(run(8, &[word(14, &[Some(0)])]));
    col.extend(lit(&Bson::Int32(9)));
    col.push(0);
    let got = values(&col);
    assert_eq!(got[6], doc(bson::doc! {"x": 1, "y": 3}));
    assert_eq!(got[7], Some(Bson::Int32(9)));
}

#[test]
fn interleaved_nested_arrays_and_array_roots() {
    // bsoncolumn_test.cpp's `InterleavedArray`: {x:[1,2]}, {x:[2,3]} with 0xF1 (arrays
    // entered; 0xF0 would make the array one leaf).
    let mut col = vec![0xF1];
    col.extend(bson::to_vec(&bson::doc! {"x": [1, 2], "e": {}}).expect("bson"));
    col.extend(run(8, &[word(13, &[Some(0), Some(zz(1))])]));
    col.extend(run(8, &[word(13, &[Some(0), None])]));
    col.extend([0, 0]);
    assert_eq!(
        values(&col),
        vec![
            doc(bson::doc! {"x": [1, 2], "e": {}}),
            doc(bson::doc! {"x": [2], "e": {}}),
        ]
    );
    // `InterleavedArrayRoot`: [1,2], [2,3] with 0xF2; a literal can restart a stream.
    let mut col = vec![0xF2];
    col.extend(bson::to_vec(&bson::doc! {"0": 1, "1": 2}).expect("bson"));
    col.extend(run(8, &[word(13, &[Some(0), Some(zz(1))])]));
    col.extend(lit(&Bson::Int32(2)));
    col.extend(lit(&Bson::String("s".into())));
    col.extend([0, 0]);
    assert_eq!(
        values(&col),
        vec![
            Some(Bson::Array(vec![Bson::Int32(1), Bson::Int32(2)])),
            Some(Bson::Array(vec![Bson::Int32(2), Bson::String("s".into())])),
        ]
    );
    // A nested sub-document left without fields is left out.
    let mut col = vec![0xF0];
    col.extend(bson::to_vec(&bson::doc! {"a": {"b": 1}, "c": 1}).expect("bson"));
    col.extend(run(8, &[word(14, &[None])]));
    col.extend(run(8, &[word(14, &[Some(0)])]));
    col.extend([0, 0]);
    assert_eq!(values(&col), vec![doc(bson::doc! {"c": 1})]);
}

#[test]
fn malformed_columns_are_refused_with_the_byte() {
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (vec![], "without its end byte"),
        (vec![0x10, 0, 1, 0, 0, 0], "without its end byte"),
        (vec![0x10, 0, 1, 0], "runs past"),
        (vec![0x10, 1, 1, 0, 0, 0, 0], "field name"),
        (vec![0x14, 0, 0], "unknown element type"),
        (vec![0, 0], "after the column's end"),
        (
            [vec![0xE0], 0u64.to_le_bytes().to_vec(), vec![0]].concat(),
            "control byte",
        ),
        (
            [vec![0x80], 0u64.to_le_bytes().to_vec(), vec![0]].concat(),
            "selector 0",
        ),
        (
            [vec![0x81], 0x1Eu64.to_le_bytes().to_vec(), vec![0]].concat(),
            "past the column",
        ),
        (
            [vec![0x80], 0x2Eu64.to_le_bytes().to_vec(), vec![0]].concat(),
            "no value before",
        ),
        (
            [
                vec![0xF0],
                bson::to_vec(&bson::doc! {"a": {}}).expect("bson"),
                vec![0, 0],
            ]
            .concat(),
            "no scalar",
        ),
        (
            [vec![0xF0], vec![9, 0, 0, 0, 0x10, 0x61, 0, 1, 0]].concat(),
            "not BSON",
        ),
    ];
    for (bytes, why) in cases {
        let e = refused(&bytes);
        assert!(e.reason.contains(why), "{bytes:02x?}: {e}");
    }
    // Interleaved mode may end only before a document, not inside one.
    let mut col = vec![0xF0];
    col.extend(bson::to_vec(&bson::doc! {"x": 1, "y": 2}).expect("bson"));
    col.extend(run(8, &[word(14, &[Some(0)])]));
    col.extend([0, 0]);
    assert!(refused(&col).reason.contains("inside a document"));
    // More values than the bucket holds, by RLE or by rows.
    let rle = [lit(&Bson::Int32(1)), run(8, &[0xFF]), vec![0]].concat();
    assert!(decode(&rle, 1000)
        .expect_err("too many")
        .reason
        .contains("more values"));
    assert_eq!(decode(&rle, 1921).expect("fits").len(), 1921);
    assert!(decode(&interleaved(0xF0), 5).is_err());
}

/// A test-only writer: literals, then zigzag deltas packed greedily into base-selector words,
/// at most 16 words a run; a value whose delta will not fit in 60 bits is a new literal.
fn encode(values: &[Option<Bson>]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut prev: Option<i128> = None;
    let mut slots: Vec<Option<u64>> = Vec::new();
    for v in values {
        let Some(v) = v else {
            slots.push(None);
            continue;
        };
        let n = match v {
            Bson::Int64(i) => i128::from(*i),
            Bson::String(s) => string_int(s),
            _ => unreachable!("int64 and strings only"),
        };
        let delta = prev.map(|p| n.wrapping_sub(p));
        match delta.map(|d| ((d << 1) ^ (d >> 127)) as u128) {
            Some(z) if z < (1 << 60) - 1 => slots.push(Some(z as u64)),
            _ => {
                flush(&mut out, &mut slots);
                out.extend(lit(v));
            }
        }
        prev = Some(n);
    }
    flush(&mut out, &mut slots);
    out.push(0);
    out
}

fn flush(out: &mut Vec<u8>, slots: &mut Vec<Option<u64>>) {
    const COUNT: [usize; 15] = [0, 60, 30, 20, 15, 12, 10, 8, 7, 6, 5, 4, 3, 2, 1];
    const BITS: [u32; 15] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 15, 20, 30, 60];
    let mut words = Vec::new();
    let mut rest = &slots[..];
    while !rest.is_empty() {
        let s = (1..=14)
            .find(|&s| {
                COUNT[s] <= rest.len()
                    && rest[..COUNT[s]]
                        .iter()
                        .all(|v| v.is_none_or(|v| v < (1 << BITS[s]) - 1))
            })
            .expect("selector 14 fits any 60-bit slot");
        words.push(word(s as u64, &rest[..COUNT[s]]));
        rest = &rest[COUNT[s]..];
    }
    for chunk in words.chunks(16) {
        out.extend(run(8, chunk));
    }
    slots.clear();
}

fn small_string() -> impl Strategy<Value = String> {
    "[a-z]{0,16}".prop_filter("no leading NUL", |s| !s.starts_with('\0'))
}

proptest! {
    #[test]
    fn int64_columns_round_trip(
        v in proptest::collection::vec(proptest::option::weighted(0.9, -1000i64..1000), 1..300),
        big in any::<i64>(),
    ) {
        let mut v: Vec<Option<Bson>> = v.into_iter().map(|x| x.map(Bson::Int64)).collect();
        v.push(Some(Bson::Int64(big)));
        prop_assert_eq!(values(&encode(&v)), v);
    }

    #[test]
    fn string_columns_round_trip(
        v in proptest::collection::vec(proptest::option::weighted(0.9, small_string()), 1..100),
    ) {
        let v: Vec<Option<Bson>> = v.into_iter().map(|x| x.map(Bson::String)).collect();
        prop_assert_eq!(values(&encode(&v)), v);
    }

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = decode(&bytes, 10_000);
    }
}
