//! Consolidation and structure modifications: a chain rebuilt into one optimized page (the
//! chains its Merge deltas absorbed included, its Unlinks' merges finished first and their
//! removed pages retired after), split in two when its entries no longer fit, the root
//! grown, and the parent's index entry posted after a split.
//!
//! The common chain, inserts and deletes (or index entries) over one base page, is not
//! collected: its base page is patched (`node/page/patch.rs`: the old page's entries move
//! without being decoded, and only the deltas' keys are encoded). Consolidation, splits
//! included, went from 11,950 to 3,010 instructions per insert with it and the splits' one
//! collection (`examples/bw_ops.rs` under callgrind, 200K random 8-byte keys, one thread),
//! 2,040 of them in patches. A leaf whose patched page would no longer fit splits without
//! being collected either: its base page's entries move into two halves as they are
//! (`node/page/cut.rs`) and each half is patched with the edits on its side of the
//! separator (`split_patched`: 4,367 -> 3,975 instructions per insert). Chains with splits,
//! merges or keys outside the page prefix, inner pages and the root when they no longer fit,
//! and leaves whose halves would lengthen the prefix, are collected and rebuilt.
//!
//! Every change is installed by one compare-and-swap on a mapping-table entry, against the
//! chain top the change was computed from; a thread that loses the race frees what it built
//! (never published) and leaves the page to whoever won.

use std::sync::atomic::Ordering::Relaxed;

use smallvec::SmallVec;

use super::delta::{self, Delta, Kind, Link, NewDelta, Spot, Target};
use super::key::Key;
use super::shim::Guard;
use super::table::PageId;
use super::view::{Probe, Step};
use super::{set_sibling, sibling, stamp_of, BwTree, NO_SIBLING, ROOT};
use crate::node::page::{fence, fence_cmp, Edit, PageImage, PageRepr, PageView};
use crate::node::slotted::VarKey;
use crate::node::{NodeHeader, NodeRepr};

/// Deltas an inner page's chain may hold before it is consolidated: none (a page that
/// receives a delta is consolidated at once, unless another thread changes it first). An
/// inner page changes once per split of a child but is passed by every operation below it,
/// and each delta on it costs every walk a dependent load and a comparison or two: with
/// inner pages taking the leaves' 4, lookups cost 2,270 instructions and inserts 5,608
/// (`examples/bw_ops.rs` under callgrind, 200K random 8-byte keys); with 1, 1,949 and
/// 5,537; with none, 1,915 and 5,525 (the consolidations cost less than the walks save).
const INNER_CHAIN: u16 = 0;

/// Deltas a leaf's chain must hold for a read that walked it (a lookup, or the first leaf of
/// a short scan or cursor batch: [`SHORT_READ`]) to consolidate it
/// ([`BwTree::consolidate_read`]).
pub(super) const READ_CHAIN: u16 = 2;

/// The most keys a range read (a scan, a cursor batch) may ask for and still consolidate
/// the leaf it starts at when that leaf's chain holds [`READ_CHAIN`] deltas or more. A short
/// read spends its time on that one leaf, and short reads come back to the same leaves, so
/// they gain from it as lookups do; a longer one passes through most of its leaves, which
/// are read as they are, and its first leaf is no different: a consolidation costs about
/// 4,200 instructions, reading a leaf's deltas about 1,500 (`examples/bw_scan.rs` under
/// callgrind, 1M keys: `bwpage` requests of 10 keys, and `bwtree` scans of 1,000 keys of the
/// freshly loaded tree against the settled one), for leaves a long scan may never read
/// again. Measured with `elastree bench --keys rand64 --n 4M --threads 2`, `bwtree` over
/// `btree`, two runs each: consolidating every first leaf, 1,000-key scans through cursors
/// (`cursor-update-1000`) 0.53x and 0.43x, 10-key requests (`logical-update-10`) 0.48x and
/// 0.40x; one first leaf in four, 0.68x and 0.72x but 0.40x and 0.38x; only short reads'
/// first leaves (this rule), 1.05x and 0.88x, and 0.43x and 0.44x.
const SHORT_READ: usize = 64;

/// Whether a range read asking for `limit` keys consolidates the leaf it starts at (see
/// [`SHORT_READ`]).
#[inline]
pub(super) fn consolidates_first_leaf(limit: usize) -> bool {
    limit <= SHORT_READ
}

/// A chain's entry deltas, newest first (a chain's worth fits inline).
type Deltas<'g> = SmallVec<[&'g Delta; 16]>;

/// A chain's base pages with the filters their keys pass (one unless Merges absorbed more).
type Bases<'g> = SmallVec<[(&'g NodeHeader, Option<Key<'g>>); 2]>;

/// A page's state read from one chain: its level, fences and right sibling; the entries
/// are in the [`PageImage`] filled alongside.
pub(super) struct Shape {
    pub level: u16,
    pub low: Option<VarKey>,
    pub high: Option<VarKey>,
    pub right: PageId,
}

impl BwTree {
    /// Fills `image` with the entries of the chain at `top` (read under the caller's pin),
    /// sorted, each key once with its newest state, deletes (and Unlinks) applied, keys
    /// moved away by a split dropped, the chains of absorbed pages (Merge deltas) taken in;
    /// returns the page's shape. `None` for a null link or a removed page.
    pub(super) fn collect(&self, top: Link, image: &mut PageImage) -> Option<Shape> {
        image.clear();
        let mut deltas: Deltas<'_> = SmallVec::new();
        let mut bases: Bases<'_> = SmallVec::new();
        let (level, high, right) = self.gather(top, None, &mut deltas, &mut bases)?;
        // The page's own base comes last (absorbed chains are gathered before the rest of
        // the chain below their Merge), and absorbed ranges lie right of it: ascending order.
        bases.reverse();
        let low = fence(bases[0].0, &self.config, true);
        // One allocation per buffer rather than a doubling series of them.
        let entries = bases
            .iter()
            .map(|&(base, _)| PageRepr::count(base, &self.config))
            .sum::<usize>();
        image.reserve(
            entries + deltas.len(),
            self.config.max_bytes(level) * bases.len(),
        );
        // Newest first; a stable sort keeps the newest of a key first.
        deltas.sort_by(|a, b| a.key().order(b.key()));
        deltas.dedup_by(|later, first| later.key().same(first.key()));
        let mut entry = VarKey::default();
        let mut next = 0;
        let push_delta = |d: &Delta, image: &mut PageImage| {
            if !matches!(d.kind(), Kind::Delete | Kind::Unlink) {
                image.push(d.key().bytes, d.key().tid, d.value());
            }
        };
        // Each base page's layout is located once; keys compare word first (`Key::order`).
        for &(base, filter) in &bases {
            let page = PageView::of(base, &self.config);
            for i in 0..page.count() {
                page.key_into(i, &mut entry);
                let key = Key::of(&entry);
                let mut order = std::cmp::Ordering::Greater;
                while next < deltas.len() {
                    order = deltas[next].key().order(key);
                    if order.is_ge() {
                        break;
                    }
                    push_delta(deltas[next], image);
                    next += 1;
                }
                if next < deltas.len() && order.is_eq() {
                    push_delta(deltas[next], image);
                    next += 1;
                } else if filter.is_none_or(|f| key.order(f).is_lt()) {
                    image.push(key.bytes, key.tid, page.value(i));
                }
            }
        }
        for d in &deltas[next..] {
            push_delta(d, image);
        }
        Some(Shape {
            level,
            low,
            high,
            right,
        })
    }

    /// Gathers the chain at `top` for [`Self::collect`]: its entry deltas still inside the
    /// page (below `filter` and every Split above them) into `deltas`, newest first, and its
    /// base pages with their own filters into `bases` (an absorbed chain's before the rest);
    /// returns the chain's level, high fence and right sibling.
    #[allow(clippy::type_complexity)]
    fn gather<'g>(
        &self,
        top: Link,
        mut filter: Option<Key<'g>>,
        deltas: &mut Deltas<'g>,
        bases: &mut Bases<'g>,
    ) -> Option<(u16, Option<VarKey>, PageId)> {
        let mut bound: Option<(Option<VarKey>, PageId)> = None;
        let mut link = top;
        // SAFETY: as below.
        unsafe { top.start_loading_chain() };
        loop {
            // SAFETY: `top` was read from the mapping table under the caller's pin; every
            // record of its chain (and of the chains its Merges own) outlives the pin.
            match unsafe { link.target::<'g>() } {
                Target::Null => return None,
                Target::Delta(d) => {
                    match d.kind() {
                        // The newest split or merge is the page's end; a split also ends
                        // everything below it.
                        Kind::Split => {
                            if bound.is_none() {
                                bound = Some((Some(d.key().to_owned(self.pairs)), d.value()));
                            }
                            if filter.is_none_or(|f| d.key() < f) {
                                filter = Some(d.key());
                            }
                        }
                        Kind::Merge => {
                            let absorbed = Link(d.value() as usize);
                            let (_, _, right) = self.gather(absorbed, filter, deltas, bases)?;
                            if bound.is_none() {
                                bound = Some((d.high().map(|h| h.to_owned(self.pairs)), right));
                            }
                        }
                        Kind::Remove => return None,
                        _ => {
                            if filter.is_none_or(|f| d.key() < f) {
                                deltas.push(d);
                            }
                        }
                    }
                    link = d.next();
                }
                Target::Base(node) => {
                    bases.push((node, filter));
                    let (high, right) =
                        bound.unwrap_or_else(|| (fence(node, &self.config, false), sibling(node)));
                    return Some((node.level(), high, right));
                }
            }
        }
    }

    /// Consolidates page `id` if its chain is still `top`: into one page, or two when its
    /// entries no longer fit (a split; the root grows instead). Does nothing if another
    /// thread changed the page first. An inner page first finishes the merges its Unlink
    /// deltas announce, and the consolidation that drops them retires the removed pages.
    /// Returns whether it installed one page, not the root, under the merge threshold
    /// ([`Self::underfull`]) and not the leftmost of its level: a page to merge.
    pub(super) fn consolidate(&self, id: PageId, top: Link, guard: &Guard) -> bool {
        let unlinks = self.unlinks(top);
        for unlink in &unlinks {
            self.finish_merge(unlink, guard);
        }
        self.consolidate_image(id, top, &unlinks, &mut PageImage::default(), guard)
    }

    /// [`Self::consolidate`] once the Unlinks' merges are finished, with a scratch image.
    fn consolidate_image(
        &self,
        id: PageId,
        top: Link,
        unlinks: &[&Delta],
        image: &mut PageImage,
        guard: &Guard,
    ) -> bool {
        if unlinks.is_empty() {
            if let Some(merge) = self.patch(id, top, image, guard) {
                return merge;
            }
        }
        let Some(shape) = self.collect(top, image) else {
            return false;
        };
        let n = image.len();
        let fences = (shape.low.as_ref(), shape.high.as_ref());
        if n < 2 || image.fits(&self.config, shape.level, 0..n, fences) {
            let (page, size) = self.build(image, shape.level, 0..n, fences, shape.right);
            if self.table.cas(id, top, page) {
                self.retire(top, guard);
                for unlink in unlinks {
                    self.retire_removed(unlink.value(), guard);
                }
                // SAFETY: just published by this thread, which is still pinned.
                return id != ROOT
                    && shape.low.is_some()
                    && matches!(unsafe { page.target() }, Target::Base(node)
                        if self.underfull(node, n, size));
            }
            self.discard(page, true);
        } else if id == ROOT {
            self.grow_root(top, shape.level, guard);
        } else {
            self.split(id, top, image, &shape, guard);
        }
        false
    }

    /// Consolidates page `id` (chain `top`) by patching its base page, if the chain holds
    /// only entry deltas (inserts, deletes, index entries) and the patch can be made (see
    /// [`PageImage::patch`]): the base page's entries are copied without being decoded, and
    /// only the deltas' keys are encoded. Returns what [`Self::consolidate`] returns, or
    /// `None` when the page must be collected and rebuilt instead.
    fn patch(&self, id: PageId, top: Link, image: &mut PageImage, guard: &Guard) -> Option<bool> {
        // Each delta with its key, read once for the sort.
        let mut deltas: SmallVec<[(Key<'_>, &Delta); 16]> = SmallVec::new();
        let mut link = top;
        // SAFETY: as below.
        unsafe { top.start_loading_chain() };
        let base = loop {
            // SAFETY: read from the mapping table under the caller's pin; the chain
            // outlives it.
            match unsafe { link.target() } {
                Target::Delta(d) => match d.kind() {
                    Kind::Insert | Kind::Delete | Kind::IndexEntry => {
                        deltas.push((d.key(), d));
                        link = d.next();
                    }
                    _ => return None,
                },
                Target::Base(node) => break node,
                Target::Null => return None,
            }
        };
        // Newest first; a stable sort keeps the newest of a key first.
        deltas.sort_by(|a, b| a.0.order(b.0));
        deltas.dedup_by(|later, first| later.0.same(first.0));
        let edits: SmallVec<[Edit<'_>; 16]> = deltas
            .iter()
            .map(|&(key, d)| Edit {
                key: key.bytes,
                tid: key.tid,
                value: (d.kind() != Kind::Delete).then(|| d.value()),
                at: d.spot().get(),
            })
            .collect();
        let Some(patched) = image.patch(&self.config, base, &edits) else {
            return self.split_patched(id, top, base, &edits, image, guard);
        };
        let level = base.level();
        set_sibling(patched.node, sibling(base));
        self.bytes.of(level).add(patched.size);
        // Entry deltas alone: the patch keeps the base page's fences, and its stamp.
        let page = self.link_to(patched.node, stamp_of(base));
        if !self.table.cas(id, top, page) {
            self.discard(page, true);
            return Some(false);
        }
        self.retire(top, guard);
        Some(
            id != ROOT
                && fence_cmp(base, &self.config, true, &[], 0).is_some()
                // SAFETY: built by this thread, which is still pinned.
                && self.underfull(unsafe { patched.node.as_ref() }, patched.count, patched.size),
        )
    }

    /// Splits leaf `id` (chain `top`: entry deltas over `base`, whose `edits` no longer fit
    /// one page with `base`'s entries) without collecting the chain: `base`'s entries move
    /// into two halves as they are ([`PageImage::split_moved`]), each half is patched with
    /// the edits on its side of the separator, and the halves are installed as
    /// [`Self::split`] installs them: the right one under a new id with a Split delta on
    /// `id`, the parent's index entry, then the left one in place of the chain if no other
    /// thread changed it meanwhile. Returns what [`Self::patch`] returns: `None` (nothing
    /// published) when the split cannot be made so (the root, an inner page, a half with a
    /// longer prefix or an edit outside it, a half that does not fit).
    fn split_patched(
        &self,
        id: PageId,
        top: Link,
        base: &NodeHeader,
        edits: &[Edit<'_>],
        image: &mut PageImage,
        guard: &Guard,
    ) -> Option<bool> {
        if id == ROOT || base.level() != 0 {
            return None;
        }
        let (left, separator, right) = image.split_moved(&self.config, base)?;
        // SAFETY: built just now, not shared.
        let (left_half, right_half) = unsafe { (left.as_ref(), right.as_ref()) };
        let at = PageRepr::count(left_half, &self.config);
        let split_key = Key::of(&separator);
        // The edits are sorted: those below the separator go left, at their spots in
        // `base` (the left half's entries are `base`'s first `at`); the rest go right, their
        // spots moved down by `at`.
        let cut = edits.partition_point(|e| {
            Key {
                bytes: e.key,
                tid: e.tid,
            }
            .order(split_key)
            .is_lt()
        });
        let right_edits: SmallVec<[Edit<'_>; 16]> = edits[cut..]
            .iter()
            .map(|e| Edit {
                at: e
                    .at
                    .and_then(|(pos, found)| pos.checked_sub(at).map(|pos| (pos, found))),
                ..*e
            })
            .collect();
        let patched_left = image.patch(&self.config, left_half, &edits[..cut]);
        let patched_right = patched_left
            .as_ref()
            .and_then(|_| image.patch(&self.config, right_half, &right_edits));
        // SAFETY: the moved halves were never shared; the patches copied them.
        unsafe {
            delta::free_base(&self.config, left);
            delta::free_base(&self.config, right);
        }
        let (left, right) = match (patched_left, patched_right) {
            (Some(left), Some(right)) => (left, right),
            (left, _) => {
                if let Some(left) = left {
                    // SAFETY: never shared.
                    unsafe { delta::free_base(&self.config, left.node) };
                }
                return None;
            }
        };
        // The chain holds entry deltas only: its high fence and right sibling are `base`'s.
        let high = fence(base, &self.config, false);
        let right_id = self.table.allocate();
        set_sibling(right.node, sibling(base));
        set_sibling(left.node, right_id);
        self.bytes.of(0).add(right.size + left.size);
        let (left, right) = (
            self.link_to(left.node, self.new_stamp()),
            self.link_to(right.node, self.new_stamp()),
        );
        let posted = (0, split_key, high.as_ref().map(Key::of));
        let Some(delta) = self.post_split(id, top, (right_id, right), posted, guard) else {
            self.discard(left, true);
            return Some(false);
        };
        let now = self.table.get(id);
        if now == delta && self.table.cas(id, now, left) {
            self.retire(now, guard);
            return Some(false);
        }
        self.discard(left, true);
        if now != delta {
            self.consolidate(id, now, guard);
        }
        Some(false)
    }

    /// The Unlink deltas of the chain at `top` (an inner page's; read under the caller's
    /// pin) and of the chains its Merge deltas absorbed: every Unlink a consolidation of the
    /// chain drops.
    fn unlinks<'g>(&self, top: Link) -> Vec<&'g Delta> {
        let mut found = Vec::new();
        self.unlinks_into(top, &mut found);
        found
    }

    /// [`Self::unlinks`] into `found`.
    fn unlinks_into<'g>(&self, top: Link, found: &mut Vec<&'g Delta>) {
        let mut link = top;
        // SAFETY: read from the mapping table under the caller's pin; the chain outlives it.
        while let Target::Delta(d) = unsafe { link.target::<'g>() } {
            match d.kind() {
                Kind::Unlink => found.push(d),
                Kind::Merge => self.unlinks_into(Link(d.value() as usize), found),
                // A removed page's chain belongs to the Merge that absorbs it.
                Kind::Remove => return,
                _ => {}
            }
            link = d.next();
        }
    }

    /// Splits page `id` (chain `top`, entries in `image`): the right half becomes a new
    /// page, a Split delta on `id` points at it, the parent gets its index entry, and `id`
    /// is consolidated to its left half (split again if that still does not fit: a chain
    /// of many inserts may hold more than two pages' entries). A thread that finds the page
    /// changed by another when it would install the left half leaves the chain to it.
    fn split(&self, id: PageId, top: Link, image: &mut PageImage, shape: &Shape, guard: &Guard) {
        let leaf = shape.level == 0;
        let n = image.len();
        let (mut at, mut separator) = image.split(&self.config, leaf);
        // The right half must fit one page: move the point right until it does (a single
        // entry always fits).
        while at + 1 < n
            && !image.fits(
                &self.config,
                shape.level,
                at..n,
                (Some(&separator), shape.high.as_ref()),
            )
        {
            at += 1;
            separator = image.separator(&self.config, leaf, at);
        }
        let right_id = self.table.allocate();
        let (right, _) = self.build(
            image,
            shape.level,
            at..n,
            (Some(&separator), shape.high.as_ref()),
            shape.right,
        );
        let posted = (
            shape.level,
            Key::of(&separator),
            shape.high.as_ref().map(Key::of),
        );
        let Some(delta) = self.post_split(id, top, (right_id, right), posted, guard) else {
            return;
        };
        let now = self.table.get(id);
        // A leaf's left half, built from the entries at hand: what consolidating its chain
        // (the Split on the chain split) would build, if no other thread changed the page
        // since and the half fits one page. (Inner pages may carry Unlinks, whose removed
        // pages the consolidation retires: they take the general path.)
        let fences = (shape.low.as_ref(), Some(&separator));
        if leaf && now == delta && image.fits(&self.config, shape.level, 0..at, fences) {
            let (page, _) = self.build(image, shape.level, 0..at, fences, right_id);
            if self.table.cas(id, now, page) {
                self.retire(now, guard);
                return;
            }
            self.discard(page, true);
            return;
        }
        self.consolidate(id, now, guard);
    }

    /// Grows the tree by one level when the root's chain `top` no longer fits one page: the
    /// chain moves, as it is, under a new id, and a new root with that page as its only
    /// child replaces it (one compare-and-swap on the root's entry); the moved page then
    /// splits like any other.
    fn grow_root(&self, top: Link, level: u16, guard: &Guard) {
        let child = self.table.allocate();
        self.table.set(child, top);
        let mut root_image = PageImage::default();
        root_image.push(Key::MIN.bytes, Key::MIN.tid, child);
        let (root, _) = self.build(&mut root_image, level + 1, 0..1, (None, None), NO_SIBLING);
        if self.table.cas(ROOT, top, root) {
            self.consolidate(child, top, guard);
        } else {
            self.discard(root, true);
            self.table.retire(child, guard);
        }
    }

    /// Publishes `right` as page `right_id` and installs on `id` (whose chain top is `top`)
    /// the Split delta `(level, separator, high fence)` that moves the range above the
    /// separator there; helps post the parent's index entry and counts the split. Returns
    /// the installed delta, or `None` when the compare-and-swap lost: the delta and `right`
    /// are discarded and `right_id` retired (the caller discards what else it built).
    fn post_split(
        &self,
        id: PageId,
        top: Link,
        (right_id, right): (PageId, Link),
        (level, separator, high): (u16, Key<'_>, Option<Key<'_>>),
        guard: &Guard,
    ) -> Option<Link> {
        self.table.set(right_id, right);
        let new = NewDelta {
            kind: Kind::Split,
            level,
            key: separator,
            high,
            value: right_id,
            spot: Spot::UNKNOWN,
        };
        let Some(delta) = self.install(id, top, &new) else {
            self.table.set(right_id, Link::NULL);
            self.discard(right, true);
            self.table.retire(right_id, guard);
            return None;
        };
        // SAFETY: just installed; it stays allocated while this thread is pinned.
        if let Target::Delta(split) = unsafe { delta.target() } {
            self.help_split(level, split, guard);
        }
        self.splits.fetch_add(1, Relaxed);
        Some(delta)
    }

    /// Makes sure the parent (at `level + 1`) routes the range that `split` (a Split delta
    /// on a page at `level`) moved to its new page: posts an IndexEntry delta unless the
    /// parent already routes the separator there. Idempotent; any thread may call it.
    pub(super) fn help_split(&self, level: u16, split: &Delta, guard: &Guard) {
        let separator = split.key();
        let child = split.value();
        // A page at `level + 1` to look at next, instead of descending from the root: the
        // right sibling of one whose range ended below the separator.
        let mut next = None;
        loop {
            let (parent, top) = match next.take() {
                Some(id) => (id, self.table.get(id)),
                None => self.descend(Probe::at(separator), level + 1, true, guard),
            };
            // SAFETY: read from the mapping table under `guard`.
            if unsafe { super::view::level_of(top) } != Some(level + 1) {
                continue;
            }
            match self.route(top, Probe::at(separator)) {
                Step::Child(routed) if routed == child => return,
                Step::Child(_) => {}
                // The parent split and the separator moved right (maybe by a split whose
                // own index entry is not posted yet): help that split, move right. Looking
                // again from the root instead would wait for the parent's splitter.
                Step::Right(right, parent_split) => {
                    if let Some(parent_split) = parent_split {
                        self.help_split(level + 1, parent_split, guard);
                    }
                    next = Some(right);
                    continue;
                }
                // The parent is being merged away: finish that merge, then look again (the
                // page that absorbs it routes the separator).
                Step::Left(remove) => {
                    self.help_remove(remove, guard);
                    continue;
                }
                // The parent changed under the descent: look again.
                Step::Here(..) | Step::Restart => continue,
            }
            // A page being merged away lost its entry on purpose (an Unlink on the parent,
            // then a Remove on the page, which stays until the Unlink is consolidated away):
            // its entry must not come back. The parent's snapshot is read before the page's
            // state, so an Unlink installed after it fails the compare-and-swap below.
            if self.unlinks(top).iter().any(|u| u.value() == child) {
                return;
            }
            // SAFETY: read from the mapping table under `guard`.
            match unsafe { self.table.get(child).target() } {
                Target::Null => return,
                Target::Delta(d) if d.kind() == Kind::Remove => return,
                _ => {}
            }
            let new = NewDelta {
                kind: Kind::IndexEntry,
                level: level + 1,
                key: separator,
                high: split.high(),
                value: child,
                spot: Spot::UNKNOWN,
            };
            if let Some(delta) = self.install(parent, top, &new) {
                self.settle(parent, delta, guard);
                return;
            }
        }
    }

    /// Consolidates leaf `id`, whose chain `top` (read under `guard`) a read has just walked
    /// (a lookup, or a scan or cursor batch starting at it): once, giving up if another
    /// thread changes the page first (no retry), and starting the page's merge if it comes
    /// out under the threshold, as a writer would. A read-mostly phase so leaves its leaves
    /// as bare base pages, which lookups search in place without a delta's dependent load
    /// and scans read without gathering deltas.
    #[cold]
    #[inline(never)]
    pub(super) fn consolidate_read(&self, id: PageId, top: Link, guard: &Guard) {
        if self.consolidate(id, top, guard) {
            self.try_merge(id, guard);
        }
    }

    /// Consolidates page `id` after this thread installed `top` on it, if its chain is
    /// longer than the limit of its level (the configured chain length for a leaf, none for
    /// an inner page: see [`INNER_CHAIN`]), and starts its merge if it comes out under the
    /// threshold (see [`Self::consolidate`]). Every install that may leave a page longer or
    /// emptier ends here.
    pub(super) fn settle(&self, id: PageId, top: Link, guard: &Guard) {
        // SAFETY: `top` was installed by this thread while pinned.
        let (depth, level) = unsafe { (top.depth(), super::view::level_of(top)) };
        let limit = match level {
            Some(0) => self.max_chain,
            _ => INNER_CHAIN,
        };
        if depth > limit && self.consolidate(id, top, guard) {
            self.try_merge(id, guard);
        }
    }
}
