//! What a tree's nodes hold on disk, raw and stored: the uncompressed bytes of every written
//! node (its header plus each partition's raw length) against the bytes its blocks take in
//! the file (header plus compressed partitions). Read from the node headers alone, one small
//! read per node, through the block file's live table; nodes written since are counted at
//! their new image, and dirty nodes not yet written are not counted until they are (a
//! checkpoint writes them all). It never reads a partition and never takes the tree's lock.

use crate::block::{BlockFile, Image, NodeId};
use crate::tree::format::{decode_header, header_len_from_prefix};
use crate::{Category, Error, Location, Result};

/// Bytes the first read of a node takes: most headers fit (a 4 MiB leaf of 16 KiB basements
/// has ~256 descriptors and pivots); longer ones take a second read.
const HEADER_PREFIX_BYTES: u32 = 16 << 10;
/// Attempts at a node whose image changes while it is read (a rewrite reuses its extent).
const MAX_ATTEMPTS: usize = 4;

/// The on-disk size of a tree's written nodes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TreeSpace {
    /// Nodes with an image in the file.
    pub nodes: u64,
    /// Their uncompressed bytes: headers plus partitions' raw lengths.
    pub raw_bytes: u64,
    /// Their bytes in the file: the blocks' exact lengths (before page rounding).
    pub stored_bytes: u64,
    /// The file's allocated length (headers, blocks, translation tables, free space, holes).
    pub file_bytes: u64,
    /// Of which on the free list: extents freed and not yet reused. Until reused they stay
    /// allocated on disk unless they were punched out (only blocks a checkpoint retires are,
    /// docs/format-blockfile.md B11).
    pub free_bytes: u64,
}

impl TreeSpace {
    /// `raw_bytes / stored_bytes`, 1.0 for an empty tree.
    pub fn ratio(&self) -> f64 {
        if self.stored_bytes == 0 {
            1.0
        } else {
            self.raw_bytes as f64 / self.stored_bytes as f64
        }
    }
}

/// Measures every live image of `file`.
pub(crate) fn measure(file: &BlockFile) -> Result<TreeSpace> {
    let mut space = TreeSpace {
        file_bytes: file.file_len(),
        free_bytes: file.free_bytes(),
        ..TreeSpace::default()
    };
    for (id, img) in file.live_images() {
        if let Some((raw, stored)) = measure_node(file, id, img)? {
            space.nodes += 1;
            space.raw_bytes += raw;
            space.stored_bytes += stored;
        }
    }
    Ok(space)
}

/// Raw and stored bytes of node `id`, following its image if a rewrite replaces it while it
/// is read; `None` when the node was freed meanwhile.
fn measure_node(file: &BlockFile, id: NodeId, mut img: Image) -> Result<Option<(u64, u64)>> {
    for _ in 0..MAX_ATTEMPTS {
        match read_sizes(file, &img) {
            Ok(sizes) => return Ok(Some(sizes)),
            Err(reason) => match file.image(id) {
                None => return Ok(None),
                Some(now) if now != img => img = now,
                Some(_) => return Err(corrupt(file, id, &img, reason)),
            },
        }
    }
    Err(corrupt(file, id, &img, "rewritten on every read".into()))
}

fn read_sizes(file: &BlockFile, img: &Image) -> std::result::Result<(u64, u64), String> {
    let len = img.extent.len;
    let prefix_len = len.min(HEADER_PREFIX_BYTES);
    let read = |n: u32| {
        file.read_image_range(img, 0, n, Category::Meta)
            .map_err(|e| e.to_string())
    };
    let prefix = read(prefix_len)?;
    let header_len = header_len_from_prefix(&prefix)?;
    if header_len as u64 > u64::from(len) {
        return Err(format!(
            "header of {header_len} bytes in a {len}-byte block"
        ));
    }
    let header = if header_len as u32 > prefix_len {
        decode_header(&read(header_len as u32)?)?
    } else {
        decode_header(&prefix)?
    };
    let raw = header_len as u64
        + header
            .parts
            .iter()
            .map(|p| u64::from(p.raw_len))
            .sum::<u64>();
    Ok((raw, u64::from(len)))
}

fn corrupt(file: &BlockFile, id: NodeId, img: &Image, reason: String) -> Error {
    Error::corruption(
        file.path(),
        Location::Block {
            node: id.0,
            offset: img.extent.offset,
            len: u64::from(img.extent.len),
        },
        reason,
    )
}
