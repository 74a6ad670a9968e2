//! A user's SCRAM credentials as mongod stores them (`credentials.SCRAM-SHA-1` and
//! `credentials.SCRAM-SHA-256`: `iterationCount`, and `salt`, `storedKey`, `serverKey` in
//! base64), made from a password and read back into `ScramKeys`; how each mechanism prepares
//! the password (SCRAM-SHA-1: MongoDB's MD5 hex of `user:mongo:password`; SCRAM-SHA-256:
//! SASLprep); and the fake keys answered for users that do not exist, derived from the
//! server's secret so that a wrong user looks exactly like a wrong password.
//! Passwords never leave this file: nothing here stores or logs one.

use super::scram::{Mechanism, ScramKeys};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use bson::{doc, Bson, Document};
use md5::{Digest, Md5};
use rand::RngCore;
use shale_doc::{ErrorCode, MongoError};

/// MongoDB's SCRAM-SHA-1 password: the hex MD5 digest of `user:mongo:password`.
pub fn mongo_digest(user: &str, password: &str) -> String {
    let digest = Md5::digest(format!("{user}:mongo:{password}").as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// The bytes a mechanism's keys are derived from. `digest_password: false` means the client
/// sent SCRAM-SHA-1's digest already (mongod's `digestPassword`); SCRAM-SHA-256 refuses it.
pub fn prepared_password(
    mech: Mechanism,
    user: &str,
    password: &str,
    digest_password: bool,
) -> Result<Vec<u8>, MongoError> {
    match mech {
        Mechanism::Sha1 if digest_password => Ok(mongo_digest(user, password).into_bytes()),
        Mechanism::Sha1 => Ok(password.as_bytes().to_vec()),
        Mechanism::Sha256 if !digest_password => Err(MongoError::new(
            ErrorCode::BadValue,
            "Use of SCRAM-SHA-256 requires undigested passwords",
        )),
        Mechanism::Sha256 => stringprep::saslprep(password)
            .map(|p| p.as_bytes().to_vec())
            .map_err(|_| {
                MongoError::new(
                    ErrorCode::BadValue,
                    "Password contains characters SASLprep prohibits",
                )
            }),
    }
}

/// Fresh keys for `password` under `mech` with a random salt.
pub fn new_keys(
    mech: Mechanism,
    user: &str,
    password: &str,
    digest_password: bool,
    iterations: u32,
) -> Result<ScramKeys, MongoError> {
    let prepared = prepared_password(mech, user, password, digest_password)?;
    let mut salt = vec![0u8; mech.salt_len()];
    rand::rngs::OsRng.fill_bytes(&mut salt);
    Ok(ScramKeys::derive(mech, &prepared, &salt, iterations))
}

/// The stored sub-document of one mechanism's keys.
pub fn keys_document(keys: &ScramKeys) -> Document {
    doc! {
        "iterationCount": i32::try_from(keys.iterations).unwrap_or(i32::MAX),
        "salt": B64.encode(&keys.salt),
        "storedKey": B64.encode(&keys.stored_key),
        "serverKey": B64.encode(&keys.server_key),
    }
}

/// The keys of `mech` in a user's `credentials` document, if it has well-formed ones.
pub fn keys_of(credentials: &Document, mech: Mechanism) -> Option<ScramKeys> {
    let d = credentials.get_document(mech.name()).ok()?;
    let iterations = match d.get("iterationCount")? {
        Bson::Int32(n) => u32::try_from(*n).ok()?,
        Bson::Int64(n) => u32::try_from(*n).ok()?,
        _ => return None,
    };
    let bytes = |k: &str| B64.decode(d.get_str(k).ok()?).ok();
    let keys = ScramKeys {
        salt: bytes("salt")?,
        iterations,
        stored_key: bytes("storedKey")?,
        server_key: bytes("serverKey")?,
    };
    let len = mech.hash_len();
    (keys.stored_key.len() == len && keys.server_key.len() == len).then_some(keys)
}

/// The mechanisms a user has keys for, in mongod's order.
pub fn mechanisms_of(credentials: &Document) -> Vec<Mechanism> {
    Mechanism::ALL
        .into_iter()
        .filter(|m| credentials.contains_key(m.name()))
        .collect()
}

/// Keys for a user that does not exist (or lacks `mech`): the salt is derived from the
/// server's secret and the name, so every attempt for that name sees the same salt, as it
/// would for a real user; the stored key matches no proof a client can make.
pub fn fake_keys(
    secret: &[u8],
    mech: Mechanism,
    db: &str,
    user: &str,
    iterations: u32,
) -> ScramKeys {
    let label = |what: &str| format!("{what}\0{}\0{db}\0{user}", mech.name());
    let salt = Mechanism::Sha256.hmac(secret, label("salt").as_bytes());
    let stored = Mechanism::Sha256.hmac(secret, label("stored").as_bytes());
    let server = Mechanism::Sha256.hmac(secret, label("server").as_bytes());
    ScramKeys {
        salt: salt[..mech.salt_len()].to_vec(),
        iterations,
        stored_key: stored[..mech.hash_len()].to_vec(),
        server_key: server[..mech.hash_len()].to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mongo_digest_is_md5_hex_of_user_mongo_password() {
        // python3 -c "import hashlib; print(hashlib.md5(b'user:mongo:pencil').hexdigest())"
        assert_eq!(
            mongo_digest("user", "pencil"),
            "1c33006ec1ffd90f9cadcbcc0e118200"
        );
    }

    #[test]
    fn keys_round_trip_through_the_stored_document() {
        for mech in Mechanism::ALL {
            let keys = new_keys(mech, "u", "p", true, mech.min_iterations()).expect("keys");
            assert_eq!(keys.salt.len(), mech.salt_len());
            let stored = doc! { mech.name(): keys_document(&keys) };
            assert_eq!(keys_of(&stored, mech), Some(keys));
            assert_eq!(mechanisms_of(&stored), vec![mech]);
        }
    }

    #[test]
    fn sha256_prepares_with_saslprep_and_refuses_digested_passwords() {
        let plain = prepared_password(Mechanism::Sha256, "u", "I\u{00AD}X", true).expect("prep");
        assert_eq!(plain, b"IX");
        assert!(prepared_password(Mechanism::Sha256, "u", "p", false).is_err());
        let raw = prepared_password(Mechanism::Sha1, "u", "abc", false).expect("raw");
        assert_eq!(raw, b"abc");
    }

    #[test]
    fn fake_keys_are_stable_per_name_and_differ_between_names() {
        let a = fake_keys(b"secret", Mechanism::Sha1, "admin", "x", 10_000);
        assert_eq!(
            a,
            fake_keys(b"secret", Mechanism::Sha1, "admin", "x", 10_000)
        );
        assert_ne!(
            a.salt,
            fake_keys(b"secret", Mechanism::Sha1, "admin", "y", 10_000).salt
        );
        assert_eq!(a.salt.len(), Mechanism::Sha1.salt_len());
    }
}
