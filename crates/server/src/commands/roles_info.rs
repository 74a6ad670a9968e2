//! `rolesInfo`: every user-defined role of the command's database (`rolesInfo: 1`, with the
//! built-in ones too under `showBuiltinRoles`), one role (a name of the database, or
//! `{role, db}`) or a list of them; roles that do not exist are left out. Each role is shown
//! as mongod shows it: its stored fields (`privileges` only with `showPrivileges`,
//! `authenticationRestrictions` only with `showAuthenticationRestrictions`), `isBuiltin`,
//! `inheritedRoles` (every role it holds, through inheritance too) and, with
//! `showPrivileges`, `inheritedPrivileges` (its own and inherited, merged); with
//! `showAuthenticationRestrictions`, `inheritedAuthenticationRestrictions` lists its own
//! array and each inherited role's.
//! `showPrivileges: "asUserFragment"` answers `userFragment` instead, as if a user held the
//! named roles.

use super::users::check_fields;
use super::CommandResult;
use crate::auth::privileges::{self, Privilege};
use crate::auth::{privilege_doc, role_graph, role_store, roles, RoleName};
use crate::ConnectionCtx;
use bson::{doc, Bson, Document};
use shale_db::Database;
use shale_doc::{ErrorCode, MongoError};

/// What `showPrivileges` asks for.
#[derive(Debug, Clone, Copy, PartialEq)]
enum ShowPrivileges {
    Omit,
    Show,
    AsUserFragment,
}

pub fn roles_info(ctx: &ConnectionCtx, db: &str, body: &Document) -> CommandResult {
    check_fields(
        body,
        "rolesInfo",
        &[
            "showPrivileges",
            "showBuiltinRoles",
            "showAuthenticationRestrictions",
        ],
    )?;
    let show = match body.get("showPrivileges") {
        Some(Bson::String(s)) if s == "asUserFragment" => ShowPrivileges::AsUserFragment,
        Some(v) if truthy(v) => ShowPrivileges::Show,
        _ => ShowPrivileges::Omit,
    };
    let restrictions = body
        .get("showAuthenticationRestrictions")
        .is_some_and(truthy);
    let which = body.get("rolesInfo").cloned().unwrap_or(Bson::Int32(1));
    let Some(names) = selection(&which, db)? else {
        if show == ShowPrivileges::AsUserFragment {
            return Err(MongoError::new(
                ErrorCode::IllegalOperation,
                "Cannot get user fragment for all roles in a database",
            ));
        }
        let builtin = body.get("showBuiltinRoles").is_some_and(truthy);
        return all_of_database(&ctx.db, db, builtin, show, restrictions);
    };
    if show == ShowPrivileges::AsUserFragment {
        return user_fragment(&ctx.db, &names);
    }
    let mut out = Vec::new();
    for name in &names {
        if let Some(role) = describe(&ctx.db, name, show, restrictions)? {
            out.push(Bson::Document(role));
        }
    }
    Ok(doc! { "roles": out })
}

/// `None` for every role of the database, or the roles named.
fn selection(which: &Bson, db: &str) -> Result<Option<Vec<RoleName>>, MongoError> {
    match which {
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Boolean(true) => Ok(None),
        Bson::Array(items) => items
            .iter()
            .map(|i| name(i, db))
            .collect::<Result<_, _>>()
            .map(Some),
        other => Ok(Some(vec![name(other, db)?])),
    }
}

fn name(value: &Bson, db: &str) -> Result<RoleName, MongoError> {
    match value {
        Bson::String(role) => Ok(RoleName::new(role, db)),
        Bson::Document(d) => RoleName::from_document(d).ok_or_else(bad_name),
        _ => Err(bad_name()),
    }
}

fn bad_name() -> MongoError {
    MongoError::new(
        ErrorCode::BadValue,
        "Role names must be either strings or objects with \"role\" and \"db\" fields",
    )
}

fn all_of_database(
    db: &Database,
    db_name: &str,
    builtin: bool,
    show: ShowPrivileges,
    restrictions: bool,
) -> CommandResult {
    let mut out = Vec::new();
    if builtin {
        for role in roles::builtin_names(db_name) {
            let name = RoleName::new(role, db_name);
            out.push(Bson::Document(describe_builtin(&name, show, restrictions)));
        }
    }
    for stored in role_store::list(db, doc! { "db": db_name })? {
        out.push(Bson::Document(describe_stored(
            db,
            stored,
            show,
            restrictions,
        )?));
    }
    Ok(doc! { "roles": out })
}

/// One role's description, `None` when it does not exist.
fn describe(
    db: &Database,
    name: &RoleName,
    show: ShowPrivileges,
    restrictions: bool,
) -> Result<Option<Document>, MongoError> {
    if roles::is_builtin(&name.role, &name.db) {
        return Ok(Some(describe_builtin(name, show, restrictions)));
    }
    match role_store::find(db, name)? {
        Some(stored) => Ok(Some(describe_stored(db, stored, show, restrictions)?)),
        None => Ok(None),
    }
}

fn describe_builtin(name: &RoleName, show: ShowPrivileges, restrictions: bool) -> Document {
    let mut out = doc! {
        "role": &name.role,
        "db": &name.db,
        "isBuiltin": true,
        "roles": [],
        "inheritedRoles": [],
    };
    if show == ShowPrivileges::Show {
        let p = privileges::builtin(&name.role, &name.db).unwrap_or_default();
        out.insert("privileges", privileges_bson(&p));
        out.insert("inheritedPrivileges", privileges_bson(&p));
    }
    if restrictions {
        out.insert("authenticationRestrictions", Bson::Array(Vec::new()));
        out.insert(
            "inheritedAuthenticationRestrictions",
            Bson::Array(Vec::new()),
        );
    }
    out
}

fn describe_stored(
    db: &Database,
    stored: Document,
    show: ShowPrivileges,
    restrictions: bool,
) -> Result<Document, MongoError> {
    let held = role_graph::held_roles(&stored);
    let inherited = role_graph::resolve_stored(db, &held)?;
    let own = privilege_doc::stored(&stored);
    let own_restrictions = stored.get("authenticationRestrictions").cloned();
    let mut out = Document::new();
    for (k, v) in stored {
        match k.as_str() {
            "privileges" if show != ShowPrivileges::Show => {}
            "authenticationRestrictions" => {}
            _ => {
                out.insert(k, v);
            }
        }
    }
    if restrictions {
        out.insert(
            "authenticationRestrictions",
            own_restrictions.clone().unwrap_or(Bson::Array(Vec::new())),
        );
    }
    out.insert("isBuiltin", false);
    let roles: Vec<Bson> = inherited
        .roles
        .iter()
        .map(|r| Bson::Document(r.to_document()))
        .collect();
    out.insert("inheritedRoles", roles);
    if show == ShowPrivileges::Show {
        let mut all = own;
        all.extend(inherited.privileges);
        out.insert(
            "inheritedPrivileges",
            privileges_bson(&privileges::merge(all)),
        );
    }
    if restrictions {
        // The role's own array, then each inherited role's (mongod lists both).
        let mut inherited_restrictions = match own_restrictions {
            Some(Bson::Array(a)) if !a.is_empty() => vec![Bson::Array(a)],
            _ => Vec::new(),
        };
        inherited_restrictions.extend(
            inherited
                .restrictions
                .into_iter()
                .map(|(_, r)| Bson::Array(r)),
        );
        out.insert(
            "inheritedAuthenticationRestrictions",
            inherited_restrictions,
        );
    }
    Ok(out)
}

/// `showPrivileges: "asUserFragment"`: the roles as a user holding them would show them.
fn user_fragment(db: &Database, names: &[RoleName]) -> CommandResult {
    let resolved = role_graph::resolve_stored(db, names)?;
    let roles: Vec<Bson> = names
        .iter()
        .map(|r| Bson::Document(r.to_document()))
        .collect();
    let inherited: Vec<Bson> = resolved
        .roles
        .iter()
        .map(|r| Bson::Document(r.to_document()))
        .collect();
    let restrictions: Vec<Bson> = resolved
        .restrictions
        .iter()
        .map(|(_, r)| Bson::Array(r.clone()))
        .collect();
    Ok(doc! {
        "userFragment": {
            "roles": roles,
            "inheritedRoles": inherited,
            "inheritedPrivileges": privileges_bson(&resolved.privileges),
            "inheritedAuthenticationRestrictions": restrictions,
        }
    })
}

fn privileges_bson(p: &[Privilege]) -> Bson {
    privilege_doc::to_bson(p)
}

fn truthy(v: &Bson) -> bool {
    match v {
        Bson::Boolean(b) => *b,
        Bson::Int32(n) => *n != 0,
        Bson::Int64(n) => *n != 0,
        Bson::Double(x) => *x != 0.0,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selections_name_roles_like_mongod() {
        assert_eq!(selection(&Bson::Int32(1), "app"), Ok(None));
        assert_eq!(
            selection(&Bson::String("r".into()), "app"),
            Ok(Some(vec![RoleName::new("r", "app")]))
        );
        let list = bson::bson!(["r", {"role": "s", "db": "admin"}]);
        assert_eq!(
            selection(&list, "app"),
            Ok(Some(vec![
                RoleName::new("r", "app"),
                RoleName::new("s", "admin")
            ]))
        );
        assert!(selection(&bson::bson!({"role": "x"}), "app").is_err());
    }

    #[test]
    fn a_built_in_role_shows_its_table_privileges() {
        let read = describe_builtin(&RoleName::new("read", "app"), ShowPrivileges::Show, false);
        assert_eq!(read.get_bool("isBuiltin"), Ok(true));
        assert_eq!(read.get_array("privileges").map(Vec::len), Ok(2));
        let bare = describe_builtin(&RoleName::new("read", "app"), ShowPrivileges::Omit, false);
        assert!(!bare.contains_key("privileges"));
    }
}
