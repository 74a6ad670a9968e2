//! `Tree::verify`: checks every invariant of a tree — node invariants N1–N3, key ranges
//! against the parents' pivots, heights, that every leaf is at the same depth, that no node
//! is reachable twice, and (through the block file) checksums, the translation table and
//! free space. Nodes not in the cache are read from disk without being cached.

use super::node::NodeBody;
use super::{Stall, Tree};
use crate::block::NodeId;
use crate::{Category, Error, Location, Result};
use std::collections::HashSet;

impl Tree {
    /// Checks the whole tree; returns the number of entries it holds (after applying
    /// buffered messages) on success.
    pub fn verify(self: &std::sync::Arc<Self>) -> Result<u64> {
        let root = self.read_state().root;
        let mut seen = HashSet::new();
        let mut leaf_depth = None;
        self.verify_node(root, None, None, None, 0, &mut seen, &mut leaf_depth)?;
        {
            // Every block write and free happens under the tree's write lock: holding the read
            // lock keeps the file still while it is checked (checkpoints are held off by the
            // caller, `TreeHandle::verify`).
            let _still = self.read_state();
            self.file.verify()?;
        }
        let mut cursor_count = 0u64;
        let mut c = super::Cursor::new(self.clone());
        c.seek_to_first()?;
        let mut last: Option<Vec<u8>> = None;
        while c.valid() {
            if last.as_deref().is_some_and(|l| l >= c.key()) {
                return Err(self.bad(root, "cursor returned keys out of order"));
            }
            last = Some(c.key().to_vec());
            cursor_count += 1;
            c.next()?;
        }
        Ok(cursor_count)
    }

    #[allow(clippy::too_many_arguments)]
    fn verify_node(
        &self,
        id: NodeId,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
        expect_height: Option<u32>,
        depth: usize,
        seen: &mut HashSet<NodeId>,
        leaf_depth: &mut Option<usize>,
    ) -> Result<()> {
        if !seen.insert(id) {
            return Err(self.bad(id, "node reachable twice"));
        }
        let body = self.snapshot_node(id)?;
        let (height, pivots, children, first, last) = match &body {
            NodeBody::Leaf(l) => {
                let keys: Vec<&Vec<u8>> = l
                    .basements
                    .iter()
                    .flatten()
                    .flat_map(|b| b.iter().map(|(k, _)| k))
                    .collect();
                (
                    0,
                    l.pivots.clone(),
                    Vec::new(),
                    keys.first().map(|k| k.to_vec()),
                    keys.last().map(|k| k.to_vec()),
                )
            }
            NodeBody::Internal(n) => {
                let first = n
                    .buffers
                    .iter()
                    .find_map(|b| b.iter().next().map(|(k, _)| k.clone()));
                let last = n
                    .buffers
                    .iter()
                    .rev()
                    .find_map(|b| b.iter().next_back().map(|(k, _)| k.clone()));
                (n.height, n.pivots.clone(), n.children.clone(), first, last)
            }
        };
        if expect_height.is_some_and(|h| h != height) {
            return Err(self.bad(
                id,
                format!("height {height}, parent expects {expect_height:?}"),
            ));
        }
        let in_range = |k: &[u8]| lo.is_none_or(|lo| k >= lo) && hi.is_none_or(|hi| k < hi);
        for k in pivots.iter().chain(first.iter()).chain(last.iter()) {
            if !in_range(k) {
                return Err(self.bad(id, "key or pivot outside the range its parent gives it"));
            }
        }
        if height == 0 {
            match leaf_depth {
                Some(d) if *d != depth => return Err(self.bad(id, "leaves at different depths")),
                _ => *leaf_depth = Some(depth),
            }
            return Ok(());
        }
        for (i, child) in children.iter().enumerate() {
            let clo = if i == 0 {
                lo
            } else {
                Some(pivots[i - 1].as_slice())
            };
            let chi = if i == pivots.len() {
                hi
            } else {
                Some(pivots[i].as_slice())
            };
            self.verify_node(
                *child,
                clo,
                chi,
                Some(height - 1),
                depth + 1,
                seen,
                leaf_depth,
            )?;
        }
        Ok(())
    }

    /// A copy of a node's contents: from the cache (checked), or read from disk.
    fn snapshot_node(&self, id: NodeId) -> Result<NodeBody> {
        let cached = self.with_read(|_, st| match st.node(id) {
            Some(n) => {
                n.check().map_err(|r| Stall::Err(self.bad(id, r)))?;
                match &n.body {
                    NodeBody::Leaf(l) if !l.all_loaded() => Ok(None),
                    body => Ok(Some(body.clone())),
                }
            }
            None => Ok(None),
        })?;
        if let Some(body) = cached {
            return Ok(body);
        }
        // A concurrent rewrite may free and reuse the extent being read: a failure while the
        // node's extent moved is stale, so read again.
        loop {
            let before = self.file.extent(id);
            match self.read_node_image(id, Category::Meta) {
                Ok((_, body)) => return Ok(body),
                Err(e) if self.file.extent(id) != before && !matches!(e, Error::Io(_)) => continue,
                Err(e) => return Err(e),
            }
        }
    }

    fn bad(&self, id: NodeId, reason: impl Into<String>) -> Error {
        let e = self.file.extent(id);
        Error::corruption(
            self.file.path(),
            Location::Block {
                node: id.0,
                offset: e.map_or(0, |e| e.offset),
                len: e.map_or(0, |e| e.len as u64),
            },
            reason,
        )
    }
}
