//! The catalog listings: `listCollections`, `listDatabases`, `listIndexes` (the first and
//! last as cursors over documents computed whole).

use super::data::{cursor_reply, namespace, opt_bool, opt_doc, opt_i64, to_raw};
use super::{require_admin, CommandResult};
use crate::auth::authorize;
use crate::ConnectionCtx;
use bson::{doc, Bson, Document, RawDocumentBuf};
use shale_db::{Batch, VecSource};
use shale_doc::{ErrorCode, Matcher, MongoError};

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

/// `listIndexes`: every index's spec, builds in progress included, as mongod 7.0 lists
/// them; `includeIndexBuildInfo: true` wraps each as `{spec}`. mongod adds a build's UUID
/// (`{spec, buildUUID}`, `indexBuildInfo: {buildUUID, ...}`) only for a two-phase build,
/// one a replica set's primary runs; a standalone's builds are single-phase, listed as the
/// ready ones are, and so are every build here (ShaleDB's builds have no UUID).
pub fn list_indexes(ctx: &ConnectionCtx, db: &str, body: &Document) -> CommandResult {
    let ns = namespace(db, body, "listIndexes")?;
    let wrap = opt_bool(body, "listIndexes", "includeIndexBuildInfo")? == Some(true);
    if wrap && opt_bool(body, "listIndexes", "includeBuildUUIDs")? == Some(true) {
        return Err(MongoError::new(
            ErrorCode::InvalidOptions,
            "The 'includeBuildUUIDs' and 'includeIndexBuildInfo' options cannot both be set to true",
        ));
    }
    let specs = ctx
        .db
        .list_indexes(&ns)?
        .into_iter()
        .map(|spec| match wrap {
            true => to_raw(&doc! {"spec": spec}),
            false => to_raw(&spec),
        })
        .collect::<Result<Vec<_>, _>>()?;
    cursor_of(
        ctx,
        &format!("{db}.$cmd.listIndexes.{}", ns.coll),
        specs,
        body,
        "listIndexes",
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
        Some(cur) => match opt_i64(cur, c, "batchSize")? {
            Some(b) if b < 0 => {
                return Err(MongoError::new(
                    ErrorCode::BadValue,
                    format!("BSON field 'batchSize' value must be >= 0, actual value '{b}'"),
                ))
            }
            b => b.map(|b| b as usize),
        },
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
