//! `shale serve --help` states every default (issue 28): each option that takes a value says
//! `[default: ...]` (clap's own for `default_value_t`, written in the doc comment where the
//! configuration file may set the value), and the defaults it states are the ones the code
//! uses.

use super::*;
use clap::CommandFactory;
use shale_server::auth::scram::Mechanism;

/// Options that take a value but have no default: without them nothing is read (`--config`,
/// `--tlsCertificateKeyFile`, `--tlsCAFile`), no parameter is set (`--setParameter`, whose
/// parameters' defaults its help lists), or the log goes to standard error (`--logpath`, as
/// its help says).
const NO_DEFAULT: &[&str] = &[
    "config",
    "setParameter",
    "logpath",
    "tlsCertificateKeyFile",
    "tlsCAFile",
];

/// A subcommand's long help, whitespace runs collapsed so a wrapped line still matches.
fn help_of(name: &str) -> (clap::Command, String) {
    let mut cmd = Cli::command()
        .find_subcommand(name)
        .cloned()
        .unwrap_or_else(|| panic!("no subcommand {name}"));
    let text = cmd.render_long_help().to_string();
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    (cmd, text)
}

#[test]
fn every_option_with_a_value_states_its_default() {
    for name in ["serve", "verify", "repair"] {
        let (cmd, _) = help_of(name);
        for arg in cmd.get_arguments() {
            let Some(long) = arg.get_long() else { continue };
            if !arg.get_action().takes_values() || NO_DEFAULT.contains(&long) {
                continue;
            }
            let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
            assert!(
                !arg.get_default_values().is_empty() || help.contains("[default: "),
                "`shale {name} --{long}` takes a value but its help states no default: \
                 give it `default_value_t`, write `[default: ...]` in its doc comment, or \
                 list it in NO_DEFAULT if it has none"
            );
        }
    }
}

#[test]
fn stated_defaults_are_the_ones_in_force() {
    let (_, help) = help_of("serve");
    let resolved = settings::resolve(&Flags::default()).expect("defaults resolve");
    assert_eq!(resolved.log_format, settings::LogFormat::Text);
    assert_eq!(resolved.tls.mode, shale_server::tls::TlsMode::Disabled);
    let cache_bytes = DbOptions::default().engine.cache_bytes;
    let expected = [
        format!("[default: {}]", resolved.dbpath.display()),
        format!("[default: {}]", resolved.port),
        format!("[default: {}]", resolved.bind_ips.join(",")),
        format!(
            "[default: {}, i.e. {} MiB]",
            cache_bytes as f64 / (1u64 << 30) as f64,
            cache_bytes >> 20
        ),
        format!("[default: {DEFAULT_MAX_CONNS}]"),
        format!("[default: {DEFAULT_TRANSACTION_LIFETIME_SECS}]"),
        format!("[default: {DEFAULT_SESSION_TIMEOUT_MINUTES}]"),
        "[default: text]".to_owned(),
        "[net.tls.mode] [default: disabled]".to_owned(),
        "[replication.replSetName] [default: none, a standalone server]".to_owned(),
        format!(
            "scramIterationCount (default {})",
            Mechanism::Sha1.default_iterations()
        ),
        format!(
            "scramSHA256IterationCount (default {})",
            Mechanism::Sha256.default_iterations()
        ),
    ];
    for text in expected {
        assert!(help.contains(&text), "serve --help lacks {text:?}:\n{help}");
    }
    for name in ["verify", "repair"] {
        let (_, help) = help_of(name);
        let text = format!("[default: {}]", resolved.dbpath.display());
        assert!(
            help.contains(&text),
            "{name} --help lacks {text:?}:\n{help}"
        );
    }
}
