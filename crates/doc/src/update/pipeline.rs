//! Pipeline-style updates (MongoDB 4.2+): `u` is an array of aggregation stages, limited to
//! the ones that reshape one document — `$addFields`/`$set`, `$project`, `$unset`,
//! `$replaceRoot`/`$replaceWith` — run over the matched document (or an upsert's seed) by
//! the aggregation executor. `arrayFilters` do not apply to them.

use crate::aggregate::{NoCollections, Pipeline};
use crate::variables::Variables;
use crate::{ErrorCode, MongoError};
use bson::{Bson, Document};

/// Stages an update pipeline may use.
const ALLOWED: &[&str] = &[
    "$addFields",
    "$set",
    "$project",
    "$unset",
    "$replaceRoot",
    "$replaceWith",
];

/// An update pipeline, and where its stages write (what a stored document's repeated
/// names there go with, `stored_repeats.rs`).
#[derive(Debug)]
pub struct UpdatePipeline {
    stages: Pipeline,
    writes: Writes,
}

/// Where an update pipeline's stages write.
#[derive(Debug, PartialEq)]
enum Writes {
    /// A new root: `$replaceRoot`/`$replaceWith`, or a `$project` that includes.
    Root,
    /// The paths `$set`/`$addFields`, `$unset` and excluding `$project`s name.
    Paths(Vec<Vec<String>>),
}

impl UpdatePipeline {
    /// Whether a stage writes at the field path `fields` or above it.
    pub(super) fn writes_at_or_above(&self, fields: &[&str]) -> bool {
        match &self.writes {
            Writes::Root => true,
            Writes::Paths(paths) => paths
                .iter()
                .any(|p| p.len() <= fields.len() && p.iter().zip(fields).all(|(a, b)| a == b)),
        }
    }
}

/// The paths the (still unchecked) stages write; what they cannot name is the root.
fn writes(stages: &[Document]) -> Writes {
    let split = |p: &str| p.split('.').map(str::to_owned).collect::<Vec<_>>();
    let mut paths = Vec::new();
    for stage in stages {
        let Some((name, spec)) = stage.iter().next() else {
            continue;
        };
        match (name.as_str(), spec) {
            ("$set" | "$addFields", Bson::Document(fields)) => {
                paths.extend(fields.keys().map(|k| split(k)));
            }
            ("$unset", Bson::String(field)) => paths.push(split(field)),
            ("$unset", Bson::Array(fields)) => {
                paths.extend(fields.iter().filter_map(Bson::as_str).map(split));
            }
            ("$project", Bson::Document(fields)) if fields.values().all(excludes) => {
                paths.extend(fields.keys().map(|k| split(k)));
            }
            _ => return Writes::Root,
        }
    }
    Writes::Paths(paths)
}

/// A `$project` value that excludes (anything else is read as building a new root).
fn excludes(value: &Bson) -> bool {
    matches!(
        value,
        Bson::Boolean(false) | Bson::Int32(0) | Bson::Int64(0)
    ) || matches!(value, Bson::Double(d) if *d == 0.0)
}

/// Parses and checks an update pipeline whose expressions read `vars` (the command's `let`
/// variables, `$$NOW`, `$$CLUSTER_TIME`).
pub fn parse(
    stages: &[Bson],
    has_array_filters: bool,
    vars: &Variables,
) -> Result<UpdatePipeline, MongoError> {
    if has_array_filters {
        return Err(MongoError::new(
            ErrorCode::FailedToParse,
            "arrayFilters may not be specified for pipeline-style updates",
        ));
    }
    let mut docs = Vec::with_capacity(stages.len());
    for s in stages {
        let Bson::Document(d) = s else {
            return Err(MongoError::new(
                ErrorCode::TypeMismatch,
                "Each element of the 'pipeline' array must be an object",
            ));
        };
        if let Some(name) = d.keys().next() {
            if d.len() == 1 && !ALLOWED.contains(&name.as_str()) {
                return Err(MongoError::new(
                    ErrorCode::InvalidOptions,
                    format!("{name} is not allowed to be used within an update"),
                ));
            }
        }
        docs.push(d.clone());
    }
    Ok(UpdatePipeline {
        stages: Pipeline::parse_with(&docs, vars)?,
        writes: writes(&docs),
    })
}

/// Runs the pipeline over `doc`, replacing it; true if it changed.
pub fn apply(pipeline: &UpdatePipeline, doc: &mut Document) -> Result<bool, MongoError> {
    let mut out = pipeline
        .stages
        .run_documents(std::slice::from_ref(doc), &NoCollections)?;
    let (Some(mut new), true) = (out.pop(), out.is_empty()) else {
        return Err(MongoError::new(
            ErrorCode::InternalError,
            "an update pipeline must produce exactly one document",
        ));
    };
    if let Some(old_id) = doc.get("_id") {
        match new.get("_id") {
            // A result without `_id` keeps the document's (mongod does the same).
            None => {
                let mut with_id = Document::new();
                with_id.insert("_id", old_id.clone());
                with_id.extend(new);
                new = with_id;
            }
            Some(id) if id != old_id => return Err(super::immutable_id(&["_id".to_owned()])),
            Some(_) => {}
        }
    }
    let modified = new != *doc;
    *doc = new;
    Ok(modified)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{bson, doc};

    #[test]
    fn reshaping_stages_run_and_others_are_refused() {
        let p = parse(
            bson!([{"$set": {"b": {"$add": ["$a", 1]}}}, {"$unset": "c"}])
                .as_array()
                .expect("array"),
            false,
            &Variables::new(),
        )
        .expect("pipeline");
        let mut d = doc! {"_id": 1, "a": 2, "c": 3};
        assert!(apply(&p, &mut d).expect("applies"));
        assert_eq!(d, doc! {"_id": 1, "a": 2, "b": 3});
        assert!(!apply(&p, &mut d).expect("applies again"));
        let e = parse(
            bson!([{"$match": {"a": 1}}]).as_array().expect("array"),
            false,
            &Variables::new(),
        )
        .expect_err("$match");
        assert_eq!(e.code.code(), 72);
        let e = parse(
            bson!([{"$set": {"a": 1}}]).as_array().expect("array"),
            true,
            &Variables::new(),
        )
        .expect_err("filters");
        assert_eq!(e.code.code(), 9);
        let p = parse(
            bson!([{"$replaceWith": {"x": 1}}])
                .as_array()
                .expect("array"),
            false,
            &Variables::new(),
        )
        .expect("p");
        // A result without `_id` keeps the old one; a different `_id` is refused.
        assert!(apply(&p, &mut d).expect("keeps _id"));
        assert_eq!(d, doc! {"_id": 1, "x": 1});
        let p = parse(
            bson!([{"$set": {"_id": 2}}]).as_array().expect("array"),
            false,
            &Variables::new(),
        )
        .expect("p");
        assert_eq!(apply(&p, &mut d).expect_err("changes _id").code.code(), 66);
    }
}
