//! `$facet`: several sub-pipelines over the same input, giving one document with one array per
//! facet (even for no input). Parse codes follow MongoDB 7.0: 40169 (not a non-empty object),
//! 40170 (a facet that is not an array), 40171 (a stage that is not a non-empty object),
//! `BadValue` for an empty sub-pipeline, field name codes for facet names, and 40600 for stages
//! not allowed inside `$facet` (checked by the stage parser). The input is buffered once under
//! the memory budget and each sub-pipeline reads it in turn.

use bson::raw::{RawBsonRef, RawDocumentBuf};
use bson::{Bson, Document};

use super::execute::{blocking, raw_to_bson, run_to_vec, to_raw, Ctx, DocStream, MemoryBudget};
use super::field_path::validate_field_name;
use super::simple::{render, type_name};
use super::{Pipeline, Place};
use crate::matcher::path::bson_error;
use crate::variables::Variables;
use crate::{ErrorCode, MongoError};

/// A parsed `$facet`: output name and sub-pipeline, in specification order.
#[derive(Debug, Clone)]
pub(crate) struct Facet {
    facets: Vec<(String, Pipeline)>,
}

fn error(code: ErrorCode, message: impl Into<String>) -> MongoError {
    MongoError::new(code, message)
}

pub(crate) fn parse(spec: RawBsonRef<'_>, vars: &Variables) -> Result<Facet, MongoError> {
    let not_object = || {
        error(
            ErrorCode::Location40169,
            format!(
                "the $facet specification must be a non-empty object, but found: $facet: {}",
                render(spec)
            ),
        )
    };
    let RawBsonRef::Document(d) = spec else {
        return Err(not_object());
    };
    let mut facets = Vec::new();
    for item in d.iter() {
        let (name, value) = item.map_err(bson_error)?;
        validate_field_name(name)?;
        let RawBsonRef::Array(items) = value else {
            return Err(error(
                ErrorCode::Location40170,
                format!(
                    "arguments to $facet must be arrays, {name} is type {}",
                    type_name(value)
                ),
            ));
        };
        let mut stages = Vec::new();
        for (i, stage) in items.into_iter().enumerate() {
            match stage.map_err(bson_error)? {
                RawBsonRef::Document(s) if s.iter().next().is_some() => {
                    stages.push(s.to_raw_document_buf())
                }
                other => {
                    return Err(error(
                        ErrorCode::Location40171,
                        format!(
                            "elements of arrays in $facet spec must be non-empty objects, {name} \
                             argument contained an element of type {}: {i}: {}",
                            type_name(other),
                            render(other)
                        ),
                    ))
                }
            }
        }
        if stages.is_empty() {
            return Err(error(
                ErrorCode::BadValue,
                "sub-pipeline in $facet stage cannot be empty",
            ));
        }
        facets.push((
            name.to_owned(),
            Pipeline::parse_in(&stages, Place::Facet, vars)?,
        ));
    }
    if facets.is_empty() {
        return Err(not_object());
    }
    Ok(Facet { facets })
}

/// Buffer the input, run every facet over it, and emit the one result document.
pub(crate) fn run<'a>(spec: &'a Facet, input: DocStream<'a>, ctx: Ctx<'a>) -> DocStream<'a> {
    blocking(input, move |input| {
        let mut budget = MemoryBudget::new("$facet", ctx.options);
        let mut buffer: Vec<RawDocumentBuf> = Vec::new();
        for doc in input {
            let doc = doc?;
            budget.charge(doc.as_bytes().len())?;
            buffer.push(doc);
        }
        let mut out = Document::new();
        for (name, pipeline) in &spec.facets {
            let results = run_to_vec(pipeline.stages(), buffer.iter().cloned(), ctx)?;
            let mut array = Vec::with_capacity(results.len());
            for d in &results {
                budget.charge(d.as_bytes().len())?;
                array.push(raw_to_bson(RawBsonRef::Document(d))?);
            }
            out.insert(name.as_str(), Bson::Array(array));
        }
        Ok(vec![to_raw(&out)?])
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn code(spec: Bson) -> i32 {
        Pipeline::parse(&[doc! {"$facet": spec}])
            .unwrap_err()
            .code
            .code()
    }

    #[test]
    fn parse_errors() {
        assert_eq!(code(Bson::Int32(1)), 40169);
        assert_eq!(code(bson::bson!({})), 40169);
        assert_eq!(code(bson::bson!({"a": 1})), 40170);
        assert_eq!(code(bson::bson!({"a": [1]})), 40171);
        assert_eq!(code(bson::bson!({"a": [{}]})), 40171);
        assert_eq!(code(bson::bson!({"a": []})), 2);
        assert_eq!(code(bson::bson!({"$a": [{"$limit": 1}]})), 16410);
        assert_eq!(
            code(bson::bson!({"a": [{"$facet": {"b": [{"$limit": 1}]}}]})),
            40600
        );
        assert_eq!(code(bson::bson!({"a": [{"$limit": 0}]})), 15958);
    }

    #[test]
    fn every_facet_reads_the_whole_input_and_errors_end_the_run() {
        use crate::aggregate::NoCollections;
        let pipeline = Pipeline::parse(&[doc! {"$facet": {
            "first": [{"$limit": 1}],
            "rest": [{"$skip": 1}, {"$project": {"_id": 1}}],
        }}])
        .expect("parses");
        let input = [doc! {"_id": 1, "a": 1}, doc! {"_id": 2, "a": 2}];
        let out = pipeline
            .run_documents(&input, &NoCollections)
            .expect("runs");
        assert_eq!(
            out,
            vec![doc! {"first": [{"_id": 1, "a": 1}], "rest": [{"_id": 2}]}]
        );
        let failing = vec![Err(MongoError::new(ErrorCode::InternalError, "x"))];
        let e = pipeline
            .run(failing, &NoCollections)
            .collect::<Result<Vec<_>, _>>()
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::InternalError);
    }
}
