//! An encoded reply message on its way to the socket: the bytes in front of its body and the
//! body, written together with one vectored write. An OP_MSG reply's body is the serialised
//! document its command built (a cursor batch of 16 MiB included), so it is sent from where
//! it was built rather than copied behind a 21-byte header first (that copy was 2% of the
//! server's CPU in a profile of bakeoff's sync scans). Other replies (OP_REPLY, compressed
//! ones) are whole in `head`.

use std::io::{self, IoSlice, Write};

/// One reply message: `head` followed by `body`.
#[derive(Debug)]
pub(crate) struct Outgoing {
    head: Vec<u8>,
    body: Vec<u8>,
}

impl Outgoing {
    /// A message whose bytes are all in one buffer.
    pub(crate) fn whole(bytes: Vec<u8>) -> Outgoing {
        Outgoing {
            head: bytes,
            body: Vec::new(),
        }
    }

    /// A message of `head`'s bytes followed by `body`'s.
    pub(crate) fn split(head: Vec<u8>, body: Vec<u8>) -> Outgoing {
        Outgoing { head, body }
    }

    /// The message's length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.head.len() + self.body.len()
    }

    /// The message in one buffer (compression, fuzzing and embedding need it so).
    pub(crate) fn into_vec(self) -> Vec<u8> {
        let Outgoing { mut head, body } = self;
        if body.is_empty() {
            return head;
        }
        head.extend_from_slice(&body);
        head
    }

    /// Writes the whole message to `w`: vectored writes, resumed after partial ones.
    pub(crate) fn write_to(&self, mut w: impl Write) -> io::Result<()> {
        let mut slices = [IoSlice::new(&self.head), IoSlice::new(&self.body)];
        let mut rest = &mut slices[..];
        IoSlice::advance_slices(&mut rest, 0);
        while !rest.is_empty() {
            match w.write_vectored(rest) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => IoSlice::advance_slices(&mut rest, n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        w.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer that takes at most `step` bytes a call, from the first slice only (as a TLS
    /// stream's default `write_vectored` does).
    struct Trickle {
        out: Vec<u8>,
        step: usize,
    }

    impl Write for Trickle {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let n = buf.len().min(self.step);
            self.out.extend_from_slice(&buf[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn partial_writes_send_every_byte_in_order() {
        let head: Vec<u8> = (0..21).collect();
        let body: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();
        let whole = [head.clone(), body.clone()].concat();
        for step in [1, 5, 20, 21, 22, 999, 4096] {
            let mut w = Trickle {
                out: Vec::new(),
                step,
            };
            let m = Outgoing::split(head.clone(), body.clone());
            assert_eq!(m.len(), whole.len());
            m.write_to(&mut w).expect("write");
            assert_eq!(w.out, whole, "step {step}");
        }
        let m = Outgoing::split(head.clone(), body);
        assert_eq!(m.into_vec(), whole);
        assert_eq!(Outgoing::whole(head.clone()).into_vec(), head);
    }

    #[test]
    fn an_empty_body_is_not_written_as_a_zero_length_write() {
        let mut w = Trickle {
            out: Vec::new(),
            step: 3,
        };
        Outgoing::whole(vec![1, 2, 3, 4])
            .write_to(&mut w)
            .expect("write");
        assert_eq!(w.out, vec![1, 2, 3, 4]);
    }
}
