//! Pure document logic shared by the database and the server: MongoDB's error codes today;
//! raw BSON access, key encoding, the matcher, projection, update operators and aggregation
//! as they are built. It knows no storage and no wire protocol.

pub mod error_code;

pub use error_code::{ErrorCode, MongoError};
