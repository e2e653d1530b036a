//! Maintenance: what a dedicated thread does in the background (the paper's asynchronous
//! search-layer updates), and what [`crate::Index::quiesce`] runs on the caller's thread.
//!
//! * **The search layer.** Blocks appended at the end of the chain (conversions) are
//!   indexed by walking the chain from the last indexed block, pushing each new block's low
//!   fence. Blocks that splits linked into the middle of the chain cannot be pushed (the
//!   layer is packed): once they add up to a sixteenth of the indexed blocks, the layer is
//!   rebuilt from the chain, bottom up, and swapped in.
//! * **Conversions.** Sealers queue their sealed segments ([`SbTree::seal`]); the thread
//!   converts them into data blocks in sealing order, a pass after each (inserts convert
//!   too while more than two wait, and run the pass if no one else is).
//! * **Segments.** A converted segment is freed once every thread that had a run in it has
//!   let go of it.
//!
//! Whoever holds [`SbTree::maintenance`] is the search layer's only writer.

use std::sync::atomic::Ordering;

use crossbeam_epoch::{self as epoch, Guard};

use super::block::Block;
use super::body::Locator;
use super::data::SendPtr;
use super::key::SbKey;
use super::search::SearchLayer;
use super::tree::{SbTree, SegmentPtr};

/// Unindexed blocks that make a rebuild due. Splits happen where delayed entries arrive, in
/// the newest blocks, and every entry arriving there crosses the unindexed blocks left of it:
/// a rebuild (which copies the layer up to the leftmost split and walks the chain from
/// there) is cheap next to that.
const MIN_UNINDEXED: usize = 8;

/// Pin-flush rounds of [`SbTree::collect_garbage`]: enough for the epoch to pass the two
/// steps a deferred free waits for, and one more.
const COLLECT_ROUNDS: usize = 3;

/// The smallest search layer built.
const MIN_CAPACITY: usize = 64;

/// The search layer writer's state.
pub struct Maintenance<K: SbKey> {
    /// The last block the search layer indexes, in chain order.
    cursor: *mut Block<K>,
    /// Rebuilds of the search layer so far.
    pub rebuilds: usize,
}

// SAFETY: the cursor is a block of the tree, used only under the maintenance mutex.
unsafe impl<K: SbKey> Send for Maintenance<K> {}

impl<K: SbKey> Maintenance<K> {
    /// The state of a tree whose search layer indexes just `head`.
    pub fn new(head: *mut Block<K>) -> Self {
        Self {
            cursor: head,
            rebuilds: 0,
        }
    }
}

impl<K: SbKey> SbTree<K> {
    /// Whether enough blocks were linked into the middle of the chain to rebuild the search
    /// layer.
    pub fn rebuild_due(&self, _guard: &Guard) -> bool {
        self.data.unindexed.load(Ordering::Relaxed) >= MIN_UNINDEXED
    }

    /// One maintenance pass (the caller holds [`SbTree::maintenance`]).
    pub fn maintain(&self, state: &mut Maintenance<K>) {
        let guard = &epoch::pin();
        self.free_released_segments(guard);
        if self.rebuild_due(guard) {
            self.rebuild(state, guard);
            return;
        }
        let layer = self.data.search_layer_for_writer();
        // SAFETY: the cursor is a block of the chain (blocks are never unlinked yet... see
        // `rebuild`), kept allocated while the tree is.
        let mut block = unsafe { &*state.cursor };
        loop {
            let next = block.next();
            if next.is_null() {
                return;
            }
            // SAFETY: a linked block; the guard keeps it allocated.
            let next_ref = unsafe { &*next };
            if !layer.push(
                next_ref.low(),
                next,
                next_ref.body_ptr(),
                locator(next_ref, guard),
            ) {
                self.rebuild(state, guard);
                return;
            }
            state.cursor = next;
            block = next_ref;
        }
    }

    /// Rebuilds the search layer, with room to grow: the old layer's entries below the
    /// lowest block split since the last rebuild are copied, the rest comes from the chain.
    fn rebuild(&self, state: &mut Maintenance<K>, guard: &Guard) {
        let pending = self.data.unindexed.load(Ordering::Relaxed);
        let split_low = super::lock(&self.data.split_low).take();
        let old = self.data.search_layer_for_writer();
        let old_entries = old.len();
        // Entries of blocks left of every split are unchanged (a split links new blocks to the
        // right of the block it splits, whose low fence stays).
        let keep = match split_low {
            Some(low) => old.count_below(low).max(1),
            None => old_entries,
        };
        let mut block = old.block_at(keep - 1);
        let mut fresh = Vec::new();
        loop {
            // SAFETY: a linked block; the guard keeps it allocated.
            let next = unsafe { &*block }.next();
            if next.is_null() {
                break;
            }
            // SAFETY: as above.
            let next_ref = unsafe { &*next };
            fresh.push((
                next_ref.low(),
                next,
                next_ref.body_ptr(),
                locator(next_ref, guard),
            ));
            block = next;
        }
        let layer = SearchLayer::new(
            (2 * (keep + fresh.len())).max(MIN_CAPACITY),
            self.geo.fanout,
            self.geo.pairs,
        );
        layer.push_prefix_of(old, keep);
        for &(low, block, body, locator) in &fresh {
            layer.push(low, block, body, locator);
        }
        state.cursor = block;
        self.data.replace_search_layer(layer, guard);
        self.data.unindexed.fetch_sub(pending, Ordering::Relaxed);
        state.rebuilds += 1;
    }

    /// Drives the epoch collector after a pass: pins, hands this thread's deferred frees to
    /// the collector and collects, a few times over (each time may advance the epoch by one;
    /// a free deferred in an epoch runs two epochs later).
    ///
    /// The collector otherwise runs every 128 pins of a thread, and the SB-tree pins rarely
    /// (the shortcut never does): freed segments, whose run blocks are most of the memory a
    /// load recycles, would wait long enough for a load to cut a third more blocks than it
    /// keeps.
    pub fn collect_garbage(&self) {
        for _ in 0..COLLECT_ROUNDS {
            epoch::pin().flush();
        }
    }

    /// Frees the converted segments no thread holds a run of any more.
    fn free_released_segments(&self, guard: &Guard) {
        let mut lingering = super::lock(&self.lingering);
        lingering.retain(|&SegmentPtr(segment)| {
            // SAFETY: segments on the list are alive until taken off it here.
            if !unsafe { &*segment }.unreferenced() {
                return true;
            }
            let owned = SendPtr(segment);
            // SAFETY: converted (unlinked from the chain) and unreferenced: no new reader
            // reaches it; the collector frees it once the current ones unpin.
            unsafe { guard.defer_unchecked(move || drop(Box::from_raw(owned.into_inner()))) };
            false
        });
    }
}

/// The locator of `block`'s body, for the search layer's hint.
fn locator<K: SbKey>(block: &Block<K>, guard: &Guard) -> Locator {
    block
        .body(guard)
        .map_or(Locator::default(), |b| b.locator())
}
