//! MongoDB 7.0's query filter matcher over raw BSON: `Matcher::parse` validates a filter once
//! (every operator and argument error is raised there, with MongoDB's code and message) into a
//! tree of `Node`s; `Matcher::matches` then evaluates it against documents read in place.
//!
//! This file owns the tree, the top-level and per-field parse dispatch and the evaluation
//! driver. Each operator family lives in its own file (`comparison`, `logical`, `element`,
//! `evaluation`, `array`) and `path` owns dotted-path lookup. It knows no storage and no wire.

pub mod array;
pub mod as_sent;
mod as_sent_ops;
mod collated;
pub mod comparison;
pub mod element;
pub mod evaluation;
pub mod expr;
mod expr_accumulate;
pub mod expr_arith;
mod expr_arity;
mod expr_array_forms;
mod expr_array_more;
pub mod expr_arrays;
pub mod expr_convert;
pub(crate) mod expr_date_arith;
mod expr_date_format;
mod expr_date_parts;
pub(crate) mod expr_date_zone;
mod expr_dates;
mod expr_decimal;
mod expr_fields;
mod expr_format;
mod expr_math;
pub mod expr_objects;
pub mod expr_ops;
pub mod expr_regex;
mod expr_sets;
pub mod expr_strings;
mod expr_switch;
mod expr_trig;
mod expr_vars;
pub mod logical;
pub mod path;
#[cfg(test)]
mod test_support;

use bson::raw::{RawBsonRef, RawDocument};

use crate::variables::Variables;
use crate::{ErrorCode, MongoError};
use path::{visit_path, Candidate, FieldPath};

/// A parsed filter, ready to match documents.
#[derive(Debug, Clone)]
pub struct Matcher {
    root: Node,
}

/// One node of a parsed filter.
#[derive(Debug, Clone)]
pub(crate) enum Node {
    And(Vec<Node>),
    Or(Vec<Node>),
    Nor(Vec<Node>),
    Not(Box<Node>),
    /// A predicate on the values found at a path.
    Leaf {
        path: FieldPath,
        pred: Pred,
    },
    /// `$expr`: an aggregation expression over the whole document.
    Expr(expr::Expr),
    /// `$alwaysTrue` / `$alwaysFalse`, and `$all: []` (never matches).
    Always(bool),
}

/// A predicate on one candidate value (`None` = missing).
#[derive(Debug, Clone)]
pub(crate) enum Pred {
    Compare(comparison::Compare),
    In(comparison::InList),
    Exists,
    Type(element::TypeSet),
    Regex(evaluation::RegexPred),
    Mod(evaluation::ModPred),
    Size(i64),
    ElemMatchValue(Vec<Node>),
    ElemMatchObject(Box<Node>),
}

impl Pred {
    /// Whether an array at the end of the path is also tried element by element.
    fn expands_leaf_arrays(&self) -> bool {
        !matches!(
            self,
            Pred::Exists | Pred::Size(_) | Pred::ElemMatchValue(_) | Pred::ElemMatchObject(_)
        )
    }

    /// Test one candidate. `position` receives the matching element's index for `$elemMatch`.
    fn test(
        &self,
        value: Option<RawBsonRef<'_>>,
        position: &mut Option<usize>,
    ) -> Result<bool, MongoError> {
        match self {
            Pred::Compare(c) => c.test(value),
            Pred::In(list) => list.test(value),
            Pred::Exists => Ok(value.is_some()),
            Pred::Type(types) => Ok(value.is_some_and(|v| types.contains(v))),
            Pred::Regex(re) => re.test(value),
            Pred::Mod(m) => Ok(m.test(value)),
            Pred::Size(n) => array::size_matches(*n, value),
            Pred::ElemMatchValue(preds) => array::elem_match_value(preds, value, position),
            Pred::ElemMatchObject(node) => array::elem_match_object(node, value, position),
        }
    }
}

impl Matcher {
    /// Parse and validate a filter document, for a command with no `let` variables
    /// (`$expr` reads `$$NOW` as of now).
    pub fn parse(filter: &RawDocument) -> Result<Matcher, MongoError> {
        Matcher::parse_with(filter, &Variables::new())
    }

    /// Parse and validate a filter whose `$expr` reads `vars` (a command's `let` variables,
    /// `$$NOW`, `$$CLUSTER_TIME`).
    /// Under the collation `vars` carries, its comparisons compare strings by it.
    pub fn parse_with(filter: &RawDocument, vars: &Variables) -> Result<Matcher, MongoError> {
        let mut root = parse_filter(filter, Level::Top, vars)?;
        if let Some(c) = vars.collation() {
            collated::collate_node(&mut root, c);
        }
        Ok(Matcher { root })
    }

    /// Whether `doc` matches. Errors are malformed BSON and `$expr` evaluation errors.
    pub fn matches(&self, doc: &RawDocument) -> Result<bool, MongoError> {
        let mut position = None;
        self.root.eval(doc, &mut position)
    }

    /// Whether `doc` matches, and the array index the positional projection `$` should use:
    /// the index, in the first array the matching path walked through, of the element that
    /// matched (`None` when no array was involved).
    pub fn matches_with_position(
        &self,
        doc: &RawDocument,
    ) -> Result<(bool, Option<usize>), MongoError> {
        let mut position = None;
        let matched = self.root.eval(doc, &mut position)?;
        Ok((matched, if matched { position } else { None }))
    }
}

impl Node {
    pub(crate) fn eval(
        &self,
        doc: &RawDocument,
        position: &mut Option<usize>,
    ) -> Result<bool, MongoError> {
        match self {
            Node::And(children) => logical::eval_and(children, doc, position),
            Node::Or(children) => logical::eval_or(children, doc, position),
            Node::Nor(children) => logical::eval_nor(children, doc),
            Node::Not(child) => Ok(!child.eval(doc, &mut None)?),
            Node::Leaf { path, pred } => eval_leaf(path, pred, doc, position),
            Node::Expr(e) => evaluation::eval_expr(e, doc),
            Node::Always(answer) => Ok(*answer),
        }
    }

    /// Evaluate a node parsed from operators alone (`$elemMatch`'s value form) against one
    /// value, with no path and no array expansion.
    pub(crate) fn eval_on_value(&self, value: RawBsonRef<'_>) -> Result<bool, MongoError> {
        match self {
            Node::Leaf { pred, .. } => pred.test(Some(value), &mut None),
            Node::Not(child) => Ok(!child.eval_on_value(value)?),
            Node::And(children) => {
                for child in children {
                    if !child.eval_on_value(value)? {
                        return Ok(false);
                    }
                }
                Ok(true)
            }
            Node::Always(answer) => Ok(*answer),
            Node::Or(_) | Node::Nor(_) | Node::Expr(_) => {
                unreachable!("operator documents never parse to $or/$nor/$expr")
            }
        }
    }
}

fn eval_leaf(
    path: &FieldPath,
    pred: &Pred,
    doc: &RawDocument,
    position: &mut Option<usize>,
) -> Result<bool, MongoError> {
    let expand = pred.expands_leaf_arrays();
    visit_path(doc, path, expand, &mut |c: Candidate<'_>| {
        let mut inner = None;
        let hit = pred.test(c.value, &mut inner)?;
        if hit && position.is_none() {
            *position = c.array_index.or(inner);
        }
        Ok(hit)
    })
}

/// Where a filter document sits: the top of the query, or inside `$elemMatch` (where `$expr`
/// and `$where` are refused).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Level {
    Top,
    UserTop,
    SubDocument,
}

pub(crate) fn bad_value(message: impl Into<String>) -> MongoError {
    MongoError::new(ErrorCode::BadValue, message)
}

/// Parse a filter document into one node (an `And` of its fields).
#[allow(clippy::expect_used, reason = "the length was checked to be one")]
pub(crate) fn parse_filter(
    filter: &RawDocument,
    level: Level,
    vars: &Variables,
) -> Result<Node, MongoError> {
    let mut children = Vec::new();
    for item in filter.iter() {
        let (key, value) = item.map_err(path::bson_error)?;
        if let Some(name) = key.strip_prefix('$') {
            if let Some(node) = parse_top_operator(key, name, value, level, vars)? {
                children.push(node);
            }
            continue;
        }
        parse_field(key, value, &mut children)?;
    }
    Ok(if children.len() == 1 {
        children.pop().expect("one child")
    } else {
        Node::And(children)
    })
}

/// A path-less operator such as `$and` or `$expr`. `None` for `$comment`.
fn parse_top_operator(
    key: &str,
    name: &str,
    value: RawBsonRef<'_>,
    level: Level,
    vars: &Variables,
) -> Result<Option<Node>, MongoError> {
    let next = if level == Level::Top {
        Level::UserTop
    } else {
        level
    };
    let node = match name {
        "and" | "or" | "nor" => logical::parse_tree(name, value, next, vars)?,
        "comment" => return Ok(None),
        "expr" => evaluation::parse_expr(value, level, vars)?,
        "alwaysTrue" | "alwaysFalse" => element::parse_always(name, value)?,
        "where" => return Err(bad_value("$where is not allowed in this context")),
        "text" | "jsonSchema" | "sampleRate" => {
            return Err(bad_value(format!("{key} is not supported yet")))
        }
        _ => {
            return Err(bad_value(format!(
                "unknown top level operator: {key}. If you have a field name that starts with a \
                 '$' symbol, consider using $getField or $setField."
            )))
        }
    };
    Ok(Some(node))
}

/// `{field: value}`: operators when `value` is an operator document, else implicit equality.
fn parse_field(field: &str, value: RawBsonRef<'_>, out: &mut Vec<Node>) -> Result<(), MongoError> {
    if let RawBsonRef::Document(sub) = value {
        if is_operator_document(sub)? {
            return parse_operators(field, sub, out);
        }
    }
    let pred = match value {
        RawBsonRef::RegularExpression(re) => Pred::Regex(evaluation::RegexPred::from_bson(re)?),
        _ => Pred::Compare(comparison::Compare::eq(value)),
    };
    out.push(leaf(field, pred));
    Ok(())
}

pub(crate) fn leaf(field: &str, pred: Pred) -> Node {
    Node::Leaf {
        path: FieldPath::parse(field),
        pred,
    }
}

/// A non-empty document whose first field starts with `$` and is not a DBRef (`$ref`+`$id`).
pub(crate) fn is_operator_document(doc: &RawDocument) -> Result<bool, MongoError> {
    let mut keys = doc.iter_elements();
    let first = match keys.next() {
        None => return Ok(false),
        Some(element) => element.map_err(path::bson_error)?,
    };
    if !first.key().starts_with('$') {
        return Ok(false);
    }
    let (mut has_ref, mut has_id) = (false, false);
    for element in doc.iter_elements() {
        let element = element.map_err(path::bson_error)?;
        has_ref |= element.key() == "$ref";
        has_id |= element.key() == "$id";
    }
    Ok(!(has_ref && has_id))
}

/// The operators of `{field: {$op: arg, ...}}`, each appended to `out`.
pub(crate) fn parse_operators(
    field: &str,
    ops: &RawDocument,
    out: &mut Vec<Node>,
) -> Result<(), MongoError> {
    for item in ops.iter() {
        let (op, arg) = item.map_err(path::bson_error)?;
        if let Some(node) = parse_operator(field, op, arg, ops)? {
            out.push(node);
        }
    }
    Ok(())
}

/// One `$op: arg` applied to `field`. `context` is the whole operator document (for
/// `$regex`/`$options`). `None` when the operator was consumed by a sibling (`$options`).
fn parse_operator(
    field: &str,
    op: &str,
    arg: RawBsonRef<'_>,
    context: &RawDocument,
) -> Result<Option<Node>, MongoError> {
    let node = match op {
        "$eq" | "$ne" | "$gt" | "$gte" | "$lt" | "$lte" | "$in" | "$nin" => {
            comparison::parse(field, op, arg)?
        }
        "$not" => logical::parse_not(field, arg)?,
        "$exists" => element::parse_exists(field, arg),
        "$type" => element::parse_type(field, arg)?,
        "$regex" => evaluation::parse_regex_document(field, context)?,
        "$options" => return evaluation::check_options_has_regex(context).map(|()| None),
        "$mod" => evaluation::parse_mod(field, arg)?,
        "$all" => array::parse_all(field, arg)?,
        "$elemMatch" => array::parse_elem_match(field, arg)?,
        "$size" => array::parse_size(field, arg)?,
        "$where" => return Err(bad_value("$where cannot be applied to a field")),
        "$bitsAllSet" | "$bitsAllClear" | "$bitsAnySet" | "$bitsAnyClear" | "$geoWithin"
        | "$geoIntersects" | "$near" | "$nearSphere" | "$within" => {
            return Err(bad_value(format!("{op} is not supported yet")))
        }
        _ => return Err(bad_value(format!("unknown operator: {op}"))),
    };
    Ok(Some(node))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matcher::test_support::{check, raw};
    use bson::doc;

    #[test]
    fn empty_filter_matches_everything() {
        assert!(check(doc! {}, doc! {"a": 1}));
    }

    #[test]
    fn several_fields_are_anded() {
        assert!(check(doc! {"a": 1, "b": 2}, doc! {"a": 1, "b": 2}));
        assert!(!check(doc! {"a": 1, "b": 2}, doc! {"a": 1, "b": 3}));
    }

    #[test]
    fn dbref_documents_are_values_not_operators() {
        let f = doc! {"r": {"$ref": "c", "$id": 1}};
        assert!(check(f.clone(), doc! {"r": {"$ref": "c", "$id": 1}}));
        assert!(!check(f, doc! {"r": {"$ref": "c", "$id": 2}}));
    }

    #[test]
    fn unknown_operators_are_bad_values() {
        let e = Matcher::parse(&raw(doc! {"a": {"$foo": 1}})).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (ErrorCode::BadValue, "unknown operator: $foo")
        );
        let e = Matcher::parse(&raw(doc! {"$foo": 1})).unwrap_err();
        assert!(e.message.starts_with("unknown top level operator: $foo"));
    }

    #[test]
    fn malformed_documents_are_errors_not_mismatches() {
        // {a: <string claiming 100 bytes but holding 2>}
        let mut bytes = vec![14, 0, 0, 0, 0x02, b'a', 0, 100, 0, 0, 0, b'x', 0, 0];
        bytes[0] = u8::try_from(bytes.len()).expect("small");
        let doc = RawDocument::from_bytes(&bytes).expect("header is valid");
        let m = Matcher::parse(&raw(doc! {"a": "x"})).expect("parses");
        let e = m.matches(doc).expect_err("malformed value");
        assert_eq!(e.code, ErrorCode::InvalidBSON);
    }

    #[test]
    fn position_reports_the_matching_element() {
        let m = Matcher::parse(&raw(doc! {"a": {"$gt": 2}})).expect("parses");
        let got = m
            .matches_with_position(&raw(doc! {"a": [1, 5, 7]}))
            .expect("runs");
        assert_eq!(got, (true, Some(1)));
        let m = Matcher::parse(&raw(doc! {"a.b": 3})).expect("parses");
        let got = m
            .matches_with_position(&raw(doc! {"a": [{"b": 1}, {"b": 3}]}))
            .expect("runs");
        assert_eq!(got, (true, Some(1)));
    }
}
