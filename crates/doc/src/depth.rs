//! Nesting depth of raw BSON, measured without recursion, and mongod's two limits on it.
//!
//! Every parser that builds a tree from client bytes (the `bson` crate's `Document`, and ours
//! of filters, projections, updates and pipelines over it) recurses once per level. A client
//! could nest a document a million levels deep in 8 MB and overflow the stack of whichever
//! thread parsed it. So the wire layer runs [`check_depth`] over every document it receives
//! *before* anything recursive sees it: the scan keeps one end offset per open level on a
//! heap stack, validates the document as it goes (lengths, terminators, UTF-8 text, boolean
//! bytes: a malformed document is refused here, so no recursive parser ever walks a deep
//! malformed one, and a document it accepts can be stored raw), and stops at the first level
//! past the limit.
//!
//! Depth counts the top-level document as level 1; `{a: {b: 1}}` has depth 2; arrays count
//! as levels like documents. mongod's limits (`maxBSONDepth`, `BSONDepth` in its source):
//! - [`MAX_WIRE_DEPTH`] (200): the hard limit for any document a client sends; deeper is
//!   refused with `Overflow` (15) before the command runs.
//! - [`MAX_STORAGE_DEPTH`] (180 = 200 - 20 levels kept for the server's own wrappers): the
//!   limit for a stored document, checked on insert, replace and update.

use crate::{ErrorCode, MongoError};

/// Deepest nesting accepted in any document received from a client (mongod's `maxBSONDepth`).
pub const MAX_WIRE_DEPTH: usize = 200;
/// Deepest nesting of a stored document (mongod's `getMaxDepthForUserStorage()`).
pub const MAX_STORAGE_DEPTH: usize = MAX_WIRE_DEPTH - 20;

/// Why [`check_depth`] refused a document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DepthError {
    /// Nested deeper than the limit given.
    TooDeep {
        /// The limit.
        limit: usize,
    },
    /// Not well-formed BSON (a length, a type byte or a terminator is wrong), at this offset.
    Malformed {
        /// Byte offset of the fault.
        offset: usize,
        /// What is wrong there.
        reason: &'static str,
    },
}

impl DepthError {
    /// The error mongod gives for a received document that fails the check.
    pub fn to_wire_error(&self) -> MongoError {
        match self {
            DepthError::TooDeep { limit } => MongoError::new(
                ErrorCode::Overflow,
                format!("BSONObj exceeded maximum nested object depth: {limit}"),
            ),
            DepthError::Malformed { offset, reason } => MongoError::new(
                ErrorCode::InvalidBSON,
                format!("invalid BSON at offset {offset}: {reason}"),
            ),
        }
    }
}

/// Checks that `bytes` is exactly one well-formed BSON document nested at most `limit`
/// levels deep, and returns its depth. Never recurses; O(length) time, O(depth) memory.
pub fn check_depth(bytes: &[u8], limit: usize) -> Result<usize, DepthError> {
    let top_end = doc_end(bytes, 0, bytes.len())?;
    if top_end != bytes.len() {
        return Err(malformed(top_end, "bytes after the document"));
    }
    // The end offset of each open document; the top of the stack is the one being read.
    let mut open: Vec<usize> = vec![top_end];
    let mut deepest = 1;
    let mut pos = 4;
    while let Some(&end) = open.last() {
        if pos + 1 == end {
            if bytes[pos] != 0 {
                return Err(malformed(pos, "document does not end with a zero byte"));
            }
            open.pop();
            pos = end;
            continue;
        }
        let type_byte = bytes[pos];
        let key_end = cstring_end(bytes, pos + 1, end - 1)?;
        utf8(bytes, pos + 1, key_end)?;
        let value = key_end + 1;
        match type_byte {
            0x03 | 0x04 => {
                if open.len() == limit {
                    return Err(DepthError::TooDeep { limit });
                }
                open.push(doc_end(bytes, value, end - 1)?);
                deepest = deepest.max(open.len());
                pos = value + 4;
            }
            0x0F => {
                // Code with scope: total length, a string, then a scope document.
                let total = read_len(bytes, value, end - 1)?;
                if total < 14 || value + total > end - 1 {
                    return Err(malformed(value, "code-with-scope length"));
                }
                let scope = string_end(bytes, value + 4, value + total)?;
                utf8(bytes, value + 8, scope - 1)?;
                let scope_end = doc_end(bytes, scope, value + total)?;
                if scope_end != value + total {
                    return Err(malformed(value, "code-with-scope length"));
                }
                // The scope is read as the next level: its end is already checked against
                // the element's total length.
                if open.len() == limit {
                    return Err(DepthError::TooDeep { limit });
                }
                open.push(scope_end);
                deepest = deepest.max(open.len());
                pos = scope + 4;
            }
            t => {
                let value_end = scalar_end(bytes, t, value, end - 1)?;
                check_scalar(bytes, t, value, value_end)?;
                pos = value_end;
            }
        }
    }
    Ok(deepest)
}

/// The checks on a framed scalar that its length cannot show: text is UTF-8 and a boolean is
/// 0 or 1 (as the `bson` crate's decoder requires), so a document this scan accepts can be
/// stored raw and decoded later without error.
fn check_scalar(bytes: &[u8], t: u8, at: usize, end: usize) -> Result<(), DepthError> {
    match t {
        0x02 | 0x0D | 0x0E => utf8(bytes, at + 4, end - 1),
        0x0C => {
            let s = string_end(bytes, at, end)?;
            utf8(bytes, at + 4, s - 1)
        }
        0x0B => {
            let pattern = cstring_end(bytes, at, end)?;
            utf8(bytes, at, pattern)?;
            utf8(bytes, pattern + 1, end - 1)
        }
        0x08 if bytes[at] > 1 => Err(malformed(at, "boolean is neither 0 nor 1")),
        _ => Ok(()),
    }
}

fn utf8(bytes: &[u8], from: usize, to: usize) -> Result<(), DepthError> {
    std::str::from_utf8(&bytes[from..to])
        .map(|_| ())
        .map_err(|_| malformed(from, "text is not valid UTF-8"))
}

/// The end of the value of any type `t` starting at `at`, which must not pass `limit`: one
/// step of a flat walk over a document's elements (`raw_scan`). Nested documents are only
/// framed (length and terminator), not walked.
#[inline(always)]
pub(crate) fn value_end(bytes: &[u8], t: u8, at: usize, limit: usize) -> Result<usize, DepthError> {
    match t {
        0x03 | 0x04 => doc_end(bytes, at, limit),
        0x0F => {
            let total = read_len(bytes, at, limit)?;
            if total < 14 || at + total > limit {
                return Err(malformed(at, "code-with-scope length"));
            }
            Ok(at + total)
        }
        t => scalar_end(bytes, t, at, limit),
    }
}

/// The end of the scalar value of type `t` starting at `at`, which must not pass `limit`.
#[inline]
fn scalar_end(bytes: &[u8], t: u8, at: usize, limit: usize) -> Result<usize, DepthError> {
    let fixed = |n: usize| {
        if at + n <= limit {
            Ok(at + n)
        } else {
            Err(malformed(at, "value runs past its document"))
        }
    };
    match t {
        0x01 | 0x09 | 0x11 | 0x12 => fixed(8),
        0x02 | 0x0D | 0x0E => string_end(bytes, at, limit),
        0x05 => {
            let n = read_len(bytes, at, limit)?;
            fixed(4 + 1 + n)
        }
        0x06 | 0x0A | 0x7F | 0xFF => Ok(at),
        0x07 => fixed(12),
        0x08 => fixed(1),
        0x0B => {
            let pattern = cstring_end(bytes, at, limit)?;
            Ok(cstring_end(bytes, pattern + 1, limit)? + 1)
        }
        0x0C => {
            let s = string_end(bytes, at, limit)?;
            if s + 12 <= limit {
                Ok(s + 12)
            } else {
                Err(malformed(at, "value runs past its document"))
            }
        }
        0x10 => fixed(4),
        0x13 => fixed(16),
        _ => Err(malformed(at - 1, "unknown element type")),
    }
}

/// The end of the document whose length prefix is at `at` (at most `limit`).
fn doc_end(bytes: &[u8], at: usize, limit: usize) -> Result<usize, DepthError> {
    let n = read_len(bytes, at, limit)?;
    if n < 5 || at + n > limit {
        return Err(malformed(at, "document length does not fit"));
    }
    Ok(at + n)
}

/// The end of a length-prefixed string at `at`: the length counts its zero terminator.
fn string_end(bytes: &[u8], at: usize, limit: usize) -> Result<usize, DepthError> {
    let n = read_len(bytes, at, limit)?;
    let end = at + 4 + n;
    if n < 1 || end > limit || bytes[end - 1] != 0 {
        return Err(malformed(at, "string length does not fit"));
    }
    Ok(end)
}

/// The offset of the zero byte ending the C string at `at`, before `limit`.
#[inline(always)]
pub(crate) fn cstring_end(bytes: &[u8], at: usize, limit: usize) -> Result<usize, DepthError> {
    bytes
        .get(at..limit)
        .and_then(|s| s.iter().position(|&b| b == 0))
        .map(|i| at + i)
        .ok_or(malformed(at, "unterminated field name"))
}

/// A non-negative little-endian i32 length at `at`, whose four bytes end by `limit`.
fn read_len(bytes: &[u8], at: usize, limit: usize) -> Result<usize, DepthError> {
    let b = bytes
        .get(at..at + 4)
        .filter(|_| at + 4 <= limit)
        .ok_or(malformed(at, "length runs past its document"))?;
    let n = i32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    usize::try_from(n).map_err(|_| malformed(at, "negative length"))
}

fn malformed(offset: usize, reason: &'static str) -> DepthError {
    DepthError::Malformed { offset, reason }
}

/// Refuses a field path of more than [`MAX_WIRE_DEPTH`] components, as mongod's `FieldPath`
/// does (5729100). Paths are strings, so the wire scan cannot bound them; everything that
/// builds a tree of nested fields from a path (projections, `$project`, `$addFields`) calls
/// this with the length of the whole path it is about to build.
pub fn check_path_length(components: usize) -> Result<(), MongoError> {
    if components > MAX_WIRE_DEPTH {
        return Err(MongoError::new(
            ErrorCode::Location5729100,
            format!("FieldPath is too long: {components} components, at most {MAX_WIRE_DEPTH}"),
        ));
    }
    Ok(())
}

/// The error for a document too deep to store, worded as mongod words it for `insert`
/// (`inserting`) and for updates and replacements.
pub fn storage_depth_error(inserting: bool) -> MongoError {
    let message = if inserting {
        format!("cannot insert document because it exceeds {MAX_STORAGE_DEPTH} levels of nesting")
    } else {
        format!("Document exceeds maximum nesting depth of {MAX_STORAGE_DEPTH}")
    };
    MongoError::new(ErrorCode::Overflow, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, Bson, Document};

    /// `{a: {a: ... {a: 1}}}` with `levels` documents, built as raw bytes without recursion.
    pub(crate) fn nested(levels: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(levels * 8 + 8);
        for i in 0..levels {
            let inner = levels - i - 1;
            let len = 12 + inner * 8;
            out.extend_from_slice(&(len as i32).to_le_bytes());
            if inner > 0 {
                out.extend_from_slice(b"\x03a\x00");
            }
        }
        out.extend_from_slice(b"\x10a\x00\x01\x00\x00\x00");
        out.extend(std::iter::repeat_n(0u8, levels));
        out
    }

    #[test]
    fn nested_builder_makes_valid_bson() {
        for levels in [1, 2, 5] {
            let bytes = nested(levels);
            let d = Document::from_reader(&bytes[..]).expect("valid");
            let mut depth = 1;
            let mut cur = &d;
            while let Some(Bson::Document(inner)) = cur.get("a") {
                cur = inner;
                depth += 1;
            }
            assert_eq!(depth, levels);
            assert_eq!(check_depth(&bytes, 200), Ok(levels));
        }
    }

    #[test]
    fn the_limit_is_inclusive_and_deep_input_costs_no_stack() {
        assert_eq!(check_depth(&nested(200), 200), Ok(200));
        assert_eq!(
            check_depth(&nested(201), 200),
            Err(DepthError::TooDeep { limit: 200 })
        );
        // A million levels (8 MB): refused, without recursion.
        assert_eq!(
            check_depth(&nested(1_000_000), 200),
            Err(DepthError::TooDeep { limit: 200 })
        );
    }

    #[test]
    fn arrays_and_scope_count_as_levels() {
        let d = doc! {"x": [[{"y": [1]}]], "s": "t", "n": Bson::Null};
        let bytes = bson::to_vec(&d).expect("encode");
        assert_eq!(check_depth(&bytes, 10), Ok(5));
        assert_eq!(
            check_depth(&bytes, 4),
            Err(DepthError::TooDeep { limit: 4 })
        );
        let code = doc! {"c": Bson::JavaScriptCodeWithScope(bson::JavaScriptCodeWithScope {
            code: "f".into(), scope: doc! {"v": {"w": 1}},
        })};
        let bytes = bson::to_vec(&code).expect("encode");
        assert_eq!(check_depth(&bytes, 10), Ok(3));
    }

    #[test]
    fn every_scalar_type_is_walked() {
        let d = doc! {
            "f": 1.5, "s": "str", "b": Bson::Binary(bson::Binary {
                subtype: bson::spec::BinarySubtype::Generic, bytes: vec![1, 2, 3] }),
            "u": Bson::Undefined, "o": bson::oid::ObjectId::new(), "t": true,
            "d": bson::DateTime::now(), "n": Bson::Null,
            "r": Bson::RegularExpression(bson::Regex { pattern: "a.*".into(), options: "i".into() }),
            "j": Bson::JavaScriptCode("x".into()), "sym": Bson::Symbol("y".into()),
            "i": 7i32, "ts": Bson::Timestamp(bson::Timestamp { time: 1, increment: 2 }),
            "l": 9i64, "dec": Bson::Decimal128(bson::Decimal128::from_bytes([0; 16])),
            "min": Bson::MinKey, "max": Bson::MaxKey,
        };
        let bytes = bson::to_vec(&d).expect("encode");
        assert_eq!(check_depth(&bytes, 200), Ok(1));
    }

    #[test]
    fn malformed_documents_are_refused_not_walked() {
        let good = bson::to_vec(&doc! {"a": {"b": "c"}}).expect("encode");
        // Every truncation and every single-byte corruption is either accepted as parsed by
        // the bson crate or refused; never a panic.
        for cut in 0..good.len() {
            assert!(check_depth(&good[..cut], 200).is_err());
        }
        for i in 0..good.len() {
            for v in [0u8, 1, 0x7f, 0xff] {
                let mut b = good.clone();
                b[i] = v;
                let _ = check_depth(&b, 200);
            }
        }
        let mut trailing = good.clone();
        trailing.push(0);
        assert!(check_depth(&trailing, 200).is_err());
        // A deep document that is broken at its innermost level is refused as malformed.
        let mut deep = nested(150);
        let mid = deep.len() - 150 - 7; // the innermost element's type byte
        deep[mid] = 0x42;
        assert!(matches!(
            check_depth(&deep, 200),
            Err(DepthError::Malformed { .. })
        ));
    }

    #[test]
    fn text_must_be_utf8_and_booleans_0_or_1() {
        let good = bson::to_vec(&doc! {"k": "v", "b": true}).expect("encode");
        assert!(check_depth(&good, 10).is_ok());
        let at = |needle: &[u8]| {
            good.windows(needle.len())
                .position(|w| w == needle)
                .expect("present")
        };
        let mut bad_key = good.clone();
        bad_key[at(b"k\0")] = 0xff;
        assert!(matches!(
            check_depth(&bad_key, 10),
            Err(DepthError::Malformed { .. })
        ));
        let mut bad_string = good.clone();
        bad_string[at(b"v\0")] = 0xc3;
        assert!(matches!(
            check_depth(&bad_string, 10),
            Err(DepthError::Malformed { .. })
        ));
        let mut bad_bool = good.clone();
        let b = at(b"b\0") + 2;
        bad_bool[b] = 2;
        assert!(matches!(
            check_depth(&bad_bool, 10),
            Err(DepthError::Malformed { .. })
        ));
    }

    #[test]
    fn storage_errors_name_the_limit() {
        let e = storage_depth_error(true);
        assert_eq!(e.code, ErrorCode::Overflow);
        assert!(e.message.contains("180 levels"));
        assert!(storage_depth_error(false).message.contains("180"));
    }
}
