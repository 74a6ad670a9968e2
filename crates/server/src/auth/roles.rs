//! Role names as user and role commands take them: a string (a role of the command's
//! database) or `{role, db}`, checked to exist among mongod's built-in roles or the
//! user-defined ones in `admin.system.roles` (`role_store`); any other name is
//! `RoleNotFound`. Only the names live here: what a role allows is `privileges` and
//! `role_graph`.

use super::{role_store, RoleName};
use bson::{Bson, Document};
use shale_db::Database;
use shale_doc::{ErrorCode, MongoError};

/// Built-in roles that exist in every database.
const DATABASE_ROLES: &[&str] = &["read", "readWrite", "dbAdmin", "dbOwner", "userAdmin"];

/// Built-in roles that exist only in `admin`.
const ADMIN_ROLES: &[&str] = &[
    "clusterAdmin",
    "clusterManager",
    "clusterMonitor",
    "hostManager",
    "backup",
    "restore",
    "readAnyDatabase",
    "readWriteAnyDatabase",
    "userAdminAnyDatabase",
    "dbAdminAnyDatabase",
    "root",
    "enableSharding",
    "directShardOperations",
    "searchCoordinator",
    "__system",
];

/// Whether `role` is a built-in role of database `db`.
pub fn is_builtin(role: &str, db: &str) -> bool {
    DATABASE_ROLES.contains(&role) || (db == "admin" && ADMIN_ROLES.contains(&role))
}

/// The built-in roles of database `db`, as `rolesInfo` with `showBuiltinRoles` lists them
/// (the internal `__system` left out).
pub fn builtin_names(db: &str) -> Vec<&'static str> {
    let mut names: Vec<&'static str> = DATABASE_ROLES.to_vec();
    if db == "admin" {
        names.extend(ADMIN_ROLES.iter().filter(|r| **r != "__system"));
    }
    names
}

/// The `{role, db}` documents of a `roles` array; strings name roles of `default_db`.
/// Each role must exist, built-in or stored in `db`.
pub fn parse(
    db: &Database,
    value: &Bson,
    field: &str,
    default_db: &str,
) -> Result<Vec<Document>, MongoError> {
    let names = parse_names(value, field, default_db)?;
    require_exist(db, &names)?;
    Ok(names.iter().map(RoleName::to_document).collect())
}

/// The role names of a `roles` array, duplicates dropped, without checking they exist.
pub fn parse_names(
    value: &Bson,
    field: &str,
    default_db: &str,
) -> Result<Vec<RoleName>, MongoError> {
    let Bson::Array(items) = value else {
        return Err(MongoError::new(
            ErrorCode::TypeMismatch,
            format!("BSON field '{field}' is the wrong type, expected type 'array'"),
        ));
    };
    let mut roles: Vec<RoleName> = Vec::with_capacity(items.len());
    for item in items {
        let role = one(item, default_db)?;
        if !roles.contains(&role) {
            roles.push(role);
        }
    }
    Ok(roles)
}

/// `RoleNotFound` "Could not find role: x@db" for the first role that does not exist.
pub fn require_exist(db: &Database, names: &[RoleName]) -> Result<(), MongoError> {
    for name in names {
        if !is_builtin(&name.role, &name.db) && role_store::find(db, name)?.is_none() {
            return Err(role_store::not_found(name));
        }
    }
    Ok(())
}

fn one(item: &Bson, default_db: &str) -> Result<RoleName, MongoError> {
    match item {
        Bson::String(name) => Ok(RoleName::new(name, default_db)),
        Bson::Document(d) => RoleName::from_document(d).ok_or_else(bad_role),
        _ => Err(bad_role()),
    }
}

fn bad_role() -> MongoError {
    MongoError::new(
        ErrorCode::BadValue,
        "Role names must be either strings or objects with \"role\" and \"db\" fields",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn strings_take_the_command_database_and_unknown_roles_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Database::open(dir.path(), shale_db::DbOptions::default()).expect("open");
        let value = Bson::Array(vec![
            Bson::String("readWrite".into()),
            Bson::Document(doc! {"role": "root", "db": "admin"}),
            Bson::String("readWrite".into()),
        ]);
        let roles = parse(&db, &value, "createUser.roles", "app").expect("roles");
        assert_eq!(
            roles,
            vec![
                doc! {"role": "readWrite", "db": "app"},
                doc! {"role": "root", "db": "admin"}
            ]
        );
        let root_elsewhere = Bson::Array(vec![Bson::String("root".into())]);
        let e = parse(&db, &root_elsewhere, "r", "app").expect_err("no root in app");
        assert_eq!(
            (e.code.code(), e.message.as_str()),
            (31, "Could not find role: root@app")
        );
        assert!(parse(&db, &Bson::Int32(1), "r", "app").is_err());
        assert!(parse(&db, &Bson::Array(vec![Bson::Int32(1)]), "r", "app").is_err());
    }
}
