//! The command table: every served command is decided, and the arguments that change what
//! a command needs are read as mongod reads them.

use super::*;
use bson::doc;

fn coll(c: &str) -> Resource {
    Resource::Collection("t".into(), c.into())
}

#[test]
fn every_served_command_has_a_rule() {
    for name in crate::commands::command_names() {
        assert!(decides(name), "{name} has no authorization rule");
    }
}

#[test]
fn writes_need_what_their_arguments_ask_for() {
    let cases: Vec<(Document, Needs)> = vec![
        (doc! {"find": "c"}, vec![(coll("c"), "find")]),
        (doc! {"insert": "c"}, vec![(coll("c"), "insert")]),
        (
            doc! {"insert": "c", "bypassDocumentValidation": true},
            vec![
                (coll("c"), "insert"),
                (coll("c"), "bypassDocumentValidation"),
            ],
        ),
        (
            doc! {"update": "c", "updates": [{"q": {}, "u": {}}]},
            vec![(coll("c"), "update")],
        ),
        (
            doc! {"update": "c", "updates": [{"q": {}, "u": {}, "upsert": true}]},
            vec![(coll("c"), "update"), (coll("c"), "insert")],
        ),
        (doc! {"delete": "c"}, vec![(coll("c"), "remove")]),
        (
            doc! {"findAndModify": "c", "remove": true},
            vec![(coll("c"), "find"), (coll("c"), "remove")],
        ),
        (doc! {"drop": "c"}, vec![(coll("c"), "dropCollection")]),
        (
            doc! {"createIndexes": "c"},
            vec![(coll("c"), "createIndex")],
        ),
        (
            doc! {"serverStatus": 1},
            vec![(Resource::Cluster, "serverStatus")],
        ),
        (doc! {"explain": {"count": "c"}}, vec![(coll("c"), "find")]),
        (
            doc! {"createUser": "u", "roles": ["read", {"role": "read", "db": "x"}]},
            vec![
                (database("t"), "createUser"),
                (database("t"), "grantRole"),
                (database("x"), "grantRole"),
            ],
        ),
    ];
    for (body, expected) in cases {
        let name = body.keys().next().expect("a command").clone();
        assert_eq!(
            rule(&name, "t", &body),
            Some(Rule::Actions(expected)),
            "{body}"
        );
    }
}

#[test]
fn renames_listings_cursors_and_unknown_commands() {
    let same = doc! {"renameCollection": "a.x", "to": "a.y", "dropTarget": true};
    let a = |c: &str| Resource::Collection("a".into(), c.into());
    assert_eq!(
        rule("renameCollection", "admin", &same),
        Some(Rule::Actions(vec![
            (a("x"), "renameCollectionSameDB"),
            (a("y"), "dropCollection")
        ]))
    );
    let listing = doc! {"listCollections": 1, "authorizedCollections": true, "nameOnly": true};
    assert_eq!(
        rule("listCollections", "t", &listing),
        Some(Rule::AnyInDatabase)
    );
    assert_eq!(
        rule("listCollections", "t", &doc! {"listCollections": 1}),
        Some(Rule::Actions(vec![(database("t"), "listCollections")]))
    );
    assert_eq!(
        rule("getMore", "t", &doc! {"getMore": 1_i64}),
        Some(Rule::CursorOwner)
    );
    assert_eq!(
        rule("listDatabases", "admin", &doc! {}),
        Some(Rule::ListDatabases)
    );
    assert_eq!(
        rule("usersInfo", "t", &doc! {"usersInfo": {"forAllDBs": true}}),
        Some(Rule::UsersInfo(vec![(Resource::Cluster, "viewUser")]))
    );
    assert_eq!(rule("noSuchCommand", "t", &doc! {}), None);
}

#[test]
fn role_commands_need_grant_and_revoke_where_their_roles_and_privileges_point() {
    let on = |d: &str, a: &'static str| (database(d), a);
    let cases: Vec<(Document, Needs)> = vec![
        (
            doc! {"createRole": "r", "privileges": [], "roles": []},
            vec![on("t", "createRole")],
        ),
        (
            doc! {"createRole": "r", "roles": [{"role": "read", "db": "x"}],
            "privileges": [{"resource": {"cluster": true}, "actions": ["inprog"]},
                           {"resource": {"db": "y", "collection": "c"}, "actions": ["find"]}]},
            vec![
                on("t", "createRole"),
                on("x", "grantRole"),
                on("admin", "grantRole"),
                on("y", "grantRole"),
            ],
        ),
        (
            doc! {"grantPrivilegesToRole": "r", "privileges": []},
            vec![on("t", "grantRole")],
        ),
        (
            doc! {"revokeRolesFromRole": "r", "roles": ["a"]},
            vec![on("t", "revokeRole")],
        ),
        (doc! {"dropRole": "r"}, vec![on("t", "dropRole")]),
        (
            doc! {"rolesInfo": [{"role": "a", "db": "x"}]},
            vec![on("x", "viewRole")],
        ),
    ];
    for (body, needs) in cases {
        let name = body.keys().next().expect("a command").clone();
        let got = match rule(&name, "t", &body) {
            Some(Rule::Actions(n)) | Some(Rule::RolesInfo(n)) => n,
            other => panic!("{name}: {other:?}"),
        };
        assert_eq!(got, needs, "{name}");
    }
}
