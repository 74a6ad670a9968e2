//! `saslStart`, `saslContinue` and `authenticate` (MONGODB-X509 only); and the two parts of
//! `hello` that belong to authentication: `saslSupportedMechs` (the mechanisms a named user
//! has keys for) and `speculativeAuthenticate` (a `saslStart` or X.509 `authenticate`
//! carried in the handshake, so a driver saves a round trip). The SCRAM exchange itself is `auth::conversation`.
//! Replies carry `conversationId`, `done` and `payload` as generic BinData, as mongod's do.
//! Whatever the mechanism, the login happens only through `gate::admit`, which enforces the
//! user's and its roles' `authenticationRestrictions`.

use super::CommandResult;
use crate::auth::conversation::{failed, logged_in, StartRequest, Step, CONVERSATION_ID};
use crate::auth::credentials::mechanisms_of;
use crate::auth::{gate, user_store, x509, UserName};
use crate::ConnectionCtx;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use bson::spec::BinarySubtype;
use bson::{doc, Binary, Bson, Document};
use shale_doc::{ErrorCode, MongoError};

pub fn sasl_start(ctx: &ConnectionCtx, db: &str, body: &Document) -> CommandResult {
    let mechanism = body.get_str("mechanism").map_err(|_| {
        MongoError::new(
            ErrorCode::Location40414,
            "BSON field 'saslStart.mechanism' is missing but a required field",
        )
    })?;
    let payload = payload(body, "saslStart")?;
    let skip_empty_exchange = body
        .get_document("options")
        .ok()
        .and_then(|o| o.get("skipEmptyExchange"))
        .is_some_and(truthy);
    let request = StartRequest {
        mechanism,
        db,
        payload: &payload,
        skip_empty_exchange,
    };
    let step = gate::lock(ctx)
        .conversations
        .start(&ctx.db, &ctx.server.auth, request);
    finish_step(ctx, step)
}

pub fn sasl_continue(ctx: &ConnectionCtx, _db: &str, body: &Document) -> CommandResult {
    let id = match body.get("conversationId") {
        Some(Bson::Int32(n)) => *n,
        Some(Bson::Int64(n)) => i32::try_from(*n).unwrap_or(-1),
        Some(Bson::Double(x)) if x.fract() == 0.0 => *x as i32,
        _ => {
            return Err(MongoError::new(
                ErrorCode::Location40414,
                "BSON field 'saslContinue.conversationId' is missing but a required field",
            ))
        }
    };
    let payload = payload(body, "saslContinue")?;
    let step = gate::lock(ctx).conversations.step(id, &payload);
    finish_step(ctx, step)
}

/// `authenticate`: MONGODB-X509 logs in as the `$external` user named by the client
/// certificate's subject (`auth::x509`); MONGODB-CR is gone, so any other mechanism is
/// refused. Answers `{dbname, user}` as mongod.
pub fn authenticate(ctx: &ConnectionCtx, db: &str, body: &Document) -> CommandResult {
    let mechanism = body.get_str("mechanism").unwrap_or("MONGODB-CR");
    if mechanism != "MONGODB-X509" {
        return Err(MongoError::new(
            ErrorCode::MechanismUnavailable,
            format!(
                "Received authentication for mechanism {mechanism} which is unknown or not enabled"
            ),
        ));
    }
    let name = authenticate_x509(ctx, db, body).map_err(|e| {
        tracing::info!(conn = ctx.connection_id, code = e.code.code(), error = %e.message,
            "X.509 authentication failed");
        // As mongod: the reason an AuthenticationFailed carries stays in the log.
        match e.code {
            ErrorCode::AuthenticationFailed => {
                MongoError::new(ErrorCode::AuthenticationFailed, "auth failed")
            }
            _ => e,
        }
    })?;
    Ok(doc! { "dbname": &name.db, "user": &name.user })
}

fn authenticate_x509(
    ctx: &ConnectionCtx,
    db: &str,
    body: &Document,
) -> Result<UserName, MongoError> {
    let subject = gate::lock(ctx).client_subject.clone();
    let requested = body.get_str("user").ok();
    let name = x509::user_for(subject.as_deref(), requested, db)?;
    let Some(stored) = user_store::find(&ctx.db, &name)? else {
        return Err(MongoError::new(
            ErrorCode::AuthenticationFailed,
            format!(
                "Could not find user \"{}\" for db \"{}\"",
                name.user, name.db
            ),
        ));
    };
    gate::admit(ctx, &name, &stored)?;
    let user = logged_in(&name, &stored);
    tracing::info!(conn = ctx.connection_id, user = %name, "authenticated (MONGODB-X509)");
    gate::lock(ctx).log_in(user);
    Ok(name)
}

/// Logs the user in when a step completes (if its `authenticationRestrictions` admit the
/// connection), logs failures, and builds the reply.
fn finish_step(ctx: &ConnectionCtx, step: Result<Step, MongoError>) -> CommandResult {
    let step = step.and_then(|step| {
        if let Some(user) = &step.logged_in {
            let stored = user_store::find(&ctx.db, &user.name)?.ok_or_else(failed)?;
            gate::admit(ctx, &user.name, &stored)?;
        }
        Ok(step)
    });
    let step = step.inspect_err(|e| {
        tracing::info!(
            conn = ctx.connection_id,
            code = e.code.code(),
            "authentication failed"
        );
    })?;
    if let Some(user) = step.logged_in {
        tracing::info!(conn = ctx.connection_id, user = %user.name, "authenticated");
        let mut session = gate::lock(ctx);
        session.log_in(user);
    }
    Ok(doc! {
        "conversationId": CONVERSATION_ID,
        "done": step.done,
        "payload": Binary { subtype: BinarySubtype::Generic, bytes: step.payload },
    })
}

/// The `payload` field: BinData, or a string of base64 (mongo shells send either).
fn payload(body: &Document, command: &str) -> Result<Vec<u8>, MongoError> {
    match body.get("payload") {
        Some(Bson::Binary(b)) => Ok(b.bytes.clone()),
        Some(Bson::String(s)) => B64
            .decode(s)
            .map_err(|_| MongoError::new(ErrorCode::BadValue, "payload is not valid base64")),
        _ => Err(MongoError::new(
            ErrorCode::Location40414,
            format!("BSON field '{command}.payload' is missing but a required field"),
        )),
    }
}

fn truthy(v: &Bson) -> bool {
    match v {
        Bson::Boolean(b) => *b,
        Bson::Int32(n) => *n != 0,
        Bson::Int64(n) => *n != 0,
        Bson::Double(x) => *x != 0.0,
        _ => false,
    }
}

/// The fields authentication adds to a `hello` reply: `saslSupportedMechs` when asked for
/// a user that exists, `speculativeAuthenticate` when the handshake carried a first step
/// that succeeded (a failed one leaves the field out; the driver's `saslStart` then fails).
pub fn hello_fields(ctx: &ConnectionCtx, body: &Document) -> Document {
    let mut out = Document::new();
    if let Ok(name) = body.get_str("saslSupportedMechs") {
        if let Some(mechs) = supported_mechanisms(ctx, name) {
            out.insert("saslSupportedMechs", mechs);
        }
    }
    if let Ok(request) = body.get_document("speculativeAuthenticate") {
        if let Some(reply) = speculative(ctx, request) {
            out.insert("speculativeAuthenticate", reply);
        }
    }
    out
}

/// `db.user` → the mechanism names that user has keys for, if it exists.
fn supported_mechanisms(ctx: &ConnectionCtx, name: &str) -> Option<Vec<&'static str>> {
    let (db, user) = name.split_once('.')?;
    let doc = user_store::find(&ctx.db, &UserName::new(user, db)).ok()??;
    let credentials = doc.get_document("credentials").ok()?;
    Some(
        mechanisms_of(credentials)
            .into_iter()
            .map(|m| m.name())
            .collect(),
    )
}

/// Runs the handshake's `{saslStart, mechanism, payload, db}` or `{authenticate,
/// mechanism: "MONGODB-X509", db}`; `None` when it fails.
fn speculative(ctx: &ConnectionCtx, request: &Document) -> Option<Document> {
    let db = request.get_str("db").ok()?;
    let result = if request.contains_key("authenticate") {
        authenticate(ctx, db, request)
    } else {
        request.get("saslStart")?;
        sasl_start(ctx, db, request)
    };
    match result {
        Ok(reply) => Some(reply),
        Err(e) => {
            tracing::info!(
                conn = ctx.connection_id,
                code = e.code.code(),
                "speculative authentication failed"
            );
            None
        }
    }
}
