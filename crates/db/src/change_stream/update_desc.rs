//! An update event's `updateDescription` from the `$v: 2` diff in its oplog entry, as mongod's
//! change-stream diff parser reads it: `u` and `i` fields are `updatedFields`, `d` fields
//! `removedFields`, a sub-document diff `s<field>` adds its changes under the dotted path
//! `field.`, and an array diff (`a: true`) names changed elements by index (`u<i>`, `s<i>`)
//! and a shortened array in `truncatedArrays` (`l`: the new length). Pure.

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
}

/// `{updatedFields, removedFields, truncatedArrays}` of the diff `diff` (the entry's
/// `o.diff`).
pub fn update_description(diff: &RawDocument) -> Result<RawDocumentBuf, MongoError> {
    let mut d = Description::default();
    walk_document(diff, "", &mut d, 0)?;
    let mut out = RawDocumentBuf::new();
    out.append("updatedFields", d.updated);
    out.append("removedFields", d.removed);
    out.append("truncatedArrays", d.truncated);
    Ok(out)
}

fn walk_document(
    diff: &RawDocument,
    prefix: &str,
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
                    out.removed.push(format!("{prefix}{name}").as_str());
                }
            }
            ("u" | "i", RawBsonRef::Document(fields)) => {
                for f in fields {
                    let (name, v) = f.map_err(|_| malformed("not BSON"))?;
                    out.updated
                        .append(format!("{prefix}{name}"), v.to_raw_bson());
                }
            }
            (k, RawBsonRef::Document(sub)) if k.starts_with('s') && k.len() > 1 => {
                let path = format!("{prefix}{}", &k[1..]);
                if is_array_diff(sub) {
                    walk_array(sub, &path, out, depth + 1)?;
                } else {
                    walk_document(sub, &format!("{path}."), out, depth + 1)?;
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
    path: &str,
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
                t.append("field", path);
                t.append("newSize", len as i32);
                out.truncated.push(t);
            }
            k if k.starts_with('u') => {
                let index = array_index(&k[1..])?;
                out.updated
                    .append(format!("{path}.{index}"), value.to_raw_bson());
            }
            k if k.starts_with('s') => {
                let index = array_index(&k[1..])?;
                let RawBsonRef::Document(sub) = value else {
                    return Err(malformed("an element diff is not a document"));
                };
                let elem = format!("{path}.{index}");
                if is_array_diff(sub) {
                    walk_array(sub, &elem, out, depth + 1)?;
                } else {
                    walk_document(sub, &format!("{elem}."), out, depth + 1)?;
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
        update_description(&raw)
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
        assert!(update_description(&raw).is_err());
    }
}
