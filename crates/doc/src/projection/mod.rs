//! MongoDB 7.0 find projections over raw BSON: `Projection::parse` validates a projection
//! document into a path tree (with MongoDB's error codes for mixed inclusion/exclusion and path
//! collisions); `Projection::apply` (in `apply`) builds the projected document.
//!
//! Forms: inclusion (`{a: 1}`), exclusion (`{a: 0}`), the `_id` rules (included unless
//! `_id: 0`, which any projection may say), nested paths (`"a.b"` or `{a: {b: 1}}`), `$slice`
//! (`n` or `[skip, n]`, allowed with either mode and alone meaning "all other fields"),
//! `$elemMatch` (top-level fields only), the positional `field.$` (fed the index the matcher
//! reported), and computed fields (literals, `"$path"`, expressions, evaluated by
//! `matcher::expr`). It knows no storage and no wire protocol.

mod apply;

use bson::raw::{RawBsonRef, RawDocument, RawDocumentBuf};

use crate::error_code::{ErrorCode, MongoError};
use crate::matcher::element::true_value;
use crate::matcher::expr::Expr;
use crate::matcher::path::bson_error;
use crate::matcher::{is_operator_document, Matcher};

/// A parsed find projection.
#[derive(Debug, Clone)]
pub struct Projection {
    tree: Tree,
    inclusion: bool,
    /// Whether `_id` is kept (true unless `_id: 0`).
    id_included: bool,
}

/// One level of the projection's path tree, children in spec order.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tree {
    children: Vec<(String, Child)>,
}

#[derive(Debug, Clone)]
pub(crate) enum Child {
    Node(Tree),
    Leaf(Leaf),
}

#[derive(Debug, Clone)]
pub(crate) enum Leaf {
    Include,
    Exclude,
    Slice {
        skip: Option<i64>,
        limit: i64,
    },
    /// `$elemMatch` on a top-level field: the matcher is `{field: {$elemMatch: ...}}`.
    ElemMatch(Box<Matcher>),
    Positional,
    Computed(Expr),
}

impl Tree {
    pub(crate) fn child(&self, key: &str) -> Option<&Child> {
        self.children
            .iter()
            .find(|(name, _)| name == key)
            .map(|(_, c)| c)
    }

    fn has_computed(&self) -> bool {
        self.children.iter().any(|(_, c)| match c {
            Child::Leaf(Leaf::Computed(_)) => true,
            Child::Node(t) => t.has_computed(),
            Child::Leaf(_) => false,
        })
    }
}

fn location(code: ErrorCode, message: impl Into<String>) -> MongoError {
    MongoError::new(code, message)
}

/// What parsing has learnt so far.
#[derive(Default)]
struct ParseState {
    tree: Tree,
    /// `Some(true)` once a non-`_id` inclusion (or inclusion-like form) was seen.
    inclusion: Option<bool>,
    id: Option<bool>,
    positional: bool,
    elem_match: bool,
}

impl Projection {
    /// Parse and validate a find projection.
    pub fn parse(spec: &RawDocument) -> Result<Projection, MongoError> {
        let mut state = ParseState::default();
        parse_level(spec, "", &mut state)?;
        let inclusion = match state.inclusion {
            Some(mode) => mode,
            None => state.id == Some(true),
        };
        Ok(Projection {
            tree: state.tree,
            inclusion,
            id_included: state.id != Some(false),
        })
    }

    /// Whether this is an inclusion projection (only named fields, plus `_id`, come out).
    pub fn is_inclusion(&self) -> bool {
        self.inclusion
    }

    /// Project `doc`. `matched_index` is the array index the matcher reported, for `field.$`.
    pub fn apply(
        &self,
        doc: &RawDocument,
        matched_index: Option<usize>,
    ) -> Result<RawDocumentBuf, MongoError> {
        let ctx = apply::Context {
            root: doc,
            matched_index,
            id_included: self.id_included,
        };
        if self.inclusion {
            apply::include_document(&self.tree, doc, true, &ctx)
        } else {
            apply::exclude_document(&self.tree, doc, true, &ctx)
        }
    }
}

fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_owned()
    } else {
        format!("{prefix}.{key}")
    }
}

fn parse_level(spec: &RawDocument, prefix: &str, state: &mut ParseState) -> Result<(), MongoError> {
    for item in spec.iter() {
        let (key, value) = item.map_err(bson_error)?;
        let full = join(prefix, key);
        parse_entry(&full, value, state)?;
    }
    Ok(())
}

fn parse_entry(
    full: &str,
    value: RawBsonRef<'_>,
    state: &mut ParseState,
) -> Result<(), MongoError> {
    if let Some(path) = full.strip_suffix(".$") {
        return parse_positional(path, value, state);
    }
    match value {
        RawBsonRef::Boolean(_)
        | RawBsonRef::Int32(_)
        | RawBsonRef::Int64(_)
        | RawBsonRef::Double(_)
        | RawBsonRef::Decimal128(_) => parse_flag(full, true_value(value), state),
        RawBsonRef::Document(d) if d.is_empty() => Err(location(
            ErrorCode::Location51270,
            format!(
                "An empty sub-projection is not a valid value. Found empty object at path {full}"
            ),
        )),
        RawBsonRef::Document(d) if is_operator_document(d)? => {
            parse_operator(full, value, d, state)
        }
        RawBsonRef::Document(d) => parse_level(d, full, state),
        _ => parse_computed(full, value, state),
    }
}

/// `field: 1` / `field: 0` (numbers and booleans).
fn parse_flag(full: &str, include: bool, state: &mut ParseState) -> Result<(), MongoError> {
    let leaf = if include {
        Leaf::Include
    } else {
        Leaf::Exclude
    };
    if full == "_id" {
        state.id = Some(include);
    } else {
        set_mode(full, include, state)?;
    }
    insert(&mut state.tree, full, leaf)
}

fn set_mode(full: &str, include: bool, state: &mut ParseState) -> Result<(), MongoError> {
    match (state.inclusion, include) {
        (Some(true), false) => Err(location(
            ErrorCode::Location31254,
            format!("Cannot do exclusion on field {full} in inclusion projection"),
        )),
        (Some(false), true) => Err(location(
            ErrorCode::Location31253,
            format!("Cannot do inclusion on field {full} in exclusion projection"),
        )),
        _ => {
            state.inclusion = Some(include);
            Ok(())
        }
    }
}

fn parse_computed(
    full: &str,
    value: RawBsonRef<'_>,
    state: &mut ParseState,
) -> Result<(), MongoError> {
    if state.inclusion == Some(false) {
        return Err(location(
            ErrorCode::Location31310,
            "Cannot use an expression other than $meta in exclusion projection",
        ));
    }
    state.inclusion = Some(true);
    insert(&mut state.tree, full, Leaf::Computed(Expr::parse(value)?))
}

fn parse_operator(
    full: &str,
    value: RawBsonRef<'_>,
    spec: &RawDocument,
    state: &mut ParseState,
) -> Result<(), MongoError> {
    let (name, arg) = spec
        .iter()
        .next()
        .expect("operator documents are non-empty")
        .map_err(bson_error)?;
    match name {
        "$slice" => {
            let leaf = parse_slice(arg)?;
            insert(&mut state.tree, full, leaf)
        }
        "$elemMatch" => parse_elem_match(full, arg, state),
        _ => parse_computed(full, value, state),
    }
}

fn parse_slice(arg: RawBsonRef<'_>) -> Result<Leaf, MongoError> {
    let bad = || {
        location(
            ErrorCode::Location28667,
            "$slice only supports numbers and [skip, limit] arrays",
        )
    };
    if let Some(limit) = integer(arg) {
        return Ok(Leaf::Slice { skip: None, limit });
    }
    let RawBsonRef::Array(items) = arg else {
        return Err(bad());
    };
    let items: Vec<RawBsonRef<'_>> = items
        .into_iter()
        .collect::<Result<_, _>>()
        .map_err(bson_error)?;
    let [skip, limit] = items[..] else {
        return Err(bad());
    };
    let (Some(skip), Some(limit)) = (integer(skip), integer(limit)) else {
        return Err(bad());
    };
    if limit <= 0 {
        return Err(location(
            ErrorCode::Location28724,
            "$slice limit must be positive",
        ));
    }
    Ok(Leaf::Slice {
        skip: Some(skip),
        limit,
    })
}

/// A number as an integer (doubles truncated toward zero, clamped to 32 bits like MongoDB).
fn integer(v: RawBsonRef<'_>) -> Option<i64> {
    let wide = match v {
        RawBsonRef::Int32(i) => i64::from(i),
        RawBsonRef::Int64(i) => i,
        RawBsonRef::Double(d) if d.is_finite() => d.trunc() as i64,
        _ => return None,
    };
    Some(wide.clamp(i64::from(i32::MIN), i64::from(i32::MAX)))
}

fn parse_elem_match(
    full: &str,
    arg: RawBsonRef<'_>,
    state: &mut ParseState,
) -> Result<(), MongoError> {
    if full.contains('.') {
        return Err(location(
            ErrorCode::Location31275,
            "Cannot use $elemMatch projection on a nested field.",
        ));
    }
    if state.positional {
        return Err(location(
            ErrorCode::Location31256,
            "Cannot specify positional operator and $elemMatch.",
        ));
    }
    let mut filter = RawDocumentBuf::new();
    let mut clause = RawDocumentBuf::new();
    clause.append_ref("$elemMatch", arg);
    filter.append_ref(full, RawBsonRef::Document(&clause));
    let matcher = Matcher::parse(&filter)?;
    state.elem_match = true;
    set_mode(full, true, state)?;
    insert(&mut state.tree, full, Leaf::ElemMatch(Box::new(matcher)))
}

fn parse_positional(
    path: &str,
    value: RawBsonRef<'_>,
    state: &mut ParseState,
) -> Result<(), MongoError> {
    if state.positional {
        return Err(location(
            ErrorCode::Location31276,
            "Cannot specify more than one positional projection per query.",
        ));
    }
    if state.elem_match {
        return Err(location(
            ErrorCode::Location31256,
            "Cannot specify positional operator and $elemMatch.",
        ));
    }
    if !true_value(value) {
        return Err(location(
            ErrorCode::Location31254,
            format!("Cannot do exclusion on field {path}.$ in inclusion projection"),
        ));
    }
    state.positional = true;
    set_mode(path, true, state)?;
    insert(&mut state.tree, path, Leaf::Positional)
}

/// Add `leaf` at the dotted `full` path, refusing paths that overlap an existing one.
fn insert(tree: &mut Tree, full: &str, leaf: Leaf) -> Result<(), MongoError> {
    let parts: Vec<&str> = full.split('.').collect();
    let (last, parents) = parts.split_last().expect("split yields at least one part");
    let mut node = tree;
    for (i, part) in parents.iter().enumerate() {
        let position = match node.children.iter().position(|(n, _)| n == part) {
            Some(p) => p,
            None => {
                node.children
                    .push(((*part).to_owned(), Child::Node(Tree::default())));
                node.children.len() - 1
            }
        };
        node = match &mut node.children[position].1 {
            Child::Node(sub) => sub,
            Child::Leaf(_) => {
                return Err(location(
                    ErrorCode::Location31249,
                    format!(
                        "Path collision at {full} remaining portion {}",
                        parts[i + 1..].join(".")
                    ),
                ))
            }
        };
    }
    if node.children.iter().any(|(n, _)| n == last) {
        return Err(location(
            ErrorCode::Location31250,
            format!("Path collision at {full}"),
        ));
    }
    node.children.push(((*last).to_owned(), Child::Leaf(leaf)));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn parse(spec: bson::Document) -> Result<Projection, MongoError> {
        Projection::parse(&RawDocumentBuf::from_document(&spec).expect("encodes"))
    }

    #[test]
    fn modes() {
        assert!(parse(doc! {"a": 1}).expect("valid").is_inclusion());
        assert!(!parse(doc! {"a": 0}).expect("valid").is_inclusion());
        assert!(parse(doc! {"a": 1, "_id": 0})
            .expect("valid")
            .is_inclusion());
        assert!(!parse(doc! {"_id": 0}).expect("valid").is_inclusion());
        assert!(!parse(doc! {"a": {"$slice": 2}})
            .expect("valid")
            .is_inclusion());
        assert!(parse(doc! {"a": "$b"}).expect("valid").is_inclusion());
    }

    #[test]
    fn mixed_modes_are_refused() {
        let e = parse(doc! {"a": 1, "b": 0}).unwrap_err();
        assert_eq!(e.code, ErrorCode::Location31254);
        assert_eq!(
            e.message,
            "Cannot do exclusion on field b in inclusion projection"
        );
        let e = parse(doc! {"a": 0, "b.c": 1}).unwrap_err();
        assert_eq!(
            e.message,
            "Cannot do inclusion on field b.c in exclusion projection"
        );
    }

    #[test]
    fn path_collisions() {
        let e = parse(doc! {"a": 1, "a.b": 1}).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                ErrorCode::Location31249,
                "Path collision at a.b remaining portion b"
            )
        );
        let e = parse(doc! {"a.b": 1, "a": 1}).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (ErrorCode::Location31250, "Path collision at a")
        );
    }
}
