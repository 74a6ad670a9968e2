//! A field's operator document read as sent, for `as_sent.rs`: mongod's matcher parses every
//! element of it, and of the operator documents below it (`$not`'s, `$elemMatch`'s), so an
//! operator given twice is the AND of both. Here such a document becomes filter clauses
//! whose AND means the same, each one a `bson::Document` can hold. It never judges: what the
//! matcher refuses in the document sent, it still refuses in what this writes.
//!
//! - Operators split into runs that name none twice (`{$gt: 3, $gt: 1}` is `{a: {$gt: 3}}`
//!   and `{a: {$gt: 1}}`).
//! - `$not` whose document repeats a name: `{a: {$not: X}}` is `{$nor: [{a: X}]}`, X read
//!   as sent.
//! - `$elemMatch`, alone or as an `$all` entry: the document form's filter read as sent
//!   (`as_sent::level`); the value form's operators, which one element must all satisfy,
//!   nested as `{op1, $not: {$not: {op2}}}` (NOT NOT is the same test of the same element).
//! - `$regex`/`$options`: mongod parses every `$regex` from the whole operator document
//!   (`parseRegexDocument`: the last pattern, options from the last `$options` or a
//!   pattern's flags, options given twice refused), so all of them become one
//!   `{$regex, $options}` that the matcher reads the same way, refusals included.

use bson::raw::{RawBsonRef, RawDocument};
use bson::{doc, Bson, Document, Regex};

use super::array::is_value_form;
use super::as_sent::{level, repeats};
use super::{is_operator_document, path::bson_error};
use crate::update::first_repeat;
use crate::{ErrorCode, MongoError};

/// Whether a field's operator document must be rewritten: it names an operator twice, or a
/// `$not` or `$elemMatch` below it repeats a name.
pub(super) fn ops_repeat(ops: &RawDocument) -> Result<bool, MongoError> {
    if first_repeat(ops).is_some() {
        return Ok(true);
    }
    for element in ops {
        let (op, arg) = element.map_err(bson_error)?;
        let repeated = match arg {
            RawBsonRef::Document(sub) => argument_repeats(op, sub)?,
            RawBsonRef::Array(items) if op == "$all" => {
                let mut any = false;
                for item in items {
                    any |= elem_match_item(item.map_err(bson_error)?)?.is_some();
                }
                any
            }
            _ => false,
        };
        if repeated {
            return Ok(true);
        }
    }
    Ok(false)
}

/// An `$all` entry `{$elemMatch: arg}` whose argument repeats a name below it.
fn elem_match_item(item: RawBsonRef<'_>) -> Result<Option<&RawDocument>, MongoError> {
    let RawBsonRef::Document(entry) = item else {
        return Ok(None);
    };
    let mut elements = entry.into_iter();
    match (
        elements.next().transpose().map_err(bson_error)?,
        elements.next(),
    ) {
        (Some(("$elemMatch", RawBsonRef::Document(sub))), None) => {
            Ok(argument_repeats("$elemMatch", sub)?.then_some(sub))
        }
        _ => Ok(None),
    }
}

/// `$not`'s operator document or `$elemMatch`'s argument repeats a name below it.
fn argument_repeats(op: &str, sub: &RawDocument) -> Result<bool, MongoError> {
    match op {
        "$not" => Ok(is_operator_document(sub)? && ops_repeat(sub)?),
        "$elemMatch" if is_value_form(sub)? => ops_repeat(sub),
        "$elemMatch" => repeats(sub),
        _ => Ok(false),
    }
}

fn is_regex_part(op: &str) -> bool {
    matches!(op, "$regex" | "$options")
}

/// `{name: ops}` as clauses whose AND is what mongod's matcher reads in it: `(name,
/// operators)` runs, `("$nor", [...])` for a `$not` that repeats a name, and one run of the
/// `$regex`/`$options` parts.
pub(super) fn field_clauses(
    name: &str,
    ops: &RawDocument,
) -> Result<Vec<(String, Bson)>, MongoError> {
    let mut clauses = Vec::new();
    let mut run = Document::new();
    let mut regex_parts = Vec::new();
    for element in ops {
        let (op, arg) = element.map_err(bson_error)?;
        if is_regex_part(op) {
            regex_parts.push((op, arg));
            continue;
        }
        if let RawBsonRef::Document(sub) = arg {
            if op == "$not" && argument_repeats(op, sub)? {
                let negated = all_of(field_clauses(name, sub)?);
                clauses.push((
                    "$nor".to_owned(),
                    Bson::Array(vec![Bson::Document(negated)]),
                ));
                continue;
            }
        }
        if run.contains_key(op) {
            clauses.push((name.to_owned(), Bson::Document(std::mem::take(&mut run))));
        }
        run.insert(op, argument(op, arg)?);
    }
    if !run.is_empty() {
        clauses.push((name.to_owned(), Bson::Document(run)));
    }
    if !regex_parts.is_empty() {
        clauses.push((name.to_owned(), Bson::Document(regex_run(&regex_parts)?)));
    }
    Ok(clauses)
}

/// Clauses as one filter: the clause itself when there is one, else their `$and`.
fn all_of(clauses: Vec<(String, Bson)>) -> Document {
    let mut clauses: Vec<Document> = clauses
        .into_iter()
        .map(|(name, value)| {
            let mut clause = Document::new();
            clause.insert(name, value);
            clause
        })
        .collect();
    if clauses.len() == 1 {
        if let Some(only) = clauses.pop() {
            return only;
        }
    }
    doc! {"$and": clauses}
}

/// An operator's argument decoded, what repeats below a `$not` or `$elemMatch` (an
/// `$all` entry's too) read as sent.
fn argument(op: &str, arg: RawBsonRef<'_>) -> Result<Bson, MongoError> {
    if let (RawBsonRef::Array(items), "$all") = (arg, op) {
        let mut entries = Vec::new();
        for item in items {
            let item = item.map_err(bson_error)?;
            entries.push(match elem_match_item(item)? {
                Some(sub) => Bson::Document(
                    doc! {"$elemMatch": argument("$elemMatch", RawBsonRef::Document(sub))?},
                ),
                None => Bson::try_from(item).map_err(bson_error)?,
            });
        }
        return Ok(Bson::Array(entries));
    }
    let RawBsonRef::Document(sub) = arg else {
        return Bson::try_from(arg).map_err(bson_error);
    };
    if !argument_repeats(op, sub)? {
        return Bson::try_from(arg).map_err(bson_error);
    }
    Ok(match op {
        "$elemMatch" if !is_value_form(sub)? => Bson::Document(level(sub)?),
        _ => Bson::Document(value_ops(sub)?),
    })
}

/// An operator document that tests one value (`$elemMatch`'s value form, a `$not` inside
/// it) as one document meaning the AND of all its elements: runs that name no operator
/// twice nested as `{run1, $not: {$not: {run2, ...}}}`. Two runs that each hold a `$not`
/// of their own (`$not` given twice) cannot be nested so, and no other operator of a
/// value test ANDs them: refused, `NotImplemented` (238), where mongod would read both
/// (docs/compat.md), rather than read one of them and give a wrong answer.
fn value_ops(ops: &RawDocument) -> Result<Document, MongoError> {
    let mut runs = vec![Document::new()];
    let mut regex_parts = Vec::new();
    for element in ops {
        let (op, arg) = element.map_err(bson_error)?;
        if is_regex_part(op) {
            regex_parts.push((op, arg));
            continue;
        }
        let value = argument(op, arg)?;
        let full = runs.last().is_some_and(|run| run.contains_key(op));
        if full {
            runs.push(Document::new());
        }
        if let Some(run) = runs.last_mut() {
            run.insert(op, value);
        }
    }
    if !regex_parts.is_empty() {
        if let Some(first) = runs.first_mut() {
            first.extend(regex_run(&regex_parts)?);
        }
    }
    // Every run but the last needs its `$not` key for the next: a run with a `$not` of
    // its own goes last (the runs are ANDed, in any order), and there can be one.
    let with_not = runs.iter().filter(|run| run.contains_key("$not")).count();
    if with_not > 1 {
        return Err(MongoError::new(
            ErrorCode::NotImplemented,
            "an operator document testing one value (a value-form $elemMatch, or a $not \
             inside one) that gives $not more than once is not supported by shale",
        ));
    }
    runs.sort_by_key(|run| run.contains_key("$not"));
    let Some((last, rest)) = runs.split_last() else {
        return Ok(Document::new());
    };
    let mut nested = last.clone();
    for run in rest.iter().rev() {
        let mut outer = run.clone();
        outer.insert("$not", doc! {"$not": nested});
        nested = outer;
    }
    Ok(nested)
}

/// The `$regex`/`$options` elements of one operator document as the single `{$regex,
/// $options}` the matcher reads as it reads all of them (`parseRegexDocument`: the last
/// pattern; the options of the last `$options` or of a pattern with flags; options given
/// twice refused, 51074 or 51075). Where a part is refused, a document with the refused
/// part, for the matcher to refuse.
fn regex_run(parts: &[(&str, RawBsonRef<'_>)]) -> Result<Document, MongoError> {
    let raw = |v: RawBsonRef<'_>| Bson::try_from(v).map_err(bson_error);
    if !parts.iter().any(|(op, _)| *op == "$regex") {
        // `$options` alone: refused by the matcher ("$options needs a $regex").
        return match parts.first() {
            Some(&(op, value)) => Ok(doc! {op: raw(value)?}),
            None => Ok(Document::new()),
        };
    }
    let mut pattern = String::new();
    let mut options = String::new();
    for &(op, value) in parts {
        match (op, value) {
            ("$regex", RawBsonRef::String(p)) => pattern = p.to_owned(),
            ("$regex", RawBsonRef::RegularExpression(re)) => {
                pattern = re.pattern.to_owned();
                if !re.options.is_empty() {
                    if !options.is_empty() {
                        return Ok(doc! {"$options": options, "$regex": raw(value)?});
                    }
                    options = re.options.to_owned();
                }
            }
            ("$options", RawBsonRef::String(o)) => {
                if !options.is_empty() {
                    let flagged = Regex { pattern, options };
                    return Ok(doc! {"$regex": flagged, "$options": o});
                }
                options = o.to_owned();
            }
            // Not a string or a pattern: refused by the matcher as sent.
            _ if op == "$regex" => return Ok(doc! {"$regex": raw(value)?}),
            _ => return Ok(doc! {"$regex": pattern, "$options": raw(value)?}),
        }
    }
    let mut out = doc! {"$regex": pattern};
    if !options.is_empty() {
        out.insert("$options", options);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use crate::matcher::as_sent::filter_as_sent;
    use crate::matcher::test_support::check;
    use bson::{doc, rawdoc, Bson, Document, RawBson, RawDocumentBuf};

    /// A document of `elements` in order, names repeating as given.
    fn fields(elements: &[(&str, Bson)]) -> RawDocumentBuf {
        let mut out = RawDocumentBuf::new();
        for (name, value) in elements {
            out.append(
                *name,
                RawBson::try_from(value.clone()).expect("a raw value"),
            );
        }
        out
    }

    fn on(name: &str, ops: RawDocumentBuf) -> RawDocumentBuf {
        let mut filter = RawDocumentBuf::new();
        filter.append(name, ops);
        filter
    }

    fn read(filter: &RawDocumentBuf) -> Document {
        filter_as_sent(filter).expect("reads").expect("a repeat")
    }

    fn gt_twice() -> RawDocumentBuf {
        fields(&[("$gt", 1.into()), ("$gt", 5.into())])
    }

    #[test]
    fn a_not_of_operators_given_twice_negates_them_all() {
        let mut not = RawDocumentBuf::new();
        not.append("$not", gt_twice());
        // Decoded, `$not` kept `$gt: 5` only.
        let read = read(&on("a", not));
        assert_eq!(
            read,
            doc! {"$and": [{"$nor": [{"$and": [{"a": {"$gt": 1}}, {"a": {"$gt": 5}}]}]}]}
        );
        assert!(check(read.clone(), doc! {"a": 3}));
        assert!(check(read.clone(), doc! {}));
        assert!(!check(read, doc! {"a": 9}));
    }

    #[test]
    fn elem_match_reads_every_element_of_both_forms() {
        let mut object = RawDocumentBuf::new();
        object.append("x", 1);
        object.append("x", 2);
        let mut ops = RawDocumentBuf::new();
        ops.append("$elemMatch", object);
        let read_object = read(&on("arr", ops));
        assert_eq!(
            read_object,
            doc! {"arr": {"$elemMatch": {"$and": [{"x": 1}, {"x": 2}]}}}
        );
        assert!(!check(read_object.clone(), doc! {"arr": [{"x": 2}]}));
        assert!(check(read_object, doc! {"arr": [{"x": [1, 2]}]}));

        let mut ops = RawDocumentBuf::new();
        ops.append("$elemMatch", gt_twice());
        let read_value = read(&on("arr", ops));
        assert_eq!(
            read_value,
            doc! {"arr": {"$elemMatch": {"$gt": 1, "$not": {"$not": {"$gt": 5}}}}}
        );
        assert!(!check(read_value.clone(), doc! {"arr": [3, 0]}));
        assert!(check(read_value, doc! {"arr": [3, 6]}));
    }

    #[test]
    fn elem_match_entries_of_all_read_as_sent() {
        let mut x_twice = RawDocumentBuf::new();
        x_twice.append("x", 1);
        x_twice.append("x", 2);
        let mut entry = RawDocumentBuf::new();
        entry.append("$elemMatch", x_twice);
        let mut entries = bson::RawArrayBuf::new();
        entries.push(entry);
        entries.push(rawdoc! {"$elemMatch": {"y": 1}});
        let mut all = RawDocumentBuf::new();
        all.append("$all", entries);
        let read = read(&on("objs", all));
        assert_eq!(
            read,
            doc! {"objs": {"$all": [
                {"$elemMatch": {"$and": [{"x": 1}, {"x": 2}]}},
                {"$elemMatch": {"y": 1}},
            ]}}
        );
        assert!(!check(read.clone(), doc! {"objs": [{"x": 2}, {"y": 1}]}));
        assert!(check(read, doc! {"objs": [{"x": [1, 2]}, {"y": 1}]}));
    }

    #[test]
    fn a_not_inside_the_value_form_reads_as_sent() {
        let mut not = RawDocumentBuf::new();
        not.append("$not", gt_twice());
        let mut ops = RawDocumentBuf::new();
        ops.append("$elemMatch", not);
        let read = read(&on("arr", ops));
        assert_eq!(
            read,
            doc! {"arr": {"$elemMatch": {"$not": {"$gt": 1, "$not": {"$not": {"$gt": 5}}}}}}
        );
        assert!(check(read.clone(), doc! {"arr": [9, 3]}));
        assert!(!check(read, doc! {"arr": [9]}));
    }

    #[test]
    fn a_run_holding_a_not_goes_innermost() {
        let ops = fields(&[
            ("$not", Bson::Document(doc! {"$gt": 7})),
            ("$lt", 9.into()),
            ("$lt", 5.into()),
        ]);
        let mut elem = RawDocumentBuf::new();
        elem.append("$elemMatch", ops);
        let read = read(&on("arr", elem));
        assert_eq!(
            read,
            doc! {"arr": {"$elemMatch": {"$lt": 5, "$not": {"$not": {"$not": {"$gt": 7}, "$lt": 9}}}}}
        );
        assert!(check(read.clone(), doc! {"arr": [8, 4]}));
        assert!(!check(read, doc! {"arr": [8, 6]}));
    }

    #[test]
    fn two_nots_in_one_value_test_are_refused_not_read_as_one() {
        let not_gt = |n: i32| Bson::Document(doc! {"$gt": n});
        let ops = fields(&[("$not", not_gt(1)), ("$lt", 9.into()), ("$not", not_gt(5))]);
        let mut elem = RawDocumentBuf::new();
        elem.append("$elemMatch", ops);
        // Decoded, it read `{$not: {$gt: 5}, $lt: 9}`: a wrong answer for [3].
        let mut filter = on("arr", elem);
        filter.append("b", 1);
        let refused = filter_as_sent(&filter).expect_err("refused");
        assert_eq!(refused.code, crate::ErrorCode::NotImplemented);
    }

    #[test]
    fn regex_parts_are_read_as_mongod_reads_them() {
        let regex = |elements: &[(&str, Bson)]| read(&on("s", fields(elements)));
        let re = |p: &str, o: &str| {
            Bson::RegularExpression(bson::Regex {
                pattern: p.to_owned(),
                options: o.to_owned(),
            })
        };
        // The last pattern, once.
        let last = regex(&[("$regex", "^a".into()), ("$regex", "^b".into())]);
        assert_eq!(last, doc! {"s": {"$regex": "^b"}});
        assert!(check(last.clone(), doc! {"s": "bc"}));
        assert!(!check(last, doc! {"s": "ab"}));
        // The options of a pattern's flags survive a later pattern without.
        let flagged = regex(&[("$regex", re("^a", "i")), ("$regex", "^b".into())]);
        assert_eq!(flagged, doc! {"s": {"$regex": "^b", "$options": "i"}});
        assert!(check(flagged, doc! {"s": "Bc"}));
        // Kept beside the pattern when another operator repeats between them.
        let split = regex(&[
            ("$regex", "^a".into()),
            ("$ne", "ax".into()),
            ("$ne", "ay".into()),
            ("$options", "i".into()),
        ]);
        assert!(check(split.clone(), doc! {"s": "Ab"}));
        assert!(!check(split, doc! {"s": "ay"}));
        // Options given twice: refused as mongod refuses them.
        let twice = regex(&[
            ("$regex", "^a".into()),
            ("$options", "i".into()),
            ("$options", "m".into()),
        ]);
        let code = crate::Matcher::parse(&crate::matcher::test_support::raw(twice))
            .expect_err("refused")
            .code;
        assert_eq!(code, crate::ErrorCode::Location51075);
        let flags_then_options = regex(&[
            ("$options", "m".into()),
            ("$options", "x".into()),
            ("$regex", re("^a", "i")),
        ]);
        let code = crate::Matcher::parse(&crate::matcher::test_support::raw(flags_then_options))
            .expect_err("refused")
            .code;
        assert_eq!(code, crate::ErrorCode::Location51075);
    }
}
