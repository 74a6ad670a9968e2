//! `serve --setParameter name=value` (repeatable): the server parameters this binary takes
//! at startup, checked the way mongod checks them (an unknown name stops the start with
//! mongod's "Unknown --setParameter 'x'"), and mongod's `parsed.setParameter` document
//! (values as the strings given). Pure: reads no files, starts nothing.

use anyhow::{bail, Context};
use bson::Document;

/// The startup parameters given with `--setParameter`; `None`: not given.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct StartupParameters {
    /// `enableTestCommands` (mongod's test-only commands: `configureFailPoint`).
    pub enable_test_commands: Option<bool>,
    /// `transactionLifetimeLimitSeconds` (at least 1).
    pub transaction_lifetime_limit_secs: Option<u64>,
    /// `localLogicalSessionTimeoutMinutes` (at least 1).
    pub session_timeout_minutes: Option<u64>,
    /// `maxSessions` (at least 1; mongod's default 1,000,000).
    pub max_sessions: Option<u64>,
    /// `scramIterationCount` (SCRAM-SHA-1 keys; at least 5,000).
    pub scram_sha1_iterations: Option<u32>,
    /// `scramSHA256IterationCount` (SCRAM-SHA-256 keys; at least 4,096).
    pub scram_sha256_iterations: Option<u32>,
    /// `fastUpdates` (TokuMX's read-free updates; also TokuMX's spelling `fastupdates`).
    pub fast_updates: Option<bool>,
    /// `ttlMonitorEnabled` (TTL indexes expire documents; default true).
    pub ttl_monitor_enabled: Option<bool>,
    /// `ttlMonitorSleepSecs` (seconds between TTL passes, at least 1; default 60).
    pub ttl_monitor_sleep_secs: Option<u64>,
    /// `name: "value"` for each, in the order given (`getCmdLineOpts.parsed.setParameter`).
    pub parsed: Document,
}

/// Parses every `name=value` given; a later one wins over an earlier one of the same name.
pub fn parse(given: &[String]) -> anyhow::Result<StartupParameters> {
    let mut out = StartupParameters::default();
    for item in given {
        let Some((name, value)) = item.split_once('=') else {
            bail!("Illegal option assignment: \"{item}\" (--setParameter takes name=value)");
        };
        match name {
            "enableTestCommands" => out.enable_test_commands = Some(boolean(name, value)?),
            "fastUpdates" | "fastupdates" => out.fast_updates = Some(boolean(name, value)?),
            "ttlMonitorEnabled" => out.ttl_monitor_enabled = Some(boolean(name, value)?),
            "ttlMonitorSleepSecs" => out.ttl_monitor_sleep_secs = Some(at_least_one(name, value)?),
            "transactionLifetimeLimitSeconds" => {
                out.transaction_lifetime_limit_secs = Some(at_least_one(name, value)?)
            }
            "maxSessions" => out.max_sessions = Some(at_least_one(name, value)?),
            "localLogicalSessionTimeoutMinutes" => {
                out.session_timeout_minutes = Some(at_least_one(name, value)?)
            }
            "scramIterationCount" => {
                out.scram_sha1_iterations = Some(at_least(name, value, 5_000)?)
            }
            "scramSHA256IterationCount" => {
                out.scram_sha256_iterations = Some(at_least(name, value, 4_096)?)
            }
            _ => bail!("Unknown --setParameter '{name}'"),
        }
        out.parsed.insert(name, value);
    }
    Ok(out)
}

/// mongod's boolean parameter spellings.
fn boolean(name: &str, value: &str) -> anyhow::Result<bool> {
    match value {
        "1" | "true" => Ok(true),
        "0" | "false" => Ok(false),
        _ => bail!("Invalid value for parameter {name}: \"{value}\" is not a boolean"),
    }
}

fn at_least(name: &str, value: &str, min: u32) -> anyhow::Result<u32> {
    let n: u32 = value
        .parse()
        .with_context(|| format!("Invalid value for parameter {name}: \"{value}\""))?;
    if n < min {
        bail!("Invalid value for parameter {name}: {n} is less than {min}");
    }
    Ok(n)
}

fn at_least_one(name: &str, value: &str) -> anyhow::Result<u64> {
    let n: u64 = value
        .parse()
        .with_context(|| format!("Invalid value for parameter {name}: \"{value}\""))?;
    if n < 1 {
        bail!("Invalid value for parameter {name}: {n} is not greater than or equal to 1");
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn known_parameters_parse_and_show_in_parsed() {
        let p = parse(&strings(&[
            "enableTestCommands=1",
            "transactionLifetimeLimitSeconds=5",
            "localLogicalSessionTimeoutMinutes=2",
            "maxSessions=3",
        ]))
        .expect("parse");
        assert_eq!(p.max_sessions, Some(3));
        assert_eq!(p.enable_test_commands, Some(true));
        assert_eq!(p.transaction_lifetime_limit_secs, Some(5));
        assert_eq!(p.session_timeout_minutes, Some(2));
        assert_eq!(p.parsed.get_str("enableTestCommands"), Ok("1"));
        let scram = parse(&strings(&[
            "scramIterationCount=6000",
            "scramSHA256IterationCount=20000",
        ]))
        .expect("scram");
        assert_eq!(scram.scram_sha1_iterations, Some(6000));
        assert_eq!(scram.scram_sha256_iterations, Some(20000));
        let fast = parse(&strings(&["fastUpdates=true"])).expect("fast");
        assert_eq!(fast.fast_updates, Some(true));
        let toku = parse(&strings(&["fastupdates=0"])).expect("toku spelling");
        assert_eq!(toku.fast_updates, Some(false));
        assert_eq!(parse(&[]).expect("none"), StartupParameters::default());
    }

    #[test]
    fn unknown_or_bad_parameters_stop_the_start() {
        let e = parse(&strings(&["foo=bar"])).expect_err("unknown");
        assert_eq!(e.to_string(), "Unknown --setParameter 'foo'");
        assert!(parse(&strings(&["enableTestCommands"])).is_err());
        assert!(parse(&strings(&["enableTestCommands=maybe"])).is_err());
        assert!(parse(&strings(&["fastUpdates=yes"])).is_err());
        assert!(parse(&strings(&["transactionLifetimeLimitSeconds=0"])).is_err());
        assert!(parse(&strings(&["scramIterationCount=4999"])).is_err());
        assert!(parse(&strings(&["scramSHA256IterationCount=4095"])).is_err());
    }
}
