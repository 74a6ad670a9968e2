//! Laws of variables and of `$getField`/`$setField` over random expressions and documents:
//! an expression reading `$$x` gives the same result (or the same error code) whether `x` is
//! bound by a command's `let`, bound by a `$let` around it, or replaced naively by its value
//! as a `$literal`; `$getField` of a `$setField` reads back the value it set; `$setField`
//! equals a naive edit of the document; and parsing random expression-shaped BSON never
//! panics.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

use bson::{bson, doc, Bson, Document, RawDocumentBuf};
use proptest::prelude::*;
use shale_doc::matcher::expr::Expr;
use shale_doc::Variables;

fn raw(d: &Document) -> RawDocumentBuf {
    RawDocumentBuf::from_document(d).expect("encodes")
}

fn scalar() -> impl Strategy<Value = Bson> {
    prop_oneof![
        (-5_i32..5).prop_map(Bson::Int32),
        (-2.0e3..2.0e3_f64).prop_map(Bson::Double),
        "[a-b$.]{0,3}".prop_map(Bson::String),
        any::<bool>().prop_map(Bson::Boolean),
        Just(Bson::Null),
    ]
}

/// A variable's value: a scalar, a document with `a`, an array of such, or missing (`None`).
fn var_value() -> impl Strategy<Value = Option<Bson>> {
    prop_oneof![
        3 => scalar().prop_map(Some),
        2 => scalar().prop_map(|s| Some(bson!({"a": s, "$b.c": 1}))),
        1 => prop::collection::vec(scalar().prop_map(|s| bson!({"a": s})), 0..3)
            .prop_map(|v| Some(Bson::Array(v))),
        1 => Just(None),
    ]
}

fn document() -> impl Strategy<Value = Document> {
    (scalar(), scalar(), any::<bool>()).prop_map(|(f, ga, with_g)| {
        let mut d = doc! {"_id": 1, "f": f};
        if with_g {
            d.insert("g", doc! {"a": ga, "a.b": 2});
        }
        d
    })
}

fn leaf() -> impl Strategy<Value = Bson> {
    prop_oneof![
        Just(bson!("$$x")),
        Just(bson!("$$x.a")),
        Just(bson!("$f")),
        Just(bson!("$g.a")),
        Just(bson!("$$ROOT")),
        scalar().prop_map(|s| bson!({"$literal": s})),
    ]
}

/// Expressions over `$$x` and the document, never binding `x` themselves.
fn expression() -> impl Strategy<Value = Bson> {
    leaf().prop_recursive(4, 24, 3, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(a, b)| bson!({"$eq": [a, b]})),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| bson!({"$add": [a, b]})),
            (inner.clone(), inner.clone(), inner.clone())
                .prop_map(|(a, b, c)| bson!({"$cond": [a, b, c]})),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| bson!({"$ifNull": [a, b]})),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| bson!([a, b])),
            inner.clone().prop_map(|a| bson!({"o": a})),
            (
                prop_oneof![Just(bson!("a")), Just(bson!({"$literal": "$b.c"}))],
                inner.clone()
            )
                .prop_map(|(f, i)| bson!({"$getField": {"field": f, "input": i}})),
            (inner.clone(), inner.clone()).prop_map(|(i, v)| {
                bson!({"$setField": {"field": {"$literal": "$n.m"}, "input": i, "value": v}})
            }),
            (inner.clone(), inner.clone())
                .prop_map(|(v, body)| { bson!({"$let": {"vars": {"y": v}, "in": [body, "$$y"]}}) }),
        ]
    })
}

/// What an evaluation gave: a value (`None` when missing) or an error code.
type Outcome = Result<Option<Bson>, i32>;

fn evaluate(expression: &Bson, vars: &Variables, document: &Document) -> Outcome {
    let holder = raw(&doc! {"e": expression.clone()});
    let spec = holder.get("e").expect("valid").expect("present");
    let e = Expr::parse_in(spec, vars).map_err(|e| e.code.code())?;
    let d = raw(document);
    let v = e.evaluate(&d).map_err(|e| e.code.code())?;
    Ok(v.as_raw()
        .map(|r| Bson::try_from(r.to_raw_bson()).expect("converts")))
}

/// `value` as an expression: its `$literal`, or `$$REMOVE` when missing.
fn as_literal(value: Option<&Bson>) -> Bson {
    match value {
        Some(v) => bson!({"$literal": v.clone()}),
        None => bson!("$$REMOVE"),
    }
}

/// `value.a` with expression semantics (arrays of documents mapped).
fn path_a(value: Option<&Bson>) -> Option<Bson> {
    match value? {
        Bson::Document(d) => d.get("a").cloned(),
        Bson::Array(items) => Some(Bson::Array(
            items
                .iter()
                .filter_map(|i| i.as_document().and_then(|d| d.get("a")).cloned())
                .collect(),
        )),
        _ => None,
    }
}

/// `expression` with every `$$x` reference replaced by the value it reads.
fn substitute(expression: &Bson, x: Option<&Bson>) -> Bson {
    match expression {
        Bson::String(s) if s == "$$x" => as_literal(x),
        Bson::String(s) if s == "$$x.a" => as_literal(path_a(x).as_ref()),
        Bson::Array(items) => Bson::Array(items.iter().map(|i| substitute(i, x)).collect()),
        Bson::Document(d) if d.contains_key("$literal") => expression.clone(),
        Bson::Document(d) => Bson::Document(
            d.iter()
                .map(|(k, v)| (k.clone(), substitute(v, x)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn let_spec(x: Option<&Bson>) -> Document {
    doc! {"x": as_literal(x)}
}

proptest! {
    #[test]
    fn command_let_dollar_let_and_substitution_agree(
        e in expression(),
        x in var_value(),
        d in document(),
    ) {
        let vars = Variables::new().with_let(&raw(&let_spec(x.as_ref()))).expect("binds");
        let by_let = evaluate(&e, &vars, &d);
        let plain = Variables::new();
        let by_substitution = evaluate(&substitute(&e, x.as_ref()), &plain, &d);
        let wrapped = bson!({"$let": {"vars": let_spec(x.as_ref()), "in": e.clone()}});
        let by_dollar_let = evaluate(&wrapped, &plain, &d);
        prop_assert_eq!(&by_let, &by_substitution, "expression {}", e);
        prop_assert_eq!(&by_let, &by_dollar_let, "expression {}", e);
    }

    #[test]
    fn set_field_then_get_field_reads_the_value(
        d in document(),
        name in "[a-c$.]{1,4}",
        value in scalar(),
    ) {
        let set = bson!({"$setField": {
            "field": {"$literal": name.clone()}, "input": "$$ROOT", "value": {"$literal": value.clone()},
        }});
        let plain = Variables::new();
        let got = evaluate(&bson!({"$getField": {"field": {"$literal": name.clone()}, "input": set.clone()}}), &plain, &d);
        prop_assert_eq!(got, Ok(Some(value.clone())));
        // The naive edit: replaced in place, or appended.
        let mut expected = d.clone();
        expected.insert(name.clone(), value);
        prop_assert_eq!(evaluate(&set, &plain, &d), Ok(Some(Bson::Document(expected))));
        let unset = bson!({"$unsetField": {"field": {"$literal": name.clone()}, "input": "$$ROOT"}});
        let mut expected = d.clone();
        expected.remove(&name);
        prop_assert_eq!(evaluate(&unset, &plain, &d), Ok(Some(Bson::Document(expected))));
    }

    #[test]
    fn random_expression_shapes_never_panic(
        shape in prop::collection::vec(
            (prop_oneof![
                Just("$let"), Just("$getField"), Just("$setField"), Just("$unsetField"),
                Just("vars"), Just("in"), Just("field"), Just("input"), Just("value"),
                Just("$$x"), Just("$$NOW.a"), Just("$$CURRENT"), Just("a.b"), Just("$literal"),
            ], scalar()),
            1..6,
        ),
        d in document(),
    ) {
        // Nest the pairs into one document: {k1: {k2: ... {kn: scalar}}}.
        let mut e = Bson::Null;
        for (key, leaf) in shape.into_iter().rev() {
            let inner = if matches!(e, Bson::Null) { leaf } else { e };
            let mut level = Document::new();
            level.insert(key, inner);
            e = Bson::Document(level);
        }
        let vars = Variables::new().with_let(&raw(&doc! {"x": 1})).expect("binds");
        let _ = evaluate(&e, &vars, &d);
    }
}
