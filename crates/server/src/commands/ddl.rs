//! Catalog commands: `create`, `drop`, `dropDatabase`, `listCollections`, `listDatabases`,
//! `renameCollection`, `createIndexes`, `listIndexes`, `dropIndexes`, `collStats`, `dbStats`,
//! `validate`.

use super::data::{
    command_name, cursor_reply, doc_array, missing, namespace, opt_bool, opt_doc, opt_i64, to_raw,
    type_name,
};
use super::{require_admin, CommandResult};
use crate::auth::authorize;
use crate::ConnectionCtx;
use bson::{doc, Bson, Document, RawDocumentBuf};
use shale_db::{default_index_name, Batch, Namespace, VecSource};
use shale_doc::{ErrorCode, Matcher, MongoError};

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
];

pub fn create(ctx: &ConnectionCtx, db: &str, body: &Document) -> CommandResult {
    let ns = namespace(db, body, "create")?;
    if ctx.txn.is_some() && body.contains_key("viewOn") {
        return Err(MongoError::new(
            ErrorCode::OperationNotSupportedInTransaction,
            "Cannot create a view in a multi-document transaction.",
        ));
    }
    if body.contains_key("viewOn") {
        return create_view(ctx, &ns, body);
    }
    if body.contains_key("pipeline") {
        return Err(MongoError::new(
            ErrorCode::InvalidOptions,
            "'pipeline' requires 'viewOn' to also be specified",
        ));
    }
    let mut options = Document::new();
    for (k, v) in body.iter().skip(1) {
        match k.as_str() {
            k if k.starts_with('$') || IGNORED_FIELDS.contains(&k) => {}
            // A transaction statement's fields, checked by the transaction runner.
            "autocommit" | "startTransaction" | "readConcern" if ctx.txn.is_some() => {}
            "capped" if v == &Bson::Boolean(false) => {}
            // Every collection here has its `_id` index: a spec for it is checked, and
            // `autoIndexId: true` asks for what is always there. `flags` were MMAPv1's
            // padding switches; mongod 7.0 accepts and ignores them too.
            "idIndex" => check_id_index(v, body.get("collation"))?,
            "autoIndexId" if v == &Bson::Boolean(true) => {}
            "flags" if matches!(v, Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_)) => {}
            "capped"
            | "timeseries"
            | "clusteredIndex"
            | "expireAfterSeconds"
            | "encryptedFields"
            | "autoIndexId"
            | "temp"
            | "recordIdsReplicated"
            | "size"
            | "max" => {
                return Err(MongoError::new(
                    ErrorCode::CommandNotSupported,
                    format!("create option '{k}' is not supported by shale"),
                ));
            }
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
            _ => {
                return Err(MongoError::new(
                    ErrorCode::Location40415,
                    format!("BSON field 'create.{k}' is an unknown field."),
                ));
            }
        }
    }
    match &ctx.txn {
        // A session transaction's collection, published at its commit.
        Some(t) => ctx.db.create_collection_in(t, &ns, options)?,
        None => ctx.db.create_collection(&ns, options)?,
    }
    Ok(Document::new())
}

/// `create` with `viewOn` (and `pipeline`): a view. Other collection options are refused as
/// mongod refuses them on a view (`InvalidOptions`); `collation` too: a view's default
/// collation is not built (its reads take the simple one and refuse another, 167).
fn create_view(ctx: &ConnectionCtx, ns: &Namespace, body: &Document) -> CommandResult {
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
    let pipeline = match body.get("pipeline") {
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
            "name" if v.as_str() == Some("_id_") => {}
            "name" => return Err(bad(format!("The _id index must be named '_id_', not {v}"))),
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
                return Err(bad(format!(
                    "The field '{other}' is not valid for an _id index specification"
                )))
            }
        }
    }
    if !spec.get_document("key").is_ok_and(is_id_key) {
        return Err(bad("The _id index specification needs key {_id: 1}".into()));
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

pub fn drop_database(ctx: &ConnectionCtx, db: &str, _body: &Document) -> CommandResult {
    ctx.db.drop_database(db)?;
    Ok(doc! { "dropped": db })
}

pub fn list_collections(ctx: &ConnectionCtx, db: &str, body: &Document) -> CommandResult {
    shale_db::validate_db_name(db)?;
    let filter = opt_doc(body, "listCollections", "filter")?;
    let matcher = filter
        .map(|f| to_raw(f).and_then(|r| Matcher::parse(&r)))
        .transpose()?;
    let name_only = opt_bool(body, "listCollections", "nameOnly")?.unwrap_or(false);
    let visible = authorize::collection_filter(ctx, db, body);
    let mut out = Vec::new();
    for entry in ctx.db.list_collections(db) {
        if let (Some(privileges), Ok(name)) = (&visible, entry.get_str("name")) {
            if !authorize::sees_collection(privileges, db, name) {
                continue;
            }
        }
        let raw = to_raw(&entry)?;
        if let Some(m) = &matcher {
            if !m.matches(&raw)? {
                continue;
            }
        }
        out.push(if name_only {
            to_raw(&doc! {
                "name": entry.get("name").cloned().unwrap_or(Bson::Null),
                "type": entry.get("type").cloned().unwrap_or(Bson::Null),
            })?
        } else {
            raw
        });
    }
    cursor_of(
        ctx,
        &format!("{db}.$cmd.listCollections"),
        out,
        body,
        "listCollections",
    )
}

/// A cursor over documents computed whole (listCollections, listIndexes).
fn cursor_of(
    ctx: &ConnectionCtx,
    ns: &str,
    docs: Vec<RawDocumentBuf>,
    body: &Document,
    c: &str,
) -> CommandResult {
    let batch_size = match opt_doc(body, c, "cursor")? {
        Some(cur) => opt_i64(cur, c, "batchSize")?.map(|b| b.max(0) as usize),
        None => None,
    };
    let batch = match batch_size {
        None => Batch {
            docs,
            ..Batch::default()
        },
        Some(n) => ctx.db.cursors().first_batch(
            ns,
            Box::new(VecSource(docs.into_iter())),
            Some(n),
            false,
            ctx.cursor_owner(),
        )?,
    };
    cursor_reply(ns, batch, "firstBatch")
}

pub fn list_databases(ctx: &ConnectionCtx, db: &str, body: &Document) -> CommandResult {
    require_admin(db, "listDatabases")?;
    let filter = opt_doc(body, "listDatabases", "filter")?;
    let matcher = filter
        .map(|f| to_raw(f).and_then(|r| Matcher::parse(&r)))
        .transpose()?;
    let name_only = opt_bool(body, "listDatabases", "nameOnly")?.unwrap_or(false);
    let visible = authorize::database_filter(ctx, body)?;
    let mut dbs = Vec::new();
    let mut total = 0i64;
    for (name, bytes) in ctx.db.list_databases() {
        if let Some(privileges) = &visible {
            if !authorize::sees_database(privileges, &name) {
                continue;
            }
        }
        let entry = if name_only {
            doc! { "name": name }
        } else {
            doc! { "name": name, "sizeOnDisk": bytes as i64, "empty": false }
        };
        if let Some(m) = &matcher {
            if !m.matches(&to_raw(&entry)?)? {
                continue;
            }
        }
        total += bytes as i64;
        dbs.push(Bson::Document(entry));
    }
    if name_only {
        return Ok(doc! { "databases": dbs });
    }
    Ok(doc! { "databases": dbs, "totalSize": total, "totalSizeMb": total >> 20 })
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

pub fn create_indexes(ctx: &ConnectionCtx, db: &str, body: &Document) -> CommandResult {
    let ns = namespace(db, body, "createIndexes")?;
    let specs = doc_array(body, "createIndexes", "indexes")?;
    if specs.is_empty() {
        return Err(MongoError::new(
            ErrorCode::BadValue,
            "Must specify at least one index to create",
        ));
    }
    let specs: Vec<Document> = specs
        .into_iter()
        .map(|s| {
            let mut s = s.clone();
            if !s.contains_key("name") {
                if let Ok(key) = s.get_document("key") {
                    let name = default_index_name(key);
                    s.insert("name", name);
                }
            }
            s
        })
        .collect();
    let r = match &ctx.txn {
        Some(t) => ctx.db.create_indexes_in(t, &ns, &specs)?,
        None => ctx.db.create_indexes(&ns, &specs)?,
    };
    let mut reply = doc! {
        "numIndexesBefore": r.before as i32,
        "numIndexesAfter": r.after as i32,
        "createdCollectionAutomatically": r.created_collection,
    };
    if let Some(note) = r.note {
        reply.insert("note", note);
    }
    Ok(reply)
}

pub fn list_indexes(ctx: &ConnectionCtx, db: &str, body: &Document) -> CommandResult {
    let ns = namespace(db, body, "listIndexes")?;
    let specs = ctx
        .db
        .list_indexes(&ns)?
        .iter()
        .map(to_raw)
        .collect::<Result<Vec<_>, _>>()?;
    cursor_of(
        ctx,
        &format!("{db}.$cmd.listIndexes.{}", ns.coll),
        specs,
        body,
        "listIndexes",
    )
}

pub fn drop_indexes(ctx: &ConnectionCtx, db: &str, body: &Document) -> CommandResult {
    let name = command_name(body);
    let ns = namespace(db, body, name)?;
    let which = body
        .get("index")
        .ok_or_else(|| missing(&format!("{name}.index")))?;
    let before = ctx.db.drop_indexes(&ns, which)?;
    Ok(doc! { "nIndexesWas": before as i32 })
}

fn scale(body: &Document, c: &str) -> Result<i64, MongoError> {
    match opt_i64(body, c, "scale")? {
        Some(s) if s < 1 => Err(MongoError::new(
            ErrorCode::BadValue,
            "Scale factor must be greater than zero",
        )),
        s => Ok(s.unwrap_or(1)),
    }
}

pub fn coll_stats(ctx: &ConnectionCtx, db: &str, body: &Document) -> CommandResult {
    let ns = namespace(db, body, "collStats")?;
    ctx.db.coll_stats(&ns, scale(body, "collStats")?)
}

/// `dbStats`; with `freeStorage: 1` also mongod's free-space figures, which are 0 here: a
/// tree punches the blocks it retires out of its file, so its file holds no reusable free
/// space (as `collStats.freeStorageSize` says).
pub fn db_stats(ctx: &ConnectionCtx, db: &str, body: &Document) -> CommandResult {
    let mut stats = ctx.db.db_stats(db, scale(body, "dbStats")?)?;
    if opt_i64(body, "dbStats", "freeStorage")?.is_some_and(|n| n != 0) {
        stats.insert("freeStorageSize", 0.0);
        stats.insert("indexFreeStorageSize", 0.0);
        stats.insert("totalFreeStorageSize", 0.0);
    }
    Ok(stats)
}

pub fn validate(ctx: &ConnectionCtx, db: &str, body: &Document) -> CommandResult {
    let ns = namespace(db, body, "validate")?;
    ctx.db.validate(&ns)
}
