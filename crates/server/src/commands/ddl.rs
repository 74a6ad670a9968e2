//! Collection and database DDL: `create` (collections and views, with mongod's option
//! checks), `drop`, `dropDatabase`, `renameCollection`. The listings are `listings.rs`'s, the
//! index commands `indexes.rs`'s, the size and check commands `storage_stats.rs`'s.

use super::data::{missing, namespace, opt_bool, type_name};
use super::pipeline_as_sent::matches_as_sent;
use super::{require_admin, CommandResult};
use crate::command::Command;
use crate::ConnectionCtx;
use bson::{doc, Bson, Document};
use shale_db::Namespace;
use shale_doc::{ErrorCode, MongoError};

/// `create` options kept in the collection's catalog entry.
const STORED_OPTIONS: &[&str] = &[
    "storageEngine",
    "validator",
    "validationLevel",
    "validationAction",
    "collation",
    "indexOptionDefaults",
    // TokuMX's layout options (crates/db/src/tree_layout.rs).
    "compression",
    "compressionLevel",
    "pageSize",
    "readPageSize",
];

/// Fields accepted and ignored: any command's generic fields (and every `$`-prefixed one),
/// and `create`'s own that change nothing here.
const IGNORED_FIELDS: &[&str] = &[
    "lsid",
    "txnNumber",
    "apiVersion",
    "apiStrict",
    "apiDeprecationErrors",
    "comment",
    "writeConcern",
    // Checked by dispatch for every command (`maxTimeMS`, a standalone's read concern).
    "maxTimeMS",
    "readConcern",
];

/// `create`; a view's pipeline has its `$match` stages read as sent
/// (`pipeline_as_sent.rs`), the rest of the command decoded.
pub fn create(ctx: &ConnectionCtx, db: &str, cmd: &Command<'_>) -> CommandResult {
    let body = cmd.doc()?;
    let ns = namespace(db, body, "create")?;
    if ctx.txn.is_some() && body.contains_key("viewOn") {
        return Err(MongoError::new(
            ErrorCode::OperationNotSupportedInTransaction,
            "Cannot create a view in a multi-document transaction.",
        ));
    }
    if body.contains_key("viewOn") {
        return create_view(ctx, &ns, cmd);
    }
    if body.contains_key("pipeline") {
        return Err(MongoError::new(
            ErrorCode::InvalidOptions,
            "'pipeline' requires 'viewOn' to also be specified",
        ));
    }
    if body.contains_key("timeseries") {
        return super::timeseries::create(ctx, &ns, body);
    }
    let present = |k: &str| body.get(k).filter(|v| !matches!(v, Bson::Null));
    let capped = shale_db::capped::CappedOptions::from_create(
        present("capped"),
        present("size"),
        present("max"),
    )?;
    let clustered = shale_db::clustered::from_create(
        present("clusteredIndex"),
        present("expireAfterSeconds"),
        capped.is_some(),
        present("idIndex").is_some(),
    )?;
    let auto_index_id = opt_bool(body, "create", "autoIndexId")?;
    check_create_only_options(ctx, &ns, body, auto_index_id, capped.is_some())?;
    if ctx.txn.is_some() && capped.is_some() {
        return Err(MongoError::new(
            ErrorCode::OperationNotSupportedInTransaction,
            format!("Cannot create a capped collection {ns} in a multi-document transaction."),
        ));
    }
    let mut options = Document::new();
    if let Some(c) = capped {
        c.store(&mut options);
    }
    options.extend(clustered);
    for (k, v) in body.iter().skip(1) {
        match k.as_str() {
            k if k.starts_with('$') || IGNORED_FIELDS.contains(&k) => {}
            // A transaction statement's fields, checked by the transaction runner.
            "autocommit" | "startTransaction" if ctx.txn.is_some() => {}
            // Checked above (`shale_db::capped`, `shale_db::clustered`).
            "capped" | "size" | "max" | "clusteredIndex" | "expireAfterSeconds" => {}
            // Every collection here has its `_id` index: a spec for it is checked, and
            // `autoIndexId: true` asks for what is always there. `flags` were MMAPv1's
            // padding switches; mongod 7.0 accepts and ignores them too.
            "idIndex" => check_id_index(v, body.get("collation"))?,
            "flags" if matches!(v, Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_)) => {}
            // Checked by `check_create_only_options`: what is left of them is nothing to
            // store (`autoIndexId: true`, `temp: false`).
            "autoIndexId" | "temp" => {}
            // Pre- and post-images for change streams (`shale_db::pre_images`).
            "changeStreamPreAndPostImages" => {
                if shale_db::pre_images::parse_option("create", v)? {
                    shale_db::pre_images::check_namespace(&ns)?;
                    options.insert(k, doc! {"enabled": true});
                }
            }
            // Stored as mongod lists it: every field filled in, nothing for `simple`.
            "collation" => {
                if let Some(c) = shale_doc::Collation::parse(v, "create")? {
                    options.insert(k, c.to_document());
                }
            }
            k if STORED_OPTIONS.contains(&k) => {
                options.insert(k, v.clone());
            }
            // Queryable Encryption (`qe.rs`): stored as mongod lists it.
            "encryptedFields" => {
                options.insert(k, super::qe::stored_option(&ns, v)?);
            }
            _ => {
                return Err(MongoError::new(
                    ErrorCode::Location40415,
                    format!("BSON field 'create.{k}' is an unknown field."),
                ));
            }
        }
    }
    let encrypted = options.get("encryptedFields").cloned();
    if let Some(stored) = &encrypted {
        super::qe::create_state_collections(ctx, &ns, stored)?;
    }
    match &ctx.txn {
        // A session transaction's collection, published at its commit.
        Some(t) => ctx.db.create_collection_in(t, &ns, options)?,
        None => ctx.db.create_collection(&ns, options)?,
    }
    if encrypted.is_some() {
        super::qe::create_safe_content_index(ctx, &ns)?;
    }
    // mongod notes the option whichever way it is set.
    Ok(match auto_index_id {
        Some(_) => doc! {"note": AUTO_INDEX_ID_NOTE},
        None => Document::new(),
    })
}

/// The reply's `note` when `create` names `autoIndexId` (mongod 7.0's deprecation 23800).
const AUTO_INDEX_ID_NOTE: &str =
    "The autoIndexId option is deprecated and will be removed in a future release";

/// `create`'s options that change how the collection is made rather than what is stored,
/// checked as mongod 7.0's `create` checks them: `temp` (internal clients only),
/// `autoIndexId` (false only where a collection is not replicated, and never beside
/// `idIndex` or `clusteredIndex`) and `encryptedFields` (Queryable Encryption: refused on a
/// standalone as mongod refuses it, checked and stored on a member by `qe.rs`). `recordIdsReplicated` is mongod 8.0's and stays an unknown field (40415).
fn check_create_only_options(
    ctx: &ConnectionCtx,
    ns: &Namespace,
    body: &Document,
    auto_index_id: Option<bool>,
    capped: bool,
) -> Result<(), MongoError> {
    let invalid = |why: String| MongoError::new(ErrorCode::InvalidOptions, why);
    if opt_bool(body, "create", "temp")? == Some(true) {
        return Err(invalid("the 'temp' field is an invalid option".into()));
    }
    if let Some(fields) = body.get("encryptedFields") {
        check_encrypted_fields(ctx, fields, capped)?;
    }
    if let (Some(_), Some(spec)) = (auto_index_id, body.get("idIndex")) {
        return Err(invalid(format!(
            "'idIndex' is not allowed with 'autoIndexId': {spec}"
        )));
    }
    if auto_index_id != Some(false) {
        return Ok(());
    }
    if body.contains_key("clusteredIndex") {
        return Err(MongoError::new(
            ErrorCode::Location6026501,
            "The 'clusteredIndex' option does not support {autoIndexId: false}",
        ));
    }
    if ns.db != "local" {
        return Err(MongoError::new(
            ErrorCode::Location50001,
            format!(
                "autoIndexId:false is not allowed for collection {ns} because it can be replicated"
            ),
        ));
    }
    // Every collection here is kept in a tree keyed by `_id`, which is its `_id` index.
    Err(MongoError::new(
        ErrorCode::CommandNotSupported,
        "a collection without an _id index (autoIndexId: false) is not supported by shale",
    ))
}

/// `encryptedFields`, as far as mongod 7.0 checks it before its server half runs.
fn check_encrypted_fields(
    ctx: &ConnectionCtx,
    fields: &Bson,
    capped: bool,
) -> Result<(), MongoError> {
    if !matches!(fields, Bson::Document(_)) {
        return Err(super::data::wrong_type(
            "create.encryptedFields",
            fields,
            "object",
        ));
    }
    if capped {
        return Err(MongoError::new(
            ErrorCode::Location6367301,
            "Encrypted fields cannot be used with capped collections",
        ));
    }
    if !ctx.server.repl.is_replica_set() {
        return Err(MongoError::new(
            ErrorCode::Location6346402,
            "Encrypted collections are not supported on standalone",
        ));
    }
    // The option itself is checked where it is stored (`qe::stored_option`).
    Ok(())
}

/// `create` with `viewOn` (and `pipeline`): a view. Other collection options are refused as
/// mongod refuses them on a view (`InvalidOptions`); `collation` too: a view's default
/// collation is not built (its reads take the simple one and refuse another, 167).
fn create_view(ctx: &ConnectionCtx, ns: &Namespace, cmd: &Command<'_>) -> CommandResult {
    let body = cmd.doc()?;
    let view_on = match body.get("viewOn") {
        Some(Bson::String(s)) if s.is_empty() => {
            return Err(MongoError::new(
                ErrorCode::BadValue,
                "'viewOn' cannot be empty",
            ))
        }
        Some(Bson::String(s)) => s.clone(),
        Some(other) => {
            return Err(MongoError::new(
                ErrorCode::TypeMismatch,
                format!(
                    "BSON field 'create.viewOn' is the wrong type '{}', expected type 'string'",
                    type_name(other)
                ),
            ))
        }
        None => return Err(missing("create.viewOn")),
    };
    let mut pipeline = match body.get("pipeline") {
        None => Vec::new(),
        Some(Bson::Array(stages)) => super::data::stage_documents(stages)?,
        Some(other) => {
            return Err(MongoError::new(
                ErrorCode::TypeMismatch,
                format!(
                    "BSON field 'create.pipeline' is the wrong type '{}', expected type 'array'",
                    type_name(other)
                ),
            ))
        }
    };
    for (k, _) in body.iter().skip(1) {
        match k.as_str() {
            k if k.starts_with('$') || IGNORED_FIELDS.contains(&k) => {}
            "viewOn" | "pipeline" => {}
            "encryptedFields" => {
                return Err(MongoError::new(
                    ErrorCode::Location6346401,
                    "Encrypted fields cannot be used with views or timeseries collections",
                ))
            }
            "collation" => {
                return Err(MongoError::new(
                    ErrorCode::CommandNotSupported,
                    "create option 'collation' on a view is not supported by shale",
                ))
            }
            other => {
                return Err(MongoError::new(
                    ErrorCode::InvalidOptions,
                    format!("option not supported on a view: {other}"),
                ))
            }
        }
    }
    // Stored decoded: a `$match` that names a field twice is kept as the `$and` it means.
    matches_as_sent(cmd, &mut pipeline)?;
    ctx.db.create_view(ns, &view_on, pipeline)?;
    Ok(Document::new())
}

/// `create.idIndex` (mongorestore sends the dumped one): the `_id` index every collection
/// has, so only its shape is checked, as mongod checks it.
fn check_id_index(spec: &Bson, collation: Option<&Bson>) -> Result<(), MongoError> {
    let bad = |why: String| MongoError::new(ErrorCode::BadValue, why);
    let Bson::Document(spec) = spec else {
        return Err(MongoError::new(
            ErrorCode::TypeMismatch,
            format!(
                "BSON field 'create.idIndex' is the wrong type '{}', expected type 'object'",
                type_name(spec)
            ),
        ));
    };
    for (k, v) in spec {
        match k.as_str() {
            "key" if v.as_document().is_some_and(is_id_key) => {}
            "key" => {
                return Err(bad(format!(
                    "The _id index must have key pattern {{_id: 1}}, not {v}"
                )))
            }
            // mongod names the index `_id_` whatever the spec says.
            "name" if v.as_str().is_some() => {}
            "name" => {
                return Err(MongoError::new(
                    ErrorCode::TypeMismatch,
                    "The field 'name' must be a string",
                ))
            }
            "v" if matches!(v.as_i64().or(v.as_i32().map(i64::from)), Some(1 | 2)) => {}
            "v" => return Err(bad(format!("Invalid index specification version {v}"))),
            "ns" => {}
            "collation" if Some(v) == collation => {}
            "collation" => {
                return Err(bad(
                    "The _id index must have the same collation as the collection".into(),
                ))
            }
            other => {
                return Err(MongoError::new(
                    ErrorCode::InvalidIndexSpecificationOption,
                    format!("The field '{other}' is not valid for an _id index specification"),
                ))
            }
        }
    }
    if !spec.contains_key("key") {
        return Err(MongoError::new(
            ErrorCode::FailedToParse,
            "The 'key' field is a required property of an index specification",
        ));
    }
    Ok(())
}

fn is_id_key(key: &Document) -> bool {
    let one = match key.get("_id") {
        Some(Bson::Int32(n)) => *n == 1,
        Some(Bson::Int64(n)) => *n == 1,
        Some(Bson::Double(n)) => *n == 1.0,
        _ => false,
    };
    key.len() == 1 && one
}

pub fn drop(ctx: &ConnectionCtx, db: &str, body: &Document) -> CommandResult {
    let ns = namespace(db, body, "drop")?;
    Ok(match ctx.db.drop_collection(&ns)? {
        Some(n) => doc! { "nIndexesWas": n as i32, "ns": ns.to_string() },
        None => Document::new(),
    })
}

/// `dropDatabase: 1`; any other value is refused as mongod refuses it (it never drops).
pub fn drop_database(ctx: &ConnectionCtx, db: &str, body: &Document) -> CommandResult {
    let one = match body.get("dropDatabase") {
        Some(Bson::Int32(n)) => *n == 1,
        Some(Bson::Int64(n)) => *n == 1,
        Some(Bson::Double(n)) => *n == 1.0,
        Some(other) => {
            return Err(super::data::wrong_type(
                "dropDatabase.dropDatabase",
                other,
                "[long, int, decimal, double]",
            ))
        }
        None => false,
    };
    if !one {
        return Err(MongoError::new(
            ErrorCode::Location5255100,
            "Have to pass 1 as 'drop' parameter",
        ));
    }
    ctx.db.drop_database(db)?;
    Ok(doc! { "dropped": db })
}

pub fn rename_collection(ctx: &ConnectionCtx, db: &str, body: &Document) -> CommandResult {
    require_admin(db, "renameCollection")?;
    let from = match body.get("renameCollection") {
        Some(Bson::String(s)) => Namespace::parse(s)?,
        Some(other) => {
            return Err(MongoError::new(
                ErrorCode::TypeMismatch,
                format!(
                    "renameCollection must be a string, not {}",
                    type_name(other)
                ),
            ))
        }
        None => {
            return Err(MongoError::new(
                ErrorCode::FailedToParse,
                "renameCollection needs a source",
            ))
        }
    };
    let to = match body.get("to") {
        Some(Bson::String(s)) => Namespace::parse(s)?,
        Some(other) => {
            return Err(MongoError::new(
                ErrorCode::TypeMismatch,
                format!("'to' must be a string, not {}", type_name(other)),
            ))
        }
        None => return Err(missing("renameCollection.to")),
    };
    let drop_target = opt_bool(body, "renameCollection", "dropTarget")?.unwrap_or(false);
    ctx.db.rename_collection(&from, &to, drop_target)?;
    Ok(Document::new())
}
