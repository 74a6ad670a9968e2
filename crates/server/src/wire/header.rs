//! The 16-byte standard message header and the opcodes we know.

use super::{Reader, WireError};

/// Size of the standard header.
pub const HEADER_LEN: usize = 16;
/// Largest message accepted or sent (MongoDB's `maxMessageSizeBytes`).
pub const MAX_MESSAGE_BYTES: usize = 48_000_000;

/// Opcodes of the wire protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpCode {
    /// OP_REPLY (1).
    Reply,
    /// OP_UPDATE (2001).
    Update,
    /// OP_INSERT (2002).
    Insert,
    /// OP_QUERY (2004).
    Query,
    /// OP_GET_MORE (2005).
    GetMore,
    /// OP_DELETE (2006).
    Delete,
    /// OP_KILL_CURSORS (2007).
    KillCursors,
    /// OP_COMPRESSED (2012).
    Compressed,
    /// OP_MSG (2013).
    Msg,
    /// Any other number.
    Other(i32),
}

impl OpCode {
    /// The opcode of a header's number.
    pub fn from_i32(v: i32) -> Self {
        match v {
            1 => OpCode::Reply,
            2001 => OpCode::Update,
            2002 => OpCode::Insert,
            2004 => OpCode::Query,
            2005 => OpCode::GetMore,
            2006 => OpCode::Delete,
            2007 => OpCode::KillCursors,
            2012 => OpCode::Compressed,
            2013 => OpCode::Msg,
            other => OpCode::Other(other),
        }
    }

    /// The opcode's number.
    pub fn as_i32(self) -> i32 {
        match self {
            OpCode::Reply => 1,
            OpCode::Update => 2001,
            OpCode::Insert => 2002,
            OpCode::Query => 2004,
            OpCode::GetMore => 2005,
            OpCode::Delete => 2006,
            OpCode::KillCursors => 2007,
            OpCode::Compressed => 2012,
            OpCode::Msg => 2013,
            OpCode::Other(v) => v,
        }
    }
}

/// A decoded message header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MsgHeader {
    /// Total message length, header included.
    pub message_length: usize,
    /// The sender's id for the message.
    pub request_id: i32,
    /// The request this message answers (0 in requests).
    pub response_to: i32,
    /// The opcode.
    pub op_code: OpCode,
}

impl MsgHeader {
    /// Decodes and bounds-checks a header.
    pub fn decode(bytes: &[u8; HEADER_LEN]) -> Result<Self, WireError> {
        let mut r = Reader::new(bytes);
        let len = r.i32("messageLength")?;
        let request_id = r.i32("requestID")?;
        let response_to = r.i32("responseTo")?;
        let op_code = OpCode::from_i32(r.i32("opCode")?);
        if len < HEADER_LEN as i32 || len as usize > MAX_MESSAGE_BYTES {
            return Err(WireError::Invalid(format!(
                "message length {len} outside [{HEADER_LEN}, {MAX_MESSAGE_BYTES}]"
            )));
        }
        Ok(MsgHeader {
            message_length: len as usize,
            request_id,
            response_to,
            op_code,
        })
    }

    /// Appends the encoded header to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&(self.message_length as i32).to_le_bytes());
        out.extend_from_slice(&self.request_id.to_le_bytes());
        out.extend_from_slice(&self.response_to.to_le_bytes());
        out.extend_from_slice(&self.op_code.as_i32().to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let h = MsgHeader {
            message_length: 100,
            request_id: 7,
            response_to: 3,
            op_code: OpCode::Msg,
        };
        let mut out = Vec::new();
        h.encode(&mut out);
        let arr: [u8; HEADER_LEN] = out.try_into().expect("16 bytes");
        assert_eq!(MsgHeader::decode(&arr), Ok(h));
    }

    #[test]
    fn rejects_absurd_lengths() {
        let mut b = [0u8; HEADER_LEN];
        b[..4].copy_from_slice(&(-5i32).to_le_bytes());
        assert!(MsgHeader::decode(&b).is_err());
        b[..4].copy_from_slice(&(MAX_MESSAGE_BYTES as i32 + 1).to_le_bytes());
        assert!(MsgHeader::decode(&b).is_err());
    }
}
