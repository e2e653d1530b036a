//! The tree's shape level by level: nodes, entries and the bytes spent on keys, which is
//! what the optimized pages' prefixes and short separators change.

use std::sync::atomic::Ordering;

use crossbeam_epoch as epoch;

use super::policy::LeafPolicy;
use super::Tree;
use crate::node::NodeHeader;

/// One level of a tree.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LevelShape {
    /// 0 for the leaves.
    pub level: u16,
    /// Nodes on the level.
    pub nodes: usize,
    /// Entries in them (keys in leaves, separators in inner nodes).
    pub entries: usize,
    /// Bytes the nodes spend on their keys (see `NodeRepr::key_bytes`).
    pub key_bytes: usize,
}

impl LevelShape {
    /// Key bytes per entry (0 for an empty level).
    pub fn key_bytes_per_entry(&self) -> f64 {
        self.key_bytes as f64 / self.entries.max(1) as f64
    }
}

impl<R: LeafPolicy> Tree<R> {
    /// The tree level by level, root first. Walks every node: call it with no writer
    /// running (a concurrent writer makes the figures approximate, never unsafe).
    pub fn shape(&self) -> Vec<LevelShape> {
        let _guard = epoch::pin();
        // SAFETY: the root is never null, and the guard keeps every node we reach allocated.
        let root: &NodeHeader = unsafe { &*self.root.load(Ordering::Acquire) };
        let height = usize::from(root.level()) + 1;
        let mut levels: Vec<LevelShape> = (0..height)
            .map(|level| LevelShape {
                level: level as u16,
                ..LevelShape::default()
            })
            .collect();
        let mut frontier = vec![root as *const NodeHeader];
        while let Some(node) = frontier.pop() {
            // SAFETY: published nodes reached from the root under the guard.
            let node = unsafe { &*node };
            let Some(shape) = levels.get_mut(usize::from(node.level())) else {
                continue;
            };
            let count = R::count(node, &self.config);
            shape.nodes += 1;
            shape.entries += count;
            shape.key_bytes += R::key_bytes(node, &self.config);
            if !node.is_leaf() {
                frontier.push(node.link());
                frontier.extend(
                    (0..count).map(|i| R::value_at(node, &self.config, i) as *const NodeHeader),
                );
            }
        }
        levels.reverse();
        levels
    }
}
