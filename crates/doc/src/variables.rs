//! The variables an aggregation expression reads besides its document, as MongoDB 7.0 binds
//! them for one command: `$$NOW` (a date) and `$$CLUSTER_TIME` (a timestamp), fixed when the
//! command starts so every document, stage and statement of it sees the same value, and the
//! user variables of the command's `let` (find, aggregate, update, delete, findAndModify) and
//! of a `$lookup`'s `let`.
//!
//! Every parser that reads expressions (filters' `$expr`, pipelines, pipeline updates,
//! projections) takes a `&Variables`; a reference to one of its variables parses to the value
//! itself, so evaluation needs nothing more. `$let` variables, whose values depend on the
//! document, are the expression evaluator's own (`matcher::expr`).
//!
//! A command's `let` follows mongod's `seedVariablesWithLetParameters`: each value is an
//! expression evaluated once, before any document is read (a field reference is 4890500), and
//! may read the variables defined before it; a name must be a valid user variable name
//! (16866-16868, "Invalid 'let' parameter :: caused by :: ..."), and the system variables
//! (`NOW`, `CLUSTER_TIME`, ...) may not be set by a client (4738901).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use bson::raw::{RawBson, RawDocument, RawDocumentBuf};
use bson::{DateTime, Timestamp};

use crate::collation::Collation;
use crate::matcher::expr::Expr;
use crate::matcher::path::bson_error;
use crate::{ErrorCode, MongoError};

/// The variables one command's expressions read, and the collation its comparisons use
/// (mongod keeps both in the command's `ExpressionContext`). Cheap to clone (shared).
#[derive(Debug, Clone)]
pub struct Variables {
    inner: Arc<Inner>,
    /// `None`: the command named no collation (the collection's default applies);
    /// `Some(None)`: the simple collation; `Some(Some(c))`: collation `c`.
    collation: Option<Option<Arc<Collation>>>,
}

#[derive(Debug)]
struct Inner {
    now: DateTime,
    cluster_time: Timestamp,
    /// User variables in binding order: a later binding of a name hides an earlier one.
    /// `None` is a missing value (a `let` expression that gave nothing).
    bindings: Vec<(String, Option<RawBson>)>,
}

impl Default for Variables {
    /// `Variables::new()`: the current time and no user variables.
    fn default() -> Self {
        Variables::new()
    }
}

/// `$redact`'s variables and their values: what its expression returns at each level.
pub(crate) const REDACT_ANSWERS: &[(&str, &str)] =
    &[("DESCEND", "descend"), ("PRUNE", "prune"), ("KEEP", "keep")];

/// The system variables MongoDB reserves that a client may not set through `let`.
const SYSTEM_VARIABLES: &[&str] = &["NOW", "CLUSTER_TIME", "JS_SCOPE", "IS_MR", "USER_ROLES"];

impl Variables {
    /// The variables of a command starting now: `$$NOW` is the current time and
    /// `$$CLUSTER_TIME` a fresh timestamp (`next_timestamp`); no user variables.
    pub fn new() -> Variables {
        Variables::at(DateTime::now(), next_timestamp())
    }

    /// Fixed system values (tests, reproducible runs).
    pub fn at(now: DateTime, cluster_time: Timestamp) -> Variables {
        Variables {
            inner: Arc::new(Inner {
                now,
                cluster_time,
                bindings: Vec::new(),
            }),
            collation: None,
        }
    }

    /// These variables with the command's collation set (`None` = simple).
    pub fn with_collation(&self, collation: Option<Arc<Collation>>) -> Variables {
        Variables {
            inner: Arc::clone(&self.inner),
            collation: Some(collation),
        }
    }

    /// Whether the command named a collation (`simple` included).
    pub fn collation_given(&self) -> bool {
        self.collation.is_some()
    }

    /// The collation comparisons use: `None` for the simple (binary) one.
    pub fn collation(&self) -> Option<&Arc<Collation>> {
        self.collation.as_ref().and_then(Option::as_ref)
    }

    /// `$$NOW`.
    pub fn now(&self) -> DateTime {
        self.inner.now
    }

    /// `$$CLUSTER_TIME`.
    pub fn cluster_time(&self) -> Timestamp {
        self.inner.cluster_time
    }

    /// Whether any user variable is bound.
    pub fn has_user_variables(&self) -> bool {
        !self.inner.bindings.is_empty()
    }

    /// These variables plus a command's `let` document, bound in order (see the file's
    /// comment for the rules and errors).
    pub fn with_let(&self, spec: &RawDocument) -> Result<Variables, MongoError> {
        let mut out = self.clone();
        let empty = RawDocumentBuf::new();
        for item in spec.iter() {
            let (name, value) = item.map_err(bson_error)?;
            check_let_name(name)?;
            let expr = Expr::parse_in(value, &out)?;
            if expr.reads_document() {
                return Err(MongoError::new(
                    ErrorCode::Location4890500,
                    "Command let Expression tried to access a field, but this is not allowed \
                     because Command let Expressions run before the query examines any \
                     documents.",
                ));
            }
            let value = expr.evaluate(&empty)?.as_raw().map(|v| v.to_raw_bson());
            out = out.with_bindings(vec![(name.to_owned(), value)]);
        }
        Ok(out)
    }

    /// These variables plus an update statement's constants (`c`): each value bound as it
    /// is, never evaluated (a string "$a" stays a string), under the names `let` allows.
    pub fn with_constants(&self, spec: &RawDocument) -> Result<Variables, MongoError> {
        let mut more = Vec::new();
        for item in spec.iter() {
            let (name, value) = item.map_err(bson_error)?;
            check_let_name(name)?;
            more.push((name.to_owned(), Some(value.to_raw_bson())));
        }
        Ok(self.with_bindings(more))
    }

    /// These variables plus `more` (a `$lookup`'s `let` values for one input document).
    pub(crate) fn with_bindings(&self, more: Vec<(String, Option<RawBson>)>) -> Variables {
        if more.is_empty() {
            return self.clone();
        }
        let mut bindings = self.inner.bindings.clone();
        bindings.extend(more);
        Variables {
            inner: Arc::new(Inner {
                now: self.inner.now,
                cluster_time: self.inner.cluster_time,
                bindings,
            }),
            collation: self.collation.clone(),
        }
    }

    /// These variables plus `$redact`'s three answers, `$$DESCEND`, `$$PRUNE` and `$$KEEP`,
    /// bound to the strings mongod gives them (`DocumentSourceRedact::createFromBson` defines
    /// them for its expression only; anywhere else they are undefined, 17276).
    pub(crate) fn with_redact_answers(&self) -> Variables {
        self.with_bindings(
            REDACT_ANSWERS
                .iter()
                .map(|(name, value)| {
                    (
                        (*name).to_owned(),
                        Some(RawBson::String((*value).to_owned())),
                    )
                })
                .collect(),
        )
    }

    /// The user variable `name`: `None` when unbound, `Some(None)` when bound to a missing
    /// value.
    pub(crate) fn user(&self, name: &str) -> Option<Option<&RawBson>> {
        self.inner
            .bindings
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_ref())
    }
}

/// A fresh timestamp: the current second, and an increment unique within this process (what
/// `$$CLUSTER_TIME` holds, and what an inserted zero timestamp becomes).
pub fn next_timestamp() -> Timestamp {
    static INCREMENT: AtomicU32 = AtomicU32::new(1);
    let time = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u32::try_from(d.as_secs()).unwrap_or(u32::MAX));
    let increment = INCREMENT.fetch_add(1, Ordering::Relaxed);
    Timestamp { time, increment }
}

/// A `let` name: a user variable name (or `CURRENT`, which a client may rebind); a system
/// variable is 4738901; anything else fails with its name error, in mongod's context.
pub(crate) fn check_let_name(name: &str) -> Result<(), MongoError> {
    if let Err(e) = check_user_write_name(name) {
        if SYSTEM_VARIABLES.contains(&name) {
            return Err(MongoError::new(
                ErrorCode::Location4738901,
                format!("Attempt to set internal constant: {name}"),
            ));
        }
        return Err(MongoError::new(
            e.code,
            format!("Invalid 'let' parameter :: caused by :: {}", e.message),
        ));
    }
    Ok(())
}

/// mongod's `validateNameForUserWrite`: `CURRENT`, or a lowercase ASCII letter or a non-ASCII
/// character first, then ASCII letters, digits, `_` or non-ASCII characters (16866-16868).
pub(crate) fn check_user_write_name(name: &str) -> Result<(), MongoError> {
    if name == "CURRENT" {
        return Ok(());
    }
    check_name(name, |c| c.is_ascii_lowercase())
}

/// mongod's `validateNameForUserRead`: as for writing, but an uppercase first letter is
/// allowed too (the system variables), with the same codes.
pub(crate) fn check_user_read_name(name: &str) -> Result<(), MongoError> {
    check_name(name, |c| c.is_ascii_alphabetic())
}

fn check_name(name: &str, first_ascii_ok: impl Fn(char) -> bool) -> Result<(), MongoError> {
    let Some(first) = name.chars().next() else {
        return Err(MongoError::new(
            ErrorCode::Location16866,
            "empty variable names are not allowed",
        ));
    };
    if first.is_ascii() && !first_ascii_ok(first) {
        return Err(MongoError::new(
            ErrorCode::Location16867,
            format!("'{name}' starts with an invalid character for a user variable name"),
        ));
    }
    if let Some(bad) = name
        .chars()
        .skip(1)
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || !c.is_ascii()))
    {
        return Err(MongoError::new(
            ErrorCode::Location16868,
            format!("'{name}' contains an invalid character for a variable name: '{bad}'"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, Bson, Document};

    fn raw(d: Document) -> RawDocumentBuf {
        RawDocumentBuf::from_document(&d).expect("encodes")
    }

    fn bound(vars: &Variables, name: &str) -> Option<Bson> {
        vars.user(name)
            .expect("bound")
            .map(|v| Bson::try_from(v.clone()).expect("converts"))
    }

    #[test]
    fn names_follow_mongods_rules() {
        let code = |r: Result<(), MongoError>| r.unwrap_err().code.code();
        assert_eq!(code(check_user_write_name("")), 16866);
        assert_eq!(code(check_user_write_name("Abc")), 16867);
        assert_eq!(code(check_user_write_name("_a")), 16867);
        assert_eq!(code(check_user_write_name("a-b")), 16868);
        assert!(check_user_write_name("order_qty2").is_ok());
        assert!(check_user_write_name("été").is_ok());
        assert!(check_user_write_name("CURRENT").is_ok());
        assert!(check_user_read_name("NOW").is_ok());
        assert_eq!(code(check_user_read_name("_id")), 16867);
        assert_eq!(code(check_user_read_name("a.b")), 16868);
    }

    #[test]
    fn let_values_are_evaluated_once_in_order() {
        let base = Variables::at(
            DateTime::from_millis(5_000),
            Timestamp {
                time: 5,
                increment: 1,
            },
        );
        let vars = base
            .with_let(&raw(doc! {
                "id": 1,
                "x": {"$add": ["$$id", 1]},
                "y": {"$literal": "$bar"},
                "n": "$$NOW",
                "gone": "$$REMOVE",
            }))
            .expect("binds");
        assert_eq!(bound(&vars, "id"), Some(Bson::Int32(1)));
        assert_eq!(bound(&vars, "x"), Some(Bson::Int32(2)));
        assert_eq!(bound(&vars, "y"), Some(Bson::String("$bar".into())));
        assert_eq!(
            bound(&vars, "n"),
            Some(Bson::DateTime(DateTime::from_millis(5_000)))
        );
        assert_eq!(bound(&vars, "gone"), None);
        assert!(vars.user("other").is_none());
        assert!(!base.has_user_variables() && vars.has_user_variables());
    }

    #[test]
    fn let_errors_are_mongods() {
        let vars = Variables::new();
        let err = |d: Document| vars.with_let(&raw(d)).unwrap_err();
        let e = err(doc! {"Bad": 1});
        assert_eq!(e.code.code(), 16867);
        assert_eq!(
            e.message,
            "Invalid 'let' parameter :: caused by :: 'Bad' starts with an invalid character for \
             a user variable name"
        );
        assert_eq!(err(doc! {"a b": 1}).code.code(), 16868);
        assert_eq!(err(doc! {"NOW": 1}).code.code(), 4738901);
        assert_eq!(err(doc! {"x": "$a"}).code.code(), 4890500);
        assert_eq!(err(doc! {"x": "$$ROOT"}).code.code(), 4890500);
        assert_eq!(err(doc! {"x": "$$y"}).code.code(), 17276);
        assert_eq!(err(doc! {"x": {"$nope": 1}}).code.code(), 168);
    }

    #[test]
    fn timestamps_are_unique() {
        let (a, b) = (next_timestamp(), next_timestamp());
        assert_ne!(a, b);
        assert!(a.time > 1_600_000_000);
    }
}
