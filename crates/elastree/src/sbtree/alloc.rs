//! The block allocator: every block of one SB-tree (data block bodies and the blocks of the
//! per-thread runs) has the same size, so a freed block serves any later allocation. Freed
//! blocks go to a free list of the freeing thread's shard (one of [`STRIPES`], dealt to
//! threads in turn, so up to that many threads each have their own) and are handed out
//! again before the system allocator is asked (a thread whose list is empty takes from the
//! other lists first); a shard keeps at most [`FREE_PER_SHARD`] blocks and returns the
//! rest to the system.
//!
//! Every block the allocator holds, in use or on a free list, is counted in
//! [`BlockAlloc::bytes`].

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::ptr::NonNull;
use std::sync::Mutex;

use crate::counter::{stripe_of_this_thread, STRIPES};
use crate::mem::ByteCounter;

/// The alignment of every block: a cache line, so a block's arrays start on line boundaries
/// and SIMD loads of a bucket touch as few lines as possible.
pub const BLOCK_ALIGN: usize = 64;

/// The most free blocks one shard keeps (with 4 KiB blocks, 128 KiB per shard): enough for
/// the blocks one conversion of a segment frees and the next one allocates, few enough that
/// idle free lists hold little memory.
pub const FREE_PER_SHARD: usize = 32;

/// A block pointer on a free list.
struct Free(NonNull<u8>);

// SAFETY: a free block belongs to no one; the pointer is only handed to one caller at a time
// (under the shard's mutex).
unsafe impl Send for Free {}

/// One shard's free list, on a cache line of its own.
#[repr(align(64))]
#[derive(Default)]
struct Shard(Mutex<Vec<Free>>);

/// Fixed-size blocks with per-thread free lists. See the module docs.
pub struct BlockAlloc {
    layout: Layout,
    shards: Box<[Shard]>,
    /// Bytes of every block held: in use and on free lists.
    held: ByteCounter,
}

impl BlockAlloc {
    /// An allocator of blocks of `block_bytes` bytes (a multiple of [`BLOCK_ALIGN`]).
    pub fn new(block_bytes: usize) -> Self {
        assert!(block_bytes > 0 && block_bytes % BLOCK_ALIGN == 0);
        Self {
            layout: Layout::from_size_align(block_bytes, BLOCK_ALIGN).expect("block layout"),
            shards: (0..STRIPES).map(|_| Shard::default()).collect(),
            held: ByteCounter::new(),
        }
    }

    /// Bytes of one block.
    pub fn block_bytes(&self) -> usize {
        self.layout.size()
    }

    /// Bytes of every block held, in use or free.
    pub fn bytes(&self) -> usize {
        self.held.get()
    }

    /// Bytes of the blocks on free lists.
    pub fn free_bytes(&self) -> usize {
        self.shards.iter().map(|s| lock(s).len()).sum::<usize>() * self.layout.size()
    }

    /// A block of [`BlockAlloc::block_bytes`] bytes, aligned to [`BLOCK_ALIGN`]; its
    /// contents are unspecified (a recycled block keeps its old bytes).
    pub fn alloc(&self) -> NonNull<u8> {
        let mine = stripe_of_this_thread();
        if let Some(Free(block)) = lock(&self.shards[mine]).pop() {
            return block;
        }
        // Blocks freed on other threads (the epoch collector frees on whichever thread
        // collects): take one before asking the system, without waiting for a busy shard.
        for shard in self.shards.iter().cycle().skip(mine + 1).take(STRIPES - 1) {
            if let Ok(mut list) = shard.0.try_lock() {
                if let Some(Free(block)) = list.pop() {
                    return block;
                }
            }
        }
        // SAFETY: the layout has a non-zero size.
        let block = unsafe { alloc(self.layout) };
        let Some(block) = NonNull::new(block) else {
            handle_alloc_error(self.layout)
        };
        self.held.add(self.layout.size());
        block
    }

    /// Gives a block back.
    ///
    /// # Safety
    ///
    /// `block` came from this allocator's [`BlockAlloc::alloc`], is not freed twice, and
    /// nothing reads or writes it afterwards.
    pub unsafe fn free(&self, block: NonNull<u8>) {
        let mut list = lock(&self.shards[stripe_of_this_thread()]);
        if list.len() < FREE_PER_SHARD {
            list.push(Free(block));
            return;
        }
        drop(list);
        // SAFETY: allocated with this layout (the caller's promise), never used again.
        unsafe { dealloc(block.as_ptr(), self.layout) };
        self.held.sub(self.layout.size());
    }
}

impl Drop for BlockAlloc {
    fn drop(&mut self) {
        for shard in self.shards.iter_mut() {
            let list = shard.0.get_mut().unwrap_or_else(|e| e.into_inner());
            for Free(block) in list.drain(..) {
                // SAFETY: free blocks were allocated with this layout and belong to no one.
                unsafe { dealloc(block.as_ptr(), self.layout) };
                self.held.sub(self.layout.size());
            }
        }
    }
}

/// A shard's list, whether or not a panic poisoned its mutex (a list of free pointers has no
/// invariant a panic could break).
fn lock(shard: &Shard) -> std::sync::MutexGuard<'_, Vec<Free>> {
    shard.0.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freed_blocks_are_reused_and_counted_until_dropped() {
        let blocks = BlockAlloc::new(256);
        let a = blocks.alloc();
        assert_eq!(a.as_ptr() as usize % BLOCK_ALIGN, 0);
        assert_eq!(blocks.bytes(), 256);
        // SAFETY: a came from this allocator and is not used again.
        unsafe { blocks.free(a) };
        assert_eq!(blocks.bytes(), 256, "a free block stays held");
        let b = blocks.alloc();
        assert_eq!(a, b, "the free block is handed out again");
        let many: Vec<_> = (0..FREE_PER_SHARD + 5).map(|_| blocks.alloc()).collect();
        for block in many {
            // SAFETY: as above.
            unsafe { blocks.free(block) };
        }
        assert_eq!(
            blocks.bytes(),
            (FREE_PER_SHARD + 1) * 256,
            "the overflow went back"
        );
        // SAFETY: as above.
        unsafe { blocks.free(b) };
    }
}
