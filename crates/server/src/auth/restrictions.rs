//! `authenticationRestrictions`: which addresses a user may log in from and to. A user's or
//! a role's restrictions are an array of documents, each with `clientSource` and/or
//! `serverAddress`, arrays of IP addresses or CIDR ranges (`cidr.rs`). As mongod evaluates
//! them (`restriction_set.h`): a document is met when the client's address is in one of its
//! `clientSource` ranges and the address the client connected to is in one of its
//! `serverAddress` ranges (each only when present); an array is met when any one of its
//! documents is (an empty array always is); a login needs the user's own array and the array
//! of every role it holds, directly or through inheritance, each met.
//!
//! `parse_command` checks the value a `createUser`/`updateUser`/`createRole`/`updateRole`
//! gives, with mongod's codes and messages; `check` evaluates stored arrays against a
//! connection's addresses and answers why not, for the server log (the client is only told
//! `AuthenticationFailed`, as on mongod). Pure: the caller supplies documents and addresses.

use super::cidr::Cidr;
use super::RoleName;
use bson::{Bson, Document};
use shale_doc::{ErrorCode, MongoError};
use std::net::IpAddr;

/// The addresses of a connection: the client's and the server's end of its socket (`None`
/// when it is not an IP socket, which no address restriction admits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Environment {
    /// The client's address.
    pub client: Option<IpAddr>,
    /// The server's address the client connected to.
    pub server: Option<IpAddr>,
}

/// One restriction document: each present list must admit its address.
#[derive(Debug, Clone, PartialEq)]
struct RestrictionDoc {
    client_source: Option<Vec<Cidr>>,
    server_address: Option<Vec<Cidr>>,
}

/// Why a restriction document is refused, before it becomes mongod's error.
#[derive(Debug)]
enum DocError {
    /// mongod's IDL and CIDR failures, all answered as `BadValue`.
    Bad(String),
    /// Neither `clientSource` nor `serverAddress`.
    Empty,
}

/// Checks the `authenticationRestrictions` value of a user or role command (`field` is the
/// command's name for it, e.g. `createUser.authenticationRestrictions`) and returns its
/// documents as given; an empty result means no restrictions (mongod stores none).
pub fn parse_command(value: &Bson, field: &str) -> Result<Vec<Bson>, MongoError> {
    let Bson::Array(items) = value else {
        return Err(MongoError::new(
            ErrorCode::TypeMismatch,
            format!(
                "BSON field '{field}' is the wrong type '{}', expected type 'array'",
                shale_doc::type_name(value)
            ),
        ));
    };
    for item in items {
        let Bson::Document(doc) = item else {
            return Err(MongoError::new(
                ErrorCode::UnsupportedFormat,
                "'authenticationRestrictions' array sub-documents must be address restriction \
                 objects",
            ));
        };
        match parse_document(doc) {
            Ok(_) => {}
            Err(DocError::Bad(message)) => {
                return Err(MongoError::new(ErrorCode::BadValue, message))
            }
            Err(DocError::Empty) => {
                return Err(MongoError::new(
                    ErrorCode::CollectionIsEmpty,
                    "At least one of 'clientSource' and/or 'serverAddress' must be set",
                ))
            }
        }
    }
    Ok(items.clone())
}

/// Evaluates a user's own restrictions (`own`, its stored `authenticationRestrictions`) and
/// those of each role it holds (`roles`, every held role with restrictions) against `env`.
/// `Err` says which set was unmet and why.
pub fn check(
    own: Option<&Bson>,
    roles: &[(RoleName, Vec<Bson>)],
    env: &Environment,
) -> Result<(), String> {
    if let Some(own) = own {
        let items = match own {
            Bson::Array(items) => items.as_slice(),
            _ => {
                return Err("the user's stored authenticationRestrictions are not an array".into())
            }
        };
        array_met(items, env).map_err(|why| {
            format!("Evaluation of user authentication restrictions failed: {why}")
        })?;
    }
    for (role, items) in roles {
        array_met(items, env).map_err(|why| {
            format!("Evaluation of role authentication restrictions failed: role {role}: {why}")
        })?;
    }
    Ok(())
}

/// Whether any document of one stored array is met (an empty array is).
fn array_met(items: &[Bson], env: &Environment) -> Result<(), String> {
    if items.is_empty() {
        return Ok(());
    }
    let mut reasons = Vec::with_capacity(items.len());
    for item in items {
        let doc = match item {
            Bson::Document(d) => parse_document(d).map_err(|e| match e {
                DocError::Bad(m) => format!("a stored restriction does not parse: {m}"),
                DocError::Empty => "a stored restriction document is empty".to_owned(),
            }),
            _ => Err("a stored restriction is not a document".to_owned()),
        };
        match doc.and_then(|d| document_met(&d, env)) {
            Ok(()) => return Ok(()),
            Err(why) => reasons.push(why),
        }
    }
    Err(format!(
        "no restriction document met: [{}]",
        reasons.join("; ")
    ))
}

fn document_met(doc: &RestrictionDoc, env: &Environment) -> Result<(), String> {
    if let Some(ranges) = &doc.client_source {
        address_met("Client source", env.client, ranges)?;
    }
    if let Some(ranges) = &doc.server_address {
        address_met("Server address", env.server, ranges)?;
    }
    Ok(())
}

fn address_met(label: &str, addr: Option<IpAddr>, ranges: &[Cidr]) -> Result<(), String> {
    let Some(addr) = addr else {
        return Err(format!("{label} is not an IP address"));
    };
    if ranges.iter().any(|r| r.contains(addr)) {
        return Ok(());
    }
    let listed: Vec<String> = ranges.iter().map(|r| format!("\"{r}\"")).collect();
    Err(format!(
        "{label} {} does not fall within: [{}]",
        addr.to_canonical(),
        listed.join(", ")
    ))
}

/// One `{clientSource?, serverAddress?}` document, as mongod's `address restriction` IDL
/// struct parses it (strict: no other field).
fn parse_document(doc: &Document) -> Result<RestrictionDoc, DocError> {
    let mut out = RestrictionDoc {
        client_source: None,
        server_address: None,
    };
    for (key, value) in doc {
        let slot = match key.as_str() {
            "clientSource" => &mut out.client_source,
            "serverAddress" => &mut out.server_address,
            _ => {
                return Err(DocError::Bad(format!(
                    "BSON field 'address restriction.{key}' is an unknown field."
                )))
            }
        };
        *slot = Some(ranges(key, value)?);
    }
    if out.client_source.is_none() && out.server_address.is_none() {
        return Err(DocError::Empty);
    }
    Ok(out)
}

/// An array of address or range strings.
fn ranges(key: &str, value: &Bson) -> Result<Vec<Cidr>, DocError> {
    let wrong_type = |path: String, v: &Bson, expected: &str| {
        DocError::Bad(format!(
            "BSON field 'address restriction.{path}' is the wrong type '{}', expected type \
             '{expected}'",
            shale_doc::type_name(v)
        ))
    };
    let Bson::Array(items) = value else {
        return Err(wrong_type(key.to_owned(), value, "array"));
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let Bson::String(text) = item else {
            return Err(wrong_type(format!("{key}.{i}"), item, "string"));
        };
        out.push(Cidr::parse(text).map_err(|e| DocError::Bad(e.to_string()))?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::bson;

    fn env(client: &str, server: &str) -> Environment {
        Environment {
            client: Some(client.parse().expect("client")),
            server: Some(server.parse().expect("server")),
        }
    }

    fn refused(value: Bson) -> (i32, String) {
        let e =
            parse_command(&value, "createUser.authenticationRestrictions").expect_err("refused");
        (e.code.code(), e.message)
    }

    #[test]
    fn commands_accept_address_and_range_lists() {
        let value =
            bson!([{"clientSource": ["127.0.0.1", "10.0.0.0/8"]}, {"serverAddress": ["::1"]}]);
        assert_eq!(parse_command(&value, "f").map(|v| v.len()), Ok(2));
        assert_eq!(parse_command(&bson!([]), "f"), Ok(Vec::new()));
    }

    #[test]
    fn malformed_restrictions_get_mongods_codes() {
        assert_eq!(
            refused(Bson::Null),
            (
                14,
                "BSON field 'createUser.authenticationRestrictions' is the wrong type 'null', \
                 expected type 'array'"
                    .into()
            )
        );
        assert_eq!(refused(bson!(["127.0.0.1"])).0, 12);
        assert_eq!(
            refused(bson!([{"invalidRestriction": ["127.0.0.1"]}])),
            (
                2,
                "BSON field 'address restriction.invalidRestriction' is an unknown field.".into()
            )
        );
        assert_eq!(
            refused(bson!([{"clientSource": ["10.0.0.1", "NOT_AN_IP_OR_CIDR"]}])),
            (2, "Invalid IP address in CIDR string".into())
        );
        assert_eq!(
            refused(bson!([{"serverAddress": ["10.0.0.0/40"]}])),
            (2, "Invalid length in CIDR string".into())
        );
        assert_eq!(refused(bson!([{"clientSource": "127.0.0.1"}])).0, 2);
        assert_eq!(refused(bson!([{"clientSource": [1]}])).0, 2);
        assert_eq!(
            refused(bson!([{}])),
            (
                162,
                "At least one of 'clientSource' and/or 'serverAddress' must be set".into()
            )
        );
    }

    #[test]
    fn a_document_needs_both_of_its_lists() {
        let both = bson!([{"clientSource": ["127.0.0.1"], "serverAddress": ["127.0.0.2"]}]);
        assert_eq!(
            check(Some(&both), &[], &env("127.0.0.1", "127.0.0.2")),
            Ok(())
        );
        let err = check(Some(&both), &[], &env("127.0.0.1", "127.0.0.1")).expect_err("server");
        assert!(
            err.contains("Server address 127.0.0.1 does not fall within"),
            "{err}"
        );
        assert!(check(Some(&both), &[], &env("10.1.1.1", "127.0.0.2")).is_err());
    }

    #[test]
    fn an_array_needs_any_one_document() {
        let either = bson!([{"clientSource": ["10.0.0.0/8"]}, {"serverAddress": ["127.0.0.2"]}]);
        assert_eq!(
            check(Some(&either), &[], &env("10.9.9.9", "127.0.0.1")),
            Ok(())
        );
        assert_eq!(
            check(Some(&either), &[], &env("127.0.0.1", "127.0.0.2")),
            Ok(())
        );
        assert!(check(Some(&either), &[], &env("127.0.0.1", "127.0.0.1")).is_err());
        assert_eq!(
            check(Some(&bson!([])), &[], &env("1.1.1.1", "1.1.1.1")),
            Ok(())
        );
        assert_eq!(check(None, &[], &env("1.1.1.1", "1.1.1.1")), Ok(()));
    }

    #[test]
    fn every_roles_array_must_be_met_too() {
        let lo = vec![bson!({"clientSource": ["127.0.0.0/8"]})];
        let ten = vec![bson!({"clientSource": ["10.0.0.0/8"]})];
        let role = |n: &str| RoleName::new(n, "admin");
        let here = env("127.0.0.1", "127.0.0.1");
        assert_eq!(check(None, &[(role("a"), lo.clone())], &here), Ok(()));
        let err = check(None, &[(role("a"), lo), (role("b"), ten)], &here).expect_err("b");
        assert!(
            err.starts_with("Evaluation of role authentication restrictions failed: role b@admin"),
            "{err}"
        );
        let own = bson!([{"clientSource": ["127.0.0.1"]}]);
        let far = vec![bson!({"clientSource": ["192.0.2.0/24"]})];
        assert!(check(Some(&own), &[(role("c"), far)], &here).is_err());
    }

    #[test]
    fn a_socket_without_an_ip_address_meets_no_address_restriction() {
        let none = Environment {
            client: None,
            server: None,
        };
        let lo = bson!([{"clientSource": ["0.0.0.0/0"]}]);
        let err = check(Some(&lo), &[], &none).expect_err("no address");
        assert!(err.contains("Client source is not an IP address"), "{err}");
    }

    #[test]
    fn an_unreadable_stored_restriction_admits_no_one() {
        let broken = bson!([{"clientSource": ["not an address"]}]);
        assert!(check(Some(&broken), &[], &env("127.0.0.1", "127.0.0.1")).is_err());
        assert!(check(Some(&bson!("x")), &[], &env("127.0.0.1", "127.0.0.1")).is_err());
    }
}
