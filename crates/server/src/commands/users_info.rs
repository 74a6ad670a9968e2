//! `usersInfo`: one user (a name of the command's database, or `{user, db}`), a list of
//! them, every user of the database (`usersInfo: 1`) or of every database
//! (`{forAllDBs: true}`), ordered by database then name. Each user is shown as mongod shows
//! it: `_id`, `userId`, `user`, `db`, `roles`, `mechanisms`, `customData` (unless
//! `showCustomData: false`), and its salted keys only with `showCredentials: true`. A
//! `filter` is matched against the stored documents. Only a query naming its users (not `1`,
//! `forAllDBs` or a `filter`; else `IllegalOperation`, as mongod) may ask for details:
//! `showPrivileges` adds `inheritedRoles` (the user's roles and those they inherit through
//! user-defined roles; built-in roles are listed without the built-in roles mongod shows
//! them containing, which is partial for `root`, `dbOwner` and `clusterAdmin`) and
//! `inheritedPrivileges`, the merged privileges of those roles;
//! `showAuthenticationRestrictions` adds `inheritedRoles`, the user's own
//! `authenticationRestrictions` (`[]` when none) and `inheritedAuthenticationRestrictions`,
//! the array of each held role that has some. Without it they are not shown.

use super::CommandResult;
use crate::auth::credentials::mechanisms_of;
use crate::auth::{role_graph, user_store, UserName};
use crate::ConnectionCtx;
use bson::{doc, Bson, Document};
use shale_doc::{ErrorCode, MongoError};

pub fn users_info(ctx: &ConnectionCtx, db: &str, body: &Document) -> CommandResult {
    let which = body.get("usersInfo").cloned().unwrap_or(Bson::Int32(1));
    let mut filter = selection(&which, db)?;
    if let Ok(extra) = body.get_document("filter") {
        filter = doc! { "$and": [filter, extra.clone()] };
    }
    let details = Details {
        privileges: option(body, "showPrivileges", false),
        restrictions: option(body, "showAuthenticationRestrictions", false),
    };
    let exact = match &which {
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) => false,
        Bson::Document(d) => d.get_bool("forAllDBs") != Ok(true),
        _ => true,
    };
    if (details.privileges || details.restrictions) && (!exact || body.contains_key("filter")) {
        return Err(MongoError::new(
            ErrorCode::IllegalOperation,
            "Privilege or restriction details require exact-match usersInfo queries",
        ));
    }
    let show_credentials = option(body, "showCredentials", false);
    let show_custom_data = option(body, "showCustomData", true);
    let mut users: Vec<Bson> = Vec::new();
    for stored in user_store::list(&ctx.db, filter)? {
        let own_restrictions = stored.get("authenticationRestrictions").cloned();
        let mut user = shown(stored, show_credentials, show_custom_data);
        if details.privileges || details.restrictions {
            add_details(&ctx.db, &mut user, own_restrictions, details)?;
        }
        users.push(Bson::Document(user));
    }
    Ok(doc! { "users": users })
}

/// What an exact-match `usersInfo` adds to each user.
#[derive(Debug, Clone, Copy)]
struct Details {
    /// `showPrivileges`: `inheritedRoles` and `inheritedPrivileges`.
    privileges: bool,
    /// `showAuthenticationRestrictions`: `inheritedRoles`, the user's own
    /// `authenticationRestrictions` and its roles' `inheritedAuthenticationRestrictions`.
    restrictions: bool,
}

/// `inheritedRoles` (every role the user holds, through inheritance too), and as asked
/// `inheritedPrivileges` or the restrictions of a shown user, from its `roles`.
fn add_details(
    db: &shale_db::Database,
    user: &mut Document,
    own_restrictions: Option<Bson>,
    details: Details,
) -> Result<(), MongoError> {
    let direct = role_graph::held_roles(user);
    let resolved = role_graph::resolve_stored(db, &direct)?;
    let roles: Vec<Bson> = resolved
        .roles
        .iter()
        .map(|r| Bson::Document(r.to_document()))
        .collect();
    user.insert("inheritedRoles", roles);
    if details.privileges {
        let privileges: Vec<Bson> = resolved
            .privileges
            .iter()
            .map(|p| Bson::Document(p.to_document()))
            .collect();
        user.insert("inheritedPrivileges", privileges);
    }
    if details.restrictions {
        let inherited: Vec<Bson> = resolved
            .restrictions
            .into_iter()
            .map(|(_, r)| Bson::Array(r))
            .collect();
        user.insert(
            "authenticationRestrictions",
            own_restrictions.unwrap_or(Bson::Array(Vec::new())),
        );
        user.insert("inheritedAuthenticationRestrictions", inherited);
    }
    Ok(())
}

/// The stored-document filter for the `usersInfo` value.
fn selection(which: &Bson, db: &str) -> Result<Document, MongoError> {
    match which {
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) => Ok(doc! { "db": db }),
        Bson::Document(d) if d.get_bool("forAllDBs") == Ok(true) => Ok(Document::new()),
        Bson::Array(items) => {
            let ids: Result<Vec<Bson>, MongoError> = items
                .iter()
                .map(|item| Ok(Bson::String(name(item, db)?.id())))
                .collect();
            Ok(doc! { "_id": { "$in": ids? } })
        }
        other => Ok(doc! { "_id": name(other, db)?.id() }),
    }
}

/// A user named by a string (of database `db`) or `{user, db}`.
fn name(value: &Bson, db: &str) -> Result<UserName, MongoError> {
    match value {
        Bson::String(user) => Ok(UserName::new(user, db)),
        Bson::Document(d) => match (d.get_str("user"), d.get_str("db")) {
            (Ok(user), Ok(db)) => Ok(UserName::new(user, db)),
            _ => Err(bad_name()),
        },
        _ => Err(bad_name()),
    }
}

fn bad_name() -> MongoError {
    MongoError::new(
        ErrorCode::BadValue,
        "User and role names must be either strings or objects",
    )
}

/// A stored user as `usersInfo` shows it.
fn shown(stored: Document, show_credentials: bool, show_custom_data: bool) -> Document {
    let credentials = stored
        .get_document("credentials")
        .cloned()
        .unwrap_or_default();
    let mut out = Document::new();
    for (k, v) in stored {
        match k.as_str() {
            "credentials" if !show_credentials => {}
            "customData" if !show_custom_data => {}
            // Shown only by an exact match with `showAuthenticationRestrictions`.
            "authenticationRestrictions" => {}
            _ => {
                out.insert(k, v);
            }
        }
    }
    let mechanisms: Vec<&str> = mechanisms_of(&credentials)
        .iter()
        .map(|m| m.name())
        .collect();
    out.insert("mechanisms", mechanisms);
    out
}

/// A boolean option (numbers count as mongod counts them), `default` when absent.
fn option(body: &Document, field: &str, default: bool) -> bool {
    match body.get(field) {
        None => default,
        Some(Bson::Boolean(b)) => *b,
        Some(Bson::Int32(n)) => *n != 0,
        Some(Bson::Int64(n)) => *n != 0,
        Some(Bson::Double(x)) => *x != 0.0,
        Some(_) => default,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selections_name_users_like_mongod() {
        assert_eq!(selection(&Bson::Int32(1), "app"), Ok(doc! {"db": "app"}));
        assert_eq!(
            selection(&Bson::String("ann".into()), "app"),
            Ok(doc! {"_id": "app.ann"})
        );
        assert_eq!(
            selection(&Bson::Document(doc! {"forAllDBs": true}), "app"),
            Ok(Document::new())
        );
        let list = Bson::Array(vec![
            Bson::String("ann".into()),
            Bson::Document(doc! {"user": "bob", "db": "admin"}),
        ]);
        assert_eq!(
            selection(&list, "app"),
            Ok(doc! {"_id": {"$in": ["app.ann", "admin.bob"]}})
        );
        assert!(selection(&Bson::Document(doc! {"user": "x"}), "app").is_err());
    }

    #[test]
    fn credentials_are_hidden_unless_asked() {
        let stored = doc! {
            "_id": "app.ann", "user": "ann", "db": "app",
            "credentials": {"SCRAM-SHA-256": {"iterationCount": 15000}},
            "roles": [], "customData": {"a": 1},
        };
        let hidden = shown(stored.clone(), false, true);
        assert!(!hidden.contains_key("credentials"));
        assert_eq!(hidden.get_array("mechanisms").map(Vec::len), Ok(1));
        assert!(shown(stored.clone(), true, true).contains_key("credentials"));
        assert!(!shown(stored, false, false).contains_key("customData"));
    }
}
