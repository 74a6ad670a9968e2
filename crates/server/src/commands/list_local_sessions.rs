//! `$listLocalSessions`, the database-level aggregation stage (`{aggregate: 1, pipeline:
//! [{$listLocalSessions: {...}}, ...]}`): one document per session in the session table,
//! `{_id: {id, uid}, lastUse}` as mongod's logical session cache reports them, filtered by
//! `{}` (the current user's), `{allUsers: true}` or `{users: [{user, db}]}`; the rest of the
//! pipeline runs over them in `shale_doc`'s executor (a `$lookup` there sees no
//! collections). It must be the first stage, of a pipeline on no collection.

use super::sessions::user_uids;
use crate::session_table::UserDigest;
use crate::ConnectionCtx;
use bson::{doc, spec::BinarySubtype, Bson, Document, RawDocumentBuf};
use shale_doc::aggregate::Pipeline;
use shale_doc::{type_name, ErrorCode, MongoError, Variables};

pub const STAGE: &str = "$listLocalSessions";

/// Whose sessions to list.
#[derive(Debug, PartialEq)]
enum Users {
    All,
    /// These users' (an empty list means the current user's).
    Only(Vec<UserDigest>),
}

/// Refuses `$listLocalSessions` anywhere but first, and on a collection.
pub fn check_placement(stages: &[Document], on_collection: bool) -> Result<(), MongoError> {
    let is_stage = |s: &Document| s.keys().next().is_some_and(|k| k == STAGE);
    if stages.iter().skip(1).any(is_stage) {
        return Err(MongoError::new(
            ErrorCode::Location40602,
            format!("{STAGE} is only valid as the first stage in a pipeline."),
        ));
    }
    if on_collection && stages.first().is_some_and(is_stage) {
        return Err(MongoError::new(
            ErrorCode::InvalidNamespace,
            format!(
                "{STAGE} must be run against the database with {{aggregate: 1}}, not a \
                 collection"
            ),
        ));
    }
    Ok(())
}

/// Whether `stages` starts with `$listLocalSessions`.
pub fn leads(stages: &[Document]) -> bool {
    stages
        .first()
        .and_then(|s| s.keys().next())
        .is_some_and(|k| k == STAGE)
}

/// Runs a pipeline that starts with `$listLocalSessions` in database `db` and returns its
/// results (none when it ends in `$out`/`$merge`, which write them); the later stages'
/// expressions read `vars` (the command's `let`, `$$NOW`).
pub fn run(
    ctx: &ConnectionCtx,
    db: &str,
    stages: &[Document],
    vars: &Variables,
) -> Result<Vec<RawDocumentBuf>, MongoError> {
    let spec = stages.first().and_then(|s| s.get(STAGE));
    let users = parse_spec(spec.unwrap_or(&Bson::Null))?;
    // The rest is checked before the sessions are read.
    Pipeline::parse_with(&stages[1..], vars)?;
    let sessions = session_documents(ctx, &users)?;
    ctx.db.aggregate_documents(db, &stages[1..], sessions, vars)
}

/// `{}`, `{allUsers: bool}`, `{users: [{user, db}, ...]}` (mongod's `ListSessionsSpec`).
fn parse_spec(spec: &Bson) -> Result<Users, MongoError> {
    let Bson::Document(d) = spec else {
        return Err(MongoError::new(
            ErrorCode::TypeMismatch,
            format!(
                "{STAGE} options must be specified in an object, but found: {}",
                type_name(spec)
            ),
        ));
    };
    let (mut all, mut users) = (false, Vec::new());
    for (k, v) in d {
        match (k.as_str(), v) {
            ("allUsers", Bson::Boolean(b)) => all = *b,
            ("users", Bson::Array(a)) => users = user_uids(a, &format!("{STAGE}.users"))?,
            ("allUsers" | "users", other) => {
                return Err(super::data::wrong_type(
                    &format!("{STAGE}.{k}"),
                    other,
                    if k == "users" { "array" } else { "bool" },
                ))
            }
            (other, _) => {
                return Err(MongoError::new(
                    ErrorCode::Location40415,
                    format!("BSON field '{STAGE}.{other}' is an unknown field."),
                ))
            }
        }
    }
    if all && !users.is_empty() {
        return Err(MongoError::new(
            ErrorCode::UnsupportedFormat,
            format!(
                "{STAGE} may not specify {{allUsers:true}} and {{users:[...]}} at the same time"
            ),
        ));
    }
    Ok(if all { Users::All } else { Users::Only(users) })
}

/// The listed sessions' documents, oldest use first.
fn session_documents(
    ctx: &ConnectionCtx,
    users: &Users,
) -> Result<Vec<RawDocumentBuf>, MongoError> {
    // No users named: the caller's own sessions (the empty user's when nobody is logged in).
    let own = ctx.session_uid();
    let listed = |uid: &UserDigest| match users {
        Users::All => true,
        Users::Only(u) if u.is_empty() => *uid == own,
        Users::Only(u) => u.contains(uid),
    };
    let mut sessions = ctx.sessions.list();
    sessions.retain(|(key, _)| listed(&key.uid));
    sessions.sort_by_key(|(_, used)| used.at);
    sessions
        .into_iter()
        .map(|(key, used)| {
            let d = doc! {
                "_id": {
                    "id": key.id,
                    "uid": bson::Binary { subtype: BinarySubtype::Generic, bytes: key.uid.to_vec() },
                },
                "lastUse": used.wall,
            };
            RawDocumentBuf::from_document(&d)
                .map_err(|e| MongoError::new(ErrorCode::InternalError, e.to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spec_is_checked_as_mongod_checks_it() {
        assert_eq!(
            parse_spec(&Bson::Document(doc! {})),
            Ok(Users::Only(vec![]))
        );
        assert_eq!(
            parse_spec(&Bson::Document(doc! {"allUsers": true})),
            Ok(Users::All)
        );
        let both = doc! {"allUsers": true, "users": [{"user": "u", "db": "d"}]};
        assert_eq!(
            parse_spec(&Bson::Document(both))
                .expect_err("both")
                .code
                .code(),
            12
        );
        assert_eq!(
            parse_spec(&Bson::Int32(1)).expect_err("type").code.code(),
            14
        );
        assert_eq!(
            parse_spec(&Bson::Document(doc! {"x": 1}))
                .expect_err("unknown")
                .code
                .code(),
            40415
        );
    }

    #[test]
    fn it_must_lead_a_pipeline_on_no_collection() {
        let stage = doc! {STAGE: {}};
        let limit = doc! {"$limit": 1};
        assert!(check_placement(&[stage.clone(), limit.clone()], false).is_ok());
        assert!(leads(std::slice::from_ref(&stage)));
        let later = check_placement(&[limit, stage.clone()], false).expect_err("later");
        assert_eq!(later.code.code(), 40602);
        let on_coll = check_placement(&[stage], true).expect_err("collection");
        assert_eq!(on_coll.code.code(), 73);
    }
}
