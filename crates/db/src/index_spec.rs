//! Index specifications as `createIndexes` receives them and `listIndexes` returns them:
//! validation with MongoDB's error codes, and the `IndexDef` the key generator uses.
//! Besides mongod's options it takes TokuMX's `clustering` (the index entry carries the whole
//! document: docs/format-collections.md) and its tree layout options (`compression`,
//! `compressionLevel`, `pageSize`, `readPageSize`: `tree_layout.rs`).

use crate::index_keys::IndexDef;
use bson::{Bson, Document, RawDocumentBuf};
use shale_doc::matcher::element::bson_true_value;
use shale_doc::{Collation, Direction, ErrorCode, Matcher, MongoError, Variables};
use std::sync::Arc;

/// Options `createIndexes` accepts in an index spec (others are refused, as mongod does).
const KNOWN_OPTIONS: &[&str] = &[
    "key",
    "name",
    "unique",
    "sparse",
    "partialFilterExpression",
    "v",
    "background",
    "ns",
    "expireAfterSeconds",
    "hidden",
    "storageEngine",
    "collation",
    "weights",
    "default_language",
    "language_override",
    "textIndexVersion",
    "2dsphereIndexVersion",
    "bits",
    "min",
    "max",
    "wildcardProjection",
    "dropDups",
    // A time series measurement index's spec as the user gave it (`timeseries/indexes.rs`).
    "originalSpec",
    "clustering",
    "compression",
    "compressionLevel",
    "pageSize",
    "readPageSize",
];

/// `createIndexes`' `ignoreUnknownIndexOptions: true`: the spec without the options
/// `parse_spec` would refuse, as mongod strips them before it builds.
pub fn without_unknown_options(spec: &Document) -> Document {
    spec.iter()
        .filter(|(k, _)| KNOWN_OPTIONS.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The spec's `v`, as mongod 7.0 checks it: 1 or 2 (the default), kept as given; a
/// non-number `TypeMismatch`, another version `CannotCreateIndex`. The key format is the
/// same for both here: `v` is what `listIndexes` shows.
fn index_version(spec: &Document) -> Result<i32, MongoError> {
    let Some(given) = spec.get("v") else {
        return Ok(2);
    };
    let v = shale_doc::number_as_f64(given).ok_or_else(|| {
        MongoError::new(
            ErrorCode::TypeMismatch,
            format!(
                "The field 'v' must be a number, but got an element of type {}",
                shale_doc::type_name(given)
            ),
        )
    })?;
    match v {
        1.0 => Ok(1),
        2.0 => Ok(2),
        _ => Err(MongoError::new(
            ErrorCode::CannotCreateIndex,
            format!("Invalid index specification {spec}; cannot create an index with v={v}"),
        )),
    }
}

/// The `_id` index every collection has (the document tree itself).
pub fn id_index_spec() -> Document {
    bson::doc! { "v": 2, "key": { "_id": 1 }, "name": "_id_" }
}

/// Validates a user's spec; returns the spec as stored (`v: 2` first) and its definition.
pub fn parse_spec(spec: &Document) -> Result<(Document, IndexDef), MongoError> {
    for k in spec.keys() {
        if !KNOWN_OPTIONS.contains(&k.as_str()) {
            return Err(MongoError::new(
                ErrorCode::InvalidIndexSpecificationOption,
                format!("The field '{k}' is not valid for an index specification. Specification: {spec}"),
            ));
        }
    }
    let key = match spec.get("key") {
        Some(Bson::Document(k)) => k,
        Some(_) => {
            return Err(MongoError::new(
                ErrorCode::TypeMismatch,
                "The field 'key' must be an object",
            ))
        }
        None => {
            return Err(MongoError::new(
                ErrorCode::FailedToParse,
                "The 'key' field is a required property of an index specification",
            ))
        }
    };
    let fields = parse_key_pattern(key)?;
    let hashed = hashed_field(key)?;
    let name = match spec.get("name") {
        Some(Bson::String(n)) if !n.is_empty() => n.clone(),
        Some(Bson::String(_)) => return Err(bad_value("The index name cannot be empty")),
        Some(_) => {
            return Err(MongoError::new(
                ErrorCode::TypeMismatch,
                "The field 'name' must be a string",
            ))
        }
        None => {
            return Err(MongoError::new(
                ErrorCode::FailedToParse,
                "The 'name' field is a required property of an index specification",
            ))
        }
    };
    let unique = truthy(spec.get("unique"));
    if unique && hashed.is_some() {
        return Err(MongoError::new(
            ErrorCode::Location16764,
            "Currently hashed indexes cannot guarantee uniqueness. Use a regular index.",
        ));
    }
    let sparse = truthy(spec.get("sparse"));
    let clustering = bool_option(spec, "clustering")?;
    crate::tree_layout::check(spec)?;
    let collation = index_collation(spec, unique)?;
    let partial = match spec.get("partialFilterExpression") {
        None => None,
        Some(Bson::Document(f)) => {
            let raw = RawDocumentBuf::from_document(f).map_err(|e| bad_value(e.to_string()))?;
            // The filter compares under the index's collation, as mongod's does.
            let vars = Variables::new().with_collation(collation.clone().map(Arc::new));
            Some(Matcher::parse_with(&raw, &vars)?)
        }
        Some(_) => {
            return Err(MongoError::new(
                ErrorCode::TypeMismatch,
                "partialFilterExpression must be an object",
            ))
        }
    };
    if partial.is_some() && sparse {
        return Err(bad_value(
            "cannot mix \"partialFilterExpression\" and \"sparse\" options",
        ));
    }
    let is_id = name == "_id_" || fields == [("_id".to_owned(), Direction::Ascending)];
    if is_id && (unique || sparse || partial.is_some() || name != "_id_") {
        {
            return Err(bad_spec(
                "The _id index cannot be unique, sparse or partial, or have another name",
            ));
        }
    }
    let mut stored =
        bson::doc! { "v": index_version(spec)?, "key": key.clone(), "name": name.clone() };
    for opt in ["unique", "sparse", "clustering"] {
        if truthy(spec.get(opt)) {
            stored.insert(opt, true);
        }
    }
    if let Some(c) = collation {
        stored.insert("collation", c.to_document());
    }
    for opt in [
        "partialFilterExpression",
        "expireAfterSeconds",
        "hidden",
        "storageEngine",
        "compression",
        "compressionLevel",
        "pageSize",
        "readPageSize",
        "originalSpec",
    ] {
        if let Some(v) = spec.get(opt) {
            stored.insert(opt, v.clone());
        }
    }
    Ok((
        stored,
        IndexDef {
            name,
            fields,
            unique,
            sparse,
            partial,
            clustering,
            hidden: truthy(spec.get("hidden")),
            hashed,
        },
    ))
}

/// An index's `collation` (`None`: simple). Its keys are stored binary whatever the
/// collation (the planner never reads strings from an index under a non-simple collation,
/// `collation_scope.rs`), so a unique index with one would enforce binary uniqueness: it is
/// refused rather than built wrong.
fn index_collation(spec: &Document, unique: bool) -> Result<Option<Collation>, MongoError> {
    let Some(v) = spec.get("collation") else {
        return Ok(None);
    };
    if v.as_document().is_some_and(Document::is_empty) {
        return Err(bad_value(
            "The field 'collation' cannot be an empty object.",
        ));
    }
    let c = Collation::parse(v, "createIndexes")?;
    if c.is_some() && unique {
        return Err(MongoError::new(
            ErrorCode::CannotCreateIndex,
            "a unique index with a non-simple collation is not supported by shale (index keys \
             are stored binary, so uniqueness would not follow the collation)",
        ));
    }
    Ok(c)
}

/// A boolean option given as a boolean or a number (a number is true when not zero); any
/// other type is `TypeMismatch` (14), never read as true or false. Absent is false.
fn bool_option(spec: &Document, name: &str) -> Result<bool, MongoError> {
    match spec.get(name) {
        None => Ok(false),
        Some(
            v @ (Bson::Boolean(_)
            | Bson::Int32(_)
            | Bson::Int64(_)
            | Bson::Double(_)
            | Bson::Decimal128(_)),
        ) => Ok(bson_true_value(v)),
        Some(other) => Err(MongoError::new(
            ErrorCode::TypeMismatch,
            format!("The field '{name}' must be a boolean or a number, not {other}"),
        )),
    }
}

/// Most fields an index key pattern may have (mongod's limit). Key generation recurses once
/// per field, so this is also its recursion bound.
pub const MAX_KEY_FIELDS: usize = 32;

/// The position of the key pattern's hashed field (`{a: "hashed"}`), at most one (mongod
/// 4.4+ allows one hashed field in a compound key).
fn hashed_field(key: &Document) -> Result<Option<usize>, MongoError> {
    let at: Vec<usize> = key
        .values()
        .enumerate()
        .filter(|(_, v)| v.as_str() == Some("hashed"))
        .map(|(i, _)| i)
        .collect();
    match at[..] {
        [] => Ok(None),
        [one] => Ok(Some(one)),
        _ => Err(MongoError::new(
            ErrorCode::Location31303,
            format!(
                "A maximum of one index field is allowed to be hashed but found {} for 'key' {key}",
                at.len()
            ),
        )),
    }
}

/// `{a: 1, b: -1}` → paths and directions (a hashed field ascending). Other special index
/// types are refused.
pub fn parse_key_pattern(key: &Document) -> Result<Vec<(String, Direction)>, MongoError> {
    if key.is_empty() {
        return Err(bad_spec("Index keys cannot be empty."));
    }
    if key.len() > MAX_KEY_FIELDS {
        return Err(bad_spec(format!(
            "Index key pattern has {} fields; at most {MAX_KEY_FIELDS} are allowed",
            key.len()
        )));
    }
    let mut fields = Vec::new();
    for (path, v) in key {
        if path.is_empty() || path.split('.').any(str::is_empty) {
            return Err(bad_spec(format!(
                "Index key contains an illegal field name: '{path}'"
            )));
        }
        if path == "$**" || path.ends_with(".$**") {
            return Err(MongoError::new(
                ErrorCode::CannotCreateIndex,
                format!("wildcard indexes ('{path}') are not supported by shale"),
            ));
        }
        if path.starts_with('$') {
            return Err(bad_spec(format!(
                "Index key contains an illegal field name: field name starts with '$'. {path}"
            )));
        }
        let dir = match v {
            Bson::Int32(n) => sign(f64::from(*n)),
            Bson::Int64(n) => sign(*n as f64),
            Bson::Double(n) => sign(*n),
            // A hashed field's keys are hashes (`hashed.rs`), stored ascending.
            Bson::String(kind) if kind == "hashed" => Some(Direction::Ascending),
            Bson::String(kind) => {
                return Err(MongoError::new(
                    ErrorCode::CannotCreateIndex,
                    format!("index type '{kind}' is not supported by shale (only ascending and descending keys)"),
                ))
            }
            other => return Err(bad_spec(format!("Values in the index key pattern can only be numbers or strings: {path}: {other}"))),
        };
        let Some(dir) = dir else {
            return Err(bad_spec(format!(
                "Values in the index key pattern cannot be 0: {path}"
            )));
        };
        if fields.iter().any(|(p, _)| p == path) {
            return Err(bad_spec(format!(
                "Index key pattern has a duplicate field: {path}"
            )));
        }
        fields.push((path.clone(), dir));
    }
    Ok(fields)
}

/// A generated index name, as drivers and mongod make it: `a_1_b_-1`.
pub fn default_name(key: &Document) -> String {
    key.iter()
        .map(|(k, v)| {
            format!(
                "{k}_{}",
                match v {
                    Bson::Int32(n) => n.to_string(),
                    Bson::Int64(n) => n.to_string(),
                    Bson::Double(n) if n.fract() == 0.0 => format!("{}", *n as i64),
                    Bson::Double(n) => n.to_string(),
                    Bson::String(s) => s.clone(),
                    other => other.to_string(),
                }
            )
        })
        .collect::<Vec<_>>()
        .join("_")
}

fn sign(n: f64) -> Option<Direction> {
    if n > 0.0 {
        Some(Direction::Ascending)
    } else if n < 0.0 {
        Some(Direction::Descending)
    } else {
        None
    }
}

fn truthy(v: Option<&Bson>) -> bool {
    v.is_some_and(bson_true_value)
}

fn bad_spec(message: impl Into<String>) -> MongoError {
    MongoError::new(ErrorCode::CannotCreateIndex, message)
}

fn bad_value(message: impl Into<String>) -> MongoError {
    MongoError::new(ErrorCode::BadValue, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn specs_are_validated() {
        let (stored, def) =
            parse_spec(&doc! {"key": {"a": 1, "b": -1}, "name": "ab", "unique": true})
                .expect("valid");
        assert_eq!(
            stored,
            doc! {"v": 2, "key": {"a": 1, "b": -1}, "name": "ab", "unique": true}
        );
        assert!(def.unique && def.fields[1].1 == Direction::Descending);
        assert_eq!(
            parse_spec(&doc! {"key": {"a": 0}, "name": "x"})
                .expect_err("zero")
                .code
                .code(),
            67
        );
        assert_eq!(
            parse_spec(&doc! {"key": {"a": "text"}, "name": "x"})
                .expect_err("text")
                .code
                .code(),
            67
        );
        assert_eq!(
            parse_spec(&doc! {"key": {"a": 1}})
                .expect_err("no name")
                .code
                .code(),
            9
        );
        assert_eq!(
            parse_spec(&doc! {"key": {"a": 1}, "name": "x", "bogus": 1})
                .expect_err("bogus")
                .code
                .code(),
            197
        );
        assert_eq!(default_name(&doc! {"a": 1, "b.c": -1}), "a_1_b.c_-1");
    }

    #[test]
    fn clustering_is_stored_only_when_true_and_must_be_boolean_or_number() {
        let (stored, def) =
            parse_spec(&doc! {"key": {"a": 1}, "name": "a", "clustering": true}).expect("valid");
        assert_eq!(
            stored,
            doc! {"v": 2, "key": {"a": 1}, "name": "a", "clustering": true}
        );
        assert!(def.clustering);
        let (stored, def) =
            parse_spec(&doc! {"key": {"a": 1}, "name": "a", "clustering": 1}).expect("number");
        assert_eq!(stored.get_bool("clustering"), Ok(true));
        assert!(def.clustering);
        let (stored, def) =
            parse_spec(&doc! {"key": {"a": 1}, "name": "a", "clustering": false}).expect("false");
        assert!(!stored.contains_key("clustering") && !def.clustering);
        let (_, def) =
            parse_spec(&doc! {"key": {"a": 1}, "name": "a", "clustering": true, "unique": true})
                .expect("unique clustering");
        assert!(def.clustering && def.unique);
        assert_eq!(
            parse_spec(&doc! {"key": {"a": 1}, "name": "a", "clustering": "yes"})
                .expect_err("string")
                .code
                .code(),
            14
        );
    }

    #[test]
    fn layout_options_are_checked_and_stored() {
        let (stored, _) = parse_spec(&doc! {
            "key": {"a": 1}, "name": "a", "compression": "zstd", "compressionLevel": 5,
            "pageSize": "1MB", "readPageSize": 8192,
        })
        .expect("valid");
        assert_eq!(
            stored,
            doc! {"v": 2, "key": {"a": 1}, "name": "a", "compression": "zstd",
            "compressionLevel": 5, "pageSize": "1MB", "readPageSize": 8192}
        );
        let refused = |spec: Document| parse_spec(&spec).expect_err("refused").code;
        assert_eq!(
            refused(doc! {"key": {"a": 1}, "name": "a", "compression": "gzip"}),
            ErrorCode::BadValue
        );
        assert_eq!(
            refused(doc! {"key": {"a": 1}, "name": "a", "pageSize": false}),
            ErrorCode::TypeMismatch
        );
    }
}
