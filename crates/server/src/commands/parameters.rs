//! `getParameter`, `setParameter` and `getCmdLineOpts`: how the server is configured.
//! Parameters are a fixed table in name order (mongod's output order), each read from the
//! running configuration or the engine where we have one, else mongod 7.0's default for a
//! behaviour we share. `setParameter` changes what this server can change at run time
//! (`transactionLifetimeLimitSeconds`, the SCRAM iteration counts, `fastUpdates`, `ttlMonitorEnabled`,
//! `minSnapshotHistoryWindowInSeconds`); a parameter mongod changes at run time but this
//! server cannot yet is refused with NotImplemented (238), never pretended.

use super::{require_admin, CommandResult, GENERIC_ARGUMENTS};
use crate::auth::scram::Mechanism;
use crate::ConnectionCtx;
use bson::{doc, Bson, Document};
use shale_doc::{ErrorCode, MongoError};
use std::sync::atomic::Ordering::Relaxed;

/// One server parameter: its name, whether mongod lets it change at run time and at
/// startup, and how to read its value.
struct Parameter {
    name: &'static str,
    settable_at_runtime: bool,
    settable_at_startup: bool,
    value: fn(&ConnectionCtx) -> Bson,
    /// Changes it at run time, where this server can.
    set: Option<Setter>,
}

/// Changes a parameter at run time from the value `setParameter` gave.
type Setter = fn(&ConnectionCtx, &Bson) -> Result<(), MongoError>;

/// Every parameter we report, sorted by name.
const PARAMETERS: &[Parameter] = &[
    Parameter {
        name: "cursorTimeoutMillis",
        settable_at_runtime: true,
        settable_at_startup: true,
        value: |_| Bson::Int64(600_000),
        set: None,
    },
    Parameter {
        name: "diagnosticDataCollectionEnabled",
        settable_at_runtime: true,
        settable_at_startup: true,
        value: |_| Bson::Boolean(false),
        set: None,
    },
    Parameter {
        name: "enableTestCommands",
        settable_at_runtime: false,
        settable_at_startup: true,
        value: |ctx| Bson::Boolean(ctx.server.enable_test_commands),
        set: None,
    },
    Parameter {
        // TokuMX 2.0's read-free updates (`shale-db`'s `fast_update.rs`); off by default.
        name: "fastUpdates",
        settable_at_runtime: true,
        settable_at_startup: true,
        value: |ctx| Bson::Boolean(ctx.db.fast_updates()),
        set: Some(set_fast_updates),
    },
    Parameter {
        // TokuMX's own spelling of `fastUpdates`.
        name: "fastupdates",
        settable_at_runtime: true,
        settable_at_startup: true,
        value: |ctx| Bson::Boolean(ctx.db.fast_updates()),
        set: Some(set_fast_updates),
    },
    Parameter {
        name: "featureCompatibilityVersion",
        settable_at_runtime: false,
        settable_at_startup: false,
        value: |_| Bson::Document(doc! { "version": "7.0" }),
        set: None,
    },
    Parameter {
        // A blocking sort's memory before it spills (`shale-db`'s `spill_sort.rs`); also each
        // pipeline stage's limit here.
        name: "internalQueryMaxBlockingSortMemoryUsageBytes",
        settable_at_runtime: true,
        settable_at_startup: true,
        value: |_| Bson::Int64(i64::try_from(shale_db::sort_memory_limit()).unwrap_or(i64::MAX)),
        set: Some(set_sort_memory),
    },
    Parameter {
        // Set at startup with `serve --localLogicalSessionTimeoutMinutes`.
        name: "localLogicalSessionTimeoutMinutes",
        settable_at_runtime: false,
        settable_at_startup: true,
        value: |ctx| Bson::Int32(ctx.server.session_timeout_minutes()),
        set: None,
    },
    Parameter {
        name: "logComponentVerbosity",
        settable_at_runtime: true,
        settable_at_startup: true,
        value: |ctx| Bson::Document(doc! { "verbosity": ctx.server.log_verbosity }),
        set: None,
    },
    Parameter {
        name: "logLevel",
        settable_at_runtime: true,
        settable_at_startup: true,
        value: |ctx| Bson::Int32(ctx.server.log_verbosity),
        set: None,
    },
    Parameter {
        // Set at startup with `serve --setParameter maxSessions=N`.
        name: "maxSessions",
        settable_at_runtime: false,
        settable_at_startup: true,
        value: |ctx| Bson::Int32(i32::try_from(ctx.server.max_sessions()).unwrap_or(i32::MAX)),
        set: None,
    },
    Parameter {
        // How long a snapshot read's cluster time stays readable (`shale-db`'s
        // `snapshot_read.rs`); mongod's default, 300.
        name: "minSnapshotHistoryWindowInSeconds",
        settable_at_runtime: true,
        settable_at_startup: true,
        value: |ctx| {
            Bson::Int32(i32::try_from(ctx.db.snapshot_history_window()).unwrap_or(i32::MAX))
        },
        set: Some(set_history_window),
    },
    Parameter {
        name: "notablescan",
        settable_at_runtime: true,
        settable_at_startup: true,
        value: |_| Bson::Boolean(false),
        set: None,
    },
    Parameter {
        name: "quiet",
        settable_at_runtime: true,
        settable_at_startup: true,
        value: |ctx| Bson::Boolean(ctx.server.quiet),
        set: None,
    },
    Parameter {
        name: "requireApiVersion",
        settable_at_runtime: true,
        settable_at_startup: true,
        value: |_| Bson::Boolean(false),
        set: None,
    },
    Parameter {
        name: "scramIterationCount",
        settable_at_runtime: true,
        settable_at_startup: true,
        value: |ctx| iteration_count(ctx, Mechanism::Sha1),
        set: Some(|ctx, v| set_iteration_count(ctx, Mechanism::Sha1, v)),
    },
    Parameter {
        name: "scramSHA256IterationCount",
        settable_at_runtime: true,
        settable_at_startup: true,
        value: |ctx| iteration_count(ctx, Mechanism::Sha256),
        set: Some(|ctx, v| set_iteration_count(ctx, Mechanism::Sha256, v)),
    },
    Parameter {
        // Seconds between checkpoints: the engine's checkpoint interval (0 when off).
        name: "syncdelay",
        settable_at_runtime: true,
        settable_at_startup: true,
        value: |ctx| {
            let interval = ctx.db.engine().options().checkpoint_interval;
            Bson::Double(interval.map_or(0.0, |d| d.as_secs_f64()))
        },
        set: None,
    },
    Parameter {
        // Set at startup with `serve --transactionLifetimeLimitSeconds`.
        name: "transactionLifetimeLimitSeconds",
        settable_at_runtime: true,
        settable_at_startup: true,
        value: |ctx| {
            Bson::Int32(
                i32::try_from(ctx.server.transaction_lifetime_limit().as_secs())
                    .unwrap_or(i32::MAX),
            )
        },
        set: Some(set_lifetime_limit),
    },
    Parameter {
        // The TTL monitor (`crate::ttl_monitor`); on by default.
        name: "ttlMonitorEnabled",
        settable_at_runtime: true,
        settable_at_startup: true,
        value: |ctx| Bson::Boolean(!ctx.server.ttl_monitor_disabled.load(Relaxed)),
        set: Some(set_ttl_monitor_enabled),
    },
    Parameter {
        name: "ttlMonitorSleepSecs",
        settable_at_runtime: false,
        settable_at_startup: true,
        value: |ctx| {
            Bson::Int32(i32::try_from(ctx.server.ttl_monitor_sleep().as_secs()).unwrap_or(i32::MAX))
        },
        set: None,
    },
];

/// Which parameters a `getParameter` asks for, and how to show them.
struct Request {
    all: bool,
    show_details: bool,
    set_at: Option<SetAt>,
    /// Only incremental-feature-rollout flags, of which we have none.
    only_feature_rollouts: bool,
}

#[derive(Clone, Copy, PartialEq)]
enum SetAt {
    Runtime,
    Startup,
}

pub fn get_parameter(ctx: &ConnectionCtx, db: &str, body: &Document) -> CommandResult {
    require_admin(db, "getParameter")?;
    let first = body.iter().next().map(|(_, v)| v);
    let request = parse_request(first)?;
    let mut reply = Document::new();
    for p in PARAMETERS {
        let wanted = if request.all {
            true
        } else {
            body.contains_key(p.name)
        };
        let settable = match request.set_at {
            None => true,
            Some(SetAt::Runtime) => p.settable_at_runtime,
            Some(SetAt::Startup) => p.settable_at_startup,
        };
        if !wanted || !settable || request.only_feature_rollouts {
            continue;
        }
        let value = (p.value)(ctx);
        if request.show_details {
            reply.insert(
                p.name,
                doc! {
                    "value": value,
                    "settableAtRuntime": p.settable_at_runtime,
                    "settableAtStartup": p.settable_at_startup,
                },
            );
        } else {
            reply.insert(p.name, value);
        }
    }
    if reply.is_empty() {
        return Err(MongoError::new(
            ErrorCode::InvalidOptions,
            "no option found to get",
        ));
    }
    Ok(reply)
}

/// `getParameter: '*'`, `getParameter: {allParameters, showDetails, setAt}`, or any other
/// value (named parameters follow as fields).
fn parse_request(value: Option<&Bson>) -> Result<Request, MongoError> {
    let mut request = Request {
        all: false,
        show_details: false,
        set_at: None,
        only_feature_rollouts: false,
    };
    match value {
        Some(Bson::String(s)) if s == "*" => request.all = true,
        Some(Bson::Document(options)) => {
            for (k, v) in options {
                match k.as_str() {
                    "allParameters" => request.all = truthy(k, v)?,
                    "showDetails" => request.show_details = truthy(k, v)?,
                    "forIncrementalFeatureRollout" => request.only_feature_rollouts = truthy(k, v)?,
                    "setAt" => {
                        request.set_at = Some(match v {
                            Bson::String(s) if s == "runtime" => SetAt::Runtime,
                            Bson::String(s) if s == "startup" => SetAt::Startup,
                            _ => {
                                return Err(MongoError::new(
                                    ErrorCode::BadValue,
                                    format!(
                                        "Enumeration value '{}' for field 'getParameter.setAt' \
                                         is not a valid value.",
                                        display(v)
                                    ),
                                ))
                            }
                        })
                    }
                    other => {
                        return Err(MongoError::new(
                            ErrorCode::FailedToParse,
                            format!("BSON field 'getParameter.{other}' is an unknown field."),
                        ))
                    }
                }
            }
        }
        _ => {}
    }
    Ok(request)
}

fn truthy(field: &str, v: &Bson) -> Result<bool, MongoError> {
    match v {
        Bson::Boolean(b) => Ok(*b),
        Bson::Int32(n) => Ok(*n != 0),
        Bson::Int64(n) => Ok(*n != 0),
        Bson::Double(n) => Ok(*n != 0.0),
        other => Err(MongoError::new(
            ErrorCode::TypeMismatch,
            format!(
                "BSON field 'getParameter.{field}' is the wrong type '{:?}', expected types \
                 '[bool, long, int, decimal, double]'",
                other.element_type()
            ),
        )),
    }
}

fn display(v: &Bson) -> String {
    match v {
        Bson::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `{setParameter: 1, <name>: <value>, ...}`: admin only; every name is checked before any
/// is changed; replies with `was`, the first parameter's previous value.
pub fn set_parameter(ctx: &ConnectionCtx, db: &str, body: &Document) -> CommandResult {
    require_admin(db, "setParameter")?;
    let mut wanted = Vec::new();
    for (name, value) in body.iter().skip(1) {
        if GENERIC_ARGUMENTS.contains(&name.as_str()) {
            continue;
        }
        wanted.push((settable(name)?, value));
    }
    let Some((first, _)) = wanted.first() else {
        return Err(MongoError::new(
            ErrorCode::InvalidOptions,
            "no option found to set, use help:true to see options ",
        ));
    };
    let was = (first.value)(ctx);
    for (p, value) in wanted {
        let set = p.set.ok_or_else(|| {
            MongoError::new(
                ErrorCode::NotImplemented,
                format!("this server cannot change [{}] at runtime yet", p.name),
            )
        })?;
        set(ctx, value)?;
    }
    Ok(doc! {"was": was})
}

/// The parameter `name`, if it exists and mongod lets it change at run time.
fn settable(name: &str) -> Result<&'static Parameter, MongoError> {
    let p = PARAMETERS.iter().find(|p| p.name == name).ok_or_else(|| {
        MongoError::new(
            ErrorCode::InvalidOptions,
            format!(
                "attempted to set unrecognized parameter [{name}], use help:true to see options "
            ),
        )
    })?;
    if !p.settable_at_runtime {
        return Err(MongoError::new(
            ErrorCode::IllegalOperation,
            format!("not allowed to change [{name}] at runtime"),
        ));
    }
    Ok(p)
}

/// `fastUpdates`: a boolean (or a number, non-zero for true), as mongod takes booleans.
fn set_fast_updates(ctx: &ConnectionCtx, value: &Bson) -> Result<(), MongoError> {
    ctx.db.set_fast_updates(boolean("fastUpdates", value)?);
    Ok(())
}

/// `internalQueryMaxBlockingSortMemoryUsageBytes`: a whole number of bytes, at least 1.
fn set_sort_memory(_: &ConnectionCtx, value: &Bson) -> Result<(), MongoError> {
    let bytes = whole_number("internalQueryMaxBlockingSortMemoryUsageBytes", value)?;
    let bytes = usize::try_from(bytes)
        .ok()
        .filter(|b| *b > 0)
        .ok_or_else(|| {
            MongoError::new(
                ErrorCode::BadValue,
                format!(
                    "Invalid value for internalQueryMaxBlockingSortMemoryUsageBytes: {bytes} is \
                 not greater than 0"
                ),
            )
        })?;
    shale_db::set_sort_memory_limit(bytes);
    Ok(())
}

/// `minSnapshotHistoryWindowInSeconds`: a whole number of seconds, at least 0.
fn set_history_window(ctx: &ConnectionCtx, value: &Bson) -> Result<(), MongoError> {
    let secs = whole_number("minSnapshotHistoryWindowInSeconds", value)?;
    let secs = u64::try_from(secs).map_err(|_| {
        MongoError::new(
            ErrorCode::BadValue,
            format!(
                "Invalid value for minSnapshotHistoryWindowInSeconds: {secs} is not greater \
                 than or equal to 0"
            ),
        )
    })?;
    ctx.db.set_snapshot_history_window(secs);
    Ok(())
}

/// `ttlMonitorEnabled`: a boolean (or a number, non-zero for true).
fn set_ttl_monitor_enabled(ctx: &ConnectionCtx, value: &Bson) -> Result<(), MongoError> {
    let on = boolean("ttlMonitorEnabled", value)?;
    ctx.server.ttl_monitor_disabled.store(!on, Relaxed);
    Ok(())
}

/// A boolean parameter's value as mongod takes it: a boolean, or a number (non-zero true).
fn boolean(name: &str, value: &Bson) -> Result<bool, MongoError> {
    match value {
        Bson::Boolean(b) => Ok(*b),
        Bson::Int32(n) => Ok(*n != 0),
        Bson::Int64(n) => Ok(*n != 0),
        Bson::Double(x) => Ok(*x != 0.0),
        other => Err(MongoError::new(
            ErrorCode::BadValue,
            format!("Invalid value for {name}: {other}"),
        )),
    }
}

/// A whole-number parameter's value as mongod takes it: an integer, or a double with no
/// fraction; anything else `BadValue`.
fn whole_number(name: &str, value: &Bson) -> Result<i64, MongoError> {
    match value {
        Bson::Int32(n) => Ok(i64::from(*n)),
        Bson::Int64(n) => Ok(*n),
        Bson::Double(x) if x.fract() == 0.0 => Ok(*x as i64),
        other => Err(MongoError::new(
            ErrorCode::BadValue,
            format!("Invalid value for {name}: {other}"),
        )),
    }
}

/// `transactionLifetimeLimitSeconds`: a whole number of seconds, at least 1.
fn set_lifetime_limit(ctx: &ConnectionCtx, value: &Bson) -> Result<(), MongoError> {
    let secs = whole_number("transactionLifetimeLimitSeconds", value)?;
    let secs = u64::try_from(secs)
        .ok()
        .filter(|s| *s >= 1)
        .ok_or_else(|| {
            MongoError::new(
                ErrorCode::BadValue,
                format!(
                "Invalid value for transactionLifetimeLimitSeconds: {secs} is not greater than or \
                 equal to 1"
            ),
            )
        })?;
    ctx.server
        .lifetime_limit_secs_set
        .store(secs, std::sync::atomic::Ordering::Relaxed);
    Ok(())
}

fn iteration_count(ctx: &ConnectionCtx, mech: Mechanism) -> Bson {
    Bson::Int32(i32::try_from(ctx.server.auth.iterations(mech)).unwrap_or(i32::MAX))
}

/// `scramIterationCount` / `scramSHA256IterationCount`: a whole number at least mongod's
/// minimum (5,000 / 4,096); users created or updated afterwards get it.
fn set_iteration_count(
    ctx: &ConnectionCtx,
    mech: Mechanism,
    value: &Bson,
) -> Result<(), MongoError> {
    let name = crate::auth::iteration_parameter(mech);
    let bad = || {
        MongoError::new(
            ErrorCode::BadValue,
            format!("Invalid value for {name}: {value}"),
        )
    };
    let count = match value {
        Bson::Int32(n) => i64::from(*n),
        Bson::Int64(n) => *n,
        Bson::Double(x) if x.fract() == 0.0 => *x as i64,
        _ => return Err(bad()),
    };
    let count = u32::try_from(count).map_err(|_| bad())?;
    ctx.server
        .auth
        .set_iterations(mech, count)
        .map_err(|m| MongoError::new(ErrorCode::BadValue, m))
}

pub fn get_cmd_line_opts(ctx: &ConnectionCtx, db: &str, _body: &Document) -> CommandResult {
    require_admin(db, "getCmdLineOpts")?;
    Ok(doc! {
        "argv": ctx.server.argv.clone(),
        "parsed": ctx.server.parsed.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_are_sorted_and_unique() {
        for pair in PARAMETERS.windows(2) {
            assert!(
                pair[0].name < pair[1].name,
                "{} then {}",
                pair[0].name,
                pair[1].name
            );
        }
    }

    #[test]
    fn set_parameter_answers_like_mongod() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db =
            shale_db::Database::open(dir.path(), shale_db::DbOptions::default()).expect("open");
        let ctx = ConnectionCtx::detached(std::sync::Arc::new(db));
        let set = |body: Document| set_parameter(&ctx, "admin", &body);
        let code = |body: Document| set(body).expect_err("refused").code.code();
        assert_eq!(
            set(doc! {"setParameter": 1, "transactionLifetimeLimitSeconds": 5}),
            Ok(doc! {"was": 60})
        );
        assert_eq!(ctx.server.transaction_lifetime_limit().as_secs(), 5);
        assert_eq!(code(doc! {"setParameter": 1, "nope": 1}), 72);
        assert_eq!(code(doc! {"setParameter": 1, "enableTestCommands": 1}), 20);
        assert_eq!(code(doc! {"setParameter": 1}), 72);
        assert_eq!(
            code(doc! {"setParameter": 1, "transactionLifetimeLimitSeconds": 0}),
            2
        );
        assert_eq!(code(doc! {"setParameter": 1, "notablescan": true}), 238);
        assert_eq!(
            set(doc! {"setParameter": 1, "scramSHA256IterationCount": 20_000}),
            Ok(doc! {"was": 15_000})
        );
        assert_eq!(ctx.server.auth.iterations(Mechanism::Sha256), 20_000);
        assert_eq!(
            code(doc! {"setParameter": 1, "scramIterationCount": 4_999}),
            2
        );
        assert_eq!(
            set_parameter(&ctx, "app", &doc! {"setParameter": 1}).map_err(|e| e.code.code()),
            Err(13)
        );
    }

    #[test]
    fn requests_parse_like_mongod() {
        let r = parse_request(Some(&Bson::String("*".into()))).expect("star");
        assert!(r.all && !r.show_details);
        let r = parse_request(Some(&Bson::Int32(1))).expect("one");
        assert!(!r.all);
        let r = parse_request(Some(&Bson::Document(
            doc! {"allParameters": true, "showDetails": 1, "setAt": "runtime"},
        )))
        .expect("options");
        assert!(r.all && r.show_details && r.set_at == Some(SetAt::Runtime));
        assert!(parse_request(Some(&Bson::Document(doc! {"setAt": "never"}))).is_err());
        assert!(parse_request(Some(&Bson::Document(doc! {"bogus": 1}))).is_err());
    }
}
