//! The dispatch table: every command the server serves, by the names clients send (aliases
//! included), once, with how its handler reads the request (`Run`) and whether it is a data
//! command. Each handler lives in the file of its command family (`commands/*.rs`); test
//! commands, served only when enabled, are `fail_command.rs`'s.

use super::{
    aggregate, coll_mod, compact, connection_info, connection_txn, crud, current_op, data_size,
    ddl, diagnostics, fsync, get_last_error, get_log, hello, host_info, indexes, list_commands,
    listings, parameters, profile, qe, query, repl_set, roles, roles_info, sasl, server_status,
    sessions, storage_stats, transactions, users, users_info,
};
use super::{Handler, RawBodyHandler, RawHandler};
use std::collections::HashMap;
use std::sync::OnceLock;

/// How a command's handler reads its request.
#[derive(Clone, Copy)]
pub(crate) enum Run {
    /// The body decoded once into an owned document.
    Doc(Handler),
    /// The raw body, and a reply built as raw BSON (cursor replies: documents never decoded).
    Raw(RawHandler),
    /// The raw body, and an owned reply (the write commands).
    RawBody(RawBodyHandler),
}

/// One command of the table.
pub(crate) struct Entry {
    /// The name clients send.
    pub name: &'static str,
    /// Its handler.
    pub run: Run,
    /// Whether it reads or changes data or the catalog (for dispatch's data-command rules).
    pub data: bool,
}

use Run::{Doc, Raw, RawBody};

const fn other(name: &'static str, run: Run) -> Entry {
    Entry {
        name,
        run,
        data: false,
    }
}

const fn data(name: &'static str, run: Run) -> Entry {
    Entry {
        name,
        run,
        data: true,
    }
}

/// Every command, once.
pub(crate) static COMMANDS: &[Entry] = &[
    // The handshake, diagnostics and server state.
    other("hello", Doc(hello::hello)),
    other("isMaster", Doc(hello::is_master)),
    other("ismaster", Doc(hello::is_master)),
    other("ping", Doc(diagnostics::ping)),
    other("buildInfo", Doc(diagnostics::build_info)),
    other("buildinfo", Doc(diagnostics::build_info)),
    other("serverStatus", Doc(server_status::server_status)),
    other("top", Doc(server_status::top)),
    other("hostInfo", Doc(host_info::host_info)),
    other("getParameter", Doc(parameters::get_parameter)),
    other("setParameter", Doc(parameters::set_parameter)),
    other("getCmdLineOpts", Doc(parameters::get_cmd_line_opts)),
    other("getLog", Doc(get_log::get_log)),
    other("getLastError", Doc(get_last_error::get_last_error)),
    other("getlasterror", Doc(get_last_error::get_last_error)),
    other("resetError", Doc(get_last_error::reset_error)),
    other("reseterror", Doc(get_last_error::reset_error)),
    other("listCommands", Doc(list_commands::list_commands)),
    other("whatsmyuri", Doc(connection_info::whatsmyuri)),
    other("connectionStatus", Doc(connection_info::connection_status)),
    other("logout", Doc(connection_info::logout)),
    other("saslStart", Doc(sasl::sasl_start)),
    other("saslContinue", Doc(sasl::sasl_continue)),
    other("authenticate", Doc(sasl::authenticate)),
    other("createUser", Doc(users::create_user)),
    other("updateUser", Doc(users::update_user)),
    other("dropUser", Doc(users::drop_user)),
    other(
        "dropAllUsersFromDatabase",
        Doc(users::drop_all_users_from_database),
    ),
    other("grantRolesToUser", Doc(users::grant_roles_to_user)),
    other("revokeRolesFromUser", Doc(users::revoke_roles_from_user)),
    other("usersInfo", Doc(users_info::users_info)),
    other("createRole", Doc(roles::create_role)),
    other("updateRole", Doc(roles::update_role)),
    other("dropRole", Doc(roles::drop_role)),
    other(
        "dropAllRolesFromDatabase",
        Doc(roles::drop_all_roles_from_database),
    ),
    other(
        "grantPrivilegesToRole",
        Doc(roles::grant_privileges_to_role),
    ),
    other(
        "revokePrivilegesFromRole",
        Doc(roles::revoke_privileges_from_role),
    ),
    other("grantRolesToRole", Doc(roles::grant_roles_to_role)),
    other("revokeRolesFromRole", Doc(roles::revoke_roles_from_role)),
    other("rolesInfo", Doc(roles_info::roles_info)),
    other("startSession", Doc(sessions::start_session)),
    other("endSessions", Doc(sessions::end_sessions)),
    other("refreshSessions", Doc(sessions::refresh_sessions)),
    other("killSessions", Doc(sessions::kill_sessions)),
    other("killAllSessions", Doc(sessions::kill_all_sessions)),
    other(
        "killAllSessionsByPattern",
        Doc(sessions::kill_all_sessions_by_pattern),
    ),
    other("commitTransaction", Doc(transactions::commit_plain)),
    other("abortTransaction", Doc(transactions::abort_plain)),
    other("beginTransaction", Doc(connection_txn::begin_transaction)),
    other(
        "rollbackTransaction",
        Doc(connection_txn::rollback_transaction),
    ),
    other("replSetInitiate", Doc(repl_set::repl_set_initiate)),
    other("replSetReconfig", Doc(repl_set::repl_set_reconfig)),
    other("replSetGetConfig", Doc(repl_set::repl_set_get_config)),
    other("replSetGetStatus", Doc(repl_set::repl_set_get_status)),
    other("currentOp", Doc(current_op::current_op)),
    other("killOp", Doc(current_op::kill_op)),
    other("fsync", Doc(fsync::fsync)),
    other("fsyncUnlock", Doc(fsync::fsync_unlock)),
    other("profile", Doc(profile::profile)),
    other("dataSize", Doc(data_size::data_size)),
    other("datasize", Doc(data_size::data_size)),
    other("compact", Doc(compact::compact)),
    // Queryable Encryption's state collections (`qe.rs`).
    data("compactStructuredEncryptionData", Doc(qe::compact)),
    data("cleanupStructuredEncryptionData", Doc(qe::cleanup)),
    // Data and catalog commands: the hot paths read the raw body (`Raw`: the reply built raw too;
    // `RawBody`: an owned reply), the rest get it decoded once.
    data("find", Raw(query::find)),
    data("getMore", Raw(query::get_more)),
    data("insert", RawBody(crud::insert)),
    data("update", RawBody(crud::update)),
    data("delete", RawBody(crud::delete)),
    data("findAndModify", RawBody(crud::find_and_modify)),
    data("findandmodify", RawBody(crud::find_and_modify)),
    data("killCursors", Doc(query::kill_cursors)),
    data("count", RawBody(query::count)),
    data("distinct", RawBody(query::distinct)),
    data("explain", RawBody(query::explain)),
    data("aggregate", Raw(aggregate::aggregate)),
    data("create", RawBody(ddl::create)),
    data("collMod", Doc(coll_mod::coll_mod)),
    data("drop", Doc(ddl::drop)),
    data("dropDatabase", Doc(ddl::drop_database)),
    data("listCollections", Doc(listings::list_collections)),
    data("listDatabases", Doc(listings::list_databases)),
    data("renameCollection", Doc(ddl::rename_collection)),
    data("createIndexes", Doc(indexes::create_indexes)),
    data("listIndexes", Doc(listings::list_indexes)),
    data("dropIndexes", Doc(indexes::drop_indexes)),
    data("deleteIndexes", Doc(indexes::drop_indexes)),
    data("collStats", Doc(storage_stats::coll_stats)),
    data("dbStats", Doc(storage_stats::db_stats)),
    data("dbstats", Doc(storage_stats::db_stats)),
    data("validate", Doc(storage_stats::validate)),
];

/// The entry of command `name`: looked up by hash a few times per command, where a walk of
/// the table compared ~150 names each time.
pub(crate) fn find(name: &str) -> Option<&'static Entry> {
    static BY_NAME: OnceLock<HashMap<&'static str, &'static Entry>> = OnceLock::new();
    BY_NAME
        .get_or_init(|| COMMANDS.iter().map(|e| (e.name, e)).collect())
        .get(name)
        .copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_is_in_the_table_once() {
        let mut seen = std::collections::HashSet::new();
        for e in COMMANDS {
            assert!(seen.insert(e.name), "{} is in the table twice", e.name);
            assert!(find(e.name).is_some_and(|f| std::ptr::eq(f, e)));
        }
        assert!(find("noSuchCommand").is_none());
    }
}
