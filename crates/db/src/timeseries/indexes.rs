//! Indexes of a time series collection (docs/design-timeseries.md §6): they are indexes of its
//! buckets collection, keyed as mongod keys them — the meta field (`m`, `m.a`) as `meta`
//! (`meta.a`), the time field and measurement fields as the bucket's `control.min`/`max`
//! pair (`t: 1` → `control.min.t: 1, control.max.t: 1`; `t: -1` → `control.max.t: -1,
//! control.min.t: -1`), a measurement index keeping the user's spec as `originalSpec`.
//! `createIndexes`, `listIndexes` and `dropIndexes` on the collection translate both ways;
//! a buckets index that has no user form is not listed (as on mongod).

use super::buckets_ns;
use crate::ddl::CreateIndexesResult;
use crate::namespace::Namespace;
use crate::{Database, DbResult};
use bson::{Bson, Document};
use shale_doc::timeseries::TimeseriesOptions;
use shale_doc::{ErrorCode, MongoError};

/// The two directions of the key translation, as pure functions.
pub struct IndexTranslation<'o> {
    options: &'o TimeseriesOptions,
}

fn invalid(why: impl Into<String>) -> MongoError {
    MongoError::new(ErrorCode::InvalidOptions, why)
}

fn bad_key(spec: &Document, why: &str) -> MongoError {
    MongoError::new(
        ErrorCode::CannotCreateIndex,
        format!("BadValue: Invalid index spec for time-series collection: {spec}. {why}"),
    )
}

/// 1 or -1 for a numeric direction; `None` for a special index type.
fn direction(v: &Bson) -> Option<i32> {
    let n = shale_doc::number_as_f64(v)?;
    Some(if n < 0.0 { -1 } else { 1 })
}

impl<'o> IndexTranslation<'o> {
    /// For a collection with `options`.
    pub fn new(options: &'o TimeseriesOptions) -> IndexTranslation<'o> {
        IndexTranslation { options }
    }

    fn meta_path(&self, field: &str) -> Option<String> {
        super::meta_path(field, self.options.meta_field.as_deref()?)
    }

    /// A user key pattern as the buckets' key pattern; `measurement` is set when it names a
    /// field other than the meta field.
    pub fn key_to_buckets(
        &self,
        key: &Document,
        spec: &Document,
    ) -> Result<(Document, bool), MongoError> {
        let mut out = Document::new();
        let mut measurement = false;
        for (field, v) in key {
            if let Some(path) = self.meta_path(field) {
                out.insert(path, v.clone());
                continue;
            }
            let Some(dir) = direction(v) else {
                return Err(bad_key(
                    spec,
                    "Indexes on measurement fields must be ascending or descending \
                     (numbers only), or '2dsphere'",
                ));
            };
            if *field != self.options.time_field {
                measurement = true;
            }
            let (first, second) = match dir {
                1 => ("min", "max"),
                _ => ("max", "min"),
            };
            out.insert(format!("control.{first}.{field}"), dir);
            out.insert(format!("control.{second}.{field}"), dir);
        }
        Ok((out, measurement))
    }

    /// A user index spec as the buckets' spec, with mongod's refusals.
    pub fn spec_to_buckets(&self, spec: &Document) -> Result<Document, MongoError> {
        let key = spec.get_document("key").map_err(|_| {
            MongoError::new(
                ErrorCode::FailedToParse,
                format!("The 'key' field is required: {spec}"),
            )
        })?;
        if spec.get_bool("unique") == Ok(true) {
            return Err(invalid(
                "Unique indexes are not supported on time-series collections",
            ));
        }
        if key.values().any(|v| v.as_str() == Some("text")) {
            return Err(invalid(
                "Text indexes are not supported on time-series collections",
            ));
        }
        let (buckets_key, measurement) = self.key_to_buckets(key, spec)?;
        if measurement && spec.get_bool("sparse") == Ok(true) {
            return Err(invalid(
                "Sparse indexes are not supported on time-series measurements",
            ));
        }
        if spec.contains_key("partialFilterExpression") && spec.contains_key("collation") {
            return Err(MongoError::new(
                ErrorCode::IndexOptionsConflict,
                "Partial indexes on time-series collections cannot have a non-simple collation",
            ));
        }
        let partial = match spec.get_document("partialFilterExpression") {
            Ok(filter) => Some(self.partial_to_buckets(filter, spec)?),
            Err(_) => None,
        };
        if spec.contains_key("expireAfterSeconds") && partial.is_none() {
            return Err(invalid(
                "TTL indexes on time-series collections require a partialFilterExpression on \
                 the metaField",
            ));
        }
        let mut out = Document::new();
        for (k, v) in spec {
            match k.as_str() {
                "key" => {
                    out.insert(k, buckets_key.clone());
                }
                "partialFilterExpression" => {
                    out.insert(k, partial.clone().unwrap_or_default());
                }
                _ => {
                    out.insert(k, v.clone());
                }
            }
        }
        if !out.contains_key("name") {
            out.insert("name", crate::index_spec::default_name(key));
        }
        if measurement {
            out.insert("originalSpec", spec.clone());
        }
        Ok(out)
    }

    /// A partial filter on the meta field only (measurement-field filters are not built).
    fn partial_to_buckets(
        &self,
        filter: &Document,
        spec: &Document,
    ) -> Result<Document, MongoError> {
        let Some(meta) = self.options.meta_field.as_deref() else {
            return Err(bad_key(
                spec,
                "a partialFilterExpression needs a metaField here",
            ));
        };
        super::modify::translate_filter(filter, meta).map_err(|_| {
            MongoError::new(
                ErrorCode::CannotCreateIndex,
                format!(
                    "a partialFilterExpression on time-series measurement fields is not \
                     supported by shale (only on the metaField '{meta}'): {spec}"
                ),
            )
        })
    }

    /// A buckets index spec as the user sees it; `None` when it has no user form.
    pub fn spec_from_buckets(&self, spec: &Document) -> Option<Document> {
        let key = spec.get_document("key").ok()?;
        let user_key = match spec.get_document("originalSpec") {
            Ok(original) => original.get_document("key").ok()?.clone(),
            Err(_) => self.key_from_buckets(key)?,
        };
        let mut out = Document::new();
        for (k, v) in spec {
            match k.as_str() {
                "key" => {
                    out.insert(k, user_key.clone());
                }
                "originalSpec" => {}
                "partialFilterExpression" => {
                    let meta = self.options.meta_field.as_deref()?;
                    out.insert(k, from_meta_filter(v.as_document()?, meta));
                }
                _ => {
                    out.insert(k, v.clone());
                }
            }
        }
        Some(out)
    }

    fn key_from_buckets(&self, key: &Document) -> Option<Document> {
        let mut out = Document::new();
        let mut fields = key.iter().peekable();
        while let Some((field, v)) = fields.next() {
            if field == "meta" || field.starts_with("meta.") {
                let meta = self.options.meta_field.as_deref()?;
                out.insert(format!("{meta}{}", &field[4..]), v.clone());
                continue;
            }
            let (dir, name) = if let Some(f) = field.strip_prefix("control.min.") {
                (1, f)
            } else if let Some(f) = field.strip_prefix("control.max.") {
                (-1, f)
            } else {
                return None;
            };
            let pair = if dir == 1 {
                "control.max."
            } else {
                "control.min."
            };
            let (next, _) = fields.next()?;
            if *next != format!("{pair}{name}") || direction(v) != Some(dir) {
                return None;
            }
            out.insert(name, dir);
        }
        Some(out)
    }
}

/// A buckets filter on `meta` back in terms of the meta field.
fn from_meta_filter(filter: &Document, meta: &str) -> Document {
    filter
        .iter()
        .map(|(k, v)| {
            let key = if k == "meta" || k.starts_with("meta.") {
                format!("{meta}{}", &k[4..])
            } else {
                k.clone()
            };
            let value = match v {
                Bson::Array(items) => Bson::Array(
                    items
                        .iter()
                        .map(|i| match i {
                            Bson::Document(d) => Bson::Document(from_meta_filter(d, meta)),
                            other => other.clone(),
                        })
                        .collect(),
                ),
                other => other.clone(),
            };
            (key, value)
        })
        .collect()
}

impl Database {
    /// `createIndexes` on time series collection `ns`: each spec translated to its buckets.
    pub fn create_timeseries_indexes(
        &self,
        ns: &Namespace,
        specs: &[Document],
    ) -> DbResult<CreateIndexesResult> {
        let options = self
            .timeseries(ns)
            .ok_or_else(|| super::insert::not_timeseries(ns))?;
        let t = IndexTranslation::new(&options);
        let buckets: Vec<Document> = specs
            .iter()
            .map(|s| t.spec_to_buckets(s))
            .collect::<Result<_, _>>()?;
        let mut r = self.create_indexes(&buckets_ns(ns)?, &buckets)?;
        // The buckets' clustered `_id` is no index a user of the collection sees.
        r.before = r.before.saturating_sub(1);
        r.after = r.after.saturating_sub(1);
        Ok(r)
    }

    /// `listIndexes` on time series collection `ns`, in user form.
    pub fn list_timeseries_indexes(&self, ns: &Namespace) -> DbResult<Vec<Document>> {
        let options = self
            .timeseries(ns)
            .ok_or_else(|| super::insert::not_timeseries(ns))?;
        let t = IndexTranslation::new(&options);
        let specs = self.list_indexes(&buckets_ns(ns)?)?;
        Ok(specs
            .iter()
            .filter(|s| s.get_str("name") != Ok("_id_"))
            .filter_map(|s| t.spec_from_buckets(s))
            .collect())
    }

    /// `dropIndexes` on time series collection `ns`: a name, a user key pattern, `"*"` or a
    /// list of names.
    pub fn drop_timeseries_indexes(&self, ns: &Namespace, which: &Bson) -> DbResult<usize> {
        let options = self
            .timeseries(ns)
            .ok_or_else(|| super::insert::not_timeseries(ns))?;
        let which = match which {
            Bson::Document(key) => {
                let t = IndexTranslation::new(&options);
                Bson::Document(t.key_to_buckets(key, key)?.0)
            }
            other => other.clone(),
        };
        self.drop_indexes(&buckets_ns(ns)?, &which)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn options() -> TimeseriesOptions {
        TimeseriesOptions::parse(
            &Bson::Document(doc! {"timeField": "t", "metaField": "m"}),
            "d.c",
        )
        .expect("options")
    }

    #[test]
    fn keys_translate_both_ways() {
        let o = options();
        let t = IndexTranslation::new(&o);
        let spec = doc! {"key": {"m.a": 1, "t": -1}, "name": "x"};
        let b = t.spec_to_buckets(&spec).expect("translates");
        assert_eq!(
            b.get_document("key").expect("key"),
            &doc! {"meta.a": 1, "control.max.t": -1, "control.min.t": -1}
        );
        assert_eq!(t.spec_from_buckets(&b), Some(spec));
        let m = doc! {"key": {"x": 1}};
        let b = t.spec_to_buckets(&m).expect("measurement");
        assert_eq!(b.get_str("name"), Ok("x_1"));
        assert_eq!(
            t.spec_from_buckets(&b)
                .expect("listed")
                .get_document("key")
                .expect("key"),
            &doc! {"x": 1}
        );
    }

    #[test]
    fn refusals_as_mongod() {
        let o = options();
        let t = IndexTranslation::new(&o);
        let code = |s: Document| t.spec_to_buckets(&s).expect_err("refused").code.code();
        assert_eq!(code(doc! {"key": {"m": 1}, "unique": true}), 72);
        assert_eq!(code(doc! {"key": {"x": "text"}}), 72);
        assert_eq!(code(doc! {"key": {"x": 1}, "sparse": true}), 72);
        assert_eq!(code(doc! {"key": {"x": "hashed"}}), 67);
        assert_eq!(code(doc! {"key": {"t": 1}, "expireAfterSeconds": 10}), 72);
        assert_eq!(
            code(
                doc! {"key": {"m": 1}, "partialFilterExpression": {"m": 1}, "collation": {"locale": "en"}}
            ),
            85
        );
        assert!(t.spec_to_buckets(&doc! {"key": {"m": "hashed"}}).is_ok());
    }
}
