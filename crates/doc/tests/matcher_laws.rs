//! Property laws of the matcher over random documents built from a small alphabet (numbers of
//! several types, strings, null, booleans, nested documents, arrays, missing fields):
//! `$nor` negates, `$ne`/`$nin`/`$not` negate their positive forms, `$in` is an `$or` of
//! equalities, and `$and`/`$or` are conjunction and disjunction.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

use bson::{doc, Bson, Document, RawDocumentBuf};
use proptest::prelude::*;
use shale_doc::Matcher;

fn scalar() -> impl Strategy<Value = Bson> {
    prop_oneof![
        Just(Bson::Int32(1)),
        Just(Bson::Int32(2)),
        Just(Bson::Int64(2)),
        Just(Bson::Double(2.0)),
        Just(Bson::Double(1.5)),
        Just(Bson::String("x".into())),
        Just(Bson::String("y".into())),
        Just(Bson::Null),
        Just(Bson::Boolean(true)),
    ]
}

fn value() -> impl Strategy<Value = Bson> {
    scalar().prop_recursive(2, 8, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Bson::Array),
            (inner.clone(), prop::option::of(inner)).prop_map(|(a, b)| {
                let mut d = doc! {"a": a};
                if let Some(b) = b {
                    d.insert("b", b);
                }
                Bson::Document(d)
            }),
        ]
    })
}

fn document() -> impl Strategy<Value = Document> {
    (prop::option::of(value()), prop::option::of(value())).prop_map(|(a, b)| {
        let mut d = Document::new();
        if let Some(a) = a {
            d.insert("a", a);
        }
        if let Some(b) = b {
            d.insert("b", b);
        }
        d
    })
}

fn path() -> impl Strategy<Value = &'static str> {
    prop_oneof![Just("a"), Just("b"), Just("a.a"), Just("a.0"), Just("a.b")]
}

/// A random single-field predicate that always parses.
fn predicate() -> impl Strategy<Value = Document> {
    let op = prop_oneof![
        Just("$eq"),
        Just("$gt"),
        Just("$gte"),
        Just("$lt"),
        Just("$lte")
    ];
    prop_oneof![
        (path(), value()).prop_map(|(p, v)| doc! {p: v}),
        (path(), op, value()).prop_map(|(p, o, v)| doc! {p: {o: v}}),
        (path(), any::<bool>()).prop_map(|(p, e)| doc! {p: {"$exists": e}}),
        (
            path(),
            prop_oneof![Just("number"), Just("array"), Just("null"), Just("string")]
        )
            .prop_map(|(p, t)| doc! {p: {"$type": t}}),
        (path(), 0..3_i32).prop_map(|(p, n)| doc! {p: {"$size": n}}),
        (path(), prop::collection::vec(value(), 0..3)).prop_map(|(p, vs)| doc! {p: {"$in": vs}}),
    ]
}

fn matches(filter: &Document, d: &Document) -> bool {
    let m = Matcher::parse(&RawDocumentBuf::from_document(filter).expect("encodes"))
        .unwrap_or_else(|e| panic!("{filter} parses: {e}"));
    m.matches(&RawDocumentBuf::from_document(d).expect("encodes"))
        .expect("match runs")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn nor_of_one_is_negation(f in predicate(), d in document()) {
        prop_assert_eq!(matches(&doc! {"$nor": [f.clone()]}, &d), !matches(&f, &d));
    }

    #[test]
    fn ne_is_not_eq(p in path(), v in value(), d in document()) {
        prop_assert_eq!(matches(&doc! {p: {"$ne": v.clone()}}, &d), !matches(&doc! {p: {"$eq": v}}, &d));
    }

    #[test]
    fn in_is_or_of_eq(p in path(), x in value(), y in value(), d in document()) {
        let in_form = doc! {p: {"$in": [x.clone(), y.clone()]}};
        let or_form = doc! {"$or": [{p: {"$eq": x}}, {p: {"$eq": y}}]};
        prop_assert_eq!(matches(&in_form, &d), matches(&or_form, &d));
    }

    #[test]
    fn nin_is_not_in(p in path(), vs in prop::collection::vec(value(), 0..3), d in document()) {
        let nin = doc! {p: {"$nin": vs.clone()}};
        prop_assert_eq!(matches(&nin, &d), !matches(&doc! {p: {"$in": vs}}, &d));
    }

    #[test]
    fn not_inverts_operator_predicates(f in predicate(), d in document()) {
        let (p, arg) = f.iter().next().map(|(k, v)| (k.clone(), v.clone())).expect("one field");
        let Bson::Document(ops) = arg else { return Ok(()); };
        let first_is_operator = ops.keys().next().is_some_and(|k| k.starts_with('$'));
        prop_assume!(first_is_operator);
        let negated = doc! {p.clone(): {"$not": ops.clone()}};
        prop_assert_eq!(matches(&negated, &d), !matches(&doc! {p: ops}, &d));
    }

    #[test]
    fn and_or_are_conjunction_and_disjunction(f in predicate(), g in predicate(), d in document()) {
        let (mf, mg) = (matches(&f, &d), matches(&g, &d));
        prop_assert_eq!(matches(&doc! {"$and": [f.clone(), g.clone()]}, &d), mf && mg);
        prop_assert_eq!(matches(&doc! {"$or": [f, g]}, &d), mf || mg);
    }
}
