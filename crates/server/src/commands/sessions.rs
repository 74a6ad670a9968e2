//! Logical-session commands: `startSession`, `endSessions`, `refreshSessions`,
//! `killSessions`, `killAllSessions`. Drivers call them around every session they use. They
//! check their arguments as mongod does; ending or killing a session forgets it in the
//! session table and aborts its open transaction (`session_table.rs`).

use super::data::{missing, wrong_type};
use super::CommandResult;
use crate::ConnectionCtx;
use bson::{doc, spec::BinarySubtype, Bson, Document};
use shale_doc::{type_name, ErrorCode, MongoError};

/// Minutes an idle session lives (mongod's `localLogicalSessionTimeoutMinutes`).
pub const SESSION_TIMEOUT_MINUTES: i32 = 30;

pub fn start_session(_ctx: &ConnectionCtx, _db: &str, _body: &Document) -> CommandResult {
    Ok(doc! {
        "id": { "id": bson::Uuid::new() },
        "timeoutMinutes": SESSION_TIMEOUT_MINUTES,
    })
}

pub fn end_sessions(ctx: &ConnectionCtx, _db: &str, body: &Document) -> CommandResult {
    let ids = session_ids(body, "endSessions")?;
    ctx.sessions.end(&ctx.db, &ids);
    Ok(Document::new())
}

pub fn refresh_sessions(_ctx: &ConnectionCtx, _db: &str, body: &Document) -> CommandResult {
    session_ids(body, "refreshSessions")?;
    Ok(Document::new())
}

pub fn kill_sessions(ctx: &ConnectionCtx, _db: &str, body: &Document) -> CommandResult {
    let ids = session_ids(body, "killSessions")?;
    ctx.sessions.end(&ctx.db, &ids);
    Ok(Document::new())
}

/// `killAllSessions: [{user, db}, ...]` (an empty array means every user's sessions).
pub fn kill_all_sessions(ctx: &ConnectionCtx, _db: &str, body: &Document) -> CommandResult {
    let users = array_arg(body, "killAllSessions")?;
    for u in users {
        if !matches!(u, Bson::Document(_)) {
            return Err(wrong_type("killAllSessions.killAllSessions", u, "object"));
        }
    }
    // No authentication: every session belongs to the one (absent) user.
    ctx.sessions.end_all(&ctx.db);
    Ok(Document::new())
}

/// Checks `{<command>: [{id: UUID}, ...]}` and returns the ids.
fn session_ids(body: &Document, command: &str) -> Result<Vec<bson::Uuid>, MongoError> {
    let entries = array_arg(body, command)?;
    let mut ids = Vec::with_capacity(entries.len());
    for entry in entries {
        let Bson::Document(d) = entry else {
            return Err(wrong_type(&format!("{command}.{command}"), entry, "object"));
        };
        match d.get("id") {
            Some(Bson::Binary(b)) if b.subtype == BinarySubtype::Uuid => {
                match <[u8; 16]>::try_from(b.bytes.as_slice()) {
                    Ok(bytes) => ids.push(bson::Uuid::from_bytes(bytes)),
                    Err(_) => {
                        return Err(MongoError::new(
                            ErrorCode::TypeMismatch,
                            format!("'{command}.{command}.id' must be a 16-byte UUID"),
                        ))
                    }
                }
            }
            Some(other) => {
                return Err(MongoError::new(
                    ErrorCode::TypeMismatch,
                    format!(
                        "BSON field '{command}.{command}.id' is the wrong type '{}', expected \
                         a UUID",
                        type_name(other)
                    ),
                ))
            }
            None => return Err(missing(&format!("{command}.{command}.id"))),
        }
    }
    Ok(ids)
}

fn array_arg<'a>(body: &'a Document, command: &str) -> Result<&'a [Bson], MongoError> {
    match body.get(command) {
        Some(Bson::Array(a)) => Ok(a),
        Some(other) => Err(wrong_type(&format!("{command}.{command}"), other, "array")),
        None => Err(MongoError::new(
            ErrorCode::FailedToParse,
            format!("missing '{command}'"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_lists_are_checked() {
        let id = bson::Uuid::new();
        assert_eq!(
            session_ids(
                &doc! {"endSessions": [{"id": id}, {"id": id}]},
                "endSessions"
            )
            .map(|ids| ids.len()),
            Ok(2)
        );
        assert!(session_ids(&doc! {"endSessions": 1}, "endSessions").is_err());
        assert!(session_ids(&doc! {"endSessions": [1]}, "endSessions").is_err());
        assert!(session_ids(&doc! {"endSessions": [{}]}, "endSessions").is_err());
        assert!(session_ids(&doc! {"endSessions": [{"id": "x"}]}, "endSessions").is_err());
    }
}
