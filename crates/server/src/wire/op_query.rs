//! Legacy OP_QUERY (opcode 2004), accepted only for commands on `<db>.$cmd` (the first
//! handshake of many drivers), and OP_REPLY (opcode 1) to answer it.

use super::{MsgHeader, OpCode, Reader, WireError, HEADER_LEN};
use bson::Document;

/// A decoded OP_QUERY.
#[derive(Debug, Clone, PartialEq)]
pub struct OpQuery {
    pub flags: u32,
    pub full_collection_name: String,
    pub number_to_skip: i32,
    pub number_to_return: i32,
    pub query: Document,
}

impl OpQuery {
    /// Decodes the bytes after the header.
    pub fn decode(whole: &[u8]) -> Result<OpQuery, WireError> {
        let mut r = Reader::new(&whole[HEADER_LEN..]);
        let flags = r.u32("flags")?;
        let full_collection_name = r.cstring("fullCollectionName")?.to_owned();
        let number_to_skip = r.i32("numberToSkip")?;
        let number_to_return = r.i32("numberToReturn")?;
        let query = r.document("query")?;
        // An optional returnFieldsSelector may follow; commands ignore it.
        Ok(OpQuery {
            flags,
            full_collection_name,
            number_to_skip,
            number_to_return,
            query,
        })
    }

    /// The database for a `<db>.$cmd` query, `None` for anything else.
    pub fn command_db(&self) -> Option<&str> {
        self.full_collection_name.strip_suffix(".$cmd")
    }

    /// The command document: legacy drivers may wrap it as `{$query: {...}, $readPreference}`.
    pub fn command(&self) -> Document {
        match self.query.get_document("$query") {
            Ok(inner) => inner.clone(),
            Err(_) => self.query.clone(),
        }
    }
}

/// Encodes an OP_REPLY with one document.
pub fn encode_op_reply(request_id: i32, response_to: i32, doc: &Document) -> Vec<u8> {
    let mut body = Vec::new();
    doc.to_writer(&mut body)
        .expect("serialising an in-memory document cannot fail");
    encode_op_reply_raw(request_id, response_to, &body)
}

/// Encodes an OP_REPLY around one already serialised document.
pub fn encode_op_reply_raw(request_id: i32, response_to: i32, body: &[u8]) -> Vec<u8> {
    let len = HEADER_LEN + 4 + 8 + 4 + 4 + body.len();
    let mut out = Vec::with_capacity(len);
    MsgHeader {
        message_length: len,
        request_id,
        response_to,
        op_code: OpCode::Reply,
    }
    .encode(&mut out);
    const AWAIT_CAPABLE: u32 = 8;
    out.extend_from_slice(&AWAIT_CAPABLE.to_le_bytes());
    out.extend_from_slice(&0i64.to_le_bytes()); // cursorID
    out.extend_from_slice(&0i32.to_le_bytes()); // startingFrom
    out.extend_from_slice(&1i32.to_le_bytes()); // numberReturned
    out.extend_from_slice(body);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn decodes_a_wrapped_handshake() {
        let mut payload = 0u32.to_le_bytes().to_vec();
        payload.extend_from_slice(b"admin.$cmd\0");
        payload.extend_from_slice(&0i32.to_le_bytes());
        payload.extend_from_slice(&(-1i32).to_le_bytes());
        doc! {"$query": {"isMaster": 1}, "$readPreference": {"mode": "primary"}}
            .to_writer(&mut payload)
            .expect("encode");
        let mut m = Vec::new();
        MsgHeader {
            message_length: HEADER_LEN + payload.len(),
            request_id: 9,
            response_to: 0,
            op_code: OpCode::Query,
        }
        .encode(&mut m);
        m.extend_from_slice(&payload);
        let q = OpQuery::decode(&m).expect("decode");
        assert_eq!(q.command_db(), Some("admin"));
        assert_eq!(q.command(), doc! {"isMaster": 1});
    }
}
