//! The SCRAM protocol (RFC 5802, RFC 7677) on the server's side, pure: key derivation from a
//! prepared password, the client's two messages parsed, the server's two messages built, and
//! the client's proof checked in constant time. It knows no users, no storage and no wire
//! format; `conversation.rs` drives it and `credentials.rs` prepares passwords.
//!
//! Only what MongoDB's drivers send is accepted: no channel binding (`n,,` or `y,,`), no
//! authorization identity, no extensions.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use hmac::{Hmac, KeyInit, Mac};
use sha1::Sha1;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The SCRAM variants MongoDB serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mechanism {
    /// SCRAM-SHA-1.
    Sha1,
    /// SCRAM-SHA-256.
    Sha256,
}

impl Mechanism {
    /// Both, in the order mongod lists them.
    pub const ALL: [Mechanism; 2] = [Mechanism::Sha1, Mechanism::Sha256];

    /// The SASL name (`SCRAM-SHA-1`, `SCRAM-SHA-256`).
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Sha1 => "SCRAM-SHA-1",
            Mechanism::Sha256 => "SCRAM-SHA-256",
        }
    }

    /// The mechanism with this SASL name.
    pub fn from_name(name: &str) -> Option<Mechanism> {
        Mechanism::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Bytes of the hash, of the salt mongod stores, and of the keys.
    pub fn hash_len(self) -> usize {
        match self {
            Mechanism::Sha1 => 20,
            Mechanism::Sha256 => 32,
        }
    }

    /// Salt length mongod generates: the hash length less 4 bytes.
    pub fn salt_len(self) -> usize {
        self.hash_len() - 4
    }

    /// mongod's default iteration count.
    pub fn default_iterations(self) -> u32 {
        match self {
            Mechanism::Sha1 => 10_000,
            Mechanism::Sha256 => 15_000,
        }
    }

    /// The smallest iteration count mongod accepts.
    pub fn min_iterations(self) -> u32 {
        match self {
            Mechanism::Sha1 => 5_000,
            Mechanism::Sha256 => 4_096,
        }
    }

    /// HMAC of `data` under `key` with the mechanism's hash.
    pub fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        match self {
            Mechanism::Sha1 => hmac_with::<Hmac<Sha1>>(key, data),
            Mechanism::Sha256 => hmac_with::<Hmac<Sha256>>(key, data),
        }
    }

    /// The mechanism's hash of `data`.
    pub fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            Mechanism::Sha1 => Sha1::digest(data).to_vec(),
            Mechanism::Sha256 => Sha256::digest(data).to_vec(),
        }
    }

    /// `Hi(password, salt, i)`: PBKDF2 with HMAC of this hash.
    pub fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        let mut out = vec![0u8; self.hash_len()];
        match self {
            Mechanism::Sha1 => pbkdf2::pbkdf2_hmac::<Sha1>(password, salt, iterations, &mut out),
            Mechanism::Sha256 => {
                pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, &mut out)
            }
        }
        out
    }
}

fn hmac_with<M: Mac + KeyInit>(key: &[u8], data: &[u8]) -> Vec<u8> {
    #[allow(clippy::expect_used, reason = "HMAC takes a key of any length")]
    let mut mac = <M as KeyInit>::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

/// What the server keeps of a password: never the password, only its salted keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScramKeys {
    /// The salt.
    pub salt: Vec<u8>,
    /// PBKDF2 iterations.
    pub iterations: u32,
    /// `StoredKey`: the hash of the client key.
    pub stored_key: Vec<u8>,
    /// `ServerKey`: what the server proves itself with.
    pub server_key: Vec<u8>,
}

impl ScramKeys {
    /// Derives the keys of `password` (already prepared for the mechanism).
    pub fn derive(mech: Mechanism, password: &[u8], salt: &[u8], iterations: u32) -> ScramKeys {
        let salted = mech.salted_password(password, salt, iterations);
        let client_key = mech.hmac(&salted, b"Client Key");
        ScramKeys {
            salt: salt.to_vec(),
            iterations,
            stored_key: mech.hash(&client_key),
            server_key: mech.hmac(&salted, b"Server Key"),
        }
    }
}

/// Why a SCRAM message was refused. Every variant reaches the client as the same
/// "Authentication failed." except malformed messages, which mongod reports as BadValue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScramError {
    /// The message is not SCRAM as MongoDB speaks it.
    Malformed(&'static str),
    /// The proof does not match the stored key, or the nonce was changed.
    ProofMismatch,
}

/// The client's first message: `gs2-header` then `n=user,r=nonce`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientFirst {
    /// The user name (`n=`), unescaped.
    pub user: String,
    /// The client's nonce (`r=`).
    pub client_nonce: String,
    /// The message less its GS2 header (`client-first-message-bare`).
    pub bare: String,
}

impl ClientFirst {
    /// Parses the client's first message.
    pub fn parse(message: &str) -> Result<ClientFirst, ScramError> {
        let bare = message
            .strip_prefix("n,,")
            .or_else(|| message.strip_prefix("y,,"))
            .ok_or(ScramError::Malformed(
                "SCRAM: only 'n,,' and 'y,,' GS2 headers are supported",
            ))?;
        let mut parts = bare.split(',');
        let user = field(parts.next(), 'n')?;
        let client_nonce = field(parts.next(), 'r')?;
        if parts.next().is_some() {
            return Err(ScramError::Malformed("SCRAM: extensions are not supported"));
        }
        if client_nonce.is_empty() {
            return Err(ScramError::Malformed("SCRAM: empty client nonce"));
        }
        Ok(ClientFirst {
            user: unescape_name(user)?,
            client_nonce: client_nonce.to_owned(),
            bare: bare.to_owned(),
        })
    }
}

/// The value of `key=value`, if `part` is that attribute.
fn field(part: Option<&str>, key: char) -> Result<&str, ScramError> {
    part.and_then(|p| p.strip_prefix(key))
        .and_then(|p| p.strip_prefix('='))
        .ok_or(ScramError::Malformed(
            "SCRAM: missing or misplaced attribute",
        ))
}

/// A SCRAM `saslname`: `=2C` is a comma and `=3D` an equals sign; any other `=` is an error.
fn unescape_name(name: &str) -> Result<String, ScramError> {
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(at) = rest.find('=') {
        out.push_str(&rest[..at]);
        let code = rest.get(at..at + 3);
        match code {
            Some("=2C") => out.push(','),
            Some("=3D") => out.push('='),
            _ => return Err(ScramError::Malformed("SCRAM: bad escape in the user name")),
        }
        rest = &rest[at + 3..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The server's first message: `r=client+server nonce,s=salt,i=iterations`.
pub fn server_first(nonce: &str, keys: &ScramKeys) -> String {
    format!(
        "r={nonce},s={},i={}",
        B64.encode(&keys.salt),
        keys.iterations
    )
}

/// The client's final message: `c=binding,r=nonce,p=proof`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientFinal {
    /// The channel binding (`c=`), base64.
    pub channel_binding: String,
    /// The combined nonce (`r=`).
    pub nonce: String,
    /// The client's proof (`p=`), decoded.
    pub proof: Vec<u8>,
    /// The message less `,p=proof` (`client-final-message-without-proof`).
    pub without_proof: String,
}

impl ClientFinal {
    /// Parses the client's final message.
    pub fn parse(message: &str) -> Result<ClientFinal, ScramError> {
        let (without_proof, proof) = message.rsplit_once(",p=").ok_or(ScramError::Malformed(
            "SCRAM: the final message has no proof",
        ))?;
        let mut parts = without_proof.split(',');
        let channel_binding = field(parts.next(), 'c')?.to_owned();
        let nonce = field(parts.next(), 'r')?.to_owned();
        if parts.next().is_some() {
            return Err(ScramError::Malformed("SCRAM: extensions are not supported"));
        }
        let proof = B64
            .decode(proof)
            .map_err(|_| ScramError::Malformed("SCRAM: the proof is not base64"))?;
        Ok(ClientFinal {
            channel_binding,
            nonce,
            proof,
            without_proof: without_proof.to_owned(),
        })
    }
}

/// Checks the client's proof against the stored key and returns the server's final
/// message (`v=signature`). The nonce and channel binding must be the ones agreed.
pub fn verify(
    mech: Mechanism,
    keys: &ScramKeys,
    first: &ClientFirst,
    server_first: &str,
    nonce: &str,
    last: &ClientFinal,
) -> Result<String, ScramError> {
    // `biws` is base64 of "n,,", `eSws` of "y,,": the GS2 header the client sent first.
    if last.channel_binding != "biws" && last.channel_binding != "eSws" {
        return Err(ScramError::ProofMismatch);
    }
    let nonce_ok: bool = last.nonce.as_bytes().ct_eq(nonce.as_bytes()).into();
    let auth_message = format!("{},{server_first},{}", first.bare, last.without_proof);
    let signature = mech.hmac(&keys.stored_key, auth_message.as_bytes());
    if last.proof.len() != signature.len() {
        return Err(ScramError::ProofMismatch);
    }
    let client_key: Vec<u8> = last
        .proof
        .iter()
        .zip(&signature)
        .map(|(p, s)| p ^ s)
        .collect();
    let key_ok: bool = mech.hash(&client_key).ct_eq(&keys.stored_key).into();
    if !(nonce_ok && key_ok) {
        return Err(ScramError::ProofMismatch);
    }
    let server_signature = mech.hmac(&keys.server_key, auth_message.as_bytes());
    Ok(format!("v={}", B64.encode(server_signature)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the server's side of a conversation whose messages and salt are given.
    fn run(
        mech: Mechanism,
        password: &str,
        salt_b64: &str,
        iterations: u32,
        messages: [&str; 3],
    ) -> Result<String, ScramError> {
        let salt = B64.decode(salt_b64).expect("salt");
        let keys = ScramKeys::derive(mech, password.as_bytes(), &salt, iterations);
        let first = ClientFirst::parse(messages[0])?;
        let nonce = messages[1]
            .strip_prefix("r=")
            .and_then(|r| r.split(',').next())
            .expect("nonce");
        assert_eq!(server_first(nonce, &keys), messages[1]);
        let last = ClientFinal::parse(messages[2])?;
        verify(mech, &keys, &first, messages[1], nonce, &last)
    }

    #[test]
    fn rfc_5802_sha1_example() {
        let reply = run(
            Mechanism::Sha1,
            "pencil",
            "QSXCR+Q6sek8bf92",
            4096,
            [
                "n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL",
                "r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096",
                "c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=",
            ],
        );
        assert_eq!(reply, Ok("v=rmF9pqV8S7suAoZWja4dJRkFsKQ=".to_owned()));
    }

    #[test]
    fn rfc_7677_sha256_example() {
        let reply = run(
            Mechanism::Sha256,
            "pencil",
            "W22ZaJ0SNY7soEsUEjb6gQ==",
            4096,
            [
                "n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
                "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
                "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
                 p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
            ],
        );
        assert_eq!(
            reply,
            Ok("v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=".to_owned())
        );
    }

    #[test]
    fn a_wrong_password_or_nonce_fails() {
        let messages = [
            "n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL",
            "r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096",
            "c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=",
        ];
        let wrong = run(
            Mechanism::Sha1,
            "pencil2",
            "QSXCR+Q6sek8bf92",
            4096,
            messages,
        );
        assert_eq!(wrong, Err(ScramError::ProofMismatch));
        let keys = ScramKeys::derive(Mechanism::Sha1, b"pencil", b"salt", 4096);
        let first = ClientFirst::parse(messages[0]).expect("first");
        let last = ClientFinal::parse(messages[2]).expect("final");
        let other_nonce = verify(Mechanism::Sha1, &keys, &first, "x", "other", &last);
        assert_eq!(other_nonce, Err(ScramError::ProofMismatch));
    }

    #[test]
    fn messages_parse_strictly() {
        let first = ClientFirst::parse("n,,n=a=2Cb=3Dc,r=xyz").expect("escaped");
        assert_eq!(first.user, "a,b=c");
        assert_eq!(first.bare, "n=a=2Cb=3Dc,r=xyz");
        for bad in [
            "p=tls,,n=u,r=x",
            "n,,r=x,n=u",
            "n,,n=a=2,r=x",
            "n,,n=u,r=",
            "n,,n=u",
        ] {
            assert!(ClientFirst::parse(bad).is_err(), "{bad}");
        }
        assert!(ClientFinal::parse("c=biws,r=x").is_err());
        assert!(ClientFinal::parse("c=biws,r=x,p=***").is_err());
    }
}
