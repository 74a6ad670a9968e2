//! Queryable Encryption's token arithmetic on the server side (protocol V2, mongod 7.0's
//! `fle_crypto`): every token is a 32-byte HMAC-SHA256 of the token above it over
//! little-endian 64-bit numbers, and the server's ciphertexts are AES-256-CTR with a random
//! 16-byte IV in front. This file derives and encrypts; it never reads documents or knows
//! where a token came from (the payloads are `payload.rs`'s, the ESC's ids `esc.rs`'s).

use aes::cipher::{KeyIvInit, StreamCipher};
use hmac::{Hmac, KeyInit, Mac};
use rand::RngCore;
use sha2::Sha256;

/// A token or tag: one HMAC-SHA256 output (mongod's `PrfBlock`).
pub type Token = [u8; 32];

/// Bytes of the IV in front of every AES-256-CTR ciphertext.
pub const IV_BYTES: usize = 16;

type Aes256Ctr = ctr::Ctr128BE<aes::Aes256>;

/// HMAC-SHA256 of `parts` concatenated, keyed with `key`.
fn hmac(key: &Token, parts: &[&[u8]]) -> Token {
    #[allow(
        clippy::expect_used,
        reason = "HMAC accepts a key of any length; ours are 32 bytes"
    )]
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("any key length");
    for p in parts {
        mac.update(p);
    }
    mac.finalize().into_bytes().into()
}

/// `HMAC(key, LE64(value))` (mongod's `FLEUtil::prf(key, uint64)`).
pub fn prf(key: &Token, value: u64) -> Token {
    hmac(key, &[&value.to_le_bytes()])
}

/// `HMAC(key, LE64(a) || LE64(b))` (mongod's two-number `prf`, for anchor ids).
pub fn prf2(key: &Token, a: u64, b: u64) -> Token {
    hmac(key, &[&a.to_le_bytes(), &b.to_le_bytes()])
}

/// A token of a data value's family with the contention factor mixed in
/// (`EDC`/`ESCDerivedFromDataTokenAndContentionFactor` from the `...DerivedFromDataToken`).
pub fn with_contention(derived_from_data: &Token, contention: u64) -> Token {
    prf(derived_from_data, contention)
}

/// `EDCTwiceDerivedToken` from `EDCDerivedFromDataTokenAndContentionFactor`.
pub fn edc_twice_derived(edc: &Token) -> Token {
    prf(edc, 1)
}

/// `ESCTwiceDerivedTagToken` from `ESCDerivedFromDataTokenAndContentionFactor`.
pub fn esc_tag(esc: &Token) -> Token {
    prf(esc, 1)
}

/// `ESCTwiceDerivedValueToken` from `ESCDerivedFromDataTokenAndContentionFactor`.
pub fn esc_value(esc: &Token) -> Token {
    prf(esc, 2)
}

/// `ServerCountAndContentionFactorEncryptionToken` from `ServerDerivedFromDataToken`.
pub fn server_count_token(server_derived: &Token) -> Token {
    prf(server_derived, 1)
}

/// `ServerZerosEncryptionToken` from `ServerDerivedFromDataToken`.
pub fn server_zeros_token(server_derived: &Token) -> Token {
    prf(server_derived, 2)
}

/// The `__safeContent__` tag of the `count`-th insert of a value:
/// `HMAC(EDCTwiceDerivedToken, LE64(count))`.
pub fn safe_content_tag(edc_twice_derived: &Token, count: u64) -> Token {
    prf(edc_twice_derived, count)
}

/// AES-256-CTR of `plain` under `key`, a fresh random IV in front (mongod's `fle2Encrypt`).
pub fn encrypt_ctr(key: &Token, plain: &[u8]) -> Vec<u8> {
    let mut iv = [0u8; IV_BYTES];
    rand::rngs::OsRng.fill_bytes(&mut iv);
    encrypt_ctr_with_iv(key, &iv, plain)
}

/// `encrypt_ctr` with the IV given (tests; deterministic output).
pub fn encrypt_ctr_with_iv(key: &Token, iv: &[u8; IV_BYTES], plain: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(IV_BYTES + plain.len());
    out.extend_from_slice(iv);
    out.extend_from_slice(plain);
    let mut cipher = Aes256Ctr::new(key.into(), iv.into());
    cipher.apply_keystream(&mut out[IV_BYTES..]);
    out
}

/// The plaintext of an `encrypt_ctr` ciphertext; `None` when it is shorter than an IV.
pub fn decrypt_ctr(key: &Token, cipher_text: &[u8]) -> Option<Vec<u8>> {
    if cipher_text.len() < IV_BYTES {
        return None;
    }
    let (iv, body) = cipher_text.split_at(IV_BYTES);
    let mut out = body.to_vec();
    let iv: [u8; IV_BYTES] = iv.try_into().ok()?;
    let mut cipher = Aes256Ctr::new(key.into(), (&iv).into());
    cipher.apply_keystream(&mut out);
    Some(out)
}

/// A token from a payload's bytes: exactly 32 of them.
pub fn token_of(bytes: &[u8]) -> Option<Token> {
    bytes.try_into().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_an_independent_implementation() {
        // A 32-byte key, as every token is, against Python's hmac module.
        let key = [0x0bu8; 32];
        let tag = hmac(&key, &[b"Hi There"]);
        assert_eq!(
            hex(&tag),
            "198a607eb44bfbc69903a0f1cf2bbdc5ba0aa3f3d9ae3c1c7a3b1696a0b68cf7"
        );
    }

    #[test]
    fn numbers_are_little_endian_64_bit() {
        let key = [7u8; 32];
        assert_eq!(prf(&key, 1), hmac(&key, &[&[1, 0, 0, 0, 0, 0, 0, 0]]));
        assert_eq!(
            prf2(&key, 0, 3),
            hmac(&key, &[&[0; 8], &[3, 0, 0, 0, 0, 0, 0, 0]])
        );
    }

    #[test]
    fn ctr_round_trips_and_matches_nist_sp800_38a() {
        // NIST SP 800-38A F.5.5 (CTR-AES256.Encrypt), first block.
        let key: Token = unhex("603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4")
            .try_into()
            .unwrap();
        let iv: [u8; 16] = unhex("f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff")
            .try_into()
            .unwrap();
        let plain = unhex("6bc1bee22e409f96e93d7e117393172a");
        let out = encrypt_ctr_with_iv(&key, &iv, &plain);
        assert_eq!(hex(&out[16..]), "601ec313775789a5b7a7f504bbf3d228");
        assert_eq!(decrypt_ctr(&key, &out).unwrap(), plain);
        assert_eq!(
            decrypt_ctr(&key, &encrypt_ctr(&key, b"abc")).unwrap(),
            b"abc"
        );
        assert!(decrypt_ctr(&key, &[0; 15]).is_none());
    }

    pub(crate) fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    pub(crate) fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }
}
