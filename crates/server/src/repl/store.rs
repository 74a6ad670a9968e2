//! Where replica-set state lives on disk, as mongod keeps it: the config as the one document
//! of `local.system.replset`, the election term in `local.replset.election`. Both are written
//! through `shale_db`'s collection API, so they are in the engine's log and checkpoints like
//! any data and come back after a crash or restart.

use super::config::ReplSetConfig;
use bson::{doc, Bson, Document, RawDocumentBuf};
use shale_db::{Database, FindSpec, Namespace, UpdateOp};
use shale_doc::{ErrorCode, MongoError, UpdateSpec};

fn config_namespace() -> Namespace {
    Namespace {
        db: "local".to_owned(),
        coll: "system.replset".to_owned(),
    }
}

fn election_namespace() -> Namespace {
    Namespace {
        db: "local".to_owned(),
        coll: "replset.election".to_owned(),
    }
}

/// The first document of `ns`, if any.
fn first(db: &Database, ns: &Namespace) -> Result<Option<Document>, MongoError> {
    let spec = FindSpec {
        limit: Some(1),
        ..FindSpec::default()
    };
    let mut query = db.find(ns, &spec)?;
    match query.next_doc()? {
        Some(raw) => raw.to_document().map(Some).map_err(|e| {
            MongoError::new(
                ErrorCode::InternalError,
                format!("the document of {ns} does not decode: {e}"),
            )
        }),
        None => Ok(None),
    }
}

/// The stored config, if the set was initiated.
pub fn load_config(db: &Database) -> Result<Option<ReplSetConfig>, MongoError> {
    Ok(first(db, &config_namespace())?.map(ReplSetConfig::from_stored))
}

/// The stored election term (0 before the first election).
pub fn load_term(db: &Database) -> Result<i64, MongoError> {
    Ok(first(db, &election_namespace())?
        .and_then(|d| d.get("term").and_then(super::config::number))
        .unwrap_or(0))
}

/// Replaces the one document of `ns` with `doc` (inserted when there is none).
fn put(db: &Database, ns: &Namespace, doc: Document) -> Result<(), MongoError> {
    let op = UpdateOp {
        filter: Document::new(),
        update: UpdateSpec::parse_value(&Bson::Document(doc.clone()), None)?,
        multi: false,
        upsert: false,
        hint: None,
        vars: Default::default(),
    };
    let result = db.update(ns, &[op], true)?;
    if let Some((_, e)) = result.errors.into_iter().next() {
        return Err(e);
    }
    if result.n > 0 {
        return Ok(());
    }
    let raw = RawDocumentBuf::from_document(&doc)
        .map_err(|e| MongoError::new(ErrorCode::BadValue, format!("{ns} document: {e}")))?;
    let result = db.insert(ns, &[raw], true)?;
    match result.errors.into_iter().next() {
        Some((_, e)) => Err(e),
        None => Ok(()),
    }
}

/// Stores `config` as the set's config.
pub fn save_config(db: &Database, config: &ReplSetConfig) -> Result<(), MongoError> {
    put(db, &config_namespace(), config.document().clone())
}

/// Stores the term this member was elected in (mongod's `local.replset.election`).
pub fn save_term(db: &Database, term: i64) -> Result<(), MongoError> {
    put(
        db,
        &election_namespace(),
        doc! {"_id": "election", "term": term, "candidateIndex": 0i64},
    )
}
