//! What a tree's cached nodes hold, by kind: the skeleton of leaves (pivots, descriptors,
//! segment tables), their entries (whole basements and read pieces), the skeleton of internal
//! nodes, their whole buffers, the buffer segments lookups read alone, and key filters.
//! The parts sum to what the cache charges the nodes (`Node::mem_bytes`), so a benchmark can
//! say where a budget went, e.g. how much of it holds leaf data a point read can hit.

use super::node::{Leaf, Node, NodeBody};
use super::segment::Seg;
use super::Tree;

/// Bytes the cached nodes of one tree hold, by kind (see the module doc).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheMix {
    /// Cached leaves.
    pub leaves: u64,
    /// Cached internal nodes.
    pub internals: u64,
    /// Leaf pivots, descriptors, segment tables and per-node overhead.
    pub leaf_skeleton_bytes: u64,
    /// Loaded basements and loaded pieces of basements.
    pub leaf_entry_bytes: u64,
    /// Internal pivots, children, descriptors (with their segment tables) and overhead.
    pub internal_skeleton_bytes: u64,
    /// Whole loaded message buffers.
    pub buffer_bytes: u64,
    /// Buffer segments read alone (and the filters of evicted ones).
    pub segment_bytes: u64,
    /// Key filters of evicted buffers.
    pub filter_bytes: u64,
}

impl CacheMix {
    /// Every kind summed: the cache's charge for the nodes.
    pub fn total(&self) -> u64 {
        self.leaf_skeleton_bytes
            + self.leaf_entry_bytes
            + self.internal_skeleton_bytes
            + self.buffer_bytes
            + self.segment_bytes
            + self.filter_bytes
    }

    fn add_node(&mut self, node: &Node) {
        let all = node.mem_bytes() as u64;
        match &node.body {
            NodeBody::Leaf(l) => {
                self.leaves += 1;
                let entries = leaf_entry_bytes(l);
                self.leaf_entry_bytes += entries;
                self.leaf_skeleton_bytes += all - entries;
            }
            NodeBody::Internal(n) => {
                self.internals += 1;
                let buffers: u64 = n
                    .buffers
                    .iter()
                    .flatten()
                    .map(|b| b.mem_bytes() as u64)
                    .sum();
                let segments: u64 = n
                    .segments
                    .iter()
                    .flatten()
                    .map(|s| Seg::mem_bytes(s) as u64)
                    .sum();
                let filters: u64 = n.filters.iter().flatten().map(|f| f.bytes() as u64).sum();
                self.buffer_bytes += buffers;
                self.segment_bytes += segments;
                self.filter_bytes += filters;
                self.internal_skeleton_bytes += all - buffers - segments - filters;
            }
        }
    }
}

/// Bytes of a leaf's loaded basements and pieces.
fn leaf_entry_bytes(l: &Leaf) -> u64 {
    l.basements
        .iter()
        .map(|s| (s.as_ref().map_or(0, |b| b.mem_bytes()) + s.pieces_mem_bytes()) as u64)
        .sum()
}

impl Tree {
    /// What the tree's cached nodes hold, by kind, under the shared lock.
    pub(crate) fn cache_mix(&self) -> CacheMix {
        let st = self.read_state();
        let mut mix = CacheMix::default();
        for node in st.nodes.values() {
            mix.add_node(node);
        }
        mix
    }
}
