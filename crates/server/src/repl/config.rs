//! A replica set's configuration document (mongod's `local.system.replset`, what
//! `replSetGetConfig` returns): built for `replSetInitiate` with no config, or parsed and
//! checked from the one a client sends to `replSetInitiate` / `replSetReconfig`, with
//! mongod's codes for what it refuses. Only one-member sets whose member is this server are
//! accepted: a config naming other members is refused as mongod refuses one whose members do
//! not answer (`NodeNotFound`, 74), since this server cannot reach or replicate to them yet.
//! Pure: no storage, no I/O but the name lookup of `SelfHost::is_self`.

use bson::{doc, oid::ObjectId, Bson, Document};
use shale_doc::{ErrorCode, MongoError};
use std::net::{IpAddr, ToSocketAddrs};

/// The fields a member document may hold (mongod 7.0's `MemberConfig`).
const MEMBER_FIELDS: &[&str] = &[
    "_id",
    "host",
    "arbiterOnly",
    "buildIndexes",
    "hidden",
    "priority",
    "tags",
    "secondaryDelaySecs",
    "votes",
    "horizons",
];

/// The fields a config document may hold.
const CONFIG_FIELDS: &[&str] = &[
    "_id",
    "version",
    "term",
    "members",
    "protocolVersion",
    "writeConcernMajorityJournalDefault",
    "settings",
    "configsvr",
];

/// How this server is reached: the `host:port` it names itself with (`me`) and what it
/// knows to be its own addresses.
#[derive(Debug, Clone, PartialEq)]
pub struct SelfHost {
    /// `host:port` for a generated config and for `me` until a config names this member.
    pub me: String,
    /// The port this server listens on.
    pub port: u16,
    /// Addresses this server listens on.
    pub addresses: Vec<IpAddr>,
    /// The machine's host name (`/proc/sys/kernel/hostname`), lowercased.
    pub hostname: Option<String>,
}

impl SelfHost {
    /// For a server listening on `addresses` at `port`: `me` is the first address, or the
    /// host name when that address is a wildcard (mongod always uses the host name; with the
    /// default loopback binding that name may not reach this server, so we prefer the
    /// address clients can use).
    pub fn new(addresses: Vec<IpAddr>, port: u16) -> SelfHost {
        let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|h| h.trim().to_ascii_lowercase())
            .filter(|h| !h.is_empty());
        let first = addresses.first().copied();
        let host = match first {
            Some(ip) if !ip.is_unspecified() => ip.to_string(),
            _ => hostname.clone().unwrap_or_else(|| "localhost".to_owned()),
        };
        let me = match host.parse::<IpAddr>() {
            Ok(IpAddr::V6(_)) => format!("[{host}]:{port}"),
            _ => format!("{host}:{port}"),
        };
        SelfHost {
            me,
            port,
            addresses,
            hostname,
        }
    }

    /// Whether `host` (`name[:port]`, port 27017 when absent) names this server: same port,
    /// and a name that is this machine's or resolves to a loopback address or one this
    /// server listens on.
    pub fn is_self(&self, host: &str) -> bool {
        let Some((name, port)) = split_host(host) else {
            return false;
        };
        if port != self.port {
            return false;
        }
        let name = name.to_ascii_lowercase();
        if self.hostname.as_deref() == Some(name.as_str()) || name == "localhost" {
            return true;
        }
        let listening_everywhere = self.addresses.iter().any(IpAddr::is_unspecified);
        let resolved: Vec<IpAddr> = match name.parse::<IpAddr>() {
            Ok(ip) => vec![ip],
            Err(_) => (name.as_str(), port)
                .to_socket_addrs()
                .map(|a| a.map(|s| s.ip()).collect())
                .unwrap_or_default(),
        };
        resolved.iter().any(|ip| {
            ip.is_loopback()
                || self.addresses.contains(ip)
                || (listening_everywhere && is_local(ip))
        })
    }
}

/// Whether `ip` is an address of this machine's interfaces (bind one socket to it).
fn is_local(ip: &IpAddr) -> bool {
    std::net::UdpSocket::bind((*ip, 0)).is_ok()
}

/// `name[:port]` or `[v6]:port` split; the port defaults to 27017.
fn split_host(host: &str) -> Option<(&str, u16)> {
    if let Some(rest) = host.strip_prefix('[') {
        let (name, after) = rest.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(p) => p.parse().ok()?,
            None if after.is_empty() => 27017,
            None => return None,
        };
        return Some((name, port));
    }
    match host.rsplit_once(':') {
        Some((name, p)) if !name.contains(':') => Some((name, p.parse().ok()?)),
        Some(_) => None,
        None => Some((host, 27017)),
    }
}

/// A checked configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplSetConfig {
    doc: Document,
}

impl ReplSetConfig {
    /// The config `replSetInitiate` makes when given none: this server as the only member.
    pub fn generated(set_name: &str, me: &str, term: i64) -> ReplSetConfig {
        let members = vec![Bson::Document(member_defaults(0, me))];
        ReplSetConfig {
            doc: config_doc(set_name, 1, term, members, Document::new()),
        }
    }

    /// Checks a config a client sent for set `set_name` (mongod's `validateConfigForInitiate`
    /// / `validateConfigForReconfig` for the one-member case) at election term `term`; the
    /// caller checks the version against the current config's.
    pub fn parse(
        given: &Document,
        set_name: &str,
        me: &SelfHost,
        term: i64,
    ) -> Result<ReplSetConfig, MongoError> {
        for key in given.keys() {
            if !CONFIG_FIELDS.contains(&key.as_str()) {
                return Err(invalid(format!(
                    "Unexpected field {key} in replica set configuration"
                )));
            }
        }
        let name = match given.get("_id") {
            Some(Bson::String(s)) => s.as_str(),
            Some(_) => return Err(invalid("_id field must be a string")),
            None => return Err(invalid("Missing expected field \"_id\"")),
        };
        if name != set_name {
            return Err(invalid(format!(
                "Attempting to initiate a replica set with name {name}, but command line \
                 reports {set_name}; rejecting"
            )));
        }
        if given.get_bool("configsvr").unwrap_or(false) {
            return Err(invalid(
                "Nodes being used for config servers must be started with the --configsvr flag",
            ));
        }
        let version = match given.get("version") {
            None => 1,
            Some(v) => match number(v) {
                Some(n) if n >= 1 && n <= i64::from(i32::MAX) => n,
                _ => {
                    return Err(invalid(format!(
                        "version field value of {v} is out of range"
                    )))
                }
            },
        };
        match given.get("protocolVersion").map(number) {
            None | Some(Some(1)) => {}
            Some(_) => {
                return Err(invalid(
                    "Support for replication protocol version 0 was removed in MongoDB 4.0. \
                     Downgrade to MongoDB version 3.6 and upgrade your protocol version to 1 \
                     before upgrading your MongoDB version",
                ))
            }
        }
        let members = match given.get("members") {
            Some(Bson::Array(m)) => m,
            Some(_) => return Err(invalid("members field must be an array")),
            None => return Err(invalid("Missing expected field \"members\"")),
        };
        let members = members
            .iter()
            .map(|m| match m {
                Bson::Document(d) => parse_member(d),
                _ => Err(invalid("Expected type object for members array elements")),
            })
            .collect::<Result<Vec<_>, _>>()?;
        check_members(&members, name, version, term, me)?;
        let settings = match given.get("settings") {
            None => Document::new(),
            Some(Bson::Document(s)) => s.clone(),
            Some(_) => return Err(invalid("settings field must be an object")),
        };
        let members = members.into_iter().map(Bson::Document).collect();
        Ok(ReplSetConfig {
            doc: config_doc(name, version, term, members, settings),
        })
    }

    /// A stored config, read back at start (trusted: this server wrote it).
    pub fn from_stored(doc: Document) -> ReplSetConfig {
        ReplSetConfig { doc }
    }

    /// The config document as stored.
    pub fn document(&self) -> &Document {
        &self.doc
    }

    /// The set's name (`_id`).
    pub fn set_name(&self) -> &str {
        self.doc.get_str("_id").unwrap_or_default()
    }

    /// The config's `version` (1 when absent).
    pub fn version(&self) -> i64 {
        self.doc.get("version").and_then(number).unwrap_or(1)
    }

    /// The config's `term` (0 when absent).
    pub fn term(&self) -> i64 {
        self.doc.get("term").and_then(number).unwrap_or(0)
    }

    /// The `settings.replicaSetId` (made once, at initiate; a reconfig keeps it).
    pub fn replica_set_id(&self) -> Option<ObjectId> {
        self.doc
            .get_document("settings")
            .ok()
            .and_then(|s| s.get_object_id("replicaSetId").ok())
    }

    /// The member documents.
    pub fn members(&self) -> Vec<&Document> {
        self.doc
            .get_array("members")
            .map(|a| a.iter().filter_map(Bson::as_document).collect())
            .unwrap_or_default()
    }

    /// The `host` of every member, in order (`hello.hosts`).
    pub fn hosts(&self) -> Vec<String> {
        self.members()
            .iter()
            .filter_map(|m| m.get_str("host").ok().map(str::to_owned))
            .collect()
    }

    /// This server's member document, if the config has one.
    pub fn self_member(&self, me: &SelfHost) -> Option<&Document> {
        self.members()
            .into_iter()
            .find(|m| m.get_str("host").is_ok_and(|h| me.is_self(h)))
    }

    /// The same config at another version and term, keeping `replicaSetId` (or setting
    /// `id` when it has none yet).
    pub fn with(&self, version: i64, term: i64, id: ObjectId) -> ReplSetConfig {
        let mut doc = self.doc.clone();
        doc.insert("version", version as i32);
        doc.insert("term", term);
        let mut settings = doc.get_document("settings").cloned().unwrap_or_default();
        if !settings.contains_key("replicaSetId") {
            settings.insert("replicaSetId", id);
        }
        doc.insert("settings", settings);
        ReplSetConfig { doc }
    }
}

/// The one-member rule and the member's own checks.
fn check_members(
    members: &[Document],
    name: &str,
    version: i64,
    term: i64,
    me: &SelfHost,
) -> Result<(), MongoError> {
    let not_self = || {
        MongoError::new(
            ErrorCode::NodeNotFound,
            format!(
                "No host described in new configuration with {{version: {version}, term: \
                 {term}}} for replica set {name} maps to this node"
            ),
        )
    };
    match members {
        [] => Err(invalid(
            "Replica set configuration must contain at least one non-arbiter member with \
             priority > 0",
        )),
        [only] => {
            let host = only.get_str("host").unwrap_or_default();
            if !me.is_self(host) {
                return Err(not_self());
            }
            let arbiter = only.get_bool("arbiterOnly").unwrap_or(false);
            let priority = only
                .get("priority")
                .and_then(shale_doc::number_as_f64)
                .unwrap_or(1.0);
            if arbiter || priority <= 0.0 {
                return Err(invalid(
                    "Replica set configuration must contain at least one non-arbiter member \
                     with priority > 0",
                ));
            }
            if only.get("votes").and_then(number) == Some(0) {
                return Err(invalid(format!(
                    "priority must be 0 when non-voting (votes:0) for member {host}"
                )));
            }
            if only.get_bool("hidden").unwrap_or(false) {
                return Err(invalid(format!(
                    "priority must be 0 when hidden=true for member {host}"
                )));
            }
            Ok(())
        }
        [..] => {
            let others: Vec<&str> = members
                .iter()
                .filter_map(|m| m.get_str("host").ok())
                .filter(|h| !me.is_self(h))
                .collect();
            if others.len() == members.len() {
                return Err(not_self());
            }
            Err(MongoError::new(
                ErrorCode::NodeNotFound,
                format!(
                    "Quorum check failed because not all proposed set members responded \
                     affirmatively: {} failed with this server runs one-member replica sets \
                     only (members on other servers need item 5's oplog and a consensus \
                     protocol)",
                    others.join(", ")
                ),
            ))
        }
    }
}

/// A member document with every field, the given ones over mongod's defaults.
fn parse_member(m: &Document) -> Result<Document, MongoError> {
    for key in m.keys() {
        if !MEMBER_FIELDS.contains(&key.as_str()) {
            return Err(invalid(format!(
                "Unexpected field {key} in replica set member configuration"
            )));
        }
    }
    let id = match m.get("_id").map(number) {
        Some(Some(n)) if n >= 0 && n <= i64::from(i32::MAX) => n as i32,
        Some(_) => {
            return Err(invalid(
                "_id field of a member must be a non-negative integer",
            ))
        }
        None => return Err(invalid("Missing expected field \"_id\" in a member")),
    };
    let host = match m.get("host") {
        Some(Bson::String(h)) if !h.is_empty() => h.clone(),
        Some(_) => return Err(invalid("host field of a member must be a non-empty string")),
        None => return Err(invalid("Missing expected field \"host\" in a member")),
    };
    let mut out = member_defaults(id, &host);
    for (k, v) in m {
        if k != "_id" && k != "host" {
            out.insert(k.clone(), v.clone());
        }
    }
    Ok(out)
}

fn member_defaults(id: i32, host: &str) -> Document {
    doc! {
        "_id": id,
        "host": host,
        "arbiterOnly": false,
        "buildIndexes": true,
        "hidden": false,
        "priority": 1.0,
        "tags": {},
        "secondaryDelaySecs": 0i64,
        "votes": 1,
    }
}

/// A whole config in mongod's field order, `settings` given over the defaults.
fn config_doc(
    name: &str,
    version: i64,
    term: i64,
    members: Vec<Bson>,
    given_settings: Document,
) -> Document {
    let mut settings = doc! {
        "chainingAllowed": true,
        "heartbeatIntervalMillis": 2000,
        "heartbeatTimeoutSecs": 10,
        "electionTimeoutMillis": 10000,
        "catchUpTimeoutMillis": -1,
        "catchUpTakeoverDelayMillis": 30000,
        "getLastErrorModes": {},
        "getLastErrorDefaults": {"w": 1, "wtimeout": 0},
    };
    settings.extend(given_settings);
    doc! {
        "_id": name,
        "version": version as i32,
        "term": term,
        "members": members,
        "protocolVersion": 1i64,
        "writeConcernMajorityJournalDefault": true,
        "settings": settings,
    }
}

fn invalid(message: impl Into<String>) -> MongoError {
    MongoError::new(ErrorCode::InvalidReplicaSetConfig, message)
}

/// An integral number of any BSON numeric type.
pub(crate) fn number(v: &Bson) -> Option<i64> {
    match v {
        Bson::Int32(n) => Some(i64::from(*n)),
        Bson::Int64(n) => Some(*n),
        Bson::Double(d) if d.fract() == 0.0 && d.is_finite() => Some(*d as i64),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn me() -> SelfHost {
        SelfHost::new(vec![IpAddr::V4(Ipv4Addr::LOCALHOST)], 27999)
    }

    #[test]
    fn hosts_that_name_this_server() {
        let me = me();
        assert_eq!(me.me, "127.0.0.1:27999");
        assert!(me.is_self("127.0.0.1:27999"));
        assert!(me.is_self("localhost:27999"));
        assert!(!me.is_self("127.0.0.1:27998"), "another port");
        assert!(!me.is_self("localhost"), "the default port is 27017");
        assert!(!me.is_self("192.0.2.1:27999"), "TEST-NET address, not ours");
        assert!(!me.is_self("a:b:c"));
        assert_eq!(split_host("[::1]:5"), Some(("::1", 5)));
    }

    #[test]
    fn a_one_member_config_for_this_server_is_filled_in() {
        let given = doc! {"_id": "rs", "members": [{"_id": 3, "host": "localhost:27999"}]};
        let c = ReplSetConfig::parse(&given, "rs", &me(), 1).expect("valid");
        assert_eq!(c.version(), 1);
        assert_eq!(c.hosts(), vec!["localhost:27999"]);
        let m = c.members()[0].clone();
        assert_eq!(m.get_i32("_id"), Ok(3));
        assert_eq!(m.get_f64("priority"), Ok(1.0));
        assert_eq!(c.document().get_i64("protocolVersion"), Ok(1));
        assert!(c.self_member(&me()).is_some());
    }

    #[test]
    fn refusals_carry_mongods_codes() {
        let me = me();
        let code = |d: Document| {
            ReplSetConfig::parse(&d, "rs", &me, 1)
                .expect_err("refused")
                .code
        };
        let one = |host: &str| doc! {"_id": "rs", "members": [{"_id": 0, "host": host}]};
        assert_eq!(
            code(doc! {"_id": "other", "members": []}),
            ErrorCode::InvalidReplicaSetConfig
        );
        assert_eq!(
            code(doc! {"_id": "rs", "members": []}),
            ErrorCode::InvalidReplicaSetConfig
        );
        assert_eq!(code(one("192.0.2.1:27999")), ErrorCode::NodeNotFound);
        let two = doc! {"_id": "rs", "members": [
        {"_id": 0, "host": "127.0.0.1:27999"}, {"_id": 1, "host": "192.0.2.1:27017"}]};
        assert_eq!(code(two), ErrorCode::NodeNotFound);
        let arbiter = doc! {"_id": "rs", "members": [{"_id": 0, "host": "127.0.0.1:27999", "arbiterOnly": true}]};
        assert_eq!(code(arbiter), ErrorCode::InvalidReplicaSetConfig);
        let odd = doc! {"_id": "rs", "members": [{"_id": 0, "host": "127.0.0.1:27999", "x": 1}]};
        assert_eq!(code(odd), ErrorCode::InvalidReplicaSetConfig);
        let pv0 = doc! {"_id": "rs", "protocolVersion": 0, "members": [{"_id": 0, "host": "127.0.0.1:27999"}]};
        assert_eq!(code(pv0), ErrorCode::InvalidReplicaSetConfig);
    }

    #[test]
    fn a_generated_config_keeps_its_id_across_versions() {
        let c = ReplSetConfig::generated("rs", "127.0.0.1:27999", 1);
        let id = ObjectId::new();
        let c1 = c.with(1, 1, id);
        let c2 = c1.with(2, 3, ObjectId::new());
        assert_eq!(c2.replica_set_id(), Some(id));
        assert_eq!((c2.version(), c2.term()), (2, 3));
    }
}
