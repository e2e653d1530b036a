//! The concurrent B+-tree with optimistic lock coupling (OLC), generic over the node
//! representation ([`NodeRepr`](crate::node::NodeRepr)).
//!
//! # Protocol
//!
//! * Readers descend from the root taking only optimistic versions. At every level they read
//!   the child pointer, validate the parent (so the pointer is not torn), begin reading the
//!   child, and validate the parent again (so the child was still the right one when its
//!   version was taken). They never write shared memory.
//! * Writers descend the same way and upgrade (compare-exchange) only the nodes they change:
//!   the leaf for an in-place insert or remove; parent and node for a split; parent, left
//!   and right sibling for a merge. An upgrade that fails restarts the operation from the
//!   root. Inner nodes that are full are split on the way down, so a parent always has room
//!   for the separator of a child split.
//! * Merges always fold the right node of a pair into the left one and mark the right node
//!   obsolete, so entries only ever move rightward by splits and into the left node by
//!   merges of a node that readers will see as obsolete. Leaves are chained left to right
//!   (`link`), and ascending scans follow that chain.
//! * Unlinked nodes are retired to `crossbeam-epoch`; every operation runs pinned, so a node
//!   stays allocated while any thread may still read it.

mod check;
mod elastic;
mod finger;
mod index;
mod insert;
pub mod policy;
mod remove;
mod replace;
pub mod scan;
mod shape;
mod sweep;

use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::Arc;

use crossbeam_epoch::{self as epoch, Guard};

use crate::counter::StripedCount;
use crate::mem::{ByteCounter, MemoryUsage};
use crate::node::NodeHeader;

use crate::sync::{Optimistic, Restart};

pub use elastic::{Elastic, ElasticExtra, ElasticForm, ElasticIndex, SEQTREE_LEAF_CAPACITY};
pub use index::{
    BTreeIndex, BTreeOptions, Family, PageOrganization, Plain, TreeIndex, DEFAULT_PAGE_BYTES,
    MIN_PAGE_BYTES,
};
pub use policy::{LeafPolicy, Overflow, Replacement, Underflow};
pub use shape::LevelShape;

/// Byte counts of a tree's nodes, shared with the epoch collector's deferred frees.
#[derive(Debug, Default)]
struct NodeBytes {
    inner: ByteCounter,
    leaves: ByteCounter,
}

impl NodeBytes {
    fn counter(&self, level: u16) -> &ByteCounter {
        if level == 0 {
            &self.leaves
        } else {
            &self.inner
        }
    }
}

/// A concurrent B+-tree mapping keys of representation `R` to `u64` values, unique keys.
///
/// Non-unique indexes are built on top by making the tid part of the key (see
/// [`BTreeIndex`]).
pub struct Tree<R: LeafPolicy> {
    root: AtomicPtr<NodeHeader>,
    config: R::Config,
    bytes: Arc<NodeBytes>,
    len: StripedCount,
    /// The tree's side of its threads' insert fingers (`finger.rs`).
    fingers: finger::Fingers,
    _repr: PhantomData<R>,
}

// SAFETY: all shared state is atomics; nodes are only accessed under the OLC protocol.
unsafe impl<R: LeafPolicy> Send for Tree<R> {}
// SAFETY: as above.
unsafe impl<R: LeafPolicy> Sync for Tree<R> {}

/// A node reached by a descent and its parent (`None` for the root) with the parent's child
/// slot that led to it.
type Descent<'g> = (Visit<'g>, Option<(Visit<'g>, Option<usize>)>);

/// A node reached during a descent together with the optimistic version it was read at.
#[derive(Clone, Copy)]
struct Visit<'g> {
    node: &'g NodeHeader,
    read: Optimistic<'g>,
}

impl<R: LeafPolicy> Tree<R> {
    /// An empty tree whose root is an empty leaf.
    pub fn new(config: R::Config) -> Self {
        let tree = Self {
            root: AtomicPtr::new(std::ptr::null_mut()),
            config,
            bytes: Arc::new(NodeBytes::default()),
            len: StripedCount::default(),
            fingers: finger::Fingers::new(),
            _repr: PhantomData,
        };
        let leaf = tree.alloc_node(0);
        tree.root.store(leaf.as_ptr(), Ordering::Release);
        tree
    }

    /// The tree's node settings.
    pub fn config(&self) -> &R::Config {
        &self.config
    }

    /// Number of entries (exact when no writer runs).
    pub fn len(&self) -> usize {
        self.len.get()
    }

    /// Whether the tree holds no entry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes held in separate allocations: nodes by kind, and the shared byte counters as
    /// auxiliary. The `Tree` value itself is counted by whoever holds it.
    pub fn memory(&self) -> MemoryUsage {
        MemoryUsage {
            inner: self.bytes.inner.get(),
            leaves: self.bytes.leaves.get() + R::extra_leaf_bytes(&self.config),
            // The Arc holding the counters.
            aux: crate::mem::arc_bytes::<NodeBytes>(),
        }
    }

    /// The bytes the tree's nodes hold: what an elastic tree compares with its bound.
    fn index_bytes(&self) -> usize {
        self.bytes.inner.get() + self.bytes.leaves.get() + R::extra_leaf_bytes(&self.config)
    }

    /// Looks `key` up.
    pub fn get(&self, key: R::Probe<'_>) -> Option<u64> {
        let guard = &epoch::pin();
        loop {
            if let Ok((found, convert)) = self.try_get(key, guard) {
                if let Some(action) = convert {
                    self.convert_leaf(key, action, guard);
                }
                return found;
            }
        }
    }

    /// One lookup attempt; also returns the conversion the representation asks for on the
    /// leaf it ended at (the elastic tree's expansion).
    #[allow(clippy::type_complexity)]
    fn try_get(
        &self,
        key: R::Probe<'_>,
        guard: &Guard,
    ) -> Result<(Option<u64>, Option<Overflow>), Restart> {
        let leaf = self.descend(key, 0, guard)?.0;
        let hit = R::search(leaf.node, &self.config, key);
        let value = hit
            .found
            .then(|| R::value_at(leaf.node, &self.config, hit.pos));
        let convert = R::after_lookup(leaf.node, &self.config);
        leaf.read.validate()?;
        Ok((value, convert))
    }

    fn alloc_node(&self, level: u16) -> NonNull<NodeHeader> {
        let (node, bytes) = R::alloc(&self.config, level);
        self.bytes.counter(level).add(bytes);
        node
    }

    /// Frees a node that was never published.
    fn free_unpublished(&self, node: NonNull<NodeHeader>) {
        // SAFETY: allocated by `alloc_node` and never made reachable.
        let level = unsafe { node.as_ref() }.level();
        // SAFETY: as above; nobody else can hold a reference.
        let bytes = unsafe { R::free(&self.config, node) };
        self.bytes.counter(level).sub(bytes);
    }

    /// Hands an unlinked node to the epoch collector.
    fn retire(&self, node: &NodeHeader, guard: &Guard) {
        if node.level() > 0 {
            // Before the collector gets it: a finger to it is then never followed.
            self.fingers.inner_retired();
        }
        let node = NonNull::from(node);
        let config = self.config.clone();
        let bytes = Arc::clone(&self.bytes);
        // SAFETY: the node is unlinked (and marked obsolete) under its write lock, so no new
        // reference to it can be created; the collector runs the closure only after every
        // thread pinned at the time of unlinking has unpinned.
        unsafe {
            guard.defer_unchecked(move || {
                let level = node.as_ref().level();
                let freed = R::free(&config, node);
                bytes.counter(level).sub(freed);
            });
        }
    }

    /// Reads the root optimistically.
    fn read_root<'g>(&self, _guard: &'g Guard) -> Result<Visit<'g>, Restart> {
        let ptr = self.root.load(Ordering::Acquire);
        // SAFETY: the root is never null and is kept alive by the epoch guard.
        let node: &'g NodeHeader = unsafe { &*ptr };
        let read = node.lock.read_begin()?;
        if self.root.load(Ordering::Acquire) != ptr {
            return Err(Restart);
        }
        Ok(Visit { node, read })
    }

    /// The position of the child of inner node `node` that holds `key`: `None` for the
    /// leftmost child, `Some(i)` for entry `i`.
    #[inline]
    fn child_slot(&self, node: &NodeHeader, key: R::Probe<'_>) -> Option<usize> {
        let hit = R::search(node, &self.config, key);
        let after = hit.pos + usize::from(hit.found);
        after.checked_sub(1)
    }

    /// The child pointer at `slot` of inner node `node` (may be torn: validate first).
    #[inline]
    fn child_at(&self, node: &NodeHeader, slot: Option<usize>) -> *mut NodeHeader {
        match slot {
            None => node.link(),
            Some(i) => R::value_at(node, &self.config, i) as *mut NodeHeader,
        }
    }

    /// Moves from a validated parent to the child at `ptr`, coupling the versions.
    #[inline]
    fn step<'g>(parent: &Visit<'g>, ptr: *mut NodeHeader) -> Result<Visit<'g>, Restart> {
        parent.read.validate()?;
        // SAFETY: the pointer was read from the parent at a version just validated, so it is
        // a published node; the epoch guard (lifetime 'g) keeps it allocated.
        let node: &'g NodeHeader = unsafe { &*ptr };
        let read = node.lock.read_begin()?;
        parent.read.validate()?;
        Ok(Visit { node, read })
    }

    /// Descends to the node at `level` that holds `key`; returns it and its parent (`None`
    /// when it is the root).
    fn descend<'g>(
        &self,
        key: R::Probe<'_>,
        level: u16,
        guard: &'g Guard,
    ) -> Result<Descent<'g>, Restart> {
        let mut visit = self.read_root(guard)?;
        let mut parent = None;
        if visit.node.level() < level {
            visit.read.validate()?;
            return Err(Restart);
        }
        while visit.node.level() > level {
            let slot = self.child_slot(visit.node, key);
            let child = Self::step(&visit, self.child_at(visit.node, slot))?;
            parent = Some((visit, slot));
            visit = child;
        }
        Ok((visit, parent))
    }

    /// The height of the tree (1 for a lone leaf), read optimistically.
    pub fn height(&self) -> usize {
        let _guard = epoch::pin();
        let ptr = self.root.load(Ordering::Acquire);
        // SAFETY: root is never null; the guard keeps it allocated.
        usize::from(unsafe { &*ptr }.level()) + 1
    }
}

impl<R: LeafPolicy> Drop for Tree<R> {
    fn drop(&mut self) {
        // Exclusive access: free every reachable node. Retired nodes are freed by the
        // collector, which holds its own handle on the byte counters.
        fn free_subtree<R: LeafPolicy>(tree: &Tree<R>, node: NonNull<NodeHeader>) {
            // SAFETY: `&mut self` in `drop` means no other thread uses the tree.
            let header = unsafe { node.as_ref() };
            if !header.is_leaf() {
                let count = header.count();
                free_subtree(tree, NonNull::new(header.link()).expect("leftmost child"));
                for i in 0..count {
                    let child = R::value_at(header, &tree.config, i) as *mut NodeHeader;
                    free_subtree(tree, NonNull::new(child).expect("child"));
                }
            }
            tree.free_unpublished(node);
        }
        if let Some(root) = NonNull::new(*self.root.get_mut()) {
            free_subtree(self, root);
        }
    }
}
