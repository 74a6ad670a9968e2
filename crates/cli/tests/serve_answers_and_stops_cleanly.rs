//! The `shale` binary as a user starts it: `shale serve` on a fresh data directory and port 0
//! logs the port it listens on, answers a `ping` there (an OP_MSG over TCP), and on SIGTERM
//! closes the database after a final checkpoint and exits 0.
//!
//! Also why this file exists for the test run: an integration test of the cli crate makes
//! `cargo test --workspace --no-run` build the `shale` binary itself, with the workspace's
//! feature set, so `scripts/test.sh` needs no separate `cargo build -p shale-cli` (which
//! resolved features for the cli alone and compiled the whole server stack a second time).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test: a failure should stop it with its message"
)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// One OP_MSG carrying `{ping: 1, $db: "admin"}`.
fn ping_message() -> Vec<u8> {
    let mut body = Vec::new();
    bson::doc! {"ping": 1, "$db": "admin"}
        .to_writer(&mut body)
        .unwrap();
    let len = 16 + 4 + 1 + body.len();
    let mut m = Vec::with_capacity(len);
    m.extend_from_slice(&(len as i32).to_le_bytes());
    m.extend_from_slice(&7i32.to_le_bytes()); // request id
    m.extend_from_slice(&0i32.to_le_bytes()); // response to
    m.extend_from_slice(&2013i32.to_le_bytes()); // OP_MSG
    m.extend_from_slice(&0u32.to_le_bytes()); // flags
    m.push(0); // section kind 0: the body
    m.extend_from_slice(&body);
    m
}

/// Sends `ping` to `port` and returns the reply's body document.
fn ping(port: u16) -> bson::Document {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(&ping_message()).unwrap();
    let mut head = [0u8; 16];
    s.read_exact(&mut head).unwrap();
    let len = i32::from_le_bytes(head[..4].try_into().unwrap()) as usize;
    assert_eq!(i32::from_le_bytes(head[8..12].try_into().unwrap()), 7);
    assert_eq!(i32::from_le_bytes(head[12..16].try_into().unwrap()), 2013);
    let mut rest = vec![0u8; len - 16];
    s.read_exact(&mut rest).unwrap();
    assert_eq!(rest[4], 0, "one body section");
    bson::Document::from_reader(&rest[5..]).unwrap()
}

#[test]
fn serve_answers_a_ping_and_stops_cleanly_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let dbpath = dir.path().join("data");
    let mut child = Command::new(env!("CARGO_BIN_EXE_shale"))
        .args(["serve", "--port", "0", "--logFormat", "text", "--dbpath"])
        .arg(&dbpath)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The log goes to stderr: a reader thread hands its lines over.
    let (tx, lines) = mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut log = Vec::new();
    let port = loop {
        let line = lines
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|e| panic!("no port logged ({e}); log so far: {log:#?}"));
        log.push(line.clone());
        if line.contains("waiting for connections") {
            let at = line.find(" port=").expect("the line names its port") + 6;
            let digits: String = line[at..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            break digits.parse::<u16>().unwrap();
        }
    };
    assert!(port > 0);
    let reply = ping(port);
    assert_eq!(reply.get_f64("ok").ok(), Some(1.0), "{reply}");

    // SIGTERM: a clean close with a final checkpoint, exit status 0.
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    // SAFETY: kill(2) with a live child's pid and a valid signal has no memory effects.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let status = child.wait().unwrap();
    reader.join().unwrap();
    log.extend(lines.try_iter());
    assert!(status.success(), "exit {status}; log: {log:#?}");
    assert!(
        log.iter()
            .any(|l| l.contains("database closed after a final checkpoint")),
        "log: {log:#?}"
    );
    assert!(dbpath.read_dir().unwrap().next().is_some(), "data written");
}
