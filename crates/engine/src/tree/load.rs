//! Reading nodes and partitions from the block file and installing them in the node table.
//! Reads happen with no tree lock held; installation re-checks that the node's on-disk image
//! is still the one that was read (copy-on-write gives every image its own extent), so a
//! concurrent rewrite is never overwritten by a stale image.

use super::format;
use super::node::{self, Node, NodeBody, PartDesc};
use super::{Load, Tree};
use crate::block::{Extent, NodeId};
use crate::counters::EngineStats;
use crate::{Category, Error, Location, Result};
use std::sync::atomic::Ordering;

impl Tree {
    /// Performs one `Load`, then evicts if the cache went over budget.
    ///
    /// A read races with a concurrent rewrite of the same node, whose old extent may be
    /// reused at once: if the read fails while the node's extent changed underneath it, the
    /// failure is stale and the caller simply retries against the new image.
    ///
    /// The loaded node is pinned for the calling operation (recorded in `pinned`) so that the
    /// eviction this load may trigger cannot take it before the operation retries.
    pub(crate) fn load(&self, what: Load, pinned: &mut Vec<NodeId>) -> Result<()> {
        self.cache.misses.fetch_add(1, Ordering::Relaxed);
        let id = match what {
            Load::Node(id) | Load::Header(id) | Load::Partition(id, _) => id,
        };
        let before = self.file.extent(id);
        let outcome = match what {
            Load::Node(id) => self.load_node(id),
            Load::Header(id) => self.load_header(id),
            Load::Partition(id, i) => self.load_partition(id, i),
        };
        match outcome {
            Err(e) if self.file.extent(id) != before && !matches!(e, Error::Io(_)) => {}
            other => other?,
        }
        {
            let mut st = self.write_state();
            if st.nodes.contains_key(&id) {
                *st.pins.entry(id).or_insert(0) += 1;
                pinned.push(id);
            }
        }
        self.evict_if_needed()
    }

    fn extent_of(&self, id: NodeId) -> Result<Extent> {
        self.file.extent(id).ok_or_else(|| {
            Error::corruption(
                self.file.path(),
                Location::Block {
                    node: id.0,
                    offset: 0,
                    len: 0,
                },
                "node is referenced but has no entry in the block translation table",
            )
        })
    }

    pub(crate) fn corrupt(&self, id: NodeId, e: &Extent, reason: impl Into<String>) -> Error {
        Error::corruption(
            self.file.path(),
            Location::Block {
                node: id.0,
                offset: e.offset,
                len: e.len as u64,
            },
            reason,
        )
    }

    /// Reads and decodes a whole node image (no installation).
    pub(crate) fn read_node_image(&self, id: NodeId, cat: Category) -> Result<(Extent, NodeBody)> {
        let extent = self.extent_of(id)?;
        let bytes = self.file.read_block(id, cat)?;
        let body = format::decode(&bytes).map_err(|r| self.corrupt(id, &extent, r))?;
        let node = Node::new(body, false);
        node.check().map_err(|r| self.corrupt(id, &extent, r))?;
        EngineStats::bump(&self.stats.nodes_read);
        Ok((extent, node.body))
    }

    fn load_node(&self, id: NodeId) -> Result<()> {
        let (extent, body) = self.read_node_image(id, Category::UserRead)?;
        let node = Node::new(body, false);
        self.make_room(node.mem_bytes())?;
        let mut st = self.write_state();
        if self.file.extent(id).map(|e| e.offset) != Some(extent.offset) {
            return Ok(()); // rewritten meanwhile: the caller retries and decides again
        }
        let replace = match st.node(id) {
            None => true,
            Some(n) => !n.dirty && !n.body.all_loaded(),
        };
        if replace {
            st.remove_node(id, &self.cache);
            st.insert_node(id, node, &self.cache);
        }
        Ok(())
    }

    fn load_header(&self, id: NodeId) -> Result<()> {
        let extent = self.extent_of(id)?;
        let prefix_len = extent.len.min(4096);
        let prefix = self
            .file
            .read_block_range(id, 0, prefix_len, Category::UserRead)?;
        let header_len =
            format::header_len_from_prefix(&prefix).map_err(|r| self.corrupt(id, &extent, r))?;
        if header_len > extent.len as usize {
            return Err(self.corrupt(
                id,
                &extent,
                format!("header length {header_len} exceeds the block"),
            ));
        }
        let header = if header_len <= prefix.len() {
            format::decode_header(&prefix)
        } else {
            let full = self
                .file
                .read_block_range(id, 0, header_len as u32, Category::UserRead)?;
            format::decode_header(&full)
        }
        .map_err(|r| self.corrupt(id, &extent, r))?;
        EngineStats::bump(&self.stats.headers_read);
        let node = Node::new(format::skeleton(header), false);
        node.check().map_err(|r| self.corrupt(id, &extent, r))?;
        self.make_room(node.mem_bytes())?;
        let mut st = self.write_state();
        if st.node(id).is_none() && self.file.extent(id).map(|e| e.offset) == Some(extent.offset) {
            st.insert_node(id, node, &self.cache);
        }
        Ok(())
    }

    /// Reads partition `i` (a basement or a message buffer) of a cached, partially loaded node
    /// with one exact-size read, and installs it if the node's image is still the one read.
    fn load_partition(&self, id: NodeId, i: usize) -> Result<()> {
        let wanted: Option<(bool, PartDesc)> = {
            let st = self.read_state();
            match st.node(id).map(|n| &n.body) {
                Some(NodeBody::Leaf(l)) if l.basements.get(i).is_some_and(Option::is_none) => {
                    l.parts.get(i).map(|d| (true, *d))
                }
                Some(NodeBody::Internal(n)) if n.buffers.get(i).is_some_and(Option::is_none) => {
                    n.parts.get(i).map(|d| (false, *d))
                }
                _ => None,
            }
        };
        let Some((leaf, desc)) = wanted else {
            return Ok(());
        };
        let extent = self.extent_of(id)?;
        let end = desc.offset as u64 + desc.stored_len as u64;
        if end > extent.len as u64 {
            return Err(self.corrupt(id, &extent, format!("partition {i} extends past the block")));
        }
        let stored =
            self.file
                .read_block_range(id, desc.offset, desc.stored_len, Category::UserRead)?;
        let part = format::decode_partition_raw(&desc, &stored)
            .and_then(|raw| format::decode_partition(leaf, &raw))
            .map_err(|r| self.corrupt(id, &extent, format!("partition {i}: {r}")))?;
        let (reads, bytes) = if leaf {
            (&self.stats.basements_read, &self.stats.basement_read_bytes)
        } else {
            (&self.stats.buffers_read, &self.stats.buffer_read_bytes)
        };
        EngineStats::bump(reads);
        bytes.fetch_add(stored.device_bytes() as u64, Ordering::Relaxed);
        self.make_room(match &part {
            format::Partition::Basement(b) => node::basement_mem(b),
            format::Partition::Buffer(b) => node::buffer_mem(b),
        })?;
        let mut st = self.write_state();
        if self.file.extent(id).map(|e| e.offset) != Some(extent.offset) || st.node(id).is_none() {
            return Ok(());
        }
        let cache = self.cache.clone();
        st.modify(id, &cache, |n| match (&mut n.body, part) {
            (NodeBody::Leaf(l), format::Partition::Basement(b))
                if l.parts.get(i) == Some(&desc) && l.basements[i].is_none() =>
            {
                l.basements[i] = Some(b);
            }
            (NodeBody::Internal(x), format::Partition::Buffer(b))
                if x.parts.get(i) == Some(&desc) && x.buffers[i].is_none() =>
            {
                x.buffers[i] = Some(b);
                // N4: a loaded buffer has no filter; a whole node, none at all.
                if let Some(f) = x.filters.get_mut(i) {
                    *f = None;
                }
                if x.all_loaded() {
                    x.filters = Vec::new();
                }
            }
            _ => {}
        });
        Ok(())
    }
}
