//! `$sample: {size: N}`: N of the input's documents, chosen uniformly at random without
//! repeats, in random order (all of them, shuffled, when there are N or fewer). mongod picks
//! them by a random sort keeping the top N (or, as the first stage over a large collection,
//! by a random cursor); here one pass keeps a reservoir of N (Vitter's algorithm R: the
//! i-th document replaces a kept one with probability N/i), which gives the same
//! distribution in memory for N documents, then shuffles it. The kept documents are charged to
//! the blocking-stage budget like `$sort`'s (292 past it). Spec errors are mongod's
//! (`DocumentSourceSample::createFromBson`: 28745-28749).

use bson::raw::RawBsonRef;
use rand::seq::SliceRandom;
use rand::Rng;

use super::execute::{blocking, Ctx, DocStream, MemoryBudget};
use crate::{ErrorCode, MongoError};

/// The sample size from `$sample`'s spec.
pub(crate) fn parse(spec: RawBsonRef<'_>) -> Result<u64, MongoError> {
    let RawBsonRef::Document(d) = spec else {
        return Err(MongoError::new(
            ErrorCode::Location28745,
            "the $sample stage specification must be an object",
        ));
    };
    let mut size = None;
    for field in d {
        let (name, value) = field.map_err(crate::matcher::path::bson_error)?;
        if name != "size" {
            return Err(MongoError::new(
                ErrorCode::Location28748,
                format!("unrecognized option to $sample: {name}"),
            ));
        }
        let n = match value {
            RawBsonRef::Int32(n) => i64::from(n),
            RawBsonRef::Int64(n) => n,
            // mongod reads the number as a long: a fraction is dropped.
            RawBsonRef::Double(x) if x.is_finite() => x as i64,
            RawBsonRef::Double(x) if x.is_nan() => 0,
            RawBsonRef::Double(x) => {
                if x > 0.0 {
                    i64::MAX
                } else {
                    i64::MIN
                }
            }
            RawBsonRef::Decimal128(_) => {
                return Err(MongoError::new(
                    ErrorCode::NotImplemented,
                    "a decimal size for $sample is not supported by ShaleDB",
                ))
            }
            _ => {
                return Err(MongoError::new(
                    ErrorCode::Location28746,
                    "size argument to $sample must be a number",
                ))
            }
        };
        if n < 0 {
            return Err(MongoError::new(
                ErrorCode::Location28747,
                "size argument to $sample must not be negative",
            ));
        }
        size = Some(n as u64);
    }
    size.ok_or_else(|| {
        MongoError::new(
            ErrorCode::Location28749,
            "$sample stage must specify a size",
        )
    })
}

/// Runs `$sample` of `size` over `input`.
pub(crate) fn run<'a>(size: u64, input: DocStream<'a>, ctx: Ctx<'a>) -> DocStream<'a> {
    blocking(input, move |input| {
        let size = usize::try_from(size).unwrap_or(usize::MAX);
        let mut budget = MemoryBudget::new("$sample", ctx.options);
        let mut rng = rand::thread_rng();
        let mut kept = Vec::new();
        for (seen, doc) in input.enumerate() {
            let doc = doc?;
            if kept.len() < size {
                budget.charge(doc.as_bytes().len())?;
                kept.push(doc);
                continue;
            }
            // Algorithm R: document `seen` (0-based) is kept with probability size/(seen+1).
            let slot = rng.gen_range(0..=seen);
            if slot < size {
                budget.charge(doc.as_bytes().len())?;
                budget.release(kept[slot].as_bytes().len());
                kept[slot] = doc;
            }
        }
        kept.shuffle(&mut rng);
        Ok(kept)
    })
}

#[cfg(test)]
mod tests {
    use crate::aggregate::{NoCollections, Pipeline, RunOptions};
    use bson::{doc, Document, RawDocumentBuf};

    fn run_sample(size: i64, n: i32) -> Vec<i32> {
        let p = Pipeline::parse(&[doc! {"$sample": {"size": size}}]).expect("parse");
        let input =
            (0..n).map(|i| Ok(RawDocumentBuf::from_document(&doc! {"_id": i}).expect("raw")));
        p.run_from(0, input, &NoCollections, RunOptions::default())
            .map(|d| d.expect("sampled").get_i32("_id").expect("id"))
            .collect()
    }

    #[test]
    fn a_sample_has_its_size_without_repeats_and_all_when_there_are_fewer() {
        for (size, n) in [(0, 10), (3, 10), (10, 10), (15, 10), (5, 0)] {
            let mut got = run_sample(size, n);
            assert_eq!(got.len(), (size as usize).min(n as usize));
            got.sort_unstable();
            got.dedup();
            assert_eq!(got.len(), (size as usize).min(n as usize), "no repeats");
            assert!(got.iter().all(|i| (0..n).contains(i)));
        }
    }

    #[test]
    fn every_document_is_equally_likely() {
        // 4,000 samples of 2 out of 10: each document expected 800 times; a biased
        // reservoir (e.g. one that favours the first or last documents) is far outside ±25%.
        let mut counts = [0u32; 10];
        for _ in 0..4000 {
            for i in run_sample(2, 10) {
                counts[i as usize] += 1;
            }
        }
        assert!(
            counts.iter().all(|&c| (600..1000).contains(&c)),
            "{counts:?}"
        );
    }

    #[test]
    fn specs_are_refused_with_mongods_codes() {
        let code = |spec: Document| Pipeline::parse(&[spec]).expect_err("refused").code.code();
        assert_eq!(code(doc! {"$sample": 3}), 28745);
        assert_eq!(code(doc! {"$sample": {"size": "x"}}), 28746);
        assert_eq!(code(doc! {"$sample": {"size": -1}}), 28747);
        assert_eq!(code(doc! {"$sample": {"size": 1, "other": 1}}), 28748);
        assert_eq!(code(doc! {"$sample": {}}), 28749);
    }
}
