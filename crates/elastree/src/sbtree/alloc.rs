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
//! A new page costs its first writer a page fault and the kernel's zeroing of the page (for a
//! huge page, 2 MiB of it): a third of an in-order load's time when the inserting thread
//! takes it. So once chunks have reached [`HUGE_PAGE`], a background thread keeps one chunk
//! in **reserve**, already faulted in ([`BlockAlloc::prepare`]), and the next chunk taken is
//! that one.
//!
//! Every chunk byte is counted in [`BlockAlloc::bytes`]; [`BlockAlloc::free_bytes`] is the
//! part not in use (free lists, the uncut end of the newest chunk and the reserve).

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
    /// Every chunk, to give back on drop (the reserve included).
    all: Vec<(NonNull<u8>, Layout)>,
    /// A huge-page chunk already faulted in, not cut yet: the next chunk to take.
    reserve: Option<NonNull<u8>>,
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
    /// Held while a thread fills the reserve ([`BlockAlloc::prepare`]).
    preparing: Mutex<()>,
    /// Bytes of every chunk held.
    held: ByteCounter,
}

impl BlockAlloc {
    /// An allocator of blocks of `block_bytes` bytes (a multiple of [`BLOCK_ALIGN`]).
    pub fn new(block_bytes: usize) -> Self {
        assert!(block_bytes > 0 && block_bytes.is_multiple_of(BLOCK_ALIGN));
        Self {
            block_bytes,
            shards: (0..STRIPES).map(|_| Shard::default()).collect(),
            chunks: Mutex::new(Chunks {
                all: Vec::new(),
                reserve: None,
                next: 0,
                end: 0,
            }),
            preparing: Mutex::new(()),
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
        let reserve = if chunks.reserve.is_some() {
            HUGE_PAGE
        } else {
            0
        };
        listed * self.block_bytes + (chunks.end - chunks.next) + reserve
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

    /// Cuts a block from the newest chunk, taking a new chunk when it is used up (the
    /// reserve, if there is one).
    fn cut(&self) -> NonNull<u8> {
        let mut chunks = lock(&self.chunks);
        if chunks.next == chunks.end {
            let bytes = self.next_chunk_bytes(&chunks);
            let chunk = match chunks.reserve.take() {
                Some(chunk) if bytes == HUGE_PAGE => chunk,
                reserve => {
                    chunks.reserve = reserve;
                    self.take_chunk(&mut chunks, bytes)
                }
            };
            chunks.next = chunk.as_ptr() as usize;
            chunks.end = chunks.next + bytes - bytes % self.block_bytes;
        }
        let block = chunks.next;
        chunks.next += self.block_bytes;
        NonNull::new(block as *mut u8).expect("a chunk address")
    }

    /// The size of the next chunk: [`FIRST_CHUNK_BLOCKS`] blocks, twice as many as the one
    /// before, at most [`HUGE_PAGE`] (or one block, if a block is larger).
    fn next_chunk_bytes(&self, chunks: &Chunks) -> usize {
        let blocks = FIRST_CHUNK_BLOCKS << chunks.all.len().min(24);
        (blocks * self.block_bytes).min(HUGE_PAGE.max(self.block_bytes))
    }

    /// A new chunk of `bytes` from the system, counted and listed.
    fn take_chunk(&self, chunks: &mut Chunks, bytes: usize) -> NonNull<u8> {
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
        chunk
    }

    /// Background work: once chunks are huge pages, makes sure one is in reserve, faulted in
    /// by this thread (a write to each of its 4 KiB pages), so that the thread that next runs
    /// out of blocks does not wait for the kernel to map and zero it. Whether it took one.
    pub fn prepare(&self) -> bool {
        let Ok(_preparing) = self.preparing.try_lock() else {
            return false;
        };
        let chunk = {
            let mut chunks = lock(&self.chunks);
            if chunks.reserve.is_some() || self.next_chunk_bytes(&chunks) != HUGE_PAGE {
                return false;
            }
            self.take_chunk(&mut chunks, HUGE_PAGE)
        };
        // Faulted in outside the lock: blocks are cut from the newest chunk meanwhile.
        for page in (0..HUGE_PAGE).step_by(4096) {
            // SAFETY: within the chunk, which nothing else uses until it is the reserve.
            unsafe { chunk.as_ptr().add(page).write_volatile(0) };
        }
        // Under `preparing`, no one else filled the reserve meanwhile.
        lock(&self.chunks).reserve = Some(chunk);
        true
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

    /// The reserve: none while chunks are small; once they are huge pages, one chunk that is
    /// counted as held and free, and that becomes the next chunk blocks are cut from.
    #[test]
    fn the_reserve_is_counted_and_becomes_the_next_chunk() {
        let blocks = BlockAlloc::new(4096);
        let mut held = vec![blocks.alloc()];
        assert!(!blocks.prepare(), "no reserve while chunks are small");
        while blocks.next_chunk_bytes(&lock(&blocks.chunks)) != HUGE_PAGE {
            held.push(blocks.alloc());
        }
        // Use up the current chunk, so the next block needs a new one.
        while blocks.free_bytes() > 0 {
            held.push(blocks.alloc());
        }
        let before = blocks.bytes();
        assert!(blocks.prepare(), "a reserve once chunks are huge pages");
        assert!(!blocks.prepare(), "one reserve at a time");
        assert_eq!(blocks.bytes(), before + HUGE_PAGE, "the reserve is held");
        assert_eq!(blocks.free_bytes(), HUGE_PAGE, "and free");
        let reserve = lock(&blocks.chunks).reserve.expect("a reserve");
        let next = blocks.alloc();
        assert_eq!(next, reserve, "the next chunk is the reserve");
        assert_eq!(blocks.bytes(), before + HUGE_PAGE, "no other chunk taken");
        assert_eq!(blocks.free_bytes(), HUGE_PAGE - 4096);
        held.push(next);
        for block in held {
            // SAFETY: from this allocator, not used again.
            unsafe { blocks.free(block) };
        }
        assert_eq!(blocks.free_bytes(), blocks.bytes(), "everything is free");
    }
}
