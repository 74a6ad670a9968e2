//! Applying an inclusion `$project` the way MongoDB 7.0's projection executor does, in two
//! passes over a tree of the specification:
//! 1. included paths are copied in the input document's field order (into arrays element by
//!    element, nested arrays too; scalars under a path are dropped), `_id` unless `_id: 0`;
//! 2. computed fields are set in specification order: an existing output field keeps its
//!    position, a new one goes last; under a path, a document or array is entered, and a
//!    scalar or a missing field becomes a document of the computed fields; an expression
//!    giving "missing" sets nothing.
//!
//! The specification is validated by `Projection::parse` first (modes, collisions, codes);
//! this file only builds the tree and applies it. Exclusions go through `Projection` itself.

use bson::raw::{RawBsonRef, RawDocument};
use bson::{Bson, Document};

use super::execute::{raw_to_bson, value_to_bson};
use crate::matcher::element::true_value;
use crate::matcher::expr::Expr;
use crate::matcher::path::bson_error;
use crate::variables::Variables;
use crate::{ErrorCode, MongoError};

/// An inclusion projection, already validated.
#[derive(Debug, Clone)]
pub(crate) struct Inclusion {
    tree: Tree,
    id_included: bool,
}

#[derive(Debug, Clone, Default)]
struct Tree {
    children: Vec<(String, Node)>,
}

#[derive(Debug, Clone)]
enum Node {
    Include,
    Computed(Expr),
    Tree(Tree),
}

impl Tree {
    fn child(&self, key: &str) -> Option<&Node> {
        self.children.iter().find(|(n, _)| n == key).map(|(_, c)| c)
    }

    fn has_computed(&self) -> bool {
        self.children.iter().any(|(_, c)| match c {
            Node::Computed(_) => true,
            Node::Tree(t) => t.has_computed(),
            Node::Include => false,
        })
    }

    /// The subtree at `key`, created when absent; `None` when `key` already names a leaf
    /// (which `Projection::parse` refuses first, as a path collision).
    fn subtree(&mut self, key: &str) -> Option<&mut Tree> {
        let position = match self.children.iter().position(|(n, _)| n == key) {
            Some(p) => p,
            None => {
                self.children
                    .push((key.to_owned(), Node::Tree(Tree::default())));
                self.children.len() - 1
            }
        };
        match &mut self.children[position].1 {
            Node::Tree(t) => Some(t),
            _ => None,
        }
    }
}

fn is_flag(value: RawBsonRef<'_>) -> bool {
    matches!(
        value,
        RawBsonRef::Boolean(_)
            | RawBsonRef::Int32(_)
            | RawBsonRef::Int64(_)
            | RawBsonRef::Double(_)
            | RawBsonRef::Decimal128(_)
    )
}

impl Inclusion {
    /// Build the tree of a specification `Projection::parse` accepted as an inclusion.
    pub(crate) fn build(spec: &RawDocument, vars: &Variables) -> Result<Inclusion, MongoError> {
        let mut inclusion = Inclusion {
            tree: Tree::default(),
            id_included: true,
        };
        add_level(&mut inclusion, spec, &[], vars)?;
        Ok(inclusion)
    }

    pub(crate) fn apply(&self, root: &RawDocument) -> Result<Document, MongoError> {
        let mut out = project_document(&self.tree, root, Some(self.id_included))?;
        apply_expressions(&self.tree, root, &mut out)?;
        Ok(out)
    }
}

fn add_level(
    inclusion: &mut Inclusion,
    spec: &RawDocument,
    prefix: &[&str],
    vars: &Variables,
) -> Result<(), MongoError> {
    for item in spec.iter() {
        let (key, value) = item.map_err(bson_error)?;
        let mut path: Vec<&str> = prefix.to_vec();
        path.extend(key.split('.'));
        crate::depth::check_path_length(path.len())?;
        if let RawBsonRef::Document(sub) = value {
            let first = sub.iter().next().transpose().map_err(bson_error)?;
            if !first.is_some_and(|(k, _)| k.starts_with('$')) {
                add_level(inclusion, sub, &path, vars)?;
                continue;
            }
        }
        let node = match value {
            v if is_flag(v) && true_value(v) => Node::Include,
            v if is_flag(v) => {
                // Only `_id` can be excluded in an inclusion projection.
                inclusion.id_included = false;
                continue;
            }
            v => Node::Computed(Expr::parse_in(v, vars)?),
        };
        #[allow(clippy::expect_used, reason = "split() yields at least one part")]
        let (last, parents) = path.split_last().expect("split yields a part");
        let mut tree = &mut inclusion.tree;
        for part in parents {
            tree = tree.subtree(part).ok_or_else(|| {
                MongoError::new(
                    ErrorCode::Location31249,
                    format!("Path collision at {}", path.join(".")),
                )
            })?;
        }
        tree.children.push(((*last).to_owned(), node));
    }
    Ok(())
}

/// Pass 1 over one document level; `top_id` is `Some(included)` at the top level.
fn project_document(
    tree: &Tree,
    doc: &RawDocument,
    top_id: Option<bool>,
) -> Result<Document, MongoError> {
    let mut out = Document::new();
    for element in doc.iter_elements() {
        let element = element.map_err(bson_error)?;
        let key = element.key();
        let child = tree.child(key);
        if key == "_id" && child.is_none() && top_id == Some(true) {
            out.insert(key, raw_to_bson(element.value().map_err(bson_error)?)?);
            continue;
        }
        let value = match child {
            Some(Node::Include) => Some(raw_to_bson(element.value().map_err(bson_error)?)?),
            Some(Node::Tree(sub)) => project_value(sub, element.value().map_err(bson_error)?)?,
            Some(Node::Computed(_)) | None => None,
        };
        if let Some(v) = value {
            out.insert(key, v);
        }
    }
    Ok(out)
}

fn project_value(tree: &Tree, value: RawBsonRef<'_>) -> Result<Option<Bson>, MongoError> {
    Ok(match value {
        RawBsonRef::Document(d) => Some(Bson::Document(project_document(tree, d, None)?)),
        RawBsonRef::Array(items) => {
            let mut out = Vec::new();
            for item in items {
                if let Some(v) = project_value(tree, item.map_err(bson_error)?)? {
                    out.push(v);
                }
            }
            Some(Bson::Array(out))
        }
        _ => None,
    })
}

/// Pass 2: computed fields of one level into `out`.
fn apply_expressions(
    tree: &Tree,
    root: &RawDocument,
    out: &mut Document,
) -> Result<(), MongoError> {
    for (name, child) in &tree.children {
        match child {
            Node::Computed(expr) => {
                if let Some(v) = value_to_bson(&expr.evaluate(root)?)? {
                    out.insert(name.as_str(), v);
                }
            }
            Node::Tree(sub) if sub.has_computed() => match out.get_mut(name) {
                Some(slot) => {
                    let current = std::mem::take(slot);
                    *slot = expressions_in_value(sub, root, current)?;
                }
                None => {
                    let built = expressions_in_value(sub, root, Bson::Null)?;
                    out.insert(name.as_str(), built);
                }
            },
            Node::Tree(_) | Node::Include => {}
        }
    }
    Ok(())
}

fn expressions_in_value(tree: &Tree, root: &RawDocument, value: Bson) -> Result<Bson, MongoError> {
    match value {
        Bson::Document(mut d) => {
            apply_expressions(tree, root, &mut d)?;
            Ok(Bson::Document(d))
        }
        Bson::Array(items) => items
            .into_iter()
            .map(|item| expressions_in_value(tree, root, item))
            .collect::<Result<Vec<_>, _>>()
            .map(Bson::Array),
        _ => {
            let mut d = Document::new();
            apply_expressions(tree, root, &mut d)?;
            Ok(Bson::Document(d))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, RawDocumentBuf};

    fn project(spec: Document, input: Document) -> Document {
        let spec = RawDocumentBuf::from_document(&spec).expect("encodes");
        let input = RawDocumentBuf::from_document(&input).expect("encodes");
        Inclusion::build(&spec, &Variables::new())
            .expect("builds")
            .apply(&input)
            .expect("applies")
    }

    #[test]
    fn includes_in_input_order_then_computes_in_spec_order() {
        assert_eq!(
            project(
                doc! {"b": 1, "x": "$a", "a": 1},
                doc! {"a": 1, "b": 2, "_id": 0, "c": 3}
            ),
            doc! {"a": 1, "b": 2, "_id": 0, "x": 1}
        );
        assert_eq!(
            project(doc! {"_id": 0, "a": 1}, doc! {"_id": 1, "a": 2}),
            doc! {"a": 2}
        );
    }

    #[test]
    fn computed_paths_replace_scalars_and_enter_arrays() {
        assert_eq!(
            project(
                doc! {"d": {"n": "$n", "d": "$d"}},
                doc! {"_id": 1, "n": "x", "d": 5}
            ),
            doc! {"_id": 1, "d": {"n": "x", "d": 5}}
        );
        assert_eq!(
            project(
                doc! {"a.b": 1, "a.c": {"$literal": 0}},
                doc! {"a": [{"b": 1, "z": 1}, 7, [{"b": 2}]]}
            ),
            doc! {"a": [{"b": 1, "c": 0}, [{"b": 2, "c": 0}]]}
        );
        assert_eq!(
            project(
                doc! {"a.c": "$$REMOVE", "k": "$missing"},
                doc! {"_id": 1, "a": 3}
            ),
            doc! {"_id": 1, "a": {}}
        );
    }
}
