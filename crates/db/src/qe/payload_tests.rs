//! The payload parser and the stored value's layout against the drivers' spec test
//! `fle2v2-BypassQueryAnalysis` (its insert payload, and the `__safeContent__` tag mongod
//! stores for it as the value's first insert).

use super::*;
use crate::qe::tokens::{decrypt_ctr, edc_twice_derived, safe_content_tag, server_count_token};

const SPEC_PAYLOAD: &str = "C18BAAAFZAAgAAAAANnt+eLTkv4GdDPl8IAfJOvTzArOgFJQ2S/DcLza4W0DBXMAIAAAAAD2u+omZme3P2gBPehMQyQHQ153tPN1+z7bksYA9jKTpAVwADAAAAAAUnCOQqIvmR65YKyYnsiVfVrg9hwUVO3RhhKExo3RWOzgaS0QdsBL5xKFS0JhZSoWBXUAEAAAAAQSNFZ4EjSYdhI0EjRWeJASEHQAAgAAAAV2AFAAAAAAEjRWeBI0mHYSNBI0VniQEpQbp/ZJpWBKeDtKLiXb0P2E9wvc0g3f373jnYQYlJquOrlPOoEy3ngsHPJuSUijvWDsrQzqYa349K7G/66qaXEFZQAgAAAAAOuac/eRLYakKX6B0vZ1r3QodOQFfjqJD+xlGiPu4/PsBWwAIAAAAACkm0o9bj6j0HuADKc0svbqO2UHj6GrlNdF6yKNxh63xRJrAAAAAAAAAAAAAA==";
const SPEC_TAG: &str = "31eCYlbQoVboc5zwC8IoyJVSkag9PxREka8dkmbXJeY=";

fn b64(s: &str) -> Vec<u8> {
    bson::Binary::from_base64(s, bson::spec::BinarySubtype::Generic)
        .unwrap()
        .bytes
}

#[test]
fn spec_payload_parses_and_its_first_tag_is_mongods() {
    let bin = b64(SPEC_PAYLOAD);
    assert_eq!(bin[0], blob::INSERT_UPDATE_V2);
    let p = InsertPayload::parse(&bin).unwrap();
    assert_eq!(p.bson_type, 2);
    assert_eq!(p.contention, 0);
    assert_eq!(p.encrypted_tokens.len(), 48);
    assert_eq!(p.value.len(), 80);
    assert!(!p.has_edges);
    assert_eq!(&p.value[..16], &p.index_key_id);
    let tag = safe_content_tag(&edc_twice_derived(&p.edc), 1);
    assert_eq!(tag.to_vec(), b64(SPEC_TAG));
}

#[test]
fn stored_value_layout() {
    let p = InsertPayload::parse(&b64(SPEC_PAYLOAD)).unwrap();
    let tag = [9u8; 32];
    let v = p.indexed_equality_value(&tag, 3).unwrap();
    assert_eq!(v[0], blob::EQUALITY_INDEXED_VALUE_V2);
    assert_eq!(&v[1..17], &p.index_key_id);
    assert_eq!(v[17], 2);
    let server_len = 16 + p.value.len();
    assert_eq!(v.len(), 18 + server_len + 96);
    let server = &v[18..18 + server_len];
    assert_eq!(decrypt_ctr(&p.server_encryption, server).unwrap(), p.value);
    let meta = &v[18 + server_len..];
    let counts = decrypt_ctr(&server_count_token(&p.server_derived), &meta[..32]).unwrap();
    assert_eq!(counts, [3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(&meta[32..64], &tag);
}

#[test]
fn malformed_payloads_are_errors() {
    assert!(InsertPayload::parse(&[11]).is_err());
    assert!(InsertPayload::parse(&[11, 5, 0, 0, 0, 0]).is_err());
    let mut doc = bson::doc! {"d": bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: vec![1; 31] }};
    let mut bin = vec![12];
    bin.extend(bson::to_vec(&doc).unwrap());
    assert!(FindPayload::parse(&bin).is_err());
    doc.insert("cm", 0i64);
    assert!(FindPayload::parse(&bin).is_err());
}
