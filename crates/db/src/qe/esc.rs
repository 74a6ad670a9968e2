//! The Encrypted State Collection (ESC) of protocol V2, as mongod 7.0 keeps it: one
//! "non-anchor" document `{_id: HMAC(tag, LE64(cpos))}` per insert of a value, "anchors"
//! `{_id: HMAC(tag, LE64(0) || LE64(apos)), value: Encrypt(valueToken, LE64(0) || LE64(cpos))}`
//! that compaction writes, and the null anchor (`apos` 0) that cleanup writes, whose value
//! holds `(apos, cpos)`. `emu_binary` finds the newest anchor and non-anchor positions with
//! mongod's `emuBinaryV2` (doubling probes, then a binary search) over any reader, so the
//! same code serves an insert's transaction and a query's snapshot.

use super::tokens::{self, Token};
use crate::DbResult;
use bson::{spec::BinarySubtype, Binary, Bson, RawBsonRef, RawDocumentBuf};
use shale_doc::{ErrorCode, MongoError};

/// What `emu_binary` reads: the ESC by `_id`.
pub trait EscReader {
    /// The document with `_id` `id` (a generic binary), if any.
    fn get(&mut self, id: &Token) -> DbResult<Option<RawDocumentBuf>>;
    /// The ESC's document count (a starting guess; any value gives the same answer).
    fn count(&mut self) -> u64;
}

/// `_id` of the `cpos`-th non-anchor.
pub fn non_anchor_id(tag: &Token, cpos: u64) -> Token {
    tokens::prf(tag, cpos)
}

/// `_id` of the `apos`-th anchor (0: the null anchor).
pub fn anchor_id(tag: &Token, apos: u64) -> Token {
    tokens::prf2(tag, 0, apos)
}

/// An id as the ESC stores it: a generic binary.
pub fn id_value(id: &Token) -> Bson {
    Bson::Binary(Binary {
        subtype: BinarySubtype::Generic,
        bytes: id.to_vec(),
    })
}

/// A non-anchor document.
pub fn non_anchor_document(tag: &Token, cpos: u64) -> bson::Document {
    bson::doc! {"_id": id_value(&non_anchor_id(tag, cpos))}
}

/// An anchor document at `apos` (0: the null anchor, whose pair is `(apos, cpos)`).
pub fn anchor_document(
    tag: &Token,
    value_token: &Token,
    apos: u64,
    pair: (u64, u64),
) -> bson::Document {
    let mut plain = [0u8; 16];
    plain[..8].copy_from_slice(&pair.0.to_le_bytes());
    plain[8..].copy_from_slice(&pair.1.to_le_bytes());
    bson::doc! {
        "_id": id_value(&anchor_id(tag, apos)),
        "value": Bson::Binary(Binary {
            subtype: BinarySubtype::Generic,
            bytes: tokens::encrypt_ctr(value_token, &plain),
        }),
    }
}

/// An anchor's decrypted pair: `(0, cpos)`, or `(apos, cpos)` for the null anchor.
pub fn anchor_pair(value_token: &Token, doc: &RawDocumentBuf) -> DbResult<(u64, u64)> {
    let corrupt = || {
        MongoError::new(
            ErrorCode::Location7291501,
            "ESC anchor document has no readable value",
        )
    };
    let bytes = match doc.get("value") {
        Ok(Some(RawBsonRef::Binary(b))) => b.bytes,
        _ => return Err(corrupt()),
    };
    let plain = tokens::decrypt_ctr(value_token, bytes).ok_or_else(corrupt)?;
    let word = |i: usize| {
        plain
            .get(i..i + 8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes)
    };
    match (word(0), word(8)) {
        (Some(a), Some(b)) => Ok((a, b)),
        _ => Err(corrupt()),
    }
}

/// `emuBinaryV2`'s answer: the newest non-anchor position after the newest anchor (`None`:
/// nothing since it) and the newest anchor position (`None`: only the null anchor).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Positions {
    /// Newest non-anchor position, or `None` when none follows the newest anchor.
    pub cpos: Option<u64>,
    /// Newest anchor position; `Some(0)` when there is no anchor at all.
    pub apos: Option<u64>,
}

/// mongod's `binarySearchCommon`: the highest `k` with `exists(k + lambda)`, doubling
/// `rho` from its start first; `i` when none is found.
fn binary_search(
    reader: &mut dyn EscReader,
    mut rho: u64,
    lambda: u64,
    mut i: Option<u64>,
    id: &dyn Fn(u64) -> Token,
) -> DbResult<Option<u64>> {
    // Every probe doubles rho: 64 of them pass any position a u64 counts.
    for _ in 0..64 {
        if reader.get(&id(rho + lambda))?.is_none() {
            break;
        }
        rho = rho.saturating_mul(2);
    }
    let (mut min, mut max) = (1u64, rho);
    let iterations = (rho as f64).log2().ceil() as u64;
    for j in 1..=iterations {
        let median = (max - min).div_ceil(2) + min;
        if reader.get(&id(median + lambda))?.is_some() {
            min = median;
            if j == iterations {
                i = Some(min + lambda);
            }
        } else {
            max = median;
            if j == iterations && min == 1 {
                if reader.get(&id(1 + lambda))?.is_some() {
                    i = Some(1 + lambda);
                }
            } else if j == iterations {
                i = Some(min + lambda);
            }
        }
    }
    Ok(i)
}

/// mongod's `emuBinaryV2`: anchors first (from the null anchor's `apos`), then the
/// non-anchors after the newest anchor's `cpos`.
pub fn emu_binary(reader: &mut dyn EscReader, tag: &Token, value: &Token) -> DbResult<Positions> {
    let null_anchor = reader.get(&anchor_id(tag, 0))?;
    let (lambda, start) = match &null_anchor {
        Some(doc) => (anchor_pair(value, doc)?.0, None),
        None => (0, Some(0)),
    };
    let apos = binary_search(reader, 2, lambda, start, &|k| anchor_id(tag, k))?;
    let (lambda, start) = match apos {
        Some(0) => (0, Some(0)),
        _ => {
            let id = anchor_id(tag, apos.unwrap_or(0));
            let doc = reader.get(&id)?.ok_or_else(|| {
                MongoError::new(ErrorCode::Location7291501, "ESC anchor document not found")
            })?;
            (anchor_pair(value, &doc)?.1, None)
        }
    };
    let rho = reader.count().max(2);
    let cpos = binary_search(reader, rho, lambda, start, &|k| non_anchor_id(tag, k))?;
    Ok(Positions { cpos, apos })
}

/// The count of inserts of a value so far: its newest non-anchor position, else the
/// `cpos` its newest anchor recorded (mongod's `getEdgeCountInfo`, less one for a query).
pub fn current_count(reader: &mut dyn EscReader, tag: &Token, value: &Token) -> DbResult<u64> {
    let positions = emu_binary(reader, tag, value)?;
    if let Some(cpos) = positions.cpos {
        return Ok(cpos);
    }
    if positions.apos == Some(0) {
        return Err(MongoError::new(
            ErrorCode::Location7291902,
            "An ESC anchor document is expected but none is found",
        ));
    }
    let id = anchor_id(tag, positions.apos.unwrap_or(0));
    let doc = reader.get(&id)?.ok_or_else(|| {
        MongoError::new(ErrorCode::Location7291903, "ESC anchor document not found")
    })?;
    Ok(anchor_pair(value, &doc)?.1)
}

#[cfg(test)]
#[path = "esc_tests.rs"]
mod tests;
