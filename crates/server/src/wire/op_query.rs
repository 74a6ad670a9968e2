//! Legacy OP_QUERY (opcode 2004): commands on `<db>.$cmd` (the first handshake of many
//! drivers) and queries on collections (`crate::legacy` runs those), and OP_REPLY (opcode
//! 1) to answer it, OP_GET_MORE too.

use super::{MsgHeader, OpCode, Reader, WireError, HEADER_LEN};
use bson::{Document, RawDocument, RawDocumentBuf};

/// A decoded OP_QUERY.
#[derive(Debug, Clone, PartialEq)]
pub struct OpQuery {
    /// Flag bits (`query_flags`).
    pub flags: u32,
    /// `db.collection` (`db.$cmd` for a command).
    pub full_collection_name: String,
    /// Documents to skip.
    pub number_to_skip: i32,
    /// Documents to return (negative: one batch, then close).
    pub number_to_return: i32,
    /// The query or command document, raw as sent (checked as every received document is):
    /// a filter in it may name a field twice, which a decoded document would collapse.
    pub query: RawDocumentBuf,
    /// The projection (`returnFieldsSelector`), when the message carries one.
    pub fields: Option<Document>,
}

/// OP_QUERY flag bits (the legacy opcode documentation's names).
pub mod query_flags {
    /// Keep the cursor open after its last document.
    pub const TAILABLE_CURSOR: u32 = 1 << 1;
    /// May read from a secondary.
    pub const SLAVE_OK: u32 = 1 << 2;
    /// `oplogReplay`: a read of the oplog from a timestamp.
    pub const OPLOG_REPLAY: u32 = 1 << 3;
    /// The cursor never times out.
    pub const NO_CURSOR_TIMEOUT: u32 = 1 << 4;
    /// A tailable cursor's getMore waits for data.
    pub const AWAIT_DATA: u32 = 1 << 5;
    /// Stream every batch without getMores.
    pub const EXHAUST: u32 = 1 << 6;
    /// Partial results from a sharded cluster are fine.
    pub const PARTIAL: u32 = 1 << 7;
}

/// OP_REPLY responseFlags bits.
pub mod reply_flags {
    /// The getMore's cursor does not exist.
    pub const CURSOR_NOT_FOUND: u32 = 1;
    /// The query failed: the document is `{$err}`.
    pub const QUERY_FAILURE: u32 = 1 << 1;
    /// The server supports awaitData.
    pub const AWAIT_CAPABLE: u32 = 1 << 3;
}

/// The fields of an OP_REPLY other than its documents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplyHead {
    /// Flag bits (`reply_flags`).
    pub response_flags: u32,
    /// The cursor to ask for more (0: none).
    pub cursor_id: i64,
    /// Where in the cursor this batch starts.
    pub starting_from: i32,
}

impl OpQuery {
    /// Decodes the bytes after the header.
    pub fn decode(whole: &[u8]) -> Result<OpQuery, WireError> {
        let mut r = Reader::new(&whole[HEADER_LEN..]);
        let flags = r.u32("flags")?;
        let full_collection_name = r.cstring("fullCollectionName")?.to_owned();
        let number_to_skip = r.i32("numberToSkip")?;
        let number_to_return = r.i32("numberToReturn")?;
        let query = r.raw_document("query")?;
        let fields = if r.remaining() > 0 {
            Some(r.document("returnFieldsSelector")?)
        } else {
            None
        };
        if r.remaining() > 0 {
            return Err(WireError::Invalid(format!(
                "{} bytes after OP_QUERY's returnFieldsSelector",
                r.remaining()
            )));
        }
        Ok(OpQuery {
            flags,
            full_collection_name,
            number_to_skip,
            number_to_return,
            query,
            fields,
        })
    }

    /// The database for a `<db>.$cmd` query, `None` for anything else.
    pub fn command_db(&self) -> Option<&str> {
        self.full_collection_name.strip_suffix(".$cmd")
    }

    /// The command document, raw as sent (a name it repeats kept, as an OP_MSG body keeps
    /// it): legacy drivers may wrap it as `{$query: {...}, $readPreference}`.
    pub fn command(&self) -> &RawDocument {
        self.query.get_document("$query").unwrap_or(&self.query)
    }
}

/// Encodes an OP_REPLY with one document.
#[allow(
    clippy::expect_used,
    reason = "serialising a document built in memory into a Vec cannot fail"
)]
pub fn encode_op_reply(request_id: i32, response_to: i32, doc: &Document) -> Vec<u8> {
    let mut body = Vec::new();
    doc.to_writer(&mut body)
        .expect("serialising an in-memory document cannot fail");
    encode_op_reply_raw(request_id, response_to, &body)
}

/// Encodes an OP_REPLY around one already serialised document (a command's reply).
pub fn encode_op_reply_raw(request_id: i32, response_to: i32, body: &[u8]) -> Vec<u8> {
    let head = ReplyHead {
        response_flags: reply_flags::AWAIT_CAPABLE,
        cursor_id: 0,
        starting_from: 0,
    };
    encode_op_reply_docs(request_id, response_to, head, &[body])
}

/// Encodes an OP_REPLY with `head` around already serialised documents.
pub fn encode_op_reply_docs<B: AsRef<[u8]>>(
    request_id: i32,
    response_to: i32,
    head: ReplyHead,
    docs: &[B],
) -> Vec<u8> {
    let docs_len: usize = docs.iter().map(|d| d.as_ref().len()).sum();
    let len = HEADER_LEN + 4 + 8 + 4 + 4 + docs_len;
    let mut out = Vec::with_capacity(len);
    MsgHeader {
        message_length: len,
        request_id,
        response_to,
        op_code: OpCode::Reply,
    }
    .encode(&mut out);
    out.extend_from_slice(&head.response_flags.to_le_bytes());
    out.extend_from_slice(&head.cursor_id.to_le_bytes());
    out.extend_from_slice(&head.starting_from.to_le_bytes());
    #[allow(
        clippy::expect_used,
        reason = "a batch holds far fewer than 2^31 documents"
    )]
    let returned = i32::try_from(docs.len()).expect("a batch holds far fewer than 2^31 documents");
    out.extend_from_slice(&returned.to_le_bytes());
    for d in docs {
        out.extend_from_slice(d.as_ref());
    }
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
        assert_eq!(
            Document::try_from(q.command()).expect("a command"),
            doc! {"isMaster": 1}
        );
    }
}
