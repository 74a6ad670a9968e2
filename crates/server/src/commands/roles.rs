//! The commands that change user-defined roles: `createRole`, `updateRole`, `dropRole`,
//! `dropAllRolesFromDatabase`, `grantPrivilegesToRole`, `revokePrivilegesFromRole`,
//! `grantRolesToRole`, `revokeRolesFromRole`. Roles are stored in `admin.system.roles` in
//! mongod's shape (`auth::role_store`, docs/auth.md) with mongod's checks: a role outside
//! `admin` holds only privileges and roles of its own database, no role holds itself or
//! closes a cycle, built-in roles cannot be created or changed. `rolesInfo` is in
//! `roles_info.rs`; what a role allows is enforced by `auth::authorize`.

use super::users::{check_fields, given_restrictions, missing};
use super::CommandResult;
use crate::auth::privilege_doc;
use crate::auth::privileges::{Pattern, Privilege};
use crate::auth::{role_graph, role_store, roles, RoleName};
use crate::ConnectionCtx;
use bson::{doc, Bson, Document};
use shale_doc::{ErrorCode, MongoError};

const ROLE_FIELDS: &[&str] = &["privileges", "roles", "authenticationRestrictions"];

pub fn create_role(ctx: &ConnectionCtx, db: &str, body: &Document) -> CommandResult {
    check_fields(body, "createRole", ROLE_FIELDS)?;
    let name = role_name(body, "createRole", db)?;
    if name.role.is_empty() {
        return Err(bad("Role name must be non-empty"));
    }
    match db {
        "local" => return Err(bad("Cannot create roles in the local database")),
        "$external" => return Err(bad("Cannot create roles in the $external database")),
        _ if roles::is_builtin(&name.role, db) => {
            return Err(bad(
                "Cannot create roles with the same name as a built-in role",
            ))
        }
        _ => {}
    }
    let privileges = privilege_doc::parse(
        body.get("privileges")
            .ok_or_else(|| missing("createRole.privileges"))?,
        "createRole.privileges",
    )?;
    let held = roles::parse_names(
        body.get("roles")
            .ok_or_else(|| missing("createRole.roles"))?,
        "createRole.roles",
        db,
    )?;
    check_grant_roles(ctx, &name, &held)?;
    check_grant_privileges(&name, &privileges)?;
    let mut role = doc! {
        "_id": name.id(),
        "role": &name.role,
        "db": &name.db,
        "privileges": privilege_doc::to_bson(&privileges),
        "roles": names_bson(&held),
    };
    if let Some(r) = given_restrictions(body, "createRole")?.filter(|r| !r.is_empty()) {
        role.insert("authenticationRestrictions", r);
    }
    role_store::insert(&ctx.db, &ctx.server.auth, role)?;
    tracing::info!(role = %name, "created role");
    Ok(Document::new())
}

pub fn update_role(ctx: &ConnectionCtx, db: &str, body: &Document) -> CommandResult {
    check_fields(body, "updateRole", ROLE_FIELDS)?;
    let name = role_name(body, "updateRole", db)?;
    if !ROLE_FIELDS.iter().any(|f| body.contains_key(f)) {
        return Err(bad(
            "Must specify at least one field to update in updateRole",
        ));
    }
    let privileges = body
        .get("privileges")
        .map(|v| privilege_doc::parse(v, "updateRole.privileges"))
        .transpose()?;
    let held = body
        .get("roles")
        .map(|v| roles::parse_names(v, "updateRole.roles", db))
        .transpose()?;
    let restrictions = given_restrictions(body, "updateRole")?;
    let mut role = existing(ctx, &name)?;
    if let Some(held) = &held {
        check_grant_roles(ctx, &name, held)?;
        role.insert("roles", names_bson(held));
    }
    if let Some(privileges) = &privileges {
        check_grant_privileges(&name, privileges)?;
        role.insert("privileges", privilege_doc::to_bson(privileges));
    }
    match restrictions {
        Some(r) if r.is_empty() => {
            role.remove("authenticationRestrictions");
        }
        Some(r) => {
            role.insert("authenticationRestrictions", r);
        }
        None => {}
    }
    role_store::replace(&ctx.db, &ctx.server.auth, &name, role)?;
    Ok(Document::new())
}

pub fn drop_role(ctx: &ConnectionCtx, db: &str, body: &Document) -> CommandResult {
    check_fields(body, "dropRole", &[])?;
    let name = role_name(body, "dropRole", db)?;
    not_builtin(&name)?;
    existing(ctx, &name)?;
    role_store::delete_and_pull(
        &ctx.db,
        &ctx.server.auth,
        doc! { "_id": name.id() },
        name.to_document(),
    )?;
    tracing::info!(role = %name, "dropped role");
    Ok(Document::new())
}

pub fn drop_all_roles_from_database(
    ctx: &ConnectionCtx,
    db: &str,
    body: &Document,
) -> CommandResult {
    check_fields(body, "dropAllRolesFromDatabase", &[])?;
    let n = role_store::delete_and_pull(
        &ctx.db,
        &ctx.server.auth,
        doc! { "db": db },
        doc! { "db": db },
    )?;
    Ok(doc! { "n": n })
}

pub fn grant_privileges_to_role(ctx: &ConnectionCtx, db: &str, body: &Document) -> CommandResult {
    let (name, given, mut role) = privileges_change(ctx, db, body, "grantPrivilegesToRole")?;
    check_grant_privileges(&name, &given)?;
    let mut held = privilege_doc::stored(&role);
    held.extend(given);
    let held = crate::auth::privileges::merge(held);
    role.insert("privileges", privilege_doc::to_bson(&held));
    role_store::replace(&ctx.db, &ctx.server.auth, &name, role)?;
    Ok(Document::new())
}

pub fn revoke_privileges_from_role(
    ctx: &ConnectionCtx,
    db: &str,
    body: &Document,
) -> CommandResult {
    let (name, given, mut role) = privileges_change(ctx, db, body, "revokePrivilegesFromRole")?;
    let mut held = privilege_doc::stored(&role);
    privilege_doc::revoke(&mut held, &given);
    role.insert("privileges", privilege_doc::to_bson(&held));
    role_store::replace(&ctx.db, &ctx.server.auth, &name, role)?;
    Ok(Document::new())
}

/// The role, the privileges given and the stored role of a privilege grant or revoke.
fn privileges_change(
    ctx: &ConnectionCtx,
    db: &str,
    body: &Document,
    command: &str,
) -> Result<(RoleName, Vec<Privilege>, Document), MongoError> {
    check_fields(body, command, &["privileges"])?;
    let name = role_name(body, command, db)?;
    let field = format!("{command}.privileges");
    let value = body.get("privileges").ok_or_else(|| missing(&field))?;
    if matches!(value, Bson::Array(a) if a.is_empty()) {
        return Err(bad(&format!(
            "{command} command requires a non-empty \"privileges\" array"
        )));
    }
    not_builtin(&name)?;
    let given = privilege_doc::parse(value, &field)?;
    let role = existing(ctx, &name)?;
    Ok((name, given, role))
}

pub fn grant_roles_to_role(ctx: &ConnectionCtx, db: &str, body: &Document) -> CommandResult {
    let (name, given, mut role) = roles_change(ctx, db, body, "grantRolesToRole")?;
    check_grant_roles(ctx, &name, &given)?;
    let mut held = role_graph::held_roles(&role);
    for r in given {
        if !held.contains(&r) {
            held.push(r);
        }
    }
    role.insert("roles", names_bson(&held));
    role_store::replace(&ctx.db, &ctx.server.auth, &name, role)?;
    Ok(Document::new())
}

pub fn revoke_roles_from_role(ctx: &ConnectionCtx, db: &str, body: &Document) -> CommandResult {
    let (name, given, mut role) = roles_change(ctx, db, body, "revokeRolesFromRole")?;
    let mut held = role_graph::held_roles(&role);
    held.retain(|r| !given.contains(r));
    role.insert("roles", names_bson(&held));
    role_store::replace(&ctx.db, &ctx.server.auth, &name, role)?;
    Ok(Document::new())
}

/// The role, the roles given and the stored role of a role grant or revoke.
fn roles_change(
    ctx: &ConnectionCtx,
    db: &str,
    body: &Document,
    command: &str,
) -> Result<(RoleName, Vec<RoleName>, Document), MongoError> {
    check_fields(body, command, &["roles"])?;
    let name = role_name(body, command, db)?;
    let field = format!("{command}.roles");
    let value = body.get("roles").ok_or_else(|| missing(&field))?;
    if matches!(value, Bson::Array(a) if a.is_empty()) {
        return Err(bad(&format!(
            "{command} command requires a non-empty \"roles\" array"
        )));
    }
    not_builtin(&name)?;
    let given = roles::parse_names(value, &field, db)?;
    let role = existing(ctx, &name)?;
    Ok((name, given, role))
}

/// mongod's `checkOkayToGrantRolesToRole`: not itself, only its own database's roles
/// unless it is an `admin` role, every role existing, and no cycle.
fn check_grant_roles(
    ctx: &ConnectionCtx,
    role: &RoleName,
    to_add: &[RoleName],
) -> Result<(), MongoError> {
    for r in to_add {
        if r == role {
            return Err(invalid(format!("Cannot grant role {role} to itself.")));
        }
        if role.db != "admin" && r.db != role.db {
            return Err(invalid(format!(
                "Roles on the '{}' database cannot be granted roles from other databases",
                role.db
            )));
        }
    }
    roles::require_exist(&ctx.db, to_add).map_err(|e| {
        MongoError::new(
            e.code,
            format!("Cannot grant roles to '{role}': {}", e.message),
        )
    })?;
    let inherited = role_graph::resolve_stored(&ctx.db, to_add)?;
    if inherited.roles.contains(role) {
        return Err(invalid(format!(
            "Granting roles to {role} would introduce a cycle in the role graph"
        )));
    }
    Ok(())
}

/// mongod's `checkOkayToGrantPrivilegesToRole`: a role outside `admin` holds privileges
/// on its own database and that database's collections only.
fn check_grant_privileges(role: &RoleName, privileges: &[Privilege]) -> Result<(), MongoError> {
    if role.db == "admin" {
        return Ok(());
    }
    let own = |p: &Privilege| match &p.pattern {
        Pattern::Database(d) | Pattern::Exact(d, _) => *d == role.db,
        _ => false,
    };
    if privileges.iter().all(own) {
        return Ok(());
    }
    Err(invalid(format!(
        "Roles on the '{}' database cannot be granted privileges that target other \
         databases or the cluster",
        role.db
    )))
}

/// The stored document of `name`, or `RoleNotFound`.
fn existing(ctx: &ConnectionCtx, name: &RoleName) -> Result<Document, MongoError> {
    role_store::find(&ctx.db, name)?.ok_or_else(|| role_store::not_found(name))
}

fn not_builtin(name: &RoleName) -> Result<(), MongoError> {
    if roles::is_builtin(&name.role, &name.db) {
        return Err(bad(&format!(
            "{name} is a built-in role and cannot be modified"
        )));
    }
    Ok(())
}

/// The role named by the command's first field, in database `db`.
fn role_name(body: &Document, command: &str, db: &str) -> Result<RoleName, MongoError> {
    match body.get(command) {
        Some(Bson::String(s)) => Ok(RoleName::new(s, db)),
        _ => Err(MongoError::new(
            ErrorCode::TypeMismatch,
            format!("BSON field '{command}.{command}' is the wrong type, expected type 'string'"),
        )),
    }
}

fn names_bson(names: &[RoleName]) -> Bson {
    Bson::Array(
        names
            .iter()
            .map(|n| Bson::Document(n.to_document()))
            .collect(),
    )
}

fn invalid(message: String) -> MongoError {
    MongoError::new(ErrorCode::InvalidRoleModification, message)
}

fn bad(message: &str) -> MongoError {
    MongoError::new(ErrorCode::BadValue, message)
}
