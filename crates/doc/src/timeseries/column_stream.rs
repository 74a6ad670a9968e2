//! One stream of a BSONColumn (`column.rs` has the format and reads the control bytes): the
//! previous value, and how each Simple-8b slot becomes the next value by the previous value's
//! type — mongod's `DecodingState` (`loadUncompressed`, `loadControl`, `loadDelta` in
//! `bsoncolumn.cpp`) and its integer forms of each type (`simple8b_type_util.cpp`). Pure; a
//! delta that has no meaning for its type is an error, never a panic.

use super::column::{bad, ColumnError};
use super::simple8b::{self, Slot};
use std::collections::VecDeque;

const DOUBLE: u8 = 0x01;
const STRING: u8 = 0x02;
pub(super) const OBJECT: u8 = 0x03;
pub(super) const ARRAY: u8 = 0x04;
const BINARY: u8 = 0x05;
const OBJECT_ID: u8 = 0x07;
const BOOL: u8 = 0x08;
const DATE: u8 = 0x09;
const CODE: u8 = 0x0D;
const INT32: u8 = 0x10;
const TIMESTAMP: u8 = 0x11;
const INT64: u8 = 0x12;
const DECIMAL: u8 = 0x13;

/// The double scale of each simple-8b control byte's high nibble (index 5: none).
const SCALE_BY_NIBBLE: [Option<u8>; 16] = [
    None,
    None,
    None,
    None,
    None,
    None,
    None,
    None,
    Some(5),
    Some(0),
    Some(1),
    Some(2),
    Some(3),
    Some(4),
    None,
    None,
];
const SCALE_MULTIPLIER: [f64; 5] = [1.0, 10.0, 100.0, 10_000.0, 100_000_000.0];
const SCALE_NONE: u8 = 5;

/// A value: its BSON type byte and its value bytes (no field name).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Elem {
    pub(super) ty: u8,
    pub(super) value: Vec<u8>,
}

impl Elem {
    pub(super) fn le<const N: usize>(&self) -> [u8; N] {
        let mut b = [0u8; N];
        let n = N.min(self.value.len());
        b[..n].copy_from_slice(&self.value[..n]);
        b
    }
}

/// How a stream turns slots into values: 64-bit deltas (and deltas of deltas), or 128-bit.
#[derive(Debug, Clone)]
enum Decoder {
    Narrow {
        encoded: i64,
        dod_value: i64,
        dod: bool,
        scale: u8,
    },
    Wide {
        encoded: i128,
    },
}

/// One stream of values: the whole column in regular mode, one leaf in interleaved mode.
#[derive(Debug, Clone)]
pub(super) struct Stream {
    last: Option<Elem>,
    decoder: Decoder,
    /// The last slot of the latest run since the last literal (`None`: no run yet).
    last_slot: Option<Slot>,
    pub(super) pending: VecDeque<Slot>,
}

impl Stream {
    pub(super) fn new(last: Option<Elem>) -> Stream {
        Stream {
            last,
            decoder: Decoder::Narrow {
                encoded: 0,
                dod_value: 0,
                dod: false,
                scale: SCALE_NONE,
            },
            last_slot: None,
            pending: VecDeque::new(),
        }
    }

    /// A literal: the stream starts again from it.
    pub(super) fn load_literal(&mut self, e: &Elem) {
        self.decoder = decoder_for(e);
        self.last_slot = None;
        self.pending.clear();
        self.last = Some(e.clone());
    }

    /// The run whose control byte is at `at`; returns the offset after it.
    pub(super) fn load_run(
        &mut self,
        bytes: &[u8],
        at: usize,
        room: usize,
    ) -> Result<usize, ColumnError> {
        let control = bytes[at];
        let size = 8 * (usize::from(control & 0x0F) + 1);
        if at + 1 + size >= bytes.len() {
            return Err(bad(at, "simple-8b blocks run past the column's end".into()));
        }
        let scale = SCALE_BY_NIBBLE[usize::from(control >> 4)]
            .ok_or_else(|| bad(at, format!("control byte {control:#04x}")))?;
        if let Decoder::Narrow {
            encoded, scale: s, ..
        } = &mut self.decoder
        {
            if let Some(last) = self.last.as_ref().filter(|e| e.ty == DOUBLE) {
                let value = f64::from_le_bytes(last.le());
                *encoded = encode_double(value, scale).ok_or_else(|| {
                    bad(
                        at,
                        format!("double {value} cannot be held at scale {scale}"),
                    )
                })?;
            }
            *s = scale;
        }
        let previous = self.last_slot.unwrap_or(Some(0));
        let mut slots = Vec::new();
        let last = simple8b::decode_run(&bytes[at + 1..at + 1 + size], previous, room, &mut slots)
            .map_err(|e| bad(at, e.0))?;
        self.last_slot = Some(last);
        self.pending.extend(slots);
        Ok(at + 1 + size)
    }

    /// The value slot `slot` stands for.
    pub(super) fn apply(&mut self, slot: Slot) -> Result<Option<Elem>, String> {
        let Some(delta) = slot else {
            return Ok(None);
        };
        let value = match &mut self.decoder {
            Decoder::Narrow {
                encoded,
                dod_value,
                dod,
                scale,
            } => {
                let delta = u64::try_from(delta)
                    .map_err(|_| "a 64-bit delta wider than 64 bits".to_string())?;
                if !*dod && delta == 0 {
                    return Ok(self.last.clone());
                }
                let last = self
                    .last
                    .as_ref()
                    .ok_or("a delta with no value before it")?;
                *encoded = encoded.wrapping_add(zigzag64(delta));
                if *dod {
                    *dod_value = dod_value.wrapping_add(*encoded);
                }
                narrow_value(last, if *dod { *dod_value } else { *encoded }, *scale)?
            }
            Decoder::Wide { encoded } => {
                if delta == 0 {
                    return Ok(self.last.clone());
                }
                let last = self
                    .last
                    .as_ref()
                    .ok_or("a delta with no value before it")?;
                *encoded = encoded.wrapping_add(zigzag128(delta));
                wide_value(last, *encoded)?
            }
        };
        self.last = Some(value.clone());
        Ok(Some(value))
    }
}

fn zigzag64(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

fn zigzag128(v: u128) -> i128 {
    ((v >> 1) as i128) ^ -((v & 1) as i128)
}

/// The decoder a literal starts, with the literal as the integer deltas apply to.
fn decoder_for(e: &Elem) -> Decoder {
    let wide = |encoded| Decoder::Wide { encoded };
    match e.ty {
        STRING | CODE => {
            let len = e.value.len().saturating_sub(5);
            let s = e.value.get(4..4 + len).unwrap_or(&[]);
            if s.len() > 16 || s.first() == Some(&0) {
                return wide(0);
            }
            let mut b = [0u8; 16];
            for (i, c) in s.iter().rev().enumerate() {
                b[i] = *c;
            }
            wide(i128::from_le_bytes(b))
        }
        BINARY => {
            let data = e.value.get(5..).unwrap_or(&[]);
            if data.len() > 16 {
                return wide(0);
            }
            let mut b = [0u8; 16];
            b[..data.len()].copy_from_slice(data);
            wide(i128::from_le_bytes(b))
        }
        DECIMAL => wide(i128::from_le_bytes(e.le())),
        ty => {
            let encoded = match ty {
                OBJECT_ID => {
                    let o: [u8; 12] = e.le();
                    i64::from_le_bytes([o[11], o[3], o[10], o[2], o[9], o[1], o[0], 0])
                }
                DATE | INT64 | TIMESTAMP => i64::from_le_bytes(e.le()),
                BOOL => i64::from(e.le::<1>()[0]),
                INT32 => i64::from(i32::from_le_bytes(e.le())),
                _ => 0,
            };
            let dod = matches!(ty, OBJECT_ID | DATE | TIMESTAMP);
            Decoder::Narrow {
                encoded: if dod { 0 } else { encoded },
                dod_value: if dod { encoded } else { 0 },
                dod,
                scale: SCALE_NONE,
            }
        }
    }
}

/// `value × scale` as the integer mongod's writer keeps, if it holds `value` exactly.
fn encode_double(value: f64, scale: u8) -> Option<i64> {
    if scale == SCALE_NONE {
        return Some(value.to_bits() as i64);
    }
    let m = SCALE_MULTIPLIER[usize::from(scale)];
    let scaled = value * m;
    const SAFE: f64 = 9_007_199_254_740_992.0; // 2^53
    if !(-SAFE..=SAFE).contains(&scaled) {
        return None;
    }
    let n = scaled.round() as i64;
    ((n as f64) / m == value).then_some(n)
}

fn decode_double(n: i64, scale: u8) -> f64 {
    match SCALE_MULTIPLIER.get(usize::from(scale)) {
        Some(m) => n as f64 / m,
        None => f64::from_bits(n as u64),
    }
}

/// The value of `last`'s type whose integer is `n`.
fn narrow_value(last: &Elem, n: i64, scale: u8) -> Result<Elem, String> {
    let value = match last.ty {
        DOUBLE => decode_double(n, scale).to_le_bytes().to_vec(),
        OBJECT_ID => {
            let b = n.to_le_bytes();
            let mut o: [u8; 12] = last.le();
            (o[0], o[1], o[2], o[3]) = (b[6], b[5], b[3], b[1]);
            (o[9], o[10], o[11]) = (b[4], b[2], b[0]);
            o.to_vec()
        }
        DATE | INT64 | TIMESTAMP => n.to_le_bytes().to_vec(),
        BOOL => vec![n as u8],
        INT32 => (n as i32).to_le_bytes().to_vec(),
        ty => return Err(format!("a non-zero delta on a value of type {ty:#04x}")),
    };
    Ok(Elem { ty: last.ty, value })
}

/// The value of `last`'s type whose 128-bit integer is `n`.
fn wide_value(last: &Elem, n: i128) -> Result<Elem, String> {
    let b = n.to_le_bytes();
    let value = match last.ty {
        STRING | CODE => {
            let len = b.iter().rposition(|&c| c != 0).map_or(0, |i| i + 1);
            let mut v = ((len + 1) as i32).to_le_bytes().to_vec();
            v.extend(b[..len].iter().rev());
            v.push(0);
            v
        }
        BINARY => {
            let len = last.value.len().saturating_sub(5);
            if len > 16 || last.value.len() < 5 {
                return Err("a delta on binData longer than 16 bytes".into());
            }
            let mut v = last.value[..5].to_vec();
            v.extend_from_slice(&b[..len]);
            v
        }
        DECIMAL => b.to_vec(),
        ty => return Err(format!("a 128-bit delta on a value of type {ty:#04x}")),
    };
    Ok(Elem { ty: last.ty, value })
}
