//! A connection's byte stream: the socket itself, or TLS over it. Under `allowTLS` and
//! `preferTLS` the first bytes decide: a client speaks first, and a TLS ClientHello starts
//! with a handshake record header (0x16, version 3.0-3.4, two length bytes) and the
//! ClientHello type (0x01). A plain client's first bytes are its first message's length and
//! request id; for them to look so the message would have to be 790 bytes (or 790 plus a
//! multiple of 64 KiB, up to 4) with a request id whose second byte is 1, which `hello`s are
//! not. Under `requireTLS` a plain-text client is refused; `disabled` never looks.
//! The TLS handshake runs here, under a deadline, before the connection reads messages.
//! Reads and writes go through `&Transport` (one thread per connection uses it, reads and
//! writes never overlap), so the message reader and the reply writer can share it; the
//! socket's receive timeout stays settable for the reader's stall deadline.

use crate::tls::{Tls, TlsMode};
use rustls::ServerConnection;
use rustls_pki_types::CertificateDer;
use std::cell::RefCell;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// The first byte of a TLS record carrying a handshake message (the ClientHello).
const TLS_HANDSHAKE_RECORD: u8 = 0x16;

/// Bytes looked at to tell a ClientHello from a plain message.
const SNIFF_BYTES: usize = 6;

/// Whether the first bytes a client sent are a TLS ClientHello's.
fn looks_like_client_hello(head: &[u8]) -> bool {
    matches!(head, [TLS_HANDSHAKE_RECORD, 3, 0..=4, _, _, 1, ..])
}

/// How long a client has to finish the TLS handshake when no stall timeout is set.
const HANDSHAKE_TIMEOUT_DEFAULT: Duration = Duration::from_secs(30);

/// One connection's stream.
pub(crate) struct Transport<'s> {
    socket: &'s TcpStream,
    /// `None` for plain text.
    tls: Option<RefCell<ServerConnection>>,
}

/// Why a connection was not established.
#[derive(Debug, thiserror::Error)]
pub(crate) enum EstablishError {
    #[error("the server only accepts TLS connections and the client spoke plain text")]
    PlainUnderRequireTls,
    #[error("the client closed the connection before speaking")]
    Closed,
    #[error("TLS handshake failed: {0}")]
    Handshake(std::io::Error),
    #[error("TLS: {0}")]
    Tls(rustls::Error),
    #[error("{0}")]
    Io(std::io::Error),
}

impl<'s> Transport<'s> {
    /// The stream of a newly accepted socket: plain, or TLS once its handshake is done.
    pub(crate) fn establish(
        socket: &'s TcpStream,
        tls: Option<&Tls>,
        handshake_timeout: Option<Duration>,
    ) -> Result<Transport<'s>, EstablishError> {
        let plain = Transport { socket, tls: None };
        let Some(tls) = tls else {
            return Ok(plain);
        };
        let timeout = handshake_timeout.unwrap_or(HANDSHAKE_TIMEOUT_DEFAULT);
        let head = sniff(socket, timeout)?;
        if !looks_like_client_hello(&head) {
            return match tls.mode {
                TlsMode::RequireTls => Err(EstablishError::PlainUnderRequireTls),
                _ => Ok(plain),
            };
        }
        let mut conn = ServerConnection::new(tls.config.clone()).map_err(EstablishError::Tls)?;
        socket
            .set_read_timeout(Some(timeout))
            .map_err(EstablishError::Io)?;
        let mut sock = socket;
        while conn.is_handshaking() {
            conn.complete_io(&mut sock)
                .map_err(EstablishError::Handshake)?;
        }
        socket.set_read_timeout(None).map_err(EstablishError::Io)?;
        Ok(Transport {
            socket,
            tls: Some(RefCell::new(conn)),
        })
    }

    /// Whether the connection is encrypted.
    pub(crate) fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// The client's certificate (the end of its chain), if it presented one.
    pub(crate) fn peer_certificate(&self) -> Option<CertificateDer<'static>> {
        let conn = self.tls.as_ref()?.borrow();
        conn.peer_certificates()?
            .first()
            .map(|c| c.clone().into_owned())
    }

    /// Sets the socket's receive timeout (the message reader's stall deadline).
    pub(crate) fn set_read_timeout(&self, timeout: Option<Duration>) -> std::io::Result<()> {
        self.socket.set_read_timeout(timeout)
    }
}

/// The client's first bytes, without consuming them: waits (without limit, as for any idle
/// connection) for the first, then up to `timeout` for `SNIFF_BYTES` in all; fewer when the
/// client sent fewer (a short plain message, or a client that stalls: the message reader's
/// own deadline deals with it).
fn sniff(socket: &TcpStream, timeout: Duration) -> Result<Vec<u8>, EstablishError> {
    let mut head = [0u8; SNIFF_BYTES];
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let n = match socket.peek(&mut head) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            r => r.map_err(EstablishError::Io)?,
        };
        if n == 0 {
            return Err(EstablishError::Closed);
        }
        if n == SNIFF_BYTES
            || head[0] != TLS_HANDSHAKE_RECORD
            || std::time::Instant::now() >= deadline
        {
            return Ok(head[..n].to_vec());
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

impl Read for &Transport<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let mut sock = self.socket;
        match &self.tls {
            None => sock.read(buf),
            Some(conn) => {
                let mut conn = conn.borrow_mut();
                rustls::Stream::new(&mut *conn, &mut sock).read(buf)
            }
        }
    }
}

impl Write for &Transport<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut sock = self.socket;
        match &self.tls {
            None => sock.write(buf),
            Some(conn) => {
                let mut conn = conn.borrow_mut();
                rustls::Stream::new(&mut *conn, &mut sock).write(buf)
            }
        }
    }

    fn write_vectored(&mut self, bufs: &[std::io::IoSlice<'_>]) -> std::io::Result<usize> {
        let mut sock = self.socket;
        match &self.tls {
            None => sock.write_vectored(bufs),
            Some(conn) => {
                let mut conn = conn.borrow_mut();
                rustls::Stream::new(&mut *conn, &mut sock).write_vectored(bufs)
            }
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let mut sock = self.socket;
        match &self.tls {
            None => sock.flush(),
            Some(conn) => {
                let mut conn = conn.borrow_mut();
                rustls::Stream::new(&mut *conn, &mut sock).flush()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_hello_is_told_from_plain_messages() {
        assert!(looks_like_client_hello(&[0x16, 3, 1, 2, 0, 1]));
        assert!(looks_like_client_hello(&[0x16, 3, 3, 0, 200, 1, 0, 0]));
        // A 278-byte message: first byte 0x16 too, but not a record header.
        assert!(!looks_like_client_hello(&[0x16, 1, 0, 0, 7, 0]));
        assert!(!looks_like_client_hello(&[0x16, 3, 1]));
        assert!(!looks_like_client_hello(&[0xdd, 0, 0, 0, 1, 0]));
    }
}
