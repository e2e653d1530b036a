//! Insert, with splits of full leaves and eager splits of full inner nodes.

use std::sync::atomic::Ordering;

use crossbeam_epoch::{self as epoch, Guard};

use super::finger::Recall;
use super::policy::{LeafPolicy, Overflow};
use super::{Tree, Visit};
use crate::node::NodeHeader;
use crate::sync::Restart;

/// Where to split a full node.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Split {
    /// Where the representation says (the middle): the usual case.
    Half,
    /// Move only the last entry to the new right node: for a leaf that is the last one and
    /// receives keys past its end, so sequential loads leave leaves full.
    Append,
    /// In the middle, then halve both nodes' capacity (an elastic SeqTree leaf going back
    /// towards standard leaves).
    Halving,
}

/// Where an insert attempt starts.
enum Start<'g> {
    /// At the thread's finger (a leaf's parent) and its child on the key's path.
    Finger(Visit<'g>, Visit<'g>),
    /// At the root, remembering the level-1 node passed for the next insert or not.
    Root { remember: bool },
}

/// What an insert attempt did.
enum Attempt {
    /// Done; the previous value if the key was present.
    Done(Option<u64>),
    /// A node was split (or the tree restarted); descend again.
    Again,
    /// A conversion the representation asked for was not possible; descend again and split
    /// instead.
    SplitInstead,
    /// The leaf overflowed with the elastic sweep due: sweep up to this many leaf pairs,
    /// then descend again (and handle the overflow without sweeping).
    Sweep(usize),
}

impl<R: LeafPolicy> Tree<R> {
    /// Inserts `key -> value`, replacing and returning the previous value if the key was
    /// present.
    pub fn insert(&self, key: R::Probe<'_>, value: u64) -> Option<u64> {
        self.upsert(key, value, true)
    }

    /// Inserts `key -> value` only if the key is absent; returns the present value otherwise
    /// (and changes nothing).
    pub fn insert_if_absent(&self, key: R::Probe<'_>, value: u64) -> Option<u64> {
        self.upsert(key, value, false)
    }

    fn upsert(&self, key: R::Probe<'_>, value: u64, replace: bool) -> Option<u64> {
        let guard = &epoch::pin();
        let mut convert = true;
        // At most one sweep per insert, so an insert always finishes.
        let mut may_sweep = true;
        loop {
            match self.try_insert(key, value, replace, convert, may_sweep, guard) {
                Ok(Attempt::Done(previous)) => return previous,
                // The next attempt splits instead; once it has, conversions are possible
                // again (the split may have made the room a conversion lacked).
                Ok(Attempt::SplitInstead) => convert = false,
                Ok(Attempt::Again) if !convert => convert = true,
                Ok(Attempt::Sweep(quota)) => {
                    may_sweep = false;
                    self.sweep(quota, guard);
                }
                Ok(Attempt::Again) | Err(Restart) => {}
            }
        }
    }

    fn try_insert(
        &self,
        key: R::Probe<'_>,
        value: u64,
        replace: bool,
        convert: bool,
        may_sweep: bool,
        guard: &Guard,
    ) -> Result<Attempt, Restart> {
        // From the thread's finger (a leaf's parent), or from the root, remembering the
        // level-1 node passed.
        let mut parent: Option<Visit<'_>> = None;
        let (mut visit, retires) = match self.finger_start(key, guard) {
            Start::Finger(finger, child) => {
                parent = Some(finger);
                (child, None)
            }
            Start::Root { remember } => {
                let retires = remember.then(|| self.fingers.retires());
                (self.read_root(guard)?, retires)
            }
        };
        while !visit.node.is_leaf() {
            if !R::has_room(visit.node, &self.config, None) {
                // Split full inner nodes on the way down, so the parent of any node we
                // split later has room for its separator.
                self.split_or_make_room(key, parent, visit, Split::Half, guard)?;
                return Ok(Attempt::Again);
            }
            let slot = self.child_slot(visit.node, key);
            let child = Self::step(&visit, self.child_at(visit.node, slot))?;
            if let Some(retires) = retires.filter(|_| visit.node.level() == 1) {
                // Validated by the step: reachable, not obsolete.
                self.fingers.remember(visit.node, retires);
            }
            parent = Some(visit);
            visit = child;
        }

        let leaf = visit;
        let hit = R::search(leaf.node, &self.config, key);
        if hit.found {
            if !replace {
                let present = R::value_at(leaf.node, &self.config, hit.pos);
                leaf.read.validate()?;
                return Ok(Attempt::Done(Some(present)));
            }
            let _lock = leaf.read.upgrade()?;
            let previous = R::value_at(leaf.node, &self.config, hit.pos);
            R::set_value(leaf.node, &self.config, hit.pos, value);
            return Ok(Attempt::Done(Some(previous)));
        }
        if R::has_room(leaf.node, &self.config, Some(key)) {
            let _lock = leaf.read.upgrade()?;
            R::insert_at(leaf.node, &self.config, hit.pos, key, value);
            self.len.add(1);
            return Ok(Attempt::Done(None));
        }
        let overflow = if convert {
            let bytes = self.index_bytes();
            let overflow = R::overflow(leaf.node, &self.config, bytes);
            // Only here, on the overflow path, is the sweep considered: below the bound an
            // insert does exactly the B+-tree's work.
            let quota = if may_sweep {
                R::sweep_quota(leaf.node, &self.config, bytes)
            } else {
                0
            };
            if quota > 0 {
                leaf.read.validate()?;
                return Ok(Attempt::Sweep(quota));
            }
            overflow
        } else {
            Overflow::Split
        };
        match overflow {
            Overflow::Split => {}
            Overflow::SplitHalving => {
                self.split_or_make_room(key, parent, leaf, Split::Halving, guard)?;
                return Ok(Attempt::Again);
            }
            Overflow::Grow => {
                let _lock = leaf.read.upgrade()?;
                R::grow(leaf.node, &self.config);
                return Ok(Attempt::Again);
            }
            Overflow::Replace => {
                return Ok(if self.replace_leaf(key, guard)? {
                    Attempt::Again
                } else {
                    // Nothing to replace it with (replace_leaf's locks have moved the
                    // versions on): descend again and split as usual.
                    Attempt::SplitInstead
                });
            }
        }
        // Appending past the last key of the last leaf (auto-increment ids, time series):
        // leave the full leaf full and start a new one, instead of two half-empty leaves.
        let appending = hit.pos == R::count(leaf.node, &self.config) && leaf.node.link().is_null();
        let how = if appending {
            Split::Append
        } else {
            Split::Half
        };
        self.split_or_make_room(key, parent, leaf, how, guard)?;
        Ok(Attempt::Again)
    }

    /// Where the thread's insert finger (`finger.rs`) lets an insert of `key` start: at its
    /// level-1 node, read at a validated version, and the child of it on `key`'s path, if
    /// the node has room for a separator and `key` falls between two of its separators
    /// (which lie within its bounds, so the node is the one on `key`'s path), or past the
    /// last one and below its high fence; else at the root.
    #[inline]
    fn finger_start<'g>(&self, key: R::Probe<'_>, guard: &'g Guard) -> Start<'g> {
        if !R::INSERT_FINGER {
            return Start::Root { remember: false };
        }
        let node = match self.fingers.recall(guard) {
            Recall::Node(node) => node,
            Recall::Nothing => return Start::Root { remember: true },
            Recall::Resting => return Start::Root { remember: false },
        };
        let start = node.lock.read_begin().ok().and_then(|read| {
            if node.level() != 1 || !R::has_room(node, &self.config, None) {
                return None;
            }
            let finger = Visit { node, read };
            // Not the leftmost child (`None`): the key lies between two separators of the
            // node, or past the last one and below the node's high fence (ascending keys).
            let slot = self.child_slot(node, key)?;
            if slot + 1 >= R::count(node, &self.config)
                && !R::below_high_fence(node, &self.config, key)
            {
                return None;
            }
            let child = Self::step(&finger, self.child_at(node, Some(slot))).ok()?;
            Some((finger, child))
        });
        match start {
            Some((finger, child)) => {
                self.fingers.hit();
                Start::Finger(finger, child)
            }
            None => {
                self.fingers.missed();
                Start::Root { remember: true }
            }
        }
    }

    /// Splits `node` (leaf or inner) in two, posting the separator to `parent`, or growing a
    /// new root when `node` is the root. Returns `Ok(false)` and changes nothing when the
    /// parent has no room for the separator (a representation whose inner nodes are asked
    /// about a typical separator on the way down, not the longest key, can get there): the
    /// caller splits the parent first ([`Tree::split_on_path`]).
    pub(super) fn split(
        &self,
        parent: Option<Visit<'_>>,
        node: Visit<'_>,
        how: Split,
        _guard: &Guard,
    ) -> Result<bool, Restart> {
        let _parent_lock = match parent {
            Some(parent) => Some(parent.read.upgrade()?),
            None => None,
        };
        let _node_lock = node.read.upgrade()?;
        let node_ptr = node.node as *const NodeHeader as *mut NodeHeader;
        if parent.is_none() && self.root.load(Ordering::Acquire) != node_ptr {
            return Err(Restart);
        }

        let level = node.node.level();
        debug_assert!(
            level > 0 || node.node.count() >= 2,
            "a leaf split needs two entries"
        );
        let at = match how {
            // The validated read that chose `Append` saw at least one entry (a full leaf).
            Split::Append => node.node.count() - 1,
            Split::Half | Split::Halving => R::split_point(node.node, &self.config),
        };
        let separator = if level == 0 && at > 0 {
            R::separator(node.node, &self.config, at)
        } else {
            R::key_at(node.node, &self.config, at)
        };
        if let Some(parent) = parent {
            if !R::has_room(parent.node, &self.config, Some(R::probe(&separator))) {
                return Ok(false);
            }
        }
        let (right_ptr, bytes) = R::split_off(
            node.node,
            &self.config,
            at,
            &separator,
            how == Split::Append,
        );
        self.bytes.counter(level).add(bytes);
        // SAFETY: freshly built, not yet shared.
        let right = unsafe { right_ptr.as_ref() };
        if level == 0 {
            right.set_link(node.node.link());
        }
        if how == Split::Halving {
            R::halve_capacity(node.node, &self.config);
            R::halve_capacity(right, &self.config);
        }
        // Publish the right node: as the leaf's sibling, then in the parent.
        if level == 0 {
            node.node.set_link(right_ptr.as_ptr());
        }
        match parent {
            Some(parent) => {
                let hit = R::search(parent.node, &self.config, R::probe(&separator));
                debug_assert!(!hit.found, "separator already in the parent");
                let pos = hit.pos;
                R::insert_at(
                    parent.node,
                    &self.config,
                    pos,
                    R::probe(&separator),
                    right_ptr.as_ptr() as u64,
                );
            }
            None => {
                let root_ptr = self.alloc_node(level + 1);
                // SAFETY: freshly allocated, not yet shared.
                let root = unsafe { root_ptr.as_ref() };
                root.set_link(node_ptr);
                R::insert_at(
                    root,
                    &self.config,
                    0,
                    R::probe(&separator),
                    right_ptr.as_ptr() as u64,
                );
                self.root.store(root_ptr.as_ptr(), Ordering::Release);
            }
        }
        Ok(true)
    }

    /// Splits `node` (reached on the path of `key`, with its parent), or, when the parent
    /// has no room for the separator, the nearest ancestor on the path whose own parent has
    /// room; the caller then descends again.
    pub(super) fn split_or_make_room(
        &self,
        key: R::Probe<'_>,
        parent: Option<Visit<'_>>,
        node: Visit<'_>,
        how: Split,
        guard: &Guard,
    ) -> Result<(), Restart> {
        if !self.split(parent, node, how, guard)? {
            self.split_on_path(key, node.node.level() + 1, guard);
        }
        Ok(())
    }

    /// Splits the node at `level` on the path of `key` (going up while a parent has no room
    /// for the separator). Gives up when the tree is no longer that high (a concurrent split
    /// of the root made room).
    pub(super) fn split_on_path(&self, key: R::Probe<'_>, mut level: u16, guard: &Guard) {
        loop {
            let Ok(root) = self.read_root(guard) else {
                continue;
            };
            if root.node.level() < level {
                return;
            }
            let Ok((node, parent)) = self.descend(key, level, guard) else {
                continue;
            };
            match self.split(parent.map(|p| p.0), node, Split::Half, guard) {
                Ok(true) => return,
                Ok(false) => level += 1,
                Err(Restart) => {}
            }
        }
    }
}
