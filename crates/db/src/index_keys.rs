//! Index key generation: the keys one document contributes to one index, as MongoDB makes
//! them. A path is followed through embedded documents and arrays; a terminal array gives one
//! key per element (an empty array gives `undefined`); a missing field gives `null`. A
//! document with arrays on two different paths of a compound index is refused
//! (`CannotIndexParallelArrays`). Sparse indexes skip documents missing every key field;
//! partial indexes skip documents their filter does not match.
//!
//! Entry layout in an index tree (docs/format-collections.md): key = the encoded key tuple,
//! followed by the encoded `_id` unless the index is unique; value = the encoded `_id`, or
//! for a clustering index the whole document (its raw BSON, as the document tree holds it).

use bson::{Bson, RawBsonRef, RawDocument};
use shale_doc::{encode_key, Direction, ErrorCode, Matcher, MongoError};

/// What an index indexes: its key pattern and options.
#[derive(Debug)]
pub struct IndexDef {
    pub name: String,
    pub fields: Vec<(String, Direction)>,
    pub unique: bool,
    pub sparse: bool,
    pub partial: Option<Matcher>,
    /// TokuMX's clustering index: each entry's value is the whole document, so a scan of
    /// the index needs no read of the document tree.
    pub clustering: bool,
    /// `hidden: true`: maintained, listed and validated, never planned or hinted (mongod
    /// 4.4+).
    pub hidden: bool,
    /// The position of a hashed field (`{a: "hashed"}`): its keys are `hashed::hash64` of the
    /// values, and an array there is refused (16766).
    pub hashed: Option<usize>,
}

/// The keys one document gives an index.
#[derive(Debug, Default, PartialEq)]
pub struct DocKeys {
    /// Encoded key tuples, sorted and without duplicates, each with the values it encodes
    /// (for a duplicate key error's `keyValue`).
    pub tuples: Vec<(Vec<u8>, Vec<Bson>)>,
    /// True when a path went through an array (the index becomes multikey).
    pub multikey: bool,
}

/// The encoding of an `_id` value: the document tree's key and every index entry's value.
pub fn id_key(id: &Bson) -> Vec<u8> {
    encode_key(&[(id, Direction::Ascending)])
}

impl IndexDef {
    /// The keys `doc` gives this index, or `None` when the index skips it.
    pub fn keys(&self, doc: &RawDocument) -> Result<Option<DocKeys>, MongoError> {
        if let Some(m) = &self.partial {
            if !m.matches(doc)? {
                return Ok(None);
            }
        }
        let mut per_field = Vec::with_capacity(self.fields.len());
        let mut any_present = false;
        let mut array_path: Option<String> = None;
        for (path, _) in &self.fields {
            let mut walk = Walk::default();
            let parts: Vec<&str> = path.split('.').collect();
            walk.visit(Some(RawBsonRef::Document(doc)), &parts, 0)?;
            any_present |= walk.present;
            let through_array = walk.array_prefix.is_some();
            if let Some(prefix) = walk.array_prefix {
                match &array_path {
                    Some(p) if *p != prefix => {
                        return Err(MongoError::new(
                            ErrorCode::CannotIndexParallelArrays,
                            format!("cannot index parallel arrays [{prefix}] [{p}]"),
                        ))
                    }
                    _ => array_path = Some(prefix),
                }
            }
            if self.hashed == Some(per_field.len()) {
                if through_array {
                    return Err(MongoError::new(
                        ErrorCode::Location16766,
                        format!(
                            "hashed indexes do not currently support array values. Found array \
                             at path: {path}"
                        ),
                    ));
                }
                walk.values = walk
                    .values
                    .iter()
                    .map(|v| Bson::Int64(shale_doc::hashed::hash64(v)))
                    .collect();
            }
            per_field.push(walk.values);
        }
        if self.sparse && !any_present {
            return Ok(None);
        }
        let mut tuples = Vec::new();
        self.cartesian(&per_field, &mut Vec::new(), &mut tuples);
        tuples.sort_by(|a: &(Vec<u8>, Vec<Bson>), b| a.0.cmp(&b.0));
        tuples.dedup_by(|a, b| a.0 == b.0);
        Ok(Some(DocKeys {
            tuples,
            multikey: array_path.is_some(),
        }))
    }

    fn cartesian<'a>(
        &self,
        per_field: &'a [Vec<Bson>],
        chosen: &mut Vec<&'a Bson>,
        out: &mut Vec<(Vec<u8>, Vec<Bson>)>,
    ) {
        let i = chosen.len();
        if i == per_field.len() {
            let pairs: Vec<(&Bson, Direction)> = chosen
                .iter()
                .zip(&self.fields)
                .map(|(v, (_, d))| (*v, *d))
                .collect();
            out.push((
                encode_key(&pairs),
                chosen.iter().map(|v| (*v).clone()).collect(),
            ));
            return;
        }
        for v in &per_field[i] {
            chosen.push(v);
            self.cartesian(per_field, chosen, out);
            chosen.pop();
        }
    }

    /// The index tree key for a key tuple and the document's encoded `_id`.
    pub fn entry_key(&self, tuple: &[u8], id_key: &[u8]) -> Vec<u8> {
        let mut k = Vec::with_capacity(tuple.len() + id_key.len());
        k.extend_from_slice(tuple);
        if !self.unique {
            k.extend_from_slice(id_key);
        }
        k
    }

    /// The value of each entry `doc` (encoded `_id` = `id_key`) gives this index: the
    /// document itself for a clustering index, else the encoded `_id`.
    pub fn entry_value<'a>(&self, id_key: &'a [u8], doc: &'a RawDocument) -> &'a [u8] {
        if self.clustering {
            doc.as_bytes()
        } else {
            id_key
        }
    }

    /// The encoded `_id` of the document an entry's value names (decoding the document of
    /// a clustering entry). A value that is not a document with an `_id` is corruption.
    pub fn value_id_key(&self, value: &[u8]) -> Result<Vec<u8>, MongoError> {
        if !self.clustering {
            return Ok(value.to_vec());
        }
        let doc = RawDocument::from_bytes(value).map_err(|e| corrupt_entry(&self.name, e))?;
        match doc.get("_id").map_err(|e| corrupt_entry(&self.name, e))? {
            Some(v) => Ok(id_key(&to_bson(v)?)),
            None => Err(corrupt_entry(&self.name, "the document has no _id")),
        }
    }

    /// The key pattern as a document, `{a: 1, b: -1}`.
    pub fn key_pattern(&self) -> bson::Document {
        let mut d = bson::Document::new();
        for (path, dir) in &self.fields {
            d.insert(
                path.clone(),
                if *dir == Direction::Ascending { 1 } else { -1 },
            );
        }
        d
    }

    /// True when some path has a numeric component (`a.0.b`), which the planner does not
    /// build bounds for.
    pub fn has_positional_path(&self) -> bool {
        self.fields.iter().any(|(p, _)| {
            p.split('.')
                .any(|c| !c.is_empty() && c.bytes().all(|b| b.is_ascii_digit()))
        })
    }
}

/// Every value `path` reaches in `doc`, arrays expanded one level as index keys are (a
/// missing field gives `null`, an empty array `undefined`). Sorting uses the smallest or
/// largest of them, as MongoDB does.
pub fn path_values(doc: &RawDocument, path: &str) -> Result<Vec<Bson>, MongoError> {
    let mut walk = Walk::default();
    let parts: Vec<&str> = path.split('.').collect();
    walk.visit(Some(RawBsonRef::Document(doc)), &parts, 0)?;
    Ok(walk.values)
}

/// `path_values` without the `null`s that stand for missing fields (what `distinct` sees).
pub fn present_values(doc: &RawDocument, path: &str) -> Result<Vec<Bson>, MongoError> {
    let mut walk = Walk {
        skip_missing: true,
        ..Walk::default()
    };
    let parts: Vec<&str> = path.split('.').collect();
    walk.visit(Some(RawBsonRef::Document(doc)), &parts, 0)?;
    Ok(walk.values)
}

/// The values found along one path.
#[derive(Default)]
struct Walk {
    values: Vec<Bson>,
    present: bool,
    /// The path prefix of the first array the walk went through.
    array_prefix: Option<String>,
    /// Report nothing (instead of `null`) where the path is missing.
    skip_missing: bool,
}

impl Walk {
    fn visit(
        &mut self,
        v: Option<RawBsonRef<'_>>,
        parts: &[&str],
        depth: usize,
    ) -> Result<(), MongoError> {
        let Some(v) = v else {
            self.missing();
            return Ok(());
        };
        if depth == parts.len() {
            self.present = true;
            return self.terminal(v, parts);
        }
        match v {
            RawBsonRef::Document(d) => {
                let child = d.get(parts[depth]).map_err(bad_bson)?;
                self.visit(child, parts, depth + 1)
            }
            RawBsonRef::Array(a) => {
                self.note_array(parts, depth);
                if let Ok(i) = parts[depth].parse::<usize>() {
                    if let Some(e) = a.get(i).map_err(bad_bson)? {
                        return self.visit(Some(e), parts, depth + 1);
                    }
                }
                let before = self.values.len();
                for e in a {
                    if let RawBsonRef::Document(d) = e.map_err(bad_bson)? {
                        let child = d.get(parts[depth]).map_err(bad_bson)?;
                        if child.is_some() {
                            self.visit(child, parts, depth + 1)?;
                        }
                    }
                }
                if self.values.len() == before {
                    self.missing();
                }
                Ok(())
            }
            _ => {
                self.missing();
                Ok(())
            }
        }
    }

    fn missing(&mut self) {
        if !self.skip_missing {
            self.values.push(Bson::Null);
        }
    }

    fn terminal(&mut self, v: RawBsonRef<'_>, parts: &[&str]) -> Result<(), MongoError> {
        match v {
            RawBsonRef::Array(a) => {
                self.note_array(parts, parts.len());
                let before = self.values.len();
                for e in a {
                    self.values.push(to_bson(e.map_err(bad_bson)?)?);
                }
                if self.values.len() == before && !self.skip_missing {
                    self.values.push(Bson::Undefined);
                }
                Ok(())
            }
            other => {
                self.values.push(to_bson(other)?);
                Ok(())
            }
        }
    }

    fn note_array(&mut self, parts: &[&str], depth: usize) {
        if self.array_prefix.is_none() {
            self.array_prefix = Some(parts[..depth.max(1)].join("."));
        }
    }
}

fn to_bson(v: RawBsonRef<'_>) -> Result<Bson, MongoError> {
    Bson::try_from(v.to_raw_bson()).map_err(|e| bad_bson(e.to_string()))
}

fn corrupt_entry(index: &str, e: impl std::fmt::Display) -> MongoError {
    MongoError::new(
        ErrorCode::DataCorruptionDetected,
        format!("clustering index {index} holds an entry that is not a stored document: {e}"),
    )
}

fn bad_bson(e: impl ToString) -> MongoError {
    MongoError::new(
        ErrorCode::InvalidBSON,
        format!("invalid BSON in document: {}", e.to_string()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, rawdoc};

    fn def(fields: &[(&str, i32)]) -> IndexDef {
        IndexDef {
            name: "i".into(),
            fields: fields
                .iter()
                .map(|(p, d)| {
                    let dir = if *d > 0 {
                        Direction::Ascending
                    } else {
                        Direction::Descending
                    };
                    ((*p).to_owned(), dir)
                })
                .collect(),
            unique: false,
            sparse: false,
            partial: None,
            clustering: false,
            hidden: false,
            hashed: None,
        }
    }

    fn tuples(vals: &[Bson]) -> Vec<(Vec<u8>, Vec<Bson>)> {
        let mut v: Vec<(Vec<u8>, Vec<Bson>)> = vals
            .iter()
            .map(|b| (encode_key(&[(b, Direction::Ascending)]), vec![b.clone()]))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v.dedup_by(|a, b| a.0 == b.0);
        v
    }

    #[test]
    fn scalars_arrays_and_missing_fields() {
        let d = def(&[("a", 1)]);
        let k = d.keys(&rawdoc! {"a": 5}).expect("ok").expect("indexed");
        assert_eq!(
            k,
            DocKeys {
                tuples: tuples(&[Bson::Int32(5)]),
                multikey: false
            }
        );
        let k = d
            .keys(&rawdoc! {"a": [3, 1, 3]})
            .expect("ok")
            .expect("indexed");
        assert_eq!(
            k.tuples.iter().map(|t| &t.0).collect::<Vec<_>>(),
            tuples(&[Bson::Int32(1), Bson::Int32(3)])
                .iter()
                .map(|t| &t.0)
                .collect::<Vec<_>>()
        );
        assert!(k.multikey);
        let k = d.keys(&rawdoc! {"b": 1}).expect("ok").expect("indexed");
        assert_eq!(k.tuples, tuples(&[Bson::Null]));
        let k = d.keys(&rawdoc! {"a": []}).expect("ok").expect("indexed");
        assert_eq!(k.tuples, tuples(&[Bson::Undefined]));
    }

    #[test]
    fn dotted_paths_through_arrays_of_documents() {
        let d = def(&[("a.b", 1)]);
        let k = d
            .keys(&rawdoc! {"a": [{"b": 1}, {"c": 2}, {"b": [2, 3]}]})
            .expect("ok")
            .expect("indexed");
        assert_eq!(k.tuples.len(), 3);
        assert!(k.multikey);
    }

    #[test]
    fn parallel_arrays_are_refused() {
        let d = def(&[("a", 1), ("b", 1)]);
        let e = d.keys(&rawdoc! {"a": [1], "b": [2]}).expect_err("parallel");
        assert_eq!(e.code.code(), 171);
        let k = d
            .keys(&rawdoc! {"a": [1, 2], "b": 7})
            .expect("ok")
            .expect("indexed");
        assert_eq!(k.tuples.len(), 2);
    }

    #[test]
    fn sparse_and_partial_skip_documents() {
        let mut d = def(&[("a", 1)]);
        d.sparse = true;
        assert_eq!(d.keys(&rawdoc! {"b": 1}).expect("ok"), None);
        assert!(d.keys(&rawdoc! {"a": null}).expect("ok").is_some());
        let mut d = def(&[("a", 1)]);
        let filter = bson::RawDocumentBuf::from_document(&doc! {"a": {"$gt": 5}}).expect("raw");
        d.partial = Some(Matcher::parse(&filter).expect("filter"));
        assert_eq!(d.keys(&rawdoc! {"a": 1}).expect("ok"), None);
        assert!(d.keys(&rawdoc! {"a": 9}).expect("ok").is_some());
    }

    #[test]
    fn unique_entries_carry_no_id_suffix() {
        let mut d = def(&[("a", 1)]);
        let id = id_key(&Bson::Int32(1));
        assert_eq!(d.entry_key(b"k", &id).len(), 1 + id.len());
        d.unique = true;
        assert_eq!(d.entry_key(b"k", &id), b"k".to_vec());
    }

    #[test]
    fn clustering_entries_carry_the_document_and_name_its_id() {
        let mut d = def(&[("a", 1)]);
        let doc = rawdoc! {"_id": 7, "a": 1, "pad": "x"};
        let id = id_key(&Bson::Int32(7));
        assert_eq!(d.entry_value(&id, &doc), &id[..]);
        assert_eq!(d.value_id_key(&id).expect("plain"), id);
        d.clustering = true;
        assert_eq!(d.entry_value(&id, &doc), doc.as_bytes());
        assert_eq!(d.value_id_key(doc.as_bytes()).expect("doc"), id);
        let e = d
            .value_id_key(&id)
            .expect_err("an _id key is not a document");
        assert_eq!(e.code.code(), ErrorCode::DataCorruptionDetected.code());
        let e = d
            .value_id_key(rawdoc! {"a": 1}.as_bytes())
            .expect_err("no _id");
        assert_eq!(e.code.code(), ErrorCode::DataCorruptionDetected.code());
    }
}
