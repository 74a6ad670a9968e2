//! Collection validators (mongod's document validation): a collection created with
//! `validator` (query operators; `$jsonSchema` is not built and is refused when the
//! validator is parsed), `validationLevel` (`strict`, the default: every insert and update;
//! `moderate`: updates of documents that already fail it are let through; `off`) and
//! `validationAction` (`error`, the default: the write fails with `DocumentValidationFailure`
//! (121) and an `errInfo` naming the document; `warn`: it is written and logged).
//!
//! `bypassDocumentValidation` is per operation, as mongod keeps it on its OperationContext:
//! the server runs a command that asks for it inside a [`BypassGuard`] on the thread that
//! runs the command, and every check on that thread lets the write through until the guard
//! drops.

use crate::Namespace;
use bson::{doc, Bson, Document, RawDocument};
use shale_doc::{ErrorCode, Matcher, MongoError};
use std::cell::Cell;

/// When a validator applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Strict,
    Moderate,
    Off,
}

/// What a failed validation does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Error,
    Warn,
}

/// A collection's parsed validator.
#[derive(Debug)]
pub struct Validator {
    matcher: Matcher,
    spec: Document,
    level: Level,
    action: Action,
}

thread_local! {
    static BYPASS: Cell<bool> = const { Cell::new(false) };
}

/// While alive, writes on this thread skip validation (`bypassDocumentValidation: true`).
pub struct BypassGuard(bool);

/// Skips validation on this thread until the guard drops (when `on`).
pub fn bypass_document_validation(on: bool) -> BypassGuard {
    BypassGuard(BYPASS.with(|b| b.replace(on)))
}

impl Drop for BypassGuard {
    fn drop(&mut self) {
        BYPASS.with(|b| b.set(self.0));
    }
}

impl Validator {
    /// The validator `create`'s `options` ask for; `None` without one (or with `{}`).
    /// A validator that does not parse, or a level or action mongod does not know, is
    /// refused here, so `create` refuses it.
    pub fn from_options(options: &Document) -> Result<Option<Validator>, MongoError> {
        let level = match options.get("validationLevel") {
            None => Level::Strict,
            Some(Bson::String(s)) => match s.as_str() {
                "strict" => Level::Strict,
                "moderate" => Level::Moderate,
                "off" => Level::Off,
                other => return Err(enum_error("validationLevel", other)),
            },
            Some(_) => return Err(type_error("validationLevel", "string")),
        };
        let action = match options.get("validationAction") {
            None => Action::Error,
            Some(Bson::String(s)) => match s.as_str() {
                "error" => Action::Error,
                "warn" => Action::Warn,
                other => return Err(enum_error("validationAction", other)),
            },
            Some(_) => return Err(type_error("validationAction", "string")),
        };
        let spec = match options.get("validator") {
            None => return Ok(None),
            Some(Bson::Document(d)) if d.is_empty() => return Ok(None),
            Some(Bson::Document(d)) => d.clone(),
            Some(_) => return Err(type_error("validator", "object")),
        };
        let raw = bson::RawDocumentBuf::from_document(&spec)
            .map_err(|e| MongoError::new(ErrorCode::BadValue, e.to_string()))?;
        let matcher = Matcher::parse(&raw)?;
        Ok(Some(Validator {
            matcher,
            spec,
            level,
            action,
        }))
    }

    /// Checks the document a write stores (`new`); `old` is the one it replaces, if any.
    pub fn check(
        &self,
        ns: &Namespace,
        new: &RawDocument,
        old: Option<&RawDocument>,
    ) -> Result<(), MongoError> {
        if self.level == Level::Off || BYPASS.with(Cell::get) {
            return Ok(());
        }
        if self.matcher.matches(new)? {
            return Ok(());
        }
        if let (Level::Moderate, Some(old)) = (self.level, old) {
            if !self.matcher.matches(old)? {
                return Ok(());
            }
        }
        let id = new
            .get("_id")
            .ok()
            .flatten()
            .and_then(|v| Bson::try_from(v.to_raw_bson()).ok())
            .unwrap_or(Bson::Null);
        if self.action == Action::Warn {
            tracing::warn!(%ns, id = %id, "Document would fail validation");
            return Ok(());
        }
        Err(MongoError::new(
            ErrorCode::DocumentValidationFailure,
            "Document failed validation",
        )
        .with_info(doc! {
            "errInfo": {
                "failingDocumentId": id,
                "details": {
                    "operatorName": "$and",
                    "specifiedAs": self.spec.clone(),
                    "reason": "the document does not match the collection's validator",
                },
            },
        }))
    }
}

fn enum_error(field: &str, value: &str) -> MongoError {
    MongoError::new(
        ErrorCode::BadValue,
        format!("Enumeration value '{value}' for field '{field}' is not a valid value."),
    )
}

fn type_error(field: &str, expected: &str) -> MongoError {
    MongoError::new(
        ErrorCode::TypeMismatch,
        format!("BSON field 'create.{field}' is the wrong type, expected type '{expected}'"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::RawDocumentBuf;

    fn raw(d: Document) -> RawDocumentBuf {
        RawDocumentBuf::from_document(&d).expect("raw")
    }

    fn ns() -> Namespace {
        Namespace::new("t", "c").expect("ns")
    }

    fn validator(options: Document) -> Validator {
        Validator::from_options(&options)
            .expect("parses")
            .expect("a validator")
    }

    #[test]
    fn strict_refuses_moderate_lets_invalid_documents_change_off_and_warn_let_all() {
        let spec = doc! {"a": {"$type": "int"}};
        let good = raw(doc! {"_id": 1, "a": 1});
        let bad = raw(doc! {"_id": 2, "a": "x"});
        let strict = validator(doc! {"validator": spec.clone()});
        assert!(strict.check(&ns(), &good, None).is_ok());
        let e = strict.check(&ns(), &bad, None).expect_err("refused");
        assert_eq!(e.code.code(), 121);
        let info = e.info.expect("errInfo");
        assert_eq!(
            info.get_document("errInfo")
                .expect("errInfo")
                .get("failingDocumentId"),
            Some(&Bson::Int32(2))
        );
        let moderate = validator(doc! {"validator": spec.clone(), "validationLevel": "moderate"});
        assert!(
            moderate.check(&ns(), &bad, Some(&bad)).is_ok(),
            "was invalid already"
        );
        assert!(
            moderate.check(&ns(), &bad, Some(&good)).is_err(),
            "was valid"
        );
        let off = validator(doc! {"validator": spec.clone(), "validationLevel": "off"});
        assert!(off.check(&ns(), &bad, None).is_ok());
        let warn = validator(doc! {"validator": spec.clone(), "validationAction": "warn"});
        assert!(warn.check(&ns(), &bad, None).is_ok());
        {
            let _bypass = bypass_document_validation(true);
            assert!(strict.check(&ns(), &bad, None).is_ok());
        }
        assert!(
            strict.check(&ns(), &bad, None).is_err(),
            "the guard restores the check"
        );
    }

    #[test]
    fn bad_options_are_refused_and_empty_ones_mean_none() {
        assert!(Validator::from_options(&doc! {}).expect("none").is_none());
        assert!(Validator::from_options(&doc! {"validator": {}})
            .expect("none")
            .is_none());
        let code = |o: Document| {
            Validator::from_options(&o)
                .expect_err("refused")
                .code
                .code()
        };
        assert_eq!(
            code(doc! {"validator": {"a": 1}, "validationLevel": "lax"}),
            2
        );
        assert_eq!(
            code(doc! {"validator": {"a": 1}, "validationAction": "shout"}),
            2
        );
        assert_eq!(code(doc! {"validator": 5}), 14);
        assert!(Validator::from_options(&doc! {"validator": {"a": {"$nope": 1}}}).is_err());
    }
}
