//! Range scans, a page at a time, reading pages in place.
//!
//! Each page is read from one snapshot of its chain (one mapping-table read). A base page is
//! never written after it is published and stays allocated while the reader is pinned, so
//! its entries are handed out straight from the page, with no copy and no validation
//! ([`PageBatch::visit_published`]). Deltas on top of it (the Insert and Delete records not
//! yet consolidated, and a Split that moved the page's upper part right) are merged in as
//! the page is read. The chain's deltas start loading all at once (from the top delta's
//! directory: `Delta::start_loading_chain`); each delta is placed in the base page (where
//! a search for its key ends: the writer's walk found it, the delta's spot, and only a delta
//! without one is searched), the deltas are sorted by place and key (the newest state of
//! each key kept), and the base entries between two deltas are handed out as one run, the
//! base entry a delta replaces skipped. Nothing is built, and nothing is allocated but when
//! more than [`INLINE_DELTAS`] deltas sit on a page. A short read's first leaf (a scan's or
//! a cursor batch's, asking for at most `consolidate.rs`'s `SHORT_READ` keys) whose chain
//! holds `READ_CHAIN` deltas or more is consolidated first, once, as lookups do
//! ([`BwTree::leaf_for`]), so the reads after it find a bare base page; the leaves a long
//! read passes through, each read about once, are read as they are.
//!
//! The scan goes on from the page's high fence (ascending, to its right sibling) or below its
//! low fence (descending, from the root). Keys therefore never go backwards or repeat, and a
//! pair present throughout the scan is visited: the pages read cover the range without gaps.
//! [`super::cursor`] reads pages the same way, a batch at a time.

use std::ops::Bound;

use super::shim::{self, Guard};
use smallvec::SmallVec;

use super::consolidate::{consolidates_first_leaf, READ_CHAIN};
use super::delta::{Delta, Kind, Link, Target};
use super::key::Key;
use super::table::PageId;
use super::view::{level_of, Probe, Step};
use super::{sibling, BwTree, NO_SIBLING};
use crate::index::Direction;
use crate::node::batch::with_thread_scratch;
use crate::node::page::{fence_into, PageBatch, PageView};
use crate::node::slotted::VarKey;
use crate::node::NodeHeader;

/// Deltas of one page a scan sorts without allocating (a chain is consolidated past
/// [`super::DEFAULT_CHAIN_LENGTH`] deltas by default; writers racing the consolidation may
/// add a few more).
const INLINE_DELTAS: usize = 16;

/// Whether `key` is at or after `lower`.
#[inline]
pub(super) fn above(key: Key<'_>, lower: Bound<Key<'_>>) -> bool {
    match lower {
        Bound::Included(l) => key >= l,
        Bound::Excluded(l) => key > l,
        Bound::Unbounded => true,
    }
}

/// Whether `key` is at or before `upper`.
#[inline]
pub(super) fn below(key: Key<'_>, upper: Bound<Key<'_>>) -> bool {
    match upper {
        Bound::Included(u) => key <= u,
        Bound::Excluded(u) => key < u,
        Bound::Unbounded => true,
    }
}

/// The probe that finds the page a scan reads first: the page holding `near` (ascending:
/// the lower bound) or the keys just below it (descending: the upper bound).
#[inline]
pub(super) fn probe_for(near: Bound<Key<'_>>, ascending: bool) -> Probe<'_> {
    match (near, ascending) {
        (Bound::Included(k) | Bound::Excluded(k), true) => Probe::at(k),
        (Bound::Unbounded, true) => Probe::at(Key::MIN),
        (Bound::Included(k), false) => Probe::at(k),
        (Bound::Excluded(k), false) => Probe {
            key: Some(k),
            below: true,
        },
        (Bound::Unbounded, false) => Probe {
            key: None,
            below: false,
        },
    }
}

/// Buffers a page read reuses: the page's key batch, its continuation fence and the last
/// key handed out.
#[derive(Default)]
pub(super) struct PageScratch {
    pub batch: PageBatch,
    /// Where the scan goes on after the page: its high fence (ascending, the newest Split's
    /// key if it has one) or its low fence (descending), when [`PageRead::bounded`].
    pub fence: VarKey,
    /// The last key handed out, when the read stopped at its limit ([`PageRead::full`]).
    pub last: VarKey,
}

/// What one page read did.
pub(super) struct PageRead<'g> {
    /// Entries handed out.
    pub visited: usize,
    /// Whether it stopped at its limit (the last key handed out is in
    /// [`PageScratch::last`]).
    pub full: bool,
    /// Whether the page ends on the scan's side (its fence is in [`PageScratch::fence`]);
    /// `false` for the last page (ascending) or the first (descending), and not looked at
    /// (`false`) when the read is [`PageRead::full`]: the scan resumes on this page.
    pub bounded: bool,
    /// The right sibling (the page after the high fence), or [`NO_SIBLING`]; not looked at
    /// when the read is full.
    pub right: PageId,
    /// The base page read.
    pub base: &'g NodeHeader,
}

/// Where the last entry handed out came from.
#[derive(Clone, Copy)]
enum Last<'g> {
    None,
    Base,
    Delta(&'g Delta),
}

/// Copies `key` into `out` (with its tid when keys carry tids).
fn copy_key(key: Key<'_>, pairs: bool, out: &mut VarKey) {
    out.bytes.clear();
    out.bytes.extend_from_slice(key.bytes);
    out.tid = pairs.then_some(key.tid);
}

/// Whether the chain at `top` (read under the caller's pin) holds a Merge delta.
fn holds_merge(top: Link) -> bool {
    let mut link = top;
    loop {
        // SAFETY: `top` was read from the mapping table under the caller's pin; every record
        // of its chain outlives the pin.
        match unsafe { link.target() } {
            Target::Delta(d) if d.kind() == Kind::Merge => return true,
            // Only Inserts and Deletes below (the chain's deltas stay unread: a page read
            // starts loading them all at once).
            Target::Delta(d) if d.entries_over().is_some() => return false,
            Target::Delta(d) => link = d.next(),
            Target::Null | Target::Base(_) => return false,
        }
    }
}

impl BwTree {
    /// Visits up to `limit` entries within `(lower, upper)` in `direction` order; returns how
    /// many it visited.
    pub(super) fn scan(
        &self,
        lower: Bound<Key<'_>>,
        upper: Bound<Key<'_>>,
        direction: Direction,
        limit: usize,
        visit: &mut dyn FnMut(&[u8], u64),
    ) -> usize {
        if limit == 0 {
            return 0;
        }
        with_thread_scratch(|s: &mut (VarKey, PageScratch)| {
            self.scan_with(s, (lower, upper), direction, limit, visit)
        })
    }

    fn scan_with(
        &self,
        (from, scratch): &mut (VarKey, PageScratch),
        (lower, upper): (Bound<Key<'_>>, Bound<Key<'_>>),
        direction: Direction,
        limit: usize,
        visit: &mut dyn FnMut(&[u8], u64),
    ) -> usize {
        let ascending = direction == Direction::Ascending;
        let mut guard = shim::pin();
        let mut count = 0;
        // Whether the scan has moved past its first page: its near bound is then `from`.
        let mut moved = false;
        // The page to read next, when known without a descent (an ascending scan's right
        // sibling).
        let mut next = None;
        loop {
            let near = match (moved, ascending) {
                (false, true) => lower,
                (false, false) => upper,
                (true, true) => Bound::Included(Key::of(from)),
                (true, false) => Bound::Excluded(Key::of(from)),
            };
            let probe = probe_for(near, ascending);
            if probe.below && probe.key == Some(Key::MIN) {
                // Nothing sorts below the smallest key.
                return count;
            }
            let id = next
                .take()
                .unwrap_or_else(|| self.descend(probe, 0, false, &guard).0);
            // A short scan's first page is consolidated if need be (see `SHORT_READ`); a long
            // scan passes through its pages, the first among them.
            let first = !moved && consolidates_first_leaf(limit);
            let Some((_, top)) = self.leaf_for(id, probe, first, &guard) else {
                continue;
            };
            let bounds = if ascending {
                (near, upper)
            } else {
                (lower, near)
            };
            let Some(read) = self.read_page(top, bounds, ascending, limit - count, scratch, visit)
            else {
                continue;
            };
            count += read.visited;
            if read.full || !read.bounded {
                return count;
            }
            let fence = Key::of(&scratch.fence);
            if (ascending && !below(fence, upper)) || (!ascending && !above(fence, lower)) {
                return count;
            }
            std::mem::swap(from, &mut scratch.fence);
            moved = true;
            next = (ascending && read.right != NO_SIBLING).then_some(read.right);
            // Nothing read is held across pages: let the epoch advance on long scans.
            guard.repin();
        }
    }

    /// The leaf that covers `probe`, starting at page `id` and moving right along the level
    /// (B-link); its id and the chain top read. `None` when `id` is not a leaf (the root
    /// grew), lies right of the probe (a stale route) or is being merged away (after helping
    /// the merge finish): the caller descends again. `consolidate`: a chain of `READ_CHAIN`
    /// deltas or more is consolidated first (a short read starts at this leaf: see
    /// `consolidate.rs`'s `SHORT_READ`).
    pub(super) fn leaf_for(
        &self,
        mut id: PageId,
        probe: Probe<'_>,
        consolidate: bool,
        guard: &Guard,
    ) -> Option<(PageId, Link)> {
        // Whether this call has consolidated a chain of `READ_CHAIN` deltas or more.
        let mut consolidated = false;
        loop {
            let top = self.table.get(id);
            // SAFETY: read from the mapping table under `guard`.
            if unsafe { level_of(top) } != Some(0) {
                return None;
            }
            match self.covers(top, probe) {
                // The page absorbed its right sibling, whose chain hangs off a Merge delta:
                // consolidate it, so that it reads as one page (reads walk one chain), and
                // read it again.
                Step::Here(..) if holds_merge(top) => {
                    self.consolidate(id, top, guard);
                }
                // A chain of `READ_CHAIN` deltas or more is consolidated once, as a lookup
                // that walked it would (`consolidate_read`: no retry if another thread
                // changes the page first), and read again: its entries are then handed out
                // straight from the base page, without gathering and sorting the deltas,
                // by this read and the ones after it.
                // SAFETY: read from the mapping table under `guard`.
                Step::Here(..)
                    if consolidate && !consolidated && unsafe { top.depth() } >= READ_CHAIN =>
                {
                    consolidated = true;
                    self.consolidate_read(id, top, guard);
                }
                Step::Here(..) => return Some((id, top)),
                Step::Right(right, _) => id = right,
                Step::Left(remove) => {
                    self.help_remove(remove, guard);
                    return None;
                }
                Step::Child(_) | Step::Restart => return None,
            }
        }
    }

    /// Reads the leaf chain at `top` (read under the caller's pin, covering the scan's near
    /// bound) and hands out up to `limit` (at least 1) of its entries within `(lower, upper)`,
    /// ascending or descending, straight from the base page with the deltas merged in (see
    /// the module docs). `None` for a null chain.
    pub(super) fn read_page<'g>(
        &self,
        top: Link,
        (lower, upper): (Bound<Key<'_>>, Bound<Key<'_>>),
        ascending: bool,
        limit: usize,
        scratch: &mut PageScratch,
        visit: &mut dyn FnMut(&[u8], u64),
    ) -> Option<PageRead<'g>> {
        // The page's Insert and Delete deltas, newest first, each with its place in the base
        // page (filled in below).
        let mut deltas: SmallVec<[(usize, bool, &'g Delta); INLINE_DELTAS]> = SmallVec::new();
        let mut split: Option<&'g Delta> = None;
        let mut link = top;
        // SAFETY: as below.
        unsafe { top.start_loading_chain() };
        let base = loop {
            // SAFETY: `top` was read from the mapping table under the caller's pin; every
            // record of its chain outlives the pin.
            match unsafe { link.target::<'g>() } {
                Target::Null => return None,
                Target::Delta(d) => {
                    match d.kind() {
                        // The newest split is the page's end (older ones end further right).
                        Kind::Split if split.is_none() => split = Some(d),
                        Kind::Insert | Kind::Delete => deltas.push((0, false, d)),
                        _ => {}
                    }
                    link = d.next();
                }
                Target::Base(node) => break node,
            }
        };
        let (config, pairs) = (&self.config, self.pairs);
        // The page's view is built once, its searches inlined (see `Page::search_inline`).
        let page = PageView::of(base, config);
        let search = |key: Key<'_>| page.search_inline(key.probe(pairs));
        // Base entries `start..end` are in range (and below the split, if any).
        let count = page.count();
        let start = match lower {
            Bound::Included(k) => search(k).pos,
            Bound::Excluded(k) => {
                let at = search(k);
                at.pos + usize::from(at.found)
            }
            Bound::Unbounded => 0,
        };
        let mut end = match upper {
            Bound::Included(k) => {
                let at = search(k);
                at.pos + usize::from(at.found)
            }
            Bound::Excluded(k) => search(k).pos,
            Bound::Unbounded => count,
        }
        .min(count);
        if let Some(s) = split {
            end = end.min(search(s.key()).pos);
        }
        let end = end.max(start);
        if ascending && split.is_none() && end == count && end - start + deltas.len() < limit {
            // The scan goes on into the right sibling: its mapping-table entry and (through
            // that) its header and mid-keys start loading now, while this page's entries are
            // handed out, instead of after them.
            let right = sibling(base);
            if right != NO_SIBLING {
                self.table.start_loading(right);
            }
        }
        if !deltas.is_empty() {
            deltas.retain(|(_, _, d)| {
                let key = d.key();
                above(key, lower) && below(key, upper) && split.is_none_or(|s| key < s.key())
            });
            // Each delta's place, `(pos, found)` as a search of the base page for its key
            // returns: the writer's, from its walk (the delta's spot), when known, else
            // searched here.
            for (pos, found, d) in deltas.iter_mut() {
                let searched = || {
                    let at = search(d.key());
                    (at.pos, at.found)
                };
                (*pos, *found) = d.spot().get().unwrap_or_else(searched);
                debug_assert_eq!((*pos, *found), searched(), "a delta's spot is its search's");
            }
            // In key order: places order keys as the base's entries do (a key found at `pos`
            // after the absent ones that would go there), and two absent keys of one place
            // by their bytes. A stable sort keeps the newest of a key first.
            deltas.sort_by(|a, b| {
                (2 * a.0 + usize::from(a.1))
                    .cmp(&(2 * b.0 + usize::from(b.1)))
                    .then_with(|| a.2.key().order(b.2.key()))
            });
            deltas.dedup_by(|later, first| later.2.key().same(first.2.key()));
        }
        let mut visited = 0;
        let mut last = Last::None;
        let batch = &mut scratch.batch;
        let mut base_run = |(from, to): (usize, usize),
                            visited: &mut usize,
                            last: &mut Last<'g>,
                            visit: &mut dyn FnMut(&[u8], u64)| {
            // At most the entries left to the limit, nearest the scan's start.
            let left = limit - *visited;
            let (from, to) = if ascending {
                (from, to.min(from.saturating_add(left)))
            } else {
                (from.max(to.saturating_sub(left)), to)
            };
            if from < to {
                *visited += batch.visit_published(base, config, (from, to), !ascending, |k, v| {
                    visit(&k.bytes, v)
                });
                *last = Last::Base;
            }
        };
        // A delta's own entry, between the base runs below and above its key (a delete only
        // hides the base entry it matches).
        let delta_entry = |d: &'g Delta,
                           visited: &mut usize,
                           last: &mut Last<'g>,
                           visit: &mut dyn FnMut(&[u8], u64)| {
            if d.kind() == Kind::Insert {
                visit(d.key().bytes, d.value());
                *visited += 1;
                *last = Last::Delta(d);
            }
        };
        if ascending {
            let mut at = start;
            for &(place, found, d) in deltas.iter() {
                if visited == limit {
                    break;
                }
                let pos = place.clamp(at, end);
                base_run((at, pos), &mut visited, &mut last, visit);
                if visited == limit {
                    break;
                }
                delta_entry(d, &mut visited, &mut last, visit);
                at = (pos + usize::from(found && place == pos)).min(end);
            }
            if visited < limit {
                base_run((at, end), &mut visited, &mut last, visit);
            }
        } else {
            let mut at = end;
            for &(place, found, d) in deltas.iter().rev() {
                if visited == limit {
                    break;
                }
                let pos = place.clamp(start, at);
                let after = (pos + usize::from(found && place == pos)).min(at);
                base_run((after, at), &mut visited, &mut last, visit);
                if visited == limit {
                    break;
                }
                delta_entry(d, &mut visited, &mut last, visit);
                at = pos;
            }
            if visited < limit {
                base_run((start, at), &mut visited, &mut last, visit);
            }
        }
        let full = visited == limit;
        if full {
            match last {
                Last::Delta(d) => copy_key(d.key(), pairs, &mut scratch.last),
                Last::Base => {
                    if let Some(key) = crate::node::batch::LeafBatch::last_key(&scratch.batch) {
                        scratch.last.bytes.clear();
                        scratch.last.bytes.extend_from_slice(&key.bytes);
                        scratch.last.tid = key.tid;
                    }
                }
                Last::None => {}
            }
        }
        let (bounded, right) = if full {
            (false, NO_SIBLING)
        } else if ascending {
            match split {
                Some(s) => {
                    copy_key(s.key(), pairs, &mut scratch.fence);
                    (true, s.value())
                }
                None => (
                    fence_into(base, config, false, &mut scratch.fence),
                    sibling(base),
                ),
            }
        } else {
            (
                fence_into(base, config, true, &mut scratch.fence),
                NO_SIBLING,
            )
        };
        Some(PageRead {
            visited,
            full,
            bounded,
            right,
            base,
        })
    }

    /// Descends from the root to the leaf covering `probe`: its id and chain top.
    /// `consolidate`: as [`Self::leaf_for`]'s.
    pub(super) fn find_leaf(
        &self,
        probe: Probe<'_>,
        consolidate: bool,
        guard: &Guard,
    ) -> (PageId, Link) {
        loop {
            let id = self.descend(probe, 0, false, guard).0;
            if let Some(found) = self.leaf_for(id, probe, consolidate, guard) {
                return found;
            }
        }
    }
}
