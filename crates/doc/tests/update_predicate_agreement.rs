//! Model test: on the condition forms `SimplePredicate` evaluates itself (plain values and
//! `$eq $ne $gt $gte $lt $lte $in $nin`, on the element or on a field of it), it agrees with the
//! crate's query `Matcher` (through `QueryPredicate`) for random elements. `$pull` and
//! `arrayFilters` use the first when they can and the second otherwise, so any disagreement
//! would make an update's result depend on which form the user happened to write.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

use bson::{doc, Bson, Document};
use proptest::prelude::*;
use shale_doc::update::{ElementPredicate, QueryPredicate, SimplePredicate};

fn scalar() -> impl Strategy<Value = Bson> {
    prop_oneof![
        (-3i32..4).prop_map(Bson::Int32),
        (-3i64..4).prop_map(Bson::Int64),
        prop_oneof![Just(-1.5f64), Just(0.0), Just(2.0), Just(2.5)].prop_map(Bson::Double),
        prop_oneof![Just(""), Just("a"), Just("b")].prop_map(|s| Bson::String(s.into())),
        any::<bool>().prop_map(Bson::Boolean),
        Just(Bson::Null),
    ]
}

fn element() -> impl Strategy<Value = Bson> {
    prop_oneof![
        4 => scalar(),
        2 => prop::collection::vec(scalar(), 0..4).prop_map(Bson::Array),
        2 => scalar().prop_map(|v| Bson::Document(doc! {"x": v})),
        1 => prop::collection::vec(scalar(), 0..3).prop_map(|v| Bson::Document(doc! {"x": v})),
        1 => Just(Bson::Document(doc! {"y": 1})),
    ]
}

fn condition() -> impl Strategy<Value = Bson> {
    let op = prop_oneof![
        Just("$eq"),
        Just("$ne"),
        Just("$gt"),
        Just("$gte"),
        Just("$lt"),
        Just("$lte")
    ];
    prop_oneof![
        3 => (op, scalar()).prop_map(|(op, v)| {
            let mut d = Document::new();
            d.insert(op, v);
            Bson::Document(d)
        }),
        1 => (prop_oneof![Just("$in"), Just("$nin")], prop::collection::vec(scalar(), 0..3))
            .prop_map(|(op, vs)| {
                let mut d = Document::new();
                d.insert(op, vs);
                Bson::Document(d)
            }),
        1 => scalar(),
    ]
}

fn both(simple: &dyn ElementPredicate, query: &dyn ElementPredicate, e: &Bson) -> (bool, bool) {
    let s = simple.matches(e).expect("simple predicates never fail");
    let q = query.matches(e).expect("no $expr in these conditions");
    (s, q)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn element_conditions_agree(cond in condition(), e in element()) {
        let simple = SimplePredicate::on_element(&cond).expect("simple form");
        let query = QueryPredicate::on_element(&cond).expect("valid condition");
        let (s, q) = both(&simple, &query, &e);
        prop_assert_eq!(s, q, "condition {} on {}", cond, e);
    }

    #[test]
    fn array_filter_fields_agree(cond in condition(), e in element()) {
        let filter = doc! {"f.x": cond.clone()};
        let fields = vec![(vec!["x".to_string()], &cond)];
        let simple = SimplePredicate::on_fields(&fields, false).expect("simple form");
        let query = QueryPredicate::named(&filter, "f").expect("valid filter");
        let (s, q) = both(&simple, &query, &e);
        prop_assert_eq!(s, q, "filter {} on {}", filter, e);
    }
}
