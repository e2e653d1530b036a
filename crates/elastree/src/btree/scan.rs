//! Range scans, ascending along the leaf chain and descending by re-descents.
//!
//! A scan hands out the qualifying entries of one leaf through its batch
//! ([`NodeRepr::Batch`]: each representation reads in its own way), which validates the
//! leaf's version before it hands out an entry, so every visited pair was present at the
//! version the leaf was read at. After a failed validation the scan restarts from the root
//! at the last key it returned (exclusive), so keys never repeat or go backwards. Where a leaf's qualifying entries end
//! is found with one search per bound, not a comparison per key.
//!
//! Each thread keeps its batch and the scan's resume keys for variable-length keys from scan
//! to scan ([`with_thread_scratch`]), so a scan allocates nothing once they have grown.

use std::ops::Bound;

use crossbeam_epoch::{self as epoch, Guard};

use super::policy::LeafPolicy;
use super::{Tree, Visit};
use crate::node::batch::{with_thread_scratch, LeafBatch, ScanLeaf};
use crate::node::{NodeHeader, NodeRepr};
use crate::sync::Restart;

/// What one scan keeps besides the batch: the key it resumes after (the last one returned,
/// or a descending scan's fence), reused from scan to scan.
struct ScanState<R: NodeRepr> {
    batch: R::Batch,
    resume: Option<R::Owned>,
    fence: Option<R::Owned>,
}

impl<R: NodeRepr> Default for ScanState<R> {
    fn default() -> Self {
        Self {
            batch: R::Batch::default(),
            resume: None,
            fence: None,
        }
    }
}

/// Runs `f` with the thread's scan state when keys have buffers worth keeping (variable-length
/// keys), with a fresh one on the stack otherwise (integer keys: nothing to keep).
#[inline]
fn with_scan_state<R: NodeRepr, T>(f: impl FnOnce(&mut ScanState<R>) -> T) -> T {
    if std::mem::needs_drop::<R::Owned>() {
        with_thread_scratch(f)
    } else {
        f(&mut ScanState::default())
    }
}

/// The position of the first entry of `node` at or after `bound` (a lower bound).
fn first_at<R: NodeRepr>(node: &NodeHeader, config: &R::Config, bound: Bound<&R::Owned>) -> usize {
    match bound {
        Bound::Unbounded => 0,
        Bound::Included(k) => R::search(node, config, R::probe(k)).pos,
        Bound::Excluded(k) => {
            let hit = R::search(node, config, R::probe(k));
            hit.pos + usize::from(hit.found)
        }
    }
}

/// The position after the last entry of `node` at or before `bound` (an upper bound), at
/// most `count`.
fn end_at<R: NodeRepr>(
    node: &NodeHeader,
    config: &R::Config,
    bound: Bound<&R::Owned>,
    count: usize,
) -> usize {
    match bound {
        Bound::Unbounded => count,
        Bound::Included(k) => {
            let hit = R::search(node, config, R::probe(k));
            hit.pos + usize::from(hit.found)
        }
        Bound::Excluded(k) => R::search(node, config, R::probe(k)).pos,
    }
    .min(count)
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
        with_scan_state(|state: &mut ScanState<R>| {
            self.scan_ascending_with(state, (lower, upper), limit, visit)
        })
    }

    fn scan_ascending_with(
        &self,
        state: &mut ScanState<R>,
        (lower, upper): (Bound<&R::Owned>, Bound<&R::Owned>),
        limit: usize,
        visit: &mut dyn FnMut(&R::Owned, u64),
    ) -> usize {
        let guard = &epoch::pin();
        let config = &self.config;
        let mut visited = 0;
        // Whether `state.resume` holds the last key returned (the scan resumes after it).
        let mut resumed = false;
        'restart: while visited < limit {
            let start_bound = match (&state.resume, resumed) {
                (Some(key), true) => Bound::Excluded(key),
                _ => lower,
            };
            let Ok(mut leaf) = self.descend_to_start(start_bound, guard) else {
                continue 'restart;
            };
            let mut start = first_at::<R>(leaf.node, config, start_bound);
            loop {
                let count = R::count(leaf.node, config);
                let end = end_at::<R>(leaf.node, config, upper, count);
                let take = end.saturating_sub(start).min(limit - visited);
                R::prefetch_keys(leaf.node, config, start, start + take);
                // Read before the batch's validations, which cover it.
                let next = leaf.node.link();
                let handed = state.batch.visit_leaf(
                    leaf.node,
                    config,
                    (start, start + take),
                    false,
                    (&leaf.read, visit),
                );
                let handed = match handed {
                    Ok(n) => n,
                    Err(n) => {
                        visited += n;
                        remember_last::<R>(&state.batch, &mut state.resume, &mut resumed);
                        continue 'restart;
                    }
                };
                visited += handed;
                if end < count || visited == limit || next.is_null() {
                    return visited;
                }
                remember_last::<R>(&state.batch, &mut state.resume, &mut resumed);
                // SAFETY: `next` was read from the leaf at a validated version, so it is a
                // published leaf, kept allocated by the epoch guard.
                let next: &NodeHeader = unsafe { &*next };
                match next.lock.read_begin() {
                    Ok(read) => leaf = Visit { node: next, read },
                    Err(Restart) => continue 'restart,
                }
                // A right sibling holds only keys above every key of the leaf before it
                // (entries move right only by splits, into a new node between the two):
                // all of its entries follow the ones returned.
                start = 0;
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
        with_scan_state(|state: &mut ScanState<R>| {
            self.scan_descending_with(state, (lower, upper), limit, visit)
        })
    }

    fn scan_descending_with(
        &self,
        state: &mut ScanState<R>,
        (lower, upper): (Bound<&R::Owned>, Bound<&R::Owned>),
        limit: usize,
        visit: &mut dyn FnMut(&R::Owned, u64),
    ) -> usize {
        let guard = &epoch::pin();
        let config = &self.config;
        let mut visited = 0;
        // Whether `state.resume` holds the fence the scan continues below.
        let mut resumed = false;
        while visited < limit {
            let end_bound = match (&state.resume, resumed) {
                (Some(key), true) => Bound::Excluded(key),
                _ => upper,
            };
            let Ok((leaf, has_fence)) = self.descend_below_into(end_bound, &mut state.fence, guard)
            else {
                continue;
            };
            let count = R::count(leaf.node, config);
            let stop = end_at::<R>(leaf.node, config, end_bound, count);
            let low = first_at::<R>(leaf.node, config, lower).min(stop);
            let begin = low.max(stop.saturating_sub(limit - visited));
            R::prefetch_keys(leaf.node, config, begin, stop);
            let handed =
                state
                    .batch
                    .visit_leaf(leaf.node, config, (begin, stop), true, (&leaf.read, visit));
            match handed {
                Ok(n) => visited += n,
                Err(n) => {
                    visited += n;
                    remember_last::<R>(&state.batch, &mut state.resume, &mut resumed);
                    continue;
                }
            }
            // The lower bound falls in this leaf (or at its start), or the limit is reached.
            if low > 0 || visited == limit {
                return visited;
            }
            // Everything in this leaf at or above its low fence has been seen; go below it.
            match state.fence.as_ref().filter(|_| has_fence) {
                None => return visited,
                Some(fence) => {
                    if !below_lower::<R>(config, fence, lower) {
                        return visited;
                    }
                    match &mut state.resume {
                        Some(key) => key.clone_from(fence),
                        slot => *slot = Some(fence.clone()),
                    }
                    resumed = true;
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

/// Makes the key `batch` handed out last (if it handed any out) the one a restarted scan
/// resumes after, reusing the resume key's buffer.
#[inline]
fn remember_last<R: NodeRepr>(batch: &R::Batch, resume: &mut Option<R::Owned>, resumed: &mut bool) {
    if let Some(last) = batch.last_key() {
        match resume {
            Some(key) => key.clone_from(last),
            slot => *slot = Some(last.clone()),
        }
        *resumed = true;
    }
}

/// Whether keys below `fence` can still be within a descending scan's `lower` bound.
fn below_lower<R: NodeRepr>(config: &R::Config, fence: &R::Owned, lower: Bound<&R::Owned>) -> bool {
    use std::cmp::Ordering::*;
    match lower {
        Bound::Unbounded => true,
        // Keys below the fence, and at least `l` (or above it): some exist only if the
        // fence is above `l`.
        Bound::Included(l) | Bound::Excluded(l) => R::compare(config, fence, l) == Greater,
    }
}
