//! Reads under the shared lock: point lookups (descend, gather the key's buffered messages,
//! apply them to the leaf entry) and leaf-range scans for cursors (a whole leaf's entries
//! merged with every buffered message for its key range). Nothing here changes the tree.

use super::msg::{self, MsgBuffer, MsgOp, Msn};
use super::node::NodeBody;
use super::{Load, Stall, Step, Tree, TreeState};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

/// Which leaf a scan wants.
#[derive(Debug, Clone)]
pub(crate) enum Target {
    /// The leaf whose range contains the key.
    Containing(Vec<u8>),
    /// The leaf holding the largest keys below the key.
    Before(Vec<u8>),
    First,
    Last,
}

/// The entries of one leaf's key range `[lo, hi)` as of the scan.
#[derive(Debug, Clone, Default)]
pub(crate) struct LeafBatch {
    pub entries: Vec<(Vec<u8>, Vec<u8>)>,
    pub lo: Option<Vec<u8>>,
    pub hi: Option<Vec<u8>>,
}

impl Tree {
    /// Point lookup.
    pub(crate) fn lookup(&self, st: &TreeState, key: &[u8]) -> Step<Option<Vec<u8>>> {
        let mut pending: Vec<(Msn, &MsgOp)> = Vec::new();
        let mut id = st.root;
        let base = loop {
            let node = st.node(id).ok_or(Stall::Load(Load::Header(id)))?;
            node.touch();
            match &node.body {
                NodeBody::Internal(n) => {
                    let c = n.child_index(key);
                    let buffer = n.buffers[c]
                        .as_ref()
                        .ok_or(Stall::Load(Load::Partition(id, c)))?;
                    pending.extend(buffer.get(key).iter().map(|(m, op)| (*m, op)));
                    id = n.children[c];
                }
                NodeBody::Leaf(l) => {
                    let b = l.basement_index(key);
                    let basement = l.basements[b]
                        .as_ref()
                        .ok_or(Stall::Load(Load::Partition(id, b)))?;
                    break basement.get(key).cloned();
                }
            }
        };
        self.cache.hits.fetch_add(1, Ordering::Relaxed);
        pending.sort_by_key(|(m, _)| *m);
        Ok(pending
            .into_iter()
            .fold(base, |cur, (_, op)| msg::apply(&*self.merge, key, cur, op)))
    }

    /// The merged contents of one leaf's range.
    pub(crate) fn scan_leaf(&self, st: &TreeState, target: &Target) -> Step<LeafBatch> {
        let mut buffers: Vec<&MsgBuffer> = Vec::new();
        let (mut lo, mut hi): (Option<&Vec<u8>>, Option<&Vec<u8>>) = (None, None);
        let mut id = st.root;
        let leaf = loop {
            let node = st.node(id).ok_or(Stall::Load(Load::Node(id)))?;
            node.touch();
            match &node.body {
                NodeBody::Internal(n) => {
                    let c = match target {
                        Target::Containing(k) => n.child_index(k),
                        Target::Before(k) => n.pivots.partition_point(|p| p < k),
                        Target::First => 0,
                        Target::Last => n.children.len() - 1,
                    };
                    if c > 0 {
                        lo = Some(&n.pivots[c - 1]);
                    }
                    if c < n.pivots.len() {
                        hi = Some(&n.pivots[c]);
                    }
                    let buffer = n.buffers[c]
                        .as_ref()
                        .ok_or(Stall::Load(Load::Partition(id, c)))?;
                    buffers.push(buffer);
                    id = n.children[c];
                }
                NodeBody::Leaf(l) if !l.all_loaded() => return Err(Stall::Load(Load::Node(id))),
                NodeBody::Leaf(l) => break l,
            }
        };
        let mut merged: BTreeMap<&[u8], Option<Vec<u8>>> = BTreeMap::new();
        for b in leaf.basements.iter().flatten() {
            for (k, v) in b.iter() {
                merged.insert(k, Some(v.clone()));
            }
        }
        let mut msgs: BTreeMap<&[u8], Vec<(Msn, &MsgOp)>> = BTreeMap::new();
        for buf in buffers {
            for (k, list) in buf.range(lo.map(Vec::as_slice), hi.map(Vec::as_slice)) {
                msgs.entry(k)
                    .or_default()
                    .extend(list.iter().map(|(m, op)| (*m, op)));
            }
        }
        for (k, mut list) in msgs {
            list.sort_by_key(|(m, _)| *m);
            let cur = merged.get(k).cloned().flatten();
            let v = list
                .into_iter()
                .fold(cur, |cur, (_, op)| msg::apply(&*self.merge, k, cur, op));
            merged.insert(k, v);
        }
        self.cache.hits.fetch_add(1, Ordering::Relaxed);
        Ok(LeafBatch {
            entries: merged
                .into_iter()
                .filter_map(|(k, v)| v.map(|v| (k.to_vec(), v)))
                .collect(),
            lo: lo.cloned(),
            hi: hi.cloned(),
        })
    }
}
