//! A command as the wire delivered it: the body raw, borrowed from the message it came in,
//! its OP_MSG document sequences raw beside it. The wire layer has already checked every
//! byte of both (`shale_doc::check_depth`: lengths, type bytes, UTF-8, nesting), so reading a
//! field never fails on malformed input.
//!
//! The body's elements are indexed once (name and value reference, in order), so the dozen
//! field reads of dispatch and a handler each cost a short scan of names, not a parse of
//! the body. Dispatch and the hot handlers (`find`, `getMore`, `insert`) read it directly.
//! Every other handler still takes an owned `bson::Document`; [`Command::doc`] builds it on
//! first ask (body plus the sequences folded in as arrays, which is how those handlers see
//! them) and keeps it, so a command is decoded at most once and the hot path never
//! (ARCHITECTURE.md, "Commands from the wire").

use bson::{Bson, Document, RawBsonRef, RawDocument, RawDocumentBuf};
use shale_doc::{ErrorCode, MongoError};
use std::cell::OnceCell;

/// One command: raw body, raw document sequences, and the owned form once asked for.
pub struct Command<'a> {
    body: &'a RawDocument,
    /// The body's elements in order (a malformed tail, which the wire check rules out,
    /// ends the list).
    fields: Vec<(&'a str, RawBsonRef<'a>)>,
    sequences: Vec<(String, Vec<RawDocumentBuf>)>,
    owned: OnceCell<Result<Document, MongoError>>,
}

impl<'a> Command<'a> {
    /// A command from an OP_MSG: its body and its document sequences, both checked.
    pub fn new(body: &'a RawDocument, sequences: Vec<(String, Vec<RawDocumentBuf>)>) -> Self {
        // A driver's command has 6-12 fields: one allocation, not a growing vector.
        let mut fields = Vec::with_capacity(16);
        fields.extend(body.iter().map_while(Result::ok));
        Command {
            body,
            fields,
            sequences,
            owned: OnceCell::new(),
        }
    }

    /// The same command with its owned form already known (a command built in memory
    /// and serialised with [`raw_of`]: legacy opcodes, OP_QUERY commands, tests).
    pub fn with_owned(self, doc: Document) -> Self {
        Command {
            owned: OnceCell::from(Ok(doc)),
            ..self
        }
    }

    /// The command's name: its body's first key ("" for an empty body).
    pub fn name(&self) -> &'a str {
        self.fields.first().map_or("", |(k, _)| k)
    }

    /// The raw body (without the document sequences).
    pub fn raw(&self) -> &'a RawDocument {
        self.body
    }

    /// The value of a body field (its first occurrence); `None` when absent. Sequences are
    /// not searched.
    pub fn get(&self, key: &str) -> Option<RawBsonRef<'a>> {
        self.fields.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
    }

    /// The body's fields in order (names and values as they came).
    pub fn fields(&self) -> &[(&'a str, RawBsonRef<'a>)] {
        &self.fields
    }

    /// The first body field whose name an earlier field already has, if any (a command
    /// parsed by mongod's IDL refuses it, `commands/mod.rs`).
    pub fn duplicate_field(&self) -> Option<&'a str> {
        let names = &self.fields;
        (1..names.len())
            .find(|&i| names[..i].iter().any(|(k, _)| *k == names[i].0))
            .map(|i| names[i].0)
    }

    /// Whether the body or a document sequence has field `key`.
    pub fn has(&self, key: &str) -> bool {
        self.get(key).is_some() || self.sequences.iter().any(|(id, _)| id == key)
    }

    /// The document sequence named `id`, removed from the command (an insert takes its
    /// documents as they came). A later [`Command::doc`] no longer sees it.
    pub fn take_sequence(&mut self, id: &str) -> Option<Vec<RawDocumentBuf>> {
        let at = self.sequences.iter().position(|(s, _)| s == id)?;
        self.owned = OnceCell::new();
        Some(self.sequences.swap_remove(at).1)
    }

    /// The document sequence named `id`, if the command has one.
    pub fn sequence(&self, id: &str) -> Option<&[RawDocumentBuf]> {
        self.sequences
            .iter()
            .find(|(s, _)| s == id)
            .map(|(_, docs)| docs.as_slice())
    }

    /// The owned form: the body with each document sequence folded in as an array under
    /// its identifier. Decoded on the first call, then kept.
    pub fn doc(&self) -> Result<&Document, MongoError> {
        self.owned
            .get_or_init(|| decode(self.body, &self.sequences))
            .as_ref()
            .map_err(Clone::clone)
    }
}

fn decode(
    body: &RawDocument,
    sequences: &[(String, Vec<RawDocumentBuf>)],
) -> Result<Document, MongoError> {
    let invalid = |e: bson::raw::Error| {
        MongoError::new(
            ErrorCode::InvalidBSON,
            format!("command does not decode: {e}"),
        )
    };
    // A field given twice keeps its first value, as mongod's `BSONObj::getField` reads it
    // (a decoded `Document` would keep the last), and as `Command::get` does.
    let mut doc = Document::new();
    for item in body {
        let (k, v) = item.map_err(invalid)?;
        if !doc.contains_key(k) {
            let v = Bson::try_from(v.to_raw_bson()).map_err(invalid)?;
            doc.insert(k, v);
        }
    }
    for (id, docs) in sequences {
        let items = docs
            .iter()
            .map(|d| Document::try_from(d.as_ref()).map(Bson::Document))
            .collect::<Result<Vec<_>, _>>()
            .map_err(invalid)?;
        doc.insert(id.clone(), Bson::Array(items));
    }
    Ok(doc)
}

/// A document built in memory as raw BSON, for [`Command::new`].
pub fn raw_of(doc: &Document) -> Result<RawDocumentBuf, MongoError> {
    RawDocumentBuf::from_document(doc)
        .map_err(|e| MongoError::new(ErrorCode::BadValue, e.to_string()))
}

/// The first key of a checked raw document.
pub fn first_key(doc: &RawDocument) -> Option<&str> {
    doc.iter().next().and_then(Result::ok).map(|(k, _)| k)
}

/// Field `key` of a checked raw document (a malformed one reads as absent).
pub fn get<'d>(doc: &'d RawDocument, key: &str) -> Option<RawBsonRef<'d>> {
    doc.get(key).ok().flatten()
}

/// An owned copy of one raw value, for error messages and the few places that keep it.
pub fn to_bson(v: RawBsonRef<'_>) -> Bson {
    Bson::try_from(v.to_raw_bson()).unwrap_or(Bson::Null)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn raw(d: Document) -> RawDocumentBuf {
        RawDocumentBuf::from_document(&d).expect("raw")
    }

    #[test]
    fn the_owned_form_folds_sequences_in_and_is_built_once() {
        let body = raw(doc! {"insert": "c", "ordered": false, "$db": "t"});
        let seq = vec![raw(doc! {"_id": 1}), raw(doc! {"_id": 2})];
        let mut cmd = Command::new(&body, vec![("documents".into(), seq)]);
        assert_eq!(cmd.name(), "insert");
        assert!(cmd.has("documents") && cmd.has("ordered") && !cmd.has("x"));
        let owned = cmd.doc().expect("decodes");
        assert_eq!(owned.get_array("documents").expect("array").len(), 2);
        assert!(std::ptr::eq(owned, cmd.doc().expect("again")));
        assert_eq!(cmd.sequence("documents").map(<[_]>::len), Some(2));
        assert_eq!(cmd.take_sequence("documents").map(|d| d.len()), Some(2));
        assert!(!cmd.has("documents"));
        assert!(cmd.doc().expect("decodes").get("documents").is_none());
    }

    #[test]
    fn a_command_built_in_memory_reads_the_same_both_ways() {
        let d = doc! {"find": "c", "limit": 3_i64};
        let body = raw_of(&d).expect("raw");
        let cmd = Command::new(&body, Vec::new()).with_owned(d);
        assert_eq!(cmd.name(), "find");
        assert_eq!(cmd.get("limit").and_then(|v| v.as_i64()), Some(3));
        assert_eq!(cmd.doc().expect("owned").get_i64("limit"), Ok(3));
        assert_eq!(to_bson(cmd.get("find").expect("name")), Bson::from("c"));
    }

    #[test]
    fn an_empty_body_has_no_name() {
        let body = RawDocumentBuf::new();
        assert_eq!(Command::new(&body, Vec::new()).name(), "");
    }

    #[test]
    fn a_field_given_twice_is_found_and_read_as_its_first_value_both_ways() {
        let mut body = RawDocumentBuf::new();
        body.append("ping", 1);
        body.append("comment", "first");
        body.append("comment", "second");
        let cmd = Command::new(&body, Vec::new());
        assert_eq!(cmd.duplicate_field(), Some("comment"));
        assert_eq!(cmd.get("comment").and_then(|v| v.as_str()), Some("first"));
        assert_eq!(cmd.doc().expect("owned").get_str("comment"), Ok("first"));
        let once = raw(doc! {"ping": 1, "comment": "x"});
        assert_eq!(Command::new(&once, Vec::new()).duplicate_field(), None);
    }
}
