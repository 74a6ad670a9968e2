//! An oplog entry in MongoDB's format (mongod 7.0's `local.oplog.rs` documents): the
//! operation (`op`: `i`, `u`, `d`, `c`, `n`), its namespace and collection UUID, the object
//! (`o`) and document key (`o2`), the optime (`ts`, `t`), the format version (`v: 2`), the
//! wall time, and for session writes `lsid`, `txnNumber`, `stmtId` and `prevOpTime`. A
//! multi-document transaction is one `c` entry on `admin.$cmd` whose `o` is
//! `{applyOps: [...]}`, the inner operations without optimes. Pure: builds documents, stores
//! nothing (docs/design-oplog.md, Writing).

use bson::{
    doc, spec::BinarySubtype, Document, RawArrayBuf, RawDocument, RawDocumentBuf, Timestamp, Uuid,
};

/// The oplog format version mongod 4.4+ writes.
pub const OPLOG_VERSION: i64 = 2;

/// What an entry records. Documents are kept raw: an insert's `o` is the stored document's
/// bytes, copied, never decoded.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// `i`: a document inserted (`o` the document, `o2` its key `{_id}`).
    Insert {
        /// The document (`o`).
        doc: RawDocumentBuf,
        /// Its key (`o2`).
        key: RawDocumentBuf,
    },
    /// `u`: a document updated (`o` the update: a `$v: 2` diff or a replacement; `o2`
    /// its key).
    Update {
        /// The update (`o`).
        update: RawDocumentBuf,
        /// The document's key (`o2`).
        key: RawDocumentBuf,
    },
    /// `d`: a document deleted (`o` its key).
    Delete {
        /// The document's key (`o`).
        key: RawDocumentBuf,
    },
    /// `c`: a command (`create`, `drop`, `applyOps`, ...), `ns` is `<db>.$cmd`.
    Command {
        /// The command document (`o`).
        command: RawDocumentBuf,
    },
    /// `n`: a no-op (`o`: `{msg}`), e.g. "new primary" after an election.
    Noop {
        /// The message (`o.msg`).
        msg: String,
    },
}

impl Op {
    /// The `op` field's code (`i`, `u`, `d`, `c`, `n`).
    pub fn code(&self) -> &'static str {
        match self {
            Op::Insert { .. } => "i",
            Op::Update { .. } => "u",
            Op::Delete { .. } => "d",
            Op::Command { .. } => "c",
            Op::Noop { .. } => "n",
        }
    }
}

/// An optime: the entry's timestamp and the term it was written in.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OpTime {
    /// The entry's timestamp.
    pub ts: Timestamp,
    /// The term it was written in.
    pub term: i64,
}

impl OpTime {
    /// mongod's null optime (`prevOpTime` of a session's first entry).
    pub const NULL: OpTime = OpTime {
        ts: Timestamp {
            time: 0,
            increment: 0,
        },
        term: -1,
    };

    /// `{ts, t}`, as entries and replies show it.
    pub fn document(&self) -> Document {
        doc! {"ts": self.ts, "t": self.term}
    }

    fn raw(&self) -> RawDocumentBuf {
        let mut d = RawDocumentBuf::new();
        d.append("ts", self.ts);
        d.append("t", self.term);
        d
    }
}

/// The session fields of a retryable write's or a transaction's entry.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionInfo {
    /// `lsid` as the client sent it (`{id: UUID}`, plus `uid` when authenticated).
    pub lsid: RawDocumentBuf,
    /// `txnNumber`.
    pub txn_number: i64,
    /// The statement's id; `None` for a transaction's `applyOps` entry.
    pub stmt_id: Option<i32>,
    /// The session's previous entry in this transaction number (`OpTime::NULL` if none).
    pub prev: OpTime,
}

/// `{id: <UUID>, uid: <SHA-256 of the user name>}`: a session's `lsid` as mongod writes it
/// in the oplog (`uid` is the digest of the empty name when authentication is off).
pub fn lsid_document(id: [u8; 16], uid: [u8; 32]) -> RawDocumentBuf {
    let mut d = RawDocumentBuf::new();
    d.append(
        "id",
        bson::Binary {
            subtype: BinarySubtype::Uuid,
            bytes: id.to_vec(),
        },
    );
    d.append(
        "uid",
        bson::Binary {
            subtype: BinarySubtype::Generic,
            bytes: uid.to_vec(),
        },
    );
    d
}

/// One operation on a namespace: an entry's subject, or an element of `applyOps`.
#[derive(Debug, Clone, PartialEq)]
pub struct Operation {
    /// What the operation does.
    pub op: Op,
    /// `<db>.<collection>`, or `<db>.$cmd` for commands; empty for a no-op.
    pub ns: String,
    /// The collection's UUID (none for no-ops and database-level commands).
    pub ui: Option<Uuid>,
}

impl Operation {
    /// The operation's own fields (`op`, `ns`, `ui`, `o`, `o2`): an `applyOps` element.
    pub fn document(&self) -> RawDocumentBuf {
        let mut d = RawDocumentBuf::new();
        self.append_to(&mut d);
        d
    }

    fn append_to(&self, d: &mut RawDocumentBuf) {
        d.append("op", self.op.code());
        d.append("ns", self.ns.as_str());
        if let Some(ui) = self.ui {
            d.append(
                "ui",
                bson::Binary {
                    subtype: BinarySubtype::Uuid,
                    bytes: ui.bytes().to_vec(),
                },
            );
        }
        let (o, o2): (&RawDocument, Option<&RawDocument>) = match &self.op {
            Op::Insert { doc, key } => (doc, Some(key)),
            Op::Update { update, key } => (update, Some(key)),
            Op::Delete { key } => (key, None),
            Op::Command { command } => (command, None),
            Op::Noop { msg } => {
                let mut m = RawDocumentBuf::new();
                m.append("msg", msg.as_str());
                d.append("o", m);
                return;
            }
        };
        d.append_ref("o", o);
        if let Some(o2) = o2 {
            d.append_ref("o2", o2);
        }
    }

    /// Bytes the operation adds to an `applyOps` array (roughly: its documents).
    pub fn approx_bytes(&self) -> usize {
        64 + self.ns.len()
            + match &self.op {
                Op::Insert { doc, key } => doc.as_bytes().len() + key.as_bytes().len(),
                Op::Update { update, key } => update.as_bytes().len() + key.as_bytes().len(),
                Op::Delete { key } => key.as_bytes().len(),
                Op::Command { command } => command.as_bytes().len(),
                Op::Noop { msg } => msg.len(),
            }
    }
}

/// A whole entry as stored in `local.oplog.rs`, in mongod's field order.
pub fn entry_document(
    operation: &Operation,
    at: OpTime,
    wall: bson::DateTime,
    session: Option<&SessionInfo>,
) -> RawDocumentBuf {
    let mut d = RawDocumentBuf::new();
    if let Some(s) = session {
        d.append_ref("lsid", &*s.lsid);
        d.append("txnNumber", s.txn_number);
    }
    operation.append_to(&mut d);
    if let Some(id) = session.and_then(|s| s.stmt_id) {
        d.append("stmtId", id);
    }
    d.append("ts", at.ts);
    d.append("t", at.term);
    d.append("v", OPLOG_VERSION);
    d.append("wall", wall);
    if let Some(s) = session {
        d.append("prevOpTime", s.prev.raw());
    }
    d
}

/// A committed transaction's one entry: `applyOps` of its operations on `admin.$cmd`
/// (with the session's fields when it ran in a session; TokuMX's connection transactions
/// have none).
pub fn transaction_entry(
    operations: &[Operation],
    at: OpTime,
    wall: bson::DateTime,
    session: Option<&SessionInfo>,
) -> RawDocumentBuf {
    let mut ops = RawArrayBuf::new();
    for o in operations {
        ops.push(o.document());
    }
    let mut command = RawDocumentBuf::new();
    command.append("applyOps", ops);
    let apply = Operation {
        op: Op::Command { command },
        ns: "admin.$cmd".to_owned(),
        ui: None,
    };
    let session = session.map(|s| SessionInfo {
        stmt_id: None,
        ..s.clone()
    });
    entry_document(&apply, at, wall, session.as_ref())
}

/// The 8-byte key an entry is stored under: its `ts`, big-endian, so key order is `ts`
/// order and `$natural` order (O1).
pub fn entry_key(ts: Timestamp) -> [u8; 8] {
    ((u64::from(ts.time) << 32) | u64::from(ts.increment)).to_be_bytes()
}

/// The `ts` an entry key names (the inverse of `entry_key`); `None` for a malformed key.
pub fn key_ts(key: &[u8]) -> Option<Timestamp> {
    let v = u64::from_be_bytes(key.try_into().ok()?);
    Some(Timestamp {
        time: (v >> 32) as u32,
        increment: v as u32,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::Bson;

    fn at(time: u32, increment: u32) -> OpTime {
        OpTime {
            ts: Timestamp { time, increment },
            term: 1,
        }
    }

    fn keys(d: &RawDocument) -> Vec<&str> {
        d.iter().map(|e| e.expect("element").0).collect()
    }

    fn raw(d: Document) -> RawDocumentBuf {
        RawDocumentBuf::from_document(&d).expect("raw")
    }

    #[test]
    fn an_insert_has_mongods_fields_in_mongods_order() {
        let ui = Uuid::new();
        let op = Operation {
            op: Op::Insert {
                doc: raw(doc! {"_id": 1, "a": 2}),
                key: raw(doc! {"_id": 1}),
            },
            ns: "test.c".into(),
            ui: Some(ui),
        };
        let wall = bson::DateTime::from_millis(1_000);
        let d = entry_document(&op, at(5, 1), wall, None)
            .to_document()
            .expect("doc");
        let r = raw(d.clone());
        assert_eq!(
            keys(&r),
            ["op", "ns", "ui", "o", "o2", "ts", "t", "v", "wall"]
        );
        assert_eq!(d.get_str("op"), Ok("i"));
        assert_eq!(d.get_i64("v"), Ok(2));
        assert_eq!(d.get_i64("t"), Ok(1));
        let Some(Bson::Binary(b)) = d.get("ui") else {
            panic!("ui is binary")
        };
        assert_eq!(
            (b.subtype, b.bytes.as_slice()),
            (BinarySubtype::Uuid, &ui.bytes()[..])
        );
    }

    #[test]
    fn a_retryable_write_carries_its_session_and_statement() {
        let op = Operation {
            op: Op::Delete {
                key: raw(doc! {"_id": 7}),
            },
            ns: "test.c".into(),
            ui: None,
        };
        let s = SessionInfo {
            lsid: lsid_document([7; 16], [8; 32]),
            txn_number: 3,
            stmt_id: Some(0),
            prev: OpTime::NULL,
        };
        let r = entry_document(&op, at(5, 2), bson::DateTime::now(), Some(&s));
        let d = r.to_document().expect("doc");
        assert_eq!(
            keys(&r),
            [
                "lsid",
                "txnNumber",
                "op",
                "ns",
                "o",
                "stmtId",
                "ts",
                "t",
                "v",
                "wall",
                "prevOpTime"
            ]
        );
        assert_eq!(
            d.get_document("prevOpTime"),
            Ok(&doc! {"ts": Timestamp { time: 0, increment: 0 }, "t": -1i64})
        );
    }

    #[test]
    fn a_transaction_is_one_apply_ops_entry() {
        let ins = |id: i32| Operation {
            op: Op::Insert {
                doc: raw(doc! {"_id": id}),
                key: raw(doc! {"_id": id}),
            },
            ns: "test.c".into(),
            ui: None,
        };
        let s = SessionInfo {
            lsid: lsid_document([1; 16], [2; 32]),
            txn_number: 1,
            stmt_id: Some(9),
            prev: OpTime::NULL,
        };
        let d = transaction_entry(&[ins(1), ins(2)], at(6, 1), bson::DateTime::now(), Some(&s))
            .to_document()
            .expect("doc");
        assert_eq!(d.get_str("op"), Ok("c"));
        assert_eq!(d.get_str("ns"), Ok("admin.$cmd"));
        assert!(
            !d.contains_key("stmtId"),
            "an applyOps entry has no statement id"
        );
        let ops = d
            .get_document("o")
            .and_then(|o| o.get_array("applyOps"))
            .expect("applyOps");
        assert_eq!(ops.len(), 2);
        let first = raw(ops[0].as_document().expect("an operation").clone());
        assert_eq!(keys(&first), ["op", "ns", "o", "o2"]);
    }

    #[test]
    fn keys_sort_as_timestamps() {
        let a = entry_key(Timestamp {
            time: 5,
            increment: 9,
        });
        let b = entry_key(Timestamp {
            time: 6,
            increment: 1,
        });
        let c = entry_key(Timestamp {
            time: 6,
            increment: 2,
        });
        assert!(a < b && b < c);
        assert_eq!(
            key_ts(&c),
            Some(Timestamp {
                time: 6,
                increment: 2
            })
        );
    }
}
