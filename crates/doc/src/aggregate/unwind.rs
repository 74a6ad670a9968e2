//! `$unwind`: the string form (`"$path"`) and the document form (`path`, `includeArrayIndex`,
//! `preserveNullAndEmptyArrays`), with MongoDB 7.0's parse codes (15981, 28808-28812, 28818,
//! 28822) and its output rules:
//! - the path is read through embedded documents only; a non-empty array gives one document
//!   per element (the element replaces the array in place, the index as an int64);
//! - any other non-null value is treated as a one-element array (index null);
//! - missing, null and an empty array give nothing, or with `preserveNullAndEmptyArrays` the
//!   document itself (an empty array removed, null kept) with index null.

use bson::raw::{RawBsonRef, RawDocumentBuf};
use bson::{Bson, Document};

use super::execute::{to_document, to_raw};
use super::field_path::{get_path, parse_field_path, remove_path, set_path};
use super::simple::type_name;
use crate::matcher::path::bson_error;
use crate::{ErrorCode, MongoError};

/// A parsed `$unwind`.
#[derive(Debug, Clone)]
pub(crate) struct Unwind {
    path: Vec<String>,
    index_field: Option<Vec<String>>,
    preserve: bool,
}

fn error(code: ErrorCode, message: impl Into<String>) -> MongoError {
    MongoError::new(code, message)
}

pub(crate) fn parse(spec: RawBsonRef<'_>) -> Result<Unwind, MongoError> {
    match spec {
        RawBsonRef::String(path) => Ok(Unwind {
            path: parse_path(path)?,
            index_field: None,
            preserve: false,
        }),
        RawBsonRef::Document(d) => {
            let (mut path, mut index_field, mut preserve) = (None, None, false);
            for item in d.iter() {
                let (key, value) = item.map_err(bson_error)?;
                match key {
                    "path" => path = Some(value),
                    "includeArrayIndex" => index_field = Some(parse_index_field(value)?),
                    "preserveNullAndEmptyArrays" => preserve = parse_preserve(value)?,
                    other => {
                        return Err(error(
                            ErrorCode::Location28811,
                            format!("unrecognized option to $unwind stage: {other}"),
                        ))
                    }
                }
            }
            let path = match path {
                None => {
                    return Err(error(
                        ErrorCode::Location28812,
                        "no path specified to $unwind stage",
                    ))
                }
                Some(RawBsonRef::String(p)) => parse_path(p)?,
                Some(other) => {
                    return Err(error(
                        ErrorCode::Location28808,
                        format!(
                            "expected a string as the path for $unwind stage, got {}",
                            type_name(other)
                        ),
                    ))
                }
            };
            Ok(Unwind {
                path,
                index_field,
                preserve,
            })
        }
        other => Err(error(
            ErrorCode::Location15981,
            format!(
                "expected either a string or an object as specification for $unwind stage, got {}",
                type_name(other)
            ),
        )),
    }
}

fn parse_path(path: &str) -> Result<Vec<String>, MongoError> {
    let Some(rest) = path.strip_prefix('$') else {
        return Err(error(
            ErrorCode::Location28818,
            format!("path option to $unwind stage should be prefixed with a '$': {path}"),
        ));
    };
    parse_field_path(rest)
}

fn parse_index_field(value: RawBsonRef<'_>) -> Result<Vec<String>, MongoError> {
    let name = match value {
        RawBsonRef::String(s) if !s.is_empty() => s,
        other => {
            return Err(error(
                ErrorCode::Location28810,
                format!(
                    "expected a non-empty string for the includeArrayIndex  option to $unwind \
                     stage, got {}",
                    type_name(other)
                ),
            ))
        }
    };
    if name.starts_with('$') {
        return Err(error(
            ErrorCode::Location28822,
            format!("includeArrayIndex option to $unwind stage should not be prefixed with a '$': {name}"),
        ));
    }
    parse_field_path(name)
}

fn parse_preserve(value: RawBsonRef<'_>) -> Result<bool, MongoError> {
    match value {
        RawBsonRef::Boolean(b) => Ok(b),
        other => Err(error(
            ErrorCode::Location28809,
            format!(
                "expected a boolean for the preserveNullAndEmptyArrays option to $unwind stage, \
                 got {}",
                type_name(other)
            ),
        )),
    }
}

impl Unwind {
    /// The documents one input document unwinds to.
    pub(crate) fn apply(&self, raw: &RawDocumentBuf) -> Result<Vec<RawDocumentBuf>, MongoError> {
        let doc = to_document(raw)?;
        match get_path(&doc, &self.path) {
            Some(Bson::Array(items)) if !items.is_empty() => {
                let mut out = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    let mut copy = doc.clone();
                    set_path(&mut copy, &self.path, item.clone());
                    let index = i64::try_from(i).map_or(Bson::Null, Bson::Int64);
                    out.push(self.finish(copy, index)?);
                }
                Ok(out)
            }
            Some(Bson::Array(_)) if self.preserve => {
                let mut copy = doc.clone();
                remove_path(&mut copy, &self.path);
                Ok(vec![self.finish(copy, Bson::Null)?])
            }
            None | Some(Bson::Null | Bson::Undefined | Bson::Array(_)) if !self.preserve => {
                Ok(Vec::new())
            }
            _ => {
                if self.index_field.is_none() {
                    return Ok(vec![raw.clone()]);
                }
                Ok(vec![self.finish(doc, Bson::Null)?])
            }
        }
    }

    fn finish(&self, mut doc: Document, index: Bson) -> Result<RawDocumentBuf, MongoError> {
        if let Some(field) = &self.index_field {
            set_path(&mut doc, field, index);
        }
        to_raw(&doc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn code(spec: Bson) -> i32 {
        let d = RawDocumentBuf::from_document(&doc! {"s": spec}).expect("encodes");
        parse(d.get("s").expect("valid").expect("present"))
            .unwrap_err()
            .code
            .code()
    }

    #[test]
    fn parse_errors() {
        assert_eq!(code(Bson::Int32(1)), 15981);
        assert_eq!(code(Bson::String("a".into())), 28818);
        assert_eq!(code(Bson::String("$".into())), 40352);
        assert_eq!(code(bson::bson!({})), 28812);
        assert_eq!(code(bson::bson!({"path": 1})), 28808);
        assert_eq!(code(bson::bson!({"path": "$a", "x": 1})), 28811);
        assert_eq!(
            code(bson::bson!({"path": "$a", "includeArrayIndex": 1})),
            28810
        );
        assert_eq!(
            code(bson::bson!({"path": "$a", "includeArrayIndex": ""})),
            28810
        );
        assert_eq!(
            code(bson::bson!({"path": "$a", "includeArrayIndex": "$i"})),
            28822
        );
        assert_eq!(
            code(bson::bson!({"path": "$a", "preserveNullAndEmptyArrays": 1})),
            28809
        );
    }
}
