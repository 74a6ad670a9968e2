//! `$unionWith`: the input's documents, then those of another collection of the same
//! database run through an optional sub-pipeline (`"coll"` or `{coll, pipeline}`; with no
//! `coll`, a pipeline that begins with `$documents`). The other collection is read through the
//! same resolver `$lookup` uses, once, after the input is exhausted. Spec errors are mongod's:
//! not an object or string `FailedToParse` (9), an unknown field 40415, a field of the wrong
//! type `TypeMismatch` (14), no collection and no leading `$documents` `FailedToParse`, and
//! `$out`/`$merge` in the sub-pipeline 31441 (`mod.rs`, `check_placement`).

use bson::raw::{RawBsonRef, RawDocumentBuf};

use super::execute::{chain, Ctx, DocStream};
use super::simple::type_name;
use super::{Pipeline, Place};
use crate::matcher::path::bson_error;
use crate::variables::Variables;
use crate::{ErrorCode, MongoError};

/// A parsed `$unionWith`.
#[derive(Debug, Clone)]
pub(crate) struct UnionWith {
    /// The collection to add (`None`: the sub-pipeline makes its own documents).
    coll: Option<String>,
    pipeline: Option<Pipeline>,
}

pub(crate) fn parse(spec: RawBsonRef<'_>, vars: &Variables) -> Result<UnionWith, MongoError> {
    let d = match spec {
        RawBsonRef::String(c) => {
            return Ok(UnionWith {
                coll: Some(c.to_owned()),
                pipeline: None,
            })
        }
        RawBsonRef::Document(d) => d,
        other => {
            return Err(MongoError::new(
                ErrorCode::FailedToParse,
                format!(
                    "the $unionWith stage specification must be an object or string, but found {}",
                    type_name(other)
                ),
            ))
        }
    };
    let (mut coll, mut stages) = (None, None);
    for field in d {
        let (key, value) = field.map_err(bson_error)?;
        match (key, value) {
            ("coll", RawBsonRef::String(c)) => coll = Some(c.to_owned()),
            ("pipeline", RawBsonRef::Array(items)) => {
                let mut v = Vec::new();
                for item in items {
                    match item.map_err(bson_error)? {
                        RawBsonRef::Document(s) => v.push(s.to_raw_document_buf()),
                        other => return Err(wrong_type("pipeline", other, "object")),
                    }
                }
                stages = Some(v);
            }
            ("coll", other) => return Err(wrong_type("coll", other, "string")),
            ("pipeline", other) => return Err(wrong_type("pipeline", other, "array")),
            (other, _) => {
                return Err(MongoError::new(
                    ErrorCode::Location40415,
                    format!("BSON field '$unionWith.{other}' is an unknown field."),
                ))
            }
        }
    }
    let pipeline = stages
        .map(|s: Vec<RawDocumentBuf>| Pipeline::parse_in(&s, Place::UnionWith, vars))
        .transpose()?;
    if coll.is_none()
        && !pipeline
            .as_ref()
            .is_some_and(Pipeline::leads_with_documents)
    {
        return Err(MongoError::new(
            ErrorCode::FailedToParse,
            "$unionWith stage without explicit collection must have a pipeline with $documents \
             as first stage",
        ));
    }
    Ok(UnionWith { coll, pipeline })
}

fn wrong_type(field: &str, value: RawBsonRef<'_>, expected: &str) -> MongoError {
    MongoError::new(
        ErrorCode::TypeMismatch,
        format!(
            "BSON field '$unionWith.{field}' is the wrong type '{}', expected type '{expected}'",
            type_name(value)
        ),
    )
}

/// The input, then the other collection's documents through the sub-pipeline.
pub(crate) fn run<'a>(spec: &'a UnionWith, input: DocStream<'a>, ctx: Ctx<'a>) -> DocStream<'a> {
    let mut added: Option<DocStream<'a>> = None;
    let mut input = Some(input);
    Box::new(std::iter::from_fn(move || {
        if let Some(stream) = input.as_mut() {
            match stream.next() {
                Some(doc) => return Some(doc),
                None => input = None,
            }
        }
        if added.is_none() {
            let docs = match &spec.coll {
                Some(c) => match ctx.resolver.scan(c) {
                    Ok(docs) => docs,
                    Err(e) => return Some(Err(e)),
                },
                None => Vec::new(),
            };
            let docs: DocStream<'a> = Box::new(docs.into_iter().map(Ok));
            added = Some(match &spec.pipeline {
                Some(p) => chain(&p.stages, docs, ctx),
                None => docs,
            });
        }
        added.as_mut().and_then(Iterator::next)
    }))
}

#[cfg(test)]
mod tests {
    use crate::aggregate::{MemoryCollections, Pipeline, RunOptions};
    use bson::{doc, Document, RawDocumentBuf};

    fn run(stage: Document) -> Result<Vec<Document>, crate::MongoError> {
        let mut other = MemoryCollections::new();
        let docs: Vec<Document> = (0..3).map(|i| doc! {"o": i}).collect();
        other.insert("other", &docs).expect("stored");
        let p = Pipeline::parse(&[stage])?;
        let input = (0..2).map(|i| Ok(RawDocumentBuf::from_document(&doc! {"i": i}).expect("raw")));
        p.run_from(0, input, &other, RunOptions::default())
            .map(|d| d.map(|d| d.to_document().expect("doc")))
            .collect()
    }

    #[test]
    fn the_input_comes_first_then_the_other_collection_through_its_pipeline() {
        let all = run(doc! {"$unionWith": "other"}).expect("runs");
        assert_eq!(
            all,
            vec![
                doc! {"i": 0},
                doc! {"i": 1},
                doc! {"o": 0},
                doc! {"o": 1},
                doc! {"o": 2}
            ]
        );
        let some = run(
            doc! {"$unionWith": {"coll": "other", "pipeline": [{"$match": {"o": {"$gte": 1}}}]}},
        )
        .expect("runs");
        assert_eq!(
            some,
            vec![doc! {"i": 0}, doc! {"i": 1}, doc! {"o": 1}, doc! {"o": 2}]
        );
        let missing = run(doc! {"$unionWith": "absent"}).expect("runs");
        assert_eq!(missing.len(), 2);
        let made =
            run(doc! {"$unionWith": {"pipeline": [{"$documents": [{"d": 1}]}]}}).expect("runs");
        assert_eq!(made, vec![doc! {"i": 0}, doc! {"i": 1}, doc! {"d": 1}]);
    }

    #[test]
    fn specs_are_refused_with_mongods_codes() {
        let code = |stage: Document| run(stage).expect_err("refused").code.code();
        assert_eq!(code(doc! {"$unionWith": 1}), 9);
        assert_eq!(code(doc! {"$unionWith": {"coll": 1}}), 14);
        assert_eq!(
            code(doc! {"$unionWith": {"coll": "other", "pipeline": 1}}),
            14
        );
        assert_eq!(code(doc! {"$unionWith": {"coll": "other", "x": 1}}), 40415);
        assert_eq!(code(doc! {"$unionWith": {"pipeline": [{"$match": {}}]}}), 9);
        assert_eq!(
            code(doc! {"$unionWith": {"coll": "other", "pipeline": [{"$out": "x"}]}}),
            31441
        );
    }
}
