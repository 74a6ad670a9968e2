//! Reading a damaged `CATALOG` (format in `catalog.rs`): the entries that are intact are
//! found wherever they are, and one entry damaged between two intact ones is rebuilt from
//! its surroundings. Only entries naming a tree file that exists are believed, so random
//! bytes are not taken for an entry.
//!
//! 1. With the checksum recomputed the whole file may still parse (a flipped bit in the
//!    checksum itself, or one in a name that stays valid UTF-8): that is used as it is.
//! 2. Otherwise every offset is tried as the start of an entry: an id with a tree file, a
//!    name length that fits, a printable name, sane options and a known codec. Entries are
//!    taken left to right without overlap.
//! 3. A gap between two found entries (or after the header, or before the checksum) that
//!    starts with the id of a tree file still unnamed and ends with sane options is one
//!    entry whose name length was damaged: its name is the bytes between.

use crate::catalog::{Catalog, TreeEntry};
use crate::{Compression, TreeOptions};
use std::collections::BTreeMap;

/// Bytes of the catalog before its first entry: magic 8, next tree id 8, count 4.
const HEAD: usize = 20;
/// Bytes of an entry around its name: id 8 + name length 4 before, options 13 after.
const BEFORE_NAME: usize = 12;
const AFTER_NAME: usize = 13;
/// Longest name believed.
const NAME_MAX: usize = 1024;

/// The trees a damaged catalog still names, among the tree files `files`; `Err` when
/// nothing could be read. The second value says how it was read.
pub(crate) fn read(bytes: &[u8], files: &[u64]) -> Result<(Catalog, String), String> {
    let n = bytes.len();
    if n < HEAD + 4 {
        return Err(format!("{n} bytes, too short for a catalog"));
    }
    let mut fixed = bytes.to_vec();
    let crc = crc32c::crc32c(&fixed[..n - 4]);
    fixed[n - 4..].copy_from_slice(&crc.to_le_bytes());
    if let Ok(c) = Catalog::decode(&fixed) {
        return Ok((c, "read with its checksum ignored".into()));
    }
    let body = &bytes[HEAD..n - 4];
    let mut found: Vec<(usize, usize, String, TreeEntry)> = Vec::new();
    let mut p = 0;
    while p + BEFORE_NAME + AFTER_NAME <= body.len() {
        match entry_at(body, p, files) {
            Some((end, name, e)) => {
                found.push((p, end, name, e));
                p = end;
            }
            None => p += 1,
        }
    }
    let mut gaps = Vec::new();
    let mut at = 0;
    for (start, end, _, _) in &found {
        if *start > at {
            gaps.push((at, *start));
        }
        at = *end;
    }
    if at < body.len() {
        gaps.push((at, body.len()));
    }
    let mut trees = BTreeMap::new();
    for (_, _, name, e) in found {
        trees.insert(name, e);
    }
    let mut rebuilt = 0;
    for (start, end) in gaps {
        if let Some((name, e)) = gap_entry(&body[start..end], files) {
            if !trees.contains_key(&name) && !trees.values().any(|t: &TreeEntry| t.id == e.id) {
                trees.insert(name, e);
                rebuilt += 1;
            }
        }
    }
    if trees.is_empty() {
        return Err("no intact entry found".into());
    }
    let next_tree_id = trees.values().map(|e| e.id).max().unwrap_or(0) + 1;
    let how = format!(
        "read entry by entry: {} entries found intact, {rebuilt} rebuilt around a damaged name length",
        trees.len() - rebuilt
    );
    Ok((
        Catalog {
            next_tree_id,
            trees,
        },
        how,
    ))
}

/// The entry starting at `p` of the entries area, if it is plausible; with its end.
fn entry_at(body: &[u8], p: usize, files: &[u64]) -> Option<(usize, String, TreeEntry)> {
    let id = u64_at(body, p)?;
    if !files.contains(&id) {
        return None;
    }
    let len = usize::try_from(u32_at(body, p + 8)?).ok()?;
    if len == 0 || len > NAME_MAX {
        return None;
    }
    let name_end = p + BEFORE_NAME + len;
    let name = name(body.get(p + BEFORE_NAME..name_end)?)?;
    let options = options(body.get(name_end..name_end + AFTER_NAME)?)?;
    Some((name_end + AFTER_NAME, name, TreeEntry { id, options }))
}

/// One entry filling `gap` exactly, its name length ignored.
fn gap_entry(gap: &[u8], files: &[u64]) -> Option<(String, TreeEntry)> {
    if gap.len() <= BEFORE_NAME + AFTER_NAME {
        return None;
    }
    let id = u64_at(gap, 0)?;
    if !files.contains(&id) {
        return None;
    }
    let name = name(&gap[BEFORE_NAME..gap.len() - AFTER_NAME])?;
    let options = options(&gap[gap.len() - AFTER_NAME..])?;
    Some((name, TreeEntry { id, options }))
}

/// A name the engine could have written: UTF-8 without control characters.
fn name(b: &[u8]) -> Option<String> {
    let s = std::str::from_utf8(b).ok()?;
    (!s.is_empty() && !s.chars().any(char::is_control)).then(|| s.to_owned())
}

/// Node size, basement size, fanout and codec, if sane.
fn options(b: &[u8]) -> Option<TreeOptions> {
    let node = usize::try_from(u32_at(b, 0)?).ok()?;
    let basement = usize::try_from(u32_at(b, 4)?).ok()?;
    let fanout = usize::try_from(u32_at(b, 8)?).ok()?;
    let compression = Compression::from_options_byte(*b.get(12)?)?;
    let sane = (512..=(1 << 30)).contains(&node)
        && (64..=node).contains(&basement)
        && (3..=4096).contains(&fanout);
    sane.then_some(TreeOptions {
        node_size_bytes: node,
        basement_size_bytes: basement,
        read_page_bytes: 0,
        fanout,
        compression,
    })
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Catalog {
        let mut c = Catalog {
            next_tree_id: 4,
            ..Default::default()
        };
        for (id, name) in [(1, "catalog"), (2, "c1"), (3, "c1.size")] {
            c.trees.insert(
                name.into(),
                TreeEntry {
                    id,
                    options: TreeOptions {
                        read_page_bytes: 0,
                        ..TreeOptions::default()
                    },
                },
            );
        }
        c
    }

    /// Every single-bit flip: each entry the flip is not in comes back exactly; the one it
    /// is in comes back under its id (its name or options may be what the flip made them)
    /// or not at all (its file is then kept unnamed by `repair`).
    #[test]
    fn a_flip_costs_at_most_the_entry_it_hits() {
        let c = sample();
        let bytes = c.encode();
        let mut spans = Vec::new();
        let mut at = HEAD;
        for (name, e) in &c.trees {
            let len = BEFORE_NAME + name.len() + AFTER_NAME;
            spans.push((at..at + len, name.clone(), e.id));
            at += len;
        }
        for i in 0..bytes.len() {
            for bit in [0x01u8, 0x80] {
                let mut bad = bytes.clone();
                bad[i] ^= bit;
                let (got, how) =
                    read(&bad, &[1, 2, 3]).unwrap_or_else(|e| panic!("flip {bit:#x} at {i}: {e}"));
                for (span, name, id) in &spans {
                    let found = got.trees.get(name).map(|e| e.id);
                    if span.contains(&i) {
                        let other = got.trees.iter().find(|(_, e)| e.id == *id);
                        assert!(
                            other.is_none_or(|(n, _)| n == name || found.is_none()),
                            "flip {bit:#x} at {i} ({how}): {got:?}"
                        );
                    } else {
                        assert_eq!(found, Some(*id), "flip {bit:#x} at {i} ({how}): {got:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn a_damaged_name_length_is_rebuilt_from_its_neighbours() {
        let c = sample();
        let mut bad = c.encode();
        // The first entry (sorted: "c1", id 2) has its name length at HEAD + 8.
        bad[HEAD + 8 + 2] ^= 0x40;
        let (got, how) = read(&bad, &[1, 2, 3]).expect("read");
        assert_eq!(got.trees, c.trees, "{how}");
    }
}
