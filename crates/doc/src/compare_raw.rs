//! MongoDB's value order over raw BSON (`bson::RawBsonRef`, `bson::RawDocument`), read in
//! place without building `Bson` trees. It gives the same answers as `compare::compare_values`
//! (same brackets, same numeric rules, decimal128 compared exactly); malformed BSON is
//! reported as an error rather than ordered.

use std::cmp::Ordering;

use bson::raw::{RawArray, RawBson, RawBsonRef, RawDocument, Result};

use crate::compare::{compare_num, db_pointer_parts, Num};

/// Type bracket of a raw value; the same numbers as `compare::canonical_type_order`.
pub fn raw_canonical_type_order(v: RawBsonRef<'_>) -> u8 {
    match v {
        RawBsonRef::MinKey => 9,
        RawBsonRef::Undefined => 10,
        RawBsonRef::Null => 15,
        RawBsonRef::Int32(_)
        | RawBsonRef::Int64(_)
        | RawBsonRef::Double(_)
        | RawBsonRef::Decimal128(_) => 20,
        RawBsonRef::String(_) | RawBsonRef::Symbol(_) => 25,
        RawBsonRef::Document(_) => 30,
        RawBsonRef::Array(_) => 35,
        RawBsonRef::Binary(_) => 40,
        RawBsonRef::ObjectId(_) => 45,
        RawBsonRef::Boolean(_) => 50,
        RawBsonRef::DateTime(_) => 55,
        RawBsonRef::Timestamp(_) => 57,
        RawBsonRef::RegularExpression(_) => 60,
        RawBsonRef::DbPointer(_) => 65,
        RawBsonRef::JavaScriptCode(_) => 70,
        RawBsonRef::JavaScriptCodeWithScope(_) => 75,
        RawBsonRef::MaxKey => 137,
    }
}

fn raw_num(v: RawBsonRef<'_>) -> Option<Num> {
    match v {
        RawBsonRef::Int32(i) => Some(Num::I(i64::from(i))),
        RawBsonRef::Int64(i) => Some(Num::I(i)),
        RawBsonRef::Double(d) => Some(Num::F(d)),
        RawBsonRef::Decimal128(d) => Some(Num::D(crate::decimal::to_dec(&d))),
        _ => None,
    }
}

fn raw_db_pointer_parts(v: RawBsonRef<'_>) -> (Vec<u8>, [u8; 12]) {
    match v.to_raw_bson() {
        RawBson::DbPointer(p) => db_pointer_parts(&p),
        _ => (Vec::new(), [0; 12]),
    }
}

/// Compare two raw documents as MongoDB does (field names considered).
pub fn compare_raw_documents(a: &RawDocument, b: &RawDocument) -> Result<Ordering> {
    let mut left = a.iter();
    let mut right = b.iter();
    loop {
        match (left.next().transpose()?, right.next().transpose()?) {
            (None, None) => return Ok(Ordering::Equal),
            (None, Some(_)) => return Ok(Ordering::Less),
            (Some(_), None) => return Ok(Ordering::Greater),
            (Some((ka, va)), Some((kb, vb))) => {
                let ord = raw_canonical_type_order(va)
                    .cmp(&raw_canonical_type_order(vb))
                    .then_with(|| ka.as_bytes().cmp(kb.as_bytes()));
                let ord = match ord {
                    Ordering::Equal => compare_raw_values(va, vb)?,
                    other => other,
                };
                if ord != Ordering::Equal {
                    return Ok(ord);
                }
            }
        }
    }
}

fn compare_raw_arrays(a: &RawArray, b: &RawArray) -> Result<Ordering> {
    let mut left = a.into_iter();
    let mut right = b.into_iter();
    loop {
        match (left.next().transpose()?, right.next().transpose()?) {
            (None, None) => return Ok(Ordering::Equal),
            (None, Some(_)) => return Ok(Ordering::Less),
            (Some(_), None) => return Ok(Ordering::Greater),
            (Some(x), Some(y)) => {
                let ord = compare_raw_values(x, y)?;
                if ord != Ordering::Equal {
                    return Ok(ord);
                }
            }
        }
    }
}

/// MongoDB's total order over raw BSON values (simple collation).
pub fn compare_raw_values(a: RawBsonRef<'_>, b: RawBsonRef<'_>) -> Result<Ordering> {
    let (ta, tb) = (raw_canonical_type_order(a), raw_canonical_type_order(b));
    if ta != tb {
        return Ok(ta.cmp(&tb));
    }
    if let (Some(x), Some(y)) = (raw_num(a), raw_num(b)) {
        return Ok(compare_num(x, y));
    }
    use RawBsonRef as R;
    Ok(match (a, b) {
        (R::String(x) | R::Symbol(x), R::String(y) | R::Symbol(y)) => {
            x.as_bytes().cmp(y.as_bytes())
        }
        (R::Document(x), R::Document(y)) => return compare_raw_documents(x, y),
        (R::Array(x), R::Array(y)) => return compare_raw_arrays(x, y),
        (R::Binary(x), R::Binary(y)) => x
            .bytes
            .len()
            .cmp(&y.bytes.len())
            .then_with(|| u8::from(x.subtype).cmp(&u8::from(y.subtype)))
            .then_with(|| x.bytes.cmp(y.bytes)),
        (R::ObjectId(x), R::ObjectId(y)) => x.bytes().cmp(&y.bytes()),
        (R::Boolean(x), R::Boolean(y)) => x.cmp(&y),
        (R::DateTime(x), R::DateTime(y)) => x.timestamp_millis().cmp(&y.timestamp_millis()),
        (R::Timestamp(x), R::Timestamp(y)) => (x.time, x.increment).cmp(&(y.time, y.increment)),
        (R::RegularExpression(x), R::RegularExpression(y)) => x
            .pattern
            .as_bytes()
            .cmp(y.pattern.as_bytes())
            .then_with(|| x.options.as_bytes().cmp(y.options.as_bytes())),
        (R::DbPointer(_), R::DbPointer(_)) => {
            let (nx, ox) = raw_db_pointer_parts(a);
            let (ny, oy) = raw_db_pointer_parts(b);
            nx.len()
                .cmp(&ny.len())
                .then_with(|| nx.cmp(&ny))
                .then_with(|| ox.cmp(&oy))
        }
        (R::JavaScriptCode(x), R::JavaScriptCode(y)) => x.as_bytes().cmp(y.as_bytes()),
        (R::JavaScriptCodeWithScope(x), R::JavaScriptCodeWithScope(y)) => {
            match x.code.as_bytes().cmp(y.code.as_bytes()) {
                Ordering::Equal => return compare_raw_documents(x.scope, y.scope),
                other => other,
            }
        }
        // MinKey, MaxKey, Null, Undefined: one value per bracket.
        _ => Ordering::Equal,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::compare_values;
    use bson::{doc, Bson, RawDocumentBuf};

    fn raw_cmp(a: &Bson, b: &Bson) -> Ordering {
        let da = RawDocumentBuf::from_document(&doc! {"v": a.clone()}).unwrap();
        let db = RawDocumentBuf::from_document(&doc! {"v": b.clone()}).unwrap();
        let (va, vb) = (da.get("v").unwrap().unwrap(), db.get("v").unwrap().unwrap());
        compare_raw_values(va, vb).unwrap()
    }

    #[test]
    fn raw_order_matches_owned_order() {
        let values = vec![
            Bson::MinKey,
            Bson::Undefined,
            Bson::Null,
            Bson::Double(f64::NAN),
            Bson::Int64(-5),
            Bson::Int32(1),
            Bson::Double(1.0),
            Bson::Int64((1 << 53) + 1),
            Bson::Double((1u64 << 53) as f64),
            Bson::Symbol("a".into()),
            Bson::String("a".into()),
            Bson::String("ab".into()),
            Bson::Document(doc! {"a": 1}),
            Bson::Document(doc! {"a": 1, "b": 1}),
            Bson::Document(doc! {"b": 0}),
            Bson::Document(doc! {"a": "x"}),
            Bson::Array(vec![1.into(), 2.into()]),
            Bson::Array(vec![1.into()]),
            Bson::Boolean(true),
            Bson::MaxKey,
        ];
        for a in &values {
            for b in &values {
                assert_eq!(raw_cmp(a, b), compare_values(a, b), "{a:?} vs {b:?}");
            }
        }
    }
}
