//! Consolidation and structure modifications: a chain rebuilt into one optimized page,
//! split in two when its entries no longer fit, the root grown, and the parent's index entry
//! posted after a split.
//!
//! Every change is installed by one compare-and-swap on a mapping-table entry, against the
//! chain top the change was computed from; a thread that loses the race frees what it built
//! (never published) and leaves the page to whoever won.

use super::delta::{Delta, Kind, Link, NewDelta, Target};
use super::key::Key;
use super::shim::Guard;
use super::table::PageId;
use super::view::{Probe, Step};
use super::{sibling, BwTree, NO_SIBLING, ROOT};
use crate::node::page::{fence, PageImage, PageRepr};
use crate::node::slotted::VarKey;
use crate::node::NodeRepr;

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
    /// sorted, each key once with its newest state, deletes applied, keys moved away by a
    /// split dropped; returns the page's shape. `None` for a null link.
    pub(super) fn collect(&self, top: Link, image: &mut PageImage) -> Option<Shape> {
        image.clear();
        let mut deltas: Vec<&Delta> = Vec::new();
        let mut split: Option<&Delta> = None;
        let mut link = top;
        let base = loop {
            // SAFETY: `top` was read from the mapping table under the caller's pin; every
            // record of its chain outlives the pin.
            match unsafe { link.target() } {
                Target::Null => return None,
                Target::Delta(d) => {
                    match d.kind() {
                        // The newest split is the page's end (older ones end further right).
                        Kind::Split if split.is_none() => split = Some(d),
                        Kind::Split => {}
                        _ => deltas.push(d),
                    }
                    link = d.next();
                }
                Target::Base(node) => break node,
            }
        };
        let level = base.level();
        let (high, right) = match split {
            Some(s) => (Some(s.key().to_owned(self.pairs)), s.value()),
            None => (fence(base, &self.config, false), sibling(base)),
        };
        let below_high = |key: Key<'_>| high.as_ref().is_none_or(|h| key < Key::of(h));
        // Newest first; a stable sort keeps the newest of a key first.
        deltas.sort_by(|a, b| a.key().cmp(&b.key()));
        deltas.dedup_by(|later, first| later.key() == first.key());
        let count = PageRepr::count(base, &self.config);
        let mut entry = VarKey::default();
        let mut next = 0;
        let push_delta = |d: &Delta, image: &mut PageImage| {
            if d.kind() != Kind::Delete && below_high(d.key()) {
                image.push(d.key().bytes, d.key().tid, d.value());
            }
        };
        for i in 0..count {
            PageRepr::key_into(base, &self.config, i, &mut entry);
            let key = Key::of(&entry);
            while next < deltas.len() && deltas[next].key() < key {
                push_delta(deltas[next], image);
                next += 1;
            }
            if next < deltas.len() && deltas[next].key() == key {
                push_delta(deltas[next], image);
                next += 1;
            } else if below_high(key) {
                image.push(
                    key.bytes,
                    key.tid,
                    PageRepr::value_at(base, &self.config, i),
                );
            }
        }
        for d in &deltas[next..] {
            push_delta(d, image);
        }
        Some(Shape {
            level,
            low: fence(base, &self.config, true),
            high,
            right,
        })
    }

    /// Consolidates page `id` if its chain is still `top`: into one page, or two when its
    /// entries no longer fit (a split; the root grows instead). Does nothing if another
    /// thread changed the page first.
    pub(super) fn consolidate(&self, id: PageId, top: Link, guard: &Guard) {
        let mut image = PageImage::default();
        let Some(shape) = self.collect(top, &mut image) else {
            return;
        };
        let n = image.len();
        let fences = (shape.low.as_ref(), shape.high.as_ref());
        if n < 2 || image.fits(&self.config, shape.level, 0..n, fences) {
            let page = self.build(&mut image, shape.level, 0..n, fences, shape.right);
            if self.table.cas(id, top, page) {
                self.retire(top, guard);
            } else {
                self.discard(page, true);
            }
        } else if id == ROOT {
            self.grow_root(top, shape.level, guard);
        } else {
            self.split(id, top, &mut image, &shape, guard);
        }
    }

    /// Splits page `id` (chain `top`, entries in `image`): the right half becomes a new
    /// page, a Split delta on `id` points at it, the parent gets its index entry, and `id`
    /// is consolidated to its left half (split again if that still does not fit: a chain
    /// of many inserts may hold more than two pages' entries).
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
        let right = self.build(
            image,
            shape.level,
            at..n,
            (Some(&separator), shape.high.as_ref()),
            shape.right,
        );
        self.table.set(right_id, right);
        let new = NewDelta {
            kind: Kind::Split,
            level: shape.level,
            key: Key::of(&separator),
            high: shape.high.as_ref().map(Key::of),
            value: right_id,
        };
        let delta = self.new_delta(&new, top);
        if !self.table.cas(id, top, delta) {
            self.discard(delta, false);
            self.table.set(right_id, Link::NULL);
            self.discard(right, true);
            self.table.retire(right_id, guard);
            return;
        }
        // SAFETY: just installed; it stays allocated while this thread is pinned.
        if let Target::Delta(split) = unsafe { delta.target() } {
            self.help_split(shape.level, split, guard);
        }
        let now = self.table.get(id);
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
        let root = self.build(&mut root_image, level + 1, 0..1, (None, None), NO_SIBLING);
        if self.table.cas(ROOT, top, root) {
            self.consolidate(child, top, guard);
        } else {
            self.discard(root, true);
            self.table.retire(child, guard);
        }
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
                // The parent changed under the descent: look again.
                Step::Here(_) | Step::Restart => continue,
            }
            let new = NewDelta {
                kind: Kind::IndexEntry,
                level: level + 1,
                key: separator,
                high: split.high(),
                value: child,
            };
            let delta = self.new_delta(&new, top);
            if self.table.cas(parent, top, delta) {
                self.maybe_consolidate(parent, delta, guard);
                return;
            }
            self.discard(delta, false);
        }
    }

    /// Consolidates page `id` after this thread installed `top` on it, if its chain is
    /// longer than the limit.
    pub(super) fn maybe_consolidate(&self, id: PageId, top: Link, guard: &Guard) {
        // SAFETY: `top` was installed by this thread while pinned.
        if unsafe { top.depth() } > self.max_chain {
            self.consolidate(id, top, guard);
        }
    }
}
