//! Parsing a find projection document into the path tree, with MongoDB 7.0's rules and codes:
//! inclusion/exclusion mode (31253/31254; `_id` may go either way), path collisions
//! (31249/31250), `$slice` forms (31257-31259, 31272, 31273), `$elemMatch` (31274, 31275,
//! 31255), positional `$` (31256, 31271, 31276, 31287, 31308), expressions and literals
//! (31252, 31310, 31325), and the mode of projections with only `_id`/`$slice`/`$elemMatch`.

use bson::raw::{RawBsonRef, RawDocument, RawDocumentBuf};

use super::{Child, Leaf, Tree};
use crate::matcher::element::{true_value, type_alias, type_code};
use crate::matcher::expr::{is_expression_name, Expr};
use crate::matcher::path::bson_error;
use crate::matcher::Matcher;
use crate::variables::Variables;
use crate::{ErrorCode, MongoError};

/// The result of parsing.
pub(super) struct Parsed {
    pub tree: Tree,
    pub inclusion: bool,
    pub id_included: bool,
}

/// What parsing has learnt so far.
#[derive(Default)]
struct State {
    tree: Tree,
    /// Set by the first non-`_id` inclusion, exclusion, expression or literal.
    mode: Option<bool>,
    id: Option<bool>,
    positional: bool,
    elem_match: bool,
    find_slice: bool,
    /// What computed fields' expressions read besides the document.
    vars: Variables,
    /// `$project`'s rules rather than find's (`$slice` is the expression).
    aggregation: bool,
}

fn error(code: ErrorCode, message: impl Into<String>) -> MongoError {
    MongoError::new(code, message)
}

pub(super) fn parse_spec(
    spec: &RawDocument,
    vars: &Variables,
    aggregation: bool,
) -> Result<Parsed, MongoError> {
    let mut state = State {
        vars: vars.clone(),
        aggregation,
        ..State::default()
    };
    parse_level(spec, "", &mut state)?;
    // MongoDB's defaults when no field decided: `{_id: 1}` (alone or with `$slice`) and
    // `$elemMatch` make an inclusion; everything else is an exclusion.
    let inclusion = state.mode.unwrap_or(if state.find_slice {
        state.id == Some(true)
    } else {
        state.elem_match || state.id == Some(true)
    });
    Ok(Parsed {
        tree: state.tree,
        inclusion,
        id_included: state.id != Some(false),
    })
}

fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_owned()
    } else {
        format!("{prefix}.{key}")
    }
}

fn parse_level(spec: &RawDocument, prefix: &str, state: &mut State) -> Result<(), MongoError> {
    for item in spec.iter() {
        let (key, value) = item.map_err(bson_error)?;
        let full = join(prefix, key);
        // Checked before descending: nested levels each add their key to the path.
        crate::depth::check_path_length(full.split('.').count())?;
        parse_entry(key, &full, value, state)?;
    }
    Ok(())
}

/// Where the first positional `$` is: `(path before it, rest after it)`.
fn positional_split(full: &str) -> Option<(&str, &str)> {
    if let Some(i) = full.find(".$.") {
        return Some((&full[..i], &full[i + 3..]));
    }
    full.strip_suffix(".$").map(|path| (path, ""))
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

/// One `key: value` of the spec; `full` is the dotted path from the root.
fn parse_entry(
    key: &str,
    full: &str,
    value: RawBsonRef<'_>,
    state: &mut State,
) -> Result<(), MongoError> {
    if let Some((path, rest)) = positional_split(full) {
        return parse_positional(key, path, rest, value, state);
    }
    match value {
        RawBsonRef::Document(d) => parse_sub_object(full, d, state),
        v if is_flag(v) && true_value(v) => include(key, full, Leaf::Include, state),
        v if is_flag(v) => exclude(key, full, state),
        literal => parse_literal(key, full, literal, state),
    }
}

fn include(key: &str, full: &str, leaf: Leaf, state: &mut State) -> Result<(), MongoError> {
    insert(&mut state.tree, full, leaf)?;
    if full == "_id" {
        state.id = Some(true);
        return Ok(());
    }
    if state.mode == Some(false) {
        return Err(error(
            ErrorCode::Location31253,
            format!("Cannot do inclusion on field {key} in exclusion projection"),
        ));
    }
    state.mode = Some(true);
    Ok(())
}

fn exclude(key: &str, full: &str, state: &mut State) -> Result<(), MongoError> {
    insert(&mut state.tree, full, Leaf::Exclude)?;
    if full == "_id" {
        state.id = Some(false);
        return Ok(());
    }
    if state.mode == Some(true) {
        return Err(error(
            ErrorCode::Location31254,
            format!("Cannot do exclusion on field {key} in inclusion projection"),
        ));
    }
    state.mode = Some(false);
    Ok(())
}

fn parse_literal(
    key: &str,
    full: &str,
    value: RawBsonRef<'_>,
    state: &mut State,
) -> Result<(), MongoError> {
    insert(
        &mut state.tree,
        full,
        Leaf::Computed(Expr::parse_in(value, &state.vars)?),
    )?;
    if state.mode == Some(false) {
        let shown = bson::Bson::try_from(value.to_raw_bson())
            .map_err(|e| error(ErrorCode::InvalidBSON, format!("malformed BSON: {e}")))?;
        return Err(error(
            ErrorCode::Location31310,
            format!("Cannot use an expression {key}: {shown} in an exclusion projection"),
        ));
    }
    state.mode = Some(true);
    Ok(())
}

/// `{a: {...}}`: a find operator, an expression, or a nested projection.
fn parse_sub_object(full: &str, sub: &RawDocument, state: &mut State) -> Result<(), MongoError> {
    let fields: Vec<(&str, RawBsonRef<'_>)> =
        sub.iter().collect::<Result<_, _>>().map_err(bson_error)?;
    match fields[..] {
        [] => Err(error(
            ErrorCode::Location51270,
            format!(
                "An empty sub-projection is not a valid value. Found empty object at path {full}"
            ),
        )),
        // In `$project`, `$slice` is the aggregation expression (find's is `parse_slice`).
        [("$slice", _)] if state.aggregation => parse_expression(full, "$slice", sub, state),
        [("$slice", arg)] => parse_slice(full, arg, state),
        [("$elemMatch", arg)] => parse_elem_match(full, arg, state),
        [(name, _)] if name.starts_with('$') => parse_expression(full, name, sub, state),
        _ => parse_level(sub, full, state),
    }
}

fn parse_expression(
    full: &str,
    name: &str,
    sub: &RawDocument,
    state: &mut State,
) -> Result<(), MongoError> {
    if !is_expression_name(name) {
        return Err(error(
            ErrorCode::Location31325,
            format!("Unknown expression {name}"),
        ));
    }
    if state.mode == Some(false) {
        return Err(error(
            ErrorCode::Location31252,
            "Cannot use expression other than $meta in exclusion projection",
        ));
    }
    state.mode = Some(true);
    insert(
        &mut state.tree,
        full,
        Leaf::Computed(Expr::parse_in(RawBsonRef::Document(sub), &state.vars)?),
    )
}

#[allow(
    clippy::expect_used,
    reason = "the match guard checked that the value is an integer"
)]
fn parse_slice(full: &str, arg: RawBsonRef<'_>, state: &mut State) -> Result<(), MongoError> {
    let leaf = match arg {
        v if number_int(v).is_some() => Leaf::Slice {
            skip: None,
            limit: number_int(v).expect("checked numeric"),
        },
        RawBsonRef::Array(items) => slice_pair(items)?,
        _ => {
            return Err(error(
                ErrorCode::Location31273,
                "$slice only supports numbers and [skip, limit] arrays",
            ))
        }
    };
    state.find_slice = true;
    insert(&mut state.tree, full, leaf)
}

fn slice_pair(items: &bson::raw::RawArray) -> Result<Leaf, MongoError> {
    let items: Vec<RawBsonRef<'_>> = items
        .into_iter()
        .collect::<Result<_, _>>()
        .map_err(bson_error)?;
    let [skip, limit] = items[..] else {
        return Err(error(
            ErrorCode::Location31272,
            "$slice array argument should be of form [skip, limit]",
        ));
    };
    let expect_number = |v, code, what| {
        number_int(v).ok_or_else(|| {
            let found = type_alias(type_code(v));
            error(
                code,
                format!("$slice expects the {what} argument to be a number, got {found}"),
            )
        })
    };
    let skip = expect_number(skip, ErrorCode::Location31257, "skip")?;
    let limit = expect_number(limit, ErrorCode::Location31258, "limit")?;
    if limit <= 0 {
        return Err(error(
            ErrorCode::Location31259,
            format!("$slice limit must be positive, got {limit}"),
        ));
    }
    Ok(Leaf::Slice {
        skip: Some(skip),
        limit,
    })
}

/// A number as MongoDB's `numberInt()` reads it: truncated toward zero, saturated to 32 bits.
fn number_int(v: RawBsonRef<'_>) -> Option<i64> {
    let wide = match v {
        RawBsonRef::Int32(i) => i64::from(i),
        RawBsonRef::Int64(i) => i,
        RawBsonRef::Double(d) if d.is_nan() => 0,
        RawBsonRef::Double(d) => d.trunc().clamp(i64::MIN as f64, i64::MAX as f64) as i64,
        RawBsonRef::Decimal128(d) => crate::compare::decimal128_to_f64(&d).trunc() as i64,
        _ => return None,
    };
    Some(wide.clamp(i64::from(i32::MIN), i64::from(i32::MAX)))
}

fn parse_elem_match(full: &str, arg: RawBsonRef<'_>, state: &mut State) -> Result<(), MongoError> {
    if !matches!(arg, RawBsonRef::Document(_)) {
        return Err(error(
            ErrorCode::Location31274,
            format!(
                "elemMatch: Invalid argument, object required, but got {}",
                type_alias(type_code(arg))
            ),
        ));
    }
    if state.positional {
        return Err(error(
            ErrorCode::Location31255,
            "Cannot specify positional operator and $elemMatch.",
        ));
    }
    if full.contains('.') {
        return Err(error(
            ErrorCode::Location31275,
            "Cannot use $elemMatch projection on a nested field.",
        ));
    }
    let mut clause = RawDocumentBuf::new();
    clause.append_ref("$elemMatch", arg);
    let mut filter = RawDocumentBuf::new();
    filter.append_ref(full, RawBsonRef::Document(&clause));
    let matcher = Matcher::parse(&filter)?;
    state.elem_match = true;
    insert(&mut state.tree, full, Leaf::ElemMatch(Box::new(matcher)))
}

/// `a.$` (or `a.$.b`, which MongoDB reads as `a.$`).
fn parse_positional(
    key: &str,
    path: &str,
    rest: &str,
    value: RawBsonRef<'_>,
    state: &mut State,
) -> Result<(), MongoError> {
    if matches!(value, RawBsonRef::Document(_)) {
        return Err(error(
            ErrorCode::Location31271,
            "positional projection cannot be used with an expression or sub object",
        ));
    }
    if !is_flag(value) {
        return Err(error(
            ErrorCode::Location31308,
            "positional projection cannot be used with a literal",
        ));
    }
    if !true_value(value) {
        return exclude(key, &format!("{path}.$"), state);
    }
    if state.positional {
        return Err(error(
            ErrorCode::Location31276,
            "Cannot specify more than one positional projection per query.",
        ));
    }
    if state.elem_match {
        return Err(error(
            ErrorCode::Location31256,
            "Cannot specify positional operator and $elemMatch.",
        ));
    }
    if rest == "$" || positional_split(rest).is_some() {
        return Err(error(
            ErrorCode::Location31287,
            format!("Cannot use positional operator twice: {key}"),
        ));
    }
    state.positional = true;
    include(key, path, Leaf::Positional, state)
}

/// Add `leaf` at the dotted `full` path, refusing paths that overlap an existing one.
fn insert(tree: &mut Tree, full: &str, leaf: Leaf) -> Result<(), MongoError> {
    let parts: Vec<&str> = full.split('.').collect();
    crate::depth::check_path_length(parts.len())?;
    #[allow(clippy::expect_used, reason = "split() yields at least one part")]
    let (last, parents) = parts.split_last().expect("split yields at least one part");
    let mut node = tree;
    for part in parents {
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
                return Err(error(
                    ErrorCode::Location31249,
                    format!(
                        "Path collision at {full} remaining portion {}",
                        parts[1..].join(".")
                    ),
                ))
            }
        };
    }
    if node.children.iter().any(|(n, _)| n == last) {
        return Err(error(
            ErrorCode::Location31250,
            format!("Path collision at {full}"),
        ));
    }
    node.children.push(((*last).to_owned(), Child::Leaf(leaf)));
    Ok(())
}
