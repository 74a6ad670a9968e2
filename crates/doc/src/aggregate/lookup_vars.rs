//! Binding `$lookup`'s `let` variables into its pipeline. The expression evaluator has no
//! variable scopes yet, so each reference `"$$name"` or `"$$name.a.b"` is replaced, before the
//! pipeline is parsed, by `{$literal: <value>}` (or `"$$REMOVE"` when the value is missing),
//! only where MongoDB reads expressions:
//! - `$match`: inside `$expr` (also under `$and`/`$or`/`$nor`), never in plain query values;
//! - `$project $addFields $set $group $replaceRoot $replaceWith $sortByCount`: everywhere
//!   except under `$literal`;
//! - a nested `$lookup`: its `let` values, and its pipeline minus the names it rebinds;
//! - `$facet`: each sub-pipeline. Other stages hold no expressions.
//!
//! It also checks user variable names (16866-16868).

use bson::raw::{RawBsonRef, RawDocumentBuf};
use bson::{Bson, Document};

use super::execute::{to_raw, value_to_bson};
use crate::matcher::expr::Expr;
use crate::{ErrorCode, MongoError};

/// Variable values by name; `None` is a missing value.
type Vars = [(String, Option<Bson>)];

/// MongoDB's rule for user variable names: a lowercase ASCII letter or a non-ASCII character
/// first, then letters, digits, `_` or non-ASCII characters.
pub(crate) fn check_variable_name(name: &str) -> Result<(), MongoError> {
    let Some(first) = name.chars().next() else {
        return Err(MongoError::new(
            ErrorCode::Location16866,
            "empty variable names are not allowed",
        ));
    };
    if first.is_ascii() && !first.is_ascii_lowercase() {
        return Err(MongoError::new(
            ErrorCode::Location16867,
            format!("'{name}' starts with an invalid character for a user variable name"),
        ));
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || !c.is_ascii()))
    {
        return Err(MongoError::new(
            ErrorCode::Location16868,
            format!("'{name}' contains an invalid character for a variable name: '{bad}'"),
        ));
    }
    Ok(())
}

/// The pipeline with every reference to `vars` replaced by its value.
pub(crate) fn substitute_pipeline(
    stages: &[Document],
    vars: &Vars,
) -> Result<Vec<RawDocumentBuf>, MongoError> {
    stages
        .iter()
        .map(|stage| {
            let mut stage = stage.clone();
            in_stage(&mut stage, vars)?;
            to_raw(&stage)
        })
        .collect()
}

fn in_stage(stage: &mut Document, vars: &Vars) -> Result<(), MongoError> {
    if vars.is_empty() {
        return Ok(());
    }
    for (name, spec) in stage.iter_mut() {
        match name.as_str() {
            "$match" => {
                if let Bson::Document(filter) = spec {
                    in_filter(filter, vars)?;
                }
            }
            "$lookup" => {
                if let Bson::Document(lookup) = spec {
                    in_lookup(lookup, vars)?;
                }
            }
            "$facet" => {
                if let Bson::Document(facets) = spec {
                    for (_, pipeline) in facets.iter_mut() {
                        in_pipeline(pipeline, vars)?;
                    }
                }
            }
            "$sort" | "$limit" | "$skip" | "$count" | "$unset" | "$unwind" => {}
            _ => in_expression(spec, vars)?,
        }
    }
    Ok(())
}

fn in_pipeline(pipeline: &mut Bson, vars: &Vars) -> Result<(), MongoError> {
    if let Bson::Array(stages) = pipeline {
        for stage in stages {
            if let Bson::Document(stage) = stage {
                in_stage(stage, vars)?;
            }
        }
    }
    Ok(())
}

fn in_filter(filter: &mut Document, vars: &Vars) -> Result<(), MongoError> {
    for (key, value) in filter.iter_mut() {
        match (key.as_str(), value) {
            ("$expr", value) => in_expression(value, vars)?,
            ("$and" | "$or" | "$nor", Bson::Array(clauses)) => {
                for clause in clauses {
                    if let Bson::Document(clause) = clause {
                        in_filter(clause, vars)?;
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

fn in_lookup(lookup: &mut Document, vars: &Vars) -> Result<(), MongoError> {
    let mut rebound = Vec::new();
    if let Some(Bson::Document(lets)) = lookup.get_mut("let") {
        for (name, value) in lets.iter_mut() {
            rebound.push(name.clone());
            in_expression(value, vars)?;
        }
    }
    let inner: Vec<(String, Option<Bson>)> = vars
        .iter()
        .filter(|(name, _)| !rebound.contains(name))
        .cloned()
        .collect();
    if let Some(pipeline) = lookup.get_mut("pipeline") {
        in_pipeline(pipeline, &inner)?;
    }
    Ok(())
}

fn in_expression(value: &mut Bson, vars: &Vars) -> Result<(), MongoError> {
    match value {
        Bson::String(s) => {
            if let Some(replacement) = replacement(s, vars)? {
                *value = replacement;
            }
        }
        Bson::Document(d) if d.len() == 1 && d.contains_key("$literal") => {}
        Bson::Document(d) => {
            for (_, v) in d.iter_mut() {
                in_expression(v, vars)?;
            }
        }
        Bson::Array(items) => {
            for item in items {
                in_expression(item, vars)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// What replaces `reference` when it names one of `vars`.
fn replacement(reference: &str, vars: &Vars) -> Result<Option<Bson>, MongoError> {
    let Some(rest) = reference.strip_prefix("$$") else {
        return Ok(None);
    };
    let (name, path) = match rest.split_once('.') {
        Some((name, path)) => (name, Some(path)),
        None => (rest, None),
    };
    let Some((_, value)) = vars.iter().find(|(n, _)| n == name) else {
        return Ok(None);
    };
    let value = match (value, path) {
        (None, _) => None,
        (Some(v), None) => Some(v.clone()),
        (Some(v), Some(path)) => value_at(v, path)?,
    };
    Ok(Some(match value {
        None => Bson::String("$$REMOVE".to_owned()),
        Some(v) => {
            let mut literal = Document::new();
            literal.insert("$literal", v);
            Bson::Document(literal)
        }
    }))
}

/// `value.path` with expression semantics (arrays along the way are mapped).
fn value_at(value: &Bson, path: &str) -> Result<Option<Bson>, MongoError> {
    let mut holder = Document::new();
    holder.insert("v", value.clone());
    let holder = to_raw(&holder)?;
    let expr = Expr::parse(RawBsonRef::String(&format!("$v.{path}")))?;
    value_to_bson(&expr.evaluate(&holder)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn bound(stage: Document, vars: &Vars) -> Document {
        let out = substitute_pipeline(&[stage], vars).expect("binds");
        out[0].to_document().expect("decodes")
    }

    #[test]
    fn names() {
        let code = |n: &str| check_variable_name(n).unwrap_err().code.code();
        assert_eq!(code(""), 16866);
        assert_eq!(code("Abc"), 16867);
        assert_eq!(code("_a"), 16867);
        assert_eq!(code("a-b"), 16868);
        assert!(check_variable_name("order_qty2").is_ok());
        assert!(check_variable_name("été").is_ok());
    }

    #[test]
    fn only_expression_positions_are_bound() {
        let vars = vec![
            ("x".to_owned(), Some(Bson::Int32(5))),
            (
                "d".to_owned(),
                Some(Bson::Document(doc! {"a": [{"b": 1}, {"b": 2}]})),
            ),
            ("gone".to_owned(), None),
        ];
        assert_eq!(
            bound(
                doc! {"$match": {"s": "$$x", "$expr": {"$eq": ["$a", "$$x"]}}},
                &vars
            ),
            doc! {"$match": {"s": "$$x", "$expr": {"$eq": ["$a", {"$literal": 5}]}}}
        );
        assert_eq!(
            bound(
                doc! {"$project": {"p": "$$d.a.b", "q": {"$literal": "$$x"}, "r": "$$gone", "n": "$$NOW"}},
                &vars
            ),
            doc! {"$project": {"p": {"$literal": [1, 2]}, "q": {"$literal": "$$x"}, "r": "$$REMOVE", "n": "$$NOW"}}
        );
        assert_eq!(
            bound(
                doc! {"$lookup": {"from": "c", "let": {"x": "$$x"}, "pipeline": [{"$match": {"$expr": "$$x"}}], "as": "o"}},
                &vars
            ),
            doc! {"$lookup": {"from": "c", "let": {"x": {"$literal": 5}}, "pipeline": [{"$match": {"$expr": "$$x"}}], "as": "o"}}
        );
    }
}
