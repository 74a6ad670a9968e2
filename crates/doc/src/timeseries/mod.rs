//! Time series collections' pure parts (MongoDB 5.0's `timeseries`, as mongod 7.0 has
//! them; docs/design-timeseries.md): the `create` option and its checks (`options.rs`), the
//! bucket documents measurements are stored in (`bucket.rs`), and the BSONColumn format of
//! mongod's compressed buckets, read (`column.rs`; each stream's values in `column_stream.rs`,
//! its Simple-8b blocks in `simple8b.rs`).
//! Which bucket a measurement joins, and the collections that hold them, are the database's
//! (`shale_db::timeseries`).

pub mod bucket;
pub mod column;
mod column_stream;
pub mod options;
pub mod simple8b;

pub use bucket::{unpack, Bucket, UnpackSpec};
pub use options::{Granularity, TimeseriesOptions};
