//! Applying an update entry's `$v: 2` diff (`pending.rs` writes it: removed fields `d`,
//! changed ones `u`, new ones `i` at the end, sub-diffs `s<field>`; arrays
//! `{a: true, l: <new length>, u<i>, s<i>}`) to the document before it, as mongod's
//! `doc_diff::applyDiff` does: the post-image a change stream's
//! `fullDocument: whenAvailable|required` shows, from the stored pre-image
//! (`pre_images.rs`). Pure. `None` when the diff does not fit the document (a malformed
//! entry, or a pre-image that is not the document the diff was taken from).

use bson::{RawArrayBuf, RawBson, RawBsonRef, RawDocument, RawDocumentBuf};

/// How deep sub-diffs may nest (the writer's limit, with room).
const MAX_DEPTH: usize = 200;

/// `doc` with `diff` (the entry's `o.diff`) applied.
pub fn apply_diff(doc: &RawDocument, diff: &RawDocument) -> Option<RawDocumentBuf> {
    apply_document(doc, diff, 0)
}

fn section<'a>(diff: &'a RawDocument, name: &str) -> Option<Option<&'a RawDocument>> {
    match diff.get(name).ok()? {
        None => Some(None),
        Some(RawBsonRef::Document(d)) => Some(Some(d)),
        Some(_) => None,
    }
}

fn apply_document(doc: &RawDocument, diff: &RawDocument, depth: usize) -> Option<RawDocumentBuf> {
    if depth > MAX_DEPTH {
        return None;
    }
    let deleted = section(diff, "d")?;
    let updated = section(diff, "u")?;
    let inserted = section(diff, "i")?;
    let mut out = RawDocumentBuf::new();
    for field in doc {
        let (k, v) = field.ok()?;
        if deleted.is_some_and(|d| d.get(k).ok().flatten().is_some()) {
            continue;
        }
        if let Some(new) = updated.and_then(|u| u.get(k).ok().flatten()) {
            out.append(k, new.to_raw_bson());
            continue;
        }
        match diff.get(format!("s{k}")).ok()? {
            Some(RawBsonRef::Document(sub)) => out.append(k, apply_sub(v, sub, depth + 1)?),
            Some(_) => return None,
            None => out.append(k, v.to_raw_bson()),
        }
    }
    // Fields `u` sets that the document lacked, then the new ones, at the end.
    for part in [updated, inserted].into_iter().flatten() {
        for field in part {
            let (k, v) = field.ok()?;
            if doc.get(k).ok().flatten().is_none() {
                out.append(k, v.to_raw_bson());
            }
        }
    }
    Some(out)
}

/// A sub-diff applied to the value it was taken from: an array diff or a document diff.
fn apply_sub(value: RawBsonRef<'_>, sub: &RawDocument, depth: usize) -> Option<RawBson> {
    if sub.get_bool("a") == Ok(true) {
        let RawBsonRef::Array(arr) = value else {
            return None;
        };
        return apply_array(arr, sub, depth).map(RawBson::Array);
    }
    let RawBsonRef::Document(d) = value else {
        return None;
    };
    apply_document(d, sub, depth).map(RawBson::Document)
}

fn apply_array(arr: &bson::RawArray, diff: &RawDocument, depth: usize) -> Option<RawArrayBuf> {
    let mut items: Vec<RawBson> = arr
        .into_iter()
        .map(|v| v.ok().map(|v| v.to_raw_bson()))
        .collect::<Option<_>>()?;
    if let Some(l) = diff.get("l").ok()? {
        let len = match l {
            RawBsonRef::Int32(n) => usize::try_from(n).ok()?,
            RawBsonRef::Int64(n) => usize::try_from(n).ok()?,
            _ => return None,
        };
        items.truncate(len);
    }
    for field in diff {
        let (k, v) = field.ok()?;
        if k == "a" || k == "l" {
            continue;
        }
        let (kind, index) = k.split_at(1);
        let i: usize = index.parse().ok()?;
        match kind {
            "u" => {
                if i >= items.len() {
                    items.resize(i + 1, RawBson::Null);
                }
                items[i] = v.to_raw_bson();
            }
            "s" => {
                let RawBsonRef::Document(sub) = v else {
                    return None;
                };
                let old = items.get(i)?.clone();
                items[i] = apply_sub(old.as_raw_bson_ref(), sub, depth + 1)?;
            }
            _ => return None,
        }
    }
    let mut out = RawArrayBuf::new();
    for v in items {
        out.push(v);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oplog::pending::diff;
    use bson::doc;

    fn raw(d: bson::Document) -> RawDocumentBuf {
        RawDocumentBuf::from_document(&d).expect("raw")
    }

    fn round_trip(old: bson::Document, new: bson::Document) {
        let (old, new) = (raw(old), raw(new));
        let Some(update) = diff(&old, &new) else {
            return; // a reordering is logged whole
        };
        let d = update.get_document("diff").expect("diff");
        let applied = apply_diff(&old, d).expect("applies");
        assert_eq!(
            applied.to_document().expect("doc"),
            new.to_document().expect("doc"),
            "diff {:?}",
            bson::Document::try_from(d)
        );
    }

    #[test]
    fn applying_a_diff_gives_the_new_document() {
        round_trip(doc! {"_id": 1}, doc! {"_id": 1, "x": 1});
        round_trip(doc! {"_id": 1, "x": 1, "y": 2}, doc! {"_id": 1, "y": 3});
        round_trip(
            doc! {"_id": 1, "a": {"b": 1, "c": [1, 2, 3]}, "z": true},
            doc! {"_id": 1, "a": {"b": 2, "c": [1, 5]}, "z": true, "n": "new"},
        );
        round_trip(
            doc! {"_id": 1, "arr": [{"x": 1}, {"x": 2}]},
            doc! {"_id": 1, "arr": [{"x": 1}, {"x": 3, "y": 1}, 7, 8]},
        );
        round_trip(doc! {"_id": 1, "v": 1}, doc! {"_id": 1, "v": "s"});
        round_trip(doc! {"_id": 1, "v": [1]}, doc! {"_id": 1, "v": {"k": 1}});
    }

    /// Model test: random documents changed at random, the diff applied to the old one.
    #[test]
    fn random_changes_round_trip() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        fn value(next: &mut dyn FnMut(u64) -> u64, depth: u32) -> bson::Bson {
            match next(if depth > 2 { 3 } else { 5 }) {
                0 => bson::Bson::Int32(next(4) as i32),
                1 => bson::Bson::String(format!("s{}", next(3))),
                2 => bson::Bson::Boolean(next(2) == 0),
                3 => bson::Bson::Array((0..next(4)).map(|_| value(next, depth + 1)).collect()),
                _ => {
                    let mut d = doc! {};
                    for i in 0..next(4) {
                        d.insert(format!("f{i}"), value(next, depth + 1));
                    }
                    bson::Bson::Document(d)
                }
            }
        }
        for _ in 0..500 {
            let mut old = doc! {"_id": 1};
            for i in 0..next(5) {
                old.insert(format!("k{i}"), value(&mut next, 0));
            }
            let mut new = old.clone();
            for _ in 0..next(4) {
                let k = format!("k{}", next(6));
                match next(3) {
                    0 => {
                        new.remove(&k);
                    }
                    _ => {
                        new.insert(k, value(&mut next, 0));
                    }
                }
            }
            round_trip(old, new);
        }
    }
}
