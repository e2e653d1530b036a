//! The invariant walker: every structural property the tree relies on, checked from the
//! root down with no concurrent writer.

use std::cmp::Ordering as CmpOrdering;
use std::sync::atomic::Ordering;

use crossbeam_epoch as epoch;

use super::policy::LeafPolicy;
use super::Tree;
use crate::node::NodeHeader;

/// What the walk has seen so far.
struct Walk<R: LeafPolicy> {
    leaves: Vec<*const NodeHeader>,
    entries: usize,
    _repr: std::marker::PhantomData<R>,
}

impl<R: LeafPolicy> Tree<R> {
    /// Checks, with no writer running: every node passes its representation's check; every
    /// key lies within the bounds its ancestors' separators give it; all leaves are at level
    /// 0 and every inner node's children are one level below it; no node is locked or
    /// obsolete; the leaf chain visits exactly the leaves in key order; the entry count
    /// matches `len()`.
    pub fn check(&self) -> Result<(), String> {
        let _guard = epoch::pin();
        let root = self.root.load(Ordering::Acquire);
        let mut walk = Walk::<R> {
            leaves: Vec::new(),
            entries: 0,
            _repr: std::marker::PhantomData,
        };
        // SAFETY: the root is never null; the caller promises no concurrent writer, and the
        // guard keeps nodes allocated in any case.
        let root = unsafe { &*root };
        self.check_node(root, None, None, &mut walk)?;

        let mut chain = Vec::new();
        let mut leaf = walk.leaves.first().copied().unwrap_or(std::ptr::null());
        while !leaf.is_null() {
            if chain.len() > walk.leaves.len() {
                return Err("leaf chain is longer than the tree (cycle?)".into());
            }
            chain.push(leaf);
            // SAFETY: chained leaves are published nodes, kept allocated by the guard.
            leaf = unsafe { &*leaf }.link();
        }
        if chain != walk.leaves {
            return Err(format!(
                "leaf chain ({} leaves) differs from the in-order leaves ({})",
                chain.len(),
                walk.leaves.len()
            ));
        }
        if walk.entries != self.len() {
            return Err(format!(
                "tree holds {} entries but len() is {}",
                walk.entries,
                self.len()
            ));
        }
        Ok(())
    }

    fn check_node(
        &self,
        node: &NodeHeader,
        low: Option<&R::Owned>,
        high: Option<&R::Owned>,
        walk: &mut Walk<R>,
    ) -> Result<(), String> {
        let config = &self.config;
        let level = node.level();
        let at = |what: String| format!("level {level} node {:p}: {what}", node);
        if node.lock.is_locked() || node.lock.is_obsolete() {
            return Err(at("locked or obsolete node reachable".into()));
        }
        R::check_node(node, config).map_err(at)?;
        R::check_fences(node, config, low, high).map_err(at)?;
        let count = node.count();
        for i in 0..count {
            let key = R::key_at(node, config, i);
            if let Some(low) = low {
                if R::compare(config, &key, low) == CmpOrdering::Less {
                    return Err(at(format!(
                        "key {key:?} below the node's low fence {low:?}"
                    )));
                }
            }
            if let Some(high) = high {
                if R::compare(config, &key, high) != CmpOrdering::Less {
                    return Err(at(format!(
                        "key {key:?} not below the node's high fence {high:?}"
                    )));
                }
            }
        }
        if level == 0 {
            walk.leaves.push(node);
            walk.entries += count;
            return Ok(());
        }
        let mut child_low = low.cloned();
        for slot in std::iter::once(None).chain((0..count).map(Some)) {
            let child = match slot {
                None => node.link(),
                Some(i) => R::value_at(node, config, i) as *mut NodeHeader,
            };
            if child.is_null() {
                return Err(at(format!("null child at slot {slot:?}")));
            }
            // SAFETY: children of a reachable node are published nodes.
            let child = unsafe { &*child };
            if child.level() + 1 != level {
                return Err(at(format!(
                    "child at slot {slot:?} has level {}",
                    child.level()
                )));
            }
            let child_high =
                if let Some(next) = slot.map_or(Some(0), |i| (i + 1 < count).then_some(i + 1)) {
                    Some(R::key_at(node, config, next))
                } else {
                    high.cloned()
                };
            if count == 0 {
                self.check_node(child, child_low.as_ref(), high, walk)?;
                break;
            }
            self.check_node(child, child_low.as_ref(), child_high.as_ref(), walk)?;
            child_low = child_high;
        }
        Ok(())
    }
}
