//! `$bucket: {groupBy, boundaries, default, output}`: documents grouped by which
//! `[boundaries[i], boundaries[i+1])` their `groupBy` value falls in (the bucket's `_id` is its
//! lower boundary; values outside every bucket go to `default`, or fail 40066 without one),
//! each bucket with `output`'s accumulators (`{count: {$sum: 1}}` when there is none), in
//! boundary order. Built as mongod builds it (`DocumentSourceBucket::createFromBson`): a
//! `$group` whose `_id` is a `$switch` over the buckets, then a `$sort` on `_id`. Spec errors
//! are mongod's: 40191-40202.

use bson::raw::{RawBsonRef, RawDocumentBuf};
use bson::{doc, Bson, Document};
use std::cmp::Ordering;

use super::execute::raw_to_bson;
use super::simple::type_name;
use super::{group, sort};
use crate::compare::{canonical_type_order, compare_values};
use crate::matcher::path::bson_error;
use crate::variables::Variables;
use crate::{ErrorCode, MongoError};

/// `$bucket`'s `$group` and `$sort`.
pub(crate) fn parse(
    spec: RawBsonRef<'_>,
    vars: &Variables,
) -> Result<(group::GroupSpec, sort::SortSpec), MongoError> {
    let RawBsonRef::Document(d) = spec else {
        return Err(fail(
            ErrorCode::Location40201,
            format!(
                "Argument to $bucket stage must be an object, but found type: {}.",
                type_name(spec)
            ),
        ));
    };
    let (mut group_by, mut boundaries, mut default, mut output) = (None, None, None, None);
    for field in d {
        let (key, value) = field.map_err(bson_error)?;
        match key {
            "groupBy" => group_by = Some(parse_group_by(value)?),
            "boundaries" => boundaries = Some(parse_boundaries(value)?),
            "default" => default = Some(constant(value, "default", ErrorCode::Location40195)?),
            "output" => match value {
                RawBsonRef::Document(o) => {
                    output = Some(bson::Document::try_from(o).map_err(bson_error)?)
                }
                other => {
                    return Err(fail(
                        ErrorCode::Location40196,
                        format!(
                            "The $bucket 'output' field must be an object, but found type: {}.",
                            type_name(other)
                        ),
                    ))
                }
            },
            other => {
                return Err(fail(
                    ErrorCode::Location40197,
                    format!("Unrecognized option to $bucket: {other}."),
                ))
            }
        }
    }
    let (Some(group_by), Some(boundaries)) = (group_by, boundaries) else {
        return Err(fail(
            ErrorCode::Location40198,
            "$bucket requires 'groupBy' and 'boundaries' to be specified.",
        ));
    };
    if let Some(def) = &default {
        let below = compare_values(def, &boundaries[0]) == Ordering::Less;
        let above = compare_values(def, &boundaries[boundaries.len() - 1]) != Ordering::Less;
        if !below && !above {
            return Err(fail(
                ErrorCode::Location40199,
                "The $bucket 'default' field must be less than the lowest boundary or greater \
                 than or equal to the highest boundary.",
            ));
        }
    }
    let branches: Vec<Bson> = boundaries
        .windows(2)
        .map(|w| {
            Bson::Document(doc! {
                "case": {"$and": [
                    {"$gte": [group_by.clone(), {"$literal": w[0].clone()}]},
                    {"$lt": [group_by.clone(), {"$literal": w[1].clone()}]},
                ]},
                "then": {"$literal": w[0].clone()},
            })
        })
        .collect();
    let mut switch = doc! {"branches": branches};
    if let Some(def) = default {
        switch.insert("default", doc! {"$literal": def});
    }
    let mut group_spec = doc! {"_id": {"$switch": switch}};
    match output {
        Some(o) => group_spec.extend(o),
        None => {
            group_spec.insert("count", doc! {"$sum": 1});
        }
    }
    let group_raw = raw(&group_spec)?;
    let sort_raw = raw(&doc! {"_id": 1})?;
    Ok((
        group::parse(RawBsonRef::Document(&group_raw), vars)?,
        sort::parse(RawBsonRef::Document(&sort_raw), vars)?,
    ))
}

fn raw(d: &Document) -> Result<RawDocumentBuf, MongoError> {
    RawDocumentBuf::from_document(d).map_err(|e| fail(ErrorCode::BadValue, e.to_string()))
}

fn fail(code: ErrorCode, message: impl Into<String>) -> MongoError {
    MongoError::new(code, message)
}

/// Whether `value` is a `$`-path or an expression object (its first field an operator).
fn is_expression(value: RawBsonRef<'_>) -> bool {
    match value {
        RawBsonRef::String(s) => s.starts_with('$'),
        RawBsonRef::Document(d) => d
            .iter()
            .next()
            .and_then(Result::ok)
            .is_some_and(|(k, _)| k.starts_with('$')),
        _ => false,
    }
}

/// `groupBy`: a `$`-path or an expression object, kept as written for the `$switch`.
fn parse_group_by(value: RawBsonRef<'_>) -> Result<Bson, MongoError> {
    let ok = is_expression(value);
    if !ok {
        return Err(fail(
            ErrorCode::Location40202,
            format!(
                "The $bucket 'groupBy' field must be defined as a $-prefixed path or an \
                 expression, but found: {}.",
                render(value)
            ),
        ));
    }
    raw_to_bson(value)
}

/// `boundaries`: at least two constants of one type, strictly ascending.
fn parse_boundaries(value: RawBsonRef<'_>) -> Result<Vec<Bson>, MongoError> {
    let RawBsonRef::Array(items) = value else {
        return Err(fail(
            ErrorCode::Location40200,
            format!(
                "The $bucket 'boundaries' field must be an array, but found type: {}.",
                type_name(value)
            ),
        ));
    };
    let mut out = Vec::new();
    for item in items {
        out.push(constant(
            item.map_err(bson_error)?,
            "boundaries",
            ErrorCode::Location40191,
        )?);
    }
    if out.len() < 2 {
        return Err(fail(
            ErrorCode::Location40192,
            format!(
                "The $bucket 'boundaries' field must have at least 2 values, but found {} \
                 value(s).",
                out.len()
            ),
        ));
    }
    for (i, w) in out.windows(2).enumerate() {
        if canonical_type_order(&w[0]) != canonical_type_order(&w[1]) {
            return Err(fail(
                ErrorCode::Location40193,
                format!(
                    "All values in the the 'boundaries' option to $bucket must have the same \
                     type. Found conflicting types {} and {}.",
                    type_name(raw_of(&w[0])?.as_raw_bson_ref()),
                    type_name(raw_of(&w[1])?.as_raw_bson_ref())
                ),
            ));
        }
        if compare_values(&w[0], &w[1]) != Ordering::Less {
            return Err(fail(
                ErrorCode::Location40194,
                format!(
                    "The 'boundaries' option to $bucket must be sorted in ascending order, but \
                     elements {} and {} are not in ascending order ({} is not less than {}).",
                    i,
                    i + 1,
                    w[0],
                    w[1]
                ),
            ));
        }
    }
    Ok(out)
}

fn raw_of(v: &Bson) -> Result<bson::RawBson, MongoError> {
    bson::RawBson::try_from(v.clone()).map_err(|e| fail(ErrorCode::BadValue, e.to_string()))
}

/// A value that must be constant: not a `$`-path, not an expression object.
fn constant(value: RawBsonRef<'_>, field: &str, code: ErrorCode) -> Result<Bson, MongoError> {
    let expression = is_expression(value);
    if expression {
        let what = match field {
            "default" => "The $bucket 'default' field must be a constant expression, but found: ",
            _ => "The $bucket 'boundaries' field must be an array of constant values, but found value: ",
        };
        return Err(fail(code, format!("{what}{}.", render(value))));
    }
    raw_to_bson(value)
}

fn render(value: RawBsonRef<'_>) -> String {
    raw_to_bson(value).map_or_else(|_| "<malformed>".to_owned(), |b| b.to_string())
}

#[cfg(test)]
mod tests {
    use crate::aggregate::{NoCollections, Pipeline, RunOptions};
    use bson::{doc, Document, RawDocumentBuf};

    fn run(stage: Document, xs: &[i32]) -> Result<Vec<Document>, crate::MongoError> {
        let p = Pipeline::parse(&[stage])?;
        let input = xs
            .iter()
            .map(|x| Ok(RawDocumentBuf::from_document(&doc! {"x": *x}).expect("raw")));
        p.run_from(0, input, &NoCollections, RunOptions::default())
            .map(|d| d.map(|d| d.to_document().expect("doc")))
            .collect()
    }

    #[test]
    fn documents_fall_in_their_bucket_or_the_default() {
        let xs = [1, 5, 12, 7, 30, 0, -4];
        let got = run(
            doc! {"$bucket": {"groupBy": "$x", "boundaries": [0, 5, 10, 20], "default": "other"}},
            &xs,
        )
        .expect("runs");
        assert_eq!(
            got,
            vec![
                doc! {"_id": 0, "count": 2},
                doc! {"_id": 5, "count": 2},
                doc! {"_id": 10, "count": 1},
                doc! {"_id": "other", "count": 2},
            ]
        );
        let sums = run(
            doc! {"$bucket": {"groupBy": "$x", "boundaries": [0, 10, 100],
            "output": {"total": {"$sum": "$x"}, "n": {"$sum": 1}}}},
            &[1, 2, 50],
        )
        .expect("runs");
        assert_eq!(
            sums,
            vec![
                doc! {"_id": 0, "total": 3, "n": 2},
                doc! {"_id": 10, "total": 50, "n": 1}
            ]
        );
        let outside = run(
            doc! {"$bucket": {"groupBy": "$x", "boundaries": [0, 10]}},
            &[11],
        );
        assert_eq!(outside.unwrap_err().code.code(), 40066);
    }

    #[test]
    fn specs_are_refused_with_mongods_codes() {
        let code = |spec: Document| run(doc! {"$bucket": spec}, &[]).unwrap_err().code.code();
        assert_eq!(
            run(doc! {"$bucket": 1}, &[]).unwrap_err().code.code(),
            40201
        );
        assert_eq!(code(doc! {"groupBy": "$x"}), 40198);
        assert_eq!(code(doc! {"groupBy": "x", "boundaries": [0, 1]}), 40202);
        assert_eq!(code(doc! {"groupBy": "$x", "boundaries": 1}), 40200);
        assert_eq!(code(doc! {"groupBy": "$x", "boundaries": [0]}), 40192);
        assert_eq!(code(doc! {"groupBy": "$x", "boundaries": [0, "$y"]}), 40191);
        assert_eq!(code(doc! {"groupBy": "$x", "boundaries": [0, "a"]}), 40193);
        assert_eq!(code(doc! {"groupBy": "$x", "boundaries": [5, 1]}), 40194);
        assert_eq!(
            code(doc! {"groupBy": "$x", "boundaries": [0, 5], "default": "$y"}),
            40195
        );
        assert_eq!(
            code(doc! {"groupBy": "$x", "boundaries": [0, 5], "output": 1}),
            40196
        );
        assert_eq!(
            code(doc! {"groupBy": "$x", "boundaries": [0, 5], "z": 1}),
            40197
        );
        assert_eq!(
            code(doc! {"groupBy": "$x", "boundaries": [0, 5], "default": 3}),
            40199
        );
    }
}
