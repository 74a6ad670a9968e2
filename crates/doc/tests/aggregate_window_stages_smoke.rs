//! `$setWindowFields`, `$fill` and `$densify` over awkward input never panic: every spec of a
//! grid (each window function, document and range windows, each densify bound) runs over
//! documents holding arrays, nested documents, dates, NaN, infinities, extreme integers,
//! strings, nulls and missing fields, and either succeeds or fails with an error. A small,
//! deterministic stand-in for the fuzz target's seeds (`fuzz/seeds/bson_readers/`).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

use bson::{doc, Bson, DateTime, Document};
use shale_doc::aggregate::{NoCollections, Pipeline};

fn awkward_input() -> Vec<Document> {
    let values = [
        Bson::Int32(i32::MAX),
        Bson::Int64(i64::MIN),
        Bson::Double(f64::NAN),
        Bson::Double(f64::INFINITY),
        Bson::Double(-0.5),
        Bson::String("s".into()),
        Bson::Array(vec![Bson::Int32(3), Bson::Int32(1)]),
        Bson::Document(doc! {"y": 1}),
        Bson::DateTime(DateTime::from_millis(0)),
        Bson::DateTime(DateTime::MAX),
        Bson::Null,
        Bson::Boolean(true),
    ];
    let mut docs: Vec<Document> = values
        .iter()
        .enumerate()
        .map(|(i, v)| doc! {"_id": i as i32, "g": (i % 3) as i32, "t": v.clone(), "x": v.clone()})
        .collect();
    docs.push(doc! {"_id": 99});
    docs
}

fn functions() -> Vec<Document> {
    vec![
        doc! {"$sum": "$x"},
        doc! {"$avg": "$x", "window": {"documents": [-2, 1]}},
        doc! {"$min": "$x", "window": {"range": [-1, 1]}},
        doc! {"$max": "$x", "window": {"range": ["unbounded", 0], "unit": "day"}},
        doc! {"$push": "$x", "window": {"documents": ["current", "unbounded"]}},
        doc! {"$addToSet": "$x", "window": {"range": [-100, "current"]}},
        doc! {"$count": {}, "window": {"documents": [5, 9]}},
        doc! {"$stdDevSamp": "$x", "window": {"documents": [-1, 0]}},
        doc! {"$first": "$x", "window": {"documents": [-3, -1]}},
        doc! {"$last": "$x"},
        doc! {"$shift": {"output": "$x", "by": -2147483648_i64, "default": 0}},
        doc! {"$rank": {}},
        doc! {"$denseRank": {}},
        doc! {"$documentNumber": {}},
        doc! {"$locf": "$x"},
        doc! {"$linearFill": "$x"},
        doc! {"$expMovingAvg": {"input": "$x", "alpha": 0.5}},
        doc! {"$covariancePop": ["$t", "$x"]},
        doc! {"$derivative": {"input": "$x"}, "window": {"documents": [-1, 0]}},
        doc! {"$integral": {"input": "$x", "unit": "hour"}},
        doc! {"$firstN": {"input": "$x", "n": 2}},
        doc! {"$minN": {"input": "$x", "n": 1_000_000_000}},
        doc! {"$topN": {"n": 2, "sortBy": {"x": -1}, "output": "$x"}},
        doc! {"$bottom": {"sortBy": {"x": 1, "_id": -1}, "output": "$x"}, "window": {"documents": [0, 0]}},
    ]
}

/// Whether the stage parsed and ran without an error (either outcome is fine; a panic is not).
fn run(stage: Document, input: &[Document]) -> bool {
    Pipeline::parse(&[stage])
        .and_then(|p| p.run_documents(input, &NoCollections))
        .is_ok()
}

#[test]
fn window_functions_over_awkward_input() {
    let input = awkward_input();
    let mut ran = 0;
    for function in functions() {
        for partition in [
            None,
            Some(Bson::String("$g".into())),
            Some(Bson::String("$x".into())),
        ] {
            let mut spec = doc! {"sortBy": {"t": 1}, "output": {"a.b": function.clone()}};
            if let Some(p) = partition {
                spec.insert("partitionBy", p);
            }
            ran += usize::from(run(doc! {"$setWindowFields": spec}, &input));
        }
    }
    // The functions that take any type succeed; the arithmetic ones refuse this input.
    assert!(ran >= 20, "only {ran} specs ran");
}

#[test]
fn fill_and_densify_over_awkward_input() {
    let input = awkward_input();
    let mut ran = 0;
    for method in ["locf", "linear"] {
        for sort in [doc! {"t": 1}, doc! {"_id": 1}] {
            let spec = doc! {"sortBy": sort, "partitionByFields": ["g"],
            "output": {"x": {"method": method}, "z": {"value": "$t"}}};
            ran += usize::from(run(doc! {"$fill": spec}, &input));
        }
    }
    let bounds = [
        Bson::String("full".into()),
        Bson::String("partition".into()),
        Bson::Array(vec![Bson::Int32(-5), Bson::Int32(5)]),
        Bson::Array(vec![
            Bson::DateTime(DateTime::from_millis(0)),
            Bson::DateTime(DateTime::from_millis(86_400_000)),
        ]),
    ];
    for field in ["t", "x", "_id"] {
        for bound in &bounds {
            for (step, unit) in [
                (Bson::Int32(1), None),
                (Bson::Double(0.25), None),
                (Bson::Int32(1), Some("hour")),
            ] {
                let mut range = doc! {"step": step, "bounds": bound.clone()};
                if let Some(unit) = unit {
                    range.insert("unit", unit);
                }
                let spec = doc! {"field": field, "partitionByFields": ["g"], "range": range};
                run(doc! {"$densify": spec}, &input);
                let numbers: Vec<Document> = (0..5).map(|i| doc! {"_id": i * 3}).collect();
                let full = doc! {"field": "_id", "range": {"step": 1, "bounds": "full"}};
                ran += usize::from(run(doc! {"$densify": full}, &numbers));
            }
        }
    }
    assert!(ran >= 36, "only {ran} specs ran");
}
