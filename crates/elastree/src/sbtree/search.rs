//! The search layer: a fully packed static B+-tree over the data blocks' low fences, built
//! bottom up and extended at its right end by one writer (the maintenance thread) while
//! readers search it without locks (ROWEX: readers never wait, the single writer never
//! disturbs what they read).
//!
//! # Layout
//!
//! The tree is implicit: level 0 holds one entry per indexed block (its low fence and its
//! address) in chain order; level `l + 1` holds every `fanout`-th key of level `l`, so group
//! `g` of level `l` (entries `g * fanout ..`) is the child of entry `g` of level `l + 1`.
//! No child pointers are stored and every node is full but the rightmost of each level. A
//! search bisects the last [`RECENT`] entries of level 0 first when the probe is among them
//! (delayed keys of a time series are), and descends from the top level otherwise. The
//! arrays have a fixed capacity; when level 0 is full the maintenance thread builds a layer
//! twice as large and swaps it in (the old one is freed through the epoch collector).
//!
//! Each level-0 entry also keeps its block's body address and [`Locator`] as they were when
//! the entry was written: hints that let a search start loading the block's header, the
//! body's meta record and N-ary table, and the entry its key interpolates to, all at once,
//! instead of one miss after the other ([`Hinted::prefetch`]). A body replaced since leaves
//! the hints stale; they are only ever prefetched, never read.
//!
//! # Concurrency
//!
//! Entries are written once, at indexes at or above their level's published length, and
//! published by storing the length with release ordering, level 0 first; readers load the
//! lengths with acquire ordering from the top level down, so every entry a reader reaches is
//! one it may read, and a group it descends into is published. The layer may lag the data
//! layer (blocks appended or split since the last update): a search returns the block of
//! the largest indexed low fence at or below the probe, and the caller moves right along the
//! data blocks from there.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};

use super::block::Block;
use super::body::{self, Locator, Reach};
use super::key::{first_not_below, interpolate, partition_point, Pos, SbKey};
use super::simd::Kernel;

/// The last entries of level 0 that [`SearchLayer::find_hinted`] searches before it
/// descends: more than the blocks a 16,384-key delay reaches back over (at 250 to 490
/// entries a block, 35 to 65), and a binary search over them (7 probes) costs less than a
/// four-level descent.
const RECENT: usize = 128;

/// One level: keys (and, in a non-unique index, tids) of its entries.
struct Level<K> {
    keys: Box<[UnsafeCell<K>]>,
    /// Empty in a unique index (every tid is 0).
    tids: Box<[UnsafeCell<u64>]>,
    len: AtomicUsize,
}

/// What a level-0 entry points to: its block, and the block's body address and locator when
/// the entry was written (prefetch hints; see the module docs).
struct Slot<K: SbKey> {
    block: AtomicPtr<Block<K>>,
    body: AtomicPtr<u8>,
    locator: AtomicU64,
}

/// A search's block with the hints to prefetch its lines by.
pub struct Hinted<K: SbKey> {
    /// The block.
    pub block: *mut Block<K>,
    /// Its body when the entry was written (null: none).
    body: *mut u8,
    /// The body's locator then.
    locator: Locator,
    /// The entry's low fence and the next entry's (none for the last).
    fences: (K, Option<K>),
}

impl<K: SbKey> Hinted<K> {
    /// Starts loading what a search for `key` in the block will read: the header's two
    /// lines, and from the (possibly stale) body hint the body's meta record and table and
    /// the lines of the entries within `reach` of the place that `key`'s place between the
    /// fences suggests (keys of a time series are spread about evenly). All of it arrives
    /// together instead of as a chain of misses (header, meta, table, bucket, entries), each
    /// waiting for the last.
    #[inline]
    pub fn prefetch(&self, key: K, bucket: usize, reach: Reach) {
        let block = self.block as usize;
        crate::node::prefetch_line(block);
        crate::node::prefetch_line(block + 64);
        if self.body.is_null() || self.locator == Locator::default() {
            return;
        }
        let (low, high) = self.fences;
        let rank = high.and_then(|high| interpolate(low, high, key, self.locator.count()));
        body::prefetch(self.body as usize, self.locator, bucket, rank, reach);
    }
}

/// See the module docs.
pub struct SearchLayer<K: SbKey> {
    fanout: usize,
    pairs: bool,
    /// Level 0 first.
    levels: Box<[Level<K>]>,
    /// The block (and body hint) of each level-0 entry.
    slots: Box<[Slot<K>]>,
}

// SAFETY: entries are written by one writer at a time at unpublished indexes and published
// with release stores; readers read only published entries (see the module docs).
unsafe impl<K: SbKey> Send for SearchLayer<K> {}
// SAFETY: as above.
unsafe impl<K: SbKey> Sync for SearchLayer<K> {}

impl<K: SbKey> SearchLayer<K> {
    /// An empty layer with room for `capacity` blocks (at least 1).
    pub fn new(capacity: usize, fanout: usize, pairs: bool) -> Self {
        assert!(fanout >= 2);
        let capacity = capacity.max(1);
        let mut sizes = vec![capacity];
        while *sizes.last().expect("level 0") > fanout {
            let below = *sizes.last().expect("a level");
            sizes.push(below.div_ceil(fanout));
        }
        let level = |size: usize| Level {
            keys: (0..size).map(|_| UnsafeCell::new(K::MIN)).collect(),
            tids: (0..if pairs { size } else { 0 })
                .map(|_| UnsafeCell::new(0))
                .collect(),
            len: AtomicUsize::new(0),
        };
        Self {
            fanout,
            pairs,
            levels: sizes.into_iter().map(level).collect(),
            slots: (0..capacity)
                .map(|_| Slot {
                    block: AtomicPtr::new(std::ptr::null_mut()),
                    body: AtomicPtr::new(std::ptr::null_mut()),
                    locator: AtomicU64::new(0),
                })
                .collect(),
        }
    }

    /// Bytes held in separate allocations for a layer of `capacity` blocks.
    pub fn bytes_for(capacity: usize, fanout: usize, pairs: bool) -> usize {
        let per_entry = K::BYTES + if pairs { 8 } else { 0 };
        let mut total = capacity * (per_entry + std::mem::size_of::<Slot<K>>());
        let mut size = capacity;
        let mut levels = 1;
        while size > fanout {
            size = size.div_ceil(fanout);
            total += size * per_entry;
            levels += 1;
        }
        total + levels * std::mem::size_of::<Level<K>>()
    }

    /// Bytes this layer holds in separate allocations.
    pub fn bytes(&self) -> usize {
        Self::bytes_for(self.capacity(), self.fanout, self.pairs)
    }

    /// Blocks it has room for.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Blocks indexed.
    pub fn len(&self) -> usize {
        self.levels[0].len.load(Ordering::Acquire)
    }

    /// The published keys and tids of `level` up to `len`.
    #[inline]
    fn published(&self, level: usize, len: usize) -> (&[K], &[u64]) {
        let l = &self.levels[level];
        // SAFETY: `UnsafeCell<T>` has `T`'s layout; indexes below a published length are never
        // written again (the writer writes only at or above it), so shared slices over them
        // alias no write.
        unsafe {
            let keys = std::slice::from_raw_parts(l.keys.as_ptr().cast::<K>(), len);
            let tids = if self.pairs {
                std::slice::from_raw_parts(l.tids.as_ptr().cast::<u64>(), len)
            } else {
                &[]
            };
            (keys, tids)
        }
    }

    /// In `keys[..]` (with `tids` in a non-unique index), the number of entries at or below
    /// `pos` (below it if `strict`).
    #[inline]
    fn count(&self, keys: &[K], tids: &[u64], pos: Pos<K>, strict: bool, kernel: Kernel) -> usize {
        if !self.pairs {
            return K::count(kernel, keys, pos.key, strict);
        }
        let below = K::count(kernel, keys, pos.key, true);
        let equal = keys[below..].iter().take_while(|&&k| k == pos.key).count();
        below
            + tids[below..below + equal]
                .iter()
                .filter(|&&t| if strict { t < pos.tid } else { t <= pos.tid })
                .count()
    }

    /// The block of the largest indexed low fence at or below `pos` (below it if `strict`),
    /// or `None` if every indexed fence is above (or the layer is empty).
    #[cfg(test)]
    pub fn find(&self, pos: Pos<K>, strict: bool, kernel: Kernel) -> Option<*mut Block<K>> {
        self.find_slot(pos, strict, kernel)
            .map(|i| self.block_at(i))
    }

    /// The block of the largest indexed low fence at or below `pos` (below it if `strict`),
    /// with its prefetch hints, or `None` if every indexed fence is above (or the layer is
    /// empty).
    #[inline]
    pub fn find_hinted(&self, pos: Pos<K>, strict: bool, kernel: Kernel) -> Option<Hinted<K>> {
        self.find_slot(pos, strict, kernel).map(|i| {
            let slot = &self.slots[i];
            let len = self.levels[0].len.load(Ordering::Acquire);
            let (keys, _) = self.published(0, len);
            Hinted {
                block: slot.block.load(Ordering::Relaxed),
                body: slot.body.load(Ordering::Relaxed),
                locator: Locator(slot.locator.load(Ordering::Relaxed)),
                fences: (keys[i], keys.get(i + 1).copied()),
            }
        })
    }

    /// The level-0 entry of [`SearchLayer::find_hinted`].
    #[inline]
    fn find_slot(&self, pos: Pos<K>, strict: bool, kernel: Kernel) -> Option<usize> {
        // The newest blocks first: delayed keys of a time series land in them, and a binary
        // search of the last fences of level 0 costs less than a descent.
        let len = self.levels[0].len.load(Ordering::Acquire);
        if len > RECENT {
            let (keys, tids) = self.published(0, len);
            let pairs = self.pairs;
            // Fence `i` is at or below `pos` (below it, `strict`).
            let before = |i: usize| {
                let fence = Pos::of(keys[i], if pairs { tids[i] } else { 0 }, pairs);
                if strict {
                    fence.below(pos, pairs)
                } else {
                    !pos.below(fence, pairs)
                }
            };
            let first = len - RECENT;
            if before(first) {
                // The last such fence is in `first..len`.
                return Some(partition_point((first + 1, len), before) - 1);
            }
        }
        let top = self.levels.len() - 1;
        let mut at = 0usize;
        for level in (0..=top).rev() {
            let len = self.levels[level].len.load(Ordering::Acquire);
            let start = at * self.fanout;
            let end = if level == top {
                len
            } else {
                (start + self.fanout).min(len)
            };
            if start >= end {
                return None;
            }
            let (keys, tids) = self.published(level, end);
            let tids = if self.pairs { &tids[start..end] } else { tids };
            let c = self.count(&keys[start..end], tids, pos, strict, kernel);
            if c == 0 {
                // Only possible in the top level's first group: below every fence.
                return None;
            }
            at = start + c - 1;
        }
        Some(at)
    }

    /// Appends the entry of `block`, whose low fence `low` is above every indexed one and
    /// whose body is (or was lately) at `body`; `false` if the layer is full. Single writer
    /// only (the maintenance mutex's holder).
    pub fn push(&self, low: Pos<K>, block: *mut Block<K>, body: *mut u8, locator: Locator) -> bool {
        let n = self.levels[0].len.load(Ordering::Relaxed);
        if n == self.capacity() {
            return false;
        }
        self.slots[n].block.store(block, Ordering::Relaxed);
        self.slots[n].body.store(body, Ordering::Relaxed);
        self.slots[n].locator.store(locator.0, Ordering::Relaxed);
        let mut index = n;
        let mut lengths = Vec::with_capacity(self.levels.len());
        for level in self.levels.iter() {
            // SAFETY: `index` is at the level's unpublished end: no reader reads it, and the
            // single writer (the caller's promise) writes it alone.
            unsafe {
                *level.keys[index].get() = low.key;
                if self.pairs {
                    *level.tids[index].get() = low.tid;
                }
            }
            lengths.push(index + 1);
            if !index.is_multiple_of(self.fanout) {
                break;
            }
            index /= self.fanout;
            if lengths.len() == self.levels.len() || index >= self.levels[lengths.len()].keys.len()
            {
                break;
            }
        }
        // Publish bottom up: a reader that sees an upper entry finds its group published.
        for (level, len) in lengths.into_iter().enumerate() {
            self.levels[level].len.store(len, Ordering::Release);
        }
        true
    }

    /// How many indexed low fences are below `pos` (a binary search of level 0).
    pub fn count_below(&self, pos: Pos<K>) -> usize {
        let len = self.len();
        let (keys, tids) = self.published(0, len);
        let at = |i: usize| Pos {
            key: keys[i],
            tid: if self.pairs { tids[i] } else { 0 },
        };
        first_not_below((0, len), pos, self.pairs, at)
    }

    /// The block of entry `i` (below [`SearchLayer::len`]).
    pub fn block_at(&self, i: usize) -> *mut Block<K> {
        self.slots[i].block.load(Ordering::Relaxed)
    }

    /// Pushes the first `n` entries of `other` (single writer, as [`SearchLayer::push`]).
    pub fn push_prefix_of(&self, other: &SearchLayer<K>, n: usize) {
        let (keys, tids) = other.published(0, n);
        for i in 0..n {
            let low = Pos {
                key: keys[i],
                tid: if self.pairs { tids[i] } else { 0 },
            };
            let body = other.slots[i].body.load(Ordering::Relaxed);
            let locator = Locator(other.slots[i].locator.load(Ordering::Relaxed));
            let pushed = self.push(low, other.block_at(i), body, locator);
            debug_assert!(pushed, "the new layer has room for the old one's prefix");
        }
    }

    /// The indexed entries in order: low fence and block (for checks and rebuilds).
    pub fn entries(&self) -> Vec<(Pos<K>, *mut Block<K>)> {
        let len = self.len();
        let (keys, tids) = self.published(0, len);
        (0..len)
            .map(|i| {
                let pos = Pos {
                    key: keys[i],
                    tid: if self.pairs { tids[i] } else { 0 },
                };
                (pos, self.block_at(i))
            })
            .collect()
    }

    /// Checks the implicit tree: level 0 strictly ascending, and entry `g` of every upper
    /// level equal to the first entry of group `g` below it.
    pub fn check(&self) -> Result<(), String> {
        let lengths: Vec<usize> = self
            .levels
            .iter()
            .map(|l| l.len.load(Ordering::Acquire))
            .collect();
        let (keys, tids) = self.published(0, lengths[0]);
        let pos = |keys: &[K], tids: &[u64], i: usize| Pos {
            key: keys[i],
            tid: if self.pairs { tids[i] } else { 0 },
        };
        for i in 1..lengths[0] {
            if pos(keys, tids, i - 1) >= pos(keys, tids, i) {
                return Err(format!(
                    "search layer entries {} and {i} out of order",
                    i - 1
                ));
            }
        }
        for level in 1..self.levels.len() {
            let (below_keys, below_tids) = self.published(level - 1, lengths[level - 1]);
            let (keys, tids) = self.published(level, lengths[level]);
            if lengths[level] != lengths[level - 1].div_ceil(self.fanout) {
                return Err(format!(
                    "search layer level {level} has {} entries for {} below",
                    lengths[level],
                    lengths[level - 1]
                ));
            }
            for g in 0..lengths[level] {
                if pos(keys, tids, g) != pos(below_keys, below_tids, g * self.fanout) {
                    return Err(format!(
                        "search layer level {level} entry {g} is not its group's first"
                    ));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake(i: usize) -> *mut Block<u64> {
        (8 * (i + 1)) as *mut Block<u64>
    }

    #[test]
    fn every_fence_finds_its_block_and_between_finds_the_one_below() {
        for fanout in [2usize, 3, 16] {
            let layer = SearchLayer::<u64>::new(300, fanout, false);
            assert_eq!(
                layer.find(Pos::of(5, 0, false), false, Kernel::detect()),
                None
            );
            for i in 0..300 {
                assert!(layer.push(
                    Pos::of(i as u64 * 10, 0, false),
                    fake(i),
                    std::ptr::null_mut(),
                    Locator::default()
                ));
                layer.check().unwrap();
                for j in 0..=i {
                    let probe = Pos::of(j as u64 * 10 + 5, 0, false);
                    assert_eq!(
                        layer.find(probe, false, Kernel::detect()),
                        Some(fake(j)),
                        "fanout {fanout}"
                    );
                    let exact = Pos::of(j as u64 * 10, 0, false);
                    assert_eq!(layer.find(exact, false, Kernel::detect()), Some(fake(j)));
                    let below = layer.find(exact, true, Kernel::detect());
                    assert_eq!(below, j.checked_sub(1).map(fake));
                }
            }
            assert!(
                !layer.push(
                    Pos::of(100_000, 0, false),
                    fake(301),
                    std::ptr::null_mut(),
                    Locator::default()
                ),
                "full"
            );
            assert_eq!(layer.entries().len(), 300);
        }
    }

    #[test]
    fn pairs_compare_tids_among_equal_keys() {
        let layer = SearchLayer::<u64>::new(10, 2, true);
        for (i, tid) in [1u64, 5, 9].into_iter().enumerate() {
            layer.push(
                Pos::of(7, tid, true),
                fake(i),
                std::ptr::null_mut(),
                Locator::default(),
            );
        }
        let k = Kernel::detect();
        assert_eq!(layer.find(Pos::of(7, 0, true), false, k), None);
        assert_eq!(layer.find(Pos::of(7, 5, true), false, k), Some(fake(1)));
        assert_eq!(layer.find(Pos::of(7, 5, true), true, k), Some(fake(0)));
        assert_eq!(layer.find(Pos::of(8, 0, true), false, k), Some(fake(2)));
        // Enough entries for the recent ones to be counted before a descent.
        let layer = SearchLayer::<u64>::new(300, 4, true);
        let fence = |i: usize| Pos::of(i as u64 / 3, i as u64 % 3 * 2, true);
        for i in 0..300 {
            layer.push(fence(i), fake(i), std::ptr::null_mut(), Locator::default());
        }
        for i in 0..300 {
            let exact = fence(i);
            assert_eq!(layer.find(exact, false, k), Some(fake(i)));
            assert_eq!(layer.find(exact, true, k), i.checked_sub(1).map(fake));
            let above = Pos::of(exact.key, exact.tid + 1, true);
            assert_eq!(layer.find(above, false, k), Some(fake(i)));
            assert_eq!(layer.find(above, true, k), Some(fake(i)));
        }
    }
}
