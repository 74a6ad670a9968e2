//! An oplog entry in MongoDB's format (mongod 7.0's `local.oplog.rs` documents): the
//! operation (`op`: `i`, `u`, `d`, `c`, `n`), its namespace and collection UUID, the object
//! (`o`) and document key (`o2`), the optime (`ts`, `t`), the format version (`v: 2`), the
//! wall time, and for session writes `lsid`, `txnNumber`, `stmtId` and `prevOpTime`. A
//! multi-document transaction is one `c` entry on `admin.$cmd` whose `o` is
//! `{applyOps: [...]}`, the inner operations without optimes. Pure: builds documents, stores
//! nothing (docs/design-oplog.md, Writing).

use bson::{doc, spec::BinarySubtype, Binary, Bson, Document, Timestamp, Uuid};

/// The oplog format version mongod 4.4+ writes.
pub const OPLOG_VERSION: i64 = 2;

/// What an entry records.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// `i`: a document inserted (`o` the document, `o2` its key `{_id}`).
    Insert { doc: Document, key: Document },
    /// `u`: a document updated (`o` the update: a `$v: 2` diff or a replacement; `o2`
    /// its key).
    Update { update: Document, key: Document },
    /// `d`: a document deleted (`o` its key).
    Delete { key: Document },
    /// `c`: a command (`create`, `drop`, `applyOps`, ...), `ns` is `<db>.$cmd`.
    Command { command: Document },
    /// `n`: a no-op (`o`: `{msg}`), e.g. "new primary" after an election.
    Noop { msg: String },
}

impl Op {
    fn code(&self) -> &'static str {
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
    pub ts: Timestamp,
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

    pub fn document(&self) -> Document {
        doc! {"ts": self.ts, "t": self.term}
    }
}

/// The session fields of a retryable write's or a transaction's entry.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionInfo {
    /// `lsid` as the client sent it (`{id: UUID}`, plus `uid` when authenticated).
    pub lsid: Document,
    pub txn_number: i64,
    /// The statement's id; `None` for a transaction's `applyOps` entry.
    pub stmt_id: Option<i32>,
    /// The session's previous entry in this transaction number (`OpTime::NULL` if none).
    pub prev: OpTime,
}

/// One operation on a namespace: an entry's subject, or an element of `applyOps`.
#[derive(Debug, Clone, PartialEq)]
pub struct Operation {
    pub op: Op,
    /// `<db>.<collection>`, or `<db>.$cmd` for commands; empty for a no-op.
    pub ns: String,
    /// The collection's UUID (none for no-ops and database-level commands).
    pub ui: Option<Uuid>,
}

impl Operation {
    /// The operation's own fields (`op`, `ns`, `ui`, `o`, `o2`): an `applyOps` element.
    pub fn document(&self) -> Document {
        let mut d = doc! {"op": self.op.code(), "ns": self.ns.clone()};
        if let Some(ui) = self.ui {
            d.insert(
                "ui",
                Binary {
                    subtype: BinarySubtype::Uuid,
                    bytes: ui.bytes().to_vec(),
                },
            );
        }
        let (o, o2) = match &self.op {
            Op::Insert { doc, key } => (doc.clone(), Some(key.clone())),
            Op::Update { update, key } => (update.clone(), Some(key.clone())),
            Op::Delete { key } => (key.clone(), None),
            Op::Command { command } => (command.clone(), None),
            Op::Noop { msg } => (doc! {"msg": msg.clone()}, None),
        };
        d.insert("o", o);
        if let Some(o2) = o2 {
            d.insert("o2", o2);
        }
        d
    }
}

/// A whole entry as stored in `local.oplog.rs`, in mongod's field order.
pub fn entry_document(
    operation: &Operation,
    at: OpTime,
    wall: bson::DateTime,
    session: Option<&SessionInfo>,
) -> Document {
    let mut d = Document::new();
    if let Some(s) = session {
        d.insert("lsid", s.lsid.clone());
        d.insert("txnNumber", s.txn_number);
    }
    d.extend(operation.document());
    if let Some(id) = session.and_then(|s| s.stmt_id) {
        d.insert("stmtId", id);
    }
    d.insert("ts", at.ts);
    d.insert("t", at.term);
    d.insert("v", OPLOG_VERSION);
    d.insert("wall", wall);
    if let Some(s) = session {
        d.insert("prevOpTime", s.prev.document());
    }
    d
}

/// A committed transaction's one entry: `applyOps` of its operations on `admin.$cmd`.
pub fn transaction_entry(
    operations: &[Operation],
    at: OpTime,
    wall: bson::DateTime,
    session: &SessionInfo,
) -> Document {
    let ops: Vec<Bson> = operations
        .iter()
        .map(|o| Bson::Document(o.document()))
        .collect();
    let apply = Operation {
        op: Op::Command {
            command: doc! {"applyOps": ops},
        },
        ns: "admin.$cmd".to_owned(),
        ui: None,
    };
    let session = SessionInfo {
        stmt_id: None,
        ..session.clone()
    };
    entry_document(&apply, at, wall, Some(&session))
}

/// The 8-byte key an entry is stored under: its `ts`, big-endian, so key order is `ts`
/// order and `$natural` order (O1).
pub fn entry_key(ts: Timestamp) -> [u8; 8] {
    ((u64::from(ts.time) << 32) | u64::from(ts.increment)).to_be_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(time: u32, increment: u32) -> OpTime {
        OpTime {
            ts: Timestamp { time, increment },
            term: 1,
        }
    }

    fn keys(d: &Document) -> Vec<&str> {
        d.keys().map(String::as_str).collect()
    }

    #[test]
    fn an_insert_has_mongods_fields_in_mongods_order() {
        let ui = Uuid::new();
        let op = Operation {
            op: Op::Insert {
                doc: doc! {"_id": 1, "a": 2},
                key: doc! {"_id": 1},
            },
            ns: "test.c".into(),
            ui: Some(ui),
        };
        let wall = bson::DateTime::from_millis(1_000);
        let d = entry_document(&op, at(5, 1), wall, None);
        assert_eq!(
            keys(&d),
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
                key: doc! {"_id": 7},
            },
            ns: "test.c".into(),
            ui: None,
        };
        let s = SessionInfo {
            lsid: doc! {"id": Uuid::new()},
            txn_number: 3,
            stmt_id: Some(0),
            prev: OpTime::NULL,
        };
        let d = entry_document(&op, at(5, 2), bson::DateTime::now(), Some(&s));
        assert_eq!(
            keys(&d),
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
                doc: doc! {"_id": id},
                key: doc! {"_id": id},
            },
            ns: "test.c".into(),
            ui: None,
        };
        let s = SessionInfo {
            lsid: doc! {"id": Uuid::new()},
            txn_number: 1,
            stmt_id: Some(9),
            prev: OpTime::NULL,
        };
        let d = transaction_entry(&[ins(1), ins(2)], at(6, 1), bson::DateTime::now(), &s);
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
        let first = ops[0].as_document().expect("an operation");
        assert_eq!(keys(first), ["op", "ns", "o", "o2"]);
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
    }
}
