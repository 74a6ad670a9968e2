//! `create`'s `timeseries` option as mongod 7.0 parses and checks it (its IDL
//! `TimeseriesOptions`, then `validateAndSetBucketingParameters`; docs/design-timeseries.md
//! §1), the stored form `listCollections` shows (§2), and `collMod`'s granularity and bucket
//! span transitions (§7).

use crate::{type_name, ErrorCode, MongoError};
use bson::{doc, Bson, Document};

/// `timeseries.granularity`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Granularity {
    /// Buckets span an hour, rounded to the minute.
    Seconds,
    /// Buckets span a day, rounded to the hour.
    Minutes,
    /// Buckets span 30 days, rounded to the day.
    Hours,
}

impl Granularity {
    fn parse(name: &str, path: &str) -> Result<Granularity, MongoError> {
        match name {
            "seconds" => Ok(Granularity::Seconds),
            "minutes" => Ok(Granularity::Minutes),
            "hours" => Ok(Granularity::Hours),
            other => Err(MongoError::new(
                ErrorCode::BadValue,
                format!("Enumeration value '{other}' for field '{path}' is not a valid value."),
            )),
        }
    }

    /// Its name as stored and listed.
    pub fn name(self) -> &'static str {
        match self {
            Granularity::Seconds => "seconds",
            Granularity::Minutes => "minutes",
            Granularity::Hours => "hours",
        }
    }

    /// mongod's default bucket span for this granularity, in seconds.
    pub fn max_span_seconds(self) -> i32 {
        match self {
            Granularity::Seconds => 3600,
            Granularity::Minutes => 86_400,
            Granularity::Hours => 2_592_000,
        }
    }

    /// mongod's bucket rounding for this granularity, in seconds.
    pub fn rounding_seconds(self) -> i32 {
        match self {
            Granularity::Seconds => 60,
            Granularity::Minutes => 3600,
            Granularity::Hours => 86_400,
        }
    }
}

/// A time series collection's options, normalised as mongod stores them: with a
/// granularity the span is its default and no rounding is kept; without one, span and
/// rounding are equal and both kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimeseriesOptions {
    /// The field holding each measurement's time (a BSON date).
    pub time_field: String,
    /// The field whose value groups measurements into buckets, if any.
    pub meta_field: Option<String>,
    /// The granularity, unless custom bucket seconds were given.
    pub granularity: Option<Granularity>,
    /// Custom rounding (only without a granularity).
    pub bucket_rounding_seconds: Option<i32>,
    /// The most time one bucket spans.
    pub bucket_max_span_seconds: i32,
}

fn invalid(why: impl Into<String>) -> MongoError {
    MongoError::new(ErrorCode::InvalidOptions, why)
}

fn wrong_type(path: &str, value: &Bson, expected: &str) -> MongoError {
    MongoError::new(
        ErrorCode::TypeMismatch,
        format!(
            "BSON field '{path}' is the wrong type '{}', expected type '{expected}'",
            type_name(value)
        ),
    )
}

/// An IDL `safeInt` of at least 1.
fn positive_int(path: &str, field: &str, value: &Bson) -> Result<i32, MongoError> {
    let n = match value {
        Bson::Int32(n) => i64::from(*n),
        Bson::Int64(n) => *n,
        Bson::Double(d) if d.fract() == 0.0 && d.abs() < 1e18 => *d as i64,
        other => return Err(wrong_type(path, other, "int")),
    };
    if n < 1 {
        return Err(MongoError::new(
            ErrorCode::Location51024,
            format!("BSON field '{field}' value must be >= 1, actual value '{n}'"),
        ));
    }
    i32::try_from(n).map_err(|_| wrong_type(path, value, "int"))
}

/// The fields as given, before the bucketing rules.
#[derive(Default)]
struct Given {
    time_field: Option<String>,
    meta_field: Option<String>,
    granularity: Option<Granularity>,
    rounding: Option<i32>,
    max_span: Option<i32>,
}

fn parse_fields(command: &str, value: &Bson) -> Result<Given, MongoError> {
    let base = format!("{command}.timeseries");
    let Bson::Document(spec) = value else {
        return Err(wrong_type(&base, value, "object"));
    };
    let mut given = Given::default();
    for (k, v) in spec {
        let path = format!("{base}.{k}");
        let string = |v: &Bson| match v {
            Bson::String(s) => Ok(s.clone()),
            other => Err(wrong_type(&path, other, "string")),
        };
        match k.as_str() {
            "timeField" => given.time_field = Some(string(v)?),
            "metaField" => given.meta_field = Some(string(v)?),
            "granularity" => given.granularity = Some(Granularity::parse(&string(v)?, &path)?),
            "bucketRoundingSeconds" => given.rounding = Some(positive_int(&path, k, v)?),
            "bucketMaxSpanSeconds" => given.max_span = Some(positive_int(&path, k, v)?),
            _ => {
                return Err(MongoError::new(
                    ErrorCode::Location40415,
                    format!("BSON field '{path}' is an unknown field."),
                ))
            }
        }
    }
    Ok(given)
}

impl TimeseriesOptions {
    /// `create`'s `timeseries` for collection `ns`: the IDL's type checks, then mongod's
    /// field and bucketing checks, in mongod's order.
    pub fn parse(value: &Bson, ns: &str) -> Result<TimeseriesOptions, MongoError> {
        let given = parse_fields("create", value)?;
        let Some(time_field) = given.time_field.clone() else {
            return Err(MongoError::new(
                ErrorCode::Location40414,
                "BSON field 'create.timeseries.timeField' is missing but a required field",
            ));
        };
        if time_field.contains('.') {
            return Err(invalid(format!(
                "{ns}: 'timeField' must be a top-level field and not contain a '.'"
            )));
        }
        if let Some(meta) = &given.meta_field {
            if meta == "_id" {
                return Err(invalid("'metaField' cannot be \"_id\""));
            }
            if *meta == time_field {
                return Err(invalid("'metaField' cannot be the same as 'timeField'"));
            }
            if meta.contains('.') {
                return Err(invalid(format!(
                    "{ns}: 'metaField' must be a top-level field and not contain a '.'"
                )));
            }
        }
        let (granularity, rounding, max_span) = bucketing(&given)?;
        Ok(TimeseriesOptions {
            time_field,
            meta_field: given.meta_field,
            granularity,
            bucket_rounding_seconds: rounding,
            bucket_max_span_seconds: max_span,
        })
    }

    /// The options as stored and listed, in mongod's field order.
    pub fn to_document(&self) -> Document {
        let mut d = doc! { "timeField": self.time_field.clone() };
        if let Some(m) = &self.meta_field {
            d.insert("metaField", m.clone());
        }
        if let Some(g) = self.granularity {
            d.insert("granularity", g.name());
        }
        if let Some(r) = self.bucket_rounding_seconds {
            d.insert("bucketRoundingSeconds", r);
        }
        d.insert("bucketMaxSpanSeconds", self.bucket_max_span_seconds);
        d
    }

    /// Options read back from `to_document`'s form (a catalog record).
    pub fn from_document(stored: &Document) -> Result<TimeseriesOptions, MongoError> {
        let given = parse_fields("timeseries", &Bson::Document(stored.clone()))?;
        let corrupt = || {
            MongoError::new(
                ErrorCode::DataCorruptionDetected,
                format!("stored time series options are incomplete: {stored}"),
            )
        };
        Ok(TimeseriesOptions {
            time_field: given.time_field.ok_or_else(corrupt)?,
            meta_field: given.meta_field,
            granularity: given.granularity,
            bucket_rounding_seconds: given.rounding,
            bucket_max_span_seconds: given.max_span.ok_or_else(corrupt)?,
        })
    }

    /// How far a bucket's start is rounded down, in seconds.
    pub fn rounding_seconds(&self) -> i64 {
        match (self.bucket_rounding_seconds, self.granularity) {
            (Some(r), _) => i64::from(r),
            (None, Some(g)) => i64::from(g.rounding_seconds()),
            (None, None) => i64::from(self.bucket_max_span_seconds),
        }
    }

    /// The `$_internalUnpackBucket` stage that reads this collection's buckets.
    pub fn unpack_stage(&self) -> Document {
        let mut spec = doc! { "timeField": self.time_field.clone() };
        if let Some(m) = &self.meta_field {
            spec.insert("metaField", m.clone());
        }
        spec.insert("bucketMaxSpanSeconds", self.bucket_max_span_seconds);
        doc! { "$_internalUnpackBucket": spec }
    }

    /// `collMod`'s `timeseries`: a granularity that only grows (seconds → minutes → hours),
    /// or custom span and rounding, equal, that only grow. The same values are a no-op.
    pub fn coll_mod(&self, value: &Bson) -> Result<TimeseriesOptions, MongoError> {
        let given = parse_fields("collMod", value)?;
        if given.time_field.is_some() || given.meta_field.is_some() {
            return Err(invalid(
                "Only 'granularity', 'bucketMaxSpanSeconds' and 'bucketRoundingSeconds' \
                 may be changed",
            ));
        }
        let mut next = self.clone();
        if let Some(g) = given.granularity {
            coll_mod_granularity(self, g, &given)?;
            next.granularity = Some(g);
            next.bucket_rounding_seconds = None;
            next.bucket_max_span_seconds = g.max_span_seconds();
            return Ok(next);
        }
        let (span, rounding) = match (given.max_span, given.rounding) {
            (None, None) => return Ok(next),
            (Some(s), Some(r)) => (s, r),
            _ => return Err(alongside()),
        };
        if span != rounding {
            return Err(rounding_equal());
        }
        if span < self.bucket_max_span_seconds {
            return Err(invalid(
                "Timeseries 'bucketMaxSpanSeconds' needs to be equal or greater to transition",
            ));
        }
        if i64::from(rounding) < self.rounding_seconds() {
            return Err(invalid(
                "Timeseries 'bucketRoundingSeconds' needs to be equal or greater to transition",
            ));
        }
        next.granularity = None;
        next.bucket_rounding_seconds = Some(rounding);
        next.bucket_max_span_seconds = span;
        Ok(next)
    }
}

fn alongside() -> MongoError {
    invalid(
        "Timeseries 'bucketMaxSpanSeconds' and 'bucketRoundingSeconds' need to be set \
         alongside each other",
    )
}

fn rounding_equal() -> MongoError {
    invalid("Timeseries 'bucketRoundingSeconds' needs to be equal to 'bucketMaxSpanSeconds'")
}

/// `validateAndSetBucketingParameters`: (granularity, rounding kept, span).
fn bucketing(given: &Given) -> Result<(Option<Granularity>, Option<i32>, i32), MongoError> {
    match (given.granularity, given.max_span, given.rounding) {
        (Some(g), span, rounding) => {
            if span.is_some_and(|s| s != g.max_span_seconds()) {
                return Err(invalid(format!(
                    "Timeseries 'bucketMaxSpanSeconds' is not configurable to a value other \
                     than the default of {} for the provided granularity",
                    g.max_span_seconds()
                )));
            }
            if rounding.is_some_and(|r| r != g.rounding_seconds()) {
                return Err(invalid(format!(
                    "Timeseries 'bucketRoundingSeconds' is not configurable to a value other \
                     than the default of {} for the provided granularity",
                    g.rounding_seconds()
                )));
            }
            Ok((Some(g), None, g.max_span_seconds()))
        }
        (None, None, None) => Ok((
            Some(Granularity::Seconds),
            None,
            Granularity::Seconds.max_span_seconds(),
        )),
        (None, Some(s), Some(r)) if s == r => Ok((None, Some(r), s)),
        (None, Some(_), Some(_)) => Err(rounding_equal()),
        (None, _, _) => Err(alongside()),
    }
}

/// A granularity change: only coarser, and custom seconds beside it only at its defaults.
fn coll_mod_granularity(
    current: &TimeseriesOptions,
    to: Granularity,
    given: &Given,
) -> Result<(), MongoError> {
    if given.max_span.is_some_and(|s| s != to.max_span_seconds()) {
        return Err(invalid(
            "Timeseries 'bucketMaxSpanSeconds' is not configurable to a value other than the \
             default for the provided granularity",
        ));
    }
    if given.rounding.is_some_and(|r| r != to.rounding_seconds()) {
        return Err(invalid(
            "Timeseries 'bucketRoundingSeconds' is not configurable to a value other than the \
             default for the provided granularity",
        ));
    }
    let allowed = match current.granularity {
        Some(from) => from <= to,
        // From custom seconds, a granularity whose span and rounding are no smaller.
        None => {
            i64::from(to.rounding_seconds()) >= current.rounding_seconds()
                && to.max_span_seconds() >= current.bucket_max_span_seconds
        }
    };
    if !allowed {
        return Err(invalid(
            "Invalid transition for timeseries.granularity. Can only transition from \
             'seconds' to 'minutes' or 'minutes' to 'hours'.",
        ));
    }
    Ok(())
}

/// Every `create` option mongod 7.0 allows beside `timeseries`
/// (`kAllowedCollectionCreationOptions`); generic command arguments are checked elsewhere.
pub const ALLOWED_CREATE_OPTIONS: &[&str] = &[
    "storageEngine",
    "indexOptionDefaults",
    "collation",
    "timeseries",
    "expireAfterSeconds",
    "temp",
];

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(spec: Document) -> Result<TimeseriesOptions, MongoError> {
        TimeseriesOptions::parse(&Bson::Document(spec), "db.ts")
    }

    fn code(spec: Document) -> i32 {
        parse(spec).expect_err("refused").code.code()
    }

    #[test]
    fn defaults_to_seconds_and_an_hour() {
        let o = parse(doc! {"timeField": "t"}).expect("valid");
        assert_eq!(
            o.to_document(),
            doc! {"timeField": "t", "granularity": "seconds", "bucketMaxSpanSeconds": 3600}
        );
        assert_eq!(o.rounding_seconds(), 60);
        let back = TimeseriesOptions::from_document(&o.to_document()).expect("stored");
        assert_eq!(back, o);
    }

    #[test]
    fn idl_errors_as_mongod() {
        assert_eq!(
            TimeseriesOptions::parse(&Bson::String(String::new()), "db.ts")
                .expect_err("type")
                .code
                .code(),
            14
        );
        assert_eq!(code(doc! {"timeField": 100}), 14);
        assert_eq!(code(doc! {"timeField": "t", "metaField": 100}), 14);
        assert_eq!(code(doc! {"timeField": "t", "invalidOption": 1}), 40415);
        assert_eq!(code(doc! {"metaField": "m"}), 40414);
        assert_eq!(code(doc! {"timeField": "t", "granularity": "days"}), 2);
        assert_eq!(
            code(doc! {"timeField": "t", "bucketMaxSpanSeconds": -1, "bucketRoundingSeconds": -1}),
            51024
        );
    }

    #[test]
    fn field_rules() {
        assert_eq!(code(doc! {"timeField": "a.b"}), 72);
        assert_eq!(code(doc! {"timeField": "t", "metaField": "_id"}), 72);
        assert_eq!(code(doc! {"timeField": "t", "metaField": "t"}), 72);
        assert_eq!(code(doc! {"timeField": "t", "metaField": "m.x"}), 72);
        assert!(parse(doc! {"timeField": "$t", "metaField": "$m"}).is_ok());
    }

    #[test]
    fn bucketing_rules() {
        assert_eq!(
            code(doc! {"timeField": "t", "bucketMaxSpanSeconds": 10}),
            72
        );
        assert_eq!(
            code(doc! {"timeField": "t", "granularity": "minutes", "bucketMaxSpanSeconds": 3600}),
            72
        );
        assert_eq!(
            code(doc! {"timeField": "t", "bucketRoundingSeconds": 100, "bucketMaxSpanSeconds": 50}),
            72
        );
        let o = parse(doc! {"timeField": "t", "granularity": "seconds",
        "bucketMaxSpanSeconds": 3600, "bucketRoundingSeconds": 60})
        .expect("defaults may be restated");
        assert_eq!(o.bucket_rounding_seconds, None);
        let o = parse(doc! {"timeField": "t", "bucketRoundingSeconds": 4000,
        "bucketMaxSpanSeconds": 4000})
        .expect("custom");
        assert_eq!(
            o.to_document(),
            doc! {"timeField": "t", "bucketRoundingSeconds": 4000, "bucketMaxSpanSeconds": 4000}
        );
        assert_eq!(o.rounding_seconds(), 4000);
    }

    #[test]
    fn coll_mod_transitions() {
        let secs = parse(doc! {"timeField": "t"}).expect("valid");
        let mins = secs
            .coll_mod(&Bson::Document(doc! {"granularity": "minutes"}))
            .expect("coarser");
        assert_eq!(mins.bucket_max_span_seconds, 86_400);
        let back = mins.coll_mod(&Bson::Document(doc! {"granularity": "seconds"}));
        assert_eq!(back.expect_err("finer").code.code(), 72);
        let custom = secs
            .coll_mod(&Bson::Document(
                doc! {"bucketMaxSpanSeconds": 7200, "bucketRoundingSeconds": 7200},
            ))
            .expect("grows");
        assert_eq!(custom.granularity, None);
        let shrink = custom.coll_mod(&Bson::Document(
            doc! {"bucketMaxSpanSeconds": 3000, "bucketRoundingSeconds": 3000},
        ));
        assert_eq!(shrink.expect_err("smaller").code.code(), 72);
        let one = secs.coll_mod(&Bson::Document(doc! {"bucketMaxSpanSeconds": 7200}));
        assert_eq!(one.expect_err("alone").code.code(), 72);
        assert_eq!(
            secs.coll_mod(&Bson::Document(doc! {"granularity": "seconds"}))
                .expect("same"),
            secs
        );
    }
}
