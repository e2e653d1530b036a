//! Leaf conversions: replacing a leaf by nodes of another representation (the elastic
//! tree's compaction and expansion), and the lookup-triggered splits of the expanding state.
//!
//! A replacement swaps a leaf for one or two new nodes in one step. Three pointers lead to a
//! leaf: the parent's child slot, the left sibling's `link` (ascending scans), and the root
//! pointer when the leaf is the root. The replacing writer write-locks the parent, the left
//! sibling and the leaf (upgrades that fail restart the operation, so the order of taking
//! them cannot deadlock), builds the new nodes from the leaf's entries, points all three at
//! them, and marks the old leaf obsolete, so a reader that still holds it restarts. The left
//! sibling is the parent's previous child, or, for a leftmost child, the leaf a descent below
//! the leaf's low fence reaches (the same descent descending scans use).

use std::ops::Bound;
use std::sync::atomic::Ordering;

use crossbeam_epoch::Guard;

use super::insert::Split;
use super::policy::{LeafPolicy, Overflow, Replacement};
use super::{Tree, Visit};
use crate::node::NodeHeader;
use crate::sync::Restart;

/// The leaf on the path of a key, with what a conversion needs around it.
struct LeafPath<'g, R: LeafPolicy> {
    leaf: Visit<'g>,
    parent: Option<(Visit<'g>, Option<usize>)>,
    /// The smallest key the leaf may hold (`None` for the leftmost leaf).
    low_fence: Option<R::Owned>,
}

/// How many times a best-effort conversion retries after losing a race before giving up.
const CONVERSION_ATTEMPTS: usize = 8;

impl<R: LeafPolicy> Tree<R> {
    /// Descends to the leaf of `key`, splitting full inner nodes on the way (so the parent
    /// has room for one more separator); restarts after such a split.
    fn descend_for_conversion<'g>(
        &self,
        key: R::Probe<'_>,
        guard: &'g Guard,
    ) -> Result<LeafPath<'g, R>, Restart> {
        let mut visit = self.read_root(guard)?;
        let mut parent: Option<(Visit<'g>, Option<usize>)> = None;
        let mut low_fence = None;
        while !visit.node.is_leaf() {
            if !R::has_room(visit.node, &self.config, None) {
                self.split_or_make_room(key, parent.map(|p| p.0), visit, Split::Half, guard)?;
                return Err(Restart);
            }
            let slot = self.child_slot(visit.node, key);
            if let Some(i) = slot {
                low_fence = Some(R::key_at(visit.node, &self.config, i));
            }
            let child = Self::step(&visit, self.child_at(visit.node, slot))?;
            parent = Some((visit, slot));
            visit = child;
        }
        Ok(LeafPath {
            leaf: visit,
            parent,
            low_fence,
        })
    }

    /// Carries out a conversion the representation asked for on the leaf of `key`, best
    /// effort: a conversion that keeps losing races is dropped (the tree is correct either
    /// way, only less compact or less fast).
    pub(super) fn convert_leaf(&self, key: R::Probe<'_>, action: Overflow, guard: &Guard) {
        for _ in 0..CONVERSION_ATTEMPTS {
            let done = match action {
                Overflow::Replace => self.replace_leaf(key, guard).map(|_| ()),
                Overflow::SplitHalving => self.split_leaf_halving(key, guard),
                Overflow::Split | Overflow::Grow => return,
            };
            if done.is_ok() {
                return;
            }
        }
    }

    fn split_leaf_halving(&self, key: R::Probe<'_>, guard: &Guard) -> Result<(), Restart> {
        let path = self.descend_for_conversion(key, guard)?;
        // Conditions may have changed since the lookup: ask again.
        if R::after_lookup(path.leaf.node, &self.config).is_none()
            && R::overflow(path.leaf.node, &self.config, self.index_bytes())
                != Overflow::SplitHalving
        {
            path.leaf.read.validate()?;
            return Ok(());
        }
        self.split_or_make_room(
            key,
            path.parent.map(|p| p.0),
            path.leaf,
            Split::Halving,
            guard,
        )
    }

    /// The left sibling of the leaf at `slot` of `parent` (`None` for the first leaf), read
    /// optimistically: the parent's previous child, or for a leftmost child the leaf that a
    /// descent below the leaf's `low_fence` reaches. Restarts unless its link leads to
    /// `leaf`.
    pub(super) fn left_sibling<'g>(
        &self,
        parent: &Visit<'g>,
        slot: Option<usize>,
        low_fence: Option<&R::Owned>,
        leaf: *mut NodeHeader,
        guard: &'g Guard,
    ) -> Result<Option<Visit<'g>>, Restart> {
        let left = match (slot, low_fence) {
            (Some(i), _) => Self::step(parent, self.child_at(parent.node, i.checked_sub(1)))?,
            (None, Some(fence)) => self.descend_below(Bound::Excluded(fence), guard)?.0,
            (None, None) => return Ok(None),
        };
        if !left.node.is_leaf() || left.node.link() != leaf {
            left.read.validate()?;
            return Err(Restart);
        }
        Ok(Some(left))
    }

    /// Replaces the leaf of `key` by what [`LeafPolicy::replacement`] builds; returns whether
    /// it did.
    pub(super) fn replace_leaf(&self, key: R::Probe<'_>, guard: &Guard) -> Result<bool, Restart> {
        let path = self.descend_for_conversion(key, guard)?;
        let leaf = path.leaf;
        let leaf_ptr = leaf.node as *const NodeHeader as *mut NodeHeader;
        let left = match &path.parent {
            Some((parent, slot)) => {
                self.left_sibling(parent, *slot, path.low_fence.as_ref(), leaf_ptr, guard)?
            }
            None => None,
        };
        let _parent_lock = match &path.parent {
            Some((parent, _)) => Some(parent.read.upgrade()?),
            None => None,
        };
        let _left_lock = match &left {
            Some(left) => Some(left.read.upgrade()?),
            None => None,
        };
        let leaf_lock = leaf.read.upgrade()?;
        if path.parent.is_none() && self.root.load(Ordering::Acquire) != leaf_ptr {
            return Err(Restart);
        }
        let Some(replacement) = R::replacement(leaf.node, &self.config, self.index_bytes()) else {
            return Ok(false);
        };
        if let (Some((parent, _)), Some((separator, _))) = (&path.parent, &replacement.second) {
            if !R::has_room(parent.node, &self.config, Some(R::probe(separator))) {
                // No room for the second node's separator: drop the replacement; the caller
                // splits instead, which makes room above first.
                self.free_replacement(replacement);
                return Ok(false);
            }
        }
        self.bytes.leaves.add(replacement.bytes);
        // SAFETY: freshly built, unpublished nodes.
        let first = unsafe { replacement.first.as_ref() };
        let last = match &replacement.second {
            Some((_, second)) => {
                first.set_link(second.as_ptr());
                // SAFETY: as above.
                unsafe { second.as_ref() }
            }
            None => first,
        };
        last.set_link(leaf.node.link());
        let first_ptr = replacement.first.as_ptr();
        if let Some(left) = &left {
            left.node.set_link(first_ptr);
        }
        match &path.parent {
            Some((parent, slot)) => {
                match slot {
                    None => parent.node.set_link(first_ptr),
                    Some(i) => R::set_value(parent.node, &self.config, *i, first_ptr as u64),
                }
                if let Some((separator, second)) = &replacement.second {
                    let probe = R::probe(separator);
                    let hit = R::search(parent.node, &self.config, probe);
                    debug_assert!(!hit.found, "separator already in the parent");
                    let pos = hit.pos;
                    R::insert_at(
                        parent.node,
                        &self.config,
                        pos,
                        probe,
                        second.as_ptr() as u64,
                    );
                }
            }
            None => match &replacement.second {
                None => self.root.store(first_ptr, Ordering::Release),
                Some((separator, second)) => {
                    let root_ptr = self.alloc_node(1);
                    // SAFETY: freshly allocated, not yet shared.
                    let root = unsafe { root_ptr.as_ref() };
                    root.set_link(first_ptr);
                    let probe = R::probe(separator);
                    R::insert_at(root, &self.config, 0, probe, second.as_ptr() as u64);
                    self.root.store(root_ptr.as_ptr(), Ordering::Release);
                }
            },
        }
        leaf_lock.unlock_obsolete();
        self.retire(leaf.node, guard);
        Ok(true)
    }

    /// Frees the nodes of a replacement that is not published.
    fn free_replacement(&self, replacement: Replacement<R>) {
        let (first, second) = (replacement.first, replacement.second.map(|(_, node)| node));
        for node in std::iter::once(first).chain(second) {
            // SAFETY: built by the representation and never made reachable.
            unsafe { R::free(&self.config, node) };
        }
    }
}
