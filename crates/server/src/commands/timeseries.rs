//! Commands on time series collections (`shale_db::timeseries`): `create` with `timeseries`
//! (the options mongod 7.0 allows beside it, `expireAfterSeconds`), and the writes and index
//! commands the generic handlers hand over when their namespace is a time series collection.
//! Reads need nothing here: a time series collection is a view over its buckets.

use super::data::{missing, opt_doc, opt_idl_bool, wrong_type};
use super::CommandResult;
use crate::ConnectionCtx;
use bson::{Bson, Document, RawDocument, RawDocumentBuf};
use shale_db::timeseries::{self, TimeseriesCreate, TimeseriesMod};
use shale_db::{Namespace, UpdateOp, WriteResult};
use shale_doc::timeseries::options::ALLOWED_CREATE_OPTIONS;
use shale_doc::timeseries::TimeseriesOptions;
use shale_doc::{ErrorCode, MongoError, UpdateSpec};

fn not_in_transaction(what: &str, ns: &Namespace) -> MongoError {
    MongoError::new(
        ErrorCode::OperationNotSupportedInTransaction,
        format!("Cannot {what} a time-series collection in a multi-document transaction: {ns}"),
    )
}

/// `create` with `timeseries`, checked in mongod 7.0's order.
pub fn create(ctx: &ConnectionCtx, ns: &Namespace, body: &Document) -> CommandResult {
    if body.contains_key("encryptedFields") {
        return Err(MongoError::new(
            ErrorCode::Location6346401,
            "Encrypted fields cannot be used with views or timeseries collections",
        ));
    }
    for (k, v) in body.iter().skip(1) {
        let allowed = ALLOWED_CREATE_OPTIONS.contains(&k.as_str())
            || super::GENERIC_ARGUMENTS.contains(&k.as_str())
            || k.starts_with('$')
            || (k == "capped" && v == &Bson::Boolean(false));
        if !allowed {
            return Err(MongoError::new(
                ErrorCode::InvalidOptions,
                format!("{ns}: 'timeseries' is not allowed with '{k}'"),
            ));
        }
    }
    let options = TimeseriesOptions::parse(
        body.get("timeseries").unwrap_or(&Bson::Null),
        &ns.to_string(),
    )?;
    if ctx.txn.is_some() {
        return Err(not_in_transaction("create", ns));
    }
    if opt_idl_bool(body, "create", "temp")? == Some(true) {
        return Err(MongoError::new(
            ErrorCode::InvalidOptions,
            "the 'temp' field is an invalid option",
        ));
    }
    let mut create = TimeseriesCreate {
        expire_after_seconds: expire_after_seconds(body.get("expireAfterSeconds"))?,
        other: Document::new(),
    };
    for k in ["storageEngine", "indexOptionDefaults"] {
        if let Some(v) = opt_doc(body, "create", k)? {
            create.other.insert(k, v.clone());
        }
    }
    if let Some(c) = body.get("collation") {
        if let Some(c) = shale_doc::Collation::parse(c, "create")? {
            create.other.insert("collation", c.to_document());
        }
    }
    ctx.db.create_timeseries(ns, options, create)?;
    Ok(Document::new())
}

/// `expireAfterSeconds` beside `timeseries`: a whole number of seconds, 0 up to now since
/// the epoch (mongod's `validateExpireAfterSeconds`).
fn expire_after_seconds(v: Option<&Bson>) -> Result<Option<i64>, MongoError> {
    let n = match v {
        None | Some(Bson::Null) => return Ok(None),
        Some(Bson::Int32(n)) => i64::from(*n),
        Some(Bson::Int64(n)) => *n,
        Some(Bson::Double(d)) if d.is_finite() => *d as i64,
        Some(other) => return Err(wrong_type("create.expireAfterSeconds", other, "long")),
    };
    if n < 0 {
        return Err(MongoError::new(
            ErrorCode::InvalidOptions,
            "TTL index 'expireAfterSeconds' option cannot be less than 0",
        ));
    }
    let now_secs = bson::DateTime::now().timestamp_millis() / 1000;
    if n > now_secs {
        return Err(MongoError::new(
            ErrorCode::InvalidOptions,
            "TTL index 'expireAfterSeconds' option must be within an acceptable range, try a \
             lower number",
        ));
    }
    Ok(Some(n))
}

/// `insert` into time series collection `ns`: the documents as sent (mongod adds no `_id`).
pub fn insert(
    ctx: &ConnectionCtx,
    ns: &Namespace,
    docs: Vec<Result<RawDocumentBuf, MongoError>>,
    ordered: bool,
) -> Result<WriteResult, MongoError> {
    if ctx.txn.is_some() {
        return Err(not_in_transaction("insert into", ns));
    }
    let mut result = WriteResult::default();
    let mut valid = Vec::with_capacity(docs.len());
    let mut positions = Vec::with_capacity(docs.len());
    for (i, d) in docs.into_iter().enumerate() {
        match d {
            Ok(d) => {
                valid.push(d);
                positions.push(i);
            }
            Err(e) => {
                result.errors.push((i, e));
                if ordered {
                    break;
                }
            }
        }
    }
    let mut r = match &ctx.retry {
        // Each measurement a statement, run once however often the driver sends it.
        Some(retry) => {
            let one = |t: &_, d: &RawDocumentBuf| {
                ctx.db.insert_timeseries_in(t, ns, std::slice::from_ref(d))
            };
            super::retryable_writes::each(
                ctx,
                retry,
                &valid,
                |j| positions[j],
                ordered,
                |_| None,
                one,
            )?
        }
        None => ctx.db.insert_timeseries(ns, &valid, ordered)?,
    };
    for e in &mut r.errors {
        e.0 = positions[e.0];
    }
    result.n = r.n;
    result.errors.extend(r.errors);
    result.errors.sort_by_key(|(i, _)| *i);
    if ordered {
        result.errors.truncate(1);
    }
    Ok(result)
}

/// `update` on time series collection `ns`: metaField-only statements (mongod 7.0), each
/// translated to an update of the buckets' `meta`. A statement mongod refuses is that
/// statement's write error.
pub fn update(
    ctx: &ConnectionCtx,
    ns: &Namespace,
    options: &TimeseriesOptions,
    statements: &[&RawDocument],
    ordered: bool,
) -> Result<WriteResult, MongoError> {
    if ctx.txn.is_some() {
        return Err(not_in_transaction("update", ns));
    }
    let mut result = WriteResult::default();
    for (i, s) in statements.iter().enumerate() {
        if ctx.retry.is_some() {
            // Every update of a time series collection is a multi-update, which mongod
            // does not run as a retryable write.
            result.errors.push((
                i,
                MongoError::new(
                    ErrorCode::InvalidOptions,
                    "Cannot use (or request) retryable writes with multi=true",
                ),
            ));
            if ordered {
                break;
            }
            continue;
        }
        let outcome = Document::try_from(*s)
            .map_err(|e| MongoError::new(ErrorCode::InvalidBSON, e.to_string()))
            .and_then(|s| statement(options, &s))
            .and_then(|op| {
                ctx.db
                    .update_timeseries(ns, std::slice::from_ref(&op), true)
            });
        match outcome {
            Ok(r) if r.errors.is_empty() => {
                result.n += r.n;
                result.n_modified += r.n_modified;
            }
            Ok(mut r) => result.errors.push((i, r.errors.remove(0).1)),
            Err(e) => result.errors.push((i, e)),
        }
        if ordered && !result.errors.is_empty() {
            break;
        }
    }
    Ok(result)
}

/// One update statement checked and translated to the buckets.
fn statement(options: &TimeseriesOptions, s: &Document) -> Result<UpdateOp, MongoError> {
    let q = opt_doc(s, "update.updates", "q")?.ok_or_else(|| missing("update.updates.q"))?;
    let u = s.get("u").ok_or_else(|| missing("update.updates.u"))?;
    let multi = opt_idl_bool(s, "update.updates", "multi")?.unwrap_or(false);
    let upsert = opt_idl_bool(s, "update.updates", "upsert")?.unwrap_or(false);
    let meta =
        timeseries::check_update_statement(options, multi, upsert, matches!(u, Bson::Array(_)))?;
    let filter = timeseries::translate_filter(q, meta)?;
    let Bson::Document(u) = u else {
        return Err(wrong_type("update.updates.u", u, "object"));
    };
    let update = timeseries::translate_update(u, meta)?;
    if s.contains_key("arrayFilters") {
        return Err(MongoError::new(
            ErrorCode::CommandNotSupported,
            "arrayFilters in an update of a time-series collection are not supported by shale",
        ));
    }
    Ok(UpdateOp {
        filter,
        update: UpdateSpec::parse(&update, None)?,
        multi: true,
        upsert: false,
        hint: None,
        vars: Default::default(),
    })
}

/// `collMod` of a time series collection: `expireAfterSeconds` (seconds or `"off"`) and
/// `timeseries` (granularity or bucket seconds, only coarser); the options mongod refuses
/// on one, 72; `index` (hiding an index) is not built here, 115.
pub fn coll_mod(ctx: &ConnectionCtx, ns: &Namespace, body: &Document) -> CommandResult {
    let mut change = TimeseriesMod::default();
    for (k, v) in body.iter().skip(1) {
        match k.as_str() {
            k if k.starts_with('$') || super::GENERIC_ARGUMENTS.contains(&k) => {}
            "expireAfterSeconds" => {
                change.expire_after_seconds = Some(match v {
                    Bson::String(s) if s == "off" => None,
                    Bson::String(_) => {
                        return Err(MongoError::new(
                            ErrorCode::InvalidOptions,
                            "Invalid value for 'expireAfterSeconds'",
                        ))
                    }
                    other => match expire_after_seconds(Some(other))? {
                        Some(n) => Some(n),
                        None => {
                            return Err(wrong_type("collMod.expireAfterSeconds", other, "long"))
                        }
                    },
                })
            }
            "timeseries" => change.timeseries = Some(v.clone()),
            "index" => {
                return Err(MongoError::new(
                    ErrorCode::CommandNotSupported,
                    "collMod option 'index' is not supported by shale",
                ))
            }
            "validator"
            | "validationLevel"
            | "validationAction"
            | "viewOn"
            | "pipeline"
            | "changeStreamPreAndPostImages"
            | "recordPreImages"
            | "clusteredIndex"
            | "cappedSize"
            | "cappedMax"
            | "timeseriesBucketsMayHaveMixedSchemaData" => {
                return Err(MongoError::new(
                    ErrorCode::InvalidOptions,
                    format!("option not supported on a time-series collection: {k}"),
                ))
            }
            other => {
                return Err(MongoError::new(
                    ErrorCode::Location40415,
                    format!("BSON field 'collMod.{other}' is an unknown field."),
                ))
            }
        }
    }
    ctx.db.coll_mod_timeseries(ns, &change)?;
    Ok(Document::new())
}
