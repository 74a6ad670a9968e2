//! Logging setup: one subscriber writing text or mongod-style JSON lines (`log_format`) to
//! stderr or the log file, plus two JSON copies into the server's in-memory rings
//! (`getLog: 'global'` and `getLog: 'startupWarnings'`). Verbosity follows mongod's: 0 informational, 1 debug,
//! 2 and up trace; `quiet` silences per-connection and per-command lines. `SHALE_LOG`
//! (an env-filter directive) overrides both.

use crate::log_format::MongoJson;
use crate::settings::{LogFormat, Settings};
use anyhow::Context;
use shale_server::ram_log::{RamLog, STARTUP_WARNING_TARGET};
use std::sync::Mutex;
use tracing_subscriber::filter::{filter_fn, EnvFilter};
use tracing_subscriber::fmt::writer::BoxMakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer;

/// The filter directive for a verbosity and `quiet`.
pub fn directive(verbosity: i32, quiet: bool) -> String {
    let level = match verbosity {
        0 => "info",
        1 => "debug",
        _ => "trace",
    };
    if quiet {
        format!("{level},shale_server=warn")
    } else {
        level.to_owned()
    }
}

pub fn init(settings: &Settings) -> anyhow::Result<()> {
    let filter = EnvFilter::try_from_env("SHALE_LOG")
        .unwrap_or_else(|_| EnvFilter::new(directive(settings.verbosity, settings.quiet)));
    let (writer, ansi) = match &settings.log_path {
        Some(path) => {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .write(true)
                .append(settings.log_append)
                .truncate(!settings.log_append)
                .open(path)
                .with_context(|| format!("opening log file {}", path.display()))?;
            (BoxMakeWriter::new(Mutex::new(file)), false)
        }
        None => {
            use std::io::IsTerminal;
            (
                BoxMakeWriter::new(std::io::stderr),
                std::io::stderr().is_terminal(),
            )
        }
    };
    let console = match settings.log_format {
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .event_format(MongoJson)
            .with_writer(writer)
            .boxed(),
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_ansi(ansi)
            .with_writer(writer)
            .boxed(),
    };
    let global_ring = tracing_subscriber::fmt::layer()
        .event_format(MongoJson)
        .with_writer(|| RamLog::global().writer());
    let warnings_ring = tracing_subscriber::fmt::layer()
        .event_format(MongoJson)
        .with_writer(|| RamLog::startup_warnings().writer())
        .with_filter(filter_fn(|meta| meta.target() == STARTUP_WARNING_TARGET));
    tracing_subscriber::registry()
        .with(filter)
        .with(console)
        .with(global_ring)
        .with(warnings_ring)
        .try_init()
        .context("installing the log subscriber")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbosity_maps_to_levels() {
        assert_eq!(directive(0, false), "info");
        assert_eq!(directive(1, false), "debug");
        assert_eq!(directive(5, false), "trace");
        assert_eq!(directive(0, true), "info,shale_server=warn");
    }
}
