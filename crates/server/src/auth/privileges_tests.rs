//! The built-in roles' privileges: what each allows and refuses on which resources.

use super::*;

fn coll(db: &str, c: &str) -> Resource {
    Resource::Collection(db.into(), c.into())
}

fn role_allows(role: &str, role_db: &str, resource: &Resource, action: &str) -> bool {
    let privileges = builtin(role, role_db).expect("a built-in role");
    allows(&privileges, resource, action)
}

#[test]
fn database_roles_act_on_their_own_database_only() {
    let app = Resource::Database("app".into());
    let table: &[(&str, &Resource, &str, bool)] = &[
        ("read", &coll("app", "c"), "find", true),
        ("read", &coll("app", "c"), "insert", false),
        ("read", &coll("other", "c"), "find", false),
        ("read", &coll("app", "system.users"), "find", false),
        ("read", &coll("app", "system.js"), "find", true),
        ("readWrite", &coll("app", "c"), "insert", true),
        ("readWrite", &coll("app", "c"), "dropCollection", true),
        ("readWrite", &app, "dropDatabase", false),
        ("dbAdmin", &app, "dropDatabase", true),
        ("dbAdmin", &coll("app", "c"), "find", false),
        ("dbAdmin", &coll("app", "system.profile"), "find", true),
        ("userAdmin", &app, "createUser", true),
        ("userAdmin", &coll("app", "c"), "find", false),
        ("dbOwner", &app, "createUser", true),
        ("dbOwner", &coll("app", "c"), "remove", true),
        ("dbOwner", &Resource::Cluster, "listDatabases", false),
    ];
    for (role, resource, action, expected) in table {
        assert_eq!(
            role_allows(role, "app", resource, action),
            *expected,
            "{role}@app {action} on {resource:?}"
        );
    }
}

#[test]
fn admin_roles_exist_only_in_admin_and_act_across_databases() {
    assert!(builtin("root", "app").is_none());
    assert!(builtin("clusterMonitor", "app").is_none());
    assert!(builtin("nosuchrole", "admin").is_none());
    let table: &[(&str, &Resource, &str, bool)] = &[
        ("clusterMonitor", &Resource::Cluster, "serverStatus", true),
        ("clusterMonitor", &Resource::Cluster, "shutdown", false),
        ("clusterMonitor", &coll("app", "c"), "find", false),
        ("hostManager", &Resource::Cluster, "shutdown", true),
        ("clusterManager", &Resource::Cluster, "serverStatus", false),
        ("clusterAdmin", &Resource::Cluster, "serverStatus", true),
        ("clusterAdmin", &Resource::Cluster, "shutdown", true),
        ("readAnyDatabase", &coll("x", "c"), "find", true),
        ("readAnyDatabase", &coll("x", "c"), "insert", false),
        ("readAnyDatabase", &Resource::Cluster, "listDatabases", true),
        (
            "readAnyDatabase",
            &coll("admin", "system.users"),
            "find",
            false,
        ),
        ("readWriteAnyDatabase", &coll("x", "c"), "update", true),
        (
            "userAdminAnyDatabase",
            &Resource::Database("x".into()),
            "createUser",
            true,
        ),
        (
            "userAdminAnyDatabase",
            &coll("admin", "system.users"),
            "find",
            true,
        ),
        (
            "dbAdminAnyDatabase",
            &Resource::Database("x".into()),
            "dropDatabase",
            true,
        ),
        ("backup", &coll("x", "c"), "find", true),
        ("backup", &coll("x", "c"), "insert", false),
        ("restore", &coll("x", "c"), "insert", true),
        ("root", &coll("x", "c"), "insert", true),
        ("root", &Resource::Cluster, "shutdown", true),
        ("root", &coll("admin", "system.users"), "update", true),
        ("root", &coll("x", "system.foo"), "validate", true),
        ("root", &coll("x", "system.foo"), "insert", false),
    ];
    for (role, resource, action, expected) in table {
        assert_eq!(
            role_allows(role, "admin", resource, action),
            *expected,
            "{role}@admin {action} on {resource:?}"
        );
    }
}

#[test]
fn merged_privileges_name_each_pattern_once_in_mongods_shape() {
    let privileges = builtin("readWrite", "app").expect("readWrite");
    let patterns: Vec<&Pattern> = privileges.iter().map(|p| &p.pattern).collect();
    assert_eq!(
        patterns,
        vec![
            &Pattern::Database("app".into()),
            &Pattern::Exact("app".into(), "system.js".into())
        ]
    );
    let shown = privileges[0].to_document();
    assert_eq!(
        shown.get_document("resource").expect("resource"),
        &doc! {"db": "app", "collection": ""}
    );
    let actions = shown.get_array("actions").expect("actions");
    assert_eq!(actions.len(), READ.len() + WRITE.len());
    assert_eq!(actions[0], Bson::from("changeStream"));
}
