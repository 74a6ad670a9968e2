//! How a pipeline runs rather than what it computes: streaming stages pull only what they
//! need from an endless input, blocking stages respect the memory limit (292) and a `$sort`
//! followed by `$limit` stays within it, input errors end the run, and the leading
//! `$match`/`$sort`/`$skip`/`$limit` a planner may take over (`prefix`, `run_from`).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

use std::cell::Cell;

use bson::{doc, Document, RawDocumentBuf};
use shale_doc::aggregate::{NoCollections, RunOptions};
use shale_doc::{ErrorCode, MongoError, Pipeline};

fn raw(d: &Document) -> RawDocumentBuf {
    RawDocumentBuf::from_document(d).expect("encodes")
}

/// `{_id: i, k: i % 10, pad: "..."}` for i = 0.. without end, counting the documents pulled.
fn endless(pulled: &Cell<usize>) -> impl Iterator<Item = Result<RawDocumentBuf, MongoError>> + '_ {
    (0_i64..).map(move |i| {
        pulled.set(pulled.get() + 1);
        Ok(raw(&doc! {"_id": i, "k": i % 10, "pad": "x".repeat(100)}))
    })
}

fn ids(docs: Vec<RawDocumentBuf>) -> Vec<i64> {
    docs.iter()
        .map(|d| d.get_i64("_id").expect("int64 _id"))
        .collect()
}

#[test]
fn streaming_stages_pull_only_what_they_need() {
    let pipeline = Pipeline::parse(&[
        doc! {"$match": {"k": {"$in": [1, 2]}}},
        doc! {"$addFields": {"tags": ["a", "b"]}},
        doc! {"$unwind": "$tags"},
        doc! {"$project": {"pad": 0}},
        doc! {"$skip": 1},
        doc! {"$limit": 3},
    ])
    .expect("parses");
    let pulled = Cell::new(0);
    let out: Vec<RawDocumentBuf> = pipeline
        .run(endless(&pulled), &NoCollections)
        .collect::<Result<_, _>>()
        .expect("runs");
    assert_eq!(ids(out), vec![1, 2, 2]);
    assert_eq!(pulled.get(), 3, "documents 0, 1 and 2 were enough");
}

#[test]
fn blocking_stages_respect_the_memory_limit() {
    let input = |n: i64| -> Vec<Result<RawDocumentBuf, MongoError>> {
        (0..n)
            .map(|i| Ok(raw(&doc! {"_id": i, "k": i % 10, "pad": "x".repeat(100)})))
            .collect()
    };
    let small = RunOptions {
        memory_limit_bytes: 64 * 1024,
        allow_disk_use: false,
    };
    let run = |stages: &[Document], n: i64| {
        Pipeline::parse(stages)
            .expect("parses")
            .run_from(0, input(n), &NoCollections, small)
            .collect::<Result<Vec<_>, _>>()
    };
    let e = run(&[doc! {"$sort": {"k": -1}}], 2000).unwrap_err();
    assert_eq!(e.code, ErrorCode::QueryExceededMemoryLimitNoDiskUseAllowed);
    assert!(e
        .message
        .starts_with("Sort exceeded memory limit of 65536 bytes"));
    let e = run(&[doc! {"$facet": {"all": [{"$limit": 1}]}}], 2000).unwrap_err();
    assert_eq!(e.code, ErrorCode::QueryExceededMemoryLimitNoDiskUseAllowed);
    let e = run(
        &[doc! {"$group": {"_id": "$_id", "p": {"$push": "$pad"}}}],
        2000,
    )
    .unwrap_err();
    assert_eq!(e.code, ErrorCode::QueryExceededMemoryLimitNoDiskUseAllowed);
    // Top-k: a sort followed by a limit holds only about twice the limit.
    let top = run(
        &[doc! {"$sort": {"k": -1, "_id": 1}}, doc! {"$limit": 3}],
        2000,
    )
    .expect("fits");
    assert_eq!(ids(top), vec![9, 19, 29]);
    let page = run(
        &[
            doc! {"$sort": {"k": -1, "_id": 1}},
            doc! {"$skip": 2},
            doc! {"$limit": 2},
        ],
        2000,
    )
    .expect("fits");
    assert_eq!(ids(page), vec![29, 39]);
    // The same stages under the default 100 MB limit.
    let all = Pipeline::parse(&[doc! {"$sort": {"k": -1}}, doc! {"$count": "n"}])
        .expect("parses")
        .run(input(2000), &NoCollections)
        .collect::<Result<Vec<_>, _>>()
        .expect("fits in 100 MB");
    assert_eq!(all[0].get_i32("n").expect("count"), 2000);
}

#[test]
fn input_errors_end_the_run() {
    let pipeline = Pipeline::parse(&[doc! {"$project": {"a": 1}}]).expect("parses");
    let input = vec![
        Ok(raw(&doc! {"_id": 1})),
        Err(MongoError::new(
            ErrorCode::DataCorruptionDetected,
            "bad block",
        )),
        Ok(raw(&doc! {"_id": 2})),
    ];
    let out: Vec<_> = pipeline.run(input, &NoCollections).collect();
    assert_eq!(out.len(), 2);
    assert!(out[0].is_ok());
    assert_eq!(
        out[1].as_ref().unwrap_err().code,
        ErrorCode::DataCorruptionDetected
    );

    let blocking = Pipeline::parse(&[doc! {"$sort": {"a": 1}}, doc! {"$skip": 1}]).expect("parses");
    let input = vec![
        Ok(raw(&doc! {"_id": 1})),
        Err(MongoError::new(ErrorCode::InternalError, "x")),
    ];
    let out: Vec<_> = blocking.run(input, &NoCollections).collect();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].as_ref().unwrap_err().code, ErrorCode::InternalError);
}

#[test]
fn prefix_for_a_planner() {
    let pipeline = Pipeline::parse(&[
        doc! {"$match": {"k": {"$gte": 5}}},
        doc! {"$sort": {"_id": -1}},
        doc! {"$skip": 2},
        doc! {"$limit": 3},
        doc! {"$project": {"pad": 0}},
    ])
    .expect("parses");
    let prefix = pipeline.prefix();
    assert_eq!(prefix.stages, 4);
    assert_eq!(
        prefix.filter.map(|f| Document::try_from(f).expect("valid")),
        Some(doc! {"k": {"$gte": 5}})
    );
    assert_eq!(
        prefix.sort.map(|s| Document::try_from(s).expect("valid")),
        Some(doc! {"_id": -1})
    );
    assert_eq!((prefix.skip, prefix.limit), (2, Some(3)));
    assert_eq!(
        pipeline
            .leading_match()
            .map(|f| Document::try_from(f).expect("valid")),
        Some(doc! {"k": {"$gte": 5}})
    );
    assert_eq!(
        pipeline.stage_names(),
        vec!["$match", "$sort", "$skip", "$limit", "$project"]
    );

    // What a planner would produce for the prefix, then the rest of the pipeline.
    let docs: Vec<Document> = (0_i64..40)
        .map(|i| doc! {"_id": i, "k": i % 10, "pad": 1})
        .collect();
    let planned: Vec<Result<RawDocumentBuf, MongoError>> = docs
        .iter()
        .rev()
        .filter(|d| d.get_i64("k").expect("k") >= 5)
        .skip(2)
        .take(3)
        .map(|d| Ok(raw(d)))
        .collect();
    let rest: Vec<RawDocumentBuf> = pipeline
        .run_from(
            prefix.stages,
            planned,
            &NoCollections,
            RunOptions::default(),
        )
        .collect::<Result<_, _>>()
        .expect("runs");
    let whole: Vec<RawDocumentBuf> = pipeline
        .run(docs.iter().map(|d| Ok(raw(d))), &NoCollections)
        .collect::<Result<_, _>>()
        .expect("runs");
    assert_eq!(rest, whole);
    assert_eq!(ids(whole), vec![37, 36, 35]);

    let partial = Pipeline::parse(&[doc! {"$limit": 1}, doc! {"$match": {}}]).expect("parses");
    let p = partial.prefix();
    assert_eq!(
        (p.filter, p.sort, p.skip, p.limit, p.stages),
        (None, None, 0, Some(1), 1)
    );
    assert!(
        Pipeline::parse(&[doc! {"$sort": {"a": 1}}, doc! {"$match": {}}])
            .expect("parses")
            .leading_match()
            .is_none()
    );
}
