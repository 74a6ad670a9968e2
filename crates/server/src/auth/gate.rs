//! What a connection may run before it authenticates, checked by dispatch before any
//! command runs. Without `--auth` everything is allowed. With it, only the handshake and
//! authentication commands mongod lets through (`hello`, `ping`, `buildInfo`, `saslStart`,
//! `saslContinue`, `authenticate`, `logout`, `connectionStatus`, `whatsmyuri`) run without a
//! user; the localhost exception lets a loopback client run `createUser` on `admin` while no
//! user exists at all; anything else is `Unauthorized` (13) "Command X requires authentication".
//! An authenticated connection's command is then checked against its users' roles by
//! `authorize`. Every login, whatever its mechanism, passes `admit`: the user's and its
//! roles' `authenticationRestrictions` against the connection's addresses (`restrictions`);
//! a logged-in user whose restrictions stop being met (its user or a role changed) is dropped
//! from the connection at the next command, as mongod drops it.

use super::restrictions::{self, Environment};
use super::role_graph::{self, Resolved};
use super::{conversation, user_store, AuthSession, LoggedIn, UserName};
use crate::command::Command;
use crate::ConnectionCtx;
use bson::Document;
use shale_doc::{ErrorCode, MongoError};
use std::sync::Arc;

/// Commands mongod runs for a connection with no authenticated user.
const WITHOUT_AUTHENTICATION: &[&str] = &[
    "hello",
    "isMaster",
    "ismaster",
    "ping",
    "buildInfo",
    "buildinfo",
    "saslStart",
    "saslContinue",
    "authenticate",
    "logout",
    "connectionStatus",
    "whatsmyuri",
];

/// Whether `name` needs an authenticated user under `--auth` (`listCommands.requiresAuth`).
pub fn requires_authentication(name: &str) -> bool {
    !WITHOUT_AUTHENTICATION.contains(&name)
}

/// Refuses command `name` on database `db` when access control requires a user first, or
/// when the logged-in users' roles do not allow it.
pub fn check(
    ctx: &ConnectionCtx,
    name: &str,
    db: &str,
    cmd: &Command<'_>,
) -> Result<(), MongoError> {
    if !ctx.server.auth.enabled || !requires_authentication(name) {
        return Ok(());
    }
    let (users, resolved) = authorization(ctx)?;
    if !users.is_empty() {
        return super::authorize::check(ctx, &users, &resolved, name, db, cmd.doc()?);
    }
    if name == "createUser" && db == "admin" && localhost_exception(ctx)? {
        return Ok(());
    }
    Err(MongoError::new(
        ErrorCode::Unauthorized,
        format!("Command {name} requires authentication"),
    ))
}

/// Whether the localhost exception applies: a loopback client, and no user and no
/// user-defined role at all (mongod counts both as privilege documents).
fn localhost_exception(ctx: &ConnectionCtx) -> Result<bool, MongoError> {
    Ok(ctx.peer.ip().is_loopback()
        && !user_store::any(&ctx.db)?
        && !super::role_store::any(&ctx.db)?)
}

/// The connection's logged-in users after dropping those whose user was deleted since they
/// logged in and refreshing the roles of the others (read again only when a user changed).
pub fn refreshed_session(ctx: &ConnectionCtx) -> Result<Vec<LoggedIn>, MongoError> {
    let mut session = lock(ctx);
    let now = ctx.server.auth.users_generation();
    if session.checked_generation != now {
        refresh(ctx, &mut session)?;
        session.checked_generation = now;
    }
    Ok(session.users.clone())
}

/// The connection's logged-in users (refreshed as `refreshed_session`) and the roles and
/// privileges they hold through the role graph (resolved once per change).
pub fn authorization(ctx: &ConnectionCtx) -> Result<(Vec<LoggedIn>, Arc<Resolved>), MongoError> {
    let users = refreshed_session(ctx)?;
    let mut session = lock(ctx);
    if let Some(resolved) = &session.resolved {
        return Ok((users, Arc::clone(resolved)));
    }
    let resolved = Arc::new(super::authorize::resolve_users(&ctx.db, &users)?);
    session.resolved = Some(Arc::clone(&resolved));
    Ok((users, resolved))
}

fn refresh(ctx: &ConnectionCtx, session: &mut AuthSession) -> Result<(), MongoError> {
    let mut kept = Vec::with_capacity(session.users.len());
    for user in &session.users {
        match user_store::find(&ctx.db, &user.name)? {
            Some(doc) => match unmet_restrictions(ctx, &doc)? {
                None => kept.push(conversation::logged_in(&user.name, &doc)),
                Some(reason) => tracing::info!(
                    conn = ctx.connection_id,
                    user = %user.name,
                    %reason,
                    "removed a user whose authentication restrictions are no longer met \
                     from the connection's logins"
                ),
            },
            None => tracing::info!(
                conn = ctx.connection_id,
                user = %user.name,
                "removed a deleted user from the connection's logins"
            ),
        }
    }
    session.users = kept;
    session.resolved = None;
    Ok(())
}

/// Admits the login of `user` (already authenticated by its mechanism) only if the
/// connection meets its and its roles' `authenticationRestrictions`; otherwise
/// `AuthenticationFailed` exactly as a wrong password, with the reason only in the log.
pub fn admit(ctx: &ConnectionCtx, name: &UserName, stored: &Document) -> Result<(), MongoError> {
    match unmet_restrictions(ctx, stored)? {
        None => Ok(()),
        Some(reason) => {
            tracing::info!(
                conn = ctx.connection_id,
                user = %name,
                client = %ctx.peer,
                %reason,
                "Failed to acquire user because of unmet authentication restrictions"
            );
            Err(conversation::failed())
        }
    }
}

/// Why the connection does not meet the restrictions of the user stored as `doc` and of
/// the roles it holds, or `None` when it does.
fn unmet_restrictions(ctx: &ConnectionCtx, doc: &Document) -> Result<Option<String>, MongoError> {
    let own = doc.get("authenticationRestrictions");
    let resolved = role_graph::resolve_stored(&ctx.db, &role_graph::held_roles(doc))?;
    if own.is_none() && resolved.restrictions.is_empty() {
        return Ok(None);
    }
    let env = Environment {
        client: Some(ctx.peer.ip()),
        server: ctx.local.map(|a| a.ip()),
    };
    Ok(restrictions::check(own, &resolved.restrictions, &env).err())
}

/// The connection's authentication state, locked.
pub fn lock(ctx: &ConnectionCtx) -> std::sync::MutexGuard<'_, AuthSession> {
    ctx.auth.lock().unwrap_or_else(|p| p.into_inner())
}
