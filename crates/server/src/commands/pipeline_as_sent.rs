//! An aggregation pipeline's `$match` filters read as sent: `aggregate` decodes its pipeline
//! into documents, which keep only a repeated name's last value, while mongod's matcher
//! reads every element of a filter (`{a: {$gte: 1}, a: {$lte: 2}}` is the AND of both).
//! Each `$match` whose filter repeats a name is replaced by the `$and` that means the same
//! (`shale_doc::filter_as_sent`), at the top level and in the sub-pipelines of `$facet`,
//! `$lookup` and `$unionWith`, at any depth. Nothing else in a stage is read here, and
//! nothing is judged: the stage parsers still refuse what they refuse.

use crate::command::Command;
use bson::raw::{RawArray, RawBsonRef, RawDocument};
use bson::{Bson, Document};
use shale_doc::MongoError;

/// The pipeline's `$match` stages (`stages`, decoded from `cmd`'s `pipeline` in order)
/// as sent, where the decoded stage kept a repeated name's last value.
pub fn matches_as_sent(cmd: &Command<'_>, stages: &mut [Document]) -> Result<(), MongoError> {
    let Some(RawBsonRef::Array(raw)) = cmd.get("pipeline") else {
        return Ok(());
    };
    for (stage, item) in stages.iter_mut().zip(raw) {
        if let Ok(RawBsonRef::Document(raw_stage)) = item {
            stage_as_sent(stage, raw_stage)?;
        }
    }
    Ok(())
}

/// A sub-pipeline (decoded `stages`, sent as `raw`) read as the top level is.
fn pipeline_as_sent(stages: &mut [Bson], raw: &RawArray) -> Result<(), MongoError> {
    for (stage, item) in stages.iter_mut().zip(raw) {
        if let (Bson::Document(stage), Ok(RawBsonRef::Document(raw_stage))) = (stage, item) {
            stage_as_sent(stage, raw_stage)?;
        }
    }
    Ok(())
}

/// One stage: a `$match`'s filter, or the pipelines inside `$facet`, `$lookup`,
/// `$unionWith`. A stage that names its stage twice (refused by the parser) is left alone.
fn stage_as_sent(stage: &mut Document, raw_stage: &RawDocument) -> Result<(), MongoError> {
    let Some(Ok((name, value))) = raw_stage.iter().next() else {
        return Ok(());
    };
    let Some(decoded) = stage.get_mut(name) else {
        return Ok(());
    };
    match (name, value, decoded) {
        ("$match", RawBsonRef::Document(filter), decoded) => {
            if let Some(and) = shale_doc::filter_as_sent(filter)? {
                *decoded = Bson::Document(and);
            }
        }
        ("$facet", RawBsonRef::Document(facets), Bson::Document(decoded)) => {
            facets_as_sent(decoded, facets)?;
        }
        ("$lookup" | "$unionWith", RawBsonRef::Document(spec), Bson::Document(decoded)) => {
            if let (Ok(Some(RawBsonRef::Array(raw))), Some(Bson::Array(stages))) =
                (spec.get("pipeline"), decoded.get_mut("pipeline"))
            {
                pipeline_as_sent(stages, raw)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// `$facet`'s pipelines, by name; none when a name repeats (the decoded facet would not be
/// the one sent under it).
fn facets_as_sent(decoded: &mut Document, facets: &RawDocument) -> Result<(), MongoError> {
    let mut seen = std::collections::HashSet::new();
    if !facets.iter().flatten().all(|(name, _)| seen.insert(name)) {
        return Ok(());
    }
    for (name, value) in facets.iter().flatten() {
        if let (RawBsonRef::Array(raw), Some(Bson::Array(stages))) = (value, decoded.get_mut(name))
        {
            pipeline_as_sent(stages, raw)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, rawdoc, RawArrayBuf, RawDocumentBuf};

    fn a_twice() -> RawDocumentBuf {
        let mut filter = RawDocumentBuf::new();
        filter.append("a", 1);
        filter.append("a", 2);
        filter
    }

    fn matched() -> RawDocumentBuf {
        let mut stage = RawDocumentBuf::new();
        stage.append("$match", a_twice());
        stage
    }

    fn read(stages: RawArrayBuf) -> Vec<Document> {
        let mut body = RawDocumentBuf::new();
        body.append("aggregate", "c");
        body.append("pipeline", stages);
        let cmd = Command::new(&body, Vec::new());
        let Some(Bson::Array(items)) = cmd.doc().expect("owned").get("pipeline").cloned() else {
            panic!("a pipeline");
        };
        let mut decoded: Vec<Document> = items
            .into_iter()
            .map(|s| s.as_document().expect("a stage").clone())
            .collect();
        matches_as_sent(&cmd, &mut decoded).expect("reads");
        decoded
    }

    #[test]
    fn a_match_naming_a_field_twice_is_read_as_sent() {
        let mut stages = RawArrayBuf::new();
        stages.push(rawdoc! {"$match": {"b": 1}});
        stages.push(matched());
        stages.push(rawdoc! {"$project": {"a": 1}});
        assert_eq!(
            read(stages),
            vec![
                doc! {"$match": {"b": 1}},
                doc! {"$match": {"$and": [{"a": 1}, {"a": 2}]}},
                doc! {"$project": {"a": 1}},
            ]
        );
    }

    #[test]
    fn matches_inside_facet_lookup_and_union_with_are_read_as_sent() {
        let inner = || {
            let mut stages = RawArrayBuf::new();
            stages.push(matched());
            stages
        };
        let mut facets = RawDocumentBuf::new();
        facets.append("one", inner());
        let mut count = RawArrayBuf::new();
        count.push(rawdoc! {"$count": "n"});
        facets.append("two", count);
        let mut facet = RawDocumentBuf::new();
        facet.append("$facet", facets);
        let mut lookup_spec = rawdoc! {"from": "d", "as": "j"};
        lookup_spec.append("pipeline", inner());
        let mut lookup = RawDocumentBuf::new();
        lookup.append("$lookup", lookup_spec);
        let mut union_spec = rawdoc! {"coll": "e"};
        let mut nested = RawArrayBuf::new();
        nested.push(lookup.clone());
        union_spec.append("pipeline", nested);
        let mut union = RawDocumentBuf::new();
        union.append("$unionWith", union_spec);
        let mut stages = RawArrayBuf::new();
        stages.push(facet);
        stages.push(lookup);
        stages.push(union);
        let and = doc! {"$match": {"$and": [{"a": 1}, {"a": 2}]}};
        let lookup_read = doc! {"$lookup": {"from": "d", "as": "j", "pipeline": [and.clone()]}};
        assert_eq!(
            read(stages),
            vec![
                doc! {"$facet": {"one": [and.clone()], "two": [{"$count": "n"}]}},
                lookup_read.clone(),
                doc! {"$unionWith": {"coll": "e", "pipeline": [lookup_read]}},
            ]
        );
    }
}
