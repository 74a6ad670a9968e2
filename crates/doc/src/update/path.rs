//! Dotted update paths: parsing `a.b.$.c.$[].d.$[id]` into components with MongoDB's
//! validity checks, and reading, creating and removing values at a *concrete* path (plain field
//! names and array indexes only) inside an owned `bson::Document`. Creation makes intermediate
//! documents and pads arrays with nulls, as the server does; traversing a scalar, or an array by
//! a non-numeric name, fails with `PathNotViable`. Positional components are resolved elsewhere
//! (`positional.rs`); this file never sees them in a concrete path.

use std::cmp::Ordering;

use bson::{Bson, Document};

use super::render;
use crate::{ErrorCode, MongoError};

/// The furthest MongoDB pads an array past its end when a numeric path component creates an
/// element (`kMaxPaddingAllowed` in the server).
pub const MAX_ARRAY_PADDING: usize = 1_500_000;

/// One component of an update path as written in the update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Component {
    /// A field name or array index.
    Field(String),
    /// `$`: the array index the query matched.
    Positional,
    /// `$[]`: every element of the array.
    AllElements,
    /// `$[id]`: the elements matching the array filter named `id`.
    Filtered(String),
}

/// A parsed, validated update path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldPath {
    dotted: String,
    components: Vec<Component>,
}

impl FieldPath {
    /// Parse and validate a dotted path the way the server's `fieldchecker` does.
    pub fn parse(dotted: &str) -> Result<FieldPath, MongoError> {
        if dotted.is_empty() {
            return Err(MongoError::new(
                ErrorCode::EmptyFieldName,
                "An empty update path is not valid.",
            ));
        }
        // A path this long could only build a document deeper than any stored one (the
        // update would fail with this error after building it) or address nothing; refusing
        // it here keeps the builders, which recurse per component, within their bound.
        if dotted.split('.').count() > crate::depth::MAX_WIRE_DEPTH {
            return Err(crate::depth::storage_depth_error(false));
        }
        let mut components = Vec::new();
        for part in dotted.split('.') {
            components.push(parse_component(dotted, part)?);
        }
        check_positionals(dotted, &components)?;
        Ok(FieldPath {
            dotted: dotted.to_string(),
            components,
        })
    }

    /// The path as written, dots included.
    pub fn dotted(&self) -> &str {
        &self.dotted
    }

    /// Its components.
    pub fn components(&self) -> &[Component] {
        &self.components
    }

    /// The path's parts as written (`$`, `$[]` and `$[id]` kept literally): what conflict
    /// detection between two operators compares.
    pub fn literal_parts(&self) -> Vec<&str> {
        self.dotted.split('.').collect()
    }

    /// True when the path contains `$`, `$[]` or `$[id]`.
    pub fn is_dynamic(&self) -> bool {
        self.components
            .iter()
            .any(|c| !matches!(c, Component::Field(_)))
    }
}

fn parse_component(dotted: &str, part: &str) -> Result<Component, MongoError> {
    if part.is_empty() {
        return Err(MongoError::new(
            ErrorCode::EmptyFieldName,
            format!(
                "The update path '{dotted}' contains an empty field name, which is not allowed."
            ),
        ));
    }
    if part == "$" {
        return Ok(Component::Positional);
    }
    if let Some(inner) = part.strip_prefix("$[").and_then(|p| p.strip_suffix(']')) {
        return Ok(if inner.is_empty() {
            Component::AllElements
        } else {
            Component::Filtered(inner.to_string())
        });
    }
    Ok(Component::Field(part.to_string()))
}

fn check_positionals(dotted: &str, components: &[Component]) -> Result<(), MongoError> {
    let positional_count = components
        .iter()
        .filter(|c| **c == Component::Positional)
        .count();
    if positional_count > 1 {
        return Err(MongoError::new(
            ErrorCode::BadValue,
            format!("Too many positional (i.e. '$') elements found in path '{dotted}'"),
        ));
    }
    match components.first() {
        Some(Component::Positional) => Err(MongoError::new(
            ErrorCode::BadValue,
            format!(
                "Cannot have positional (i.e. '$') element in the first position in path '{dotted}'"
            ),
        )),
        Some(Component::AllElements | Component::Filtered(_)) => Err(MongoError::new(
            ErrorCode::BadValue,
            format!(
                "Cannot have array filter identifier (i.e. '$[<id>]') element in the first \
                 position in path '{dotted}'"
            ),
        )),
        Some(Component::Field(first)) if first.starts_with('$') => {
            Err(dollar_prefixed(first, dotted))
        }
        _ => Ok(()),
    }
}

/// The server's refusal of a `$`-prefixed field name where a stored field is meant.
pub fn dollar_prefixed(field: &str, full: &str) -> MongoError {
    MongoError::new(
        ErrorCode::DollarPrefixedFieldName,
        format!(
            "The dollar ($) prefixed field '{field}' in '{full}' is not allowed in the context of \
             an update's replacement document. Consider using an aggregation pipeline with \
             $replaceWith."
        ),
    )
}

/// The array index a path component names, if it is one (digits, no leading zero).
pub fn array_index(part: &str) -> Option<usize> {
    let digits_only = !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
    if !digits_only || (part.len() > 1 && part.starts_with('0')) {
        return None;
    }
    part.parse().ok()
}

/// Order of two path components when applying updates: numbers numerically, names by bytes.
pub fn compare_components(a: &str, b: &str) -> Ordering {
    match (array_index(a), array_index(b)) {
        (Some(x), Some(y)) => x.cmp(&y),
        _ => a.as_bytes().cmp(b.as_bytes()),
    }
}

/// A concrete path joined with dots.
pub fn dotted(parts: &[String]) -> String {
    parts.join(".")
}

/// What a concrete path names in a document.
#[derive(Debug, PartialEq)]
pub enum Lookup<'a> {
    Found(&'a Bson),
    /// Absent, and creatable (missing fields, or an array index past the end).
    Missing,
    /// A scalar, or an array reached by a non-numeric name, stands at `parts[depth]`'s parent.
    Blocked {
        depth: usize,
    },
}

/// Read the value at a concrete path.
pub fn lookup<'a>(doc: &'a Document, parts: &[String]) -> Lookup<'a> {
    let Some((first, rest)) = parts.split_first() else {
        return Lookup::Missing;
    };
    let Some(mut current) = doc.get(first) else {
        return Lookup::Missing;
    };
    for (i, part) in rest.iter().enumerate() {
        let next = match current {
            Bson::Document(d) => d.get(part),
            Bson::Array(items) => match array_index(part) {
                Some(idx) => items.get(idx),
                None => return Lookup::Blocked { depth: i + 1 },
            },
            _ => return Lookup::Blocked { depth: i + 1 },
        };
        match next {
            Some(v) => current = v,
            None => return Lookup::Missing,
        }
    }
    Lookup::Found(current)
}

/// The name of the first array the path passes through before its last component, if any.
pub fn array_ancestor(doc: &Document, parts: &[String]) -> Option<String> {
    for depth in 1..parts.len() {
        if let Lookup::Found(Bson::Array(_)) = lookup(doc, &parts[..depth]) {
            return Some(parts[depth - 1].clone());
        }
    }
    None
}

/// Set the value at a concrete path, creating documents and padding arrays on the way.
#[allow(
    clippy::expect_used,
    reason = "update paths have at least one component (parse refuses empty ones); the field was present or has just been inserted"
)]
pub fn write(doc: &mut Document, parts: &[String], value: Bson) -> Result<(), MongoError> {
    let (first, rest) = parts
        .split_first()
        .expect("update paths have at least one component");
    if rest.is_empty() {
        doc.insert(first.clone(), value);
        return Ok(());
    }
    if !doc.contains_key(first) {
        doc.insert(first.clone(), Document::new());
    }
    let child = doc
        .get_mut(first)
        .expect("the field was present or has just been inserted");
    write_below(first, child, rest, value)
}

/// Continue a write below `slot`, the value named `name`.
fn write_below(
    name: &str,
    slot: &mut Bson,
    rest: &[String],
    value: Bson,
) -> Result<(), MongoError> {
    match slot {
        Bson::Document(d) => write(d, rest, value),
        Bson::Array(items) => write_in_array(name, items, rest, value),
        other => Err(cannot_create(&rest[0], name, other)),
    }
}

fn write_in_array(
    name: &str,
    items: &mut Vec<Bson>,
    parts: &[String],
    value: Bson,
) -> Result<(), MongoError> {
    #[allow(clippy::expect_used, reason = "write_below passes a non-empty rest")]
    let (first, rest) = parts
        .split_first()
        .expect("write_below passes a non-empty rest");
    let Some(idx) = array_index(first) else {
        return Err(cannot_create(first, name, &Bson::Array(items.clone())));
    };
    pad_to(items, idx)?;
    if rest.is_empty() {
        if idx == items.len() {
            items.push(value);
        } else {
            items[idx] = value;
        }
        return Ok(());
    }
    if idx == items.len() {
        items.push(Bson::Document(Document::new()));
    }
    write_below(first, &mut items[idx], rest, value)
}

/// Pad `items` with nulls so that index `idx` is the next free slot or an existing one.
fn pad_to(items: &mut Vec<Bson>, idx: usize) -> Result<(), MongoError> {
    if idx > items.len() && idx - items.len() > MAX_ARRAY_PADDING {
        return Err(MongoError::new(
            ErrorCode::BadValue,
            format!("can't backfill more than {MAX_ARRAY_PADDING} elements"),
        ));
    }
    while items.len() < idx {
        items.push(Bson::Null);
    }
    Ok(())
}

/// `PathNotViable` for a path blocked by `blocker`, the value named `name`.
pub fn cannot_create(field: &str, name: &str, blocker: &Bson) -> MongoError {
    MongoError::new(
        ErrorCode::PathNotViable,
        format!(
            "Cannot create field '{field}' in element {{{}}}",
            render::element(name, blocker)
        ),
    )
}

/// Remove the value at a concrete path: a document field is deleted, an array element becomes
/// null (the array keeps its length). Returns whether anything was there.
pub fn remove(doc: &mut Document, parts: &[String]) -> bool {
    #[allow(
        clippy::expect_used,
        reason = "update paths have at least one component (parse refuses empty ones)"
    )]
    let (last, parent_parts) = parts
        .split_last()
        .expect("update paths have at least one component");
    if parent_parts.is_empty() {
        return doc.remove(last).is_some();
    }
    match parent_mut(doc, parent_parts) {
        Some(Bson::Document(d)) => d.remove(last).is_some(),
        Some(Bson::Array(items)) => match array_index(last).and_then(|i| items.get_mut(i)) {
            Some(slot) => {
                *slot = Bson::Null;
                true
            }
            None => false,
        },
        _ => false,
    }
}

fn parent_mut<'a>(doc: &'a mut Document, parts: &[String]) -> Option<&'a mut Bson> {
    let (first, rest) = parts.split_first()?;
    let mut current = doc.get_mut(first)?;
    for part in rest {
        current = match current {
            Bson::Document(d) => d.get_mut(part)?,
            Bson::Array(items) => items.get_mut(array_index(part)?)?,
            _ => return None,
        };
    }
    Some(current)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{bson, doc};

    fn parts(s: &str) -> Vec<String> {
        s.split('.').map(str::to_string).collect()
    }

    #[test]
    fn parses_components() {
        let p = FieldPath::parse("a.$.b.$[].c.$[x]").expect("valid path");
        assert_eq!(p.components()[1], Component::Positional);
        assert_eq!(p.components()[3], Component::AllElements);
        assert_eq!(p.components()[5], Component::Filtered("x".into()));
        assert!(p.is_dynamic());
    }

    #[test]
    fn rejects_bad_paths() {
        let err = |s: &str| FieldPath::parse(s).expect_err("invalid path").code;
        assert_eq!(err(""), ErrorCode::EmptyFieldName);
        assert_eq!(err("a..b"), ErrorCode::EmptyFieldName);
        assert_eq!(err("$.a"), ErrorCode::BadValue);
        assert_eq!(err("a.$.b.$"), ErrorCode::BadValue);
        assert_eq!(err("$x"), ErrorCode::DollarPrefixedFieldName);
    }

    #[test]
    fn writes_create_documents_and_pad_arrays() {
        let mut d = doc! {"a": [1]};
        write(&mut d, &parts("a.3"), Bson::Int32(9)).expect("padding");
        write(&mut d, &parts("b.c.d"), Bson::Int32(1)).expect("nesting");
        assert_eq!(d, doc! {"a": [1, null, null, 9], "b": {"c": {"d": 1}}});
    }

    #[test]
    fn writes_through_scalars_fail() {
        let mut d = doc! {"a": 1, "b": [{"x": 1}]};
        let e = write(&mut d, &parts("a.b"), Bson::Int32(1)).expect_err("scalar");
        assert_eq!(e.message, "Cannot create field 'b' in element {a: 1}");
        let e = write(&mut d, &parts("b.x"), Bson::Int32(1)).expect_err("array by name");
        assert_eq!(e.code, ErrorCode::PathNotViable);
    }

    #[test]
    fn lookup_and_remove() {
        let mut d = doc! {"a": {"b": [5, 6]}};
        assert_eq!(lookup(&d, &parts("a.b.1")), Lookup::Found(&bson!(6)));
        assert_eq!(lookup(&d, &parts("a.b.9")), Lookup::Missing);
        assert_eq!(lookup(&d, &parts("a.b.x")), Lookup::Blocked { depth: 2 });
        assert!(remove(&mut d, &parts("a.b.0")));
        assert_eq!(d, doc! {"a": {"b": [null, 6]}});
        assert!(!remove(&mut d, &parts("a.zz")));
    }

    #[test]
    fn numeric_components_sort_numerically() {
        assert_eq!(compare_components("10", "9"), Ordering::Greater);
        assert_eq!(compare_components("a", "b"), Ordering::Less);
        assert_eq!(array_index("01"), None);
    }
}
