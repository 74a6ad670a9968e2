//! Stages that reshape each document: `$project` and `$unset` (through the find projection,
//! which MongoDB 7.0 shares with `$project`, minus the find-only forms) and
//! `$replaceRoot`/`$replaceWith` (an expression that must give a document, 40228).
//!
//! `$project` errors carry MongoDB's "Invalid $project :: caused by ::" prefix; an empty
//! specification is 51272, a positional `field.$` 31324, `$elemMatch`/`$slice` are expressions
//! in aggregation and so refused as unknown expressions (31325) until the evaluator has them.
//! `$unset` takes a path or a non-empty array of paths (31002, 31119, 31120).

use bson::raw::{RawBsonRef, RawDocument, RawDocumentBuf};
use bson::Bson;

use super::execute::{to_document, to_raw, value_to_bson};
use super::field_path::parse_field_path;
use super::project::Inclusion;
use super::simple::type_name;
use crate::matcher::expr::Expr;
use crate::matcher::path::bson_error;
use crate::projection::Projection;
use crate::variables::Variables;
use crate::{ErrorCode, MongoError};

/// `$project` or `$unset`: exclusions through the find projection, inclusions through
/// MongoDB's two-pass executor (`project`), which places computed fields as `$project` does.
#[derive(Debug, Clone)]
pub(crate) enum Project {
    Exclusion(Projection),
    Inclusion(Inclusion),
}

impl Project {
    pub(crate) fn apply(&self, doc: &RawDocument) -> Result<RawDocumentBuf, MongoError> {
        match self {
            Project::Exclusion(p) => p.apply(doc, None),
            Project::Inclusion(i) => to_raw(&i.apply(doc)?),
        }
    }
}

fn error(code: ErrorCode, message: impl Into<String>) -> MongoError {
    MongoError::new(code, message)
}

fn caused_by(stage: &str, e: MongoError) -> MongoError {
    MongoError::new(
        e.code,
        format!("Invalid {stage} :: caused by :: {}", e.message),
    )
}

pub(crate) fn parse_project(spec: RawBsonRef<'_>, vars: &Variables) -> Result<Project, MongoError> {
    let RawBsonRef::Document(d) = spec else {
        return Err(error(
            ErrorCode::Location15969,
            "$project specification must be an object",
        ));
    };
    if d.iter().next().is_none() {
        return Err(error(
            ErrorCode::Location51272,
            "Invalid $project :: caused by :: projection specification must have at least one \
             field",
        ));
    }
    refuse_find_only(d, "").map_err(|e| caused_by("$project", e))?;
    let projection =
        Projection::parse_aggregation(d, vars).map_err(|e| caused_by("$project", e))?;
    if projection.is_inclusion() {
        return Ok(Project::Inclusion(Inclusion::build(d, vars)?));
    }
    Ok(Project::Exclusion(projection))
}

/// Refuse the forms only `find` projections have, at any depth.
fn refuse_find_only(spec: &RawDocument, prefix: &str) -> Result<(), MongoError> {
    for item in spec.iter() {
        let (key, value) = item.map_err(bson_error)?;
        let full = if prefix.is_empty() {
            key.to_owned()
        } else {
            format!("{prefix}.{key}")
        };
        if full.ends_with(".$") || full.contains(".$.") {
            return Err(error(
                ErrorCode::Location31324,
                "Cannot use positional projection in aggregation projection",
            ));
        }
        let RawBsonRef::Document(sub) = value else {
            continue;
        };
        let first = sub.iter().next().transpose().map_err(bson_error)?;
        match first {
            // `$slice` is the aggregation expression here (`Projection::parse_aggregation`).
            Some(("$slice", _)) => {}
            Some((op @ "$elemMatch", _)) => {
                return Err(error(
                    ErrorCode::Location31325,
                    format!("Unknown expression {op}"),
                ))
            }
            Some((op, _)) if op.starts_with('$') => {}
            _ => refuse_find_only(sub, &full)?,
        }
    }
    Ok(())
}

/// `$unset: "a"` or `["a", "b.c"]`: an exclusion projection of those paths.
pub(crate) fn parse_unset(spec: RawBsonRef<'_>) -> Result<Project, MongoError> {
    let mut paths = Vec::new();
    match spec {
        RawBsonRef::String(p) => paths.push(p),
        RawBsonRef::Array(items) => {
            for item in items {
                match item.map_err(bson_error)? {
                    RawBsonRef::String(p) => paths.push(p),
                    _ => {
                        return Err(error(
                            ErrorCode::Location31120,
                            "$unset specification must be a string or an array containing only \
                             string values",
                        ))
                    }
                }
            }
            if paths.is_empty() {
                return Err(error(
                    ErrorCode::Location31119,
                    "$unset specification must be a string or an array with at least one field",
                ));
            }
        }
        _ => {
            return Err(error(
                ErrorCode::Location31002,
                "$unset specification must be a string or an array",
            ))
        }
    }
    let mut exclusion = RawDocumentBuf::new();
    for path in paths {
        parse_field_path(path)?;
        exclusion.append(path, 0_i32);
    }
    Projection::parse(&exclusion).map(Project::Exclusion)
}

/// `$replaceRoot: {newRoot: <expr>}` or `$replaceWith: <expr>`.
#[derive(Debug, Clone)]
pub(crate) struct ReplaceRoot {
    new_root: Expr,
}

pub(crate) fn parse_replace_root(
    spec: RawBsonRef<'_>,
    vars: &Variables,
) -> Result<ReplaceRoot, MongoError> {
    let RawBsonRef::Document(d) = spec else {
        return Err(error(
            ErrorCode::Location40229,
            format!(
                "expected an object as specification for $replaceRoot stage, got {}",
                type_name(spec)
            ),
        ));
    };
    let mut new_root = None;
    for item in d.iter() {
        let (key, value) = item.map_err(bson_error)?;
        if key != "newRoot" {
            return Err(error(
                ErrorCode::Location40230,
                format!(
                    "unrecognized option to $replaceRoot stage: {key}, only valid option is \
                     'newRoot'."
                ),
            ));
        }
        new_root = Some(Expr::parse_in(value, vars)?);
    }
    let new_root = new_root.ok_or_else(|| {
        error(
            ErrorCode::Location40231,
            "no newRoot specified for the $replaceRoot stage",
        )
    })?;
    Ok(ReplaceRoot { new_root })
}

pub(crate) fn parse_replace_with(
    spec: RawBsonRef<'_>,
    vars: &Variables,
) -> Result<ReplaceRoot, MongoError> {
    Ok(ReplaceRoot {
        new_root: Expr::parse_in(spec, vars)?,
    })
}

impl ReplaceRoot {
    pub(crate) fn apply(&self, doc: &RawDocument) -> Result<RawDocumentBuf, MongoError> {
        let value = self.new_root.evaluate(doc)?;
        if let Some(RawBsonRef::Document(d)) = value.as_raw() {
            return Ok(d.to_raw_document_buf());
        }
        let shown = match value_to_bson(&value)? {
            None => "MISSING".to_owned(),
            Some(v) => v.to_string(),
        };
        Err(error(
            ErrorCode::Location40228,
            format!(
                "'newRoot' expression must evaluate to an object, but resulting value was: \
                 {shown}. Type of resulting value: '{}'. Input document: {}",
                value.type_name(),
                Bson::Document(to_document(doc)?)
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn code_of<T: std::fmt::Debug>(
        parse: impl Fn(RawBsonRef<'_>) -> Result<T, MongoError>,
        spec: Bson,
    ) -> i32 {
        let d = RawDocumentBuf::from_document(&doc! {"s": spec}).expect("encodes");
        parse(d.get("s").expect("valid").expect("present"))
            .unwrap_err()
            .code
            .code()
    }

    #[test]
    fn project_parse_errors() {
        let parse_project = |s: RawBsonRef<'_>| parse_project(s, &Variables::new());
        assert_eq!(code_of(parse_project, Bson::Int32(1)), 15969);
        assert_eq!(code_of(parse_project, bson::bson!({})), 51272);
        assert_eq!(code_of(parse_project, bson::bson!({"a.$": 1})), 31324);
        // `$slice` in `$project` is the expression: one argument is its arity error.
        assert_eq!(
            code_of(parse_project, bson::bson!({"a": {"$slice": 1}})),
            28667
        );
        assert_eq!(
            code_of(parse_project, bson::bson!({"a": {"b": {"$elemMatch": {}}}})),
            31325
        );
        assert_eq!(code_of(parse_project, bson::bson!({"a": 1, "b": 0})), 31254);
    }

    #[test]
    fn unset_and_replace_root_parse_errors() {
        let parse_replace_root = |s: RawBsonRef<'_>| parse_replace_root(s, &Variables::new());
        assert_eq!(code_of(parse_unset, Bson::Int32(1)), 31002);
        assert_eq!(code_of(parse_unset, bson::bson!([])), 31119);
        assert_eq!(code_of(parse_unset, bson::bson!(["a", 1])), 31120);
        assert_eq!(code_of(parse_unset, Bson::String(String::new())), 40352);
        assert_eq!(code_of(parse_unset, Bson::String("$a".into())), 16410);
        assert_eq!(code_of(parse_replace_root, Bson::Int32(1)), 40229);
        assert_eq!(code_of(parse_replace_root, bson::bson!({"x": 1})), 40230);
        assert_eq!(code_of(parse_replace_root, bson::bson!({})), 40231);
    }
}
