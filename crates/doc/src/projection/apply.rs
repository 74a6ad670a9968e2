//! Applying a parsed projection to one raw document: inclusion keeps only named fields (in the
//! document's order, computed fields after them), exclusion copies all but the named ones.
//! Paths through arrays apply to each element (inclusion drops scalars, exclusion keeps them).
//!
//! It reads each field's key before its value and looks keys up in the small spec tree, so a
//! document with many fields the projection does not name costs no allocation per such field.

use bson::raw::{RawArray, RawArrayBuf, RawBson, RawBsonRef, RawDocument, RawDocumentBuf};

use super::{Child, Leaf, Tree};
use crate::matcher::expr::Value;
use crate::matcher::path::bson_error;
use crate::{ErrorCode, MongoError};

pub(super) struct Context<'a> {
    pub root: &'a RawDocument,
    pub matched_index: Option<usize>,
    pub id_included: bool,
}

/// Inclusion projection of one document level (`top` for the whole document).
pub(super) fn include_document(
    tree: &Tree,
    doc: &RawDocument,
    top: bool,
    ctx: &Context<'_>,
) -> Result<RawDocumentBuf, MongoError> {
    let mut out = RawDocumentBuf::new();
    // Most fields are not named: they are framed and skipped, their keys compared as bytes.
    let mut walk = crate::raw_scan::elements(doc);
    while let Some(element) = walk.next_element()? {
        let child = tree.child_bytes(element.key);
        if top && element.key == b"_id" && child.is_none() {
            if ctx.id_included {
                out.append_ref("_id", element.value(doc)?);
            }
            continue;
        }
        let Some(child) = child else { continue };
        let key = element.key_str()?;
        let value = element.value(doc)?;
        if let Some(v) = include_child(child, key, value, ctx)?.as_raw() {
            out.append_ref(key, v);
        }
    }
    if tree.has_computed() {
        append_computed(tree, &mut out, ctx)?;
    }
    Ok(out)
}

fn include_child<'a>(
    child: &Child,
    key: &str,
    value: RawBsonRef<'a>,
    ctx: &Context<'_>,
) -> Result<Value<'a>, MongoError> {
    match child {
        Child::Node(sub) => include_nested(sub, value, ctx),
        Child::Leaf(Leaf::Include) => Ok(Value::Ref(value)),
        Child::Leaf(Leaf::Exclude | Leaf::Computed(_)) => Ok(Value::Missing),
        Child::Leaf(Leaf::Slice { skip, limit }) => slice(value, *skip, *limit),
        Child::Leaf(Leaf::Positional) => positional(key, value, ctx.matched_index),
        Child::Leaf(Leaf::ElemMatch(matcher)) => {
            let (matched, index) = matcher.matches_with_position(ctx.root)?;
            match (matched, index) {
                (true, Some(i)) => first_only(value, i),
                _ => Ok(Value::Missing),
            }
        }
    }
}

fn include_nested<'a>(
    sub: &Tree,
    value: RawBsonRef<'a>,
    ctx: &Context<'_>,
) -> Result<Value<'a>, MongoError> {
    match value {
        RawBsonRef::Document(d) => Ok(owned_document(include_document(sub, d, false, ctx)?)),
        RawBsonRef::Array(items) => include_array(sub, items, ctx),
        _ => Ok(Value::Missing),
    }
}

fn include_array<'a>(
    sub: &Tree,
    items: &RawArray,
    ctx: &Context<'_>,
) -> Result<Value<'a>, MongoError> {
    let mut out = RawArrayBuf::new();
    for item in items {
        match item.map_err(bson_error)? {
            RawBsonRef::Document(d) => {
                out.push(RawBson::Document(include_document(sub, d, false, ctx)?))
            }
            RawBsonRef::Array(inner) => {
                if let Some(v) = include_array(sub, inner, ctx)?.as_raw() {
                    out.push(v.to_raw_bson());
                }
            }
            _ => {}
        }
    }
    Ok(Value::Owned(RawBson::Array(out)))
}

/// Computed fields (and nested levels holding them) the document did not already supply.
fn append_computed(
    tree: &Tree,
    out: &mut RawDocumentBuf,
    ctx: &Context<'_>,
) -> Result<(), MongoError> {
    for (name, child) in &tree.children {
        match child {
            Child::Leaf(Leaf::Computed(expr)) => {
                if let Some(v) = expr.evaluate(ctx.root)?.as_raw() {
                    out.append_ref(name, v);
                }
            }
            // Built here when the inclusion pass produced nothing for the field: it is
            // missing from the input, or holds a scalar the sub-paths cannot descend into
            // (MongoDB replaces such a scalar with the computed document).
            Child::Node(sub)
                if sub.has_computed() && out.get(name).map_err(bson_error)?.is_none() =>
            {
                let built = include_document(sub, &RawDocumentBuf::new(), false, ctx)?;
                out.append(name, RawBson::Document(built));
            }
            _ => {}
        }
    }
    Ok(())
}

/// Exclusion projection of one document level.
pub(super) fn exclude_document(
    tree: &Tree,
    doc: &RawDocument,
    top: bool,
    ctx: &Context<'_>,
) -> Result<RawDocumentBuf, MongoError> {
    let mut out = RawDocumentBuf::new();
    for element in doc.iter_elements() {
        let element = element.map_err(bson_error)?;
        let key = element.key();
        if top && key == "_id" && !ctx.id_included {
            continue;
        }
        let value = element.value().map_err(bson_error)?;
        let projected = match tree.child(key) {
            None => Value::Ref(value),
            Some(child) => exclude_child(child, key, value, ctx)?,
        };
        if let Some(v) = projected.as_raw() {
            out.append_ref(key, v);
        }
    }
    Ok(out)
}

fn exclude_child<'a>(
    child: &Child,
    key: &str,
    value: RawBsonRef<'a>,
    ctx: &Context<'_>,
) -> Result<Value<'a>, MongoError> {
    match child {
        Child::Leaf(Leaf::Exclude) => Ok(Value::Missing),
        // `_id: 1` in an exclusion projection changes nothing.
        Child::Leaf(Leaf::Include | Leaf::Computed(_)) => Ok(Value::Ref(value)),
        // `$slice`, `$elemMatch` and `$` work the same in both modes.
        Child::Leaf(_) => include_child(child, key, value, ctx),
        Child::Node(sub) => match value {
            RawBsonRef::Document(d) => Ok(owned_document(exclude_document(sub, d, false, ctx)?)),
            RawBsonRef::Array(items) => exclude_array(sub, items, ctx),
            other => Ok(Value::Ref(other)),
        },
    }
}

fn exclude_array<'a>(
    sub: &Tree,
    items: &RawArray,
    ctx: &Context<'_>,
) -> Result<Value<'a>, MongoError> {
    let mut out = RawArrayBuf::new();
    for item in items {
        let item = item.map_err(bson_error)?;
        let projected = match item {
            RawBsonRef::Document(d) => owned_document(exclude_document(sub, d, false, ctx)?),
            RawBsonRef::Array(inner) => exclude_array(sub, inner, ctx)?,
            other => Value::Ref(other),
        };
        if let Some(v) = projected.as_raw() {
            out.push(v.to_raw_bson());
        }
    }
    Ok(Value::Owned(RawBson::Array(out)))
}

fn owned_document<'a>(doc: RawDocumentBuf) -> Value<'a> {
    Value::Owned(RawBson::Document(doc))
}

/// `$slice`: `limit` alone takes the first `limit` (or last `-limit`) elements; with `skip`,
/// `limit` elements from `skip` (counted from the end when negative). Non-arrays pass through.
fn slice<'a>(
    value: RawBsonRef<'a>,
    skip: Option<i64>,
    limit: i64,
) -> Result<Value<'a>, MongoError> {
    let RawBsonRef::Array(items) = value else {
        return Ok(Value::Ref(value));
    };
    let elements: Vec<RawBsonRef<'_>> = items
        .into_iter()
        .collect::<Result<_, _>>()
        .map_err(bson_error)?;
    let len = i64::try_from(elements.len()).unwrap_or(i64::MAX);
    let (start, count) = match skip {
        None if limit >= 0 => (0, limit),
        None => ((len + limit).max(0), -limit),
        Some(s) if s >= 0 => (s.min(len), limit),
        Some(s) => ((len + s).max(0), limit),
    };
    let end = start.saturating_add(count).min(len);
    let mut out = RawArrayBuf::new();
    for element in &elements[to_usize(start)..to_usize(end.max(start))] {
        out.push(element.to_raw_bson());
    }
    Ok(Value::Owned(RawBson::Array(out)))
}

#[allow(
    clippy::expect_used,
    reason = "slice bounds are clamped to 0..=len before"
)]
fn to_usize(i: i64) -> usize {
    usize::try_from(i).expect("slice bounds are clamped to 0..=len")
}

/// `[value[index]]`.
fn first_only<'a>(value: RawBsonRef<'a>, index: usize) -> Result<Value<'a>, MongoError> {
    let RawBsonRef::Array(items) = value else {
        return Ok(Value::Missing);
    };
    let mut out = RawArrayBuf::new();
    if let Some(element) = items.get(index).map_err(bson_error)? {
        out.push(element.to_raw_bson());
    }
    Ok(Value::Owned(RawBson::Array(out)))
}

/// `field.$`: the element at the index the matcher reported.
fn positional<'a>(
    key: &str,
    value: RawBsonRef<'a>,
    matched_index: Option<usize>,
) -> Result<Value<'a>, MongoError> {
    let RawBsonRef::Array(items) = value else {
        return Ok(Value::Ref(value));
    };
    let element = match matched_index {
        Some(i) => items.get(i).map_err(bson_error)?,
        None => None,
    };
    let Some(element) = element else {
        return Err(MongoError::new(
            ErrorCode::Location51246,
            format!(
                "Executor error during find command :: caused by :: positional operator \
                 '{key}.$' couldn't find a matching element in the array"
            ),
        ));
    };
    let mut out = RawArrayBuf::new();
    out.push(element.to_raw_bson());
    Ok(Value::Owned(RawBson::Array(out)))
}
