//! Dotted-path lookup over raw BSON: every value MongoDB's matcher considers for a path such as
//! `a.b.0.c`, read in place. It owns implicit array traversal (a non-numeric component looks
//! inside each document element of an array), numeric components as array indices, the
//! "missing" candidate that lets `{x: null}` match absent fields, leaf-array expansion (each
//! element, then the array itself) and the array index the positional projection `$` reports.
//!
//! It never allocates per field or element it walks past: fields are compared by key before
//! their value is decoded, and candidates are handed to a visitor instead of being collected.

use bson::raw::{RawArray, RawBsonRef, RawDocument};

use crate::{ErrorCode, MongoError};

/// A parsed dotted path. Components are kept as one string plus their byte ranges.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldPath {
    dotted: String,
    ends: Vec<usize>,
}

impl FieldPath {
    /// Split `dotted` at each `.`. An empty component is kept (MongoDB looks up `""`).
    pub fn parse(dotted: &str) -> FieldPath {
        let mut ends: Vec<usize> = dotted.match_indices('.').map(|(i, _)| i).collect();
        ends.push(dotted.len());
        FieldPath {
            dotted: dotted.to_owned(),
            ends,
        }
    }

    /// The path as written, dots included.
    pub fn dotted(&self) -> &str {
        &self.dotted
    }

    /// Number of components.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// True for the empty path.
    pub fn is_empty(&self) -> bool {
        self.dotted.is_empty()
    }

    /// Component number `i` (0-based).
    pub fn part(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.ends[i - 1] + 1 };
        &self.dotted[start..self.ends[i]]
    }
}

/// One value the matcher considers for a path.
#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a> {
    /// `None` when the path is missing at this branch.
    pub value: Option<RawBsonRef<'a>>,
    /// Index in the first array walked through on the way (for the positional `$`).
    pub array_index: Option<usize>,
}

/// Convert the bson crate's malformed-document error into a client error.
pub fn bson_error(e: bson::raw::Error) -> MongoError {
    MongoError::new(ErrorCode::InvalidBSON, format!("malformed BSON: {e}"))
}

/// The first field named `key`, decoding no other field's value (`raw_scan`'s byte-wise walk).
pub fn lookup<'a>(doc: &'a RawDocument, key: &str) -> Result<Option<RawBsonRef<'a>>, MongoError> {
    crate::raw_scan::lookup(doc, key)
}

/// A component usable as an array index: ASCII digits only, no sign.
pub fn array_index(part: &str) -> Option<usize> {
    if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    part.parse().ok()
}

/// Walk every candidate of `path` in `doc`, calling `visit` until it returns `Ok(true)`.
/// Returns whether a visit returned true. With `expand_leaf_arrays`, an array at the end of
/// the path is offered element by element and then whole.
pub fn visit_path<'a, F>(
    doc: &'a RawDocument,
    path: &FieldPath,
    expand_leaf_arrays: bool,
    visit: &mut F,
) -> Result<bool, MongoError>
where
    F: FnMut(Candidate<'a>) -> Result<bool, MongoError>,
{
    assert!(
        !path.ends.is_empty(),
        "a field path has at least one component"
    );
    let walker = Walker {
        path,
        expand_leaf_arrays,
    };
    walker.in_document(doc, 0, None, visit)
}

struct Walker<'p> {
    path: &'p FieldPath,
    expand_leaf_arrays: bool,
}

impl Walker<'_> {
    fn in_document<'a, F>(
        &self,
        doc: &'a RawDocument,
        part: usize,
        index: Option<usize>,
        visit: &mut F,
    ) -> Result<bool, MongoError>
    where
        F: FnMut(Candidate<'a>) -> Result<bool, MongoError>,
    {
        match lookup(doc, self.path.part(part))? {
            None => visit(Candidate {
                value: None,
                array_index: index,
            }),
            Some(value) => self.at_value(value, part + 1, index, visit),
        }
    }

    /// `value` was reached by the components before `next`.
    fn at_value<'a, F>(
        &self,
        value: RawBsonRef<'a>,
        next: usize,
        index: Option<usize>,
        visit: &mut F,
    ) -> Result<bool, MongoError>
    where
        F: FnMut(Candidate<'a>) -> Result<bool, MongoError>,
    {
        if next == self.path.len() {
            return self.at_leaf(value, index, visit);
        }
        match value {
            RawBsonRef::Document(sub) => self.in_document(sub, next, index, visit),
            RawBsonRef::Array(array) => self.in_array(array, next, index, visit),
            _ => visit(Candidate {
                value: None,
                array_index: index,
            }),
        }
    }

    fn at_leaf<'a, F>(
        &self,
        value: RawBsonRef<'a>,
        index: Option<usize>,
        visit: &mut F,
    ) -> Result<bool, MongoError>
    where
        F: FnMut(Candidate<'a>) -> Result<bool, MongoError>,
    {
        if let (RawBsonRef::Array(array), true) = (value, self.expand_leaf_arrays) {
            for (i, element) in array.into_iter().enumerate() {
                let element = element.map_err(bson_error)?;
                let candidate = Candidate {
                    value: Some(element),
                    array_index: index.or(Some(i)),
                };
                if visit(candidate)? {
                    return Ok(true);
                }
            }
        }
        visit(Candidate {
            value: Some(value),
            array_index: index,
        })
    }

    /// Component `next` applied to an array: an index when numeric, and in any case the same
    /// component inside each document element. Scalars and nested arrays yield nothing.
    fn in_array<'a, F>(
        &self,
        array: &'a RawArray,
        next: usize,
        index: Option<usize>,
        visit: &mut F,
    ) -> Result<bool, MongoError>
    where
        F: FnMut(Candidate<'a>) -> Result<bool, MongoError>,
    {
        if let Some(position) = array_index(self.path.part(next)) {
            if let Some(element) = array.get(position).map_err(bson_error)? {
                if self.at_value(element, next + 1, index, visit)? {
                    return Ok(true);
                }
            }
        }
        for (i, element) in array.into_iter().enumerate() {
            if let RawBsonRef::Document(sub) = element.map_err(bson_error)? {
                if self.in_document(sub, next, index.or(Some(i)), visit)? {
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, RawDocumentBuf};

    fn candidates(d: bson::Document, path: &str, expand: bool) -> Vec<(String, Option<usize>)> {
        let raw = RawDocumentBuf::from_document(&d).expect("test document encodes");
        let mut out = Vec::new();
        let path = FieldPath::parse(path);
        visit_path(&raw, &path, expand, &mut |c: Candidate<'_>| {
            let shown = match c.value {
                None => "missing".to_owned(),
                Some(v) => format!("{:?}", v.to_raw_bson()),
            };
            out.push((shown, c.array_index));
            Ok(false)
        })
        .expect("walk succeeds");
        out
    }

    #[test]
    fn components_split_at_dots() {
        let p = FieldPath::parse("a.b.0");
        assert_eq!(
            (p.len(), p.part(0), p.part(1), p.part(2)),
            (3, "a", "b", "0")
        );
        assert_eq!(FieldPath::parse("x").part(0), "x");
    }

    #[test]
    fn missing_and_scalar_parents_yield_missing() {
        assert_eq!(
            candidates(doc! {}, "a", true),
            vec![("missing".into(), None)]
        );
        assert_eq!(candidates(doc! {"a": 5}, "a.b", true)[0].0, "missing");
    }

    #[test]
    fn arrays_of_documents_are_traversed_and_scalars_skipped() {
        let found = candidates(doc! {"a": [5, {"b": 1}, {"c": 2}]}, "a.b", true);
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].1, Some(1));
        assert_eq!(found[1], ("missing".into(), Some(2)));
        assert!(candidates(doc! {"a": []}, "a.b", true).is_empty());
    }

    #[test]
    fn leaf_arrays_expand_then_offer_the_whole() {
        let found = candidates(doc! {"a": [1, 2]}, "a", true);
        assert_eq!(found.len(), 3);
        assert_eq!(found[1].1, Some(1));
        assert_eq!(found[2].1, None);
        assert_eq!(candidates(doc! {"a": [1, 2]}, "a", false).len(), 1);
    }

    #[test]
    fn numeric_components_index_arrays() {
        let found = candidates(doc! {"a": [{"b": 1}, {"b": 2}]}, "a.1.b", true);
        let present: Vec<_> = found.iter().filter(|(v, _)| v != "missing").collect();
        assert_eq!(present.len(), 1);
        assert!(present[0].0.contains('2'));
        assert_eq!(array_index("01"), Some(1));
        assert_eq!(array_index("-1"), None);
    }
}
