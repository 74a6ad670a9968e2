//! Authentication end to end through `dispatch`, with a SCRAM client written here from the
//! RFC: both mechanisms, both ways of ending the exchange, wrong passwords and unknown users
//! alike, the `--auth` gate with its localhost exception, and a user dropped while logged in.

use super::credentials::prepared_password;
use super::scram::Mechanism;
use super::AuthConfig;
use crate::commands::{dispatch, Reply};
use crate::session_table::SessionTable;
use crate::{ConnectionCtx, ServerConfig};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use bson::spec::BinarySubtype;
use bson::{doc, Binary, Bson, Document};
use shale_db::{Database, DbOptions};
use std::net::SocketAddr;
use std::sync::Arc;

fn server(auth: bool) -> (tempfile::TempDir, Arc<Database>, Arc<ServerConfig>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Arc::new(Database::open(dir.path(), DbOptions::default()).expect("open"));
    let config = ServerConfig {
        auth: Arc::new(AuthConfig::new(auth)),
        ..ServerConfig::default()
    };
    (dir, db, Arc::new(config))
}

fn connect(db: &Arc<Database>, config: &Arc<ServerConfig>, peer: &str) -> ConnectionCtx {
    let peer: SocketAddr = peer.parse().expect("address");
    let sessions = Arc::new(SessionTable::default());
    ConnectionCtx::new(db.clone(), 1, peer, config.clone(), sessions)
}

fn run(ctx: &ConnectionCtx, db: &str, body: Document) -> Document {
    match dispatch(ctx, db, &body) {
        Reply::Doc(d) => d,
        Reply::Raw(r) => r.to_document().expect("reply"),
    }
}

fn code(reply: &Document) -> i32 {
    reply.get_i32("code").unwrap_or(0)
}

fn bin(bytes: Vec<u8>) -> Bson {
    Bson::Binary(Binary {
        subtype: BinarySubtype::Generic,
        bytes,
    })
}

fn payload(reply: &Document) -> String {
    let bytes = reply.get_binary_generic("payload").expect("payload");
    String::from_utf8(bytes.clone()).expect("utf-8")
}

/// Logs in as a driver does; returns the failing reply, if any.
fn log_in(
    ctx: &ConnectionCtx,
    mech: Mechanism,
    user: &str,
    pwd: &str,
    skip: bool,
) -> Result<(), Document> {
    let bare = format!("n={user},r=clientnonce");
    let start = doc! {
        "saslStart": 1, "mechanism": mech.name(), "payload": bin(format!("n,,{bare}").into_bytes()),
        "options": {"skipEmptyExchange": skip},
    };
    let reply = run(ctx, "admin", start);
    let server_first = payload(&reply);
    let (nonce, salt, iterations) = parse_server_first(&server_first);
    let password = prepared_password(mech, user, pwd, true).expect("prepare");
    let salted = mech.salted_password(&password, &salt, iterations);
    let client_key = mech.hmac(&salted, b"Client Key");
    let without_proof = format!("c=biws,r={nonce}");
    let auth_message = format!("{bare},{server_first},{without_proof}");
    let signature = mech.hmac(&mech.hash(&client_key), auth_message.as_bytes());
    let proof: Vec<u8> = client_key
        .iter()
        .zip(&signature)
        .map(|(a, b)| a ^ b)
        .collect();
    let last = format!("{without_proof},p={}", B64.encode(proof));
    let reply = run(
        ctx,
        "admin",
        doc! {"saslContinue": 1, "conversationId": 1, "payload": bin(last.into_bytes())},
    );
    if reply.get_f64("ok") != Ok(1.0) {
        return Err(reply);
    }
    let server_key = mech.hmac(&salted, b"Server Key");
    let expected = format!(
        "v={}",
        B64.encode(mech.hmac(&server_key, auth_message.as_bytes()))
    );
    assert_eq!(
        payload(&reply),
        expected,
        "the server proves it knows the key"
    );
    assert_eq!(reply.get_bool("done"), Ok(skip));
    if !skip {
        let end = run(
            ctx,
            "admin",
            doc! {"saslContinue": 1, "conversationId": 1, "payload": bin(Vec::new())},
        );
        assert_eq!(end.get_bool("done"), Ok(true), "{end}");
    }
    Ok(())
}

fn parse_server_first(message: &str) -> (String, Vec<u8>, u32) {
    let mut parts = message.split(',');
    let nonce = parts
        .next()
        .and_then(|p| p.strip_prefix("r="))
        .expect("nonce");
    let salt = parts
        .next()
        .and_then(|p| p.strip_prefix("s="))
        .expect("salt");
    let iterations = parts.next().and_then(|p| p.strip_prefix("i=")).expect("i");
    assert!(nonce.starts_with("clientnonce") && nonce.len() > "clientnonce".len());
    (
        nonce.to_owned(),
        B64.decode(salt).expect("salt"),
        iterations.parse().expect("count"),
    )
}

fn users(ctx: &ConnectionCtx) -> Vec<Bson> {
    let status = run(ctx, "admin", doc! {"connectionStatus": 1});
    let info = status.get_document("authInfo").expect("authInfo");
    info.get_array("authenticatedUsers").expect("users").clone()
}

#[test]
fn both_mechanisms_log_in_and_failures_look_alike() {
    let (_dir, db, config) = server(false);
    let ctx = connect(&db, &config, "127.0.0.1:5000");
    let created = run(
        &ctx,
        "admin",
        doc! {"createUser": "ann", "pwd": "pw", "roles": ["root"]},
    );
    assert_eq!(created.get_f64("ok"), Ok(1.0), "{created}");
    for mech in Mechanism::ALL {
        for skip in [true, false] {
            log_in(&ctx, mech, "ann", "pw", skip).expect("logged in");
        }
        let wrong = log_in(&ctx, mech, "ann", "nope", true).expect_err("wrong password");
        let unknown = log_in(&ctx, mech, "zed", "pw", true).expect_err("unknown user");
        assert_eq!((code(&wrong), code(&unknown)), (18, 18));
        assert_eq!(wrong.get_str("errmsg"), unknown.get_str("errmsg"));
    }
    assert_eq!(
        users(&ctx),
        vec![Bson::Document(doc! {"user": "ann", "db": "admin"})]
    );
    run(&ctx, "admin", doc! {"logout": 1});
    assert!(users(&ctx).is_empty());
}

#[test]
fn an_unknown_user_sees_the_same_salt_every_time() {
    let (_dir, db, config) = server(false);
    let ctx = connect(&db, &config, "127.0.0.1:5000");
    let start = || {
        let body = doc! {"saslStart": 1, "mechanism": "SCRAM-SHA-256", "payload": bin(b"n,,n=zed,r=abc".to_vec())};
        let first = payload(&run(&ctx, "admin", body));
        first.split(',').nth(1).expect("salt").to_owned()
    };
    assert_eq!(start(), start());
}

#[test]
fn the_gate_refuses_until_a_user_logs_in_and_the_localhost_exception_closes() {
    let (_dir, db, config) = server(true);
    let remote = connect(&db, &config, "10.1.2.3:5000");
    let local = connect(&db, &config, "127.0.0.1:5000");
    let find = doc! {"find": "c"};
    let refused = run(&local, "test", find.clone());
    assert_eq!(
        (code(&refused), refused.get_str("errmsg")),
        (13, Ok("Command find requires authentication"))
    );
    assert_eq!(run(&local, "test", doc! {"ping": 1}).get_f64("ok"), Ok(1.0));
    let create = doc! {"createUser": "ann", "pwd": "pw", "roles": ["root"]};
    assert_eq!(
        code(&run(&remote, "admin", create.clone())),
        13,
        "not over the network"
    );
    assert_eq!(
        code(&run(&local, "test", create.clone())),
        13,
        "only on admin"
    );
    assert_eq!(run(&local, "admin", create).get_f64("ok"), Ok(1.0));
    let second = doc! {"createUser": "bob", "pwd": "pw", "roles": []};
    assert_eq!(
        code(&run(&local, "admin", second)),
        13,
        "the exception is closed"
    );
    log_in(&local, Mechanism::Sha256, "ann", "pw", true).expect("logged in");
    assert_eq!(run(&local, "test", find.clone()).get_f64("ok"), Ok(1.0));
    let other = connect(&db, &config, "127.0.0.1:5001");
    log_in(&other, Mechanism::Sha1, "ann", "pw", true).expect("logged in");
    assert_eq!(
        run(&other, "admin", doc! {"dropUser": "ann"}).get_f64("ok"),
        Ok(1.0)
    );
    let after = run(&local, "test", find);
    assert_eq!(code(&after), 13, "a dropped user's login ends");
    assert!(users(&local).is_empty());
}
