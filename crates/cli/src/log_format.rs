//! mongod's structured log line (logv2 JSON), one object per line:
//! `{"t":{"$date":...},"s":"I","c":"NETWORK","id":...,"ctx":"conn3","msg":"...","attr":{...}}`.
//! `--logFormat json` writes it, and so do the in-memory rings `getLog` returns, because
//! tools read those lines as mongod's (mongosh prints startup warnings as `t.$date: msg`).
//! The component comes from the event's target, the id is a stable hash of the message text
//! (mongod's ids are assigned by hand), the context is `conn<N>` for events with a `conn`
//! field and the thread's name otherwise; every other field goes into `attr`.

use serde_json::Value;
use std::fmt::{self, Write as _};
use std::time::{SystemTime, UNIX_EPOCH};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// Formats events as mongod's JSON log lines.
#[derive(Debug, Clone, Copy, Default)]
pub struct MongoJson;

impl<S, N> FormatEvent<S, N> for MongoJson
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let meta = event.metadata();
        let mut fields = Fields::default();
        event.record(&mut fields);
        let line = render(
            SystemTime::now(),
            *meta.level(),
            meta.target(),
            &fields,
            std::thread::current().name(),
        );
        writeln!(writer, "{line}")
    }
}

/// The fields of one event: the message, the connection id, and the rest in order.
#[derive(Debug, Default)]
struct Fields {
    message: String,
    conn: Option<u64>,
    attr: Vec<(&'static str, Value)>,
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.push(field, Value::String(format!("{value:?}")));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.push(field, Value::String(value.to_owned()));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.push(field, Value::from(value));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        if field.name() == "conn" {
            self.conn = Some(value);
            return;
        }
        self.push(field, Value::from(value));
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.push(field, Value::from(value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.push(field, Value::Bool(value));
    }
}

impl Fields {
    fn push(&mut self, field: &Field, value: Value) {
        match (field.name(), value) {
            ("message", Value::String(s)) => self.message = s,
            (name, value) => self.attr.push((name, value)),
        }
    }
}

fn render(
    now: SystemTime,
    level: Level,
    target: &str,
    fields: &Fields,
    thread: Option<&str>,
) -> String {
    let ctx = match fields.conn {
        Some(n) => format!("conn{n}"),
        None => thread.unwrap_or("main").to_owned(),
    };
    let mut out = String::with_capacity(160);
    let _ = write!(
        out,
        r#"{{"t":{{"$date":"{}"}},"s":"{}","c":"{}","id":{},"ctx":{},"msg":{}"#,
        iso8601_millis(now),
        severity(level),
        component(target),
        message_id(&fields.message),
        Value::String(ctx),
        Value::String(fields.message.clone()),
    );
    if !fields.attr.is_empty() {
        out.push_str(r#","attr":{"#);
        for (i, (k, v)) in fields.attr.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let _ = write!(out, "{}:{v}", Value::String((*k).to_owned()));
        }
        out.push('}');
    }
    out.push('}');
    out
}

/// mongod's severity letters (debug levels 1 and 2 for tracing's debug and trace).
fn severity(level: Level) -> &'static str {
    match level {
        Level::ERROR => "E",
        Level::WARN => "W",
        Level::INFO => "I",
        Level::DEBUG => "D1",
        Level::TRACE => "D2",
    }
}

/// mongod's log component for an event target.
fn component(target: &str) -> &'static str {
    let crate_name = target.split("::").next().unwrap_or(target);
    match crate_name {
        "shale_server" if target.starts_with("shale_server::commands") => "COMMAND",
        "shale_server" => "NETWORK",
        "shale_engine" | "shale_db" | "shale_io" => "STORAGE",
        "shale" | "startupWarnings" => "CONTROL",
        _ => "-",
    }
}

/// A stable number for a message text (FNV-1a, kept to mongod's id range).
fn message_id(message: &str) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in message.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h % 10_000_000
}

/// `2026-11-22T17:10:56.207+00:00` (UTC, milliseconds, as mongod writes `$date`).
fn iso8601_millis(t: SystemTime) -> String {
    let since = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}+00:00",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        since.subsec_millis()
    )
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn dates_are_mongods() {
        assert_eq!(iso8601_millis(UNIX_EPOCH), "1970-01-01T00:00:00.000+00:00");
        let t = UNIX_EPOCH + Duration::from_millis(1_617_910_118_885);
        assert_eq!(iso8601_millis(t), "2021-04-08T19:28:38.885+00:00");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29
        assert_eq!(iso8601_millis(leap), "2000-02-29T00:00:00.000+00:00");
    }

    #[test]
    fn a_line_has_mongods_keys_in_order() {
        let fields = Fields {
            message: "connection accepted".into(),
            conn: Some(7),
            attr: vec![
                ("peer", Value::String("127.0.0.1:5000".into())),
                ("n", 3.into()),
            ],
        };
        let line = render(
            UNIX_EPOCH,
            Level::INFO,
            "shale_server::connection",
            &fields,
            Some("tokio-runtime-worker"),
        );
        let v: Value = serde_json::from_str(&line).expect("valid JSON");
        assert_eq!(v["t"]["$date"], "1970-01-01T00:00:00.000+00:00");
        assert_eq!(v["s"], "I");
        assert_eq!(v["c"], "NETWORK");
        assert_eq!(v["ctx"], "conn7");
        assert_eq!(v["msg"], "connection accepted");
        assert_eq!(v["attr"]["peer"], "127.0.0.1:5000");
        assert_eq!(v["attr"]["n"], 3);
        let keys: Vec<usize> = [
            "\"t\"", "\"s\"", "\"c\"", "\"id\"", "\"ctx\"", "\"msg\"", "\"attr\"",
        ]
        .iter()
        .map(|k| line.find(k).expect("key"))
        .collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "{line}");
    }

    #[test]
    fn no_attr_when_there_are_no_fields() {
        let fields = Fields {
            message: "shutting down".into(),
            ..Fields::default()
        };
        let line = render(UNIX_EPOCH, Level::WARN, "shale", &fields, None);
        let v: Value = serde_json::from_str(&line).expect("valid JSON");
        assert!(v.get("attr").is_none());
        assert_eq!(
            (v["s"].as_str(), v["c"].as_str(), v["ctx"].as_str()),
            (Some("W"), Some("CONTROL"), Some("main"))
        );
        assert_eq!(message_id("shutting down"), message_id("shutting down"));
    }
}
