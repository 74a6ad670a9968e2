//! An update event's `updateDescription` from the `$v: 2` diff in its oplog entry, as mongod's
//! change-stream diff parser reads it: `u` and `i` fields are `updatedFields`, `d` fields
//! `removedFields`, a sub-document diff `s<field>` adds its changes under the dotted path
//! `field.`, and an array diff (`a: true`) names changed elements by index (`u<i>`, `s<i>`)
//! and a shortened array in `truncatedArrays` (`l`: the new length). With
//! `showExpandedEvents`, `disambiguatedPaths` spells out each path that a dotted string
//! cannot say unambiguously (a field name that is a number or holds a dot) as its parts,
//! array indices as integers. Pure.

use bson::{RawArrayBuf, RawBsonRef, RawDocument, RawDocumentBuf};
use shale_doc::{ErrorCode, MongoError};

/// Nesting a diff may have before it is refused (a diff mirrors its document, which the
/// depth check at the door already bounded; this guards the recursion all the same).
const MAX_DEPTH: usize = 200;

#[derive(Default)]
struct Description {
    updated: RawDocumentBuf,
    removed: RawArrayBuf,
    truncated: RawArrayBuf,
    disambiguated: RawDocumentBuf,
}

/// One step of a path: a field of a document or an index of an array.
#[derive(Debug, Clone)]
enum Part {
    Field(String),
    Index(u32),
}

/// A path from the document's root.
#[derive(Debug, Clone, Default)]
struct Path(Vec<Part>);

impl Path {
    fn field(&self, name: &str) -> Path {
        let mut p = self.0.clone();
        p.push(Part::Field(name.to_owned()));
        Path(p)
    }

    fn index(&self, i: u32) -> Path {
        let mut p = self.0.clone();
        p.push(Part::Index(i));
        Path(p)
    }

    fn dotted(&self) -> String {
        let parts: Vec<String> = self
            .0
            .iter()
            .map(|p| match p {
                Part::Field(f) => f.clone(),
                Part::Index(i) => i.to_string(),
            })
            .collect();
        parts.join(".")
    }

    /// Whether the dotted form could name another path: a field that is all digits (an
    /// array index?) or holds a dot.
    fn ambiguous(&self) -> bool {
        self.0.iter().any(|p| match p {
            Part::Field(f) => {
                f.contains('.') || (!f.is_empty() && f.bytes().all(|b| b.is_ascii_digit()))
            }
            Part::Index(_) => false,
        })
    }

    fn parts(&self) -> RawArrayBuf {
        let mut a = RawArrayBuf::new();
        for p in &self.0 {
            match p {
                Part::Field(f) => a.push(f.as_str()),
                Part::Index(i) => a.push(*i as i32),
            }
        }
        a
    }
}

impl Description {
    fn note(&mut self, path: &Path) {
        if path.ambiguous()
            && self
                .disambiguated
                .get(path.dotted())
                .ok()
                .flatten()
                .is_none()
        {
            self.disambiguated.append(path.dotted(), path.parts());
        }
    }
}

/// `{updatedFields, removedFields, truncatedArrays}` of the diff `diff` (the entry's
/// `o.diff`), and `disambiguatedPaths` when `expanded` (`showExpandedEvents`).
pub fn update_description(
    diff: &RawDocument,
    expanded: bool,
) -> Result<RawDocumentBuf, MongoError> {
    let mut d = Description::default();
    walk_document(diff, &Path::default(), &mut d, 0)?;
    let mut out = RawDocumentBuf::new();
    out.append("updatedFields", d.updated);
    out.append("removedFields", d.removed);
    out.append("truncatedArrays", d.truncated);
    if expanded {
        out.append("disambiguatedPaths", d.disambiguated);
    }
    Ok(out)
}

fn walk_document(
    diff: &RawDocument,
    prefix: &Path,
    out: &mut Description,
    depth: usize,
) -> Result<(), MongoError> {
    if depth > MAX_DEPTH {
        return Err(malformed("nested too deeply"));
    }
    for element in diff {
        let (key, value) = element.map_err(|_| malformed("not BSON"))?;
        match (key, value) {
            ("d", RawBsonRef::Document(fields)) => {
                for f in fields {
                    let (name, _) = f.map_err(|_| malformed("not BSON"))?;
                    let path = prefix.field(name);
                    out.removed.push(path.dotted().as_str());
                    out.note(&path);
                }
            }
            ("u" | "i", RawBsonRef::Document(fields)) => {
                for f in fields {
                    let (name, v) = f.map_err(|_| malformed("not BSON"))?;
                    let path = prefix.field(name);
                    out.updated.append(path.dotted(), v.to_raw_bson());
                    out.note(&path);
                }
            }
            (k, RawBsonRef::Document(sub)) if k.starts_with('s') && k.len() > 1 => {
                let path = prefix.field(&k[1..]);
                if is_array_diff(sub) {
                    walk_array(sub, &path, out, depth + 1)?;
                } else {
                    walk_document(sub, &path, out, depth + 1)?;
                }
            }
            _ => return Err(malformed(&format!("unexpected field '{key}'"))),
        }
    }
    Ok(())
}

fn is_array_diff(d: &RawDocument) -> bool {
    matches!(d.get("a"), Ok(Some(RawBsonRef::Boolean(true))))
}

fn walk_array(
    diff: &RawDocument,
    path: &Path,
    out: &mut Description,
    depth: usize,
) -> Result<(), MongoError> {
    for element in diff {
        let (key, value) = element.map_err(|_| malformed("not BSON"))?;
        match key {
            "a" => {}
            "l" => {
                let len = match value {
                    RawBsonRef::Int32(n) => i64::from(n),
                    RawBsonRef::Int64(n) => n,
                    _ => return Err(malformed("array length is not a number")),
                };
                let mut t = RawDocumentBuf::new();
                t.append("field", path.dotted());
                t.append("newSize", len as i32);
                out.truncated.push(t);
                out.note(path);
            }
            k if k.starts_with('u') => {
                let elem = path.index(array_index(&k[1..])?);
                out.updated.append(elem.dotted(), value.to_raw_bson());
                out.note(&elem);
            }
            k if k.starts_with('s') => {
                let elem = path.index(array_index(&k[1..])?);
                let RawBsonRef::Document(sub) = value else {
                    return Err(malformed("an element diff is not a document"));
                };
                if is_array_diff(sub) {
                    walk_array(sub, &elem, out, depth + 1)?;
                } else {
                    walk_document(sub, &elem, out, depth + 1)?;
                }
            }
            _ => return Err(malformed(&format!("unexpected array field '{key}'"))),
        }
    }
    Ok(())
}

fn array_index(digits: &str) -> Result<u32, MongoError> {
    digits
        .parse()
        .map_err(|_| malformed(&format!("bad array index '{digits}'")))
}

fn malformed(why: &str) -> MongoError {
    MongoError::new(
        ErrorCode::DataCorruptionDetected,
        format!("an update entry's $v: 2 diff is malformed: {why}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn describe(diff: bson::Document) -> bson::Document {
        let raw = RawDocumentBuf::from_document(&diff).expect("raw");
        update_description(&raw, false)
            .expect("parses")
            .to_document()
            .expect("doc")
    }

    #[test]
    fn top_level_changes() {
        assert_eq!(
            describe(doc! {"d": {"b": false}, "u": {"a": 5}, "i": {"z": true}}),
            doc! {"updatedFields": {"a": 5, "z": true}, "removedFields": ["b"],
            "truncatedArrays": []}
        );
    }

    #[test]
    fn sub_document_and_array_diffs_become_dotted_paths() {
        let diff = doc! {
            "sa": {"u": {"b": 1}, "d": {"c": false}, "sx": {"i": {"y": 2}}},
            "sarr": {"a": true, "l": 2, "u1": "new", "s0": {"u": {"k": 3}}},
        };
        assert_eq!(
            describe(diff),
            doc! {
                "updatedFields": {"a.b": 1, "a.x.y": 2, "arr.1": "new", "arr.0.k": 3},
                "removedFields": ["a.c"],
                "truncatedArrays": [{"field": "arr", "newSize": 2}],
            }
        );
    }

    #[test]
    fn a_malformed_diff_is_refused() {
        let raw = RawDocumentBuf::from_document(&doc! {"q": 1}).expect("raw");
        assert!(update_description(&raw, false).is_err());
    }

    #[test]
    fn ambiguous_paths_are_spelled_out_when_expanded() {
        let diff = doc! {"u": {"plain": 1}, "sa": {"a": true, "s0": {"u": {"1": 2}}}};
        let raw = RawDocumentBuf::from_document(&diff).expect("raw");
        let d = update_description(&raw, true)
            .expect("parses")
            .to_document()
            .expect("doc");
        assert_eq!(
            d.get_document("disambiguatedPaths"),
            Ok(&doc! {"a.0.1": ["a", 0, "1"]})
        );
        assert_eq!(
            d.get_document("updatedFields"),
            Ok(&doc! {"plain": 1, "a.0.1": 2})
        );
    }
}
