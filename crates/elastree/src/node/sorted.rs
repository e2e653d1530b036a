//! The standard sorted node for fixed-width keys (8 or 16 bytes), compared as integers.
//!
//! # Layout
//!
//! One allocation, 8-byte aligned, sized for the node's capacity `cap` (the tree's leaf or
//! inner capacity, chosen by level):
//!
//! ```text
//! offset 0       NodeHeader (24 bytes: lock, count, level, link)
//! offset 24      entries: cap x (key words, value word), each word an AtomicU64
//!                  key:   u64: one word; u128: two, high then low
//!                  value: leaf: tid; inner node: child pointer
//! ```
//!
//! Each key sits next to its value, so the cache line where a search ends also holds the
//! value (or child pointer) it returns; a search prefetches the node's entries up front so
//! the lines it probes arrive in parallel.
//!
//! Invariants (when no writer holds the lock): `count <= cap`; the keys of entries
//! `0..count` strictly ascending; entries at `count..cap` are meaningless. A key is stored as
//! the big-endian integer of its bytes, so integer order equals byte order and the 8- and
//! 16-byte fast paths compare with one or two integer comparisons.

use std::alloc::Layout;
use std::cmp::Ordering as CmpOrdering;
use std::fmt::Debug;
use std::marker::PhantomData;
use std::mem::size_of;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

use super::{NodeHeader, NodeRepr, SearchResult};

/// The largest capacity a sorted node may be configured with.
pub const MAX_CAPACITY: usize = 1024;
/// The smallest capacity: a split must leave at least two entries on each side.
pub const MIN_CAPACITY: usize = 4;

/// An integer key type stored in atomic cells.
pub trait FixedKey: Copy + Ord + Debug + Send + Sync + 'static {
    /// Bytes per key.
    const BYTES: usize;
    /// Stores `key` into the cell at `cell` (write lock held).
    fn store(cell: &[AtomicU64], key: Self);
    /// Loads a possibly torn key from the cell.
    fn load(cell: &[AtomicU64]) -> Self;
}

impl FixedKey for u64 {
    const BYTES: usize = 8;
    #[inline]
    fn store(cell: &[AtomicU64], key: Self) {
        cell[0].store(key, Ordering::Relaxed);
    }
    #[inline]
    fn load(cell: &[AtomicU64]) -> Self {
        cell[0].load(Ordering::Relaxed)
    }
}

impl FixedKey for u128 {
    const BYTES: usize = 16;
    #[inline]
    fn store(cell: &[AtomicU64], key: Self) {
        cell[0].store((key >> 64) as u64, Ordering::Relaxed);
        cell[1].store(key as u64, Ordering::Relaxed);
    }
    #[inline]
    fn load(cell: &[AtomicU64]) -> Self {
        let hi = cell[0].load(Ordering::Relaxed) as u128;
        let lo = cell[1].load(Ordering::Relaxed) as u128;
        (hi << 64) | lo
    }
}

/// Capacities of the sorted nodes of one tree.
#[derive(Debug, Clone, Copy)]
pub struct SortedConfig {
    /// Most entries in a leaf.
    pub leaf_capacity: usize,
    /// Most separators in an inner node.
    pub inner_capacity: usize,
}

impl SortedConfig {
    /// The capacity of a node at `level`.
    #[inline]
    fn capacity(&self, level: u16) -> usize {
        if level == 0 {
            self.leaf_capacity
        } else {
            self.inner_capacity
        }
    }
}

/// The sorted node representation for keys of type `K`.
#[derive(Debug)]
pub struct Sorted<K>(PhantomData<K>);

const HEADER_BYTES: usize = size_of::<NodeHeader>();
const _: () = assert!(HEADER_BYTES == 24);

impl<K: FixedKey> Sorted<K> {
    /// Words of a key.
    const WORDS: usize = K::BYTES / 8;
    /// Words of an entry: the key, then the value.
    const STRIDE: usize = Self::WORDS + 1;

    fn layout(cap: usize) -> Layout {
        let bytes = HEADER_BYTES + cap * Self::STRIDE * 8;
        Layout::from_size_align(bytes, 8).expect("node layout")
    }

    #[inline]
    fn capacity_of(node: &NodeHeader, config: &SortedConfig) -> usize {
        config.capacity(node.level())
    }

    /// The entry words of a node and its capacity.
    #[inline]
    fn entries<'n>(node: &'n NodeHeader, config: &SortedConfig) -> (&'n [AtomicU64], usize) {
        let cap = Self::capacity_of(node, config);
        let base = node as *const NodeHeader as *const u8;
        // SAFETY: `node` was allocated by `alloc` with `layout(cap)` for this level's
        // capacity, so `cap * STRIDE` words follow the header, 8-byte aligned (the header is
        // 24 bytes). The words are atomics, so shared references to them are sound while
        // other threads read and write them.
        let words = unsafe {
            std::slice::from_raw_parts(
                base.add(HEADER_BYTES) as *const AtomicU64,
                cap * Self::STRIDE,
            )
        };
        (words, cap)
    }

    #[inline]
    fn key(entries: &[AtomicU64], i: usize) -> K {
        K::load(&entries[i * Self::STRIDE..i * Self::STRIDE + Self::WORDS])
    }

    #[inline]
    fn value(entries: &[AtomicU64], i: usize) -> &AtomicU64 {
        &entries[i * Self::STRIDE + Self::WORDS]
    }

    #[inline]
    fn set_key(entries: &[AtomicU64], i: usize, key: K) {
        K::store(
            &entries[i * Self::STRIDE..i * Self::STRIDE + Self::WORDS],
            key,
        )
    }

    /// Copies entry `from` of `src` over entry `to` of `dst` (write lock held on `dst`).
    #[inline]
    fn copy_entry(src: &[AtomicU64], from: usize, dst: &[AtomicU64], to: usize) {
        for w in 0..Self::STRIDE {
            let word = src[from * Self::STRIDE + w].load(Ordering::Relaxed);
            dst[to * Self::STRIDE + w].store(word, Ordering::Relaxed);
        }
    }

    /// Count clamped to the capacity, so torn counts never index out of bounds.
    #[inline]
    fn clamped_count(node: &NodeHeader, cap: usize) -> usize {
        node.count().min(cap)
    }
}

// SAFETY: `alloc` returns nodes that begin with a `NodeHeader` and are freed only by `free`;
// every read method clamps positions to the capacity the node was allocated with, so torn
// contents can produce wrong answers (rejected by validation) but never out-of-bounds reads.
unsafe impl<K: FixedKey> NodeRepr for Sorted<K> {
    type Config = SortedConfig;
    type Probe<'a> = K;
    type Owned = K;
    type Batch = super::batch::SlotBatch<Self::Owned>;

    const NAME: &'static str = "sorted";

    #[inline]
    fn probe(key: &K) -> K {
        *key
    }

    fn compare(_: &SortedConfig, a: &K, b: &K) -> CmpOrdering {
        a.cmp(b)
    }

    fn alloc(config: &SortedConfig, level: u16) -> (NonNull<NodeHeader>, usize) {
        super::alloc_zeroed_node(Self::layout(config.capacity(level)), level)
    }

    unsafe fn free(config: &SortedConfig, node: NonNull<NodeHeader>) -> usize {
        // SAFETY: the caller guarantees exclusive access to a node from `alloc`, which used
        // this layout (capacity by level; the level never changes).
        unsafe { super::free_node(node, Self::layout(config.capacity(node.as_ref().level()))) }
    }

    #[inline]
    fn capacity(node: &NodeHeader, config: &SortedConfig) -> usize {
        Self::capacity_of(node, config)
    }

    #[inline]
    fn search(node: &NodeHeader, config: &SortedConfig, probe: K) -> SearchResult {
        let (keys, cap) = Self::entries(node, config);
        let count = Self::clamped_count(node, cap);
        super::prefetch(&keys[..count * Self::STRIDE]);
        // Branchless lower bound: the loop runs a count-determined number of times and the
        // comparison selects with a conditional move, so random probes cost no mispredicts.
        let mut lo = 0;
        let mut len = count;
        while len > 1 {
            let half = len / 2;
            lo = if Self::key(keys, lo + half - 1) < probe {
                lo + half
            } else {
                lo
            };
            len -= half;
        }
        if len == 1 && Self::key(keys, lo) < probe {
            lo += 1;
        }
        let found = lo < count && Self::key(keys, lo) == probe;
        SearchResult { pos: lo, found }
    }

    #[inline]
    fn key_at(node: &NodeHeader, config: &SortedConfig, i: usize) -> K {
        let (entries, cap) = Self::entries(node, config);
        Self::key(entries, i.min(cap - 1))
    }

    #[inline]
    fn value_at(node: &NodeHeader, config: &SortedConfig, i: usize) -> u64 {
        let (entries, cap) = Self::entries(node, config);
        Self::value(entries, i.min(cap - 1)).load(Ordering::Relaxed)
    }

    #[inline]
    fn set_value(node: &NodeHeader, config: &SortedConfig, i: usize, value: u64) {
        let (entries, _) = Self::entries(node, config);
        Self::value(entries, i).store(value, Ordering::Release);
    }

    #[inline]
    fn has_room(node: &NodeHeader, config: &SortedConfig, _: Option<K>) -> bool {
        node.count() < Self::capacity_of(node, config)
    }

    fn insert_at(node: &NodeHeader, config: &SortedConfig, i: usize, key: K, value: u64) {
        let (entries, cap) = Self::entries(node, config);
        let count = node.count();
        debug_assert!(count < cap && i <= count);
        for j in (i..count).rev() {
            Self::copy_entry(entries, j, entries, j + 1);
        }
        Self::set_key(entries, i, key);
        // Release: an inner node's child must be seen initialised by readers that load it.
        Self::value(entries, i).store(value, Ordering::Release);
        node.set_count(count + 1);
    }

    fn remove_at(node: &NodeHeader, config: &SortedConfig, i: usize) {
        let (entries, _) = Self::entries(node, config);
        let count = node.count();
        debug_assert!(i < count);
        for j in i + 1..count {
            Self::copy_entry(entries, j, entries, j - 1);
        }
        node.set_count(count - 1);
    }

    fn move_tail(src: &NodeHeader, from: usize, dst: &NodeHeader, config: &SortedConfig) {
        let (src_entries, cap) = Self::entries(src, config);
        let (dst_entries, _) = Self::entries(dst, config);
        let (src_count, dst_count) = (src.count(), dst.count());
        debug_assert!(from <= src_count && dst_count + src_count - from <= cap);
        for (j, i) in (from..src_count).enumerate() {
            Self::copy_entry(src_entries, i, dst_entries, dst_count + j);
        }
        dst.set_count(dst_count + src_count - from);
        src.set_count(from);
    }

    fn split_point(node: &NodeHeader, _: &SortedConfig) -> usize {
        node.count() / 2
    }

    fn fits_merge(
        left: &NodeHeader,
        right: &NodeHeader,
        extra: usize,
        config: &SortedConfig,
    ) -> bool {
        left.count() + right.count() + extra <= Self::capacity_of(left, config)
    }

    fn is_underfull(node: &NodeHeader, config: &SortedConfig) -> bool {
        node.count() < Self::capacity_of(node, config) / 4
    }

    fn check_node(node: &NodeHeader, config: &SortedConfig) -> Result<(), String> {
        let (keys, cap) = Self::entries(node, config);
        let count = node.count();
        if count > cap {
            return Err(format!("count {count} exceeds capacity {cap}"));
        }
        for i in 1..count {
            let (a, b) = (Self::key(keys, i - 1), Self::key(keys, i));
            if a >= b {
                return Err(format!("keys out of order at {i}: {a:?} >= {b:?}"));
            }
        }
        Ok(())
    }
}
