//! The user-management commands that change users: `createUser`, `updateUser`, `dropUser`,
//! `dropAllUsersFromDatabase`, `grantRolesToUser`, `revokeRolesFromUser`. Users are stored
//! in `admin.system.users` in mongod's shape (`auth::user_store`, docs/auth.md), with salted
//! SCRAM keys only. `usersInfo` is in `users_info.rs`. Roles are checked to exist;
//! `authenticationRestrictions` are checked as mongod checks them (an empty array stores
//! none, or removes them on `updateUser`) and enforced at login by `auth::gate::admit`.

use super::{CommandResult, GENERIC_ARGUMENTS};
use crate::auth::credentials::{keys_document, mechanisms_of, new_keys};
use crate::auth::scram::Mechanism;
use crate::auth::{restrictions, roles, user_store, AuthConfig, UserName};
use crate::ConnectionCtx;
use bson::{doc, Bson, Document};
use shale_doc::{ErrorCode, MongoError};

const CREATE_FIELDS: &[&str] = &[
    "pwd",
    "customData",
    "roles",
    "digestPassword",
    "mechanisms",
    "authenticationRestrictions",
];

pub fn create_user(ctx: &ConnectionCtx, db: &str, body: &Document) -> CommandResult {
    check_fields(body, "createUser", CREATE_FIELDS)?;
    let name = user_name(body, "createUser", db)?;
    let roles = match body.get("roles") {
        Some(v) => roles::parse(&ctx.db, v, "createUser.roles", db)?,
        None => return Err(missing("createUser.roles")),
    };
    let credentials = match db {
        "$external" if body.contains_key("pwd") => {
            return Err(bad(
                "Cannot set passwords for users in the $external database",
            ))
        }
        "$external" => doc! { "external": true },
        "local" => return Err(bad("Cannot create users in the local database")),
        _ => new_credentials(&ctx.server.auth, &name, body)?,
    };
    let mut user = doc! {
        "_id": name.id(),
        "userId": bson::Uuid::new(),
        "user": &name.user,
        "db": &name.db,
        "credentials": credentials,
        "roles": roles_bson(roles),
    };
    if let Some(v) = body.get("customData") {
        user.insert("customData", v.clone());
    }
    let restrictions = given_restrictions(body, "createUser")?;
    if let Some(r) = restrictions.filter(|r| !r.is_empty()) {
        user.insert("authenticationRestrictions", r);
    }
    user_store::insert(&ctx.db, &ctx.server.auth, user)?;
    tracing::info!(user = %name, "created user");
    Ok(Document::new())
}

pub fn update_user(ctx: &ConnectionCtx, db: &str, body: &Document) -> CommandResult {
    check_fields(body, "updateUser", CREATE_FIELDS)?;
    let name = user_name(body, "updateUser", db)?;
    if !CREATE_FIELDS.iter().any(|f| body.contains_key(f)) {
        return Err(bad(
            "Must specify at least one field to update in updateUser",
        ));
    }
    let restrictions = given_restrictions(body, "updateUser")?;
    let mut user = existing(ctx, &name)?;
    let current = user
        .get_document("credentials")
        .cloned()
        .unwrap_or_default();
    if body.contains_key("pwd") {
        let credentials = new_credentials(&ctx.server.auth, &name, body)?;
        user.insert("credentials", credentials);
    } else if let Some(wanted) = mechanisms(body)? {
        user.insert("credentials", keep_mechanisms(&current, &wanted)?);
    }
    if let Some(v) = body.get("roles") {
        user.insert(
            "roles",
            roles_bson(roles::parse(&ctx.db, v, "updateUser.roles", db)?),
        );
    }
    if let Some(v) = body.get("customData") {
        user.insert("customData", v.clone());
    }
    match restrictions {
        Some(r) if r.is_empty() => {
            user.remove("authenticationRestrictions");
        }
        Some(r) => {
            user.insert("authenticationRestrictions", r);
        }
        None => {}
    }
    user_store::replace(&ctx.db, &ctx.server.auth, &name, user)?;
    Ok(Document::new())
}

pub fn drop_user(ctx: &ConnectionCtx, db: &str, body: &Document) -> CommandResult {
    check_fields(body, "dropUser", &[])?;
    let name = user_name(body, "dropUser", db)?;
    let n = user_store::delete(&ctx.db, &ctx.server.auth, doc! { "_id": name.id() })?;
    if n == 0 {
        return Err(user_store::not_found(&name));
    }
    tracing::info!(user = %name, "dropped user");
    Ok(Document::new())
}

pub fn drop_all_users_from_database(
    ctx: &ConnectionCtx,
    db: &str,
    body: &Document,
) -> CommandResult {
    check_fields(body, "dropAllUsersFromDatabase", &[])?;
    let n = user_store::delete(&ctx.db, &ctx.server.auth, doc! { "db": db })?;
    Ok(doc! { "n": n })
}

pub fn grant_roles_to_user(ctx: &ConnectionCtx, db: &str, body: &Document) -> CommandResult {
    change_roles(ctx, db, body, "grantRolesToUser", |held, role| {
        if !held.contains(&role) {
            held.push(role);
        }
    })
}

pub fn revoke_roles_from_user(ctx: &ConnectionCtx, db: &str, body: &Document) -> CommandResult {
    change_roles(ctx, db, body, "revokeRolesFromUser", |held, role| {
        held.retain(|r| *r != role);
    })
}

/// Adds or removes each role named in `roles` from the user's.
fn change_roles(
    ctx: &ConnectionCtx,
    db: &str,
    body: &Document,
    command: &str,
    apply: fn(&mut Vec<Document>, Document),
) -> CommandResult {
    check_fields(body, command, &["roles"])?;
    let name = user_name(body, command, db)?;
    let field = format!("{command}.roles");
    let given = roles::parse(
        &ctx.db,
        body.get("roles").ok_or_else(|| missing(&field))?,
        &field,
        db,
    )?;
    let mut user = existing(ctx, &name)?;
    let mut held: Vec<Document> = match user.get_array("roles") {
        Ok(items) => items
            .iter()
            .filter_map(|r| r.as_document().cloned())
            .collect(),
        Err(_) => Vec::new(),
    };
    for role in given {
        apply(&mut held, role);
    }
    user.insert("roles", roles_bson(held));
    user_store::replace(&ctx.db, &ctx.server.auth, &name, user)?;
    Ok(Document::new())
}

/// The stored document of `name`, or `UserNotFound`.
fn existing(ctx: &ConnectionCtx, name: &UserName) -> Result<Document, MongoError> {
    user_store::find(&ctx.db, name)?.ok_or_else(|| user_store::not_found(name))
}

/// The user named by the command's first field, in database `db`.
fn user_name(body: &Document, command: &str, db: &str) -> Result<UserName, MongoError> {
    let user = match body.get(command) {
        Some(Bson::String(s)) => s.as_str(),
        _ => {
            return Err(MongoError::new(
                ErrorCode::TypeMismatch,
                format!(
                    "BSON field '{command}.{command}' is the wrong type, expected type 'string'"
                ),
            ))
        }
    };
    if user.is_empty() {
        return Err(bad("User name must be non-empty"));
    }
    if user.contains('\0') {
        return Err(bad("Username cannot contain NULL characters"));
    }
    Ok(UserName::new(user, db))
}

/// New keys for every requested mechanism (both by default) from `pwd`.
fn new_credentials(
    auth: &AuthConfig,
    name: &UserName,
    body: &Document,
) -> Result<Document, MongoError> {
    let password = match body.get("pwd") {
        Some(Bson::String(p)) => p.as_str(),
        Some(_) => {
            return Err(MongoError::new(
                ErrorCode::TypeMismatch,
                "pwd must be a string",
            ))
        }
        None => {
            return Err(bad(
                "Must provide a 'pwd' field for all user documents, except those with \
                 '$external' as the user's source db",
            ))
        }
    };
    if password.is_empty() {
        return Err(bad("Password cannot be empty"));
    }
    let digest_password = match body.get("digestPassword") {
        None => true,
        Some(Bson::Boolean(b)) => *b,
        Some(_) => {
            return Err(MongoError::new(
                ErrorCode::TypeMismatch,
                "digestPassword must be a boolean",
            ))
        }
    };
    let wanted = mechanisms(body)?.unwrap_or_else(|| Mechanism::ALL.to_vec());
    let mut credentials = Document::new();
    for mech in wanted {
        let keys = new_keys(
            mech,
            &name.user,
            password,
            digest_password,
            auth.iterations(mech),
        )?;
        credentials.insert(mech.name(), keys_document(&keys));
    }
    Ok(credentials)
}

/// The `mechanisms` array, if given: known SCRAM names, at least one.
fn mechanisms(body: &Document) -> Result<Option<Vec<Mechanism>>, MongoError> {
    let Some(value) = body.get("mechanisms") else {
        return Ok(None);
    };
    let Bson::Array(items) = value else {
        return Err(MongoError::new(
            ErrorCode::TypeMismatch,
            "mechanisms must be an array",
        ));
    };
    if items.is_empty() {
        return Err(bad("mechanisms field must not be empty"));
    }
    let mut out = Vec::new();
    for item in items {
        let name = item.as_str().unwrap_or_default();
        let mech = Mechanism::from_name(name)
            .ok_or_else(|| bad(&format!("Unknown auth mechanism '{name}'")))?;
        if !out.contains(&mech) {
            out.push(mech);
        }
    }
    Ok(Some(out))
}

/// `updateUser` with `mechanisms` and no `pwd`: keep only those keys, a subset of the user's.
fn keep_mechanisms(current: &Document, wanted: &[Mechanism]) -> Result<Document, MongoError> {
    let held = mechanisms_of(current);
    if wanted.iter().any(|m| !held.contains(m)) {
        return Err(bad(
            "mechanisms field must be a subset of previously set mechanisms",
        ));
    }
    let mut kept = Document::new();
    for mech in wanted {
        if let Some(v) = current.get(mech.name()) {
            kept.insert(mech.name(), v.clone());
        }
    }
    Ok(kept)
}

/// The command's `authenticationRestrictions`, checked (`auth::restrictions`), if given.
pub(super) fn given_restrictions(
    body: &Document,
    command: &str,
) -> Result<Option<Vec<Bson>>, MongoError> {
    body.get("authenticationRestrictions")
        .map(|v| restrictions::parse_command(v, &format!("{command}.authenticationRestrictions")))
        .transpose()
}

fn roles_bson(roles: Vec<Document>) -> Bson {
    Bson::Array(roles.into_iter().map(Bson::Document).collect())
}

/// Refuses fields neither the command's own nor generic ones, as mongod's IDL parser does.
pub(super) fn check_fields(body: &Document, command: &str, own: &[&str]) -> Result<(), MongoError> {
    for key in body.keys().skip(1) {
        if !own.contains(&key.as_str()) && !GENERIC_ARGUMENTS.contains(&key.as_str()) {
            return Err(MongoError::new(
                ErrorCode::Location40415,
                format!("BSON field '{command}.{key}' is an unknown field."),
            ));
        }
    }
    Ok(())
}

pub(super) fn missing(field: &str) -> MongoError {
    MongoError::new(
        ErrorCode::Location40414,
        format!("BSON field '{field}' is missing but a required field"),
    )
}

fn bad(message: &str) -> MongoError {
    MongoError::new(ErrorCode::BadValue, message)
}
