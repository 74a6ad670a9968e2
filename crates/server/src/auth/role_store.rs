//! User-defined roles as documents of `admin.system.roles`, read and written through
//! `shale_db`'s ordinary collection API, in mongod's shape: `{_id: "db.role", role, db,
//! privileges: [...], roles: [...], authenticationRestrictions?}` (docs/auth.md). Every
//! write bumps the server's users generation, so connections recompute their privileges.
//! Dropping a role also pulls it from every user's and role's `roles`, as mongod does.
//! It checks nothing about what a role may hold: that is the role commands' job.

use super::{user_store, AuthConfig, RoleName};
use bson::{doc, Bson, Document, RawDocumentBuf};
use shale_db::{Database, Namespace, UpdateOp};
use shale_doc::{ErrorCode, MongoError, UpdateSpec};

/// `admin.system.roles`.
pub fn roles_namespace() -> Namespace {
    Namespace {
        db: "admin".to_owned(),
        coll: "system.roles".to_owned(),
    }
}

/// The stored document of role `name`, if it exists.
pub fn find(db: &Database, name: &RoleName) -> Result<Option<Document>, MongoError> {
    Ok(list(db, doc! { "_id": name.id() })?.into_iter().next())
}

/// Roles matching `filter`, ordered by database then name.
pub fn list(db: &Database, filter: Document) -> Result<Vec<Document>, MongoError> {
    user_store::list_in(db, &roles_namespace(), filter, doc! { "db": 1, "role": 1 })
}

/// Whether any user-defined role exists.
pub fn any(db: &Database) -> Result<bool, MongoError> {
    user_store::any_in(db, &roles_namespace())
}

/// Stores a new role; `Location51002` when it exists already.
pub fn insert(db: &Database, auth: &AuthConfig, role: Document) -> Result<(), MongoError> {
    let raw = RawDocumentBuf::from_document(&role)
        .map_err(|e| MongoError::new(ErrorCode::BadValue, format!("role document: {e}")))?;
    let result = db.insert(&roles_namespace(), &[raw], true);
    auth.users_changed();
    match result?.errors.into_iter().next() {
        Some((_, e)) if e.code == ErrorCode::DuplicateKey => {
            let name = RoleName::new(
                role.get_str("role").unwrap_or_default(),
                role.get_str("db").unwrap_or_default(),
            );
            Err(MongoError::new(
                ErrorCode::Location51002,
                format!("Role \"{name}\" already exists"),
            ))
        }
        Some((_, e)) => Err(e),
        None => Ok(()),
    }
}

/// Replaces the stored document of `name`; `RoleNotFound` when there is none.
pub fn replace(
    db: &Database,
    auth: &AuthConfig,
    name: &RoleName,
    role: Document,
) -> Result<(), MongoError> {
    let n = update(
        db,
        auth,
        &roles_namespace(),
        doc! { "_id": name.id() },
        Bson::Document(role),
        false,
    )?;
    if n == 0 {
        return Err(MongoError::new(
            ErrorCode::RoleNotFound,
            format!("Role {name} not found"),
        ));
    }
    Ok(())
}

/// mongod's error for a role that does not exist.
pub fn not_found(name: &RoleName) -> MongoError {
    MongoError::new(
        ErrorCode::RoleNotFound,
        format!("Could not find role: {name}"),
    )
}

/// Deletes roles matching `filter` after pulling the roles that `pulled` matches (a
/// `{role, db}` or a `{db}` condition on `roles` elements) from every user and role.
/// Returns how many roles were deleted.
pub fn delete_and_pull(
    db: &Database,
    auth: &AuthConfig,
    filter: Document,
    pulled: Document,
) -> Result<i64, MongoError> {
    let referencing = doc! { "roles": { "$elemMatch": pulled.clone() } };
    let pull = Bson::Document(doc! { "$pull": { "roles": pulled } });
    for ns in [user_store::users_namespace(), roles_namespace()] {
        update(db, auth, &ns, referencing.clone(), pull.clone(), true)?;
    }
    user_store::delete_in(db, auth, &roles_namespace(), filter)
}

/// One update statement on an auth collection; the number of documents matched.
fn update(
    db: &Database,
    auth: &AuthConfig,
    ns: &Namespace,
    filter: Document,
    update: Bson,
    multi: bool,
) -> Result<i64, MongoError> {
    let op = UpdateOp {
        filter,
        update: UpdateSpec::parse_value(&update, None)?,
        multi,
        upsert: false,
        hint: None,
        vars: Default::default(),
    };
    let result = db.update(ns, &[op], true);
    auth.users_changed();
    let result = result?;
    if let Some((_, e)) = result.errors.into_iter().next() {
        return Err(e);
    }
    Ok(result.n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_are_stored_replaced_and_dropped_from_their_holders() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Database::open(dir.path(), shale_db::DbOptions::default()).expect("open");
        let auth = AuthConfig::default();
        let name = RoleName::new("r", "app");
        let role = doc! {"_id": name.id(), "role": "r", "db": "app", "privileges": [], "roles": []};
        insert(&db, &auth, role.clone()).expect("insert");
        let again = insert(&db, &auth, role.clone()).expect_err("exists");
        assert_eq!(
            (again.code.code(), again.message.as_str()),
            (51002, "Role \"r@app\" already exists")
        );
        let holder = doc! {"_id": "app.h", "role": "h", "db": "app", "privileges": [],
        "roles": [{"role": "r", "db": "app"}, {"role": "read", "db": "app"}]};
        insert(&db, &auth, holder).expect("holder");
        let user =
            doc! {"_id": "app.u", "user": "u", "db": "app", "roles": [{"role": "r", "db": "app"}]};
        user_store::insert(&db, &auth, user).expect("user");
        let missing = replace(
            &db,
            &auth,
            &RoleName::new("x", "app"),
            doc! {"_id": "app.x"},
        );
        assert_eq!(missing.map_err(|e| e.code.code()), Err(31));
        let n =
            delete_and_pull(&db, &auth, doc! {"_id": name.id()}, name.to_document()).expect("drop");
        assert_eq!(n, 1);
        assert_eq!(find(&db, &name).expect("find"), None);
        let holder = find(&db, &RoleName::new("h", "app"))
            .expect("find")
            .expect("holder");
        assert_eq!(holder.get_array("roles").map(Vec::len), Ok(1));
        let user = user_store::find(&db, &super::super::UserName::new("u", "app"))
            .expect("find")
            .expect("user");
        assert_eq!(user.get_array("roles").map(Vec::len), Ok(0));
    }
}
