//! `$_internalUnpackBucket`: the stage a time series collection's view runs over its
//! buckets collection, turning each bucket into its measurements (`timeseries::bucket`).
//! Its spec is mongod's: `{timeField, metaField?, bucketMaxSpanSeconds?}` (mongod's
//! optimiser-only fields `include`, `exclude`, `assumeNoMixedSchemaData`, `computedMetaProjFields`
//! and `usesExtendedRange` are accepted and read as mongod reads them when they change
//! nothing: a projection is refused rather than ignored).

use bson::raw::RawBsonRef;

use crate::matcher::path::bson_error;
use crate::timeseries::UnpackSpec;
use crate::{ErrorCode, MongoError};

fn failed(why: impl Into<String>) -> MongoError {
    MongoError::new(ErrorCode::FailedToParse, why)
}

/// Parse the stage's spec.
pub(crate) fn parse(spec: RawBsonRef<'_>) -> Result<UnpackSpec, MongoError> {
    let RawBsonRef::Document(spec) = spec else {
        return Err(failed(
            "$_internalUnpackBucket specification must be an object",
        ));
    };
    let mut time_field = None;
    let mut meta_field = None;
    for field in spec {
        let (name, value) = field.map_err(bson_error)?;
        match (name, value) {
            ("timeField", RawBsonRef::String(s)) => time_field = Some(s.to_owned()),
            ("metaField", RawBsonRef::String(s)) => meta_field = Some(s.to_owned()),
            ("timeField" | "metaField", _) => {
                return Err(failed(format!(
                    "{name} field must be a single-element field path string"
                )))
            }
            ("bucketMaxSpanSeconds", RawBsonRef::Int32(n)) if n > 0 => {}
            ("bucketMaxSpanSeconds", _) => {
                return Err(failed(
                    "bucketMaxSpanSeconds field must be an integer greater than 0",
                ))
            }
            ("assumeNoMixedSchemaData" | "usesExtendedRange", RawBsonRef::Boolean(_)) => {}
            ("include" | "exclude" | "computedMetaProjFields", RawBsonRef::Array(a))
                if a.into_iter().next().is_none() => {}
            _ => {
                return Err(failed(format!(
                    "unrecognized option to $_internalUnpackBucket: {name}"
                )))
            }
        }
    }
    let time_field = time_field
        .ok_or_else(|| failed("The $_internalUnpackBucket stage requires a timeField parameter"))?;
    Ok(UnpackSpec {
        time_field,
        meta_field,
    })
}
