//! Predicates on a time series collection moved down to its buckets, as mongod's
//! `$_internalUnpackBucket` optimisation does for the cases that are exact bounds: a
//! `$match` right after the unpacking stage gives a bucket-level `$match` placed before it,
//! which selects every bucket that may hold a matching measurement (the measurements are
//! still matched after unpacking, so the bucket filter only has to be a superset). Moved:
//! conditions on the meta field (every measurement of a bucket has the bucket's `meta`) and
//! date comparisons on the time field (`$gt`/`$gte` against `control.max.<time>`,
//! `$lt`/`$lte` against `control.min.<time>`, equality against both), through `$and`. The
//! planner then reads the buckets through their indexes (the default `meta_1_time_1`).

use super::meta_path;
use bson::{doc, Bson, Document};

/// `stages` with a bucket filter before each `$_internalUnpackBucket` that a `$match`
/// follows; `None` when nothing moves.
pub(crate) fn push_down(stages: &[Document]) -> Option<Vec<Document>> {
    let at = stages
        .windows(2)
        .position(|w| w[0].contains_key("$_internalUnpackBucket") && w[1].contains_key("$match"))?;
    let spec = stages[at].get_document("$_internalUnpackBucket").ok()?;
    let time = spec.get_str("timeField").ok()?;
    let meta = spec.get_str("metaField").ok();
    let filter = stages[at + 1].get_document("$match").ok()?;
    let buckets = bucket_filter(filter, time, meta)?;
    let mut out = stages[..at].to_vec();
    out.push(doc! {"$match": buckets});
    out.extend(stages[at..].iter().cloned());
    Some(out)
}

/// The bucket-level filter a measurement filter implies: every bucket that may hold a
/// matching measurement matches it (reads push it down; deletes scan the buckets it selects).
/// `None` when the filter implies nothing about buckets.
pub(crate) fn bucket_filter(filter: &Document, time: &str, meta: Option<&str>) -> Option<Document> {
    let mut clauses = Vec::new();
    bucket_clauses(filter, time, meta, &mut clauses);
    (!clauses.is_empty()).then(|| doc! {"$and": clauses})
}

/// The bucket-level clauses `filter` implies (a conjunction).
fn bucket_clauses(filter: &Document, time: &str, meta: Option<&str>, out: &mut Vec<Bson>) {
    for (k, v) in filter {
        if k == "$and" {
            if let Bson::Array(items) = v {
                for item in items {
                    if let Bson::Document(d) = item {
                        bucket_clauses(d, time, meta, out);
                    }
                }
            }
            continue;
        }
        if let Some(path) = meta.and_then(|m| meta_path(k, m)) {
            out.push(Bson::Document(doc! {path: v.clone()}));
        } else if k == time {
            time_clauses(time, v, out);
        }
    }
}

/// Bounds on the buckets' time range from a condition on the time field.
fn time_clauses(time: &str, cond: &Bson, out: &mut Vec<Bson>) {
    let min = format!("control.min.{time}");
    let max = format!("control.max.{time}");
    let mut bound = |field: &str, op: &str, at: &Bson| {
        out.push(Bson::Document(doc! {field: {op: at.clone()}}));
    };
    match cond {
        Bson::DateTime(_) => {
            bound(&min, "$lte", cond);
            bound(&max, "$gte", cond);
        }
        Bson::Document(ops) if ops.keys().all(|k| k.starts_with('$')) => {
            for (op, at) in ops {
                if !matches!(at, Bson::DateTime(_)) {
                    continue;
                }
                match op.as_str() {
                    "$gt" | "$gte" => bound(&max, op, at),
                    "$lt" | "$lte" => bound(&min, op, at),
                    "$eq" => {
                        bound(&min, "$lte", at);
                        bound(&max, "$gte", at);
                    }
                    _ => {}
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::DateTime;

    #[test]
    fn meta_and_time_bounds_move_down() {
        let at = DateTime::from_millis(1_000);
        let unpack = doc! {"$_internalUnpackBucket": {"timeField": "t", "metaField": "m"}};
        let stages = vec![
            unpack.clone(),
            doc! {"$match": {"$and": [{"m.a": 1}], "t": {"$gte": at, "$lt": at, "$ne": at}, "x": 1}},
        ];
        let out = push_down(&stages).expect("moved");
        assert_eq!(
            out[0],
            doc! {"$match": {"$and": [
                {"meta.a": 1},
                {"control.max.t": {"$gte": at}},
                {"control.min.t": {"$lt": at}},
            ]}}
        );
        assert_eq!(&out[1..], &stages[..]);
        let nothing = vec![unpack, doc! {"$match": {"x": 1, "t": {"$gt": 5}}}];
        assert!(push_down(&nothing).is_none());
    }
}
