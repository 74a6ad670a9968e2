//! Authentication: who a connection is. `scram` is the protocol, `credentials` the stored
//! keys, `user_store` the users in `admin.system.users` (through `shale_db`), `conversation`
//! the SASL exchanges of one connection, `gate` what an unauthenticated connection may run,
//! `authorize` what an authenticated one may (the built-in roles' `privileges` against
//! `command_actions` and `pipeline_actions`, and `cursor_users` for cursor ownership).
//! User-defined roles live in `admin.system.roles` (`role_store`), their privileges are
//! documents (`privilege_doc`, checked against `action_types`) and `role_graph` follows
//! inheritance. `restrictions` (with `cidr`) checks and evaluates the users' and roles'
//! `authenticationRestrictions`, which `gate` enforces at every login. This module holds the server-wide settings (`AuthConfig`) and each
//! connection's state (`AuthSession`).

pub mod action_types;
pub mod authorize;
pub mod cidr;
pub mod command_actions;
pub mod conversation;
pub mod credentials;
pub mod cursor_users;
pub mod gate;
pub mod pipeline_actions;
pub mod privilege_doc;
pub mod privileges;
pub mod restrictions;
pub mod role_graph;
pub mod role_store;
pub mod roles;
pub mod scram;
pub mod user_store;
pub mod x509;

use bson::Document;
use rand::RngCore;
use scram::Mechanism;
use std::fmt;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

/// The server's authentication settings, shared by every connection.
#[derive(Debug)]
pub struct AuthConfig {
    /// `--auth` / `security.authorization: enabled`: commands need an authenticated user.
    pub enabled: bool,
    /// Random per process: the key of the fake salts answered for unknown users.
    secret: [u8; 32],
    /// `scramIterationCount` (SCRAM-SHA-1) for users created or updated from now on.
    sha1_iterations: AtomicU32,
    /// `scramSHA256IterationCount` for users created or updated from now on.
    sha256_iterations: AtomicU32,
    /// Bumped by every change to a user; a connection re-reads its users when it moves.
    users_generation: AtomicU64,
    /// Who opened each open cursor (checked under `--auth` by getMore and killCursors).
    pub cursor_users: cursor_users::CursorUsers,
}

impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig::new(false)
    }
}

impl AuthConfig {
    /// Settings with access control `enabled` or not, and a fresh random secret.
    pub fn new(enabled: bool) -> AuthConfig {
        let mut secret = [0u8; 32];
        rand::rngs::OsRng.fill_bytes(&mut secret);
        AuthConfig {
            enabled,
            secret,
            sha1_iterations: AtomicU32::new(Mechanism::Sha1.default_iterations()),
            sha256_iterations: AtomicU32::new(Mechanism::Sha256.default_iterations()),
            users_generation: AtomicU64::new(0),
            cursor_users: cursor_users::CursorUsers::default(),
        }
    }

    /// This server's random secret (salts the fake keys of unknown users).
    pub fn secret(&self) -> &[u8] {
        &self.secret
    }

    /// The iteration count new keys of `mech` get.
    pub fn iterations(&self, mech: Mechanism) -> u32 {
        self.counter(mech).load(Ordering::Relaxed)
    }

    /// Sets the iteration count of `mech`; refuses a count below mongod's minimum.
    pub fn set_iterations(&self, mech: Mechanism, count: u32) -> Result<(), String> {
        if count < mech.min_iterations() {
            return Err(format!(
                "Invalid value for parameter {}: {count} is less than {}",
                iteration_parameter(mech),
                mech.min_iterations()
            ));
        }
        self.counter(mech).store(count, Ordering::Relaxed);
        Ok(())
    }

    fn counter(&self, mech: Mechanism) -> &AtomicU32 {
        match mech {
            Mechanism::Sha1 => &self.sha1_iterations,
            Mechanism::Sha256 => &self.sha256_iterations,
        }
    }

    /// A number bumped whenever users change: logins are re-read when it moved.
    pub fn users_generation(&self) -> u64 {
        self.users_generation.load(Ordering::Acquire)
    }

    /// Called after every write to `admin.system.users` or `admin.system.roles`.
    pub fn users_changed(&self) {
        self.users_generation.fetch_add(1, Ordering::AcqRel);
    }
}

/// The server parameter that sets `mech`'s iteration count.
pub fn iteration_parameter(mech: Mechanism) -> &'static str {
    match mech {
        Mechanism::Sha1 => "scramIterationCount",
        Mechanism::Sha256 => "scramSHA256IterationCount",
    }
}

/// A user's full name: the user and the database it is defined in.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UserName {
    /// The user.
    pub user: String,
    /// The database it is defined in.
    pub db: String,
}

impl UserName {
    /// The name of `user` defined in `db`.
    pub fn new(user: &str, db: &str) -> UserName {
        UserName {
            user: user.to_owned(),
            db: db.to_owned(),
        }
    }

    /// The `_id` of its document in `admin.system.users`: `db.user`.
    pub fn id(&self) -> String {
        format!("{}.{}", self.db, self.user)
    }
}

impl fmt::Display for UserName {
    /// mongod's spelling in messages: `user@db`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.user, self.db)
    }
}

/// A role's full name: the role and the database it is defined in.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RoleName {
    /// The role.
    pub role: String,
    /// The database it is defined in.
    pub db: String,
}

impl RoleName {
    /// The name of `role` defined in `db`.
    pub fn new(role: &str, db: &str) -> RoleName {
        RoleName {
            role: role.to_owned(),
            db: db.to_owned(),
        }
    }

    /// The name in a `{role, db}` document, if it has both as strings.
    pub fn from_document(d: &Document) -> Option<RoleName> {
        Some(RoleName::new(
            d.get_str("role").ok()?,
            d.get_str("db").ok()?,
        ))
    }

    /// The `_id` of its document in `admin.system.roles`: `db.role`.
    pub fn id(&self) -> String {
        format!("{}.{}", self.db, self.role)
    }

    /// `{role, db}`, as user and role documents list roles.
    pub fn to_document(&self) -> Document {
        bson::doc! { "role": &self.role, "db": &self.db }
    }
}

impl fmt::Display for RoleName {
    /// mongod's spelling in messages: `role@db`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.role, self.db)
    }
}

/// An authenticated user of a connection and the roles it had when it logged in.
#[derive(Debug, Clone, PartialEq)]
pub struct LoggedIn {
    /// The user.
    pub name: UserName,
    /// Its roles' documents (`{role, db}`) at login.
    pub roles: Vec<Document>,
}

/// One connection's authentication state.
#[derive(Debug, Default)]
pub struct AuthSession {
    /// Users logged in on this connection, at most one per database (a new login on a
    /// database replaces the old one, as on mongod).
    pub users: Vec<LoggedIn>,
    /// The users generation `users` was last checked against.
    pub checked_generation: u64,
    /// SASL conversations in progress.
    pub conversations: conversation::Conversations,
    /// The roles and privileges of `users`, resolved through the role graph when first
    /// needed; dropped when the users or any user or role changes.
    pub resolved: Option<Arc<role_graph::Resolved>>,
    /// The subject (RFC 2253) of the certificate the client presented in its TLS handshake,
    /// verified against the CA: the user MONGODB-X509 logs in as.
    pub client_subject: Option<String>,
}

impl AuthSession {
    /// Records a login, replacing any earlier user of the same database.
    pub fn log_in(&mut self, user: LoggedIn) {
        self.users.retain(|u| u.name.db != user.name.db);
        self.users.push(user);
        self.resolved = None;
    }

    /// Logs out the user of `db`, if any.
    pub fn log_out(&mut self, db: &str) {
        self.users.retain(|u| u.name.db != db);
        self.resolved = None;
    }
}

#[cfg(test)]
mod flow_tests;
