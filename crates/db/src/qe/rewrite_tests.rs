//! The filter rewrite over an in-memory ESC: a payload's value inserted n times becomes the
//! n tags mongod would compute, under every contention factor up to `cm`; payloads inside
//! `$or` and `$in`, and two conditions that both become `__safeContent__` (`$and`).

use super::*;
use crate::qe::memory_esc::MemoryEsc;
use crate::qe::tokens::{edc_twice_derived, safe_content_tag, with_contention};
use bson::{doc, RawDocumentBuf};

fn bin(bytes: &[u8]) -> Bson {
    Bson::Binary(Binary {
        subtype: BinarySubtype::Generic,
        bytes: bytes.to_vec(),
    })
}

/// A value's find payload (`d`, `s` from `seed`) and the ESC after `inserts[cf]` inserts
/// of it under contention factor `cf`.
fn value(esc: &mut MemoryEsc, seed: u8, inserts: &[u64]) -> (Bson, Vec<Token>) {
    let (d, s) = ([seed; 32], [seed + 100; 32]);
    let mut expected = Vec::new();
    for (cf, n) in inserts.iter().enumerate() {
        let esc_cf = with_contention(&s, cf as u64);
        let edc = edc_twice_derived(&with_contention(&d, cf as u64));
        for i in 1..=*n {
            let doc = esc::non_anchor_document(&tokens::esc_tag(&esc_cf), i);
            let id = esc::non_anchor_id(&tokens::esc_tag(&esc_cf), i);
            esc.0
                .insert(id, RawDocumentBuf::from_document(&doc).unwrap());
            expected.push(safe_content_tag(&edc, i));
        }
    }
    let body =
        doc! {"d": bin(&d), "s": bin(&s), "l": bin(&[0; 32]), "cm": inserts.len() as i64 - 1};
    let mut bytes = vec![blob::FIND_EQUALITY_V2];
    bytes.extend(bson::to_vec(&body).unwrap());
    (
        Bson::Binary(Binary {
            subtype: BinarySubtype::Encrypted,
            bytes,
        }),
        expected,
    )
}

fn tags_in(filter: &Document) -> Vec<Token> {
    let list = filter
        .get_document(SAFE_CONTENT)
        .unwrap()
        .get_array("$in")
        .unwrap();
    list.iter()
        .map(|t| match t {
            Bson::Binary(b) => b.bytes.clone().try_into().unwrap(),
            _ => unreachable!(),
        })
        .collect()
}

#[test]
fn a_payload_becomes_its_tags() {
    let mut esc = MemoryEsc::default();
    let (p, expected) = value(&mut esc, 1, &[3, 0, 2]);
    let (_, _other) = value(&mut esc, 2, &[5]);
    let out = rewrite(&mut esc, &doc! {"ssn": p.clone(), "x": 1}, 0).unwrap();
    assert_eq!(out.get_i32("x").unwrap(), 1);
    assert_eq!(tags_in(&out), expected);
    let out = rewrite(&mut esc, &doc! {"ssn": {"$eq": p}}, 0).unwrap();
    assert_eq!(tags_in(&out).len(), 5);
    let (never, none) = value(&mut MemoryEsc::default(), 3, &[1]);
    assert_eq!(none.len(), 1);
    let out = rewrite(&mut esc, &doc! {"ssn": never}, 0).unwrap();
    assert!(tags_in(&out).is_empty());
}

#[test]
fn payloads_inside_or_in_and_pairs() {
    let mut esc = MemoryEsc::default();
    let (a, ta) = value(&mut esc, 1, &[2]);
    let (b, tb) = value(&mut esc, 2, &[1]);
    let out = rewrite(&mut esc, &doc! {"$or": [{"ssn": a.clone()}, {"_id": 1}]}, 0).unwrap();
    let first = out.get_array("$or").unwrap()[0]
        .as_document()
        .unwrap()
        .clone();
    assert_eq!(tags_in(&first), ta);
    let out = rewrite(&mut esc, &doc! {"ssn": {"$in": [a.clone(), b.clone()]}}, 0).unwrap();
    assert_eq!(tags_in(&out), [ta.clone(), tb.clone()].concat());
    let out = rewrite(&mut esc, &doc! {"ssn": a, "other": b}, 0).unwrap();
    let all = out.get_array("$and").unwrap();
    assert_eq!(all.len(), 2);
    assert_eq!(tags_in(all[0].as_document().unwrap()), ta);
    assert_eq!(tags_in(all[1].as_document().unwrap()), tb);
}
