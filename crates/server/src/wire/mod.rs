//! The MongoDB wire protocol codec: message headers, OP_MSG, the legacy opcodes (OP_QUERY,
//! OP_REPLY, OP_GET_MORE, OP_KILL_CURSORS, OP_INSERT, OP_UPDATE, OP_DELETE), and
//! OP_COMPRESSED around them. Pure byte handling: no sockets, no commands. Every length
//! and offset read from the network is checked; nothing here panics on bad input.

mod compressed;
mod header;
mod legacy;
mod op_msg;
mod op_query;

pub use compressed::{
    decode_op_compressed, encode_op_compressed, negotiate, original_op_code, Compressor,
    Decompressed, NEGOTIABLE_COMPRESSORS,
};
pub use header::{MsgHeader, OpCode, HEADER_LEN, MAX_MESSAGE_BYTES};
pub use legacy::{
    OpDelete, OpGetMore, OpInsert, OpKillCursors, OpUpdate, DELETE_SINGLE_REMOVE,
    INSERT_CONTINUE_ON_ERROR, UPDATE_MULTI, UPDATE_UPSERT,
};
pub use op_msg::{
    encode_op_msg, encode_op_msg_raw, op_msg_reply_head, OpMsg, MSG_FLAG_CHECKSUM,
    MSG_FLAG_MORE_TO_COME,
};
pub use op_query::{
    encode_op_reply, encode_op_reply_docs, encode_op_reply_raw, query_flags, reply_flags, OpQuery,
    ReplyHead,
};

/// Largest BSON document a client may store (16 MiB), as `hello` reports it.
pub const MAX_BSON_OBJECT_BYTES: usize = 16 * 1024 * 1024;
/// Largest BSON document on the wire: 16 KiB of slack over the user limit for a command's
/// own fields around a maximal document (mongod's `BSONObjMaxInternalSize`).
pub const MAX_BSON_INTERNAL_BYTES: usize = MAX_BSON_OBJECT_BYTES + 16 * 1024;

/// Why a message could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The message ended before the named part.
    #[error("message truncated: {0}")]
    Truncated(&'static str),
    /// The message is malformed, as described.
    #[error("invalid message: {0}")]
    Invalid(String),
    /// An opcode this server does not serve.
    #[error("unsupported opcode {0}")]
    UnsupportedOpCode(i32),
    /// The OP_MSG checksum does not match its bytes.
    #[error("OP_MSG checksum mismatch")]
    ChecksumMismatch,
    /// A document's bytes are not valid BSON.
    #[error("{0}")]
    InvalidBson(String),
    /// A document longer than [`MAX_BSON_INTERNAL_BYTES`].
    #[error(
        "BSONObj size: {len} (0x{len:X}) is invalid. Size must be between 0 and \
         {MAX_BSON_INTERNAL_BYTES}(16MB) ({what})"
    )]
    ObjectTooLarge {
        /// Which document.
        what: &'static str,
        /// Its length.
        len: usize,
    },
    /// A document nested deeper than [`shale_doc::MAX_WIRE_DEPTH`] (mongod's `Overflow`).
    #[error("{what}: BSONObj exceeded maximum nested object depth: {limit}")]
    TooDeep {
        /// Which document.
        what: &'static str,
        /// The depth limit.
        limit: usize,
    },
}

/// A little-endian reader over untrusted bytes.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub(crate) fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], WireError> {
        if self.remaining() < n {
            return Err(WireError::Truncated(what));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    pub(crate) fn i32(&mut self, what: &'static str) -> Result<i32, WireError> {
        let b = self.take(4, what)?;
        Ok(i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub(crate) fn u32(&mut self, what: &'static str) -> Result<u32, WireError> {
        Ok(self.i32(what)? as u32)
    }

    pub(crate) fn u8(&mut self, what: &'static str) -> Result<u8, WireError> {
        Ok(self.take(1, what)?[0])
    }

    pub(crate) fn cstring(&mut self, what: &'static str) -> Result<&'a str, WireError> {
        let rest = &self.buf[self.pos..];
        let nul = rest
            .iter()
            .position(|&b| b == 0)
            .ok_or(WireError::Truncated(what))?;
        let s = std::str::from_utf8(&rest[..nul])
            .map_err(|_| WireError::Invalid(format!("{what} is not UTF-8")))?;
        self.pos += nul + 1;
        Ok(s)
    }

    /// One BSON document, length-checked and validated (structure, UTF-8, depth) without
    /// recursion, kept raw: what an insert's document sequence stores as it came.
    pub(crate) fn raw_document(
        &mut self,
        what: &'static str,
    ) -> Result<bson::RawDocumentBuf, WireError> {
        let bytes = self.checked_document_bytes(what)?;
        bson::RawDocumentBuf::from_bytes(bytes.to_vec())
            .map_err(|e| WireError::InvalidBson(format!("{what}: invalid BSON: {e}")))
    }

    /// One BSON document, length-checked and validated (structure, UTF-8, depth) without
    /// recursion, borrowed from the message: a command body, read in place.
    pub(crate) fn raw_document_ref(
        &mut self,
        what: &'static str,
    ) -> Result<&'a bson::RawDocument, WireError> {
        let bytes = self.checked_document_bytes(what)?;
        bson::RawDocument::from_bytes(bytes)
            .map_err(|e| WireError::InvalidBson(format!("{what}: invalid BSON: {e}")))
    }

    /// One BSON document, checked as `raw_document_ref` checks it, then parsed into an owned
    /// document (the legacy opcodes' path; OP_MSG keeps its body raw).
    pub(crate) fn document(&mut self, what: &'static str) -> Result<bson::Document, WireError> {
        let raw = self.raw_document_ref(what)?;
        bson::Document::try_from(raw)
            .map_err(|e| WireError::InvalidBson(format!("{what}: invalid BSON: {e}")))
    }

    /// The bytes of the next document, its length and its content checked (the iterative
    /// scan of `shale_doc::depth`).
    fn checked_document_bytes(&mut self, what: &'static str) -> Result<&'a [u8], WireError> {
        let rest = &self.buf[self.pos..];
        if rest.len() < 5 {
            return Err(WireError::Truncated(what));
        }
        let len = i32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]);
        if len > 0 && len as usize > MAX_BSON_INTERNAL_BYTES {
            return Err(WireError::ObjectTooLarge {
                what,
                len: len as usize,
            });
        }
        if len < 5 || len as usize > rest.len() {
            return Err(WireError::Invalid(format!(
                "{what}: BSON length {len} does not fit in {} remaining bytes",
                rest.len()
            )));
        }
        let bytes = self.take(len as usize, what)?;
        match shale_doc::check_depth(bytes, shale_doc::MAX_WIRE_DEPTH) {
            Ok(_) => {}
            Err(shale_doc::DepthError::TooDeep { limit }) => {
                return Err(WireError::TooDeep { what, limit })
            }
            Err(e) => {
                return Err(WireError::InvalidBson(format!(
                    "{what}: {}",
                    e.to_wire_error().message
                )))
            }
        }
        Ok(bytes)
    }
}
