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
mod parse;

use bson::raw::{RawDocument, RawDocumentBuf};

use crate::matcher::expr::Expr;
use crate::matcher::Matcher;
use crate::variables::Variables;
use crate::MongoError;

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
    /// The child for a field name given as bytes (a raw element's key, not yet checked as
    /// UTF-8: only the fields the projection names are).
    pub(crate) fn child_bytes(&self, key: &[u8]) -> Option<&Child> {
        self.children
            .iter()
            .find(|(name, _)| name.as_bytes() == key)
            .map(|(_, c)| c)
    }

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

impl Projection {
    /// Parse and validate a find projection, for a command with no `let` variables.
    pub fn parse(spec: &RawDocument) -> Result<Projection, MongoError> {
        Projection::parse_with(spec, &Variables::new())
    }

    /// Parse and validate a find projection whose expressions read `vars`.
    pub fn parse_with(spec: &RawDocument, vars: &Variables) -> Result<Projection, MongoError> {
        Projection::parse_mode(spec, vars, false)
    }

    /// `$project`'s reading of the same spec: `$slice` is the aggregation expression.
    pub(crate) fn parse_aggregation(
        spec: &RawDocument,
        vars: &Variables,
    ) -> Result<Projection, MongoError> {
        Projection::parse_mode(spec, vars, true)
    }

    fn parse_mode(
        spec: &RawDocument,
        vars: &Variables,
        aggregation: bool,
    ) -> Result<Projection, MongoError> {
        let parsed = parse::parse_spec(spec, vars, aggregation)?;
        Ok(Projection {
            tree: parsed.tree,
            inclusion: parsed.inclusion,
            id_included: parsed.id_included,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error_code::ErrorCode;
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
