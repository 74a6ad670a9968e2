//! `$setWindowFields`' `$top`/`$bottom` (one output, null for an empty window) and
//! `$topN`/`$bottomN` (an array of `n`), as mongod 7.0 parses them (`{sortBy, output}` and
//! `{n, sortBy, output}`: 5788001 not an object, 5788002 an unknown argument, 5788003-5788005
//! a missing one; `n` as the other N functions check it) and computes them: the window's
//! documents ordered by the function's own `sortBy` (MongoDB's order, ties in window order),
//! the first or last `n` outputs, a missing output as null. Pure: rows in, values out.

use bson::raw::{RawBsonRef, RawDocument};
use bson::Bson;

use super::super::execute::{approximate_size, MemoryBudget};
use super::super::sort::SortSpec;
use super::bounds::{self, endpoints};
use super::function::{Op, WindowFunction};
use crate::matcher::expr::Expr;
use crate::matcher::path::bson_error;
use crate::variables::Variables;
use crate::{ErrorCode, MongoError};

/// `{$top | $bottom: {sortBy, output}}`, `{$topN | $bottomN: {n, sortBy, output}}`, with an
/// optional `window` (5788001-5788005 as mongod's).
pub(crate) fn parse(
    d: &RawDocument,
    name: &str,
    sort_by: Option<&SortSpec>,
    vars: &Variables,
) -> Result<WindowFunction, MongoError> {
    let single = !name.ends_with('N');
    let (window, args) = bounds::window_and_argument(d, name, sort_by)?;
    let Some(RawBsonRef::Document(args)) = args else {
        return Err(MongoError::new(
            ErrorCode::Location5788001,
            "specification must be an object",
        ));
    };
    let (mut n, mut output, mut sort) = (None, None, None);
    for item in args {
        let (arg, value) = item.map_err(bson_error)?;
        match arg {
            "n" if !single => n = Some(super::series::count(value)?),
            "output" => output = Some(Expr::parse_in(value, vars)?),
            "sortBy" => sort = Some(super::super::sort::parse(value, vars)?),
            other => {
                return Err(MongoError::new(
                    ErrorCode::Location5788002,
                    format!("Unknown argument to {name} '{other}'"),
                ))
            }
        }
    }
    if !single && n.is_none() {
        return Err(MongoError::new(
            ErrorCode::Location5788003,
            "Missing value for 'n'",
        ));
    }
    let output = output
        .ok_or_else(|| MongoError::new(ErrorCode::Location5788004, "Missing value for 'output'"))?;
    let sort = sort
        .ok_or_else(|| MongoError::new(ErrorCode::Location5788005, "Missing value for 'sortBy'"))?;
    Ok(WindowFunction {
        op: Op::TopBottom {
            bottom: name.starts_with("$bottom"),
            n,
            sort: Box::new(sort),
        },
        input: output,
        window,
    })
}

/// `$top`/`$bottom(N)` for each row: the window's rows ordered by the function's `sortBy`
/// (ties in window order), the first or last `n` outputs (missing as null).
pub(crate) fn compute(
    f: &WindowFunction,
    rows: &[super::compute::Row],
    inputs: &[Option<Bson>],
    sort_values: &[Option<Bson>],
    budget: &mut MemoryBudget,
) -> Result<Vec<Option<Bson>>, MongoError> {
    let Op::TopBottom { bottom, n, sort } = &f.op else {
        return Ok(Vec::new());
    };
    let keys = rows
        .iter()
        .map(|r| sort.key_of(&r.doc))
        .collect::<Result<Vec<_>, _>>()?;
    let mut out = Vec::with_capacity(rows.len());
    for at in 0..rows.len() {
        let Some((lo, hi)) = endpoints(f.window, at, rows.len(), sort_values)? else {
            out.push(Some(if n.is_some() {
                Bson::Array(Vec::new())
            } else {
                Bson::Null
            }));
            continue;
        };
        let mut order: Vec<usize> = (lo..=hi).collect();
        order.sort_by(|a, b| sort.compare(&keys[*a], &keys[*b]));
        let take = n.unwrap_or(1).min(order.len());
        let chosen = if *bottom {
            &order[order.len() - take..]
        } else {
            &order[..take]
        };
        let values: Vec<Bson> = chosen
            .iter()
            .map(|i| inputs[*i].clone().unwrap_or(Bson::Null))
            .collect();
        let value = match n {
            Some(_) => Bson::Array(values),
            None => values.into_iter().next().unwrap_or(Bson::Null),
        };
        budget.charge(approximate_size(&value))?;
        out.push(Some(value));
    }
    Ok(out)
}
