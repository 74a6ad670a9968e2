//! `getLog`: recent log lines from the in-memory rings (`ram_log`). `'*'` names the rings;
//! a ring's name returns `{totalLinesWritten, log: [line, ...]}`, oldest line first. Like
//! mongod's (an old errmsg-style command), an unknown name fails with `errmsg` and no code.

use super::{require_admin, CommandResult};
use crate::ram_log::RamLog;
use crate::ConnectionCtx;
use bson::{doc, Bson, Document};
use shale_doc::{ErrorCode, MongoError};

pub fn get_log(_ctx: &ConnectionCtx, db: &str, body: &Document) -> CommandResult {
    require_admin(db, "getLog")?;
    let name = match body.get("getLog") {
        Some(Bson::String(s)) => s.as_str(),
        other => {
            return Err(MongoError::new(
                ErrorCode::TypeMismatch,
                format!(
                    "Argument to getLog must be of type String; found {} of type {:?}",
                    other.map_or_else(|| "nothing".to_owned(), Bson::to_string),
                    other.map(Bson::element_type)
                ),
            ))
        }
    };
    if name == "*" {
        let names: Vec<&str> = RamLog::all().iter().map(|l| l.name()).collect();
        return Ok(doc! { "names": names });
    }
    let Some(log) = RamLog::by_name(name) else {
        // mongod answers `{ok: 0, errmsg}` here, with no code; dispatch keeps our `ok`.
        return Ok(doc! { "ok": 0.0, "errmsg": format!("no RamLog named: {name}") });
    };
    let (total, lines) = log.snapshot();
    let total = match i32::try_from(total) {
        Ok(n) => Bson::Int32(n),
        Err(_) => Bson::Int64(total as i64),
    };
    Ok(doc! { "totalLinesWritten": total, "log": lines })
}
