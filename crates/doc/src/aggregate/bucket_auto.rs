//! `$bucketAuto: {groupBy, buckets, output, granularity}`: the input sorted by its `groupBy`
//! value (missing as null, MongoDB's order, the command's collation, ties in arrival order)
//! and cut into at most `buckets` runs of about `round(n / buckets)` documents, as mongod
//! 7.0's `DocumentSourceBucketAuto` cuts them: a bucket never splits equal values (it takes
//! in the following documents with its last value), each bucket's `_id` is `{min, max}` with
//! `max` the next bucket's `min` (the last bucket's `max` is its largest value), and the last
//! bucket takes whatever is left. With a `granularity` (`bucket_auto_rounding.rs`) values must
//! be non-negative numbers (40258-40260); `max` is rounded up to the series, documents below
//! it join the bucket, `min` is the previous bucket's `max` (the first one's rounded down),
//! and a bucket whose rounded `max` is 0 ends at the next value rounded down. Each bucket
//! folds `output`'s `$group` accumulators (`{count: {$sum: 1}}` without one) over its
//! documents in sorted order. Blocking, under the stage memory budget. Spec errors are
//! mongod's: 40239-40246, 40257, 40261.

use std::cmp::Ordering;
use std::sync::Arc;

use bson::raw::{RawBsonRef, RawDocumentBuf};
use bson::{doc, Bson, Document};

use super::accumulator::{Accumulator, State};
use super::bucket_auto_rounding::{as_f64, Rounder};
use super::execute::{
    approximate_size, blocking, to_raw, value_to_bson, Ctx, DocStream, MemoryBudget,
};
use super::group::parse_output_field;
use super::simple::{render, type_name};
use crate::collation::value::collate;
use crate::collation::Collation;
use crate::compare::compare_values;
use crate::matcher::expr::Expr;
use crate::matcher::path::bson_error;
use crate::variables::Variables;
use crate::{ErrorCode, MongoError};

/// A parsed `$bucketAuto`.
#[derive(Debug, Clone)]
pub(crate) struct BucketAuto {
    group_by: Expr,
    buckets: usize,
    output: Vec<(String, Accumulator)>,
    granularity: Option<Rounder>,
    collation: Option<Arc<Collation>>,
}

fn fail(code: ErrorCode, message: impl Into<String>) -> MongoError {
    MongoError::new(code, message)
}

pub(crate) fn parse(spec: RawBsonRef<'_>, vars: &Variables) -> Result<BucketAuto, MongoError> {
    let RawBsonRef::Document(d) = spec else {
        return Err(fail(
            ErrorCode::Location40240,
            format!(
                "The argument to $bucketAuto must be an object, but found type: {}",
                type_name(spec)
            ),
        ));
    };
    let (mut group_by, mut buckets, mut output, mut granularity) = (None, None, Vec::new(), None);
    for field in d {
        let (key, value) = field.map_err(bson_error)?;
        match key {
            "groupBy" => group_by = Some(parse_group_by(value, vars)?),
            "buckets" => buckets = Some(parse_buckets(value)?),
            "output" => output = parse_output(value, vars)?,
            "granularity" => granularity = Some(parse_granularity(value)?),
            other => {
                return Err(fail(
                    ErrorCode::Location40245,
                    format!("Unrecognized option to $bucketAuto: {other}"),
                ))
            }
        }
    }
    let (Some(group_by), Some(buckets)) = (group_by, buckets) else {
        return Err(fail(
            ErrorCode::Location40246,
            "$bucketAuto requires 'groupBy' and 'buckets' to be specified",
        ));
    };
    let buckets =
        usize::try_from(buckets)
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| {
                fail(
            ErrorCode::Location40243,
            format!("The $bucketAuto 'buckets' field must be greater than 0, but found: {buckets}"),
        )
            })?;
    if output.is_empty() {
        output.push(("count".to_owned(), Accumulator::sum_of_one()));
    }
    Ok(BucketAuto {
        group_by,
        buckets,
        output,
        granularity,
        collation: vars.collation().cloned(),
    })
}

/// `groupBy`: a `$`-path with a name after the `$`, or an object whose first field is an
/// operator.
fn parse_group_by(value: RawBsonRef<'_>, vars: &Variables) -> Result<Expr, MongoError> {
    let ok = match value {
        RawBsonRef::String(s) => s.len() > 1 && s.starts_with('$'),
        RawBsonRef::Document(d) => d
            .iter()
            .next()
            .and_then(Result::ok)
            .is_some_and(|(k, _)| k.starts_with('$')),
        _ => false,
    };
    if !ok {
        return Err(fail(
            ErrorCode::Location40239,
            format!(
                "The $bucketAuto 'groupBy' field must be defined as a $-prefixed path or an \
                 expression object, but found: {}",
                render(value)
            ),
        ));
    }
    Expr::parse_in(value, vars)
}

/// `buckets`: a number holding a 32-bit integer (its sign is checked once all is read).
fn parse_buckets(value: RawBsonRef<'_>) -> Result<i32, MongoError> {
    let whole = |d: f64| {
        (d.fract() == 0.0 && d >= f64::from(i32::MIN) && d <= f64::from(i32::MAX))
            .then_some(d as i32)
    };
    let (as_int, as_double) = match value {
        RawBsonRef::Int32(i) => (Some(i), f64::from(i)),
        RawBsonRef::Int64(i) => (i32::try_from(i).ok(), i as f64),
        RawBsonRef::Double(d) => (whole(d), d),
        RawBsonRef::Decimal128(_) => {
            return Err(fail(
                ErrorCode::NotImplemented,
                "a decimal128 $bucketAuto 'buckets' is not supported",
            ))
        }
        other => {
            return Err(fail(
                ErrorCode::Location40241,
                format!(
                    "The $bucketAuto 'buckets' field must be a numeric value, but found type: {}",
                    type_name(other)
                ),
            ))
        }
    };
    as_int.ok_or_else(|| {
        fail(
            ErrorCode::Location40242,
            format!(
                "The $bucketAuto 'buckets' field must be representable as a 32-bit integer, but \
                 found {as_double}"
            ),
        )
    })
}

fn parse_output(
    value: RawBsonRef<'_>,
    vars: &Variables,
) -> Result<Vec<(String, Accumulator)>, MongoError> {
    let RawBsonRef::Document(fields) = value else {
        return Err(fail(
            ErrorCode::Location40244,
            format!(
                "The $bucketAuto 'output' field must be an object, but found type: {}",
                type_name(value)
            ),
        ));
    };
    let mut out = Vec::new();
    for field in fields {
        let (name, spec) = field.map_err(bson_error)?;
        out.push((name.to_owned(), parse_output_field(name, spec, vars)?));
    }
    Ok(out)
}

fn parse_granularity(value: RawBsonRef<'_>) -> Result<Rounder, MongoError> {
    match value {
        RawBsonRef::String(name) => Rounder::named(name),
        other => Err(fail(
            ErrorCode::Location40261,
            format!(
                "The $bucketAuto 'granularity' field must be a string, but found type: {}",
                type_name(other)
            ),
        )),
    }
}

/// One input document with its `groupBy` value, as shown and as compared (collated).
struct Entry {
    key: Bson,
    sort_key: Bson,
    doc: RawDocumentBuf,
}

/// A bound of a bucket, as shown and as compared.
#[derive(Clone)]
struct Bound {
    shown: Bson,
    compared: Bson,
}

/// One bucket being filled.
struct Bucket {
    min: Bson,
    max: Bound,
    states: Vec<State>,
}

/// Sort the whole input, then cut it into buckets.
pub(crate) fn run<'a>(spec: &'a BucketAuto, input: DocStream<'a>, ctx: Ctx<'a>) -> DocStream<'a> {
    blocking(input, move |input| {
        let mut budget = MemoryBudget::new("$bucketAuto", ctx.options);
        let mut entries = Vec::new();
        for doc in input {
            let entry = spec.entry(doc?)?;
            budget.charge(entry.doc.as_bytes().len() + 2 * approximate_size(&entry.key))?;
            entries.push(entry);
        }
        entries.sort_by(|a, b| compare_values(&a.sort_key, &b.sort_key));
        spec.cut(entries, &mut budget)
    })
}

impl BucketAuto {
    fn entry(&self, doc: RawDocumentBuf) -> Result<Entry, MongoError> {
        let key = value_to_bson(&self.group_by.evaluate(&doc)?)?;
        if self.granularity.is_some() {
            check_rounded_key(key.as_ref())?;
        }
        let key = key.unwrap_or(Bson::Null);
        let sort_key = collate(self.collation.as_deref(), &key);
        Ok(Entry { key, sort_key, doc })
    }

    fn bound(&self, value: Bson) -> Bound {
        Bound {
            compared: collate(self.collation.as_deref(), &value),
            shown: value,
        }
    }

    /// The buckets over `entries` (sorted), in order.
    fn cut(
        &self,
        entries: Vec<Entry>,
        budget: &mut MemoryBudget,
    ) -> Result<Vec<RawDocumentBuf>, MongoError> {
        let approx_size = (entries.len() as f64 / self.buckets as f64)
            .round()
            .max(1.0) as usize;
        let mut rest = entries.into_iter();
        let mut carried: Option<Entry> = None;
        let mut previous_max: Option<Bson> = None;
        let mut out = Vec::new();
        for number in 1..=self.buckets {
            let Some(first) = carried.take().or_else(|| rest.next()) else {
                break;
            };
            let mut bucket = self.open(&first, previous_max.take())?;
            bucket.add(self, first, budget)?;
            let last = number == self.buckets;
            let mut taken = 1;
            while taken < approx_size || last {
                let Some(entry) = rest.next() else { break };
                bucket.add(self, entry, budget)?;
                taken += 1;
            }
            carried = self.close(&mut bucket, &mut rest, budget)?;
            previous_max = Some(bucket.max.shown.clone());
            out.push(bucket.finish(self)?);
        }
        Ok(out)
    }

    fn open(&self, first: &Entry, previous_max: Option<Bson>) -> Result<Bucket, MongoError> {
        let min = match (self.granularity, previous_max) {
            (Some(_), Some(max)) => max,
            (Some(rounder), None) => rounder.round_down(&first.key)?,
            (None, _) => first.key.clone(),
        };
        Ok(Bucket {
            min,
            max: self.bound(first.key.clone()),
            states: self
                .output
                .iter()
                .map(|(_, acc)| State::new(acc.op))
                .collect(),
        })
    }

    /// Takes in the documents that belong with the bucket's last value (equal ones; with a
    /// granularity, those below its rounded-up max), sets its max, and returns the first
    /// document of the next bucket.
    fn close(
        &self,
        bucket: &mut Bucket,
        rest: &mut impl Iterator<Item = Entry>,
        budget: &mut MemoryBudget,
    ) -> Result<Option<Entry>, MongoError> {
        let mut next = rest.next();
        let boundary = match self.granularity {
            Some(rounder) => Some(self.bound(rounder.round_up(&bucket.max.shown)?)),
            None => None,
        };
        while let Some(entry) = next.take() {
            let same = compare_values(&bucket.max.compared, &entry.sort_key) == Ordering::Equal;
            let below = boundary
                .as_ref()
                .is_some_and(|b| compare_values(&b.compared, &entry.sort_key) == Ordering::Greater);
            if !(same || below) {
                next = Some(entry);
                break;
            }
            bucket.add(self, entry, budget)?;
            next = rest.next();
        }
        match (self.granularity, boundary) {
            (Some(rounder), Some(boundary)) => {
                bucket.max = match &next {
                    Some(entry) if as_f64(&boundary.shown)? == 0.0 => {
                        self.bound(rounder.round_down(&entry.key)?)
                    }
                    _ => boundary,
                };
            }
            _ => {
                if let Some(entry) = &next {
                    bucket.max = self.bound(entry.key.clone());
                }
            }
        }
        Ok(next)
    }
}

impl Bucket {
    fn add(
        &mut self,
        spec: &BucketAuto,
        entry: Entry,
        budget: &mut MemoryBudget,
    ) -> Result<(), MongoError> {
        for ((_, acc), state) in spec.output.iter().zip(&mut self.states) {
            let value = value_to_bson(&acc.arg.evaluate(&entry.doc)?)?;
            budget.charge(state.add_collated(value, spec.collation.as_deref())?)?;
        }
        self.max = Bound {
            shown: entry.key,
            compared: entry.sort_key,
        };
        Ok(())
    }

    fn finish(self, spec: &BucketAuto) -> Result<RawDocumentBuf, MongoError> {
        let mut out = Document::new();
        out.insert("_id", doc! {"min": self.min, "max": self.max.shown});
        for ((name, _), state) in spec.output.iter().zip(self.states) {
            out.insert(name.as_str(), state.finish());
        }
        to_raw(&out)
    }
}

/// With a granularity, every `groupBy` value must be a non-negative number.
fn check_rounded_key(key: Option<&Bson>) -> Result<(), MongoError> {
    let number = match key {
        Some(Bson::Int32(i)) => f64::from(*i),
        Some(Bson::Int64(i)) => *i as f64,
        Some(Bson::Double(d)) => *d,
        Some(decimal @ Bson::Decimal128(_)) => return as_f64(decimal).map(|_| ()),
        other => {
            let name = other
                .and_then(|b| bson::RawBson::try_from(b.clone()).ok())
                .map_or("missing", |raw| type_name(raw.as_raw_bson_ref()));
            return Err(fail(
                ErrorCode::Location40258,
                format!(
                    "$bucketAuto can specify a 'granularity' with numeric boundaries only, but \
                     found a value with type: {name}"
                ),
            ));
        }
    };
    if number.is_nan() {
        return Err(fail(
            ErrorCode::Location40259,
            "$bucketAuto can specify a 'granularity' with numeric boundaries only, but found a NaN",
        ));
    }
    if number < 0.0 {
        return Err(fail(
            ErrorCode::Location40260,
            "$bucketAuto can specify a 'granularity' with non-negative numbers only, but found a \
             negative number",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::aggregate::{NoCollections, Pipeline, RunOptions};
    use bson::{doc, Bson, Document, RawDocumentBuf};

    fn run(stage: Document, xs: &[Bson]) -> Result<Vec<Document>, crate::MongoError> {
        run_with(stage, xs, RunOptions::default())
    }

    fn run_with(
        stage: Document,
        xs: &[Bson],
        options: RunOptions,
    ) -> Result<Vec<Document>, crate::MongoError> {
        let p = Pipeline::parse(&[doc! {"$bucketAuto": stage}])?;
        let input = xs
            .iter()
            .map(|x| Ok(RawDocumentBuf::from_document(&doc! {"x": x.clone()}).expect("raw")));
        p.run_from(0, input, &NoCollections, options)
            .map(|d| d.map(|d| d.to_document().expect("doc")))
            .collect()
    }

    fn ints(xs: &[i32]) -> Vec<Bson> {
        xs.iter().map(|x| Bson::Int32(*x)).collect()
    }

    /// The buckets cut the plain way: sorted values, runs of `round(n / buckets)` (at least
    /// one) extended over equal values, the last bucket taking the rest; each bucket's max the
    /// next one's min, or its own largest value.
    fn naive(values: &[i32], buckets: usize) -> Vec<Document> {
        let mut sorted = values.to_vec();
        sorted.sort_unstable();
        let size = ((sorted.len() as f64 / buckets as f64).round() as usize).max(1);
        let mut runs: Vec<Vec<i32>> = Vec::new();
        let mut i = 0;
        while i < sorted.len() && runs.len() < buckets {
            let end = if runs.len() + 1 == buckets {
                sorted.len()
            } else {
                let mut end = (i + size).min(sorted.len());
                while end < sorted.len() && sorted[end] == sorted[end - 1] {
                    end += 1;
                }
                end
            };
            runs.push(sorted[i..end].to_vec());
            i = end;
        }
        let mins: Vec<i32> = runs.iter().map(|r| r[0]).collect();
        runs.iter()
            .enumerate()
            .map(|(k, r)| {
                let max = mins.get(k + 1).copied().unwrap_or(r[r.len() - 1]);
                let n = i32::try_from(r.len()).expect("small");
                doc! {"_id": {"min": r[0], "max": max}, "count": n}
            })
            .collect()
    }

    #[test]
    fn buckets_match_the_naive_cut() {
        let mut seed = 7_u64;
        for round in 0..40 {
            let n = 1 + round % 23;
            let values: Vec<i32> = (0..n)
                .map(|_| {
                    seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                    i32::try_from((seed >> 33) % 9).expect("small")
                })
                .collect();
            for buckets in 1..6 {
                let got =
                    run(doc! {"groupBy": "$x", "buckets": buckets}, &ints(&values)).expect("runs");
                assert_eq!(
                    got,
                    naive(&values, buckets as usize),
                    "{values:?} / {buckets}"
                );
            }
        }
        let skewed = run(
            doc! {"groupBy": "$x", "buckets": 3},
            &ints(&[1, 1, 1, 1, 1, 2]),
        )
        .expect("runs");
        assert_eq!(
            skewed,
            vec![
                doc! {"_id": {"min": 1, "max": 2}, "count": 5},
                doc! {"_id": {"min": 2, "max": 2}, "count": 1},
            ]
        );
    }

    #[test]
    fn output_accumulators_missing_keys_and_mixed_types() {
        let got = run(
            doc! {"groupBy": "$x", "buckets": 2,
            "output": {"n": {"$sum": 1}, "all": {"$push": "$x"}, "top": {"$max": "$x"}}},
            &[
                Bson::Int32(3),
                Bson::String("a".into()),
                Bson::Null,
                Bson::Int32(1),
            ],
        )
        .expect("runs");
        assert_eq!(
            got,
            vec![
                doc! {"_id": {"min": null, "max": 3}, "n": 2, "all": [null, 1], "top": 1},
                doc! {"_id": {"min": 3, "max": "a"}, "n": 2, "all": [3, "a"], "top": "a"},
            ]
        );
        assert!(run(doc! {"groupBy": "$x", "buckets": 4}, &[])
            .expect("runs")
            .is_empty());
    }

    #[test]
    fn granularity_rounds_boundaries() {
        let got = run(
            doc! {"groupBy": "$x", "buckets": 3, "granularity": "POWERSOF2"},
            &ints(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]),
        )
        .expect("runs");
        assert_eq!(
            got,
            vec![
                doc! {"_id": {"min": 0.5, "max": 4}, "count": 3},
                doc! {"_id": {"min": 4, "max": 8}, "count": 4},
                doc! {"_id": {"min": 8, "max": 16}, "count": 3},
            ]
        );
        // A first bucket of zeros ends where the next value rounds down to.
        let zeros = run(
            doc! {"groupBy": "$x", "buckets": 2, "granularity": "R5"},
            &ints(&[0, 0, 12, 30]),
        )
        .expect("runs");
        assert_eq!(
            zeros,
            vec![
                doc! {"_id": {"min": 0, "max": 10.0}, "count": 2},
                doc! {"_id": {"min": 10.0, "max": 40.0}, "count": 2},
            ]
        );
    }

    #[test]
    fn specs_and_values_are_refused_with_mongods_codes() {
        let code = |spec: Bson| {
            Pipeline::parse(&[doc! {"$bucketAuto": spec}])
                .unwrap_err()
                .code
                .code()
        };
        assert_eq!(code(Bson::Int32(1)), 40240);
        assert_eq!(code(bson::bson!({"groupBy": "x", "buckets": 2})), 40239);
        assert_eq!(code(bson::bson!({"groupBy": "$", "buckets": 2})), 40239);
        assert_eq!(code(bson::bson!({"groupBy": "$x", "buckets": "2"})), 40241);
        assert_eq!(code(bson::bson!({"groupBy": "$x", "buckets": 2.5})), 40242);
        assert_eq!(
            code(bson::bson!({"groupBy": "$x", "buckets": 5_000_000_000_i64})),
            40242
        );
        assert_eq!(code(bson::bson!({"groupBy": "$x", "buckets": 0})), 40243);
        assert_eq!(
            code(bson::bson!({"groupBy": "$x", "buckets": 2, "output": 1})),
            40244
        );
        assert_eq!(
            code(bson::bson!({"groupBy": "$x", "buckets": 2, "foo": 1})),
            40245
        );
        assert_eq!(code(bson::bson!({"groupBy": "$x"})), 40246);
        assert_eq!(code(bson::bson!({"buckets": 0})), 40246);
        assert_eq!(
            code(bson::bson!({"groupBy": "$x", "buckets": 2, "granularity": "R7"})),
            40257
        );
        assert_eq!(
            code(bson::bson!({"groupBy": "$x", "buckets": 2, "granularity": 5})),
            40261
        );
        assert_eq!(
            code(bson::bson!({"groupBy": "$x", "buckets": 2, "output": {"a": {"$nope": 1}}})),
            15952
        );
        let rounded = doc! {"groupBy": "$x", "buckets": 2, "granularity": "E6"};
        let value_code = |x: Bson| run(rounded.clone(), &[x]).unwrap_err().code.code();
        assert_eq!(value_code(Bson::String("a".into())), 40258);
        assert_eq!(value_code(Bson::Null), 40258);
        assert_eq!(value_code(Bson::Double(f64::NAN)), 40259);
        assert_eq!(value_code(Bson::Int32(-1)), 40260);
    }

    #[test]
    fn memory_limit_is_enforced() {
        let options = RunOptions {
            memory_limit_bytes: 1024,
            allow_disk_use: false,
        };
        let xs: Vec<Bson> = (0..100).map(Bson::Int32).collect();
        let e = run_with(doc! {"groupBy": "$x", "buckets": 2}, &xs, options).unwrap_err();
        assert_eq!(e.code.code(), 292);
    }
}
