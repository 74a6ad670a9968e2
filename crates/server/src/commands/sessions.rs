//! Logical-session commands: `startSession`, `endSessions`, `refreshSessions`,
//! `killSessions`, `killAllSessions`, `killAllSessionsByPattern`. Drivers call the first
//! ones around every session they use. They check their arguments as mongod does; ending
//! or killing a session forgets it in the session table, aborts its open transaction and
//! closes its cursors (`session_table.rs`). Sessions belong to users by a digest of the
//! user name (`uid`): the ids `startSession`, `endSessions`, `refreshSessions` and
//! `killSessions` name are the caller's user's sessions; with nobody logged in that is the
//! empty user's.

use super::data::{missing, wrong_type};
use super::CommandResult;
use crate::session_table::{user_uid, Lsid, UserDigest};
use crate::ConnectionCtx;
use bson::{doc, spec::BinarySubtype, Bson, Document};
use shale_doc::{type_name, ErrorCode, MongoError};

pub fn start_session(ctx: &ConnectionCtx, _db: &str, _body: &Document) -> CommandResult {
    let id = bson::Uuid::new();
    ctx.sessions.touch(ctx.session_key(id))?;
    Ok(doc! {
        "id": { "id": id },
        "timeoutMinutes": ctx.server.session_timeout_minutes(),
    })
}

pub fn end_sessions(ctx: &ConnectionCtx, _db: &str, body: &Document) -> CommandResult {
    let ids = session_keys(ctx, body, "endSessions")?;
    ctx.sessions.end(&ctx.db, &ids);
    Ok(Document::new())
}

pub fn refresh_sessions(ctx: &ConnectionCtx, _db: &str, body: &Document) -> CommandResult {
    for key in session_keys(ctx, body, "refreshSessions")? {
        ctx.sessions.touch(key)?;
    }
    Ok(Document::new())
}

pub fn kill_sessions(ctx: &ConnectionCtx, _db: &str, body: &Document) -> CommandResult {
    let ids = session_keys(ctx, body, "killSessions")?;
    ctx.sessions.end(&ctx.db, &ids);
    Ok(Document::new())
}

/// The sessions `ids` of the command's field `command`, as the caller's user has them.
fn session_keys(
    ctx: &ConnectionCtx,
    body: &Document,
    command: &str,
) -> Result<Vec<Lsid>, MongoError> {
    Ok(session_ids(body, command)?
        .into_iter()
        .map(|id| ctx.session_key(id))
        .collect())
}

/// `killAllSessions: [{user, db}, ...]`: the sessions of those users, or every session for
/// an empty array.
pub fn kill_all_sessions(ctx: &ConnectionCtx, _db: &str, body: &Document) -> CommandResult {
    let users = user_uids(array_arg(body, "killAllSessions")?, "killAllSessions")?;
    if users.is_empty() {
        ctx.sessions.end_all(&ctx.db);
    } else {
        ctx.sessions.end_where(&ctx.db, |k| users.contains(&k.uid));
    }
    Ok(Document::new())
}

/// `killAllSessionsByPattern: [{lsid}, {uid}, {users}, {roles}, ...]`: the sessions any
/// pattern matches (an empty array or an empty pattern matches every session).
pub fn kill_all_sessions_by_pattern(
    ctx: &ConnectionCtx,
    _db: &str,
    body: &Document,
) -> CommandResult {
    const C: &str = "killAllSessionsByPattern";
    let patterns = array_arg(body, C)?
        .iter()
        .map(|p| match p {
            Bson::Document(d) => Pattern::parse(d),
            other => Err(wrong_type(&format!("{C}.{C}"), other, "object")),
        })
        .collect::<Result<Vec<_>, _>>()?;
    if patterns.is_empty() {
        ctx.sessions.end_all(&ctx.db);
    } else {
        ctx.sessions.end_where(&ctx.db, |k| {
            patterns.iter().any(|p| p.matches(&k.id, &k.uid))
        });
    }
    Ok(Document::new())
}

/// One `killAllSessionsByPattern` pattern (mongod's `KillAllSessionsByPattern`).
#[derive(Debug, Default, PartialEq)]
struct Pattern {
    lsid: Option<bson::Uuid>,
    uid: Option<UserDigest>,
    users: Option<Vec<UserDigest>>,
    /// Roles name no session here: no user has any.
    roles: bool,
}

impl Pattern {
    fn parse(d: &Document) -> Result<Pattern, MongoError> {
        const C: &str = "KillAllSessionsByPattern";
        let mut p = Pattern::default();
        for (k, v) in d {
            match k.as_str() {
                "lsid" => p.lsid = Some(lsid_id(v, &format!("{C}.lsid"))?),
                "uid" => p.uid = Some(digest(v, &format!("{C}.uid"))?),
                "users" => match v {
                    Bson::Array(a) => p.users = Some(user_uids(a, &format!("{C}.users"))?),
                    other => return Err(wrong_type(&format!("{C}.users"), other, "array")),
                },
                "roles" => p.roles = true,
                other => {
                    return Err(MongoError::new(
                        ErrorCode::Location40415,
                        format!("BSON field '{C}.{other}' is an unknown field."),
                    ))
                }
            }
        }
        Ok(p)
    }

    fn matches(&self, id: &bson::Uuid, uid: &UserDigest) -> bool {
        self.lsid.is_none_or(|l| &l == id)
            && self.uid.is_none_or(|u| &u == uid)
            && self.users.as_ref().is_none_or(|us| us.contains(uid))
            && !self.roles
    }
}

/// The `uid`s of `[{user, db}, ...]`.
pub(crate) fn user_uids(users: &[Bson], field: &str) -> Result<Vec<UserDigest>, MongoError> {
    users
        .iter()
        .map(|u| {
            let Bson::Document(d) = u else {
                return Err(wrong_type(field, u, "object"));
            };
            let name = |f: &str| match d.get(f) {
                Some(Bson::String(s)) => Ok(s.as_str()),
                Some(other) => Err(wrong_type(&format!("{field}.{f}"), other, "string")),
                None => Err(missing(&format!("{field}.{f}"))),
            };
            Ok(user_uid(name("user")?, name("db")?))
        })
        .collect()
}

/// `{id: UUID, uid: BinData}` (the uid must be the one every session here has, or absent).
fn lsid_id(v: &Bson, field: &str) -> Result<bson::Uuid, MongoError> {
    let Bson::Document(d) = v else {
        return Err(wrong_type(field, v, "object"));
    };
    match d.get("id") {
        Some(Bson::Binary(b)) if b.subtype == BinarySubtype::Uuid => {
            <[u8; 16]>::try_from(b.bytes.as_slice())
                .map(bson::Uuid::from_bytes)
                .map_err(|_| {
                    MongoError::new(ErrorCode::BadValue, format!("{field}.id must be 16 bytes"))
                })
        }
        Some(other) => Err(wrong_type(&format!("{field}.id"), other, "UUID")),
        None => Err(missing(&format!("{field}.id"))),
    }
}

/// A 32-byte SHA-256 digest given as BinData.
fn digest(v: &Bson, field: &str) -> Result<UserDigest, MongoError> {
    match v {
        Bson::Binary(b) => <[u8; 32]>::try_from(b.bytes.as_slice()).map_err(|_| {
            MongoError::new(
                ErrorCode::BadValue,
                format!("{field} must be a 32-byte SHA-256 digest"),
            )
        }),
        other => Err(wrong_type(field, other, "binData")),
    }
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
    use crate::session_table::no_auth_uid;

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

    #[test]
    fn kill_patterns_match_by_lsid_uid_and_user() {
        let (id, other) = (bson::Uuid::new(), bson::Uuid::new());
        let uid = no_auth_uid();
        let parse = |d: Document| Pattern::parse(&d).expect("pattern");
        assert!(parse(doc! {}).matches(&id, &uid));
        let by_lsid = parse(doc! {"lsid": {"id": id, "uid": bson::Binary {
        subtype: BinarySubtype::Generic, bytes: uid.to_vec() }}});
        assert!(by_lsid.matches(&id, &uid) && !by_lsid.matches(&other, &uid));
        let by_uid = parse(doc! {"uid": bson::Binary {
        subtype: BinarySubtype::Generic, bytes: uid.to_vec() }});
        assert!(by_uid.matches(&other, &uid));
        let by_user = parse(doc! {"users": [{"user": "u", "db": "admin"}]});
        assert!(!by_user.matches(&id, &uid));
        assert!(!parse(doc! {"roles": [{"role": "r", "db": "admin"}]}).matches(&id, &uid));
        assert_eq!(
            Pattern::parse(&doc! {"x": 1})
                .expect_err("unknown")
                .code
                .code(),
            40415
        );
        assert_ne!(uid, user_uid("", ""));
    }
}
