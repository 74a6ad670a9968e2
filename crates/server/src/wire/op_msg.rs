//! OP_MSG (opcode 2013): flag bits, a body section (kind 0), document sequences (kind 1) and
//! the optional CRC-32C checksum. Nothing is decoded: the body stays raw, borrowed from the
//! message, and the sequences' documents raw beside it (both validated); `crate::command`
//! reads them, and builds an owned body only for the handlers that still take one.

use super::{MsgHeader, OpCode, Reader, WireError, HEADER_LEN, MAX_MESSAGE_BYTES};
use bson::{Document, RawDocument, RawDocumentBuf};

/// The message ends with a CRC-32C of everything before it.
pub const MSG_FLAG_CHECKSUM: u32 = 1 << 0;
/// The sender will not wait for a reply.
pub const MSG_FLAG_MORE_TO_COME: u32 = 1 << 1;
/// The client accepts exhaust replies.
const MSG_FLAG_EXHAUST_ALLOWED: u32 = 1 << 16;
/// Bits 0-15 are "required": an unknown one set means we must refuse the message.
const REQUIRED_BITS: u32 = 0xffff;
const KNOWN_BITS: u32 = MSG_FLAG_CHECKSUM | MSG_FLAG_MORE_TO_COME | MSG_FLAG_EXHAUST_ALLOWED;

/// A decoded OP_MSG request.
#[derive(Debug, Clone, PartialEq)]
pub struct OpMsg<'a> {
    /// The flag bits (checksumPresent, moreToCome, exhaustAllowed).
    pub flags: u32,
    /// The body section, raw and checked, borrowed from the message.
    pub body: &'a RawDocument,
    /// The document sequences (kind 1 sections), by identifier, each document raw.
    pub sequences: Vec<(String, Vec<RawDocumentBuf>)>,
}

impl<'a> OpMsg<'a> {
    /// Decodes the bytes after the header. `whole` is the full message (for the checksum).
    pub fn decode(whole: &'a [u8]) -> Result<OpMsg<'a>, WireError> {
        let payload = &whole[HEADER_LEN..];
        let mut r = Reader::new(payload);
        let flags = r.u32("flagBits")?;
        let unknown_required = flags & REQUIRED_BITS & !KNOWN_BITS;
        if unknown_required != 0 {
            return Err(WireError::Invalid(format!(
                "unknown required OP_MSG flag bits {unknown_required:#x}"
            )));
        }
        let sections_end = if flags & MSG_FLAG_CHECKSUM != 0 {
            verify_checksum(whole)?;
            payload.len() - 4
        } else {
            payload.len()
        };
        let mut r = Reader::new(&payload[4..sections_end]);
        let mut body = None;
        let mut sequences = Vec::new();
        while r.remaining() > 0 {
            match r.u8("section kind")? {
                0 if body.is_some() => {
                    return Err(WireError::Invalid("more than one body section".into()))
                }
                0 => body = Some(r.raw_document_ref("body section")?),
                1 => sequences.push(decode_sequence(&mut r)?),
                k => return Err(WireError::Invalid(format!("unknown section kind {k}"))),
            }
        }
        let body = body.ok_or_else(|| WireError::Invalid("OP_MSG has no body".into()))?;
        for (i, (id, _)) in sequences.iter().enumerate() {
            if crate::command::get(body, id).is_some()
                || sequences[..i].iter().any(|(other, _)| other == id)
            {
                return Err(WireError::Invalid(format!(
                    "document sequence {id:?} duplicates a body field"
                )));
            }
        }
        Ok(OpMsg {
            flags,
            body,
            sequences,
        })
    }
}

fn decode_sequence(r: &mut Reader<'_>) -> Result<(String, Vec<RawDocumentBuf>), WireError> {
    let size = r.i32("sequence size")?;
    if size < 4 || size as usize - 4 > r.remaining() {
        return Err(WireError::Invalid(format!("document sequence size {size}")));
    }
    let bytes = r.take(size as usize - 4, "document sequence")?;
    let mut s = Reader::new(bytes);
    let id = s.cstring("sequence identifier")?.to_owned();
    let mut docs = Vec::new();
    while s.remaining() > 0 {
        docs.push(s.raw_document("sequence document")?);
    }
    Ok((id, docs))
}

fn verify_checksum(whole: &[u8]) -> Result<(), WireError> {
    if whole.len() < HEADER_LEN + 8 {
        return Err(WireError::Truncated("checksum"));
    }
    let (data, sum) = whole.split_at(whole.len() - 4);
    let expected = u32::from_le_bytes([sum[0], sum[1], sum[2], sum[3]]);
    if crc32c::crc32c(data) != expected {
        return Err(WireError::ChecksumMismatch);
    }
    Ok(())
}

/// Encodes a reply OP_MSG carrying `body` in response to `response_to`.
#[allow(
    clippy::expect_used,
    reason = "serialising a document built in memory into a Vec cannot fail"
)]
pub fn encode_op_msg(request_id: i32, response_to: i32, body: &Document) -> Vec<u8> {
    let mut doc = Vec::new();
    body.to_writer(&mut doc)
        .expect("serialising an in-memory document cannot fail");
    encode_op_msg_raw(request_id, response_to, &doc)
}

/// Encodes a reply OP_MSG around an already serialised body document.
pub fn encode_op_msg_raw(request_id: i32, response_to: i32, body: &[u8]) -> Vec<u8> {
    let mut out = op_msg_reply_head(request_id, response_to, body.len());
    out.reserve_exact(body.len());
    out.extend_from_slice(body);
    out
}

/// The bytes of a reply OP_MSG in front of its body document of `body_len` bytes: the
/// header, no flags, section kind 0. A server sends them and the body with one vectored
/// write, not copying the body behind them.
pub fn op_msg_reply_head(request_id: i32, response_to: i32, body_len: usize) -> Vec<u8> {
    let len = HEADER_LEN + 4 + 1 + body_len;
    assert!(
        len <= MAX_MESSAGE_BYTES,
        "reply of {len} bytes exceeds the message limit"
    );
    let mut out = Vec::with_capacity(HEADER_LEN + 5);
    MsgHeader {
        message_length: len,
        request_id,
        response_to,
        op_code: OpCode::Msg,
    }
    .encode(&mut out);
    out.extend_from_slice(&0u32.to_le_bytes());
    out.push(0);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn message(flags: u32, sections: &[u8], checksum: bool) -> Vec<u8> {
        let mut payload = flags.to_le_bytes().to_vec();
        payload.extend_from_slice(sections);
        let len = HEADER_LEN + payload.len() + if checksum { 4 } else { 0 };
        let mut out = Vec::new();
        MsgHeader {
            message_length: len,
            request_id: 1,
            response_to: 0,
            op_code: OpCode::Msg,
        }
        .encode(&mut out);
        out.extend_from_slice(&payload);
        if checksum {
            let sum = crc32c::crc32c(&out);
            out.extend_from_slice(&sum.to_le_bytes());
        }
        out
    }

    fn body_section(d: &Document) -> Vec<u8> {
        let mut s = vec![0u8];
        d.to_writer(&mut s).expect("encode");
        s
    }

    #[test]
    fn body_and_sequence_are_kept_raw() {
        let mut sections = body_section(&doc! {"insert": "c", "$db": "test"});
        let mut seq = b"documents\0".to_vec();
        doc! {"_id": 1}.to_writer(&mut seq).expect("encode");
        doc! {"_id": 2}.to_writer(&mut seq).expect("encode");
        sections.push(1);
        sections.extend_from_slice(&((seq.len() + 4) as i32).to_le_bytes());
        sections.extend_from_slice(&seq);
        let whole = message(0, &sections, false);
        let msg = OpMsg::decode(&whole).expect("decode");
        assert_eq!(msg.body.get_str("insert"), Ok("c"));
        assert_eq!(msg.sequences.len(), 1);
        assert_eq!(msg.sequences[0].0, "documents");
        assert_eq!(msg.sequences[0].1.len(), 2);
    }

    #[test]
    fn checksum_is_verified() {
        let sections = body_section(&doc! {"ping": 1});
        let mut m = message(MSG_FLAG_CHECKSUM, &sections, true);
        assert!(OpMsg::decode(&m).is_ok());
        let n = m.len();
        m[n - 6] ^= 1;
        assert!(OpMsg::decode(&m).is_err());
    }

    #[test]
    fn unknown_required_bits_are_refused() {
        let sections = body_section(&doc! {"ping": 1});
        assert!(OpMsg::decode(&message(1 << 5, &sections, false)).is_err());
        // Optional bits (16 and up) are ignored.
        assert!(OpMsg::decode(&message(1 << 20, &sections, false)).is_ok());
    }

    #[test]
    fn oversized_and_invalid_documents_have_their_own_errors() {
        use crate::wire::MAX_BSON_INTERNAL_BYTES;
        // A body at the internal limit is accepted; one byte more is too large.
        let pad = "x".repeat(MAX_BSON_INTERNAL_BYTES - 23);
        let at_limit = doc! {"ping": 1, "p": pad};
        assert_eq!(
            bson::to_vec(&at_limit).expect("encode").len(),
            MAX_BSON_INTERNAL_BYTES
        );
        assert!(OpMsg::decode(&message(0, &body_section(&at_limit), false)).is_ok());
        let over = doc! {"ping": 1, "p": "x".repeat(MAX_BSON_INTERNAL_BYTES - 22)};
        assert!(matches!(
            OpMsg::decode(&message(0, &body_section(&over), false)),
            Err(WireError::ObjectTooLarge { .. })
        ));
        // Well framed, but an element of unknown type 0x7f.
        let mut bad = vec![0u8];
        bad.extend_from_slice(&[12, 0, 0, 0, 0x7f, b'a', 0, 1, 0, 0, 0, 0]);
        assert!(matches!(
            OpMsg::decode(&message(0, &bad, false)),
            Err(WireError::InvalidBson(_))
        ));
    }

    #[test]
    fn garbage_never_panics() {
        let mut seed = 0x1234_5678u64;
        for len in 0..300usize {
            let mut m = message(0, &[], false);
            for _ in 0..len {
                seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
                m.push((seed >> 33) as u8);
            }
            let _ = OpMsg::decode(&m);
        }
    }
}
