//! The `serve` settings: mongod's YAML configuration file (`--config`) overlaid with the
//! command-line flags, which win. Produces the settings the binary runs with and mongod's
//! `parsed` document (the options as given, nested like the YAML) for `getCmdLineOpts`.
//! Keys we do not use are reported back as warnings, not errors, so an existing
//! mongod.conf can be pointed at ShaleDB; a key we use with the wrong type is an error.

use anyhow::{bail, Context};
use bson::{Bson, Document};
use serde_yaml::Value;
use shale_server::tls::{TlsMode, TlsSettings};
use std::path::{Path, PathBuf};

/// Log line format on the console or log file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

/// What the command line may set; `None` means "not given" (the file or a default decides).
#[derive(Debug, Default, Clone)]
pub struct Flags {
    pub config: Option<PathBuf>,
    pub dbpath: Option<PathBuf>,
    pub port: Option<u16>,
    pub bind_ip: Option<String>,
    pub bind_ip_all: bool,
    pub cache_size_gb: Option<f64>,
    pub max_conns: Option<u64>,
    pub log_format: Option<String>,
    pub log_path: Option<PathBuf>,
    pub log_append: bool,
    pub verbosity: u8,
    pub quiet: bool,
    /// `--auth`.
    pub auth: bool,
    /// `--tlsMode`.
    pub tls_mode: Option<String>,
    /// `--tlsCertificateKeyFile`.
    pub tls_certificate_key_file: Option<PathBuf>,
    /// `--tlsCAFile`.
    pub tls_ca_file: Option<PathBuf>,
    /// `--tlsAllowConnectionsWithoutCertificates`.
    pub tls_allow_connections_without_certificates: bool,
    /// `--replSet`.
    pub repl_set: Option<String>,
    /// `--oplogSize` (MiB).
    pub oplog_size_mb: Option<u64>,
}

/// The settings the server runs with.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub dbpath: PathBuf,
    pub port: u16,
    /// Hosts or addresses to listen on, in the order given.
    pub bind_ips: Vec<String>,
    pub cache_size_gb: Option<f64>,
    /// `net.maxIncomingConnections` as given (the binary caps it by the descriptor limit).
    pub max_conns: Option<u64>,
    pub log_format: LogFormat,
    pub log_path: Option<PathBuf>,
    pub log_append: bool,
    pub verbosity: i32,
    pub quiet: bool,
    /// Access control (`--auth`, `security.authorization: enabled`).
    pub auth: bool,
    /// TLS for client connections (`--tls*`, `net.tls.*`).
    pub tls: TlsSettings,
    /// The replica set this server is a member of (`--replSet`,
    /// `replication.replSetName`); `None`: a standalone.
    pub repl_set: Option<String>,
    /// The oplog's size bound in MiB (`--oplogSize`, `replication.oplogSizeMB`); `None`: the
    /// default.
    pub oplog_size_mb: Option<u64>,
    /// The options as given (file, then flags), nested like mongod's YAML.
    pub parsed: Document,
    /// Configuration-file keys that were ignored, by dotted path.
    pub ignored_keys: Vec<String>,
}

pub const DEFAULT_DBPATH: &str = "./data";
pub const DEFAULT_PORT: u16 = 27017;
pub const DEFAULT_BIND_IP: &str = "127.0.0.1";

/// Reads the configuration file named by `flags.config`, if any, and overlays the flags.
pub fn resolve(flags: &Flags) -> anyhow::Result<Settings> {
    let file = match &flags.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading configuration file {}", path.display()))?;
            Some(
                parse_config(&text)
                    .with_context(|| format!("in configuration file {}", path.display()))?,
            )
        }
        None => None,
    };
    merge(flags, file.unwrap_or_default())
}

/// The keys of a configuration file that we use, as given.
#[derive(Debug, Default)]
struct FileConfig {
    dbpath: Option<String>,
    cache_size_gb: Option<f64>,
    port: Option<i64>,
    bind_ip: Option<String>,
    bind_ip_all: Option<bool>,
    max_conns: Option<i64>,
    verbosity: Option<i64>,
    quiet: Option<bool>,
    log_path: Option<String>,
    log_append: Option<bool>,
    log_format: Option<String>,
    authorization: Option<bool>,
    tls_mode: Option<String>,
    tls_certificate_key_file: Option<String>,
    tls_ca_file: Option<String>,
    tls_allow_without_certificates: Option<bool>,
    repl_set_name: Option<String>,
    oplog_size_mb: Option<i64>,
    /// Known keys in file order with their values, for `parsed`.
    given: Vec<(&'static str, Bson)>,
    ignored: Vec<String>,
}

/// Every key we read: its dotted path in the YAML.
const KEYS: &[&str] = &[
    "storage.dbPath",
    "storage.wiredTiger.engineConfig.cacheSizeGB",
    "storage.shale.cacheSizeGB",
    "net.port",
    "net.bindIp",
    "net.bindIpAll",
    "net.maxIncomingConnections",
    "systemLog.verbosity",
    "systemLog.quiet",
    "systemLog.path",
    "systemLog.destination",
    "systemLog.logAppend",
    "systemLog.logFormat",
    "security.authorization",
    "net.tls.mode",
    "net.tls.certificateKeyFile",
    "net.tls.CAFile",
    "net.tls.allowConnectionsWithoutCertificates",
    "replication.replSetName",
    "replication.oplogSizeMB",
];

fn parse_config(text: &str) -> anyhow::Result<FileConfig> {
    let root: Value = serde_yaml::from_str(text).context("not valid YAML")?;
    let mut leaves = Vec::new();
    match root {
        Value::Mapping(_) => flatten("", &root, &mut leaves)?,
        Value::Null => {} // an empty file
        _ => bail!("the top level must be a mapping of sections (storage, net, systemLog)"),
    }
    let mut c = FileConfig::default();
    for (path, value) in leaves {
        let Some(&key) = KEYS.iter().find(|k| **k == path) else {
            c.ignored.push(path);
            continue;
        };
        match key {
            "storage.dbPath" => c.dbpath = Some(string(key, &value)?),
            "storage.wiredTiger.engineConfig.cacheSizeGB" | "storage.shale.cacheSizeGB" => {
                c.cache_size_gb = Some(number(key, &value)?)
            }
            "net.port" => c.port = Some(integer(key, &value)?),
            "net.bindIp" => c.bind_ip = Some(string(key, &value)?),
            "net.bindIpAll" => c.bind_ip_all = Some(boolean(key, &value)?),
            "net.maxIncomingConnections" => c.max_conns = Some(integer(key, &value)?),
            "systemLog.verbosity" => c.verbosity = Some(integer(key, &value)?),
            "systemLog.quiet" => c.quiet = Some(boolean(key, &value)?),
            "systemLog.path" => c.log_path = Some(string(key, &value)?),
            "systemLog.logAppend" => c.log_append = Some(boolean(key, &value)?),
            "systemLog.logFormat" => c.log_format = Some(string(key, &value)?),
            "security.authorization" => {
                c.authorization = Some(match string(key, &value)?.as_str() {
                    "enabled" => true,
                    "disabled" => false,
                    other => bail!(
                        "security.authorization must be \"enabled\" or \"disabled\", not {other:?}"
                    ),
                })
            }
            "net.tls.mode" => c.tls_mode = Some(string(key, &value)?),
            "net.tls.certificateKeyFile" => c.tls_certificate_key_file = Some(string(key, &value)?),
            "net.tls.CAFile" => c.tls_ca_file = Some(string(key, &value)?),
            "net.tls.allowConnectionsWithoutCertificates" => {
                c.tls_allow_without_certificates = Some(boolean(key, &value)?)
            }
            "replication.replSetName" => c.repl_set_name = Some(string(key, &value)?),
            "replication.oplogSizeMB" => c.oplog_size_mb = Some(integer(key, &value)?),
            "systemLog.destination" => {
                let d = string(key, &value)?;
                if d != "file" {
                    bail!("systemLog.destination: only \"file\" is supported, not {d:?}");
                }
            }
            _ => unreachable!("every key in KEYS has an arm"),
        }
        c.given.push((key, yaml_to_bson(&value)));
    }
    Ok(c)
}

/// Dotted paths of every non-mapping value under `v`.
fn flatten(prefix: &str, v: &Value, out: &mut Vec<(String, Value)>) -> anyhow::Result<()> {
    match v {
        Value::Mapping(m) => {
            for (k, child) in m {
                let Value::String(k) = k else {
                    bail!("key {k:?} under {prefix:?} is not a string");
                };
                let path = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&path, child, out)?;
            }
        }
        other => out.push((prefix.to_owned(), other.clone())),
    }
    Ok(())
}

fn string(key: &str, v: &Value) -> anyhow::Result<String> {
    match v {
        Value::String(s) => Ok(s.clone()),
        _ => bail!("{key} must be a string"),
    }
}

fn integer(key: &str, v: &Value) -> anyhow::Result<i64> {
    v.as_i64()
        .with_context(|| format!("{key} must be an integer"))
}

fn number(key: &str, v: &Value) -> anyhow::Result<f64> {
    v.as_f64()
        .with_context(|| format!("{key} must be a number"))
}

fn boolean(key: &str, v: &Value) -> anyhow::Result<bool> {
    v.as_bool()
        .with_context(|| format!("{key} must be true or false"))
}

fn yaml_to_bson(v: &Value) -> Bson {
    match v {
        Value::Null => Bson::Null,
        Value::Bool(b) => Bson::Boolean(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => i32::try_from(i).map_or(Bson::Int64(i), Bson::Int32),
            None => Bson::Double(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => Bson::String(s.clone()),
        Value::Sequence(items) => Bson::Array(items.iter().map(yaml_to_bson).collect()),
        Value::Mapping(_) | Value::Tagged(_) => Bson::String(format!("{v:?}")),
    }
}

fn merge(flags: &Flags, file: FileConfig) -> anyhow::Result<Settings> {
    let mut parsed = Document::new();
    if let Some(p) = &flags.config {
        parsed.insert("config", path_string(p));
    }
    for (key, value) in &file.given {
        set_path(&mut parsed, key, value.clone());
    }
    let tls = tls_settings(flags, &file, &mut parsed)?;

    let dbpath = match &flags.dbpath {
        Some(p) => {
            set_path(&mut parsed, "storage.dbPath", path_string(p).into());
            p.clone()
        }
        None => PathBuf::from(file.dbpath.as_deref().unwrap_or(DEFAULT_DBPATH)),
    };
    let port = match flags.port {
        Some(p) => {
            set_path(&mut parsed, "net.port", Bson::Int32(p.into()));
            p
        }
        None => match file.port {
            Some(p) => u16::try_from(p)
                .ok()
                .with_context(|| format!("net.port must be between 0 and 65535, not {p}"))?,
            None => DEFAULT_PORT,
        },
    };
    let bind_ip_all = if flags.bind_ip_all {
        set_path(&mut parsed, "net.bindIpAll", true.into());
        true
    } else {
        file.bind_ip_all.unwrap_or(false)
    };
    let bind_text = match &flags.bind_ip {
        Some(b) => {
            set_path(&mut parsed, "net.bindIp", b.clone().into());
            b.clone()
        }
        None => file.bind_ip.unwrap_or_else(|| DEFAULT_BIND_IP.into()),
    };
    if bind_ip_all && flags.bind_ip.is_some() {
        bail!("--bind_ip and --bind_ip_all are mutually exclusive");
    }
    let bind_ips = if bind_ip_all {
        vec!["0.0.0.0".to_owned()]
    } else {
        split_bind_ips(&bind_text)?
    };
    let cache_size_gb = match flags.cache_size_gb {
        Some(gb) => {
            set_path(&mut parsed, "storage.shale.cacheSizeGB", Bson::Double(gb));
            Some(gb)
        }
        None => file.cache_size_gb,
    };
    if let Some(gb) = cache_size_gb {
        if !(gb > 0.0 && gb.is_finite()) {
            bail!("cacheSizeGB must be a positive number, not {gb}");
        }
    }
    let max_conns = match flags.max_conns {
        Some(n) => {
            set_path(
                &mut parsed,
                "net.maxIncomingConnections",
                Bson::Int64(n as i64),
            );
            Some(n)
        }
        None => match file.max_conns {
            Some(n) if n < 1 => bail!("net.maxIncomingConnections must be at least 1, not {n}"),
            Some(n) => Some(n as u64),
            None => None,
        },
    };
    if max_conns == Some(0) {
        bail!("--maxConns must be at least 1");
    }
    let log_format_text = match &flags.log_format {
        Some(f) => {
            set_path(&mut parsed, "systemLog.logFormat", f.clone().into());
            f.clone()
        }
        None => file.log_format.unwrap_or_else(|| "text".into()),
    };
    let log_format = match log_format_text.as_str() {
        "text" => LogFormat::Text,
        "json" => LogFormat::Json,
        other => bail!("log format must be \"text\" or \"json\", not {other:?}"),
    };
    let log_path = match &flags.log_path {
        Some(p) => {
            set_path(&mut parsed, "systemLog.destination", "file".into());
            set_path(&mut parsed, "systemLog.path", path_string(p).into());
            Some(p.clone())
        }
        None => file.log_path.map(PathBuf::from),
    };
    if flags.log_append {
        set_path(&mut parsed, "systemLog.logAppend", true.into());
    }
    let log_append = flags.log_append || file.log_append.unwrap_or(false);
    let verbosity = if flags.verbosity > 0 {
        set_path(
            &mut parsed,
            "systemLog.verbosity",
            Bson::Int32(flags.verbosity.into()),
        );
        i64::from(flags.verbosity)
    } else {
        file.verbosity.unwrap_or(0)
    };
    if !(0..=5).contains(&verbosity) {
        bail!("systemLog.verbosity must be between 0 and 5, not {verbosity}");
    }
    if flags.quiet {
        set_path(&mut parsed, "systemLog.quiet", true.into());
    }
    let quiet = flags.quiet || file.quiet.unwrap_or(false);
    if flags.auth {
        set_path(&mut parsed, "security.authorization", "enabled".into());
    }
    let auth = flags.auth || file.authorization.unwrap_or(false);
    let (repl_set, oplog_size_mb) =
        replication(flags, file.repl_set_name, file.oplog_size_mb, &mut parsed)?;
    Ok(Settings {
        dbpath,
        port,
        bind_ips,
        cache_size_gb,
        max_conns,
        log_format,
        log_path,
        log_append,
        verbosity: verbosity as i32,
        quiet,
        auth,
        tls,
        repl_set,
        oplog_size_mb,
        parsed,
        ignored_keys: file.ignored,
    })
}

/// The replica set name and the oplog's size bound, flags over the file's
/// `replication.replSetName` and `replication.oplogSizeMB`.
fn replication(
    flags: &Flags,
    file_set_name: Option<String>,
    file_oplog_mb: Option<i64>,
    parsed: &mut Document,
) -> anyhow::Result<(Option<String>, Option<u64>)> {
    let repl_set = match &flags.repl_set {
        Some(name) => {
            set_path(parsed, "replication.replSet", name.clone().into());
            Some(name.clone())
        }
        None => file_set_name,
    };
    if let Some(name) = &repl_set {
        check_set_name(name)?;
    }
    let oplog_size_mb = match (flags.oplog_size_mb, file_oplog_mb) {
        (Some(mb), _) => {
            set_path(parsed, "replication.oplogSizeMB", (mb as i64).into());
            Some(mb)
        }
        (None, Some(mb)) if (1..=1_048_576).contains(&mb) => Some(mb as u64),
        (None, Some(mb)) => bail!("replication.oplogSizeMB must be 1 to 1048576 (MiB), not {mb}"),
        (None, None) => None,
    };
    Ok((repl_set, oplog_size_mb))
}

/// mongod's rules for a set name: not empty, no `/` (its seed-list separator).
fn check_set_name(name: &str) -> anyhow::Result<()> {
    if name.is_empty() {
        bail!("--replSet / replication.replSetName must not be empty");
    }
    if name.contains('/') {
        bail!(
            "--replSet {name:?}: a set name may not contain '/' (mongod's old seed list \
             NAME/host,host is not supported: members other than this server cannot join)"
        );
    }
    Ok(())
}

/// `--tlsMode` and friends over `net.tls.*`; flags win.
fn tls_settings(
    flags: &Flags,
    file: &FileConfig,
    parsed: &mut Document,
) -> anyhow::Result<TlsSettings> {
    if let Some(m) = &flags.tls_mode {
        set_path(parsed, "net.tls.mode", m.clone().into());
    }
    let mode_text = flags.tls_mode.as_deref().or(file.tls_mode.as_deref());
    let mode = match mode_text {
        None => TlsMode::Disabled,
        Some(m) => TlsMode::parse(m).with_context(|| {
            format!(
                "net.tls.mode must be one of disabled, allowTLS, preferTLS, requireTLS, not {m:?}"
            )
        })?,
    };
    let certificate_key_file = match &flags.tls_certificate_key_file {
        Some(p) => {
            set_path(parsed, "net.tls.certificateKeyFile", path_string(p).into());
            Some(p.clone())
        }
        None => file.tls_certificate_key_file.as_ref().map(PathBuf::from),
    };
    let ca_file = match &flags.tls_ca_file {
        Some(p) => {
            set_path(parsed, "net.tls.CAFile", path_string(p).into());
            Some(p.clone())
        }
        None => file.tls_ca_file.as_ref().map(PathBuf::from),
    };
    if flags.tls_allow_connections_without_certificates {
        set_path(
            parsed,
            "net.tls.allowConnectionsWithoutCertificates",
            true.into(),
        );
    }
    Ok(TlsSettings {
        mode,
        certificate_key_file,
        ca_file,
        allow_connections_without_certificates: flags.tls_allow_connections_without_certificates
            || file.tls_allow_without_certificates.unwrap_or(false),
    })
}

/// mongod's `bindIp`: a comma-separated list of addresses or host names.
fn split_bind_ips(text: &str) -> anyhow::Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for part in text.split(',').map(str::trim) {
        if part.is_empty() {
            bail!("bindIp {text:?} has an empty entry");
        }
        if !out.iter().any(|p| p == part) {
            out.push(part.to_owned());
        }
    }
    Ok(out)
}

fn path_string(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// Sets `value` at a dotted `path`, creating sub-documents.
fn set_path(doc: &mut Document, path: &str, value: Bson) {
    match path.split_once('.') {
        None => {
            doc.insert(path, value);
        }
        Some((head, rest)) => {
            if !matches!(doc.get(head), Some(Bson::Document(_))) {
                doc.insert(head, Document::new());
            }
            let Some(Bson::Document(child)) = doc.get_mut(head) else {
                unreachable!("just inserted a document at {head}");
            };
            set_path(child, rest, value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    const CONF: &str = "
storage:
  dbPath: /var/lib/shale
  wiredTiger:
    engineConfig:
      cacheSizeGB: 0.5
  journal:
    commitIntervalMs: 100
net:
  port: 28000
  bindIp: 127.0.0.1,localhost
systemLog:
  destination: file
  path: /tmp/shale.log
  verbosity: 1
processManagement:
  fork: false
";

    fn with_file(flags: Flags) -> Settings {
        merge(&flags, parse_config(CONF).expect("parse")).expect("merge")
    }

    #[test]
    fn the_file_sets_what_flags_leave_alone() {
        let s = with_file(Flags::default());
        assert_eq!(s.dbpath, PathBuf::from("/var/lib/shale"));
        assert_eq!(s.port, 28000);
        assert_eq!(s.bind_ips, ["127.0.0.1", "localhost"]);
        assert_eq!(s.cache_size_gb, Some(0.5));
        assert_eq!(s.log_path, Some(PathBuf::from("/tmp/shale.log")));
        assert_eq!(s.verbosity, 1);
        assert_eq!(
            s.ignored_keys,
            ["storage.journal.commitIntervalMs", "processManagement.fork"]
        );
        assert_eq!(
            s.parsed.get_document("net").expect("net"),
            &doc! {"port": 28000, "bindIp": "127.0.0.1,localhost"}
        );
    }

    #[test]
    fn flags_override_the_file_and_show_in_parsed() {
        let s = with_file(Flags {
            config: Some("/etc/shale.conf".into()),
            port: Some(29000),
            dbpath: Some("/data/x".into()),
            cache_size_gb: Some(2.0),
            ..Flags::default()
        });
        assert_eq!(s.port, 29000);
        assert_eq!(s.dbpath, PathBuf::from("/data/x"));
        assert_eq!(s.cache_size_gb, Some(2.0));
        assert_eq!(s.parsed.get_str("config"), Ok("/etc/shale.conf"));
        assert_eq!(
            s.parsed.get_document("net").expect("net").get_i32("port"),
            Ok(29000)
        );
        let storage = s.parsed.get_document("storage").expect("storage");
        assert_eq!(storage.get_str("dbPath"), Ok("/data/x"));
        assert_eq!(
            storage
                .get_document("shale")
                .and_then(|d| d.get_f64("cacheSizeGB")),
            Ok(2.0)
        );
    }

    #[test]
    fn max_incoming_connections_from_the_file_or_the_flag() {
        let file = parse_config("net:\n  maxIncomingConnections: 500\n").expect("parse");
        let s = merge(&Flags::default(), file).expect("merge");
        assert_eq!(s.max_conns, Some(500));
        let file = parse_config("net:\n  maxIncomingConnections: 500\n").expect("parse");
        let flags = Flags {
            max_conns: Some(7),
            ..Flags::default()
        };
        let s = merge(&flags, file).expect("merge");
        assert_eq!(s.max_conns, Some(7));
        let net = s.parsed.get_document("net").expect("net");
        assert_eq!(net.get_i64("maxIncomingConnections"), Ok(7));
        let zero = parse_config("net:\n  maxIncomingConnections: 0\n").expect("parse");
        assert!(merge(&Flags::default(), zero).is_err());
    }

    #[test]
    fn defaults_without_a_file() {
        let s = merge(&Flags::default(), FileConfig::default()).expect("merge");
        assert_eq!(s.dbpath, PathBuf::from(DEFAULT_DBPATH));
        assert_eq!(s.port, DEFAULT_PORT);
        assert_eq!(s.bind_ips, [DEFAULT_BIND_IP]);
        assert_eq!(s.log_format, LogFormat::Text);
        assert!(s.parsed.is_empty());
    }

    #[test]
    fn shale_cache_key_and_bind_ip_all() {
        let c = parse_config("storage:\n  shale:\n    cacheSizeGB: 1\nnet:\n  bindIpAll: true\n")
            .expect("parse");
        let s = merge(&Flags::default(), c).expect("merge");
        assert_eq!(s.cache_size_gb, Some(1.0));
        assert_eq!(s.bind_ips, ["0.0.0.0"]);
    }

    #[test]
    fn tls_from_the_file_or_the_flags() {
        let c = parse_config(
            "net:\n  tls:\n    mode: requireTLS\n    certificateKeyFile: /s.pem\n    CAFile: /ca.pem\n    allowConnectionsWithoutCertificates: true\n",
        )
        .expect("parse");
        let s = merge(&Flags::default(), c).expect("merge");
        assert_eq!(
            s.tls,
            TlsSettings {
                mode: TlsMode::RequireTls,
                certificate_key_file: Some("/s.pem".into()),
                ca_file: Some("/ca.pem".into()),
                allow_connections_without_certificates: true,
            }
        );
        let flags = Flags {
            tls_mode: Some("preferTLS".into()),
            tls_certificate_key_file: Some("/f.pem".into()),
            ..Flags::default()
        };
        let c = parse_config("net:\n  tls:\n    mode: requireTLS\n").expect("parse");
        let s = merge(&flags, c).expect("merge");
        assert_eq!(s.tls.mode, TlsMode::PreferTls);
        assert_eq!(s.tls.certificate_key_file, Some("/f.pem".into()));
        let bad = Flags {
            tls_mode: Some("requireSSL".into()),
            ..Flags::default()
        };
        assert!(merge(&bad, FileConfig::default()).is_err());
    }

    #[test]
    fn authorization_from_the_file_or_the_flag() {
        let c = parse_config("security:\n  authorization: enabled\n").expect("parse");
        let s = merge(&Flags::default(), c).expect("merge");
        assert!(s.auth);
        assert_eq!(
            s.parsed.get_document("security").expect("security"),
            &doc! {"authorization": "enabled"}
        );
        let flag = merge(
            &Flags {
                auth: true,
                ..Flags::default()
            },
            FileConfig::default(),
        );
        assert!(flag.expect("merge").auth);
        assert!(!with_file(Flags::default()).auth);
        assert!(parse_config("security:\n  authorization: yes\n").is_err());
    }

    #[test]
    fn replica_set_name_from_the_file_or_the_flag() {
        let c = parse_config("replication:\n  replSetName: rs0\n").expect("parse");
        let s = merge(&Flags::default(), c).expect("merge");
        assert_eq!(s.repl_set.as_deref(), Some("rs0"));
        assert_eq!(
            s.parsed.get_document("replication").expect("replication"),
            &doc! {"replSetName": "rs0"}
        );
        let flags = Flags {
            repl_set: Some("rs1".into()),
            ..Flags::default()
        };
        let c = parse_config("replication:\n  replSetName: rs0\n").expect("parse");
        let s = merge(&flags, c).expect("merge");
        assert_eq!(s.repl_set.as_deref(), Some("rs1"), "the flag wins");
        assert_eq!(with_file(Flags::default()).repl_set, None);
        let c =
            parse_config("replication:\n  replSetName: rs0\n  oplogSizeMB: 64\n").expect("parse");
        assert_eq!(
            merge(&Flags::default(), c).expect("merge").oplog_size_mb,
            Some(64)
        );
        let c = parse_config("replication:\n  oplogSizeMB: 64\n").expect("parse");
        let flags = Flags {
            oplog_size_mb: Some(8),
            ..Flags::default()
        };
        assert_eq!(
            merge(&flags, c).expect("merge").oplog_size_mb,
            Some(8),
            "the flag wins"
        );
        let c = parse_config("replication:\n  oplogSizeMB: 0\n").expect("parse");
        assert!(merge(&Flags::default(), c).is_err());
        for bad in ["", "rs/a:1,b:2"] {
            let flags = Flags {
                repl_set: Some(bad.into()),
                ..Flags::default()
            };
            assert!(merge(&flags, FileConfig::default()).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn bad_values_are_errors() {
        for bad in [
            "net:\n  port: abc\n",
            "net:\n  port: 70000\n",
            "storage:\n  dbPath: [1]\n",
            "systemLog:\n  destination: syslog\n",
            "systemLog:\n  verbosity: 9\n",
            "storage:\n  shale:\n    cacheSizeGB: -1\n",
            "- a\n- b\n",
            "net: {port: 1\n",
        ] {
            let r = parse_config(bad).and_then(|c| merge(&Flags::default(), c));
            assert!(r.is_err(), "{bad:?} was accepted");
        }
        assert!(parse_config("").is_ok(), "an empty file is no options");
    }
}
