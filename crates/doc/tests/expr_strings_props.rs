//! Laws of the string, regex and conversion expressions over random strings (ASCII and
//! multi-byte): each agrees with a naive computation over Rust's `char`s (`$substrCP`,
//! `$indexOfCP`, `$split` then joining, `$replaceAll`, `$regexFindAll` of a literal, `$trim`),
//! numbers survive `$toString` then `$toInt`/`$toLong`/`$toDouble`, and random argument
//! shapes for every one of them parse and evaluate without panicking.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

use bson::{bson, doc, Bson, Document, RawDocumentBuf};
use proptest::prelude::*;
use shale_doc::matcher::expr::Expr;

/// Evaluates `expression` against `document`: the value (`None` when missing) or the code.
fn evaluate(expression: &Bson, document: &Document) -> Result<Option<Bson>, i32> {
    let holder = RawDocumentBuf::from_document(&doc! {"e": expression.clone()}).expect("raw");
    let spec = holder.get("e").expect("valid").expect("present");
    let e = Expr::parse(spec).map_err(|e| e.code.code())?;
    let d = RawDocumentBuf::from_document(document).expect("raw");
    let v = e.evaluate(&d).map_err(|e| e.code.code())?;
    Ok(v.as_raw()
        .map(|r| Bson::try_from(r.to_raw_bson()).expect("converts")))
}

fn value(expression: Bson) -> Bson {
    evaluate(&expression, &doc! {})
        .expect("evaluates")
        .expect("present")
}

fn text() -> impl Strategy<Value = String> {
    "[abé∫ ]{0,8}"
}

proptest! {
    #[test]
    fn substr_cp_and_index_of_cp_agree_with_chars(s in text(), t in "[abé]{0,2}", i in 0_i32..10, n in 0_i32..10) {
        let chars: Vec<char> = s.chars().collect();
        let naive: String = chars.iter().skip(i as usize).take(n as usize).collect();
        prop_assert_eq!(value(bson!({"$substrCP": [&s, i, n]})), Bson::String(naive));
        let token: Vec<char> = t.chars().collect();
        let found = (0..chars.len()).find(|&k| chars[k..].starts_with(&token));
        let naive = match found {
            Some(k) => k as i32,
            None if s.is_empty() && t.is_empty() => 0,
            None => -1,
        };
        prop_assert_eq!(value(bson!({"$indexOfCP": [&s, &t]})), Bson::Int32(naive));
        prop_assert_eq!(value(bson!({"$strLenBytes": &s})), Bson::Int32(s.len() as i32));
    }

    #[test]
    fn split_joins_back_and_replace_all_is_replace(s in text(), sep in "[abé]{1,2}", r in "[x∫]{0,2}") {
        let pieces = value(bson!({"$split": [&s, &sep]}));
        let Bson::Array(pieces) = pieces else { panic!("{pieces}") };
        let pieces: Vec<&str> = pieces.iter().map(|p| p.as_str().expect("string")).collect();
        prop_assert_eq!(pieces.join(&sep), s.clone());
        prop_assert_eq!(pieces.len(), s.matches(sep.as_str()).count() + 1);
        let replaced = value(bson!({"$replaceAll": {"input": &s, "find": &sep, "replacement": &r}}));
        prop_assert_eq!(replaced, Bson::String(s.replace(sep.as_str(), &r)));
        let found = value(bson!({"$regexFindAll": {"input": &s, "regex": &sep}}));
        let Bson::Array(found) = found else { panic!("{found}") };
        prop_assert_eq!(found.len(), s.matches(sep.as_str()).count());
    }

    #[test]
    fn trim_is_trim_matches(s in text(), chars in "[aé ]{0,2}") {
        let set: Vec<char> = chars.chars().collect();
        let trimmed = value(bson!({"$trim": {"input": &s, "chars": &chars}}));
        prop_assert_eq!(trimmed, Bson::String(s.trim_matches(set.as_slice()).to_owned()));
    }

    #[test]
    fn numbers_survive_to_string_and_back(i in any::<i32>(), l in any::<i64>(), d in -1.0e6..1.0e6_f64) {
        prop_assert_eq!(value(bson!({"$toInt": {"$toString": i}})), Bson::Int32(i));
        prop_assert_eq!(value(bson!({"$toLong": {"$toString": l}})), Bson::Int64(l));
        let short = value(bson!({"$toDouble": {"$toString": d}}));
        let Bson::Double(back) = short else { panic!("{short}") };
        // %g keeps six significant digits.
        prop_assert!((back - d).abs() <= d.abs() * 1e-5 + 1e-9, "{} -> {}", d, back);
    }

    #[test]
    fn random_argument_shapes_never_panic(
        op in prop_oneof![
            Just("$substr"), Just("$substrCP"), Just("$strLenBytes"), Just("$split"),
            Just("$indexOfBytes"), Just("$indexOfCP"), Just("$strcasecmp"), Just("$trim"),
            Just("$rtrim"), Just("$replaceOne"), Just("$replaceAll"), Just("$regexMatch"),
            Just("$regexFind"), Just("$regexFindAll"), Just("$convert"), Just("$toInt"),
            Just("$toDecimal"), Just("$toDate"), Just("$toString"), Just("$isNumber"),
        ],
        named in any::<bool>(),
        args in prop::collection::vec(
            (
                prop_oneof![
                    Just("input"), Just("chars"), Just("find"), Just("replacement"),
                    Just("regex"), Just("options"), Just("to"), Just("onError"), Just("onNull"),
                ],
                prop_oneof![
                    text().prop_map(Bson::String),
                    "[0-9.e+-]{0,6}".prop_map(Bson::String),
                    "[imsxu(a*]{0,3}".prop_map(Bson::String),
                    (-3_i32..20).prop_map(Bson::Int32),
                    any::<f64>().prop_map(Bson::Double),
                    Just(Bson::Null),
                    Just(bson!("$missing")),
                    Just(bson!("$s")),
                ],
            ),
            0..5,
        ),
        s in text(),
    ) {
        let arg = if named {
            Bson::Document(args.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
        } else {
            Bson::Array(args.into_iter().map(|(_, v)| v).collect())
        };
        let _ = evaluate(&bson!({op: arg}), &doc! {"s": s});
    }
}
