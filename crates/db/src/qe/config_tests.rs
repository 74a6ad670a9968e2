//! `encryptedFields` checks and the stored form, with mongod 7.0's codes.

use super::*;
use bson::{doc, Binary};

fn uuid(n: u8) -> Bson {
    Bson::Binary(Binary {
        subtype: BinarySubtype::Uuid,
        bytes: vec![n; 16],
    })
}

fn code(spec: Document) -> i32 {
    check_and_fill(&spec, "c").unwrap_err().code.code()
}

#[test]
fn fills_in_state_collections_and_contention() {
    let spec = doc! {"fields": [
        {"path": "ssn", "keyId": uuid(1), "bsonType": "string", "queries": {"queryType": "equality"}},
        {"path": "notes", "keyId": uuid(2), "bsonType": "string"},
    ]};
    let stored = check_and_fill(&spec, "people").unwrap();
    assert_eq!(
        stored.get_str("escCollection").unwrap(),
        "enxcol_.people.esc"
    );
    assert_eq!(
        stored.get_str("ecocCollection").unwrap(),
        "enxcol_.people.ecoc"
    );
    let f0 = stored.get_array("fields").unwrap()[0]
        .as_document()
        .unwrap();
    assert_eq!(
        f0.get_document("queries")
            .unwrap()
            .get_i64("contention")
            .unwrap(),
        8
    );
    let parsed = EncryptedConfig::from_stored(&stored).unwrap();
    assert_eq!(parsed.field("ssn").unwrap().equality, Some(8));
    assert_eq!(parsed.field("notes").unwrap().equality, None);
    assert!(parsed.field("other").is_none());
}

#[test]
fn refuses_as_mongod_does() {
    let f = |path: &str, key: u8| doc! {"path": path, "keyId": uuid(key), "bsonType": "string"};
    assert_eq!(code(doc! {"fields": [f("a", 1), f("b", 1)]}), 6338401);
    assert_eq!(code(doc! {"fields": [f("a", 1), f("a", 2)]}), 6338402);
    assert_eq!(code(doc! {"fields": [f("a", 1), f("a.b", 2)]}), 6338403);
    assert_eq!(code(doc! {"fields": [{"path": "a", "keyId": 1}]}), 14);
    assert_eq!(code(doc! {"fields": [{"path": "a"}]}), 40414);
    assert_eq!(
        code(doc! {"fields": [{"path": "a", "keyId": uuid(1), "x": 1}]}),
        40415
    );
    assert_eq!(code(doc! {}), 40414);
    assert_eq!(code(doc! {"fields": [], "other": 1}), 40415);
    let q = |query: Document, t: &str| doc! {"fields": [{"path": "a", "keyId": uuid(1), "bsonType": t, "queries": query}]};
    assert_eq!(code(q(doc! {"queryType": "equality"}, "double")), 6338405);
    assert_eq!(code(q(doc! {"queryType": "rangePreview"}, "int")), 115);
    assert_eq!(code(q(doc! {"queryType": "nope"}, "int")), 2);
    assert_eq!(
        code(q(doc! {"queryType": "equality", "min": 1}, "int")),
        6775206
    );
    assert_eq!(
        code(q(doc! {"queryType": "equality", "contention": -1}, "int")),
        2
    );
    assert_eq!(
        code(
            doc! {"fields": [{"path": "a", "keyId": uuid(1), "queries": {"queryType": "equality"}}]}
        ),
        6412601
    );
    assert_eq!(
        code(doc! {"fields": [{"path": "_id", "keyId": uuid(1)}]}),
        6316403
    );
    assert_eq!(
        code(doc! {"fields": [{"path": "a", "keyId": uuid(1), "bsonType": "null"}]}),
        6338406
    );
}
