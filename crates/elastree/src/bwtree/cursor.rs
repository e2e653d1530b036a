//! Cursors (the paper's section V): a range read a batch at a time, about a page per batch,
//! holding no epoch pin between batches.
//!
//! # Physiological cursors
//!
//! A [`BwCursor`] keeps the logical part of its position, the key where the rest of its range
//! starts (an ascending cursor's lower bound, a descending one's upper bound), and a physical
//! hint: the logical id of the page expected to hold that key, with that page's low fence as
//! it was when the hint was taken. After a batch that stopped inside a page the hint is that
//! page; after an ascending batch that finished a page it is the right sibling, whose low
//! fence is the finished page's high fence (the cursor key itself, as in the paper).
//!
//! A batch reads the hinted id from the mapping table and uses the page only if it is still
//! a live leaf whose low fence equals the remembered one; then the usual walk of its chain
//! checks that it covers the cursor key (moving right through a split, as any B-link read
//! does). A chain of Inserts and Deletes alone needs less: the cursor key is not below the
//! low fence (it was handed out from the page, or is where the page starts), so only the
//! high fence is compared, with no walk of the chain. Cheaper still, a hint carries the range
//! stamp (see `stamp_of`) of the hinted page's base page, read when the hint is taken (the
//! page the batch stopped inside, or the right sibling of the page it finished, read under
//! the batch's pin): while that base (or a patch of it, which keeps the stamp) is still
//! there, the page has the fences it had, the cursor key lies within them, and neither fence
//! is read (two out-of-line compares, about 250 instructions, and the miss on the bin line
//! that holds the fences). Anything else (a null entry, an inner page, another low fence)
//! sends the batch down from the root by key. Ids are recycled through epochs, and a cursor
//! holds no pin between batches, so the id alone proves nothing: a page under a recycled id
//! is accepted only if it carries the remembered stamp, or starts exactly where the
//! remembered page started and covers the key, either of which makes it the page a descent
//! would have found.
//!
//! A descending cursor that finished a page needs the page to its left, which the tree does
//! not link to: its next batch descends (the paper: "when we have descending order cursors,
//! that would not be the case").
//!
//! # Prefix cursors
//!
//! A [`PrefixCursor`] remembers the smallest sub-tree holding every key with its prefix: the
//! deepest page on the path to the prefix whose fences enclose the prefix's whole key range
//! (its id, level and fences). Lookups and cursors with that prefix start their descent
//! there. The sub-tree is validated like a physiological hint (same level, same low fence)
//! and must still enclose the whole prefix (a split may have moved part of it to a sibling);
//! otherwise the prefix cursor seeks it again from the root.

use std::cmp::Ordering as CmpOrdering;
use std::ops::Bound;

use super::shim::{self, Guard};

use super::consolidate::{consolidates_first_leaf, READ_CHAIN};
use super::delta::{Kind, Link, Target};
use super::key::Key;
use super::scan::{above, below, probe_for, PageScratch};
use super::table::PageId;
use super::view::{base_of, level_of, Probe, Step};
use super::{stamp_of, BwTree, NO_SIBLING, ROOT};
use crate::index::{pair_bound, Direction};
use crate::node::page::{fence_cmp, fence_into, PageView};
use crate::node::slotted::VarKey;
use crate::node::NodeHeader;
use crate::Error;

/// What a cursor has done, for tests and measurements.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CursorStats {
    /// Batches that handed out at least one entry.
    pub batches: u64,
    /// Pages found by a descent from the root.
    pub descents: u64,
    /// Pages found through a hint that passed validation (no descent from the root).
    pub hinted: u64,
    /// Hints that failed validation (the page was then found from the root).
    pub rejected: u64,
}

/// A remembered page: its id, its level and its low fence when it was remembered, and the
/// range stamp of the base page read then, if known.
#[derive(Default)]
struct Hint {
    id: PageId,
    level: u16,
    /// The base page's range stamp (see `stamp_of`); 0: not known (the fence is compared).
    stamp: u64,
    /// Whether the page has a low fence (`low` holds it); `false`: unbounded below.
    bounded: bool,
    low: VarKey,
}

impl Hint {
    fn low(&self) -> Option<Key<'_>> {
        self.bounded.then(|| Key::of(&self.low))
    }
}

/// Which bound a cursor key is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Unbounded,
    Included,
    Excluded,
}

fn bound_of(side: Side, key: &VarKey) -> Bound<Key<'_>> {
    match side {
        Side::Unbounded => Bound::Unbounded,
        Side::Included => Bound::Included(Key::of(key)),
        Side::Excluded => Bound::Excluded(Key::of(key)),
    }
}

fn owned_bound(bound: Bound<Key<'_>>, pairs: bool) -> (Side, VarKey) {
    match bound {
        Bound::Unbounded => (Side::Unbounded, VarKey::default()),
        Bound::Included(k) => (Side::Included, k.to_owned(pairs)),
        Bound::Excluded(k) => (Side::Excluded, k.to_owned(pairs)),
    }
}

/// A range of a Bw-tree read a batch at a time (see the module docs). Made by
/// [`BwTreeIndex::cursor`](super::BwTreeIndex::cursor) or [`PrefixCursor::cursor`]; holds no
/// epoch pin between batches, so writers and the collector never wait for it.
pub struct BwCursor<'t> {
    tree: &'t BwTree,
    ascending: bool,
    /// Where the rest of the range starts (ascending: its lower bound; descending: its upper).
    near: (Side, VarKey),
    /// Where the range ends.
    far: (Side, VarKey),
    /// The page expected to hold `near`, if known.
    hint: Option<Hint>,
    /// The key buffer of the last hint used, for the next hint (so that remembering a page
    /// allocates nothing once the buffer has grown).
    spare_low: VarKey,
    /// Whether hints are used (`false`: a logical cursor, every batch descends).
    physiological: bool,
    done: bool,
    scratch: PageScratch,
    stats: CursorStats,
}

impl<'t> BwCursor<'t> {
    fn new(
        tree: &'t BwTree,
        (lower, upper): (Bound<Key<'_>>, Bound<Key<'_>>),
        direction: Direction,
        hint: Option<Hint>,
    ) -> Self {
        let ascending = direction == Direction::Ascending;
        let (lower, upper) = (
            owned_bound(lower, tree.pairs),
            owned_bound(upper, tree.pairs),
        );
        let (near, far) = if ascending {
            (lower, upper)
        } else {
            (upper, lower)
        };
        Self {
            tree,
            ascending,
            near,
            far,
            hint,
            spare_low: VarKey::default(),
            physiological: true,
            done: false,
            scratch: PageScratch::default(),
            stats: CursorStats::default(),
        }
    }

    /// Makes the cursor logical only (`false`): every batch then descends from the root by
    /// the cursor key, as a cursor without the physical part would. `true` (the default)
    /// uses the remembered page when it passes validation.
    pub fn set_physiological(&mut self, on: bool) {
        self.physiological = on;
        if !on {
            self.hint = None;
        }
    }

    /// What the cursor has done so far.
    pub fn stats(&self) -> CursorStats {
        self.stats
    }

    /// Whether the range has been read to its end (every later batch is empty).
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Hands the next entries of the range to `visit` in the cursor's direction: at most
    /// `limit`, and none past the end of the first page that holds any (a batch is at most a
    /// page; `usize::MAX` asks for the page's whole rest). Returns how many it handed out;
    /// 0 only when the range is exhausted. Keys continue strictly after (ascending) or before
    /// (descending) the last key of the previous batch; a pair present from this call's start
    /// to its end, in the rest of the range, is handed out unless the limit stops the batch
    /// first.
    pub fn next_batch(&mut self, limit: usize, visit: &mut dyn FnMut(&[u8], u64)) -> usize {
        if self.done || limit == 0 {
            return 0;
        }
        let tree = self.tree;
        let ascending = self.ascending;
        let mut guard = shim::pin();
        // A short batch consolidates the leaf it reads (see `consolidate.rs`'s `SHORT_READ`).
        let consolidate = consolidates_first_leaf(limit);
        loop {
            let near = bound_of(self.near.0, &self.near.1);
            let far = bound_of(self.far.0, &self.far.1);
            let probe = probe_for(near, ascending);
            if probe.below && probe.key == Some(Key::MIN) {
                self.done = true;
                return 0;
            }
            // The leaf this read's hint named and validated, and whether it has a low fence
            // (which `spare_low` then holds).
            let mut validated = None;
            let hinted = match self.hint.take() {
                Some(hint) => {
                    let found = tree.revisit(&hint, probe, consolidate, &guard);
                    if found.is_some() {
                        self.stats.hinted += 1;
                        if hint.level == 0 {
                            validated = Some((hint.id, hint.bounded));
                        }
                    } else {
                        self.stats.rejected += 1;
                    }
                    self.spare_low = hint.low;
                    found
                }
                None => None,
            };
            let (id, top) = hinted.unwrap_or_else(|| {
                self.stats.descents += 1;
                tree.find_leaf(probe, consolidate, &guard)
            });
            let bounds = if ascending { (near, far) } else { (far, near) };
            let Some(read) =
                tree.read_page(top, bounds, ascending, limit, &mut self.scratch, visit)
            else {
                continue;
            };
            if read.visited > 0 {
                self.stats.batches += 1;
            }
            if read.full {
                // Resume after the last key handed out, on this page.
                if self.physiological {
                    let mut hint = Hint {
                        id,
                        level: 0,
                        stamp: stamp_of(read.base),
                        bounded: false,
                        low: std::mem::take(&mut self.spare_low),
                    };
                    hint.bounded = match validated {
                        // The leaf the hint named: a page's low fence never changes while its
                        // id names it, and the buffer holds it already.
                        Some((hinted, bounded)) if hinted == id => bounded,
                        _ => fence_into(read.base, &tree.config, true, &mut hint.low),
                    };
                    // A descending batch that ended at the page's low fence has finished the
                    // page: the next one needs the page to its left, found from the root.
                    let finished = !ascending && hint.bounded && hint.low == self.scratch.last;
                    if finished {
                        self.spare_low = hint.low;
                    } else {
                        self.hint = Some(hint);
                    }
                }
                std::mem::swap(&mut self.near.1, &mut self.scratch.last);
                self.near.0 = Side::Excluded;
                return read.visited;
            }
            let fence = Key::of(&self.scratch.fence);
            if !read.bounded
                || (ascending && !below(fence, far))
                || (!ascending && !above(fence, far))
            {
                self.done = true;
                return read.visited;
            }
            if ascending && self.physiological && read.right != NO_SIBLING {
                // The right sibling starts at this page's high fence. Its base page, read
                // under the pin this read held, names its range by its stamp: an id is
                // handed out again only after every thread pinned when it was retired has
                // unpinned, so the page under `read.right` now is the one this page's chain
                // named (or none: stamp 0), which starts at the fence (a page is removed
                // only by a merge into its left sibling, which keeps the removed page's
                // base as it was).
                let stamp = base_of(tree.table.get(read.right)).map_or(0, stamp_of);
                let mut hint = Hint {
                    id: read.right,
                    level: 0,
                    stamp,
                    bounded: true,
                    low: std::mem::take(&mut self.spare_low),
                };
                hint.low.bytes.clear();
                hint.low.bytes.extend_from_slice(&self.scratch.fence.bytes);
                hint.low.tid = self.scratch.fence.tid;
                self.hint = Some(hint);
            }
            std::mem::swap(&mut self.near.1, &mut self.scratch.fence);
            self.near.0 = if ascending {
                Side::Included
            } else {
                Side::Excluded
            };
            if read.visited > 0 {
                return read.visited;
            }
            // A page with nothing in range: go on to the next one in this batch.
            guard.repin();
        }
    }
}

impl BwTree {
    /// The leaf covering `probe` found from the remembered page `hint`, if the page passes
    /// validation (see the module docs): its id and chain top. `None`: descend from the root.
    /// `consolidate`: as [`Self::leaf_for`]'s.
    fn revisit(
        &self,
        hint: &Hint,
        probe: Probe<'_>,
        consolidate: bool,
        guard: &Guard,
    ) -> Option<(PageId, Link)> {
        let top = self.table.get(hint.id);
        let base = base_of(top)?;
        if base.level() != hint.level {
            return None;
        }
        // The base page the hint was taken from, or a patch of it: the fences it had then,
        // around the probe (the cursor key was handed out from the page, or is where the page
        // starts). Otherwise the page must start where the remembered one started.
        let stamped = hint.level == 0 && hint.stamp != 0 && stamp_of(base) == hint.stamp;
        if !stamped && !self.starts_at(base, hint.low()) {
            return None;
        }
        if hint.level == 0 {
            // A chain of Inserts and Deletes over that base page: the probe is not below its
            // low fence, so the page holds the probe unless it lies past the high fence (not
            // even that when stamped). Nothing else is read: the chain has no split, merge or
            // removal to follow, and needs no consolidation here.
            // SAFETY: read from the mapping table under `guard`.
            let (entries_only, depth) = unsafe { (top.entries_only(), top.depth()) };
            let bare_enough = !consolidate || depth < READ_CHAIN;
            if entries_only
                && bare_enough
                && (stamped || !probe.past_fence(&PageView::of(base, &self.config)))
            {
                return Some((hint.id, top));
            }
            // The page itself, or its right sibling when a split moved the key there.
            return self.leaf_for(hint.id, probe, consolidate, guard);
        }
        let leaf = self.descend_from(hint.id, probe)?;
        self.leaf_for(leaf, probe, consolidate, guard)
    }

    /// Whether base page `base`'s low fence is `low` (`None`: unbounded).
    fn starts_at(&self, base: &NodeHeader, low: Option<Key<'_>>) -> bool {
        match low {
            None => fence_cmp(base, &self.config, true, &[], 0).is_none(),
            Some(k) => {
                fence_cmp(base, &self.config, true, k.bytes, k.tid) == Some(CmpOrdering::Equal)
            }
        }
    }

    /// Routes `probe` down from page `id` to the leaf level (moving right along a level
    /// where a split moved the probe's range); the leaf's id, or `None` if a page on the way
    /// is gone or lies right of the probe.
    fn descend_from(&self, mut id: PageId, probe: Probe<'_>) -> Option<PageId> {
        loop {
            let top = self.table.get(id);
            // SAFETY: read from the mapping table under the caller's pin.
            if unsafe { level_of(top) }? == 0 {
                return Some(id);
            }
            match self.route(top, probe) {
                Step::Child(child) => id = child,
                Step::Right(right, _) => id = right,
                Step::Here(..) | Step::Restart | Step::Left(_) => return None,
            }
        }
    }
}

/// The smallest key after every key that starts with `prefix` (`None`: no such key, the
/// prefix is empty or all `0xff`).
fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let last = prefix.iter().rposition(|&b| b != 0xff)?;
    let mut end = prefix[..=last].to_vec();
    end[last] += 1;
    Some(end)
}

/// Whether every key with `prefix` is below a page's high fence `high` (bytes; `None`:
/// unbounded).
fn encloses_end(prefix: &[u8], high: Option<&[u8]>) -> bool {
    high.is_none_or(|h| h > prefix && !h.starts_with(prefix))
}

/// Whether the page whose chain is `top` (base `base`, read under the caller's pin) ends
/// after every key with `prefix`: its newest Split's key, or its base's high fence (read into
/// `scratch`). A removed page encloses nothing.
fn encloses(
    tree: &BwTree,
    prefix: &[u8],
    (top, base): (Link, &NodeHeader),
    scratch: &mut VarKey,
) -> bool {
    let mut link = top;
    loop {
        // SAFETY: read from the mapping table under the caller's pin; the chain outlives it.
        match unsafe { link.target() } {
            Target::Delta(d) if d.kind() == Kind::Split => {
                return encloses_end(prefix, Some(d.key().bytes));
            }
            // A page being merged away: its range goes to its left sibling.
            Target::Delta(d) if d.kind() == Kind::Remove => return false,
            Target::Delta(d) => link = d.next(),
            Target::Null | Target::Base(_) => break,
        }
    }
    let bounded = fence_into(base, &tree.config, false, scratch);
    encloses_end(prefix, bounded.then_some(&scratch.bytes[..]))
}

/// What a prefix cursor has done, for tests and measurements.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PrefixStats {
    /// Seeks of the sub-tree from the root (the first one included).
    pub seeks: u64,
    /// Uses of the remembered sub-tree that passed validation.
    pub reused: u64,
}

/// Keys that start with one prefix, read from the smallest sub-tree that holds them all
/// (see the module docs). Made by
/// [`BwTreeIndex::prefix_cursor`](super::BwTreeIndex::prefix_cursor); holds no epoch pin.
pub struct PrefixCursor<'t> {
    tree: &'t BwTree,
    prefix: Vec<u8>,
    /// The first key after the prefix's keys (`None`: unbounded).
    end: Option<Vec<u8>>,
    /// The remembered sub-tree root (a leaf when one leaf holds every key with the prefix).
    root: Hint,
    stats: PrefixStats,
    /// A fence read while validating.
    scratch: VarKey,
}

impl<'t> PrefixCursor<'t> {
    pub(super) fn new(tree: &'t BwTree, prefix: &[u8]) -> Self {
        let mut cursor = Self {
            tree,
            prefix: prefix.to_vec(),
            end: prefix_end(prefix),
            root: Hint::default(),
            stats: PrefixStats::default(),
            scratch: VarKey::default(),
        };
        cursor.seek(&shim::pin());
        cursor
    }

    /// The prefix.
    pub fn prefix(&self) -> &[u8] {
        &self.prefix
    }

    /// The remembered sub-tree root's logical id and level.
    pub fn subtree(&self) -> (u64, u16) {
        (self.root.id, self.root.level)
    }

    /// What the prefix cursor has done so far.
    pub fn stats(&self) -> PrefixStats {
        self.stats
    }

    /// The prefix's key range as bounds on tree keys.
    fn range(&self) -> (Bound<Key<'_>>, Bound<Key<'_>>) {
        (
            Bound::Included(Key {
                bytes: &self.prefix,
                tid: 0,
            }),
            self.end.as_deref().map_or(Bound::Unbounded, |end| {
                Bound::Excluded(Key { bytes: end, tid: 0 })
            }),
        )
    }

    /// A cursor over the keys with the prefix: all of them (`from` `None`), or those at or
    /// after `from` (ascending) or at or before it (descending). Its first page is found from
    /// the remembered sub-tree (validated first; sought again from the root if stale).
    pub fn cursor(
        &mut self,
        from: Option<&[u8]>,
        direction: Direction,
    ) -> Result<BwCursor<'t>, Error> {
        if let Some(from) = from {
            self.check(from)?;
        }
        self.refresh();
        let tree = self.tree;
        let pairs = tree.pairs;
        let at = |bytes, tid| Key {
            bytes,
            tid: if pairs { tid } else { 0 },
        };
        let (mut lower, mut upper) = self.range();
        match (from, direction) {
            (Some(from), Direction::Ascending) => {
                lower = pair_bound(Bound::Included(from), true, at);
            }
            (Some(from), Direction::Descending) => {
                upper = pair_bound(Bound::Included(from), false, at);
            }
            (None, _) => {}
        }
        let hint = Hint {
            id: self.root.id,
            level: self.root.level,
            stamp: 0,
            bounded: self.root.bounded,
            low: self.root.low.clone(),
        };
        Ok(BwCursor::new(tree, (lower, upper), direction, Some(hint)))
    }

    /// The value of `key` (which must start with the prefix; a non-unique index gives its
    /// smallest tid), looked up from the remembered sub-tree.
    pub fn get(&mut self, key: &[u8]) -> Result<Option<u64>, Error> {
        let mut cursor = self.cursor(Some(key), Direction::Ascending)?;
        let mut found = None;
        cursor.next_batch(1, &mut |k, v| {
            if k == key {
                found = Some(v);
            }
        });
        Ok(found)
    }

    fn check(&self, key: &[u8]) -> Result<(), Error> {
        if key.starts_with(&self.prefix) {
            Ok(())
        } else {
            Err(Error::InvalidConfig(format!(
                "the key {key:02x?} does not start with the prefix cursor's prefix {:02x?}",
                self.prefix
            )))
        }
    }

    /// Validates the remembered sub-tree; seeks it again from the root if it is stale.
    fn refresh(&mut self) {
        let guard = shim::pin();
        let top = self.tree.table.get(self.root.id);
        let valid = base_of(top).is_some_and(|base| {
            base.level() == self.root.level
                && self.tree.starts_at(base, self.root.low())
                && encloses(self.tree, &self.prefix, (top, base), &mut self.scratch)
        });
        if valid {
            self.stats.reused += 1;
        } else {
            self.seek(&guard);
        }
    }

    /// Finds the deepest page on the path to the prefix that encloses the prefix's range;
    /// `guard` keeps the pages read allocated.
    fn seek(&mut self, guard: &Guard) {
        self.stats.seeks += 1;
        let tree = self.tree;
        let probe = Probe::at(Key {
            bytes: &self.prefix,
            tid: 0,
        });
        'restart: loop {
            let mut id = ROOT;
            let mut best: Option<(PageId, u16)> = None;
            loop {
                let top = tree.table.get(id);
                // A page being merged away (reached through its left sibling's side link):
                // the merge goes first.
                // SAFETY: read from the mapping table under `guard`.
                if let Target::Delta(d) = unsafe { top.target::<'_>() } {
                    if d.kind() == Kind::Remove {
                        tree.help_remove(d, guard);
                        continue 'restart;
                    }
                }
                let Some(base) = base_of(top) else {
                    continue 'restart;
                };
                let level = base.level();
                let low_ok = !matches!(
                    fence_cmp(base, &tree.config, true, &self.prefix, 0),
                    Some(CmpOrdering::Greater)
                );
                if low_ok && encloses(tree, &self.prefix, (top, base), &mut self.scratch) {
                    best = Some((id, level));
                }
                if level == 0 {
                    break;
                }
                match tree.route(top, probe) {
                    Step::Child(child) => id = child,
                    Step::Right(right, _) => id = right,
                    // An inner page being merged away: the merge goes first.
                    Step::Left(remove) => {
                        tree.help_remove(remove, guard);
                        continue 'restart;
                    }
                    Step::Here(..) | Step::Restart => continue 'restart,
                }
            }
            let (id, level) = best.unwrap_or((ROOT, 0));
            let top = tree.table.get(id);
            let Some(base) = base_of(top) else {
                continue 'restart;
            };
            if base.level() != level {
                continue 'restart;
            }
            self.root.id = id;
            self.root.level = level;
            self.root.bounded = fence_into(base, &tree.config, true, &mut self.root.low);
            return;
        }
    }
}

impl BwTree {
    /// A cursor over `(lower, upper)` in `direction`.
    pub(super) fn cursor(
        &self,
        bounds: (Bound<Key<'_>>, Bound<Key<'_>>),
        direction: Direction,
    ) -> BwCursor<'_> {
        BwCursor::new(self, bounds, direction, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::page::MidWidth;
    use crate::node::page::PageConfig;

    /// A unique tree of 8-byte keys with pages of at most 4 entries.
    fn tiny() -> BwTree {
        let config = PageConfig::new((4, 4), (256, 256), 8, (false, true, MidWidth::Four));
        BwTree::new(config, false, 2)
    }

    fn put(tree: &BwTree, i: u64) {
        let bytes = i.to_be_bytes();
        tree.write(
            Key {
                bytes: &bytes,
                tid: 0,
            },
            &mut |_| (Some(Some(i)), ()),
        );
    }

    /// Every key from `cursor`'s next batches until it is done.
    fn rest(cursor: &mut BwCursor<'_>, limit: usize) -> Vec<u64> {
        let mut out = Vec::new();
        while cursor.next_batch(limit, &mut |k, _| {
            out.push(u64::from_be_bytes(k.try_into().unwrap()))
        }) > 0
        {}
        out
    }

    fn ascending(tree: &BwTree) -> BwCursor<'_> {
        tree.cursor((Bound::Unbounded, Bound::Unbounded), Direction::Ascending)
    }

    /// The range stamp of leaf `id`'s base page now.
    fn stamp_now(tree: &BwTree, id: PageId) -> u64 {
        let _guard = shim::pin();
        stamp_of(base_of(tree.table.get(id)).expect("a live leaf"))
    }

    /// Leaves' ids (a walk along the leaf level from the leftmost).
    fn leaves(tree: &BwTree) -> Vec<PageId> {
        let guard = shim::pin();
        let (mut id, _) = tree.find_leaf(Probe::at(Key::MIN), true, &guard);
        let mut ids = vec![id];
        loop {
            let top = tree.table.get(id);
            let mut link = top;
            let right = loop {
                // SAFETY: read under `guard`.
                match unsafe { link.target() } {
                    Target::Delta(d) if d.kind() == Kind::Split => break d.value(),
                    Target::Delta(d) => link = d.next(),
                    Target::Base(node) => break super::super::sibling(node),
                    Target::Null => unreachable!("a live leaf"),
                }
            };
            if right == NO_SIBLING {
                return ids;
            }
            ids.push(right);
            id = right;
        }
    }

    /// A hint naming another live leaf (as a recycled id would), an inner page, a null
    /// entry or an id never handed out is rejected by its low fence or level: the batch
    /// descends and reads the right keys.
    #[test]
    fn stale_hints_are_rejected_and_the_batch_descends() {
        let tree = tiny();
        for i in 0..200 {
            put(&tree, i);
        }
        let ids = leaves(&tree);
        assert!(ids.len() > 20);
        let bogus = [
            ids[ids.len() / 2],
            ids[ids.len() - 1],
            ROOT,
            tree.table.end() + 5,
        ];
        for (n, &wrong) in bogus.iter().enumerate() {
            let mut cursor = ascending(&tree);
            let mut first = Vec::new();
            cursor.next_batch(2, &mut |k, _| {
                first.push(u64::from_be_bytes(k.try_into().unwrap()))
            });
            assert_eq!(first, [0, 1]);
            let hint = cursor.hint.as_mut().expect("a hint after a batch");
            hint.id = wrong;
            let got = rest(&mut cursor, 5);
            assert_eq!(got, (2..200).collect::<Vec<_>>(), "bogus hint {n}");
            let stats = cursor.stats();
            assert_eq!(stats.rejected, 1, "bogus hint {n}: {stats:?}");
            assert_eq!(stats.descents, 2, "bogus hint {n}: {stats:?}");
        }
    }

    /// The remembered page splits (and is consolidated) between batches: the hint still
    /// passes (its low fence did not move) and the walk moves right to the keys that moved;
    /// the root grows while a cursor remembers the root leaf (id 0): rejected by level.
    #[test]
    fn hints_survive_splits_and_reject_a_grown_root() {
        let tree = tiny();
        for i in [0, 100, 200] {
            put(&tree, i);
        }
        let mut cursor = ascending(&tree);
        let mut got = Vec::new();
        cursor.next_batch(1, &mut |k, _| {
            got.push(u64::from_be_bytes(k.try_into().unwrap()))
        });
        assert_eq!(cursor.hint.as_ref().map(|h| h.id), Some(ROOT));
        // The root leaf splits: the root becomes an inner page.
        for i in 1..60 {
            put(&tree, i * 3);
        }
        got.extend(rest(&mut cursor, 2));
        let mut want: Vec<u64> = (0..60).map(|i| i * 3).chain([100, 200]).collect();
        want.sort_unstable();
        want.dedup();
        assert_eq!(got, want);
        assert_eq!(cursor.stats().rejected, 1, "{:?}", cursor.stats());

        // A leaf that splits between two batches keeps its low fence.
        let mut cursor = ascending(&tree);
        let mut got = Vec::new();
        cursor.next_batch(1, &mut |k, _| {
            got.push(u64::from_be_bytes(k.try_into().unwrap()))
        });
        let hinted = cursor.hint.as_ref().unwrap().id;
        for i in 1..3 {
            put(&tree, i);
        }
        got.extend(rest(&mut cursor, 3));
        let mut want: Vec<u64> = (0..60).map(|i| i * 3).chain([1, 2, 100, 200]).collect();
        want.sort_unstable();
        want.dedup();
        assert_eq!(got, want);
        let stats = cursor.stats();
        assert_eq!(stats.rejected, 0, "{stats:?}");
        assert_eq!(stats.descents, 1, "{stats:?}");
        assert!(leaves(&tree).contains(&hinted));
    }

    /// The remembered leaf's base page is replaced by patches (updates consolidated): the
    /// patched pages keep its range stamp, so the hint passes on the stamp alone; a split
    /// gives the page a new stamp, and the hint then passes on the low fence.
    #[test]
    fn a_patched_page_keeps_its_stamp_and_a_split_one_does_not() {
        let tree = tiny();
        for i in 0..40 {
            put(&tree, i * 10);
        }
        let stamp_now = |id| stamp_now(&tree, id);
        let mut cursor = ascending(&tree);
        let mut got = Vec::new();
        cursor.next_batch(1, &mut |k, _| {
            got.push(u64::from_be_bytes(k.try_into().unwrap()))
        });
        let (id, stamp) = cursor.hint.as_ref().map(|h| (h.id, h.stamp)).unwrap();
        assert_eq!(stamp, stamp_now(id));
        // Overwrites of the leaf's second key: the chain passes its limit and is patched.
        let before = base_of(tree.table.get(id)).map(|b| b as *const NodeHeader);
        for _ in 0..5 {
            put(&tree, 10);
        }
        assert_ne!(
            base_of(tree.table.get(id)).map(|b| b as *const NodeHeader),
            before
        );
        assert_eq!(stamp_now(id), stamp, "a patch keeps the stamp");
        cursor.next_batch(1, &mut |k, _| {
            got.push(u64::from_be_bytes(k.try_into().unwrap()))
        });
        assert_eq!(got, [0, 10]);
        let stats = cursor.stats();
        assert_eq!((stats.hinted, stats.rejected), (1, 0), "{stats:?}");
        // Keys between 10 and 20 split the leaf: its new base has a stamp of its own.
        for i in 11..20 {
            put(&tree, i);
        }
        tree.consolidate(id, tree.table.get(id), &shim::pin());
        assert_ne!(stamp_now(id), stamp, "a split page takes a new stamp");
        got.extend(rest(&mut cursor, 1));
        let mut want: Vec<u64> = (0..40).map(|i| i * 10).chain(11..20).collect();
        want.sort_unstable();
        assert_eq!(got, want);
        let stats = cursor.stats();
        assert_eq!(stats.rejected, 0, "{stats:?}");
        assert_eq!(stats.descents, 1, "{stats:?}");
    }

    /// A batch that finishes a page remembers the right sibling with that page's stamp, and
    /// the next batch passes on it.
    #[test]
    fn a_finished_page_hands_on_its_right_siblings_stamp() {
        let tree = tiny();
        for i in 0..40 {
            put(&tree, i);
        }
        let mut cursor = ascending(&tree);
        let mut got = Vec::new();
        let mut visit = |k: &[u8], _| got.push(u64::from_be_bytes(k.try_into().unwrap()));
        let first = cursor.next_batch(usize::MAX, &mut visit);
        assert!(first > 0);
        let (id, stamp) = cursor.hint.as_ref().map(|h| (h.id, h.stamp)).unwrap();
        assert_eq!(id, leaves(&tree)[1], "the right sibling");
        let now = stamp_now(&tree, id);
        assert!(stamp != 0 && stamp == now, "{stamp} {now}");
        let second = cursor.next_batch(usize::MAX, &mut visit);
        assert!(second > 0);
        assert_eq!(got, (0..(first + second) as u64).collect::<Vec<_>>());
        let stats = cursor.stats();
        assert_eq!((stats.hinted, stats.rejected), (1, 0), "{stats:?}");
    }
}
