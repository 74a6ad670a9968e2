//! MONGODB-X509: a client logs in as the user of `$external` named by its certificate's
//! subject, in RFC 2253 form (`CN=client,OU=Tests,O=Shale,C=US`: the subject's RDNs last
//! first, known attribute types by their short names, others as `1.2.3=#<DER hex>`), as
//! mongod names X.509 users. The certificate was verified against `--tlsCAFile` by the TLS
//! handshake; this file only reads its subject, with a small DER walk over exactly the
//! fields before it (bounds checked, never panicking on bad input), and decides the login.
//! It never reads storage: the caller looks the user up.

use super::UserName;
use shale_doc::{ErrorCode, MongoError};

/// The database X.509 users live in.
pub const EXTERNAL_DB: &str = "$external";

/// Short names RFC 2253 (and OpenSSL, which mongod prints subjects with) use.
const SHORT_NAMES: &[(&[u8], &str)] = &[
    (&[0x55, 0x04, 0x03], "CN"),
    (&[0x55, 0x04, 0x04], "SN"),
    (&[0x55, 0x04, 0x05], "serialNumber"),
    (&[0x55, 0x04, 0x06], "C"),
    (&[0x55, 0x04, 0x07], "L"),
    (&[0x55, 0x04, 0x08], "ST"),
    (&[0x55, 0x04, 0x09], "street"),
    (&[0x55, 0x04, 0x0a], "O"),
    (&[0x55, 0x04, 0x0b], "OU"),
    (&[0x55, 0x04, 0x0c], "title"),
    (&[0x55, 0x04, 0x2a], "GN"),
    (
        &[0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x19],
        "DC",
    ),
    (
        &[0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x01],
        "UID",
    ),
    (
        &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x01],
        "emailAddress",
    ),
];

/// One DER element: its tag, its contents, and its whole encoding.
struct Tlv<'a> {
    tag: u8,
    content: &'a [u8],
    whole: &'a [u8],
}

/// Splits the first element off `input`; `None` when it is not well-formed DER.
fn next(input: &[u8]) -> Option<(Tlv<'_>, &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
        (len, &rest[n..])
    };
    if rest.len() < len {
        return None;
    }
    let header = input.len() - rest.len();
    let tlv = Tlv {
        tag,
        content: &rest[..len],
        whole: &input[..header + len],
    };
    Some((tlv, &rest[len..]))
}

/// The subject of a DER certificate in RFC 2253 form; `None` when it cannot be read.
pub fn subject_name(certificate: &[u8]) -> Option<String> {
    let (cert, _) = next(certificate)?;
    let (tbs, _) = next(cert.content)?;
    let mut fields = tbs.content;
    let (first, rest) = next(fields)?;
    if first.tag == 0xa0 {
        fields = rest; // [0] version
    }
    // serialNumber, signature, issuer, validity, then subject.
    for _ in 0..4 {
        fields = next(fields)?.1;
    }
    let (subject, _) = next(fields)?;
    (subject.tag == 0x30).then_some(())?;
    let mut rdns: Vec<String> = Vec::new();
    let mut set_list = subject.content;
    while !set_list.is_empty() {
        let (set, rest) = next(set_list)?;
        set_list = rest;
        let mut avas: Vec<String> = Vec::new();
        let mut items = set.content;
        while !items.is_empty() {
            let (ava, rest) = next(items)?;
            items = rest;
            avas.push(attribute(ava.content)?);
        }
        rdns.push(avas.join("+"));
    }
    rdns.reverse();
    Some(rdns.join(","))
}

/// `type=value` of one AttributeTypeAndValue.
fn attribute(content: &[u8]) -> Option<String> {
    let (oid, rest) = next(content)?;
    let (value, _) = next(rest)?;
    (oid.tag == 0x06).then_some(())?;
    let short = SHORT_NAMES.iter().find(|(o, _)| *o == oid.content);
    match (short, text(value.tag, value.content)) {
        (Some((_, name)), Some(v)) => Some(format!("{name}={}", escape(&v))),
        _ => Some(format!("{}=#{}", dotted(oid.content)?, hex(value.whole))),
    }
}

/// A directory string's text, for the string types certificates use.
fn text(tag: u8, bytes: &[u8]) -> Option<String> {
    match tag {
        // UTF8String, PrintableString, IA5String, NumericString, VisibleString
        0x0c | 0x13 | 0x16 | 0x12 | 0x1a => String::from_utf8(bytes.to_vec()).ok(),
        // TeletexString, read as Latin-1
        0x14 => Some(bytes.iter().map(|b| char::from(*b)).collect()),
        // BMPString
        0x1e if bytes.len().is_multiple_of(2) => {
            let units: Vec<u16> = bytes
                .chunks_exact(2)
                .map(|c| u16::from_be_bytes([c[0], c[1]]))
                .collect();
            String::from_utf16(&units).ok()
        }
        // UniversalString
        0x1c if bytes.len().is_multiple_of(4) => bytes
            .chunks_exact(4)
            .map(|c| char::from_u32(u32::from_be_bytes([c[0], c[1], c[2], c[3]])))
            .collect(),
        _ => None,
    }
}

/// RFC 2253 section 2.4 escaping.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let last = value.chars().count().saturating_sub(1);
    for (i, c) in value.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && (c == '#' || c == ' '))
            || (i == last && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// An OBJECT IDENTIFIER's dotted form.
fn dotted(oid: &[u8]) -> Option<String> {
    let (&first, rest) = oid.split_first()?;
    let mut parts = vec![u64::from(first / 40), u64::from(first % 40)];
    let mut acc: u64 = 0;
    for &b in rest {
        acc = acc.checked_mul(128)? | u64::from(b & 0x7f);
        if b & 0x80 == 0 {
            parts.push(acc);
            acc = 0;
        }
    }
    Some(
        parts
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join("."),
    )
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The user an `authenticate` with MONGODB-X509 logs in as, before it is looked up:
/// mongod's checks in mongod's order. `subject` is the connection's verified certificate
/// subject, `requested` the command's `user` (optional since MongoDB 3.4).
pub fn user_for(
    subject: Option<&str>,
    requested: Option<&str>,
    db: &str,
) -> Result<UserName, MongoError> {
    let subject = subject.ok_or_else(|| {
        MongoError::new(
            ErrorCode::AuthenticationFailed,
            "No verified subject name available from client",
        )
    })?;
    if requested.is_some_and(|r| r != subject) {
        return Err(MongoError::new(
            ErrorCode::AuthenticationFailed,
            "There is no x.509 client certificate matching the user.",
        ));
    }
    if db != EXTERNAL_DB {
        return Err(MongoError::new(
            ErrorCode::ProtocolError,
            "X.509 authentication must always use the $external database.",
        ));
    }
    Ok(UserName::new(subject, EXTERNAL_DB))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// DER of `tag`, `content`.
    fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
        let mut out = vec![tag];
        if content.len() < 0x80 {
            out.push(content.len() as u8);
        } else {
            out.push(0x82);
            out.extend_from_slice(&(content.len() as u16).to_be_bytes());
        }
        out.extend_from_slice(content);
        out
    }

    fn rdn(oid: &[u8], tag: u8, value: &[u8]) -> Vec<u8> {
        let ava = [tlv(0x06, oid), tlv(tag, value)].concat();
        tlv(0x31, &tlv(0x30, &ava))
    }

    /// A certificate skeleton: only the fields the walk reads are meaningful.
    fn certificate(subject: Vec<u8>) -> Vec<u8> {
        let tbs = [
            tlv(0xa0, &tlv(0x02, &[2])),
            tlv(0x02, &[1]),
            tlv(0x30, &[]),
            tlv(0x30, &rdn(&[0x55, 4, 3], 0x0c, b"Test CA")),
            tlv(0x30, &[]),
            tlv(0x30, &subject),
            tlv(0x30, &[]),
        ]
        .concat();
        tlv(
            0x30,
            &[tlv(0x30, &tbs), tlv(0x30, &[]), tlv(0x03, &[0])].concat(),
        )
    }

    #[test]
    fn the_subject_prints_as_rfc_2253_last_rdn_first() {
        let subject = [
            rdn(&[0x55, 4, 6], 0x13, b"US"),
            rdn(&[0x55, 4, 10], 0x0c, b"Shale, Inc"),
            rdn(&[0x55, 4, 11], 0x0c, b"Tests"),
            rdn(&[0x55, 4, 3], 0x0c, b"client"),
            rdn(&[0x2a, 0x03], 0x0c, b"x"),
        ]
        .concat();
        assert_eq!(
            subject_name(&certificate(subject)).as_deref(),
            Some("1.2.3=#0c0178,CN=client,OU=Tests,O=Shale\\, Inc,C=US")
        );
    }

    #[test]
    fn bad_der_is_none_not_a_panic() {
        let good = certificate(rdn(&[0x55, 4, 3], 0x0c, b"c"));
        for cut in 0..good.len() {
            let _ = subject_name(&good[..cut]);
        }
        assert_eq!(subject_name(&[0x30, 0x84, 0xff, 0xff, 0xff, 0xff]), None);
        assert_eq!(subject_name(&[]), None);
    }

    #[test]
    fn the_login_follows_mongods_checks() {
        let s = Some("CN=c");
        assert_eq!(
            user_for(s, None, "$external"),
            Ok(UserName::new("CN=c", "$external"))
        );
        assert_eq!(
            user_for(s, Some("CN=c"), "$external").map(|u| u.user),
            Ok("CN=c".into())
        );
        assert_eq!(
            user_for(None, None, "$external").map_err(|e| e.code),
            Err(ErrorCode::AuthenticationFailed)
        );
        assert_eq!(
            user_for(s, Some("CN=d"), "$external").map_err(|e| e.code),
            Err(ErrorCode::AuthenticationFailed)
        );
        assert_eq!(
            user_for(s, None, "admin").map_err(|e| e.code),
            Err(ErrorCode::ProtocolError)
        );
    }
}
