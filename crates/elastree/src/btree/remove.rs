//! Remove, and the repair of underfull nodes: merging a node with a sibling under their
//! parent, and shrinking the tree's height when the root is left with a single child.

use std::sync::atomic::Ordering;

use crossbeam_epoch::{self as epoch, Guard};

use super::policy::{LeafPolicy, Overflow, Underflow};
use super::{Tree, Visit};
use crate::sync::Restart;

/// What a merge attempt at one level did.
enum Repair {
    /// Nothing to do, or nothing possible (the sibling is too full).
    Idle,
    /// Merged a pair; says whether the parent is now underfull itself.
    Merged { parent_underfull: bool },
    /// The node is its parent's only child: the parent must be merged first.
    NoSibling,
    /// The root was replaced by its only child.
    Collapsed,
}

impl<R: LeafPolicy> Tree<R> {
    /// Removes `key`, returning its value if it was present.
    pub fn remove(&self, key: R::Probe<'_>) -> Option<u64> {
        self.remove_if(key, |_| true)
    }

    /// Removes `key` if `pred(value)` holds for its current value; returns the removed value.
    pub fn remove_if(&self, key: R::Probe<'_>, pred: impl Fn(u64) -> bool) -> Option<u64> {
        let guard = &epoch::pin();
        loop {
            match self.try_remove(key, &pred, guard) {
                Ok((removed, underflow)) => {
                    match underflow {
                        Underflow::Keep => {}
                        Underflow::Merge => self.repair(key, guard),
                        Underflow::Replace => self.convert_leaf(key, Overflow::Replace, guard),
                    }
                    return removed;
                }
                Err(Restart) => continue,
            }
        }
    }

    fn try_remove(
        &self,
        key: R::Probe<'_>,
        pred: &impl Fn(u64) -> bool,
        guard: &Guard,
    ) -> Result<(Option<u64>, Underflow), Restart> {
        let (leaf, parent) = self.descend(key, 0, guard)?;
        let hit = R::search(leaf.node, &self.config, key);
        if !hit.found {
            leaf.read.validate()?;
            return Ok((None, Underflow::Keep));
        }
        let _lock = leaf.read.upgrade()?;
        let value = R::value_at(leaf.node, &self.config, hit.pos);
        if !pred(value) {
            return Ok((None, Underflow::Keep));
        }
        R::remove_at(leaf.node, &self.config, hit.pos);
        self.len.add(-1);
        let underflow = if parent.is_some() {
            R::after_remove(leaf.node, &self.config)
        } else {
            Underflow::Keep
        };
        Ok((Some(value), underflow))
    }

    /// Repairs underfull nodes on the path of `key`, from the leaves up. Every step either
    /// merges two nodes or stops, so the loop ends.
    fn repair(&self, key: R::Probe<'_>, guard: &Guard) {
        let mut level = 0;
        // The lowest level that waited for its parent to be repaired first: once the parent
        // merged with a sibling, the node there may have a sibling to merge with too.
        let mut revisit: Option<u16> = None;
        loop {
            match self.try_merge(key, level, guard) {
                Err(Restart) => continue,
                Ok(Repair::Idle) => return,
                Ok(Repair::NoSibling) => {
                    revisit.get_or_insert(level);
                    level += 1;
                }
                Ok(Repair::Merged {
                    parent_underfull: true,
                }) => level += 1,
                Ok(Repair::Merged {
                    parent_underfull: false,
                }) => match revisit.take() {
                    Some(lower) => level = lower,
                    None => return,
                },
                // The new root may itself be an inner node with a single child.
                Ok(Repair::Collapsed) => level = revisit.take().unwrap_or(level.saturating_sub(1)),
            }
        }
    }

    /// One merge attempt for the node at `level` on the path of `key`.
    fn try_merge(&self, key: R::Probe<'_>, level: u16, guard: &Guard) -> Result<Repair, Restart> {
        let root = self.read_root(guard)?;
        if root.node.level() < level {
            return Ok(Repair::Idle);
        }
        if root.node.level() == level {
            return self.try_collapse_root(root, guard);
        }
        let (parent, _) = self.descend(key, level + 1, guard)?;
        let slot = self.child_slot(parent.node, key);
        let node = Self::step(&parent, self.child_at(parent.node, slot))?;
        if !R::is_underfull(node.node, &self.config) {
            node.read.validate()?;
            return Ok(Repair::Idle);
        }
        let parent_count = R::count(parent.node, &self.config);
        // Pick the pair (left, right) and the parent entry that separates them.
        let (left, right, separator_index) = match slot {
            // Leftmost child: pair it with entry 0 (if any).
            None if parent_count == 0 => {
                parent.read.validate()?;
                return Ok(Repair::NoSibling);
            }
            None => {
                let right = Self::step(&parent, self.child_at(parent.node, Some(0)))?;
                (node, right, 0)
            }
            Some(i) if i + 1 < parent_count => {
                let right = Self::step(&parent, self.child_at(parent.node, Some(i + 1)))?;
                (node, right, i + 1)
            }
            Some(i) => {
                let left_slot = i.checked_sub(1);
                let left = Self::step(&parent, self.child_at(parent.node, left_slot))?;
                (left, node, i)
            }
        };
        let extra = usize::from(level > 0);
        if !R::fits_merge(left.node, right.node, extra, &self.config) {
            right.read.validate()?;
            left.read.validate()?;
            return Ok(Repair::Idle);
        }
        let _parent_lock = parent.read.upgrade()?;
        let left_lock = left.read.upgrade()?;
        let right_lock = right.read.upgrade()?;

        if level == 0 {
            R::merge_from(left.node, right.node, &self.config, None);
            left.node.set_link(right.node.link());
        } else {
            let separator = R::key_at(parent.node, &self.config, separator_index);
            R::merge_from(left.node, right.node, &self.config, Some(&separator));
        }
        R::remove_at(parent.node, &self.config, separator_index);
        drop(left_lock);
        right_lock.unlock_obsolete();
        self.retire(right.node, guard);

        let parent_is_root = std::ptr::eq(self.root.load(Ordering::Acquire), parent.node);
        let parent_underfull = if parent_is_root {
            parent.node.count() == 0
        } else {
            R::is_underfull(parent.node, &self.config)
        };
        Ok(Repair::Merged { parent_underfull })
    }

    /// Replaces an inner root that has a single child by that child.
    fn try_collapse_root(&self, root: Visit<'_>, guard: &Guard) -> Result<Repair, Restart> {
        if root.node.is_leaf() || root.node.count() > 0 {
            root.read.validate()?;
            return Ok(Repair::Idle);
        }
        let lock = root.read.upgrade()?;
        let child = root.node.link();
        self.root.store(child, Ordering::Release);
        lock.unlock_obsolete();
        self.retire(root.node, guard);
        Ok(Repair::Collapsed)
    }
}
