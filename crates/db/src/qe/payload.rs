//! Queryable Encryption's payloads as a V2 client sends them (BSON binary subtype 6, first
//! byte the FLE2 blob subtype, then a BSON document: libmongocrypt's
//! `mc-fle2-insert-update-payload-v2`, `mc-fle2-find-equality-payload-v2`), and the
//! indexed-equality encrypted value (blob subtype 14) the server stores in their place, in
//! the byte layout libmongocrypt's `mc-fle2-payload-iev-v2` parses. Pure: no state
//! collection is read here.

use super::tokens::{self, Token};
use crate::DbResult;
use bson::{RawBsonRef, RawDocument};
use shale_doc::{ErrorCode, MongoError};

/// FLE2 blob subtypes (the first byte of a subtype-6 binary) this server reads or writes.
pub mod blob {
    /// `FLE2InsertUpdatePayloadV2`: an indexed value to insert.
    pub const INSERT_UPDATE_V2: u8 = 11;
    /// `FLE2FindEqualityPayloadV2`: an equality query's tokens.
    pub const FIND_EQUALITY_V2: u8 = 12;
    /// `FLE2FindRangePayloadV2`: a range query's tokens.
    pub const FIND_RANGE_V2: u8 = 13;
    /// `FLE2IndexedEqualityEncryptedValueV2`: what the server stores for an equality field.
    pub const EQUALITY_INDEXED_VALUE_V2: u8 = 14;
    /// `FLE2IndexedRangeEncryptedValueV2`.
    pub const RANGE_INDEXED_VALUE_V2: u8 = 15;
    /// `FLE2UnindexedEncryptedValueV2`: stored as sent.
    pub const UNINDEXED_VALUE_V2: u8 = 16;
}

/// An `FLE2InsertUpdatePayloadV2`, the fields the server uses.
#[derive(Debug, Clone)]
pub struct InsertPayload {
    /// `d`: EDCDerivedFromDataTokenAndContentionFactor.
    pub edc: Token,
    /// `s`: ESCDerivedFromDataTokenAndContentionFactor.
    pub esc: Token,
    /// `p`: the ESC token encrypted under the ECOC token (the ECOC document's `value`).
    pub encrypted_tokens: Vec<u8>,
    /// `u`: the index key's id.
    pub index_key_id: [u8; 16],
    /// `t`: the BSON type of the plaintext.
    pub bson_type: i32,
    /// `v`: the user key id and the value encrypted under the user key.
    pub value: Vec<u8>,
    /// `e`: ServerDataEncryptionLevel1Token.
    pub server_encryption: Token,
    /// `l`: ServerDerivedFromDataToken.
    pub server_derived: Token,
    /// `k`: the contention factor the client drew.
    pub contention: i64,
    /// `g` present: a range payload (its edges), which this server does not index.
    pub has_edges: bool,
}

/// An `FLE2FindEqualityPayloadV2`.
#[derive(Debug, Clone)]
pub struct FindPayload {
    /// `d`: EDCDerivedFromDataToken.
    pub edc: Token,
    /// `s`: ESCDerivedFromDataToken.
    pub esc: Token,
    /// `l`: ServerDerivedFromDataToken.
    pub server_derived: Token,
    /// `cm`: the field's highest contention factor.
    pub max_contention: i64,
}

fn bad(code: ErrorCode, what: String) -> MongoError {
    MongoError::new(code, what)
}

/// The BSON document after a payload's first byte.
fn body<'a>(bytes: &'a [u8], name: &str) -> DbResult<&'a RawDocument> {
    RawDocument::from_bytes(bytes.get(1..).unwrap_or_default()).map_err(|e| {
        bad(
            ErrorCode::Location40571,
            format!("{name}: the encrypted payload is not a BSON document: {e}"),
        )
    })
}

fn field<'a>(doc: &'a RawDocument, name: &str, key: &str) -> DbResult<RawBsonRef<'a>> {
    match doc.get(key) {
        Ok(Some(v)) => Ok(v),
        _ => Err(bad(
            ErrorCode::Location40414,
            format!("BSON field '{name}.{key}' is missing but a required field"),
        )),
    }
}

fn bytes<'a>(doc: &'a RawDocument, name: &str, key: &str) -> DbResult<&'a [u8]> {
    match field(doc, name, key)? {
        RawBsonRef::Binary(b) => Ok(b.bytes),
        _ => Err(bad(
            ErrorCode::TypeMismatch,
            format!("BSON field '{name}.{key}' is the wrong type, expected type 'binData'"),
        )),
    }
}

fn token(doc: &RawDocument, name: &str, key: &str) -> DbResult<Token> {
    tokens::token_of(bytes(doc, name, key)?)
        .ok_or_else(|| bad(ErrorCode::Location6373501, "Invalid prf length".into()))
}

fn int64(doc: &RawDocument, name: &str, key: &str) -> DbResult<i64> {
    match field(doc, name, key)? {
        RawBsonRef::Int64(n) => Ok(n),
        RawBsonRef::Int32(n) => Ok(i64::from(n)),
        _ => Err(bad(
            ErrorCode::TypeMismatch,
            format!("BSON field '{name}.{key}' is the wrong type, expected type 'long'"),
        )),
    }
}

impl InsertPayload {
    /// Parses a subtype-6 binary whose first byte is `INSERT_UPDATE_V2`.
    pub fn parse(bin: &[u8]) -> DbResult<InsertPayload> {
        const NAME: &str = "FLE2InsertUpdatePayloadV2";
        let doc = body(bin, NAME)?;
        let index_key_id: [u8; 16] = bytes(doc, NAME, "u")?.try_into().map_err(|_| {
            bad(
                ErrorCode::BadValue,
                format!("BSON field '{NAME}.u' is not a UUID"),
            )
        })?;
        let bson_type = match field(doc, NAME, "t")? {
            RawBsonRef::Int32(t) => t,
            _ => {
                return Err(bad(
                    ErrorCode::TypeMismatch,
                    format!("BSON field '{NAME}.t' is the wrong type, expected type 'int'"),
                ))
            }
        };
        Ok(InsertPayload {
            edc: token(doc, NAME, "d")?,
            esc: token(doc, NAME, "s")?,
            encrypted_tokens: bytes(doc, NAME, "p")?.to_vec(),
            index_key_id,
            bson_type,
            value: bytes(doc, NAME, "v")?.to_vec(),
            server_encryption: token(doc, NAME, "e")?,
            server_derived: token(doc, NAME, "l")?,
            contention: int64(doc, NAME, "k")?,
            has_edges: matches!(doc.get("g"), Ok(Some(_))),
        })
    }

    /// The encrypted value stored in the payload's place once it is the `count`-th insert
    /// of its value with tag `tag`: blob subtype 14, the index key id, the BSON type, the
    /// server's encryption of `v` under `e`, and the 96-byte metadata block (encrypted
    /// count and contention factor, the tag, encrypted zeros).
    pub fn indexed_equality_value(&self, tag: &Token, count: u64) -> DbResult<Vec<u8>> {
        let bson_type = u8::try_from(self.bson_type).map_err(|_| {
            bad(
                ErrorCode::Location6373504,
                format!(
                    "Type '{}' is not a valid type for Queryable Encryption Equality",
                    self.bson_type
                ),
            )
        })?;
        let server_value = tokens::encrypt_ctr(&self.server_encryption, &self.value);
        let mut counts = [0u8; 16];
        counts[..8].copy_from_slice(&count.to_le_bytes());
        counts[8..].copy_from_slice(&(self.contention as u64).to_le_bytes());
        let encrypted_count =
            tokens::encrypt_ctr(&tokens::server_count_token(&self.server_derived), &counts);
        let encrypted_zeros =
            tokens::encrypt_ctr(&tokens::server_zeros_token(&self.server_derived), &[0; 16]);
        let mut out = Vec::with_capacity(1 + 16 + 1 + server_value.len() + 96);
        out.push(blob::EQUALITY_INDEXED_VALUE_V2);
        out.extend_from_slice(&self.index_key_id);
        out.push(bson_type);
        out.extend_from_slice(&server_value);
        out.extend_from_slice(&encrypted_count);
        out.extend_from_slice(tag);
        out.extend_from_slice(&encrypted_zeros);
        debug_assert_eq!(out.len(), 18 + server_value.len() + 96);
        Ok(out)
    }
}

impl FindPayload {
    /// Parses a subtype-6 binary whose first byte is `FIND_EQUALITY_V2`.
    pub fn parse(bin: &[u8]) -> DbResult<FindPayload> {
        const NAME: &str = "FLE2FindEqualityPayloadV2";
        let doc = body(bin, NAME)?;
        let max_contention = int64(doc, NAME, "cm")?;
        if max_contention < 0 {
            return Err(bad(
                ErrorCode::BadValue,
                format!("BSON field '{NAME}.cm' must be non-negative"),
            ));
        }
        Ok(FindPayload {
            edc: token(doc, NAME, "d")?,
            esc: token(doc, NAME, "s")?,
            server_derived: token(doc, NAME, "l")?,
            max_contention,
        })
    }
}

/// BSON types an equality-indexed field may hold (mongod's
/// `isFLE2EqualityIndexedSupportedType`).
pub fn equality_type_supported(bson_type: i32) -> bool {
    // string, binData, objectId, bool, date, regex, dbPointer, javascript, symbol, int,
    // timestamp, long.
    matches!(
        bson_type,
        0x02 | 0x05 | 0x07 | 0x08 | 0x09 | 0x0B | 0x0C | 0x0D | 0x0E | 0x10 | 0x11 | 0x12
    )
}

#[cfg(test)]
#[path = "payload_tests.rs"]
mod tests;
