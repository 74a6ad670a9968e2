//! Every decoder of on-disk bytes, callable on any bytes: the entry points of the fuzz target
//! `fuzz/fuzz_targets/engine_decoders.rs` (docs/operations.md, Fuzzing). A node block (its
//! header, its partitions, and the node check every read runs, N1-N3), a basement's and a
//! buffer's raw bytes, a block file's header slot and translation table, and log frames and
//! records. Each returns what it decoded or the decoder's own reason; a panic on any input is
//! a bug.
//!
//! On a real read a checksum guards each of these (a partition's CRC, a slot's, a frame's),
//! and a fuzzer cannot forge one: so the raw decoders behind the checksums are exposed here
//! one by one, as the bytes a corrupted block that happened to pass its CRC would give them.
//! Nothing here is used by the engine itself.

use crate::tree::msg::MsgBuffer;
use crate::tree::node::{Node, NodeBody};
use crate::tree::{basement::Basement, format};

/// Decodes a whole node block and checks the node as a read does; the entry count of its
/// loaded basements (a leaf) or its buffered messages (an internal node).
pub fn node_block(bytes: &[u8]) -> Result<usize, String> {
    let body = format::decode(bytes)?;
    let node = Node::new(body, false);
    node.check()?;
    Ok(match &node.body {
        NodeBody::Leaf(l) => l.basements.iter().flatten().map(Basement::len).sum(),
        NodeBody::Internal(n) => n.buffers.iter().flatten().map(MsgBuffer::key_count).sum(),
    })
}

/// Decodes a node header alone (what a skeleton read gives).
pub fn node_header(bytes: &[u8]) -> Result<usize, String> {
    let header = format::decode_header(bytes)?;
    Ok(header.parts.len())
}

/// Decodes a basement's raw (decompressed) bytes; the entries, walked to their last version.
pub fn basement(raw: &[u8]) -> Result<usize, String> {
    let b = Basement::decode(raw.to_vec())?;
    let versions: usize = b.iter().map(|(_, e)| e.versions().count()).sum();
    assert!(versions >= b.len(), "every entry has a version (P1)");
    assert_eq!(
        b.encode().as_ref(),
        raw,
        "a decoded basement encodes as it came"
    );
    Ok(b.len())
}

/// Decodes a message buffer's raw (decompressed) bytes; the message count.
pub fn buffer(raw: &[u8]) -> Result<usize, String> {
    let b = MsgBuffer::decode(raw.to_vec())?;
    Ok(b.iter().count())
}

/// Decodes a block file's header slot.
pub fn block_file_header(bytes: &[u8]) -> Result<usize, String> {
    crate::block::header::Header::decode(bytes, 0).map(|_| 1)
}

/// Decodes a block file's translation table; its entry count.
pub fn block_table(bytes: &[u8]) -> Result<usize, String> {
    crate::block::btt::decode(bytes).map(|t| t.len())
}

/// Decodes log frames from the start of `bytes`, the first at LSN `first` (frames follow one
/// another), each payload as a record, as recovery reads a log file's body: the records
/// decoded up to the end (zeroes), or the reason of the first bad frame or record.
pub fn log_frames(bytes: &[u8], first: u64) -> Result<usize, String> {
    use crate::wal::{decode_frame, frame_len, Decoded, LogRecord, Lsn};
    let (mut at, mut lsn, mut records) = (0usize, first, 0usize);
    while at < bytes.len() {
        match decode_frame(&bytes[at..], Lsn(lsn)) {
            Decoded::End => break,
            Decoded::Bad(reason) => return Err(reason),
            Decoded::Frame { payload, .. } => {
                LogRecord::decode(payload)?;
                let len = frame_len(payload.len());
                at += len;
                lsn += len as u64;
                records += 1;
            }
        }
    }
    Ok(records)
}

/// Decodes one log record's payload. (Not checked to encode back to the same bytes: the
/// decoder takes a varint with redundant continuation bytes, which no writer makes and the
/// frame's CRC guards against; the fuzzer's first find.)
pub fn log_record(payload: &[u8]) -> Result<usize, String> {
    crate::wal::LogRecord::decode(payload).map(|_| 1)
}

/// The fuzz target's first byte: which decoder the rest of the input goes to.
pub const DECODERS: [&str; 8] = [
    "node_block",
    "node_header",
    "basement",
    "buffer",
    "block_file_header",
    "block_table",
    "log_frames",
    "log_record",
];

/// LSN of the first frame the fuzz target's `log_frames` inputs start at (a first log file's
/// body starts after its header page).
pub const FIRST_FRAME_LSN: u64 = crate::wal::FILE_HEADER_BYTES;

/// Runs decoder `pick` (an index into [`DECODERS`], modulo their count) on `bytes`.
pub fn run(pick: u8, bytes: &[u8]) -> Result<usize, String> {
    match usize::from(pick) % DECODERS.len() {
        0 => node_block(bytes),
        1 => node_header(bytes),
        2 => basement(bytes),
        3 => buffer(bytes),
        4 => block_file_header(bytes),
        5 => block_table(bytes),
        6 => log_frames(bytes, FIRST_FRAME_LSN),
        _ => log_record(bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::block::{Extent, NodeId};
    use crate::tree::entry::Entry;
    use crate::tree::node::Leaf;
    use crate::vocab::Ts;
    use crate::wal::{LogRecord, Lsn, TxnId};
    use crate::Compression;
    use std::collections::BTreeMap;

    /// One valid input per decoder (the decoder's index first), from the engine's encoders.
    fn seeds() -> Vec<(u8, Vec<u8>)> {
        let entries: BTreeMap<Vec<u8>, Entry> = (0..300u32)
            .map(|i| {
                let key = format!("key{i:05}").into_bytes();
                let value = (i % 3 != 0).then(|| vec![b'v'; (i % 50) as usize]);
                (key, Entry::new(Ts(u64::from(i) + 1), value))
            })
            .collect();
        let leaf = Leaf::from_entries(entries, 1024);
        let first = leaf.basements[0].as_ref().expect("built loaded");
        let basement = first.encode().into_owned();
        let body = NodeBody::Leaf(leaf);
        let (block, _) = format::encode(&body, Compression::zstd(1).expect("level"), 4096, 256);
        let mut table = crate::block::btt::Btt::new();
        for id in 1..20u64 {
            let offset = (1 << 20) + id * 8192;
            table.insert(
                NodeId(id),
                Extent {
                    offset,
                    len: 5000,
                    crc: 7,
                },
            );
        }
        let records = [
            LogRecord::Put {
                txn: TxnId(1),
                tree: 3,
                key: b"k".to_vec(),
                value: b"v".to_vec(),
            },
            LogRecord::Delete {
                txn: TxnId(1),
                tree: 3,
                key: b"j".to_vec(),
            },
            LogRecord::Commit { txn: TxnId(1) },
        ];
        let mut frames = Vec::new();
        let mut lsn = FIRST_FRAME_LSN;
        for r in &records {
            let mut payload = Vec::new();
            r.encode(&mut payload);
            let before = frames.len();
            crate::wal::encode_frame(Lsn(lsn), &payload, &mut frames);
            lsn += (frames.len() - before) as u64;
        }
        let mut record = Vec::new();
        records[0].encode(&mut record);
        let header = crate::block::header::Header {
            seq: 4,
            root: 2,
            next_node_id: 20,
            btt_offset: 1 << 20,
            btt_len: 4096,
            btt_crc: 9,
            lsn: 77,
            meta: b"options".to_vec(),
        };
        vec![
            (0, block.clone()),
            (1, block),
            (2, basement),
            (4, header.encode()),
            (5, crate::block::btt::encode(&table)),
            (6, frames),
            (7, record),
        ]
    }

    #[test]
    fn every_seed_decodes_and_every_damaged_seed_is_refused_or_decodes() {
        for (pick, bytes) in seeds() {
            let n =
                run(pick, &bytes).unwrap_or_else(|e| panic!("{}: {e}", DECODERS[pick as usize]));
            assert!(n > 0, "{} decoded nothing", DECODERS[pick as usize]);
            // Every single-byte change and every cut: an answer, never a panic.
            let step = (bytes.len() / 400).max(1);
            for at in (0..bytes.len()).step_by(step) {
                let mut bad = bytes.clone();
                bad[at] ^= 0x5a;
                let _ = run(pick, &bad);
                let _ = run(pick, &bytes[..at]);
            }
        }
    }

    /// Writes the seeds to fuzz/seeds/engine_decoders/ (run by hand after a format change:
    /// `cargo test -p shale-engine --lib write_fuzz_seeds -- --ignored`).
    #[test]
    #[ignore]
    fn write_fuzz_seeds() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fuzz/seeds/engine_decoders");
        std::fs::create_dir_all(&dir).expect("seed directory");
        for (pick, bytes) in seeds() {
            let mut input = vec![pick];
            input.extend_from_slice(&bytes);
            let name = dir.join(DECODERS[pick as usize]);
            std::fs::write(&name, input).expect("seed written");
        }
    }
}
