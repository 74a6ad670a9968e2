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

use std::cmp::Ordering;

use bson::raw::{RawBson, RawBsonRef};

use super::evaluation::RegexPred;
use super::{bad_value, is_operator_document, leaf, path::bson_error, Node, Pred};
use crate::compare_raw::{compare_raw_values, raw_canonical_type_order};
use crate::error_code::MongoError;

/// The ordering test of a comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompareOp {
    Eq,
    Gt,
    Gte,
    Lt,
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
    pub op: CompareOp,
    pub argument: RawBson,
}

impl Compare {
    pub fn eq(argument: RawBsonRef<'_>) -> Compare {
        Compare {
            op: CompareOp::Eq,
            argument: argument.to_raw_bson(),
        }
    }

    /// Test one candidate (`None` = missing).
    pub fn test(&self, value: Option<RawBsonRef<'_>>) -> Result<bool, MongoError> {
        compare_matches(self.op, self.argument.as_raw_bson_ref(), value)
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

/// The argument list of `$in`: values compared for equality, and regexes matched.
#[derive(Debug, Clone, Default)]
pub struct InList {
    pub equalities: Vec<RawBson>,
    pub regexes: Vec<RegexPred>,
}

impl InList {
    pub fn test(&self, value: Option<RawBsonRef<'_>>) -> Result<bool, MongoError> {
        for argument in &self.equalities {
            if compare_matches(CompareOp::Eq, argument.as_raw_bson_ref(), value)? {
                return Ok(true);
            }
        }
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
        Ok(leaf(field, Pred::Compare(Compare { op, argument })))
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
