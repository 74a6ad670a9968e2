//! `listCommands`: every command name the dispatcher answers (aliases included), sorted as
//! mongod sorts them, each with mongod's descriptive fields. Help texts exist for the
//! commands of this file's table; the others get mongod's default "no help defined".

use super::{command_names, CommandResult};
use crate::ConnectionCtx;
use bson::{doc, Document};

/// Commands in Stable API version 1 (MongoDB 7.0).
pub(super) const API_V1: &[&str] = &[
    "abortTransaction",
    "aggregate",
    "authenticate",
    "collMod",
    "commitTransaction",
    "count",
    "create",
    "createIndexes",
    "delete",
    "drop",
    "dropDatabase",
    "dropIndexes",
    "endSessions",
    "explain",
    "find",
    "findAndModify",
    "getMore",
    "hello",
    "insert",
    "killCursors",
    "listCollections",
    "listDatabases",
    "listIndexes",
    "ping",
    "refreshSessions",
    "saslContinue",
    "saslStart",
    "update",
];

/// Commands mongod runs only against `admin`.
const ADMIN_ONLY: &[&str] = &[
    "getCmdLineOpts",
    "getLog",
    "getParameter",
    "replSetGetConfig",
    "replSetGetStatus",
    "replSetInitiate",
    "replSetReconfig",
];

/// Commands an unauthenticated client may run on a server with access control.
const HELP: &[(&str, &str)] = &[
    ("buildInfo", "get version #, etc.\n{ buildinfo:1 }"),
    ("connectionStatus", "Returns connection-specific information such as logged-in users and their roles"),
    ("endSessions", "end a set of logical sessions"),
    ("getCmdLineOpts", "get argv"),
    ("getLog", "{ getLog : '*' }  OR { getLog : 'global' }"),
    ("getParameter", "get administrative option(s)\nexample:\n{ getParameter:1, notablescan:1 }\n{ getParameter:'*' } or { getParameter:{allParameters: true} } to get everything"),
    ("hello", "Check if this server is primary for a replica set\n{ hello : 1 }"),
    ("hostInfo", "returns information about the daemon's host"),
    ("isMaster", "Check if this server is primary for a replica set\n{ isMaster : 1 }"),
    ("killAllSessions", "kill all logical sessions, for a user, and their operations"),
    ("killAllSessionsByPattern", "kill logical sessions by pattern"),
    ("killSessions", "kill a logical session and its operations"),
    ("listCommands", "get a list of all db commands"),
    ("logout", "de-authenticate"),
    ("ping", "a way to check that the server is alive. responds immediately even if server is in a db lock."),
    ("refreshSessions", "renew a set of logical sessions"),
    ("serverStatus", "returns lots of administrative server statistics"),
    ("startSession", "start a logical session"),
    ("whatsmyuri", "{whatsmyuri:1}"),
];

pub fn list_commands(_ctx: &ConnectionCtx, _db: &str, _body: &Document) -> CommandResult {
    let mut names: Vec<&str> = command_names().collect();
    names.sort_unstable();
    names.dedup();
    let mut commands = Document::new();
    for name in names {
        commands.insert(name, describe(name));
    }
    Ok(doc! { "commands": commands })
}

fn describe(name: &str) -> Document {
    let help = HELP
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map_or("no help defined", |(_, h)| h);
    let api: Vec<&str> = if API_V1.contains(&name) {
        vec!["1"]
    } else {
        vec![]
    };
    doc! {
        "help": help,
        "requiresAuth": crate::auth::gate::requires_authentication(name),
        "secondaryOk": true,
        "adminOnly": ADMIN_ONLY.contains(&name),
        "apiVersions": api,
        "deprecatedApiVersions": [],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_dispatched_name_is_described() {
        let d = describe("getParameter");
        assert_eq!(d.get_bool("adminOnly"), Ok(true));
        assert!(d
            .get_str("help")
            .expect("help")
            .starts_with("get administrative"));
        assert_eq!(
            describe("ping").get_array("apiVersions").map(Vec::len),
            Ok(1)
        );
        assert_eq!(describe("nosuch").get_str("help"), Ok("no help defined"));
    }
}
