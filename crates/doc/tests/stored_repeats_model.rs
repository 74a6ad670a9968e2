//! A stored document that repeats field names, updated through `StoredDocument` (decode,
//! apply, encode) and through a naive model of mongod's in-place updates: the document as a
//! list of elements, each operator walking to the *first* element of each name on its path,
//! changing or removing that one element and leaving every other where it is (a missing
//! field or parent appended at the end). Random documents (names from a small alphabet, so
//! they repeat, at two levels) and random `$set`/`$unset`/`$inc` sequences; after each
//! update both must hold the same bytes, or both refuse.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "an integration test: a failed unwrap or expect is a failed test"
)]

use bson::{doc, Bson, RawBson, RawDocumentBuf};
use proptest::prelude::*;
use shale_doc::{ApplyContext, StoredDocument, UpdateSpec};

/// A value of the model: an int or a document of elements in order.
#[derive(Debug, Clone, PartialEq)]
enum Value {
    Int(i32),
    Doc(Vec<(String, Value)>),
}

#[derive(Debug, Clone)]
enum Op {
    Set(Vec<String>, i32),
    Unset(Vec<String>),
    Inc(Vec<String>, i32),
}

impl Op {
    fn update(&self) -> bson::Document {
        match self {
            Op::Set(p, v) => doc! {"$set": {p.join("."): *v}},
            Op::Unset(p) => doc! {"$unset": {p.join("."): ""}},
            Op::Inc(p, v) => doc! {"$inc": {p.join("."): *v}},
        }
    }

    fn path(&self) -> &[String] {
        match self {
            Op::Set(p, _) | Op::Unset(p) | Op::Inc(p, _) => p,
        }
    }
}

/// The model's update of `doc`: `Err(())` where mongod refuses (a parent that is not a
/// document, `$inc` of a document).
fn apply_model(doc: &mut Vec<(String, Value)>, op: &Op) -> Result<(), ()> {
    let (last, parents) = op.path().split_last().ok_or(())?;
    let mut here = doc;
    for name in parents {
        let at = match here.iter().position(|(n, _)| n == name) {
            Some(at) => at,
            None if matches!(op, Op::Unset(_)) => return Ok(()),
            None => {
                here.push((name.clone(), Value::Doc(Vec::new())));
                here.len() - 1
            }
        };
        here = match &mut here[at].1 {
            Value::Doc(d) => d,
            Value::Int(_) if matches!(op, Op::Unset(_)) => return Ok(()),
            Value::Int(_) => return Err(()),
        };
    }
    let at = here.iter().position(|(n, _)| n == last);
    match (op, at) {
        (Op::Unset(_), Some(at)) => {
            here.remove(at);
        }
        (Op::Unset(_), None) => {}
        (Op::Set(_, v), Some(at)) => here[at].1 = Value::Int(*v),
        (Op::Set(_, v) | Op::Inc(_, v), None) => here.push((last.clone(), Value::Int(*v))),
        (Op::Inc(_, v), Some(at)) => match &mut here[at].1 {
            Value::Int(n) => *n += v,
            Value::Doc(_) => return Err(()),
        },
    }
    Ok(())
}

fn to_raw(elements: &[(String, Value)]) -> RawDocumentBuf {
    let mut d = RawDocumentBuf::new();
    for (name, value) in elements {
        match value {
            Value::Int(n) => d.append(name.as_str(), *n),
            Value::Doc(sub) => d.append(name.as_str(), RawBson::Document(to_raw(sub))),
        }
    }
    d
}

/// The update as the server's owned path applies it; `None` when it refuses.
fn apply_stored(stored: &RawDocumentBuf, op: &Op) -> Option<RawDocumentBuf> {
    let spec = UpdateSpec::parse(&op.update(), None).expect("a valid update");
    let mut decoded = StoredDocument::decode(stored).expect("decodes");
    let ctx = ApplyContext::new(bson::DateTime::from_millis(0));
    let outcome = spec.apply(&mut decoded.doc, &ctx).ok()?;
    if !outcome.modified {
        return Some(stored.clone());
    }
    Some(decoded.encode(stored, &spec).expect("encodes"))
}

/// A document's elements, repeats shown, for failure messages.
fn elements(d: &RawDocumentBuf) -> Vec<(String, Bson)> {
    d.iter()
        .map(|e| {
            let (k, v) = e.expect("element");
            (k.to_owned(), Bson::try_from(v).expect("value"))
        })
        .collect()
}

fn name() -> impl Strategy<Value = String> + Clone {
    prop::sample::select(vec!["a", "b", "c"]).prop_map(str::to_owned)
}

fn value() -> impl Strategy<Value = Value> {
    let leaf = (0..5i32).prop_map(Value::Int);
    leaf.prop_recursive(2, 12, 4, |inner| {
        prop::collection::vec((name(), inner), 0..4).prop_map(Value::Doc)
    })
}

fn op() -> impl Strategy<Value = Op> {
    let path = prop::collection::vec(name(), 1..3);
    prop_oneof![
        (path.clone(), 0..5i32).prop_map(|(p, v)| Op::Set(p, v)),
        path.clone().prop_map(Op::Unset),
        (path, 1..3i32).prop_map(|(p, v)| Op::Inc(p, v)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn updates_keep_repeats_as_mongods_in_place_updates_do(
        fields in prop::collection::vec((name(), value()), 0..6),
        ops in prop::collection::vec(op(), 1..5),
    ) {
        let mut model: Vec<(String, Value)> = vec![("_id".to_owned(), Value::Int(1))];
        model.extend(fields);
        let mut stored = to_raw(&model);
        for op in &ops {
            let mut next = model.clone();
            let refused = apply_model(&mut next, op).is_err();
            match apply_stored(&stored, op) {
                None => prop_assert!(refused, "refused where the model applies {:?}", op),
                Some(after) => {
                    prop_assert!(!refused, "applied where the model refuses {:?}", op);
                    let want = to_raw(&next);
                    prop_assert_eq!(
                        after.as_bytes(),
                        want.as_bytes(),
                        "after {:?}: {:?} where the model has {:?}",
                        op,
                        elements(&after),
                        elements(&want)
                    );
                    model = next;
                    stored = after;
                }
            }
        }
    }
}
