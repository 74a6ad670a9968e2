//! Unit tests of `expr_convert.rs`: mongod's conversion table pair by pair, `onError` and
//! `onNull`, `to` as name and number, the shorthands, `$isNumber`, and each error, with cases
//! taken from mongod's `jstests/aggregation/expressions/convert.js` and `is_number.js`.

use crate::matcher::expr::{Expr, Value};
use bson::oid::ObjectId;
use bson::{bson, doc, rawdoc, Bson, DateTime, Decimal128, Timestamp};

fn run(spec: Bson) -> Result<Bson, (i32, String)> {
    let spec = bson::RawDocumentBuf::from_document(&doc! {"e": spec}).expect("raw");
    let raw = spec.get("e").expect("valid").expect("present");
    let e = Expr::parse(raw).map_err(|e| (e.code.code(), e.message))?;
    let d = rawdoc! {"n": null, "s": "5"};
    match e.evaluate(&d).map_err(|e| (e.code.code(), e.message))? {
        Value::Missing => Ok(Bson::Undefined),
        v => Ok(Bson::try_from(v.as_raw().expect("present").to_raw_bson()).expect("converts")),
    }
}

fn convert(input: Bson, to: &str) -> Result<Bson, (i32, String)> {
    run(bson!({"$convert": {"input": {"$literal": input}, "to": to}}))
}

fn ok(input: Bson, to: &str) -> Bson {
    convert(input.clone(), to).unwrap_or_else(|e| panic!("{input} to {to}: {e:?}"))
}

fn fails(input: Bson, to: &str) -> String {
    let (code, message) = convert(input.clone(), to).expect_err("a conversion failure");
    assert_eq!(code, 241, "{input} to {to}: {message}");
    message
}

fn dec(s: &str) -> Bson {
    Bson::Decimal128(s.parse::<Decimal128>().expect("decimal"))
}

#[test]
fn numbers_convert_between_each_other() {
    assert_eq!(ok(bson!(1.9), "int"), bson!(1));
    assert_eq!(ok(bson!(-1.9), "long"), bson!(-1_i64));
    assert_eq!(ok(bson!(5_i64), "int"), bson!(5));
    assert_eq!(ok(bson!(5), "double"), bson!(5.0));
    assert_eq!(ok(bson!(true), "int"), bson!(1));
    assert_eq!(ok(bson!(false), "double"), bson!(0.0));
    assert_eq!(ok(dec("-5.9"), "int"), bson!(-5));
    assert_eq!(ok(dec("1.2E+3"), "long"), bson!(1200_i64));
    assert_eq!(ok(dec("2.5"), "double"), bson!(2.5));
    assert!(fails(bson!(f64::NAN), "int").contains("NaN value"));
    assert!(fails(bson!(f64::INFINITY), "long").contains("infinity value"));
    let message = fails(bson!(2_147_483_648.0), "int");
    assert_eq!(
        message,
        "Conversion would overflow target type in $convert with no onError value: 2.14748e+09"
    );
    fails(bson!(9.3e18), "long");
    fails(bson!(3_000_000_000_i64), "int");
    fails(dec("1E+40"), "long");
    fails(dec("NaN"), "int");
    fails(dec("1E+400"), "double");
}

#[test]
fn decimals_are_built_as_mongod_builds_them() {
    assert_eq!(ok(bson!(2.5), "decimal"), dec("2.50000000000000"));
    assert_eq!(ok(bson!(0.1), "decimal"), dec("0.100000000000000"));
    assert_eq!(ok(bson!(1e300), "decimal"), dec("1.00000000000000E+300"));
    assert_eq!(ok(bson!(-0.0), "decimal"), dec("-0"));
    assert_eq!(ok(bson!(42), "decimal"), dec("42"));
    assert_eq!(ok(bson!(-7_i64), "decimal"), dec("-7"));
    assert_eq!(ok(bson!(true), "decimal"), dec("1"));
    assert_eq!(ok(bson!("1.50"), "decimal"), dec("1.50"));
    assert_eq!(ok(bson!("-Infinity"), "decimal"), dec("-Infinity"));
    assert_eq!(ok(bson!(f64::NAN), "decimal"), dec("NaN"));
    assert_eq!(ok(dec("1.50"), "string"), bson!("1.50"));
    // More than 34 significant digits round half even, as mongod's Decimal128(string).
    let too_many = "1.2345678901234567890123456789012345678";
    assert_eq!(
        ok(bson!(too_many), "decimal"),
        dec("1.234567890123456789012345678901235")
    );
    let tie = "10000000000000000000000000000000005";
    assert_eq!(
        ok(bson!(tie), "decimal"),
        dec("1.000000000000000000000000000000000E+34")
    );
    assert_eq!(convert(bson!("1E+7000"), "decimal").unwrap_err().0, 238);
}

#[test]
fn strings_parse_as_mongods_number_parser() {
    assert_eq!(ok(bson!("-42"), "int"), bson!(-42));
    assert_eq!(ok(bson!("+7"), "long"), bson!(7_i64));
    assert_eq!(ok(bson!("2.5e3"), "double"), bson!(2500.0));
    assert_eq!(ok(bson!("-Infinity"), "double"), bson!(f64::NEG_INFINITY));
    let reason = |s: &str, to: &str| fails(bson!(s), to);
    assert!(reason("", "int").ends_with(": No digits"));
    assert!(reason("1.5", "int").ends_with(": Did not consume whole string."));
    assert!(reason(" 5", "long").ends_with(": Did not consume whole string."));
    assert!(reason("2147483648", "int").ends_with(": Overflow"));
    assert!(reason("abc", "double").ends_with(": Did not consume whole string."));
    assert!(reason("1e400", "double").ends_with(": Out of range"));
    assert!(reason("", "decimal").ends_with(": No digits"));
    assert!(reason("1.2.3", "decimal").ends_with(": Did not consume whole string."));
    assert_eq!(
        reason("0x1A", "int"),
        "Illegal hexadecimal input in $convert with no onError value: 0x1A"
    );
    assert_eq!(
        reason("12abc", "int"),
        "Failed to parse number '12abc' in $convert with no onError value: Did not consume \
         whole string."
    );
}

#[test]
fn strings_dates_and_object_ids() {
    assert_eq!(ok(bson!(1.5), "string"), bson!("1.5"));
    assert_eq!(ok(bson!(-0.0), "string"), bson!("-0"));
    assert_eq!(ok(bson!(f64::INFINITY), "string"), bson!("Infinity"));
    assert_eq!(ok(bson!(false), "string"), bson!("false"));
    assert_eq!(ok(bson!(123_i64), "string"), bson!("123"));
    let oid = ObjectId::parse_str("5ab9cbfa31c2ab715d42129e").expect("oid");
    assert_eq!(
        ok(Bson::ObjectId(oid), "string"),
        bson!("5ab9cbfa31c2ab715d42129e")
    );
    assert_eq!(
        ok(bson!("5ab9cbfa31c2ab715d42129e"), "objectId"),
        Bson::ObjectId(oid)
    );
    assert!(fails(bson!("5ab9"), "objectId").contains("expected 24 but found 4"));
    fails(bson!("5ab9cbfa31c2ab715d42129z"), "objectId");
    let date = |ms| Bson::DateTime(DateTime::from_millis(ms));
    assert_eq!(ok(Bson::ObjectId(oid), "date"), date(1_522_125_818_000));
    assert_eq!(
        ok(date(1_500_000_000_123), "string"),
        bson!("2017-07-14T02:40:00.123Z")
    );
    assert_eq!(
        ok(bson!("2017-07-14T02:40:00.123Z"), "date"),
        date(1_500_000_000_123)
    );
    assert_eq!(
        ok(bson!("2017-07-14 04:40+02:00"), "date"),
        date(1_500_000_000_000)
    );
    assert_eq!(ok(bson!("1970-01-02"), "date"), date(86_400_000));
    fails(bson!("July 14"), "date");
    assert_eq!(
        ok(bson!(1_500_000_000_123_i64), "date"),
        date(1_500_000_000_123)
    );
    assert_eq!(ok(bson!(1.5e12), "date"), date(1_500_000_000_000));
    assert_eq!(
        ok(
            Bson::Timestamp(Timestamp {
                time: 2,
                increment: 9
            }),
            "date"
        ),
        date(2000)
    );
    assert_eq!(ok(date(-5), "long"), bson!(-5_i64));
    assert_eq!(convert(date(i64::MAX), "string").unwrap_err().0, 18537);
}

#[test]
fn everything_converts_to_bool_and_little_else() {
    assert_eq!(ok(bson!(0), "bool"), bson!(false));
    assert_eq!(ok(bson!(0.5), "bool"), bson!(true));
    assert_eq!(ok(bson!(""), "bool"), bson!(true));
    assert_eq!(ok(bson!({"a": 1}), "bool"), bson!(true));
    assert_eq!(ok(Bson::MinKey, "bool"), bson!(true));
    assert_eq!(ok(dec("0"), "bool"), bson!(false));
    assert_eq!(
        fails(bson!(1), "date"),
        "Unsupported conversion from int to date in $convert with no onError value"
    );
    fails(bson!({"a": 1}), "string");
    fails(bson!([1]), "int");
    fails(bson!(true), "date");
    fails(Bson::MinKey, "string");
    fails(bson!(1), "missing");
    fails(bson!(1), "object");
}

#[test]
fn on_error_on_null_and_to() {
    let on = |input: Bson, to: Bson| {
        run(bson!({"$convert": {"input": input, "to": to, "onError": "E", "onNull": "N"}}))
    };
    assert_eq!(on("abc".into(), "int".into()), Ok(bson!("E")));
    assert_eq!(on("$n".into(), "int".into()), Ok(bson!("N")));
    assert_eq!(on("$missing".into(), "int".into()), Ok(bson!("N")));
    assert_eq!(on("$s".into(), 16.into()), Ok(bson!(5)));
    assert_eq!(on("$s".into(), 18.0.into()), Ok(bson!(5_i64)));
    assert_eq!(on("$s".into(), Bson::Null), Ok(Bson::Null));
    assert_eq!(
        run(bson!({"$convert": {"input": null, "to": "int"}})),
        Ok(Bson::Null)
    );
    // `to` is checked even when the input is null, and onError does not hide it.
    assert_eq!(on(Bson::Null, "foo".into()).unwrap_err().0, 2);
    assert_eq!(on(Bson::Null, 1.5.into()).unwrap_err().0, 9);
    assert_eq!(on(Bson::Null, 20.into()).unwrap_err().0, 9);
    assert_eq!(on(Bson::Null, true.into()).unwrap_err().0, 9);
    let code = |spec: Bson| run(spec).unwrap_err().0;
    assert_eq!(code(bson!({"$convert": 1})), 9);
    assert_eq!(code(bson!({"$convert": {"to": "int"}})), 9);
    assert_eq!(code(bson!({"$convert": {"input": 1}})), 9);
    assert_eq!(
        code(bson!({"$convert": {"input": 1, "to": "int", "x": 1}})),
        9
    );
}

#[test]
fn shorthands_take_one_argument() {
    assert_eq!(run(bson!({"$toInt": "$s"})), Ok(bson!(5)));
    assert_eq!(run(bson!({"$toLong": ["$s"]})), Ok(bson!(5_i64)));
    assert_eq!(run(bson!({"$toDouble": "$n"})), Ok(Bson::Null));
    assert_eq!(run(bson!({"$toString": 7})), Ok(bson!("7")));
    assert_eq!(run(bson!({"$toBool": 0})), Ok(bson!(false)));
    assert_eq!(run(bson!({"$toDecimal": 3})), Ok(dec("3")));
    assert_eq!(
        run(bson!({"$toDate": 0_i64})),
        Ok(Bson::DateTime(DateTime::from_millis(0)))
    );
    assert_eq!(run(bson!({"$toObjectId": "$missing"})), Ok(Bson::Null));
    assert_eq!(run(bson!({"$toInt": [1, 2]})).unwrap_err().0, 50723);
    assert_eq!(run(bson!({"$toInt": []})).unwrap_err().0, 50723);
    assert_eq!(run(bson!({"$toInt": "x"})).unwrap_err().0, 241);
}

#[test]
fn is_number_is_true_for_the_four_numeric_types() {
    for n in [bson!(1), bson!(1_i64), bson!(1.5), dec("1")] {
        assert_eq!(run(bson!({"$isNumber": {"$literal": n}})), Ok(bson!(true)));
    }
    for v in [bson!("1"), Bson::Null, bson!("$missing"), bson!([[1]])] {
        assert_eq!(run(bson!({"$isNumber": v})), Ok(bson!(false)));
    }
    assert_eq!(run(bson!({"$isNumber": [1, 2]})).unwrap_err().0, 16020);
}
