//! Pure document logic shared by the database and the server: MongoDB's error codes, MongoDB's
//! order over BSON values and the order-preserving index key encoding; raw BSON access, the
//! matcher, projection, update operators and aggregation as they are built. It knows no storage
//! and no wire protocol.

#![warn(missing_docs)]

pub mod aggregate;
pub mod collation;
pub mod compare;
pub mod compare_raw;
mod decimal;
pub mod depth;
pub mod error_code;
pub mod hashed;
pub mod keystring;
pub mod matcher;
pub mod mongo_error;
mod number;
pub mod projection;
pub mod raw_scan;
pub mod timeseries;
pub mod update;
pub mod variables;

pub use aggregate::{LookupResolver, Pipeline, RunOptions};
pub use collation::Collation;
pub use compare::{canonical_type_order, compare_documents, compare_values};
pub use compare_raw::{compare_raw_documents, compare_raw_values};
pub use depth::{check_depth, DepthError, MAX_STORAGE_DEPTH, MAX_WIRE_DEPTH};
pub use error_code::ErrorCode;
pub use keystring::{encode_key, encode_value, Direction, KEY_FORMAT_VERSION};
pub use matcher::{as_sent::filter_as_sent, Matcher};
pub use mongo_error::MongoError;
pub use number::{append_number, number_as_f64};
pub use projection::Projection;
pub use update::render::type_name;
pub use update::{
    operators_as_sent, upsert_seed, ApplyContext, ApplyOutcome, RawApply, StoredDocument,
    UpdateSpec,
};
pub use variables::Variables;
