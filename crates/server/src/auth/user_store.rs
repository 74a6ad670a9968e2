//! Users as documents of `admin.system.users`, read and written through `shale_db`'s
//! ordinary collection API (so they are in the engine's log and checkpoints like any data).
//! One document per user, keyed `_id: "db.user"`, in mongod's shape (docs/auth.md). Every
//! write bumps the server's users generation so connections re-check their logins.
//! It knows no passwords: callers hand it documents with keys already derived.

use super::{AuthConfig, UserName};
use bson::{doc, Bson, Document, RawDocumentBuf};
use shale_db::{Database, DeleteOp, FindSpec, Namespace, UpdateOp};
use shale_doc::{ErrorCode, MongoError, UpdateSpec};

/// `admin.system.users`.
pub fn users_namespace() -> Namespace {
    Namespace {
        db: "admin".to_owned(),
        coll: "system.users".to_owned(),
    }
}

/// The stored document of `name`, if the user exists.
pub fn find(db: &Database, name: &UserName) -> Result<Option<Document>, MongoError> {
    let found = list(db, doc! { "_id": name.id() })?;
    Ok(found.into_iter().next())
}

/// Users matching `filter`, ordered by database then name.
pub fn list(db: &Database, filter: Document) -> Result<Vec<Document>, MongoError> {
    list_in(db, &users_namespace(), filter, doc! { "db": 1, "user": 1 })
}

/// The documents of auth collection `ns` matching `filter`, in `sort` order (users and
/// roles: `role_store.rs` shares this).
pub(super) fn list_in(
    db: &Database,
    ns: &Namespace,
    filter: Document,
    sort: Document,
) -> Result<Vec<Document>, MongoError> {
    let spec = FindSpec {
        filter,
        sort: Some(sort),
        ..FindSpec::default()
    };
    let mut query = db.find(ns, &spec)?;
    let mut out = Vec::new();
    while let Some(raw) = query.next_doc()? {
        out.push(raw.to_document().map_err(|e| {
            MongoError::new(
                ErrorCode::InternalError,
                format!("a document of {ns} does not decode: {e}"),
            )
        })?);
    }
    Ok(out)
}

/// Whether any user exists (the localhost exception ends with the first).
pub fn any(db: &Database) -> Result<bool, MongoError> {
    any_in(db, &users_namespace())
}

/// Whether auth collection `ns` holds any document.
pub(super) fn any_in(db: &Database, ns: &Namespace) -> Result<bool, MongoError> {
    Ok(db.count(
        ns,
        &Document::new(),
        0,
        Some(1),
        None,
        &shale_doc::Variables::new(),
    )? > 0)
}

/// Stores a new user; `Location51003` when it exists already.
pub fn insert(db: &Database, auth: &AuthConfig, user: Document) -> Result<(), MongoError> {
    let raw = RawDocumentBuf::from_document(&user)
        .map_err(|e| MongoError::new(ErrorCode::BadValue, format!("user document: {e}")))?;
    let result = db.insert(&users_namespace(), &[raw], true);
    auth.users_changed();
    let result = result?;
    match result.errors.into_iter().next() {
        Some((_, e)) if e.code == ErrorCode::DuplicateKey => Err(exists(&user)),
        Some((_, e)) => Err(e),
        None => Ok(()),
    }
}

fn exists(user: &Document) -> MongoError {
    let name = UserName::new(
        user.get_str("user").unwrap_or_default(),
        user.get_str("db").unwrap_or_default(),
    );
    MongoError::new(
        ErrorCode::Location51003,
        format!("User \"{name}\" already exists"),
    )
}

/// Replaces the stored document of `name`; `UserNotFound` when there is none.
pub fn replace(
    db: &Database,
    auth: &AuthConfig,
    name: &UserName,
    user: Document,
) -> Result<(), MongoError> {
    let op = UpdateOp {
        filter: doc! { "_id": name.id() },
        update: UpdateSpec::parse_value(&Bson::Document(user), None)?,
        multi: false,
        upsert: false,
        hint: None,
        vars: Default::default(),
    };
    let result = db.update(&users_namespace(), &[op], true);
    auth.users_changed();
    let result = result?;
    if let Some((_, e)) = result.errors.into_iter().next() {
        return Err(e);
    }
    if result.n == 0 {
        return Err(not_found(name));
    }
    Ok(())
}

/// mongod's error for a user that does not exist.
pub fn not_found(name: &UserName) -> MongoError {
    MongoError::new(ErrorCode::UserNotFound, format!("User '{name}' not found"))
}

/// Deletes the users matching `filter` and returns how many there were.
pub fn delete(db: &Database, auth: &AuthConfig, filter: Document) -> Result<i64, MongoError> {
    delete_in(db, auth, &users_namespace(), filter)
}

/// Deletes the documents of auth collection `ns` matching `filter` (telling `auth` its
/// users or roles changed) and returns how many there were.
pub(super) fn delete_in(
    db: &Database,
    auth: &AuthConfig,
    ns: &Namespace,
    filter: Document,
) -> Result<i64, MongoError> {
    let op = DeleteOp {
        filter,
        limit_one: false,
        hint: None,
        vars: Default::default(),
    };
    let result = db.delete(ns, &[op], true);
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

    fn open() -> (tempfile::TempDir, Database) {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Database::open(dir.path(), shale_db::DbOptions::default()).expect("open");
        (dir, db)
    }

    #[test]
    fn users_are_stored_found_replaced_and_deleted() {
        let (_dir, db) = open();
        let auth = AuthConfig::default();
        let name = UserName::new("ann", "app");
        let user = doc! { "_id": name.id(), "user": "ann", "db": "app", "roles": [] };
        assert!(!any(&db).expect("any"));
        insert(&db, &auth, user.clone()).expect("insert");
        assert!(any(&db).expect("any"));
        let again = insert(&db, &auth, user.clone()).expect_err("exists");
        assert_eq!(again.code.code(), 51003);
        assert_eq!(again.message, "User \"ann@app\" already exists");
        assert_eq!(find(&db, &name).expect("find"), Some(user.clone()));
        let mut changed = user;
        changed.insert("roles", vec![Bson::String("read".into())]);
        replace(&db, &auth, &name, changed.clone()).expect("replace");
        assert_eq!(find(&db, &name).expect("find"), Some(changed));
        let missing = replace(
            &db,
            &auth,
            &UserName::new("bob", "app"),
            doc! {"_id": "app.bob"},
        );
        assert_eq!(missing.map_err(|e| e.code.code()), Err(11));
        assert_eq!(delete(&db, &auth, doc! {"db": "app"}).expect("delete"), 1);
        assert_eq!(delete(&db, &auth, doc! {"db": "app"}).expect("delete"), 0);
        assert!(auth.users_generation() >= 5);
    }
}
