//! Commands about the asking connection: `whatsmyuri` (the client's address as we see it),
//! `connectionStatus` (the users logged in on it and the roles they hold, inherited ones
//! included) and `logout` (ends the
//! login of the command's database). `showPrivileges` adds the merged privileges of the
//! users' roles (`authenticatedUserPrivileges`).

use super::CommandResult;
use crate::auth::gate;
use crate::ConnectionCtx;
use bson::{doc, Bson, Document};
use shale_doc::matcher::element::bson_true_value;

pub fn whatsmyuri(ctx: &ConnectionCtx, _db: &str, _body: &Document) -> CommandResult {
    Ok(doc! { "you": ctx.peer.to_string() })
}

pub fn connection_status(ctx: &ConnectionCtx, _db: &str, body: &Document) -> CommandResult {
    let (users, resolved) = gate::authorization(ctx)?;
    let names: Vec<Bson> = users
        .iter()
        .map(|u| Bson::Document(doc! { "user": &u.name.user, "db": &u.name.db }))
        .collect();
    let roles: Vec<Bson> = resolved
        .roles
        .iter()
        .map(|r| Bson::Document(r.to_document()))
        .collect();
    let mut auth_info = doc! {
        "authenticatedUsers": names,
        "authenticatedUserRoles": roles,
    };
    if body.get("showPrivileges").is_some_and(bson_true_value) {
        let privileges: Vec<Bson> = resolved
            .privileges
            .iter()
            .map(|p| Bson::Document(p.to_document()))
            .collect();
        auth_info.insert("authenticatedUserPrivileges", privileges);
    }
    Ok(doc! { "authInfo": auth_info })
}

pub fn logout(ctx: &ConnectionCtx, db: &str, _body: &Document) -> CommandResult {
    gate::lock(ctx).log_out(db);
    Ok(Document::new())
}
