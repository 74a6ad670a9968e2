//! Time series buckets, mongod 7.0's uncompressed (version 1) format: one document per run
//! of measurements that share a meta value and fall within one bucket span,
//!
//! ```text
//! {_id: ObjectId(<rounded start>…), control: {version: 1, min: {<field>: …}, max: {…}},
//!  meta: <meta>, data: {<field>: {"0": v0, "1": v1, …}, …}}
//! ```
//!
//! `meta` is absent when the measurements have none; each `data` column holds the values of
//! one field keyed by the measurement's position (a field a measurement lacks has no entry);
//! `control.min`/`max` hold each column's smallest and largest value in MongoDB's order, except
//! that the time field's minimum is the bucket's rounded start. The `_id`'s timestamp is that
//! start in seconds. Building (`Bucket`) and reading back (`unpack`) are here; choosing the
//! bucket a measurement goes to is the database's.
//!
//! `unpack` also reads mongod's compressed buckets (version 2, and 8.0's version 3, which only
//! drops the promise of time order): `control.count` measurements, each `data` column a
//! BSONColumn (`column.rs`), a skip where a measurement lacks the field. They are never
//! written or extended here (`Bucket::from_document` refuses them): a write that changes one
//! rewrites its measurements as a version 1 bucket.

use super::column::{self, ColumnError};
use crate::compare::compare_values;
use crate::{ErrorCode, MongoError};
use bson::oid::ObjectId;
use bson::raw::{RawBson, RawBsonRef, RawDocument, RawDocumentBuf};
use bson::spec::BinarySubtype;
use bson::{Bson, DateTime, Document};
use std::cmp::Ordering;

/// Most measurements mongod puts in one bucket (`timeseriesBucketMaxCount`).
pub const MAX_MEASUREMENTS: usize = 1000;

/// Largest bucket mongod fills, in bytes of its measurements (`timeseriesBucketMaxSize`).
pub const MAX_BUCKET_BYTES: usize = 125 * 1024;

/// The bucket format version written here.
pub const BUCKET_VERSION: i32 = 1;

/// mongod's compressed buckets (columns in BSONColumn form), read here, never written.
pub const COMPRESSED_VERSION: i32 = 2;

/// mongod 8.0's compressed buckets whose measurements are not in time order (the same form).
pub const COMPRESSED_UNSORTED_VERSION: i32 = 3;

/// A measurement's time: its time field, which must be a BSON date.
pub fn measurement_time(doc: &RawDocument, time_field: &str) -> Result<DateTime, MongoError> {
    match doc.get(time_field) {
        Ok(Some(RawBsonRef::DateTime(t))) => Ok(t),
        _ => Err(MongoError::new(
            ErrorCode::BadValue,
            format!("'{time_field}' must be present and contain a valid BSON UTC datetime value"),
        )),
    }
}

/// A meta value as mongod stores it: every sub-document's fields sorted by name, at every
/// depth (arrays keep their order).
pub fn normalize_meta(value: &Bson) -> Bson {
    match value {
        Bson::Document(d) => {
            let mut fields: Vec<(&String, &Bson)> = d.iter().collect();
            fields.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            Bson::Document(
                fields
                    .into_iter()
                    .map(|(k, v)| (k.clone(), normalize_meta(v)))
                    .collect(),
            )
        }
        Bson::Array(items) => Bson::Array(items.iter().map(normalize_meta).collect()),
        other => other.clone(),
    }
}

/// The start of the bucket `time` opens: rounded down to `rounding_seconds`.
pub fn rounded_start(time: DateTime, rounding_seconds: i64) -> DateTime {
    let step = rounding_seconds.max(1) * 1000;
    DateTime::from_millis(time.timestamp_millis().div_euclid(step) * step)
}

/// A fresh bucket `_id` whose timestamp is `start` (in seconds, as mongod's are); the
/// other 8 bytes come from a new ObjectId, unique in this process.
pub fn bucket_id(start: DateTime) -> ObjectId {
    let secs = start
        .timestamp_millis()
        .div_euclid(1000)
        .clamp(0, u32::MAX as i64) as u32;
    let mut bytes = ObjectId::new().bytes();
    bytes[..4].copy_from_slice(&secs.to_be_bytes());
    ObjectId::from_bytes(bytes)
}

/// One column: a field's values by measurement position.
#[derive(Debug, Clone)]
struct Column {
    name: String,
    values: Vec<(u32, Bson)>,
    min: Bson,
    max: Bson,
}

/// A bucket being built or extended.
#[derive(Debug, Clone)]
pub struct Bucket {
    id: ObjectId,
    time_field: String,
    start: DateTime,
    meta: Option<Bson>,
    columns: Vec<Column>,
    count: u32,
    bytes: usize,
}

impl Bucket {
    /// An empty bucket starting at `start`, for measurements with meta value `meta`.
    pub fn new(id: ObjectId, time_field: &str, start: DateTime, meta: Option<Bson>) -> Bucket {
        Bucket {
            id,
            time_field: time_field.to_owned(),
            start,
            meta,
            columns: Vec::new(),
            count: 0,
            bytes: 0,
        }
    }

    /// Reads back a version 1 bucket this module wrote (or one of mongod's uncompressed
    /// buckets), to extend it.
    pub fn from_document(bucket: &Document, time_field: &str) -> Result<Bucket, MongoError> {
        let bad = |why: &str| {
            MongoError::new(
                ErrorCode::BadValue,
                format!(
                    "not a time series bucket ({why}): {}",
                    bucket.get("_id").map_or("?".to_string(), |v| v.to_string())
                ),
            )
        };
        let id = bucket.get_object_id("_id").map_err(|_| bad("_id"))?;
        let control = bucket.get_document("control").map_err(|_| bad("control"))?;
        if control.get_i32("version") != Ok(BUCKET_VERSION) {
            return Err(unsupported_version(control.get("version")));
        }
        let start = control
            .get_document("min")
            .ok()
            .and_then(|m| m.get_datetime(time_field).ok().copied())
            .ok_or_else(|| bad("control.min"))?;
        let mut out = Bucket::new(id, time_field, start, bucket.get("meta").cloned());
        let data = bucket.get_document("data").map_err(|_| bad("data"))?;
        for (name, column) in data {
            let Bson::Document(column) = column else {
                return Err(bad("data column"));
            };
            let mut col = Column {
                name: name.clone(),
                values: Vec::with_capacity(column.len()),
                min: Bson::Null,
                max: Bson::Null,
            };
            for (i, (pos, v)) in column.iter().enumerate() {
                let pos: u32 = pos.parse().map_err(|_| bad("data position"))?;
                out.count = out.count.max(pos + 1);
                out.bytes += v_len(v) + pos.to_string().len() + 2;
                extend_range(&mut col, v, i == 0);
                col.values.push((pos, v.clone()));
            }
            out.columns.push(col);
        }
        Ok(out)
    }

    /// Its `_id`.
    pub fn id(&self) -> ObjectId {
        self.id
    }

    /// Its start: the first measurement's time rounded down.
    pub fn start(&self) -> DateTime {
        self.start
    }

    /// Measurements in it.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// True when it holds no measurement.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Whether a measurement of `bytes` at `time` may join it: inside its span, and below
    /// mongod's count and size limits.
    pub fn admits(&self, time: DateTime, bytes: usize, max_span_seconds: i64) -> bool {
        let t = time.timestamp_millis();
        let start = self.start.timestamp_millis();
        t >= start
            && t < start.saturating_add(max_span_seconds.saturating_mul(1000))
            && self.len() < MAX_MEASUREMENTS
            && (self.is_empty() || self.bytes + bytes <= MAX_BUCKET_BYTES)
    }

    /// Appends `measurement` (its meta field, if `meta_field` names one, is the bucket's and
    /// is not stored in a column).
    pub fn push(&mut self, measurement: &Document, meta_field: Option<&str>) {
        let pos = self.count;
        for (name, value) in measurement {
            if Some(name.as_str()) == meta_field {
                continue;
            }
            let at = match self.columns.iter().position(|c| &c.name == name) {
                Some(at) => at,
                None => {
                    self.columns.push(Column {
                        name: name.clone(),
                        values: Vec::new(),
                        min: Bson::Null,
                        max: Bson::Null,
                    });
                    self.columns.len() - 1
                }
            };
            let col = &mut self.columns[at];
            let first = col.values.is_empty();
            extend_range(col, value, first);
            self.bytes += v_len(value) + pos.to_string().len() + 2;
            col.values.push((pos, value.clone()));
        }
        self.count += 1;
    }

    /// The bucket document.
    pub fn to_document(&self) -> Document {
        let mut min = Document::new();
        let mut max = Document::new();
        let mut data = Document::new();
        for col in &self.columns {
            let low = if col.name == self.time_field {
                Bson::DateTime(self.start)
            } else {
                col.min.clone()
            };
            min.insert(col.name.clone(), low);
            max.insert(col.name.clone(), col.max.clone());
            let values: Document = col
                .values
                .iter()
                .map(|(pos, v)| (pos.to_string(), v.clone()))
                .collect();
            data.insert(col.name.clone(), values);
        }
        let mut doc = bson::doc! {
            "_id": self.id,
            "control": {"version": BUCKET_VERSION, "min": min, "max": max},
        };
        if let Some(meta) = &self.meta {
            doc.insert("meta", meta.clone());
        }
        doc.insert("data", data);
        doc
    }
}

fn unsupported_version(version: Option<&Bson>) -> MongoError {
    MongoError::new(
        ErrorCode::CommandNotSupported,
        format!(
            "time series bucket version {} is not supported by shale: it reads versions 1, 2 \
             and 3 (mongod's compressed buckets) and extends only version 1",
            version.map_or("missing".to_string(), |v| v.to_string())
        ),
    )
}

fn extend_range(col: &mut Column, value: &Bson, first: bool) {
    if first || compare_values(value, &col.min) == Ordering::Less {
        col.min = value.clone();
    }
    if first || compare_values(value, &col.max) == Ordering::Greater {
        col.max = value.clone();
    }
}

/// A value's encoded size, near enough for the bucket size limit.
fn v_len(value: &Bson) -> usize {
    match value {
        Bson::Document(d) => bson::to_vec(d).map_or(0, |b| b.len()),
        Bson::Array(a) => a.iter().map(v_len).sum::<usize>() + 5,
        Bson::String(s) => s.len() + 5,
        Bson::Binary(b) => b.bytes.len() + 5,
        _ => 8,
    }
}

/// What `$_internalUnpackBucket` needs to turn a bucket into measurements.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnpackSpec {
    /// The time field.
    pub time_field: String,
    /// The meta field, if the collection has one.
    pub meta_field: Option<String>,
}

/// The measurements of `bucket`, each with its time field first, then its meta field (when
/// the bucket has a meta value), then its other fields in column order. Reads version 1
/// buckets (each column an object keyed by position) and mongod's compressed version 2 and 3
/// buckets (each column a BSONColumn, `column.rs`; `control.count` measurements; version 3
/// only says the measurements need not be in time order).
pub fn unpack(bucket: &RawDocument, spec: &UnpackSpec) -> Result<Vec<RawDocumentBuf>, MongoError> {
    let bad = |why: &str| {
        MongoError::new(
            ErrorCode::BadValue,
            format!("not a time series bucket: {why}"),
        )
    };
    let control = match bucket.get("control") {
        Ok(Some(RawBsonRef::Document(c))) => c,
        _ => return Err(bad("no 'control' object")),
    };
    let compressed = match control.get("version") {
        Ok(Some(RawBsonRef::Int32(BUCKET_VERSION))) => false,
        Ok(Some(RawBsonRef::Int32(COMPRESSED_VERSION | COMPRESSED_UNSORTED_VERSION))) => true,
        Ok(Some(other)) => {
            return Err(unsupported_version(
                Bson::try_from(other.to_raw_bson()).ok().as_ref(),
            ))
        }
        _ => return Err(unsupported_version(None)),
    };
    let stated_count = if compressed {
        control_count(control).map_err(|why| bad(&why))?
    } else {
        None
    };
    let meta = match (&spec.meta_field, bucket.get("meta")) {
        (Some(_), Ok(Some(m))) => Some(m),
        _ => None,
    };
    let data = match bucket.get("data") {
        Ok(Some(RawBsonRef::Document(d))) => d,
        _ => return Err(bad("no 'data' object")),
    };
    let mut columns: Vec<(&str, Vec<(u32, RawBson)>)> = Vec::new();
    let mut time_at = None;
    let mut count = 0u32;
    for field in data {
        let (name, column) = field.map_err(|e| bad(&e.to_string()))?;
        let values = match column {
            RawBsonRef::Document(column) => positions(column).map_err(|why| bad(&why))?,
            RawBsonRef::Binary(b) if compressed && b.subtype == BinarySubtype::Column => {
                let max = stated_count.map_or(MAX_COLUMN_VALUES, |n| n as usize);
                decompress(b.bytes, max).map_err(|e| {
                    MongoError::new(
                        ErrorCode::BadValue,
                        format!(
                            "time series bucket {}: column '{name}': {e}",
                            match bucket.get("_id") {
                                Ok(Some(RawBsonRef::ObjectId(id))) => id.to_string(),
                                _ => "?".to_string(),
                            }
                        ),
                    )
                })?
            }
            _ => return Err(bad("a data column is neither an object nor a BSONColumn")),
        };
        if let Some((pos, _)) = values.last() {
            count = count.max(pos + 1);
        }
        if name == spec.time_field {
            time_at = Some(columns.len());
        }
        columns.push((name, values));
    }
    let count = stated_count.unwrap_or(count);
    let mut cursors = vec![0usize; columns.len()];
    let mut out = Vec::with_capacity(count as usize);
    for row in 0..count {
        let mut doc = RawDocumentBuf::new();
        let mut take = |c: usize, doc: &mut RawDocumentBuf| {
            let (name, values) = &columns[c];
            if let Some((pos, v)) = values.get(cursors[c]) {
                if *pos == row {
                    doc.append(*name, v.clone());
                    cursors[c] += 1;
                }
            }
        };
        if let Some(t) = time_at {
            take(t, &mut doc);
        }
        if let (Some(name), Some(m)) = (&spec.meta_field, meta) {
            doc.append(name.as_str(), m.to_raw_bson());
        }
        for c in 0..columns.len() {
            if Some(c) != time_at {
                take(c, &mut doc);
            }
        }
        out.push(doc);
    }
    Ok(out)
}

/// Most values a compressed column without `control.count` may hold (mongod always writes
/// the count; this only bounds what a damaged bucket can make us allocate).
const MAX_COLUMN_VALUES: usize = 1 << 20;

/// `control.count` of a compressed bucket, if present: a whole number of measurements.
fn control_count(control: &RawDocument) -> Result<Option<u32>, String> {
    let n = match control.get("count") {
        Ok(None) => return Ok(None),
        Ok(Some(RawBsonRef::Int32(n))) => i64::from(n),
        Ok(Some(RawBsonRef::Int64(n))) => n,
        Ok(Some(RawBsonRef::Double(d))) if d.fract() == 0.0 => d as i64,
        _ => return Err("'control.count' is not a whole number".into()),
    };
    u32::try_from(n)
        .ok()
        .filter(|n| *n as usize <= MAX_COLUMN_VALUES)
        .map(Some)
        .ok_or_else(|| format!("'control.count' {n} is out of range"))
}

/// A version 1 column: its values keyed by position.
fn positions(column: &RawDocument) -> Result<Vec<(u32, RawBson)>, String> {
    let mut values = Vec::new();
    for entry in column {
        let (pos, v) = entry.map_err(|e| e.to_string())?;
        let pos: u32 = pos
            .parse()
            .map_err(|_| "a data position is not a number".to_string())?;
        values.push((pos, v.to_raw_bson()));
    }
    Ok(values)
}

/// A compressed column: its values keyed by position, skips left out.
fn decompress(bytes: &[u8], max: usize) -> Result<Vec<(u32, RawBson)>, ColumnError> {
    Ok(column::decode(bytes, max)?
        .into_iter()
        .enumerate()
        .filter_map(|(pos, v)| v.map(|v| (pos as u32, v)))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn at(ms: i64) -> DateTime {
        DateTime::from_millis(ms)
    }

    #[test]
    fn builds_and_unpacks_in_mongods_order() {
        let start = rounded_start(at(3_725_000), 60);
        assert_eq!(start, at(3_720_000));
        let id = bucket_id(start);
        assert_eq!(id.timestamp().timestamp_millis(), 3_720_000);
        let mut b = Bucket::new(id, "t", start, Some(Bson::String("a".into())));
        b.push(
            &doc! {"_id": 1, "x": 5, "t": at(3_725_000), "m": "a"},
            Some("m"),
        );
        b.push(
            &doc! {"_id": 1, "t": at(3_726_000), "m": "a", "y": "s"},
            Some("m"),
        );
        assert_eq!(b.len(), 2);
        let stored = b.to_document();
        assert_eq!(
            stored.get_document("control").expect("control"),
            &doc! {"version": 1,
            "min": {"_id": 1, "x": 5, "t": at(3_720_000), "y": "s"},
            "max": {"_id": 1, "x": 5, "t": at(3_726_000), "y": "s"}}
        );
        let raw = RawDocumentBuf::from_document(&stored).expect("raw");
        let spec = UnpackSpec {
            time_field: "t".into(),
            meta_field: Some("m".into()),
        };
        let docs: Vec<Document> = unpack(&raw, &spec)
            .expect("unpacks")
            .iter()
            .map(|d| d.to_document().expect("doc"))
            .collect();
        assert_eq!(
            docs,
            vec![
                doc! {"t": at(3_725_000), "m": "a", "_id": 1, "x": 5},
                doc! {"t": at(3_726_000), "m": "a", "_id": 1, "y": "s"},
            ]
        );
        let again = Bucket::from_document(&stored, "t").expect("reads back");
        assert_eq!(again.to_document(), stored);
    }

    #[test]
    fn admits_within_span_and_limits() {
        let start = at(0);
        let mut b = Bucket::new(bucket_id(start), "t", start, None);
        assert!(b.admits(at(3_599_999), 10, 3600));
        assert!(!b.admits(at(3_600_000), 10, 3600));
        assert!(!b.admits(at(-1), 10, 3600));
        for i in 0..MAX_MEASUREMENTS {
            b.push(&doc! {"t": at(i as i64)}, None);
        }
        assert!(!b.admits(at(5), 10, 3600));
    }

    #[test]
    fn refuses_missing_time_and_compressed_buckets() {
        let raw = RawDocumentBuf::from_document(&doc! {"t": 1}).expect("raw");
        assert_eq!(
            measurement_time(&raw, "t")
                .expect_err("no date")
                .code
                .code(),
            2
        );
        let newer = RawDocumentBuf::from_document(
            &doc! {"_id": ObjectId::new(), "control": {"version": 4}, "data": {}},
        )
        .expect("raw");
        let spec = UnpackSpec {
            time_field: "t".into(),
            meta_field: None,
        };
        assert_eq!(unpack(&newer, &spec).expect_err("v4").code.code(), 115);
        let v2 = doc! {"_id": ObjectId::new(), "control": {"version": 2, "min": {"t": at(0)}},
        "data": {}};
        assert_eq!(
            Bucket::from_document(&v2, "t")
                .expect_err("not extended")
                .code
                .code(),
            115
        );
    }

    #[test]
    fn meta_is_normalized() {
        let m = Bson::Document(doc! {"c": 1, "b": {"z": 1, "a": [ {"y": 1, "x": 2} ]}});
        assert_eq!(
            normalize_meta(&m),
            Bson::Document(doc! {"b": {"a": [ {"x": 2, "y": 1} ], "z": 1}, "c": 1})
        );
    }

    fn column(hex: &str) -> Bson {
        let bytes = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
            .collect();
        Bson::Binary(bson::Binary {
            subtype: bson::spec::BinarySubtype::Column,
            bytes,
        })
    }

    /// mongod's bucket in jstests/noPassthrough/timeseries/
    /// timeseries_insert_decompression_failure.js, its columns in mongod's order.
    fn mongod_bucket(a: &str) -> RawDocumentBuf {
        let min = at(1_705_438_080_000);
        let time = at(1_705_438_119_448);
        RawDocumentBuf::from_document(&doc! {
            "_id": ObjectId::parse_str("65a6eb806ffc9fa4280ecac4").expect("oid"),
            "control": {"version": 2, "min": {"t": min}, "max": {"t": time}, "count": 2},
            "meta": 0,
            "data": {
                "t": column("0900188608148d010000800e0000000000000000"),
                "a": column(a),
                "_id": column("070065a6eba7e6d2e848e08c3750802e0000000000000000"),
            },
        })
        .expect("raw")
    }

    #[test]
    fn unpacks_mongods_compressed_buckets() {
        let spec = UnpackSpec {
            time_field: "t".into(),
            meta_field: Some("m".into()),
        };
        let raw = mongod_bucket("01000000000000000000902e0000000000000000");
        let docs: Vec<Document> = unpack(&raw, &spec)
            .expect("unpacks")
            .iter()
            .map(|d| d.to_document().expect("doc"))
            .collect();
        let id = |s| ObjectId::parse_str(s).expect("oid");
        let time = at(1_705_438_119_448);
        assert_eq!(
            docs,
            vec![
                doc! {"t": time, "m": 0, "a": 0.0, "_id": id("65a6eba7e6d2e848e08c3750")},
                doc! {"t": time, "m": 0, "a": 1.0, "_id": id("65a6eba7e6d2e848e08c3751")},
            ]
        );
        // A skip leaves the field out of that measurement; a column of more values than
        // `control.count` is refused.
        let mut with_skip = raw.to_document().expect("doc");
        let data = with_skip.get_document_mut("data").expect("data");
        data.insert("s", column("08000180feffffffffffffff00")); // true, then a skip
        let raw = RawDocumentBuf::from_document(&with_skip).expect("raw");
        let docs = unpack(&raw, &spec).expect("unpacks");
        assert_eq!(docs[0].get_bool("s").ok(), Some(true));
        assert!(docs[1].get("s").expect("reads").is_none());
        let mut three = with_skip.clone();
        three
            .get_document_mut("control")
            .expect("control")
            .insert("count", 1);
        let raw = RawDocumentBuf::from_document(&three).expect("raw");
        let e = unpack(&raw, &spec).expect_err("more values than count");
        assert!(
            e.message.contains("column 't'") && e.message.contains("more"),
            "{}",
            e.message
        );
    }

    #[test]
    fn refuses_a_corrupt_column_by_name() {
        let spec = UnpackSpec {
            time_field: "t".into(),
            meta_field: Some("m".into()),
        };
        // The jstest's corruption of `a`: one base64 character changed.
        let raw = mongod_bucket("01000000000000000100902e0000000000000000");
        let e = unpack(&raw, &spec).expect_err("corrupt");
        assert_eq!(e.code.code(), 2);
        assert!(
            e.message
                .contains("column 'a': invalid BSONColumn at byte 10"),
            "{}",
            e.message
        );
    }
}
