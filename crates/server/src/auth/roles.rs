//! Role names as user commands take them: a string (a role of the command's database) or
//! `{role, db}`, checked against mongod's built-in roles (user-defined roles,
//! `admin.system.roles`, are not built, so any other name is `RoleNotFound`). Only the names
//! live here: what a role allows is `privileges`.

use bson::{doc, Bson, Document};
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

/// The `{role, db}` documents of a `roles` array; strings name roles of `default_db`.
pub fn parse(value: &Bson, field: &str, default_db: &str) -> Result<Vec<Document>, MongoError> {
    let Bson::Array(items) = value else {
        return Err(MongoError::new(
            ErrorCode::TypeMismatch,
            format!("BSON field '{field}' is the wrong type, expected type 'array'"),
        ));
    };
    let mut roles: Vec<Document> = Vec::with_capacity(items.len());
    for item in items {
        let role = one(item, default_db)?;
        if !roles.contains(&role) {
            roles.push(role);
        }
    }
    Ok(roles)
}

fn one(item: &Bson, default_db: &str) -> Result<Document, MongoError> {
    let (role, db) = match item {
        Bson::String(name) => (name.as_str(), default_db),
        Bson::Document(d) => {
            let role = d.get_str("role").map_err(|_| bad_role())?;
            let db = d.get_str("db").map_err(|_| bad_role())?;
            (role, db)
        }
        _ => return Err(bad_role()),
    };
    if !is_builtin(role, db) {
        return Err(MongoError::new(
            ErrorCode::RoleNotFound,
            format!("Could not find role: {role}@{db}"),
        ));
    }
    Ok(doc! { "role": role, "db": db })
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

    #[test]
    fn strings_take_the_command_database_and_unknown_roles_are_refused() {
        let value = Bson::Array(vec![
            Bson::String("readWrite".into()),
            Bson::Document(doc! {"role": "root", "db": "admin"}),
            Bson::String("readWrite".into()),
        ]);
        let roles = parse(&value, "createUser.roles", "app").expect("roles");
        assert_eq!(
            roles,
            vec![
                doc! {"role": "readWrite", "db": "app"},
                doc! {"role": "root", "db": "admin"}
            ]
        );
        let root_elsewhere = Bson::Array(vec![Bson::String("root".into())]);
        let e = parse(&root_elsewhere, "r", "app").expect_err("no root in app");
        assert_eq!(
            (e.code.code(), e.message.as_str()),
            (31, "Could not find role: root@app")
        );
        assert!(parse(&Bson::Int32(1), "r", "app").is_err());
        assert!(parse(&Bson::Array(vec![Bson::Int32(1)]), "r", "app").is_err());
    }
}
