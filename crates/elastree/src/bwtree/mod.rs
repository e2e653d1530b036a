//! The Bw-tree (`../shared/papers/002`): a latch-free B+-tree whose pages are never changed
//! in place. A page is named by a logical id; the mapping table (`table`) maps it to the
//! top of its delta chain. Writers prepend a delta record (`delta`) with a
//! compare-and-swap on that entry; readers walk the chain from one read of the entry and
//! never wait or retry on a lock. A reader writes shared memory (besides the epoch pin) in two
//! cases only: it finishes a merge it meets (see below), and a lookup, or a short scan or
//! cursor batch at its first leaf, that walks a leaf chain of `consolidate.rs`'s
//! `READ_CHAIN` deltas or more consolidates it once
//! (`BwTree::consolidate_read`: no retry if another thread changes the page first), so a
//! read-mostly phase leaves bare base pages, which lookups search in place without a delta's
//! dependent load and scans hand out without gathering and sorting deltas.
//!
//! * `table.rs`: the mapping table, growable while read, ids recycled through epochs;
//! * `delta.rs`: delta records and the tagged link to a chain's top (the raw pointers);
//! * `pool.rs`: freed delta blocks kept for the tree's next deltas;
//! * `key.rs`: keys with tids, as every walk compares them;
//! * `view.rs`: walking a chain: lookups, routing, fence checks;
//! * `consolidate.rs`: consolidation into an optimized page, splits, root growth, and posting
//!   (or helping post) the parent's index entry;
//! * `merge.rs`: merges of underfull pages into their left siblings, and helping them finish;
//! * `write.rs`: inserts and removes;
//! * `scan.rs`: range scans, a page at a time, read in place;
//! * `cursor.rs`: physiological and prefix cursors (section V);
//! * `check.rs`: the invariant walk;
//! * `shim.rs`: the epoch and the mapping table's slot arrays, or loom's stand-ins for them
//!   (`tests/loom_bwtree.rs` model-checks the compare-and-swap installs of this code);
//! * `index.rs`: the [`Index`](crate::Index) glue and [`BwTreeOptions`].
//!
//! # Pages
//!
//! A chain ends in a base page: an optimized page ([`crate::node::page`]) built by
//! consolidation with exactly the bytes its entries need, its low and high fence keys, and
//! its right sibling's id (B-link) in the header's link word. A leaf's entries are `key ->
//! value` (non-unique trees: `(key, tid) -> tid`, each pair a key of its own, so a key's tids
//! are adjacent and ascending). An inner page's entry `i` is `(separator_i, child_i)`, the
//! child holding keys from `separator_i` up to `separator_{i+1}`; its first separator is its
//! low fence (the empty key when unbounded). A page's low fence never changes while its id
//! names it: a split moves its high fence left, a merge moves its high fence right (it
//! absorbs its right sibling), and a removed page's id is reused only after every thread
//! that could hold it has unpinned. So a page reached from its parent or its left sibling
//! never starts after the key sought (a walk that finds otherwise came through an id that
//! was reused, and starts again from the root).
//!
//! # Structure modifications
//!
//! A page whose consolidated entries no longer fit one page splits: the right half is built
//! as a new page, installed under a new id, and a Split delta (separator, new id, old high
//! key) is prepended to the old page; then an IndexEntry delta is prepended to the parent.
//! A writer that crosses a Split delta whose range it needed (so the parent did not route it
//! there) posts the IndexEntry itself if it is still missing; posting is idempotent (checked
//! and installed on one snapshot of the parent). The root keeps id 0: when it splits, both
//! halves get new ids and a new inner page replaces the root's chain in one
//! compare-and-swap, so the root never carries a Split delta.
//!
//! A page other than the root whose consolidation leaves it under two fifths of a page
//! (entries and entry bytes: see `BwTree::underfull`) and that is not the leftmost child of
//! its parent merges into its left sibling (`merge.rs`), in three compare-and-swaps:
//!
//! 1. an Unlink delta (the index-term delete) on the parent, installed only on a snapshot
//!    of the parent that routes the page's low fence to the page and has a child before
//!    it. From then on the parent routes the page's range as the keys just below it: to
//!    the left sibling, whose side link still leads to the page, so every key stays
//!    reachable. The Unlink is the point of no return, and being a change of the parent's
//!    chain it is atomic with the parent's splits (which can therefore never make the page
//!    a first child halfway through its merge);
//! 2. a Remove delta on the page: it is frozen (no delta goes on a Remove; writers lose
//!    their compare-and-swap and look again);
//! 3. a Merge delta on the left sibling (the page of its level that holds the keys just
//!    below the page's low fence, if its range still ends there and it still names the
//!    page as its right sibling): it takes the frozen chain (walks whose key is at or past
//!    the Merge's key continue down it), the page's high fence and its right sibling.
//!
//! Any thread that meets an unfinished merge finishes it: a walk that meets a Remove
//! (writers, lookups and scans alike, on a leaf or on an inner page on the way down, and a
//! split's helper whose parent is being merged away) installs the Merge if it is missing,
//! then starts again from the root, whose routes no longer lead to the removed page; a
//! thread that would consolidate a parent first finishes the merges its Unlinks announce; a
//! Remove whose left sibling is itself removed waits for nothing: the helper finishes that
//! merge first. A split that races a merge is told apart from a merge by the helper of the
//! split: it never posts an index entry for a page that an Unlink on the parent names or
//! that is frozen or gone. The removed page's id and its Remove delta are retired, through
//! the epoch, by the consolidation of the parent that drops the Unlink: until then the
//! Unlink names the id, so no helper can mistake a reused id for the removed page.
//!
//! Inner pages merge the same way, one level up: the consolidation of a parent that drops
//! an Unlink (or of a page that absorbed its right sibling) may leave it under the
//! threshold (or with one child), and it merges in turn, if its left sibling has room for
//! its entries (see `BwTree::fits_left`: halves of a split inner page can count as
//! underfull when their keys share a long prefix, and must not merge back only to split
//! again). The Merge delta of an inner page hands routes as a leaf's hands keys: a route
//! at or past the Merge's key continues down the absorbed chain, whose own Unlinks (merges
//! of its children still under way) a consolidation of the absorbing page finishes and
//! retires with its own. The root never merges and does not
//! collapse to a single child (a tree that shrank keeps its height, one page per level at
//! the least). A page is not merged while its last deletes sit in a chain shorter than the
//! consolidation threshold (they are dropped at its next consolidation), and a parent's
//! leftmost child never merges.
//! `tests/memory_accounting.rs` checks the bytes after deleting nine keys in ten and after
//! random updates against a freshly built tree's.
//!
//! # Garbage
//!
//! A replaced chain (consolidation) is retired through the epoch and freed with its deltas,
//! the frozen chains its Merge deltas absorbed, and its base page once every thread pinned
//! at the time has unpinned. A removed page's Remove delta is retired alone (its chain
//! belongs to the Merge), and its id goes back to the mapping table's free list through the
//! epoch too (`MappingTable::retire`), to be handed out by a later split. Records never
//! published (a lost compare-and-swap) are freed at once. So after any run of updates the
//! tree holds, besides its pages, at most a chain's worth of deltas per page and the Remove
//! deltas of merges whose parent has not consolidated since: `examples/bw_garbage.rs`
//! measures the bytes after 10 million random updates against a freshly built tree's.

mod check;
mod consolidate;
mod cursor;
mod delta;
mod index;
mod key;
mod merge;
mod pool;
mod scan;
mod shim;
mod table;
mod view;
mod write;

use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::counter::StripedCount;
use crate::mem::StripedBytes;
use crate::node::page::PageConfig;
use crate::node::NodeHeader;
use delta::{Link, Target};
use shim::{Garbage, Guard};
use table::{MappingTable, PageId};
use view::{Probe, Step};

pub use cursor::{BwCursor, CursorStats, PrefixCursor, PrefixStats};
pub use index::{
    BwTreeIndex, BwTreeOptions, BwTreeStats, DEFAULT_CHAIN_LENGTH, DEFAULT_INNER_PAGE_BYTES,
};

/// The root's id: fixed, so that the tree grows by replacing the root's chain.
const ROOT: PageId = 0;

/// The sibling id of the last page on a level.
const NO_SIBLING: PageId = u64::MAX;

/// Byte counts of the tree's pages and deltas, by level, shared with deferred frees.
#[derive(Debug)]
struct Bytes {
    leaves: StripedBytes,
    inner: StripedBytes,
    /// Freed delta blocks kept for reuse (counted apart: see `pool.rs`).
    pool: pool::DeltaPool,
    /// The tree's page configuration, which freeing a chain needs: kept here so that a
    /// deferred free captures this structure's `Arc` and the chain's link alone, which the
    /// epoch keeps inline (a closure of more than three words it boxes, an allocation and a
    /// free per retired chain).
    config: PageConfig,
}

impl Bytes {
    fn of(&self, level: u16) -> &StripedBytes {
        if level == 0 {
            &self.leaves
        } else {
            &self.inner
        }
    }

    /// The bytes of the tree's pages and deltas.
    fn tree(&self) -> usize {
        self.leaves.get() + self.inner.get()
    }
}

/// The right sibling id of base page `node` (kept in its header's link word).
#[inline]
fn sibling(node: &NodeHeader) -> PageId {
    node.link().addr() as PageId
}

/// Base page `node`'s range stamp: a number that names its key range, kept in the lock word
/// (base pages are never written after they are published, so never locked). Two base pages
/// with one stamp have the same low and high fences: every base page takes a stamp never
/// handed out before ([`BwTree::new_stamp`]), the halves of a split too, except the patch
/// that consolidates a chain of entry deltas, which keeps its base page's fences and copies
/// its stamp. Pages with equal fences may still have different stamps. Stamps are never 0.
fn stamp_of(node: &NodeHeader) -> u64 {
    node.lock.stamp()
}

/// Sets the right sibling id of an unpublished base page.
fn set_sibling(node: NonNull<NodeHeader>, id: PageId) {
    // SAFETY: the page is not yet shared; the link word is an atomic.
    unsafe { node.as_ref() }.set_link(std::ptr::without_provenance_mut(id as usize));
}

/// The Bw-tree (see the module docs).
pub(crate) struct BwTree {
    table: MappingTable,
    config: PageConfig,
    /// Non-unique: every key carries its tid.
    pairs: bool,
    /// A leaf's chain with more deltas than this is consolidated (inner pages: see
    /// `consolidate.rs`'s `INNER_CHAIN`).
    max_chain: u16,
    bytes: Arc<Bytes>,
    len: StripedCount,
    /// Chains retired, waiting for the epoch.
    garbage: Garbage,
    /// The size of a leaf and of an inner page with no entries and no fences (the merge
    /// threshold's zero).
    empty_bytes: [usize; 2],
    /// Splits installed (statistics).
    splits: AtomicU64,
    /// Merges started: Unlink deltas installed, of leaves and of inner pages (statistics).
    merges: [AtomicU64; 2],
    /// The last range stamp handed out (see [`stamp_of`]).
    stamps: AtomicU64,
}

impl BwTree {
    /// An empty tree: the root, an empty leaf.
    fn new(config: PageConfig, pairs: bool, max_chain: u16) -> Self {
        let tree = Self {
            table: MappingTable::new(ROOT),
            config,
            pairs,
            max_chain,
            bytes: Arc::new(Bytes {
                leaves: StripedBytes::default(),
                inner: StripedBytes::default(),
                pool: pool::DeltaPool::default(),
                config,
            }),
            len: StripedCount::default(),
            garbage: Garbage::default(),
            empty_bytes: [0; 2],
            splits: AtomicU64::new(0),
            merges: [AtomicU64::new(0), AtomicU64::new(0)],
            stamps: AtomicU64::new(0),
        };
        let mut tree = tree;
        let root = tree.table.allocate();
        debug_assert_eq!(root, ROOT);
        let mut image = crate::node::page::PageImage::default();
        let (page, size) = tree.build(&mut image, 0, 0..0, (None, None), NO_SIBLING);
        tree.table.set(ROOT, page);
        let (inner, inner_size) = image.build(&tree.config, 1, 0..0, (None, None));
        // SAFETY: built just now and never shared.
        unsafe { delta::free_base(&tree.config, inner) };
        tree.empty_bytes = [size, inner_size];
        tree
    }

    /// Whether base page `node` of `count` entries, built in `size` bytes, is under the merge
    /// threshold: at most two fifths of the entries a page of its level may hold, and entry
    /// bytes (the size beyond an empty page's) at most two fifths of such a page's; or an
    /// inner page with one child (whose fences may take more than that with long keys: its
    /// merge is checked to fit, see [`Self::try_merge`]). Leaves and inner pages share the
    /// rule (inner pages were measured through leaves, which are nearly all the pages and
    /// all the garbage). A page just split holds about half of each, so it does not merge
    /// back at once; a page under the threshold
    /// merged into a left sibling that is at most full makes at most 7/5 of a page, whose
    /// halves (7/10 each) are well above the threshold, so merges and splits do not chase
    /// each other. Random updates leave leaves emptier the lower the threshold, and every
    /// leaf carries a chain of deltas besides its page: after 10M random updates on 2
    /// threads over 1M keys (`examples/bw_garbage.rs`) a third left 14,250 leaves where a
    /// fresh tree has 10,765, and the tree 1.104x a fresh one's bytes; two fifths leave
    /// 13,037-13,162 leaves and 1.088-1.100x in ten runs (a quarter, tried first at 1M
    /// updates over 100K keys, left 1.109x). Tiny test pages (4 entries) merge at one entry.
    fn underfull(&self, node: &NodeHeader, count: usize, size: usize) -> bool {
        let level = node.level();
        let empty = self.empty_bytes[usize::from(level > 0)];
        let spare = self.config.max_bytes(level).saturating_sub(empty);
        count * 5 <= 2 * self.config.max_entries(level)
            && size.saturating_sub(empty) * 5 <= 2 * spare
            || level > 0 && count <= 1
    }

    /// Builds a base page at `level` from entries `range` of `image` (which fit), with
    /// `fences` and right sibling `right`; counts its bytes. Returns it and its size.
    fn build(
        &self,
        image: &mut crate::node::page::PageImage,
        level: u16,
        range: std::ops::Range<usize>,
        fences: (
            Option<&crate::node::slotted::VarKey>,
            Option<&crate::node::slotted::VarKey>,
        ),
        right: PageId,
    ) -> (Link, usize) {
        let (node, size) = image.build(&self.config, level, range, fences);
        set_sibling(node, right);
        self.bytes.of(level).add(size);
        (self.link_to(node, self.new_stamp()), size)
    }

    /// A range stamp never handed out before (see [`stamp_of`]).
    fn new_stamp(&self) -> u64 {
        self.stamps.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// The link to base page `node`, just built by this thread and not yet shared, with the
    /// bytes a search reads first: the header and the mid-keys after it. Gives the page
    /// range stamp `stamp` (see [`stamp_of`]).
    fn link_to(&self, node: NonNull<NodeHeader>, stamp: u64) -> Link {
        // SAFETY: the caller built the page and has not shared it, so it is live.
        let header = unsafe { node.as_ref() };
        // Base pages are never locked: the lock word is free for the stamp.
        header.lock.set_stamp(stamp);
        let count = header.count();
        Link::base(
            node,
            crate::node::page::MIDS_AT + count * self.config.mid_width().bytes(),
        )
    }

    /// Installs delta `new` on page `id`, whose chain `top` the caller read under its pin:
    /// allocates it on `top` (depth one more than `top`'s, its bytes counted) and swaps it in
    /// with one compare-and-swap. The installed delta, or `None` (the delta freed) when
    /// another thread changed the page first. Every delta enters a chain here.
    #[inline]
    fn install(&self, id: PageId, top: Link, new: &delta::NewDelta<'_>) -> Option<Link> {
        // SAFETY: `top` was read from the mapping table under the caller's pin.
        let depth = unsafe { top.depth() }.saturating_add(1);
        // SAFETY: as above.
        let (delta, size) = unsafe { delta::Delta::alloc(new, top, depth, &self.bytes.pool) };
        self.bytes.of(new.level).add(size);
        let delta = Link::delta(delta);
        if self.table.cas(id, top, delta) {
            Some(delta)
        } else {
            self.discard(delta, false);
            None
        }
    }

    /// Frees records this thread made and never published: a delta (not its `next`) or a
    /// whole new chain.
    fn discard(&self, link: Link, whole: bool) {
        // SAFETY: the record was never installed, so no other thread can reach it.
        match unsafe { link.target() } {
            Target::Null => {}
            Target::Delta(d) if !whole => {
                let level = d.level();
                // SAFETY: as above.
                let size = unsafe { delta::free_delta(NonNull::from(d), &self.bytes) };
                self.bytes.of(level).sub(size);
            }
            _ => {
                // SAFETY: as above.
                let (size, level) = unsafe { delta::free_chain(&self.config, link, &self.bytes) };
                self.bytes.of(level).sub(size);
            }
        }
    }

    /// Hands a chain replaced in the mapping table to the epoch collector.
    fn retire(&self, top: Link, guard: &Guard) {
        let bytes = Arc::clone(&self.bytes);
        let top = top.0;
        // SAFETY: the chain was unlinked by a successful compare-and-swap, so no new
        // reference to it can be made; the closure runs once every thread pinned now (and
        // so every thread that may still walk it) has unpinned.
        unsafe {
            self.garbage.defer(guard, move || {
                let (size, level) = delta::free_chain(&bytes.config, Link(top), &bytes);
                bytes.of(level).sub(size);
            });
        }
    }

    /// Descends from the root to the page at `level` routed to for `probe` (the caller's
    /// walk of it checks its fences); returns its id and the chain top read. A writer
    /// (`help`) that crosses an unfinished split posts the parent's index entry on the way.
    fn descend(&self, probe: Probe<'_>, level: u16, help: bool, guard: &Guard) -> (PageId, Link) {
        'restart: loop {
            let mut id = ROOT;
            loop {
                let top = self.table.get(id);
                // An inner page that is a base page alone is searched in place; anything
                // else (a delta, a move right, a stale route) takes the general walk below.
                // SAFETY: read from the mapping table under `guard`.
                if let Target::Base(node) = unsafe { top.target::<'_>() } {
                    if node.level() > level {
                        if let Step::Child(child) = self.route_base(node, probe) {
                            id = child;
                            continue;
                        }
                    }
                }
                // SAFETY: read from the mapping table under `guard`.
                let Some(at) = (unsafe { view::level_of(top) }) else {
                    continue 'restart;
                };
                if at <= level {
                    // The caller's own walk checks the fences (and moves right).
                    return (id, top);
                }
                match self.route(top, probe) {
                    Step::Here(..) => continue 'restart,
                    Step::Child(child) => id = child,
                    Step::Right(right, split) => {
                        if let (true, Some(split)) = (help, split) {
                            self.help_split(at, split, guard);
                        }
                        id = right;
                    }
                    // An inner page being merged away: the merge goes first.
                    Step::Left(remove) => {
                        self.help_remove(remove, guard);
                        continue 'restart;
                    }
                    Step::Restart => continue 'restart,
                }
            }
        }
    }
}

impl Drop for BwTree {
    fn drop(&mut self) {
        for id in 0..self.table.end() {
            let top = self.table.get(id);
            // SAFETY: the tree is being dropped: no thread reaches its pages; retired chains
            // are no longer in the table and are freed by the collector.
            let (size, level) = unsafe { delta::free_chain(&self.config, top, &self.bytes) };
            self.bytes.of(level).sub(size);
        }
    }
}
