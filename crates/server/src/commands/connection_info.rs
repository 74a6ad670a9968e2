//! Commands about the asking connection: `whatsmyuri` (the client's address as we see it),
//! `connectionStatus` and `logout`. There is no authentication yet, so every connection is
//! unauthenticated with no users, roles or privileges, and `logout` has nothing to undo.

use super::CommandResult;
use crate::ConnectionCtx;
use bson::{doc, Bson, Document};

pub fn whatsmyuri(ctx: &ConnectionCtx, _db: &str, _body: &Document) -> CommandResult {
    Ok(doc! { "you": ctx.peer.to_string() })
}

pub fn connection_status(_ctx: &ConnectionCtx, _db: &str, body: &Document) -> CommandResult {
    let mut auth_info = doc! {
        "authenticatedUsers": [],
        "authenticatedUserRoles": [],
    };
    if body.get("showPrivileges").is_some_and(truthy) {
        auth_info.insert("authenticatedUserPrivileges", Bson::Array(Vec::new()));
    }
    Ok(doc! { "authInfo": auth_info })
}

pub fn logout(_ctx: &ConnectionCtx, _db: &str, _body: &Document) -> CommandResult {
    Ok(Document::new())
}

fn truthy(v: &Bson) -> bool {
    match v {
        Bson::Boolean(b) => *b,
        Bson::Int32(n) => *n != 0,
        Bson::Int64(n) => *n != 0,
        Bson::Double(n) => *n != 0.0,
        Bson::Null | Bson::Undefined => false,
        _ => true,
    }
}
