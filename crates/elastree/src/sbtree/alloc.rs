//! The block allocator: every block of one SB-tree (data block bodies and the blocks of the
//! per-thread runs) has the same size, so a freed block serves any later allocation.
//!
//! Blocks are cut from **chunks**, large allocations taken from the system a few at a time:
//! the first holds [`FIRST_CHUNK_BLOCKS`] blocks and each next one twice as many, up to
//! [`HUGE_PAGE`] bytes. A chunk of that size is aligned to it and, on Linux, advised to the
//! kernel as a candidate for a transparent huge page: one page fault maps 2 MiB instead of
//! 4 KiB, and a lookup's walk over blocks scattered through memory misses the TLB far less.
//!
//! Freed blocks go to a free list of the freeing thread's shard (one of [`STRIPES`], dealt
//! to threads in turn, so up to that many threads each have their own) and are handed out
//! again before a chunk is cut (a thread whose list is empty takes from the other lists
//! first). Chunks go back to the system when the allocator is dropped: an index that shrinks
//! keeps its blocks for the entries that come next.
//!
//! Every chunk byte is counted in [`BlockAlloc::bytes`]; [`BlockAlloc::free_bytes`] is the
//! part not in use (free lists and the uncut end of the newest chunk).

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::ptr::NonNull;
use std::sync::Mutex;

use crate::counter::{stripe_of_this_thread, STRIPES};
use crate::mem::ByteCounter;

/// The alignment of every block: a cache line, so a block's arrays start on line boundaries
/// and SIMD loads of a bucket touch as few lines as possible.
pub const BLOCK_ALIGN: usize = 64;

/// Blocks in the first chunk: small, so that a small index holds little memory.
pub const FIRST_CHUNK_BLOCKS: usize = 16;

/// The size (and alignment) of the largest chunks: an x86-64 huge page.
pub const HUGE_PAGE: usize = 2 << 20;

/// A block pointer on a free list.
struct Free(NonNull<u8>);

// SAFETY: a free block belongs to no one; the pointer is only handed to one caller at a time
// (under the shard's mutex).
unsafe impl Send for Free {}

/// One shard's free list, on a cache line of its own.
#[repr(align(64))]
#[derive(Default)]
struct Shard(Mutex<Vec<Free>>);

/// The chunks taken from the system, and the uncut end of the newest.
struct Chunks {
    /// Every chunk, to give back on drop.
    all: Vec<(NonNull<u8>, Layout)>,
    /// The next block to cut from the newest chunk.
    next: usize,
    /// The end of the newest chunk.
    end: usize,
}

// SAFETY: the chunk pointers are only dereferenced by the blocks' owners; the list itself is
// only touched under the allocator's mutex.
unsafe impl Send for Chunks {}

/// Fixed-size blocks cut from chunks, with per-thread free lists. See the module docs.
pub struct BlockAlloc {
    block_bytes: usize,
    shards: Box<[Shard]>,
    chunks: Mutex<Chunks>,
    /// Bytes of every chunk held.
    held: ByteCounter,
}

impl BlockAlloc {
    /// An allocator of blocks of `block_bytes` bytes (a multiple of [`BLOCK_ALIGN`]).
    pub fn new(block_bytes: usize) -> Self {
        assert!(block_bytes > 0 && block_bytes % BLOCK_ALIGN == 0);
        Self {
            block_bytes,
            shards: (0..STRIPES).map(|_| Shard::default()).collect(),
            chunks: Mutex::new(Chunks {
                all: Vec::new(),
                next: 0,
                end: 0,
            }),
            held: ByteCounter::new(),
        }
    }

    /// Bytes of one block.
    pub fn block_bytes(&self) -> usize {
        self.block_bytes
    }

    /// Bytes of every chunk held (blocks in use, free, and not cut yet).
    pub fn bytes(&self) -> usize {
        self.held.get()
    }

    /// Bytes held but not in use: free blocks and the uncut end of the newest chunk.
    pub fn free_bytes(&self) -> usize {
        let listed = self.shards.iter().map(|s| lock(&s.0).len()).sum::<usize>();
        let chunks = lock(&self.chunks);
        listed * self.block_bytes + (chunks.end - chunks.next)
    }

    /// A block of [`BlockAlloc::block_bytes`] bytes, aligned to [`BLOCK_ALIGN`]; its
    /// contents are unspecified (a recycled block keeps its old bytes).
    pub fn alloc(&self) -> NonNull<u8> {
        let mine = stripe_of_this_thread();
        if let Some(Free(block)) = lock(&self.shards[mine].0).pop() {
            return block;
        }
        // Blocks freed on other threads (the epoch collector frees on whichever thread
        // collects): take one before cutting, without waiting for a busy shard.
        for shard in self.shards.iter().cycle().skip(mine + 1).take(STRIPES - 1) {
            if let Ok(mut list) = shard.0.try_lock() {
                if let Some(Free(block)) = list.pop() {
                    return block;
                }
            }
        }
        self.cut()
    }

    /// Cuts a block from the newest chunk, taking a new chunk when it is used up.
    fn cut(&self) -> NonNull<u8> {
        let mut chunks = lock(&self.chunks);
        if chunks.next == chunks.end {
            let blocks = FIRST_CHUNK_BLOCKS << chunks.all.len().min(24);
            let bytes = (blocks * self.block_bytes).min(HUGE_PAGE.max(self.block_bytes));
            let align = if bytes == HUGE_PAGE {
                HUGE_PAGE
            } else {
                BLOCK_ALIGN
            };
            let layout = Layout::from_size_align(bytes, align).expect("chunk layout");
            // SAFETY: the layout has a non-zero size.
            let chunk = unsafe { alloc(layout) };
            let Some(chunk) = NonNull::new(chunk) else {
                handle_alloc_error(layout)
            };
            if bytes == HUGE_PAGE {
                advise_huge_page(chunk, bytes);
            }
            self.held.add(bytes);
            chunks.all.push((chunk, layout));
            chunks.next = chunk.as_ptr() as usize;
            chunks.end = chunks.next + bytes - bytes % self.block_bytes;
        }
        let block = chunks.next;
        chunks.next += self.block_bytes;
        NonNull::new(block as *mut u8).expect("a chunk address")
    }

    /// Gives a block back.
    ///
    /// # Safety
    ///
    /// `block` came from this allocator's [`BlockAlloc::alloc`], is not freed twice, and
    /// nothing reads or writes it afterwards.
    pub unsafe fn free(&self, block: NonNull<u8>) {
        lock(&self.shards[stripe_of_this_thread()].0).push(Free(block));
    }
}

/// Asks the kernel to back the 2 MiB-aligned `chunk` with a huge page (a hint: without
/// transparent huge pages, or if the kernel declines, it keeps small pages).
#[cfg(target_os = "linux")]
fn advise_huge_page(chunk: NonNull<u8>, bytes: usize) {
    // SAFETY: the range is one allocation of ours; the advice changes no contents.
    unsafe { libc::madvise(chunk.as_ptr().cast(), bytes, libc::MADV_HUGEPAGE) };
}

#[cfg(not(target_os = "linux"))]
fn advise_huge_page(_chunk: NonNull<u8>, _bytes: usize) {}

impl Drop for BlockAlloc {
    fn drop(&mut self) {
        let chunks = self.chunks.get_mut().unwrap_or_else(|e| e.into_inner());
        for (chunk, layout) in chunks.all.drain(..) {
            // SAFETY: allocated with this layout; the allocator's blocks are no longer used
            // (it is dropped with the tree, after every block's owner).
            unsafe { dealloc(chunk.as_ptr(), layout) };
            self.held.sub(layout.size());
        }
    }
}

/// A mutex's contents, whether or not a panic poisoned it (free pointers and a bump cursor
/// have no invariant a panic could break).
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_cut_from_growing_chunks_reused_and_counted_until_dropped() {
        let blocks = BlockAlloc::new(256);
        let a = blocks.alloc();
        assert_eq!(a.as_ptr() as usize % BLOCK_ALIGN, 0);
        assert_eq!(blocks.bytes(), FIRST_CHUNK_BLOCKS * 256, "one chunk");
        assert_eq!(blocks.free_bytes(), (FIRST_CHUNK_BLOCKS - 1) * 256);
        // SAFETY: a came from this allocator and is not used again.
        unsafe { blocks.free(a) };
        assert_eq!(blocks.free_bytes(), FIRST_CHUNK_BLOCKS * 256);
        let b = blocks.alloc();
        assert_eq!(a, b, "the free block is handed out again");
        let many: Vec<_> = (0..2 * FIRST_CHUNK_BLOCKS)
            .map(|_| blocks.alloc())
            .collect();
        assert_eq!(
            blocks.bytes(),
            3 * FIRST_CHUNK_BLOCKS * 256,
            "a second chunk twice the first"
        );
        let mut distinct: Vec<usize> = many.iter().map(|p| p.as_ptr() as usize).collect();
        distinct.push(b.as_ptr() as usize);
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(
            distinct.len(),
            2 * FIRST_CHUNK_BLOCKS + 1,
            "no block handed out twice"
        );
        for block in many {
            // SAFETY: as above.
            unsafe { blocks.free(block) };
        }
        // SAFETY: as above.
        unsafe { blocks.free(b) };
        assert_eq!(blocks.free_bytes(), blocks.bytes(), "everything is free");
    }

    #[test]
    fn chunks_stop_growing_at_a_huge_page_aligned_to_it() {
        let blocks = BlockAlloc::new(64 << 10);
        let mut held = Vec::new();
        while blocks.bytes() < 3 * HUGE_PAGE {
            held.push(blocks.alloc());
        }
        let last = *held.last().expect("a block");
        assert_eq!(
            last.as_ptr() as usize % HUGE_PAGE,
            0,
            "a huge-page chunk starts on a huge page"
        );
        for block in held {
            // SAFETY: from this allocator, not used again.
            unsafe { blocks.free(block) };
        }
    }
}
