//! The Bw-tree (`../shared/papers/002`): a latch-free B+-tree whose pages are never changed
//! in place. A page is named by a logical id; the mapping table ([`table`]) maps it to the
//! top of its delta chain. Writers prepend a delta record ([`delta`]) with a
//! compare-and-swap on that entry; readers walk the chain from one read of the entry and
//! never wait, retry on a lock, or write shared memory (but the epoch pin).
//!
//! * `table.rs`: the mapping table, growable while read, ids recycled through epochs;
//! * `delta.rs`: delta records and the tagged link to a chain's top (the raw pointers);
//! * `key.rs`: keys with tids, as every walk compares them;
//! * `view.rs`: walking a chain: lookups, routing, fence checks;
//! * `consolidate.rs`: consolidation into an optimized page, splits, root growth, and posting
//!   (or helping post) the parent's index entry;
//! * `write.rs`: inserts and removes;
//! * `scan.rs`: range scans, a page at a time, read in place;
//! * `cursor.rs`: physiological and prefix cursors (section V);
//! * `check.rs`: the invariant walk;
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
//! low fence (the empty key when unbounded). Low fences never change (pages are not merged:
//! see below), so a page reached from its parent or its left sibling never starts after the
//! key sought.
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
//! Pages are not merged. Memory stays bounded after deletes because consolidation rebuilds
//! a page with exactly the bytes its live entries need (delete deltas are applied and
//! dropped): a page emptied by deletes keeps its fences and its header, some 100 bytes, and
//! no entry bytes. `tests/memory_accounting.rs` checks the bytes after deletes.
//!
//! # Garbage
//!
//! A replaced chain (consolidation, root growth) is retired through the epoch and freed
//! with its deltas and base page once every thread pinned at the time has unpinned. Records
//! never published (a lost compare-and-swap) are freed at once.

mod check;
mod consolidate;
mod cursor;
mod delta;
mod index;
mod key;
mod scan;
mod table;
mod view;
mod write;

use std::ptr::NonNull;
use std::sync::Arc;

use crossbeam_epoch::Guard;

use crate::counter::StripedCount;
use crate::mem::ByteCounter;
use crate::node::page::PageConfig;
use crate::node::NodeHeader;
use delta::{Link, Target};
use table::{MappingTable, PageId};
use view::{Probe, Step};

pub use cursor::{BwCursor, CursorStats, PrefixCursor, PrefixStats};
pub use index::{BwTreeIndex, BwTreeOptions, DEFAULT_CHAIN_LENGTH};

/// The root's id: fixed, so that the tree grows by replacing the root's chain.
const ROOT: PageId = 0;

/// The sibling id of the last page on a level.
const NO_SIBLING: PageId = u64::MAX;

/// Byte counts of the tree's pages and deltas, by level, shared with deferred frees.
#[derive(Debug, Default)]
struct Bytes {
    leaves: ByteCounter,
    inner: ByteCounter,
}

impl Bytes {
    fn of(&self, level: u16) -> &ByteCounter {
        if level == 0 {
            &self.leaves
        } else {
            &self.inner
        }
    }
}

/// The right sibling id of base page `node` (kept in its header's link word).
#[inline]
fn sibling(node: &NodeHeader) -> PageId {
    node.link().addr() as PageId
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
    /// A chain with more deltas than this is consolidated.
    max_chain: u16,
    bytes: Arc<Bytes>,
    len: StripedCount,
}

impl BwTree {
    /// An empty tree: the root, an empty leaf.
    fn new(config: PageConfig, pairs: bool, max_chain: u16) -> Self {
        let tree = Self {
            table: MappingTable::new(ROOT),
            config,
            pairs,
            max_chain,
            bytes: Arc::new(Bytes::default()),
            len: StripedCount::default(),
        };
        let root = tree.table.allocate();
        debug_assert_eq!(root, ROOT);
        let mut image = crate::node::page::PageImage::default();
        let page = tree.build(&mut image, 0, 0..0, (None, None), NO_SIBLING);
        tree.table.set(ROOT, page);
        tree
    }

    /// Builds a base page at `level` from entries `range` of `image` (which fit), with
    /// `fences` and right sibling `right`; counts its bytes.
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
    ) -> Link {
        let (node, size) = image.build(&self.config, level, range, fences);
        set_sibling(node, right);
        self.bytes.of(level).add(size);
        Link::base(node)
    }

    /// Allocates a delta on `next` (depth one more than `next`'s); counts its bytes.
    fn new_delta(&self, new: &delta::NewDelta<'_>, next: Link) -> Link {
        // SAFETY: `next` was read from the mapping table under the caller's pin.
        let depth = unsafe { next.depth() }.saturating_add(1);
        let (delta, size) = delta::Delta::alloc(new, next, depth);
        self.bytes.of(new.level).add(size);
        Link::delta(delta)
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
                let size = unsafe { delta::free_delta(NonNull::from(d)) };
                self.bytes.of(level).sub(size);
            }
            _ => {
                // SAFETY: as above.
                let (size, level) = unsafe { delta::free_chain(&self.config, link) };
                self.bytes.of(level).sub(size);
            }
        }
    }

    /// Hands a chain replaced in the mapping table to the epoch collector.
    fn retire(&self, top: Link, guard: &Guard) {
        let config = self.config;
        let bytes = Arc::clone(&self.bytes);
        let top = top.0;
        // SAFETY: the chain was unlinked by a successful compare-and-swap, so no new
        // reference to it can be made; the closure runs once every thread pinned now (and
        // so every thread that may still walk it) has unpinned.
        unsafe {
            guard.defer_unchecked(move || {
                let (size, level) = delta::free_chain(&config, Link(top));
                bytes.of(level).sub(size);
            });
        }
    }

    /// Descends from the root to the page at `level` routed to for `probe` (the caller's
    /// walk of it checks its fences); returns its id and the chain top read. A writer (`help`) that crosses an unfinished split posts
    /// the parent's index entry on the way.
    fn descend(&self, probe: Probe<'_>, level: u16, help: bool, guard: &Guard) -> (PageId, Link) {
        'restart: loop {
            let mut id = ROOT;
            loop {
                let top = self.table.get(id);
                // SAFETY: read from the mapping table under `guard`.
                let Some(at) = (unsafe { view::level_of(top) }) else {
                    continue 'restart;
                };
                if at <= level {
                    // The caller's own walk checks the fences (and moves right).
                    return (id, top);
                }
                match self.route(top, probe) {
                    Step::Here(_) => continue 'restart,
                    Step::Child(child) => id = child,
                    Step::Right(right, split) => {
                        if let (true, Some(split)) = (help, split) {
                            self.help_split(at, split, guard);
                        }
                        id = right;
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
            let (size, level) = unsafe { delta::free_chain(&self.config, top) };
            self.bytes.of(level).sub(size);
        }
    }
}
