//! `$facet` over the `artwork` collection of its MongoDB page: the page's `categorizedByTags`
//! facet (its `$bucket`/`$bucketAuto` facets are not supported yet, so others stand in), a
//! facet per stage family, facets over no input, and a `$lookup` inside a facet.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

use bson::{doc, Document};
use shale_doc::aggregate::{MemoryCollections, NoCollections};
use shale_doc::Pipeline;

mod common;
use common::bytes;

fn artwork() -> Vec<Document> {
    vec![
        doc! {"_id": 1, "title": "The Pillars of Society", "artist": "Grosz", "year": 1926, "price": 199.99, "tags": ["painting", "satire", "Expressionism", "caricature"]},
        doc! {"_id": 2, "title": "Melancholy III", "artist": "Munch", "year": 1902, "price": 280.00, "tags": ["woodcut", "Expressionism"]},
        doc! {"_id": 3, "title": "Dancer", "artist": "Miro", "year": 1925, "price": 76.04, "tags": ["oil", "Surrealism", "painting"]},
        doc! {"_id": 4, "title": "The Great Wave off Kanagawa", "artist": "Hokusai", "price": 167.72, "tags": ["woodblock", "ukiyo-e"]},
        doc! {"_id": 5, "title": "The Persistence of Memory", "artist": "Dali", "year": 1931, "price": 483.00, "tags": ["Surrealism", "painting", "oil"]},
        doc! {"_id": 6, "title": "Composition VII", "artist": "Kandinsky", "year": 1913, "price": 385.00, "tags": ["oil", "painting", "abstract"]},
        doc! {"_id": 7, "title": "The Scream", "artist": "Munch", "year": 1893, "tags": ["Expressionism", "painting", "oil"]},
        doc! {"_id": 8, "title": "Blue Flower", "artist": "O'Keefe", "year": 1918, "price": 118.42, "tags": ["abstract", "painting"]},
    ]
}

fn run(input: &[Document], stage: Document) -> Document {
    let pipeline = Pipeline::parse(&[stage]).expect("parses");
    let mut out = pipeline.run_documents(input, &NoCollections).expect("runs");
    assert_eq!(out.len(), 1, "$facet gives exactly one document");
    out.remove(0)
}

#[test]
fn facets_over_the_artwork_collection() {
    let got = run(
        &artwork(),
        doc! {"$facet": {
            "categorizedByTags": [
                {"$unwind": "$tags"},
                {"$sortByCount": "$tags"},
                {"$match": {"count": {"$gte": 3}}},
            ],
            "byArtist": [
                {"$group": {"_id": "$artist", "works": {"$sum": 1}}},
                {"$match": {"works": {"$gt": 1}}},
            ],
            "unpriced": [
                {"$match": {"price": {"$exists": false}}},
                {"$project": {"_id": 0, "title": 1}},
            ],
            "priced": [{"$match": {"price": {"$exists": true}}}, {"$count": "n"}],
            "oldestTwo": [{"$sort": {"year": 1}}, {"$limit": 2}, {"$project": {"_id": 1}}],
        }},
    );
    let want = doc! {
        "categorizedByTags": [
            {"_id": "painting", "count": 6},
            {"_id": "oil", "count": 4},
            {"_id": "Expressionism", "count": 3},
        ],
        "byArtist": [{"_id": "Munch", "works": 2}],
        "unpriced": [{"title": "The Scream"}],
        "priced": [{"n": 7}],
        "oldestTwo": [{"_id": 4}, {"_id": 7}],
    };
    assert_eq!(bytes(&got), bytes(&want), "got {got}");
}

#[test]
fn facets_over_no_input_are_empty_arrays() {
    let got = run(
        &[],
        doc! {"$facet": {"a": [{"$count": "n"}], "b": [{"$group": {"_id": null, "s": {"$sum": 1}}}]}},
    );
    assert_eq!(got, doc! {"a": [], "b": []});
}

#[test]
fn lookup_inside_a_facet_and_stages_after_it() {
    let mut collections = MemoryCollections::new();
    collections
        .insert(
            "artists",
            &[
                doc! {"name": "Munch", "born": 1863},
                doc! {"name": "Dali", "born": 1904},
            ],
        )
        .expect("encodes");
    let pipeline = Pipeline::parse(&[
        doc! {"$facet": {"born": [
            {"$lookup": {"from": "artists", "localField": "artist", "foreignField": "name", "as": "a"}},
            {"$unwind": "$a"},
            {"$project": {"_id": 1, "born": "$a.born"}},
        ]}},
        doc! {"$unwind": "$born"},
        doc! {"$replaceRoot": {"newRoot": "$born"}},
    ])
    .expect("parses");
    let got = pipeline
        .run_documents(&artwork(), &collections)
        .expect("runs");
    let want = vec![
        doc! {"_id": 2, "born": 1863},
        doc! {"_id": 5, "born": 1904},
        doc! {"_id": 7, "born": 1863},
    ];
    assert_eq!(got.len(), want.len(), "{got:?}");
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(bytes(g), bytes(w), "got {g}, want {w}");
    }
}
