//! Range scans, ascending along the leaf chain and descending by re-descents.
//!
//! A scan copies the qualifying entries of one leaf into a buffer, validates the leaf's
//! version, and only then hands the entries to the caller, so every visited pair was present
//! when the leaf was validated. After a failed validation it restarts from the root at the
//! last key it returned (exclusive), so keys never repeat or go backwards.

use std::ops::Bound;

use crossbeam_epoch::{self as epoch, Guard};
use smallvec::SmallVec;

use super::policy::LeafPolicy;
use super::{Tree, Visit};
use crate::node::{NodeHeader, NodeRepr};
use crate::sync::Restart;

/// The entries of one leaf held between the copy and the validation, keys of type `K`. Its
/// slots are kept from leaf to leaf, and from scan to scan when the caller keeps the buffer
/// ([`Tree::scan_ascending_in`]): their keys are overwritten in place
/// ([`NodeRepr::key_into`]), so once a buffer has filled a leaf's worth of slots, scans
/// allocate nothing per visited key. Its first 16 slots are inline.
pub struct ScanBuffer<K> {
    slots: SmallVec<[(K, u64); 16]>,
    len: usize,
}

impl<K> Default for ScanBuffer<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K> ScanBuffer<K> {
    /// An empty buffer.
    pub fn new() -> Self {
        Self {
            slots: SmallVec::new(),
            len: 0,
        }
    }

    fn clear(&mut self) {
        self.len = 0;
        // Keys without a buffer of their own (integers) gain nothing from reused slots.
        if !std::mem::needs_drop::<K>() {
            self.slots.clear();
        }
    }

    fn len(&self) -> usize {
        self.len
    }

    /// Copies entry `i` of `node` into the next slot if its key passes `wanted`; says
    /// whether it did. A new slot gets the key built outside the buffer (for integer keys,
    /// a register), so a scan's first leaf costs what a plain copy would.
    #[inline]
    fn push_if<R: NodeRepr<Owned = K>>(
        &mut self,
        node: &NodeHeader,
        config: &R::Config,
        i: usize,
        wanted: impl FnOnce(&K) -> bool,
    ) -> bool {
        if !std::mem::needs_drop::<K>() || self.len == self.slots.len() {
            let key = R::key_at(node, config, i);
            if !wanted(&key) {
                return false;
            }
            self.slots.push((key, R::value_at(node, config, i)));
        } else {
            let slot = &mut self.slots[self.len];
            R::key_into(node, config, i, &mut slot.0);
            if !wanted(&slot.0) {
                return false;
            }
            slot.1 = R::value_at(node, config, i);
        }
        self.len += 1;
        true
    }

    /// The kept entries, in the order loaded.
    fn entries(&self) -> &[(K, u64)] {
        &self.slots[..self.len]
    }
}

/// Makes `resume` exclude `last` (the last key a scan returned), reusing the key it holds.
fn resume_after<K: Clone>(resume: &mut Bound<K>, last: &K) {
    let key = match std::mem::replace(resume, Bound::Unbounded) {
        Bound::Included(mut k) | Bound::Excluded(mut k) => {
            k.clone_from(last);
            k
        }
        Bound::Unbounded => last.clone(),
    };
    *resume = Bound::Excluded(key);
}

/// Whether `key` is still inside the far end of a scan.
fn within<R: LeafPolicy>(
    config: &R::Config,
    key: &R::Owned,
    end: Bound<&R::Owned>,
    ascending: bool,
) -> bool {
    use std::cmp::Ordering::*;
    match end {
        Bound::Unbounded => true,
        Bound::Included(e) => {
            let ord = R::compare(config, key, e);
            if ascending {
                ord != Greater
            } else {
                ord != Less
            }
        }
        Bound::Excluded(e) => {
            let ord = R::compare(config, key, e);
            if ascending {
                ord == Less
            } else {
                ord == Greater
            }
        }
    }
}

impl<R: LeafPolicy> Tree<R> {
    /// Visits up to `limit` entries with keys in `(lower, upper)` in ascending order; returns
    /// how many were visited.
    pub fn scan_ascending(
        &self,
        lower: Bound<&R::Owned>,
        upper: Bound<&R::Owned>,
        limit: usize,
        visit: &mut dyn FnMut(&R::Owned, u64),
    ) -> usize {
        self.scan_ascending_in(&mut ScanBuffer::new(), lower, upper, limit, visit)
    }

    /// [`Tree::scan_ascending`] copying leaves through `buffer`, which a caller keeps from
    /// scan to scan so that scans allocate nothing per visited key.
    pub fn scan_ascending_in(
        &self,
        buffer: &mut ScanBuffer<R::Owned>,
        lower: Bound<&R::Owned>,
        upper: Bound<&R::Owned>,
        limit: usize,
        visit: &mut dyn FnMut(&R::Owned, u64),
    ) -> usize {
        let guard = &epoch::pin();
        let mut resume: Bound<R::Owned> = lower.cloned();
        let mut visited = 0;
        'restart: while visited < limit {
            let Ok(mut leaf) = self.descend_to_start(resume.as_ref(), guard) else {
                continue 'restart;
            };
            loop {
                buffer.clear();
                let count = R::count(leaf.node, &self.config);
                let start = match &resume {
                    Bound::Unbounded => 0,
                    Bound::Included(k) => R::search(leaf.node, &self.config, R::probe(k)).pos,
                    Bound::Excluded(k) => {
                        let hit = R::search(leaf.node, &self.config, R::probe(k));
                        hit.pos + usize::from(hit.found)
                    }
                };
                let wanted = limit - visited;
                let mut reached_end = false;
                R::prefetch_keys(
                    leaf.node,
                    &self.config,
                    start,
                    count.min(start.saturating_add(wanted)),
                );
                for i in start..count {
                    if buffer.len() == wanted {
                        break;
                    }
                    let inside = |key: &R::Owned| within::<R>(&self.config, key, upper, true);
                    if !buffer.push_if::<R>(leaf.node, &self.config, i, inside) {
                        reached_end = true;
                        break;
                    }
                }
                let next = leaf.node.link();
                if leaf.read.validate().is_err() {
                    continue 'restart;
                }
                for (key, value) in buffer.entries() {
                    visit(key, *value);
                }
                visited += buffer.len();
                if reached_end || visited == limit || next.is_null() {
                    return visited;
                }
                if let Some((last, _)) = buffer.entries().last() {
                    resume_after(&mut resume, last);
                }
                // SAFETY: `next` was read from the leaf at a validated version, so it is a
                // published leaf, kept allocated by the epoch guard.
                let next: &NodeHeader = unsafe { &*next };
                match next.lock.read_begin() {
                    Ok(read) => leaf = Visit { node: next, read },
                    Err(Restart) => continue 'restart,
                }
            }
        }
        visited
    }

    /// Descends to the leaf where an ascending scan from `start` begins.
    fn descend_to_start<'g>(
        &self,
        start: Bound<&R::Owned>,
        guard: &'g Guard,
    ) -> Result<Visit<'g>, Restart> {
        match start {
            Bound::Included(k) | Bound::Excluded(k) => Ok(self.descend(R::probe(k), 0, guard)?.0),
            Bound::Unbounded => {
                let mut visit = self.read_root(guard)?;
                while !visit.node.is_leaf() {
                    visit = Self::step(&visit, visit.node.link())?;
                }
                Ok(visit)
            }
        }
    }

    /// Visits up to `limit` entries with keys in `(lower, upper)` in descending order;
    /// returns how many were visited.
    pub fn scan_descending(
        &self,
        lower: Bound<&R::Owned>,
        upper: Bound<&R::Owned>,
        limit: usize,
        visit: &mut dyn FnMut(&R::Owned, u64),
    ) -> usize {
        self.scan_descending_in(&mut ScanBuffer::new(), lower, upper, limit, visit)
    }

    /// [`Tree::scan_descending`] copying leaves through `buffer` (see
    /// [`Tree::scan_ascending_in`]).
    pub fn scan_descending_in(
        &self,
        buffer: &mut ScanBuffer<R::Owned>,
        lower: Bound<&R::Owned>,
        upper: Bound<&R::Owned>,
        limit: usize,
        visit: &mut dyn FnMut(&R::Owned, u64),
    ) -> usize {
        let guard = &epoch::pin();
        let mut resume: Bound<R::Owned> = upper.cloned();
        let mut fence: Option<R::Owned> = None;
        let mut visited = 0;
        while visited < limit {
            let Ok((leaf, has_fence)) = self.descend_below_into(resume.as_ref(), &mut fence, guard)
            else {
                continue;
            };
            buffer.clear();
            let count = R::count(leaf.node, &self.config);
            // Entries before `end` qualify against `resume`.
            let end = match &resume {
                Bound::Unbounded => count,
                Bound::Included(k) => {
                    let hit = R::search(leaf.node, &self.config, R::probe(k));
                    hit.pos + usize::from(hit.found)
                }
                Bound::Excluded(k) => R::search(leaf.node, &self.config, R::probe(k)).pos,
            };
            let wanted = limit - visited;
            let mut reached_end = false;
            let stop = end.min(count);
            R::prefetch_keys(leaf.node, &self.config, stop.saturating_sub(wanted), stop);
            for i in (0..stop).rev() {
                if buffer.len() == wanted {
                    break;
                }
                let inside = |key: &R::Owned| within::<R>(&self.config, key, lower, false);
                if !buffer.push_if::<R>(leaf.node, &self.config, i, inside) {
                    reached_end = true;
                    break;
                }
            }
            if leaf.read.validate().is_err() {
                continue;
            }
            for (key, value) in buffer.entries() {
                visit(key, *value);
            }
            visited += buffer.len();
            if reached_end || visited == limit {
                return visited;
            }
            // Everything in this leaf at or above its low fence has been seen; go below it.
            match fence.as_ref().filter(|_| has_fence) {
                None => return visited,
                Some(fence) => {
                    if !within::<R>(&self.config, fence, lower, false) {
                        return visited;
                    }
                    resume_after(&mut resume, fence);
                }
            }
        }
        visited
    }

    /// Descends to the leaf holding the largest keys within `end` (a descending scan's
    /// upper bound), returning it and its low fence: the smallest key it may hold (`None`
    /// for the leftmost leaf).
    pub(super) fn descend_below<'g>(
        &self,
        end: Bound<&R::Owned>,
        guard: &'g Guard,
    ) -> Result<(Visit<'g>, Option<R::Owned>), Restart> {
        let mut fence = None;
        let (leaf, has_fence) = self.descend_below_into(end, &mut fence, guard)?;
        Ok((leaf, fence.filter(|_| has_fence)))
    }

    /// [`Tree::descend_below`] writing the low fence into `fence` (reusing the key it holds);
    /// returns the leaf and whether it has a low fence.
    fn descend_below_into<'g>(
        &self,
        end: Bound<&R::Owned>,
        fence: &mut Option<R::Owned>,
        guard: &'g Guard,
    ) -> Result<(Visit<'g>, bool), Restart> {
        let mut visit = self.read_root(guard)?;
        let mut has_fence = false;
        while !visit.node.is_leaf() {
            let node = visit.node;
            let slot = match end {
                Bound::Unbounded => R::count(node, &self.config).checked_sub(1),
                Bound::Included(k) => self.child_slot(node, R::probe(k)),
                // Keys strictly below k: the child left of the first separator >= k.
                Bound::Excluded(k) => R::search(node, &self.config, R::probe(k))
                    .pos
                    .checked_sub(1),
            };
            if let Some(i) = slot {
                match fence {
                    Some(key) => R::key_into(node, &self.config, i, key),
                    None => *fence = Some(R::key_at(node, &self.config, i)),
                }
                has_fence = true;
            }
            visit = Self::step(&visit, self.child_at(node, slot))?;
        }
        Ok((visit, has_fence))
    }
}
