//! Tests of `expr_decimal.rs`: each operator's decimal results (mongod's running totals and
//! double conversions, quantize and its rounding modes, the functions and their domains).

use super::*;

fn dec(s: &str) -> RawBson {
    RawBson::Decimal128(s.parse().expect("valid literal"))
}

fn shown(r: &RawBson) -> String {
    match r {
        RawBson::Decimal128(d) => format!("dec {d}"),
        other => format!("{other:?}"),
    }
}

fn arith(op: ArithOp, args: Vec<RawBson>) -> Result<String, MongoError> {
    let values: Vec<Value<'_>> = args.into_iter().map(Value::Owned).collect();
    super::super::expr_arith::arithmetic(op, &values).map(|r| shown(&r))
}

fn math(op: MathOp, args: Vec<RawBson>) -> Result<String, MongoError> {
    let values: Vec<Value<'_>> = args.into_iter().map(Value::Owned).collect();
    super::super::expr_math::apply(op, &values)
        .map(|v| shown(&v.as_raw().map_or(RawBson::Null, |r| r.to_raw_bson())))
}

#[test]
fn add_keeps_mongods_running_totals() {
    let i = RawBson::Int32;
    assert_eq!(
        arith(ArithOp::Add, vec![i(1), dec("2.5")]).unwrap(),
        "dec 3.5"
    );
    // A double total before the first decimal widens to 34 digits ...
    assert_eq!(
        arith(ArithOp::Add, vec![RawBson::Double(0.1), dec("0")]).unwrap(),
        "dec 0.1000000000000000055511151231257827"
    );
    // ... a double after it converts to 15.
    assert_eq!(
        arith(ArithOp::Add, vec![dec("0"), RawBson::Double(0.1)]).unwrap(),
        "dec 0.100000000000000"
    );
    assert_eq!(
        arith(ArithOp::Add, vec![RawBson::Int64(i64::MAX), i(1), dec("1")]).unwrap(),
        "dec 9223372036854775809"
    );
    let date = RawBson::DateTime(DateTime::from_millis(1000));
    assert_eq!(
        arith(ArithOp::Add, vec![date.clone(), dec("1.5")]).unwrap(),
        shown(&RawBson::DateTime(DateTime::from_millis(1002)))
    );
    let e = arith(ArithOp::Add, vec![dec("1"), RawBson::String("x".into())]).unwrap_err();
    assert_eq!(e.code, ErrorCode::Location16554);
    assert_eq!(
        arith(ArithOp::Add, vec![dec("1"), RawBson::Null]).unwrap(),
        "Null"
    );
}

#[test]
fn the_other_arithmetic_operators() {
    let i = RawBson::Int32;
    assert_eq!(
        arith(ArithOp::Multiply, vec![i(2), dec("1.5")]).unwrap(),
        "dec 3.0"
    );
    assert_eq!(
        arith(ArithOp::Multiply, vec![RawBson::Double(0.1), dec("1")]).unwrap(),
        "dec 0.100000000000000"
    );
    assert_eq!(
        arith(ArithOp::Subtract, vec![dec("5"), RawBson::Double(0.5)]).unwrap(),
        "dec 4.500000000000000"
    );
    assert_eq!(
        arith(ArithOp::Divide, vec![dec("1"), i(3)]).unwrap(),
        "dec 0.3333333333333333333333333333333333"
    );
    let e = arith(ArithOp::Divide, vec![i(1), dec("0.00")]).unwrap_err();
    assert_eq!(e.code, ErrorCode::Location16608);
    assert_eq!(
        arith(ArithOp::Mod, vec![dec("7.5"), i(2)]).unwrap(),
        "dec 1.5"
    );
    assert_eq!(
        arith(ArithOp::Mod, vec![i(-7), dec("3")]).unwrap(),
        "dec -1"
    );
    let e = arith(ArithOp::Mod, vec![dec("1"), i(0)]).unwrap_err();
    assert_eq!(e.code, ErrorCode::Location16610);
    assert_eq!(arith(ArithOp::Abs, vec![dec("-0")]).unwrap(), "dec 0");
    assert_eq!(arith(ArithOp::Abs, vec![dec("-1.50")]).unwrap(), "dec 1.50");
    let e = arith(
        ArithOp::Subtract,
        vec![dec("1"), RawBson::DateTime(DateTime::from_millis(0))],
    );
    assert_eq!(e.unwrap_err().code, ErrorCode::Location16556);
}

#[test]
fn rounding_operators_quantize() {
    let i = RawBson::Int32;
    assert_eq!(math(MathOp::Ceil, vec![dec("1.1")]).unwrap(), "dec 2");
    assert_eq!(math(MathOp::Floor, vec![dec("-1.1")]).unwrap(), "dec -2");
    assert_eq!(
        math(MathOp::Round, vec![dec("2.675"), i(2)]).unwrap(),
        "dec 2.68"
    );
    assert_eq!(
        math(MathOp::Round, vec![dec("2.665"), i(2)]).unwrap(),
        "dec 2.66"
    );
    assert_eq!(math(MathOp::Round, vec![dec("2.5")]).unwrap(), "dec 2");
    assert_eq!(
        math(MathOp::Trunc, vec![dec("-2.679"), i(2)]).unwrap(),
        "dec -2.67"
    );
    assert_eq!(
        math(MathOp::Round, vec![dec("1234"), i(-2)]).unwrap(),
        "dec 1.2E+3"
    );
    assert_eq!(
        math(MathOp::Round, vec![dec("7"), i(2)]).unwrap(),
        "dec 7.00"
    );
    assert_eq!(
        math(MathOp::Round, vec![dec("-Infinity"), i(2)]).unwrap(),
        "dec -Infinity"
    );
    assert_eq!(
        math(MathOp::Round, vec![dec("1.5"), RawBson::Null]).unwrap(),
        "Null"
    );
    // A decimal place is read as its integer value.
    assert_eq!(
        math(MathOp::Round, vec![RawBson::Double(2.25), dec("1")]).unwrap(),
        "Double(2.2)"
    );
    let e = math(MathOp::Round, vec![dec("1"), dec("1.5")]).unwrap_err();
    assert_eq!(e.code, ErrorCode::Location51082);
}

#[test]
fn functions_and_their_domains() {
    let i = RawBson::Int32;
    assert_eq!(math(MathOp::Sqrt, vec![dec("2.25")]).unwrap(), "dec 1.5");
    let e = math(MathOp::Sqrt, vec![dec("-1")]).unwrap_err();
    assert_eq!(e.code, ErrorCode::Location28714);
    assert_eq!(math(MathOp::Exp, vec![dec("0")]).unwrap(), "dec 1");
    assert_eq!(math(MathOp::Ln, vec![dec("1")]).unwrap(), "dec 0");
    let e = math(MathOp::Ln, vec![dec("0")]).unwrap_err();
    assert_eq!(e.code, ErrorCode::Location28766);
    assert_eq!(
        e.message,
        "$ln's argument must be a positive number, but is 0"
    );
    assert_eq!(math(MathOp::Log10, vec![dec("1E+5")]).unwrap(), "dec 5");
    assert_eq!(math(MathOp::Log, vec![dec("100"), i(10)]).unwrap(), "dec 2");
    let e = math(MathOp::Log, vec![dec("100"), i(1)]).unwrap_err();
    assert_eq!(e.code, ErrorCode::Location28759);
    assert_eq!(
        math(MathOp::Pow, vec![dec("1.5"), i(2)]).unwrap(),
        "dec 2.25"
    );
    assert_eq!(
        math(MathOp::Pow, vec![i(2), dec("-2")]).unwrap(),
        "dec 0.25"
    );
    let e = math(MathOp::Pow, vec![dec("0"), i(-1)]).unwrap_err();
    assert_eq!(e.code, ErrorCode::Location28764);
    assert_eq!(
        math(MathOp::Pow, vec![RawBson::Null, dec("1")]).unwrap(),
        "Null"
    );
    assert_eq!(
        math(MathOp::Pow, vec![dec("1"), RawBson::Null]).unwrap(),
        "Null"
    );
}

#[test]
fn trigonometric_operators_of_decimals() {
    let trig = |name: &str| MathOp::from_name(name).expect("an operator");
    assert_eq!(
        math(trig("$sin"), vec![dec("1")]).unwrap(),
        "dec 0.8414709848078965066525023216302990"
    );
    assert_eq!(
        math(trig("$degreesToRadians"), vec![dec("180")]).unwrap(),
        "dec 3.141592653589793238462643383279503"
    );
    assert_eq!(
        math(trig("$atan2"), vec![dec("1"), RawBson::Int32(-1)]).unwrap(),
        "dec 2.356194490192344928846982537459627"
    );
    assert_eq!(math(trig("$cos"), vec![dec("NaN")]).unwrap(), "dec NaN");
    let e = math(trig("$acos"), vec![dec("2")]).unwrap_err();
    assert_eq!(e.code, ErrorCode::Location50989);
    assert_eq!(e.message, "cannot apply $acos to 2, value must in [-1,1]");
    let e = math(trig("$sin"), vec![dec("-Infinity")]).unwrap_err();
    assert_eq!(
        e.message,
        "cannot apply $sin to -Infinity, value must in (-inf,inf)"
    );
    let e = math(trig("$atan2"), vec![dec("1"), RawBson::String("x".into())]).unwrap_err();
    assert_eq!(e.code, ErrorCode::Location51045);
    assert_eq!(
        math(trig("$atan2"), vec![dec("1"), RawBson::Null]).unwrap(),
        "Null"
    );
}
