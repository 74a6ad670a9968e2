//! What an `aggregate` needs, as mongod's `AggregationRequest` privileges: `find` on the
//! collection it reads (none for `aggregate: 1`), `find` on every collection `$lookup`,
//! `$graphLookup` and `$unionWith` read (inside `$facet` and sub-pipelines too),
//! `insert` and `remove` on `$out`'s target, `insert` and `update` on `$merge`'s,
//! `collStats` / `indexStats` for those stages, `inprog` on the cluster for `$currentOp`
//! with `allUsers: true` (without it a user sees only their own operations), and
//! `changeStream` + `find` on what a `$changeStream` watches.
//! It reads the pipeline only; it never checks that the pipeline is valid (the command does).

use super::command_actions::{collection, truthy, Needs};
use super::privileges::Resource;
use bson::{Bson, Document};

/// Stages that replace the base `find` with their own action on the collection.
const OWN_ACTION: &[(&str, &str)] = &[("$collStats", "collStats"), ("$indexStats", "indexStats")];

/// The needs of `{aggregate: <coll or 1>, pipeline}` run on `db`.
pub fn needs(db: &str, body: &Document) -> Needs {
    let source = collection(db, body, "aggregate");
    let stages = stages(body.get("pipeline"));
    let mut needs = Vec::new();
    if let Some(watched) = change_stream_resource(db, &source, &stages) {
        needs.push((watched.clone(), "changeStream"));
        needs.push((watched, "find"));
        walk(db, &stages, &mut needs);
        return needs;
    }
    let replaced = stages
        .first()
        .and_then(|s| stage_name(s))
        .and_then(|name| OWN_ACTION.iter().find(|(n, _)| *n == name).map(|(_, a)| *a));
    match (&source, replaced) {
        (_, Some(action)) => needs.push((source.clone(), action)),
        (Resource::Collection(..), None) => needs.push((source.clone(), "find")),
        _ => {}
    }
    walk(db, &stages, &mut needs);
    if truthy(body.get("bypassDocumentValidation")) {
        let targets: Vec<Resource> = needs
            .iter()
            .filter(|(_, a)| *a == "insert")
            .map(|(r, _)| r.clone())
            .collect();
        needs.extend(targets.into_iter().map(|r| (r, "bypassDocumentValidation")));
    }
    needs
}

/// What a pipeline led by `$changeStream` watches, as mongod checks it: the collection,
/// the database (`aggregate: 1`), or every normal collection (`allChangesForCluster`, the
/// `{db: "", collection: ""}` pattern).
fn change_stream_resource(db: &str, source: &Resource, stages: &[&Document]) -> Option<Resource> {
    let first = stages.first()?;
    let Some(Bson::Document(spec)) = first.get("$changeStream") else {
        return None;
    };
    Some(match source {
        Resource::Collection(..) => source.clone(),
        _ if truthy(spec.get("allChangesForCluster")) => Resource::Database(String::new()),
        _ => Resource::Database(db.to_owned()),
    })
}

fn stages(v: Option<&Bson>) -> Vec<&Document> {
    match v {
        Some(Bson::Array(items)) => items.iter().filter_map(Bson::as_document).collect(),
        _ => Vec::new(),
    }
}

fn stage_name(stage: &Document) -> Option<&str> {
    stage.keys().next().map(String::as_str)
}

/// Adds the needs of each stage, recursing into sub-pipelines.
fn walk(db: &str, stages: &[&Document], needs: &mut Needs) {
    for stage in stages {
        let Some(name) = stage_name(stage) else {
            continue;
        };
        let arg = stage.get(name);
        match name {
            "$lookup" | "$graphLookup" => reads(db, arg, "from", needs),
            "$unionWith" => union_with(db, arg, needs),
            "$facet" => facet(db, arg, needs),
            "$out" => writes(db, arg, &["insert", "remove"], needs),
            "$merge" => merge(db, arg, needs),
            // Without `allUsers` a user sees only their own operations and needs nothing.
            "$currentOp" if all_users(arg) => needs.push((Resource::Cluster, "inprog")),
            _ => {}
        }
    }
}

/// Whether a `$currentOp` spec asks for every user's operations.
fn all_users(arg: Option<&Bson>) -> bool {
    matches!(arg, Some(Bson::Document(d)) if d.get("allUsers") == Some(&Bson::Boolean(true)))
}

/// `find` on the collection in field `field` of `arg`, and its sub-pipeline's needs.
fn reads(db: &str, arg: Option<&Bson>, field: &str, needs: &mut Needs) {
    let Some(Bson::Document(spec)) = arg else {
        return;
    };
    if let Some(target) = target(db, spec.get(field), "coll") {
        needs.push((target, "find"));
    }
    walk(db, &stages(spec.get("pipeline")), needs);
}

fn union_with(db: &str, arg: Option<&Bson>, needs: &mut Needs) {
    match arg {
        Some(Bson::String(coll)) => {
            needs.push((Resource::Collection(db.to_owned(), coll.clone()), "find"))
        }
        other => reads(db, other, "coll", needs),
    }
}

fn facet(db: &str, arg: Option<&Bson>, needs: &mut Needs) {
    let Some(Bson::Document(facets)) = arg else {
        return;
    };
    for (_, pipeline) in facets {
        walk(db, &stages(Some(pipeline)), needs);
    }
}

fn writes(db: &str, arg: Option<&Bson>, actions: &[&'static str], needs: &mut Needs) {
    if let Some(target) = target(db, arg, "coll") {
        needs.extend(actions.iter().map(|a| (target.clone(), *a)));
    }
}

/// `$merge: "coll"` or `{into: "coll" | {db, coll}, ...}`.
fn merge(db: &str, arg: Option<&Bson>, needs: &mut Needs) {
    let into = match arg {
        Some(Bson::Document(spec)) => spec.get("into"),
        other => other,
    };
    writes(db, into, &["insert", "update"], needs);
}

/// A target named by a string (a collection of `db`) or `{db, <coll_field>}`.
fn target(db: &str, v: Option<&Bson>, coll_field: &str) -> Option<Resource> {
    match v {
        Some(Bson::String(coll)) => Some(Resource::Collection(db.to_owned(), coll.clone())),
        Some(Bson::Document(d)) => {
            let coll = d.get_str(coll_field).ok()?;
            let target_db = d.get_str("db").unwrap_or(db);
            Some(Resource::Collection(target_db.to_owned(), coll.to_owned()))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn coll(db: &str, c: &str) -> Resource {
        Resource::Collection(db.into(), c.into())
    }

    #[test]
    fn lookup_reads_and_out_writes_their_targets() {
        let body = doc! {"aggregate": "a", "pipeline": [
            {"$lookup": {"from": "b", "as": "x", "pipeline": [{"$unionWith": "c"}]}},
            {"$facet": {"f": [{"$graphLookup": {"from": "d"}}]}},
            {"$out": {"db": "other", "coll": "e"}},
        ]};
        assert_eq!(
            needs("t", &body),
            vec![
                (coll("t", "a"), "find"),
                (coll("t", "b"), "find"),
                (coll("t", "c"), "find"),
                (coll("t", "d"), "find"),
                (coll("other", "e"), "insert"),
                (coll("other", "e"), "remove"),
            ]
        );
    }

    #[test]
    fn merge_collstats_and_database_aggregates() {
        let body = doc! {"aggregate": "a", "pipeline": [{"$merge": {"into": "m"}}],
        "bypassDocumentValidation": true};
        assert_eq!(
            needs("t", &body),
            vec![
                (coll("t", "a"), "find"),
                (coll("t", "m"), "insert"),
                (coll("t", "m"), "update"),
                (coll("t", "m"), "bypassDocumentValidation"),
            ]
        );
        let stats = doc! {"aggregate": "a", "pipeline": [{"$collStats": {}}]};
        assert_eq!(needs("t", &stats), vec![(coll("t", "a"), "collStats")]);
        let current = doc! {"aggregate": 1, "pipeline": [{"$currentOp": {"allUsers": true}}]};
        assert_eq!(
            needs("admin", &current),
            vec![(Resource::Cluster, "inprog")]
        );
        let own = doc! {"aggregate": 1, "pipeline": [{"$currentOp": {}}]};
        assert!(needs("admin", &own).is_empty());
        let docs = doc! {"aggregate": 1, "pipeline": [{"$documents": [{}]}]};
        assert!(needs("t", &docs).is_empty());
    }
}
