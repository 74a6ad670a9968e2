//! IP addresses and CIDR ranges as `authenticationRestrictions` spell them: `"10.0.0.0/8"`,
//! `"127.0.0.1"` (a range of one address), `"fd00::/64"`. Parsed as mongod's `CIDR` parses
//! them (an IPv4 or IPv6 address, then optionally `/` and a decimal prefix length no longer
//! than the family's), with mongod's messages for what it refuses. A range contains an
//! address of its own family whose first `len` bits equal its own; the bits after the prefix
//! are ignored, as mongod ignores them. An IPv4-mapped IPv6 client (`::ffff:a.b.c.d`, what a
//! dual-stack listener reports) is matched as the IPv4 address it carries. Pure: no sockets.

use std::fmt;
use std::net::IpAddr;

/// An address range: an address and how many of its leading bits must match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    addr: IpAddr,
    len: u8,
}

/// Why a string is not a CIDR range (mongod's `UnsupportedFormat` messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CidrError {
    /// The part before `/` is not an IP address.
    InvalidAddress,
    /// The prefix length is not a number.
    NonNumericLength,
    /// The prefix length is too long for the address family.
    InvalidLength,
}

impl fmt::Display for CidrError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CidrError::InvalidAddress => "Invalid IP address in CIDR string",
            CidrError::NonNumericLength => "Non-numeric length in CIDR string",
            CidrError::InvalidLength => "Invalid length in CIDR string",
        })
    }
}

impl Cidr {
    /// Parses `"addr"` or `"addr/len"`.
    pub fn parse(text: &str) -> Result<Cidr, CidrError> {
        let (ip, len) = match text.split_once('/') {
            Some((ip, len)) => (ip, Some(len)),
            None => (text, None),
        };
        let addr: IpAddr = ip.parse().map_err(|_| CidrError::InvalidAddress)?;
        let bits = family_bits(&addr);
        let len = match len {
            None => bits,
            Some(digits) => parse_len(digits, bits)?,
        };
        Ok(Cidr { addr, len })
    }

    /// Whether `addr` is in the range.
    pub fn contains(&self, addr: IpAddr) -> bool {
        let addr = addr.to_canonical();
        match (self.addr, addr) {
            (IpAddr::V4(range), IpAddr::V4(a)) => {
                prefix_equal(&range.octets(), &a.octets(), self.len)
            }
            (IpAddr::V6(range), IpAddr::V6(a)) => {
                prefix_equal(&range.octets(), &a.octets(), self.len)
            }
            _ => false,
        }
    }
}

impl fmt::Display for Cidr {
    /// mongod's spelling in messages: always with the length.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

fn family_bits(addr: &IpAddr) -> u8 {
    match addr {
        IpAddr::V4(_) => 32,
        IpAddr::V6(_) => 128,
    }
}

/// A prefix length: decimal digits after optional white space and sign (what mongod's
/// `std::stoi` takes), at most `bits`.
fn parse_len(digits: &str, bits: u8) -> Result<u8, CidrError> {
    let digits = digits.trim_start_matches([' ', '\t', '\n', '\x0b', '\x0c', '\r']);
    let unsigned = digits.strip_prefix(['+', '-']).unwrap_or(digits);
    if unsigned.is_empty() || !unsigned.bytes().all(|b| b.is_ascii_digit()) {
        return Err(CidrError::NonNumericLength);
    }
    let len: i64 = digits.parse().map_err(|_| CidrError::InvalidLength)?;
    if !(0..=i64::from(bits)).contains(&len) {
        return Err(CidrError::InvalidLength);
    }
    u8::try_from(len).map_err(|_| CidrError::InvalidLength)
}

/// Whether the first `len` bits of `a` and `b` are equal.
fn prefix_equal(a: &[u8], b: &[u8], len: u8) -> bool {
    debug_assert_eq!(a.len(), b.len());
    let whole = usize::from(len / 8);
    let rest = len % 8;
    if a[..whole] != b[..whole] {
        return false;
    }
    if rest == 0 {
        return true;
    }
    let mask = 0xffu8 << (8 - rest);
    (a[whole] & mask) == (b[whole] & mask)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("test address")
    }

    #[test]
    fn addresses_and_ranges_parse_as_mongod_parses_them() {
        assert_eq!(
            Cidr::parse("127.0.0.1").map(|c| c.to_string()),
            Ok("127.0.0.1/32".into())
        );
        assert_eq!(
            Cidr::parse("10.0.0.0/8").map(|c| c.to_string()),
            Ok("10.0.0.0/8".into())
        );
        assert_eq!(
            Cidr::parse("::1").map(|c| c.to_string()),
            Ok("::1/128".into())
        );
        assert_eq!(
            Cidr::parse("fd00::/64").map(|c| c.to_string()),
            Ok("fd00::/64".into())
        );
        assert_eq!(Cidr::parse("0.0.0.0/0").map(|c| c.len), Ok(0));
        assert_eq!(Cidr::parse("10.0.0.0/+8").map(|c| c.len), Ok(8));
        assert_eq!(Cidr::parse("10.0.0.0/ 8").map(|c| c.len), Ok(8));
    }

    #[test]
    fn malformed_ranges_get_mongods_reasons() {
        for bad in [
            "",
            "NOT_AN_IP_OR_CIDR",
            "localhost",
            "10.0.0",
            "10.0.0.256",
            "1.2.3.4 ",
            "/8",
        ] {
            assert_eq!(Cidr::parse(bad), Err(CidrError::InvalidAddress), "{bad:?}");
        }
        for bad in ["10.0.0.0/", "10.0.0.0/x", "10.0.0.0/8x", "::/8 ", "::/+"] {
            assert_eq!(
                Cidr::parse(bad),
                Err(CidrError::NonNumericLength),
                "{bad:?}"
            );
        }
        for bad in [
            "10.0.0.0/33",
            "10.0.0.0/-1",
            "::/129",
            "::/99999999999999999999",
        ] {
            assert_eq!(Cidr::parse(bad), Err(CidrError::InvalidLength), "{bad:?}");
        }
        assert_eq!(
            CidrError::InvalidAddress.to_string(),
            "Invalid IP address in CIDR string"
        );
    }

    #[test]
    fn a_range_contains_the_addresses_of_its_prefix() {
        let net = Cidr::parse("10.0.0.0/8").expect("range");
        assert!(net.contains(ip("10.255.1.2")));
        assert!(!net.contains(ip("11.0.0.1")));
        let odd = Cidr::parse("192.168.1.130/25").expect("range");
        assert!(odd.contains(ip("192.168.1.129")));
        assert!(odd.contains(ip("192.168.1.255")));
        assert!(!odd.contains(ip("192.168.1.127")));
        let one = Cidr::parse("127.0.0.1").expect("address");
        assert!(one.contains(ip("127.0.0.1")));
        assert!(!one.contains(ip("127.0.0.2")));
        assert!(Cidr::parse("0.0.0.0/0")
            .expect("all")
            .contains(ip("8.8.8.8")));
        let v6 = Cidr::parse("fd00::/64").expect("range");
        assert!(v6.contains(ip("fd00::2")));
        assert!(!v6.contains(ip("fd00:0:0:1::2")));
        assert!(!v6.contains(ip("10.0.0.1")));
        assert!(!net.contains(ip("::1")));
    }

    #[test]
    fn an_ipv4_mapped_client_matches_ipv4_ranges() {
        let lo = Cidr::parse("127.0.0.0/8").expect("range");
        assert!(lo.contains(ip("::ffff:127.0.0.1")));
        assert!(!Cidr::parse("::1")
            .expect("v6")
            .contains(ip("::ffff:127.0.0.1")));
    }
}
