//! The replica-set commands: `replSetInitiate`, `replSetReconfig`, `replSetGetConfig` and
//! `replSetGetStatus` (admin only, as on mongod). They parse their arguments and hand the
//! work to `crate::repl`; a standalone answers `NoReplicationEnabled` (76).

use super::{require_admin, CommandResult};
use crate::ConnectionCtx;
use bson::{doc, Bson, Document};
use shale_doc::{ErrorCode, MongoError};

pub fn repl_set_initiate(ctx: &ConnectionCtx, db: &str, body: &Document) -> CommandResult {
    require_admin(db, "replSetInitiate")?;
    let given = match body.get("replSetInitiate") {
        Some(Bson::Document(d)) => Some(d),
        _ => None,
    };
    ctx.server.repl.initiate(&ctx.db, given)?;
    Ok(doc! {})
}

pub fn repl_set_reconfig(ctx: &ConnectionCtx, db: &str, body: &Document) -> CommandResult {
    require_admin(db, "replSetReconfig")?;
    let given = match body.get("replSetReconfig") {
        Some(Bson::Document(d)) => d,
        Some(other) => {
            return Err(MongoError::new(
                ErrorCode::TypeMismatch,
                format!(
                    "BSON field 'replSetReconfig' is the wrong type '{}', expected type \
                     'object'",
                    super::data::type_name(other)
                ),
            ))
        }
        None => return Err(super::data::missing("replSetReconfig")),
    };
    let force = match body.get("force") {
        None => false,
        Some(Bson::Boolean(b)) => *b,
        Some(other) => {
            return Err(super::data::wrong_type(
                "replSetReconfig.force",
                other,
                "bool",
            ))
        }
    };
    ctx.server.repl.reconfig(&ctx.db, given, force)?;
    Ok(doc! {})
}

pub fn repl_set_get_config(ctx: &ConnectionCtx, db: &str, _body: &Document) -> CommandResult {
    require_admin(db, "replSetGetConfig")?;
    Ok(doc! {"config": ctx.server.repl.config_document()?})
}

pub fn repl_set_get_status(ctx: &ConnectionCtx, db: &str, _body: &Document) -> CommandResult {
    require_admin(db, "replSetGetStatus")?;
    ctx.server.repl.status_document()
}
