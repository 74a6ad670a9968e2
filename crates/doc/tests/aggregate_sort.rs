//! Ordering and counting stages — `$sort` (MongoDB's cross-type order, arrays by their
//! smallest/largest element, missing as null), `$limit`, `$skip`, `$count`, `$sortByCount` —
//! against their MongoDB pages' examples and the documented comparison/sort order rules.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

use bson::{doc, Bson, Document};
use shale_doc::aggregate::NoCollections;
use shale_doc::Pipeline;

mod common;
use common::bytes;

fn run(input: &[Document], pipeline: &[Document]) -> Vec<Document> {
    let parsed = Pipeline::parse(pipeline).unwrap_or_else(|e| panic!("{pipeline:?}: {e}"));
    parsed
        .run_documents(input, &NoCollections)
        .unwrap_or_else(|e| panic!("{pipeline:?}: {e}"))
}

fn check(input: &[Document], pipeline: &[Document], want: &[Document]) {
    let got = run(input, pipeline);
    let shown: Vec<String> = got.iter().map(Document::to_string).collect();
    assert_eq!(got.len(), want.len(), "{pipeline:?}: got {shown:?}");
    for (g, w) in got.iter().zip(want) {
        assert_eq!(bytes(g), bytes(w), "{pipeline:?}: got {g}, want {w}");
    }
}

/// The `_id`s of the output, in order.
fn ids(input: &[Document], pipeline: &[Document]) -> Vec<Bson> {
    run(input, pipeline)
        .iter()
        .map(|d| d.get("_id").cloned().unwrap_or(Bson::Null))
        .collect()
}

fn restaurants() -> Vec<Document> {
    vec![
        doc! {"_id": 1, "name": "Central Park Cafe", "borough": "Manhattan"},
        doc! {"_id": 2, "name": "Rock A Feller Bar and Grill", "borough": "Queens"},
        doc! {"_id": 3, "name": "Empire State Pub", "borough": "Brooklyn"},
        doc! {"_id": 4, "name": "Stan's Pizzaria", "borough": "Manhattan"},
        doc! {"_id": 5, "name": "Jane's Deli", "borough": "Brooklyn"},
    ]
}

#[test]
fn sort_page_examples() {
    let ints = |v: &[i32]| v.iter().map(|i| Bson::Int32(*i)).collect::<Vec<_>>();
    assert_eq!(
        ids(&restaurants(), &[doc! {"$sort": {"borough": 1, "_id": 1}}]),
        ints(&[3, 5, 1, 4, 2])
    );
    assert_eq!(
        ids(
            &restaurants(),
            &[doc! {"$sort": {"borough": -1, "_id": -1}}]
        ),
        ints(&[2, 4, 1, 5, 3])
    );
    // Ties keep their input order.
    assert_eq!(
        ids(&restaurants(), &[doc! {"$sort": {"borough": 1}}]),
        ints(&[3, 5, 1, 4, 2])
    );
}

#[test]
fn sort_across_types_arrays_and_missing() {
    let input = vec![
        doc! {"_id": "string", "v": "a"},
        doc! {"_id": "missing"},
        doc! {"_id": "null", "v": null},
        doc! {"_id": "empty", "v": []},
        doc! {"_id": "int", "v": 5},
        doc! {"_id": "array", "v": [7, 2, "z"]},
        doc! {"_id": "double", "v": 2.5},
        doc! {"_id": "object", "v": {"a": 1}},
        doc! {"_id": "bool", "v": false},
        doc! {"_id": "minkey", "v": Bson::MinKey},
    ];
    // Ascending, the array sorts by its smallest element (2), descending by its largest ("z").
    let names = |v: &[&str]| {
        v.iter()
            .map(|s| Bson::String((*s).into()))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        ids(&input, &[doc! {"$sort": {"v": 1}}]),
        names(&[
            "minkey", "empty", "missing", "null", "array", "double", "int", "string", "object",
            "bool"
        ])
    );
    assert_eq!(
        ids(&input, &[doc! {"$sort": {"v": -1}}]),
        names(&[
            "bool", "object", "array", "string", "int", "double", "missing", "null", "empty",
            "minkey"
        ])
    );
    let nested = vec![
        doc! {"_id": 1, "a": [{"b": 5}, {"b": 1}]},
        doc! {"_id": 2, "a": {"b": 3}},
        doc! {"_id": 3, "a": [{"b": 4}, {"c": 9}]},
    ];
    assert_eq!(
        ids(&nested, &[doc! {"$sort": {"a.b": 1}}]),
        vec![Bson::Int32(3), Bson::Int32(1), Bson::Int32(2)]
    );
    assert_eq!(
        ids(&nested, &[doc! {"$sort": {"a.b": -1}}]),
        vec![Bson::Int32(1), Bson::Int32(3), Bson::Int32(2)]
    );
}

#[test]
fn limit_skip_and_sort_with_limit() {
    let ints = |v: &[i32]| v.iter().map(|i| Bson::Int32(*i)).collect::<Vec<_>>();
    assert_eq!(ids(&restaurants(), &[doc! {"$limit": 2}]), ints(&[1, 2]));
    assert_eq!(ids(&restaurants(), &[doc! {"$skip": 3}]), ints(&[4, 5]));
    assert_eq!(ids(&restaurants(), &[doc! {"$skip": 10}]), ints(&[]));
    assert_eq!(
        ids(
            &restaurants(),
            &[doc! {"$sort": {"borough": -1}}, doc! {"$limit": 3}]
        ),
        ints(&[2, 1, 4])
    );
    assert_eq!(
        ids(
            &restaurants(),
            &[
                doc! {"$sort": {"borough": 1}},
                doc! {"$skip": 1},
                doc! {"$limit": 2}
            ]
        ),
        ints(&[5, 1])
    );
    // A top-k sort over many documents keeps ties in input order.
    let many: Vec<Document> = (0..1000).map(|i| doc! {"_id": i, "k": i % 7}).collect();
    assert_eq!(
        ids(&many, &[doc! {"$sort": {"k": 1}}, doc! {"$limit": 3}]),
        ints(&[0, 7, 14])
    );
}

#[test]
fn count_page() {
    let scores = vec![
        doc! {"_id": 1, "subject": "History", "score": 88},
        doc! {"_id": 2, "subject": "History", "score": 92},
        doc! {"_id": 3, "subject": "History", "score": 97},
        doc! {"_id": 4, "subject": "History", "score": 71},
        doc! {"_id": 5, "subject": "History", "score": 79},
        doc! {"_id": 6, "subject": "History", "score": 83},
    ];
    check(
        &scores,
        &[
            doc! {"$match": {"score": {"$gt": 80}}},
            doc! {"$count": "passing_scores"},
        ],
        &[doc! {"passing_scores": 4}],
    );
    check(
        &scores,
        &[
            doc! {"$match": {"score": {"$gt": 100}}},
            doc! {"$count": "n"},
        ],
        &[],
    );
}

#[test]
fn sort_by_count_page() {
    let exhibits = vec![
        doc! {"_id": 1, "title": "The Pillars of Society", "artist": "Grosz", "year": 1926, "tags": ["painting", "satire", "Expressionism", "caricature"]},
        doc! {"_id": 2, "title": "Melancholy III", "artist": "Munch", "year": 1902, "tags": ["woodcut", "Expressionism"]},
        doc! {"_id": 3, "title": "Dancer", "artist": "Miro", "year": 1925, "tags": ["oil", "Surrealism", "painting"]},
        doc! {"_id": 4, "title": "The Great Wave off Kanagawa", "artist": "Hokusai", "tags": ["woodblock", "ukiyo-e"]},
        doc! {"_id": 5, "title": "The Persistence of Memory", "artist": "Dali", "year": 1931, "tags": ["Surrealism", "painting", "oil"]},
        doc! {"_id": 6, "title": "Composition VII", "artist": "Kandinsky", "year": 1913, "tags": ["oil", "painting", "abstract"]},
        doc! {"_id": 7, "title": "The Scream", "artist": "Munch", "year": 1893, "tags": ["Expressionism", "painting", "oil"]},
        doc! {"_id": 8, "title": "Blue Flower", "artist": "O'Keefe", "year": 1918, "tags": ["abstract", "painting"]},
    ];
    // The page's output; ties (equal counts) may come in any order, so each tie group is
    // compared as a set.
    let documented: Vec<(&str, i32)> = vec![
        ("painting", 6),
        ("oil", 4),
        ("Expressionism", 3),
        ("Surrealism", 2),
        ("abstract", 2),
        ("woodblock", 1),
        ("woodcut", 1),
        ("ukiyo-e", 1),
        ("satire", 1),
        ("caricature", 1),
    ];
    let got = run(
        &exhibits,
        &[doc! {"$unwind": "$tags"}, doc! {"$sortByCount": "$tags"}],
    );
    let counts: Vec<i32> = got
        .iter()
        .map(|d| d.get_i32("count").expect("int32 count"))
        .collect();
    assert_eq!(
        counts,
        documented.iter().map(|(_, c)| *c).collect::<Vec<_>>()
    );
    for count in [6, 4, 3, 2, 1] {
        let mut want: Vec<&str> = documented
            .iter()
            .filter(|(_, c)| *c == count)
            .map(|(t, _)| *t)
            .collect();
        let mut have: Vec<&str> = got
            .iter()
            .filter(|d| d.get_i32("count") == Ok(count))
            .map(|d| d.get_str("_id").expect("tag"))
            .collect();
        want.sort_unstable();
        have.sort_unstable();
        assert_eq!(have, want, "count {count}");
    }
    for d in &got {
        assert_eq!(d.keys().collect::<Vec<_>>(), vec!["_id", "count"]);
    }
    check(
        &exhibits[..2],
        &[doc! {"$sortByCount": {"$gt": ["$year", 1910]}}],
        &[
            doc! {"_id": true, "count": 1},
            doc! {"_id": false, "count": 1},
        ],
    );
}
