//! Sort specifications (`{a: 1, b: -1}`) and in-memory sorting by them with MongoDB's order:
//! values compare across types by canonical type (`shale_doc::compare_values`); a path that
//! reaches several values (through arrays) sorts by the smallest of them ascending and the
//! largest descending; a missing field sorts as `null`, an empty array before it. Under a
//! collation (`collated`) a key holds the values' collated forms (strings replaced by their
//! collation keys), so keys compare by the collation; a key is never returned to a client.

use crate::index_keys::path_values;
use bson::{Bson, Document, RawDocument};
use shale_doc::collation::value::collate;
use shale_doc::{compare_values, Collation, Direction, ErrorCode, MongoError};
use std::cmp::Ordering;
use std::sync::Arc;

/// A parsed sort specification.
#[derive(Debug, Clone, PartialEq)]
pub struct SortSpec {
    pub fields: Vec<(String, Direction)>,
    /// `{$natural: ±1}`: the collection's own order.
    pub natural: Option<Direction>,
    /// The collation keys compare by (`None`: simple).
    pub collation: Option<Arc<Collation>>,
}

impl SortSpec {
    pub fn parse(spec: &Document) -> Result<SortSpec, MongoError> {
        let mut fields = Vec::new();
        let mut natural = None;
        for (path, v) in spec {
            let dir = match v {
                Bson::Int32(n) => direction(f64::from(*n)),
                Bson::Int64(n) => direction(*n as f64),
                Bson::Double(n) => direction(*n),
                Bson::Document(d) if d.contains_key("$meta") => {
                    return Err(MongoError::new(
                        ErrorCode::BadValue,
                        format!(
                            "$meta sort by {} is not supported",
                            d.get("$meta").map_or(String::new(), |m| m.to_string())
                        ),
                    ))
                }
                _ => None,
            };
            let Some(dir) = dir else {
                return Err(MongoError::new(
                    ErrorCode::BadValue,
                    format!("Illegal key in $sort specification: {path}: {v}"),
                ));
            };
            if path == "$natural" {
                natural = Some(dir);
                continue;
            }
            if path.is_empty() || path.split('.').any(str::is_empty) || path.starts_with('$') {
                return Err(MongoError::new(
                    ErrorCode::BadValue,
                    format!("Invalid sort key: '{path}'"),
                ));
            }
            fields.push((path.clone(), dir));
        }
        Ok(SortSpec {
            fields,
            natural,
            collation: None,
        })
    }

    /// This sort under collation `c` (`None`: simple).
    pub fn collated(mut self, c: Option<&Arc<Collation>>) -> SortSpec {
        self.collation = c.cloned();
        self
    }

    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// The sort key of `doc`: one value per field.
    pub fn key(&self, doc: &RawDocument) -> Result<Vec<Bson>, MongoError> {
        self.fields
            .iter()
            .map(|(path, dir)| {
                let c = self.collation.as_deref();
                let values = path_values(doc, path)?.into_iter().map(|v| {
                    if c.is_some() {
                        collate(c, &v)
                    } else {
                        v
                    }
                });
                let pick = |a: Bson, b: Bson| {
                    let first_wins = match dir {
                        Direction::Ascending => compare_values(&a, &b) != Ordering::Greater,
                        Direction::Descending => compare_values(&a, &b) != Ordering::Less,
                    };
                    if first_wins {
                        a
                    } else {
                        b
                    }
                };
                Ok(values.reduce(pick).unwrap_or(Bson::Null))
            })
            .collect()
    }

    /// Compares two sort keys made by `key`.
    pub fn compare(&self, a: &[Bson], b: &[Bson]) -> Ordering {
        for ((x, y), (_, dir)) in a.iter().zip(b).zip(&self.fields) {
            let o = compare_values(x, y);
            let o = if *dir == Direction::Descending {
                o.reverse()
            } else {
                o
            };
            if o != Ordering::Equal {
                return o;
            }
        }
        Ordering::Equal
    }
}

fn direction(n: f64) -> Option<Direction> {
    if n == 1.0 {
        Some(Direction::Ascending)
    } else if n == -1.0 {
        Some(Direction::Descending)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, rawdoc};

    #[test]
    fn arrays_sort_by_their_extreme_element() {
        let asc = SortSpec::parse(&doc! {"a": 1}).expect("spec");
        let desc = SortSpec::parse(&doc! {"a": -1}).expect("spec");
        let d = rawdoc! {"a": [5, 1, 9]};
        assert_eq!(asc.key(&d).expect("key"), vec![Bson::Int32(1)]);
        assert_eq!(desc.key(&d).expect("key"), vec![Bson::Int32(9)]);
        assert_eq!(asc.key(&rawdoc! {}).expect("key"), vec![Bson::Null]);
    }

    #[test]
    fn bad_specs_are_refused() {
        assert_eq!(
            SortSpec::parse(&doc! {"a": 2}).expect_err("2").code.code(),
            2
        );
        assert_eq!(
            SortSpec::parse(&doc! {"a": "x"})
                .expect_err("x")
                .code
                .code(),
            2
        );
        let n = SortSpec::parse(&doc! {"$natural": -1}).expect("natural");
        assert_eq!(n.natural, Some(Direction::Descending));
    }
}
