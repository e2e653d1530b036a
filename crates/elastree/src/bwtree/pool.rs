//! Freed delta blocks kept for the tree's next deltas instead of going back to the system
//! allocator. A write allocates a delta and each consolidation frees a chain's worth, all of a
//! few sizes (48 bytes and the key's); with glibc a malloc of one cost about 150 instructions
//! (the 4 KiB page allocations between them empty its fast bins), a pop from here about 20
//! (`examples/bw_ops.rs` under callgrind).
//!
//! Blocks are kept in size classes (multiples of 8 bytes up to [`LARGEST`]), on lists linked
//! through each block's first word, in the freeing thread's shard (one of [`STRIPES`], as the
//! SB-tree's block free lists: `crate::counter::stripe_of_this_thread`); a thread takes from
//! its own shard only, and gives a chain's worth of blocks under one lock of its shard
//! ([`DeltaPool::giver`]). A shard keeps at most [`MIN_KEEP`] bytes or a [`SHARE`]th of the
//! tree's page and delta bytes, whichever is more, so the epoch's bursts of frees (up to 8
//! bags of 64 chains at a time) are mostly kept while the pool stays a small part of the tree.
//! Every kept byte is counted ([`DeltaPool::bytes`], reported with the tree's memory), and
//! the blocks go back to the allocator when the pool is dropped (with the tree's byte
//! counters, after the last deferred free). Under `loom` nothing is kept.

use std::ptr::NonNull;
use std::sync::Mutex;

use crate::counter::{stripe_of_this_thread, STRIPES};

/// The largest block kept, in bytes (a delta with a key of up to 96 bytes, 88 with a stored
/// tid, and a full directory of the deltas below it).
const LARGEST: usize = 200;
/// Size classes: `8 * (c + 1)` bytes for class `c`.
const CLASSES: usize = LARGEST / 8;
/// Bytes a shard may keep however small the tree.
const MIN_KEEP: usize = 4096;
/// A shard keeps at most this fraction (its inverse) of the tree's bytes. The pool is memory
/// the tree holds: with a 64th, 10M random updates over 1M keys on 2 threads
/// (`examples/bw_garbage.rs`) left 0.42-0.47 MB in the pool (1.9% of the tree) and the tree
/// at 1.088-1.100x a fresh one's bytes; with a 128th, 1.083-1.085x. A burst of frees (about
/// 0.2 MB) outgrows a 128th of a tree of 1M keys, whose loads then cost 1.4% more
/// instructions (3,247 -> 3,292 an insert, `examples/bw_ops.rs` under callgrind); larger
/// trees keep every burst either way.
const SHARE: usize = 128;
/// Gives between two computations of a shard's limit: the tree's bytes are a sum over the
/// stripes of its byte counters, which other threads keep changing (each read of theirs a
/// cache miss), and the limit is a soft bound that the tree's size moves slowly.
const RECOUNT: usize = 64;

/// One shard's lists: a head per size class (null: empty) and the bytes on them all, with
/// the most bytes the shard keeps, computed from the tree's bytes every [`RECOUNT`] gives.
struct Lists {
    heads: [*mut u8; CLASSES],
    bytes: usize,
    limit: usize,
    /// Gives left before `limit` is computed again.
    stale: usize,
}

// SAFETY: the blocks on the lists belong to no one but the pool; they are only touched under
// the shard's mutex (or by the pool's drop).
unsafe impl Send for Lists {}

/// One shard, on a cache line of its own.
#[repr(align(64))]
struct Shard(Mutex<Lists>);

/// A tree's kept delta blocks (see the module docs).
pub(super) struct DeltaPool {
    shards: Box<[Shard]>,
}

impl std::fmt::Debug for DeltaPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeltaPool")
            .field("bytes", &self.bytes())
            .finish()
    }
}

impl Default for DeltaPool {
    fn default() -> Self {
        Self {
            shards: (0..STRIPES)
                .map(|_| {
                    Shard(Mutex::new(Lists {
                        heads: [std::ptr::null_mut(); CLASSES],
                        bytes: 0,
                        limit: MIN_KEEP,
                        stale: 0,
                    }))
                })
                .collect(),
        }
    }
}

/// The size class of a block of `size` bytes (a multiple of 8), if kept.
#[inline]
fn class(size: usize) -> Option<usize> {
    debug_assert!(size.is_multiple_of(8) && size > 0);
    (size <= LARGEST).then(|| size / 8 - 1)
}

impl DeltaPool {
    /// Bytes of the shards themselves (their heads and counts, not the blocks kept).
    pub fn shard_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.shards)
    }

    /// Bytes of the blocks kept (a sum over the shards, each read under its lock).
    pub fn bytes(&self) -> usize {
        self.shards.iter().map(|s| lock(&s.0).bytes).sum()
    }

    /// A kept block of `size` bytes (a multiple of 8; alignment 8), if this thread's shard
    /// has one. Its contents are unspecified.
    #[inline]
    pub fn take(&self, size: usize) -> Option<NonNull<u8>> {
        if cfg!(feature = "loom") {
            return None;
        }
        let c = class(size)?;
        let mut lists = lock(&self.shards[stripe_of_this_thread()].0);
        let block = NonNull::new(lists.heads[c])?;
        // SAFETY: a block on a list holds the next block's address in its first word
        // (written by `Giver::give`; blocks are 8-aligned and at least 8 bytes).
        lists.heads[c] = unsafe { (block.as_ptr() as *mut *mut u8).read() };
        lists.bytes -= size;
        Some(block)
    }

    /// This thread's shard, locked for a run of gives: the deltas of a chain freed together
    /// take its lock once.
    #[inline]
    pub fn giver(&self) -> Giver<'_> {
        Giver(lock(&self.shards[stripe_of_this_thread()].0))
    }
}

/// One shard of a [`DeltaPool`], locked (see [`DeltaPool::giver`]).
pub(super) struct Giver<'p>(std::sync::MutexGuard<'p, Lists>);

impl Giver<'_> {
    /// Keeps `block` for a later [`DeltaPool::take`], unless the shard holds its share
    /// already (more than [`MIN_KEEP`] bytes and a [`SHARE`]th of the tree's bytes,
    /// `tree()`, as last computed: see [`RECOUNT`]): then `false`, and the caller frees it.
    ///
    /// # Safety
    ///
    /// `block` has `size` bytes (a multiple of 8) and alignment 8, came from the global
    /// allocator with that layout (or from [`DeltaPool::take`]), and no thread reaches it any
    /// more.
    #[inline]
    pub unsafe fn give(
        &mut self,
        block: NonNull<u8>,
        size: usize,
        tree: impl FnOnce() -> usize,
    ) -> bool {
        if cfg!(feature = "loom") {
            return false;
        }
        let Some(c) = class(size) else {
            return false;
        };
        let lists = &mut *self.0;
        if lists.stale == 0 {
            lists.limit = MIN_KEEP.max(tree() / SHARE);
            lists.stale = RECOUNT;
        }
        lists.stale -= 1;
        if lists.bytes + size > lists.limit {
            return false;
        }
        // SAFETY: the caller's contract: the block is the pool's alone, 8-aligned and at
        // least 8 bytes, so its first word can hold the list's link.
        unsafe { (block.as_ptr() as *mut *mut u8).write(lists.heads[c]) };
        lists.heads[c] = block.as_ptr();
        lists.bytes += size;
        true
    }
}

impl Drop for DeltaPool {
    fn drop(&mut self) {
        for shard in self.shards.iter_mut() {
            let lists = shard.0.get_mut().unwrap_or_else(|e| e.into_inner());
            for (c, head) in lists.heads.iter_mut().enumerate() {
                let layout =
                    std::alloc::Layout::from_size_align(8 * (c + 1), 8).expect("delta layout");
                let mut block = std::mem::replace(head, std::ptr::null_mut());
                while !block.is_null() {
                    // SAFETY: every block on the list was allocated with this class's size
                    // and alignment 8, belongs to the pool alone, and holds the next block's
                    // address in its first word (written by `Giver::give`).
                    unsafe {
                        let next = (block as *mut *mut u8).read();
                        std::alloc::dealloc(block, layout);
                        block = next;
                    }
                }
            }
        }
    }
}

/// Locks a shard, through a poisoned lock too (no code panics while holding one).
#[inline]
fn lock(mutex: &Mutex<Lists>) -> std::sync::MutexGuard<'_, Lists> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}
