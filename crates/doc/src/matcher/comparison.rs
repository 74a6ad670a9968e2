//! Comparison operators: `$eq $ne $gt $gte $lt $lte $in $nin` and implicit equality.
//!
//! Semantics followed (MongoDB 7.0):
//! - Values are compared with `compare_raw_values` (MongoDB's cross-type order); this file
//!   never orders values itself.
//! - Type bracketing: `$gt/$gte/$lt/$lte` only match values in the same canonical type bracket
//!   as the argument, except that a MinKey or MaxKey argument compares against every bracket.
//! - `null` as the argument of `$eq/$gte/$lte/$in` also matches a missing field; undefined is
//!   not null.
//! - NaN only matches `$eq/$gte/$lte` against NaN (never `$lt`/`$gt`).
//! - `$ne` and `$nin` are the negation, over the whole path, of `$eq` and `$in`.
//! - Regex arguments: refused by `$gt...` and `$ne`; `$in` treats them as patterns, `$eq`
//!   compares them as values.
//! - Under a collation (`collated`) the argument's strings are replaced by their collation
//!   keys once and each candidate's strings before it is compared (`collation/value.rs`);
//!   `$in`'s regexes still match the original string, as in mongod.

use std::cmp::Ordering;
use std::sync::Arc;

use bson::raw::{RawBson, RawBsonRef};

use super::evaluation::RegexPred;
use super::{bad_value, is_operator_document, leaf, path::bson_error, Node, Pred};
use crate::collation::value::{collate_raw, has_strings};
use crate::collation::Collation;
use crate::compare_raw::{compare_raw_values, raw_canonical_type_order};
use crate::MongoError;

/// The ordering test of a comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompareOp {
    /// `$eq`.
    Eq,
    /// `$gt`.
    Gt,
    /// `$gte`.
    Gte,
    /// `$lt`.
    Lt,
    /// `$lte`.
    Lte,
}

impl CompareOp {
    fn accepts(self, ord: Ordering) -> bool {
        match self {
            CompareOp::Eq => ord == Ordering::Equal,
            CompareOp::Gt => ord == Ordering::Greater,
            CompareOp::Gte => ord != Ordering::Less,
            CompareOp::Lt => ord == Ordering::Less,
            CompareOp::Lte => ord != Ordering::Greater,
        }
    }

    fn includes_equal(self) -> bool {
        matches!(self, CompareOp::Eq | CompareOp::Gte | CompareOp::Lte)
    }
}

/// `value <op> argument`.
#[derive(Debug, Clone)]
pub struct Compare {
    /// The operator.
    pub op: CompareOp,
    /// Collated already when `collation` is set.
    pub argument: RawBson,
    /// The collation strings are compared under, if any.
    pub collation: Option<Arc<Collation>>,
}

impl Compare {
    /// `value == argument`, under no collation.
    pub fn eq(argument: RawBsonRef<'_>) -> Compare {
        Compare {
            op: CompareOp::Eq,
            argument: argument.to_raw_bson(),
            collation: None,
        }
    }

    /// This comparison under collation `c`.
    pub(crate) fn collated(&mut self, c: &Arc<Collation>) {
        self.argument = collate_raw(c, self.argument.as_raw_bson_ref());
        self.collation = Some(Arc::clone(c));
    }

    /// Test one candidate (`None` = missing).
    pub fn test(&self, value: Option<RawBsonRef<'_>>) -> Result<bool, MongoError> {
        let argument = self.argument.as_raw_bson_ref();
        match (&self.collation, value) {
            (Some(c), Some(v)) if has_strings(v) => {
                let collated = collate_raw(c, v);
                compare_matches(self.op, argument, Some(collated.as_raw_bson_ref()))
            }
            _ => compare_matches(self.op, argument, value),
        }
    }
}

/// The comparison rule shared by `$eq...$lte`, `$in` and `$all`.
pub fn compare_matches(
    op: CompareOp,
    argument: RawBsonRef<'_>,
    value: Option<RawBsonRef<'_>>,
) -> Result<bool, MongoError> {
    let value = match value {
        None => return Ok(matches!(argument, RawBsonRef::Null) && op.includes_equal()),
        Some(v) => v,
    };
    let (value_bracket, argument_bracket) = (
        raw_canonical_type_order(value),
        raw_canonical_type_order(argument),
    );
    if value_bracket != argument_bracket {
        let extreme = matches!(argument, RawBsonRef::MinKey | RawBsonRef::MaxKey);
        return Ok(extreme && op.accepts(value_bracket.cmp(&argument_bracket)));
    }
    if is_nan(value) || is_nan(argument) {
        return Ok(is_nan(value) && is_nan(argument) && op.includes_equal());
    }
    let ord = compare_raw_values(value, argument).map_err(bson_error)?;
    Ok(op.accepts(ord))
}

fn is_nan(v: RawBsonRef<'_>) -> bool {
    match v {
        RawBsonRef::Double(d) => d.is_nan(),
        RawBsonRef::Decimal128(d) => crate::compare::decimal128_to_f64(&d).is_nan(),
        _ => false,
    }
}

/// A value's index-key encoding (`None` if it does not convert).
fn key_of(v: RawBsonRef<'_>) -> Option<Vec<u8>> {
    let owned = bson::Bson::try_from(v.to_raw_bson()).ok()?;
    let mut k = Vec::new();
    crate::keystring::encode_value_exact(&owned, &mut k);
    Some(k)
}

/// Above this many values, `$in` tests a value by binary search instead of one by one.
const SEARCHED_IN_LIST: usize = 8;

/// The argument list of `$in`: values compared for equality, and regexes matched.
#[derive(Debug, Clone, Default)]
pub struct InList {
    /// Values a match equals.
    pub equalities: Vec<RawBson>,
    /// Regexes a match satisfies.
    pub regexes: Vec<RegexPred>,
    /// For a long list: the equalities' index-key encodings, sorted. The encoding orders
    /// and equates values exactly as the comparison does (index bounds rely on it: an `$in`
    /// read through an index seeks these same keys), so a present value matches one of them
    /// iff its own encoding is in this list. A 20,000-value `$in` tests each document in
    /// ~15 comparisons instead of 20,000.
    sorted_keys: Option<Vec<Vec<u8>>>,
    /// Set when `equalities` are collated (see `Compare::collation`).
    collation: Option<Arc<Collation>>,
}

impl InList {
    /// This list under collation `c`: its equalities collated and re-indexed.
    pub(crate) fn collated(&mut self, c: &Arc<Collation>) {
        for v in &mut self.equalities {
            *v = collate_raw(c, v.as_raw_bson_ref());
        }
        self.collation = Some(Arc::clone(c));
        self.sorted_keys = None;
        self.index_equalities();
    }

    fn index_equalities(&mut self) {
        if self.equalities.len() <= SEARCHED_IN_LIST {
            return;
        }
        let mut keys = Vec::with_capacity(self.equalities.len());
        for v in &self.equalities {
            let Some(k) = key_of(v.as_raw_bson_ref()) else {
                return;
            };
            keys.push(k);
        }
        keys.sort_unstable();
        keys.dedup();
        self.sorted_keys = Some(keys);
    }

    /// True when `value` equals one of the values or matches one of the regexes.
    pub fn test(&self, value: Option<RawBsonRef<'_>>) -> Result<bool, MongoError> {
        if let (Some(c), Some(v)) = (&self.collation, value) {
            if has_strings(v) {
                let collated = collate_raw(c, v);
                return Ok(self.test_equalities(Some(collated.as_raw_bson_ref()))?
                    || self.test_regexes(value)?);
            }
        }
        Ok(self.test_equalities(value)? || self.test_regexes(value)?)
    }

    fn test_equalities(&self, value: Option<RawBsonRef<'_>>) -> Result<bool, MongoError> {
        if let (Some(keys), Some(k)) = (&self.sorted_keys, value.and_then(key_of)) {
            return Ok(keys.binary_search(&k).is_ok());
        }
        for argument in &self.equalities {
            if compare_matches(CompareOp::Eq, argument.as_raw_bson_ref(), value)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn test_regexes(&self, value: Option<RawBsonRef<'_>>) -> Result<bool, MongoError> {
        for re in &self.regexes {
            if re.test(value)? {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

/// `{field: {op: arg}}` for one of this file's operators.
pub(crate) fn parse(field: &str, op: &str, arg: RawBsonRef<'_>) -> Result<Node, MongoError> {
    let is_regex = matches!(arg, RawBsonRef::RegularExpression(_));
    let ordered = |op| -> Result<Node, MongoError> {
        if is_regex {
            return Err(bad_value(format!(
                "Can't have RegEx as arg to predicate over field '{field}'."
            )));
        }
        let argument = arg.to_raw_bson();
        Ok(leaf(
            field,
            Pred::Compare(Compare {
                op,
                argument,
                collation: None,
            }),
        ))
    };
    match op {
        "$eq" => Ok(leaf(field, Pred::Compare(Compare::eq(arg)))),
        "$ne" if is_regex => Err(bad_value("Can't have regex as arg to $ne.")),
        "$ne" => Ok(Node::Not(Box::new(leaf(
            field,
            Pred::Compare(Compare::eq(arg)),
        )))),
        "$gt" => ordered(CompareOp::Gt),
        "$gte" => ordered(CompareOp::Gte),
        "$lt" => ordered(CompareOp::Lt),
        "$lte" => ordered(CompareOp::Lte),
        "$in" => Ok(leaf(field, Pred::In(parse_in_list("$in", arg)?))),
        "$nin" => Ok(Node::Not(Box::new(leaf(
            field,
            Pred::In(parse_in_list("$nin", arg)?),
        )))),
        _ => unreachable!("comparison::parse called with {op}"),
    }
}

/// The array argument of `$in`/`$nin`.
pub(crate) fn parse_in_list(op: &str, arg: RawBsonRef<'_>) -> Result<InList, MongoError> {
    let RawBsonRef::Array(items) = arg else {
        return Err(bad_value(format!("{op} needs an array")));
    };
    let mut list = InList::default();
    for item in items {
        match item.map_err(bson_error)? {
            RawBsonRef::Document(d) if is_operator_document(d)? => {
                return Err(bad_value("cannot nest $ under $in"));
            }
            RawBsonRef::RegularExpression(re) => list.regexes.push(RegexPred::from_bson(re)?),
            other => list.equalities.push(other.to_raw_bson()),
        }
    }
    list.index_equalities();
    Ok(list)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, Bson, RawDocumentBuf};

    fn test(op: CompareOp, argument: Bson, value: Option<Bson>) -> bool {
        let a = RawDocumentBuf::from_document(&doc! {"v": argument}).expect("encodes");
        let v = value.map(|v| RawDocumentBuf::from_document(&doc! {"v": v}).expect("encodes"));
        let arg = a.get("v").expect("valid").expect("present");
        let val = v
            .as_ref()
            .map(|d| d.get("v").expect("valid").expect("present"));
        compare_matches(op, arg, val).expect("compares")
    }

    #[test]
    fn a_long_in_list_searches_as_the_comparison_matches() {
        let dec = |n: u128| {
            Bson::Decimal128(bson::Decimal128::from_bytes(
                ((6176u128 << 113) | n).to_le_bytes(),
            ))
        };
        let mut values: Vec<Bson> = vec![
            Bson::Int32(1),
            Bson::Int64(2),
            Bson::Double(3.5),
            Bson::Double(f64::NAN),
            Bson::String("a".into()),
            Bson::String("".into()),
            Bson::Null,
            Bson::Boolean(true),
            Bson::Array(vec![Bson::Int32(1), Bson::Int32(2)]),
            Bson::Document(doc! {"x": 1}),
            dec(7),
            Bson::MinKey,
            Bson::ObjectId(bson::oid::ObjectId::from_bytes([1; 12])),
        ];
        values.extend((100..130).map(Bson::Int32));
        let arg = RawDocumentBuf::from_document(&doc! {"v": values}).expect("encodes");
        let list = parse_in_list("$in", arg.get("v").expect("ok").expect("v")).expect("list");
        assert!(list.sorted_keys.is_some());
        let probes: Vec<Bson> = vec![
            Bson::Int32(1),
            Bson::Double(1.0),
            Bson::Int64(1),
            Bson::Double(2.0),
            Bson::Int32(3),
            Bson::Double(3.5),
            Bson::Double(f64::NAN),
            Bson::String("a".into()),
            Bson::String("b".into()),
            Bson::String("".into()),
            Bson::Null,
            Bson::Boolean(false),
            Bson::Boolean(true),
            Bson::Array(vec![Bson::Int32(1), Bson::Int32(2)]),
            Bson::Array(vec![Bson::Int32(2), Bson::Int32(1)]),
            Bson::Document(doc! {"x": 1}),
            Bson::Document(doc! {"x": 1.0}),
            Bson::Document(doc! {"x": 2}),
            dec(7),
            Bson::Int32(7),
            Bson::MinKey,
            Bson::MaxKey,
            Bson::Int32(129),
            Bson::Int32(130),
            Bson::ObjectId(bson::oid::ObjectId::from_bytes([1; 12])),
        ];
        for p in probes {
            let d = RawDocumentBuf::from_document(&doc! {"v": p.clone()}).expect("encodes");
            let v = d.get("v").expect("ok");
            let linear = list
                .equalities
                .iter()
                .any(|a| compare_matches(CompareOp::Eq, a.as_raw_bson_ref(), v).expect("cmp"));
            assert_eq!(list.test(v).expect("test"), linear, "{p:?}");
        }
        assert!(list.test(None).expect("missing"), "null in the list");
    }

    #[test]
    fn ordered_comparisons_stay_in_their_bracket() {
        assert!(test(CompareOp::Gt, Bson::Int32(1), Some(Bson::Double(1.5))));
        assert!(!test(
            CompareOp::Gt,
            Bson::Int32(1),
            Some(Bson::String("z".into()))
        ));
        assert!(!test(
            CompareOp::Lt,
            Bson::String("a".into()),
            Some(Bson::Int32(1))
        ));
    }

    #[test]
    fn min_and_max_key_compare_across_brackets() {
        assert!(test(
            CompareOp::Gt,
            Bson::MinKey,
            Some(Bson::String("a".into()))
        ));
        assert!(test(CompareOp::Lt, Bson::MaxKey, Some(Bson::Int32(3))));
        assert!(!test(CompareOp::Gt, Bson::MaxKey, Some(Bson::Int32(3))));
    }

    #[test]
    fn null_matches_missing_only_with_equality() {
        assert!(test(CompareOp::Eq, Bson::Null, None));
        assert!(test(CompareOp::Gte, Bson::Null, None));
        assert!(!test(CompareOp::Gt, Bson::Null, None));
        assert!(!test(CompareOp::Eq, Bson::Null, Some(Bson::Undefined)));
        assert!(!test(CompareOp::Eq, Bson::Int32(1), None));
    }

    #[test]
    fn nan_is_only_equal_to_nan() {
        assert!(test(
            CompareOp::Eq,
            Bson::Double(f64::NAN),
            Some(Bson::Double(f64::NAN))
        ));
        assert!(!test(
            CompareOp::Lt,
            Bson::Int32(5),
            Some(Bson::Double(f64::NAN))
        ));
        assert!(!test(
            CompareOp::Gt,
            Bson::Double(f64::NAN),
            Some(Bson::Int32(5))
        ));
    }

    #[test]
    fn numbers_compare_across_types() {
        assert!(test(CompareOp::Eq, Bson::Int64(2), Some(Bson::Double(2.0))));
        assert!(test(CompareOp::Lte, Bson::Int32(2), Some(Bson::Int64(2))));
    }
}
