//! The role graph: which roles a set of roles holds once inheritance is followed, the
//! privileges they grant together, and the `authenticationRestrictions` of each (a login
//! must meet every one of them, `restrictions.rs`). Built-in roles are leaves with their table privileges
//! (`privileges::builtin`); a user-defined role's document (`admin.system.roles`) grants
//! its own `privileges` and holds its `roles`. A role that no longer exists grants nothing.
//! The walk is breadth first, visits each role once (so a cycle cannot loop) and stops at
//! `MAX_ROLES`. Storage is reached only through the lookup the caller passes.

use super::privilege_doc;
use super::privileges::{self, Privilege};
use super::RoleName;
use bson::{Bson, Document};
use shale_doc::{ErrorCode, MongoError};
use std::collections::{HashSet, VecDeque};

/// The most roles one resolution visits; more is refused rather than walked without end.
pub const MAX_ROLES: usize = 10_000;

/// Every role held (the given ones first, then what they inherit) and their privileges.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Resolved {
    /// The roles, given ones first.
    pub roles: Vec<RoleName>,
    /// Their privileges.
    pub privileges: Vec<Privilege>,
    /// Each held role with a non-empty `authenticationRestrictions` array, and that array.
    pub restrictions: Vec<(RoleName, Vec<Bson>)>,
}

/// A role's stored document, by name (`None`: no such user-defined role).
pub type Lookup<'a> = dyn FnMut(&RoleName) -> Result<Option<Document>, MongoError> + 'a;

/// Resolves `direct` through `lookup`.
pub fn resolve(direct: &[RoleName], lookup: &mut Lookup<'_>) -> Result<Resolved, MongoError> {
    let mut seen: HashSet<RoleName> = HashSet::new();
    let mut queue: VecDeque<RoleName> = direct.iter().cloned().collect();
    let mut out = Resolved::default();
    let mut all = Vec::new();
    while let Some(role) = queue.pop_front() {
        if !seen.insert(role.clone()) {
            continue;
        }
        if seen.len() > MAX_ROLES {
            return Err(MongoError::new(
                ErrorCode::InternalError,
                format!("role graph walk passed {MAX_ROLES} roles"),
            ));
        }
        if let Some(builtin) = privileges::builtin(&role.role, &role.db) {
            all.extend(builtin);
            out.roles.push(role);
            continue;
        }
        let Some(doc) = lookup(&role)? else {
            continue;
        };
        all.extend(privilege_doc::stored(&doc));
        queue.extend(held_roles(&doc));
        if let Some(Bson::Array(r)) = doc.get("authenticationRestrictions") {
            if !r.is_empty() {
                out.restrictions.push((role.clone(), r.clone()));
            }
        }
        out.roles.push(role);
    }
    out.privileges = privileges::merge(all);
    Ok(out)
}

/// The `{role, db}` entries of a user's or role's `roles` array.
pub fn held_roles(doc: &Document) -> Vec<RoleName> {
    match doc.get("roles") {
        Some(Bson::Array(items)) => items
            .iter()
            .filter_map(Bson::as_document)
            .filter_map(RoleName::from_document)
            .collect(),
        _ => Vec::new(),
    }
}

/// Resolves `direct` against the roles stored in `db`.
pub fn resolve_stored(
    db: &shale_db::Database,
    direct: &[RoleName],
) -> Result<Resolved, MongoError> {
    resolve(direct, &mut |name| super::role_store::find(db, name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;
    use std::collections::HashMap;

    fn role(name: &str, privileges: Bson, roles: Bson) -> (RoleName, Document) {
        let n = RoleName::new(name, "app");
        let d = doc! {"_id": n.id(), "role": name, "db": "app", "privileges": privileges, "roles": roles};
        (n, d)
    }

    #[test]
    fn inherited_roles_and_privileges_are_followed_once_even_through_a_cycle() {
        let store: HashMap<RoleName, Document> = [
            role(
                "a",
                bson::bson!([{"resource": {"db": "app", "collection": "x"}, "actions": ["find"]}]),
                bson::bson!([{"role": "b", "db": "app"}]),
            ),
            role(
                "b",
                bson::bson!([{"resource": {"db": "app", "collection": "y"}, "actions": ["insert"]}]),
                bson::bson!([{"role": "a", "db": "app"}, {"role": "read", "db": "other"}]),
            ),
        ]
        .into_iter()
        .collect();
        let mut lookups = 0;
        let resolved = resolve(&[RoleName::new("a", "app")], &mut |n| {
            lookups += 1;
            Ok(store.get(n).cloned())
        })
        .expect("resolve");
        assert_eq!(lookups, 2);
        assert_eq!(
            resolved.roles,
            vec![
                RoleName::new("a", "app"),
                RoleName::new("b", "app"),
                RoleName::new("read", "other")
            ]
        );
        let x = privileges::Resource::Collection("app".into(), "x".into());
        let y = privileges::Resource::Collection("app".into(), "y".into());
        let o = privileges::Resource::Collection("other".into(), "z".into());
        assert!(privileges::allows(&resolved.privileges, &x, "find"));
        assert!(privileges::allows(&resolved.privileges, &y, "insert"));
        assert!(!privileges::allows(&resolved.privileges, &y, "find"));
        assert!(privileges::allows(&resolved.privileges, &o, "find"));
    }

    #[test]
    fn the_restrictions_of_every_inherited_role_are_collected() {
        let restricted = |name: &str, source: &str, roles: Bson| {
            let (n, mut d) = role(name, bson::bson!([]), roles);
            d.insert(
                "authenticationRestrictions",
                bson::bson!([{"clientSource": [source]}]),
            );
            (n, d)
        };
        let store: HashMap<RoleName, Document> = [
            restricted(
                "top",
                "127.0.0.1",
                bson::bson!([{"role": "mid", "db": "app"}]),
            ),
            role(
                "mid",
                bson::bson!([]),
                bson::bson!([{"role": "low", "db": "app"}]),
            ),
            restricted("low", "10.0.0.0/8", bson::bson!([])),
        ]
        .into_iter()
        .collect();
        let resolved = resolve(&[RoleName::new("top", "app")], &mut |n| {
            Ok(store.get(n).cloned())
        })
        .expect("resolve");
        let names: Vec<&str> = resolved
            .restrictions
            .iter()
            .map(|(r, _)| r.role.as_str())
            .collect();
        assert_eq!(names, ["top", "low"]);
        assert_eq!(
            resolved.restrictions[1].1,
            vec![bson::bson!({"clientSource": ["10.0.0.0/8"]})]
        );
    }

    #[test]
    fn a_missing_role_grants_nothing() {
        let resolved =
            resolve(&[RoleName::new("gone", "app")], &mut |_| Ok(None)).expect("resolve");
        assert_eq!(resolved, Resolved::default());
    }
}
