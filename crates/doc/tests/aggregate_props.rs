//! Laws of `$sort` and `$group` over random documents: `$sort` output is a stable
//! permutation of its input ordered by `compare_values` on each document's sort key (arrays by
//! their smallest/largest element, missing as null, `[]` below null), and `$group` sums, counts
//! and extremes equal a naive computation over the same documents.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

use std::cmp::Ordering;

use bson::{doc, Bson, Document};
use proptest::prelude::*;
use shale_doc::aggregate::NoCollections;
use shale_doc::{compare_values, Pipeline};

fn scalar() -> impl Strategy<Value = Bson> {
    prop_oneof![
        any::<i32>().prop_map(Bson::Int32),
        (-3_i64..3).prop_map(Bson::Int64),
        any::<i64>().prop_map(Bson::Int64),
        (-1.0e6..1.0e6_f64).prop_map(Bson::Double),
        Just(Bson::Double(f64::NAN)),
        "[a-c]{0,2}".prop_map(Bson::String),
        any::<bool>().prop_map(Bson::Boolean),
        Just(Bson::Null),
        Just(Bson::MinKey),
        Just(Bson::MaxKey),
    ]
}

fn value() -> impl Strategy<Value = Option<Bson>> {
    prop_oneof![
        4 => scalar().prop_map(Some),
        1 => prop::collection::vec(scalar(), 0..4).prop_map(|v| Some(Bson::Array(v))),
        1 => scalar().prop_map(|s| Some(Bson::Document(doc! {"x": s}))),
        1 => Just(None),
    ]
}

fn documents() -> impl Strategy<Value = Vec<Document>> {
    prop::collection::vec(value(), 0..40).prop_map(|values| {
        values
            .into_iter()
            .enumerate()
            .map(|(i, v)| {
                let mut d = doc! {"_id": i64::try_from(i).expect("small")};
                if let Some(v) = v {
                    d.insert("v", v);
                }
                d
            })
            .collect()
    })
}

fn run(input: &[Document], pipeline: &[Document]) -> Vec<Document> {
    Pipeline::parse(pipeline)
        .expect("parses")
        .run_documents(input, &NoCollections)
        .expect("runs")
}

/// The sort key of `v` computed directly from the documented rules.
fn naive_key(doc: &Document, descending: bool) -> Bson {
    match doc.get("v") {
        None => Bson::Null,
        Some(Bson::Array(items)) if items.is_empty() => Bson::Undefined,
        Some(Bson::Array(items)) => {
            let pick = if descending {
                Ordering::Greater
            } else {
                Ordering::Less
            };
            let mut best = items[0].clone();
            for item in &items[1..] {
                if compare_values(item, &best) == pick {
                    best = item.clone();
                }
            }
            best
        }
        Some(other) => other.clone(),
    }
}

fn naive_sum(values: &[&Bson]) -> (f64, &'static str) {
    let mut total = 0.0;
    let mut integers: i128 = 0;
    let mut widest = "int";
    for v in values {
        match v {
            Bson::Int32(i) => integers += i128::from(*i),
            Bson::Int64(i) => {
                integers += i128::from(*i);
                if widest == "int" {
                    widest = "long";
                }
            }
            Bson::Double(d) => {
                total += d;
                widest = "double";
            }
            _ => {}
        }
    }
    let kind = match widest {
        "int" if i32::try_from(integers).is_ok() => "int",
        "int" | "long" if i64::try_from(integers).is_ok() => "long",
        _ => "double",
    };
    (total + integers as f64, kind)
}

fn close(a: f64, b: f64) -> bool {
    (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn sort_orders_by_compare_values_stably(input in documents(), descending in any::<bool>()) {
        let direction = if descending { -1 } else { 1 };
        let out = run(&input, &[doc! {"$sort": {"v": direction}}]);
        prop_assert_eq!(out.len(), input.len());
        let mut ids: Vec<i64> = out.iter().map(|d| d.get_i64("_id").expect("id")).collect();
        for pair in out.windows(2) {
            let (a, b) = (naive_key(&pair[0], descending), naive_key(&pair[1], descending));
            let ord = compare_values(&a, &b);
            let ord = if descending { ord.reverse() } else { ord };
            prop_assert_ne!(ord, Ordering::Greater, "{} before {}", pair[0], pair[1]);
            if ord == Ordering::Equal {
                prop_assert!(pair[0].get_i64("_id").ok() < pair[1].get_i64("_id").ok(), "unstable: {} {}", pair[0], pair[1]);
            }
        }
        ids.sort_unstable();
        prop_assert_eq!(ids, (0..i64::try_from(input.len()).expect("small")).collect::<Vec<_>>());
    }

    #[test]
    fn group_matches_a_naive_computation(input in documents(), groups in 1_i64..5) {
        let keyed: Vec<Document> = input
            .iter()
            .map(|d| {
                let mut d = d.clone();
                let k = d.get_i64("_id").expect("id") % groups;
                d.insert("k", k);
                d
            })
            .collect();
        let out = run(&keyed, &[doc! {"$group": {
            "_id": "$k",
            "sum": {"$sum": "$v"},
            "n": {"$count": {}},
            "min": {"$min": "$v"},
            "max": {"$max": "$v"},
        }}]);
        prop_assert_eq!(out.len(), usize::try_from(groups.min(i64::try_from(keyed.len()).expect("small"))).expect("small"));
        for group in &out {
            let k = group.get_i64("_id").expect("key");
            let members: Vec<&Document> = keyed.iter().filter(|d| d.get_i64("k") == Ok(k)).collect();
            let values: Vec<&Bson> = members.iter().filter_map(|d| d.get("v")).collect();
            let (want_sum, kind) = naive_sum(&values);
            let got_sum = match (group.get("sum"), kind) {
                (Some(Bson::Int32(i)), "int") => f64::from(*i),
                (Some(Bson::Int64(i)), "long") => *i as f64,
                (Some(Bson::Double(d)), "double") => *d,
                (other, kind) => return Err(TestCaseError::fail(format!("sum {other:?}, want a {kind}"))),
            };
            prop_assert!(close(got_sum, want_sum), "sum {} want {}", got_sum, want_sum);
            prop_assert_eq!(group.get_i32("n").expect("count"), i32::try_from(members.len()).expect("small"));
            let present: Vec<&Bson> = values.iter().copied().filter(|v| !matches!(v, Bson::Null)).collect();
            let extreme = |wanted: Ordering| {
                present.iter().fold(None::<&Bson>, |best, v| match best {
                    Some(b) if compare_values(v, b) != wanted => Some(b),
                    _ => Some(v),
                })
            };
            let same = |got: Option<&Bson>, want: Option<&Bson>| {
                compare_values(got.unwrap_or(&Bson::Null), want.unwrap_or(&Bson::Null)) == Ordering::Equal
            };
            prop_assert!(same(group.get("min"), extreme(Ordering::Less)), "min of {:?}: {}", present, group);
            prop_assert!(same(group.get("max"), extreme(Ordering::Greater)), "max of {:?}: {}", present, group);
        }
    }
}
