//! Clustered collections (`create` with `clusteredIndex`, MongoDB 5.3): the option checked
//! as mongod 7.0 checks it, how `listCollections` and `listIndexes` show it, and the TTL of
//! a clustered collection's `expireAfterSeconds` (on `_id`, `ttl.rs`). ShaleDB's document
//! tree is keyed by `_id` already, so a clustered collection stores and reads as any other;
//! only its listings and its TTL differ.

use bson::{doc, Bson, DateTime, Document};
use shale_doc::{ErrorCode, MongoError};

/// mongod's bound on `expireAfterSeconds` (`index_key_validate`): at most 2^31 - 1 seconds
/// would not be reached by any date, and mongod refuses more than ~68 years' worth.
const MAX_EXPIRE_AFTER_SECONDS: i64 = i32::MAX as i64;

/// Checks `create`'s `clusteredIndex` and `expireAfterSeconds` (each `None` when absent),
/// with mongod 7.0's codes, and returns the options to store: `clusteredIndex` as mongod
/// lists it (`{v: 2, key: {_id: 1}, name, unique: true}`) and `expireAfterSeconds` as a
/// long. `capped` and `id_index` say whether those options came with it.
pub fn from_create(
    clustered: Option<&Bson>,
    expire: Option<&Bson>,
    capped: bool,
    id_index: bool,
) -> Result<Document, MongoError> {
    let mut out = Document::new();
    let expire = expire.map(expire_after_seconds).transpose()?;
    let Some(spec) = clustered else {
        if expire.is_some() {
            return Err(MongoError::new(
                ErrorCode::InvalidOptions,
                "'expireAfterSeconds' can be used only for clustered collections or timeseries \
                 collections",
            ));
        }
        return Ok(out);
    };
    let spec =
        match spec {
            Bson::Document(d) => d,
            Bson::Boolean(_) => return Err(MongoError::new(
                ErrorCode::Location5979703,
                "The 'clusteredIndex' legacy format {clusteredIndex: <bool>} is only supported \
                 for specific internal collections and vice versa",
            )),
            other => {
                return Err(MongoError::new(
                    ErrorCode::TypeMismatch,
                    format!(
                    "BSON field 'create.clusteredIndex' is the wrong type '{}', expected types \
                     '[bool, object]'",
                    shale_doc::type_name(other)
                ),
                ))
            }
        };
    let parsed = parse_spec(spec)?;
    if capped {
        return Err(MongoError::new(
            ErrorCode::Location6127800,
            "Clustered capped collection only available with 'enableTestCommands' server \
             parameter",
        ));
    }
    if id_index {
        return Err(MongoError::new(
            ErrorCode::InvalidOptions,
            "The 'clusteredIndex' option is not supported with the 'idIndex' option",
        ));
    }
    out.insert("clusteredIndex", parsed);
    if let Some(e) = expire {
        out.insert("expireAfterSeconds", e);
    }
    Ok(out)
}

/// `clusteredIndex: {key, unique, name?, v?}` (IDL: unknown fields 40415, missing `key` or
/// `unique` 40414, wrong types 14), then mongod's `validateClusteredIndexSpec`.
fn parse_spec(spec: &Document) -> Result<Document, MongoError> {
    let field = |f: &str| format!("create.clusteredIndex.{f}");
    let (mut key, mut unique, mut name, mut v) = (None, None, None, 2i64);
    for (k, value) in spec {
        match (k.as_str(), value) {
            ("key", Bson::Document(d)) => key = Some(d),
            ("unique", Bson::Boolean(b)) => unique = Some(*b),
            ("name", Bson::String(s)) => name = Some(s.clone()),
            ("v", Bson::Int32(n)) => v = i64::from(*n),
            ("v", Bson::Int64(n)) => v = *n,
            ("v", Bson::Double(n)) => v = *n as i64,
            ("key" | "unique" | "name" | "v", other) => {
                let expected = match k.as_str() {
                    "key" => "object",
                    "unique" => "bool",
                    "name" => "string",
                    _ => "int",
                };
                return Err(MongoError::new(
                    ErrorCode::TypeMismatch,
                    format!(
                        "BSON field '{}' is the wrong type '{}', expected type '{expected}'",
                        field(k),
                        shale_doc::type_name(other)
                    ),
                ));
            }
            _ => {
                return Err(MongoError::new(
                    ErrorCode::Location40415,
                    format!("BSON field '{}' is an unknown field.", field(k)),
                ))
            }
        }
    }
    let missing = |f: &str| {
        MongoError::new(
            ErrorCode::Location40414,
            format!("BSON field '{}' is missing but a required field", field(f)),
        )
    };
    let key = key.ok_or_else(|| missing("key"))?;
    let unique = unique.ok_or_else(|| missing("unique"))?;
    if !unique {
        return Err(MongoError::new(
            ErrorCode::Location5979700,
            "The clusteredIndex option requires unique: true to be specified",
        ));
    }
    if !is_id_ascending(key) {
        return Err(MongoError::new(
            ErrorCode::InvalidIndexSpecificationOption,
            "The clusteredIndex option is only supported for key: {_id: 1}",
        ));
    }
    if v != 2 {
        return Err(MongoError::new(
            ErrorCode::Location5979704,
            format!(
                "Invalid clusteredIndex specification {spec}; cannot create a clusteredIndex \
                 with v={v}"
            ),
        ));
    }
    Ok(doc! {
        "v": 2,
        "key": {"_id": 1},
        "name": name.unwrap_or_else(|| "_id_".to_owned()),
        "unique": true,
    })
}

/// `{_id: 1}`, the one number compared by value as mongod's comparator does.
fn is_id_ascending(key: &Document) -> bool {
    let one = match key.get("_id") {
        Some(Bson::Int32(n)) => *n == 1,
        Some(Bson::Int64(n)) => *n == 1,
        Some(Bson::Double(n)) => *n == 1.0,
        Some(Bson::Decimal128(d)) => d.to_string() == "1",
        _ => false,
    };
    key.len() == 1 && one
}

/// A clustered collection's `expireAfterSeconds`: a non-negative whole number of seconds.
fn expire_after_seconds(v: &Bson) -> Result<i64, MongoError> {
    let n = match v {
        Bson::Int32(n) => i64::from(*n),
        Bson::Int64(n) => *n,
        Bson::Double(d) if d.is_finite() => *d as i64,
        other if !matches!(other, Bson::Double(_)) => {
            return Err(MongoError::new(
                ErrorCode::TypeMismatch,
                format!(
                    "BSON field 'create.expireAfterSeconds' is the wrong type '{}', expected \
                     types '[long, int, decimal, double]'",
                    shale_doc::type_name(other)
                ),
            ))
        }
        _ => -1,
    };
    if n < 0 {
        return Err(MongoError::new(
            ErrorCode::InvalidOptions,
            "TTL index 'expireAfterSeconds' option cannot be less than 0",
        ));
    }
    if n > MAX_EXPIRE_AFTER_SECONDS {
        return Err(MongoError::new(
            ErrorCode::InvalidOptions,
            format!(
                "TTL index 'expireAfterSeconds' option cannot be greater than \
                 {MAX_EXPIRE_AFTER_SECONDS}"
            ),
        ));
    }
    Ok(n)
}

/// The clustered index of a collection's options, as `listIndexes` shows it (mongod adds
/// `clustered: true`); `None` for a collection that is not clustered.
pub fn listed_index(options: &Document) -> Option<Document> {
    let mut spec = options.get_document("clusteredIndex").ok()?.clone();
    spec.insert("clustered", true);
    Some(spec)
}

/// What a clustered collection's `expireAfterSeconds` has expired at `now`: documents whose
/// `_id` is a date more than that many seconds old (`None`: no TTL).
pub fn expiry_filter(options: &Document, now: DateTime) -> Option<Document> {
    options.get_document("clusteredIndex").ok()?;
    let seconds = match options.get("expireAfterSeconds")? {
        Bson::Int64(n) => *n,
        Bson::Int32(n) => i64::from(*n),
        _ => return None,
    };
    let cutoff = now
        .timestamp_millis()
        .saturating_sub(seconds.saturating_mul(1000));
    Some(doc! {"_id": {"$lt": DateTime::from_millis(cutoff)}})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(c: Bson, e: Option<Bson>) -> i32 {
        from_create(Some(&c), e.as_ref(), false, false)
            .expect_err("refused")
            .code
            .code()
    }

    #[test]
    fn the_id_key_with_unique_true_is_stored_as_mongod_lists_it() {
        let o = from_create(
            Some(&Bson::Document(doc! {"key": {"_id": 1}, "unique": true})),
            Some(&Bson::Int32(60)),
            false,
            false,
        )
        .expect("ok");
        assert_eq!(
            o,
            doc! {
                "clusteredIndex": {"v": 2, "key": {"_id": 1}, "name": "_id_", "unique": true},
                "expireAfterSeconds": 60i64,
            }
        );
        let named = from_create(
            Some(&Bson::Document(
                doc! {"key": {"_id": 1.0}, "unique": true, "name": "c", "v": 2},
            )),
            None,
            false,
            false,
        )
        .expect("ok");
        assert_eq!(
            named
                .get_document("clusteredIndex")
                .expect("spec")
                .get_str("name"),
            Ok("c")
        );
        assert_eq!(
            listed_index(&named).expect("listed").get_bool("clustered"),
            Ok(true)
        );
    }

    #[test]
    fn mongods_refusals() {
        let d = |d: Document| Bson::Document(d);
        assert_eq!(
            code(d(doc! {"key": {"_id": 1}, "unique": false}), None),
            5979700
        );
        assert_eq!(code(d(doc! {"key": {"a": 1}, "unique": true}), None), 197);
        assert_eq!(
            code(d(doc! {"key": {"_id": -1}, "unique": true}), None),
            197
        );
        assert_eq!(
            code(d(doc! {"key": {"_id": 1}, "unique": true, "v": 1}), None),
            5979704
        );
        assert_eq!(code(d(doc! {"key": {"_id": 1}}), None), 40414);
        assert_eq!(code(d(doc! {"unique": true}), None), 40414);
        assert_eq!(
            code(d(doc! {"key": {"_id": 1}, "unique": true, "x": 1}), None),
            40415
        );
        assert_eq!(code(Bson::Boolean(true), None), 5979703);
        assert_eq!(code(Bson::String("x".into()), None), 14);
        let ok = d(doc! {"key": {"_id": 1}, "unique": true});
        assert_eq!(code(ok.clone(), Some(Bson::Int32(-1))), 72);
        let capped = from_create(Some(&ok), None, true, false).expect_err("capped");
        assert_eq!(capped.code.code(), 6127800);
        let id_index = from_create(Some(&ok), None, false, true).expect_err("idIndex");
        assert_eq!(id_index.code.code(), 72);
        let alone = from_create(None, Some(&Bson::Int32(5)), false, false).expect_err("alone");
        assert_eq!(alone.code.code(), 72);
        assert_eq!(
            from_create(None, None, false, false).expect("none"),
            Document::new()
        );
    }

    #[test]
    fn expiry_is_on_dates_in_id() {
        let options = doc! {
            "clusteredIndex": {"v": 2, "key": {"_id": 1}, "name": "_id_", "unique": true},
            "expireAfterSeconds": 10i64,
        };
        let now = DateTime::from_millis(100_000);
        assert_eq!(
            expiry_filter(&options, now),
            Some(doc! {"_id": {"$lt": DateTime::from_millis(90_000)}})
        );
        assert_eq!(
            expiry_filter(&doc! {"expireAfterSeconds": 10i64}, now),
            None
        );
    }
}
