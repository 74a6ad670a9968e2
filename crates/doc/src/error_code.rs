//! MongoDB's error codes and their `codeName`s, in one table, and the error value that every
//! layer above the engine returns to a client. Codes follow MongoDB 7.0's `error_codes.yml`.

/// A MongoDB error code with its canonical name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    InternalError,
    BadValue,
    NoSuchKey,
    FailedToParse,
    TypeMismatch,
    InvalidLength,
    NamespaceNotFound,
    CursorNotFound,
    CommandNotFound,
    InvalidNamespace,
    NamespaceExists,
    IndexNotFound,
    WriteConflict,
    InvalidOptions,
    DuplicateKey,
    Unauthorized,
    ProtocolError,
    BSONObjectTooLarge,
    DataCorruptionDetected,
}

impl ErrorCode {
    /// Numeric code as sent in `code`.
    pub fn code(self) -> i32 {
        match self {
            ErrorCode::InternalError => 1,
            ErrorCode::BadValue => 2,
            ErrorCode::NoSuchKey => 4,
            ErrorCode::FailedToParse => 9,
            ErrorCode::Unauthorized => 13,
            ErrorCode::TypeMismatch => 14,
            ErrorCode::InvalidLength => 16,
            ErrorCode::NamespaceNotFound => 26,
            ErrorCode::IndexNotFound => 27,
            ErrorCode::CursorNotFound => 43,
            ErrorCode::NamespaceExists => 48,
            ErrorCode::CommandNotFound => 59,
            ErrorCode::InvalidNamespace => 73,
            ErrorCode::InvalidOptions => 72,
            ErrorCode::WriteConflict => 112,
            ErrorCode::DataCorruptionDetected => 301,
            ErrorCode::BSONObjectTooLarge => 10334,
            ErrorCode::DuplicateKey => 11000,
            ErrorCode::ProtocolError => 17,
        }
    }

    /// Canonical name as sent in `codeName`.
    pub fn name(self) -> &'static str {
        match self {
            ErrorCode::InternalError => "InternalError",
            ErrorCode::BadValue => "BadValue",
            ErrorCode::NoSuchKey => "NoSuchKey",
            ErrorCode::FailedToParse => "FailedToParse",
            ErrorCode::Unauthorized => "Unauthorized",
            ErrorCode::TypeMismatch => "TypeMismatch",
            ErrorCode::InvalidLength => "InvalidLength",
            ErrorCode::NamespaceNotFound => "NamespaceNotFound",
            ErrorCode::IndexNotFound => "IndexNotFound",
            ErrorCode::CursorNotFound => "CursorNotFound",
            ErrorCode::NamespaceExists => "NamespaceExists",
            ErrorCode::CommandNotFound => "CommandNotFound",
            ErrorCode::InvalidNamespace => "InvalidNamespace",
            ErrorCode::InvalidOptions => "InvalidOptions",
            ErrorCode::WriteConflict => "WriteConflict",
            ErrorCode::DataCorruptionDetected => "DataCorruptionDetected",
            ErrorCode::BSONObjectTooLarge => "BSONObjectTooLarge",
            ErrorCode::DuplicateKey => "DuplicateKey",
            ErrorCode::ProtocolError => "ProtocolError",
        }
    }
}

/// An error to report to a client: code, `codeName` and message.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{} ({}): {message}", code.name(), code.code())]
pub struct MongoError {
    pub code: ErrorCode,
    pub message: String,
}

impl MongoError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        MongoError {
            code,
            message: message.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ErrorCode::*;

    #[test]
    fn codes_match_mongodb() {
        assert_eq!(CommandNotFound.code(), 59);
        assert_eq!(CommandNotFound.name(), "CommandNotFound");
        assert_eq!(DuplicateKey.code(), 11000);
        assert_eq!(WriteConflict.code(), 112);
        assert_eq!(NamespaceNotFound.code(), 26);
        assert_eq!(CursorNotFound.code(), 43);
        assert_eq!(DataCorruptionDetected.code(), 301);
        assert_eq!(BSONObjectTooLarge.code(), 10334);
    }
}
