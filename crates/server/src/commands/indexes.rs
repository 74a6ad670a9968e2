//! Index DDL: `createIndexes` (hot builds in `shale-db`) and `dropIndexes` (also sent as
//! `deleteIndexes`).

use super::data::{command_name, doc_array, missing, namespace, opt_bool};
use super::CommandResult;
use crate::ConnectionCtx;
use bson::{doc, Document};
use shale_db::{default_index_name, index_spec_without_unknown_options};
use shale_doc::{ErrorCode, MongoError};

pub fn create_indexes(ctx: &ConnectionCtx, db: &str, body: &Document) -> CommandResult {
    let ns = namespace(db, body, "createIndexes")?;
    let specs = doc_array(body, "createIndexes", "indexes")?;
    if specs.is_empty() {
        return Err(MongoError::new(
            ErrorCode::BadValue,
            "Must specify at least one index to create",
        ));
    }
    // A member of one has every vote a quorum could ask for; a standalone has none.
    if body.contains_key("commitQuorum") && !ctx.server.repl.is_replica_set() {
        return Err(MongoError::new(
            ErrorCode::BadValue,
            "Standalones can't specify commitQuorum",
        ));
    }
    let strip = opt_bool(body, "createIndexes", "ignoreUnknownIndexOptions")? == Some(true);
    let specs: Vec<Document> = specs
        .into_iter()
        .map(|s| {
            let mut s = match strip {
                true => index_spec_without_unknown_options(s),
                false => s.clone(),
            };
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

pub fn drop_indexes(ctx: &ConnectionCtx, db: &str, body: &Document) -> CommandResult {
    let name = command_name(body);
    let ns = namespace(db, body, name)?;
    let which = body
        .get("index")
        .ok_or_else(|| missing(&format!("{name}.index")))?;
    let before = ctx.db.drop_indexes(&ns, which)?;
    Ok(doc! { "nIndexesWas": before as i32 })
}
