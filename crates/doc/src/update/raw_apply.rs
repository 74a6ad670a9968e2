//! Operator updates applied to raw BSON: when every operator of an update is a field
//! operator (`$set`, `$unset`, `$inc`, `$mul`, `$min`, `$max`, `$currentDate`,
//! `$setOnInsert`) on a top-level field, the new document is built in one pass over the old
//! one's elements — untouched elements copied as they are, each targeted one replaced or
//! dropped, new fields appended in application order — without decoding the document.
//! Only the targeted values are decoded, to compute each change with the same code the
//! owned path runs (`FieldOp::compute`), so both paths give the same bytes, the same
//! `modified` answer and the same errors. A replacement is applied here too, from its bytes
//! as sent (`replacement::apply_raw`). Anything else (dotted or positional paths, array
//! operators, `$rename`, pipelines, a document that repeats a targeted name) answers `None`
//! and the caller takes the owned path.

use bson::{Bson, RawBson, RawBsonRef, RawDocument, RawDocumentBuf};

use super::field::FieldOp;
use super::path::Component;
use super::{immutable_id, same_value, Action, ApplyContext, Change, Form, Site, UpdateSpec};
use crate::{ErrorCode, MongoError};

/// What an update applied to raw bytes did.
#[derive(Debug, Clone, PartialEq)]
pub enum RawApply {
    /// No byte would change (what `nModified` does not count).
    Unchanged,
    /// The new document.
    Changed(RawDocumentBuf),
}

/// One top-level field an update changes.
struct Target<'u> {
    name: &'u str,
    change: Change,
}

impl UpdateSpec {
    /// Applies the update to `doc` without decoding it, or `None` when this update or this
    /// document needs the owned path ([`UpdateSpec::apply`]). `doc` must have an `_id`.
    pub fn apply_raw(
        &self,
        doc: &RawDocument,
        ctx: &ApplyContext,
    ) -> Result<Option<RawApply>, MongoError> {
        let ops = match &self.form {
            Form::Operators(ops) => ops,
            Form::Replacement(r) => return super::replacement::apply_raw(r, doc).map(Some),
            Form::Pipeline(_) => return Ok(None),
        };
        let mut fields: Vec<(&str, &FieldOp)> = Vec::with_capacity(ops.len());
        for op in ops {
            let (Action::Field(f), [Component::Field(name)]) = (&op.action, op.path.components())
            else {
                return Ok(None);
            };
            if matches!(f, FieldOp::SetOnInsert(_)) && !ctx.is_insert {
                continue;
            }
            fields.push((name, f));
        }
        // The document's elements, parsed once for every lookup and the rebuild below.
        let elements = doc
            .iter()
            .collect::<Result<Vec<(&str, RawBsonRef<'_>)>, _>>()
            .map_err(corrupt)?;
        let Some(Some(id)) = single(&elements, "_id") else {
            return Ok(None);
        };
        let id = to_bson(id)?;
        let mut targets = Vec::with_capacity(fields.len());
        for (name, op) in fields {
            let Some(current) = single(&elements, name) else {
                return Ok(None);
            };
            let current = current.map(to_bson).transpose()?;
            let parts = [name.to_owned()];
            let site = Site {
                parts: &parts,
                doc_id: Some(&id),
                ctx,
                id_is_immutable: true,
            };
            let change = match (op.compute(current.as_ref(), &site)?, &current) {
                (Change::Write(v), Some(c)) if same_value(c, &v) => Change::Keep,
                (other, _) => other,
            };
            if change != Change::Keep && name == "_id" {
                return Err(immutable_id(&parts));
            }
            targets.push(Target { name, change });
        }
        if targets.iter().all(|t| t.change == Change::Keep) {
            return Ok(Some(RawApply::Unchanged));
        }
        rebuild(&elements, &targets).map(|d| Some(RawApply::Changed(d)))
    }
}

/// `doc` with each target's change made: elements in their places, new fields at the end.
fn rebuild(
    elements: &[(&str, RawBsonRef<'_>)],
    targets: &[Target<'_>],
) -> Result<RawDocumentBuf, MongoError> {
    let mut out = RawDocumentBuf::new();
    let mut placed = vec![false; targets.len()];
    for &(key, value) in elements {
        match targets.iter().position(|t| t.name == key) {
            Some(i) => {
                placed[i] = true;
                match &targets[i].change {
                    Change::Write(v) | Change::Rewrite(v) => out.append(key, to_raw(v)?),
                    Change::Remove => {}
                    Change::Keep => out.append_ref(key, value),
                }
            }
            None => out.append_ref(key, value),
        }
    }
    for (t, _) in targets.iter().zip(placed).filter(|(_, placed)| !placed) {
        if let Change::Write(v) | Change::Rewrite(v) = &t.change {
            out.append(t.name, to_raw(v)?);
        }
    }
    Ok(out)
}

/// The value of field `name`: `Some(None)` when absent, `Some(Some(v))` when present once,
/// `None` when the document repeats the name (the owned path decides what that means).
fn single<'d>(elements: &[(&str, RawBsonRef<'d>)], name: &str) -> Option<Option<RawBsonRef<'d>>> {
    let mut found = None;
    for &(key, value) in elements {
        if key == name {
            if found.is_some() {
                return None;
            }
            found = Some(value);
        }
    }
    Some(found)
}

fn to_bson(v: RawBsonRef<'_>) -> Result<Bson, MongoError> {
    Bson::try_from(v.to_raw_bson()).map_err(|e| corrupt_message(e.to_string()))
}

fn to_raw(v: &Bson) -> Result<RawBson, MongoError> {
    RawBson::try_from(v.clone()).map_err(|e| MongoError::new(ErrorCode::BadValue, e.to_string()))
}

fn corrupt(e: bson::raw::Error) -> MongoError {
    corrupt_message(e.to_string())
}

fn corrupt_message(m: String) -> MongoError {
    MongoError::new(
        ErrorCode::DataCorruptionDetected,
        format!("stored document does not decode: {m}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, DateTime, Document};

    fn ctx() -> ApplyContext {
        ApplyContext::new(DateTime::from_millis(1_700_000_000_000))
    }

    /// Both paths on one update and document: the raw one must give the owned one's bytes
    /// and answer, or decline.
    fn both(update: Document, d: Document) -> Option<Result<RawApply, MongoError>> {
        let spec = UpdateSpec::parse(&update, None).expect("valid update");
        let raw = RawDocumentBuf::from_document(&d).expect("raw");
        let mut owned = d.clone();
        let owned_result = spec.apply(&mut owned, &ctx());
        let raw_result = spec.apply_raw(&raw, &ctx()).transpose()?;
        match (&owned_result, &raw_result) {
            (Ok(o), Ok(RawApply::Unchanged)) => assert!(!o.modified, "{update}"),
            (Ok(o), Ok(RawApply::Changed(r))) => {
                assert!(o.modified, "{update}");
                let want = RawDocumentBuf::from_document(&owned).expect("raw");
                assert_eq!(r.as_bytes(), want.as_bytes(), "{update} on {d}");
            }
            (Err(a), Err(b)) => assert_eq!(a, b),
            other => panic!("paths disagree on {update}: {other:?}"),
        }
        Some(raw_result)
    }

    #[test]
    fn field_operators_give_the_owned_paths_bytes() {
        let d = doc! {"_id": 1, "a": 1, "b": "x", "c": 2.5, "n": i64::MAX - 1};
        for update in [
            doc! {"$set": {"a": 2}},
            doc! {"$set": {"a": 1}},
            doc! {"$set": {"a": 1.0}},
            doc! {"$set": {"z": 1, "y": {"k": [1, 2]}}},
            doc! {"$inc": {"a": 5, "new": 1}},
            doc! {"$inc": {"a": i32::MAX}},
            doc! {"$inc": {"c": 1}},
            doc! {"$inc": {"n": 5i64}},
            doc! {"$inc": {"b": 1}},
            doc! {"$mul": {"a": 3, "missing": 2}},
            doc! {"$unset": {"b": "", "nothing": ""}},
            doc! {"$min": {"a": 0}, "$max": {"c": 1}},
            doc! {"$currentDate": {"t": true}},
            doc! {"$setOnInsert": {"a": 9}, "$set": {"b": "y"}},
            doc! {"$set": {"_id": 1}},
            doc! {"$set": {"_id": 2}},
            doc! {"$inc": {"_id": 1}},
            doc! {"$unset": {"_id": ""}},
        ] {
            assert!(
                both(update.clone(), d.clone()).is_some(),
                "{update} declined"
            );
        }
    }

    #[test]
    fn replacements_give_the_owned_paths_bytes() {
        let d = doc! {"_id": 1, "a": {"b": 1}, "arr": [1, 2]};
        for replacement in [
            doc! {"x": 1},
            doc! {},
            doc! {"a": {"b": 1}, "arr": [1, 2]},
            doc! {"_id": 1, "a": {"b": 1}, "arr": [1, 2]},
            doc! {"x": 1, "_id": 1},
            doc! {"_id": 2},
        ] {
            assert!(
                both(replacement.clone(), d.clone()).is_some(),
                "{replacement} declined"
            );
        }
    }

    #[test]
    fn other_updates_and_repeated_names_take_the_owned_path() {
        let d = doc! {"_id": 1, "a": {"b": 1}, "arr": [1, 2]};
        for update in [
            doc! {"$set": {"a.b": 2}},
            doc! {"$push": {"arr": 3}},
            doc! {"$rename": {"a": "z"}},
            doc! {"$set": {"arr.$": 3}},
        ] {
            assert!(both(update.clone(), d.clone()).is_none(), "{update} taken");
        }
        // A repeated field name: the owned decode keeps one, so the raw path declines.
        let mut raw = RawDocumentBuf::new();
        raw.append("_id", 1);
        raw.append("a", 1);
        raw.append("a", 2);
        let spec = UpdateSpec::parse(&doc! {"$set": {"a": 3}}, None).expect("valid");
        assert_eq!(spec.apply_raw(&raw, &ctx()).expect("no error"), None);
        let no_id = RawDocumentBuf::from_document(&doc! {"a": 1}).expect("raw");
        assert_eq!(spec.apply_raw(&no_id, &ctx()).expect("no error"), None);
    }

    #[test]
    fn random_field_updates_agree_with_the_owned_path() {
        let values = [
            Bson::Int32(1),
            Bson::Int32(i32::MAX),
            Bson::Int64(-3),
            Bson::Double(0.5),
            Bson::Double(-0.0),
            Bson::String("s".into()),
            Bson::Null,
            Bson::Boolean(true),
            Bson::Document(doc! {"q": 1}),
        ];
        let names = ["a", "b", "c", "d"];
        let ops = ["$set", "$inc", "$mul", "$min", "$max", "$unset"];
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: usize| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as usize % n
        };
        for _ in 0..2000 {
            let mut d = doc! {"_id": next(5) as i32};
            for name in names {
                if next(2) == 0 {
                    d.insert(name, values[next(values.len())].clone());
                }
            }
            let mut update = Document::new();
            for name in names {
                if next(2) == 0 {
                    let op = ops[next(ops.len())];
                    let arg = match op {
                        "$inc" | "$mul" => values[next(4)].clone(),
                        _ => values[next(values.len())].clone(),
                    };
                    let entry = update
                        .entry(op.to_owned())
                        .or_insert(Bson::Document(doc! {}));
                    if let Bson::Document(fields) = entry {
                        fields.insert(name, arg);
                    }
                }
            }
            if update.is_empty() {
                continue;
            }
            assert!(
                both(update.clone(), d.clone()).is_some(),
                "{update} declined"
            );
        }
    }
}
