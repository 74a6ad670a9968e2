//! Privileges as documents: `{resource: {db, collection} | {cluster: true} |
//! {anyResource: true}, actions: [...]}`, as `createRole`, `updateRole`,
//! `grantPrivilegesToRole` and `revokePrivilegesFromRole` take them and `admin.system.roles`
//! stores them. Parsing checks every action against mongod's action types (`action_types`);
//! the documents written back are merged by resource with sorted actions, as mongod stores
//! them. It never reads storage.

use super::action_types;
use super::privileges::{merge, Pattern, Privilege};
use bson::{Bson, Document};
use shale_doc::{ErrorCode, MongoError};

/// The privileges of a `privileges` array given to command field `field`, merged by
/// resource. Unknown action names are collected into one `BadValue`, as mongod reports them.
pub fn parse(value: &Bson, field: &str) -> Result<Vec<Privilege>, MongoError> {
    let Bson::Array(items) = value else {
        return Err(type_mismatch(field, "array"));
    };
    let mut out = Vec::with_capacity(items.len());
    let mut unknown: Vec<String> = Vec::new();
    for item in items {
        let Bson::Document(d) = item else {
            return Err(type_mismatch(&format!("{field}.0"), "object"));
        };
        out.push(one(d, &mut unknown)?);
    }
    if !unknown.is_empty() {
        return Err(unknown_actions(unknown));
    }
    Ok(normalized(out))
}

/// Merged by resource, each privilege's actions sorted (the stored form).
fn normalized(privileges: Vec<Privilege>) -> Vec<Privilege> {
    let mut merged = merge(privileges);
    for p in &mut merged {
        p.actions.sort_unstable();
    }
    merged
}

/// The privileges stored in a role document's `privileges` field; entries that do not
/// parse are skipped (a stored role grants only what it validly names).
pub fn stored(role: &Document) -> Vec<Privilege> {
    let Ok(items) = role.get_array("privileges") else {
        return Vec::new();
    };
    let mut unknown = Vec::new();
    let parsed = items
        .iter()
        .filter_map(|i| i.as_document())
        .filter_map(|d| one(d, &mut unknown).ok())
        .collect();
    normalized(parsed)
}

/// The `privileges` array to store for `privileges`.
pub fn to_bson(privileges: &[Privilege]) -> Bson {
    Bson::Array(
        privileges
            .iter()
            .map(|p| Bson::Document(p.to_document()))
            .collect(),
    )
}

fn one(d: &Document, unknown: &mut Vec<String>) -> Result<Privilege, MongoError> {
    let resource = d
        .get_document("resource")
        .map_err(|_| bad("Privilege documents must have a \"resource\" object field"))?;
    let pattern = pattern(resource)?;
    let Ok(names) = d.get_array("actions") else {
        return Err(bad(
            "Privilege documents must have an \"actions\" array field",
        ));
    };
    let mut actions = Vec::with_capacity(names.len());
    for name in names {
        let Bson::String(name) = name else {
            return Err(bad("Privilege actions must be strings"));
        };
        match action_types::lookup(name) {
            Some(a) if !actions.contains(&a) => actions.push(a),
            Some(_) => {}
            None if !unknown.contains(name) => unknown.push(name.clone()),
            None => {}
        }
    }
    Ok(Privilege { pattern, actions })
}

/// The resource pattern of a privilege's `resource` document.
pub fn pattern(resource: &Document) -> Result<Pattern, MongoError> {
    if resource.get_bool("cluster") == Ok(true) {
        return only_field(resource, Pattern::Cluster);
    }
    if resource.get_bool("anyResource") == Ok(true) {
        return only_field(resource, Pattern::AnyResource);
    }
    let (Ok(db), Ok(coll)) = (resource.get_str("db"), resource.get_str("collection")) else {
        return Err(bad(
            "resource pattern must contain 'db' and 'collection' string fields, or \
             'cluster: true', or 'anyResource: true'",
        ));
    };
    if resource.len() != 2 {
        return Err(bad(
            "resource pattern has fields other than 'db' and 'collection'",
        ));
    }
    Ok(match (db.is_empty(), coll.is_empty()) {
        (true, true) => Pattern::AnyNormal,
        (true, false) => Pattern::CollectionInAnyDb(coll.to_owned()),
        (false, true) => Pattern::Database(db.to_owned()),
        (false, false) => Pattern::Exact(db.to_owned(), coll.to_owned()),
    })
}

fn only_field(resource: &Document, pattern: Pattern) -> Result<Pattern, MongoError> {
    if resource.len() != 1 {
        return Err(bad(
            "resource pattern 'cluster' or 'anyResource' must be its only field",
        ));
    }
    Ok(pattern)
}

/// mongod's message for action names it does not know.
fn unknown_actions(mut names: Vec<String>) -> MongoError {
    names.sort();
    let plural = if names.len() > 1 { "s" } else { "" };
    let list: Vec<String> = names.iter().map(|n| format!(" '{n}'")).collect();
    bad(&format!(
        "Unknown action type{plural} in privilege set:{}",
        list.join(",")
    ))
}

/// Removes `removed`'s actions from `privileges` (a privilege left with none goes).
pub fn revoke(privileges: &mut Vec<Privilege>, removed: &[Privilege]) {
    for r in removed {
        if let Some(p) = privileges.iter_mut().find(|p| p.pattern == r.pattern) {
            p.actions.retain(|a| !r.actions.contains(a));
        }
    }
    privileges.retain(|p| !p.actions.is_empty());
}

fn type_mismatch(field: &str, wanted: &str) -> MongoError {
    MongoError::new(
        ErrorCode::TypeMismatch,
        format!("BSON field '{field}' is the wrong type, expected type '{wanted}'"),
    )
}

fn bad(message: &str) -> MongoError {
    MongoError::new(ErrorCode::BadValue, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn privileges(v: Bson) -> Result<Vec<Privilege>, MongoError> {
        parse(&v, "createRole.privileges")
    }

    #[test]
    fn resources_and_actions_parse_merge_and_print_back() {
        let given = bson::bson!([
            {"resource": {"db": "app", "collection": "c"}, "actions": ["insert", "find"]},
            {"resource": {"db": "app", "collection": "c"}, "actions": ["find", "remove"]},
            {"resource": {"cluster": true}, "actions": ["serverStatus"]},
            {"resource": {"db": "", "collection": ""}, "actions": ["find"]},
        ]);
        let parsed = privileges(given).expect("parse");
        assert_eq!(parsed.len(), 3);
        let stored = to_bson(&parsed);
        let back = stored
            .as_array()
            .and_then(|a| {
                a.iter().find(|p| {
                    p.as_document().is_some_and(|d| {
                        d.get_document("resource") == Ok(&doc! {"db": "app", "collection": "c"})
                    })
                })
            })
            .and_then(Bson::as_document)
            .cloned()
            .expect("the collection privilege");
        assert_eq!(
            back.get_array("actions").cloned(),
            Ok(vec!["find".into(), "insert".into(), "remove".into()])
        );
        let role = doc! {"privileges": stored};
        assert_eq!(super::stored(&role), parsed);
    }

    #[test]
    fn unknown_actions_and_bad_resources_are_refused_like_mongod() {
        let e = privileges(bson::bson!([
            {"resource": {"db": "a", "collection": ""}, "actions": ["fnd", "find", "zap", "fnd"]}
        ]))
        .expect_err("unknown actions");
        assert_eq!(e.code, ErrorCode::BadValue);
        assert_eq!(
            e.message,
            "Unknown action types in privilege set: 'fnd', 'zap'"
        );
        let bad_resource = bson::bson!([{"resource": {"db": "a"}, "actions": ["find"]}]);
        assert!(privileges(bad_resource).is_err());
        assert!(privileges(Bson::Int32(1)).is_err());
    }

    #[test]
    fn revoking_removes_actions_and_empty_privileges() {
        let mut held = privileges(bson::bson!([
            {"resource": {"db": "a", "collection": ""}, "actions": ["find", "insert"]},
            {"resource": {"cluster": true}, "actions": ["serverStatus"]},
        ]))
        .expect("held");
        let removed = privileges(bson::bson!([
            {"resource": {"db": "a", "collection": ""}, "actions": ["insert"]},
            {"resource": {"cluster": true}, "actions": ["serverStatus"]},
        ]))
        .expect("removed");
        revoke(&mut held, &removed);
        assert_eq!(held.len(), 1);
        assert_eq!(held[0].actions, vec!["find"]);
    }
}
