//! A connection's SASL conversation for SCRAM: `start` takes the client's first message and
//! answers the server's first (with the user's salt, or a fake one when the user does not
//! exist, so the two cases look alike); `step` checks the proof and answers the server's
//! signature, then, unless the client asked for `skipEmptyExchange`, one more empty round
//! ends it. Every failure is the same `AuthenticationFailed` "Authentication failed.", and
//! ends the conversation, except a user that exists without keys for the mechanism, which
//! is `MechanismUnavailable` at the start, as on mongod. One conversation at a time per connection (conversationId 1, as
//! mongod numbers it); a new `saslStart` replaces an unfinished one.

use super::credentials::{fake_keys, keys_of};
use super::scram::{self, ClientFinal, ClientFirst, Mechanism, ScramKeys};
use super::{user_store, AuthConfig, LoggedIn, UserName};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use bson::{Bson, Document};
use rand::RngCore;
use shale_db::Database;
use shale_doc::{ErrorCode, MongoError};

/// The id of the one conversation a connection may have.
pub const CONVERSATION_ID: i32 = 1;

/// Where a conversation is.
#[derive(Debug)]
enum State {
    /// The server's first message is sent; the client's proof is next.
    AwaitingProof(Box<Pending>),
    /// The proof was good and the signature sent; an empty message ends it.
    AwaitingEnd(LoggedIn),
}

#[derive(Debug)]
struct Pending {
    mech: Mechanism,
    keys: ScramKeys,
    first: ClientFirst,
    server_first: String,
    nonce: String,
    /// `None` when the user does not exist (the proof is then always refused).
    user: Option<LoggedIn>,
    skip_empty_exchange: bool,
}

/// A connection's conversation slot.
#[derive(Debug, Default)]
pub struct Conversations {
    current: Option<State>,
}

/// What one SASL step answers.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// The server's message to send back.
    pub payload: Vec<u8>,
    /// True when the exchange has ended (`done` in the reply).
    pub done: bool,
    /// Set on the step that completes a login.
    pub logged_in: Option<LoggedIn>,
}

/// The one error every failed authentication gets.
pub fn failed() -> MongoError {
    MongoError::new(ErrorCode::AuthenticationFailed, "Authentication failed.")
}

/// A `saslStart`'s request: the mechanism name, the database the user is defined in, the
/// client's first message, and its `skipEmptyExchange` option.
#[derive(Debug, Clone, Copy)]
pub struct StartRequest<'a> {
    /// The mechanism's name (`SCRAM-SHA-256`, ...).
    pub mechanism: &'a str,
    /// The database the user is defined in.
    pub db: &'a str,
    /// The client's first message.
    pub payload: &'a [u8],
    /// `options.skipEmptyExchange`: finish without the last empty round trip.
    pub skip_empty_exchange: bool,
}

impl Conversations {
    /// Begins a conversation and answers the server's first message.
    pub fn start(
        &mut self,
        db: &Database,
        auth: &AuthConfig,
        request: StartRequest<'_>,
    ) -> Result<Step, MongoError> {
        self.current = None;
        let mech = Mechanism::from_name(request.mechanism).ok_or_else(|| {
            MongoError::new(
                ErrorCode::MechanismUnavailable,
                format!(
                    "Received authentication for mechanism {} which is unknown or not enabled",
                    request.mechanism
                ),
            )
        })?;
        let text = std::str::from_utf8(request.payload).map_err(|_| failed())?;
        let first = ClientFirst::parse(text).map_err(|_| failed())?;
        let name = UserName::new(&first.user, request.db);
        let stored = user_store::find(db, &name)?;
        if let Some(doc) = &stored {
            let has_keys = doc
                .get_document("credentials")
                .is_ok_and(|c| c.contains_key(mech.name()));
            if !has_keys {
                // As mongod: drivers rely on this to fall back from a speculative
                // SCRAM-SHA-256 to the mechanism `saslSupportedMechs` named.
                return Err(MongoError::new(
                    ErrorCode::MechanismUnavailable,
                    format!(
                        "Unable to use {0} based authentication for user without any {0} \
                         credentials registered",
                        mech.name()
                    ),
                ));
            }
        }
        let (keys, user) = keys_for(auth, mech, &name, stored.as_ref());
        let nonce = format!("{}{}", first.client_nonce, server_nonce());
        let server_first = scram::server_first(&nonce, &keys);
        let payload = server_first.clone().into_bytes();
        self.current = Some(State::AwaitingProof(Box::new(Pending {
            mech,
            keys,
            first,
            server_first,
            nonce,
            user,
            skip_empty_exchange: request.skip_empty_exchange,
        })));
        Ok(Step {
            payload,
            done: false,
            logged_in: None,
        })
    }

    /// Takes the client's next message of conversation `id`.
    pub fn step(&mut self, id: i32, payload: &[u8]) -> Result<Step, MongoError> {
        let state = self.current.take().filter(|_| id == CONVERSATION_ID);
        match state {
            None => Err(MongoError::new(
                ErrorCode::ProtocolError,
                "No SASL session state found",
            )),
            Some(State::AwaitingProof(pending)) => self.check_proof(*pending, payload),
            Some(State::AwaitingEnd(user)) if payload.is_empty() => Ok(Step {
                payload: Vec::new(),
                done: true,
                logged_in: Some(user),
            }),
            Some(State::AwaitingEnd(_)) => Err(failed()),
        }
    }

    fn check_proof(&mut self, p: Pending, payload: &[u8]) -> Result<Step, MongoError> {
        let text = std::str::from_utf8(payload).map_err(|_| failed())?;
        let last = ClientFinal::parse(text).map_err(|_| failed())?;
        let signature = scram::verify(p.mech, &p.keys, &p.first, &p.server_first, &p.nonce, &last)
            .map_err(|_| failed())?;
        // A proof can only match real keys, so a fake user never gets here; check anyway.
        let user = p.user.ok_or_else(failed)?;
        let payload = signature.into_bytes();
        if p.skip_empty_exchange {
            return Ok(Step {
                payload,
                done: true,
                logged_in: Some(user),
            });
        }
        self.current = Some(State::AwaitingEnd(user));
        Ok(Step {
            payload,
            done: false,
            logged_in: None,
        })
    }
}

/// The user's keys for `mech`, or fake ones when the user or its keys do not exist.
fn keys_for(
    auth: &AuthConfig,
    mech: Mechanism,
    name: &UserName,
    stored: Option<&Document>,
) -> (ScramKeys, Option<LoggedIn>) {
    let real = stored.and_then(|doc| {
        let keys = keys_of(doc.get_document("credentials").ok()?, mech)?;
        Some((keys, logged_in(name, doc)))
    });
    match real {
        Some((keys, user)) => (keys, Some(user)),
        None => {
            let iterations = auth.iterations(mech);
            let keys = fake_keys(auth.secret(), mech, &name.db, &name.user, iterations);
            (keys, None)
        }
    }
}

/// The login a stored user document gives: its name and roles.
pub fn logged_in(name: &UserName, doc: &Document) -> LoggedIn {
    let roles = match doc.get("roles") {
        Some(Bson::Array(items)) => items
            .iter()
            .filter_map(|r| r.as_document().cloned())
            .collect(),
        _ => Vec::new(),
    };
    LoggedIn {
        name: name.clone(),
        roles,
    }
}

/// 24 random bytes in base64 (what mongod appends to the client's nonce).
fn server_nonce() -> String {
    let mut bytes = [0u8; 24];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    B64.encode(bytes)
}
