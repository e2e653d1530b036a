//! Node representations behind one node ADT.
//!
//! The elastic-index paper's observation is that a B+-tree node is a small ordered map with a
//! handful of operations; the tree algorithm needs nothing else. [`NodeRepr`] is that ADT:
//! search, read an entry, insert at a position, remove, move a tail of entries to another
//! node (the heart of split and merge), and the fullness questions the tree asks. Every
//! representation implements it, so the tree in `btree/` never changes when one is added.
//! What the tree *decides* about a leaf (split it, grow it, turn it into another form, sweep
//! cold leaves) is not part of the ADT: that is the tree's leaf policy
//! (`crate::btree::LeafPolicy`), which a plain representation takes with its defaults.
//!
//! # Layout shared by every representation
//!
//! Every node begins with a [`NodeHeader`] (`#[repr(C)]`, first field), so the tree can
//! lock a node, read its level and count, and follow its link without knowing the
//! representation. A node at level 0 is a leaf: its values are tuple ids and `link` is its
//! right sibling. A node above level 0 is an inner node: entry `i` is `(separator_i,
//! child_i)`, `link` is the leftmost child, and `child_i` holds exactly the keys `k` with
//! `separator_i <= k < separator_{i+1}` (the leftmost child: `k < separator_0`).
//!
//! # Concurrency
//!
//! Nodes are read optimistically, so every field that a writer may change while a reader
//! looks is an atomic, read with relaxed loads (the version lock's fences order them; see
//! `sync`). A representation's read methods must tolerate torn state: clamp every index
//! they derive from node contents, never panic, never loop unboundedly; the tree validates
//! the version before trusting any result. Write methods are called only under the node's
//! write lock.

pub mod batch;
pub mod blind;
pub(crate) mod bytes;
pub mod mixed;
pub mod page;
pub mod seqtree;
pub mod slotted;
pub mod sorted;

use std::alloc::{alloc, alloc_zeroed, dealloc, handle_alloc_error, Layout};
use std::cmp::Ordering as CmpOrdering;
use std::fmt::Debug;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, AtomicU16, AtomicU32, AtomicU8, Ordering};

use crate::sync::VersionLock;
use batch::ScanLeaf;

/// The header every node starts with.
///
/// Invariants: `level` never changes after the node is published; `count` is the number of
/// entries (clamped by readers to the capacity); `link` is the right sibling of a leaf (null
/// for the last leaf) or the leftmost child of an inner node (never null once published).
#[repr(C)]
#[derive(Debug)]
pub struct NodeHeader {
    /// The node's optimistic version lock.
    pub lock: VersionLock,
    /// Number of entries.
    pub count: AtomicU32,
    /// 0 for a leaf; an inner node's children are at `level - 1`.
    pub level: AtomicU16,
    /// Which representation the node uses, for trees that mix representations (see
    /// [`mixed`]); 0 for a representation's standard node. Set before publication, never
    /// changed.
    pub format: AtomicU8,
    /// Leaf: right sibling; inner node: leftmost child.
    pub link: AtomicPtr<NodeHeader>,
}

impl NodeHeader {
    /// A header for a new, empty node at `level`.
    pub fn new(level: u16) -> Self {
        Self {
            lock: VersionLock::new(),
            count: AtomicU32::new(0),
            level: AtomicU16::new(level),
            format: AtomicU8::new(0),
            link: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// The node's level (0 = leaf).
    #[inline]
    pub fn level(&self) -> u16 {
        self.level.load(Ordering::Relaxed)
    }

    /// Whether this is a leaf.
    #[inline]
    pub fn is_leaf(&self) -> bool {
        self.level() == 0
    }

    /// The entry count as stored (may be torn under an optimistic read; clamp before use).
    #[inline]
    pub fn count(&self) -> usize {
        self.count.load(Ordering::Relaxed) as usize
    }

    /// Sets the entry count (write lock held).
    #[inline]
    pub fn set_count(&self, count: usize) {
        self.count.store(count as u32, Ordering::Relaxed);
    }

    /// The link: the right sibling of a leaf or the leftmost child of an inner node.
    /// Acquire, so that a node published through a link is seen initialised.
    #[inline]
    pub fn link(&self) -> *mut NodeHeader {
        self.link.load(Ordering::Acquire)
    }

    /// Sets the link (write lock held, or node not yet published).
    #[inline]
    pub fn set_link(&self, node: *mut NodeHeader) {
        self.link.store(node, Ordering::Release);
    }
}

/// Allocates a zeroed node of `layout` at `level` and writes its header; returns it and its
/// size. Every representation allocates its nodes here: a zeroed node is a valid empty node
/// of each of them (its fields are atomics, for which zero is a valid bit pattern).
pub(crate) fn alloc_zeroed_node(layout: Layout, level: u16) -> (NonNull<NodeHeader>, usize) {
    alloc_node(layout, level, true)
}

/// Allocates a node like [`alloc_zeroed_node`], but with the bytes after its header left
/// uninitialized, for a representation that writes every byte it may read before the node
/// is shared (the optimized pages that are built whole: `page::alloc_built_page`).
pub(crate) fn alloc_uninit_node(layout: Layout, level: u16) -> (NonNull<NodeHeader>, usize) {
    alloc_node(layout, level, false)
}

/// A node of `layout` at `level` with its header written, its other bytes `zeroed` or not.
fn alloc_node(layout: Layout, level: u16, zeroed: bool) -> (NonNull<NodeHeader>, usize) {
    // SAFETY: every node layout has a non-zero size (at least the header).
    let ptr = unsafe {
        if zeroed {
            alloc_zeroed(layout)
        } else {
            alloc(layout)
        }
    } as *mut NodeHeader;
    let Some(node) = NonNull::new(ptr) else {
        handle_alloc_error(layout)
    };
    // SAFETY: freshly allocated, aligned (node layouts are 8-aligned) and large enough for
    // the header.
    unsafe { node.as_ptr().write(NodeHeader::new(level)) };
    (node, layout.size())
}

/// Frees a node allocated by [`alloc_zeroed_node`] or [`alloc_uninit_node`]; returns its
/// size.
///
/// # Safety
///
/// `node` came from [`alloc_zeroed_node`] or [`alloc_uninit_node`] with this `layout`, and no
/// reference to it remains.
pub(crate) unsafe fn free_node(node: NonNull<NodeHeader>, layout: Layout) -> usize {
    // SAFETY: the caller's guarantee.
    unsafe { dealloc(node.as_ptr() as *mut u8, layout) };
    layout.size()
}

/// Asks the CPU to start loading `bytes` bytes at `data` into cache, one request per
/// 64-byte line, so that the lines a binary search will touch arrive in parallel instead of
/// one dependent miss after another. A no-op on targets without a prefetch instruction.
#[inline(always)]
pub fn prefetch<T>(data: &[T]) {
    prefetch_range(data.as_ptr() as usize, std::mem::size_of_val(data));
}

/// Asks the CPU to start loading every cache line of the `bytes` bytes at address `start`,
/// from the line holding the first byte to the one holding the last (a range that starts
/// inside a line may end in one more line than its bytes fill). The addresses need not be
/// valid (see [`prefetch_line`]).
#[inline(always)]
pub fn prefetch_range(start: usize, bytes: usize) {
    let mut line = start & !63;
    while line < start + bytes {
        prefetch_line(line);
        line += 64;
    }
}

/// Asks the CPU to start loading the cache line at `address`, which need not be valid: a
/// prefetch never faults and never reads for the program (a hint taken from memory that may
/// have been freed since is fine). A no-op on targets without a prefetch instruction.
#[inline(always)]
pub fn prefetch_line(address: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: prefetching is a hint that never faults or changes memory, whatever the
        // address.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(std::ptr::without_provenance(address)) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = address;
}

/// The result of searching a node for a key: the position of the first entry not less than
/// the key, and whether that entry's key equals it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SearchResult {
    /// Index of the first entry whose key is `>=` the probe (`count` if none).
    pub pos: usize,
    /// Whether the entry at `pos` equals the probe.
    pub found: bool,
}

/// One node representation: the node ADT the tree is written against.
///
/// # Safety
///
/// Implementors guarantee that every node pointer they hand out points to a node that
/// starts with a [`NodeHeader`], stays valid until [`NodeRepr::free`], and that their read
/// methods never read out of the node's bounds or panic, whatever (torn) contents they see.
pub unsafe trait NodeRepr: Send + Sync + Sized + 'static {
    /// Per-tree settings: capacities, page size, comparison mode.
    type Config: Clone + Debug + Send + Sync;
    /// A key prepared for searching, built once per operation.
    type Probe<'a>: Copy;
    /// An owned key: separators, scan positions, scan output.
    type Owned: Clone + Debug + Send + Sync + 'static;
    /// How a scan hands out a leaf's entries under an optimistic read
    /// ([`ScanLeaf::visit_leaf`]).
    type Batch: ScanLeaf<Self>;

    /// A short name for messages.
    const NAME: &'static str;

    /// Prepares a probe from an owned key.
    fn probe(key: &Self::Owned) -> Self::Probe<'_>;

    /// Orders two owned keys (used by `check` and by scans).
    fn compare(config: &Self::Config, a: &Self::Owned, b: &Self::Owned) -> CmpOrdering;

    /// Allocates an empty node at `level`; returns it and its size in bytes.
    fn alloc(config: &Self::Config, level: u16) -> (NonNull<NodeHeader>, usize);

    /// Frees a node allocated by [`NodeRepr::alloc`]; returns its size in bytes.
    ///
    /// # Safety
    ///
    /// `node` came from `alloc` of this representation with this config, and no reference
    /// to it remains (the epoch collector guarantees this for unlinked nodes).
    unsafe fn free(config: &Self::Config, node: NonNull<NodeHeader>) -> usize;

    /// The most entries a node at this node's level may hold; readers clamp counts to it.
    fn capacity(node: &NodeHeader, config: &Self::Config) -> usize;

    /// The entry count clamped to the capacity, safe to loop over under optimistic reads.
    #[inline]
    fn count(node: &NodeHeader, config: &Self::Config) -> usize {
        node.count().min(Self::capacity(node, config))
    }

    /// Searches for the probe; tolerant of torn contents.
    fn search(node: &NodeHeader, config: &Self::Config, probe: Self::Probe<'_>) -> SearchResult;

    /// The key of entry `i` (`i < count`); tolerant of torn contents.
    fn key_at(node: &NodeHeader, config: &Self::Config, i: usize) -> Self::Owned;

    /// Writes the key of entry `i` into `out`, reusing what `out` holds (a scan copies every
    /// visited key this way, so that it allocates nothing per key); tolerant of torn
    /// contents. The default assigns [`NodeRepr::key_at`].
    #[inline]
    fn key_into(node: &NodeHeader, config: &Self::Config, i: usize, out: &mut Self::Owned) {
        *out = Self::key_at(node, config, i);
    }

    /// The value of entry `i`: a tid in a leaf, a child pointer in an inner node.
    fn value_at(node: &NodeHeader, config: &Self::Config, i: usize) -> u64;

    /// Overwrites the value of entry `i`. Write lock held.
    fn set_value(node: &NodeHeader, config: &Self::Config, i: usize, value: u64);

    /// Whether one more entry with this key fits. For inner nodes the tree asks with the
    /// longest possible key (`None`), so that a child split can always post its separator.
    fn has_room(node: &NodeHeader, config: &Self::Config, probe: Option<Self::Probe<'_>>) -> bool;

    /// Inserts `(key, value)` at position `i`, shifting later entries right. Write lock
    /// held, `has_room` true.
    fn insert_at(
        node: &NodeHeader,
        config: &Self::Config,
        i: usize,
        key: Self::Probe<'_>,
        value: u64,
    );

    /// Removes entry `i`, shifting later entries left. Write lock held.
    fn remove_at(node: &NodeHeader, config: &Self::Config, i: usize);

    /// Appends the entries `from..count` of `src` to the end of `dst` and truncates `src`
    /// to `from` entries. Both write-locked (or `dst` unpublished); `dst` has room.
    fn move_tail(src: &NodeHeader, from: usize, dst: &NodeHeader, config: &Self::Config);

    /// Where to split a full node: the index of the first entry of the right half.
    fn split_point(node: &NodeHeader, config: &Self::Config) -> usize;

    /// The separator the parent gets when leaf `node` splits at `at` (`0 < at < count`):
    /// any key `s` with `key(at - 1) < s <= key(at)`. The default is `key(at)`; a
    /// representation may post a shorter one.
    #[inline]
    fn separator(node: &NodeHeader, config: &Self::Config, at: usize) -> Self::Owned {
        Self::key_at(node, config, at)
    }

    /// Splits `node` at `at` (from [`NodeRepr::split_point`]) into itself and a new right
    /// node, which it returns with its size: a leaf keeps entries `..at` and the new node
    /// gets `at..`; an inner node gives entry `at` up as `separator` (its child becomes the
    /// new node's leftmost child) and the new node gets the entries after it. `separator` is
    /// what the parent gets for the new node; `appending` says the split makes room past the
    /// last key of the last leaf. The tree links a new leaf into the leaf chain. Write lock
    /// held on `node`. The default allocates with [`NodeRepr::alloc_sibling`] and moves the
    /// tail.
    fn split_off(
        node: &NodeHeader,
        config: &Self::Config,
        at: usize,
        separator: &Self::Owned,
        appending: bool,
    ) -> (NonNull<NodeHeader>, usize) {
        let _ = (separator, appending);
        let (right_ptr, bytes) = Self::alloc_sibling(config, node);
        // SAFETY: freshly allocated, not yet shared.
        let right = unsafe { right_ptr.as_ref() };
        if node.is_leaf() {
            Self::move_tail(node, at, right, config);
        } else {
            let first_child = Self::value_at(node, config, at) as *mut NodeHeader;
            Self::move_tail(node, at + 1, right, config);
            Self::remove_at(node, config, at);
            right.set_link(first_child);
        }
        (right_ptr, bytes)
    }

    /// Folds `right` into `left`, its left neighbour under the same parent: an inner pair
    /// takes the parent's `separator` between them, with `right`'s leftmost child. Write
    /// locks held on both; they fit ([`NodeRepr::fits_merge`]). The tree relinks the leaf
    /// chain and retires `right`.
    fn merge_from(
        left: &NodeHeader,
        right: &NodeHeader,
        config: &Self::Config,
        separator: Option<&Self::Owned>,
    ) {
        if let Some(separator) = separator {
            let count = left.count();
            Self::insert_at(
                left,
                config,
                count,
                Self::probe(separator),
                right.link() as u64,
            );
        }
        Self::move_tail(right, 0, left, config);
    }

    /// Whether all entries of `right`, plus `extra` entries of the longest key, fit in
    /// `left`.
    fn fits_merge(
        left: &NodeHeader,
        right: &NodeHeader,
        extra: usize,
        config: &Self::Config,
    ) -> bool;

    /// Whether the node holds so little that it should be merged with a sibling.
    fn is_underfull(node: &NodeHeader, config: &Self::Config) -> bool;

    /// Checks representation-level invariants (entries sorted, counts and offsets in
    /// bounds). Called from the tree's `check` with no concurrent writer.
    fn check_node(node: &NodeHeader, config: &Self::Config) -> Result<(), String>;

    // Optional parts of the ADT; the defaults suit a representation with one node form and
    // its keys inside the node, and compile away.

    /// Checks that a node that keeps its fence keys keeps the bounds its ancestors'
    /// separators give it (`None`: unbounded). The default keeps no fences.
    fn check_fences(
        _node: &NodeHeader,
        _config: &Self::Config,
        _low: Option<&Self::Owned>,
        _high: Option<&Self::Owned>,
    ) -> Result<(), String> {
        Ok(())
    }

    /// Bytes the node spends on its keys (for the tree's shape: what key compression saves).
    /// The default: the size of an owned key per entry, right for fixed-size keys stored as
    /// they are.
    fn key_bytes(node: &NodeHeader, config: &Self::Config) -> usize {
        Self::count(node, config) * std::mem::size_of::<Self::Owned>()
    }

    /// Allocates an empty node to receive the right half of `node` in a split.
    #[inline]
    fn alloc_sibling(config: &Self::Config, node: &NodeHeader) -> (NonNull<NodeHeader>, usize) {
        Self::alloc(config, node.level())
    }

    /// Hints that a scan is about to read the keys of entries `from..to` of a leaf (a
    /// representation with indirect keys starts loading them). Read under an optimistic
    /// version; must tolerate torn contents.
    #[inline]
    fn prefetch_keys(_node: &NodeHeader, _config: &Self::Config, _from: usize, _to: usize) {}

    /// Whether trees of this representation start inserts at the thread's insert finger
    /// (`btree/finger.rs`) when they can: on for the optimized pages, whose clustered
    /// inserts (a tenant's or a table's keys under one prefix) it was measured on.
    const INSERT_FINGER: bool = false;

    /// Whether `probe` lies below `node`'s high fence (the bound its keys stay below; a node
    /// without one, the rightmost of its level, bounds nothing): how an insert finger takes
    /// a key past the node's last separator (a stream of ascending keys). Read under an
    /// optimistic version; must tolerate torn contents. Representations that keep no fences
    /// answer `false`.
    #[inline]
    fn below_high_fence(
        _node: &NodeHeader,
        _config: &Self::Config,
        _probe: Self::Probe<'_>,
    ) -> bool {
        false
    }

    /// Bytes the representation holds outside the nodes the tree counts (counted as
    /// leaves).
    #[inline]
    fn extra_leaf_bytes(_config: &Self::Config) -> usize {
        0
    }
}
