//! Field paths as aggregation stages name them (`$sort` keys, `$unwind` paths, `$unset`
//! fields, `$lookup`'s `as`, ...): MongoDB's `FieldPath` validation with its codes (40352 empty,
//! 40353 trailing dot, 15998 empty component, 16410 `$` prefix, 16412 dot in a single name),
//! and reading, setting and removing a path through embedded documents only (no array
//! traversal), the way `$unwind` and `$lookup` address their fields.

use bson::{Bson, Document};

use crate::{ErrorCode, MongoError};

/// `$`-prefixed names MongoDB allows in field paths (DBRef fields and `$sortKey`).
const ALLOWED_DOLLAR_NAMES: &[&str] = &["$id", "$ref", "$db", "$sortKey"];

fn error(code: ErrorCode, message: &str) -> MongoError {
    MongoError::new(code, message)
}

/// Check one component of a path (or a single field name such as a `$facet` output).
pub(crate) fn validate_field_name(name: &str) -> Result<(), MongoError> {
    if name.is_empty() {
        return Err(error(
            ErrorCode::Location15998,
            "FieldPath field names may not be empty strings.",
        ));
    }
    if name.starts_with('$') && !ALLOWED_DOLLAR_NAMES.contains(&name) {
        return Err(error(
            ErrorCode::Location16410,
            "FieldPath field names may not start with '$'. Consider using $getField or \
             $setField.",
        ));
    }
    if name.contains('.') {
        return Err(error(
            ErrorCode::Location16412,
            "FieldPath field names may not contain '.'. Consider using $getField or $setField.",
        ));
    }
    Ok(())
}

/// Check a dotted path and split it into components.
pub(crate) fn parse_field_path(path: &str) -> Result<Vec<String>, MongoError> {
    if path.is_empty() {
        return Err(error(
            ErrorCode::Location40352,
            "FieldPath cannot be constructed with empty string",
        ));
    }
    if path.ends_with('.') {
        return Err(error(
            ErrorCode::Location40353,
            "FieldPath must not end with a '.'.",
        ));
    }
    crate::depth::check_path_length(path.split('.').count())?;
    let parts: Vec<String> = path.split('.').map(str::to_owned).collect();
    for part in &parts {
        validate_field_name(part)?;
    }
    Ok(parts)
}

/// The value at `path`, through embedded documents only.
pub(crate) fn get_path<'d>(doc: &'d Document, path: &[String]) -> Option<&'d Bson> {
    let (last, parents) = path.split_last()?;
    let mut current = doc;
    for part in parents {
        match current.get(part) {
            Some(Bson::Document(d)) => current = d,
            _ => return None,
        }
    }
    current.get(last)
}

/// Set `path` to `value`, creating embedded documents on the way and replacing any
/// non-document found there. An existing field keeps its position; a new one goes last.
pub(crate) fn set_path(doc: &mut Document, path: &[String], value: Bson) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    if rest.is_empty() {
        doc.insert(first.as_str(), value);
        return;
    }
    if !matches!(doc.get(first), Some(Bson::Document(_))) {
        doc.insert(first.as_str(), Document::new());
    }
    if let Some(Bson::Document(sub)) = doc.get_mut(first) {
        set_path(sub, rest, value);
    }
}

/// Remove the field at `path` (through embedded documents only); absent paths are fine.
pub(crate) fn remove_path(doc: &mut Document, path: &[String]) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    if rest.is_empty() {
        doc.remove(first);
        return;
    }
    if let Some(Bson::Document(sub)) = doc.get_mut(first) {
        remove_path(sub, rest);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn parts(p: &str) -> Vec<String> {
        parse_field_path(p).expect("valid path")
    }

    #[test]
    fn validation_codes() {
        let code = |p: &str| parse_field_path(p).unwrap_err().code.code();
        assert_eq!(code(""), 40352);
        assert_eq!(code("a."), 40353);
        assert_eq!(code("a..b"), 15998);
        assert_eq!(code("$a"), 16410);
        assert_eq!(code("a.$b"), 16410);
        assert!(parse_field_path("a.$id").is_ok());
        assert_eq!(parts("a.b.c"), vec!["a", "b", "c"]);
        assert_eq!(validate_field_name("a.b").unwrap_err().code.code(), 16412);
    }

    #[test]
    fn get_set_remove_through_documents_only() {
        let mut d = doc! {"a": {"b": 1}, "x": [{"b": 2}], "s": 5};
        assert_eq!(get_path(&d, &parts("a.b")), Some(&Bson::Int32(1)));
        assert_eq!(get_path(&d, &parts("x.b")), None);
        set_path(&mut d, &parts("a.c"), Bson::Int32(2));
        set_path(&mut d, &parts("s.t"), Bson::Int32(3));
        set_path(&mut d, &parts("n.m"), Bson::Int32(4));
        assert_eq!(
            d,
            doc! {"a": {"b": 1, "c": 2}, "x": [{"b": 2}], "s": {"t": 3}, "n": {"m": 4}}
        );
        // An array on the way is replaced, as MongoDB's setNestedField does.
        set_path(&mut d, &parts("x.y"), Bson::Int32(5));
        assert_eq!(
            get_path(&d, &parts("x")),
            Some(&Bson::Document(doc! {"y": 5}))
        );
        remove_path(&mut d, &parts("a.b"));
        remove_path(&mut d, &parts("zz.top"));
        assert_eq!(
            get_path(&d, &parts("a")),
            Some(&Bson::Document(doc! {"c": 2}))
        );
    }
}
