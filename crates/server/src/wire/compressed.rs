//! OP_COMPRESSED (opcode 2012): another message's body squeezed by snappy, zlib or zstd
//! behind a 9-byte header (original opcode, uncompressed size, compressor id). Decoding
//! rebuilds the original message, header included, so the rest of the codec never knows it
//! was compressed. Sizes come from the network: the stated uncompressed size is bounded by
//! the message limit before anything is allocated, and the output must match it exactly.

use super::{MsgHeader, OpCode, Reader, WireError, HEADER_LEN, MAX_MESSAGE_BYTES};
use std::io::{Read, Write};

/// Bytes of the OP_COMPRESSED header after the standard header.
const COMPRESSION_HEADER_LEN: usize = 4 + 4 + 1;

/// A wire compressor, by the id it has in OP_COMPRESSED.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Compressor {
    /// Id 0: the body is stored as is (the spec's test compressor; never advertised).
    Noop,
    /// Id 1: snappy's raw block format.
    Snappy,
    /// Id 2: zlib.
    Zlib,
    /// Id 3: zstd.
    Zstd,
}

/// The compressors offered in `hello`, by their handshake names.
pub const NEGOTIABLE_COMPRESSORS: [Compressor; 3] =
    [Compressor::Snappy, Compressor::Zstd, Compressor::Zlib];

/// zlib's default level (what mongod's zlib compressor uses).
const ZLIB_LEVEL: u32 = 6;
/// zstd's default level (what mongod's zstd compressor uses).
const ZSTD_LEVEL: i32 = 3;

impl Compressor {
    /// The compressor with this wire id.
    pub fn from_id(id: u8) -> Option<Compressor> {
        match id {
            0 => Some(Compressor::Noop),
            1 => Some(Compressor::Snappy),
            2 => Some(Compressor::Zlib),
            3 => Some(Compressor::Zstd),
            _ => None,
        }
    }

    /// The compressor's wire id.
    pub fn id(self) -> u8 {
        match self {
            Compressor::Noop => 0,
            Compressor::Snappy => 1,
            Compressor::Zlib => 2,
            Compressor::Zstd => 3,
        }
    }

    /// The name used in the handshake's `compression` array.
    pub fn name(self) -> &'static str {
        match self {
            Compressor::Noop => "noop",
            Compressor::Snappy => "snappy",
            Compressor::Zlib => "zlib",
            Compressor::Zstd => "zstd",
        }
    }

    /// A compressor a client may negotiate, by handshake name.
    pub fn negotiable(name: &str) -> Option<Compressor> {
        NEGOTIABLE_COMPRESSORS
            .into_iter()
            .find(|c| c.name() == name)
    }

    /// Compresses `input` (cannot fail for in-memory data).
    #[allow(
        clippy::expect_used,
        reason = "compressing into memory cannot fail for messages below the 48 MB limit"
    )]
    pub fn compress(self, input: &[u8]) -> Vec<u8> {
        match self {
            Compressor::Noop => input.to_vec(),
            Compressor::Snappy => snap::raw::Encoder::new()
                .compress_vec(input)
                .expect("snappy compresses any input below 4 GiB"),
            Compressor::Zlib => {
                let mut enc = flate2::write::ZlibEncoder::new(
                    Vec::with_capacity(input.len() / 2 + 64),
                    flate2::Compression::new(ZLIB_LEVEL),
                );
                enc.write_all(input).expect("writing to a Vec cannot fail");
                enc.finish().expect("writing to a Vec cannot fail")
            }
            Compressor::Zstd => zstd::bulk::compress(input, ZSTD_LEVEL)
                .expect("zstd compresses any in-memory input"),
        }
    }

    /// Decompresses `input`, which must expand to exactly `expected_len` bytes.
    pub fn decompress(self, input: &[u8], expected_len: usize) -> Result<Vec<u8>, WireError> {
        let bad = |why: String| WireError::Invalid(format!("{} decompression: {why}", self.name()));
        let out = match self {
            Compressor::Noop => input.to_vec(),
            Compressor::Snappy => {
                let len = snap::raw::decompress_len(input).map_err(|e| bad(e.to_string()))?;
                if len != expected_len {
                    return Err(bad(format!("{len} bytes where {expected_len} were stated")));
                }
                snap::raw::Decoder::new()
                    .decompress_vec(input)
                    .map_err(|e| bad(e.to_string()))?
            }
            Compressor::Zlib => {
                // One byte more than stated, so a longer stream is seen as too long.
                let mut out = Vec::with_capacity(expected_len);
                flate2::read::ZlibDecoder::new(input)
                    .take(expected_len as u64 + 1)
                    .read_to_end(&mut out)
                    .map_err(|e| bad(e.to_string()))?;
                out
            }
            Compressor::Zstd => {
                zstd::bulk::decompress(input, expected_len).map_err(|e| bad(e.to_string()))?
            }
        };
        if out.len() != expected_len {
            return Err(bad(format!(
                "{} bytes where {expected_len} were stated",
                out.len()
            )));
        }
        Ok(out)
    }
}

/// The intersection of what a client offered and what we support, in the client's order
/// (duplicates dropped). Names we do not know are skipped, as mongod skips them.
pub fn negotiate<'a>(offered: impl IntoIterator<Item = &'a str>) -> Vec<Compressor> {
    let mut agreed = Vec::new();
    for name in offered {
        if let Some(c) = Compressor::negotiable(name) {
            if !agreed.contains(&c) {
                agreed.push(c);
            }
        }
    }
    agreed
}

/// What decoding an OP_COMPRESSED gives: the original message, whole, and how it came.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decompressed {
    /// The compressor it came with (replies use the same).
    pub compressor: Compressor,
    /// The original message: a standard header (length, ids, original opcode) and its body.
    pub message: Vec<u8>,
}

/// The original opcode an OP_COMPRESSED claims to wrap, read without decompressing (so an
/// error about the message can still be answered in the opcode's own reply format).
pub fn original_op_code(whole: &[u8]) -> Option<OpCode> {
    let mut r = Reader::new(whole.get(HEADER_LEN..)?);
    r.i32("originalOpcode").ok().map(OpCode::from_i32)
}

/// Decodes an OP_COMPRESSED message (`whole` includes its header).
pub fn decode_op_compressed(whole: &[u8]) -> Result<Decompressed, WireError> {
    let head: &[u8; HEADER_LEN] = whole
        .get(..HEADER_LEN)
        .and_then(|h| h.try_into().ok())
        .ok_or(WireError::Truncated("message header"))?;
    let header = MsgHeader::decode(head)?;
    let mut r = Reader::new(&whole[HEADER_LEN..]);
    let original = OpCode::from_i32(r.i32("originalOpcode")?);
    let size = r.i32("uncompressedSize")?;
    let id = r.u8("compressorId")?;
    if original == OpCode::Compressed {
        return Err(WireError::Invalid(
            "OP_COMPRESSED wraps another OP_COMPRESSED".into(),
        ));
    }
    let compressor = Compressor::from_id(id).ok_or_else(|| {
        WireError::Invalid(format!("unknown compressor id {id} in OP_COMPRESSED"))
    })?;
    if size < 0 || size as usize > MAX_MESSAGE_BYTES - HEADER_LEN {
        return Err(WireError::Invalid(format!(
            "OP_COMPRESSED uncompressed size {size} outside [0, {}]",
            MAX_MESSAGE_BYTES - HEADER_LEN
        )));
    }
    let compressed = r.take(r.remaining(), "compressedMessage")?;
    let body = compressor.decompress(compressed, size as usize)?;
    let mut message = Vec::with_capacity(HEADER_LEN + body.len());
    MsgHeader {
        message_length: HEADER_LEN + body.len(),
        request_id: header.request_id,
        response_to: header.response_to,
        op_code: original,
    }
    .encode(&mut message);
    message.extend_from_slice(&body);
    Ok(Decompressed {
        compressor,
        message,
    })
}

/// Wraps an encoded message (header included) in OP_COMPRESSED. Returns the message
/// unchanged when compression would not fit in the message limit, as mongod does.
#[allow(
    clippy::expect_used,
    reason = "the message was encoded here, starting with a whole header"
)]
pub fn encode_op_compressed(message: &[u8], compressor: Compressor) -> Vec<u8> {
    let head: [u8; HEADER_LEN] = message[..HEADER_LEN]
        .try_into()
        .expect("an encoded message starts with a whole header");
    let header = MsgHeader::decode(&head).expect("we encoded this header ourselves");
    let body = &message[HEADER_LEN..];
    let packed = compressor.compress(body);
    let len = HEADER_LEN + COMPRESSION_HEADER_LEN + packed.len();
    if len > MAX_MESSAGE_BYTES {
        return message.to_vec();
    }
    let mut out = Vec::with_capacity(len);
    MsgHeader {
        message_length: len,
        request_id: header.request_id,
        response_to: header.response_to,
        op_code: OpCode::Compressed,
    }
    .encode(&mut out);
    out.extend_from_slice(&header.op_code.as_i32().to_le_bytes());
    out.extend_from_slice(&(body.len() as i32).to_le_bytes());
    out.push(compressor.id());
    out.extend_from_slice(&packed);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{encode_op_msg, OpMsg};
    use bson::doc;

    const ALL: [Compressor; 4] = [
        Compressor::Noop,
        Compressor::Snappy,
        Compressor::Zlib,
        Compressor::Zstd,
    ];

    fn sample() -> Vec<u8> {
        let body = doc! {"ping": 1, "$db": "admin", "pad": "x".repeat(5000)};
        encode_op_msg(77, 5, &body)
    }

    #[test]
    fn every_compressor_round_trips_an_op_msg() {
        let original = sample();
        for c in ALL {
            let packed = encode_op_compressed(&original, c);
            assert_eq!(&packed[12..16], &2012i32.to_le_bytes(), "{c:?}");
            if c != Compressor::Noop {
                assert!(
                    packed.len() < original.len() / 4,
                    "{c:?} compresses padding"
                );
            }
            let back = decode_op_compressed(&packed).expect("decode");
            assert_eq!(back.compressor, c);
            assert_eq!(back.message, original, "{c:?}");
            let msg = OpMsg::decode(&back.message).expect("inner OP_MSG");
            assert_eq!(msg.body.get_str("$db"), Ok("admin"));
            assert_eq!(original_op_code(&packed), Some(OpCode::Msg));
        }
    }

    #[test]
    fn ids_and_names_are_the_specs() {
        for c in ALL {
            assert_eq!(Compressor::from_id(c.id()), Some(c));
        }
        assert_eq!(Compressor::Snappy.id(), 1);
        assert_eq!(Compressor::Zlib.id(), 2);
        assert_eq!(Compressor::Zstd.id(), 3);
        assert_eq!(Compressor::from_id(4), None);
        assert_eq!(Compressor::negotiable("noop"), None);
    }

    #[test]
    fn negotiation_keeps_the_clients_order_and_drops_unknowns() {
        assert_eq!(
            negotiate(["zlib", "lz4", "zstd", "zlib", "snappy"]),
            vec![Compressor::Zlib, Compressor::Zstd, Compressor::Snappy]
        );
        assert!(negotiate(["noop", "brotli"]).is_empty());
    }

    #[test]
    fn a_wrong_stated_size_is_refused() {
        let original = sample();
        for c in ALL {
            let mut packed = encode_op_compressed(&original, c);
            let stated = i32::from_le_bytes(packed[20..24].try_into().expect("4"));
            for wrong in [stated - 1, stated + 1, 0] {
                packed[20..24].copy_from_slice(&wrong.to_le_bytes());
                assert!(decode_op_compressed(&packed).is_err(), "{c:?} {wrong}");
            }
            packed[20..24].copy_from_slice(&(MAX_MESSAGE_BYTES as i32).to_le_bytes());
            assert!(decode_op_compressed(&packed).is_err(), "{c:?} huge");
            packed[20..24].copy_from_slice(&(-1i32).to_le_bytes());
            assert!(decode_op_compressed(&packed).is_err(), "{c:?} negative");
        }
    }

    #[test]
    fn unknown_compressor_and_nesting_are_refused() {
        let mut packed = encode_op_compressed(&sample(), Compressor::Zstd);
        packed[24] = 9;
        assert!(decode_op_compressed(&packed).is_err());
        packed[24] = 3;
        packed[16..20].copy_from_slice(&2012i32.to_le_bytes());
        assert!(decode_op_compressed(&packed).is_err());
    }

    #[test]
    fn garbage_never_panics() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let original = sample();
        for c in ALL {
            let packed = encode_op_compressed(&original, c);
            for round in 0..200usize {
                let mut m = packed.clone();
                // Flip a few bytes after the standard header, or truncate.
                for _ in 0..1 + round % 4 {
                    seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
                    let at = HEADER_LEN + (seed >> 33) as usize % (m.len() - HEADER_LEN);
                    m[at] ^= (seed >> 20) as u8 | 1;
                }
                if round % 5 == 0 {
                    m.truncate(HEADER_LEN + round % (m.len() - HEADER_LEN));
                }
                let len = m.len() as i32;
                m[..4].copy_from_slice(&len.to_le_bytes());
                if let Ok(d) = decode_op_compressed(&m) {
                    let _ = OpMsg::decode(&d.message);
                }
            }
        }
    }

    #[test]
    fn a_reply_too_big_to_compress_goes_out_plain() {
        // Incompressible noise the size of the limit cannot grow past it.
        let mut seed = 7u64;
        let noise: Vec<u8> = (0..MAX_MESSAGE_BYTES - HEADER_LEN)
            .map(|_| {
                seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
                (seed >> 33) as u8
            })
            .collect();
        let mut message = Vec::new();
        MsgHeader {
            message_length: MAX_MESSAGE_BYTES,
            request_id: 1,
            response_to: 0,
            op_code: OpCode::Msg,
        }
        .encode(&mut message);
        message.extend_from_slice(&noise);
        assert_eq!(encode_op_compressed(&message, Compressor::Noop), message);
    }
}
