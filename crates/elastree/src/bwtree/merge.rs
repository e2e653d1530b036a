//! Merges: a page (a leaf or an inner page, not the root) left under the merge threshold by
//! its consolidation is absorbed by its left sibling, in three compare-and-swaps that any
//! thread can finish (see the module docs' "Structure modifications"):
//!
//! 1. an Unlink delta on the parent ([`BwTree::try_merge`]): the parent routes the page's
//!    range as the keys just below it, to the left sibling, whose side link still leads to
//!    the page. Installed only on a parent snapshot that routes the page's low fence to the
//!    page and is not its first child, so it is atomic with the parent's splits: the Unlink
//!    is the merge's point of no return;
//! 2. a Remove delta on the page ([`BwTree::finish_merge`]): the page is frozen (no delta is
//!    installed on a Remove), and walkers that meet it help and start again;
//! 3. a Merge delta on the left sibling ([`BwTree::help_remove`]): it takes the frozen chain,
//!    the page's high fence and its right sibling.
//!
//! The removed page's id and its Remove delta are retired (through the epoch) by the
//! consolidation of the parent that drops the Unlink, which first finishes steps 2 and 3:
//! until then the Unlink names the id, so the id cannot be handed out again while any
//! thread may still act on it.

use std::sync::atomic::Ordering::Relaxed;

use super::shim::Guard;

use super::delta::{Delta, Kind, NewDelta, Spot, Target};
use super::key::Key;
use super::table::PageId;
use super::view::{base_of, level_of, Probe, Step};
use super::BwTree;
use crate::node::page::{fence, footprint, PageImage};
use crate::node::NodeHeader;

impl BwTree {
    /// Starts merging page `id` (a leaf or an inner page) into its left sibling, if it is
    /// still a base page and its parent routes its low fence to it and it is not the
    /// parent's first child (and, for an inner page, if it fits its left sibling: see
    /// [`Self::fits_left`]): installs the Unlink on the parent and finishes the merge; then
    /// the parent, consolidated without the page's entry, merges in turn if that leaves it
    /// under the threshold. Gives up (the page stays, and is considered again at its next
    /// consolidation) when any of that does not hold.
    pub(super) fn try_merge(&self, id: PageId, guard: &Guard) {
        // SAFETY: read from the mapping table under `guard`.
        let Target::Base(node) = (unsafe { self.table.get(id).target() }) else {
            return;
        };
        let Some(low) = fence(node, &self.config, true) else {
            return;
        };
        let low = Key::of(&low);
        let above = node.level() + 1;
        let (parent, top) = self.descend(Probe::at(low), above, true, guard);
        // SAFETY: read from the mapping table under `guard`.
        if unsafe { level_of(top) } != Some(above) {
            return;
        }
        if !matches!(self.route(top, Probe::at(low)), Step::Child(c) if c == id) {
            return;
        }
        let Step::Child(left) = self.route(top, Probe::below(low)) else {
            return;
        };
        if above > 1 && !self.fits_left(node, left) {
            return;
        }
        // The Unlink covers the page's range in the parent: up to the next separator.
        let mut image = PageImage::default();
        let Some(shape) = self.collect(top, &mut image) else {
            return;
        };
        let Some(at) = (0..image.len()).find(|&i| {
            Key {
                bytes: image.key(i),
                tid: image.tid(i),
            } == low
        }) else {
            return;
        };
        let high = (at + 1 < image.len()).then(|| image.owned(at + 1, &self.config));
        let high = high.as_ref().or(shape.high.as_ref()).map(Key::of);
        let new = NewDelta {
            kind: Kind::Unlink,
            level: above,
            key: low,
            high,
            value: id,
            spot: Spot::UNKNOWN,
        };
        let Some(delta) = self.install(parent, top, &new) else {
            return;
        };
        self.merges[usize::from(above > 1)].fetch_add(1, Relaxed);
        // SAFETY: just installed; it stays allocated while this thread is pinned.
        if let Target::Delta(unlink) = unsafe { delta.target() } {
            self.finish_merge(unlink, guard);
        }
        self.settle(parent, delta, guard);
    }

    /// Whether inner base page `node` and the base page of `left`, its left sibling (read
    /// under the caller's pin), would make one page that fits: their entries together, and
    /// their bytes with `node`'s prefix given back to each of its entries (the merged page
    /// may not share it). A merge that would split again at once is not made: the halves of
    /// a split inner page whose keys share a long prefix can be small enough to count as
    /// underfull (the right half stores the prefix once, the left one, starting at the
    /// level's first separator, cannot), and merging them back would split them again at
    /// the next index entry, and so on. Leaves merge by the threshold alone
    /// ([`Self::underfull`]).
    fn fits_left(&self, node: &NodeHeader, left: PageId) -> bool {
        let Some(left) = base_of(self.table.get(left)) else {
            return false;
        };
        let (a, b) = (footprint(left, &self.config), footprint(node, &self.config));
        let level = node.level();
        a.count + b.count <= self.config.max_entries(level)
            && a.bytes + b.bytes + b.count * b.prefix_len <= self.config.max_bytes(level)
    }

    /// Finishes the merge that `unlink` (an Unlink delta read under `guard`) started:
    /// freezes the page with a Remove delta unless it is frozen, and has its left sibling
    /// absorb it. Idempotent; any thread may call it. A null entry means the merge finished
    /// and the page was retired (its id cannot be reused while this thread is pinned).
    pub(super) fn finish_merge(&self, unlink: &Delta, guard: &Guard) {
        let id = unlink.value();
        loop {
            let top = self.table.get(id);
            // SAFETY: read from the mapping table under `guard`.
            match unsafe { top.target() } {
                Target::Null => return,
                Target::Delta(d) if d.kind() == Kind::Remove => {
                    self.help_remove(d, guard);
                    return;
                }
                _ => {}
            }
            let Some((high, _)) = self.bounds(top) else {
                continue;
            };
            let new = NewDelta {
                kind: Kind::Remove,
                level: unlink.level() - 1,
                key: unlink.key(),
                high: high.as_ref().map(Key::of),
                value: id,
                spot: Spot::UNKNOWN,
            };
            if let Some(delta) = self.install(id, top, &new) {
                // SAFETY: just installed; it stays allocated while this thread is pinned.
                if let Target::Delta(remove) = unsafe { delta.target() } {
                    self.help_remove(remove, guard);
                }
                return;
            }
        }
    }

    /// Makes sure the page left of the page that `remove` (a Remove delta read under
    /// `guard`) froze has absorbed it: finds the page of its level that holds the keys just
    /// below its low fence and, if that page's range still ends there, installs a Merge
    /// delta on it. Idempotent; any thread that meets a Remove calls it before starting
    /// again.
    pub(super) fn help_remove(&self, remove: &Delta, guard: &Guard) {
        let low = remove.key();
        let level = remove.level();
        let probe = Probe::below(low);
        'find: loop {
            let (mut left, _) = self.descend(probe, level, true, guard);
            let top = loop {
                let top = self.table.get(left);
                // SAFETY: read from the mapping table under `guard`.
                if unsafe { level_of(top) } != Some(level) {
                    continue 'find;
                }
                match self.covers(top, probe) {
                    Step::Here(..) => break top,
                    Step::Right(right, split) => {
                        if let Some(split) = split {
                            self.help_split(level, split, guard);
                        }
                        left = right;
                    }
                    // The left sibling is being removed too: it goes first.
                    Step::Left(other) => {
                        self.help_remove(other, guard);
                        continue 'find;
                    }
                    Step::Child(_) | Step::Restart => continue 'find,
                }
            };
            let Some((high, right)) = self.bounds(top) else {
                continue;
            };
            if high.as_ref().map(Key::of) != Some(low) || right != remove.value() {
                // The left sibling absorbed the page already (and may have split again, even
                // at the same key: the removed page's id is not reused before its Unlink is
                // consolidated away, so a sibling naming it has not absorbed it).
                return;
            }
            let new = NewDelta {
                kind: Kind::Merge,
                level,
                key: low,
                high: remove.high(),
                value: remove.next().0 as u64,
                spot: Spot::UNKNOWN,
            };
            if let Some(delta) = self.install(left, top, &new) {
                self.settle(left, delta, guard);
                return;
            }
        }
    }

    /// Retires removed page `id` once the Unlink that named it is consolidated away: its id
    /// (recycled through the epoch) and its Remove delta (freed through the epoch; the frozen
    /// chain under it belongs to the left sibling's Merge).
    pub(super) fn retire_removed(&self, id: PageId, guard: &Guard) {
        let top = self.table.get(id);
        debug_assert!(
            // SAFETY: read from the mapping table under `guard`.
            matches!(unsafe { top.target() }, Target::Delta(d) if d.kind() == Kind::Remove),
            "page {id} retired before it was removed"
        );
        self.table.retire(id, guard);
        self.retire(top, guard);
    }
}
