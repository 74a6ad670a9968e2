//! Authorization under `--auth`: whether the users logged in on a connection may run a
//! command, by the privileges of their roles (`privileges`) against what the command needs
//! (`command_actions`), and whether they may use a cursor (`cursor_users`). Refusals are
//! `Unauthorized` (13) with mongod's message, "not authorized on <db> to execute command
//! { <the command> }". It also tells the listing commands what a user may see. It runs
//! only after `gate` has found an authenticated user.

use super::command_actions::{self, Rule};
use super::cursor_users::{self, coauthorized};
use super::privileges::{allows, Privilege, Resource};
use super::role_graph::{self, Resolved};
use super::{LoggedIn, RoleName, UserName};
use crate::command::Command;
use crate::commands::Reply;
use crate::ConnectionCtx;
use bson::{Bson, Document, RawBsonRef};
use shale_doc::{ErrorCode, MongoError};

/// The roles `users` hold through the role graph and the privileges those grant, merged by
/// resource (roles that no longer exist give nothing).
pub fn resolve_users(db: &shale_db::Database, users: &[LoggedIn]) -> Result<Resolved, MongoError> {
    let mut direct: Vec<RoleName> = Vec::new();
    for role in users.iter().flat_map(|u| u.roles.iter()) {
        if let Some(name) = RoleName::from_document(role) {
            if !direct.contains(&name) {
                direct.push(name);
            }
        }
    }
    role_graph::resolve_stored(db, &direct)
}

/// Refuses command `name` unless `users` may run it on `db` with arguments `body`.
pub fn check(
    ctx: &ConnectionCtx,
    users: &[LoggedIn],
    resolved: &Resolved,
    name: &str,
    db: &str,
    body: &Document,
) -> Result<(), MongoError> {
    let privileges = &resolved.privileges;
    let allowed = match command_actions::rule(name, db, body) {
        None => false,
        Some(Rule::Anyone) | Some(Rule::ListDatabases) => true,
        Some(Rule::Actions(needs)) => all_allowed(privileges, &needs),
        Some(Rule::AnyInDatabase) => privileges.iter().any(|p| p.pattern.touches_db(db)),
        Some(Rule::UsersInfo(needs)) => {
            asks_only_about(users, db, body) || all_allowed(privileges, &needs)
        }
        Some(Rule::RolesInfo(needs)) => {
            holds_asked_roles(resolved, db, body) || all_allowed(privileges, &needs)
        }
        Some(Rule::CursorOwner) => return check_get_more(ctx, users, body),
    };
    if !allowed {
        return Err(unauthorized(db, body));
    }
    if name == "killCursors" {
        check_kill_cursors(ctx, users, privileges, body)?;
    }
    Ok(())
}

fn all_allowed(privileges: &[Privilege], needs: &[(Resource, &str)]) -> bool {
    needs.iter().all(|(r, a)| allows(privileges, r, a))
}

/// mongod's refusal of an authenticated user.
pub fn unauthorized(db: &str, body: &Document) -> MongoError {
    MongoError::new(
        ErrorCode::Unauthorized,
        format!(
            "not authorized on {db} to execute command {}",
            command_text(body)
        ),
    )
}

/// `usersInfo` about the asking users themselves needs no privilege.
fn asks_only_about(users: &[LoggedIn], db: &str, body: &Document) -> bool {
    let asked: Vec<UserName> = match body.get("usersInfo") {
        Some(Bson::String(user)) => vec![UserName::new(user, db)],
        Some(Bson::Document(d)) => match (d.get_str("user"), d.get_str("db")) {
            (Ok(user), Ok(user_db)) => vec![UserName::new(user, user_db)],
            _ => return false,
        },
        _ => return false,
    };
    asked.iter().all(|a| users.iter().any(|u| &u.name == a))
}

/// `rolesInfo` about roles the users hold (directly or inherited) needs no privilege.
fn holds_asked_roles(resolved: &Resolved, db: &str, body: &Document) -> bool {
    let one = |b: &Bson| match b {
        Bson::String(role) => Some(RoleName::new(role, db)),
        Bson::Document(d) => RoleName::from_document(d),
        _ => None,
    };
    let asked: Vec<Option<RoleName>> = match body.get("rolesInfo") {
        Some(Bson::Array(items)) => items.iter().map(one).collect(),
        Some(b @ (Bson::String(_) | Bson::Document(_))) => vec![one(b)],
        _ => return false,
    };
    asked
        .iter()
        .all(|a| a.as_ref().is_some_and(|r| resolved.roles.contains(r)))
}

fn names(users: &[LoggedIn]) -> Vec<UserName> {
    users.iter().map(|u| u.name.clone()).collect()
}

/// A getMore runs only for the users that opened its cursor.
fn check_get_more(
    ctx: &ConnectionCtx,
    users: &[LoggedIn],
    body: &Document,
) -> Result<(), MongoError> {
    let Some(Bson::Int64(id)) = body.get("getMore") else {
        return Ok(()); // the command refuses its own argument
    };
    match ctx.server.auth.cursor_users.owners(*id) {
        Some(owners) if !coauthorized(&owners, &names(users)) => Err(MongoError::new(
            ErrorCode::Unauthorized,
            format!("cursor id {id} was not created by the authenticated user"),
        )),
        _ => Ok(()),
    }
}

/// killCursors kills only the users' own cursors, unless they have `killAnyCursor`.
fn check_kill_cursors(
    ctx: &ConnectionCtx,
    users: &[LoggedIn],
    privileges: &[Privilege],
    body: &Document,
) -> Result<(), MongoError> {
    if allows(privileges, &Resource::Cluster, "killAnyCursor") {
        return Ok(());
    }
    let Some(Bson::Array(ids)) = body.get("cursors") else {
        return Ok(());
    };
    let mine = names(users);
    for id in ids.iter().filter_map(|b| b.as_i64()) {
        if let Some(owners) = ctx.server.auth.cursor_users.owners(id) {
            if !coauthorized(&owners, &mine) {
                return Err(MongoError::new(
                    ErrorCode::Unauthorized,
                    format!("not authorized to kill cursor {id}"),
                ));
            }
        }
    }
    Ok(())
}

/// After a command ran under `--auth`: records who opened a new cursor, forgets an
/// exhausted or killed one.
pub fn after(ctx: &ConnectionCtx, cmd: &Command<'_>, reply: &Reply) {
    if !ctx.server.auth.enabled {
        return;
    }
    let table = &ctx.server.auth.cursor_users;
    match cmd.name() {
        "killCursors" => {
            if let Some(RawBsonRef::Array(ids)) = cmd.get("cursors") {
                ids.into_iter()
                    .filter_map(|v| v.ok()?.as_i64())
                    .for_each(|id| table.forget(id));
            }
        }
        "getMore" => {
            let exhausted = matches!(reply_cursor_id(reply), Some(0));
            if let (true, Some(RawBsonRef::Int64(id))) = (exhausted, cmd.get("getMore")) {
                table.forget(id);
            }
        }
        _ => {
            if let Some(id) = reply_cursor_id(reply).filter(|id| *id != 0) {
                let users = super::gate::lock(ctx).users.clone();
                let cursors = ctx.db.cursors();
                table.record(id, names(&users), |id| cursors.owner(id).is_some());
            }
        }
    }
}

fn reply_cursor_id(reply: &Reply) -> Option<i64> {
    match reply {
        Reply::Raw(raw) => cursor_users::reply_cursor_id(raw),
        Reply::Doc(d) => d.get_document("cursor").ok()?.get_i64("id").ok(),
    }
}

/// For `listDatabases`: `None` when every database is listed, or the privileges that
/// decide which are (`authorizedDatabases: true`, or a user without `listDatabases`).
/// `authorizedDatabases: false` without the action is refused.
pub fn database_filter(
    ctx: &ConnectionCtx,
    body: &Document,
) -> Result<Option<Vec<Privilege>>, MongoError> {
    if !ctx.server.auth.enabled {
        return Ok(None);
    }
    let privileges = super::gate::authorization(ctx)?.1.privileges.clone();
    let can_list = allows(&privileges, &Resource::Cluster, "listDatabases");
    match body.get("authorizedDatabases") {
        Some(v) if command_actions::truthy(Some(v)) => Ok(Some(privileges)),
        Some(_) if !can_list => Err(unauthorized("admin", body)),
        _ if can_list => Ok(None),
        _ => Ok(Some(privileges)),
    }
}

/// Whether `privileges` show database `db` in a filtered `listDatabases`.
pub fn sees_database(privileges: &[Privilege], db: &str) -> bool {
    privileges.iter().any(|p| p.pattern.touches_db(db))
}

/// For `listCollections` with `authorizedCollections` and `nameOnly`: `None` when every
/// collection is listed, or the privileges whose collections are.
/// (If the privileges cannot be read, nothing is shown: the listing fails closed.)
pub fn collection_filter(ctx: &ConnectionCtx, db: &str, body: &Document) -> Option<Vec<Privilege>> {
    let names_only = command_actions::truthy(body.get("authorizedCollections"))
        && command_actions::truthy(body.get("nameOnly"));
    if !ctx.server.auth.enabled || !names_only {
        return None;
    }
    let privileges = match super::gate::authorization(ctx) {
        Ok((_, resolved)) => resolved.privileges.clone(),
        Err(_) => return Some(Vec::new()),
    };
    let db_resource = Resource::Database(db.to_owned());
    (!allows(&privileges, &db_resource, "listCollections")).then_some(privileges)
}

/// Whether `privileges` grant anything on collection `coll` of `db`.
pub fn sees_collection(privileges: &[Privilege], db: &str, coll: &str) -> bool {
    let resource = Resource::Collection(db.to_owned(), coll.to_owned());
    privileges.iter().any(|p| p.pattern.covers(&resource))
}

/// A command as mongod prints it in messages: `{ find: "c", filter: {}, $db: "test" }`.
pub fn command_text(body: &Document) -> String {
    let mut out = String::new();
    write_doc(body, &mut out);
    out
}

fn write_doc(d: &Document, out: &mut String) {
    if d.is_empty() {
        out.push_str("{}");
        return;
    }
    out.push_str("{ ");
    for (i, (k, v)) in d.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(k);
        out.push_str(": ");
        write_value(v, out);
    }
    out.push_str(" }");
}

fn write_value(v: &Bson, out: &mut String) {
    match v {
        Bson::Document(d) => write_doc(d, out),
        Bson::Array(items) if items.is_empty() => out.push_str("[]"),
        Bson::Array(items) => {
            out.push_str("[ ");
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_value(item, out);
            }
            out.push_str(" ]");
        }
        Bson::String(s) => out.push_str(&format!("{s:?}")),
        Bson::Double(f) if f.fract() == 0.0 && f.is_finite() => out.push_str(&format!("{f:.1}")),
        Bson::Binary(b) if b.subtype == bson::spec::BinarySubtype::Uuid && b.bytes.len() == 16 => {
            let mut bytes = [0u8; 16];
            bytes.copy_from_slice(&b.bytes);
            out.push_str(&format!("UUID(\"{}\")", bson::Uuid::from_bytes(bytes)));
        }
        Bson::ObjectId(id) => out.push_str(&format!("ObjectId('{id}')")),
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn the_message_prints_the_command_as_mongod_does() {
        let body = doc! {"find": "c", "filter": {}, "limit": 1, "batch": 1.0, "$db": "test"};
        assert_eq!(
            unauthorized("test", &body).message,
            "not authorized on test to execute command \
             { find: \"c\", filter: {}, limit: 1, batch: 1.0, $db: \"test\" }"
        );
    }
}
