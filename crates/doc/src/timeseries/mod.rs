//! Time series collections' pure parts (MongoDB 5.0's `timeseries`, as mongod 7.0 has
//! them; docs/design-timeseries.md): the `create` option and its checks (`options.rs`), and
//! the bucket documents measurements are stored in (`bucket.rs`). Which bucket a measurement
//! joins, and the collections that hold them, are the database's (`shale_db::timeseries`).

pub mod bucket;
pub mod options;

pub use bucket::{unpack, Bucket, UnpackSpec};
pub use options::{Granularity, TimeseriesOptions};
