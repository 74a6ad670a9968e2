//! Queryable Encryption's commands and hooks (`shale_db::qe` does the work): `create` with
//! `encryptedFields` on a replica-set member (the option checked and filled in, the state
//! collections and the `__safeContent__` index made as mongod 7.0 makes them),
//! `compactStructuredEncryptionData` and `cleanupStructuredEncryptionData`, and the read
//! hook that rewrites an equality query's find payloads into `__safeContent__` tags before
//! the command runs. It never decrypts anything: the server holds no keys.

use super::data::{namespace, wrong_type};
use super::CommandResult;
use crate::command::Command;
use crate::ConnectionCtx;
use bson::{doc, Bson, Document};
use shale_db::qe::{self, SAFE_CONTENT, SAFE_CONTENT_INDEX};
use shale_db::Namespace;
use shale_doc::{ErrorCode, MongoError};

/// `encryptedFields` as `create` stores it (checked, defaults filled in).
pub fn stored_option(ns: &Namespace, fields: &Bson) -> Result<Bson, MongoError> {
    match fields {
        Bson::Document(d) => Ok(Bson::Document(qe::check_and_fill(d, &ns.coll)?)),
        other => Err(wrong_type("create.encryptedFields", other, "object")),
    }
}

/// Before the data collection: its ESC and ECOC, clustered by `_id` as mongod 7.0 creates
/// them (a state collection the driver already created is kept).
pub fn create_state_collections(
    ctx: &ConnectionCtx,
    ns: &Namespace,
    stored: &Bson,
) -> Result<(), MongoError> {
    if ctx.txn.is_some() {
        return Err(MongoError::new(
            ErrorCode::OperationNotSupportedInTransaction,
            format!("Cannot create an encrypted collection {ns} in a multi-document transaction."),
        ));
    }
    let Some(config) = stored
        .as_document()
        .and_then(qe::EncryptedConfig::from_stored)
    else {
        return Err(MongoError::new(
            ErrorCode::InternalError,
            "encryptedFields not stored",
        ));
    };
    for name in [&config.esc, &config.ecoc] {
        let state = Namespace::new(&ns.db, name)?;
        if ctx.db.existing(&state).is_ok() {
            continue;
        }
        let clustered = Bson::Document(doc! {"key": {"_id": 1}, "unique": true});
        let options = shale_db::clustered::from_create(Some(&clustered), None, false, false)?;
        ctx.db.create_collection(&state, options)?;
    }
    Ok(())
}

/// After the data collection: its `{__safeContent__: 1}` index.
pub fn create_safe_content_index(ctx: &ConnectionCtx, ns: &Namespace) -> Result<(), MongoError> {
    let spec = doc! {"key": {SAFE_CONTENT: 1}, "name": SAFE_CONTENT_INDEX};
    ctx.db.create_indexes(ns, &[spec])?;
    Ok(())
}

/// The `compactionTokens` of a compaction or cleanup: `{<path>: BinData, ...}`.
fn compaction_tokens(body: &Document, command: &str) -> Result<Vec<(String, Vec<u8>)>, MongoError> {
    let tokens = match body.get("compactionTokens") {
        Some(Bson::Document(d)) => d,
        Some(other) => {
            return Err(wrong_type(
                &format!("{command}.compactionTokens"),
                other,
                "object",
            ))
        }
        None => {
            return Err(MongoError::new(
                ErrorCode::Location40414,
                format!("BSON field '{command}.compactionTokens' is missing but a required field"),
            ))
        }
    };
    let mut out = Vec::with_capacity(tokens.len());
    for (path, v) in tokens {
        match v {
            Bson::Binary(b) => out.push((path.clone(), b.bytes.clone())),
            _ => {
                return Err(MongoError::new(
                    ErrorCode::Location6346801,
                    format!(
                        "Field '{path}' of compaction tokens must be a bindata and general subtype"
                    ),
                ))
            }
        }
    }
    Ok(out)
}

fn check_fields(body: &Document, command: &str) -> Result<(), MongoError> {
    for (k, _) in body.iter().skip(1) {
        match k.as_str() {
            "compactionTokens" | "encryptionInformation" => {}
            k if k.starts_with('$') || super::GENERIC_ARGUMENTS.contains(&k) => {}
            k => {
                return Err(MongoError::new(
                    ErrorCode::Location40415,
                    format!("BSON field '{command}.{k}' is an unknown field."),
                ))
            }
        }
    }
    Ok(())
}

/// `{compactStructuredEncryptionData: <coll>, compactionTokens}`: `{stats: {ecoc, esc}}`.
pub fn compact(ctx: &ConnectionCtx, db: &str, body: &Document) -> CommandResult {
    const NAME: &str = "compactStructuredEncryptionData";
    let ns = namespace(db, body, NAME)?;
    check_fields(body, NAME)?;
    let tokens = compaction_tokens(body, NAME)?;
    let stats = ctx.db.qe_compact(&ns, &tokens)?;
    Ok(doc! {"stats": stats.to_document()})
}

/// `{cleanupStructuredEncryptionData: <coll>, cleanupTokens}`: `{stats: {ecoc, esc}}`.
pub fn cleanup(ctx: &ConnectionCtx, db: &str, body: &Document) -> CommandResult {
    const NAME: &str = "cleanupStructuredEncryptionData";
    let ns = namespace(db, body, NAME)?;
    let mut body = body.clone();
    // The driver sends the same tokens under this name.
    if let Some(t) = body.remove("cleanupTokens") {
        body.insert("compactionTokens", t);
    }
    check_fields(&body, NAME)?;
    let tokens = compaction_tokens(&body, NAME)?;
    let stats = ctx.db.qe_cleanup(&ns, &tokens)?;
    Ok(doc! {"stats": stats.to_document()})
}

/// Commands whose filters may hold find payloads (`explain` through the command it wraps).
const READS: &[&str] = &[
    "find",
    "count",
    "distinct",
    "aggregate",
    "delete",
    "update",
    "findAndModify",
    "explain",
];

/// True when a raw value holds a find-equality payload anywhere below it.
fn raw_holds_payload(v: bson::RawBsonRef<'_>, depth: usize) -> bool {
    use bson::RawBsonRef as R;
    match v {
        R::Binary(b) => {
            b.subtype == bson::spec::BinarySubtype::Encrypted
                && b.bytes.first() == Some(&qe::payload::blob::FIND_EQUALITY_V2)
        }
        R::Document(d) if depth < 200 => d
            .iter()
            .flatten()
            .any(|(_, v)| raw_holds_payload(v, depth + 1)),
        R::Array(a) if depth < 200 => a
            .into_iter()
            .flatten()
            .any(|v| raw_holds_payload(v, depth + 1)),
        _ => false,
    }
}

/// The command with its filters' find payloads rewritten (`None`: nothing to rewrite).
pub fn rewrite_reads(
    ctx: &ConnectionCtx,
    db: &str,
    cmd: &Command<'_>,
) -> Option<Result<Document, MongoError>> {
    if !READS.contains(&cmd.name()) {
        return None;
    }
    let in_body = cmd.fields().iter().any(|(_, v)| raw_holds_payload(*v, 0));
    let in_sequences = ["updates", "deletes"].iter().any(|s| {
        cmd.sequence(s).is_some_and(|docs| {
            docs.iter()
                .any(|d| raw_holds_payload(bson::RawBsonRef::Document(d), 0))
        })
    });
    if !in_body && !in_sequences {
        return None;
    }
    Some(cmd.doc().and_then(|body| {
        let mut body = body.clone();
        rewrite_command(ctx, db, &mut body, 0)?;
        Ok(body)
    }))
}

/// Rewrites the filters of command `body` (its first field names it and its collection).
fn rewrite_command(
    ctx: &ConnectionCtx,
    db: &str,
    body: &mut Document,
    depth: usize,
) -> Result<(), MongoError> {
    let Some((name, target)) = body.iter().next().map(|(k, v)| (k.clone(), v.clone())) else {
        return Ok(());
    };
    if name == "explain" {
        if let (Some(Bson::Document(inner)), true) = (body.get_mut("explain"), depth == 0) {
            return rewrite_command(ctx, db, inner, depth + 1);
        }
        return Ok(());
    }
    let Bson::String(coll) = target else {
        return Ok(());
    };
    let ns = Namespace::new(db, &coll)?;
    let filter_key = match name.as_str() {
        "find" => Some("filter"),
        "count" | "distinct" | "findAndModify" => Some("query"),
        _ => None,
    };
    if let Some(Bson::Document(f)) = filter_key.and_then(|k| body.get_mut(k)) {
        rewrite_filter(ctx, &ns, f)?;
    }
    for list in ["deletes", "updates"] {
        if let Some(Bson::Array(items)) = body.get_mut(list) {
            for item in items {
                if let Some(Bson::Document(f)) = item.as_document_mut().and_then(|d| d.get_mut("q"))
                {
                    rewrite_filter(ctx, &ns, f)?;
                }
            }
        }
    }
    if let Some(Bson::Array(stages)) = body.get_mut("pipeline") {
        rewrite_pipeline(ctx, &ns, stages, 0)?;
    }
    Ok(())
}

fn rewrite_filter(ctx: &ConnectionCtx, ns: &Namespace, f: &mut Document) -> Result<(), MongoError> {
    if let Some(new) = ctx.db.qe_rewrite_filter(ns, f)? {
        *f = new;
    }
    Ok(())
}

/// A pipeline's `$match` stages, and those of the pipelines `$facet`, `$lookup` and
/// `$unionWith` hold (the latter two on the collection they name).
fn rewrite_pipeline(
    ctx: &ConnectionCtx,
    ns: &Namespace,
    stages: &mut [Bson],
    depth: usize,
) -> Result<(), MongoError> {
    if depth > 20 {
        return Ok(());
    }
    for stage in stages {
        let Some(stage) = stage.as_document_mut() else {
            continue;
        };
        let Some((name, spec)) = stage.iter_mut().next() else {
            continue;
        };
        match (name.as_str(), spec) {
            ("$match", Bson::Document(f)) => rewrite_filter(ctx, ns, f)?,
            ("$facet", Bson::Document(facets)) => {
                for (_, sub) in facets.iter_mut() {
                    if let Bson::Array(sub) = sub {
                        rewrite_pipeline(ctx, ns, sub, depth + 1)?;
                    }
                }
            }
            ("$lookup" | "$unionWith", Bson::Document(spec)) => {
                let from = spec.get_str("from").or_else(|_| spec.get_str("coll"));
                let other = match from {
                    Ok(c) => Namespace::new(&ns.db, c)?,
                    Err(_) => ns.clone(),
                };
                if let Some(Bson::Array(sub)) = spec.get_mut("pipeline") {
                    rewrite_pipeline(ctx, &other, sub, depth + 1)?;
                }
            }
            _ => {}
        }
    }
    Ok(())
}
