//! Privileges: a resource pattern and the actions allowed on it, as mongod's authorization
//! model has them, and the privileges of mongod's built-in roles (`role_graph_builtin_roles`
//! in mongod 7.0), written as a table. This file answers "does this set of privileges allow
//! action A on resource R"; which actions a command needs lives in `command_actions`.
//! It never reads users or roles from storage.

use bson::{doc, Bson, Document};

/// What a command acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resource {
    /// The whole server (`{cluster: true}`).
    Cluster,
    /// A database as a whole.
    Database(String),
    /// One collection: database and collection name.
    Collection(String, String),
}

/// What a privilege covers, as mongod's `ResourcePattern`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Pattern {
    /// `{cluster: true}`.
    Cluster,
    /// `{anyResource: true}`: everything, system collections and the cluster included.
    AnyResource,
    /// `{db: "", collection: ""}`: every database and every non-system collection.
    AnyNormal,
    /// `{db: x, collection: ""}`: database x and its non-system collections.
    Database(String),
    /// `{db: "", collection: c}`: collection c of every database.
    CollectionInAnyDb(String),
    /// `{db: x, collection: c}`: one collection.
    Exact(String, String),
}

/// A pattern and the actions it allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Privilege {
    /// The resources.
    pub pattern: Pattern,
    /// The actions allowed on them (mongod's action names).
    pub actions: Vec<&'static str>,
}

/// Whether a collection name is a system collection (`system.*`), which database-wide
/// patterns do not cover.
fn is_system(coll: &str) -> bool {
    coll.starts_with("system.")
}

impl Pattern {
    /// Whether this pattern covers `resource`.
    pub fn covers(&self, resource: &Resource) -> bool {
        match (self, resource) {
            (Pattern::AnyResource, _) => true,
            (Pattern::Cluster, Resource::Cluster) => true,
            (Pattern::AnyNormal, Resource::Database(_)) => true,
            (Pattern::AnyNormal, Resource::Collection(_, c)) => !is_system(c),
            (Pattern::Database(d), Resource::Database(db)) => d == db,
            (Pattern::Database(d), Resource::Collection(db, c)) => d == db && !is_system(c),
            (Pattern::CollectionInAnyDb(c), Resource::Collection(_, coll)) => c == coll,
            (Pattern::Exact(d, c), Resource::Collection(db, coll)) => d == db && c == coll,
            _ => false,
        }
    }

    /// Whether this pattern grants anything inside database `db` (for the listings that show
    /// only what a user can see).
    pub fn touches_db(&self, db: &str) -> bool {
        match self {
            Pattern::AnyResource | Pattern::AnyNormal | Pattern::CollectionInAnyDb(_) => true,
            Pattern::Database(d) | Pattern::Exact(d, _) => d == db,
            Pattern::Cluster => false,
        }
    }

    /// The pattern as mongod writes it in `showPrivileges` output.
    pub fn to_document(&self) -> Document {
        match self {
            Pattern::Cluster => doc! { "cluster": true },
            Pattern::AnyResource => doc! { "anyResource": true },
            Pattern::AnyNormal => doc! { "db": "", "collection": "" },
            Pattern::Database(d) => doc! { "db": d, "collection": "" },
            Pattern::CollectionInAnyDb(c) => doc! { "db": "", "collection": c },
            Pattern::Exact(d, c) => doc! { "db": d, "collection": c },
        }
    }
}

impl Privilege {
    fn new(pattern: Pattern, actions: &[&'static str]) -> Privilege {
        Privilege {
            pattern,
            actions: actions.to_vec(),
        }
    }

    /// `{resource, actions}` as `connectionStatus` and `usersInfo` show it.
    pub fn to_document(&self) -> Document {
        let mut actions = self.actions.clone();
        actions.sort_unstable();
        actions.dedup();
        let actions: Vec<Bson> = actions.into_iter().map(Bson::from).collect();
        doc! { "resource": self.pattern.to_document(), "actions": actions }
    }
}

/// Whether `privileges` allow `action` on `resource`.
/// (`anyAction`, which user-defined roles may grant, allows every action.)
pub fn allows(privileges: &[Privilege], resource: &Resource, action: &str) -> bool {
    privileges.iter().any(|p| {
        (p.actions.contains(&action) || p.actions.contains(&super::action_types::ANY_ACTION))
            && p.pattern.covers(resource)
    })
}

/// Merges privileges on the same pattern, so each pattern appears once (mongod's
/// `Privilege::addPrivilegeToPrivilegeVector`), sorted by pattern.
pub fn merge(privileges: Vec<Privilege>) -> Vec<Privilege> {
    let mut merged: Vec<Privilege> = Vec::new();
    for p in privileges {
        match merged.iter_mut().find(|m| m.pattern == p.pattern) {
            Some(m) => {
                for a in p.actions {
                    if !m.actions.contains(&a) {
                        m.actions.push(a);
                    }
                }
            }
            None => merged.push(p),
        }
    }
    merged.sort_by(|a, b| a.pattern.cmp(&b.pattern));
    merged
}

/// `read`'s actions on a database's collections.
pub const READ: &[&str] = &[
    "changeStream",
    "collStats",
    "dbHash",
    "dbStats",
    "find",
    "killCursors",
    "listCollections",
    "listIndexes",
    "listSearchIndexes",
    "planCacheRead",
];

/// What `readWrite` adds to `read`.
pub const WRITE: &[&str] = &[
    "convertToCapped",
    "createCollection",
    "createIndex",
    "createSearchIndexes",
    "dropCollection",
    "dropIndex",
    "dropSearchIndex",
    "insert",
    "remove",
    "renameCollectionSameDB",
    "update",
    "updateSearchIndex",
];

/// `dbAdmin`'s actions on a database's collections.
pub const DB_ADMIN: &[&str] = &[
    "analyze",
    "bypassDocumentValidation",
    "collMod",
    "collStats",
    "compact",
    "convertToCapped",
    "createCollection",
    "createIndex",
    "dbStats",
    "dropCollection",
    "dropDatabase",
    "dropIndex",
    "enableProfiler",
    "listCollections",
    "listIndexes",
    "planCacheIndexFilter",
    "planCacheRead",
    "planCacheWrite",
    "reIndex",
    "renameCollectionSameDB",
    "storageDetails",
    "validate",
];

/// `dbAdmin`'s actions on `system.profile`.
pub const DB_ADMIN_PROFILE: &[&str] = &[
    "changeStream",
    "collStats",
    "convertToCapped",
    "createCollection",
    "dbHash",
    "dbStats",
    "dropCollection",
    "find",
    "killCursors",
    "listCollections",
    "listIndexes",
    "planCacheRead",
];

/// `userAdmin`'s actions on a database.
pub const USER_ADMIN: &[&str] = &[
    "changeCustomData",
    "changePassword",
    "createRole",
    "createUser",
    "dropRole",
    "dropUser",
    "grantRole",
    "revokeRole",
    "setAuthenticationRestriction",
    "viewRole",
    "viewUser",
];

/// `clusterMonitor`'s actions on the cluster.
pub const CLUSTER_MONITOR: &[&str] = &[
    "checkFreeMonitoringStatus",
    "connPoolStats",
    "getCmdLineOpts",
    "getDefaultRWConcern",
    "getLog",
    "getParameter",
    "getShardMap",
    "hostInfo",
    "inprog",
    "listDatabases",
    "listSessions",
    "listShards",
    "netstat",
    "operationMetrics",
    "replSetGetConfig",
    "replSetGetStatus",
    "serverStatus",
    "setFreeMonitoring",
    "shardingState",
    "top",
    "useUUID",
];

/// `clusterMonitor`'s actions on every database and non-system collection.
pub const CLUSTER_MONITOR_ANY: &[&str] = &["collStats", "dbStats", "getShardVersion", "indexStats"];

/// `clusterManager`'s actions on the cluster.
pub const CLUSTER_MANAGER: &[&str] = &[
    "addShard",
    "appendOplogNote",
    "applicationMessage",
    "cleanupOrphaned",
    "flushRouterConfig",
    "getClusterParameter",
    "getDefaultRWConcern",
    "listSessions",
    "listShards",
    "removeShard",
    "replSetConfigure",
    "replSetGetConfig",
    "replSetGetStatus",
    "replSetStateChange",
    "resync",
    "setClusterParameter",
    "setDefaultRWConcern",
    "setFeatureCompatibilityVersion",
    "setFreeMonitoring",
];

/// `clusterManager`'s actions on every database and non-system collection.
pub const CLUSTER_MANAGER_ANY: &[&str] = &[
    "analyzeShardKey",
    "enableSharding",
    "moveChunk",
    "refineCollectionShardKey",
    "reshardCollection",
    "splitChunk",
    "splitVector",
];

/// `hostManager`'s actions on the cluster.
pub const HOST_MANAGER: &[&str] = &[
    "applicationMessage",
    "connPoolSync",
    "flushRouterConfig",
    "fsync",
    "invalidateUserCache",
    "killAnyCursor",
    "killAnySession",
    "killop",
    "logRotate",
    "resync",
    "setParameter",
    "shutdown",
    "touch",
    "unlock",
];

/// `hostManager`'s actions on every database and non-system collection.
pub const HOST_MANAGER_ANY: &[&str] = &["killCursors"];

/// `backup`'s actions on the cluster.
pub const BACKUP_CLUSTER: &[&str] = &[
    "appendOplogNote",
    "getParameter",
    "listDatabases",
    "serverStatus",
];

/// `backup`'s actions on every database and non-system collection.
pub const BACKUP_ANY: &[&str] = &[
    "collStats",
    "dbHash",
    "find",
    "listCollections",
    "listIndexes",
    "listSearchIndexes",
];

/// `restore`'s actions on every database and non-system collection.
pub const RESTORE_ANY: &[&str] = &[
    "bypassDocumentValidation",
    "changeCustomData",
    "changePassword",
    "collMod",
    "convertToCapped",
    "createCollection",
    "createIndex",
    "createRole",
    "createUser",
    "dropCollection",
    "dropRole",
    "dropUser",
    "grantRole",
    "insert",
    "revokeRole",
    "viewRole",
    "viewUser",
];

/// What the user administration roles may do with `admin`'s user and role collections
/// (`backup` only reads them).
pub const AUTH_COLLECTIONS: &[&str] = &[
    "collStats",
    "createIndex",
    "dbHash",
    "dropIndex",
    "find",
    "insert",
    "killCursors",
    "listCollections",
    "listIndexes",
    "planCacheRead",
    "remove",
    "update",
];

/// `userAdminAnyDatabase`'s actions on the cluster.
pub const USER_ADMIN_ANY_CLUSTER: &[&str] = &[
    "authSchemaUpgrade",
    "invalidateUserCache",
    "listDatabases",
    "viewRole",
    "viewUser",
];

/// The privileges of built-in role `role` defined in database `db`, or `None` when no such
/// built-in role exists there.
pub fn builtin(role: &str, db: &str) -> Option<Vec<Privilege>> {
    let on_db = || Pattern::Database(db.to_owned());
    let privileges = match role {
        "read" => read(db),
        "readWrite" => read_write(db),
        "dbAdmin" => db_admin(on_db(), db),
        "userAdmin" => vec![Privilege::new(on_db(), USER_ADMIN)],
        "dbOwner" => {
            let mut p = read_write(db);
            p.extend(db_admin(on_db(), db));
            p.push(Privilege::new(on_db(), USER_ADMIN));
            p
        }
        _ if db != "admin" => return None,
        _ => admin_role(role)?,
    };
    Some(merge(privileges))
}

/// The roles that exist only in `admin`.
fn admin_role(role: &str) -> Option<Vec<Privilege>> {
    let privileges = match role {
        "clusterMonitor" => cluster_monitor(),
        "clusterManager" => cluster_manager(),
        "hostManager" => host_manager(),
        "clusterAdmin" => cluster_admin(),
        "backup" => backup(),
        "restore" => restore(),
        "readAnyDatabase" => any_database(&[READ]),
        "readWriteAnyDatabase" => any_database(&[READ, WRITE]),
        "dbAdminAnyDatabase" => {
            let mut p = db_admin(Pattern::AnyNormal, "");
            p.push(Privilege::new(Pattern::Cluster, &["listDatabases"]));
            p
        }
        "userAdminAnyDatabase" => user_admin_any_database(),
        "root" => root(),
        _ => return None,
    };
    Some(privileges)
}

fn read(db: &str) -> Vec<Privilege> {
    vec![
        Privilege::new(Pattern::Database(db.to_owned()), READ),
        Privilege::new(Pattern::Exact(db.to_owned(), "system.js".into()), READ),
    ]
}

fn read_write(db: &str) -> Vec<Privilege> {
    let mut p = read(db);
    p.push(Privilege::new(Pattern::Database(db.to_owned()), WRITE));
    p.push(Privilege::new(
        Pattern::Exact(db.to_owned(), "system.js".into()),
        WRITE,
    ));
    p
}

/// `dbAdmin` on `pattern` (a database, or every database for `dbAdminAnyDatabase`); `db`
/// names the database whose `system.profile` it may read ("" for any).
fn db_admin(pattern: Pattern, db: &str) -> Vec<Privilege> {
    let profile = if db.is_empty() {
        Pattern::CollectionInAnyDb("system.profile".into())
    } else {
        Pattern::Exact(db.to_owned(), "system.profile".into())
    };
    vec![
        Privilege::new(pattern, DB_ADMIN),
        Privilege::new(profile, DB_ADMIN_PROFILE),
    ]
}

/// The `*AnyDatabase` data roles: `groups` of actions on every normal resource and on
/// `system.js`, with `listDatabases` on the cluster.
fn any_database(groups: &[&[&'static str]]) -> Vec<Privilege> {
    let mut p = Vec::new();
    for group in groups {
        p.push(Privilege::new(Pattern::AnyNormal, group));
        p.push(Privilege::new(
            Pattern::CollectionInAnyDb("system.js".into()),
            group,
        ));
    }
    p.push(Privilege::new(Pattern::Cluster, &["listDatabases"]));
    p
}

fn auth_collections(actions: &[&'static str]) -> Vec<Privilege> {
    ["system.users", "system.roles", "system.version"]
        .iter()
        .map(|c| Privilege::new(Pattern::Exact("admin".into(), (*c).into()), actions))
        .collect()
}

fn cluster_monitor() -> Vec<Privilege> {
    vec![
        Privilege::new(Pattern::Cluster, CLUSTER_MONITOR),
        Privilege::new(Pattern::AnyNormal, CLUSTER_MONITOR_ANY),
        Privilege::new(
            Pattern::Exact("local".into(), "system.replset".into()),
            &["find"],
        ),
        Privilege::new(
            Pattern::CollectionInAnyDb("system.profile".into()),
            &["find"],
        ),
    ]
}

fn cluster_manager() -> Vec<Privilege> {
    vec![
        Privilege::new(Pattern::Cluster, CLUSTER_MANAGER),
        Privilege::new(Pattern::AnyNormal, CLUSTER_MANAGER_ANY),
    ]
}

fn host_manager() -> Vec<Privilege> {
    vec![
        Privilege::new(Pattern::Cluster, HOST_MANAGER),
        Privilege::new(Pattern::AnyNormal, HOST_MANAGER_ANY),
    ]
}

fn cluster_admin() -> Vec<Privilege> {
    let mut p = cluster_manager();
    p.extend(cluster_monitor());
    p.extend(host_manager());
    p.push(Privilege::new(Pattern::AnyNormal, &["dropDatabase"]));
    p
}

fn backup() -> Vec<Privilege> {
    let mut p = vec![
        Privilege::new(Pattern::Cluster, BACKUP_CLUSTER),
        Privilege::new(Pattern::AnyNormal, BACKUP_ANY),
        Privilege::new(Pattern::CollectionInAnyDb("system.js".into()), BACKUP_ANY),
    ];
    p.extend(auth_collections(&["find"]));
    p
}

fn restore() -> Vec<Privilege> {
    let mut p = vec![
        Privilege::new(Pattern::Cluster, &["getParameter"]),
        Privilege::new(Pattern::AnyNormal, RESTORE_ANY),
        Privilege::new(Pattern::CollectionInAnyDb("system.js".into()), RESTORE_ANY),
    ];
    p.extend(auth_collections(&[
        "createCollection",
        "createIndex",
        "find",
        "insert",
        "remove",
        "update",
    ]));
    p
}

fn user_admin_any_database() -> Vec<Privilege> {
    let mut p = vec![
        Privilege::new(Pattern::AnyNormal, USER_ADMIN),
        Privilege::new(Pattern::Cluster, USER_ADMIN_ANY_CLUSTER),
    ];
    p.extend(auth_collections(AUTH_COLLECTIONS));
    p
}

/// `root`: `readWriteAnyDatabase`, `dbAdminAnyDatabase`, `userAdminAnyDatabase`,
/// `clusterAdmin`, `restore` and `backup`, plus `validate` on system collections.
#[allow(clippy::expect_used, reason = "root's roles are all built-in")]
fn root() -> Vec<Privilege> {
    let mut p = Vec::new();
    for role in [
        "readWriteAnyDatabase",
        "dbAdminAnyDatabase",
        "userAdminAnyDatabase",
        "clusterAdmin",
        "restore",
        "backup",
    ] {
        p.extend(admin_role(role).expect("root's roles are built-in"));
    }
    p.push(Privilege::new(Pattern::AnyResource, &["validate"]));
    p
}

#[cfg(test)]
#[path = "privileges_tests.rs"]
mod tests;
