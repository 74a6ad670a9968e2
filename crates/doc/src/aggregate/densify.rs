//! `$densify: {field, partitionByFields?, range: {step, unit?, bounds}}` as mongod 7.0 runs
//! it: documents whose `field` is null or missing pass through; the others (numbers, or dates
//! with a `unit`) are sorted by partition then `field`, and documents holding only the
//! partition fields and `field` are added at the steps of a grid the input lacks. The grid
//! starts at the range's start and steps by repeated addition (dates by `$dateAdd` in UTC);
//! `bounds: "partition"` fills between each partition's smallest and largest value, `"full"`
//! from the smallest to the largest value of the whole input (the largest included when it is
//! on the grid) in every partition, `[lo, hi]` from `lo` up to but not including `hi` in every
//! partition (documents outside it pass through). A value already present is not generated
//! again; a value off the grid does not move it. The spec is parsed in `densify_spec.rs`; at
//! run time 5733201 for a value neither number nor date, 6053600/6053601 for a number with a unit or a date without,
//! 5897900 past 500,000 generated documents. Blocking, under the stage memory budget.

use std::cmp::Ordering;

use bson::raw::RawDocumentBuf;
use bson::{Bson, Document};

use super::densify_spec::{fail, Bounds, Densify};
use super::execute::{blocking, to_document, to_raw, Ctx, DocStream, MemoryBudget};
use super::field_path::{get_path, set_path};
use crate::compare::compare_values;
use crate::compare::number_as_f64;
use crate::matcher::expr_date_arith::date_add;
use crate::matcher::expr_date_zone::Zone;
use crate::{ErrorCode, MongoError};

/// mongod's `internalQueryMaxAllowedDensifyDocs` default.
const MAX_GENERATED_DOCS: usize = 500_000;

const STAGE: &str = "$densify";

/// One input document: its partition (the partition fields it has), its `field` value and
/// itself.
struct Entry {
    partition: Document,
    value: Option<Bson>,
    doc: RawDocumentBuf,
}

pub(crate) fn run<'a>(spec: &'a Densify, input: DocStream<'a>, ctx: Ctx<'a>) -> DocStream<'a> {
    blocking(input, move |input| {
        let mut budget = MemoryBudget::new(STAGE, ctx.options);
        let mut entries = Vec::new();
        for doc in input {
            let doc = doc?;
            budget.charge(doc.as_bytes().len())?;
            entries.push(spec.entry(doc)?);
        }
        spec.densify(entries, &mut budget)
    })
}

impl Densify {
    fn entry(&self, doc: RawDocumentBuf) -> Result<Entry, MongoError> {
        let owned = to_document(&doc)?;
        let mut partition = Document::new();
        for path in &self.partition_fields {
            if let Some(v) = get_path(&owned, path) {
                set_path(&mut partition, path, v.clone());
            }
        }
        let value = match get_path(&owned, &self.field) {
            None | Some(Bson::Null | Bson::Undefined) => None,
            Some(v) => Some(self.check_value(v)?),
        };
        Ok(Entry {
            partition,
            value,
            doc,
        })
    }

    fn check_value(&self, v: &Bson) -> Result<Bson, MongoError> {
        match (v, self.unit) {
            (Bson::Decimal128(_), None) => Err(fail(
                ErrorCode::NotImplemented,
                "decimal128 values in $densify are not supported yet",
            )),
            (Bson::DateTime(_), Some(_)) => Ok(v.clone()),
            (Bson::DateTime(_), None) => Err(fail(
                ErrorCode::Location6053601,
                "Encountered date value in collection when step does not have a date unit.",
            )),
            (n, Some(_)) if number_as_f64(n).is_some() => Err(fail(
                ErrorCode::Location6053600,
                "Encountered non-date value in collection when step has a date unit.",
            )),
            (n, None) if number_as_f64(n).is_some() => Ok(v.clone()),
            _ => Err(fail(
                ErrorCode::Location5733201,
                "Densify field type must be numeric or a date",
            )),
        }
    }

    /// Every input document and the generated ones, partition by partition.
    fn densify(
        &self,
        mut entries: Vec<Entry>,
        budget: &mut MemoryBudget,
    ) -> Result<Vec<RawDocumentBuf>, MongoError> {
        let null = Bson::Null;
        entries.sort_by(|a, b| {
            let pa = Bson::Document(a.partition.clone());
            let pb = Bson::Document(b.partition.clone());
            compare_values(&pa, &pb).then_with(|| {
                compare_values(
                    a.value.as_ref().unwrap_or(&null),
                    b.value.as_ref().unwrap_or(&null),
                )
            })
        });
        let values = entries.iter().filter_map(|e| e.value.as_ref());
        let global = (
            values.clone().next().cloned(),
            values.clone().next_back().cloned(),
        );
        let mut out = Vec::with_capacity(entries.len());
        let mut generated = 0usize;
        let mut rest = entries.into_iter().peekable();
        while let Some(first) = rest.next() {
            let mut partition = vec![first];
            while let Some(next) = rest.next_if(|e| e.partition == partition[0].partition) {
                partition.push(next);
            }
            let docs = self.partition(partition, &global, &mut generated)?;
            for doc in docs {
                budget.charge(doc.as_bytes().len())?;
                out.push(doc);
            }
        }
        if out.is_empty() {
            if let (Bounds::Explicit(range), true) =
                (&self.bounds, self.partition_fields.is_empty())
            {
                let grid = self.grid(&range.0, &range.1, false, &mut generated)?;
                for value in grid {
                    out.push(self.generated(&Document::new(), value)?);
                }
            }
        }
        Ok(out)
    }

    /// One partition's documents (sorted by value) with its missing steps added.
    fn partition(
        &self,
        entries: Vec<Entry>,
        global: &(Option<Bson>, Option<Bson>),
        generated: &mut usize,
    ) -> Result<Vec<RawDocumentBuf>, MongoError> {
        let key = entries[0].partition.clone();
        let present: Vec<Bson> = entries.iter().filter_map(|e| e.value.clone()).collect();
        let (start, end, inclusive) = match (&self.bounds, present.first(), present.last()) {
            (Bounds::Explicit(range), _, _) => {
                (Some(range.0.clone()), Some(range.1.clone()), false)
            }
            (Bounds::Partition, Some(lo), Some(hi)) => (Some(lo.clone()), Some(hi.clone()), false),
            (Bounds::Full, _, _) => (global.0.clone(), global.1.clone(), true),
            _ => (None, None, false),
        };
        // A partition seen only through null or missing values is no partition to mongod.
        let unseen = present.is_empty() && !self.partition_fields.is_empty();
        let grid = match (start, end) {
            (Some(start), Some(end)) if !unseen => self.grid(&start, &end, inclusive, generated)?,
            _ => Vec::new(),
        };
        let mut out = Vec::new();
        let mut grid = grid.into_iter().peekable();
        for entry in entries {
            if let Some(value) = &entry.value {
                while let Some(g) = grid.next_if(|g| compare_values(g, value) != Ordering::Greater)
                {
                    if compare_values(&g, value) == Ordering::Less {
                        out.push(self.generated(&key, g)?);
                    }
                }
            }
            out.push(entry.doc);
        }
        for g in grid {
            out.push(self.generated(&key, g)?);
        }
        Ok(out)
    }

    /// The grid from `start` up to `end` (included when `inclusive`), by repeated steps.
    fn grid(
        &self,
        start: &Bson,
        end: &Bson,
        inclusive: bool,
        generated: &mut usize,
    ) -> Result<Vec<Bson>, MongoError> {
        let mut out = Vec::new();
        let mut current = start.clone();
        loop {
            let ord = compare_values(&current, end);
            if ord == Ordering::Greater || (ord == Ordering::Equal && !inclusive) {
                break;
            }
            *generated += 1;
            if *generated > MAX_GENERATED_DOCS {
                return Err(fail(
                    ErrorCode::Location5897900,
                    format!(
                        "Generated {generated} documents in $densify, which is over the limit of \
                         {MAX_GENERATED_DOCS}. Increase the 'internalQueryMaxAllowedDensifyDocs' \
                         parameter to allow more generated documents"
                    ),
                ));
            }
            let next = self.increment(&current)?;
            out.push(current);
            current = next;
        }
        Ok(out)
    }

    fn increment(&self, value: &Bson) -> Result<Bson, MongoError> {
        Ok(match (value, &self.step, self.unit) {
            (Bson::DateTime(d), step, Some(unit)) => {
                let amount = number_as_f64(step).map_or(0, |s| s as i64);
                let millis = date_add(d.timestamp_millis(), unit, amount, Zone::Utc)?;
                Bson::DateTime(bson::DateTime::from_millis(millis))
            }
            (Bson::Int32(a), Bson::Int32(s), None) => match a.checked_add(*s) {
                Some(sum) => Bson::Int32(sum),
                None => Bson::Int64(i64::from(*a) + i64::from(*s)),
            },
            (Bson::Int32(_) | Bson::Int64(_), Bson::Int32(_) | Bson::Int64(_), None) => {
                let a = integer(value);
                let s = integer(&self.step);
                match a.checked_add(s) {
                    Some(sum) => Bson::Int64(sum),
                    None => Bson::Double(a as f64 + s as f64),
                }
            }
            (v, s, _) => {
                Bson::Double(number_as_f64(v).unwrap_or(f64::NAN) + number_as_f64(s).unwrap_or(0.0))
            }
        })
    }

    /// A generated document: the partition's fields, then `field`.
    fn generated(&self, partition: &Document, value: Bson) -> Result<RawDocumentBuf, MongoError> {
        let mut doc = partition.clone();
        set_path(&mut doc, &self.field, value);
        to_raw(&doc)
    }
}

fn integer(v: &Bson) -> i64 {
    match v {
        Bson::Int32(i) => i64::from(*i),
        Bson::Int64(i) => *i,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use crate::aggregate::{NoCollections, Pipeline};
    use bson::{doc, Bson, DateTime, Document};

    fn run(stage: Document, input: &[Document]) -> Result<Vec<Document>, crate::MongoError> {
        Pipeline::parse(&[doc! {"$densify": stage}])?.run_documents(input, &NoCollections)
    }

    fn values(out: &[Document], field: &str) -> Vec<Bson> {
        out.iter()
            .map(|d| d.get(field).cloned().unwrap_or(Bson::Null))
            .collect()
    }

    fn ints(xs: &[i32]) -> Vec<Bson> {
        xs.iter().map(|x| Bson::Int32(*x)).collect()
    }

    #[test]
    fn fills_numbers_between_and_across_ranges() {
        let input = [doc! {"x": 5}, doc! {"x": 0}, doc! {"x": 3}, doc! {"y": 1}];
        let full = run(
            doc! {"field": "x", "range": {"step": 2, "bounds": "full"}},
            &input,
        )
        .expect("full");
        // Null first; grid 0, 2, 4 from the smallest value; 3 and 5 are off it.
        assert_eq!(
            values(&full, "x"),
            [vec![Bson::Null], ints(&[0, 2, 3, 4, 5])].concat()
        );
        let explicit = run(
            doc! {"field": "x", "range": {"step": 2, "bounds": [1, 7]}},
            &input,
        )
        .expect("explicit");
        assert_eq!(
            values(&explicit, "x"),
            [vec![Bson::Null], ints(&[0, 1, 3, 5])].concat()
        );
        let empty = run(
            doc! {"field": "x", "range": {"step": 1, "bounds": [0, 3]}},
            &[],
        )
        .expect("empty");
        assert_eq!(values(&empty, "x"), ints(&[0, 1, 2]));
        assert!(run(
            doc! {"field": "x", "range": {"step": 1, "bounds": "full"}},
            &[]
        )
        .expect("empty full")
        .is_empty());
    }

    #[test]
    fn partitions_fill_alone_or_over_the_full_range() {
        let input = [
            doc! {"g": "a", "x": 0},
            doc! {"g": "a", "x": 4},
            doc! {"g": "b", "x": 6},
        ];
        let per = run(
            doc! {"field": "x", "partitionByFields": ["g"], "range": {"step": 2, "bounds": "partition"}},
            &input,
        )
        .expect("partition");
        assert_eq!(values(&per, "x"), ints(&[0, 2, 4, 6]));
        assert_eq!(per[1], doc! {"g": "a", "x": 2});
        let full = run(
            doc! {"field": "x", "partitionByFields": ["g"], "range": {"step": 2, "bounds": "full"}},
            &input,
        )
        .expect("full");
        // Both partitions span 0..=6: a gets 2 and 6, b gets 0, 2, 4.
        assert_eq!(values(&full, "x"), ints(&[0, 2, 4, 6, 0, 2, 4, 6]));
        assert_eq!(values(&full, "g").len(), 8);
    }

    #[test]
    fn partitions_with_only_nulls_are_not_filled() {
        let input = [
            doc! {"g": "a", "x": 0},
            doc! {"g": "a", "x": 2},
            doc! {"g": "b"},
        ];
        let out = run(
            doc! {"field": "x", "partitionByFields": ["g"], "range": {"step": 1, "bounds": "full"}},
            &input,
        )
        .expect("full");
        assert_eq!(out.len(), 4);
        assert_eq!(out.iter().filter(|d| d.get_str("g") == Ok("b")).count(), 1);
        // Without partitions an explicit range is filled even when every value is null.
        let out = run(
            doc! {"field": "x", "range": {"step": 1, "bounds": [0, 2]}},
            &[doc! {"x": null}],
        )
        .expect("explicit");
        assert_eq!(
            values(&out, "x"),
            vec![Bson::Null, Bson::Int32(0), Bson::Int32(1)]
        );
    }

    #[test]
    fn dates_step_by_units() {
        let day = |d: i64| DateTime::from_millis(d * 86_400_000);
        let input = [doc! {"t": day(0)}, doc! {"t": day(3)}];
        let out = run(
            doc! {"field": "t", "range": {"step": 1, "unit": "day", "bounds": "full"}},
            &input,
        )
        .expect("dates");
        assert_eq!(
            values(&out, "t"),
            (0..4).map(|d| Bson::DateTime(day(d))).collect::<Vec<_>>()
        );
        let wrong = run(
            doc! {"field": "t", "range": {"step": 1, "bounds": "full"}},
            &input,
        );
        assert_eq!(wrong.unwrap_err().code.code(), 6053601);
        let strings = run(
            doc! {"field": "t", "range": {"step": 1, "bounds": "full"}},
            &[doc! {"t": "x"}],
        );
        assert_eq!(strings.unwrap_err().code.code(), 5733201);
    }
}
