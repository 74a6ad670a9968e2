//! `$sort`: parsing the key specification (15973-15976, 17312, field path codes) and sorting
//! documents by MongoDB's order (`compare::compare_values`), stably, under the memory budget.
//!
//! Sort keys follow MongoDB 7.0's sort key generation (the same as `find`): a path is followed
//! through embedded documents and arrays; an ascending key uses the smallest value found, a
//! descending key the largest; a missing field sorts as null, an empty array as undefined
//! (below null). Two keys that traverse different arrays of one document are refused, as
//! MongoDB refuses parallel arrays. A `$sort` followed by `$limit` keeps only the top documents.
//! Under the command's collation a key holds the collated values (strings as collation keys).

use std::cmp::Ordering;
use std::sync::Arc;

use bson::raw::{RawBson, RawBsonRef, RawDocument, RawDocumentBuf};
use bson::Bson;

use super::execute::{approximate_size, blocking, raw_to_bson, Ctx, DocStream, MemoryBudget};
use super::field_path::parse_field_path;
use super::simple::render;
use crate::collation::value::collate_raw;
use crate::collation::Collation;
use crate::compare::compare_values;
use crate::compare_raw::compare_raw_values;
use crate::matcher::path::{bson_error, lookup};
use crate::{ErrorCode, MongoError, Variables};

/// A parsed `$sort` specification.
#[derive(Debug, Clone)]
pub(crate) struct SortSpec {
    keys: Vec<SortKey>,
    raw: RawDocumentBuf,
    /// The command's collation: keys hold collated values (strings as collation keys).
    collation: Option<Arc<Collation>>,
}

/// Two specifications are equal when they were written alike (window functions compare theirs).
impl PartialEq for SortSpec {
    fn eq(&self, other: &SortSpec) -> bool {
        self.raw == other.raw
    }
}

#[derive(Debug, Clone)]
struct SortKey {
    path: Vec<String>,
    descending: bool,
}

fn error(code: ErrorCode, message: impl Into<String>) -> MongoError {
    MongoError::new(code, message)
}

pub(crate) fn parse(spec: RawBsonRef<'_>, vars: &Variables) -> Result<SortSpec, MongoError> {
    let RawBsonRef::Document(d) = spec else {
        return Err(error(
            ErrorCode::Location15973,
            "the $sort key specification must be an object",
        ));
    };
    let mut keys = Vec::new();
    for item in d.iter() {
        let (field, value) = item.map_err(bson_error)?;
        let descending = direction(field, value)?;
        keys.push(SortKey {
            path: parse_field_path(field)?,
            descending,
        });
    }
    if keys.is_empty() {
        return Err(error(
            ErrorCode::Location15976,
            "$sort stage must have at least one sort key",
        ));
    }
    Ok(SortSpec {
        keys,
        raw: d.to_raw_document_buf(),
        collation: vars.collation().cloned(),
    })
}

/// Whether a key's value asks for a descending order.
fn direction(field: &str, value: RawBsonRef<'_>) -> Result<bool, MongoError> {
    let number = match value {
        RawBsonRef::Int32(i) => f64::from(i),
        RawBsonRef::Int64(i) => i as f64,
        RawBsonRef::Double(d) => d,
        RawBsonRef::Decimal128(d) => crate::compare::decimal128_to_f64(&d),
        RawBsonRef::Document(meta) => {
            let is_meta = meta
                .iter()
                .next()
                .transpose()
                .map_err(bson_error)?
                .is_some_and(|(k, _)| k == "$meta");
            return Err(if is_meta {
                error(
                    ErrorCode::NotImplemented,
                    "$meta sort keys are not supported yet",
                )
            } else {
                error(
                    ErrorCode::Location17312,
                    "$meta is the only expression supported by $sort right now",
                )
            });
        }
        other => {
            return Err(error(
                ErrorCode::Location15974,
                format!(
                    "Illegal key in $sort specification: {field}: {}",
                    render(other)
                ),
            ))
        }
    };
    if number == 1.0 || number == -1.0 {
        return Ok(number < 0.0);
    }
    Err(error(
        ErrorCode::Location15975,
        "$sort key ordering must be 1 (for ascending) or -1 (for descending)",
    ))
}

impl SortSpec {
    /// `{field: -1}`, as `$sortByCount` sorts.
    pub(crate) fn descending(field: &str) -> SortSpec {
        let mut raw = RawDocumentBuf::new();
        raw.append(field, -1_i32);
        SortSpec {
            keys: vec![SortKey {
                path: vec![field.to_owned()],
                descending: true,
            }],
            raw,
            collation: None,
        }
    }

    /// The one key's path and whether it is descending, when there is exactly one key.
    pub(crate) fn single_key(&self) -> Option<(&[String], bool)> {
        match self.keys.as_slice() {
            [k] => Some((k.path.as_slice(), k.descending)),
            _ => None,
        }
    }

    /// The specification as given.
    pub(crate) fn raw(&self) -> &RawDocument {
        &self.raw
    }

    /// The sort key of one document: one value per key, chosen as described above.
    pub(crate) fn key_of(&self, doc: &RawDocument) -> Result<Vec<Bson>, MongoError> {
        let mut key = Vec::with_capacity(self.keys.len());
        let mut arrays_seen: Vec<String> = Vec::new();
        for k in &self.keys {
            let mut found = Vec::new();
            let mut arrays = Vec::new();
            collect(doc, &k.path, 0, &mut found, &mut arrays)?;
            let parallel = arrays
                .iter()
                .any(|p| arrays_seen.iter().any(|q| parallel(p, q)));
            if parallel {
                return Err(error(
                    ErrorCode::BadValue,
                    "cannot sort with keys that are parallel arrays",
                ));
            }
            arrays_seen.extend(arrays);
            let picked = match &self.collation {
                None => raw_to_bson(pick(&found, k.descending)?)?,
                Some(c) => {
                    let collated: Vec<RawBson> = found.iter().map(|v| collate_raw(c, *v)).collect();
                    let refs: Vec<RawBsonRef<'_>> =
                        collated.iter().map(RawBson::as_raw_bson_ref).collect();
                    raw_to_bson(pick(&refs, k.descending)?)?
                }
            };
            key.push(picked);
        }
        Ok(key)
    }

    /// Compare two sort keys made by `key_of`.
    pub(crate) fn compare(&self, a: &[Bson], b: &[Bson]) -> Ordering {
        for ((k, x), y) in self.keys.iter().zip(a).zip(b) {
            let ord = compare_values(x, y);
            let ord = if k.descending { ord.reverse() } else { ord };
            if ord != Ordering::Equal {
                return ord;
            }
        }
        Ordering::Equal
    }
}

/// Two arrays traversed by different keys are parallel unless one holds the other.
fn parallel(p: &str, q: &str) -> bool {
    let holds = |outer: &str, inner: &str| {
        inner
            .strip_prefix(outer)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
    };
    !holds(p, q) && !holds(q, p)
}

/// Every value of `path[part..]` under `doc`, recording the dotted prefix of each array
/// traversed. Missing fields give null; an empty array at the end gives undefined.
fn collect<'a>(
    doc: &'a RawDocument,
    path: &[String],
    part: usize,
    found: &mut Vec<RawBsonRef<'a>>,
    arrays: &mut Vec<String>,
) -> Result<(), MongoError> {
    match lookup(doc, &path[part])? {
        None => found.push(RawBsonRef::Null),
        Some(value) => descend(value, path, part + 1, found, arrays)?,
    }
    Ok(())
}

fn descend<'a>(
    value: RawBsonRef<'a>,
    path: &[String],
    next: usize,
    found: &mut Vec<RawBsonRef<'a>>,
    arrays: &mut Vec<String>,
) -> Result<(), MongoError> {
    let before = found.len();
    match value {
        RawBsonRef::Array(items) => {
            arrays.push(path[..next].join("."));
            for item in items {
                let item = item.map_err(bson_error)?;
                match item {
                    _ if next == path.len() => found.push(item),
                    RawBsonRef::Document(d) => collect(d, path, next, found, arrays)?,
                    _ => {}
                }
            }
            if found.len() == before {
                let nothing = if next == path.len() {
                    RawBsonRef::Undefined
                } else {
                    RawBsonRef::Null
                };
                found.push(nothing);
            }
        }
        _ if next == path.len() => found.push(value),
        RawBsonRef::Document(d) => collect(d, path, next, found, arrays)?,
        _ => found.push(RawBsonRef::Null),
    }
    Ok(())
}

/// The smallest (ascending) or largest (descending) of the values found.
fn pick<'a>(found: &[RawBsonRef<'a>], descending: bool) -> Result<RawBsonRef<'a>, MongoError> {
    #[allow(
        clippy::expect_used,
        reason = "callers pass only the non-empty values collect found"
    )]
    let mut best = *found.first().expect("collect finds at least one value");
    for candidate in &found[1..] {
        let ord = compare_raw_values(*candidate, best).map_err(bson_error)?;
        let better = if descending {
            ord == Ordering::Greater
        } else {
            ord == Ordering::Less
        };
        if better {
            best = *candidate;
        }
    }
    Ok(best)
}

struct Row {
    key: Vec<Bson>,
    doc: RawDocumentBuf,
    bytes: usize,
}

fn sort_rows(spec: &SortSpec, rows: &mut [Row]) {
    rows.sort_by(|a, b| spec.compare(&a.key, &b.key));
}

/// Sort the whole input; with `limit`, keep only the first `limit` documents while going.
pub(crate) fn run<'a>(
    spec: &'a SortSpec,
    input: DocStream<'a>,
    limit: Option<u64>,
    ctx: Ctx<'a>,
) -> DocStream<'a> {
    blocking(input, move |input| {
        let mut budget = MemoryBudget::new("$sort", ctx.options);
        let keep = limit.map(|n| usize::try_from(n).unwrap_or(usize::MAX));
        let mut rows: Vec<Row> = Vec::new();
        for doc in input {
            let doc = doc?;
            let key = spec.key_of(&doc)?;
            let bytes = doc.as_bytes().len() + key.iter().map(approximate_size).sum::<usize>();
            budget.charge(bytes)?;
            rows.push(Row { key, doc, bytes });
            if let Some(k) = keep {
                if rows.len() >= k.saturating_mul(2).max(64) {
                    sort_rows(spec, &mut rows);
                    for dropped in rows.drain(k..) {
                        budget.release(dropped.bytes);
                    }
                }
            }
        }
        sort_rows(spec, &mut rows);
        if let Some(k) = keep {
            rows.truncate(k);
        }
        Ok(rows.into_iter().map(|r| r.doc).collect())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn spec(s: bson::Document) -> Result<SortSpec, MongoError> {
        let d = RawDocumentBuf::from_document(&doc! {"s": s}).expect("encodes");
        parse(
            d.get("s").expect("valid").expect("present"),
            &Variables::new(),
        )
    }

    fn key(s: bson::Document, d: bson::Document) -> Result<Vec<Bson>, MongoError> {
        let raw = RawDocumentBuf::from_document(&d).expect("encodes");
        spec(s).expect("valid").key_of(&raw)
    }

    #[test]
    fn parse_errors() {
        let code = |s: bson::Document| spec(s).unwrap_err().code.code();
        assert_eq!(code(doc! {}), 15976);
        assert_eq!(code(doc! {"a": 2}), 15975);
        assert_eq!(code(doc! {"a": "asc"}), 15974);
        assert_eq!(code(doc! {"a": {"x": 1}}), 17312);
        assert_eq!(code(doc! {"a": {"$meta": "textScore"}}), 238);
        assert_eq!(code(doc! {"$a": 1}), 16410);
        assert!(spec(doc! {"a": -1.0, "b.c": 1_i64}).is_ok());
    }

    #[test]
    fn keys_use_min_or_max_of_arrays() {
        let d = doc! {"a": [3, 1, 2], "b": [{"c": 5}, {"c": 0}, {"x": 1}]};
        assert_eq!(
            key(doc! {"a": 1}, d.clone()).expect("key"),
            vec![Bson::Int32(1)]
        );
        assert_eq!(
            key(doc! {"a": -1}, d.clone()).expect("key"),
            vec![Bson::Int32(3)]
        );
        assert_eq!(
            key(doc! {"b.c": 1}, d.clone()).expect("key"),
            vec![Bson::Null]
        );
        assert_eq!(
            key(doc! {"b.c": -1}, d.clone()).expect("key"),
            vec![Bson::Int32(5)]
        );
        assert_eq!(key(doc! {"z": 1}, d).expect("key"), vec![Bson::Null]);
        assert_eq!(
            key(doc! {"a": 1}, doc! {"a": []}).expect("key"),
            vec![Bson::Undefined]
        );
    }

    #[test]
    fn parallel_arrays_are_refused() {
        let e = key(doc! {"a": 1, "b": 1}, doc! {"a": [1], "b": [2]}).unwrap_err();
        assert_eq!(e.code, ErrorCode::BadValue);
        assert!(key(doc! {"a.x": 1, "a.y": 1}, doc! {"a": [{"x": 1, "y": 2}]}).is_ok());
        assert!(key(doc! {"a": 1, "b": 1}, doc! {"a": [1], "b": 2}).is_ok());
        // Arrays nested in one shared array are not parallel; sibling arrays are.
        assert!(key(doc! {"a.b": 1, "a.c": 1}, doc! {"a": [{"b": [1], "c": 1}]}).is_ok());
        assert!(key(doc! {"a.b": 1, "a.c": 1}, doc! {"a": {"b": [1], "c": [2]}}).is_err());
    }
}
