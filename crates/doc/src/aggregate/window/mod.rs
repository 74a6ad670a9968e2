//! `$setWindowFields: {partitionBy?, sortBy?, output}`, as mongod 7.0 runs it: the input
//! sorted by its partition key (an expression; missing as null, an array refused with
//! `TypeMismatch` 14) and then `sortBy` (MongoDB's order, stable, the command's collation),
//! cut into runs of equal partition keys, and each `output` field's window function
//! (`function.rs`) computed over each partition (`compute.rs`) through its window
//! (`bounds.rs`). Output fields are set in the order given, as mongod's add-fields executor
//! sets them (`set_fields.rs`): a dotted path through embedded documents and, element by
//! element, arrays (a scalar on the way is replaced by a document), a missing result leaving
//! the field unset; documents come out in sorted order. Spec errors are mongod's: 9 for a
//! non-object stage, 14 for a wrong-typed field, 40414 for no `output`, 40415 for an unknown
//! field, 6307900 for conflicting output paths, the field path codes for bad names.
//! Blocking, under the stage memory budget (whole input plus computed values).

mod bounds;
mod compute;
mod function;
mod series;
mod top_bottom;

use std::cmp::Ordering;
use std::sync::Arc;

use bson::raw::{RawBsonRef, RawDocument, RawDocumentBuf};
use bson::{Bson, RawBson};

use super::execute::{
    approximate_size, blocking, to_document, to_raw, value_to_bson, Ctx, DocStream, MemoryBudget,
};
use super::field_path::parse_field_path;
use super::set_fields::set_computed;
use super::simple::type_name;
use super::sort::{self, SortSpec};
use crate::collation::value::collate;
use crate::collation::Collation;
use crate::compare::compare_values;
use crate::matcher::expr::Expr;
use crate::matcher::path::bson_error;
use crate::variables::Variables;
use crate::{ErrorCode, MongoError};

use compute::Row;
use function::WindowFunction;

/// A parsed `$setWindowFields`.
#[derive(Debug, Clone)]
pub(crate) struct SetWindowFields {
    partition_by: Option<Expr>,
    sort_by: Option<SortSpec>,
    /// `"$<path>"` of a one-field `sortBy`: the value range windows and `$linearFill` read.
    sort_value: Option<Expr>,
    output: Vec<(Vec<String>, WindowFunction)>,
    collation: Option<Arc<Collation>>,
}

const STAGE: &str = "$setWindowFields";

fn wrong_type(field: &str, value: RawBsonRef<'_>) -> MongoError {
    MongoError::new(
        ErrorCode::TypeMismatch,
        format!(
            "BSON field '{STAGE}.{field}' is the wrong type '{}', expected type 'object'",
            type_name(value)
        ),
    )
}

pub(crate) fn parse(spec: RawBsonRef<'_>, vars: &Variables) -> Result<SetWindowFields, MongoError> {
    let RawBsonRef::Document(d) = spec else {
        return Err(MongoError::new(
            ErrorCode::FailedToParse,
            format!(
                "the {STAGE} stage specification must be an object, found {}",
                type_name(spec)
            ),
        ));
    };
    let (mut partition_by, mut sort_by, mut output) = (None, None, None);
    for field in d {
        let (name, value) = field.map_err(bson_error)?;
        match (name, value) {
            ("partitionBy", v) => partition_by = Some(v),
            ("sortBy", RawBsonRef::Document(_)) => sort_by = Some(value),
            ("output", RawBsonRef::Document(o)) => output = Some(o),
            ("sortBy" | "output", v) => return Err(wrong_type(name, v)),
            (other, _) => {
                return Err(MongoError::new(
                    ErrorCode::Location40415,
                    format!("BSON field '{STAGE}.{other}' is an unknown field."),
                ))
            }
        }
    }
    let output = output.ok_or_else(|| {
        MongoError::new(
            ErrorCode::Location40414,
            format!("BSON field '{STAGE}.output' is missing but a required field"),
        )
    })?;
    let partition_by = partition_by
        .map(|p| parse_partition_by(p, vars))
        .transpose()?;
    let sort_by = sort_by.map(|s| sort::parse(s, vars)).transpose()?;
    let sort_value = match sort_by.as_ref().and_then(SortSpec::single_key) {
        Some((path, _)) => {
            let path = format!("${}", path.join("."));
            Some(Expr::parse_in(RawBsonRef::String(&path), vars)?)
        }
        None => None,
    };
    Ok(SetWindowFields {
        partition_by,
        output: parse_output(output, sort_by.as_ref(), vars)?,
        sort_by,
        sort_value,
        collation: vars.collation().cloned(),
    })
}

fn parse_partition_by(value: RawBsonRef<'_>, vars: &Variables) -> Result<Expr, MongoError> {
    let expr = Expr::parse_in(value, vars)?;
    if matches!(expr, Expr::Literal(RawBson::Array(_))) {
        return Err(MongoError::new(
            ErrorCode::TypeMismatch,
            "An expression used to partition cannot evaluate to value of type array",
        ));
    }
    Ok(expr)
}

fn parse_output(
    output: &RawDocument,
    sort_by: Option<&SortSpec>,
    vars: &Variables,
) -> Result<Vec<(Vec<String>, WindowFunction)>, MongoError> {
    let mut parsed: Vec<(Vec<String>, WindowFunction)> = Vec::new();
    for field in output {
        let (name, spec) = field.map_err(bson_error)?;
        let path = parse_field_path(name)?;
        let conflict = parsed.iter().any(|(other, _)| {
            let n = other.len().min(path.len());
            other[..n] == path[..n]
        });
        if conflict {
            return Err(MongoError::new(
                ErrorCode::Location6307900,
                format!("{STAGE} 'output' specification contains two conflicting paths"),
            ));
        }
        let function = function::parse(name, spec, sort_by, vars)?;
        parsed.push((path, function));
    }
    Ok(parsed)
}

/// One input document with its (collated) partition key.
struct Entry {
    partition: Bson,
    row: Row,
}

pub(crate) fn run<'a>(
    spec: &'a SetWindowFields,
    input: DocStream<'a>,
    ctx: Ctx<'a>,
) -> DocStream<'a> {
    blocking(input, move |input| {
        let mut budget = MemoryBudget::new(STAGE, ctx.options);
        let mut entries = Vec::new();
        for doc in input {
            let entry = spec.entry(doc?)?;
            let keys: usize = entry.row.sort_key.iter().map(approximate_size).sum();
            budget.charge(
                entry.row.doc.as_bytes().len() + keys + approximate_size(&entry.partition),
            )?;
            entries.push(entry);
        }
        if spec.partition_by.is_some() || spec.sort_by.is_some() {
            entries.sort_by(|a, b| spec.order(a, b));
        }
        let mut out = Vec::with_capacity(entries.len());
        let mut rest = entries.into_iter().peekable();
        while let Some(first) = rest.next() {
            let mut rows = vec![first.row];
            while let Some(next) =
                rest.next_if(|e| compare_values(&e.partition, &first.partition) == Ordering::Equal)
            {
                rows.push(next.row);
            }
            out.extend(spec.partition(rows, &mut budget)?);
        }
        Ok(out)
    })
}

impl SetWindowFields {
    fn entry(&self, doc: RawDocumentBuf) -> Result<Entry, MongoError> {
        let partition = match &self.partition_by {
            None => Bson::Null,
            Some(expr) => match value_to_bson(&expr.evaluate(&doc)?)? {
                Some(Bson::Array(_)) => {
                    return Err(MongoError::new(
                        ErrorCode::TypeMismatch,
                        "Cannot 'partitionBy' an expression of type array",
                    ))
                }
                Some(key) => collate(self.collation.as_deref(), &key),
                None => Bson::Null,
            },
        };
        let sort_key = match &self.sort_by {
            Some(sort_by) => sort_by.key_of(&doc)?,
            None => Vec::new(),
        };
        let sort_value = match &self.sort_value {
            Some(expr) => value_to_bson(&expr.evaluate(&doc)?)?,
            None => None,
        };
        Ok(Entry {
            partition,
            row: Row {
                doc,
                sort_key,
                sort_value,
            },
        })
    }

    fn order(&self, a: &Entry, b: &Entry) -> Ordering {
        let by_partition = compare_values(&a.partition, &b.partition);
        match &self.sort_by {
            Some(sort_by) => {
                by_partition.then_with(|| sort_by.compare(&a.row.sort_key, &b.row.sort_key))
            }
            None => by_partition,
        }
    }

    /// The partition's documents with every output field set.
    fn partition(
        &self,
        rows: Vec<Row>,
        budget: &mut MemoryBudget,
    ) -> Result<Vec<RawDocumentBuf>, MongoError> {
        let mut columns = Vec::with_capacity(self.output.len());
        for (_, function) in &self.output {
            let values = compute::compute(function, &rows, self.collation.as_deref(), budget)?;
            columns.push(values);
        }
        let mut out = Vec::with_capacity(rows.len());
        for (i, row) in rows.iter().enumerate() {
            let mut doc = to_document(&row.doc)?;
            for ((path, _), column) in self.output.iter().zip(&columns) {
                let value = column.get(i).and_then(Option::as_ref);
                set_computed(&mut doc, path, value);
            }
            out.push(to_raw(&doc)?);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use crate::aggregate::{NoCollections, Pipeline};
    use bson::{doc, Bson, Document};

    fn run(stage: Document, input: &[Document]) -> Result<Vec<Document>, crate::MongoError> {
        Pipeline::parse(&[doc! {"$setWindowFields": stage}])?.run_documents(input, &NoCollections)
    }

    fn code(stage: Document) -> i32 {
        run(stage, &[doc! {}]).unwrap_err().code.code()
    }

    #[test]
    fn partitions_are_sorted_and_computed_apart() {
        let input = [
            doc! {"_id": 1, "g": "b", "t": 2, "x": 5},
            doc! {"_id": 2, "g": "a", "t": 2, "x": 1},
            doc! {"_id": 3, "g": "a", "t": 1, "x": 2},
            doc! {"_id": 4, "t": 1, "x": 7},
            doc! {"_id": 5, "g": null, "t": 0, "x": 3},
            doc! {"_id": 6, "g": "b", "t": 1, "x": 4},
        ];
        let out = run(
            doc! {"partitionBy": "$g", "sortBy": {"t": 1}, "output": {
                "run": {"$sum": "$x", "window": {"documents": ["unbounded", "current"]}},
                "n.rank": {"$rank": {}},
            }},
            &input,
        )
        .expect("runs");
        let got: Vec<(i32, i32, i32)> = out
            .iter()
            .map(|d| {
                let rank = d
                    .get_document("n")
                    .expect("n")
                    .get_i32("rank")
                    .expect("rank");
                (
                    d.get_i32("_id").expect("id"),
                    d.get_i32("run").expect("run"),
                    rank,
                )
            })
            .collect();
        // null and missing are one partition, sorted first; then "a", then "b".
        assert_eq!(
            got,
            vec![
                (5, 3, 1),
                (4, 10, 2),
                (3, 2, 1),
                (2, 3, 2),
                (6, 4, 1),
                (1, 9, 2)
            ]
        );
    }

    #[test]
    fn empty_input_missing_values_and_unset_fields() {
        assert!(run(doc! {"output": {"s": {"$sum": "$x"}}}, &[])
            .expect("empty")
            .is_empty());
        let input = [doc! {"_id": 1, "a": 5, "x": 1}, doc! {"_id": 2, "a": [1]}];
        let out = run(
            doc! {"sortBy": {"_id": 1}, "output": {
                "a.b": {"$shift": {"output": "$x", "by": 1, "default": "none"}},
                "s": {"$sum": "$x"},
            }},
            &input,
        )
        .expect("runs");
        // The next document has no x: the field stays unset (its parent is still made).
        assert_eq!(out[0], doc! {"_id": 1, "a": {}, "x": 1, "s": 1});
        // Through an array, element by element, as $addFields goes.
        assert_eq!(out[1], doc! {"_id": 2, "a": [{"b": "none"}], "s": 1});
    }

    #[test]
    fn range_windows_over_numbers_and_dates() {
        let input: Vec<Document> = [0, 1, 3, 4, 10]
            .iter()
            .map(|t| doc! {"t": *t, "d": bson::DateTime::from_millis(i64::from(*t) * 3_600_000)})
            .collect();
        let out = run(
            doc! {"sortBy": {"t": 1}, "output": {
                "c": {"$count": {}, "window": {"range": [-1, 1]}},
            }},
            &input,
        )
        .expect("numbers");
        let counts: Vec<i32> = out.iter().map(|d| d.get_i32("c").expect("c")).collect();
        assert_eq!(counts, vec![2, 2, 2, 2, 1]);
        let out = run(
            doc! {"sortBy": {"d": 1}, "output": {
                "c": {"$push": "$t", "window": {"range": [-3, 0], "unit": "hour"}},
            }},
            &input,
        )
        .expect("dates");
        assert_eq!(
            out[3].get_array("c").expect("c"),
            &vec![Bson::Int32(1), Bson::Int32(3), Bson::Int32(4)]
        );
    }

    #[test]
    fn top_and_bottom_order_by_their_own_sort() {
        let input = [
            doc! {"t": 1, "score": 5, "who": "a"},
            doc! {"t": 2, "score": 9, "who": "b"},
            doc! {"t": 3, "score": 1},
            doc! {"t": 4, "score": 9, "who": "d"},
        ];
        let out = run(
            doc! {"sortBy": {"t": 1}, "output": {
                "best": {"$top": {"sortBy": {"score": -1}, "output": "$who"}},
                "worst2": {"$bottomN": {"n": 2, "sortBy": {"score": -1}, "output": "$who"},
                           "window": {"documents": ["unbounded", "current"]}},
            }},
            &input,
        )
        .expect("runs");
        // Ties keep window order: b (t=2) before d (t=4) at score 9.
        assert!(out.iter().all(|d| d.get_str("best") == Ok("b")));
        let worst: Vec<&bson::Array> = out
            .iter()
            .map(|d| d.get_array("worst2").expect("array"))
            .collect();
        assert_eq!(worst[0], &vec![Bson::String("a".into())]);
        assert_eq!(worst[2], &vec![Bson::String("a".into()), Bson::Null]);
        assert_eq!(worst[3], &vec![Bson::String("a".into()), Bson::Null]);
    }

    #[test]
    fn values_are_charged_as_they_are_made() {
        let input: Vec<bson::RawDocumentBuf> = (0..300)
            .map(|i| bson::RawDocumentBuf::from_document(&doc! {"t": i}).expect("raw"))
            .collect();
        let options = crate::aggregate::RunOptions {
            memory_limit_bytes: 200_000,
            allow_disk_use: false,
        };
        let run_with = |output: Document| {
            let stage = doc! {"$setWindowFields": {"sortBy": {"t": 1}, "output": output}};
            let pipeline = Pipeline::parse(&[stage]).expect("parses");
            let docs = input.iter().cloned().map(Ok);
            pipeline
                .run_from(0, docs, &NoCollections, options)
                .collect::<Result<Vec<_>, _>>()
        };
        // A running $push holds about 300 * 300 / 2 values: past the limit, refused.
        let pushed =
            run_with(doc! {"all": {"$push": "$t", "window": {"documents": ["unbounded", 0]}}});
        assert_eq!(pushed.unwrap_err().code.code(), 292);
        let summed =
            run_with(doc! {"s": {"$sum": "$t", "window": {"documents": ["unbounded", 0]}}});
        assert_eq!(summed.expect("within the limit").len(), 300);
    }

    #[test]
    fn spec_errors_carry_mongods_codes() {
        assert_eq!(run(doc! {}, &[]).unwrap_err().code.code(), 40414);
        assert_eq!(code(doc! {"output": {}, "foo": 1}), 40415);
        assert_eq!(code(doc! {"output": 1}), 14);
        assert_eq!(code(doc! {"output": {}, "sortBy": 1}), 14);
        assert_eq!(code(doc! {"output": {}, "partitionBy": [1]}), 14);
        assert_eq!(
            code(doc! {"output": {"a": {"$sum": 1}, "a.b": {"$sum": 1}}}),
            6307900
        );
        assert_eq!(code(doc! {"output": {"$a": {"$sum": 1}}}), 16410);
        let array_key = run(
            doc! {"partitionBy": "$g", "output": {"s": {"$sum": 1}}},
            &[doc! {"g": [1, 2]}],
        );
        assert_eq!(array_key.unwrap_err().code.code(), 14);
        let e = Pipeline::parse(&[doc! {"$setWindowFields": 1}]).unwrap_err();
        assert_eq!(e.code.code(), 9);
    }
}
