//! `dataSize`: the BSON bytes and number of a collection's documents, counted by scanning
//! them as mongod does (`estimate: true` reads the collection's exact counters instead, in
//! O(1)); `maxSize`/`maxObjects` stop the count early with `maxReached`. Index ranges
//! (`keyPattern`, `min`, `max`) are not built and are refused, since counting the whole
//! collection instead would answer a different question.

use super::data::wrong_type;
use super::CommandResult;
use crate::ConnectionCtx;
use bson::{doc, Bson, Document};
use shale_db::{FindSpec, Namespace};
use shale_doc::append_number as number;
use shale_doc::{ErrorCode, MongoError};
use std::time::Instant;

/// `{dataSize: "<db>.<collection>", estimate, maxSize, maxObjects}`:
/// `{size, numObjects, millis}` (a missing collection: zeros, as mongod).
pub fn data_size(ctx: &ConnectionCtx, _db: &str, body: &Document) -> CommandResult {
    let started = Instant::now();
    let ns = match body.iter().next() {
        Some((_, Bson::String(full))) => parse_ns(full)?,
        Some((name, other)) => return Err(wrong_type(name, other, "string")),
        None => return Err(MongoError::new(ErrorCode::InvalidNamespace, "no namespace")),
    };
    let mut estimate = false;
    let (mut max_size, mut max_objects) = (None, None);
    for (k, v) in body.iter().skip(1) {
        match k.as_str() {
            "estimate" => estimate = truthy(v),
            "maxSize" => max_size = positive(v),
            "maxObjects" => max_objects = positive(v),
            "keyPattern" | "min" | "max" if is_empty(v) => {}
            "keyPattern" | "min" | "max" => {
                return Err(MongoError::new(
                    ErrorCode::NotImplemented,
                    format!("dataSize over an index range ('{k}') is not supported"),
                ))
            }
            _ => {}
        }
    }
    if ctx.db.is_view(&ns) {
        return Err(MongoError::new(
            ErrorCode::CommandNotSupportedOnView,
            format!("Namespace {ns} is a view, not a collection"),
        ));
    }
    let (size, objects, reached) = if estimate && max_size.is_none() && max_objects.is_none() {
        counters(ctx, &ns)?
    } else {
        scan(ctx, &ns, max_size, max_objects)?
    };
    let mut reply = doc! {
        "size": number(size),
        "numObjects": number(objects),
        "millis": i32::try_from(started.elapsed().as_millis()).unwrap_or(i32::MAX),
    };
    if reached {
        reply.insert("maxReached", true);
    }
    Ok(reply)
}

/// `db.coll` split at its first dot.
fn parse_ns(full: &str) -> Result<Namespace, MongoError> {
    match full.split_once('.') {
        Some((db, coll)) => Namespace::new(db, coll),
        None => Err(MongoError::new(
            ErrorCode::InvalidNamespace,
            format!("Invalid namespace specified '{full}'"),
        )),
    }
}

/// The collection's exact document count and BSON bytes (zeros when it does not exist).
fn counters(ctx: &ConnectionCtx, ns: &Namespace) -> Result<(i64, i64, bool), MongoError> {
    match ctx.db.exact_counts(ns) {
        Some((count, size)) => Ok((size, count, false)),
        None => Ok((0, 0, false)),
    }
}

/// Reads every document, stopping past `max_size` bytes or `max_objects` documents.
fn scan(
    ctx: &ConnectionCtx,
    ns: &Namespace,
    max_size: Option<i64>,
    max_objects: Option<i64>,
) -> Result<(i64, i64, bool), MongoError> {
    let mut q = ctx.db.find(ns, &FindSpec::default())?;
    let (mut size, mut objects) = (0i64, 0i64);
    while let Some(d) = q.next_doc()? {
        size += d.as_bytes().len() as i64;
        objects += 1;
        let over_size = max_size.is_some_and(|m| size > m);
        let over_objects = max_objects.is_some_and(|m| objects > m);
        if over_size || over_objects {
            return Ok((size, objects, true));
        }
    }
    Ok((size, objects, false))
}

fn truthy(v: &Bson) -> bool {
    !matches!(v, Bson::Boolean(false) | Bson::Null)
        && !matches!(v, Bson::Int32(0) | Bson::Int64(0))
        && !matches!(v, Bson::Double(f) if *f == 0.0)
}

fn positive(v: &Bson) -> Option<i64> {
    let n = match v {
        Bson::Int32(n) => i64::from(*n),
        Bson::Int64(n) => *n,
        Bson::Double(f) => *f as i64,
        _ => 0,
    };
    (n > 0).then_some(n)
}

fn is_empty(v: &Bson) -> bool {
    matches!(v, Bson::Document(d) if d.is_empty())
}
