//! Framing one message off a client's socket, within the server's resource bounds: the
//! stall deadline (once a message's first byte has come, the rest must come within the
//! incomplete-message timeout, counted from that byte, however the client trickles it) and
//! the in-flight budget (`inflight.rs`: a request takes its bytes from the budget after its
//! header and before its body is allocated; one that cannot within the wait limit has its
//! body read and thrown away in small pieces, and is answered `ExceededMemoryLimit` by the
//! connection). Waiting between messages has no limit: idle connections stay, as in mongod.
//! This module decodes nothing past the header and never runs a command.

use crate::inflight::{self, NoRoom, Permit};
use crate::transport::Transport;
use crate::wire::{MsgHeader, OpCode, WireError, HEADER_LEN, MAX_MESSAGE_BYTES};
use std::io::{BufRead, BufReader, Read};
use std::time::{Duration, Instant};

/// Bytes a connection reads ahead: larger requests are read straight into their own buffer.
pub(crate) const READ_BUFFER_BYTES: usize = 16 * 1024;

/// OP_COMPRESSED's fields before the compressed bytes: original opcode, uncompressed size,
/// compressor id.
const COMPRESSED_PREFIX_LEN: usize = 9;

/// Bytes of a refused request's body that are kept (enough for OP_MSG's flags and
/// OP_COMPRESSED's prefix, to answer in the right format); the rest is read and dropped.
const REFUSED_PREFIX_LEN: usize = COMPRESSED_PREFIX_LEN;

/// Piece in which a refused body is read and dropped.
const DISCARD_CHUNK_BYTES: usize = 64 * 1024;

/// The bounds a connection reads under.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReadLimits {
    /// How long the rest of a message may take once its first byte has come (time spent
    /// waiting for the in-flight budget does not count). `None`: for ever.
    pub stall: Option<Duration>,
    /// How long a request may wait for room in the in-flight budget. `None`: for ever.
    pub budget_wait: Option<Duration>,
}

/// What one read gives.
#[derive(Debug)]
pub(crate) enum Incoming {
    /// A whole message, and the in-flight bytes it holds until its reply is written.
    Message {
        header: MsgHeader,
        whole: Vec<u8>,
        permit: Permit,
    },
    /// A message whose bytes found no room in the in-flight budget: its body was read and
    /// dropped. `head` is its header and the first bytes of its body.
    Refused {
        header: MsgHeader,
        head: Vec<u8>,
        bytes: usize,
        no_room: NoRoom,
    },
}

/// Why a message could not be read.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// The message started but its rest did not arrive within the timeout.
    Stalled(Duration),
    /// The socket failed.
    Io(std::io::Error),
    /// The header cannot be framed.
    Frame(WireError),
}

impl ReadError {
    /// Whether the client went away (a reset, an abort, a close in the middle of a message):
    /// an ordinary end of a connection, not a fault of the server or of the message's bytes.
    pub(crate) fn is_disconnect(&self) -> bool {
        use std::io::ErrorKind::*;
        matches!(self, ReadError::Io(e) if matches!(
            e.kind(),
            ConnectionReset | ConnectionAborted | BrokenPipe | UnexpectedEof | NotConnected
        ))
    }
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Stalled(t) => write!(f, "no complete message within {t:?}"),
            ReadError::Io(e) => e.fmt(f),
            ReadError::Frame(e) => e.fmt(f),
        }
    }
}

impl From<std::io::Error> for ReadError {
    fn from(e: std::io::Error) -> Self {
        ReadError::Io(e)
    }
}

impl From<WireError> for ReadError {
    fn from(e: WireError) -> Self {
        ReadError::Frame(e)
    }
}

/// A connection's buffered reader, with the deadline of the message being read. The buffer
/// reads the connection's stream (`&Transport`: the socket, or TLS over it), not a wrapper: std's `BufReader` zeroes
/// its whole buffer before a read by any reader without a native `read_buf`, which cost
/// every idle connection 16 KiB of resident memory. So the deadline is applied here, as the
/// socket's receive timeout, before each read that will reach the socket, and lifted once
/// the message is read (idle waits have no limit).
pub(crate) struct ClientReader<'a> {
    buffer: BufReader<&'a Transport<'a>>,
    deadline: Option<Instant>,
    timeout_set: bool,
}

impl<'a> ClientReader<'a> {
    pub(crate) fn new(stream: &'a Transport<'a>) -> Self {
        ClientReader {
            buffer: BufReader::with_capacity(READ_BUFFER_BYTES, stream),
            deadline: None,
            timeout_set: false,
        }
    }

    /// Fills `buf` from the buffer and the socket, each read from the socket waiting at
    /// most until the deadline; past it, `TimedOut`.
    fn read_exact(&mut self, mut buf: &mut [u8]) -> std::io::Result<()> {
        while !buf.is_empty() {
            if self.buffer.buffer().is_empty() {
                self.arm()?;
            }
            match self.buffer.read(buf) {
                Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => buf = &mut buf[n..],
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Sets the socket's receive timeout to what is left before the deadline.
    fn arm(&mut self) -> std::io::Result<()> {
        let Some(deadline) = self.deadline else {
            return Ok(());
        };
        let left = deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::TimedOut))?;
        self.buffer.get_ref().set_read_timeout(Some(left))?;
        self.timeout_set = true;
        Ok(())
    }

    /// Ends the message's deadline (and the socket's timeout, if one was set).
    fn disarm(&mut self) -> std::io::Result<()> {
        self.deadline = None;
        if self.timeout_set {
            self.timeout_set = false;
            self.buffer.get_ref().set_read_timeout(None)?;
        }
        Ok(())
    }
}

/// Reads one whole message. `Ok(None)` on a clean end of stream (or a socket the server shut
/// down while no message was in flight). Waiting for a message's first byte has no time
/// limit; once it has come, the rest must come within `limits.stall`, unless it is already
/// in the buffer (the usual case, which costs no extra system call).
pub(crate) fn read_message(
    reader: &mut ClientReader<'_>,
    limits: ReadLimits,
) -> Result<Option<Incoming>, ReadError> {
    let buffered = loop {
        match reader.buffer.fill_buf() {
            Ok([]) => return Ok(None),
            // A TLS client that closes without close_notify (most do) between messages.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
            Ok(b) => break b,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.into()),
        }
    };
    let whole_in_buffer = buffered.len() >= HEADER_LEN
        && usize::try_from(i32::from_le_bytes([
            buffered[0],
            buffered[1],
            buffered[2],
            buffered[3],
        ]))
        .is_ok_and(|n| n <= buffered.len());
    let stall = limits.stall.filter(|_| !whole_in_buffer);
    // A timeout too large to add to the clock is no timeout.
    reader.deadline = stall.and_then(|t| Instant::now().checked_add(t));
    let result = read_whole(reader, limits.budget_wait);
    let disarmed = reader.disarm();
    match (result, stall) {
        (Err(ReadError::Io(e)), Some(t)) if is_timeout(&e) => Err(ReadError::Stalled(t)),
        (Ok(m), _) => disarmed.map(|()| m).map_err(ReadError::Io),
        (result, _) => result,
    }
}

fn is_timeout(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    )
}

/// Reads a header, takes the request's bytes from the in-flight budget (waiting at most
/// `budget_wait` while it is spent, a wait the stall deadline does not count), then reads
/// the body it announces, or reads and drops it when the budget had no room.
fn read_whole(
    reader: &mut ClientReader<'_>,
    budget_wait: Option<Duration>,
) -> Result<Option<Incoming>, ReadError> {
    let mut head = [0u8; HEADER_LEN];
    match reader.read_exact(&mut head) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    let header = MsgHeader::decode(&head)?;
    let mut whole = Vec::with_capacity(HEADER_LEN + COMPRESSED_PREFIX_LEN);
    whole.extend_from_slice(&head);
    let mut bytes = header.message_length;
    if header.op_code == OpCode::Compressed
        && header.message_length >= HEADER_LEN + COMPRESSED_PREFIX_LEN
    {
        // OP_COMPRESSED says how large it will decompress to: hold that too, from the start,
        // so a thread never waits for more while it holds a permit.
        let mut prefix = [0u8; COMPRESSED_PREFIX_LEN];
        reader.read_exact(&mut prefix)?;
        whole.extend_from_slice(&prefix);
        let size = i32::from_le_bytes([prefix[4], prefix[5], prefix[6], prefix[7]]);
        bytes += usize::try_from(size).unwrap_or(0).min(MAX_MESSAGE_BYTES) + HEADER_LEN;
    }
    let asked = Instant::now();
    let permit = inflight::acquire_within(bytes, budget_wait);
    reader.deadline = reader.deadline.and_then(|d| d.checked_add(asked.elapsed()));
    match permit {
        Ok(permit) => {
            let read = whole.len();
            whole.resize(header.message_length, 0);
            reader.read_exact(&mut whole[read..])?;
            Ok(Some(Incoming::Message {
                header,
                whole,
                permit,
            }))
        }
        Err(no_room) => {
            discard_body(|b| reader.read_exact(b), &mut whole, header.message_length)?;
            Ok(Some(Incoming::Refused {
                header,
                head: whole,
                bytes,
                no_room,
            }))
        }
    }
}

/// Reads the rest of a `length`-byte message, keeping up to `REFUSED_PREFIX_LEN` bytes of
/// its body in `head` and dropping the others, never holding more than one small piece.
fn discard_body(
    mut read_exact: impl FnMut(&mut [u8]) -> std::io::Result<()>,
    head: &mut Vec<u8>,
    length: usize,
) -> Result<(), ReadError> {
    let keep = (HEADER_LEN + REFUSED_PREFIX_LEN).min(length);
    if head.len() < keep {
        let read = head.len();
        head.resize(keep, 0);
        read_exact(&mut head[read..])?;
    }
    let mut left = length - head.len();
    let mut chunk = vec![0u8; DISCARD_CHUNK_BYTES.min(left)];
    while left > 0 {
        let n = chunk.len().min(left);
        read_exact(&mut chunk[..n])?;
        left -= n;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_going_away_is_a_disconnect_and_a_bad_header_is_not() {
        use std::io::{Error, ErrorKind};
        for kind in [
            ErrorKind::ConnectionReset,
            ErrorKind::UnexpectedEof,
            ErrorKind::BrokenPipe,
        ] {
            assert!(ReadError::Io(Error::from(kind)).is_disconnect(), "{kind:?}");
        }
        assert!(!ReadError::Io(Error::from(ErrorKind::PermissionDenied)).is_disconnect());
        assert!(!ReadError::Stalled(Duration::from_secs(1)).is_disconnect());
        let bad = MsgHeader::decode(&[0u8; HEADER_LEN]).expect_err("a zero length is refused");
        assert!(!ReadError::Frame(bad).is_disconnect());
    }

    #[test]
    fn a_discarded_body_keeps_its_first_bytes_and_reads_exactly_the_rest() {
        let mut message = Vec::new();
        MsgHeader {
            message_length: HEADER_LEN + 200_000,
            request_id: 1,
            response_to: 0,
            op_code: OpCode::Msg,
        }
        .encode(&mut message);
        message.extend((0..200_000u32).map(|i| (i % 251) as u8));
        message.extend_from_slice(b"next");
        let mut input = &message[..];
        let mut head = Vec::new();
        input.read_exact(&mut [0u8; HEADER_LEN]).expect("header");
        head.extend_from_slice(&message[..HEADER_LEN]);
        discard_body(|b| input.read_exact(b), &mut head, HEADER_LEN + 200_000).expect("discard");
        assert_eq!(head, message[..HEADER_LEN + REFUSED_PREFIX_LEN]);
        assert_eq!(input, b"next");
        // A body shorter than the kept prefix is kept whole.
        let mut short = &[1u8, 2, 3][..];
        let mut head = vec![0u8; HEADER_LEN];
        discard_body(|b| short.read_exact(b), &mut head, HEADER_LEN + 3).expect("short");
        assert_eq!(&head[HEADER_LEN..], &[1, 2, 3]);
        // A body that ends early is an error, not a hang or a panic.
        let mut cut = &[0u8; 10][..];
        let mut head = vec![0u8; HEADER_LEN];
        assert!(discard_body(|b| cut.read_exact(b), &mut head, HEADER_LEN + 100).is_err());
    }
}
