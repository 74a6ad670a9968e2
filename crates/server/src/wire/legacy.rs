//! The legacy opcodes other than OP_QUERY, as mongod 3.6 read them: OP_GET_MORE (2005),
//! OP_KILL_CURSORS (2007), and the fire-and-forget writes OP_INSERT (2002), OP_UPDATE
//! (2001) and OP_DELETE (2006). Pure decoding of the bytes after the header: every count,
//! string and document is bounds-checked, trailing bytes are refused, nothing panics. The
//! writes' documents are kept raw, as sent (validated, never decoded: a name given twice
//! stays twice, as OP_MSG's documents do).

use super::{Reader, WireError, HEADER_LEN};
use bson::RawDocumentBuf;

/// OP_INSERT flag: keep inserting after a document fails.
pub const INSERT_CONTINUE_ON_ERROR: u32 = 1;
/// OP_UPDATE flag: insert when nothing matches.
pub const UPDATE_UPSERT: u32 = 1;
/// OP_UPDATE flag: change every matching document, not only the first.
pub const UPDATE_MULTI: u32 = 1 << 1;
/// OP_DELETE flag: remove only the first matching document.
pub const DELETE_SINGLE_REMOVE: u32 = 1;

/// Cursor ids one OP_KILL_CURSORS may name: what fits in a 48 MB message.
const MAX_KILL_IDS: i32 = 6_000_000;

/// A decoded OP_GET_MORE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpGetMore {
    /// `db.collection`.
    pub full_collection_name: String,
    /// How many documents to return.
    pub number_to_return: i32,
    /// The cursor.
    pub cursor_id: i64,
}

/// A decoded OP_KILL_CURSORS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpKillCursors {
    /// The cursors to close.
    pub cursor_ids: Vec<i64>,
}

/// A decoded OP_INSERT.
#[derive(Debug, Clone, PartialEq)]
pub struct OpInsert {
    /// Flag bits (bit 0: ContinueOnError).
    pub flags: u32,
    /// `db.collection`.
    pub full_collection_name: String,
    /// The documents to insert, as sent.
    pub documents: Vec<RawDocumentBuf>,
}

/// A decoded OP_UPDATE.
#[derive(Debug, Clone, PartialEq)]
pub struct OpUpdate {
    /// Flag bits (bit 0: Upsert, bit 1: MultiUpdate).
    pub flags: u32,
    /// `db.collection`.
    pub full_collection_name: String,
    /// Which documents, as sent.
    pub selector: RawDocumentBuf,
    /// The update or replacement, as sent.
    pub update: RawDocumentBuf,
}

/// A decoded OP_DELETE.
#[derive(Debug, Clone, PartialEq)]
pub struct OpDelete {
    /// Flag bits (bit 0: SingleRemove).
    pub flags: u32,
    /// `db.collection`.
    pub full_collection_name: String,
    /// Which documents, as sent.
    pub selector: RawDocumentBuf,
}

fn body(whole: &[u8]) -> Reader<'_> {
    Reader::new(whole.get(HEADER_LEN..).unwrap_or_default())
}

fn i64(r: &mut Reader<'_>, what: &'static str) -> Result<i64, WireError> {
    let b = r.take(8, what)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(b);
    Ok(i64::from_le_bytes(a))
}

fn finish(r: &Reader<'_>, op: &str) -> Result<(), WireError> {
    match r.remaining() {
        0 => Ok(()),
        n => Err(WireError::Invalid(format!(
            "{n} unexpected bytes at the end of {op}"
        ))),
    }
}

impl OpGetMore {
    /// Decodes a whole message, header included.
    pub fn decode(whole: &[u8]) -> Result<OpGetMore, WireError> {
        let mut r = body(whole);
        r.i32("ZERO")?;
        let full_collection_name = r.cstring("fullCollectionName")?.to_owned();
        let number_to_return = r.i32("numberToReturn")?;
        let cursor_id = i64(&mut r, "cursorID")?;
        finish(&r, "OP_GET_MORE")?;
        Ok(OpGetMore {
            full_collection_name,
            number_to_return,
            cursor_id,
        })
    }
}

impl OpKillCursors {
    /// Decodes a whole message, header included.
    pub fn decode(whole: &[u8]) -> Result<OpKillCursors, WireError> {
        let mut r = body(whole);
        r.i32("ZERO")?;
        let n = r.i32("numberOfCursorIDs")?;
        if !(1..=MAX_KILL_IDS).contains(&n) || n as usize * 8 != r.remaining() {
            return Err(WireError::Invalid(format!(
                "OP_KILL_CURSORS names {n} cursors in {} bytes",
                r.remaining()
            )));
        }
        let cursor_ids = (0..n)
            .map(|_| i64(&mut r, "cursorIDs"))
            .collect::<Result<_, _>>()?;
        Ok(OpKillCursors { cursor_ids })
    }
}

impl OpInsert {
    /// Decodes a whole message, header included.
    pub fn decode(whole: &[u8]) -> Result<OpInsert, WireError> {
        let mut r = body(whole);
        let flags = r.u32("flags")?;
        let full_collection_name = r.cstring("fullCollectionName")?.to_owned();
        let mut documents = Vec::new();
        while r.remaining() > 0 {
            documents.push(r.raw_document("documents")?);
        }
        if documents.is_empty() {
            return Err(WireError::Invalid("OP_INSERT carries no document".into()));
        }
        Ok(OpInsert {
            flags,
            full_collection_name,
            documents,
        })
    }
}

impl OpUpdate {
    /// Decodes a whole message, header included.
    pub fn decode(whole: &[u8]) -> Result<OpUpdate, WireError> {
        let mut r = body(whole);
        r.i32("ZERO")?;
        let full_collection_name = r.cstring("fullCollectionName")?.to_owned();
        let flags = r.u32("flags")?;
        let selector = r.raw_document("selector")?;
        let update = r.raw_document("update")?;
        finish(&r, "OP_UPDATE")?;
        Ok(OpUpdate {
            flags,
            full_collection_name,
            selector,
            update,
        })
    }
}

impl OpDelete {
    /// Decodes a whole message, header included.
    pub fn decode(whole: &[u8]) -> Result<OpDelete, WireError> {
        let mut r = body(whole);
        r.i32("ZERO")?;
        let full_collection_name = r.cstring("fullCollectionName")?.to_owned();
        let flags = r.u32("flags")?;
        let selector = r.raw_document("selector")?;
        finish(&r, "OP_DELETE")?;
        Ok(OpDelete {
            flags,
            full_collection_name,
            selector,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{MsgHeader, OpCode};
    use bson::{doc, Document};

    fn message(op: OpCode, payload: &[u8]) -> Vec<u8> {
        let mut m = Vec::new();
        MsgHeader {
            message_length: HEADER_LEN + payload.len(),
            request_id: 1,
            response_to: 0,
            op_code: op,
        }
        .encode(&mut m);
        m.extend_from_slice(payload);
        m
    }

    fn bytes(d: &Document) -> Vec<u8> {
        bson::to_vec(d).expect("encode")
    }

    #[test]
    fn decodes_get_more_and_kill_cursors() {
        let mut p = 0i32.to_le_bytes().to_vec();
        p.extend_from_slice(b"db.c\0");
        p.extend_from_slice(&5i32.to_le_bytes());
        p.extend_from_slice(&77i64.to_le_bytes());
        let g = OpGetMore::decode(&message(OpCode::GetMore, &p)).expect("decode");
        assert_eq!(
            (
                g.full_collection_name.as_str(),
                g.number_to_return,
                g.cursor_id
            ),
            ("db.c", 5, 77)
        );
        let mut k = 0i32.to_le_bytes().to_vec();
        k.extend_from_slice(&2i32.to_le_bytes());
        k.extend_from_slice(&1i64.to_le_bytes());
        k.extend_from_slice(&2i64.to_le_bytes());
        let kc = OpKillCursors::decode(&message(OpCode::KillCursors, &k)).expect("decode");
        assert_eq!(kc.cursor_ids, vec![1, 2]);
    }

    #[test]
    fn decodes_the_writes() {
        let mut i = 1u32.to_le_bytes().to_vec();
        i.extend_from_slice(b"db.c\0");
        i.extend(bytes(&doc! {"a": 1}));
        i.extend(bytes(&doc! {"a": 2}));
        let ins = OpInsert::decode(&message(OpCode::Insert, &i)).expect("decode");
        assert_eq!(
            (ins.flags, ins.documents.len()),
            (INSERT_CONTINUE_ON_ERROR, 2)
        );
        let mut u = 0i32.to_le_bytes().to_vec();
        u.extend_from_slice(b"db.c\0");
        u.extend_from_slice(&3u32.to_le_bytes());
        u.extend(bytes(&doc! {"a": 1}));
        u.extend(bytes(&doc! {"$set": {"b": 1}}));
        let up = OpUpdate::decode(&message(OpCode::Update, &u)).expect("decode");
        assert_eq!(up.flags, UPDATE_UPSERT | UPDATE_MULTI);
        assert_eq!(up.update.as_bytes(), bytes(&doc! {"$set": {"b": 1}}));
        let mut d = 0i32.to_le_bytes().to_vec();
        d.extend_from_slice(b"db.c\0");
        d.extend_from_slice(&1u32.to_le_bytes());
        d.extend(bytes(&doc! {"a": 1}));
        let del = OpDelete::decode(&message(OpCode::Delete, &d)).expect("decode");
        assert_eq!(
            (del.flags, del.selector.as_bytes()),
            (DELETE_SINGLE_REMOVE, bytes(&doc! {"a": 1}).as_slice())
        );
    }

    #[test]
    fn the_writes_keep_their_documents_as_sent() {
        // `{_id: 1, a: 1, a: 2}`: a name given twice, which a decoded document cannot hold.
        let mut sent = bson::RawDocumentBuf::new();
        sent.append("_id", 1);
        sent.append("a", 1);
        sent.append("a", 2);
        let mut i = 0u32.to_le_bytes().to_vec();
        i.extend_from_slice(b"db.c\0");
        i.extend_from_slice(sent.as_bytes());
        let ins = OpInsert::decode(&message(OpCode::Insert, &i)).expect("decode");
        assert_eq!(ins.documents, vec![sent.clone()]);
        let mut u = 0i32.to_le_bytes().to_vec();
        u.extend_from_slice(b"db.c\0");
        u.extend_from_slice(&0u32.to_le_bytes());
        u.extend_from_slice(sent.as_bytes());
        u.extend_from_slice(sent.as_bytes());
        let up = OpUpdate::decode(&message(OpCode::Update, &u)).expect("decode");
        assert_eq!((&up.selector, &up.update), (&sent, &sent));
    }

    #[test]
    fn malformed_messages_are_errors_not_panics() {
        for op in [
            OpCode::GetMore,
            OpCode::KillCursors,
            OpCode::Insert,
            OpCode::Update,
            OpCode::Delete,
        ] {
            for len in 0..40 {
                let junk: Vec<u8> = (0..len).map(|i| (i * 37 % 251) as u8).collect();
                let m = message(op, &junk);
                let _ = OpGetMore::decode(&m);
                let _ = OpKillCursors::decode(&m);
                let _ = OpInsert::decode(&m);
                let _ = OpUpdate::decode(&m);
                let _ = OpDelete::decode(&m);
            }
        }
        let mut k = 0i32.to_le_bytes().to_vec();
        k.extend_from_slice(&(-1i32).to_le_bytes());
        assert!(OpKillCursors::decode(&message(OpCode::KillCursors, &k)).is_err());
        let mut i = 0u32.to_le_bytes().to_vec();
        i.extend_from_slice(b"db.c\0");
        assert!(OpInsert::decode(&message(OpCode::Insert, &i)).is_err());
    }
}
