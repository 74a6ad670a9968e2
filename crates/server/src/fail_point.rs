//! The server's fail points (mongod's `FailPoint`, reduced to those drivers' tests use):
//! `failCommand`, `onPrimaryTransactionalWrite` and `failGetMoreAfterCursorCheckout` (a
//! getMore fails once its cursor is found: the change-stream resume tests), each with its mode (`off`, `alwaysOn`,
//! `{times: n}`, `{skip: n}`), its data, how many times it fired, and the decision whether
//! it fires now. Deciding and counting happen under one lock, so `{times: 1}` fires once
//! however many connections race. Reaching them over the wire (`configureFailPoint`) and
//! acting on a hit (block, close, fail) are `commands/fail_command.rs`'s and
//! `commands/retryable_writes.rs`'s work; nothing here sleeps or builds replies.

use bson::{Bson, Document};
use shale_doc::{ErrorCode, MongoError};
use std::sync::Mutex;

/// Fails or closes commands by name (`commands/fail_command.rs`).
pub const FAIL_COMMAND: &str = "failCommand";
/// Fires when a retryable write's statement has run, before it commits (mongod's, in its
/// transaction participant): closes the connection unless `closeConnection: false`, and
/// with `failBeforeCommitExceptionCode` fails the statement so it never commits.
pub const ON_PRIMARY_TRANSACTIONAL_WRITE: &str = "onPrimaryTransactionalWrite";
/// Fails a getMore after its cursor is checked out (`data: {errorCode}`;
/// `commands/query.rs`).
pub const FAIL_GET_MORE: &str = "failGetMoreAfterCursorCheckout";

/// When a fail point fires (mongod's `FailPoint::Mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Never fires.
    Off,
    /// Fires for every matching command.
    AlwaysOn,
    /// Fires for the next `n` matching commands, then turns itself off.
    Times(i64),
    /// Lets the next `n` matching commands pass, then fires for every one after.
    Skip(i64),
}

/// A fail point as configured.
#[derive(Debug)]
struct State {
    mode: Mode,
    data: Document,
    /// Times it fired since the server started (mongod's `timesEntered`).
    times_entered: i64,
}

impl Default for State {
    fn default() -> Self {
        State {
            mode: Mode::Off,
            data: Document::new(),
            times_entered: 0,
        }
    }
}

impl State {
    /// Counts a hit of a fail point whose condition holds; its data if it fires now (a
    /// `{skip}` still skipping, or `off`, does not).
    fn hit(&mut self) -> Option<Document> {
        match self.mode {
            Mode::Off => return None,
            Mode::AlwaysOn => {}
            Mode::Times(n) => {
                self.mode = if n <= 1 {
                    Mode::Off
                } else {
                    Mode::Times(n - 1)
                };
            }
            Mode::Skip(n) if n > 0 => {
                self.mode = Mode::Skip(n - 1);
                return None;
            }
            Mode::Skip(_) => {}
        }
        self.times_entered += 1;
        Some(self.data.clone())
    }
}

/// The fail points, shared by every connection.
#[derive(Debug, Default)]
pub struct FailPoints {
    fail_command: Mutex<State>,
    on_primary_transactional_write: Mutex<State>,
    get_more: Mutex<State>,
}

/// Which of `failCommand`'s two checks is asking: the one before a command runs (it closes,
/// blocks or fails the command) or the one after (it adds a `writeConcernError`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// Before the command runs.
    Before,
    /// After it ran.
    After,
}

/// The command a check is about and who sent it.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    /// The command's name as the client spelled it.
    pub command: &'a str,
    /// The client's `client.application.name` from its handshake.
    pub app_name: Option<&'a str>,
}

impl FailPoints {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        lock(&self.fail_command)
    }

    /// Sets `name`'s mode and data from a `configureFailPoint` command; returns how many times
    /// it fired before (mongod's reply `count`).
    pub fn configure(&self, name: &str, body: &Document) -> Result<i64, MongoError> {
        let point = match name {
            FAIL_COMMAND => &self.fail_command,
            ON_PRIMARY_TRANSACTIONAL_WRITE => &self.on_primary_transactional_write,
            FAIL_GET_MORE => &self.get_more,
            _ => {
                return Err(MongoError::new(
                    ErrorCode::FailPointSetFailed,
                    format!("{name} not found"),
                ))
            }
        };
        let mode = parse_mode(body.get("mode"))?;
        let data = match body.get("data") {
            None => Document::new(),
            Some(Bson::Document(d)) => d.clone(),
            Some(_) => {
                return Err(MongoError::new(
                    ErrorCode::BadValue,
                    "'data' must be an object",
                ))
            }
        };
        let mut st = lock(point);
        let before = st.times_entered;
        st.mode = mode;
        st.data = data;
        Ok(before)
    }

    /// `failGetMoreAfterCursorCheckout`'s data if it fires for this getMore.
    pub fn fire_get_more(&self) -> Option<Document> {
        lock(&self.get_more).hit()
    }

    /// Whether `onPrimaryTransactionalWrite` fires for the retryable write statement that
    /// just ran; if it does, counts the hit and returns its data.
    pub fn fire_on_primary_write(&self) -> Option<Document> {
        lock(&self.on_primary_transactional_write).hit()
    }

    /// Whether `failCommand` fires for `target` at `check`; if it does, counts the hit (and
    /// uses up one of `{times}`) and returns its data.
    pub fn fire(&self, check: Check, target: Target<'_>) -> Option<Document> {
        let mut st = self.lock();
        if st.mode == Mode::Off || !applies(&st.data, check, target) {
            return None;
        }
        st.hit()
    }
}

fn lock(point: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    point.lock().unwrap_or_else(|p| p.into_inner())
}

/// mongod's `shouldActivateFailCommandFailPoint` plus the per-check condition: never
/// `configureFailPoint` itself; only the client named by `appName` when there is one; only a
/// command `failCommands` names (by any of its spellings); and before a command, only if
/// there is something to do (close, block or an error code), after it only for a
/// `writeConcernError`. `failInternalCommands` matters only for mongod's internal clients,
/// of which this server has none, so every client here is external.
fn applies(data: &Document, check: Check, target: Target<'_>) -> bool {
    if target.command == "configureFailPoint" {
        return false;
    }
    if let Some(want) = data.get("appName") {
        if want.as_str().is_none() || want.as_str() != target.app_name {
            return false;
        }
    }
    let named = data
        .get_array("failCommands")
        .map(|names| {
            names
                .iter()
                .filter_map(Bson::as_str)
                .any(|n| same_command(n, target.command))
        })
        .unwrap_or(false);
    if !named {
        return false;
    }
    match check {
        Check::Before => {
            flag(data, "closeConnection")
                || flag(data, "blockConnection")
                || integer(data, "errorCode").is_some()
        }
        Check::After => data.contains_key("writeConcernError"),
    }
}

/// Whether `a` and `b` name one command (mongod's `hasAlias`).
fn same_command(a: &str, b: &str) -> bool {
    const ALIASES: &[&[&str]] = &[
        &["isMaster", "ismaster"],
        &["findAndModify", "findandmodify"],
        &["buildInfo", "buildinfo"],
    ];
    a == b
        || ALIASES
            .iter()
            .any(|group| group.contains(&a) && group.contains(&b))
}

/// A boolean field that is present and true.
pub fn flag(data: &Document, field: &str) -> bool {
    data.get_bool(field).unwrap_or(false)
}

/// A numeric field as an integer (mongod's `bsonExtractIntegerField`: any number type).
pub fn integer(data: &Document, field: &str) -> Option<i64> {
    match data.get(field)? {
        Bson::Int32(n) => Some(i64::from(*n)),
        Bson::Int64(n) => Some(*n),
        Bson::Double(x) if x.fract() == 0.0 => Some(*x as i64),
        _ => None,
    }
}

/// `mode: "off" | "alwaysOn" | {times: n} | {skip: n}`.
fn parse_mode(v: Option<&Bson>) -> Result<Mode, MongoError> {
    let bad = |m: &str| MongoError::new(ErrorCode::BadValue, m.to_owned());
    match v {
        Some(Bson::String(s)) if s == "off" => Ok(Mode::Off),
        Some(Bson::String(s)) if s == "alwaysOn" => Ok(Mode::AlwaysOn),
        Some(Bson::String(s)) => Err(bad(&format!("unknown mode: {s}"))),
        Some(Bson::Document(d)) => {
            let count = |field: &str| -> Result<Option<i64>, MongoError> {
                match d.get(field) {
                    None => Ok(None),
                    Some(_) => match integer(d, field) {
                        Some(n) if n >= 0 => Ok(Some(n)),
                        Some(_) => {
                            Err(bad(&format!("'{field}' option to 'mode' must be positive")))
                        }
                        None => Err(bad(&format!("'{field}' option to 'mode' must be a number"))),
                    },
                }
            };
            if let Some(n) = count("times")? {
                return Ok(if n == 0 { Mode::Off } else { Mode::Times(n) });
            }
            if let Some(n) = count("skip")? {
                return Ok(Mode::Skip(n));
            }
            Err(bad(
                "'mode' must be one of 'off', 'alwaysOn', 'times', and 'skip'",
            ))
        }
        Some(_) => Err(bad("'mode' must be a string or JSON object")),
        None => Err(bad("Missing 'mode' field")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn target(command: &str) -> Target<'_> {
        Target {
            command,
            app_name: None,
        }
    }

    #[test]
    fn times_fires_exactly_n_times_and_counts() {
        let fp = FailPoints::default();
        let body =
            doc! {"mode": {"times": 2}, "data": {"failCommands": ["insert"], "errorCode": 91}};
        assert_eq!(fp.configure(FAIL_COMMAND, &body), Ok(0));
        assert!(fp.fire(Check::Before, target("find")).is_none());
        assert!(fp.fire(Check::Before, target("insert")).is_some());
        assert!(fp.fire(Check::Before, target("insert")).is_some());
        assert!(fp.fire(Check::Before, target("insert")).is_none());
        assert_eq!(fp.configure(FAIL_COMMAND, &doc! {"mode": "off"}), Ok(2));
    }

    #[test]
    fn skip_lets_n_pass_then_fires() {
        let fp = FailPoints::default();
        let body =
            doc! {"mode": {"skip": 1}, "data": {"failCommands": ["ping"], "closeConnection": true}};
        fp.configure(FAIL_COMMAND, &body).expect("configure");
        assert!(fp.fire(Check::Before, target("ping")).is_none());
        assert!(fp.fire(Check::Before, target("ping")).is_some());
        assert!(fp.fire(Check::Before, target("ping")).is_some());
    }

    #[test]
    fn what_never_fires() {
        let fp = FailPoints::default();
        let data = doc! {"failCommands": ["configureFailPoint", "isMaster", "insert"],
        "errorCode": 2, "appName": "app"};
        fp.configure(FAIL_COMMAND, &doc! {"mode": "alwaysOn", "data": data})
            .expect("configure");
        assert!(fp
            .fire(Check::Before, target("configureFailPoint"))
            .is_none());
        assert!(
            fp.fire(Check::Before, target("insert")).is_none(),
            "wrong app"
        );
        let from_app = Target {
            command: "ismaster",
            app_name: Some("app"),
        };
        assert!(fp.fire(Check::Before, from_app).is_some(), "alias");
        assert!(
            fp.fire(Check::After, from_app).is_none(),
            "no writeConcernError"
        );
        // Nothing to do before the command: it does not fire (nor count).
        let wce = doc! {"failCommands": ["insert"], "writeConcernError": {"code": 91}};
        assert_eq!(
            fp.configure(FAIL_COMMAND, &doc! {"mode": "alwaysOn", "data": wce}),
            Ok(1)
        );
        assert!(fp.fire(Check::Before, target("insert")).is_none());
        assert!(fp.fire(Check::After, target("insert")).is_some());
    }

    #[test]
    fn on_primary_transactional_write_fires_by_mode_alone() {
        let fp = FailPoints::default();
        assert!(fp.fire_on_primary_write().is_none());
        let body = doc! {"mode": {"times": 2}, "data": {"failBeforeCommitExceptionCode": 1}};
        assert_eq!(fp.configure(ON_PRIMARY_TRANSACTIONAL_WRITE, &body), Ok(0));
        assert!(
            fp.fire(Check::Before, target("insert")).is_none(),
            "not failCommand"
        );
        let data = fp.fire_on_primary_write().expect("fires");
        assert_eq!(integer(&data, "failBeforeCommitExceptionCode"), Some(1));
        assert!(fp.fire_on_primary_write().is_some());
        assert!(fp.fire_on_primary_write().is_none(), "times used up");
        let off = doc! {"mode": "off"};
        assert_eq!(fp.configure(ON_PRIMARY_TRANSACTIONAL_WRITE, &off), Ok(2));
    }

    #[test]
    fn bad_configurations_are_refused() {
        let fp = FailPoints::default();
        let code = |name: &str, body: Document| fp.configure(name, &body).expect_err("bad").code;
        assert_eq!(
            code("nope", doc! {"mode": "off"}),
            ErrorCode::FailPointSetFailed
        );
        assert_eq!(code(FAIL_COMMAND, doc! {}), ErrorCode::BadValue);
        assert_eq!(
            code(FAIL_COMMAND, doc! {"mode": "sometimes"}),
            ErrorCode::BadValue
        );
        assert_eq!(
            code(FAIL_COMMAND, doc! {"mode": {"times": -1}}),
            ErrorCode::BadValue
        );
    }
}
