//! `$expr` and the aggregation expression evaluator: field paths, variables, literals,
//! comparison, boolean, arithmetic, string and array operators, `$cond`/`$ifNull`/`$type`,
//! and the runtime errors MongoDB raises while evaluating.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

use bson::{doc, Bson, Document};
use shale_doc::matcher::expr::Expr;
use shale_doc::Matcher;

mod common;
use common::raw;

/// Evaluate `expression` against `document` and return the result as owned BSON.
fn eval(expression: Bson, document: Document) -> Option<Bson> {
    let spec = raw(&doc! {"e": expression});
    let e = Expr::parse(spec.get("e").expect("valid").expect("present")).expect("parses");
    let d = raw(&document);
    let v = e.evaluate(&d).expect("evaluates");
    v.as_raw()
        .map(|r| Bson::try_from(r.to_raw_bson()).expect("converts"))
}

fn eval_error(expression: Bson, document: Document) -> i32 {
    let spec = raw(&doc! {"e": expression});
    let e = Expr::parse(spec.get("e").expect("valid").expect("present")).expect("parses");
    let d = raw(&document);
    e.evaluate(&d).expect_err("evaluation fails").code.code()
}

#[test]
fn expr_in_a_filter_compares_fields() {
    let filter = raw(&doc! {"$expr": {"$gt": ["$spent", "$budget"]}});
    let m = Matcher::parse(&filter).expect("parses");
    assert!(m
        .matches(&raw(&doc! {"spent": 450, "budget": 400}))
        .expect("runs"));
    assert!(!m
        .matches(&raw(&doc! {"spent": 100, "budget": 400}))
        .expect("runs"));
    let filter = raw(
        &doc! {"$expr": {"$lt": [{"$cond": {"if": {"$gte": ["$q", 100]}, "then": {"$multiply": ["$p", 0.5]}, "else": {"$multiply": ["$p", 0.75]}}}, 5]}},
    );
    let m = Matcher::parse(&filter).expect("parses");
    assert!(m.matches(&raw(&doc! {"q": 200, "p": 8})).expect("runs"));
    assert!(!m.matches(&raw(&doc! {"q": 20, "p": 8})).expect("runs"));
}

#[test]
fn paths_variables_literals() {
    let d = doc! {"a": {"b": 5}, "xs": [{"v": 1}, {"w": 2}, {"v": 3}]};
    assert_eq!(
        eval(Bson::String("$a.b".into()), d.clone()),
        Some(Bson::Int32(5))
    );
    assert_eq!(eval(Bson::String("$nope".into()), d.clone()), None);
    assert_eq!(
        eval(Bson::String("$xs.v".into()), d.clone()),
        Some(Bson::Array(vec![1.into(), 3.into()]))
    );
    assert_eq!(
        eval(Bson::String("$$ROOT.a.b".into()), d.clone()),
        Some(Bson::Int32(5))
    );
    assert_eq!(
        eval(Bson::String("$$CURRENT".into()), doc! {"x": 1}),
        Some(Bson::Document(doc! {"x": 1}))
    );
    assert_eq!(
        eval(Bson::Document(doc! {"$literal": "$a"}), d.clone()),
        Some(Bson::String("$a".into()))
    );
    assert_eq!(
        eval(
            Bson::Document(doc! {"k": "$a.b", "gone": "$$REMOVE"}),
            d.clone()
        ),
        Some(Bson::Document(doc! {"k": 5}))
    );
    assert_eq!(
        eval(Bson::Array(vec!["$a.b".into(), "$nope".into()]), d),
        Some(Bson::Array(vec![5.into(), Bson::Null]))
    );
}

#[test]
fn comparison_and_boolean() {
    let d = doc! {"a": 1, "s": "x"};
    assert_eq!(
        eval(bson::bson!({"$eq": ["$a", 1.0]}), d.clone()),
        Some(Bson::Boolean(true))
    );
    assert_eq!(
        eval(bson::bson!({"$ne": ["$a", 1]}), d.clone()),
        Some(Bson::Boolean(false))
    );
    assert_eq!(
        eval(bson::bson!({"$lt": ["$a", "$s"]}), d.clone()),
        Some(Bson::Boolean(true))
    );
    assert_eq!(
        eval(bson::bson!({"$cmp": ["$s", "$a"]}), d.clone()),
        Some(Bson::Int32(1))
    );
    assert_eq!(
        eval(bson::bson!({"$gt": ["$missing", null]}), d.clone()),
        Some(Bson::Boolean(false))
    );
    assert_eq!(
        eval(bson::bson!({"$and": [1, "$a", true]}), d.clone()),
        Some(Bson::Boolean(true))
    );
    assert_eq!(
        eval(bson::bson!({"$and": [1, 0]}), d.clone()),
        Some(Bson::Boolean(false))
    );
    assert_eq!(
        eval(bson::bson!({"$or": [null, "$missing", []]}), d.clone()),
        Some(Bson::Boolean(true))
    );
    assert_eq!(
        eval(bson::bson!({"$not": [0]}), d),
        Some(Bson::Boolean(true))
    );
}

#[test]
fn arithmetic() {
    let d = doc! {"a": 7, "b": 2, "f": 1.5};
    assert_eq!(
        eval(bson::bson!({"$add": ["$a", "$b", 1]}), d.clone()),
        Some(Bson::Int32(10))
    );
    assert_eq!(
        eval(bson::bson!({"$add": ["$a", "$f"]}), d.clone()),
        Some(Bson::Double(8.5))
    );
    assert_eq!(
        eval(bson::bson!({"$subtract": ["$a", "$b"]}), d.clone()),
        Some(Bson::Int32(5))
    );
    assert_eq!(
        eval(bson::bson!({"$multiply": ["$a", "$b"]}), d.clone()),
        Some(Bson::Int32(14))
    );
    assert_eq!(
        eval(bson::bson!({"$divide": ["$a", "$b"]}), d.clone()),
        Some(Bson::Double(3.5))
    );
    assert_eq!(
        eval(bson::bson!({"$mod": ["$a", "$b"]}), d.clone()),
        Some(Bson::Int32(1))
    );
    assert_eq!(
        eval(bson::bson!({"$abs": -3}), d.clone()),
        Some(Bson::Int32(3))
    );
    assert_eq!(
        eval(bson::bson!({"$add": ["$a", "$missing"]}), d.clone()),
        Some(Bson::Null)
    );
    assert_eq!(
        eval_error(bson::bson!({"$divide": ["$a", 0]}), d.clone()),
        16608
    );
    assert_eq!(
        eval_error(bson::bson!({"$mod": ["$a", 0]}), d.clone()),
        16610
    );
    assert_eq!(
        eval_error(bson::bson!({"$add": ["$a", "x"]}), d.clone()),
        16554
    );
    assert_eq!(
        eval_error(bson::bson!({"$multiply": ["$a", "x"]}), d.clone()),
        16555
    );
    assert_eq!(eval_error(bson::bson!({"$abs": "x"}), d), 28765);
}

#[test]
fn strings_arrays_and_conditionals() {
    let d = doc! {"s": "Hé Llo", "xs": [10, 20, 30], "n": null};
    assert_eq!(
        eval(bson::bson!({"$concat": ["$s", "!"]}), d.clone()),
        Some(Bson::String("Hé Llo!".into()))
    );
    assert_eq!(
        eval(bson::bson!({"$concat": ["$s", "$n"]}), d.clone()),
        Some(Bson::Null)
    );
    assert_eq!(
        eval(bson::bson!({"$toLower": "$s"}), d.clone()),
        Some(Bson::String("hé llo".into()))
    );
    assert_eq!(
        eval(bson::bson!({"$toUpper": "$missing"}), d.clone()),
        Some(Bson::String(String::new()))
    );
    assert_eq!(
        eval(bson::bson!({"$strLenCP": "$s"}), d.clone()),
        Some(Bson::Int32(6))
    );
    assert_eq!(
        eval(bson::bson!({"$size": "$xs"}), d.clone()),
        Some(Bson::Int32(3))
    );
    assert_eq!(
        eval(bson::bson!({"$arrayElemAt": ["$xs", -1]}), d.clone()),
        Some(Bson::Int32(30))
    );
    assert_eq!(
        eval(bson::bson!({"$arrayElemAt": ["$xs", 5]}), d.clone()),
        None
    );
    assert_eq!(
        eval(bson::bson!({"$in": [20, "$xs"]}), d.clone()),
        Some(Bson::Boolean(true))
    );
    assert_eq!(
        eval(
            bson::bson!({"$ifNull": ["$n", "$missing", "dflt"]}),
            d.clone()
        ),
        Some(Bson::String("dflt".into()))
    );
    assert_eq!(
        eval(
            bson::bson!({"$cond": [{"$size": "$xs"}, "yes", "no"]}),
            d.clone()
        ),
        Some(Bson::String("yes".into()))
    );
    assert_eq!(
        eval(bson::bson!({"$type": "$xs"}), d.clone()),
        Some(Bson::String("array".into()))
    );
    assert_eq!(
        eval(bson::bson!({"$type": "$missing"}), d.clone()),
        Some(Bson::String("missing".into()))
    );
    assert_eq!(eval_error(bson::bson!({"$size": "$s"}), d.clone()), 17124);
    assert_eq!(eval_error(bson::bson!({"$strLenCP": 5}), d.clone()), 34471);
    assert_eq!(
        eval_error(bson::bson!({"$arrayElemAt": ["$s", 0]}), d.clone()),
        28689
    );
    assert_eq!(
        eval_error(bson::bson!({"$in": [1, "$s"]}), d.clone()),
        40081
    );
    assert_eq!(eval_error(bson::bson!({"$concat": ["$s", 1]}), d), 16702);
}

#[test]
fn parse_errors() {
    let parse = |e: Bson| {
        let spec = raw(&doc! {"e": e});
        Expr::parse(spec.get("e").expect("valid").expect("present"))
            .map(|_| ())
            .unwrap_err()
            .code
            .code()
    };
    assert_eq!(
        parse(bson::bson!({"$cond": {"if": true, "then": 1}})),
        17082
    );
    assert_eq!(
        parse(bson::bson!({"$cond": {"if": true, "then": 1, "else": 2, "x": 3}})),
        17083
    );
    assert_eq!(parse(bson::bson!({"$ifNull": [1]})), 1257300);
    assert_eq!(parse(Bson::String("$".into())), 16872);
    assert_eq!(parse(Bson::String("$$nope".into())), 17276);
    assert_eq!(parse(bson::bson!({"$abs": [1, 2]})), 16020);
}
