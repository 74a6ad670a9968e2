//! `create`'s `encryptedFields`, checked as mongod 7.0 parses (its strict IDL
//! `EncryptedFieldConfig`) and validates it (`processAndValidateEncryptedFields`), and stored
//! as mongod lists it back: `escCollection`/`ecocCollection` filled in with
//! `enxcol_.<coll>.esc`/`.ecoc`, each query's `contention` with its default. Also the parsed
//! form the write and query paths read from a collection's options. Range indexes
//! (`rangePreview`) are refused: their edges are not built here.

use crate::DbResult;
use bson::{spec::BinarySubtype, Bson, Document};
use shale_doc::{ErrorCode, MongoError};

/// The default `contention` of an equality query (mongod 7.0's IDL default).
pub const DEFAULT_CONTENTION: i64 = 8;

/// One encrypted field.
#[derive(Debug, Clone, PartialEq)]
pub struct EncryptedField {
    /// Its dotted path.
    pub path: String,
    /// Its key's id.
    pub key_id: Vec<u8>,
    /// Its equality query's contention factor, `None` for an unindexed field.
    pub equality: Option<i64>,
}

/// A collection's `encryptedFields`, parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct EncryptedConfig {
    /// The ESC's collection name.
    pub esc: String,
    /// The ECOC's collection name.
    pub ecoc: String,
    /// The fields.
    pub fields: Vec<EncryptedField>,
}

const CTX: &str = "create.encryptedFields";

fn type_mismatch(field: &str, expected: &str) -> MongoError {
    MongoError::new(
        ErrorCode::TypeMismatch,
        format!("BSON field '{field}' is the wrong type, expected type '{expected}'"),
    )
}

fn unknown(field: &str) -> MongoError {
    MongoError::new(
        ErrorCode::Location40415,
        format!("BSON field '{field}' is an unknown field."),
    )
}

fn missing(field: &str) -> MongoError {
    MongoError::new(
        ErrorCode::Location40414,
        format!("BSON field '{field}' is missing but a required field"),
    )
}

/// Checks `encryptedFields` for collection `coll` and returns what `create` stores.
pub fn check_and_fill(spec: &Document, coll: &str) -> DbResult<Document> {
    let mut out = Document::new();
    let mut fields = None;
    for (k, v) in spec {
        match k.as_str() {
            "escCollection" | "eccCollection" | "ecocCollection" => match v {
                Bson::String(_) => {
                    out.insert(k, v.clone());
                }
                _ => return Err(type_mismatch(&format!("{CTX}.{k}"), "string")),
            },
            "fields" => match v {
                Bson::Array(a) => fields = Some(a),
                _ => return Err(type_mismatch(&format!("{CTX}.fields"), "array")),
            },
            other => return Err(unknown(&format!("{CTX}.{other}"))),
        }
    }
    let fields = fields.ok_or_else(|| missing(&format!("{CTX}.fields")))?;
    let mut filled = Vec::with_capacity(fields.len());
    let mut seen: Vec<(String, Vec<u8>)> = Vec::new();
    for f in fields {
        let Bson::Document(f) = f else {
            return Err(type_mismatch(&format!("{CTX}.fields"), "object"));
        };
        let (field, stored) = check_field(f)?;
        for (path, key) in &seen {
            if *key == field.key_id {
                return Err(MongoError::new(
                    ErrorCode::Location6338401,
                    "Duplicate key ids are not allowed",
                ));
            }
            if *path == field.path {
                return Err(MongoError::new(
                    ErrorCode::Location6338402,
                    "Duplicate paths are not allowed",
                ));
            }
            if prefix_of(path, &field.path) || prefix_of(&field.path, path) {
                return Err(MongoError::new(
                    ErrorCode::Location6338403,
                    format!(
                        "Conflicting index paths found as one is a prefix of another '{}' and '{path}'",
                        field.path
                    ),
                ));
            }
        }
        seen.push((field.path, field.key_id));
        filled.push(Bson::Document(stored));
    }
    let mut stored = Document::new();
    let default = |suffix: &str| Bson::String(format!("enxcol_.{coll}.{suffix}"));
    stored.insert(
        "escCollection",
        out.remove("escCollection")
            .unwrap_or_else(|| default("esc")),
    );
    if let Some(ecc) = out.remove("eccCollection") {
        stored.insert("eccCollection", ecc);
    }
    stored.insert(
        "ecocCollection",
        out.remove("ecocCollection")
            .unwrap_or_else(|| default("ecoc")),
    );
    stored.insert("fields", filled);
    Ok(stored)
}

fn prefix_of(a: &str, b: &str) -> bool {
    b.strip_prefix(a).is_some_and(|rest| rest.starts_with('.'))
}

/// One `fields` entry: checked, and as stored (its queries' defaults filled in).
fn check_field(f: &Document) -> DbResult<(EncryptedField, Document)> {
    let ctx = format!("{CTX}.fields");
    let mut stored = f.clone();
    for k in f.keys() {
        if !["keyId", "path", "bsonType", "queries"].contains(&k.as_str()) {
            return Err(unknown(&format!("{ctx}.{k}")));
        }
    }
    let key_id = match f.get("keyId") {
        Some(Bson::Binary(b)) if b.subtype == BinarySubtype::Uuid && b.bytes.len() == 16 => {
            b.bytes.clone()
        }
        Some(_) => return Err(type_mismatch(&format!("{ctx}.keyId"), "uuid")),
        None => return Err(missing(&format!("{ctx}.keyId"))),
    };
    let path = match f.get("path") {
        Some(Bson::String(p)) => p.clone(),
        Some(_) => return Err(type_mismatch(&format!("{ctx}.path"), "string")),
        None => return Err(missing(&format!("{ctx}.path"))),
    };
    if path.is_empty() {
        return Err(MongoError::new(
            ErrorCode::Location6316402,
            "Encrypted field must have a non-empty path",
        ));
    }
    if path == "_id" || path.starts_with("_id.") {
        return Err(MongoError::new(
            ErrorCode::Location6316403,
            "Cannot encrypt _id or its subfields",
        ));
    }
    let bson_type = match f.get("bsonType") {
        None => None,
        Some(Bson::String(t)) => Some(type_code(t)?),
        Some(_) => return Err(type_mismatch(&format!("{ctx}.bsonType"), "string")),
    };
    let equality = match f.get("queries") {
        None => {
            if let Some((name, code)) = bson_type {
                if !unindexed_type_supported(code) {
                    return Err(MongoError::new(
                        ErrorCode::Location6338406,
                        format!("Type '{name}' is not a supported unindexed type"),
                    ));
                }
            }
            None
        }
        Some(q) => {
            let (contention, query) = check_queries(q, bson_type)?;
            stored.insert("queries", query);
            Some(contention)
        }
    };
    Ok((
        EncryptedField {
            path,
            key_id,
            equality,
        },
        stored,
    ))
}

/// `queries`: one query (a document, or an array of exactly one), `equality` only.
fn check_queries(q: &Bson, bson_type: Option<(&'static str, i32)>) -> DbResult<(i64, Bson)> {
    let ctx = format!("{CTX}.fields.queries");
    let (query, in_array) = match q {
        Bson::Document(d) => (d, false),
        Bson::Array(a) => {
            if a.len() != 1 {
                return Err(MongoError::new(
                    ErrorCode::Location6338404,
                    "Only one queryType can be specified per field",
                ));
            }
            match &a[0] {
                Bson::Document(d) => (d, true),
                _ => return Err(type_mismatch(&ctx, "object")),
            }
        }
        _ => return Err(type_mismatch(&ctx, "object")),
    };
    for k in query.keys() {
        if !["queryType", "contention", "min", "max", "sparsity"].contains(&k.as_str()) {
            return Err(unknown(&format!("{ctx}.{k}")));
        }
    }
    let query_type = match query.get("queryType") {
        Some(Bson::String(t)) => t.as_str(),
        Some(_) => return Err(type_mismatch(&format!("{ctx}.queryType"), "string")),
        None => return Err(missing(&format!("{ctx}.queryType"))),
    };
    let contention = match query.get("contention") {
        None => DEFAULT_CONTENTION,
        Some(Bson::Int64(n)) => *n,
        Some(Bson::Int32(n)) => i64::from(*n),
        Some(Bson::Double(d)) if d.fract() == 0.0 && d.abs() < 9.0e18 => *d as i64,
        Some(_) => return Err(type_mismatch(&format!("{ctx}.contention"), "long")),
    };
    if contention < 0 {
        return Err(MongoError::new(
            ErrorCode::BadValue,
            format!(
                "BSON field '{ctx}.contention' value must be >= 0, actual value '{contention}'"
            ),
        ));
    }
    let Some((type_name, code)) = bson_type else {
        return Err(MongoError::new(
            ErrorCode::Location6412601,
            "Bson type needs to be specified for an indexed field",
        ));
    };
    match query_type {
        "equality" => {}
        "rangePreview" => {
            return Err(MongoError::new(
                ErrorCode::CommandNotSupported,
                "queryType 'rangePreview' (Queryable Encryption range indexes) is not supported by shale; only 'equality' is",
            ))
        }
        other => {
            return Err(MongoError::new(
                ErrorCode::BadValue,
                format!("Enumeration value '{other}' for field '{ctx}.queryType' is not a valid value."),
            ))
        }
    }
    if !super::payload::equality_type_supported(code) {
        return Err(MongoError::new(
            ErrorCode::Location6338405,
            format!("Type '{type_name}' is not a supported equality indexed type"),
        ));
    }
    for (k, code) in [
        ("sparsity", ErrorCode::Location6775205),
        ("min", ErrorCode::Location6775206),
        ("max", ErrorCode::Location6775207),
    ] {
        if query.contains_key(k) {
            return Err(MongoError::new(
                code,
                format!("The field '{k}' is not allowed for equality index but is present"),
            ));
        }
    }
    let mut filled = query.clone();
    filled.insert("contention", contention);
    let filled = Bson::Document(filled);
    Ok((
        contention,
        if in_array {
            Bson::Array(vec![filled])
        } else {
            filled
        },
    ))
}

/// A `bsonType` name's type byte (mongod's `typeFromName`, `isValidBSONTypeName`).
fn type_code(name: &str) -> DbResult<(&'static str, i32)> {
    shale_doc::matcher::element::type_of_name(name).ok_or_else(|| {
        MongoError::new(
            ErrorCode::BadValue,
            format!("Unknown BSON type name: {name}"),
        )
    })
}

/// Types an unindexed encrypted field may hold (mongod's `isFLE2UnindexedSupportedType`).
fn unindexed_type_supported(code: i32) -> bool {
    !matches!(code, -1 | 6 | 10 | 127)
}

impl EncryptedConfig {
    /// The parsed form of a stored `encryptedFields` (already checked by `check_and_fill`).
    pub fn from_stored(spec: &Document) -> Option<EncryptedConfig> {
        let name = |k: &str| spec.get_str(k).ok().map(str::to_string);
        let mut fields = Vec::new();
        for f in spec.get_array("fields").ok()? {
            let f = f.as_document()?;
            let key_id = match f.get("keyId") {
                Some(Bson::Binary(b)) => b.bytes.clone(),
                _ => return None,
            };
            let query = match f.get("queries") {
                Some(Bson::Array(a)) => a.first().and_then(Bson::as_document),
                Some(Bson::Document(d)) => Some(d),
                _ => None,
            };
            let equality = query.map(|q| match q.get("contention") {
                Some(Bson::Int64(n)) => *n,
                Some(Bson::Int32(n)) => i64::from(*n),
                _ => DEFAULT_CONTENTION,
            });
            fields.push(EncryptedField {
                path: f.get_str("path").ok()?.to_string(),
                key_id,
                equality,
            });
        }
        Some(EncryptedConfig {
            esc: name("escCollection")?,
            ecoc: name("ecocCollection")?,
            fields,
        })
    }

    /// The field at `path`, if encrypted.
    pub fn field(&self, path: &str) -> Option<&EncryptedField> {
        self.fields.iter().find(|f| f.path == path)
    }
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
