//! BSONColumn (BinData subtype 7), the column format of mongod's compressed time series
//! buckets (version 2 and 3): decoding one column into its values, a skip being a position
//! the column has no value at. Pure; it never panics on the bytes and never guesses: anything
//! mongod's reader would refuse, and anything its writer cannot produce where the meaning would
//! be unclear, is a [`ColumnError`] naming the byte.
//!
//! Source: mongod's `src/mongo/bson/util/bsoncolumn.cpp` (`BSONColumn::Iterator`: regular and
//! interleaved modes, `loadControl`, `loadDelta`), `bsoncolumn_util.h` (control bytes, which
//! types take deltas of deltas or 128-bit deltas), `simple8b_type_util.cpp` (how each type is
//! made an integer) and `simple8b.cpp` (the blocks, read in `simple8b.rs`), checked against
//! columns mongod wrote in its jstests (`column_tests.rs`). No code is taken from there. How
//! a stream's slots become values is in `column_stream.rs`, the blocks in `simple8b.rs`.
//!
//! # Format, byte by byte
//!
//! A column is a sequence of control bytes, each followed by its payload, ended by `0x00`
//! (EOO), which must be the last byte:
//!
//! ```text
//! 0x01..=0x13, 0x7F, 0xFF   literal: a BSON element whose type is the control byte, its
//!                           field name empty (one 0x00), then its value. It is the next value.
//! 0x80..=0xDF               simple-8b run: (low nibble + 1) 64-bit blocks (simple8b.rs), each
//!                           slot the next value as a zigzag delta from the one before; the high
//!                           nibble is the double scale: 8 → none (the value's bits as an
//!                           integer), 9 → ×1, A → ×10, B → ×100, C → ×10⁴, D → ×10⁸
//! 0xF0 / 0xF1 / 0xF2        interleaved start: a reference document follows (below)
//! 0x00                      end of column (or, in interleaved mode, end of that mode)
//! ```
//!
//! A slot of all ones is a skip: no value at that position, the previous value kept for the
//! next delta. A delta applies to the last value that was not a skip, by its type:
//! - double: `value × scale` as an integer (the previous value re-scaled at each run; a run
//!   whose scale cannot hold it exactly is refused), the new value `integer / scale`;
//! - int32, int64, bool: the integer (int32 and bool keep the low 4 and 1 bytes);
//! - date (ms), timestamp (u64), objectId: deltas of deltas (the slot changes the delta);
//!   an objectId's integer is its bytes `[11, 3, 10, 2, 9, 1, 0]` read little-endian, its
//!   bytes 4..9 copied from the previous one;
//! - string, code, binData (≤ 16 bytes), decimal128: 128-bit deltas. A string's integer is
//!   its bytes reversed, zero-padded to 16, read little-endian (so trailing zeros end it on the
//!   way back); binData's its bytes zero-padded, its length and subtype kept; decimal128's its
//!   16 bytes little-endian. A string that cannot be made so (over 16 bytes, or a first byte 0)
//!   counts as 0;
//! - any other type: only a zero delta (a repeat).
//!
//! A zero delta repeats the previous value exactly. Deltas of deltas start from delta 0 at
//! each literal. The last slot of each run is remembered (0 after a literal) for an RLE block
//! at the start of the next run. A delta before any literal repeats nothing: a skip.
//!
//! Interleaved mode encodes a sequence of documents. The reference document's scalar leaves,
//! in order (`0xF0`: sub-documents entered, arrays are leaves; `0xF1`: arrays entered too;
//! `0xF2`: the same, the reference and values being arrays), each get a stream, its previous
//! value the leaf's value in the reference. Each document of the sequence is built by walking
//! the reference: each leaf takes its stream's next value (a skip leaves the field out); a
//! stream with no values left reads the next control byte, a literal or a run, as its own.
//! A sub-document left empty is left out unless it is empty in the reference; a document with
//! no field at all is a skip. A 0x00 where the first stream would read ends the mode; regular
//! decoding goes on, its previous value the last value decoded.

use super::column_stream::{Elem, Stream, ARRAY, OBJECT};
use crate::depth::{self, DepthError, MAX_STORAGE_DEPTH};
use bson::{RawBson, RawDocumentBuf};
use std::fmt;

/// Why a column was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnError {
    /// Offset in the column of the byte at fault.
    pub offset: usize,
    /// What is wrong there.
    pub reason: String,
}

impl fmt::Display for ColumnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid BSONColumn at byte {}: {}",
            self.offset, self.reason
        )
    }
}

/// The values of a column, `None` at each skip. More than `max_values` values (a bucket's
/// `control.count`) is an error, checked as the column is read.
pub fn decode(bytes: &[u8], max_values: usize) -> Result<Vec<Option<RawBson>>, ColumnError> {
    let mut reader = Reader {
        bytes,
        pos: 0,
        max_values,
        out: Vec::new(),
    };
    reader.regular()?;
    let end = reader.pos;
    reader
        .out
        .into_iter()
        .map(|v| v.map(|e| to_raw(&e, end)).transpose())
        .collect()
}

const INTERLEAVED_LEGACY: u8 = 0xF0;
const INTERLEAVED: u8 = 0xF1;
const INTERLEAVED_ARRAY_ROOT: u8 = 0xF2;

fn is_literal(control: u8) -> bool {
    control & 0xE0 == 0 || control == 0x7F || control == 0xFF
}

/// As a `RawBson`, checked as a stored document's value is.
fn to_raw(e: &Elem, offset: usize) -> Result<RawBson, ColumnError> {
    let len = 4 + 2 + e.value.len() + 1;
    let mut doc = Vec::with_capacity(len);
    doc.extend_from_slice(&(len as i32).to_le_bytes());
    doc.extend_from_slice(&[e.ty, 0]);
    doc.extend_from_slice(&e.value);
    doc.push(0);
    depth::check_depth(&doc, MAX_STORAGE_DEPTH).map_err(|e| bad(offset, depth_reason(&e)))?;
    let doc = RawDocumentBuf::from_bytes(doc).map_err(|e| bad(offset, e.to_string()))?;
    match doc.iter().next() {
        Some(Ok((_, v))) => Ok(v.to_raw_bson()),
        Some(Err(e)) => Err(bad(offset, e.to_string())),
        None => Err(bad(offset, "empty value".into())),
    }
}

fn depth_reason(e: &DepthError) -> String {
    match e {
        DepthError::TooDeep { limit } => format!("a value nested deeper than {limit} levels"),
        DepthError::Malformed { reason, .. } => format!("a value that is not BSON: {reason}"),
    }
}

pub(super) fn bad(offset: usize, reason: String) -> ColumnError {
    ColumnError { offset, reason }
}

/// The literal at `at`: its element and its length in bytes.
fn literal(bytes: &[u8], at: usize) -> Result<(Elem, usize), ColumnError> {
    let ty = bytes[at];
    if bytes.get(at + 1) != Some(&0) {
        return Err(bad(at, "a literal without its empty field name".into()));
    }
    let end =
        depth::value_end(bytes, ty, at + 2, bytes.len()).map_err(|e| bad(at, depth_reason(&e)))?;
    let value = bytes[at + 2..end].to_vec();
    Ok((Elem { ty, value }, end - at))
}

/// A reference document's shape: its leaves (each a stream) and sub-documents.
#[derive(Debug)]
enum Node {
    Leaf {
        name: Vec<u8>,
        stream: usize,
    },
    Sub {
        name: Vec<u8>,
        ty: u8,
        children: Vec<Node>,
        empty: bool,
    },
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    max_values: usize,
    out: Vec<Option<Elem>>,
}

impl Reader<'_> {
    fn byte(&self) -> Result<u8, ColumnError> {
        self.bytes.get(self.pos).copied().ok_or_else(|| {
            bad(
                self.pos,
                "the column ends without its end byte (0x00)".into(),
            )
        })
    }

    fn room(&self) -> usize {
        self.max_values.saturating_sub(self.out.len())
    }

    fn push(&mut self, v: Option<Elem>) -> Result<(), ColumnError> {
        if self.out.len() == self.max_values {
            return Err(bad(
                self.pos,
                format!("more than {} values", self.max_values),
            ));
        }
        self.out.push(v);
        Ok(())
    }

    /// Regular mode, to the column's end.
    fn regular(&mut self) -> Result<(), ColumnError> {
        let mut stream = Stream::new(None);
        loop {
            while let Some(slot) = stream.pending.pop_front() {
                let v = stream.apply(slot).map_err(|r| bad(self.pos, r))?;
                self.push(v)?;
            }
            let control = self.byte()?;
            match control {
                0 => {
                    self.pos += 1;
                    if self.pos != self.bytes.len() {
                        return Err(bad(self.pos, "bytes after the column's end".into()));
                    }
                    return Ok(());
                }
                INTERLEAVED_LEGACY | INTERLEAVED | INTERLEAVED_ARRAY_ROOT => {
                    self.interleaved()?;
                    stream = Stream::new(self.out.last().cloned().flatten());
                }
                c if is_literal(c) => {
                    let (e, n) = literal(self.bytes, self.pos)?;
                    stream.load_literal(&e);
                    self.push(Some(e))?;
                    self.pos += n;
                }
                _ => self.pos = stream.load_run(self.bytes, self.pos, self.room())?,
            }
        }
    }

    /// Interleaved mode, from its start byte to its end byte.
    fn interleaved(&mut self) -> Result<(), ColumnError> {
        let control = self.byte()?;
        let root_ty = if control == INTERLEAVED_ARRAY_ROOT {
            ARRAY
        } else {
            OBJECT
        };
        let start = self.pos + 1;
        let end = depth::value_end(self.bytes, OBJECT, start, self.bytes.len())
            .map_err(|e| bad(start, depth_reason(&e)))?;
        let mut streams = Vec::new();
        let arrays = control != INTERLEAVED_LEGACY;
        let children = shape(self.bytes, start, end, arrays, 1, &mut streams)?;
        if streams.is_empty() {
            return Err(bad(
                start,
                "an interleaved reference with no scalar field".into(),
            ));
        }
        self.pos = end;
        loop {
            if streams[0].pending.is_empty() && self.byte()? == 0 {
                self.pos += 1;
                return Ok(());
            }
            let mut doc = Vec::new();
            for child in &children {
                self.write_node(child, &mut streams, &mut doc)?;
            }
            let row = (!doc.is_empty()).then(|| Elem {
                ty: root_ty,
                value: framed(doc),
            });
            self.push(row)?;
        }
    }

    /// Appends `node`'s field for the next document of the sequence to `doc`.
    fn write_node(
        &mut self,
        node: &Node,
        streams: &mut [Stream],
        doc: &mut Vec<u8>,
    ) -> Result<(), ColumnError> {
        match node {
            Node::Leaf { name, stream } => {
                if let Some(e) = self.next_in(&mut streams[*stream])? {
                    doc.push(e.ty);
                    doc.extend_from_slice(name);
                    doc.push(0);
                    doc.extend_from_slice(&e.value);
                }
            }
            Node::Sub {
                name,
                ty,
                children,
                empty,
            } => {
                let mut inner = Vec::new();
                for child in children {
                    self.write_node(child, streams, &mut inner)?;
                }
                if !inner.is_empty() || *empty {
                    doc.push(*ty);
                    doc.extend_from_slice(name);
                    doc.push(0);
                    doc.extend_from_slice(&framed(inner));
                }
            }
        }
        Ok(())
    }

    /// The next value of an interleaved stream, reading its next control byte if it has none.
    fn next_in(&mut self, stream: &mut Stream) -> Result<Option<Elem>, ColumnError> {
        if stream.pending.is_empty() {
            let control = self.byte()?;
            if control == 0 {
                return Err(bad(
                    self.pos,
                    "interleaved mode ends inside a document".into(),
                ));
            }
            if is_literal(control) {
                let (e, n) = literal(self.bytes, self.pos)?;
                stream.load_literal(&e);
                self.pos += n;
                return Ok(Some(e));
            }
            if matches!(
                control,
                INTERLEAVED_LEGACY | INTERLEAVED | INTERLEAVED_ARRAY_ROOT
            ) {
                return Err(bad(
                    self.pos,
                    "interleaved start inside interleaved mode".into(),
                ));
            }
            self.pos = stream.load_run(self.bytes, self.pos, self.room())?;
        }
        match stream.pending.pop_front() {
            Some(slot) => stream.apply(slot).map_err(|r| bad(self.pos, r)),
            None => Err(bad(self.pos, "a run with no values".into())),
        }
    }
}

/// The fields between `start` (a document's length prefix) and `end`, as nodes; each scalar
/// leaf becomes a stream whose previous value is the leaf's.
fn shape(
    bytes: &[u8],
    start: usize,
    end: usize,
    arrays: bool,
    level: usize,
    streams: &mut Vec<Stream>,
) -> Result<Vec<Node>, ColumnError> {
    if level > MAX_STORAGE_DEPTH {
        return Err(bad(
            start,
            "an interleaved reference nested too deep".into(),
        ));
    }
    let mut nodes = Vec::new();
    let mut pos = start + 4;
    while pos + 1 < end {
        let ty = bytes[pos];
        let name_end =
            depth::cstring_end(bytes, pos + 1, end - 1).map_err(|e| bad(pos, depth_reason(&e)))?;
        let name = bytes[pos + 1..name_end].to_vec();
        let value_end = depth::value_end(bytes, ty, name_end + 1, end - 1)
            .map_err(|e| bad(pos, depth_reason(&e)))?;
        if ty == OBJECT || (arrays && ty == ARRAY) {
            let children = shape(bytes, name_end + 1, value_end, arrays, level + 1, streams)?;
            nodes.push(Node::Sub {
                name,
                ty,
                empty: value_end - (name_end + 1) == 5,
                children,
            });
        } else {
            let mut stream = Stream::new(None);
            stream.load_literal(&Elem {
                ty,
                value: bytes[name_end + 1..value_end].to_vec(),
            });
            streams.push(stream);
            nodes.push(Node::Leaf {
                name,
                stream: streams.len() - 1,
            });
        }
        pos = value_end;
    }
    if pos + 1 != end || bytes[pos] != 0 {
        return Err(bad(
            pos,
            "an interleaved reference that is not a document".into(),
        ));
    }
    Ok(nodes)
}

/// Document bytes around `fields`: the length prefix and the end byte.
fn framed(fields: Vec<u8>) -> Vec<u8> {
    let mut doc = ((fields.len() + 5) as i32).to_le_bytes().to_vec();
    doc.extend(fields);
    doc.push(0);
    doc
}

#[cfg(test)]
#[path = "column_tests.rs"]
mod tests;
