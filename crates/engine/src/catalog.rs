//! The environment's catalog: which trees exist (id, name, options) and the next tree id.
//! Stored in `CATALOG`, replaced atomically (write `CATALOG.tmp`, fsync, rename, fsync the
//! directory) on every create and drop, so it is always either the old or the new version.
//!
//! Format (version 1, little-endian): magic `SHCAT\0\0\1`, u64 next tree id, u32 count, then
//! per tree: u64 id, u32 name length, name (UTF-8), u32 node size, u32 basement size,
//! u32 fanout, u8 codec (low 3 bits: the codec; high 5: the zstd level, 0 = the default; see
//! `Compression::options_byte`); then a CRC-32C of everything before it.

use crate::bytes::Reader;
use crate::{Compression, Error, Location, Result, TreeOptions};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"SHCAT\0\0\x01";
pub const CATALOG_FILE: &str = "CATALOG";

/// One tree's catalog entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeEntry {
    pub id: u64,
    pub options: TreeOptions,
}

/// The set of trees, by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Catalog {
    pub next_tree_id: u64,
    pub trees: BTreeMap<String, TreeEntry>,
}

impl Default for Catalog {
    fn default() -> Self {
        Catalog {
            next_tree_id: 1,
            trees: BTreeMap::new(),
        }
    }
}

/// The file that holds tree `id`.
pub fn tree_path(dir: &Path, id: u64) -> PathBuf {
    dir.join(format!("tree-{id:010}.shl"))
}

impl Catalog {
    /// Loads the catalog of `dir`, or an empty one if the directory has none yet.
    pub fn load(dir: &Path) -> Result<Catalog> {
        let path = dir.join(CATALOG_FILE);
        match std::fs::read(&path) {
            Ok(bytes) => Catalog::decode(&bytes)
                .map_err(|r| Error::corruption(&path, Location::Other("catalog".into()), r)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Catalog::default()),
            Err(e) => Err(Error::os(&path, "read", e)),
        }
    }

    /// Durably replaces the catalog file.
    pub fn store(&self, dir: &Path) -> Result<()> {
        let tmp = dir.join(format!("{CATALOG_FILE}.tmp"));
        let path = dir.join(CATALOG_FILE);
        let mut f = std::fs::File::create(&tmp).map_err(|e| Error::os(&tmp, "create", e))?;
        f.write_all(&self.encode())
            .map_err(|e| Error::os(&tmp, "write", e))?;
        f.sync_all().map_err(|e| Error::os(&tmp, "fsync", e))?;
        std::fs::rename(&tmp, &path).map_err(|e| Error::os(&path, "rename", e))?;
        shale_io::sync_dir(dir)?;
        Ok(())
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&self.next_tree_id.to_le_bytes());
        out.extend_from_slice(&(self.trees.len() as u32).to_le_bytes());
        for (name, e) in &self.trees {
            out.extend_from_slice(&e.id.to_le_bytes());
            out.extend_from_slice(&(name.len() as u32).to_le_bytes());
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(&(e.options.node_size_bytes as u32).to_le_bytes());
            out.extend_from_slice(&(e.options.basement_size_bytes as u32).to_le_bytes());
            out.extend_from_slice(&(e.options.fanout as u32).to_le_bytes());
            out.push(e.options.compression.options_byte());
        }
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    #[allow(
        clippy::expect_used,
        reason = "split_at leaves exactly 4 bytes, which convert to [u8; 4]"
    )]
    pub fn decode(bytes: &[u8]) -> std::result::Result<Catalog, String> {
        if bytes.len() < MAGIC.len() + 16 {
            return Err(format!("catalog of {} bytes is truncated", bytes.len()));
        }
        let (body, crc) = bytes.split_at(bytes.len() - 4);
        if crc32c::crc32c(body) != u32::from_le_bytes(crc.try_into().expect("4 bytes")) {
            return Err("catalog checksum mismatch".into());
        }
        if &body[..8] != MAGIC {
            return Err("bad catalog magic or version".into());
        }
        let mut r = Reader::new(body);
        r.skip(8)?;
        let next_tree_id = r.u64()?;
        let n = r.u32()?;
        let mut trees = BTreeMap::new();
        for _ in 0..n {
            let id = r.u64()?;
            let len = r.u32()? as usize;
            let name =
                String::from_utf8(r.take(len)?.to_vec()).map_err(|_| "tree name is not UTF-8")?;
            let node_size_bytes = r.u32()? as usize;
            let basement_size_bytes = r.u32()? as usize;
            let fanout = r.u32()? as usize;
            let code = r.u8()?;
            let compression = Compression::from_options_byte(code)
                .ok_or_else(|| format!("unknown codec or level {code:#04x}"))?;
            let options = TreeOptions {
                node_size_bytes,
                basement_size_bytes,
                // Not in the catalog's record (the tree's metadata holds it): a tree
                // re-created from the record alone writes basements whole.
                read_page_bytes: 0,
                fanout,
                compression,
            };
            trees.insert(name, TreeEntry { id, options });
        }
        if r.pos() != body.len() {
            return Err("trailing bytes in catalog".into());
        }
        Ok(Catalog {
            next_tree_id,
            trees,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_corruption() {
        let mut c = Catalog {
            next_tree_id: 7,
            ..Default::default()
        };
        c.trees.insert(
            "users".into(),
            TreeEntry {
                id: 3,
                // The record holds no read page (the tree's metadata does): it reads as 0.
                options: TreeOptions {
                    read_page_bytes: 0,
                    ..TreeOptions::tiny()
                },
            },
        );
        c.trees.insert(
            "idx".into(),
            TreeEntry {
                id: 5,
                options: TreeOptions {
                    read_page_bytes: 0,
                    ..TreeOptions::default()
                },
            },
        );
        let bytes = c.encode();
        assert_eq!(Catalog::decode(&bytes), Ok(c));
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x10;
            assert!(
                Catalog::decode(&bad).is_err(),
                "flip at byte {i} undetected"
            );
        }
    }
}
