//! Change-stream resume tokens: the `_id` of every event and the `postBatchResumeToken` of
//! every batch, sent as mongod sends them, `{_data: "<hex>"}`, opaque to clients. The bytes
//! are ours, not mongod's KeyString (docs/design-oplog.md, Change streams): byte order is
//! resume order, so two tokens compare as their `_data` strings compare.
//!
//! ```text
//! [0..8]   clusterTime: the oplog entry's `ts`, big-endian (time << 32 | increment)
//! [8]      format version (1)
//! [9]      kind: 0 a high-water mark (a point between entries), 1 an event
//! [10..14] the event's index in its entry (a transaction's `applyOps` position), big-endian
//! [14]     1 for the `invalidate` that follows an event, else 0
//! [15..19] only in a fragment's token (`$changeStreamSplitLargeEvent`): the fragment's
//!          number from 0, big-endian
//! ```
//!
//! A fragment's token sorts after its whole event's and before the next fragment's (a
//! shorter `_data` that is a prefix of a longer one sorts first).
//!
//! A high-water mark at `T` sorts before every event at `T`: resuming from it returns the
//! events of `T` and later. Pure: parses and prints, reads nothing.

use bson::{RawBsonRef, RawDocument, RawDocumentBuf, Timestamp};
use shale_doc::{ErrorCode, MongoError};

const VERSION: u8 = 1;
const LEN: usize = 15;
/// A fragment's token: the four bytes of its number added.
const FRAGMENT_LEN: usize = 19;

/// A position in a change stream (see the header).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ResumeToken {
    ts: u64,
    event: bool,
    index: u32,
    from_invalidate: bool,
    /// A fragment of a split event: its number from 0.
    fragment: Option<u32>,
}

impl ResumeToken {
    /// The point before every event at `ts`.
    pub fn high_water_mark(ts: Timestamp) -> ResumeToken {
        ResumeToken {
            ts: pack(ts),
            event: false,
            index: 0,
            from_invalidate: false,
            fragment: None,
        }
    }

    /// The event at position `index` of the entry at `ts`.
    pub fn event(ts: Timestamp, index: u32) -> ResumeToken {
        ResumeToken {
            ts: pack(ts),
            event: true,
            index,
            from_invalidate: false,
            fragment: None,
        }
    }

    /// The `invalidate` that follows this event.
    pub fn invalidating(self) -> ResumeToken {
        ResumeToken {
            from_invalidate: true,
            ..self
        }
    }

    /// The token of fragment `n` (from 0) of this event.
    pub fn fragment(self, n: u32) -> ResumeToken {
        ResumeToken {
            fragment: Some(n),
            ..self
        }
    }

    /// The fragment number of a split event's fragment.
    pub fn fragment_number(&self) -> Option<u32> {
        self.fragment
    }

    /// This token without its fragment number: the whole event's.
    pub fn whole(self) -> ResumeToken {
        ResumeToken {
            fragment: None,
            ..self
        }
    }

    /// The token's cluster time.
    pub fn cluster_time(&self) -> Timestamp {
        Timestamp {
            time: (self.ts >> 32) as u32,
            increment: self.ts as u32,
        }
    }

    /// True for an event's token, false for a high-water mark.
    pub fn is_event(&self) -> bool {
        self.event
    }

    /// True for the token of an `invalidate` event (for `startAfter`).
    pub fn from_invalidate(&self) -> bool {
        self.from_invalidate
    }

    fn bytes(&self) -> Vec<u8> {
        let mut b = vec![0u8; LEN];
        b[0..8].copy_from_slice(&self.ts.to_be_bytes());
        b[8] = VERSION;
        b[9] = u8::from(self.event);
        b[10..14].copy_from_slice(&self.index.to_be_bytes());
        b[14] = u8::from(self.from_invalidate);
        if let Some(n) = self.fragment {
            b.extend_from_slice(&n.to_be_bytes());
        }
        b
    }

    /// `{_data: "<hex>"}`.
    pub fn document(&self) -> RawDocumentBuf {
        let mut d = RawDocumentBuf::new();
        d.append("_data", hex(&self.bytes()));
        d
    }

    /// Reads a token a client sent back (`resumeAfter`, `startAfter`, an event's `_id`).
    pub fn parse(d: &RawDocument) -> Result<ResumeToken, MongoError> {
        let data = match d.get("_data") {
            Ok(Some(RawBsonRef::String(s))) => s,
            Ok(Some(_)) => return Err(bad("_data of wrong type")),
            _ => return Err(bad("_data of missing or of wrong type")),
        };
        let b = unhex(data).ok_or_else(|| bad("_data is not a ShaleDB resume token"))?;
        if !matches!(b.len(), LEN | FRAGMENT_LEN) || b[8] != VERSION || b[9] > 1 || b[14] > 1 {
            return Err(bad("_data is not a ShaleDB resume token"));
        }
        let fragment = (b.len() == FRAGMENT_LEN).then(|| {
            let mut n = [0u8; 4];
            n.copy_from_slice(&b[LEN..FRAGMENT_LEN]);
            u32::from_be_bytes(n)
        });
        let mut ts = [0u8; 8];
        ts.copy_from_slice(&b[0..8]);
        let mut index = [0u8; 4];
        index.copy_from_slice(&b[10..14]);
        Ok(ResumeToken {
            ts: u64::from_be_bytes(ts),
            event: b[9] == 1,
            index: u32::from_be_bytes(index),
            from_invalidate: b[14] == 1,
            fragment,
        })
    }
}

fn pack(ts: Timestamp) -> u64 {
    (u64::from(ts.time) << 32) | u64::from(ts.increment)
}

fn bad(why: &str) -> MongoError {
    MongoError::new(ErrorCode::FailedToParse, format!("Bad resume token: {why}"))
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789ABCDEF";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 15)] as char);
    }
    s
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    s.as_bytes()
        .chunks(2)
        .map(|p| Some(digit(p[0])? << 4 | digit(p[1])?))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(time: u32, increment: u32) -> Timestamp {
        Timestamp { time, increment }
    }

    fn data(t: &ResumeToken) -> String {
        t.document()
            .get_str("_data")
            .expect("a _data string")
            .to_owned()
    }

    #[test]
    fn a_token_round_trips() {
        for t in [
            ResumeToken::high_water_mark(ts(5, 1)),
            ResumeToken::event(ts(u32::MAX, 7), 3),
            ResumeToken::event(ts(9, 0), 0).invalidating(),
            ResumeToken::event(ts(9, 0), 2).fragment(0),
            ResumeToken::event(ts(9, 0), 2).fragment(7),
        ] {
            assert_eq!(ResumeToken::parse(&t.document()).expect("parses"), t);
        }
    }

    #[test]
    fn the_hex_strings_sort_as_the_stream_does() {
        let order = [
            ResumeToken::event(ts(4, 9), 0),
            ResumeToken::high_water_mark(ts(5, 1)),
            ResumeToken::event(ts(5, 1), 0),
            ResumeToken::event(ts(5, 1), 0).fragment(0),
            ResumeToken::event(ts(5, 1), 0).fragment(1),
            ResumeToken::event(ts(5, 1), 0).invalidating(),
            ResumeToken::event(ts(5, 1), 1),
            ResumeToken::event(ts(5, 1), 256),
            ResumeToken::high_water_mark(ts(5, 2)),
            ResumeToken::event(ts(6, 0), 0),
        ];
        for w in order.windows(2) {
            assert!(w[0] < w[1], "{w:?}");
            assert!(data(&w[0]) < data(&w[1]), "{w:?}");
        }
    }

    #[test]
    fn foreign_or_damaged_tokens_are_refused() {
        let mut d = RawDocumentBuf::new();
        d.append("_data", "8263A1B2C3000000012B022C0100296E5A1004");
        assert_eq!(
            ResumeToken::parse(&d).unwrap_err().code,
            ErrorCode::FailedToParse
        );
        let mut odd = RawDocumentBuf::new();
        odd.append("_data", "ABC");
        assert!(ResumeToken::parse(&odd).is_err());
        let mut missing = RawDocumentBuf::new();
        missing.append("x", 1);
        assert!(ResumeToken::parse(&missing).is_err());
    }
}
