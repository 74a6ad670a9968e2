//! The `$group` accumulators that are also expressions: `$sum $avg $min $max $stdDevPop
//! $stdDevSamp`. As mongod's `ExpressionFromAccumulator`: one argument that is an array is
//! folded element by element, one argument of another kind is folded as itself, and several
//! arguments are folded one by one; the fold is the accumulator's own (`aggregate/accumulator.rs`:
//! `$sum` keeps int → long → double, `$avg`/`$stdDev*` null without numbers, `$min`/`$max`
//! skip null and missing). Never parses; `expr.rs` dispatches here.

use bson::raw::{RawBson, RawBsonRef};
use bson::Bson;

use super::expr::Value;
use super::expr_arity::Arity;
use super::path::bson_error;
use crate::aggregate::accumulator::{AccOp, State};
use crate::{ErrorCode, MongoError};

/// An accumulator used as an expression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs, reason = "each variant is the operator of the same name")]
pub enum AccumulateOp {
    Sum,
    Avg,
    Min,
    Max,
    StdDevPop,
    StdDevSamp,
}

impl AccumulateOp {
    /// The operator named `name`.
    pub fn from_name(name: &str) -> Option<AccumulateOp> {
        Some(match name {
            "$sum" => AccumulateOp::Sum,
            "$avg" => AccumulateOp::Avg,
            "$min" => AccumulateOp::Min,
            "$max" => AccumulateOp::Max,
            "$stdDevPop" => AccumulateOp::StdDevPop,
            "$stdDevSamp" => AccumulateOp::StdDevSamp,
            _ => return None,
        })
    }

    /// Any number of arguments.
    pub fn arity(self) -> Arity {
        Arity::Any
    }

    fn acc(self) -> AccOp {
        match self {
            AccumulateOp::Sum => AccOp::Sum,
            AccumulateOp::Avg => AccOp::Avg,
            AccumulateOp::Min => AccOp::Min,
            AccumulateOp::Max => AccOp::Max,
            AccumulateOp::StdDevPop => AccOp::StdDevPop,
            AccumulateOp::StdDevSamp => AccOp::StdDevSamp,
        }
    }
}

fn owned_bson(v: RawBsonRef<'_>) -> Result<Bson, MongoError> {
    Bson::try_from(v.to_raw_bson())
        .map_err(|e| MongoError::new(ErrorCode::InvalidBSON, format!("malformed BSON: {e}")))
}

/// Fold the evaluated arguments with the accumulator.
pub(crate) fn apply<'a>(op: AccumulateOp, values: &[Value<'_>]) -> Result<Value<'a>, MongoError> {
    let mut state = State::new(op.acc());
    match values {
        [single] => match single.as_raw() {
            Some(RawBsonRef::Array(items)) => {
                for item in items {
                    state.add_collated(Some(owned_bson(item.map_err(bson_error)?)?), None)?;
                }
            }
            raw => {
                state.add_collated(raw.map(owned_bson).transpose()?, None)?;
            }
        },
        many => {
            for v in many {
                state.add_collated(v.as_raw().map(owned_bson).transpose()?, None)?;
            }
        }
    }
    let out = RawBson::try_from(state.finish())
        .map_err(|e| MongoError::new(ErrorCode::InternalError, e.to_string()))?;
    Ok(Value::Owned(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::rawbson;

    fn run(op: AccumulateOp, args: Vec<RawBson>) -> RawBson {
        let values: Vec<Value<'_>> = args.into_iter().map(Value::Owned).collect();
        let out = apply(op, &values).expect("folds");
        out.as_raw().map_or(RawBson::Null, |r| r.to_raw_bson())
    }

    #[test]
    fn array_or_arguments() {
        assert_eq!(
            run(AccumulateOp::Sum, vec![rawbson!([1, 2, 3])]),
            RawBson::Int32(6)
        );
        assert_eq!(
            run(
                AccumulateOp::Sum,
                vec![RawBson::Int32(1), RawBson::Int64(2)]
            ),
            RawBson::Int64(3)
        );
        assert_eq!(
            run(AccumulateOp::Sum, vec![RawBson::String("a".into())]),
            RawBson::Int32(0)
        );
        assert_eq!(run(AccumulateOp::Sum, vec![]), RawBson::Int32(0));
        assert_eq!(
            run(
                AccumulateOp::Sum,
                vec![RawBson::Int32(i32::MAX), RawBson::Int32(1)]
            ),
            RawBson::Int64(i64::from(i32::MAX) + 1)
        );
        assert_eq!(
            run(AccumulateOp::Avg, vec![rawbson!([1, 2, "x"])]),
            RawBson::Double(1.5)
        );
        assert_eq!(run(AccumulateOp::Avg, vec![rawbson!([])]), RawBson::Null);
        assert_eq!(
            run(AccumulateOp::Max, vec![rawbson!([1, null, 5, "a"])]),
            RawBson::String("a".into())
        );
        assert_eq!(
            run(AccumulateOp::Min, vec![RawBson::Null, RawBson::Int32(4)]),
            RawBson::Int32(4)
        );
        assert_eq!(run(AccumulateOp::Min, vec![RawBson::Null]), RawBson::Null);
        // A single non-array argument is folded as itself.
        assert_eq!(
            run(AccumulateOp::Max, vec![RawBson::Int32(7)]),
            RawBson::Int32(7)
        );
        assert_eq!(
            run(AccumulateOp::StdDevPop, vec![rawbson!([1, 3])]),
            RawBson::Double(1.0)
        );
        assert_eq!(
            run(AccumulateOp::StdDevSamp, vec![rawbson!([1])]),
            RawBson::Null
        );
    }
}
