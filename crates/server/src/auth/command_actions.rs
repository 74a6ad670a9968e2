//! Which actions each command needs on which resource, as mongod's commands declare them
//! (`checkAuthForOperation` / `Invocation::doCheckAuthorization`). The table is by command
//! name; the arguments only matter where mongod looks at them too (an upsert also needs
//! `insert`, an aggregation's `$lookup` reads and its `$out` writes other collections,
//! `bypassDocumentValidation`, the roles a user command grants). Commands answered here with
//! no requirement run for any authenticated user. Cursor ownership (`getMore`,
//! `killCursors`) and the filtered listings are checked in `authorize`, not here.

use super::privileges::Resource;
use bson::{Bson, Document};

/// What a command needs: every (resource, action) pair must be allowed.
pub type Needs = Vec<(Resource, &'static str)>;

/// How a command is authorized.
#[derive(Debug, Clone, PartialEq)]
pub enum Rule {
    /// Runs for any authenticated user (handshake, sessions, transactions' ends, ...).
    Anyone,
    /// Needs every listed action on its resource.
    Actions(Needs),
    /// `listDatabases`: without the action it lists only what the user may see.
    ListDatabases,
    /// `listCollections` with `authorizedCollections` and `nameOnly`: any privilege in the db.
    AnyInDatabase,
    /// `usersInfo`: `viewUser` on each database asked about, unless asking about oneself.
    UsersInfo(Needs),
    /// `rolesInfo`: `viewRole` on each database asked about, unless the user holds the roles.
    RolesInfo(Needs),
    /// `getMore`: only the users that opened the cursor.
    CursorOwner,
}

/// Commands any authenticated user may run, besides those that need no user at all
/// (`gate::requires_authentication`).
const ANYONE: &[&str] = &[
    "getLastError",
    "getlasterror",
    "resetError",
    "reseterror",
    "listCommands",
    "startSession",
    "endSessions",
    "refreshSessions",
    "killSessions",
    "commitTransaction",
    "abortTransaction",
    "beginTransaction",
    "rollbackTransaction",
    // Test commands run only when enabled on the command line; mongod checks nothing more.
    "configureFailPoint",
];

/// Commands that need one action on the cluster.
const ON_CLUSTER: &[(&str, &str)] = &[
    ("serverStatus", "serverStatus"),
    ("top", "top"),
    ("hostInfo", "hostInfo"),
    ("getParameter", "getParameter"),
    ("setParameter", "setParameter"),
    ("getCmdLineOpts", "getCmdLineOpts"),
    ("getLog", "getLog"),
    ("killAllSessions", "killAnySession"),
    ("killAllSessionsByPattern", "killAnySession"),
    ("replSetGetStatus", "replSetGetStatus"),
    ("replSetGetConfig", "replSetGetConfig"),
    ("replSetInitiate", "replSetConfigure"),
    ("replSetReconfig", "replSetConfigure"),
    ("killOp", "killop"),
    ("fsync", "fsync"),
    ("fsyncUnlock", "unlock"),
];

/// Commands that need one action on the database they run on.
const ON_DATABASE: &[(&str, &str)] = &[
    ("dropDatabase", "dropDatabase"),
    ("dbStats", "dbStats"),
    ("dbstats", "dbStats"),
    ("listCollections", "listCollections"),
    ("dropUser", "dropUser"),
    ("dropAllUsersFromDatabase", "dropUser"),
    ("dropRole", "dropRole"),
    ("dropAllRolesFromDatabase", "dropRole"),
    ("profile", "enableProfiler"),
];

/// Commands that need actions on the collection named by their first field.
const ON_COLLECTION: &[(&str, &[&str])] = &[
    ("find", &["find"]),
    ("count", &["find"]),
    ("distinct", &["find"]),
    ("delete", &["remove"]),
    ("create", &["createCollection"]),
    ("drop", &["dropCollection"]),
    ("collMod", &["collMod"]),
    ("createIndexes", &["createIndex"]),
    ("listIndexes", &["listIndexes"]),
    ("dropIndexes", &["dropIndex"]),
    ("deleteIndexes", &["dropIndex"]),
    ("collStats", &["collStats"]),
    ("validate", &["validate"]),
    ("killCursors", &["killCursors"]),
    ("compact", &["compact"]),
    (
        "compactStructuredEncryptionData",
        &["compactStructuredEncryptionData"],
    ),
    (
        "cleanupStructuredEncryptionData",
        &["cleanupStructuredEncryptionData"],
    ),
];

/// The rule for command `name` with arguments `body` run on database `db`. `None` for a
/// command this table does not know: the caller refuses it (fail closed).
pub fn rule(name: &str, db: &str, body: &Document) -> Option<Rule> {
    if ANYONE.contains(&name) || !super::gate::requires_authentication(name) {
        return Some(Rule::Anyone);
    }
    if let Some((_, action)) = ON_CLUSTER.iter().find(|(n, _)| *n == name) {
        return Some(Rule::Actions(vec![(Resource::Cluster, action)]));
    }
    if name == "listCollections" && authorized_names_only(body) {
        return Some(Rule::AnyInDatabase);
    }
    if let Some((_, action)) = ON_DATABASE.iter().find(|(n, _)| *n == name) {
        return Some(Rule::Actions(vec![(database(db), action)]));
    }
    if let Some((_, actions)) = ON_COLLECTION.iter().find(|(n, _)| *n == name) {
        let target = collection(db, body, name);
        let mut needs: Needs = actions.iter().map(|a| (target.clone(), *a)).collect();
        bypass(body, &target, &mut needs);
        return Some(Rule::Actions(needs));
    }
    special(name, db, body)
}

/// Commands whose needs depend on their arguments.
fn special(name: &str, db: &str, body: &Document) -> Option<Rule> {
    let rule = match name {
        "getMore" => Rule::CursorOwner,
        // `$ownOps: true` lists only the caller's own operations: no privilege needed.
        "currentOp" if truthy(body.get("$ownOps")) => Rule::Actions(Vec::new()),
        "currentOp" => Rule::Actions(vec![(Resource::Cluster, "inprog")]),
        "dataSize" | "datasize" => Rule::Actions(vec![(full_namespace(db, body, name), "find")]),
        "listDatabases" => Rule::ListDatabases,
        "insert" => write(db, body, name, &["insert"]),
        "update" => write(db, body, name, &update_actions(body)),
        "findAndModify" | "findandmodify" => write(db, body, name, &find_and_modify(body)),
        "aggregate" => Rule::Actions(super::pipeline_actions::needs(db, body)),
        "explain" => return explain(db, body),
        "renameCollection" => Rule::Actions(rename(body)),
        "createUser" => Rule::Actions(granting(db, body, "createUser", "roles")),
        "updateUser" => Rule::Actions(update_user(db, body)),
        "grantRolesToUser" => Rule::Actions(roles_of(db, body, "grantRole")),
        "revokeRolesFromUser" => Rule::Actions(roles_of(db, body, "revokeRole")),
        "usersInfo" => Rule::UsersInfo(users_info(db, body)),
        "createRole" => {
            let mut needs = granting(db, body, "createRole", "roles");
            needs.extend(privileges_of(body, "grantRole"));
            Rule::Actions(needs)
        }
        "updateRole" => Rule::Actions(update_role(db, body)),
        "grantRolesToRole" => Rule::Actions(roles_of(db, body, "grantRole")),
        "revokeRolesFromRole" => Rule::Actions(roles_of(db, body, "revokeRole")),
        "grantPrivilegesToRole" => Rule::Actions(privileges_change(db, body, "grantRole")),
        "revokePrivilegesFromRole" => Rule::Actions(privileges_change(db, body, "revokeRole")),
        "rolesInfo" => Rule::RolesInfo(roles_info(db, body)),
        _ => return None,
    };
    Some(rule)
}

/// `authorizedCollections: true` with `nameOnly: true`.
fn authorized_names_only(body: &Document) -> bool {
    truthy(body.get("authorizedCollections")) && truthy(body.get("nameOnly"))
}

pub(crate) fn truthy(v: Option<&Bson>) -> bool {
    match v {
        Some(Bson::Boolean(b)) => *b,
        Some(Bson::Int32(n)) => *n != 0,
        Some(Bson::Int64(n)) => *n != 0,
        Some(Bson::Double(n)) => *n != 0.0,
        _ => false,
    }
}

pub(crate) fn database(db: &str) -> Resource {
    Resource::Database(db.to_owned())
}

/// The collection a command names in its first field; a database resource when that is not
/// a name (the command fails on its own argument after the check).
pub(crate) fn collection(db: &str, body: &Document, name: &str) -> Resource {
    match body.get(name) {
        Some(Bson::String(coll)) => Resource::Collection(db.to_owned(), coll.clone()),
        _ => database(db),
    }
}

/// The collection a command names by its full namespace (`dataSize: "db.coll"`).
fn full_namespace(db: &str, body: &Document, name: &str) -> Resource {
    match body
        .get(name)
        .and_then(Bson::as_str)
        .and_then(|s| s.split_once('.'))
    {
        Some((d, c)) => Resource::Collection(d.to_owned(), c.to_owned()),
        None => database(db),
    }
}

/// `bypassDocumentValidation: true` needs its own action on the target.
fn bypass(body: &Document, target: &Resource, needs: &mut Needs) {
    if truthy(body.get("bypassDocumentValidation")) {
        needs.push((target.clone(), "bypassDocumentValidation"));
    }
}

fn write(db: &str, body: &Document, name: &str, actions: &[&'static str]) -> Rule {
    let target = collection(db, body, name);
    let mut needs: Needs = actions.iter().map(|a| (target.clone(), *a)).collect();
    bypass(body, &target, &mut needs);
    Rule::Actions(needs)
}

/// `update`: `update`, and `insert` when any statement upserts.
fn update_actions(body: &Document) -> Vec<&'static str> {
    let upserts = match body.get("updates") {
        Some(Bson::Array(updates)) => updates.iter().any(|u| match u {
            Bson::Document(d) => truthy(d.get("upsert")),
            _ => false,
        }),
        _ => false,
    };
    if upserts {
        vec!["update", "insert"]
    } else {
        vec!["update"]
    }
}

/// `findAndModify`: `find` and `remove`, or `find` and `update` (+ `insert` to upsert).
fn find_and_modify(body: &Document) -> Vec<&'static str> {
    if truthy(body.get("remove")) {
        vec!["find", "remove"]
    } else if truthy(body.get("upsert")) {
        vec!["find", "update", "insert"]
    } else {
        vec!["find", "update"]
    }
}

/// `explain` needs what the explained command needs.
fn explain(db: &str, body: &Document) -> Option<Rule> {
    let inner = match body.get("explain") {
        Some(Bson::Document(d)) => d,
        _ => return Some(Rule::Actions(Vec::new())),
    };
    let name = inner.keys().next()?;
    match rule(name, db, inner)? {
        Rule::Actions(needs) => Some(Rule::Actions(needs)),
        _ => None,
    }
}

/// `renameCollection: "db.a", to: "db2.b"` (run on `admin`): within a database
/// `renameCollectionSameDB` (and `dropCollection` on the target with `dropTarget`); across
/// databases `find`, `dropCollection` on the source and `insert`, `createIndex` on the
/// target.
fn rename(body: &Document) -> Needs {
    let source = namespace_string(body.get("renameCollection"));
    let target = namespace_string(body.get("to"));
    let (Some(source), Some(target)) = (source, target) else {
        return vec![(Resource::Cluster, "renameCollection")];
    };
    let mut needs = Vec::new();
    let same_db = matches!((&source, &target),
        (Resource::Collection(a, _), Resource::Collection(b, _)) if a == b);
    if same_db {
        needs.push((source, "renameCollectionSameDB"));
    } else {
        needs.extend([(source.clone(), "find"), (source, "dropCollection")]);
        needs.extend([(target.clone(), "insert"), (target.clone(), "createIndex")]);
    }
    if truthy(body.get("dropTarget")) {
        needs.push((target, "dropCollection"));
    }
    needs
}

/// A `db.collection` string as a collection resource.
fn namespace_string(v: Option<&Bson>) -> Option<Resource> {
    let Some(Bson::String(ns)) = v else {
        return None;
    };
    let (db, coll) = ns.split_once('.')?;
    Some(Resource::Collection(db.to_owned(), coll.to_owned()))
}

/// `action` on the database, plus `grantRole` on each database whose roles `field` grants.
fn granting(db: &str, body: &Document, action: &'static str, field: &str) -> Needs {
    let mut needs = vec![(database(db), action)];
    for role_db in role_databases(db, body.get(field)) {
        needs.push((database(&role_db), "grantRole"));
    }
    needs
}

/// `grantRolesToUser`/`revokeRolesFromUser`: `action` on each role's database.
fn roles_of(db: &str, body: &Document, action: &'static str) -> Needs {
    let dbs = role_databases(db, body.get("roles"));
    if dbs.is_empty() {
        return vec![(database(db), action)];
    }
    dbs.iter().map(|d| (database(d), action)).collect()
}

/// The databases of the roles in a `roles` array (strings are roles of `db`).
fn role_databases(db: &str, roles: Option<&Bson>) -> Vec<String> {
    let Some(Bson::Array(items)) = roles else {
        return Vec::new();
    };
    let mut dbs: Vec<String> = Vec::new();
    for item in items {
        let role_db = match item {
            Bson::Document(d) => d.get_str("db").unwrap_or(db).to_owned(),
            _ => db.to_owned(),
        };
        if !dbs.contains(&role_db) {
            dbs.push(role_db);
        }
    }
    dbs
}

/// `updateUser`: an action per field changed.
fn update_user(db: &str, body: &Document) -> Needs {
    let mut needs = Vec::new();
    if body.contains_key("pwd") || body.contains_key("mechanisms") {
        needs.push((database(db), "changePassword"));
    }
    if body.contains_key("customData") {
        needs.push((database(db), "changeCustomData"));
    }
    if body.contains_key("authenticationRestrictions") {
        needs.push((database(db), "setAuthenticationRestriction"));
    }
    if body.contains_key("roles") {
        needs.push((database(db), "revokeRole"));
        for role_db in role_databases(db, body.get("roles")) {
            needs.push((database(&role_db), "grantRole"));
        }
    }
    needs
}

/// `action` on the database of each privilege in the `privileges` array (`admin` for the
/// cluster and for patterns over every database), as mongod's
/// `checkAuthorizedToGrantPrivilege`.
fn privileges_of(body: &Document, action: &'static str) -> Needs {
    let mut dbs: Vec<String> = Vec::new();
    if let Some(Bson::Array(items)) = body.get("privileges") {
        for resource in items
            .iter()
            .filter_map(Bson::as_document)
            .filter_map(|p| p.get_document("resource").ok())
        {
            let db = match resource.get_str("db") {
                Ok(d) if !d.is_empty() => d.to_owned(),
                _ => "admin".to_owned(),
            };
            if !dbs.contains(&db) {
                dbs.push(db);
            }
        }
    }
    dbs.iter().map(|d| (database(d), action)).collect()
}

/// `grantPrivilegesToRole`/`revokePrivilegesFromRole`: `action` where each privilege
/// points, or on the command's database when none is given.
fn privileges_change(db: &str, body: &Document, action: &'static str) -> Needs {
    let needs = privileges_of(body, action);
    if needs.is_empty() {
        return vec![(database(db), action)];
    }
    needs
}

/// `updateRole`: revoking the roles and privileges it replaces, granting the new ones, and
/// `setAuthenticationRestriction` for restrictions.
fn update_role(db: &str, body: &Document) -> Needs {
    let mut needs = Vec::new();
    if body.contains_key("roles") || body.contains_key("privileges") {
        needs.push((database(db), "revokeRole"));
    }
    for role_db in role_databases(db, body.get("roles")) {
        needs.push((database(&role_db), "grantRole"));
    }
    if body.contains_key("privileges") {
        needs.extend(privileges_of(body, "grantRole"));
    }
    if body.contains_key("authenticationRestrictions") {
        needs.push((database(db), "setAuthenticationRestriction"));
    }
    if needs.is_empty() {
        needs.push((database(db), "revokeRole"));
    }
    needs
}

/// `rolesInfo`: `viewRole` on each database asked about.
fn roles_info(db: &str, body: &Document) -> Needs {
    let mut dbs = match body.get("rolesInfo") {
        Some(Bson::Document(d)) => vec![d.get_str("db").unwrap_or(db).to_owned()],
        Some(Bson::Array(items)) => items
            .iter()
            .map(|i| match i {
                Bson::Document(d) => d.get_str("db").unwrap_or(db).to_owned(),
                _ => db.to_owned(),
            })
            .collect(),
        _ => vec![db.to_owned()],
    };
    dbs.dedup();
    dbs.iter().map(|d| (database(d), "viewRole")).collect()
}

/// `usersInfo`: `viewUser` on each database asked about; `forAllDBs` on the cluster.
fn users_info(db: &str, body: &Document) -> Needs {
    let dbs = match body.get("usersInfo") {
        Some(Bson::Document(d)) if truthy(d.get("forAllDBs")) => {
            return vec![(Resource::Cluster, "viewUser")]
        }
        Some(Bson::Document(d)) => vec![d.get_str("db").unwrap_or(db).to_owned()],
        Some(Bson::Array(items)) => items
            .iter()
            .map(|i| match i {
                Bson::Document(d) => d.get_str("db").unwrap_or(db).to_owned(),
                _ => db.to_owned(),
            })
            .collect(),
        _ => vec![db.to_owned()],
    };
    dbs.iter().map(|d| (database(d), "viewUser")).collect()
}

/// Every command name this table decides (for the test that each served command is in it).
#[cfg(test)]
pub fn decides(name: &str) -> bool {
    rule(name, "test", &bson::doc! { name: "c" }).is_some()
}

#[cfg(test)]
#[path = "command_actions_tests.rs"]
mod tests;
