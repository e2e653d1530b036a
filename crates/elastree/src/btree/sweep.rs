//! The elastic tree's sweep: compacting cold leaves that never overflow (see
//! [`crate::elastic`] for when it runs and why).
//!
//! A sweep step merges two adjacent leaves under one parent into one node the representation
//! builds ([`LeafPolicy::pair_replacement`]). It is the union of two conversions the tree
//! already does, with their locks and nothing else: like a merge it removes the right
//! leaf's separator from the parent, and like a leaf replacement it swaps the left leaf for a
//! new node, which the parent's child slot and the left sibling's link are pointed at. So the
//! writer upgrades the parent, the left sibling, the left and the right leaf, each upgrade
//! failing at once (and restarting the step) if the node moved on since it was read; no lock
//! is waited for while another is held, so no order of taking them can deadlock. Both old
//! leaves are marked obsolete and retired, so readers that hold either restart, and an
//! ascending scan reaches the new node through the left sibling's link.
//!
//! Invariants a step keeps: the new node holds exactly the entries of both leaves, which lie
//! between the left leaf's low fence and the right leaf's high fence, the parent's remaining
//! separators still bound it, and the leaf chain still visits every leaf once in key order.

use crossbeam_epoch::Guard;

use super::policy::LeafPolicy;
use super::{Tree, Visit};
use crate::elastic::OWED_PER_QUOTA;
use crate::node::NodeHeader;
use crate::sync::Restart;

/// How many leaf pairs one sweep may examine per pair it may compact, so that a sweep over a
/// tree with nothing left to compact stays cheap.
const PAIRS_EXAMINED_PER_QUOTA: usize = 8;

/// How many lost races one sweep tolerates before it gives up until the next overflow.
const SWEEP_RESTARTS: usize = 8;

/// What one visit of a parent did.
struct Step<K> {
    /// Whether it compacted a pair.
    compacted: bool,
    /// Where the next step starts: the first key after what this step looked at (`None`:
    /// the end of the leaf level).
    next: Option<K>,
}

impl<R: LeafPolicy> Tree<R> {
    /// Compacts up to `quota` pairs of adjacent cold leaves, plus what earlier sweeps owe,
    /// starting at the sweep cursor and moving it on. If another thread holds the cursor, or
    /// steps keep losing races, it stops early and leaves the pairs it did not compact owed
    /// to the next sweep; the tree is correct either way.
    pub(super) fn sweep(&self, quota: usize, guard: &Guard) {
        let Some(cursor) = R::sweep_cursor(&self.config) else {
            return;
        };
        let Some(mut state) = cursor.try_take() else {
            cursor.owe(quota);
            return;
        };
        if !state.take_turn() {
            return;
        }
        let quota = quota + cursor.take_owed(quota * OWED_PER_QUOTA);
        let mut compacted = 0;
        let allowance = quota * PAIRS_EXAMINED_PER_QUOTA;
        let mut examine = allowance;
        let mut restarts = 0;
        let mut wrapped = false;
        while compacted < quota && examine > 0 && R::sweep_wanted(&self.config, self.index_bytes())
        {
            match self.sweep_step(state.position.as_ref(), &mut examine, guard) {
                Err(Restart) => {
                    restarts += 1;
                    if restarts == SWEEP_RESTARTS {
                        cursor.owe(quota - compacted);
                        break;
                    }
                }
                Ok(step) => {
                    compacted += usize::from(step.compacted);
                    state.position = step.next;
                    if state.position.is_none() {
                        // Past the last leaf: start over from the first, once per sweep.
                        if wrapped {
                            break;
                        }
                        wrapped = true;
                    }
                }
            }
        }
        state.finish(compacted, examine < allowance);
        if compacted > 0 {
            // Hand the retired leaves to the collector now, so their bytes leave the count
            // soon and the next overflow sees the tree's real size.
            guard.flush();
        }
    }

    /// Visits the parent of the leaf holding `from` (the first leaf for `None`): compacts the
    /// first pair of its children, from that leaf on, that the representation accepts.
    fn sweep_step(
        &self,
        from: Option<&R::Owned>,
        examine: &mut usize,
        guard: &Guard,
    ) -> Result<Step<R::Owned>, Restart> {
        let mut visit = self.read_root(guard)?;
        if visit.node.is_leaf() {
            visit.read.validate()?;
            return Ok(Step {
                compacted: false,
                next: None,
            });
        }
        // The fences of the node reached: the smallest key it may hold and the first key
        // of the next node at its level (`None`: unbounded).
        let mut low: Option<R::Owned> = None;
        let mut high: Option<R::Owned> = None;
        while visit.node.level() > 1 {
            let slot = self.sweep_slot(visit.node, from);
            let next = slot.map_or(0, |i| i + 1);
            if let Some(i) = slot {
                low = Some(R::key_at(visit.node, &self.config, i));
            }
            if next < R::count(visit.node, &self.config) {
                high = Some(R::key_at(visit.node, &self.config, next));
            }
            visit = Self::step(&visit, self.child_at(visit.node, slot))?;
        }
        let parent = visit;
        let count = R::count(parent.node, &self.config);
        let mut left_slot = self.sweep_slot(parent.node, from);
        loop {
            // The pair: children `left_slot` and entry `right` of the parent.
            let right = left_slot.map_or(0, |i| i + 1);
            if right >= count {
                break;
            }
            if *examine == 0 {
                // Out of budget: the next sweep starts at this pair.
                let next = match left_slot {
                    Some(i) => Some(R::key_at(parent.node, &self.config, i)),
                    None => from.cloned(),
                };
                parent.read.validate()?;
                return Ok(Step {
                    compacted: false,
                    next,
                });
            }
            *examine -= 1;
            let left = Self::step(&parent, self.child_at(parent.node, left_slot))?;
            let right_leaf = Self::step(&parent, self.child_at(parent.node, Some(right)))?;
            if right_leaf.node.link().is_null() {
                // The last leaf is the hot one under ordered inserts: leave it.
                break;
            }
            if R::pair_compactable(left.node, right_leaf.node, &self.config) {
                let next = if right + 1 < count {
                    Some(R::key_at(parent.node, &self.config, right + 1))
                } else {
                    high
                };
                let left_low = match left_slot {
                    Some(i) => Some(R::key_at(parent.node, &self.config, i)),
                    None => low,
                };
                parent.read.validate()?;
                let compacted =
                    self.compact_pair(&parent, left_slot, left, right_leaf, left_low, guard)?;
                return Ok(Step { compacted, next });
            }
            left_slot = Some(right);
        }
        // Nothing to compact from `from` to the end of this parent (or the hot last leaf was
        // reached, whose parent is the last one): go on with the next parent.
        parent.read.validate()?;
        Ok(Step {
            compacted: false,
            next: high,
        })
    }

    /// The child slot of inner node `node` that holds `from` (`None`, the leftmost child,
    /// for the start of the leaf level).
    fn sweep_slot(&self, node: &NodeHeader, from: Option<&R::Owned>) -> Option<usize> {
        from.and_then(|key| self.child_slot(node, R::probe(key)))
    }

    /// Replaces leaf `left` (at `left_slot` of `parent`) and its right sibling `right` (the
    /// parent's next child) by the one leaf the representation builds from both. `low` is
    /// `left`'s low fence (`None` for the first leaf). Returns whether it did.
    fn compact_pair(
        &self,
        parent: &Visit<'_>,
        left_slot: Option<usize>,
        left: Visit<'_>,
        right: Visit<'_>,
        low: Option<R::Owned>,
        guard: &Guard,
    ) -> Result<bool, Restart> {
        let left_ptr = left.node as *const NodeHeader as *mut NodeHeader;
        let right_ptr = right.node as *const NodeHeader as *mut NodeHeader;
        if left.node.link() != right_ptr {
            left.read.validate()?;
            return Err(Restart);
        }
        let sibling = self.left_sibling(parent, left_slot, low.as_ref(), left_ptr, guard)?;
        let _parent_lock = parent.read.upgrade()?;
        let _sibling_lock = match &sibling {
            Some(sibling) => Some(sibling.read.upgrade()?),
            None => None,
        };
        let left_lock = left.read.upgrade()?;
        let right_lock = right.read.upgrade()?;
        let Some((merged, bytes)) = R::pair_replacement(left.node, right.node, &self.config) else {
            return Ok(false);
        };
        self.bytes.leaves.add(bytes);
        // SAFETY: freshly built, unpublished.
        let merged_node = unsafe { merged.as_ref() };
        merged_node.set_link(right.node.link());
        let merged_ptr = merged.as_ptr();
        if let Some(sibling) = &sibling {
            sibling.node.set_link(merged_ptr);
        }
        match left_slot {
            None => parent.node.set_link(merged_ptr),
            Some(i) => R::set_value(parent.node, &self.config, i, merged_ptr as u64),
        }
        let right_entry = left_slot.map_or(0, |i| i + 1);
        R::remove_at(parent.node, &self.config, right_entry);
        left_lock.unlock_obsolete();
        right_lock.unlock_obsolete();
        self.retire(left.node, guard);
        self.retire(right.node, guard);
        Ok(true)
    }
}
