//! Namespaces: a database name and a collection name, validated as MongoDB validates them
//! (`InvalidNamespace`, code 73), and their `db.collection` spelling.

use shale_doc::{ErrorCode, MongoError};
use std::fmt;

/// Longest `db.collection` MongoDB 7.0 accepts.
pub const MAX_NAMESPACE_BYTES: usize = 255;
/// Longest database name.
pub const MAX_DB_NAME_BYTES: usize = 63;

/// A collection's full name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Namespace {
    /// The database.
    pub db: String,
    /// The collection (dots allowed).
    pub coll: String,
}

impl Namespace {
    /// Validates and builds `db.coll`.
    pub fn new(db: &str, coll: &str) -> Result<Namespace, MongoError> {
        validate_db_name(db)?;
        validate_collection_name(coll)?;
        let ns = Namespace {
            db: db.to_owned(),
            coll: coll.to_owned(),
        };
        if ns.to_string().len() > MAX_NAMESPACE_BYTES {
            return Err(invalid(format!(
                "Fully qualified namespace is too long. Namespace: {ns} Max: {MAX_NAMESPACE_BYTES}"
            )));
        }
        Ok(ns)
    }

    /// Parses `db.coll` (the collection part may itself contain dots).
    pub fn parse(full: &str) -> Result<Namespace, MongoError> {
        match full.split_once('.') {
            Some((db, coll)) => Namespace::new(db, coll),
            None => Err(invalid(format!("Invalid namespace specified '{full}'"))),
        }
    }
}

impl fmt::Display for Namespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.db, self.coll)
    }
}

/// Database names: non-empty, at most 63 bytes, none of `/\. "$` or NUL.
pub fn validate_db_name(db: &str) -> Result<(), MongoError> {
    if db.is_empty() {
        return Err(invalid("database names cannot be empty"));
    }
    if db.len() > MAX_DB_NAME_BYTES {
        return Err(invalid(format!("db name '{db}' is too long")));
    }
    if let Some(c) = db.chars().find(|c| "/\\. \"$\0".contains(*c)) {
        return Err(invalid(format!(
            "Invalid database name: '{db}' (contains '{}')",
            c.escape_default()
        )));
    }
    Ok(())
}

/// Collection names: non-empty, no NUL, not starting with `.`, no `$` (but `system.` names are
/// allowed for the few MongoDB defines), not starting with `system.` otherwise.
pub fn validate_collection_name(coll: &str) -> Result<(), MongoError> {
    if coll.is_empty() {
        return Err(invalid(
            "Invalid namespace specified: collection name is empty",
        ));
    }
    if coll.contains('\0') {
        return Err(invalid(
            "collection names cannot contain the null character",
        ));
    }
    if coll.starts_with('.') || coll.ends_with('.') {
        return Err(invalid(format!("Invalid collection name: '{coll}'")));
    }
    if coll.contains('$') {
        return Err(invalid(format!(
            "Invalid collection name: {coll} (collection names cannot contain '$')"
        )));
    }
    Ok(())
}

fn invalid(message: impl Into<String>) -> MongoError {
    MongoError::new(ErrorCode::InvalidNamespace, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_and_invalid_names() {
        assert_eq!(
            Namespace::new("test", "a.b").expect("valid").to_string(),
            "test.a.b"
        );
        assert_eq!(
            Namespace::parse("db.x.y").expect("valid"),
            Namespace::new("db", "x.y").expect("valid")
        );
        for (db, coll) in [
            ("", "c"),
            ("a.b", "c"),
            ("a b", "c"),
            ("d", ""),
            ("d", "a$b"),
            ("d", ".a"),
        ] {
            let e = Namespace::new(db, coll).expect_err("invalid");
            assert_eq!(e.code.code(), 73, "{db}.{coll}");
        }
        assert!(Namespace::new("d", &"x".repeat(300)).is_err());
    }
}
