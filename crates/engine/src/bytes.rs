//! The engine's on-disk encodings at the byte level: a bounds-checked little-endian reader
//! over untrusted bytes (block file headers and translation tables, the catalog, log
//! records, node blocks) and the writer of the length-prefixed byte strings it reads back.
//! Running off the end is an error string that the caller turns into a corruption error;
//! nothing here panics on any input.

/// Appends `b` as a `u32` little-endian length and the bytes ([`Reader::bytes`] reads it).
pub(crate) fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    #[allow(
        clippy::expect_used,
        reason = "keys and values are limited to MAX_KEY_OR_VALUE_BYTES upstream, far below 4 GiB"
    )]
    let len = u32::try_from(b.len()).expect("byte strings are limited to 16 MiB upstream");
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(b);
}

/// A little-endian reader over a byte slice.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    /// Bytes consumed so far.
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    /// Bytes left.
    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// The next `n` bytes.
    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if n > self.remaining() {
            return Err(format!(
                "truncated: wanted {n} bytes at offset {}, only {} left",
                self.pos,
                self.remaining()
            ));
        }
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    pub(crate) fn skip(&mut self, n: usize) -> Result<(), String> {
        self.take(n).map(|_| ())
    }

    pub(crate) fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }

    pub(crate) fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    pub(crate) fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// A LEB128 varint of at most ten bytes whose value fits in 64 bits.
    pub(crate) fn varint(&mut self) -> Result<u64, String> {
        let mut v = 0u64;
        for i in 0..10 {
            let b = self.u8()?;
            let bits = u64::from(b & 0x7f);
            if i == 9 && bits > 1 {
                return Err("varint overflows 64 bits".into());
            }
            v |= bits << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("varint longer than ten bytes".into())
    }

    /// A byte string stored as a varint length and the bytes.
    pub(crate) fn vbytes(&mut self) -> Result<Vec<u8>, String> {
        let n = self.varint()?;
        let n = usize::try_from(n).map_err(|_| format!("length {n} does not fit in memory"))?;
        Ok(self.take(n)?.to_vec())
    }

    /// A byte string stored as a `u32` length and the bytes.
    pub(crate) fn bytes(&mut self) -> Result<Vec<u8>, String> {
        let n = self.u32()? as usize;
        Ok(self.take(n)?.to_vec())
    }

    /// Succeeds only if every byte was consumed.
    pub(crate) fn finish(&self) -> Result<(), String> {
        match self.remaining() {
            0 => Ok(()),
            n => Err(format!("{n} trailing bytes")),
        }
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }
}

#[cfg(test)]
mod tests {
    use super::{put_bytes, Reader};

    #[test]
    fn reads_little_endian_and_reports_running_off_the_end() {
        let buf = [1, 2, 0, 0, 0, 3, 0, 0, 0, b'a', b'b', b'c', 9];
        let mut r = Reader::new(&buf);
        assert_eq!(r.u8(), Ok(1));
        assert_eq!(r.u32(), Ok(2));
        assert_eq!(r.bytes(), Ok(b"abc".to_vec()));
        assert_eq!(r.pos(), 12);
        assert!(r.finish().unwrap_err().contains("1 trailing"));
        assert!(r.u32().unwrap_err().contains("truncated"));
        assert_eq!(r.u8(), Ok(9), "a failed read consumes nothing");
        assert_eq!(r.finish(), Ok(()));
        let mut out = Vec::new();
        put_bytes(&mut out, b"xyz");
        assert_eq!(Reader::new(&out).bytes(), Ok(b"xyz".to_vec()));
        let mut short = Reader::new(&[5, 0, 0, 0, 1]);
        assert!(short.bytes().is_err(), "a length past the end");
    }
}
