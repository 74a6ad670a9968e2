//! Unit tests of `expr_strings.rs`: each operator's results, null and missing, and each error
//! code, with cases taken from mongod's jstests (`substr.js`, `split.js`, `indexof_bytes.js`,
//! `indexof_codepoints.js`, `trim.js`, `replace_one.js`, `replace_all.js`).

use crate::matcher::expr::{Expr, Value};
use bson::{bson, doc, rawdoc, Bson};

/// Evaluates `{op: arg}` against `{s: "héllo", n: 1, z: null}`: the value (`Undefined` for
/// missing) or the error code.
fn run(op: &str, arg: Bson) -> Result<Bson, i32> {
    let spec = bson::RawDocumentBuf::from_document(&doc! {op: arg}).expect("raw");
    let e = Expr::parse(bson::raw::RawBsonRef::Document(&spec)).map_err(|e| e.code.code())?;
    let d = rawdoc! {"s": "héllo", "n": 1, "z": null};
    match e.evaluate(&d).map_err(|e| e.code.code())? {
        Value::Missing => Ok(Bson::Undefined),
        v => Ok(Bson::try_from(v.as_raw().expect("present").to_raw_bson()).expect("converts")),
    }
}

fn ok(op: &str, arg: Bson) -> Bson {
    run(op, arg).unwrap_or_else(|code| panic!("{op} failed with {code}"))
}

fn code(op: &str, arg: Bson) -> i32 {
    run(op, arg).expect_err("an error")
}

#[test]
fn substr_bytes_counts_bytes_and_refuses_split_characters() {
    assert_eq!(ok("$substrBytes", bson!(["abcde", 1, 2])), bson!("bc"));
    assert_eq!(ok("$substr", bson!(["abcde", 1, -1])), bson!("bcde"));
    assert_eq!(ok("$substrBytes", bson!(["abc", 5, 1])), bson!(""));
    assert_eq!(ok("$substrBytes", bson!(["$s", 1, 2])), bson!("é"));
    assert_eq!(ok("$substrBytes", bson!([123, 0, 2])), bson!("12"));
    assert_eq!(ok("$substrBytes", bson!(["$missing", 0, 2])), bson!(""));
    assert_eq!(ok("$substrBytes", bson!(["abc", 1.7, 1])), bson!("b"));
    assert_eq!(code("$substrBytes", bson!(["abc", "x", 1])), 16034);
    assert_eq!(code("$substrBytes", bson!(["abc", 0, null])), 16035);
    assert_eq!(code("$substrBytes", bson!(["abc", -1, 1])), 50752);
    assert_eq!(code("$substrBytes", bson!(["$s", 2, 1])), 28656);
    assert_eq!(code("$substrBytes", bson!(["$s", 0, 2])), 28657);
    assert_eq!(code("$substrBytes", bson!([{"a": 1}, 0, 1])), 16007);
    assert_eq!(code("$substr", bson!(["abc"])), 16020);
}

#[test]
fn substr_cp_counts_code_points() {
    assert_eq!(ok("$substrCP", bson!(["$s", 1, 3])), bson!("éll"));
    assert_eq!(ok("$substrCP", bson!(["cafétéria", 0, 5])), bson!("cafét"));
    assert_eq!(ok("$substrCP", bson!(["", -0.0, 0])), bson!(""));
    assert_eq!(ok("$substrCP", bson!(["abc", 1, 99])), bson!("bc"));
    assert_eq!(ok("$substrCP", bson!([null, 0, 1])), bson!(""));
    assert_eq!(code("$substrCP", bson!(["abc", "a", 1])), 34450);
    assert_eq!(code("$substrCP", bson!(["abc", 1.5, 1])), 34451);
    assert_eq!(code("$substrCP", bson!(["abc", 0, "a"])), 34452);
    assert_eq!(code("$substrCP", bson!(["abc", 0, 2.5])), 34453);
    assert_eq!(code("$substrCP", bson!(["abc", 0, -1])), 34454);
    assert_eq!(code("$substrCP", bson!(["abc", -1, 1])), 34455);
    assert_eq!(code("$substrCP", bson!(["abc", 0])), 16020);
}

#[test]
fn str_len_bytes_and_strcasecmp() {
    assert_eq!(ok("$strLenBytes", bson!("$s")), bson!(6));
    assert_eq!(ok("$strLenBytes", bson!("")), bson!(0));
    assert_eq!(code("$strLenBytes", bson!("$z")), 34473);
    assert_eq!(code("$strLenBytes", bson!("$missing")), 34473);
    assert_eq!(ok("$strcasecmp", bson!(["ABC", "abc"])), bson!(0));
    assert_eq!(ok("$strcasecmp", bson!(["abc", "abd"])), bson!(-1));
    assert_eq!(ok("$strcasecmp", bson!(["b", "A"])), bson!(1));
    assert_eq!(ok("$strcasecmp", bson!([null, ""])), bson!(0));
    assert_eq!(ok("$strcasecmp", bson!([1, "1"])), bson!(0));
    assert_eq!(code("$strcasecmp", bson!(["a"])), 16020);
}

#[test]
fn split_gives_the_pieces_between_separators() {
    assert_eq!(
        ok("$split", bson!(["a-b--c", "-"])),
        bson!(["a", "b", "", "c"])
    );
    assert_eq!(ok("$split", bson!(["abc", "abc"])), bson!(["", ""]));
    assert_eq!(ok("$split", bson!(["", "x"])), bson!([""]));
    assert_eq!(ok("$split", bson!(["$z", 1])), Bson::Null);
    assert_eq!(ok("$split", bson!(["a", "$missing"])), Bson::Null);
    assert_eq!(code("$split", bson!([1, "a"])), 40085);
    assert_eq!(code("$split", bson!(["a", 1])), 40086);
    assert_eq!(code("$split", bson!(["a", ""])), 40087);
}

#[test]
fn index_of_bytes_and_code_points() {
    assert_eq!(ok("$indexOfBytes", bson!(["abcab", "b"])), bson!(1));
    assert_eq!(ok("$indexOfBytes", bson!(["abcab", "b", 2])), bson!(4));
    assert_eq!(ok("$indexOfBytes", bson!(["abcab", "b", 2, 4])), bson!(-1));
    assert_eq!(ok("$indexOfBytes", bson!(["abc", "", 3])), bson!(3));
    assert_eq!(ok("$indexOfBytes", bson!(["abc", "", 4])), bson!(-1));
    assert_eq!(ok("$indexOfBytes", bson!(["$s", "l"])), bson!(3));
    assert_eq!(ok("$indexOfCP", bson!(["$s", "l"])), bson!(2));
    assert_eq!(ok("$indexOfCP", bson!(["∫aƒ", "ƒ"])), bson!(2));
    assert_eq!(ok("$indexOfCP", bson!(["", ""])), bson!(0));
    assert_eq!(ok("$indexOfCP", bson!(["abc", "", 3])), bson!(-1));
    assert_eq!(ok("$indexOfCP", bson!(["abc", "c", 0, 2])), bson!(-1));
    assert_eq!(ok("$indexOfCP", bson!([null, "a"])), Bson::Null);
    assert_eq!(ok("$indexOfBytes", bson!(["$missing", 1])), Bson::Null);
    assert_eq!(code("$indexOfBytes", bson!([1, "a"])), 40091);
    assert_eq!(code("$indexOfBytes", bson!(["a", null])), 40092);
    assert_eq!(code("$indexOfCP", bson!([1, "a"])), 40093);
    assert_eq!(code("$indexOfCP", bson!(["a", 1])), 40094);
    assert_eq!(code("$indexOfCP", bson!(["a", "a", 1.5])), 40096);
    assert_eq!(code("$indexOfBytes", bson!(["a", "a", "x"])), 40096);
    assert_eq!(code("$indexOfBytes", bson!(["a", "a", 0, -1])), 40097);
    assert_eq!(code("$indexOfBytes", bson!(["a"])), 28667);
    assert_eq!(code("$indexOfCP", bson!(["a", "a", 0, 1, 2])), 28667);
}

#[test]
fn trim_removes_whitespace_or_chars_from_the_ends() {
    assert_eq!(
        ok("$trim", bson!({"input": "\u{2000} \tab c\n\0"})),
        bson!("ab c")
    );
    assert_eq!(ok("$ltrim", bson!({"input": "  ab  "})), bson!("ab  "));
    assert_eq!(ok("$rtrim", bson!({"input": "  ab  "})), bson!("  ab"));
    assert_eq!(
        ok("$trim", bson!({"input": "xyhixy", "chars": "yx"})),
        bson!("hi")
    );
    assert_eq!(
        ok("$trim", bson!({"input": "éaé", "chars": "é"})),
        bson!("a")
    );
    assert_eq!(
        ok("$trim", bson!({"input": " a ", "chars": ""})),
        bson!(" a ")
    );
    assert_eq!(
        ok("$trim", bson!({"input": "$missing", "chars": 1})),
        Bson::Null
    );
    assert_eq!(
        ok("$trim", bson!({"input": "a", "chars": null})),
        Bson::Null
    );
    assert_eq!(code("$trim", bson!("a")), 50696);
    assert_eq!(code("$trim", bson!({"input": "a", "x": 1})), 50694);
    assert_eq!(code("$trim", bson!({"chars": "a"})), 50695);
    assert_eq!(code("$trim", bson!({"input": 1})), 50699);
    assert_eq!(code("$rtrim", bson!({"input": "a", "chars": 1})), 50700);
}

#[test]
fn replace_one_and_all() {
    let spec = |input: Bson, find: Bson, replacement: Bson| bson!({"input": input, "find": find, "replacement": replacement});
    assert_eq!(
        ok("$replaceOne", spec("a.b.c".into(), ".".into(), "-".into())),
        bson!("a-b.c")
    );
    assert_eq!(
        ok("$replaceAll", spec("a.b.c".into(), ".".into(), "-".into())),
        bson!("a-b-c")
    );
    assert_eq!(
        ok("$replaceOne", spec("abc".into(), "".into(), "-".into())),
        bson!("-abc")
    );
    assert_eq!(
        ok("$replaceAll", spec("ab".into(), "".into(), "-".into())),
        bson!("-a-b-")
    );
    assert_eq!(
        ok("$replaceAll", spec("aaa".into(), "aa".into(), "b".into())),
        bson!("ba")
    );
    assert_eq!(
        ok("$replaceOne", spec("abc".into(), "x".into(), "-".into())),
        bson!("abc")
    );
    assert_eq!(
        ok(
            "$replaceAll",
            spec("$missing".into(), "x".into(), "-".into())
        ),
        Bson::Null
    );
    assert_eq!(
        ok("$replaceOne", spec("a".into(), Bson::Null, "-".into())),
        Bson::Null
    );
    assert_eq!(
        code("$replaceOne", spec(Bson::Null, 1.into(), "-".into())),
        51745
    );
    assert_eq!(
        code("$replaceAll", spec(1.into(), "a".into(), "-".into())),
        51746
    );
    assert_eq!(
        code("$replaceAll", spec("a".into(), "a".into(), 1.into())),
        51744
    );
    assert_eq!(
        code("$replaceOne", bson!({"find": "a", "replacement": "b"})),
        51749
    );
    assert_eq!(
        code("$replaceOne", bson!({"input": "a", "replacement": "b"})),
        51748
    );
    assert_eq!(
        code("$replaceOne", bson!({"input": "a", "find": "b"})),
        51747
    );
    assert_eq!(
        code(
            "$replaceAll",
            bson!({"input": "a", "find": "b", "replacement": "c", "x": 1})
        ),
        51750
    );
    assert_eq!(code("$replaceAll", bson!("a")), 51751);
}

#[test]
fn change_case_coerces_as_mongod() {
    assert_eq!(ok("$toUpper", bson!(1.5)), bson!("1.5"));
    assert_eq!(ok("$toLower", bson!(1_234_567.0)), bson!("1.23457e+06"));
    assert_eq!(ok("$toUpper", bson!("$missing")), bson!(""));
    let date = Bson::DateTime(bson::DateTime::from_millis(0));
    assert_eq!(ok("$toLower", date), bson!("1970-01-01t00:00:00.000z"));
    assert_eq!(code("$toUpper", bson!({"$literal": [1]})), 16007);
}
