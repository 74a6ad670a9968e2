//! `$addFields` and its alias `$set`: new or replaced fields computed by expressions against
//! the input document, following MongoDB 7.0's projection executor:
//! - dotted names and nested objects (`{"a.b": e}`, `{a: {b: e}}`) set fields inside `a`,
//!   keeping its other fields; an empty object is the value `{}`; an operator object
//!   (`{a: {$add: ...}}`) is an expression;
//! - under a path, an array is entered element by element (nested arrays too), and a scalar or
//!   a missing field is replaced by a document of the new fields;
//! - an expression giving "missing" (`$$REMOVE`, an absent path) removes the field;
//! - an existing field keeps its position, a new one goes last.
//!
//! Parse errors (40272 not an object, 40177 empty, 40176 conflicting paths, 40181, 40183,
//! field path codes, expression codes) carry MongoDB's "Invalid $addFields :: caused by ::".

use bson::raw::{RawBsonRef, RawDocument, RawDocumentBuf};
use bson::{Bson, Document};

use super::execute::{to_document, to_raw, value_to_bson};
use super::field_path::{parse_field_path, validate_field_name};
use super::simple::type_name;
use crate::matcher::expr::Expr;
use crate::matcher::path::bson_error;
use crate::variables::Variables;
use crate::{ErrorCode, MongoError};

/// A parsed `$addFields`/`$set`.
#[derive(Debug, Clone)]
pub(crate) struct SetFields {
    tree: Tree,
}

#[derive(Debug, Clone, Default)]
struct Tree {
    children: Vec<(String, Node)>,
}

#[derive(Debug, Clone)]
enum Node {
    Expr(Expr),
    Tree(Tree),
}

fn error(code: ErrorCode, message: impl Into<String>) -> MongoError {
    MongoError::new(code, message)
}

pub(crate) fn parse(
    stage: &str,
    spec: RawBsonRef<'_>,
    vars: &Variables,
) -> Result<SetFields, MongoError> {
    let RawBsonRef::Document(d) = spec else {
        return Err(error(
            ErrorCode::Location40272,
            format!(
                "{stage} specification stage must be an object, got {}",
                type_name(spec)
            ),
        ));
    };
    parse_spec(d, vars).map_err(|e| {
        MongoError::new(
            e.code,
            format!("Invalid {stage} :: caused by :: {}", e.message),
        )
    })
}

fn parse_spec(spec: &RawDocument, vars: &Variables) -> Result<SetFields, MongoError> {
    let mut parser = Parser {
        spec,
        vars,
        tree: Tree::default(),
        leaves: Vec::new(),
    };
    for item in spec.iter() {
        let (key, value) = item.map_err(bson_error)?;
        parser.element(parse_field_path(key)?, value)?;
    }
    if parser.leaves.is_empty() {
        return Err(error(
            ErrorCode::Location40177,
            "specification must have at least one field",
        ));
    }
    Ok(SetFields { tree: parser.tree })
}

struct Parser<'s> {
    spec: &'s RawDocument,
    vars: &'s Variables,
    tree: Tree,
    /// Every path given a value so far, to refuse overlapping ones (40176).
    leaves: Vec<String>,
}

impl Parser<'_> {
    fn element(&mut self, path: Vec<String>, value: RawBsonRef<'_>) -> Result<(), MongoError> {
        crate::depth::check_path_length(path.len())?;
        let RawBsonRef::Document(sub) = value else {
            return self.leaf(path, Expr::parse_in(value, self.vars)?);
        };
        let fields: Vec<(&str, RawBsonRef<'_>)> =
            sub.iter().collect::<Result<_, _>>().map_err(bson_error)?;
        if fields.iter().any(|(k, _)| k.starts_with('$')) {
            if fields.len() != 1 {
                return Err(error(
                    ErrorCode::Location40181,
                    format!(
                        "an expression specification must contain exactly one field, the name \
                         of the expression. Found {} fields in {}, while parsing object {}",
                        fields.len(),
                        show(sub),
                        show(self.spec)
                    ),
                ));
            }
            return self.leaf(path, Expr::parse_in(value, self.vars)?);
        }
        if fields.is_empty() {
            return self.leaf(path, Expr::Object(Vec::new()));
        }
        for (name, inner) in fields {
            if name.contains('.') {
                return Err(error(
                    ErrorCode::Location40183,
                    format!(
                        "cannot use dotted field name '{name}' in a sub object: {}",
                        show(self.spec)
                    ),
                ));
            }
            validate_field_name(name)?;
            let mut longer = path.clone();
            longer.push(name.to_owned());
            self.element(longer, inner)?;
        }
        Ok(())
    }

    fn leaf(&mut self, path: Vec<String>, expr: Expr) -> Result<(), MongoError> {
        let dotted = path.join(".");
        let overlaps = |other: &String| {
            let (short, long) = if other.len() <= dotted.len() {
                (other.as_str(), dotted.as_str())
            } else {
                (dotted.as_str(), other.as_str())
            };
            long.strip_prefix(short)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
        };
        if let Some(other) = self.leaves.iter().find(|o| overlaps(o)) {
            return Err(error(
                ErrorCode::Location40176,
                format!(
                    "specification contains two conflicting paths. Cannot specify both '{dotted}' \
                     and '{other}': {}",
                    show(self.spec)
                ),
            ));
        }
        self.leaves.push(dotted);
        insert(&mut self.tree, &path, expr);
        Ok(())
    }
}

fn show(d: &RawDocument) -> String {
    to_document(d).map_or_else(|_| "<malformed>".to_owned(), |d| d.to_string())
}

/// Add `expr` at `path`; overlapping paths were refused before, so the way is clear.
fn insert(tree: &mut Tree, path: &[String], expr: Expr) {
    #[allow(
        clippy::expect_used,
        reason = "field paths are never empty (parse refuses empty ones)"
    )]
    let (first, rest) = path.split_first().expect("field paths are never empty");
    if rest.is_empty() {
        tree.children.push((first.clone(), Node::Expr(expr)));
        return;
    }
    let position = match tree.children.iter().position(|(n, _)| n == first) {
        Some(p) => p,
        None => {
            tree.children
                .push((first.clone(), Node::Tree(Tree::default())));
            tree.children.len() - 1
        }
    };
    if let Node::Tree(sub) = &mut tree.children[position].1 {
        insert(sub, rest, expr);
    }
}

impl SetFields {
    pub(crate) fn apply(&self, root: &RawDocument) -> Result<RawDocumentBuf, MongoError> {
        let mut out = to_document(root)?;
        apply_tree(&self.tree, root, &mut out)?;
        to_raw(&out)
    }
}

fn apply_tree(tree: &Tree, root: &RawDocument, out: &mut Document) -> Result<(), MongoError> {
    for (name, node) in &tree.children {
        match node {
            Node::Expr(expr) => match value_to_bson(&expr.evaluate(root)?)? {
                Some(v) => {
                    out.insert(name.as_str(), v);
                }
                None => {
                    out.remove(name);
                }
            },
            Node::Tree(sub) => match out.get_mut(name) {
                Some(slot) => {
                    let current = std::mem::take(slot);
                    *slot = apply_to_value(sub, root, Some(current))?;
                }
                None => {
                    let built = apply_to_value(sub, root, None)?;
                    out.insert(name.as_str(), built);
                }
            },
        }
    }
    Ok(())
}

/// One computed value placed at `path` as `{$addFields: {"<path>": <value>}}` places it
/// (`$setWindowFields` outputs go through mongod's add-fields executor): through embedded
/// documents and, element by element, arrays; a scalar or a missing field on the way becomes a
/// document; a missing value (`None`) removes the field.
pub(crate) fn set_computed(out: &mut Document, path: &[String], value: Option<&Bson>) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    if rest.is_empty() {
        match value {
            Some(v) => {
                out.insert(first.as_str(), v.clone());
            }
            None => {
                out.remove(first);
            }
        }
        return;
    }
    match out.get_mut(first) {
        Some(slot) => {
            let current = std::mem::take(slot);
            *slot = computed_in(Some(current), rest, value);
        }
        None => {
            let built = computed_in(None, rest, value);
            out.insert(first.as_str(), built);
        }
    }
}

fn computed_in(current: Option<Bson>, path: &[String], value: Option<&Bson>) -> Bson {
    match current {
        Some(Bson::Document(mut d)) => {
            set_computed(&mut d, path, value);
            Bson::Document(d)
        }
        Some(Bson::Array(items)) => Bson::Array(
            items
                .into_iter()
                .map(|item| computed_in(Some(item), path, value))
                .collect(),
        ),
        _ => {
            let mut d = Document::new();
            set_computed(&mut d, path, value);
            Bson::Document(d)
        }
    }
}

fn apply_to_value(
    tree: &Tree,
    root: &RawDocument,
    value: Option<Bson>,
) -> Result<Bson, MongoError> {
    match value {
        Some(Bson::Document(mut d)) => {
            apply_tree(tree, root, &mut d)?;
            Ok(Bson::Document(d))
        }
        Some(Bson::Array(items)) => items
            .into_iter()
            .map(|item| apply_to_value(tree, root, Some(item)))
            .collect::<Result<Vec<_>, _>>()
            .map(Bson::Array),
        _ => {
            let mut d = Document::new();
            apply_tree(tree, root, &mut d)?;
            Ok(Bson::Document(d))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn run(spec: Document, input: Document) -> Document {
        let d = RawDocumentBuf::from_document(&doc! {"s": spec}).expect("encodes");
        let parsed = parse(
            "$addFields",
            d.get("s").expect("valid").expect("present"),
            &Variables::new(),
        )
        .expect("parses");
        let raw = RawDocumentBuf::from_document(&input).expect("encodes");
        to_document(&parsed.apply(&raw).expect("applies")).expect("decodes")
    }

    fn code(spec: Bson) -> i32 {
        let d = RawDocumentBuf::from_document(&doc! {"s": spec}).expect("encodes");
        parse(
            "$addFields",
            d.get("s").expect("valid").expect("present"),
            &Variables::new(),
        )
        .unwrap_err()
        .code
        .code()
    }

    #[test]
    fn parse_errors() {
        assert_eq!(code(Bson::Int32(1)), 40272);
        assert_eq!(code(bson::bson!({})), 40177);
        assert_eq!(code(bson::bson!({"a": 1, "a.b": 2})), 40176);
        assert_eq!(code(bson::bson!({"a": {"b": 1}, "a.b": 2})), 40176);
        assert_eq!(code(bson::bson!({"a": {"$add": [1], "b": 1}})), 40181);
        assert_eq!(code(bson::bson!({"a": {"b.c": 1}})), 40183);
        assert_eq!(code(bson::bson!({"$a": 1})), 16410);
        assert_eq!(code(bson::bson!({"a": {"$nope": 1}})), 168);
    }

    #[test]
    fn a_computed_value_lands_where_add_fields_puts_it() {
        let path = vec!["a".to_owned(), "b".to_owned()];
        let input = doc! {"a": [{"c": 1}, 5, [{"d": 1}]], "z": 0};
        let mut out = input.clone();
        set_computed(&mut out, &path, Some(&Bson::Int32(1)));
        assert_eq!(out, run(doc! {"a.b": 1}, input));
        let mut out = doc! {"a": {"b": 1, "c": 2}};
        set_computed(&mut out, &path, None);
        assert_eq!(out, doc! {"a": {"c": 2}});
        let mut out = doc! {"k": 1};
        set_computed(&mut out, &path, None);
        assert_eq!(out, doc! {"k": 1, "a": {}});
    }

    #[test]
    fn nested_paths_through_arrays_and_scalars() {
        assert_eq!(
            run(
                doc! {"a.b": 1},
                doc! {"a": [{"c": 1}, 5, [{"d": 1}]], "z": 0}
            ),
            doc! {"a": [{"c": 1, "b": 1}, {"b": 1}, [{"d": 1, "b": 1}]], "z": 0}
        );
        assert_eq!(
            run(doc! {"a": {"b": "$z"}}, doc! {"z": 2}),
            doc! {"z": 2, "a": {"b": 2}}
        );
        assert_eq!(run(doc! {"a": {}}, doc! {"a": {"x": 1}}), doc! {"a": {}});
        assert_eq!(
            run(
                doc! {"z": "$$REMOVE", "n": "$missing"},
                doc! {"z": 1, "k": 2}
            ),
            doc! {"k": 2}
        );
    }
}
