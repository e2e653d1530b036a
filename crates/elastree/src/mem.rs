//! Exact memory accounting.
//!
//! Every structure counts the bytes it allocates at the moment it allocates or frees them
//! (the `Layout` size it asked the allocator for), so [`MemoryUsage`] is an exact sum, not an
//! estimate. Nodes unlinked from a concurrent tree stay counted until the epoch collector
//! actually frees them. `tests/memory_accounting.rs` checks the figures against a counting
//! global allocator.

use std::alloc::Layout;
use std::sync::atomic::{AtomicIsize, Ordering};

use crate::counter::StripedCount;

/// The bytes an index holds, by part.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryUsage {
    /// Inner (routing) nodes.
    pub inner: usize,
    /// Leaf nodes, including the keys and tids stored in them.
    pub leaves: usize,
    /// Everything else: the index object itself, filters, caches, tid arrays, counters.
    pub aux: usize,
}

impl MemoryUsage {
    /// All bytes held.
    pub fn total(&self) -> usize {
        self.inner + self.leaves + self.aux
    }
}

impl std::ops::Add for MemoryUsage {
    type Output = MemoryUsage;

    fn add(self, other: MemoryUsage) -> MemoryUsage {
        MemoryUsage {
            inner: self.inner + other.inner,
            leaves: self.leaves + other.leaves,
            aux: self.aux + other.aux,
        }
    }
}

/// A running byte count for one part of a structure, safe to update from many threads.
///
/// Signed so that a free racing ahead of the matching allocation's add on another thread
/// never wraps; [`ByteCounter::get`] clamps at zero.
#[derive(Debug, Default)]
pub struct ByteCounter(AtomicIsize);

impl ByteCounter {
    /// A counter at zero.
    pub const fn new() -> Self {
        Self(AtomicIsize::new(0))
    }

    /// Records an allocation of `bytes`.
    #[inline]
    pub fn add(&self, bytes: usize) {
        self.0.fetch_add(bytes as isize, Ordering::Relaxed);
    }

    /// Records a free of `bytes`.
    #[inline]
    pub fn sub(&self, bytes: usize) {
        self.0.fetch_sub(bytes as isize, Ordering::Relaxed);
    }

    /// The bytes currently counted.
    pub fn get(&self) -> usize {
        self.0.load(Ordering::Relaxed).max(0) as usize
    }
}

/// A [`ByteCounter`] striped by thread ([`crate::counter`]), for counts that every write
/// of a concurrent structure updates (the Bw-tree adds a delta's bytes on each write and a
/// page's on each consolidation): one shared counter would be a cache line the writing
/// threads take from each other on every operation. Exact once the writers are done (the
/// stripes are summed); [`StripedBytes::get`] clamps at zero.
#[derive(Default)]
pub(crate) struct StripedBytes(StripedCount);

impl StripedBytes {
    /// Records an allocation of `bytes`.
    #[inline]
    pub(crate) fn add(&self, bytes: usize) {
        self.0.add(bytes as isize);
    }

    /// Records a free of `bytes`.
    #[inline]
    pub(crate) fn sub(&self, bytes: usize) {
        self.0.add(-(bytes as isize));
    }

    /// The bytes currently counted.
    pub(crate) fn get(&self) -> usize {
        self.0.get()
    }
}

impl std::fmt::Debug for StripedBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.get())
    }
}

/// The bytes of the allocation behind an `Arc` whose value has layout `value`: the strong and
/// weak counts, then the value at its alignment, padded to the whole's alignment.
pub(crate) fn arc_bytes_of(value: Layout) -> usize {
    let (whole, _) = Layout::new::<[usize; 2]>()
        .extend(value)
        .expect("an Arc's layout");
    whole.pad_to_align().size()
}

/// The bytes of the allocation behind an `Arc<T>` (see [`arc_bytes_of`]).
pub(crate) fn arc_bytes<T>() -> usize {
    arc_bytes_of(Layout::new::<T>())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cache-line-aligned value sits a whole line after the two counts, and the
    /// allocation ends on a line: counting the counts as two words undercounts it.
    #[test]
    fn arc_bytes_follow_the_values_alignment() {
        #[repr(align(64))]
        struct Line {
            _bytes: [u8; 64],
        }
        assert_eq!(arc_bytes::<u64>(), 24);
        assert_eq!(arc_bytes::<[u8; 3]>(), 24);
        assert_eq!(arc_bytes::<Line>(), 128);
        assert_eq!(
            arc_bytes_of(Layout::array::<u8>(10).unwrap()),
            32,
            "an Arc<[u8]> of 10 bytes"
        );
    }
}
