//! The error value every layer above the engine returns to a client: a code from
//! `error_code.rs`, a message, and the extra reply fields some errors carry. Building the
//! reply document from it is the server's work.

use crate::error_code::ErrorCode;

/// An error to report to a client: code, `codeName` and message.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{} ({}): {message}", code.name(), code.code())]
pub struct MongoError {
    /// The error code (and so the `codeName`).
    pub code: ErrorCode,
    /// The message for `errmsg`.
    pub message: String,
    /// Extra reply fields some errors carry (a duplicate key's `keyPattern` and `keyValue`).
    pub info: Option<Box<bson::Document>>,
}

impl MongoError {
    /// An error with `code` and `message` and no extra fields.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        MongoError {
            code,
            message: message.into(),
            info: None,
        }
    }

    /// The error with extra reply fields.
    pub fn with_info(mut self, info: bson::Document) -> Self {
        self.info = Some(Box::new(info));
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_the_code() {
        let e = MongoError::new(ErrorCode::DuplicateKey, "dup");
        assert_eq!(e.to_string(), "DuplicateKey (11000): dup");
        let e = e.with_info(bson::doc! {"keyValue": {"_id": 1}});
        assert!(e.info.is_some());
    }
}
